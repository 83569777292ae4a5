"""The wgpu runtime's server: compiles kernels to compute pipelines and runs them on one queue.

The kernel path, as in the seed: look the ``KernelId`` up in the in-process pipeline table; on
a miss expand the kernel to IR, render WGSL, create the shader module and the compute pipeline
(validation errors become ``CompilationError`` on the calling thread, with the source).

* **Pipeline cache persistence.** wgpu-py (0.32) exposes no ``GPUPipelineCache`` even where the
  adapter reports the ``pipeline-cache`` feature, so compiled pipelines live in process only;
  the drivers' own caches (Mesa's disk shader cache, NVIDIA's ``__GL_SHADER_DISK_CACHE``) keep
  the backend compilation across processes. ``WgpuServer.pipeline_cache`` says which applies.
* **Launch batching.** Launches record compute passes into one pending command encoder; their
  ``info`` words go into an arena uploaded once per submission. Anything that writes or reads
  memory from the host flushes first, so queue order is program order (a pooled buffer reused
  by ``create`` is never written before earlier kernels that read it have run).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import tracing
from ...errors import CompilationError, OutOfMemoryError, UnsupportedDTypeError
from ..compiler.base import CompiledSource
from ..compiler.wgsl import WgslCompiler
from ..ir import KernelIr
from ..kernel_id import KernelId
from . import wgpu_adapters as adapters
from .service import InlineChannel
from .wgpu_canary import Canary
from .wgpu_memory import WgpuBuffer

__all__ = ["WgpuKernel", "WgpuServer"]

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
