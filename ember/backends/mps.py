"""``ember.backends.mps``, as ``torch.backends.mps``: Apple's Metal backend, which ember does not have."""

from __future__ import annotations


def is_available() -> bool:
    """As ``torch.backends.mps.is_available``: False (no Metal backend)."""
    return False


def is_built() -> bool:
    """As ``torch.backends.mps.is_built``: False."""
    return False
