"""The wgpu runtime: WGSL kernels on a Vulkan or OpenGL adapter through wgpu-py (wgpu-native).

The kernel path, as in the seed: look the ``KernelId`` up in the in-process pipeline table; on
a miss expand the kernel to IR, render WGSL, create the shader module and the compute pipeline
(validation errors become ``CompilationError`` on the calling thread, with the source).

Choices, and why:

* **One client per physical adapter and API.** ``Device.wgpu(kind)`` and ``Device.vulkan(kind)``
  reaching the same Vulkan adapter get the same client: one memory pool, one queue, one
  pipeline table, one ``device_id`` (``<adapter identity>/wgpu<wgsl...>``) for autotune. They
  stay distinct ``Device`` values (own fusion streams); tensors of one are not tensors of the
  other. The seed's stack gives each spelling its own service threads, pool, pipeline table and
  autotune table and re-tunes 41 candidates for the second spelling: we share all of it.
* **Capability canary.** At client creation the adapter's features are checked and a canary
  shader using f16 arithmetic and a subgroup reduction is compiled *and run*; its results
  (and the subgroup size it reports) must be right. Only then do kernels see f16 buffers and
  plane operations (name ``wgpu<wgsl+f16+subgroups32>``); otherwise one warning is logged and
  kernels use plain WGSL (``wgpu<wgsl>``, plane size 1). ``require=("f16",)`` or
  ``("subgroups",)`` turns the fallback into a ``DeviceUnavailableError``.
* **Pipeline cache persistence.** wgpu-py (0.32) exposes no ``GPUPipelineCache`` even where the
  adapter reports the ``pipeline-cache`` feature, so compiled pipelines live in process only;
  the drivers' own caches (Mesa's disk shader cache, NVIDIA's ``__GL_SHADER_DISK_CACHE``) keep
  the backend compilation across processes. ``WgpuServer.pipeline_cache`` says which applies.
* **Launch batching.** Launches record compute passes into one pending command encoder; their
  ``info`` words go into an arena uploaded once per submission. Anything that writes or reads
  memory from the host flushes first, so queue order is program order (a pooled buffer reused
  by ``create`` is never written before earlier kernels that read it have run).
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
from ... import tracing
from ...errors import CompilationError, DeviceUnavailableError, OutOfMemoryError, UnsupportedDTypeError
from ..compiler.base import CompiledSource
from ..compiler.wgsl import WgslCompiler
from ..ir import KernelIr
from ..kernel_id import KernelId
from ..types import elem_of_dtype
from . import wgpu_adapters as adapters
from .pool import BlockPool, PooledBuffer
from .service import InlineChannel

__all__ = ["create_client", "WgpuClient", "WgpuServer", "WgpuBuffer", "WgpuPool", "CANARY_SOURCE", "Canary"]

log = logging.getLogger("ember.wgpu")

#: the canary: f16 arithmetic and a subgroup reduction; unit u writes
#: [subgroupAdd(1), subgroup_size, f32(f16 product)]
CANARY_SOURCE = """
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn canary(@builtin(local_invocation_index) u: u32, @builtin(subgroup_size) sg: u32) {
    let h = f16(1.5) * f16(f32(u % 4u));
    out[3u * u] = subgroupAdd(1.0f);
    out[3u * u + 1u] = f32(sg);
    out[3u * u + 2u] = f32(h);
}
"""

_USAGE = None  # STORAGE | COPY_SRC | COPY_DST, filled on first use (wgpu imports lazily)
_MIN_BYTES = 16


class Canary:
    """Outcome of the capability check: what passed and why the rest did not."""

    __slots__ = ("f16", "subgroups", "plane_size", "why")

    def __init__(self, f16: bool, subgroups: bool, plane_size: int, why: str) -> None:
        self.f16, self.subgroups, self.plane_size, self.why = f16, subgroups, plane_size, why

    def __repr__(self) -> str:
        return f"Canary(f16={self.f16}, subgroups={self.subgroups}, plane_size={self.plane_size}, why={self.why!r})"


def run_canary(device: Any, features: set[str], source: str | None = None) -> Canary:
    """Check features, then compile and run the canary; both capabilities or neither."""
    missing = [f for f in ("shader-f16", "subgroup") if f not in features]
    if missing:
        return Canary(False, False, 1, f"adapter lacks {', '.join(missing)}")
    import wgpu

    src = CANARY_SOURCE if source is None else source
    try:
        mod = device.create_shader_module(code=src)
        pipe = device.create_compute_pipeline(layout="auto", compute={"module": mod, "entry_point": "canary"})
        buf = device.create_buffer(size=64 * 3 * 4, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        bg = device.create_bind_group(
            layout=pipe.get_bind_group_layout(0), entries=[{"binding": 0, "resource": {"buffer": buf}}]
        )
        enc = device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(1)
        p.end()
        device.queue.submit([enc.finish()])
        got = np.frombuffer(device.queue.read_buffer(buf), np.float32).reshape(64, 3)
    except Exception as e:  # noqa: BLE001 - any failure of the canary means "not usable"
        return Canary(False, False, 1, f"canary shader failed: {str(e).strip().splitlines()[0][:300]}")
    sizes = set(got[:, 1].astype(int).tolist())
    want_h = (1.5 * (np.arange(64) % 4)).astype(np.float32)
    if not np.array_equal(got[:, 2], want_h):
        return Canary(False, False, 1, "canary f16 arithmetic gave wrong values")
    if len(sizes) != 1:
        return Canary(False, False, 1, f"subgroup size varies within a workgroup: {sorted(sizes)}")
    size = sizes.pop()
    if size < 1 or 64 % size or not np.all(got[:, 0] == size):
        return Canary(False, False, 1, f"canary subgroupAdd gave {sorted(set(got[:, 0].tolist()))}, size {size}")
    return Canary(True, True, size, "")


# ------------------------------------------------------------------------------ memory


class WgpuBuffer(PooledBuffer):
    """One GPU buffer; ``ptr`` is an id for reprs (there are no host addresses)."""

    __slots__ = ("handle", "nbytes", "capacity", "pool", "ptr", "__weakref__")

    def __init__(self, handle: Any, nbytes: int, capacity: int, pool: WgpuPool | None, ptr: int) -> None:
        self.handle = handle
        self.nbytes = nbytes
        self.capacity = capacity
        self.pool = pool
        self.ptr = ptr

    def __repr__(self) -> str:
        return f"WgpuBuffer(#{self.ptr:x}, {self.nbytes} bytes)"


class WgpuPool(BlockPool):
    """Free lists of GPU buffers per size class (``pool.BlockPool``). Reuse is safe in queue
    order: a buffer returned here may still be read by recorded launches, and every later use
    is recorded or written after them (the server flushes before host writes).

    The pool holds the only owning reference to every GPU buffer (``_live`` while a
    ``WgpuBuffer`` uses it): were the wgpu object owned by the ``WgpuBuffer`` alone, a
    ``WgpuBuffer`` collected as part of a reference cycle would have its wgpu buffer finalised
    (released) in the same collection, and its ``__del__`` would put a dead buffer on the free
    list."""

    device = "wgpu device"
    #: wgpu reports allocation failures as generic errors
    oom_errors = (Exception,)

    def __init__(self, device: Any, max_cached_bytes: int = 4 << 30) -> None:
        super().__init__(max_cached_bytes, min_bytes=_MIN_BYTES)
        self.wgpu_device = device
        self._ids = 0
        self._live: dict[int, Any] = {}

    def _new_block(self, cap: int) -> Any:
        return self.wgpu_device.create_buffer(size=cap, usage=_usage())

    def _wrap(self, handle: Any, nbytes: int, cap: int) -> WgpuBuffer:
        self._ids += 1
        self._live[self._ids] = handle
        return WgpuBuffer(handle, nbytes, cap, self, self._ids)

    def _recycle(self, ptr: int, cap: int) -> None:  # type: ignore[override]
        # a WgpuBuffer passes its id: the pool owns the wgpu buffer (see above)
        handle = self._live.pop(ptr, None)
        if handle is not None:
            super()._recycle(handle, cap)


def _usage() -> Any:
    global _USAGE
    if _USAGE is None:
        import wgpu

        _USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    return _USAGE


# ------------------------------------------------------------------------------ server


class WgpuKernel:
    """A compiled kernel: the compute pipeline and what launches need."""

    __slots__ = (
        "kernel_id", "entry", "fn", "source", "widths", "info_words", "narrowed", "compile_seconds", "plans"
    )

    def __init__(self, kid: KernelId, src: CompiledSource, pipeline: Any, seconds: float) -> None:
        self.kernel_id = kid
        self.entry = src.entry
        self.fn = pipeline
        self.source = src
        self.widths = src.notes["widths"]
        self.info_words = src.notes["info_words"]
        self.narrowed = src.notes["narrowed"]  # i64 scalar slots the kernel reads as i32
        self.compile_seconds = seconds
        self.plans: dict[Any, Any] = {}


#: launches recorded before a submission is forced (bounds the arena and the latency)
_BATCH = 128


class WgpuServer:
    """Compiles and runs kernels on one wgpu device (one queue, launches in program order)."""

    def __init__(self, device: Any, entry: adapters.AdapterEntry | None, canary: Canary, index: int) -> None:
        import wgpu

        self.device = device
        self.adapter = entry
        self.canary = canary
        self.index = index
        self.features = set(device.features)
        limits = device.limits
        self.compiler = WgslCompiler(
            f16=canary.f16,
            subgroups=canary.subgroups,
            plane_size=canary.plane_size,
            max_shared_bytes=int(limits.get("max-compute-workgroup-storage-size", 16384)),
        )
        self.align = int(limits.get("min-storage-buffer-offset-alignment", 256))
        self.max_binding = int(limits.get("max-storage-buffer-binding-size", 1 << 27))
        #: array parameters one kernel may bind: every array is a storage binding, and so is
        #: ``info`` (WebGPU's default limit is 8 per stage; lavapipe offers 16)
        self.max_arrays = int(limits.get("max-storage-buffers-per-shader-stage", 8)) - 1
        self.pipelines: dict[KernelId, WgpuKernel] = {}
        offered = entry is not None and "pipeline-cache" in entry.adapter.features
        self.pipeline_cache = "driver's own (wgpu-py exposes no GPUPipelineCache)" if offered else "driver's own"
        self.stage = f"DSD-wgpu-{index}"
        self.downstream = InlineChannel(self.stage)
        self._layouts: dict[int, Any] = {}
        self._lock = threading.RLock()
        self._encoder: Any = None
        self._pending = 0
        self._arena_bytes = _BATCH * max(self.align, 256)
        self._arena = np.zeros(self._arena_bytes // 4, np.uint32)
        self._arena_used = 0
        self._arena_buf = device.create_buffer(
            size=self._arena_bytes, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
        )
        self._arena_old: list[Any] = []
        self.compiles = 0
        self.launches = 0
        self.submits = 0
        self._synced = 0

    # ---------------------------------------------------------------- compile
    def pipeline(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> WgpuKernel:
        p = self.pipelines.get(kid)
        if p is not None:
            return p
        with self._lock:
            p = self.pipelines.get(kid)
            if p is None:
                p = self.pipelines[kid] = self._build(kid, make_ir)
            return p

    def _build(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> WgpuKernel:
        entry = kid.entry()
        t0 = time.perf_counter()
        with tracing.span("compile", kernel=entry, language=self.compiler.language, stage=self.stage) as sp:
            k = make_ir()
            try:
                src = self.compiler.compile(k)
            except NotImplementedError as e:
                raise CompilationError(f"kernel {entry} cannot be written in WGSL on this device: {e}") from None
            sp.record(cached=False)
            try:
                mod = self.device.create_shader_module(code=src.source)
                pipe = self.device.create_compute_pipeline(
                    layout=self._layout(len(src.buffers)), compute={"module": mod, "entry_point": entry}
                )
            except Exception as e:  # noqa: BLE001 - wgpu validation errors carry the cause in their text
                raise CompilationError(
                    f"WGSL compilation of kernel {entry} failed", src.source, str(e)
                ) from None
        self.compiles += 1
        from ...environment import log as elog

        if elog.enabled("compilation"):
            elog.compile_block(
                f"{kid.kernel} -> {entry}", kid.text(), self.compiler.language, src.source, False, "wgpu/naga"
            )
        return WgpuKernel(kid, src, pipe, time.perf_counter() - t0)

    def _layout(self, n_arrays: int) -> Any:
        lay = self._layouts.get(n_arrays)
        if lay is None:
            import wgpu

            entries = [
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "storage"}}
                for i in range(n_arrays)
            ]
            entries.append(
                {"binding": n_arrays, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": "read-only-storage"}}
            )
            bgl = self.device.create_bind_group_layout(entries=entries)
            lay = self._layouts[n_arrays] = (bgl, self.device.create_pipeline_layout(bind_group_layouts=[bgl]))
        return lay[1]

    # ---------------------------------------------------------------- launch (runtime/contract.py)
    def preparing_here(self) -> bool:
        """Always False: the wgpu server has no preparing state (the tuner compiles its
        candidates one by one here)."""
        return False

    def launch(self, kernel: WgpuKernel, tensors: list[Any], info: Any, count: Any) -> None:
        """One launch of ``kernel`` over ``tensors`` with ``info`` words on ``count`` cubes: a
        compute pass recorded into the pending command encoder (the info words into the arena)."""
        if count.x == 0 or count.y == 0 or count.z == 0:
            return
        n_info = kernel.info_words
        slot = -(-max(n_info, 4) * 4 // self.align) * self.align
        with self._lock:
            if self._arena_used + slot > self._arena_bytes:
                self._flush()
                if slot > self._arena_bytes:
                    self._grow_arena(slot)
            at = self._arena_used
            self._arena_used += slot
            words = self._arena[at // 4 : at // 4 + max(n_info, 4)]
            if info is not None:
                raw = np.frombuffer(info, np.uint32)
                words[: raw.size] = raw
                for i in kernel.narrowed:
                    words[2 * i] = _narrow_word(info[i], kernel.entry)
            base = n_info - len(tensors)
            widths = kernel.widths
            entries = []
            for k, t in enumerate(tensors):
                words[base + k] = t.offset // widths[k]
                b = t.buffer
                size = b.capacity
                if size > self.max_binding:
                    if b.nbytes > self.max_binding:
                        raise OutOfMemoryError(
                            f"a {b.nbytes}-byte buffer exceeds this device's largest storage binding "
                            f"({self.max_binding} bytes, max-storage-buffer-binding-size): kernel {kernel.entry}"
                        )
                    size = self.max_binding - self.max_binding % 4
                entries.append({"binding": k, "resource": {"buffer": b.handle, "offset": 0, "size": size}})
            entries.append(
                {"binding": len(tensors), "resource": {"buffer": self._arena_buf, "offset": at, "size": slot}}
            )
            bg = self.device.create_bind_group(layout=self._layouts[len(tensors)][0], entries=entries)
            enc = self._encoder
            if enc is None:
                enc = self._encoder = self.device.create_command_encoder()
            p = enc.begin_compute_pass()
            p.set_pipeline(kernel.fn)
            p.set_bind_group(0, bg)
            p.dispatch_workgroups(count.x, count.y, count.z)
            p.end()
            self.launches += 1
            self._pending += 1
            if self._pending >= _BATCH:
                self._flush()

    def _grow_arena(self, nbytes: int) -> None:
        import wgpu

        self._arena_old.append(self._arena_buf)
        self._arena_bytes = nbytes
        self._arena = np.zeros(nbytes // 4, np.uint32)
        self._arena_buf = self.device.create_buffer(
            size=nbytes, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
        )

    def _flush(self) -> None:
        """Submit the recorded launches (their info words first)."""
        enc = self._encoder
        if enc is None:
            return
        if self._arena_used:
            self.device.queue.write_buffer(self._arena_buf, 0, self._arena[: self._arena_used // 4])
        self._encoder = None
        self._pending = 0
        self._arena_used = 0
        self.device.queue.submit([enc.finish()])
        self.submits += 1

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def sync(self) -> None:
        with self._lock:
            self._flush()
            if self.submits != self._synced:
                self._synced = self.submits
                self._wait()

    def _wait(self) -> None:
        """Block until the queue is idle (wgpu-py 0.32's on_submitted_work_done_sync fails on
        a callback signature mismatch; a device poll in wait mode does the same)."""
        poll = getattr(self.device, "_poll_wait", None)
        if poll is not None:
            poll()
        else:
            self.device.queue.on_submitted_work_done_sync()

    # ---------------------------------------------------------------- host transfers
    def write(self, buf: WgpuBuffer, data: np.ndarray, byte_offset: int) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if raw.size == 0:
            return
        with self._lock:
            self._flush()
            start = byte_offset - byte_offset % 4
            end = -(-(byte_offset + raw.size) // 4) * 4
            if start != byte_offset or end != byte_offset + raw.size:  # keep the bytes around the range
                cur = np.frombuffer(self.device.queue.read_buffer(buf.handle, start, end - start), np.uint8).copy()
                cur[byte_offset - start : byte_offset - start + raw.size] = raw
                raw = cur
            self.device.queue.write_buffer(buf.handle, start, raw)

    def read_bytes(self, buf: WgpuBuffer, start: int, size: int) -> np.ndarray:
        with self._lock:
            self._flush()
            a = start - start % 4
            b = min(-(-(start + size) // 4) * 4, buf.capacity)
            data = np.frombuffer(self.device.queue.read_buffer(buf.handle, a, b - a), np.uint8)
            return data[start - a : start - a + size]


def _narrow_word(word: int, entry: str) -> int:
    """The u32 word an int64 scalar argument becomes (WGSL computes int64 in 32 bits). The two
    extremes saturate: they are the identities of max/min reductions, and every value a WGSL
    device holds fits int32; any other value outside the int32 range is refused."""
    v = word - (1 << 64) if word >= 1 << 63 else word
    if v == (1 << 63) - 1:
        v = (1 << 31) - 1
    elif v == -(1 << 63):
        v = -(1 << 31)
    elif not -(1 << 31) <= v < 1 << 31:
        raise UnsupportedDTypeError(
            f"kernel {entry}: the int64 argument {v} does not fit the 32 bits WGSL computes int64 values in"
        )
    return v & 0xFFFFFFFF


# ------------------------------------------------------------------------------ client


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
                f"{d.name} storage here; use float32/int32/uint8/bool, or another device"
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
