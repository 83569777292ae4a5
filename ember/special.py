"""``ember.special``: as ``torch.special``, composed of ember ops (so every function runs on the
device and autodiff differentiates it).

Series and asymptotic expansions, chosen per element with ``where``:

* lgamma, digamma: shifted up by 6 (the recurrence) into Stirling's series, reflected below 1/2;
* zeta (Hurwitz), polygamma: Euler-Maclaurin summation after shifting q above 9 (the first
  terms summed directly, so negative non-integer q work for integer s as in torch);
* i0, i1 (and the scaled i0e, i1e): the power series for |x| <= 15, Hankel's asymptotic
  expansion above (both accurate to float32 rounding and better);
* erfinv: Winitzki's closed-form start and Newton steps on erf, evaluated in float64 where the
  device has it; the last step keeps the graph, so the gradient is sqrt(pi)/2 exp(erfinv(x)^2).
"""

from __future__ import annotations

import math
from typing import Any

from . import dtype as dt
from .errors import DTypeError
from .tensor import Tensor

__all__ = [
    "erf", "erfc", "erfinv", "expit", "logit", "xlogy", "xlog1py", "entr", "ndtr", "log_ndtr", "lgamma", "gammaln",
    "digamma", "psi", "polygamma", "multigammaln", "zeta", "i0", "i0e", "i1", "i1e", "spherical_bessel_j0",
    "sinc", "round", "exp2", "expm1", "log1p", "softmax", "log_softmax", "logsumexp",
]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _w(c: Tensor, a: Any, b: Any) -> Tensor:
    from .tensor import where

    return where(c, a, b)


def _float(x: Tensor) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"expected a Tensor, got {type(x).__name__}")
    return x if x.dtype.is_floating_point else x.to(dt.get_default_dtype())


def erf(input: Tensor) -> Tensor:
    """As ``torch.special.erf``."""
    return input.erf()


def erfc(input: Tensor) -> Tensor:
    """As ``torch.special.erfc``."""
    from .composite import erfc as _erfc

    return _erfc(input)


def expit(input: Tensor) -> Tensor:
    """As ``torch.special.expit`` (the logistic sigmoid)."""
    return _float(input).sigmoid()


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """As ``torch.special.logit``."""
    from .composite import logit as _logit

    return _logit(input, eps)


def xlogy(input: Any, other: Any) -> Tensor:
    """As ``torch.special.xlogy``."""
    from .composite import xlogy as _xlogy

    return _xlogy(input, other)


def xlog1py(input: Any, other: Any) -> Tensor:
    """As ``torch.special.xlog1py``: x log1p(y), 0 where x == 0 (unless y is nan)."""
    from .composite import xlogy as _xlogy

    if isinstance(other, Tensor):
        return _xlogy(input, other + 1) if not isinstance(input, Tensor) else _xlog1py_t(input, other)
    return _xlog1py_t(input, input * 0 + other) if isinstance(input, Tensor) else _xlogy(input, other + 1)


def _xlog1py_t(x: Tensor, y: Tensor) -> Tensor:
    x = _float(x) if not y.dtype.is_floating_point else x
    v = x * _float(y).log1p()
    return _w(x.eq(0) & y.isnan().logical_not(), 0.0, v)


def entr(input: Tensor) -> Tensor:
    """As ``torch.special.entr``: -x log x, 0 at 0, -inf below 0."""
    x = _float(input)
    pos = x.gt(0)
    v = -x * _w(pos, x, 1.0).log()
    return _w(x.lt(0), -math.inf, _w(x.eq(0), 0.0, v))


def ndtr(input: Tensor) -> Tensor:
    """As ``torch.special.ndtr``: the standard normal CDF, (1 + erf(x / sqrt 2)) / 2."""
    x = _float(input)
    return (x * (1 / math.sqrt(2))).erf() * 0.5 + 0.5


def log_ndtr(input: Tensor) -> Tensor:
    """As ``torch.special.log_ndtr``: log(ndtr(x)); below -3 through the continued fraction of
    the Mills ratio R(t) = 1/(t + 1/(t + 2/(t + ...))), t = -x, log ndtr(x) = -t^2/2 -
    log sqrt(2 pi) + log R(t) (erf's absolute accuracy is not enough there)."""
    x = _float(input)
    low = x.lt(-3)
    t = -_w(low, x, -3.0)
    r = t
    for k in range(60, 0, -1):  # evaluated from the tail: converges to float64 rounding for t >= 3
        r = t + k / r
    asym = -0.5 * t * t - _LOG_SQRT_2PI - r.log()
    return _w(low, asym, ndtr(_w(low, 0.0, x)).log())


def _lgamma_pos(x: Tensor) -> Tensor:
    """lgamma for x >= 1/2: the recurrence up to x + 6, then Stirling's series."""
    z = x + 6
    shift = x.log() + (x + 1).log() + (x + 2).log() + (x + 3).log() + (x + 4).log() + (x + 5).log()
    r = 1 / z
    r2 = r * r
    tail = r * (1 / 12 + r2 * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 * (1 / 1188)))))
    return (z - 0.5) * z.log() - z + _LOG_SQRT_2PI + tail - shift


def lgamma(input: Tensor) -> Tensor:
    """As ``torch.lgamma``: log|Gamma(x)| (reflection log(pi / |sin(pi x)|) - lgamma(1 - x) below 1/2)."""
    x = _float(input)
    small = x.lt(0.5)
    pos = _lgamma_pos(_w(small, 1 - x, x))
    frac = x - x.floor()  # sin(pi x) through the fractional part keeps it exact at integers
    s = (frac * math.pi).sin().abs()
    refl = math.log(math.pi) - s.log() - pos
    return _w(x.isinf(), math.inf, _w(small, refl, pos))


gammaln = lgamma


def _digamma_pos(x: Tensor) -> Tensor:
    z = x + 6
    shift = 1 / x + 1 / (x + 1) + 1 / (x + 2) + 1 / (x + 3) + 1 / (x + 4) + 1 / (x + 5)
    r2 = 1 / (z * z)
    tail = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return z.log() - 0.5 / z - tail - shift


def digamma(input: Tensor) -> Tensor:
    """As ``torch.digamma``: psi(1 - x) - pi / tan(pi x) below 1/2; nan at the poles x = 0, -1,
    ... except -inf at 0 (torch's convention)."""
    x = _float(input)
    small = x.lt(0.5)
    pos = _digamma_pos(_w(small, 1 - x, x))
    frac = x - x.floor()
    refl = pos - math.pi / (frac * math.pi).tan()
    out = _w(small, refl, pos)
    pole = x.le(0) & x.eq(x.floor())
    return _w(x.eq(0), -math.inf, _w(pole, math.nan, out))


psi = digamma

#: B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta function
_EM = (1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160, -691 / 1307674368000)


def _hurwitz(s: Any, q: Tensor) -> Tensor:
    """sum_k (q + k)^-s for s > 1 (a tensor or a Python int), by Euler-Maclaurin after N terms."""
    qmin = float(q.detach().amin().item()) if q.numel() else 0.0
    n = 9 + (max(0, math.ceil(-qmin)) if math.isfinite(qmin) else 0)
    total = None
    for k in range(n):
        term = (q + k) ** (-s) if isinstance(s, Tensor) else (q + k) ** (-float(s))
        total = term if total is None else total + term
    a = q + n
    tail = a ** (1 - s) / (s - 1) + 0.5 * a ** (-s)
    fac = s  # s (s + 1) ... (s + 2j - 2): the rising factorial of the j-th term
    power = a ** (-s - 1)
    for j, c in enumerate(_EM):
        tail = tail + c * fac * power
        fac = fac * (s + 2 * j + 1) * (s + 2 * j + 2)
        power = power / (a * a)
    assert total is not None
    return total + tail


def zeta(input: Any, other: Any) -> Tensor:
    """As ``torch.special.zeta``: the Hurwitz zeta function sum_k (q + k)^-x; nan for x < 1, inf
    at x = 1 and at q a non-positive integer."""
    from .tensor import broadcast_tensors

    like = input if isinstance(input, Tensor) else other
    x = input if isinstance(input, Tensor) else like * 0 + input
    q = other if isinstance(other, Tensor) else like * 0 + other
    x, q = broadcast_tensors(_float(x), _float(q))
    ok = x.gt(1)
    xs = _w(ok, x, 2.0)
    v = _hurwitz(xs, q)
    qpole = q.le(0) & q.eq(q.floor())
    return _w(x.eq(1) | qpole, math.inf, _w(ok, v, math.nan))


def polygamma(n: int, input: Tensor) -> Tensor:
    """As ``torch.polygamma``: (-1)^(n+1) n! zeta(n + 1, x), digamma for n = 0."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma(n, x) does not support negative n, got {n}")
    if n == 0:
        return digamma(input)
    x = _float(input)
    v = _hurwitz(n + 1, x) * ((-1) ** (n + 1) * math.factorial(n))
    pole = x.le(0) & x.eq(x.floor())
    return _w(pole, math.inf, v)


def multigammaln(input: Tensor, p: int) -> Tensor:
    """As ``torch.special.multigammaln`` (``torch.mvlgamma``): sum_i lgamma(x - i/2) + p(p-1)/4 log pi;
    every element must exceed (p - 1) / 2, as torch checks."""
    if p < 1:
        raise ValueError("p has to be greater than or equal to 1")
    x = _float(input)
    if x.numel() and not bool(x.detach().gt((p - 1) / 2).all().item()):
        raise ValueError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = lgamma(x)
    for i in range(1, p):
        out = out + lgamma(x - i / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


#: the power series of I0 and I1 is used up to this |x|, Hankel's expansion above it
_BESSEL_SPLIT = 15.0


def _bessel_series(x: Tensor, nu: int) -> Tensor:
    """sum_k (x^2/4)^k / (k! (k + nu)!) for |x| <= 15 (the terms fall below 2^-60 by k = 60)."""
    y = x * x * 0.25
    term = x * 0 + 1.0 / math.factorial(nu)
    total = term
    for k in range(1, 60):
        term = term * y * (1.0 / (k * (k + nu)))
        total = total + term
    return total


def _bessel_asym(ax: Tensor, nu: int) -> Tensor:
    """I_nu(x) e^-x sqrt(2 pi x) for x >= 15: sum_k (-1)^k a_k(nu) / x^k, Hankel's coefficients."""
    mu = 4 * nu * nu
    total = ax * 0 + 1.0
    coef = 1.0
    for k in range(1, 12):
        coef = coef * -(mu - (2 * k - 1) ** 2) / (k * 8)
        total = total + coef / ax ** k
    return total


def _scaled(input: Tensor, nu: int) -> Tensor:
    """I_nu(x) e^-|x|: the series in x itself (odd for nu = 1, so the gradient at 0 is right),
    Hankel's expansion in |x| with the function's parity above 15."""
    x = _float(input)
    ax = x.abs()
    big = ax.gt(_BESSEL_SPLIT)
    small = _w(big, 0.0, x)
    series = _bessel_series(small, nu) * (small * 0.5) ** nu * (-small.abs()).exp()
    large = _w(big, ax, _BESSEL_SPLIT + 1)
    asym = _bessel_asym(large, nu) / (2 * math.pi * large).sqrt()
    if nu % 2:
        asym = asym * x.sign()
    return _w(big, asym, series)


def i0e(input: Tensor) -> Tensor:
    """As ``torch.special.i0e``: I0(x) e^-|x|."""
    return _scaled(input, 0)


def i0(input: Tensor) -> Tensor:
    """As ``torch.i0``: the modified Bessel function of the first kind, order 0."""
    x = _float(input)
    return _scaled(x, 0) * x.abs().exp()


def i1e(input: Tensor) -> Tensor:
    """As ``torch.special.i1e``: I1(x) e^-|x| (odd in x)."""
    return _scaled(input, 1)


def i1(input: Tensor) -> Tensor:
    """As ``torch.special.i1``."""
    x = _float(input)
    return _scaled(x, 1) * x.abs().exp()


def spherical_bessel_j0(input: Tensor) -> Tensor:
    """As ``torch.special.spherical_bessel_j0``: sin(x) / x, 1 - x^2/6 + x^4/120 near 0."""
    x = _float(input)
    near = x.abs().lt(1e-3)
    xs = _w(near, 1.0, x)
    x2 = x * x
    return _w(near, 1 - x2 / 6 + x2 * x2 / 120, xs.sin() / xs)


_FLOAT64: dict[str, bool] = {}


def _has_float64(x: Tensor) -> bool:
    """Whether ``x``'s device computes in float64 (probed once per device: a lazy device refuses
    the dtype only when its kernel compiles, so the probe reads a value back)."""
    key = repr(x.device)
    if key not in _FLOAT64:
        from .creation import zeros

        try:
            zeros(1, dtype=dt.float64, device=x.device).numpy()
            _FLOAT64[key] = True
        except DTypeError:
            _FLOAT64[key] = False
    return _FLOAT64[key]


def _erfinv_start(x: Tensor) -> Tensor:
    a = 0.147  # Winitzki's approximation, relative error below 2e-3
    ln = (1 - x * x).log()
    t = 2 / (math.pi * a) + ln * 0.5
    return x.sign() * ((t * t - ln / a).sqrt() - t).sqrt()


def erfinv(input: Tensor) -> Tensor:
    """As ``torch.erfinv``: y with erf(y) = x on [-1, 1] (+-inf at +-1, nan outside)."""
    x = _float(input)
    # float64 where the device has it: Newton on erf near |x| = 1 needs the digits
    work = x.to(dt.float64) if _has_float64(x) else x
    inside = work.abs().lt(1)
    xs = _w(inside, work, 0.0)
    y = _erfinv_start(xs.detach())
    k = 2 / math.sqrt(math.pi)
    for _ in range(3):  # quadratic convergence from 2e-3: 3 steps reach float64 rounding
        y = y - (y.erf() - xs.detach()) / (k * (-(y * y)).exp())
    y = y.detach()
    y = y - (y.erf() - xs) / (k * (-(y * y)).exp())  # the graph's step: dy/dx = 1 / erf'(y)
    out = _w(inside, y, _w(work.eq(1), math.inf, _w(work.eq(-1), -math.inf, math.nan)))
    return out.to(x.dtype)


def sinc(input: Tensor) -> Tensor:
    """As ``torch.special.sinc``."""
    from .composite import sinc as _sinc

    return _sinc(input)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001 (torch's name)
    """As ``torch.special.round``."""
    return input.round(decimals=decimals) if decimals else input.round()


def exp2(input: Tensor) -> Tensor:
    """As ``torch.special.exp2``."""
    from .composite import exp2 as _exp2

    return _exp2(input)


def expm1(input: Tensor) -> Tensor:
    """As ``torch.special.expm1``."""
    return input.expm1()


def log1p(input: Tensor) -> Tensor:
    """As ``torch.special.log1p``."""
    return input.log1p()


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """As ``torch.special.softmax``."""
    return (input if dtype is None else input.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """As ``torch.special.log_softmax``."""
    return (input if dtype is None else input.to(dtype)).log_softmax(dim)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """As ``torch.special.logsumexp``."""
    return input.logsumexp(dim, keepdim)


#: the torch.* names of these functions (``torch.lgamma``, ``torch.i0``, ``torch.mvlgamma``, ...),
#: exported by ember.functional and installed as Tensor methods
TOPLEVEL = ("erfinv", "lgamma", "digamma", "polygamma", "i0", "mvlgamma")


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """As ``torch.mvlgamma``."""
    return multigammaln(input, p)


def _install() -> None:
    from .tensor import Tensor as T

    for name in TOPLEVEL:
        if name in T.__dict__:
            continue
        fn = globals()[name]
        if name == "polygamma":  # x.polygamma(n) is polygamma(n, x)
            def method(self: Tensor, n: int) -> Tensor:
                """As ``torch.Tensor.polygamma``: ``polygamma(n, self)``."""
                return polygamma(n, self)

            setattr(T, name, method)
        else:
            setattr(T, name, fn)


_install()
