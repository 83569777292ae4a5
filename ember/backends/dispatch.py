"""Dispatch: the single routing layer from a device to its backend stack.

``stack(device)`` builds (once per device) ``Dispatch(inner)`` where ``inner`` is the
decorated backend the device names. Tensors keep a reference to their device's Dispatch,
so routing costs nothing per op: Dispatch binds the inner backend's op methods onto itself
at construction and adds a layer only where it has something to do (the data-transfer
spans that show the layers a read crosses).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..errors import unavailable
from .base import CATALOG, Backend

if TYPE_CHECKING:
    from ..device import Device

__all__ = ["Dispatch", "stack", "available", "backend_name"]

_OWN = frozenset({"from_data", "into_data", "name", "eager", "sync"})


class Dispatch(Backend):
    def __init__(self, inner: Backend, device: Device) -> None:
        self.inner = inner
        self.device = device
        self.name = f"dispatch<{inner.name}>"
        self.eager = inner.eager
        self.checks_indices = inner.checks_indices
        # a backend may offer replaying wrappers of its ops for callers from outside
        replayed = getattr(inner, "replayed", None) or {}
        for op in CATALOG:
            if op not in _OWN:
                setattr(self, op, replayed.get(op) or getattr(inner, op))

    def from_data(self, array: Any, dtype: Any) -> Any:
        if tracing.active:
            with tracing.span("from_data", layer="dispatch"):
                return self.inner.from_data(array, dtype)
        return self.inner.from_data(array, dtype)

    def into_data(self, p: Any) -> Any:
        if tracing.active:
            with tracing.span("into_data", layer="dispatch"):
                return self.inner.into_data(p)
        return self.inner.into_data(p)

    def sync(self) -> None:
        self.inner.sync()


_stacks: dict[Device, Dispatch] = {}
_lock = threading.Lock()


def _build(spec: tuple[Any, ...], device: Device) -> Backend:
    kind = spec[0]
    if kind == "flex":
        from .flex import FlexBackend

        return FlexBackend()
    if kind == "autodiff":
        from .autodiff import Autodiff

        return Autodiff(_build(spec[1], device), checkpointing=spec[2])
    if kind == "fusion":  # Fusion over a non-JIT backend: the lazy machinery over the reference
        from .fusion import Fusion

        return Fusion(_build(spec[1], device), stage=f"DSU-{spec[1][0]}-0")
    if kind == "cube":  # ("cube", runtime, args, fusion)
        try:
            from . import cube
        except ImportError as e:  # the runtime's package is not part of this build
            raise unavailable(device, f"the cube backend cannot be imported ({e})") from e
        _, runtime, args, fusion = spec
        backend = cube.build_backend(runtime, args, device)
        if not fusion:
            return backend
        from .fusion import Fusion

        # the generic Fusion layer over the Cube backend, with the Cube fusers and drain capturer
        client = backend.client
        return Fusion(backend, fusers=cube.default_fusers(backend), capturer=cube.drain_capturer(backend),
                      stage=f"DSU-{client.runtime}-{client.index}")
    raise unavailable(device, f"unknown device kind {kind!r}")


def stack(device: Device) -> Dispatch:
    """The Dispatch backend of ``device``; initialises its runtime on first use."""
    st = _stacks.get(device)
    if st is None:
        with _lock:
            st = _stacks.get(device)
            if st is None:
                st = _stacks[device] = Dispatch(_build(device.spec, device), device)
    return st


def available(device: Device) -> bool:
    try:
        stack(device)
        return True
    except Exception:
        return False


def backend_name(device: Device) -> str:
    """The layers a call on ``device`` crosses, innermost last (``dispatch<autodiff<flex>>``)."""
    return stack(device).name
