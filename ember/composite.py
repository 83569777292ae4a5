"""Ops composed from the catalog's ops: elementwise math, shape ops, reductions and matrix
products that torch has and the backends need no kernel for.

Every function here takes torch's arguments, runs on every device (it only calls Tensor
methods) and differentiates through its composition. ``_install`` attaches the ones torch
also has as Tensor methods; ``ember.functional`` exports all of them as ``ember.<name>``.
"""

from __future__ import annotations

import builtins
import math
import string
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _shape as S
from . import dtype as dt
from .errors import DTypeError, ShapeError
from .tensor import Tensor, _flat

__all__ = [
    # elementwise
    "acos", "arccos", "asin", "arcsin", "atan", "arctan", "sinh", "cosh", "asinh", "arcsinh", "acosh",
    "arccosh", "atanh", "arctanh", "log2", "log10", "exp2", "fmod", "erfc", "logit", "xlogy",
    "nan_to_num", "copysign", "frac", "heaviside", "signbit", "deg2rad", "rad2deg", "logaddexp2", "sinc", "positive", "clamp_min", "clamp_max", "isposinf", "isneginf", "isreal", "isclose",
    "fmax", "fmin", "ldexp", "sgn", "fix", "float_power", "addcmul", "addcdiv",
    # shape
    "diag", "diag_embed", "trace", "movedim", "moveaxis", "swapdims", "hstack", "vstack",
    "row_stack", "dstack", "column_stack", "atleast_1d", "atleast_2d", "atleast_3d", "repeat_interleave",
    "meshgrid", "rot90", "fliplr", "flipud", "ravel", "take_along_dim", "masked_select", "diff",
    "tensor_split", "hsplit", "vsplit", "dsplit", "broadcast_to", "broadcast_shapes", "cartesian_prod",
    "block_diag", "index_fill", "index_add", "index_copy", "narrow_copy", "take",
    # reductions
    "nansum", "nanmean", "var_mean", "std_mean", "count_nonzero", "aminmax",
    # matrix products
    "mv", "vdot", "outer", "ger", "inner", "addmm", "addmv", "addr", "addbmm", "baddbmm", "tensordot", "kron",
    "einsum", "chain_matmul",
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

AMinMax = namedtuple("AMinMax", ["min", "max"])


def _float(x: Tensor) -> Tensor:
    return x if x._dt.is_floating_point else x.float()


def _like(x: Tensor, v: Any) -> Tensor:
    return x if isinstance(v, Tensor) else x._full_like_shape((), v, x._dt)


def _where(c: Tensor, a: Any, b: Any) -> Tensor:
    from .functional import where

    return where(c, a, b)


# ----------------------------------------------------------------------------- elementwise
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


# ----------------------------------------------------------------------------- shape

def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """As ``torch.diag_embed``: the last dim placed on the diagonals of new (dim1, dim2) planes."""
    n = input.shape[-1]
    size = n + builtins.abs(offset)
    eye = input._from_like(np.eye(n, dtype=np.float32)).to(input._dt)
    mats = input.unsqueeze(-1) * eye  # (..., n, n) with the values on the diagonal
    pads = (offset, 0, 0, offset) if offset >= 0 else (0, -offset, -offset, 0)
    from .functional import pad

    mats = pad(mats, pads)
    out_nd = input.ndim + 1
    d1, d2 = S.norm_dim(dim1, out_nd), S.norm_dim(dim2, out_nd)
    # mats is (..., size, size): move its last two dims to d1 < d2 order
    order = list(range(out_nd - 2))
    perm: list[int] = []
    it = iter(order)
    for i in range(out_nd):
        if i == d1:
            perm.append(out_nd - 2)
        elif i == d2:
            perm.append(out_nd - 1)
        else:
            perm.append(next(it))
    del size
    return mats.permute(perm)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """As ``torch.diag``: a 1-D tensor's values on a matrix diagonal, or a matrix's diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return input.diagonal(diagonal)
    raise ShapeError(f"diag expects a 1-D or 2-D tensor, got shape {input.shape}")


def trace(input: Tensor) -> Tensor:
    """As ``torch.trace``."""
    if input.ndim != 2:
        raise ShapeError(f"trace expects a matrix, got shape {input.shape}")
    d = input.diagonal()
    return d.sum() if input._dt.is_floating_point else d.sum(dtype=dt.int64)



def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """As ``torch.movedim``."""
    src = tuple(source) if isinstance(source, Sequence) else (source,)
    dst = tuple(destination) if isinstance(destination, Sequence) else (destination,)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} differ in length")
    nd = input.ndim
    src = tuple(S.norm_dim(s, nd) for s in src)
    dst = tuple(S.norm_dim(d, nd) for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError("movedim: repeated dims")
    perm = [-1] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return input.permute(perm) if nd else input


moveaxis = movedim


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """As ``torch.swapdims``."""
    return input.transpose(dim0, dim1)


def atleast_1d(*tensors: Any) -> Any:
    """As ``torch.atleast_1d``."""
    ts = _flat(tensors) if len(tensors) == 1 and not isinstance(tensors[0], Tensor) else tensors
    out = tuple(t.reshape(1) if t.ndim == 0 else t for t in ts)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def atleast_2d(*tensors: Any) -> Any:
    """As ``torch.atleast_2d``."""
    ts = _flat(tensors) if len(tensors) == 1 and not isinstance(tensors[0], Tensor) else tensors
    out = tuple(t.reshape((1,) * (2 - t.ndim) + t.shape) if t.ndim < 2 else t for t in ts)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def atleast_3d(*tensors: Any) -> Any:
    """As ``torch.atleast_3d`` (a 1-D tensor of n becomes (1, n, 1), a matrix (n, m, 1))."""
    ts = _flat(tensors) if len(tensors) == 1 and not isinstance(tensors[0], Tensor) else tensors

    def one(t: Tensor) -> Tensor:
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, t.shape[0], 1)
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t

    out = tuple(one(t) for t in ts)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.hstack``."""
    from .functional import cat

    ts = atleast_1d(*tensors)
    return cat(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.vstack``."""
    from .functional import cat

    return cat(list(atleast_2d(*tensors)), 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.dstack``."""
    from .functional import cat

    return cat(list(atleast_3d(*tensors)), 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.column_stack``."""
    from .functional import cat

    cols = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors]
    return cat(cols, 1)


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """As ``torch.repeat_interleave`` (tensor repeats are read on the host: the result's shape
    depends on them); ``repeat_interleave(repeats_tensor)`` gives the repeated indices."""
    if repeats is None:
        reps = np.asarray(input.numpy()).astype(np.int64)
        return input._from_like(np.repeat(np.arange(reps.size, dtype=np.int64), reps))
    x = input.flatten() if dim is None else input
    d = 0 if dim is None else S.norm_dim(dim, x.ndim)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[d]
    if isinstance(repeats, Tensor):
        reps = np.asarray(repeats.numpy()).astype(np.int64).reshape(-1)
        if reps.size == 1:
            reps = np.full(n, int(reps[0]), np.int64)
    else:
        reps = np.full(n, int(repeats), np.int64)
    if reps.size != n:
        raise ShapeError(f"repeats must have {n} elements, got {reps.size}")
    if np.any(reps < 0):
        raise ValueError("repeats can not be negative")
    idx = np.repeat(np.arange(n, dtype=np.int64), reps)
    return x.index_select(d, x._from_like(idx))


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """As ``torch.meshgrid``."""
    ts = list(_flat(tensors)) if len(tensors) == 1 and not isinstance(tensors[0], Tensor) else list(tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [t.reshape(-1) if t.ndim == 0 else t for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    shape = tuple(t.shape[0] for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = t.shape[0]
        out.append(t.reshape(tuple(view)).expand(shape))
    if swap:  # 'xy': the 'ij' grids with their first two dims swapped
        out = [o.transpose(0, 1) for o in out]
    return tuple(out)


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """As ``torch.rot90``."""
    if len(dims) != 2:
        raise ShapeError(f"rot90 expects two dims, got {dims}")
    a, b = (S.norm_dim(d, input.ndim) for d in dims)
    if a == b:
        raise ShapeError(f"rot90 dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return input.flip(b).transpose(a, b)
    if k == 2:
        return input.flip((a, b))
    if k == 3:
        return input.flip(a).transpose(a, b)
    return input


def fliplr(input: Tensor) -> Tensor:
    """As ``torch.fliplr``."""
    if input.ndim < 2:
        raise ShapeError("fliplr needs at least 2 dimensions")
    return input.flip(1)


def flipud(input: Tensor) -> Tensor:
    """As ``torch.flipud``."""
    if input.ndim < 1:
        raise ShapeError("flipud needs at least 1 dimension")
    return input.flip(0)


def ravel(input: Tensor) -> Tensor:
    """As ``torch.ravel``."""
    return input.reshape(-1)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """As ``torch.take_along_dim``: ``gather`` with the two broadcast against each other
    outside ``dim`` (both flattened when dim is None)."""
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    d = S.norm_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise ShapeError(f"take_along_dim: input {input.shape} and indices {indices.shape} differ in rank")
    si = list(input.shape)
    sx = list(indices.shape)
    si[d] = sx[d] = 1
    b = S.broadcast(tuple(si), tuple(sx))
    xi = list(b)
    xi[d] = input.shape[d]
    ii = list(b)
    ii[d] = indices.shape[d]
    return input.expand(tuple(xi)).gather(d, indices.expand(tuple(ii)))


def take(input: Tensor, index: Tensor) -> Tensor:
    """As ``torch.take``: elements of the flattened input, in the index's shape."""
    return input.reshape(-1)[index]


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """As ``torch.masked_select`` (1-D; the mask is read on the host)."""
    shape = S.broadcast(input.shape, mask.shape) or (1,)
    return input.expand(shape)[mask.expand(shape)]


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """As ``torch.diff``."""
    from .functional import cat

    d = S.norm_dim(dim, input.ndim)
    x = input
    if n == 0:  # torch: the input itself, prepend and append ignored
        return input
    if prepend is not None or append is not None:
        parts = [p for p in (prepend, x, append) if p is not None]
        x = cat(parts, d)
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        a, b = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = a.logical_xor(b) if x._dt is dt.bool_ else a - b
    return x


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.tensor_split``."""
    d = S.norm_dim(dim, input.ndim)
    n = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.tolist() if ios.ndim else int(ios.item())
    if isinstance(ios, int | np.integer):
        k = int(ios)
        if k <= 0:
            raise ValueError(f"number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        bounds = np.cumsum([0] + sizes).tolist()
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) if i >= 0 else int(i) + n, 0), n) for i in ios] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo = builtins.min(lo, n)
        out.append(input.narrow(d, lo, builtins.max(0, hi - lo)))
    return tuple(out)


def _split_dir(input: Tensor, ios: Any, dim: int, what: str, need: int) -> tuple[Tensor, ...]:
    if input.ndim < need:
        raise ShapeError(f"{what} needs a tensor of at least {need} dimensions, got {input.ndim}")
    if isinstance(ios, int | np.integer) and input.shape[dim] % int(ios):
        raise ShapeError(f"{what}: dim {dim} of size {input.shape[dim]} is not divisible by {ios}")
    return tensor_split(input, ios, dim)


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """As ``torch.hsplit``."""
    return _split_dir(input, indices_or_sections, 0 if input.ndim == 1 else 1, "hsplit", 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """As ``torch.vsplit``."""
    return _split_dir(input, indices_or_sections, 0, "vsplit", 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """As ``torch.dsplit``."""
    return _split_dir(input, indices_or_sections, 2, "dsplit", 3)


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """As ``torch.broadcast_to``."""
    return input.expand(tuple(size))


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """As ``torch.broadcast_shapes``."""
    return S.broadcast_many(tuple(s) if isinstance(s, Sequence) else (int(s),) for s in shapes)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """As ``torch.cartesian_prod``."""
    from .functional import stack

    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def block_diag(*tensors: Tensor) -> Tensor:
    """As ``torch.block_diag``."""
    from .functional import cat, pad

    mats = [t.reshape(1, -1) if t.ndim == 1 else (t.reshape(1, 1) if t.ndim == 0 else t) for t in tensors]
    d = mats[0]._dt
    for m in mats[1:]:
        d = dt.promote_types(d, m._dt)
    cols = builtins.sum(m.shape[1] for m in mats)
    rows = []
    left = 0
    for m in mats:
        rows.append(pad(m.to(d), (left, cols - left - m.shape[1])))
        left += m.shape[1]
    return cat(rows, 0)


def _index_put_dim(input: Tensor, dim: int, index: Tensor, values: Tensor, accumulate: bool) -> Tensor:
    """``values`` written (or added) at ``index`` along ``dim``: a scatter with the index
    broadcast over the other dims."""
    d = S.norm_dim(dim, input.ndim)
    if input.ndim == 0:
        return _index_put_dim(input.reshape(1), 0, index.reshape(-1), values.reshape(-1), accumulate).reshape(())
    index = index.reshape(-1)
    shape = list(input.shape)
    shape[d] = index.shape[0]
    view = [1] * input.ndim
    view[d] = index.shape[0]
    full = index.reshape(tuple(view)).expand(tuple(shape))
    v = values.to(input._dt).expand(tuple(shape)) if values.shape != tuple(shape) else values.to(input._dt)
    return input.scatter_add(d, full, v) if accumulate else input.scatter(d, full, v)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """As ``torch.index_add``."""
    return _index_put_dim(input, dim, index, source * alpha if alpha != 1 else source, True)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """As ``torch.index_copy``."""
    return _index_put_dim(input, dim, index, source, False)


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """As ``torch.index_fill``: a where over the positions the index names along ``dim``
    (computed on the device; a 0-d tensor value gets the filled positions' gradient once each,
    repeated indices included)."""
    d = S.norm_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    idx = index.reshape(-1)
    idx = _where(idx.lt(0), idx + n, idx) if idx.numel() else idx
    from .creation import arange

    pos = arange(n, device=input.device)
    hit = pos.unsqueeze(-1).eq(idx).any(-1) if idx.numel() else pos.lt(0)
    view = [1] * input.ndim
    if input.ndim:
        view[d] = n
    mask = hit.reshape(tuple(view))
    if isinstance(value, Tensor):
        return _where(mask, value.to(input._dt), input)
    return input.masked_fill(mask, value)


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """As ``torch.narrow_copy``."""
    return input.narrow(dim, start, length).clone()


# ----------------------------------------------------------------------------- reductions
def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.nansum``: nan counts as 0."""
    x = input
    if x._dt.is_floating_point:
        x = _where(x.isnan(), x._full_like_shape((), 0.0, x._dt), x)
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.nanmean``: the mean of the non-nan elements."""
    x = input if dtype is None else input.to(dtype)
    if not x._dt.is_floating_point:
        raise DTypeError(f"nanmean needs a floating point input, got {x._dt}")
    keep = x.isnan().logical_not()
    return nansum(x, dim, keepdim) / keep.to(x._dt).sum(dim, keepdim)


def var_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """As ``torch.var_mean``: (var, mean)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (input.var(dim, unbiased, keepdim, correction=correction), _float(input).mean(dim, keepdim))


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """As ``torch.std_mean``: (std, mean)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (input.std(dim, unbiased, keepdim, correction=correction), _float(input).mean(dim, keepdim))


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """As ``torch.count_nonzero`` (int64)."""
    return input.ne(0).sum(dim)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> AMinMax:
    """As ``torch.aminmax``: (min, max)."""
    return AMinMax(input.amin(dim, keepdim), input.amax(dim, keepdim))


# ----------------------------------------------------------------------------- matrix products
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """As ``torch.mv``."""
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv expects a matrix and a vector, got shapes {input.shape} and {vec.shape}")
    return input.matmul(vec)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.vdot`` (real tensors: ``dot``)."""
    return input.dot(other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """As ``torch.outer``."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer expects vectors, got shapes {input.shape} and {vec2.shape}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def inner(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.inner``: contraction over the last dims."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


def _beta_alpha(input: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    term = prod if alpha == 1 else prod * alpha
    if beta == 0:  # torch ignores input then (its nan and inf do not propagate)
        return term.expand(S.broadcast(input.shape, term.shape))
    base = input if beta == 1 else input * beta
    return base + term


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addmm``: beta * input + alpha * (mat1 @ mat2)."""
    return _beta_alpha(input, mat1.mm(mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addmv``."""
    return _beta_alpha(input, mv(mat, vec), beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addr``."""
    return _beta_alpha(input, outer(vec1, vec2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addbmm``: the batch products summed."""
    return _beta_alpha(input, batch1.bmm(batch2).sum(0), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.baddbmm``."""
    return _beta_alpha(input, batch1.bmm(batch2), beta, alpha)


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """As ``torch.tensordot``: the contracted dims permuted together, one matmul."""
    if out is not None:
        raise TypeError("tensordot: out= is not supported (tensors are values)")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int | np.integer):
        k = int(dims)
        da, db = list(range(a.ndim - k, a.ndim)), list(range(k))
    else:
        da, db = dims
        da = [da] if isinstance(da, int | np.integer) else list(da)
        db = [db] if isinstance(db, int | np.integer) else list(db)
    da = [S.norm_dim(d, a.ndim) for d in da]
    db = [S.norm_dim(d, b.ndim) for d in db]
    if len(da) != len(db):
        raise ShapeError(f"tensordot: {len(da)} and {len(db)} contracted dims")
    for x, y in zip(da, db):  # a contracted dim of size 1 broadcasts against the other (torch)
        if a.shape[x] != b.shape[y]:
            if a.shape[x] == 1:
                a = a.expand(tuple(b.shape[y] if i == x else n for i, n in enumerate(a.shape)))
            elif b.shape[y] == 1:
                b = b.expand(tuple(a.shape[x] if i == y else n for i, n in enumerate(b.shape)))
            else:
                raise ShapeError(f"tensordot: contracted dims of size {a.shape[x]} and {b.shape[y]}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [i for i in range(b.ndim) if i not in db]
    k = math.prod(a.shape[i] for i in da)
    ma = a.permute(fa + da).reshape(math.prod(a.shape[i] for i in fa), k)
    mb = b.permute(db + fb).reshape(k, math.prod(b.shape[i] for i in fb))
    return ma.matmul(mb).reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))


def kron(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.kron``."""
    nd = builtins.max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + input.shape)
    b = other.reshape((1,) * (nd - other.ndim) + other.shape)
    ia: list[int] = []
    ib: list[int] = []
    for n, m in zip(a.shape, b.shape):
        ia += [n, 1]
        ib += [1, m]
    prod = a.reshape(tuple(ia)) * b.reshape(tuple(ib))
    return prod.reshape(tuple(n * m for n, m in zip(a.shape, b.shape)))


def chain_matmul(*matrices: Tensor) -> Tensor:
    """As ``torch.chain_matmul``."""
    out = matrices[0]
    for m in matrices[1:]:
        out = out.mm(m)
    return out


def einsum(equation: str, *operands: Any) -> Tensor:
    """As ``torch.einsum`` (``...`` and repeated indices included): each operand's repeated
    indices become diagonals, then the operands are brought to one index order, multiplied
    with broadcasting and summed over the indices the output drops."""
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], list | tuple) else list(operands)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise ShapeError(f"einsum: {len(terms)} operand subscripts for {len(ops)} operands")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    nell = 0
    for t, x in zip(terms, ops):
        if "..." in t:
            nell = builtins.max(nell, x.ndim - (len(t) - 3))
    ell = "".join(spare[:nell])
    subs = []
    for t, x in zip(terms, ops):
        if "..." in t:
            k = x.ndim - (len(t) - 3)
            t = t.replace("...", ell[nell - k:] if k else "")
        if len(t) != x.ndim:
            raise ShapeError(f"einsum: subscripts {t!r} for an operand of shape {x.shape}")
        subs.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in subs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    # repeated indices within an operand: take the diagonal
    fixed = []
    for t, x in zip(subs, ops):
        while True:
            rep = next((c for c in t if t.count(c) > 1), None)
            if rep is None:
                break
            i = t.index(rep)
            j = t.index(rep, i + 1)
            x = x.diagonal(0, i, j)
            t = "".join(c for k, c in enumerate(t) if k not in (i, j)) + rep
        fixed.append((t, x))
    letters = list(out) + sorted(set("".join(t for t, _ in fixed)) - set(out))
    sizes: dict[str, int] = {}
    for t, x in fixed:
        for c, n in zip(t, x.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise ShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
                sizes[c] = n
    aligned = []
    for t, x in fixed:
        perm = [t.index(c) for c in letters if c in t]
        y = x.permute(perm) if perm else x
        shape = tuple(x.shape[t.index(c)] if c in t else 1 for c in letters)
        aligned.append(y.reshape(shape))
    prod = aligned[0]
    for y in aligned[1:]:
        prod = prod * y
    full = tuple(sizes.get(c, 1) for c in letters)
    if prod.shape != full:
        prod = prod.expand(full)
    red = tuple(range(len(out), len(letters)))
    return prod.sum(red) if red else prod


# ----------------------------------------------------------------------------- methods
#: the functions torch also has as Tensor methods (name -> function)
_METHODS = (
    "acos", "arccos", "asin", "arcsin", "atan", "arctan", "sinh", "cosh", "asinh", "arcsinh", "acosh", "arccosh",
    "atanh", "arctanh", "log2", "log10", "exp2", "fmod", "erfc", "logit", "xlogy", "nan_to_num", "copysign",
    "frac", "heaviside", "signbit", "deg2rad", "rad2deg", "logaddexp2", "sinc", "positive",
    "clamp_min", "clamp_max", "isposinf", "isneginf", "isreal", "isclose", "fmax", "fmin", "ldexp", "sgn", "fix",
    "float_power", "addcmul", "addcdiv", "diag", "diag_embed", "trace", "movedim", "moveaxis",
    "swapdims", "repeat_interleave", "rot90", "fliplr", "flipud", "ravel", "take_along_dim", "masked_select", "diff",
    "tensor_split", "hsplit", "vsplit", "dsplit", "index_fill", "index_add", "index_copy", "narrow_copy", "take",
    "nansum", "nanmean", "count_nonzero", "aminmax", "mv", "vdot", "outer", "ger", "inner", "addmm", "addmv", "addr",
    "addbmm", "baddbmm", "kron",
)


# ----------------------------------------------------------------------------- more compositions
def _copy_of(name: str) -> Any:
    def f(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = getattr(input, name)(*args, **kwargs) if name != "alias" else input
        if isinstance(out, tuple):
            return tuple(o.clone() for o in out)
        return out.clone()

    f.__name__ = f.__qualname__ = f"{name}_copy"
    f.__doc__ = f"As ``torch.{name}_copy``: ``{name}`` as a new value (every ember result is one)."
    return f


view_copy = _copy_of("view")
permute_copy = _copy_of("permute")
t_copy = _copy_of("t")
unsqueeze_copy = _copy_of("unsqueeze")
squeeze_copy = _copy_of("squeeze")
transpose_copy = _copy_of("transpose")
unbind_copy = _copy_of("unbind")
expand_copy = _copy_of("expand")
diagonal_copy = _copy_of("diagonal")
alias_copy = _copy_of("alias")
split_with_sizes_copy = _copy_of("split")


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.split_with_sizes``."""
    return input.split(list(split_sizes), dim)


def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.unsafe_split`` (``split``: ember results never alias)."""
    return input.split(split_size, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.unsafe_chunk`` (``chunk``)."""
    return input.chunk(chunks, dim)


def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """As ``torch.Tensor.sum_to_size``: summed down to a shape it broadcasts from."""
    shape = tuple(_flat(size))
    lead = input.ndim - len(shape)
    if lead < 0 or S.broadcast(shape, input.shape) != input.shape:
        raise ShapeError(f"size {shape} is not expandable to the tensor's shape {input.shape}")
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and input.shape[lead + i] != 1)
    out = input.sum(dims, keepdim=True) if dims else input
    return out.reshape(shape)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """As ``torch.select_scatter``."""
    out = input.clone()
    d = S.norm_dim(dim, input.ndim)
    out[(slice(None),) * d + (index,)] = src
    return out


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """As ``torch.slice_scatter``."""
    out = input.clone()
    d = S.norm_dim(dim, input.ndim)
    out[(slice(None),) * d + (slice(start, end, step),)] = src
    return out


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """As ``torch.diagonal_scatter``: ``src`` scattered onto the diagonal positions of the
    (dim1, dim2) planes flattened (the positions ``diagonal`` reads)."""
    d1, d2 = S.norm_dim(dim1, input.ndim), S.norm_dim(dim2, input.ndim)
    rest = [i for i in range(input.ndim) if i not in (d1, d2)]
    perm = rest + [d1, d2]
    x = input.permute(perm)
    n, m = x.shape[-2], x.shape[-1]
    if offset >= 0:
        length = builtins.max(0, builtins.min(n, m - offset))
        idx = np.arange(length) * m + np.arange(length) + offset
    else:
        length = builtins.max(0, builtins.min(n + offset, m))
        idx = (np.arange(length) - offset) * m + np.arange(length)
    if tuple(src.shape) != x.shape[:-2] + (length,):
        raise ShapeError(f"diagonal_scatter: src of shape {src.shape} does not fit the diagonal "
                         f"{x.shape[:-2] + (length,)}")
    if length == 0:
        return input
    flat = x.reshape(x.shape[:-2] + (n * m,))
    it = input._from_like(idx.astype(np.int64)).reshape((1,) * (flat.ndim - 1) + (length,))
    out = flat.scatter(flat.ndim - 1, it.expand(x.shape[:-2] + (length,)), src.to(input._dt))
    inv = [perm.index(i) for i in range(input.ndim)]
    return out.reshape(x.shape).permute(inv)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """As ``torch.Tensor.unfold``: windows of ``size`` every ``step`` along ``dimension`` as a
    new last dim (one ``index_select`` of the window positions)."""
    d = S.norm_dim(dimension, input.ndim)
    n = input.shape[d] if input.ndim else 1
    x = input.reshape(1) if input.ndim == 0 else input
    if size > n or step <= 0:
        raise ShapeError(f"unfold: size {size} and step {step} do not fit dim {d} of size {n}")
    count = (n - size) // step + 1
    idx = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    w = x.index_select(d, x._from_like(idx.astype(np.int64)))
    shape = x.shape[:d] + (count, size) + x.shape[d + 1:]
    out = movedim(w.reshape(shape), d + 1, -1)
    return out.reshape(size) if input.ndim == 0 else out  # torch: a 0-d tensor gives (size,)


def index_put(input: Tensor, indices: Sequence[Any], values: Tensor, accumulate: bool = False) -> Tensor:
    """As ``torch.index_put``."""
    from .indexing import _expand_key, _Plan, _value_tensor

    key = tuple(indices)
    if not accumulate:
        out = input.clone()
        out[key] = values
        return out
    items = _expand_key(input, key)
    _Plan(input, items)  # validates the key
    np_key = tuple(np.asarray(k.numpy()) if isinstance(k, Tensor) else k for k in items)
    lin = np.arange(input.numel(), dtype=np.int64).reshape(input.shape)[np_key]
    v = _value_tensor(input, values).expand(lin.shape).reshape(-1)
    flat = input.reshape(-1)
    return flat.scatter_add(0, input._from_like(lin.reshape(-1)), v).reshape(input.shape)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """As ``torch.put``: ``source`` written at flat positions."""
    flat = input.reshape(-1)
    idx = index.reshape(-1)
    n = flat.shape[0]
    if idx.numel():
        idx = _where(idx.lt(0), idx + n, idx)
    src = source.reshape(-1).to(input._dt)
    if accumulate:
        return flat.scatter_add(0, idx, src).reshape(input.shape)
    return flat.scatter(0, idx, src).reshape(input.shape)


def fill(input: Tensor, value: Any) -> Tensor:
    """As ``torch.fill``: a tensor of ``value`` in input's shape and dtype (a 0-d tensor value
    keeps its gradient)."""
    if isinstance(value, Tensor):
        return value.to(input._dt).expand(input.shape) + input * 0 if input.requires_grad else \
            value.to(input._dt).expand(input.shape)
    return input.masked_fill(input._full_like_shape((), True, dt.bool_), value)


def argwhere(input: Tensor) -> Tensor:
    """As ``torch.argwhere`` (``nonzero``)."""
    return input.nonzero()


def conj(input: Tensor) -> Tensor:
    """As ``torch.conj`` (real tensors: the tensor itself)."""
    return input


conj_physical = resolve_conj = resolve_neg = conj


def angle(input: Tensor) -> Tensor:
    """As ``torch.angle`` of a real tensor: pi where negative, 0 elsewhere, nan for nan."""
    x = _float(input)
    return _where(x.lt(0), x._full_like_shape((), math.pi, x._dt), x * 0)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """As ``torch.dist``: the p-norm of the difference."""
    return (input - other).norm(p)


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


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """As ``torch.cross`` (``dim`` None: the first dim of size 3)."""
    shape = S.broadcast(input.shape, other.shape)
    a, b = input.expand(shape), other.expand(shape)
    if dim is None:
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"no dimension of size 3 in shape {shape}")
    d = S.norm_dim(dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} of shape {shape} has size {shape[d]}, not 3")
    return a.roll(-1, d) * b.roll(-2, d) - a.roll(-2, d) * b.roll(-1, d)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """As ``torch.diagflat``."""
    return diag_embed(input.reshape(-1), offset)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    """As ``torch.constant_pad_nd``."""
    from .functional import pad as _pad

    return _pad(input, pad, value=value)


def trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.trapezoid``."""
    d = S.norm_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return _float(y).sum(d)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    if isinstance(x, Tensor):
        xd = diff(x, dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            xd = xd.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
        return (mid * xd).sum(d)
    step = dx if dx is not None else (1.0 if x is None else float(x))
    return mid.sum(d) * step


def trapz(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.trapz``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.cumulative_trapezoid``."""
    d = S.norm_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return _float(y)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    if isinstance(x, Tensor):
        xd = diff(x, dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            xd = xd.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
        return (mid * xd).cumsum(d)
    step = dx if dx is not None else (1.0 if x is None else float(x))
    return mid.cumsum(d) * step


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """As ``torch.cov`` (rows are variables, columns observations)."""
    x = _float(input)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights.to(x._dt)
    if aweights is not None:
        w = aweights.to(x._dt) if w is None else w * aweights.to(x._dt)
    if w is None:
        mean = x.mean(1, keepdim=True)
        xc = x - mean
        c = xc.matmul(xc.t()) / builtins.max(n - correction, 0)
    else:
        wsum = w.sum()
        mean = (x * w).sum(1, keepdim=True) / wsum
        xc = x - mean
        if correction == 0:
            norm = wsum
        elif aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights.to(x._dt)).sum() / wsum
        c = (xc * w).matmul(xc.t()) / norm
    return c.reshape(()) if c.shape == (1, 1) else c  # one variable: a 0-d result (torch)


def corrcoef(input: Tensor) -> Tensor:
    """As ``torch.corrcoef``."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal().sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1, 1)


_EXTRA_METHODS = (
    "sum_to_size", "unfold", "index_put", "put", "fill", "argwhere", "conj", "conj_physical", "resolve_conj",
    "resolve_neg", "angle", "dist", "isin", "cross", "diagflat", "split_with_sizes", "unsafe_split", "unsafe_chunk",
    "select_scatter", "slice_scatter", "diagonal_scatter", "cov", "corrcoef",
)
__all__ += [
    "view_copy", "permute_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "transpose_copy", "unbind_copy",
    "expand_copy", "diagonal_copy", "alias_copy", "split_with_sizes_copy", *_EXTRA_METHODS, "constant_pad_nd",
    "trapezoid", "trapz", "cumulative_trapezoid",
]
_METHODS = _METHODS + _EXTRA_METHODS


def _install() -> None:
    g = globals()
    for name in _METHODS:
        if name in Tensor.__dict__:
            continue  # a method of its own (``Tensor.fix`` is ``trunc``)
        setattr(Tensor, name, g[name])


_install()
