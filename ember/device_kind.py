"""``DeviceKind``: which adapter a GPU device asks for, and its text form.

A value type with no dependencies (layer 8, beside ``dtype.py``): ``ember.device`` builds
devices from it and the wgpu runtime's adapter selection reads it, so neither imports the other
for it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DeviceKind", "parse_kind"]


class DeviceKind:
    """Which adapter a GPU device asks for (rules of the seed's "选设备")."""

    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int | str = 0) -> None:
        self.kind = kind
        self.index = index

    @staticmethod
    def default() -> DeviceKind:
        """The adapter wgpu picks by default."""
        return DeviceKind("DefaultDevice")

    @staticmethod
    def discrete_gpu(i: int = 0) -> DeviceKind:
        """The ``i``-th discrete GPU."""
        return DeviceKind("DiscreteGpu", i)

    @staticmethod
    def integrated_gpu(i: int = 0) -> DeviceKind:
        """The ``i``-th integrated GPU."""
        return DeviceKind("IntegratedGpu", i)

    @staticmethod
    def virtual_gpu(i: int = 0) -> DeviceKind:
        """The ``i``-th virtual GPU."""
        return DeviceKind("VirtualGpu", i)

    @staticmethod
    def cpu() -> DeviceKind:
        """A CPU adapter (lavapipe, llvmpipe)."""
        return DeviceKind("Cpu")

    @staticmethod
    def existing(id: int) -> DeviceKind:
        """An adapter already registered under ``id``."""
        return DeviceKind("Existing", id)

    def _key(self) -> tuple[str, Any]:
        return (self.kind, self.index if self.kind not in ("DefaultDevice", "Cpu") else 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceKind) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.kind in ("DefaultDevice", "Cpu"):
            return self.kind
        return f"{self.kind}({self.index})"


_KIND_RE = re.compile(r"^\s*([A-Za-z]+)\s*(?:\(\s*(\d+)\s*\))?\s*$")
_KIND_NAMES = {k.lower(): k for k in ("DefaultDevice", "DiscreteGpu", "IntegratedGpu", "VirtualGpu", "Cpu")}


def parse_kind(text: str) -> DeviceKind:
    """A DeviceKind from its text: ``IntegratedGpu(1)``, ``DiscreteGpu``, ``Cpu``,
    ``DefaultDevice`` (case-insensitive)."""
    m = _KIND_RE.match(text)
    kind = _KIND_NAMES.get(m.group(1).lower()) if m else None
    if kind is None:
        raise ValueError(
            f"cannot read a device kind from {text!r}; write DefaultDevice, DiscreteGpu(i), "
            "IntegratedGpu(i), VirtualGpu(i) or Cpu"
        )
    return DeviceKind(kind, int(m.group(2) or 0))
