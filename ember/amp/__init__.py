"""``ember.amp``: automatic mixed precision, as ``torch.amp``.

* ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` (also ``ember.autocast``):
  regions where matmul-like ops run in bfloat16/float16 and precision-sensitive ones in float32;
* ``GradScaler``: dynamic loss scaling for float16 training.

``ember.amp.autocast_mode.lower/fp32/promote`` are the casts ops call under autocast (the
functions of ``ember.nn.functional`` use them). See docs/amp.md.
"""

from __future__ import annotations

from .autocast_mode import (
    autocast,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from .grad_scaler import GradScaler

__all__ = [
    "autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available",
    "is_autocast_cache_enabled",
]
