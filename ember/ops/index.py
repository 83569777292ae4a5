"""Indexing ops: gather, scatter, scatter_add, index_select, advanced ``index`` and
``index_put``, and ``slice_assign``.

Index tensors are int64 primitives; the Tensor API has checked their ranges where it can do
so without draining a lazy stream (``Backend.is_ready``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from ._numpy import F32, HALF
from .grad import Rule, fit, zeros
from .registry import Op, register

Shape = tuple[int, ...]


# ----------------------------------------------------------------------------- numpy forms
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


def _gather(p: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    return np.take_along_axis(_fit(p, index, dim), index, axis=dim)


def _scatter(p: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = np.array(p, copy=True)
    out[_full_index(index, dim)] = _cut(src, index)
    return out


def _scatter_add(p: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    half = p.dtype in HALF
    out = np.array(p, dtype=F32 if half else p.dtype, copy=True)
    np.add.at(out, _full_index(index, dim), _cut(src, index))
    return out.astype(p.dtype) if half else out


def _index_put(p: np.ndarray, indices: tuple[np.ndarray, ...], values: np.ndarray, accumulate: bool) -> np.ndarray:
    half = accumulate and p.dtype in HALF
    out = np.array(p, dtype=F32 if half else p.dtype, copy=True)
    if accumulate:
        np.add.at(out, indices, values)
    else:
        out[indices] = values
    return out.astype(p.dtype) if half else out


def _slice_assign(p: np.ndarray, slices: tuple[slice, ...], values: np.ndarray) -> np.ndarray:
    out = np.array(p, copy=True)
    out[slices] = values
    return out


# ----------------------------------------------------------------------------- gradient rules
def _index_select_grad(B: Any, g: Any, out: Any, p: Shape, dim: int, index: Any) -> Any:
    # scatter-add g back along dim; the 1-D index broadcast to g's shape says where
    line = tuple(index.shape[0] if i == dim else 1 for i in range(len(p)))
    return B.scatter_add(zeros(B, p, g), dim, B.expand(B.reshape(index, line), g.shape), g)


def _index_put_grad(B: Any, g: Any, out: Any, p: Shape, indices: tuple[Any, ...], values: Shape,
                    accumulate: bool) -> tuple[Any, ...]:
    # overwritten positions take no gradient to p; values get what their positions received
    gp = g if accumulate else B.index_put(g, indices, zeros(B, (), g), False)
    return (gp, *(None for _ in indices), B.index(g, indices))


def _index_out(p: Any, indices: tuple[Any, ...]) -> tuple[Shape, Any]:
    return S.broadcast_many(i.shape for i in indices) + p.shape[len(indices):], p.dtype


register(
    Op("gather", "index", lambda p, dim, index: (index.shape, p.dtype), flex=_gather,
       grad=Rule("index", lambda B, g, out, p, dim, index: B.scatter_add(zeros(B, p, g), dim, index, g))),
    Op("scatter", "index", lambda p, dim, index, src: (p.shape, p.dtype), flex=_scatter,
       grad=Rule("index", lambda B, g, out, p, dim, index, src: (
           B.scatter(g, dim, index, zeros(B, index.shape, g)), None, fit(B, B.gather(g, dim, index), src)))),
    Op("scatter_add", "index", lambda p, dim, index, src: (p.shape, p.dtype), flex=_scatter_add,
       grad=Rule("index", lambda B, g, out, p, dim, index, src: (g, None, fit(B, B.gather(g, dim, index), src)))),
    Op("index_select", "index", lambda p, dim, index: (p.shape[:dim] + index.shape + p.shape[dim + 1:], p.dtype),
       flex=lambda p, dim, index: np.take(p, index, axis=dim), grad=Rule("index", _index_select_grad)),
    Op("index", "index", _index_out, flex=lambda p, indices: p[indices],
       grad=Rule("indices", lambda B, g, out, p, indices: B.index_put(zeros(B, p, g), indices, g, True))),
    Op("index_put", "index", lambda p, indices, values, acc: (p.shape, p.dtype), flex=_index_put,
       grad=Rule("indices", _index_put_grad)),
    Op("slice_assign", "index", lambda p, slices, values: (p.shape, p.dtype), flex=_slice_assign,
       grad=Rule("", lambda B, g, out, p, slices, values: (
           B.slice_assign(g, slices, zeros(B, (), g)), B.slice(g, slices)))),
)
