"""Indexing for the Tensor API: ``t[key]``, ``t[key] = v``, gather/scatter/index_select.

``t[key]`` follows NumPy/PyTorch rules and lowers onto at most four catalog ops: one
``slice`` for ints/slices, one ``reshape`` that drops int dims and inserts ``None`` dims,
and, for tensor indices, a ``permute`` that brings the indexed dims to the front plus one
``index`` (then a permute back when the indexed dims were adjacent, as NumPy places them).
Index values are checked whenever they can be read without draining a lazy stream.

``IndexingMethods`` is the method table of ``t[key]``, ``gather``, ``scatter``, ... that
``install_methods`` copies onto Tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError
from .core import Tensor, _check_device, _make, _pyscalar, _scalar_for
from .factories import _inplace


def _as_index_tensor(t: Tensor, k: Any) -> Tensor:
    if isinstance(k, Tensor):
        _check_device(t, k)
        return k
    a = np.asarray(k)
    if a.dtype.kind not in "iub":
        raise DTypeError(f"tensors used as indices must be integer or bool, got {a.dtype}")
    return t._from_like(a.astype(np.int64) if a.dtype.kind in "iu" else a)


def _checked_indices(t: Tensor, idx: Tensor, n: int, what: str) -> Tensor:
    """int64 indices in [0, n): negatives wrap once (like Python), others raise."""
    if idx._dt.category != dt.INT:
        raise DTypeError(f"{what} indices must be an integer tensor, got {idx._dt}")
    if idx._dt is dt.int8 or idx._dt is dt.int16:  # as torch: only long, int, byte (and bool) index
        raise DTypeError(f"{what} indices must be long, int, byte or bool tensors, got {idx._dt}")
    if idx._dt is not dt.int64:
        idx = idx.to(dt.int64)
    bk = t._bk
    if idx.numel() == 0 or not (bk.eager or (bk.is_ready(idx._p) and not bk.checks_indices)):
        # a queued index is not read here (that would drain the stream), nor a realised one on
        # a lazy device whose kernels check index values (a read is a sync there): the device
        # or the Fusion layer checks them when the op runs (docs/evaluation.md, "Index errors")
        return idx
    wrapped = S.wrapped_indices(np.asarray(idx.numpy()), n, what)
    return idx if wrapped is None else t._from_like(wrapped)


def _expand_key(t: Tensor, key: Any) -> list[Any]:
    if not isinstance(key, tuple):
        key = (key,)
    items: list[Any] = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice):
            items.append(k)
        elif isinstance(k, Tensor):
            _check_device(t, k)
            if k._dt.category == dt.FLOAT:
                raise DTypeError(f"tensors used as indices must be integer or bool, got {k._dt}")
            items.append(k)
        elif isinstance(k, bool | np.bool_):
            raise TypeError("a Python bool as an index is not supported; use a bool tensor")
        elif isinstance(k, int | np.integer):
            items.append(int(k))
        elif isinstance(k, list | np.ndarray):
            items.append(_as_index_tensor(t, k))
        else:
            raise TypeError(f"unsupported index {k!r} of type {type(k).__name__}; use ints, slices, None, "
                            "..., or integer/bool tensors")
    ndim = t.ndim
    used = sum(k.ndim if isinstance(k, Tensor) and k._dt is dt.bool_ else 1
               for k in items if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexOutOfRangeError(f"too many indices for a tensor of {ndim} dimension(s): {used} given")
    ell = [i for i, k in enumerate(items) if k is Ellipsis]
    if len(ell) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    fill = [slice(None)] * (ndim - used)
    if ell:
        items[ell[0]:ell[0] + 1] = fill
    else:
        items += fill
    return items


class _Plan:
    """How a key maps onto the tensor: per-dim slices, the reshape, the tensor indices."""

    __slots__ = ("slices", "sliced_shape", "mid_shape", "adv", "trivial")

    def __init__(self, t: Tensor, items: list[Any]) -> None:
        shape = t.shape
        slices: list[slice] = []
        sliced: list[int] = []
        mid: list[int] = []
        adv: list[tuple[int, Tensor]] = []  # (position in mid shape, int64 indices)
        trivial = True
        d = 0
        for k in items:
            if k is None:
                mid.append(1)
                continue
            if isinstance(k, Tensor) and k._dt is dt.bool_:
                if k.shape != shape[d:d + k.ndim]:
                    raise ShapeError(f"bool index of shape {k.shape} does not match the indexed dims "
                                     f"{shape[d:d + k.ndim]} of shape {shape}")
                for j, ix in enumerate(k.nonzero(as_tuple=True)):
                    n = shape[d + j]
                    slices.append(slice(0, n, 1))
                    sliced.append(n)
                    adv.append((len(mid), ix))
                    mid.append(n)
                d += k.ndim
                continue
            n = shape[d]
            if isinstance(k, Tensor):
                slices.append(slice(0, n, 1))
                sliced.append(n)
                adv.append((len(mid), _checked_indices(t, k, n, f"dim {d}")))
                mid.append(n)
            elif isinstance(k, int):
                if not -n <= k < n:
                    raise IndexOutOfRangeError(f"index {k} is out of bounds for dim {d} of size {n}")
                k %= n
                slices.append(slice(k, k + 1, 1))
                sliced.append(1)
                trivial = False
            else:
                start, stop, step = k.indices(n)
                if step == 0:
                    raise ValueError("slice step cannot be zero")
                length = len(range(start, stop, step))
                if not (start == 0 and step == 1 and length == n):
                    trivial = False
                if length == 0:
                    start, stop, step = 0, 0, 1
                slices.append(slice(start, stop if stop >= 0 else None, step))
                sliced.append(length)
                mid.append(length)
            d += 1
        self.slices = tuple(slices)
        self.sliced_shape = tuple(sliced)
        self.mid_shape = tuple(mid)
        self.adv = adv
        self.trivial = trivial


def getitem(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` (NumPy/PyTorch indexing rules; negative slice steps allowed)."""
    plan = _Plan(t, _expand_key(t, key))
    bk, p = t._bk, t._p
    if not plan.trivial:
        p = bk.slice(p, plan.slices)
    if plan.mid_shape != plan.sliced_shape:
        p = bk.reshape(p, plan.mid_shape)
    if not plan.adv:
        return _make(p, bk, t._dt)
    positions = [pos for pos, _ in plan.adv]
    idx = [ix for _, ix in plan.adv]
    bshape = S.broadcast_many(ix.shape for ix in idx)
    rest = [i for i in range(len(plan.mid_shape)) if i not in positions]
    perm = tuple(positions + rest)
    if perm != tuple(range(len(perm))):
        p = bk.permute(p, perm)
    p = bk.index(p, tuple(ix._p for ix in idx))
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    k = positions[0]
    if adjacent and k > 0:
        nb = len(bshape)
        out_nd = nb + len(rest)
        back = tuple(range(nb, nb + k)) + tuple(range(nb)) + tuple(range(nb + k, out_nd))
        p = bk.permute(p, back)
    return _make(p, bk, t._dt)


def _value_tensor(t: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        if value._bk is not t._bk:
            value = value.to(t.device)
        return value if value._dt is t._dt else value.to(t._dt)
    if isinstance(value, int | float | bool | np.generic):
        return t._full_like_shape((), _scalar_for(t._dt, _pyscalar(value)), t._dt)
    return t._from_like(np.asarray(value, dtype=t._dt.np))


def setitem(t: Tensor, key: Any, value: Any) -> None:
    """``t[key] = value``: ``t`` is rebound to the written value (the in-place protocol)."""
    if isinstance(key, Tensor) and key._dt is dt.bool_ and not isinstance(value, Tensor | np.ndarray | list):
        _check_device(t, key)
        if S.broadcast(key.shape, t.shape) == t.shape:  # x[mask] = scalar
            t.masked_fill_(key, value)
            return
    items = _expand_key(t, key)
    plan = _Plan(t, items)
    v = _value_tensor(t, value)
    bk = t._bk
    if not plan.adv:
        try:
            v = v.expand(plan.mid_shape)
        except ShapeError:
            raise ShapeError(f"cannot assign a value of shape {v.shape} to a selection of shape "
                             f"{plan.mid_shape}") from None
        vp = bk.reshape(v._p, plan.sliced_shape) if plan.mid_shape != plan.sliced_shape else v._p
        t._assign(_make(bk.slice_assign(t._p, plan.slices, vp), bk, t._dt))
        return
    # Tensor indices mixed with anything: select the flat positions NumPy would select,
    # then write through one index_put on the flattened tensor.
    np_key = tuple(np.asarray(k.numpy()) if isinstance(k, Tensor) else k for k in items)
    lin = np.arange(t.numel(), dtype=np.int64).reshape(t.shape)[np_key]
    try:
        v = v.expand(lin.shape)
    except ShapeError:
        raise ShapeError(f"cannot assign a value of shape {v.shape} to a selection of shape {lin.shape}") from None
    flat = bk.reshape(t._p, (t.numel(),))
    lin_t = t._from_like(lin.reshape(-1))
    vals = bk.reshape(v._p, (lin.size,))
    out = bk.index_put(flat, (lin_t._p,), vals, False)
    t._assign(_make(bk.reshape(out, t.shape), bk, t._dt))


def _check_gather_shapes(what: str, t: Tensor, d: int, index: Tensor, src: Tensor | None = None) -> None:
    if index.ndim != t.ndim:
        raise ShapeError(f"{what}: index of shape {index.shape} needs as many dims as the input {t.shape}")
    for i, (a, b) in enumerate(zip(index.shape, t.shape)):
        if i != d and a > b:
            raise ShapeError(f"{what}: index shape {index.shape} exceeds input shape {t.shape} at dim {i}")
    if src is not None:
        if src.ndim != index.ndim:
            raise ShapeError(f"{what}: src of shape {src.shape} needs as many dims as the index {index.shape}")
        for i, (a, b) in enumerate(zip(index.shape, src.shape)):
            if a > b:
                raise ShapeError(f"{what}: index shape {index.shape} exceeds src shape {src.shape} at dim {i}")


def gather(t: Tensor, dim: int, index: Tensor) -> Tensor:
    """As ``torch.gather``: ``t[..., index[i, j], ...]`` along ``dim``."""
    d = S.norm_dim(dim, t.ndim)
    index = _as_index_tensor(t, index)
    if index.numel() == 0 and index.ndim != t.ndim:  # torch accepts any empty index
        return t.reshape(-1).narrow(0, 0, 0).reshape(index.shape)
    if t.ndim == 0 or index.ndim == 0:  # torch treats 0-d operands as 1-element 1-D ones here
        if t.ndim > 1 or index.ndim > 1:
            raise ShapeError(f"gather: index of shape {index.shape} needs as many dims as the input {t.shape}")
        return gather(t.reshape(1) if t.ndim == 0 else t, 0, index.reshape(1)).reshape(index.shape)
    if index.numel() == 0:
        _check_gather_shapes("gather", t, d, index)
        # no element is read; a 0-element slice keeps the result in the input's graph
        return t.reshape(-1).narrow(0, 0, 0).reshape(index.shape)
    _check_gather_shapes("gather", t, d, index)
    index = _checked_indices(t, index, t.shape[d] if t.ndim else 1, f"gather along dim {d}")
    return _make(t._bk.gather(t._p, d, index._p), t._bk, t._dt)


def scatter(t: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None = None) -> Tensor:
    """As ``torch.scatter``: ``src`` (a tensor or scalar) written at ``index`` along ``dim``;
    ``reduce`` ``'add'`` or ``'multiply'`` (which reads the index on the host)."""
    d = S.norm_dim(dim, t.ndim)
    index = _as_index_tensor(t, index)
    if t.ndim == 0 or index.ndim == 0:  # 0-d operands act as 1-element 1-D ones (torch)
        if isinstance(src, Tensor) and src.ndim == 0:
            src = src.reshape(1)
        out = scatter(t.reshape(1) if t.ndim == 0 else t, 0, index.reshape(1), src, reduce)
        return out.reshape(t.shape)
    if index.numel() == 0:
        return t
    if not isinstance(src, Tensor):
        src = t._full_like_shape(index.shape, _scalar_for(t._dt, _pyscalar(src)), t._dt)
    _check_device(t, src)
    src = src if src._dt is t._dt else src.to(t._dt)
    _check_gather_shapes("scatter", t, d, index, src)
    index = _checked_indices(t, index, t.shape[d], f"scatter along dim {d}")
    if reduce is None:
        return _make(t._bk.scatter(t._p, d, index._p, src._p), t._bk, t._dt)
    if reduce in ("add", "sum"):
        return _make(t._bk.scatter_add(t._p, d, index._p, src._p), t._bk, t._dt)
    if reduce == "multiply":
        return _scatter_multiply(t, d, index, src)
    raise ValueError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")


def _scatter_multiply(t: Tensor, d: int, index: Tensor, src: Tensor) -> Tensor:
    """``scatter(..., reduce='multiply')`` composed from gather and scatter on the flattened
    tensor: the index is read on the host and split into layers in which no target repeats
    (the k-th contribution to each position), so each layer is one exact gather-multiply-
    scatter and gradients flow through the composition."""
    if index.numel() == 0:
        return t
    idx = np.asarray(index.numpy())
    grids = list(np.indices(idx.shape))
    grids[d] = idx
    lin = np.ravel_multi_index(tuple(grids), t.shape).reshape(-1)
    src_flat = src[tuple(slice(0, n) for n in idx.shape)].reshape(-1)
    order = np.argsort(lin, kind="stable")
    sorted_lin = lin[order]
    first = np.r_[0, np.flatnonzero(np.diff(sorted_lin)) + 1]
    rank_sorted = np.arange(lin.size) - np.repeat(first, np.diff(np.r_[first, lin.size]))
    rank = np.empty_like(rank_sorted)
    rank[order] = rank_sorted
    out = t.reshape(-1)
    for k in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == k)
        li = t._from_like(lin[sel].astype(np.int64))
        v = src_flat.index_select(0, t._from_like(sel.astype(np.int64)))
        out = out.scatter(0, li, out.gather(0, li) * v)
    return out.reshape(t.shape)


def index_select(t: Tensor, dim: int, index: Tensor) -> Tensor:
    """As ``torch.index_select``: the entries ``index`` (1-D) along ``dim``."""
    d = S.norm_dim(dim, t.ndim)
    index = _as_index_tensor(t, index)
    if index.ndim > 1:
        raise ShapeError(f"index_select expects a 1-D index, got shape {index.shape}")
    if index.ndim == 0:
        index = index.reshape(1)
    index = _checked_indices(t, index, t.shape[d] if t.ndim else 1, f"index_select along dim {d}")
    if t.ndim == 0:
        return t
    return _make(t._bk.index_select(t._p, d, index._p), t._bk, t._dt)


def scatter_add(t: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """As ``torch.scatter_add``: ``src`` added at ``index`` along ``dim``."""
    return scatter(t, dim, index, src, "add")


def nonzero(t: Tensor, as_tuple: bool = False) -> Any:
    """As ``torch.nonzero`` (reads the values: the result's shape depends on them)."""
    if t.ndim == 0:
        n = int(bool(np.asarray(t.numpy())))
        if as_tuple:
            return (t._from_like(np.zeros(n, np.int64)),)
        return t._from_like(np.zeros((n, 0), np.int64))
    idx = np.nonzero(np.asarray(t.numpy()))
    if as_tuple:
        return tuple(t._from_like(i.astype(np.int64)) for i in idx)
    return t._from_like(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((0, 0), np.int64))


class IndexingMethods:
    """Tensor's indexing methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    __getitem__ = getitem
    __setitem__ = setitem
    gather = gather
    scatter = scatter
    scatter_add = scatter_add
    index_select = index_select
    nonzero = nonzero
    scatter_ = _inplace("scatter")
    scatter_add_ = _inplace("scatter_add")
