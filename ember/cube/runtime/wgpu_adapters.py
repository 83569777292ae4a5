"""Adapter selection for the wgpu runtime: the seed's "选设备" rules, with errors that list
every adapter found.

* graphics API: a fixed one (``Vulkan``, ``Gl``) is the only candidate; ``Auto`` tries
  ``Vulkan`` then ``Gl`` on Linux (Dx12 and Metal do not exist here) and takes the first API
  that has an adapter of the asked kind;
* ``DefaultDevice``: the high-performance adapter of the API (discrete > integrated > virtual >
  cpu > unknown, the order wgpu's HighPerformance preference uses), unless
  ``EMBER_WGPU_DEFAULT_DEVICE`` names another kind (``IntegratedGpu(1)``, ``Cpu``, ...);
* ``DiscreteGpu(i)`` / ``IntegratedGpu(i)`` / ``VirtualGpu(i)`` / ``Cpu``: the i-th adapter of
  exactly that type, in wgpu's enumeration order;
* ``Existing(id)``: a wgpu device the user registered with ``register_existing``.

Enumeration happens on the calling thread when a device is first used, so a failure is a
``DeviceUnavailableError`` raised right there.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from ...device_kind import DeviceKind, parse_kind
from ...errors import DeviceUnavailableError

__all__ = [
    "AdapterEntry",
    "enumerate_adapters",
    "select_adapter",
    "describe",
    "default_kind",
    "parse_kind",
    "register_existing",
    "existing",
    "API_OF_BACKEND",
]

#: wgpu-py backend_type -> the graphics API names of ``Device.wgpu/vulkan/opengl``
API_OF_BACKEND = {"Vulkan": "Vulkan", "OpenGL": "Gl", "OpenGLES": "Gl", "D3D12": "Dx12", "Metal": "Metal"}
#: wgpu-py adapter_type -> DeviceKind kind
KIND_OF_TYPE = {
    "DiscreteGPU": "DiscreteGpu",
    "IntegratedGPU": "IntegratedGpu",
    "VirtualGPU": "VirtualGpu",
    "CPU": "Cpu",
}
_PREFERENCE = ("DiscreteGpu", "IntegratedGpu", "VirtualGpu", "Cpu", "Unknown")
AUTO_CHAIN = ("Vulkan", "Gl")


@dataclass(frozen=True)
class AdapterEntry:
    """One adapter as wgpu reports it; ``ordinal`` is its place in the enumeration."""

    ordinal: int
    name: str
    kind: str  # DeviceKind kind
    api: str  # Vulkan | Gl | ...
    vendor_id: int
    device_id: int
    driver: str
    adapter: Any  # the wgpu GPUAdapter

    def describe(self) -> str:
        return f"{self.name} (type {self.kind}, API {self.api}, driver {self.driver or '?'})"

    @property
    def identity(self) -> str:
        """Names the physical adapter and API, whatever spelling reached it."""
        name = re.sub(r"[^A-Za-z0-9.()+-]+", "-", self.name).strip("-")
        return f"wgpu-{self.api.lower()}-{self.vendor_id:04x}:{self.device_id:04x}-{name}"


_lock = threading.Lock()
_adapters: list[AdapterEntry] | None = None


def enumerate_adapters(refresh: bool = False) -> list[AdapterEntry]:
    """Every adapter of every API wgpu offers here (cached; ``refresh`` asks again)."""
    global _adapters
    with _lock:
        if _adapters is None or refresh:
            import wgpu

            out = []
            for i, a in enumerate(wgpu.gpu.enumerate_adapters_sync()):
                info = a.info
                out.append(
                    AdapterEntry(
                        i,
                        str(info.get("device") or info.get("description") or "?"),
                        KIND_OF_TYPE.get(str(info.get("adapter_type")), "Unknown"),
                        API_OF_BACKEND.get(str(info.get("backend_type")), str(info.get("backend_type"))),
                        int(info.get("vendor_id") or 0),
                        int(info.get("device_id") or 0),
                        str(info.get("description") or ""),
                        a,
                    )
                )
            _adapters = out
        return list(_adapters)


def describe(adapters: list[AdapterEntry]) -> list[str]:
    return [a.describe() for a in adapters]


def default_kind() -> DeviceKind:
    """What ``DeviceKind.default()`` asks for: ``EMBER_WGPU_DEFAULT_DEVICE`` or DefaultDevice."""
    env = os.environ.get("EMBER_WGPU_DEFAULT_DEVICE", "").strip()
    return parse_kind(env) if env else DeviceKind.default()


def select_adapter(kind: DeviceKind, api: str) -> AdapterEntry:
    """The adapter ``kind`` names under graphics API ``api`` (``Auto``, ``Vulkan``, ``Gl``);
    raises DeviceUnavailableError listing every adapter found."""
    if kind.kind == "Existing":
        raise AssertionError("existing devices are looked up with existing()")
    adapters = enumerate_adapters()
    asked = kind
    if kind.kind == "DefaultDevice":
        kind = default_kind()
    chain = AUTO_CHAIN if api == "Auto" else (api,)
    for candidate in chain:
        of_api = [a for a in adapters if a.api == candidate]
        if kind.kind == "DefaultDevice":
            ranked = sorted(of_api, key=lambda a: (_PREFERENCE.index(a.kind), a.ordinal))
            if ranked:
                return ranked[0]
            continue
        same = [a for a in of_api if a.kind == kind.kind]
        index = int(kind.index) if kind.kind != "Cpu" else 0
        if index < len(same):
            return same[index]
    what = {
        "DefaultDevice": "adapter",
        "DiscreteGpu": "Discrete GPU device",
        "IntegratedGpu": "Integrated GPU device",
        "VirtualGpu": "Virtual GPU device",
        "Cpu": "CPU device",
    }.get(kind.kind, kind.kind)
    override = f" (EMBER_WGPU_DEFAULT_DEVICE={os.environ.get('EMBER_WGPU_DEFAULT_DEVICE')})" if asked != kind else ""
    index = "" if kind.kind in ("DefaultDevice", "Cpu") else f" number {kind.index}"
    raise DeviceUnavailableError(
        f"No {what}{index} found{override} for graphics API {api} (tried {', '.join(chain)})",
        describe(adapters) or ["(none: is a Vulkan or OpenGL driver installed? e.g. mesa-vulkan-drivers)"],
    )


# ------------------------------------------------------------------------------ existing devices

_existing: dict[int, tuple[Any, Any]] = {}


def register_existing(device: Any, adapter: Any = None) -> int:
    """Register a wgpu ``GPUDevice`` created elsewhere; returns the id for
    ``DeviceKind.existing(id)``."""
    with _lock:
        i = len(_existing)
        _existing[i] = (device, adapter if adapter is not None else getattr(device, "adapter", None))
        return i


def existing(i: int) -> tuple[Any, Any]:
    hit = _existing.get(int(i))
    if hit is None:
        raise DeviceUnavailableError(
            f"no wgpu device registered under id {i} (register one with "
            "Device.wgpu_options().setup(gpu_device))",
            [f"registered ids: {sorted(_existing)}"] if _existing else [],
        )
    return hit
