"""numpy helpers the Flex implementations of the registry share.

Flex's primitives are numpy arrays that are never mutated (tensors are values). Half types
(float16, bfloat16) compute in float32 where numpy would accumulate in half precision, as
the GPU kernels do; floating-point warnings are silenced (``log(0) = -inf`` is an answer,
and PyTorch does not warn either).
"""

from __future__ import annotations

from typing import Any

import numpy as np

F32 = np.dtype(np.float32)


class _HalfTypes:
    """``d in HALF``: whether numpy dtype ``d`` is float16 or bfloat16 (ml_dtypes' kind-V type),
    without importing ml_dtypes (``import ember`` stays light until bfloat16 is used)."""

    __slots__ = ()

    def __contains__(self, d: Any) -> bool:
        return d.itemsize == 2 and d.kind in "fV"


HALF = _HalfTypes()


def quiet(f: Any) -> Any:
    """``f`` with numpy's floating-point warnings silenced."""

    def op(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            return f(*args)

    op.__name__ = getattr(f, "__name__", "op")
    return op


def swap(f: Any) -> Any:
    """``r<op>_scalar(p, s) = op(s, p)``."""

    def op(p: np.ndarray, s: Any) -> np.ndarray:
        return f(s, p)

    return op


def float_reduce(f: Any) -> Any:
    """A reduction that accumulates half inputs in float32."""

    def op(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        if p.dtype in HALF:
            return f(p, axis=dims, keepdims=keepdim, dtype=F32).astype(p.dtype)
        return f(p, axis=dims, keepdims=keepdim)

    return op


def plain_reduce(f: Any) -> Any:
    """A reduction whose result is one of its inputs' values (max, all, ...)."""

    def op(p: np.ndarray, dims: tuple[int, ...], keepdim: bool) -> np.ndarray:
        return f(p, axis=dims, keepdims=keepdim)

    return op
