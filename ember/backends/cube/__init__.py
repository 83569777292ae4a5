"""The Cube backend: the op catalog as ``@cube`` kernels on a cube runtime.

``build_backend(("cube", runtime, args, fusion), device)`` is called by Dispatch when a
device's stack is built. Only the ``cpu`` runtime exists in this build; any other raises
``DeviceUnavailableError`` on the calling thread, as does a machine without a working C
compiler (checked once, when the stack is built).
"""

from __future__ import annotations

from typing import Any

from ...device import Device, unavailable
from .backend import CubeBackend, CubeTensor

__all__ = ["build_backend", "CubeBackend", "CubeTensor"]


def build_backend(spec: tuple[Any, ...], device: Device) -> CubeBackend:
    _, runtime, args, _fusion = spec  # fusion joins in a later issue
    if runtime != "cpu":
        raise unavailable(
            device,
            f"the {runtime!r} runtime is not part of this build yet; Device.cpu() "
            "runs cube kernels on this machine's cores",
        )
    from ...cube.runtime.client import get_client
    from ...cube.runtime.cpu import ToolchainError

    try:
        client = get_client("cpu", 0)
    except ToolchainError as e:
        raise unavailable(device, f"no working C compiler for the cpu runtime: {e}") from None
    return CubeBackend(client)
