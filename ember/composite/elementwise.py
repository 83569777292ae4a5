"""Elementwise compositions: inverse trigonometric and hyperbolic functions, ``log2``, ``fmod``,
``xlogy``, ``nan_to_num``, ``isclose``, ``float_power``, ``addcmul``, ...

Each is written with Tensor methods only, so it runs on every device and differentiates
through its composition; the formulas are chosen for accuracy (``sinh`` through ``expm1``,
``asinh``/``acosh`` switch to a logarithm for huge inputs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtype as dt
from ..errors import DTypeError
from ..tensor import Tensor
from ._common import _float, _where

__all__ = [
    "acos", "arccos", "asin", "arcsin", "atan", "arctan", "sinh", "cosh", "asinh", "arcsinh", "acosh", "arccosh",
    "atanh", "arctanh", "log2", "log10", "exp2", "fmod", "erfc", "logit", "xlogy", "nan_to_num", "copysign",
    "frac", "heaviside", "signbit", "deg2rad", "rad2deg", "logaddexp2", "sinc", "positive",
    "clamp_min", "clamp_max", "isposinf", "isneginf", "isreal", "isclose", "fmax", "fmin", "ldexp", "sgn", "fix",
    "float_power", "addcmul", "addcdiv", "fill", "conj", "conj_physical", "resolve_conj", "resolve_neg", "angle",
    "isin"
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

#: the functions torch also has as Tensor methods
TENSOR_METHODS = (
    "acos", "arccos", "asin", "arcsin", "atan", "arctan", "sinh", "cosh", "asinh", "arcsinh", "acosh", "arccosh",
    "atanh", "arctanh", "log2", "log10", "exp2", "fmod", "erfc", "logit", "xlogy", "nan_to_num", "copysign",
    "frac", "heaviside", "signbit", "deg2rad", "rad2deg", "logaddexp2", "sinc", "positive",
    "clamp_min", "clamp_max", "isposinf", "isneginf", "isreal", "isclose", "fmax", "fmin", "ldexp", "sgn", "fix",
    "float_power", "addcmul", "addcdiv", "fill", "conj", "conj_physical", "resolve_conj", "resolve_neg", "angle",
    "isin",
)


def atan(input: Tensor) -> Tensor:
    """As ``torch.atan`` (``atan2(x, 1)``)."""
    x = _float(input)
    return x.atan2(x._full_like_shape((), 1.0, x._dt))


def asin(input: Tensor) -> Tensor:
    """As ``torch.asin`` (``atan2(x, sqrt(1 - x^2))``: nan outside [-1, 1])."""
    x = _float(input)
    return x.atan2((1.0 - x * x).sqrt())


def acos(input: Tensor) -> Tensor:
    """As ``torch.acos`` (``atan2(sqrt(1 - x^2), x)``)."""
    x = _float(input)
    return (1.0 - x * x).sqrt().atan2(x)


def sinh(input: Tensor) -> Tensor:
    """As ``torch.sinh`` (through expm1, accurate near 0)."""
    x = _float(input)
    return (x.expm1() - (-x).expm1()) * 0.5


def cosh(input: Tensor) -> Tensor:
    """As ``torch.cosh``."""
    x = _float(input)
    return (x.exp() + (-x).exp()) * 0.5


def asinh(input: Tensor) -> Tensor:
    """As ``torch.asinh``: sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log(2|x|) for huge |x|."""
    x = _float(input)
    a = x.abs()
    small = a < 1e8
    a_s = _where(small, a, x._full_like_shape((), 1.0, x._dt))
    inner = (a_s + a_s * a_s / (1.0 + (1.0 + a_s * a_s).sqrt())).log1p()
    return x.sign() * _where(small, inner, a.log() + _LN2) + _where(x == 0, x, x * 0)


def acosh(input: Tensor) -> Tensor:
    """As ``torch.acosh``: log1p((x - 1) + sqrt((x - 1)(x + 1))), log(2x) for huge x."""
    x = _float(input)
    small = x < 1e8
    xs = _where(small, x, x._full_like_shape((), 2.0, x._dt))
    t = xs - 1.0
    inner = (t + (t * (xs + 1.0)).sqrt()).log1p()
    return _where(small, inner, x.log() + _LN2)


def atanh(input: Tensor) -> Tensor:
    """As ``torch.atanh``: 0.5 log1p(2x / (1 - x))."""
    x = _float(input)
    return (2.0 * x / (1.0 - x)).log1p() * 0.5


arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


def log2(input: Tensor) -> Tensor:
    """As ``torch.log2``."""
    return _float(input).log() * (1.0 / _LN2)


def log10(input: Tensor) -> Tensor:
    """As ``torch.log10``."""
    return _float(input).log() * (1.0 / _LN10)


def exp2(input: Tensor) -> Tensor:
    """As ``torch.exp2``."""
    return (_float(input) * _LN2).exp()


def fmod(input: Tensor, other: Any) -> Tensor:
    """As ``torch.fmod``: the remainder with the dividend's sign (C's fmod); integer division
    by zero raises as for ``%``."""
    r = input.remainder(other)
    o = other if isinstance(other, Tensor) else input._full_like_shape((), other, r._dt)
    # remainder has the divisor's sign: step back by the divisor where the signs differ
    fix = r.ne(0).logical_and(r.lt(0).logical_xor(input.lt(0)))
    return _where(fix, r - o.to(r._dt), r)



def erfc(input: Tensor) -> Tensor:
    """As ``torch.erfc`` (1 - erf(x): absolute, not relative, accuracy for large x)."""
    return 1.0 - _float(input).erf()


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """As ``torch.logit``: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given."""
    x = _float(input)
    if eps is not None:
        x = x.clamp(eps, 1.0 - eps)
    return (x / (1.0 - x)).log()


def xlogy(input: Any, other: Any) -> Tensor:
    """As ``torch.xlogy``: x log(y), 0 where x == 0 (unless y is nan)."""
    if not isinstance(input, Tensor):
        input = other._full_like_shape((), input, dt.result_type(input, other))
    x = _float(input)
    y = other if isinstance(other, Tensor) else x._full_like_shape((), float(other), x._dt)
    y = _float(y)
    prod = x * y.log()
    zero = x.eq(0).logical_and(y.isnan().logical_not())
    return _where(zero, x._full_like_shape((), 0.0, prod._dt), prod)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    """As ``torch.nan_to_num`` (infinities default to the dtype's largest/smallest finite values)."""
    if not input._dt.is_floating_point:
        return input
    info = np.finfo(input._dt.np if input._dt is not dt.bfloat16 else np.float32) \
        if input._dt is not dt.bfloat16 else None
    big = float(info.max) if info is not None else 3.3895313892515355e38
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = _where(input.isnan(), input._full_like_shape((), nan, input._dt), input)
    out = _where(out == math.inf, out._full_like_shape((), hi, out._dt), out)
    return _where(out == -math.inf, out._full_like_shape((), lo, out._dt), out)


def signbit(input: Tensor) -> Tensor:
    """As ``torch.signbit``: true for negative values and -0.0."""
    if not input._dt.is_floating_point:
        return input.lt(0)
    neg_zero = input.eq(0).logical_and((1.0 / input).lt(0))
    return input.lt(0).logical_or(neg_zero)


def copysign(input: Any, other: Any) -> Tensor:
    """As ``torch.copysign``: |input| with the sign (bit) of ``other``."""
    if not isinstance(input, Tensor):
        input = other._full_like_shape((), float(input), dt.get_default_dtype())
    x = _float(input)
    o = other if isinstance(other, Tensor) else x._full_like_shape((), float(other), x._dt)
    return _where(signbit(o), -x.abs(), x.abs())


def frac(input: Tensor) -> Tensor:
    """As ``torch.frac``: x - trunc(x)."""
    return input - input.trunc()


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """As ``torch.heaviside``."""
    one = input._full_like_shape((), 1, input._dt)
    zero = input._full_like_shape((), 0, input._dt)
    return _where(input.eq(0), values.to(input._dt), _where(input.gt(0), one, zero))


def deg2rad(input: Tensor) -> Tensor:
    """As ``torch.deg2rad``."""
    return _float(input) * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    """As ``torch.rad2deg``."""
    return _float(input) * (180.0 / math.pi)




def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.logaddexp2``: log2(2^a + 2^b)."""
    return (input * _LN2).logaddexp(other * _LN2) * (1.0 / _LN2)


def sinc(input: Tensor) -> Tensor:
    """As ``torch.sinc``: sin(pi x) / (pi x), 1 at 0."""
    x = _float(input)
    px = x * math.pi
    safe = _where(x == 0, x._full_like_shape((), 1.0, x._dt), px)
    return _where(x == 0, x._full_like_shape((), 1.0, x._dt), safe.sin() / safe)


def positive(input: Tensor) -> Tensor:
    """As ``torch.positive`` (the tensor itself)."""
    if input._dt is dt.bool_:
        raise DTypeError("the positive operator does not support bool tensors")
    return input


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """As ``torch.clamp_min``."""
    return input.clamp(min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """As ``torch.clamp_max``."""
    return input.clamp(max=max)


def isposinf(input: Tensor) -> Tensor:
    """As ``torch.isposinf``."""
    return input.isinf().logical_and(input.gt(0))


def isneginf(input: Tensor) -> Tensor:
    """As ``torch.isneginf``."""
    return input.isinf().logical_and(input.lt(0))


def isreal(input: Tensor) -> Tensor:
    """As ``torch.isreal`` (ember has no complex dtypes: always true)."""
    return input._full_like_shape(input.shape, True, dt.bool_)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """As ``torch.isclose``."""
    if input._dt.category != dt.FLOAT and other._dt.category != dt.FLOAT:
        return input.eq(other)
    a, b = _float(input), _float(other)
    close = (a - b).abs().le(atol + rtol * b.abs()).logical_or(a.eq(b))
    if equal_nan:
        close = close.logical_or(a.isnan().logical_and(b.isnan()))
    return close


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.fmax``: maximum ignoring nan (nan only where both are)."""
    m = input.maximum(other)
    if not m._dt.is_floating_point:
        return m
    return _where(input.isnan(), other.to(m._dt), _where(other.isnan(), input.to(m._dt), m))


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.fmin``."""
    m = input.minimum(other)
    if not m._dt.is_floating_point:
        return m
    return _where(input.isnan(), other.to(m._dt), _where(other.isnan(), input.to(m._dt), m))


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.ldexp``: input * 2**other."""
    x = _float(input)
    return x * (_float(other) * _LN2).exp()


def sgn(input: Tensor) -> Tensor:
    """As ``torch.sgn`` (real tensors: ``sign``)."""
    return input.sign()


def fix(input: Tensor) -> Tensor:
    """As ``torch.fix`` (``trunc``)."""
    return input.trunc()


def float_power(input: Any, exponent: Any) -> Tensor:
    """As ``torch.float_power``: the power in float64."""
    if not isinstance(input, Tensor):
        input = exponent._full_like_shape((), float(input), dt.float64)
    x = input.double()
    e = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
    return x ** e


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """As ``torch.addcmul``: input + value * tensor1 * tensor2."""
    return input + (tensor1 * tensor2) * value


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """As ``torch.addcdiv``: input + value * tensor1 / tensor2."""
    return input + (tensor1 / tensor2) * value


def fill(input: Tensor, value: Any) -> Tensor:
    """As ``torch.fill``: a tensor of ``value`` in input's shape and dtype (a 0-d tensor value
    keeps its gradient)."""
    if isinstance(value, Tensor):
        return value.to(input._dt).expand(input.shape) + input * 0 if input.requires_grad else \
            value.to(input._dt).expand(input.shape)
    return input.masked_fill(input._full_like_shape((), True, dt.bool_), value)


def conj(input: Tensor) -> Tensor:
    """As ``torch.conj`` (real tensors: the tensor itself)."""
    return input


conj_physical = resolve_conj = resolve_neg = conj


def angle(input: Tensor) -> Tensor:
    """As ``torch.angle`` of a real tensor: pi where negative, 0 elsewhere, nan for nan."""
    x = _float(input)
    return _where(x.lt(0), x._full_like_shape((), math.pi, x._dt), x * 0)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """As ``torch.isin``."""
    if not isinstance(elements, Tensor):
        elements = test_elements._full_like_shape((), elements, dt.result_type(elements))
    if not isinstance(test_elements, Tensor):
        test_elements = elements._full_like_shape((), test_elements, dt.result_type(test_elements))
    t = test_elements.reshape(-1)
    if t.numel() == 0:
        hit = elements._full_like_shape(elements.shape, False, dt.bool_)
    else:
        hit = elements.unsqueeze(-1).eq(t).any(-1)
    return hit.logical_not() if invert else hit
