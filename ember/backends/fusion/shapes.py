"""Output shape and dtype of every lazily registered op, computed at registration.

A lazy handle must know its shape and dtype before anything runs (the Tensor API reads
them to validate the next call). The Tensor API has validated the arguments already, so
these rules only compute; they never check. They are the registry's ``out`` rules.
"""

from __future__ import annotations

from typing import Any

from ...ops import REGISTRY

__all__ = ["RULES"]

#: op -> (its arguments -> (shape, dtype)): every registry entry with an output rule (an
#: entry without one is a composite that Fusion runs as its decomposition)
RULES: dict[str, Any] = {name: op.out for name, op in REGISTRY.items() if op.out is not None}
