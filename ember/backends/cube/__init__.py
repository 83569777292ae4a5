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


def build_backend(spec: tuple[Any, ...], device: Device) -> Any:
    """The backend a ``("cube", runtime, args, fusion)`` spec names: the Cube backend on the
    runtime's client, behind the Fusion decorator unless fusion is off."""
    _, runtime, args, fusion = spec
    cube = CubeBackend(_client(runtime, args, device))
    if not fusion:
        return cube
    from ..fusion import Fusion
    from .fusers import default_fusers

    client = cube.client
    return Fusion(cube, fusers=default_fusers(cube), stage=f"DSU-{client.runtime}-{client.index}")


def _client(runtime: str, args: tuple[Any, ...], device: Device) -> Any:
    from ...cube.runtime.client import RUNTIMES, get_client

    if runtime not in RUNTIMES:
        raise unavailable(device, f"no {runtime!r} runtime in this build ({', '.join(RUNTIMES)})")
    if runtime == "cpu":
        from ...cube.runtime.cpu import ToolchainError

        try:
            return get_client("cpu", 0)
        except ToolchainError as e:
            raise unavailable(device, f"no working C compiler for the cpu runtime: {e}") from None
    try:
        return get_client(runtime, args)
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("ember."):
            raise unavailable(device, f"the {runtime!r} runtime is not part of this build yet") from None
        raise unavailable(device, f"the {runtime!r} runtime needs a package that is not installed ({e})") from e
