"""Shape arithmetic for the Tensor API: broadcasting, dim normalisation, reshape inference.

Everything here raises ember's typed errors with both shapes in the message; results of
the hot helpers are memoised (shapes repeat endlessly in real programs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .errors import DimError, IndexOutOfRangeError, ShapeError

Shape = tuple[int, ...]


@lru_cache(maxsize=4096)
def broadcast(a: Shape, b: Shape) -> Shape:
    """NumPy/PyTorch broadcasting of two shapes."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"shapes {a} and {b} cannot be broadcast together")
    return tuple(out)


def broadcast_many(shapes: Iterable[Shape]) -> Shape:
    out: Shape = ()
    for s in shapes:
        out = broadcast(out, s)
    return out


def norm_dim(dim: Any, ndim: int) -> int:
    """A dim in [-ndim, ndim) as a non-negative int (0-d tensors accept 0 and -1)."""
    try:
        d = int(dim)
    except (TypeError, ValueError):
        raise DimError(f"dim must be an int, got {dim!r}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise DimError(f"dim {dim} is out of range for a tensor of {ndim} dimension(s) "
                       f"(expected a value in [{-n}, {n - 1}])")
    return d % n


@lru_cache(maxsize=4096)
def _norm_dims(dims: tuple[Any, ...] | None, ndim: int) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(ndim))
    out = tuple(sorted({norm_dim(d, ndim) for d in dims}))
    if len(out) != len(dims):
        raise DimError(f"dim {dims} repeats a dimension")
    return out


_INTS = (int, np.integer)  # a tuple: ``int | np.integer`` builds a union object per call


def norm_dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """``None`` means every dim; an int or a sequence of ints otherwise (sorted, unique)."""
    if dim is None:
        return _norm_dims(None, ndim)
    if isinstance(dim, _INTS):
        d = norm_dim(dim, ndim)
        return (d,) if ndim else ()  # a 0-d tensor accepts dim 0 / -1 and has no dim to reduce
    out = _norm_dims(tuple(dim), ndim)
    return out if ndim else ()


def infer_reshape(shape: Shape, new: Sequence[int]) -> Shape:
    numel = 1
    for n in shape:
        numel *= n
    out = [int(x) for x in new]
    neg = [i for i, x in enumerate(out) if x == -1]
    if len(neg) > 1 or any(x < -1 for x in out):
        raise ShapeError(f"invalid shape {tuple(new)} for a tensor of shape {shape}")
    known = 1
    for x in out:
        if x != -1:
            known *= x
    if neg:
        if known == 0 or numel % known:
            raise ShapeError(f"shape {tuple(new)} is invalid for a tensor of shape {shape} ({numel} elements)")
        out[neg[0]] = numel // known
    elif known != numel:
        raise ShapeError(f"shape {tuple(new)} is invalid for a tensor of shape {shape} ({numel} elements)")
    return tuple(out)


def sizes_arg(size: tuple[Any, ...]) -> Shape:
    """``f(2, 3)`` and ``f((2, 3))`` and ``f([2, 3])`` all mean shape (2, 3)."""
    if len(size) == 1 and not isinstance(size[0], int | np.integer):
        size = tuple(size[0])
    try:
        out = tuple(int(s) for s in size)
    except (TypeError, ValueError):
        raise ShapeError(f"a shape must be ints, got {size!r}") from None
    if any(s < 0 for s in out):
        raise ShapeError(f"negative dimension in shape {out}")
    return out


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def wrapped_indices(a: np.ndarray, n: int, what: str) -> np.ndarray | None:
    """Integer index values for a dim of size ``n``: raises ``IndexOutOfRangeError`` for one
    outside [-n, n); returns the values with negatives wrapped once (as Python's), or None when
    none is negative (the indices serve as they are)."""
    lo, hi = int(a.min()), int(a.max())
    if lo < -n or hi >= n:
        bad = lo if lo < -n else hi
        raise IndexOutOfRangeError(f"index {bad} is out of bounds for {what} of size {n}")
    if lo < 0:
        return np.where(a < 0, a + n, a)
    return None
