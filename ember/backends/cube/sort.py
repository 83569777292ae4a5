"""Sorting on the Cube backend: ``argsort`` as a bitonic network of (key, index) pairs
(kernels in ``sort_kernels.py``).

A row (a slice along ``dim`` of the input viewed as ``(outer, K, inner)``, read in place
through its strides) is padded to ``padded``, the next power of two. Rows whose pairs fit the
shared-memory budget (``padded <= cap``) sort in one launch, one cube per row. Longer rows are
cut into chunks of ``cap`` positions: each chunk sorts in shared memory (ascending or
descending, as its place in the row's bitonic network needs) into global pair buffers, then
every larger merge stage runs its strides of at least ``cap`` as ``bitonic_global`` launches
(one unit per pair) and the strides below ``cap`` in shared memory again; the last stage
writes the int64 indices. No row length is refused and nothing runs on the host. A target
whose cube units run serially (the C runtime, whose buffers are host memory) sorts with the
registry's numpy form instead: a merge sort beats the serial network 3-4x there.

Keys: half types sort as float32 (exact, same order), bool as uint8. ``stable`` is accepted
and ignored: the network orders equal keys by index, so every sort is stable.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtype as dt
from ...cube.launch import CubeCount, CubeDim
from ...cube.runtime.client import shared_limit
from ...cube.runtime.tensor import CubeTensor
from ...ops import REGISTRY
from . import sort_kernels as sk

#: most shared memory one cube's (key, index) pairs may take: 32 KiB keeps several cubes
#: resident per GPU multiprocessor and stays within CUDA's 48 KiB of static shared memory
_SHARED_BUDGET = 32 * 1024
_GLOBAL_DIM = CubeDim(256)
_HALF = (dt.float16, dt.bfloat16)
#: fewest positions a cube sorts (a row of 5 pads to 64)
_MIN_CAP = 64


def _pow2(n: int) -> int:
    return 1 << max(1, (n - 1).bit_length())


class SortOps:
    """Mixin of ``CubeBackend``: the registry's ``sort`` family."""

    def _sort_cap(self, key: dt.DType) -> int:
        """Most positions a cube sorts in shared memory: a power of two whose keys and u32
        indices fit the budget (and the target's limit)."""
        limit = shared_limit(self.client)
        budget = _SHARED_BUDGET if limit is None else min(_SHARED_BUDGET, limit - 256)
        return 1 << ((budget // (key.itemsize + 4)).bit_length() - 1)

    def argsort(self, p: CubeTensor, dim: int, descending: bool, stable: bool) -> CubeTensor:
        if self._units_serial:
            # a target that runs a cube's units one after another (the C runtime) pays the
            # network's O(n log^2 n) serially and loses to a merge sort 3-4x; its buffers are
            # host memory, so the registry's stable numpy sort runs on them directly
            order = REGISTRY["argsort"].flex(np.asarray(self._read_traced(p)), dim, descending, stable)
            return self.from_data(np.ascontiguousarray(order, dtype=np.int64), dt.int64)
        x = self.contiguous(p)
        if x.dtype in _HALF:
            x = self.cast(x, dt.float32)
        elif x.dtype is dt.bool_:
            x = CubeTensor(x.client, x.buffer, x.shape, x.strides, x.offset, dt.uint8)
        out = self._empty(p.shape, dt.int64)
        shape = p.shape
        k = shape[dim]
        outer, inner = math.prod(shape[:dim]), math.prod(shape[dim + 1:])
        rows = outer * inner
        if rows == 0 or k == 0:
            return out
        padded = _pow2(k)
        # a row within one cube sorts in the smallest of 64, 256, 1024, ... positions that holds
        # it: few kernel variants (cap is comptime), and the extra pads cost one cube nothing
        cap = min(max(_MIN_CAP, 1 << (2 * math.ceil((padded.bit_length() - 1) / 2))), self._sort_cap(x.dtype))
        padded = max(padded, cap)
        chunks = padded // cap
        dim_units = CubeDim(max(32, min(256, cap // 2)))
        count = CubeCount.covering(rows * chunks, 1)
        if chunks == 1:
            sk.bitonic_block.launch(self.client, count, dim_units, x, x, self._empty((1,), dt.int32), out,
                                    k, inner, 1, 2, cap, descending, True, True)
            return out
        keys = self._empty((rows * padded,), x.dtype)
        idx = self._empty((rows * padded,), dt.int32)
        sk.bitonic_block.launch(self.client, count, dim_units, x, keys, idx, out, k, inner, chunks, 2, cap,
                                descending, True, False)
        pairs = rows * padded // 2
        size = 2 * cap
        while size <= padded:
            stride = size // 2
            while stride >= cap:
                sk.bitonic_global.launch(self.client, CubeCount.covering(pairs, _GLOBAL_DIM), _GLOBAL_DIM,
                                         keys, idx, pairs, k, padded, size, stride, descending)
                stride //= 2
            final = size == padded
            sk.bitonic_block.launch(self.client, count, dim_units, keys, keys, idx, out, k, inner, chunks, size,
                                    cap, descending, False, final)
            size *= 2
        return out
