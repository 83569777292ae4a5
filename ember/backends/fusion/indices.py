"""Index values a queued op reads, checked on the host when the op runs (inner backends whose
kernels do not check them).

The Tensor API checks index tensors (range, negative wrap) where their values are known at
the call; on a lazy device a queued index tensor is not read at the call (that would drain
the stream). An inner backend whose index kernels check the values themselves
(``Backend.checks_indices``: the Cube backend, which reports a bad value at its next read)
needs nothing more, and the drain passes the indices as they are. For any other inner backend
the check happens here, at drain time, just before its index op runs: the indices are read to
the host (one small copy per queued index op), an out-of-range value raises
``IndexOutOfRangeError`` from the read that drains (never a silently wrong result), negatives
wrap once as in Python. A drain that checks here is not replayed (a replay would not repeat the
host check).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _shape as S
from ... import dtype as dt

__all__ = ["INDEX_OPS", "checked_args"]


def _fix(inner: Any, idx: Any, n: int, what: str, rec: Any) -> Any:
    if rec is not None and not rec.failed:
        rec.failed = "index values checked on the host"
    a = np.asarray(inner.into_data(idx))
    if a.size == 0 or a.dtype.kind not in "iu":
        return idx
    wrapped = S.wrapped_indices(a, n, what)
    return idx if wrapped is None else inner.from_data(wrapped.astype(np.int64), dt.int64)


def _dim_size(p: Any, d: int) -> int:
    return p.shape[d] if len(p.shape) else 1


def _along_dim(inner: Any, args: tuple[Any, ...], what: str, rec: Any) -> tuple[Any, ...]:
    p, d, idx = args[0], args[1], args[2]
    return (p, d, _fix(inner, idx, _dim_size(p, d), f"{what} along dim {d}", rec), *args[3:])


def _per_dim(inner: Any, args: tuple[Any, ...], what: str, rec: Any) -> tuple[Any, ...]:
    p, indices = args[0], args[1]
    fixed = tuple(_fix(inner, t, p.shape[k], f"dim {k}", rec) for k, t in enumerate(indices))
    return (p, fixed, *args[2:])


#: catalog op -> how its index arguments are checked
INDEX_OPS: dict[str, Any] = {
    "gather": lambda inner, a, rec: _along_dim(inner, a, "gather", rec),
    "scatter": lambda inner, a, rec: _along_dim(inner, a, "scatter", rec),
    "scatter_add": lambda inner, a, rec: _along_dim(inner, a, "scatter", rec),
    "index_select": lambda inner, a, rec: _along_dim(inner, a, "index_select", rec),
    "index": lambda inner, a, rec: _per_dim(inner, a, "index", rec),
    "index_put": lambda inner, a, rec: _per_dim(inner, a, "index_put", rec),
}


def checked_args(inner: Any, op: str, args: tuple[Any, ...], rec: Any = None) -> tuple[Any, ...]:
    """``args`` of index op ``op`` with its indices checked and negatives wrapped; ``rec``: the
    recording the drain runs under (``hooks.Recording``; None: none), which a host check
    marks as not replayable."""
    return INDEX_OPS[op](inner, args, rec)
