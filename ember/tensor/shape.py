"""Shape and view methods (``reshape``, ``permute``, ``expand``, ``split``, ``narrow``, ...) and the
functions that join tensors (``cat``, ``stack``, ``pad``, ``broadcast_tensors``).

Ember results never alias (tensors are values), so view methods and their copying forms give
the same values; a method that would not change the shape returns the tensor itself.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import IndexOutOfRangeError, ShapeError
from .core import Tensor, _check_device, _flat, _make, _pyscalar, _raw, _scalar_for
from .factories import _inplace


def _same_device(tensors: Sequence[Tensor], what: str) -> None:
    if not tensors:
        raise ValueError(f"{what} needs at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what} expects tensors, got {type(t).__name__}")
        _check_device(tensors[0], t)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """As ``torch.cat``: tensors joined along ``dim`` (dtypes promote; 1-D empty tensors are
    skipped, as torch's legacy rule)."""
    tensors = list(tensors)
    _same_device(tensors, "cat")
    # PyTorch skips legacy 1-D empty tensors in cat
    ts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = ts[0]
    if ref.ndim == 0:
        raise ShapeError("zero-dimensional tensors cannot be concatenated; use stack")
    d = S.norm_dim(dim, ref.ndim)
    for t in ts[1:]:
        if t.ndim != ref.ndim or builtins.any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise ShapeError(f"cat: shapes {ref.shape} and {t.shape} differ outside dim {d}")
    out_dt = ts[0]._dt
    for t in ts[1:]:
        out_dt = dt.promote_types(out_dt, t._dt)
    ps = [t._p if t._dt is out_dt else t._bk.cast(t._p, out_dt) for t in ts]
    if len(ps) == 1:
        return _make(ps[0], ref._bk, out_dt)
    return _make(ref._bk.cat(ps, d), ref._bk, out_dt)


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """As ``torch.stack``: tensors of one shape joined along a new dim ``dim``."""
    tensors = list(tensors)
    _same_device(tensors, "stack")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ShapeError(f"stack expects tensors of one shape, got {shape} and {t.shape}")
    d = S.norm_dim(dim, len(shape) + 1)
    return cat([t.unsqueeze(d) for t in tensors], d)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """As ``torch.nn.functional.pad`` in ``constant`` mode: ``pad`` lists (before, after) pairs
    starting from the last dim; negative amounts crop (``nn.functional.pad`` has the other modes)."""
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}: only 'constant' is supported")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad {tuple(pad)} needs pairs for at most {input.ndim} dims")
    pairs = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        pairs[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    t = input
    if builtins.any(a < 0 or b < 0 for a, b in pairs):  # crop first
        key = tuple(slice(-a if a < 0 else 0, n + b if b < 0 else n) for (a, b), n in zip(pairs, t.shape))
        t = t[key]
        pairs = [(builtins.max(a, 0), builtins.max(b, 0)) for a, b in pairs]
    if builtins.all(a == 0 and b == 0 for a, b in pairs):
        return t
    v = _scalar_for(t._dt, 0 if value is None else _pyscalar(value))
    return _make(t._bk.pad(t._p, tuple(pairs), v), t._bk, t._dt)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """As ``torch.broadcast_tensors``: every tensor expanded to the common broadcast shape."""
    shape = S.broadcast_many(t.shape for t in tensors)
    return tuple(t.expand(shape) for t in tensors)


class ShapeMethods:
    """Tensor's shape and view methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: Any) -> Tensor:
        """As ``torch.reshape``: ``reshape(2, 3)`` or ``reshape((2, 3))``, one size may be -1."""
        new = S.infer_reshape(self.shape, _raw(shape))
        if new == self.shape:
            return self
        return _make(self._bk.reshape(self._p, new), self._bk, self._dt)

    view = reshape

    def view_as(self, other: Tensor) -> Tensor:
        """As ``torch.Tensor.view_as``: ``reshape(other.shape)``."""
        return self.reshape(other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        """As ``torch.Tensor.reshape_as``: ``reshape(other.shape)``."""
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """As ``torch.flatten``: dims ``start_dim`` to ``end_dim`` merged into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s = S.norm_dim(start_dim, self.ndim)
        e = S.norm_dim(end_dim, self.ndim)
        if s > e:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        shape = self.shape
        return self.reshape(shape[:s] + (S.numel(shape[s:e + 1]),) + shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """As ``torch.unflatten``: dim ``dim`` split into ``sizes`` (one may be -1)."""
        d = S.norm_dim(dim, self.ndim)
        shape = self.shape
        inner = S.infer_reshape((shape[d],), sizes)
        return self.reshape(shape[:d] + inner + shape[d + 1:])

    def permute(self, *dims: Any) -> Tensor:
        """As ``torch.permute``: ``permute(1, 0)`` or ``permute((1, 0))``."""
        dims = _flat(dims)
        if len(dims) != self.ndim:
            raise ShapeError(f"permute needs {self.ndim} dims for shape {self.shape}, got {dims}")
        axes = tuple(S.norm_dim(d, self.ndim) for d in dims)
        if len(set(axes)) != len(axes):
            raise ShapeError(f"permute dims {dims} repeat a dimension")
        if axes == tuple(range(self.ndim)):
            return self
        return _make(self._bk.permute(self._p, axes), self._bk, self._dt)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """As ``torch.transpose``: dims ``dim0`` and ``dim1`` swapped."""
        if self.ndim == 0:
            return self
        a, b = S.norm_dim(dim0, self.ndim), S.norm_dim(dim1, self.ndim)
        axes = list(range(self.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self.permute(axes)

    swapaxes = transpose

    def t(self) -> Tensor:
        """As ``torch.t``: a tensor of at most 2 dims transposed."""
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor of at most 2 dimensions, got shape {self.shape}")
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def T(self) -> Tensor:
        """As ``torch.Tensor.T``: every dim reversed."""
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:
        """As ``torch.Tensor.mT``: the last two dims swapped."""
        if self.ndim < 2:
            raise ShapeError(f".mT needs at least 2 dimensions, got shape {self.shape}")
        return self.transpose(-2, -1)

    def expand(self, *sizes: Any) -> Tensor:
        """As ``torch.Tensor.expand``: size-1 dims broadcast to ``sizes`` (-1 keeps a dim)."""
        sizes = _flat(sizes)
        shape = self.shape
        if len(sizes) < len(shape):
            raise ShapeError(f"expand to {tuple(sizes)} has fewer dimensions than the tensor's shape {shape}")
        lead = len(sizes) - len(shape)
        out = []
        for i, s in enumerate(sizes):
            s = int(s)
            if i < lead:
                if s < 0:
                    raise ShapeError(f"expand: -1 is not allowed for the new leading dimension {i}")
                out.append(s)
                continue
            cur = shape[i - lead]
            if s == -1 or s == cur:
                out.append(cur)
            elif cur == 1 and s >= 0:
                out.append(s)
            else:
                raise ShapeError(f"cannot expand shape {shape} to {tuple(sizes)}")
        new = tuple(out)
        if new == shape:
            return self
        p = self._p
        if lead:
            p = self._bk.reshape(p, (1,) * lead + shape)
        return _make(self._bk.expand(p, new), self._bk, self._dt)

    def expand_as(self, other: Tensor) -> Tensor:
        """As ``torch.Tensor.expand_as``: ``expand(other.shape)``."""
        return self.expand(other.shape)

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        """As ``torch.broadcast_to``: ``expand(shape)``."""
        return self.expand(tuple(shape))

    def squeeze(self, dim: Any = None) -> Tensor:
        """As ``torch.squeeze``: size-1 dims removed (only those of ``dim`` when given)."""
        shape = self.shape
        if dim is None:
            return self.reshape(tuple(s for s in shape if s != 1))
        dims = S.norm_dims(dim, self.ndim) if self.ndim else ()
        return self.reshape(tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1)))

    def unsqueeze(self, dim: int) -> Tensor:
        """As ``torch.unsqueeze``: a size-1 dim inserted at ``dim``."""
        d = S.norm_dim(dim, self.ndim + 1)
        shape = self.shape
        return _make(self._bk.reshape(self._p, shape[:d] + (1,) + shape[d:]), self._bk, self._dt)

    def flip(self, *dims: Any, **kwargs: Any) -> Tensor:
        """As ``torch.flip``: ``flip(dims)``, ``flip(*dims)`` or ``flip(dims=...)``."""
        if "dims" in kwargs:
            if dims:
                raise TypeError("flip() got dims both positionally and as a keyword")
            dims = (kwargs.pop("dims"),)
        if kwargs:
            raise TypeError(f"flip() got unexpected keyword arguments {sorted(kwargs)}")
        if len(dims) == 1 and isinstance(dims[0], int | np.integer):
            dims = (int(dims[0]),)
        dims = _flat(dims)
        nd = S.norm_dims(dims, self.ndim)
        if not nd:
            return self
        return _make(self._bk.flip(self._p, nd), self._bk, self._dt)

    def repeat(self, *sizes: Any) -> Tensor:
        """As ``torch.Tensor.repeat``: the tensor tiled ``sizes`` times along each dim."""
        sizes = _flat(sizes)
        reps = tuple(int(s) for s in sizes)
        if len(reps) < self.ndim:
            raise ShapeError(f"repeat needs at least {self.ndim} sizes for shape {self.shape}, got {reps}")
        t = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        shape = t.shape
        # (r0, n0, r1, n1, ...) broadcast then merged: tiles each dim like numpy.tile
        inter = []
        for n in shape:
            inter += [1, n]
        t = t.reshape(tuple(inter))
        big = []
        for r, n in zip(reps, shape):
            big += [r, n]
        t = t.expand(tuple(big))
        return t.reshape(tuple(r * n for r, n in zip(reps, shape)))

    def tile(self, *sizes: Any) -> Tensor:
        """As ``torch.tile``: ``repeat`` with ``sizes`` padded with leading 1s."""
        sizes = _flat(sizes)
        sizes = (1,) * builtins.max(0, self.ndim - len(sizes)) + tuple(sizes)
        return self.repeat(sizes)

    def split(self, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
        """As ``torch.split``: pieces of ``split_size_or_sections`` (one size, or a list of sizes)."""
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, int | np.integer):
            step = split_size_or_sections
            if step <= 0:
                raise ValueError(f"split size must be positive, got {step}")
            sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
        else:
            sizes = [int(s) for s in split_size_or_sections]
            if builtins.sum(sizes) != n:
                raise ShapeError(f"split sizes {sizes} do not add up to {n} (dim {d} of shape {self.shape})")
        out = []
        start = 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """As ``torch.chunk``: at most ``chunks`` pieces of equal size (the last may be smaller)."""
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if chunks <= 0:
            raise ValueError(f"chunks must be positive, got {chunks}")
        step = -(-n // chunks) if n else 1
        return self.split(step, d)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """As ``torch.unbind``: the slices along ``dim`` as a tuple."""
        d = S.norm_dim(dim, self.ndim)
        return tuple(self.select(d, i) for i in range(self.shape[d]))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """As ``torch.narrow``: ``length`` elements from ``start`` along ``dim``."""
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if start < 0:
            start += n
        if not (0 <= start <= n and 0 <= length and start + length <= n):
            raise IndexOutOfRangeError(f"narrow({dim}, {start}, {length}) is out of range for size {n}")
        sl = tuple(slice(start, start + length, 1) if i == d else slice(0, s, 1)
                   for i, s in enumerate(self.shape))
        return _make(self._bk.slice(self._p, sl), self._bk, self._dt)

    def select(self, dim: int, index: int) -> Tensor:
        """As ``torch.select``: the slice at ``index`` along ``dim`` (the dim removed)."""
        d = S.norm_dim(dim, self.ndim)
        key = (slice(None),) * d + (index,)
        return self[key]

    def tril(self, diagonal: int = 0) -> Tensor:
        """As ``torch.tril``: the lower triangle of the last two dims (the rest zeroed)."""
        if self.ndim < 2:
            raise ShapeError(f"tril needs at least 2 dimensions, got shape {self.shape}")
        return _make(self._bk.tril(self._p, int(diagonal)), self._bk, self._dt)

    def triu(self, diagonal: int = 0) -> Tensor:
        """As ``torch.triu``: the upper triangle of the last two dims (the rest zeroed)."""
        if self.ndim < 2:
            raise ShapeError(f"triu needs at least 2 dimensions, got shape {self.shape}")
        return _make(self._bk.triu(self._p, int(diagonal)), self._bk, self._dt)

    tril_ = _inplace("tril")
    triu_ = _inplace("triu")

