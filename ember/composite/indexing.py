"""Indexing compositions: ``take``, ``take_along_dim``, ``masked_select``, ``index_add`` /
``index_copy`` / ``index_fill``, ``index_put``, ``put`` and the ``*_scatter`` functions.

They lower onto ``gather``/``scatter``/``index_select`` and ``t[key] = v``; the ones whose result
shape depends on values (``masked_select``) read them on the host.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shape as S
from ..creation import arange
from ..errors import ShapeError
from ..tensor import Tensor
from ..tensor.indexing import _expand_key, _Plan, _value_tensor
from ._common import _where

__all__ = [
    "take_along_dim", "masked_select", "index_fill", "index_add", "index_copy", "take", "index_put", "put",
    "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter"
]

#: the functions torch also has as Tensor methods
TENSOR_METHODS = (
    "take_along_dim", "masked_select", "index_fill", "index_add", "index_copy", "take", "index_put", "put",
    "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter",
)


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
    pos = arange(n, device=input.device)
    hit = pos.unsqueeze(-1).eq(idx).any(-1) if idx.numel() else pos.lt(0)
    view = [1] * input.ndim
    if input.ndim:
        view[d] = n
    mask = hit.reshape(tuple(view))
    if isinstance(value, Tensor):
        return _where(mask, value.to(input._dt), input)
    return input.masked_fill(mask, value)


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


def index_put(input: Tensor, indices: Sequence[Any], values: Tensor, accumulate: bool = False) -> Tensor:
    """As ``torch.index_put``."""
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


def argwhere(input: Tensor) -> Tensor:
    """As ``torch.argwhere`` (``nonzero``)."""
    return input.nonzero()
