"""``pad`` with torch's four modes.

``constant`` is ``ember.pad``. The other modes map each padded dim's output positions to input
positions (a small int64 table computed here) and apply it with one ``index_select`` per dim,
so they are differentiable on every device (the gradient scatters back through the same table)
and negative amounts (crops) follow torch exactly:

* ``reflect`` / ``replicate``: output ``j`` reads input ``m(j - before)`` where ``m`` mirrors
  (without repeating the edge) or clamps out-of-range positions; a crop is a negative
  ``before``/``after``, so a reflection is computed against the uncropped input (as torch).
* ``circular``: torch crops first, then wraps the cropped dim.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import creation as EC
from ... import dtype as dt
from ... import functional as EF
from ...tensor import Tensor

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _table(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    if mode == "circular":
        start = max(-lo, 0)
        m = n + min(lo, 0) + min(hi, 0)  # length after the crops
        lo_p = max(lo, 0)
        j = np.arange(m + lo_p + max(hi, 0))
        return start + (j - lo_p) % m
    j = np.arange(n + lo + hi) - lo
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    # reflect about the first and last element (period 2(n-1)); n == 1 cannot reflect
    period = 2 * (n - 1)
    r = np.abs(j) % period
    return np.where(r >= n, period - r, r)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """As ``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs from the last dim
    backwards; negative amounts crop; ``mode`` is ``'constant'``, ``'reflect'``, ``'replicate'``
    or ``'circular'`` (the last three pad the last 1, 2 or 3 dims of a 2-5-D input, as torch)."""
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pads = [int(p) for p in pad]
    if len(pads) % 2:
        raise ValueError("Padding length must be divisible by 2")
    if len(pads) // 2 > input.ndim:
        raise ValueError("Padding length should be less than or equal to two times the input dimension "
                         f"but got padding length {len(pads)} and input of dimension {input.ndim}")
    if mode == "constant":
        return EF.pad(input, pads, value=value)
    if value is not None and value != 0:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pads) // 2
    if k not in (1, 2, 3) or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pads)} is not supported for {input.ndim}D input tensor. Supported combinations "
            "for non-constant padding: 2D or 3D input: padding size = 2; 3D or 4D input: padding size = 4; "
            "4D or 5D input: padding size = 6")
    out = input
    for i in range(k):
        dim = input.ndim - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        if lo == 0 and hi == 0:
            continue
        n = input.shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Padding size should be less than the corresponding input dimension, but got: "
                               f"padding ({lo}, {hi}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n == 0:
            raise RuntimeError(f"{mode} padding of an empty dimension {dim} (input shape {list(input.shape)})")
        if n + lo + hi < 0 or (mode == "circular" and n + min(lo, 0) + min(hi, 0) <= 0):
            raise RuntimeError(f"The input size {n}, plus negative padding ({lo}, {hi}) resulted in a negative "
                               "output size, which is invalid.")
        idx = _table(mode, n, lo, hi)
        out = out.index_select(dim, EC.tensor(idx.astype(np.int64), dtype=dt.int64, device=input.device))
    return out
