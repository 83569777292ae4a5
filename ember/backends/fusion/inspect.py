"""The fusion inspector: which blocks each drain formed and which fuser took each.

    with ember.inspect_fusion(dev) as rec:
        z = (x * 2 + 1).relu()
        z.numpy()
    rec.blocks        # [BlockRecord(fuser='elementwise', ops=['mul_scalar', 'add_scalar', 'relu'])]
    rec.searches      # plan searches run inside the block (0 when every plan was cached)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BlockRecord", "FusionRecord", "inspect_fusion", "fusion_backend"]


@dataclass(frozen=True)
class BlockRecord:
    fuser: str  # the fuser's name, or "unfused"
    ops: tuple[str, ...]


@dataclass
class FusionRecord:
    drains: list[list[BlockRecord]] = field(default_factory=list)
    searches: int = 0
    plan_hits: int = 0

    @property
    def blocks(self) -> list[BlockRecord]:
        return [b for d in self.drains for b in d]

    @property
    def fused(self) -> list[BlockRecord]:
        return [b for b in self.blocks if b.fuser != "unfused"]

    def __str__(self) -> str:
        lines = [f"{len(self.drains)} drains, {self.searches} searches, {self.plan_hits} plan hits"]
        for i, d in enumerate(self.drains):
            for b in d:
                lines.append(f"  drain {i}: {b.fuser:<12} {' '.join(b.ops)}")
        return "\n".join(lines)


def fusion_backend(device: Any) -> Any:
    """The Fusion layer of a device's stack (TypeError when it has none)."""
    from . import Fusion

    bk = device.backend() if hasattr(device, "backend") else device
    while bk is not None and not isinstance(bk, Fusion):
        bk = getattr(bk, "inner", None)
    if bk is None:
        raise TypeError(f"{device!r} has no fusion layer (a JIT device with fusion on has one)")
    return bk


@contextmanager
def inspect_fusion(device: Any) -> Iterator[FusionRecord]:
    """Record every drain of ``device``'s fusion layer while the block runs (all threads)."""
    fb = fusion_backend(device)
    rec = FusionRecord()
    fb.recorders.append(rec)
    try:
        yield rec
    finally:
        fb.recorders.remove(rec)
