"""The CUDA runtime: driver API (cuda-bindings) + NVRTC cubins for the device's exact architecture.

One client per device: the primary context, one stream (every launch, copy and event of the
device is ordered on it), a caching memory pool (``cuda_memory``) and the server
(``cuda_server``: the pipeline table, compiles, launches). This module is the client: memory,
copies in both directions (small reads through a pinned staging block), sync and profiling;
``cuda_driver`` checks the driver calls of both. ``get_client("cuda", (i,))`` builds it
through ``create_client``.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import CompilationError, DeviceUnavailableError
from . import capture
from .cuda_driver import CudaError, CudaFaultError, DeviceInfo, _current, _err_text, _ok, _raise, devices, driver_error
from .cuda_memory import CudaBuffer, CudaMemoryPool, DeviceOutOfMemory
from .cuda_server import CudaServer

__all__ = ["CudaClient", "CudaServer", "CudaError", "CudaFaultError", "create_client", "devices", "driver_error"]


#: CUDA_ERROR_OUT_OF_MEMORY
_OUT_OF_MEMORY = 2
#: what ``CudaClient._staged`` returns when the staging block took no part
_MISSED = object()
#: reads up to this size go through the pinned staging block
_STAGE_BYTES = 1 << 16


def _dtoh_wait(s: CudaServer, fast: Any, dst: int, src: int, nbytes: int) -> None:
    """Copy to host address ``dst`` through the ctypes driver calls and wait for it."""
    err = fast.dtoh_async(dst, src, nbytes, s._stream_h)
    if err:
        _raise(err, "cuMemcpyDtoHAsync", s)
    err = fast.stream_sync(s._stream_h)
    if err:
        _raise(err, "cuStreamSynchronize (after a read)", s)
    s.synced = s.launches


class CudaClient:
    """The ComputeClient contract on a CUDA device."""

    #: widest access per unit the backend's line choices should use: one 16-byte vector load
    #: per operand coalesces across a warp (measured on an H200, bench/gpu.py "add lines":
    #: 4.09 TB/s at 16 bytes, 3.91 at 32, 3.29 at 64)
    max_line_bytes = 16

    def __init__(self, index: int) -> None:
        self.runtime = "cuda"
        self.index = index
        self.server = CudaServer(index)
        s = self.server
        self.pool = CudaMemoryPool(self._alloc, self._free, s.sync)
        nv = s.nvrtc
        adapter = f"cuda-{s.info.name.replace(' ', '_')}-{s.info.uuid}"
        # physical adapter + runtime<compiler>: how the device was spelled plays no part
        self.device_id = f"{adapter}/cuda<nvrtc-{nv.version[0]}.{nv.version[1]}-{s.arch}>"
        self.throughput_id = adapter
        #: pinned host block small reads land in (a DMA straight into it, then a memmove):
        #: a copy into pageable memory goes through the driver's own staging, slower for
        #: the 4 bytes of an ``.item()``; made at the first small read, one reader at a time
        self._stage: int | None = None
        self._stage_raw: Any = None  # the block as a ctypes array (numpy reads from it)
        self._stage_lock = threading.Lock()
        #: numpy dtype -> a 0-d array over the staging block's first bytes (``read_scalar``)
        self._stage_scalars: dict[Any, np.ndarray] = {}

    @property
    def name(self) -> str:
        return "cuda"

    @property
    def info(self) -> DeviceInfo:
        return self.server.info

    # ---------------------------------------------------------------- memory
    def _alloc(self, nbytes: int) -> int:
        s = self.server
        s.check(f"cuMemAlloc({nbytes})")
        s.current()
        err, ptr = s.cu.cuMemAlloc(nbytes)
        if int(err) != 0:
            if int(err) == _OUT_OF_MEMORY:  # not sticky: the pool releases its cache and retries
                raise DeviceOutOfMemory(f"cuMemAlloc({nbytes}): {_err_text(err)}")
            _raise(err, f"cuMemAlloc({nbytes})", s)
        return int(ptr)

    def _free(self, ptr: int) -> None:
        s = self.server
        s.current()
        _ok(s.cu.cuMemFree(ptr), "cuMemFree")

    #: launches and reservations can be captured and replayed (``capture``)
    replayable = True

    def empty(self, nbytes: int) -> CudaBuffer:
        buf = self.pool.reserve(nbytes)
        if capture.active:
            capture.alloc(buf, nbytes)
        return buf

    def create(self, array: np.ndarray) -> CudaBuffer:
        """A new buffer holding a copy of ``array``'s elements in C order."""
        if capture.active:
            capture.broken("an upload")
        buf = self.pool.reserve(array.nbytes)
        if array.nbytes:
            self.write(buf, array)
        return buf

    def write(self, buf: CudaBuffer, array: np.ndarray, byte_offset: int = 0) -> None:
        """Copy ``array`` (C order) into the buffer, ordered after the launches before it."""
        if capture.active:
            capture.broken("an upload")
        if not array.nbytes:
            return
        a = np.ascontiguousarray(array)
        s = self.server
        s.current()
        # from pageable memory the call returns once the bytes are staged: ``a`` may go at once
        if s._fast is not None:
            err = s._fast.htod_async(buf.ptr + byte_offset, a.ctypes.data, a.nbytes, s._stream_h)
            if err:
                _ok((err,), "cuMemcpyHtoDAsync")
            return
        _ok(s.cu.cuMemcpyHtoDAsync(buf.ptr + byte_offset, a.ctypes.data, a.nbytes, s.stream), "cuMemcpyHtoDAsync")

    def read(
        self,
        buf: CudaBuffer,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
    ) -> np.ndarray:
        """A host copy of the elements (``strides`` in bytes; None = C order): the byte span the
        view covers comes over in one copy, the view is taken on the host."""
        if capture.active:
            capture.broken("a read back")
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        if strides is None or _is_c_order(shape, strides, dtype.itemsize):
            # the common case (every .numpy() of a fresh result): a small read is copied out of
            # the staging block (``ndarray.ctypes`` alone costs a microsecond), a larger one
            # lands in the array handed back; no span arithmetic, no second array
            n = 1
            for d in shape:
                n *= d
            nbytes = n * dtype.itemsize
            if nbytes:
                got = self._staged(buf.ptr + byte_offset, nbytes, self._stage_array, (dtype, n, shape))
                if got is not _MISSED:
                    return got
            out = np.empty(shape, dtype)
            if out.nbytes:
                self._copy_to_host(out.ctypes.data, buf.ptr + byte_offset, out.nbytes)
            return out
        if any(n == 0 for n in shape):
            return np.empty(shape, dtype)
        lo = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
        hi = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0) + dtype.itemsize
        host = np.empty(hi - lo, np.uint8)
        self._copy_to_host(host.ctypes.data, buf.ptr + byte_offset + lo, hi - lo)
        view = np.ndarray(shape, dtype, buffer=host, offset=-lo, strides=strides)
        if view.flags.c_contiguous and lo == 0 and hi - lo == view.nbytes:
            return view
        return np.array(view, copy=True, order="C")

    def read_scalar(self, buf: CudaBuffer, dtype: np.dtype, byte_offset: int = 0) -> Any:
        """The element of ``dtype`` at ``byte_offset`` as a Python scalar (``Tensor.item``):
        copied into the pinned staging block and read from there, no array made."""
        if capture.active:
            capture.broken("a read back")
        got = self._staged(buf.ptr + byte_offset, dtype.itemsize, self._stage_scalar, dtype)
        if got is not _MISSED:
            return got
        return self.read(buf, dtype, (), (), byte_offset).item()

    def _stage_scalar(self, dtype: np.dtype) -> Any:
        """The staging block's first element of ``dtype``, as a Python scalar (through a 0-d
        array over the block, made once per dtype)."""
        view = self._stage_scalars.get(dtype)
        if view is None:
            view = self._stage_scalars[dtype] = np.ndarray((), dtype, buffer=self._stage_raw)
        return view.item()

    def _stage_array(self, spec: tuple[np.dtype, int, tuple[int, ...]]) -> np.ndarray:
        """A C-order copy of the staging block's first ``n`` elements (``spec``: dtype, n, shape)."""
        dtype, n, shape = spec
        return np.frombuffer(self._stage_raw, dtype, n).reshape(shape).copy()

    def _stage_to(self, spec: tuple[int, int]) -> None:
        """The staging block's first ``nbytes`` copied to host address ``dst`` (``spec``)."""
        dst, nbytes = spec
        ctypes.memmove(dst, self._stage, nbytes)

    def _staged(self, src: int, nbytes: int, take: Callable[[Any], Any], arg: Any) -> Any:
        """``nbytes`` from device address ``src`` copied into the pinned staging block, waited
        for, and ``take(arg)`` of the block, all under the block's lock; ``_MISSED`` where the
        block is busy (another reader), refused, turned off or too small, or there is no
        ctypes driver (the caller reads another way)."""
        s = self.server
        fast = s._fast
        if fast is None or nbytes > _STAGE_BYTES or not self._stage_lock.acquire(False):
            return _MISSED
        try:
            stage = self._stage if self._stage is not None else self._make_stage()
            if not stage:
                return _MISSED
            if getattr(_current, "ctx", None) is not s.ctx:
                s.current()
            _dtoh_wait(s, fast, stage, src, nbytes)
            return take(arg)
        finally:
            self._stage_lock.release()

    def _make_stage(self) -> int:
        """The pinned staging block of small reads (0 where pinned memory is refused or turned
        off: reads then go straight to pageable memory)."""
        if os.environ.get("EMBER_CUDA_PINNED_READS", "1") == "0":
            self._stage = 0
            return 0
        s = self.server
        err, ptr = s.cu.cuMemAllocHost(_STAGE_BYTES)
        self._stage = int(ptr) if int(err) == 0 else 0
        if self._stage:
            self._stage_raw = (ctypes.c_char * _STAGE_BYTES).from_address(self._stage)
        return self._stage

    def _copy_to_host(self, dst: int, src: int, nbytes: int) -> None:
        """``nbytes`` from device address ``src`` to host address ``dst``, ordered after the
        stream's launches; returns once they are there (a kernel's failure surfaces here)."""
        if self._staged(src, nbytes, self._stage_to, (dst, nbytes)) is not _MISSED:
            return
        s = self.server
        if getattr(_current, "ctx", None) is not s.ctx:
            s.current()
        fast = s._fast
        if fast is not None:
            _dtoh_wait(s, fast, dst, src, nbytes)
            return
        _ok(s.cu.cuMemcpyDtoHAsync(dst, src, nbytes, s.stream), "cuMemcpyDtoHAsync")
        s.sync()

    # ---------------------------------------------------------------- kernels
    def launch(self, kernel: Any, count: Any, dim: Any, *args: Any, **kwargs: Any) -> None:
        kernel.launch(self, count, dim, *args, **kwargs)

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> Any:
        return self.server.pipeline(kid, make_ir)

    def preparing(self) -> Any:
        """See ``CudaServer.preparing`` (the tuner starts its candidates' compiles together)."""
        return self.server.preparing()

    def wait_prepared(self) -> None:
        self.server.wait_prepared()

    def sync(self) -> None:
        if capture.active:
            capture.broken("a sync")
        self.server.sync()

    def profile(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Run ``fn`` between two events on the device's stream; (its result, device seconds)."""
        s = self.server
        cu = s.cu
        e0, e1 = s.event(), s.event()
        try:
            _ok(cu.cuEventRecord(e0, s.stream), "cuEventRecord")
            r = fn()
            _ok(cu.cuEventRecord(e1, s.stream), "cuEventRecord")
            _ok(cu.cuEventSynchronize(e1), "cuEventSynchronize")
            ms = float(_ok(cu.cuEventElapsedTime(e0, e1), "cuEventElapsedTime"))
        finally:
            s._events.extend((e0, e1))
        return r, ms / 1e3

    def memory_usage(self) -> dict[str, Any]:
        return self.pool.usage()

    def __repr__(self) -> str:
        return f"CudaClient(cuda:{self.index} {self.server.info.name} {self.server.arch})"


def _is_c_order(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether byte ``strides`` lay ``shape`` out in C order without gaps (a size-1 dimension's
    stride plays no part; no element at all is C order too)."""
    if 0 in shape:
        return True
    acc = itemsize
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != acc:
            return False
        acc *= n
    return True


def create_client(args: Any) -> CudaClient:
    """``get_client("cuda", (index,))``: the client of CUDA device ``index``."""
    index = int(args[0] if isinstance(args, tuple) else args)
    try:
        return CudaClient(index)
    except CompilationError:
        raise
    except DeviceUnavailableError:
        raise
    except ModuleNotFoundError:
        raise
    except CudaError as e:
        raise DeviceUnavailableError(f"CUDA device {index} could not start: {e}") from None
