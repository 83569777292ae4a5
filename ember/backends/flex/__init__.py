"""Flex: the eager numpy backend, and the reference for behaviour.

Primitives are plain numpy arrays, never mutated after creation (tensors are values), so
views, broadcasts and ``copy`` can share memory freely. Each op is its registry entry's
numpy form (``ember.ops``), bound as a static method: a hot op is the numpy ufunc itself
and adds no Python frame of its own. Half types (float16, bfloat16) compute in float32
where numpy would otherwise accumulate in half precision (reductions, matmul), as the GPU
kernels do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtype as dt
from ... import tracing
from ...ops import REGISTRY
from ..base import Backend

__all__ = ["FlexBackend"]

_NP2DT = {d.np: d for d in dt.ALL}


class FlexBackend(Backend):
    name = "flex"
    eager = True

    # ------------------------------------------------------------------ data
    def dtype(self, p: np.ndarray) -> dt.DType:
        return _NP2DT[p.dtype]

    def from_data(self, array: Any, dtype: dt.DType) -> np.ndarray:
        if tracing.active:
            with tracing.span("from_data", layer="flex"):
                return np.array(array, dtype=dtype.np, copy=True)
        return np.array(array, dtype=dtype.np, copy=True)

    def into_data(self, p: np.ndarray) -> np.ndarray:
        if tracing.active:
            with tracing.span("into_data", layer="flex"):
                return p
        return p

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> np.ndarray:
        return np.full(shape, value, dtype=dtype.np)

    def random(self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int,
               a: float, b: float) -> np.ndarray:
        from ...random import philox_values

        return philox_values(dist, shape, dtype, seed, offset, a, b)


def _install() -> None:
    """Each registry op's numpy form as a Flex method; an op without one runs its
    decomposition (``Backend``'s default)."""
    for name, op in REGISTRY.items():
        if op.flex is not None:
            setattr(FlexBackend, name, staticmethod(op.flex))


_install()
