"""Matmul family of the Cube backend."""

from __future__ import annotations

import math

from ...cube.launch import CubeCount, CubeDim
from ...cube.runtime.tensor import CubeTensor
from . import kernels

_DIM = CubeDim(256)


class MatmulOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty``, ``_launch_lines``,
    ``contiguous`` and the other core methods of ``backend.py``)."""
    def matmul(self, a: CubeTensor, b: CubeTensor) -> CubeTensor:
        """Batched, batch dims broadcast (as expanded views: no copies)."""
        batch = tuple(max(x, y) for x, y in zip(a.shape[:-2], b.shape[:-2]))
        a = self.expand(a, batch + a.shape[-2:])
        b = self.expand(b, batch + b.shape[-2:])
        out = self._empty(batch + (a.shape[-2], b.shape[-1]), a.dtype)
        n = math.prod(out.shape)
        if n:
            kernels.matmul_naive.launch(self.client, CubeCount.covering(n, _DIM), _DIM, a, b, out)
        return out


