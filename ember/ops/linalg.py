"""Matrix products: ``matmul`` of (..., m, k) and (..., k, n), same rank >= 2, batch dims
broadcasting. Half types multiply in float32 on Flex, as the kernels accumulate."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from ._numpy import F32, HALF
from .grad import Rule, mT
from .registry import Op, register


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype in HALF:
        return np.matmul(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return np.matmul(a, b)


def _matmul_grad(B: Any, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    # batch dims broadcast: the engine sums each gradient back over them
    return (B.matmul(g, mT(B, b)) if need[0] else None,
            B.matmul(mT(B, a), g) if need[1] else None)


register(
    Op("matmul", "matmul",
       lambda a, b: (S.broadcast(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), a.dtype),
       flex=_matmul, grad=Rule("", _matmul_grad, reads={"a": "b", "b": "a"})),
)
