"""Output shape and dtype of every catalog op, computed at registration.

A lazy handle must know its shape and dtype before anything runs (the Tensor API reads
them to validate the next call). The Tensor API has validated the arguments already, so
these rules only compute; they never check.
"""

from __future__ import annotations

from typing import Any

from ... import _shape as S
from ... import dtype as dt
from ..base import (
    ARG_REDUCE_OPS,
    ARITH_OPS,
    BITWISE_OPS,
    COMPARE_OPS,
    LOGICAL_OPS,
    PREDICATE_OPS,
    REDUCE_OPS,
    REVERSED_SCALAR_OPS,
    SCALAR_OPS,
    UNARY_OPS,
)

Shape = tuple[int, ...]
Out = tuple[Shape, dt.DType]


def _same(p: Any, *_: Any) -> Out:
    return p.shape, p.dtype


def _pred(p: Any, *_: Any) -> Out:
    return p.shape, dt.bool_


def _arith(a: Any, b: Any) -> Out:
    return (a.shape if a.shape == b.shape else S.broadcast(a.shape, b.shape)), a.dtype


def _compare(a: Any, b: Any) -> Out:
    return (a.shape if a.shape == b.shape else S.broadcast(a.shape, b.shape)), dt.bool_


def _compare_scalar(p: Any, s: Any) -> Out:
    return p.shape, dt.bool_


#: (shape, dims, keepdim) -> reduced shape: a training step reduces the same few layouts again
_REDUCED: dict[tuple[Any, ...], Shape] = {}


def _reduced(shape: Shape, dims: tuple[int, ...], keepdim: bool) -> Shape:
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


def _reduce(p: Any, dims: tuple[int, ...], keepdim: bool) -> Out:
    return _reduced(p.shape, dims, keepdim), p.dtype


def _reduce_bool(p: Any, dims: tuple[int, ...], keepdim: bool) -> Out:
    return _reduced(p.shape, dims, keepdim), dt.bool_


def _arg_reduce(p: Any, dim: int, keepdim: bool) -> Out:
    return _reduced(p.shape, (dim,), keepdim), dt.int64


def _matmul(a: Any, b: Any) -> Out:
    return S.broadcast(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), a.dtype


def _slice(p: Any, slices: tuple[slice, ...]) -> Out:
    lengths = tuple(len(range(*s.indices(n))) for s, n in zip(slices, p.shape))
    return lengths + p.shape[len(slices):], p.dtype


def _cat(ps: Any, dim: int) -> Out:
    first = ps[0]
    n = sum(p.shape[dim] for p in ps)
    return first.shape[:dim] + (n,) + first.shape[dim + 1:], first.dtype


def _index(p: Any, indices: tuple[Any, ...]) -> Out:
    return S.broadcast_many(i.shape for i in indices) + p.shape[len(indices):], p.dtype


RULES: dict[str, Any] = {
    **{op: _same for op in UNARY_OPS},
    **{op: _pred for op in PREDICATE_OPS},
    **{op: _arith for op in ARITH_OPS + BITWISE_OPS},
    **{op: _compare for op in COMPARE_OPS + LOGICAL_OPS},
    **{f"{op}_scalar": _same for op in SCALAR_OPS if op not in COMPARE_OPS},
    **{f"{op}_scalar": _compare_scalar for op in COMPARE_OPS},
    **{f"r{op}_scalar": _same for op in REVERSED_SCALAR_OPS},
    **{op: _reduce for op in REDUCE_OPS if op not in ("all", "any")},
    "all": _reduce_bool,
    "any": _reduce_bool,
    **{op: _arg_reduce for op in ARG_REDUCE_OPS},
    "cast": lambda p, d: (p.shape, d),
    "where": lambda c, a, b: (S.broadcast_many((c.shape, a.shape, b.shape)), a.dtype),
    "clamp": _same,
    "masked_fill": _same,
    "cumsum": _same,
    "matmul": _matmul,
    "reshape": lambda p, shape: (tuple(shape), p.dtype),
    "permute": lambda p, axes: (tuple(p.shape[a] for a in axes), p.dtype),
    "expand": lambda p, shape: (tuple(shape), p.dtype),
    "slice": _slice,
    "flip": _same,
    "contiguous": _same,
    "copy": _same,
    "cat": _cat,
    "pad": lambda p, pads, v: (tuple(n + a + b for n, (a, b) in zip(p.shape, pads)), p.dtype),
    "gather": lambda p, dim, index: (index.shape, p.dtype),
    "scatter": lambda p, dim, index, src: (p.shape, p.dtype),
    "scatter_add": lambda p, dim, index, src: (p.shape, p.dtype),
    "index_select": lambda p, dim, index: (p.shape[:dim] + index.shape + p.shape[dim + 1:], p.dtype),
    "index": _index,
    "index_put": lambda p, indices, values, acc: (p.shape, p.dtype),
    "slice_assign": lambda p, slices, values: (p.shape, p.dtype),
    "tril": _same,
    "triu": _same,
    "mean": _reduce,
    "logsumexp": _reduce,
    "var": lambda p, dims, correction, keepdim: (_reduced(p.shape, dims, keepdim), p.dtype),
    "softmax": _same,
    "log_softmax": _same,
}
