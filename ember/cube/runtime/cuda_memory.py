"""Device memory for the CUDA runtime: ``cuMemAlloc`` blocks reused through a caching pool.

A ``CudaBuffer`` is one block. When its last reference goes, the block returns to the free list
of its size class (the CPU pool's classes: at most 25% slack) *without* a driver call, so
``__del__`` is safe on any thread and never waits for the GPU. Reuse needs no synchronisation:
every launch and copy runs on the device's one stream, so a kernel that still reads a freed
block runs before any later kernel that writes it through a new owner (stream order, as in
PyTorch's caching allocator).

Cached blocks go back to the driver only in ``release_cached`` (after a stream sync), which an
allocation that fails runs before it retries once; a second failure raises OutOfMemoryError
and the pool stays usable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ... import tracing
from ...errors import OutOfMemoryError
from .memory import size_class

__all__ = ["CudaBuffer", "CudaMemoryPool", "DeviceOutOfMemory"]


class DeviceOutOfMemory(Exception):
    """Raised by the pool's allocation function when the driver reports out of memory."""


class CudaBuffer:
    """A device allocation: ``ptr`` its address, ``nbytes`` what was asked for. ``owner`` keeps
    a foreign allocation alive (DLPack import); such a buffer has no pool."""

    __slots__ = ("ptr", "nbytes", "capacity", "pool", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, capacity: int, pool: CudaMemoryPool | None, owner: Any = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.capacity = capacity
        self.pool = pool
        self.owner = owner

    def __del__(self) -> None:
        pool = self.pool
        if pool is not None:
            try:
                pool._recycle(self.ptr, self.capacity)
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self) -> str:
        return f"CudaBuffer(0x{self.ptr:x}, {self.nbytes} bytes)"


class CudaMemoryPool:
    """Free lists of device blocks per size class (list append/pop are atomic under the GIL)."""

    def __init__(self, alloc: Callable[[int], int], free: Callable[[int], None], sync: Callable[[], None]) -> None:
        self._alloc = alloc  # raises DeviceOutOfMemory
        self._free_fn = free
        self._sync = sync
        self._free: dict[int, list[int]] = {}
        self.cached_bytes = 0
        self.allocated_bytes = 0
        self.peak_bytes = 0
        self.reservations = 0
        self.reuses = 0
        self.driver_allocs = 0
        self._lock = threading.Lock()

    def reserve(self, nbytes: int) -> CudaBuffer:
        if tracing.active:
            with tracing.span("reserve", bytes=nbytes):
                return self._reserve(nbytes)
        return self._reserve(nbytes)

    def _reserve(self, nbytes: int) -> CudaBuffer:
        cap = size_class(nbytes)
        self.reservations += 1
        lst = self._free.get(cap)
        ptr = None
        if lst:
            try:
                ptr = lst.pop()
                self.cached_bytes -= cap
                self.reuses += 1
            except IndexError:
                ptr = None
        if ptr is None:
            ptr = self._allocate(cap)
        return CudaBuffer(ptr, nbytes, cap, self)

    def _allocate(self, cap: int) -> int:
        try:
            ptr = self._alloc(cap)
        except DeviceOutOfMemory:
            released = self.release_cached()
            try:
                ptr = self._alloc(cap)
            except DeviceOutOfMemory:
                raise OutOfMemoryError(
                    f"cannot allocate {cap} bytes on the cuda device even after releasing {released} "
                    f"cached bytes ({self.allocated_bytes} bytes held by live tensors)"
                ) from None
        self.driver_allocs += 1
        self.allocated_bytes += cap
        self.peak_bytes = max(self.peak_bytes, self.allocated_bytes)
        return ptr

    def _recycle(self, ptr: int, cap: int) -> None:
        self._free.setdefault(cap, []).append(ptr)
        self.cached_bytes += cap

    def release_cached(self) -> int:
        """Return every cached block to the driver (after the stream is idle); the bytes freed."""
        with self._lock:
            self._sync()
            freed = 0
            for cap, lst in list(self._free.items()):
                while lst:
                    try:
                        ptr = lst.pop()
                    except IndexError:
                        break
                    self._free_fn(ptr)
                    freed += cap
            self.cached_bytes = 0
            self.allocated_bytes -= freed
            return freed

    def usage(self) -> dict[str, Any]:
        return {
            "allocated_bytes": self.allocated_bytes,
            "cached_bytes": self.cached_bytes,
            "peak_bytes": self.peak_bytes,
            "reservations": self.reservations,
            "reuses": self.reuses,
            "driver_allocs": self.driver_allocs,
        }
