"""Random sampling ops: ``bernoulli``, ``multinomial``, ``normal``, ``randperm``, ``poisson`` and the
in-place fills ``bernoulli_``, ``uniform_``, ``normal_``, ``exponential_``, ``cauchy_``,
``log_normal_``, ``geometric_``, ``random_`` (torch's names, arguments and defaults).

Every value comes from ember's Philox stream (``docs/random.md``): a draw reserves its blocks
from the ``generator`` (an ``ember.random.Generator``; None is the global one) and asks the
device for ``uniform`` / ``normal`` / ``randint`` values, which are the same on every device. The
distributions are then ember ops on those draws (``u < p``, ``-log1p(-u) / lambd``, ...), so they
run on any device with nothing new per backend; the ones that only need integer or comparison
arithmetic (bernoulli, uniform_, normal_, random_) are bit-identical everywhere, the ones with a
transcendental (exponential_, cauchy_, log_normal_, geometric_) agree to the devices' ``log`` /
``tan`` / ``exp`` accuracy. ``multinomial``, ``randperm`` and ``poisson`` decide on the host in
float64 from host-generated Philox values (as ember's sorts order on the host), so their
results do not depend on the device at all.

As in torch these ops have no useful gradient: an output computed from a tensor that requires
grad also requires grad, and its gradient with respect to that tensor is zero.

Errors: where torch raises ``RuntimeError`` for a bad argument value, ember raises ``ValueError``
(``ShapeError`` for a bad number of dimensions, ``DTypeError`` for a dtype torch does not
implement), as the rest of ember does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _shape as S
from . import dtype as dt
from .backends.autodiff.mode import is_grad_enabled
from .creation import _device, _rng, _stream, full, tensor
from .errors import DTypeError, ShapeError
from .tensor import Tensor, _make, install_methods, where

__all__ = ["bernoulli", "multinomial", "normal", "randperm", "poisson"]

#: significand precision p of each floating dtype: every integer in [-2**p, 2**p] is exact
_PRECISION = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_INT_RANGE = {"bool": (0, 1), "uint8": (0, 255), "int8": (-128, 127), "int16": (-(2**15), 2**15 - 1),
              "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


# --------------------------------------------------------------------------- draws
def _draw(dist: str, shape: tuple[int, ...], d: dt.DType, bk: Any, a: float, b: float, generator: Any) -> Tensor:
    """``dist`` values of ``shape`` and ``d`` on backend ``bk`` (untracked), from ``generator``'s
    stream: the same blocks, hence the same values, on every device."""
    R = _rng()
    g = _stream(generator)
    seed, offset = g.next_offset(R.blocks_used(dist, S.numel(shape), d))
    return _make(bk.random(dist, shape, d, seed, offset, a, b), bk, d)


def _host_draw(dist: str, shape: tuple[int, ...], d: dt.DType, a: float, b: float, generator: Any) -> np.ndarray:
    """The values ``_draw`` would give, computed on the host (``ember.random.philox_values``)."""
    R = _rng()
    g = _stream(generator)
    seed, offset = g.next_offset(R.blocks_used(dist, S.numel(shape), d))
    return R.philox_values(dist, shape, d, seed, offset, a, b)


def _work(d: dt.DType) -> dt.DType:
    """The dtype a composed distribution is computed in: float64 for float64, float32 otherwise
    (half types are rounded once at the end, as torch computes them in float)."""
    return dt.float64 if d is dt.float64 else dt.float32


def _uniform01(like: Tensor, d: dt.DType, generator: Any) -> Tensor:
    return _draw("uniform", like.shape, d, like._bk, 0.0, 1.0, generator)


def _zero_grad_from(out: Tensor, *inputs: Any) -> Tensor:
    """``out`` with a zero gradient towards every input that requires grad (torch's rule for
    random ops: the output requires grad, the gradient is zeros); ``out`` itself when none does."""
    tracked = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not tracked or not is_grad_enabled():
        return out
    every = full((), True, dtype=dt.bool_, device=out.device)
    for t in tracked:
        out = where(every, out, t.to(out._dt))  # forward: out; d/dt = where(True, 0, g) = 0
    return out


def _fill(self: Tensor, values: Tensor) -> Tensor:
    """Write ``values`` into ``self`` (the in-place protocol of ``Tensor._assign``). A non-leaf
    that requires grad stays in the graph with a zero gradient, as torch's in-place fills do; a
    leaf that requires grad raises outside ``no_grad`` (``_assign``)."""
    values = values.to(self._dt)
    if self.requires_grad and not self.is_leaf and is_grad_enabled():
        values = _zero_grad_from(values, self)
    return self._assign(values)


def _float_only(self: Tensor, what: str) -> None:
    if not self._dt.is_floating_point:
        raise DTypeError(f"{what} is a continuous distribution: the tensor's dtype must be floating point, "
                         f"got {self._dt}")


def _scalar(v: Any, what: str) -> float:
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"{what} must be a number, got a tensor of shape {v.shape}")
        v = v.item()
    return float(v)


# --------------------------------------------------------------------------- bernoulli
def _check_probabilities(p: Tensor) -> None:
    # one host read, as torch's CPU kernel checks: NaN fails ``0 <= p <= 1`` too
    if p.numel() and not bool(((p >= 0) & (p <= 1)).all().item()):
        raise ValueError("bernoulli expects all elements of p to be in [0, 1]")


def _bernoulli_values(like: Tensor, p: Any, out_dtype: dt.DType, generator: Any) -> Tensor:
    """0/1 values of ``like``'s shape with probability ``p`` (a number, or a tensor broadcast to
    that shape), in ``out_dtype``: ``u < p`` for ``u`` uniform on [0, 1) (p = 0 never, p = 1
    always). ``u`` is float64 for float64 probabilities (or, with a number ``p``, a float64
    result), else float32, so probabilities resolve to 2**-53 or 2**-24."""
    if isinstance(p, Tensor):
        if not p._dt.is_floating_point:
            raise DTypeError(f"bernoulli expects floating point probabilities, got {p._dt}")
        if p._bk is not like._bk:
            p = p.to(like.device)
        _check_probabilities(p)
        p = p.detach()
        u = _uniform01(like, _work(p._dt), generator)
        return (u < p).to(out_dtype)
    pf = _scalar(p, "p")
    if not 0.0 <= pf <= 1.0:
        raise ValueError(f"bernoulli expects p to be in [0, 1], but got p={pf}")
    u = _uniform01(like, _work(out_dtype) if out_dtype.is_floating_point else dt.float32, generator)
    return (u < pf).to(out_dtype)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:
    """As ``torch.bernoulli``: 0/1 draws with probabilities ``input`` (floating point, each in
    [0, 1]), or with the one probability ``p`` when given (then ``input`` gives only the shape
    and dtype). The same values on every device for one seed."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli expects a Tensor, got {type(input).__name__}")
    if p is None:
        if not input._dt.is_floating_point:
            raise DTypeError(f"bernoulli expects floating point probabilities, got {input._dt}")
        return _zero_grad_from(_bernoulli_values(input, input, input._dt, generator), input)
    return _zero_grad_from(_bernoulli_values(input, p, input._dt, generator), input)


class RandomMethods:
    """The random Tensor methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    def bernoulli(self, p: float | None = None, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.bernoulli``: ``ember.bernoulli(self, p)``."""
        return bernoulli(self, p, generator=generator)

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.bernoulli_``: every element becomes 1 with probability ``p`` (a number,
        or a tensor that broadcasts to this tensor's shape), else 0; any dtype."""
        if isinstance(p, Tensor):
            p = p.expand(self.shape)
        return _fill(self, _bernoulli_values(self, p, self._dt, generator))

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.multinomial``: ``ember.multinomial(self, ...)``."""
        return multinomial(self, num_samples, replacement, generator=generator)

    def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator: Any = None, **kwargs: float) -> Tensor:
        """As ``torch.Tensor.uniform_``: uniform on [from, to) (``from`` may be passed by keyword as
        ``from=`` or ``from_=``; from == to fills with ``from``). Bit-identical on every device."""
        a, b = _from_to(from_, to, kwargs, "uniform_")
        _float_only(self, "uniform_")
        a, b = _scalar(a, "from"), _scalar(b, "to")
        if a > b:
            raise ValueError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
        if a == b:
            return _fill(self, full(self.shape, a, dtype=self._dt, device=self.device))
        return _fill(self, _draw("uniform", self.shape, self._dt, self._bk, a, b, generator))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.normal_``: normal with ``mean`` and ``std`` (>= 0). Identical on every device
        up to one float64 rounding boundary (``docs/random.md``, section 5)."""
        _float_only(self, "normal_")
        mean, std = _scalar(mean, "mean"), _scalar(std, "std")
        if not std >= 0.0:
            raise ValueError(f"normal expects std >= 0.0, but found std {std}")
        return _fill(self, _draw("normal", self.shape, self._dt, self._bk, mean, std, generator))

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.exponential_``: exponential with rate ``lambd`` (> 0),
        ``-log1p(-u) / lambd`` for ``u`` uniform on [0, 1)."""
        _float_only(self, "exponential_")
        lambd = _scalar(lambd, "lambd")
        if not lambd > 0.0:
            raise ValueError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        u = _uniform01(self, _work(self._dt), generator)
        return _fill(self, (-u).log1p() * (-1.0 / lambd))

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.cauchy_``: Cauchy with location ``median`` and scale ``sigma`` (> 0),
        ``median + sigma * tan(pi * (u - 1/2))``."""
        _float_only(self, "cauchy_")
        median, sigma = _scalar(median, "median"), _scalar(sigma, "sigma")
        if not sigma > 0.0:
            raise ValueError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        u = _uniform01(self, _work(self._dt), generator)
        return _fill(self, ((u - 0.5) * math.pi).tan() * sigma + median)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.log_normal_``: ``exp`` of a normal with ``mean`` and ``std`` (> 0)."""
        _float_only(self, "log_normal_")
        mean, std = _scalar(mean, "mean"), _scalar(std, "std")
        if not std > 0.0:
            raise ValueError(f"log_normal_ expects std > 0.0, but found std={std}")
        z = _draw("normal", self.shape, _work(self._dt), self._bk, mean, std, generator)
        return _fill(self, z.exp())

    def geometric_(self, p: float, *, generator: Any = None) -> Tensor:
        """As ``torch.Tensor.geometric_``: the number of Bernoulli(``p``) trials up to the first
        success (support 1, 2, ...; ``0 < p < 1``), ``ceil(log1p(-u) / log1p(-p))``, at least 1; any
        dtype (integer results are clamped to the dtype's largest value)."""
        p = _scalar(p, "p")
        if not 0.0 < p < 1.0:
            raise ValueError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        w = _work(self._dt) if self._dt.is_floating_point else dt.float32
        u = _uniform01(self, w, generator)
        k = ((-u).log1p() * (1.0 / math.log1p(-p))).ceil().clamp(min=1.0)
        if not self._dt.is_floating_point:
            k = k.clamp(max=_largest_float32_at_most(_INT_RANGE[self._dt.name][1]))  # the cast stays in range
        return _fill(self, k)

    def random_(self, *args: int | None, generator: Any = None, **kwargs: int | None) -> Tensor:
        """As ``torch.Tensor.random_``: integers uniform on [from, to). ``random_()`` covers the dtype
        ([0, 2**p] for a floating dtype with p significand bits, [0, max] for an integer one),
        ``random_(to)`` is [0, to), ``random_(from, None)`` is [from, that top]; ``from`` by keyword
        is ``from=`` or ``from_=``. Bit-identical on every device."""
        if len(args) > 2:
            raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
        if len(args) == 1 and not kwargs:
            a, b = 0, args[0]  # random_(to)
        else:
            a, b = _from_to(args[0] if args else None, args[1] if len(args) > 1 else kwargs.pop("to", None),
                            kwargs, "random_", default=(None, None))
            if a is None and b is not None:
                a = 0
        lo, hi = _random_range(self._dt, a, b)
        d = self._dt
        if d.is_floating_point:
            # integers drawn as int32 (int64 beyond its range) and converted exactly: |value| <= 2**p
            d = dt.int32 if -(2**31) <= lo and hi <= 2**31 else dt.int64
        return _fill(self, _draw("randint", self.shape, d, self._bk, lo, hi, generator))


def _largest_float32_at_most(n: int) -> float:
    """The largest float32 value <= ``n`` (float32(2**31 - 1) rounds up to 2**31, out of int32)."""
    f = np.float32(n)
    if int(f) > n:
        f = np.nextafter(f, np.float32(0))
    return float(f)


def _from_to(from_: Any, to: Any, kwargs: dict[str, Any], what: str,
             default: tuple[Any, Any] = (0.0, 1.0)) -> tuple[Any, Any]:
    """(from, to) of ``uniform_`` / ``random_``: torch's keyword ``from`` (a Python keyword, so only
    reachable through ``**kwargs``) or ``from_``."""
    for key in ("from", "from_"):
        if key in kwargs:
            from_ = kwargs.pop(key)
    if kwargs:
        raise TypeError(f"{what}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    a = default[0] if from_ is None else from_
    return a, to


def _random_range(d: dt.DType, a: Any, b: Any) -> tuple[int, int]:
    """[lo, hi) of ``random_`` on dtype ``d`` from its (from, to) arguments, checked as torch does."""
    if d.is_floating_point:
        top = 2 ** _PRECISION[d.name]
        bounds = (-top, top)
    else:
        bounds = _INT_RANGE[d.name]
    lo = 0 if a is None else int(a)
    hi = bounds[1] + 1 if b is None else int(b)
    if lo >= hi:
        raise ValueError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
    if not bounds[0] <= lo <= bounds[1]:
        raise ValueError(f"random_: from={lo} is out of bounds for {d}")
    if not bounds[0] <= hi - 1 <= bounds[1]:
        raise ValueError(f"random_: to - 1 = {hi - 1} is out of bounds for {d}")
    return lo, hi


# --------------------------------------------------------------------------- multinomial
def _host_float64(x: Tensor) -> np.ndarray:
    return np.asarray(x.detach().to(dt.float32 if x._dt is dt.bfloat16 else x._dt).numpy(), dtype=np.float64)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
    """As ``torch.multinomial``: ``num_samples`` category indices (int64) per row of the weights
    ``input`` (1-D or 2-D, floating point, non-negative, finite, a positive sum per row).

    With replacement each draw inverts the row's cumulative weights at a uniform; without, the
    indices are the first ``num_samples`` of an exponential race (``E_i / w_i`` ascending for
    ``E_i`` exponential: the law of drawing one by one in proportion to the remaining weights),
    so a row's indices are distinct, and zero-weight categories come last (in random order) when
    fewer than ``num_samples`` weights are positive, as torch allows. Decided on the host in
    float64 from Philox uniforms: the same indices on every device."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial expects a Tensor, got {type(input).__name__}")
    if not input._dt.is_floating_point:
        raise DTypeError(f"multinomial only supports floating-point dtypes for input, got: {input._dt}")
    if input.ndim not in (1, 2):
        raise ShapeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    k = int(num_samples)
    if k <= 0:
        raise ValueError(f"cannot sample n_sample <= 0 samples (num_samples={k})")
    n = input.shape[-1]
    if not replacement and k > n:
        raise ValueError(f"cannot sample n_sample > prob_dist.size(-1) samples without replacement ({k} > {n})")
    w = _host_float64(input).reshape(-1, n)
    rows = w.shape[0]
    if w.size and not (np.isfinite(w).all() and (w >= 0).all()):
        raise ValueError("probability tensor contains either `inf`, `nan` or element < 0")
    total = w.sum(axis=1)
    if rows and not (total > 0).all():
        raise ValueError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        u = _host_draw("uniform", (rows, k), dt.float64, 0.0, 1.0, generator)
        cdf = np.cumsum(w, axis=1)
        # the first index whose cumulative weight exceeds u * total; u * total can round up to the
        # row's total, so the index is capped at the last positive weight (never a zero-weight one)
        last = n - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
        idx = np.empty((rows, k), np.int64)
        for r in range(rows):
            idx[r] = np.searchsorted(cdf[r], u[r] * cdf[r, -1], side="right")
        idx = np.minimum(idx, last[:, None])
    else:
        u = _host_draw("uniform", (rows, n), dt.float64, 0.0, 1.0, generator)
        e = -np.log1p(-u)  # exponential(1), finite: u < 1
        with np.errstate(divide="ignore", over="ignore"):
            key = np.where(w > 0, e / np.where(w > 0, w, 1.0), np.inf)
        # sort by key; zero-weight categories (key inf) among themselves by e: a random order
        idx = np.lexsort((e, key), axis=-1)[:, :k] if rows else np.zeros((0, k), np.int64)
    out_shape = (k,) if input.ndim == 1 else (rows, k)
    return tensor(idx.reshape(out_shape), dtype=dt.int64, device=input.device)


# --------------------------------------------------------------------------- normal
def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Any = None, dtype: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.normal``, in its four forms: ``normal(Tensor mean, Tensor std)`` (broadcast),
    ``normal(Tensor mean, float std=1)``, ``normal(float mean, Tensor std)`` (the tensors' dtype
    and device, floating point, ``std >= 0``) and ``normal(float mean, float std, size, *, dtype,
    device, requires_grad)``. ``mean + std * z`` for ``z`` from the Philox normal stream; the
    gradient towards ``mean`` and ``std`` is zero, as torch's."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (mt or st):
        if size is None:
            raise TypeError("normal(float mean, float std) needs a size")
        d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
        if not d.is_floating_point:
            raise DTypeError(f"normal produces floating point values, got dtype={d}")
        m, s = float(mean), float(std)
        if not s >= 0.0:
            raise ValueError(f"normal expects std >= 0.0, but found std {s}")
        shape = S.sizes_arg((size,)) if not isinstance(size, int | np.integer) else (int(size),)
        t = _draw("normal", shape, d, _device(device).backend(), m, s, generator)
        return t.requires_grad_() if requires_grad else t
    if size is not None or dtype is not None or device is not None or requires_grad:
        raise TypeError("normal(Tensor mean, ...) / normal(..., Tensor std) take no size, dtype, device or "
                        "requires_grad (those are the tensors')")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    for t in tensors:
        if not t._dt.is_floating_point:
            raise DTypeError(f"normal expects floating point mean and std tensors, got {t._dt}")
    d = tensors[0]._dt if len(tensors) == 1 else dt.promote_types(mean._dt, std._dt)
    shape = S.broadcast_many(t.shape for t in tensors)
    if st:
        if std.numel() and not bool((std >= 0).all().item()):
            raise ValueError("normal expects all elements of std >= 0.0")
    elif not float(std) >= 0.0:
        raise ValueError(f"normal expects std >= 0.0, but found std {float(std)}")
    w = _work(d)
    z = _draw("normal", shape, w, tensors[0]._bk, 0.0, 1.0, generator)
    m = mean.detach().to(w) if mt else float(mean)
    s = std.detach().to(w) if st else float(std)
    out = (z * s + m).to(d)  # a multiply, then an add: no contraction, the same on every device
    return _zero_grad_from(out, *tensors)


# --------------------------------------------------------------------------- randperm
def randperm(n: int, *, generator: Any = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """As ``torch.randperm``: a random permutation of ``0 .. n-1`` (int64 unless ``dtype``): the
    stable argsort of ``n`` int64 Philox keys, computed on the host (the same order on every device,
    and the one ``ember.utils.data``'s samplers draw from the same generator state)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"randperm needs n >= 0, got {n}")
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    if d is dt.bool_:
        raise DTypeError("randperm is not implemented for bool")
    if d.is_floating_point:
        limit = 2 ** _PRECISION[d.name] + 1  # every index n - 1 <= 2**p is exact
        if n > limit:
            raise ValueError(f"n cannot be greater than {limit} for {d}")
    elif n - 1 > _INT_RANGE[d.name][1]:
        raise ValueError(f"randperm: n = {n} is too large for {d}")
    keys = _host_draw("randint", (n,), dt.int64, -(2**63), 2**63, generator)
    perm = np.argsort(keys, kind="stable")
    return tensor(perm, dtype=d, device=device, requires_grad=requires_grad)


# --------------------------------------------------------------------------- poisson
#: largest rate of one inverse-CDF piece: exp(-rate) stays a normal float64 and the loop short
_POISSON_PIECE = 256.0


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """As ``torch.poisson``: a Poisson count for each rate of ``input`` (floating point, >= 0), in
    ``input``'s dtype. On the host in float64: each count inverts the Poisson CDF at one Philox
    uniform; rates above 256 are the sum of ``m`` pieces of rate ``rate / m`` (Poisson
    variables add), ``m`` uniforms each, so the count is exact in law for every rate."""
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson expects a Tensor, got {type(input).__name__}")
    if not input._dt.is_floating_point:
        raise DTypeError(f"poisson expects floating point rates, got {input._dt}")
    lam = _host_float64(input).reshape(-1)
    if lam.size and not (np.isfinite(lam).all() and (lam >= 0).all()):
        raise ValueError("poisson expects finite rates >= 0")
    m = max(1, math.ceil(float(lam.max()) / _POISSON_PIECE)) if lam.size else 1
    u = _host_draw("uniform", (m, lam.size), dt.float64, 0.0, 1.0, generator)
    rate = np.broadcast_to(lam / m, u.shape).reshape(-1)
    u = u.reshape(-1)
    k = np.zeros(u.shape, np.float64)
    p = np.exp(-rate)  # P(K = 0)
    cdf = p.copy()
    active = np.nonzero(u >= cdf)[0]
    # the CDF's float64 rounding can stop short of u near 1: the tail past rate + 40 sqrt(rate) + 40
    # has probability far below 2**-53, where no uniform lands anyway
    cap = rate + 40.0 * np.sqrt(rate) + 40.0
    while active.size:
        k[active] += 1.0
        p[active] *= rate[active] / k[active]
        cdf[active] += p[active]
        keep = (u[active] >= cdf[active]) & (k[active] < cap[active])
        active = active[keep]
    counts = k.reshape(m, lam.size).sum(axis=0).reshape(input.shape)
    out = tensor(counts, dtype=input._dt, device=input.device)
    return _zero_grad_from(out, input)


install_methods(RandomMethods)
