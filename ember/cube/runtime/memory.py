"""Host memory for the CPU runtime: 64-byte aligned buffers reused through a pool.

A ``Buffer`` is one allocation. When the last reference to it goes (every tensor view of it
dropped), its storage returns to the pool's free list for its size class, so the next
reservation of that size reuses memory whose pages are already mapped (a fresh 64 MiB
allocation costs ~16k page faults on first touch; a reused one costs none).

Size classes, reuse and out-of-memory handling are the shared ``pool.BlockPool``'s.
"""

from __future__ import annotations

import os

import numpy as np

from .pool import ALIGN, BlockPool, size_class

__all__ = ["Buffer", "MemoryPool", "size_class", "ALIGN"]


class Buffer:
    """An aligned allocation: ``ptr`` is its address, ``nbytes`` what was asked for."""

    __slots__ = ("ptr", "nbytes", "capacity", "raw", "offset", "pool", "__weakref__")

    def __init__(
        self, raw: np.ndarray, offset: int, nbytes: int, capacity: int, pool: MemoryPool | None
    ) -> None:
        self.raw = raw
        self.offset = offset  # bytes from raw's start to the aligned start
        self.ptr = raw.ctypes.data + offset
        self.nbytes = nbytes
        self.capacity = capacity
        self.pool = pool

    def view(
        self,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
    ) -> np.ndarray:
        """A numpy view of the buffer (valid while this Buffer lives: keep a reference)."""
        return np.ndarray(shape, dtype, buffer=self.raw, offset=self.offset + byte_offset, strides=strides)

    def __del__(self) -> None:
        pool = self.pool
        if pool is not None:
            try:
                pool._recycle(self.raw, self.capacity)
            except Exception:  # interpreter shutdown
                pass

    def __repr__(self) -> str:
        return f"Buffer(0x{self.ptr:x}, {self.nbytes} bytes)"


def _default_cache_limit() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return min(4 << 30, total // 4)


class MemoryPool(BlockPool):
    """Host memory: aligned numpy byte arrays (numpy frees a dropped one)."""

    device = "cpu device"

    def __init__(self, max_cached_bytes: int | None = None) -> None:
        super().__init__(_default_cache_limit() if max_cached_bytes is None else max_cached_bytes)

    def _new_block(self, cap: int) -> np.ndarray:
        return np.empty(cap + ALIGN, np.uint8)

    def _wrap(self, raw: np.ndarray, nbytes: int, cap: int) -> Buffer:
        return Buffer(raw, (-raw.ctypes.data) % ALIGN, nbytes, cap, self)
