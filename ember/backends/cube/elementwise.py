"""Elementwise ops of the Cube backend."""

from __future__ import annotations


class ElementwiseOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty``, ``_launch_lines``,
    ``contiguous`` and the other core methods of ``backend.py``)."""

