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

from collections.abc import Callable
from typing import Any

from .pool import ALIGN, BlockPool, PooledBuffer

__all__ = ["CudaBuffer", "CudaMemoryPool", "DeviceOutOfMemory"]

_new = object.__new__


class DeviceOutOfMemory(Exception):
    """Raised by the pool's allocation function when the driver reports out of memory."""


class CudaBuffer(PooledBuffer):
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
        # ``BlockPool._recycle`` inline (the CUDA pool caches without limit): every result of
        # every op, and every intermediate of a replayed drain, dies here
        pool = self.pool
        if pool is not None:
            try:
                cap = self.capacity
                lst = pool._free.get(cap)
                if lst is None:
                    lst = pool._free[cap] = []
                lst.append(self.ptr)
                pool.cached_bytes += cap
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self) -> str:
        return f"CudaBuffer(0x{self.ptr:x}, {self.nbytes} bytes)"


class CudaMemoryPool(BlockPool):
    """Device blocks from ``cuMemAlloc``, cached without limit (``release_cached`` gives them
    back, after a stream sync, when an allocation fails)."""

    device = "cuda device"
    oom_errors = (DeviceOutOfMemory,)

    def __init__(self, alloc: Callable[[int], int], free: Callable[[int], None], sync: Callable[[], None]) -> None:
        super().__init__()  # no cache limit, no minimum size: ``_reserve`` and ``CudaBuffer.__del__`` rely on both
        self._alloc = alloc  # raises DeviceOutOfMemory
        self._free_fn = free
        self._sync = sync

    def _new_block(self, cap: int) -> int:
        return self._alloc(cap)

    def _reserve(self, nbytes: int) -> CudaBuffer:
        """``BlockPool._reserve`` with ``size_class`` and ``_wrap`` inline (no minimum size here):
        a replayed drain reserves each of its intermediates and results through this."""
        if nbytes <= 4096:
            cap = ALIGN if nbytes <= ALIGN else (nbytes + ALIGN - 1) // ALIGN * ALIGN
        else:
            step = 1 << (nbytes.bit_length() - 3)
            cap = (nbytes + step - 1) // step * step
        self.reservations += 1
        lst = self._free.get(cap)
        ptr = None
        if lst:
            try:
                ptr = lst.pop()
                self.cached_bytes -= cap
                self.reuses += 1
            except IndexError:  # another thread took the last one
                ptr = None
        if ptr is None:
            ptr = self._allocate(cap)
        b = _new(CudaBuffer)
        b.ptr = ptr
        b.nbytes = nbytes
        b.capacity = cap
        b.pool = self
        b.owner = None
        return b

    def _wrap(self, ptr: int, nbytes: int, cap: int) -> CudaBuffer:
        b = _new(CudaBuffer)  # no constructor call: every result of every op is wrapped here
        b.ptr = ptr
        b.nbytes = nbytes
        b.capacity = cap
        b.pool = self
        b.owner = None
        return b

    def _free_block(self, ptr: int) -> None:
        self._free_fn(ptr)

    def _before_release(self) -> None:
        self._sync()
