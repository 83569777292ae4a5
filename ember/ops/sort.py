"""Sorting primitives: ``argsort(p, dim, descending, stable)``, the int64 permutation that
sorts each slice of ``p`` along ``dim``.

The order is PyTorch's: NaN is greater than every number (last ascending, first descending),
and equal keys keep their input order (every backend sorts stably, so ``stable=False`` gives
the same result as ``stable=True``; torch only permits an unstable order there). The values
of a sort are ``gather``-ed through these indices by the Tensor API (``ember/sorting.py``),
so they carry gather's exact gradient; the indices themselves have none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as dt
from .registry import Op, register

Shape = tuple[int, ...]


def _argsort_out(p: Any, dim: int, descending: bool, stable: bool) -> tuple[Shape, dt.DType]:
    return p.shape, dt.int64


def _argsort(p: np.ndarray, dim: int, descending: bool, stable: bool) -> np.ndarray:
    """numpy's stable sort (which already puts NaN last); descending sorts a reversed key
    (NaN first) with ties still in input order."""
    a = p
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    elif a.dtype.kind == "f" and a.dtype.itemsize < 4 or a.dtype.kind not in "fiub":
        a = a.astype(np.float32)  # float16 / bfloat16: exact in float32
    if not descending:
        return np.argsort(a, axis=dim, kind="stable").astype(np.int64, copy=False)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        # -a is exact; NaN goes first through the primary key (lexsort's last key)
        return np.lexsort((np.where(nan, 0, -a), ~nan), axis=dim).astype(np.int64, copy=False)
    # ~x reverses the order of every integer type without overflow (~x = -x - 1 when signed)
    return np.argsort(~a, axis=dim, kind="stable").astype(np.int64, copy=False)


register(
    # argsort(p, dim, descending, stable): dim non-negative, p at least 1-d; no gradient (indices)
    # not replayed: the C runtime sorts its host-memory buffers with numpy (host work a launch
    # capture does not see)
    Op("argsort", "sort", _argsort_out, flex=_argsort, replay=False),
)

__all__: list[str] = []
