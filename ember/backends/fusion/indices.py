"""Index values a queued op reads, checked when the op runs.

The Tensor API checks index tensors (range, negative wrap) where their values are known at
the call; on a lazy device a queued index tensor is not read at the call (that would drain
the stream), so the check happens here, at drain time, just before the inner backend's
index op runs: an out-of-range value raises ``IndexOutOfRangeError`` from the read that
drains (never a silently wrong result), negatives wrap once as in Python. The check reads
the indices to the host (one small copy per queued index op); the eager path is unaffected.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _shape as S
from ... import dtype as dt

__all__ = ["INDEX_OPS", "checked_args", "check_inputs"]


def _fix(inner: Any, idx: Any, n: int, what: str, rec: Any) -> Any:
    k = None if rec is None or rec.inside else rec.input_index(idx)
    if k is not None:
        # an index tensor the drain received realised: checked on the host here without
        # breaking the recording (its read is not recorded), and again by every replay on its
        # new input before it runs (``check_inputs``), so a training step's gather/index_select
        # drain still replays
        rec.inside += 1
        try:
            a = np.asarray(inner.into_data(idx))
        finally:
            rec.inside -= 1
        if a.size and a.dtype.kind in "iu":
            if S.wrapped_indices(a, n, what) is not None:
                # wrapped on the host: an upload a replay would not repeat
                if not rec.failed:
                    rec.failed = "negative indices (wrapped on the host)"
                return _fix_values(inner, idx, a, n, what)
        rec.checks.append((k, n, what))
        return idx
    a = np.asarray(inner.into_data(idx))
    return _fix_values(inner, idx, a, n, what)


def _fix_values(inner: Any, idx: Any, a: np.ndarray, n: int, what: str) -> Any:
    if a.size == 0 or a.dtype.kind not in "iu":
        return idx
    wrapped = S.wrapped_indices(a, n, what)
    return idx if wrapped is None else inner.from_data(wrapped.astype(np.int64), dt.int64)


def check_inputs(inner: Any, checks: tuple[Any, ...], inputs: list[Any]) -> bool:
    """Repeat a capture's index checks on a replay's inputs: raises ``IndexOutOfRangeError``
    as the unreplayed drain would; False where a value is negative (the drain must run
    normally: it wraps them)."""
    for k, n, what in checks:
        a = np.asarray(inner.into_data(inputs[k]))
        if a.size and a.dtype.kind in "iu" and S.wrapped_indices(a, n, what) is not None:
            return False
    return True


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
    recording the drain runs under (``hooks.Recording``; None: none)."""
    return INDEX_OPS[op](inner, args, rec)
