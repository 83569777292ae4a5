"""Flex: the eager numpy backend, and the reference for behaviour.

Primitives are plain numpy arrays, never mutated after creation (tensors are values), so
views, broadcasts and ``copy`` can share memory freely. Hot ops are the numpy ufuncs
themselves bound as methods: a Flex op adds no Python frame of its own. Half types
(float16, bfloat16) compute in float32 where numpy would otherwise accumulate in half
precision (reductions, matmul), as the GPU kernels do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtype as dt
from ... import tracing
from ..base import Backend

__all__ = ["FlexBackend"]

_F32 = np.dtype(np.float32)
_HALF = frozenset({dt.float16.np, dt.bfloat16.np})
_NP2DT = {d.np: d for d in dt.ALL}


def _quiet(f: Any) -> Any:
    """A ufunc wrapper that silences floating-point warnings (log(0) = -inf is an answer,
    not a problem: PyTorch does not warn either)."""

    def op(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return f(*args)

    return op


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    if x.dtype in _HALF:
        return erf(x.astype(_F32)).astype(x.dtype)
    return erf(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-log(1 + exp(-x))) stays accurate for large |x| in both directions
    with np.errstate(all="ignore"):
        if x.dtype in _HALF:
            return np.exp(-np.logaddexp(0.0, -x.astype(_F32))).astype(x.dtype)
        return np.exp(-np.logaddexp(x.dtype.type(0), -x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.reciprocal(np.sqrt(x))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _reciprocal(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.divide(x.dtype.type(1), x)


def _sign(x: np.ndarray) -> np.ndarray:
    """PyTorch's sign: (x > 0) - (x < 0), so sign(nan) = sign(-0.0) = 0; bools are their own."""
    if x.dtype == np.bool_:
        return x
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _int_negative_power(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's integer power where the exponent is negative: 1 for a base of 1, +-1 for -1
    (by the exponent's parity), 0 otherwise; ``r`` holds the non-negative exponents' powers."""
    neg = b < 0
    if not np.any(neg):
        return r
    odd = (b & 1) == 1
    one = np.ones_like(r)
    special = np.where(a == 1, one, np.where(a == -1, np.where(odd, -one, one), np.zeros_like(r)))
    return np.where(neg, special, r)


def _power(a: Any, b: Any) -> np.ndarray:
    """numpy's power, except integer powers with negative exponents (numpy raises): PyTorch's
    answer, as the Cube kernels give it."""
    t = getattr(a, "dtype", None)
    if t is None:
        t = b.dtype
    if t.kind == "i":
        aa = np.asarray(a, dtype=t)
        bb = np.asarray(b, dtype=t)
        if np.any(bb < 0):
            r = np.power(aa, np.maximum(bb, 0))
            return _int_negative_power(r, np.broadcast_to(aa, r.shape), np.broadcast_to(bb, r.shape))
    with np.errstate(all="ignore"):
        return np.power(a, b)


def _float_reduce(f: Any) -> Any:
    def op(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        if p.dtype in _HALF:
            return f(p, axis=dims, keepdims=keepdim, dtype=_F32).astype(p.dtype)
        return f(p, axis=dims, keepdims=keepdim)

    return op


def _plain_reduce(f: Any) -> Any:
    def op(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        return f(p, axis=dims, keepdims=keepdim)

    return op


def _arg_reduce(f: Any) -> Any:
    def op(p: np.ndarray, dim: int, keepdim: bool) -> np.ndarray:
        return f(p, axis=dim, keepdims=keepdim).astype(np.int64, copy=False)

    return op


def _swap(f: Any) -> Any:
    def op(p: np.ndarray, s: Any) -> np.ndarray:
        return f(s, p)

    return op


def _fit(p: np.ndarray, like: np.ndarray, dim: int) -> np.ndarray:
    """``p`` cut to ``like``'s extent on every dim but ``dim`` (torch's gather/scatter
    allow the index to be smaller than the input there)."""
    if all(a == b for i, (a, b) in enumerate(zip(p.shape, like.shape)) if i != dim):
        return p
    return p[tuple(slice(None) if i == dim else slice(0, n) for i, n in enumerate(like.shape))]


def _cut(src: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``src`` cut to ``index``'s extent on every dim (only that part is scattered)."""
    if src.shape == index.shape:
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _full_index(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


class FlexBackend(Backend):
    name = "flex"
    eager = True

    # ------------------------------------------------------------------ data
    def dtype(self, p: np.ndarray) -> dt.DType:
        return _NP2DT[p.dtype]

    def from_data(self, array: Any, dtype: dt.DType) -> np.ndarray:
        if tracing.active:
            with tracing.span("from_data", layer="flex"):
                return np.array(array, dtype=dtype.np, copy=True)
        return np.array(array, dtype=dtype.np, copy=True)

    def into_data(self, p: np.ndarray) -> np.ndarray:
        if tracing.active:
            with tracing.span("into_data", layer="flex"):
                return p
        return p

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> np.ndarray:
        return np.full(shape, value, dtype=dtype.np)

    def random(self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int,
               a: float, b: float) -> np.ndarray:
        from ...random import philox_values

        return philox_values(dist, shape, dtype, seed, offset, a, b)

    # ------------------------------------------------------------------ elementwise
    neg = staticmethod(np.negative)
    abs = staticmethod(np.absolute)
    sign = staticmethod(_sign)
    exp = staticmethod(_quiet(np.exp))
    log = staticmethod(_quiet(np.log))
    log1p = staticmethod(_quiet(np.log1p))
    expm1 = staticmethod(_quiet(np.expm1))
    sqrt = staticmethod(_quiet(np.sqrt))
    rsqrt = staticmethod(_rsqrt)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    tan = staticmethod(np.tan)
    tanh = staticmethod(np.tanh)
    sigmoid = staticmethod(_sigmoid)
    relu = staticmethod(_relu)
    erf = staticmethod(_erf)
    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)
    round = staticmethod(np.rint)
    trunc = staticmethod(np.trunc)
    reciprocal = staticmethod(_reciprocal)

    logical_not = staticmethod(np.logical_not)
    isnan = staticmethod(np.isnan)
    isinf = staticmethod(np.isinf)
    isfinite = staticmethod(np.isfinite)

    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    div = staticmethod(_quiet(np.divide))
    floor_div = staticmethod(_quiet(np.floor_divide))
    remainder = staticmethod(_quiet(np.remainder))
    pow = staticmethod(_power)
    # bfloat16 comparisons warn on NaN (ml_dtypes); NaN propagation is the answer here
    maximum = staticmethod(_quiet(np.maximum))
    minimum = staticmethod(_quiet(np.minimum))
    atan2 = staticmethod(np.arctan2)
    eq = staticmethod(np.equal)
    ne = staticmethod(np.not_equal)
    lt = staticmethod(np.less)
    le = staticmethod(np.less_equal)
    gt = staticmethod(np.greater)
    ge = staticmethod(np.greater_equal)
    bitwise_and = staticmethod(np.bitwise_and)
    bitwise_or = staticmethod(np.bitwise_or)
    bitwise_xor = staticmethod(np.bitwise_xor)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)
    logical_xor = staticmethod(np.logical_xor)

    # numpy treats Python scalars as weak, so the array's dtype wins (the Tensor API has
    # already converted numpy scalars to Python ones and lifted the array's dtype).
    add_scalar = staticmethod(np.add)
    sub_scalar = staticmethod(np.subtract)
    mul_scalar = staticmethod(np.multiply)
    div_scalar = staticmethod(_quiet(np.divide))
    floor_div_scalar = staticmethod(_quiet(np.floor_divide))
    remainder_scalar = staticmethod(_quiet(np.remainder))
    pow_scalar = staticmethod(_power)
    maximum_scalar = staticmethod(np.maximum)
    minimum_scalar = staticmethod(np.minimum)
    eq_scalar = staticmethod(np.equal)
    ne_scalar = staticmethod(np.not_equal)
    lt_scalar = staticmethod(np.less)
    le_scalar = staticmethod(np.less_equal)
    gt_scalar = staticmethod(np.greater)
    ge_scalar = staticmethod(np.greater_equal)
    rsub_scalar = staticmethod(_swap(np.subtract))
    rdiv_scalar = staticmethod(_swap(_quiet(np.divide)))
    rfloor_div_scalar = staticmethod(_swap(_quiet(np.floor_divide)))
    rremainder_scalar = staticmethod(_swap(_quiet(np.remainder)))
    rpow_scalar = staticmethod(_swap(_power))

    def cast(self, p: np.ndarray, dtype: dt.DType) -> np.ndarray:
        with np.errstate(all="ignore"):
            return p.astype(dtype.np)

    def where(self, cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(cond, a, b)

    def clamp(self, p: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
        t = p.dtype.type
        if lo is not None:
            p = np.maximum(p, t(lo))
        if hi is not None:
            p = np.minimum(p, t(hi))
        return p

    def masked_fill(self, p: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
        out = np.array(p, copy=True)  # copyto with a mask is ~10x faster than np.where
        np.copyto(out, p.dtype.type(value), where=mask)
        return out

    # ------------------------------------------------------------------ reductions
    sum = staticmethod(_float_reduce(np.sum))
    prod = staticmethod(_float_reduce(np.prod))
    max = staticmethod(_plain_reduce(np.max))
    min = staticmethod(_plain_reduce(np.min))
    all = staticmethod(_plain_reduce(np.all))
    any = staticmethod(_plain_reduce(np.any))
    argmax = staticmethod(_arg_reduce(np.argmax))
    argmin = staticmethod(_arg_reduce(np.argmin))

    def cumsum(self, p: np.ndarray, dim: int) -> np.ndarray:
        if p.dtype in _HALF:
            return np.cumsum(p, axis=dim, dtype=_F32).astype(p.dtype)
        return np.cumsum(p, axis=dim)

    def mean(self, p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        if p.dtype in _HALF:
            return np.mean(p, axis=dims, keepdims=keepdim, dtype=_F32).astype(p.dtype)
        return np.mean(p, axis=dims, keepdims=keepdim)

    def logsumexp(self, p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        x = p.astype(_F32) if p.dtype in _HALF else p
        if x.size == 0:  # an empty slice sums to 0: log 0 = -inf (numpy's max has no identity)
            with np.errstate(all="ignore"):
                out = np.log(np.sum(np.exp(x), axis=dims, keepdims=keepdim))
            return out.astype(p.dtype, copy=False)
        with np.errstate(all="ignore"):
            m = np.max(x, axis=dims, keepdims=True)
            m = np.where(np.isinf(m), x.dtype.type(0), m)
            out = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
        if not keepdim:
            out = np.squeeze(out, axis=dims)
        return out.astype(p.dtype, copy=False)

    def log_softmax(self, p: np.ndarray, dim: int) -> np.ndarray:
        # PyTorch's (x - max) - log(sum(exp(x - max))) with the raw max: an infinite max makes
        # the whole row nan ([inf, 1] -> [nan, nan]), as torch
        if p.size == 0:
            return p
        x = p.astype(_F32) if p.dtype in _HALF else p
        with np.errstate(all="ignore"):
            m = np.max(x, axis=dim, keepdims=True)
            lse = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)) + m
            return np.subtract(p, lse.astype(p.dtype, copy=False))

    def softmax(self, p: np.ndarray, dim: int) -> np.ndarray:
        if p.size == 0:
            return p
        x = p.astype(_F32) if p.dtype in _HALF else p
        with np.errstate(all="ignore"):
            e = np.exp(x - np.max(x, axis=dim, keepdims=True))
            e /= np.sum(e, axis=dim, keepdims=True)
        return e.astype(p.dtype, copy=False)

    # ------------------------------------------------------------------ linear algebra
    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype in _HALF:
            return np.matmul(a.astype(_F32), b.astype(_F32)).astype(a.dtype)
        return np.matmul(a, b)

    # ------------------------------------------------------------------ shape
    reshape = staticmethod(np.reshape)
    permute = staticmethod(np.transpose)
    expand = staticmethod(np.broadcast_to)

    def slice(self, p: np.ndarray, slices: tuple[slice, ...]) -> np.ndarray:
        return p[slices]

    def flip(self, p: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
        return np.flip(p, dims)

    def contiguous(self, p: np.ndarray) -> np.ndarray:
        return p if p.flags.c_contiguous else np.array(p, copy=True, order="C")

    def copy(self, p: np.ndarray) -> np.ndarray:
        return p  # primitives are immutable: sharing is a copy

    def cat(self, ps: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.concatenate(ps, axis=dim)

    def pad(self, p: np.ndarray, pads: tuple[tuple[int, int], ...], value: Any) -> np.ndarray:
        out = np.full(tuple(n + a + b for n, (a, b) in zip(p.shape, pads)), value, dtype=p.dtype)
        out[tuple(slice(a, a + n) for n, (a, _) in zip(p.shape, pads))] = p
        return out

    # ------------------------------------------------------------------ indexing
    def gather(self, p: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
        return np.take_along_axis(_fit(p, index, dim), index, axis=dim)

    def scatter(self, p: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
        out = np.array(p, copy=True)
        out[_full_index(index, dim)] = _cut(src, index)
        return out

    def scatter_add(self, p: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
        half = p.dtype in _HALF
        out = np.array(p, dtype=_F32 if half else p.dtype, copy=True)
        np.add.at(out, _full_index(index, dim), _cut(src, index))
        return out.astype(p.dtype) if half else out

    def index_select(self, p: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
        return np.take(p, index, axis=dim)

    def index(self, p: np.ndarray, indices: tuple[np.ndarray, ...]) -> np.ndarray:
        return p[indices]

    def index_put(self, p: np.ndarray, indices: tuple[np.ndarray, ...], values: np.ndarray,
                  accumulate: bool) -> np.ndarray:
        half = accumulate and p.dtype in _HALF
        out = np.array(p, dtype=_F32 if half else p.dtype, copy=True)
        if accumulate:
            np.add.at(out, indices, values)
        else:
            out[indices] = values
        return out.astype(p.dtype) if half else out

    def slice_assign(self, p: np.ndarray, slices: tuple[slice, ...], values: np.ndarray) -> np.ndarray:
        out = np.array(p, copy=True)
        out[slices] = values
        return out

    def tril(self, p: np.ndarray, diagonal: int) -> np.ndarray:
        return np.tril(p, diagonal)

    def triu(self, p: np.ndarray, diagonal: int) -> np.ndarray:
        return np.triu(p, diagonal)
