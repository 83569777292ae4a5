"""Helpers the composition families share (private)."""

from __future__ import annotations

from ..tensor import Tensor, where


def _float(x: Tensor) -> Tensor:
    """``x`` itself when floating point, else ``x.float()`` (torch's integer-to-float rule)."""
    return x if x._dt.is_floating_point else x.float()


_where = where
