"""Layout and view ops: reshape, permute, expand, slice, flip, contiguous, copy, cat, pad,
tril/triu, and the data-movement composites roll and diagonal.

``reshape``, ``permute``, ``expand`` and ``slice`` are views on every backend that has
strides (they launch nothing); the rest copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import ShapeError
from .elementwise import same
from .grad import Rule, sum_to, zeros
from .registry import Op, register

Shape = tuple[int, ...]



def _slice_out(p: Any, slices: tuple[slice, ...]) -> tuple[Shape, dt.DType]:
    lengths = tuple(len(range(*s.indices(n))) for s, n in zip(slices, p.shape))
    return lengths + p.shape[len(slices):], p.dtype


def _cat_out(ps: Any, dim: int) -> tuple[Shape, dt.DType]:
    first = ps[0]
    n = sum(p.shape[dim] for p in ps)
    return first.shape[:dim] + (n,) + first.shape[dim + 1:], first.dtype


# ----------------------------------------------------------------------------- numpy forms
def _contiguous(p: np.ndarray) -> np.ndarray:
    return p if p.flags.c_contiguous else np.array(p, copy=True, order="C")


def _pad(p: np.ndarray, pads: tuple[tuple[int, int], ...], value: Any) -> np.ndarray:
    out = np.full(tuple(n + a + b for n, (a, b) in zip(p.shape, pads)), value, dtype=p.dtype)
    out[tuple(slice(a, a + n) for n, (a, _) in zip(p.shape, pads))] = p
    return out


def _diagonal_flex(p: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    # numpy's diagonal is a read-only view; primitives are never mutated, so sharing is safe
    return np.diagonal(p, offset, dim1, dim2)


# ----------------------------------------------------------------------------- decompositions
def _roll_compose(B: Any, p: Any, shifts: tuple[int, ...], dims: tuple[int, ...]) -> Any:
    """Each rolled dim as two slices swapped (``shifts`` already reduced modulo the dim)."""
    for k, d in zip(shifts, dims):
        n = p.shape[d]
        if n == 0 or k == 0:
            continue
        head = tuple(slice(n - k, n, 1) if i == d else slice(0, m, 1) for i, m in enumerate(p.shape))
        tail = tuple(slice(0, n - k, 1) if i == d else slice(0, m, 1) for i, m in enumerate(p.shape))
        p = B.cat([B.slice(p, head), B.slice(p, tail)], d)
    return p


def diagonal_index(n: int, m: int, offset: int) -> np.ndarray:
    """Flat positions, in an (n, m) matrix, of the diagonal ``offset`` (int64)."""
    if offset >= 0:
        length = max(0, min(n, m - offset))
        return (np.arange(length) * m + np.arange(length) + offset).astype(np.int64)
    length = max(0, min(n + offset, m))
    return ((np.arange(length) - offset) * m + np.arange(length)).astype(np.int64)


def _diagonal_compose(B: Any, p: Any, offset: int, dim1: int, dim2: int) -> Any:
    """The (dim1, dim2) planes moved last and flattened, then one ``index_select``."""
    rest = tuple(i for i in range(len(p.shape)) if i not in (dim1, dim2))
    x = B.permute(p, rest + (dim1, dim2))
    n, m = x.shape[-2], x.shape[-1]
    flat = B.reshape(B.contiguous(x), x.shape[:-2] + (n * m,))
    idx = diagonal_index(n, m, offset)
    if idx.size == 0:
        return B.slice(flat, tuple(slice(0, k, 1) for k in flat.shape[:-1]) + (slice(0, 0, 1),))
    return B.index_select(flat, len(flat.shape) - 1, B.from_data(idx, dt.int64))


# ----------------------------------------------------------------------------- gradient rules
def _cat_grad(B: Any, g: Any, out: Any, ps: tuple[Shape, ...], dim: int) -> tuple[Any, ...]:
    grads, start = [], 0
    for shape in ps:
        cut = tuple(slice(start, start + shape[dim], 1) if i == dim else slice(0, n, 1)
                    for i, n in enumerate(g.shape))
        grads.append(B.slice(g, cut))
        start += shape[dim]
    return tuple(grads)


def _inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


def _roll_grad(B: Any, g: Any, out: Any, p: Shape, shifts: tuple[int, ...], dims: tuple[int, ...]) -> Any:
    back = tuple((p[d] - k) % p[d] if p[d] else 0 for k, d in zip(shifts, dims))
    return B.roll(g, back, dims)


def _diagonal_grad(B: Any, g: Any, out: Any, p: Shape, offset: int, dim1: int, dim2: int) -> Any:
    """The gradient scattered back onto the diagonal of zero (dim1, dim2) planes."""
    rest = tuple(i for i in range(len(p)) if i not in (dim1, dim2))
    n, m = p[dim1], p[dim2]
    lead = tuple(p[i] for i in rest)
    idx = diagonal_index(n, m, offset)
    flat = zeros(B, lead + (n * m,), g)
    if idx.size:
        line = B.from_data(idx, dt.int64)
        index = B.expand(B.reshape(line, (1,) * len(lead) + (idx.size,)), lead + (idx.size,))
        flat = B.scatter(flat, len(lead), index, g)
    planes = B.reshape(flat, lead + (n, m))
    return B.permute(planes, _inverse(rest + (dim1, dim2)))


def roll(input: Any, shifts: Any, dims: Any = None) -> Any:
    """As ``torch.roll``: elements shifted along ``dims`` and wrapped around; without ``dims``
    the tensor is rolled flattened and reshaped back."""
    shifts = tuple(int(s) for s in shifts) if isinstance(shifts, Sequence) else (int(shifts),)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll without dims takes one shift, got {len(shifts)}")
        return roll(input.flatten(), shifts, 0).reshape(input.shape)
    dims = tuple(dims) if isinstance(dims, Sequence) else (dims,)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} differ in length")
    keep_s, keep_d = [], []
    for s, d in zip(shifts, dims):
        d = S.norm_dim(d, input.ndim)
        n = input.shape[d]
        if n and s % n:
            keep_s.append(s % n)
            keep_d.append(d)
    if not keep_d:
        return input.clone()
    return input._op("roll", tuple(keep_s), tuple(keep_d))


def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """As ``torch.diagonal``: the diagonal ``offset`` of the (dim1, dim2) matrices as the last
    dim (a copy: ember tensors are values, so no view writes through)."""
    d1, d2 = S.norm_dim(dim1, input.ndim), S.norm_dim(dim2, input.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return input._op("diagonal", int(offset), d1, d2)


register(
    Op("reshape", "shape", recompute=True, out=lambda p, shape: (tuple(shape), p.dtype), flex=np.reshape, replay=False,
       grad=Rule("", lambda B, g, out, p, shape: B.reshape(g, p))),
    Op("permute", "shape", recompute=True, out=lambda p, axes: (tuple(p.shape[a] for a in axes), p.dtype),
       flex=np.transpose, replay=False, grad=Rule("", lambda B, g, out, p, axes: B.permute(g, _inverse(axes)))),
    Op("expand", "shape", recompute=True, out=lambda p, shape: (tuple(shape), p.dtype), flex=np.broadcast_to,
       replay=False,       grad=Rule("", lambda B, g, out, p, shape: sum_to(B, g, p))),
    Op("slice", "shape", recompute=True, out=_slice_out, flex=lambda p, slices: p[slices], replay=False,
       grad=Rule("", lambda B, g, out, p, slices: B.slice_assign(zeros(B, p, g), slices, g))),
    Op("flip", "shape", recompute=True, out=same, flex=lambda p, dims: np.flip(p, dims),
       grad=Rule("", lambda B, g, out, p, dims: B.flip(g, dims))),
    Op("contiguous", "shape", recompute=True, out=same, flex=_contiguous, grad=Rule("", lambda B, g, out, p: g)),
    # primitives are immutable: on Flex sharing is a copy
    Op("copy", "shape", recompute=True, out=same, flex=lambda p: p, grad=Rule("", lambda B, g, out, p: g)),
    Op("cat", "shape", _cat_out, flex=lambda ps, dim: np.concatenate(ps, axis=dim), grad=Rule("", _cat_grad)),
    Op("pad", "shape", lambda p, pads, v: (tuple(n + a + b for n, (a, b) in zip(p.shape, pads)), p.dtype),
       flex=_pad, grad=Rule("", lambda B, g, out, p, pads, value: B.slice(
           g, tuple(slice(lo, lo + n, 1) for (lo, _), n in zip(pads, p))))),
    Op("tril", "shape", same, flex=np.tril, grad=Rule("", lambda B, g, out, p, diagonal: B.tril(g, diagonal))),
    Op("triu", "shape", same, flex=np.triu, grad=Rule("", lambda B, g, out, p, diagonal: B.triu(g, diagonal))),
    # roll(p, shifts, dims): shifts non-negative and below each dim's size, one per dim
    Op("roll", "shape", front=roll, compose=_roll_compose, flex=lambda p, shifts, dims: np.roll(p, shifts, dims),
       grad=Rule("", _roll_grad)),
    # diagonal(p, offset, dim1, dim2): dim1 != dim2, both non-negative; result: the diagonal last
    # not replayed: its decomposition uploads the index (host work a launch capture does not see)
    Op("diagonal", "shape", front=diagonal, compose=_diagonal_compose, flex=_diagonal_flex, replay=False,
       grad=Rule("", _diagonal_grad)),
)

__all__ = ["diagonal_index", "roll", "diagonal"]
