"""The wgpu runtime: WGSL kernels on a Vulkan or OpenGL adapter through wgpu-py (wgpu-native).

This module is the client and its creation; the capability canary (``wgpu_canary``), memory
(``wgpu_memory``), the compiling and launching server (``wgpu_server``) and adapter selection
(``wgpu_adapters``) are its siblings.

Choices, and why:

* **One client per physical adapter and API.** ``Device.wgpu(kind)`` and ``Device.vulkan(kind)``
  reaching the same Vulkan adapter get the same client: one memory pool, one queue, one
  pipeline table, one ``device_id`` (``<adapter identity>/wgpu<wgsl...>``) for autotune. They
  stay distinct ``Device`` values (own fusion streams); tensors of one are not tensors of the
  other. The seed's stack gives each spelling its own service threads, pool, pipeline table and
  autotune table and re-tunes 41 candidates for the second spelling: we share all of it.
* **Capability canary** (``wgpu_canary``): f16 and subgroups only where a canary shader ran
  right. ``require=("f16",)`` or ``("subgroups",)`` turns the fallback into a
  ``DeviceUnavailableError``.
* **Timing.** ``profile`` brackets the work with timestamp queries when the device has
  ``timestamp-query-inside-encoders``; else it times on the host between two syncs, and
  ``client.timing`` says which (``"device"`` / ``"host"``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import dtype as dt
from ...errors import DeviceUnavailableError, UnsupportedDTypeError
from ..types import elem_of_dtype
from . import wgpu_adapters as adapters
from .wgpu_canary import CANARY_SOURCE, Canary, run_canary
from .wgpu_memory import WgpuBuffer, WgpuPool
from .wgpu_server import WgpuServer

__all__ = [
    "create_client", "WgpuClient", "WgpuServer", "WgpuBuffer", "WgpuPool", "CANARY_SOURCE", "Canary", "run_canary"
]

log = logging.getLogger("ember.wgpu")

class WgpuClient:
    """The ComputeClient of one wgpu adapter (see ``ember.cube.runtime.client``)."""

    runtime = "wgpu"
    #: WGSL has no 64-bit integers: the Cube backend draws random streams on the host
    int64_math = False
    #: one vec4 per invocation: wider lines are arrays of vec4 that spread a subgroup's
    #: accesses (as on CUDA, where 16-byte lines measured fastest on the H200)
    max_line_bytes = 16

    def __init__(self, server: WgpuServer, index: int) -> None:
        self.server = server
        self.index = index
        self.pool = WgpuPool(server.device)
        c = server.compiler
        self.name = f"wgpu<{c.target_name.replace('subgroups' + str(c.capabilities.plane_size), 'subgroups')}>"
        ident = server.adapter.identity if server.adapter is not None else f"wgpu-existing-{index}"
        #: physical adapter + API, and runtime<compiler>: equal for every spelling of this device
        self.device_id = f"{ident}/wgpu<{c.target_name}>"
        self.timing = "device" if "timestamp-query-inside-encoders" in server.features else "host"
        #: the most array parameters of one kernel (``client.max_arrays``)
        self.max_arrays = server.max_arrays
        self._holds: dict[Any, bool] = {}

    # ---------------------------------------------------------------- dtypes
    def supports(self, dtype: dt.DType) -> bool:
        """Whether tensors of ``dtype`` can live on this device."""
        hit = self._holds.get(dtype)
        if hit is None:
            try:
                hit = self.server.compiler.holds(elem_of_dtype(dtype))
            except KeyError:
                hit = False
            self._holds[dtype] = hit
        return hit

    def _check(self, dtype: np.dtype) -> None:
        d = dt.from_numpy_dtype(dtype)
        if not self.supports(d):
            raise UnsupportedDTypeError(
                f"{d.name} tensors cannot live on {self.name} ({self.adapter_text()}): WGSL has no "
                f"{d.name} storage here; use float32/int32/int16/int8/uint8/bool, or another device"
            )

    def adapter_text(self) -> str:
        a = self.server.adapter
        return a.describe() if a is not None else "existing device"

    # ---------------------------------------------------------------- memory
    def empty(self, nbytes: int) -> WgpuBuffer:
        return self.pool.reserve(nbytes)

    def create(self, array: np.ndarray) -> WgpuBuffer:
        self._check(array.dtype)
        buf = self.pool.reserve(array.nbytes)
        if array.nbytes:
            self.write(buf, array, 0)
        return buf

    def write(self, buf: WgpuBuffer, array: np.ndarray, byte_offset: int = 0) -> None:
        if array.dtype == _I64:
            array, byte_offset = _narrow(array), byte_offset // 2
        self.server.write(buf, array, byte_offset)

    def read_scalar(self, buf: Any, dtype: np.dtype, byte_offset: int = 0) -> Any:
        """The element of ``dtype`` at ``byte_offset`` as a Python scalar."""
        return self.read(buf, dtype, (), (), byte_offset).item()

    def read(
        self,
        buf: WgpuBuffer,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
    ) -> np.ndarray:
        """A copy of the elements (``strides`` in bytes; None = C order)."""
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        if n == 0:
            return np.zeros(shape, dtype)
        if dtype == _I64:  # held as int32 (see _narrow): half the bytes everywhere
            half = None if strides is None else tuple(st // 2 for st in strides)
            return self.read(buf, np.dtype(np.int32), shape, half, byte_offset // 2).astype(_I64)
        if strides is None:
            strides = tuple(np.empty(0, dtype).itemsize * s for s in _c_strides(shape))
        extent = sum((d - 1) * s for d, s in zip(shape, strides)) + dtype.itemsize
        data = self.server.read_bytes(buf, byte_offset, extent)
        view = np.ndarray(shape, dtype, buffer=data, offset=0, strides=strides)
        return np.array(view, copy=True, order="C")

    # ---------------------------------------------------------------- kernels
    def launch(self, kernel: Any, count: Any, dim: Any, *args: Any, **kwargs: Any) -> None:
        kernel.launch(self, count, dim, *args, **kwargs)

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> Any:
        return self.server.pipeline(kid, make_ir)

    def sync(self) -> None:
        self.server.sync()

    def profile(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Run ``fn``; returns (its result, seconds of device work). Timestamp queries where
        the device offers them inside encoders (``timing == "device"``), else host time
        between two syncs."""
        if self.timing != "device":
            self.sync()
            t0 = time.perf_counter()
            r = fn()
            self.sync()
            return r, time.perf_counter() - t0
        import wgpu
        from wgpu.backends.wgpu_native import extras

        s = self.server
        dev = s.device
        qs = dev.create_query_set(type="timestamp", count=2)
        res = dev.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        with s._lock:
            s._flush()
            s._encoder = dev.create_command_encoder()
            extras.write_timestamp(s._encoder, qs, 0)
        r = fn()
        with s._lock:
            if s._encoder is None:
                s._encoder = dev.create_command_encoder()
            extras.write_timestamp(s._encoder, qs, 1)
            s._encoder.resolve_query_set(qs, 0, 2, res, 0)
            s._flush()
        ts = np.frombuffer(dev.queue.read_buffer(res), np.uint64)
        return r, max(int(ts[1]) - int(ts[0]), 0) * 1e-9

    def __repr__(self) -> str:
        return f"WgpuClient({self.name} on {self.adapter_text()})"


_I64 = np.dtype(np.int64)


def _narrow(array: np.ndarray) -> np.ndarray:
    """int64 data as the int32 the device holds it in (WGSL has no 64-bit integers); values
    outside the int32 range cannot be held."""
    if array.size and (array.min() < -(1 << 31) or array.max() >= 1 << 31):
        bad = array[(array < -(1 << 31)) | (array >= 1 << 31)].reshape(-1)[0]
        raise UnsupportedDTypeError(
            f"int64 value {int(bad)} cannot live on a WGSL device: int64 tensors are held as int32 there"
        )
    return array.astype(np.int32)


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= max(shape[i], 1)
    return tuple(out)


# ------------------------------------------------------------------------------ creation

_clients: dict[Any, WgpuClient] = {}
_lock = threading.Lock()
#: replaced by tests to force the canary's failure (None: the real canary)
canary_override: str | None = None

_WANTED = ("shader-f16", "subgroup", "timestamp-query", "timestamp-query-inside-encoders")


def _open_device(entry: adapters.AdapterEntry) -> Any:
    a = entry.adapter
    feats = [f for f in _WANTED if f in a.features]
    limits = {k: v for k, v in a.limits.items() if isinstance(v, int)}
    try:
        return a.request_device_sync(required_features=feats, required_limits=limits)
    except Exception:  # noqa: BLE001 - some drivers reject their own maxima: retry with defaults
        return a.request_device_sync(required_features=feats)


def create_client(args: tuple[Any, ...]) -> WgpuClient:
    """The client for device args ``(DeviceKind, api[, require])``: selects the adapter (typed
    errors listing every adapter), opens it once per physical adapter, runs the canary."""
    from ...device_kind import DeviceKind

    kind: DeviceKind = args[0]
    api: str = args[1]
    require = tuple(args[2]) if len(args) > 2 else ()
    try:
        import wgpu  # noqa: F401
    except ModuleNotFoundError as e:
        raise DeviceUnavailableError(
            f"the wgpu runtime needs the wgpu package (pip install 'ember[wgpu]'): {e}"
        ) from None
    if kind.kind == "Existing":
        key: Any = ("existing", int(kind.index))
        entry = None
    else:
        entry = adapters.select_adapter(kind, api)
        key = entry.identity
    with _lock:
        client = _clients.get(key)
        if client is None:
            if entry is None:
                device, _adapter = adapters.existing(int(kind.index))
                index = 1000 + int(kind.index)
            else:
                try:
                    device = _open_device(entry)
                except Exception as e:  # noqa: BLE001
                    raise DeviceUnavailableError(
                        f"cannot open wgpu adapter {entry.describe()}: {e}",
                        adapters.describe(adapters.enumerate_adapters()),
                    ) from None
                index = entry.ordinal
            canary = run_canary(device, set(device.features), canary_override)
            if canary.why:
                log.warning(
                    "wgpu: f16/subgroup kernels disabled on %s (%s); using plain WGSL",
                    entry.describe() if entry else "existing device",
                    canary.why,
                )
            client = _clients[key] = WgpuClient(WgpuServer(device, entry, canary, index), index)
    missing = [r for r in require if not getattr(client.server.canary, r if r != "subgroup" else "subgroups", False)]
    if missing:
        raise DeviceUnavailableError(
            f"{client.adapter_text()} cannot provide {', '.join(missing)} "
            f"({client.server.canary.why or 'not offered'}); Device.wgpu() without require= falls back to plain WGSL",
            adapters.describe(adapters.enumerate_adapters()) if entry is not None else [],
        )
    return client


def reset_clients() -> None:
    """Forget every client (tests: a fresh canary run)."""
    with _lock:
        for c in _clients.values():
            try:
                c.server.sync()
            except Exception:  # noqa: BLE001
                pass
        _clients.clear()
