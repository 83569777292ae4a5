"""The one list of devices the conformance suite and the property tests run on.

A device joins the suite by adding one line to ``DEVICES``; nothing else changes. A device
whose backend stack cannot be built on this machine is skipped with the reason.
``EMBER_TEST_DEVICES=flex,cpu`` keeps only the named devices (comma separated; a name with a
trailing ``*`` keeps every device that starts with it, e.g. ``flex*``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from ember import Device
from ember.device import DeviceKind

DEVICES: list[tuple[str, Callable[[], Device]]] = [
    ("flex", Device.flex),
    ("flex.autodiff", lambda: Device.flex().autodiff()),
    ("flex.autodiff.balanced", lambda: Device.flex().autodiff(checkpointing="balanced")),
    ("flex.lazy", Device.lazy_flex),
    ("flex.lazy.autodiff", lambda: Device.lazy_flex().autodiff()),
    ("cpu", Device.cpu),
    ("cpu.autodiff", lambda: Device.cpu().autodiff()),
    ("cpu.eager", lambda: Device.cpu(fusion=False)),
    ("cpu.eager.autodiff", lambda: Device.cpu(fusion=False).autodiff()),
    # WGSL on a CPU Vulkan adapter (lavapipe: apt install mesa-vulkan-drivers; pip install wgpu)
    ("wgpu.cpu", lambda: Device.wgpu(DeviceKind.cpu())),
    ("wgpu.cpu.autodiff", lambda: Device.wgpu(DeviceKind.cpu()).autodiff()),
    # the high-performance Vulkan adapter (a GPU machine's); named explicitly to run
    ("vulkan", lambda: Device.vulkan()),
    # CUDA (NVIDIA GPU, cuda-bindings + NVRTC): skipped where no driver/GPU is found
    ("cuda", Device.cuda),
    ("cuda.autodiff", lambda: Device.cuda().autodiff()),
    ("cuda.eager", lambda: Device.cuda(fusion=False)),
    ("cuda.eager.autodiff", lambda: Device.cuda(fusion=False).autodiff()),
]

#: devices still being brought up: they run only when EMBER_TEST_DEVICES names them
#: explicitly (the Cube backend joins by default once it implements the whole catalog)
PENDING: frozenset[str] = frozenset({"vulkan"})


@dataclass(frozen=True)
class DeviceCase:
    name: str
    device: Device
    #: why the device is skipped here, or None when its stack builds
    unavailable: str | None

    @property
    def is_autodiff(self) -> bool:
        return self.device.is_autodiff


def _selected(names: list[tuple[str, Callable[[], Device]]]) -> list[tuple[str, Callable[[], Device]]]:
    raw = os.environ.get("EMBER_TEST_DEVICES", "").strip()
    if not raw:
        return [(n, f) for n, f in names if n not in PENDING]
    wanted = [w.strip() for w in raw.split(",") if w.strip()]

    def keep(name: str) -> bool:
        return any(name == w or (w.endswith("*") and name.startswith(w[:-1])) for w in wanted)

    return [(n, f) for n, f in names if keep(n)]


def _why_unavailable(dev: Device) -> str | None:
    from ember.backends import dispatch

    if dispatch.available(dev):
        return None
    try:  # available() swallows the cause; build once more to report it
        dispatch.stack(dev)
    except Exception as e:  # noqa: BLE001 - any failure means "not here"
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return "dispatch.available() is False"


_CASES: list[DeviceCase] | None = None


def device_cases() -> list[DeviceCase]:
    """Every selected device with its availability (built once per session)."""
    global _CASES
    if _CASES is None:
        cases = []
        for name, factory in _selected(DEVICES):
            dev = factory()
            cases.append(DeviceCase(name, dev, _why_unavailable(dev)))
        _CASES = cases
    return _CASES


def device_params(which: str = "all") -> list[pytest.ParameterSet]:
    """pytest params over the selected devices: ``all``, ``autodiff`` or ``plain`` ones;
    an autodiff ``none`` kind keeps autodiff devices with the default checkpointing only."""
    out = []
    for c in device_cases():
        if which == "autodiff" and not c.is_autodiff:
            continue
        if which == "plain" and c.is_autodiff:
            continue
        if which == "autodiff_none" and not (c.is_autodiff and c.device.spec[2] == "none"):
            continue
        marks = [pytest.mark.skip(reason=f"device {c.name} unavailable: {c.unavailable}")] \
            if c.unavailable else []
        out.append(pytest.param(c.device, id=c.name, marks=marks))
    return out


def reference_device() -> Device:
    """The device every other one is compared with (flex: the reference backend)."""
    return Device.flex()


def other_device(dev: Device) -> Device:
    """A device different from ``dev`` that is always available (for mismatch tests)."""
    return Device.flex().autodiff() if dev == Device.flex() else Device.flex()
