"""The Cube backend: the op catalog as ``@cube`` kernels on a cube runtime, with what the Fusion
layer needs to fuse and replay its work.

The package offers three things; Dispatch's build (``backends.dispatch._build``) composes
them into a device's stack:

* ``build_backend(runtime, args, device)``: the Cube backend on the runtime's client (``cpu``,
  ``cuda`` or ``wgpu``). A runtime that cannot start here (no working C compiler, no driver,
  a missing package) raises ``DeviceUnavailableError`` on the calling thread, once, when the
  stack is built.
* ``default_fusers(backend)``: the fusers (``fusers/``) that run blocks of a drain as one kernel.
* ``drain_capturer(backend)``: the hook that lets the Fusion layer replay repeated drains over
  the runtime's launch capture (``drain_capturer.py``), or None where they do not replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import unavailable
from .backend import CubeBackend, CubeTensor
from .drain_capturer import drain_capturer
from .fusers import default_fusers

if TYPE_CHECKING:
    from ...device import Device

__all__ = ["build_backend", "default_fusers", "drain_capturer", "CubeBackend", "CubeTensor"]


def build_backend(runtime: str, args: tuple[Any, ...], device: Device) -> CubeBackend:
    """The Cube backend on the client of ``runtime`` (``args``: the runtime's device arguments)."""
    return CubeBackend(_client(runtime, args, device))


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
