"""Shape compositions: ``movedim``, the ``*stack`` and ``*split`` families,
``repeat_interleave``, ``meshgrid``, ``rot90``, ``unfold``, the ``*_copy`` forms, ...

Ember results never alias, so a ``*_copy`` function and its view form give the same values.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import ShapeError
from ..tensor import Tensor, _flat, cat, pad, stack
from ..tensor import pad as _pad  # (constant_pad_nd's argument is named pad, as torch's)

__all__ = [
    "diag", "diag_embed", "movedim", "moveaxis", "swapdims", "hstack", "vstack", "row_stack",
    "dstack", "column_stack", "atleast_1d", "atleast_2d", "atleast_3d", "repeat_interleave", "meshgrid", "rot90",
    "fliplr", "flipud", "ravel", "diff", "tensor_split", "hsplit", "vsplit", "dsplit", "broadcast_to",
    "broadcast_shapes", "cartesian_prod", "block_diag", "narrow_copy", "view_copy", "permute_copy", "t_copy",
    "unsqueeze_copy", "squeeze_copy", "transpose_copy", "unbind_copy", "expand_copy", "diagonal_copy", "alias_copy",
    "split_with_sizes_copy", "constant_pad_nd", "unfold", "diagflat", "split_with_sizes", "unsafe_split",
    "unsafe_chunk"
]

#: the functions torch also has as Tensor methods
TENSOR_METHODS = (
    "diag", "diag_embed", "movedim", "moveaxis", "swapdims", "repeat_interleave", "rot90",
    "fliplr", "flipud", "ravel", "diff", "tensor_split", "hsplit", "vsplit", "dsplit", "narrow_copy", "unfold",
    "diagflat", "split_with_sizes", "unsafe_split", "unsafe_chunk",
)



def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """As ``torch.diag_embed``: the last dim placed on the diagonals of new (dim1, dim2) planes."""
    n = input.shape[-1]
    size = n + builtins.abs(offset)
    eye = input._from_like(np.eye(n, dtype=np.float32)).to(input._dt)
    mats = input.unsqueeze(-1) * eye  # (..., n, n) with the values on the diagonal
    pads = (offset, 0, 0, offset) if offset >= 0 else (0, -offset, -offset, 0)
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
    ts = atleast_1d(*tensors)
    return cat(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.vstack``."""
    return cat(list(atleast_2d(*tensors)), 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.dstack``."""
    return cat(list(atleast_3d(*tensors)), 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.column_stack``."""
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


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """As ``torch.diff``."""
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
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def block_diag(*tensors: Tensor) -> Tensor:
    """As ``torch.block_diag``."""
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


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """As ``torch.narrow_copy``."""
    return input.narrow(dim, start, length).clone()


def _copy_of(name: str, export: str | None = None) -> Any:
    def f(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = getattr(input, name)(*args, **kwargs) if name != "alias" else input
        if isinstance(out, tuple):
            return tuple(o.clone() for o in out)
        return out.clone()

    f.__name__ = f.__qualname__ = export = export or f"{name}_copy"
    f.__doc__ = f"As ``torch.{export}``: ``{name}`` as a new value (every ember result is one)."
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


split_with_sizes_copy = _copy_of("split", "split_with_sizes_copy")


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.split_with_sizes``."""
    return input.split(list(split_sizes), dim)


def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.unsafe_split`` (``split``: ember results never alias)."""
    return input.split(split_size, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """As ``torch.unsafe_chunk`` (``chunk``)."""
    return input.chunk(chunks, dim)


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


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """As ``torch.diagflat``."""
    return diag_embed(input.reshape(-1), offset)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    """As ``torch.constant_pad_nd``."""
    return _pad(input, pad, value=value)
