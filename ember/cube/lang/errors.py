"""Errors of the kernel language, pointing at the kernel's own source line.

``CubeSyntaxError`` is defined with the other typed errors (``ember.errors``, the bottom layer)
and named here, where the language raises it.
"""

from __future__ import annotations

from ...errors import CubeSyntaxError

__all__ = ["CubeSyntaxError"]
