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

from .pool import ALIGN, BlockPool, PooledBuffer, size_class

__all__ = ["Buffer", "MemoryPool", "size_class", "ALIGN"]


class Buffer(PooledBuffer):
    """An aligned allocation: ``ptr`` is its address, ``nbytes`` what was asked for."""

    __slots__ = ("ptr", "nbytes", "capacity", "raw", "offset", "pool", "__weakref__")

    def __init__(
        self,
        raw: np.ndarray,
        offset: int,
        nbytes: int,
        capacity: int,
        pool: MemoryPool | None,
        ptr: int | None = None,
    ) -> None:
        self.raw = raw
        self.offset = offset  # bytes from raw's start to the aligned start
        # ``ptr``: the aligned start when the caller knows it (numpy's ``.ctypes`` costs ~1 µs)
        self.ptr = raw.ctypes.data + offset if ptr is None else ptr
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

    def _block(self) -> np.ndarray:
        return self.raw

    def __repr__(self) -> str:
        return f"Buffer(0x{self.ptr:x}, {self.nbytes} bytes)"


def _default_cache_limit() -> int:
    """The bytes a CPU pool keeps cached for reuse: ``cpu.pool_limit`` (default 1 GiB), at most a
    quarter of physical memory (``ember.empty_cache()`` gives them all back)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    from ...environment import config

    return min(int(config.get("cpu.pool_limit")), total // 4)


class MemoryPool(BlockPool):
    """Host memory: aligned numpy byte arrays (numpy frees a dropped one)."""

    device = "cpu device"

    def __init__(self, max_cached_bytes: int | None = None) -> None:
        super().__init__(_default_cache_limit() if max_cached_bytes is None else max_cached_bytes)
        #: id of every block this pool holds (live or cached) -> its address; an entry goes
        #: when its block leaves the pool, so a reused id never finds a stale address
        self._addrs: dict[int, int] = {}

    def _new_block(self, cap: int) -> np.ndarray:
        raw = np.empty(cap + ALIGN, np.uint8)
        self._addrs[id(raw)] = raw.ctypes.data
        return raw

    def _free_block(self, raw: np.ndarray) -> None:
        self._addrs.pop(id(raw), None)

    def _wrap(self, raw: np.ndarray, nbytes: int, cap: int) -> Buffer:
        addr = self._addrs.get(id(raw))
        if addr is None:
            addr = raw.ctypes.data
        off = (-addr) % ALIGN
        return Buffer(raw, off, nbytes, cap, self, addr + off)
