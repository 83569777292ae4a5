"""``CubeBackend``: the op catalog on a cube runtime, one ``@cube`` kernel per op.

The class holds the data ops (from_data, into_data, full, random, sync) and the layout ops
(reshape, permute, expand, slice as views; contiguous and copy as copy kernels); the op
families come from one mixin each, beside their kernels (``elementwise.py``, ``reduce.py``,
``matmul.py``, ``attention.py``, ``indexing.py``, ``sort.py``). The primitive is a ``CubeTensor``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtype as dt
from ... import tracing
from ...cube.launch import CubeCount, CubeDim, lines
from ...cube.runtime.client import max_line_bytes
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from ..base import Backend
from . import kernels
from .attention import AttentionOps
from .elementwise import ElementwiseOps
from .indexing import IndexOps
from .matmul import MatmulOps
from .reduce import ReduceOps
from .sort import SortOps

__all__ = ["CubeBackend", "CubeTensor"]

_DIM = CubeDim(256)


def line_width(numel: int, itemsize: int, offset: int = 0, limit: int = 64) -> int:
    """The widest line (<= ``limit`` bytes) that divides the element count and the offset."""
    for w in (16, 8, 4, 2):
        if w * itemsize <= limit and numel % w == 0 and offset % w == 0:
            return w
    return 1


class CubeBackend(ElementwiseOps, ReduceOps, SortOps, MatmulOps, AttentionOps, IndexOps, Backend):
    eager = True  # launches run before the call returns (inline channel) or before any read

    def __init__(self, client: Any) -> None:
        self.client = client
        self.name = f"cube<{client.name}>"
        #: layout copies row-chunked (``_row_major_copy``): where one unit runs its elements serially
        self._row_copies = getattr(client, "runtime", None) == "cpu"
        #: op -> a wrapper replaying repeated calls (``op_replay``), for the layers above
        #: to bind in place of the method (empty: no replays on this runtime or turned off)
        self.replayed: dict[str, Any] = {}
        if getattr(client, "replayable", False):
            from ...environment import config

            if config.get("cube.replay"):
                from .op_replay import wrappers

                self.replayed = wrappers(self)

    def supports(self, dtype: dt.DType) -> bool:
        """Whether tensors of ``dtype`` can live on this device (a WGSL device holds no
        64-bit types, for one); ops on the others raise UnsupportedDTypeError."""
        f = getattr(self.client, "supports", None)
        return True if f is None else bool(f(dtype))

    # ----------------------------------------------------------------- helpers
    def _empty(self, shape: tuple[int, ...], dtype: dt.DType) -> CubeTensor:
        n = math.prod(shape)
        buf = self.client.empty(n * dtype.itemsize)
        return CubeTensor(self.client, buf, tuple(shape), contiguous_strides(tuple(shape)), 0, dtype)

    def _launch_lines(self, kernel: Any, n: int, *tensors: CubeTensor, extra: tuple[Any, ...] = ()) -> None:
        limit = max_line_bytes(self.client)
        w = min(line_width(n, t.dtype.itemsize, t.offset, limit) for t in tensors)
        count = CubeCount.covering(max(n // w, 1), _DIM)
        kernel.launch(self.client, count, _DIM, *(lines(t, w) for t in tensors), *extra)

    # ----------------------------------------------------------------- data
    def dtype(self, p: CubeTensor) -> dt.DType:
        return p.dtype

    def from_data(self, array: Any, dtype: dt.DType) -> CubeTensor:
        if tracing.active:
            with tracing.span("from_data", layer="cube"):
                return self._from_data(array, dtype)
        return self._from_data(array, dtype)

    def _from_data(self, array: Any, dtype: dt.DType) -> CubeTensor:
        a = np.asarray(array, dtype=dtype.np, order="C")  # keeps 0-d shapes (ascontiguousarray does not)
        buf = self.client.create(a)
        return CubeTensor(self.client, buf, a.shape, contiguous_strides(a.shape), 0, dtype)

    def into_data(self, p: CubeTensor) -> np.ndarray:
        out = self._read_traced(p)
        if self._index_pending:  # every read reports an index kernel's bad value (``IndexOps``)
            self.index_errors()
        return out

    def _read_traced(self, p: CubeTensor) -> np.ndarray:
        """``p``'s values for the backend's own host work (a host sort inside a drain): an
        ``into_data`` span, but a pending index error is left to the user's next read."""
        if tracing.active:
            with tracing.span("into_data", layer="cube"):
                return self._into_data(p)
        return self._into_data(p)

    def _into_data(self, p: CubeTensor) -> np.ndarray:
        size = p.dtype.itemsize
        if 0 in p.shape:  # no element to read; a view of an empty slice may point past its buffer
            out = np.empty(p.shape, p.dtype.np)
            out.flags.writeable = False
            return out
        out = self.client.read(
            p.buffer, p.dtype.np, p.shape, tuple(s * size for s in p.strides), p.offset * size
        )
        out.flags.writeable = False
        return out

    def item(self, p: CubeTensor) -> Any:
        # untraced: see Dispatch.item
        d = p.dtype
        v = self.client.read_scalar(p.buffer, d._np or d.np, p.offset * d.itemsize)
        if self._index_pending:
            self.index_errors()
        return v

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> CubeTensor:
        out = self._empty(shape, dtype)
        n = math.prod(shape)
        if n:
            self._launch_lines(kernels.fill, n, out, extra=(dt.python_scalar(dtype, value),))
        return out

    def random(
        self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int, a: float, b: float
    ) -> CubeTensor:
        if not getattr(self.client, "int64_math", True):
            # the Philox kernel needs 64-bit integer arithmetic (WGSL has none): the same stream
            # comes from the shared host implementation, uploaded
            from ...random import philox_values

            return self._from_data(philox_values(dist, shape, dtype, seed, offset, a, b), dtype)
        if dist == "normal" and dtype is dt.float64:
            # numpy's float64 log (SIMD on some CPUs) and libm's differ by one ulp on ~0.3%
            # of inputs, so the kernel's float64 normals would not match Flex bit for bit;
            # the shared host implementation keeps the one stream exact (docs/random.md)
            from ...random import philox_values

            return self._from_data(philox_values(dist, shape, dtype, seed, offset, a, b), dtype)
        return self._random_kernel(dist, shape, dtype, seed, offset, a, b)

    def sync(self) -> None:
        self.client.sync()
        if self._index_pending:
            self.index_errors()

    # ----------------------------------------------------------------- elementwise
    def cast(self, p: CubeTensor, dtype: dt.DType) -> CubeTensor:
        if dtype is p.dtype:
            return p
        src = self.contiguous(p)
        out = self._empty(p.shape, dtype)
        n = math.prod(p.shape)
        if n:
            self._launch_lines(kernels.cast_lines, n, src, out)
        return out

    # ----------------------------------------------------------------- layout
    def contiguous(self, p: CubeTensor) -> CubeTensor:
        if p.is_contiguous():
            return p
        return self._row_major_copy(p)

    def copy(self, p: CubeTensor) -> CubeTensor:
        return self._row_major_copy(p)

    def _row_major_copy(self, p: CubeTensor) -> CubeTensor:
        """A fresh row-major copy of the view ``p``. On the CPU runtime row-chunked
        (``copy_view``: one unravel of the index per 8 elements of a row, then a strided run;
        the per-element unravel of ``gather_contiguous`` cost ~15 ns an element there, its
        runtime divisions dominating); on GPUs one element per unit, whose neighbouring units
        read neighbouring addresses (coalesced)."""
        out = self._empty(p.shape, p.dtype)
        n = math.prod(p.shape)
        if n:
            if self._row_copies:
                self._copy_into(p, out)
            else:
                kernels.gather_contiguous.launch(self.client, CubeCount.covering(n, _DIM), _DIM, p, out)
        return out

    def reshape(self, p: CubeTensor, shape: tuple[int, ...]) -> CubeTensor:
        shape = tuple(shape)
        src = self.contiguous(p)
        return src.with_layout(shape, contiguous_strides(shape), src.offset)

    def permute(self, p: CubeTensor, axes: tuple[int, ...]) -> CubeTensor:
        return p.with_layout(tuple(p.shape[a] for a in axes), tuple(p.strides[a] for a in axes), p.offset)

    def expand(self, p: CubeTensor, shape: tuple[int, ...]) -> CubeTensor:
        # numpy's rules, as Flex's ``np.broadcast_to``: new leading dims and size-1 dims get
        # stride 0 (the dims are matched from the right: the Tensor API adds the leading dims
        # by a reshape first, the registry's rules and composites may pass a longer shape)
        shape = tuple(shape)
        lead = len(shape) - len(p.shape)
        strides = (0,) * lead + tuple(
            0 if (n != m and n == 1) else s for n, m, s in zip(p.shape, shape[lead:], p.strides)
        )
        return p.with_layout(shape, strides, p.offset)
