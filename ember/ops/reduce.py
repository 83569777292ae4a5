"""Reductions, arg-reductions, scans (cumsum, cumprod; cumargmax / cumargmin, the indices of the
running extremes) and the normalising reductions (mean, var, logsumexp,
softmax, log_softmax).

``dims`` is a non-empty tuple of non-negative dims (the Tensor API expands "all dims"); a scan
or a softmax runs along one ``dim``. Half types accumulate in float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ._numpy import F32, HALF, float_reduce, plain_reduce
from .elementwise import same
from .grad import Rule, kept, unreduce
from .registry import Op, register

Shape = tuple[int, ...]

#: (shape, dims, keepdim) -> reduced shape: a training step reduces the same few layouts again
_REDUCED: dict[tuple[Any, ...], Shape] = {}


def reduced(shape: Shape, dims: tuple[int, ...], keepdim: bool) -> Shape:
    """``shape`` reduced over ``dims`` (kept as size 1 when ``keepdim``)."""
    if type(dims) is not tuple:
        dims = tuple(dims)
    key = (shape, dims, keepdim)
    out = _REDUCED.get(key)
    if out is None:
        if keepdim:
            out = tuple(1 if i in dims else n for i, n in enumerate(shape))
        else:
            out = tuple(n for i, n in enumerate(shape) if i not in dims)
        if len(_REDUCED) >= 4096:
            _REDUCED.clear()
        _REDUCED[key] = out
    return out


def _reduce(p: Any, dims: tuple[int, ...], keepdim: bool) -> tuple[Shape, dt.DType]:
    return reduced(p.shape, dims, keepdim), p.dtype


def _reduce_bool(p: Any, dims: tuple[int, ...], keepdim: bool) -> tuple[Shape, dt.DType]:
    return reduced(p.shape, dims, keepdim), dt.bool_


def _arg_reduce_out(p: Any, dim: int, keepdim: bool) -> tuple[Shape, dt.DType]:
    return reduced(p.shape, (dim,), keepdim), dt.int64


def _arg_scan_out(p: Any, dim: int) -> tuple[Shape, dt.DType]:
    return p.shape, dt.int64



# ----------------------------------------------------------------------------- numpy forms
def _arg_reduce(f: Any) -> Any:
    def op(p: np.ndarray, dim: int, keepdim: bool) -> np.ndarray:
        return f(p, axis=dim, keepdims=keepdim).astype(np.int64, copy=False)

    return op


def _scan(f: Any) -> Any:
    def op(p: np.ndarray, dim: int) -> np.ndarray:
        if p.dtype in HALF:
            return f(p, axis=dim, dtype=F32).astype(p.dtype)
        return f(p, axis=dim)

    return op


def _cumarg(largest: bool) -> Any:
    """The numpy form of ``cumargmax`` / ``cumargmin``: at each k, the index of the running
    extreme of p[:k + 1] by torch's rule (a later element equal to the extreme takes over; a NaN
    takes over whatever came before, so after the first NaN the index is the last NaN's)."""
    accumulate = np.maximum.accumulate if largest else np.minimum.accumulate

    def op(p: np.ndarray, dim: int) -> np.ndarray:
        a = p
        if a.dtype.kind == "f" and a.dtype.itemsize < 4 or a.dtype.kind not in "fiub":
            a = a.astype(np.float32)  # float16 / bfloat16: exact in float32
        elif a.dtype == np.bool_:
            a = a.astype(np.uint8)
        pos = np.arange(a.shape[dim], dtype=np.int64).reshape((-1,) + (1,) * (a.ndim - dim - 1))
        pos = np.broadcast_to(pos, a.shape)
        with np.errstate(invalid="ignore"):
            # the last position j <= k holding the running extreme: where a[j] equals the running
            # extreme at j (that extreme only grows, so the last such j holds the one at k)
            hit = a == accumulate(a, axis=dim)
            idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=dim)
        if a.dtype.kind == "f":
            nan = np.isnan(a)
            seen = np.logical_or.accumulate(nan, axis=dim)
            idx = np.where(seen, np.maximum.accumulate(np.where(nan, pos, 0), axis=dim), idx)
        return idx.astype(np.int64, copy=False)

    return op


def _mean(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
    if p.dtype in HALF:
        return np.mean(p, axis=dims, keepdims=keepdim, dtype=F32).astype(p.dtype)
    return np.mean(p, axis=dims, keepdims=keepdim)


def _logsumexp(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
    x = p.astype(F32) if p.dtype in HALF else p
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


def _log_softmax(p: np.ndarray, dim: int) -> np.ndarray:
    # PyTorch's (x - max) - log(sum(exp(x - max))) with the raw max: an infinite max makes
    # the whole row nan ([inf, 1] -> [nan, nan]), as torch
    if p.size == 0:
        return p
    x = p.astype(F32) if p.dtype in HALF else p
    with np.errstate(all="ignore"):
        m = np.max(x, axis=dim, keepdims=True)
        lse = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)) + m
        return np.subtract(p, lse.astype(p.dtype, copy=False))


def _softmax(p: np.ndarray, dim: int) -> np.ndarray:
    if p.size == 0:
        return p
    x = p.astype(F32) if p.dtype in HALF else p
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=dim, keepdims=True))
        e /= np.sum(e, axis=dim, keepdims=True)
    return e.astype(p.dtype, copy=False)


# ----------------------------------------------------------------------------- decompositions
def _mean_compose(B: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    n = 1
    for d in dims:
        n *= p.shape[d]
    return B.div_scalar(B.sum(p, dims, keepdim), n)


def _var_compose(B: Any, p: Any, dims: tuple[int, ...], correction: float, keepdim: bool) -> Any:
    n = 1
    for d in dims:
        n *= p.shape[d]
    centered = B.sub(p, B.mean(p, dims, True))
    ss = B.sum(B.square(centered), dims, keepdim)
    return B.div_scalar(ss, max(n - correction, 0))


def _logsumexp_compose(B: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    m = B.detach(B.max(p, dims, True))
    # an all -inf slice has max -inf; shift by 0 there so the result stays -inf, not nan
    m = B.where(B.isinf(m), B.full(m.shape, 0.0, B.dtype(m)), m)
    s = B.log(B.sum(B.exp(B.sub(p, m)), dims, True))
    out = B.add(s, m)
    if not keepdim:
        out = B.reshape(out, tuple(n for i, n in enumerate(p.shape) if i not in dims))
    return out


def _log_softmax_compose(B: Any, p: Any, dim: int) -> Any:
    """x - (log(sum(exp(x - m))) + m) with m the raw max (PyTorch: an infinite max gives a
    nan row; logsumexp alone shifts by 0 there)."""
    m = B.detach(B.max(p, (dim,), True))
    s = B.add(B.log(B.sum(B.exp(B.sub(p, m)), (dim,), True)), m)
    return B.sub(p, s)


def _softmax_compose(B: Any, p: Any, dim: int) -> Any:
    m = B.detach(B.max(p, (dim,), True))
    e = B.exp(B.sub(p, m))
    return B.div(e, B.sum(e, (dim,), True))


# ----------------------------------------------------------------------------- gradient rules
def _prod(B: Any, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """d prod / d p_i = product of the others, without dividing by zero: a slice with no zero
    gives prod / p_i; with exactly one zero, only the zero gets the product of the rest;
    with two or more, everything is 0. Data-independent, so lazy backends can run it."""
    d = B.dtype(g)
    is0 = B.eq_scalar(p, 0.0)
    nonzero_prod = B.prod(B.masked_fill(p, is0, 1.0), dims, True)
    zeros_per_slice = B.sum(B.cast(is0, d), dims, True)
    others = B.masked_fill(B.div(nonzero_prod, B.masked_fill(p, is0, 1.0)),
                           B.ne_scalar(zeros_per_slice, 0.0), 0.0)
    lone_zero = B.logical_and(is0, B.eq_scalar(zeros_per_slice, 1.0))
    return B.mul(kept(B, g, p.shape, dims, keepdim), B.where(lone_zero, nonzero_prod, others))


def _extreme(B: Any, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """max/min: the gradient is shared evenly among the elements equal to the result
    (PyTorch's amax/amin)."""
    d = B.dtype(g)
    hit = B.cast(B.eq(p, kept(B, out, p.shape, dims, keepdim)), d)
    share = B.div(kept(B, g, p.shape, dims, keepdim), B.sum(hit, dims, True))
    return B.mul(hit, share)


def _logsumexp_grad(B: Any, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    return B.mul(kept(B, g, p.shape, dims, keepdim), B.exp(B.sub(p, kept(B, out, p.shape, dims, keepdim))))


def _rev_cumsum(B: Any, x: Any, dim: int) -> Any:
    return B.flip(B.cumsum(B.flip(x, (dim,)), dim), (dim,))


def _cumprod_grad(B: Any, g: Any, out: Any, p: Any, dim: int) -> Any:
    """d/dx_i of sum_j g_j prod_{k<=j} x_k, exact with zeros and data-independent.

    Before a slice's first zero z: sum_{j>=i} g_j out_j / x_i (out_j is 0 from z on). At z:
    sum_{j>=z} g_j prod_{k<=j, k!=z} x_k, the reversed cumsum of g times the cumprod of x
    with x_z taken as 1. After z: 0 (every product through i also runs through z)."""
    d = B.dtype(g)
    is0 = B.eq_scalar(p, 0.0)
    first = B.logical_and(is0, B.eq_scalar(B.cumsum(B.cast(is0, d), dim), 1.0))
    before = B.div(_rev_cumsum(B, B.mul(g, out), dim), B.masked_fill(p, is0, 1.0))
    at_zero = _rev_cumsum(B, B.mul(g, B.cumprod(B.masked_fill(p, first, 1.0), dim)), dim)
    return B.where(first, at_zero, B.masked_fill(before, is0, 0.0))


def cumprod(input: Any, dim: int, dtype: Any = None) -> Any:
    """As ``torch.cumprod``: running products along ``dim``; integer and bool inputs give int64
    unless ``dtype`` says otherwise."""
    d = dt.as_dtype(dtype) if dtype is not None else (
        dt.int64 if input._dt.category != dt.FLOAT else input._dt)
    t = input if input._dt is d else input.to(d)
    k = S.norm_dim(dim, input.ndim)
    if input.ndim == 0:
        return t
    return t._op("cumprod", k, dtype=d)


# ----------------------------------------------------------------------------- entries
register(
    Op("sum", "reduce", _reduce, flex=float_reduce(np.sum),
       grad=Rule("", lambda B, g, out, p, dims, keepdim: unreduce(B, g, p, dims, keepdim))),
    Op("prod", "reduce", _reduce, flex=float_reduce(np.prod), grad=Rule("p", _prod)),
    Op("max", "reduce", _reduce, flex=plain_reduce(np.max), grad=Rule("p out", _extreme)),
    Op("min", "reduce", _reduce, flex=plain_reduce(np.min), grad=Rule("p out", _extreme)),
    Op("all", "reduce", _reduce_bool, flex=plain_reduce(np.all)),
    Op("any", "reduce", _reduce_bool, flex=plain_reduce(np.any)),
    Op("argmax", "arg_reduce", _arg_reduce_out, flex=_arg_reduce(np.argmax)),
    Op("argmin", "arg_reduce", _arg_reduce_out, flex=_arg_reduce(np.argmin)),
    Op("cumsum", "scan", same, flex=_scan(np.cumsum),
       grad=Rule("", lambda B, g, out, p, dim: _rev_cumsum(B, g, dim))),
    Op("cumprod", "scan", same, front=cumprod, flex=_scan(np.cumprod), grad=Rule("p out", _cumprod_grad)),
    # the int64 index of the running max / min (torch's cummax / cummin indices); no gradient:
    # the Tensor API gathers the values through them (``ember/sorting.py``), which gives torch's
    # gradient (each g scattered to the index it came from)
    Op("cumargmax", "scan", _arg_scan_out, flex=_cumarg(True)),
    Op("cumargmin", "scan", _arg_scan_out, flex=_cumarg(False)),
    # composites with a kernel on the Cube backend and a dedicated rule: one node and fewer
    # saved values than their expansion
    Op("mean", "normalize", _reduce, flex=_mean, compose=_mean_compose),
    Op("var", "normalize", lambda p, dims, correction, keepdim: (reduced(p.shape, dims, keepdim), p.dtype),
       compose=_var_compose),
    Op("logsumexp", "normalize", _reduce, flex=_logsumexp, compose=_logsumexp_compose,
       grad=Rule("p out", _logsumexp_grad)),
    Op("softmax", "normalize", same, flex=_softmax, compose=_softmax_compose,
       grad=Rule("out", lambda B, g, out, p, dim: B.mul(out, B.sub(g, B.sum(B.mul(g, out), (dim,), True))))),
    Op("log_softmax", "normalize", same, flex=_log_softmax, compose=_log_softmax_compose,
       grad=Rule("out", lambda B, g, out, p, dim: B.sub(g, B.mul(B.exp(out), B.sum(g, (dim,), True))))),
)

__all__ = ["reduced", "cumprod"]
