"""Indexing and data-movement ops of the Cube backend.

Every op allocates a fresh output (tensors are values: inputs are never written) and fills
it with the generic kernels of ``index_kernels`` (plus ``random_kernels`` for Philox).
Host-side work is metadata only: views (shape/strides/offset) and a few Python ints.

Scatter-type accumulation (``scatter_add``, ``index_put(accumulate=True)``) uses atomic adds,
which the kernel language offers on 32/64-bit elements. Types without atomics accumulate in
a wider type, exactly as Flex does: float16/bfloat16 in float32 (rounded once at the end),
uint8/int8/int16/bool in int32 (cast back: the narrow ints wrap, bool is "any nonzero"). Float atomics
add in an unspecified order, so float sums may differ from Flex's sequential order in the
last bits; integer sums are exact.

Index values are checked on the device, by the kernels that read them (``index_kernels``:
negatives wrap once, a bad value is never used as a position and is *reported* in the
backend's error flags, a small persistent int32 buffer). Nothing is read back at the op: the
flags are read at the next read of any tensor of this backend (``into_data``, ``item``,
``sync``) after an index kernel ran, and a bad value raises ``DeviceIndexError`` there, once
(the flags are cleared first). The eager Tensor API checks realised indices on the host
before the op, so there the flags only back it up; a fused device queues the op and learns
of a bad value at its next read (``docs/evaluation.md``, "Index errors").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtype as dt
from ...cube.launch import CubeCount, CubeDim
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from . import index_kernels as ik
from . import kernels
from . import random_kernels as rk

_DIM = CubeDim(256)
#: dtypes that the kernel language has atomics for; the others accumulate in a wider type
_ATOMIC = frozenset({dt.float32, dt.float64, dt.int32, dt.int64})
_ACC = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.uint8: dt.int32, dt.int8: dt.int32,
        dt.int16: dt.int32, dt.bool_: dt.int32}


#: elements per unit of the row-chunked kernels (copy_view, gather_dim, index_gather, tri):
#: one unravel (a div/mod per dim) per chunk instead of per element
_CHUNK = 8
#: the most pieces one ``cat`` launch copies (the kernel inlines a copy per piece)
_CAT_PIECES = 32


def _count(n: int) -> CubeCount:
    return CubeCount.covering(n, _DIM)


def _rows(shape: tuple[int, ...]) -> tuple[CubeCount, int, int]:
    """Launch geometry of a row-chunked kernel over ``shape`` (rank >= 1, no zero dims):
    cube count, rows (elements / last dim) and chunks per row."""
    nl = shape[-1]
    rows = math.prod(shape) // nl
    chunks = -(-nl // _CHUNK)
    return _count(rows * chunks), rows, chunks


def _as_rank1(p: CubeTensor) -> CubeTensor:
    """A 0-d view as shape (1,): the row-chunked kernels need a last dim."""
    return p.with_layout((1,), (1,), p.offset) if not p.shape else p


def _broadcast_view(p: CubeTensor, shape: tuple[int, ...]) -> CubeTensor:
    """``p`` broadcast to ``shape`` as a zero-stride view (numpy rules: leading dims added)."""
    extra = len(shape) - len(p.shape)
    pshape = (1,) * extra + p.shape
    pstrides = (0,) * extra + p.strides
    strides = tuple(0 if n != m else s for n, m, s in zip(pshape, shape, pstrides))
    return p.with_layout(tuple(shape), strides, p.offset)


def _positive_view(p: CubeTensor, slices: Sequence[slice]) -> tuple[CubeTensor, int]:
    """The window ``p[slices]`` as a view with non-negative strides, and the flip mask (bit
    d set: dim d of the window runs backwards, i.e. its slice step was negative)."""
    offset = p.offset
    shape, strides = [], []
    flips = 0
    for d, (n, st, s) in enumerate(zip(p.shape, p.strides, slices)):
        start, stop, step = s.indices(n)
        m = len(range(start, stop, step))
        if step < 0:
            flips |= 1 << d
            low = start + (m - 1) * step  # the smallest position the slice visits
            if m:
                offset += low * st
            step = -step
        elif m:
            offset += start * st
        shape.append(m)
        strides.append(st * step)
    k = len(slices)
    return p.with_layout(tuple(shape) + p.shape[k:], tuple(strides) + p.strides[k:], offset), flips


class IndexOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty``, ``_launch_lines``,
    ``contiguous``, ``copy``, ``cast``, ``full`` and the other core methods of ``backend.py``)."""

    #: index ops check their index values themselves (on the device; bad ones are reported at
    #: the next read: ``index_errors``), so the layers above need not read them
    checks_indices = True
    #: the error flags (``_err``: made on first use) and whether an index kernel may have
    #: written them since they were last read
    _err_flags: CubeTensor | None = None
    _index_pending = False

    # ----------------------------------------------------------------- index errors
    def _err(self) -> CubeTensor:
        """The error flags, for an index kernel about to launch (marks them pending)."""
        f = self._err_flags
        if f is None:
            from ...cube.runtime import capture

            f = self._from_data(np.zeros(ik.ERR_WORDS, np.int32), dt.int32)  # type: ignore[attr-defined]
            # a captured drain or op that launches an index kernel names this same buffer at
            # every replay, and marks the flags pending as the launch here does
            capture.persist(f.buffer, self._note_index)
            self._err_flags = f
        self._index_pending = True
        return f

    def _note_index(self) -> None:
        self._index_pending = True

    def index_errors(self) -> None:
        """Raise ``DeviceIndexError`` for a bad index value an index kernel found since the
        flags were last read (then cleared: each is raised once). Called after every read;
        reads the flags only when an index kernel ran since."""
        if not self._index_pending:
            return
        self._index_pending = False
        f = self._err_flags
        if f is None:
            return
        client = self.client
        if not client.read_scalar(f.buffer, np.dtype(np.int32), 0):
            return
        words = np.array(client.read(f.buffer, np.dtype(np.int32), (ik.ERR_WORDS,), (4,), 0))
        self._launch_lines(kernels.fill, ik.ERR_WORDS, f, extra=(0,))  # type: ignore[attr-defined]
        _, site, d, v, n = (int(w) for w in words)
        from ...errors import DeviceIndexError

        op = ik.SITES[site] if 0 < site < len(ik.SITES) else "an index op"
        raise DeviceIndexError(
            f"{op}: index {v} is out of bounds for dimension {d} with size {n}; checked on the "
            "device and raised at the first read after the op ran (its result and what was computed "
            "from it hold unspecified values)"
        )

    # ----------------------------------------------------------------- helpers
    def _copy_into(self, src: CubeTensor, dst: CubeTensor, flips: int = 0) -> None:
        """dst (a view, usually a window of a fresh buffer) = src, reversed on ``flips``."""
        if math.prod(dst.shape):
            src, dst = _as_rank1(src), _as_rank1(dst)
            count, rows, chunks = _rows(dst.shape)
            ik.copy_view.launch(self.client, count, _DIM, src, dst, flips, rows, chunks, _CHUNK)

    def _stack_indices(self, indices: Sequence[CubeTensor]) -> CubeTensor:
        """The int64 index tensors broadcast to one shape B and stacked: shape (k, *B).
        A single index needs no copy: a zero-stride leading dim of size 1 is enough."""
        shape = tuple(_broadcast_shape([t.shape for t in indices]))
        if len(indices) == 1:
            v = _broadcast_view(indices[0], shape)
            return v.with_layout((1,) + shape, (0,) + v.strides, v.offset)
        out = self._empty((len(indices),) + shape, dt.int64)
        per = math.prod(shape)
        for j, t in enumerate(indices):
            window = out.with_layout(shape, contiguous_strides(shape), j * per)
            self._copy_into(_broadcast_view(t, shape), window)
        return out

    def _accumulating(self, p: CubeTensor, src: CubeTensor, launch: Any) -> CubeTensor:
        """Copy ``p`` (in the accumulation dtype), let ``launch(out, src)`` add into it with
        atomics, and return it in p's dtype."""
        acc = _ACC.get(p.dtype)
        if acc is None:
            out = self.copy(p)
            launch(out, src)
            return out
        out = self.cast(p, acc)  # a fresh buffer: acc differs from p's dtype
        launch(out, self.cast(src, acc))
        return self.cast(out, p.dtype)

    # ----------------------------------------------------------------- shape
    def flip(self, p: CubeTensor, dims: tuple[int, ...]) -> CubeTensor:
        out = self._empty(p.shape, p.dtype)
        mask = 0
        for d in dims:
            if p.shape[d] > 1:
                mask |= 1 << d
        self._copy_into(p, out, mask)
        return out

    def _slice_kernel(self, p: CubeTensor, slices: tuple[slice, ...]) -> CubeTensor:
        """``slice`` with negative steps done on the device: a positive-stride window plus a
        flip mask, copied by ``copy_view`` (a view is impossible: strides are u32 in kernels).
        Positive steps stay views."""
        view, flips = _positive_view(p, slices)
        if not flips:
            return view
        out = self._empty(view.shape, p.dtype)
        self._copy_into(view, out, flips)
        return out

    def cat(self, ps: Sequence[CubeTensor], dim: int) -> CubeTensor:
        """One launch for up to ``_CAT_PIECES`` pieces (``cat_pieces``; fewer where the device
        binds fewer arrays per kernel): each piece has its own range of cubes."""
        ps = list(ps)
        first = ps[0]
        total = sum(t.shape[dim] for t in ps)
        shape = first.shape[:dim] + (total,) + first.shape[dim + 1 :]
        out = self._empty(shape, first.dtype)
        if not math.prod(shape):
            return out
        pieces = []  # (piece, position along dim)
        at = 0
        for t in ps:
            if t.shape[dim]:
                pieces.append((t, at))
            at += t.shape[dim]
        if len(pieces) == 1:
            t, a = pieces[0]
            strides = contiguous_strides(shape)
            self._copy_into(t, out.with_layout(t.shape, strides, a * strides[dim]))
            return out
        from ...cube.runtime.client import max_arrays

        limit = max_arrays(self.client)
        per = _CAT_PIECES if limit is None else max(1, min(_CAT_PIECES, limit - 1))
        for i in range(0, len(pieces), per):
            self._cat_launch(pieces[i:i + per], out, dim)
        return out

    def _cat_launch(self, pieces: list[tuple[CubeTensor, int]], out: CubeTensor, dim: int) -> None:
        meta, cubes = ik.piece_table(pieces, _CHUNK, _DIM.x)
        ik.cat_pieces.launch(self.client, CubeCount(cubes), _DIM, tuple(t for t, _ in pieces), out, meta, dim, _CHUNK)

    def pad(self, p: CubeTensor, pads: tuple[tuple[int, int], ...], value: Any) -> CubeTensor:
        shape = tuple(n + a + b for n, (a, b) in zip(p.shape, pads))
        out = self.full(shape, value, p.dtype)
        strides = contiguous_strides(shape)
        offset = sum(a * s for (a, _), s in zip(pads, strides))
        self._copy_into(p, out.with_layout(p.shape, strides, offset))
        return out

    def tril(self, p: CubeTensor, diagonal: int) -> CubeTensor:
        return self._tri(p, diagonal, False)

    def triu(self, p: CubeTensor, diagonal: int) -> CubeTensor:
        return self._tri(p, diagonal, True)

    def _tri(self, p: CubeTensor, diagonal: int, upper: bool) -> CubeTensor:
        out = self._empty(p.shape, p.dtype)
        n = math.prod(p.shape)
        if n:
            # clamp keeps the i64 argument in range; beyond +-(rows + cols) nothing changes
            lim = p.shape[-1] + p.shape[-2] + 1
            diag = max(-lim, min(lim, int(diagonal)))
            count, rows, chunks = _rows(p.shape)
            ik.tri.launch(self.client, count, _DIM, p, out, diag, upper, rows, chunks, _CHUNK)
        return out

    # ----------------------------------------------------------------- gather / scatter
    def gather(self, p: CubeTensor, dim: int, index: CubeTensor) -> CubeTensor:
        out = self._empty(index.shape, p.dtype)
        self._gather(p, dim, index, out, 1)
        return out

    def _gather(self, p: CubeTensor, dim: int, index: CubeTensor, out: CubeTensor, site: int) -> None:
        if math.prod(out.shape):
            p, index, out = _as_rank1(p), _as_rank1(index), _as_rank1(out)  # 0-d: index is 0
            count, rows, chunks = _rows(out.shape)
            ik.gather_dim.launch(self.client, count, _DIM, p, index, out, dim, rows, chunks, _CHUNK, self._err(), site)

    def index_select(self, p: CubeTensor, dim: int, index: CubeTensor) -> CubeTensor:
        shape = p.shape[:dim] + index.shape + p.shape[dim + 1 :]
        # the 1-D index seen as an index of the output's shape: stride only along ``dim``
        strides = tuple(index.strides[0] if d == dim else 0 for d in range(len(shape)))
        full_index = index.with_layout(shape, strides, index.offset)
        out = self._empty(shape, p.dtype)
        self._gather(p, dim, full_index, out, 4)
        return out

    def _scatter(self, p: CubeTensor, dim: int, index: CubeTensor, src: CubeTensor, add: bool) -> CubeTensor:
        src = src.with_layout(index.shape, src.strides, src.offset)  # only src[:index.shape]
        n = math.prod(index.shape)

        def launch(out: CubeTensor, s: CubeTensor) -> None:
            if n:
                site = 3 if add else 2
                ik.scatter_dim.launch(self.client, _count(n), _DIM, index, s, out, dim, add, self._err(), site)

        if add and p.dtype not in _ATOMIC:
            return self._accumulating(p, src, launch)
        out = self.copy(p)
        launch(out, src)
        return out

    def scatter(self, p: CubeTensor, dim: int, index: CubeTensor, src: CubeTensor) -> CubeTensor:
        return self._scatter(p, dim, index, src, False)

    def scatter_add(self, p: CubeTensor, dim: int, index: CubeTensor, src: CubeTensor) -> CubeTensor:
        return self._scatter(p, dim, index, src, True)

    # ----------------------------------------------------------------- advanced indexing
    def index(self, p: CubeTensor, indices: tuple[CubeTensor, ...]) -> CubeTensor:
        idx = self._stack_indices(indices)
        k = len(indices)
        shape = idx.shape[1:] + p.shape[k:]
        out = self._empty(shape, p.dtype)
        if math.prod(shape):
            view = out
            if not shape:  # a 0-d result: one trailing size-1 dim on out and src
                view = out.with_layout((1,), (1,), out.offset)
                p = p.with_layout(p.shape + (1,), p.strides + (0,), p.offset)
            count, rows, chunks = _rows(view.shape)
            ik.index_gather.launch(self.client, count, _DIM, p, idx, view, k, rows, chunks, _CHUNK, self._err(), 5)
        return out

    def index_put(
        self, p: CubeTensor, indices: tuple[CubeTensor, ...], values: CubeTensor, accumulate: bool
    ) -> CubeTensor:
        idx = self._stack_indices(indices)
        k = len(indices)
        shape = idx.shape[1:] + p.shape[k:]
        vals = _broadcast_view(values, shape)
        n = math.prod(shape)

        def launch(out: CubeTensor, v: CubeTensor) -> None:
            if n:
                ik.index_scatter.launch(self.client, _count(n), _DIM, v, idx, out, k, accumulate, self._err(), 6)

        if accumulate and p.dtype not in _ATOMIC:
            return self._accumulating(p, vals, launch)
        out = self.copy(p)
        launch(out, vals)
        return out

    def slice_assign(self, p: CubeTensor, slices: tuple[slice, ...], values: CubeTensor) -> CubeTensor:
        out = self.copy(p)
        window, flips = _positive_view(out, slices)
        self._copy_into(_broadcast_view(values, window.shape), window, flips)
        return out

    # ----------------------------------------------------------------- random
    def _random_kernel(
        self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int, a: float, b: float
    ) -> CubeTensor:
        """Philox 4x32-10 values computed on the device, equal to ``ember.random.philox_values``
        (see ``random_kernels`` for the exactness of ``normal``)."""
        launch = rk.plan(dist, shape, dtype, seed, offset, a, b)  # validates before allocating
        out = self._empty(tuple(shape), dtype)
        launch(self.client, out)
        return out

    # The catalog name of the slicing op (``random`` is chosen in backend.py, which keeps the
    # host implementation for float64 normals only).
    slice = _slice_kernel


def _broadcast_shape(shapes: Sequence[tuple[int, ...]]) -> list[int]:
    r = max(len(s) for s in shapes)
    out = [1] * r
    for s in shapes:
        for i, n in enumerate(s):
            j = r - len(s) + i
            if n != 1:
                out[j] = n
    return out
