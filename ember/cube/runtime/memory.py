"""Host memory for the CPU runtime: 64-byte aligned buffers reused through a pool.

A ``Buffer`` is one allocation. When the last reference to it goes (every tensor view of it
dropped), its storage returns to the pool's free list for its size class, so the next
reservation of that size reuses memory whose pages are already mapped (a fresh 64 MiB
allocation costs ~16k page faults on first touch; a reused one costs none).

Size classes: multiples of 64 bytes up to 4 KiB, then four classes per power of two
(so at most 25% of a reservation is slack).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from ... import tracing
from ...errors import OutOfMemoryError

__all__ = ["Buffer", "MemoryPool", "size_class", "ALIGN"]

ALIGN = 64


def size_class(nbytes: int) -> int:
    if nbytes <= ALIGN:
        return ALIGN
    if nbytes <= 4096:
        return (nbytes + ALIGN - 1) // ALIGN * ALIGN
    step = 1 << (nbytes.bit_length() - 3)
    return (nbytes + step - 1) // step * step


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


class MemoryPool:
    """Free lists per size class. Lock-free: list append/pop are atomic under the GIL, so
    ``Buffer.__del__`` may run on any thread (even inside ``reserve``) without deadlock."""

    def __init__(self, max_cached_bytes: int | None = None) -> None:
        self.max_cached = _default_cache_limit() if max_cached_bytes is None else max_cached_bytes
        self._free: dict[int, list[np.ndarray]] = {}
        self.cached_bytes = 0  # approximate under concurrency; only steers trimming
        self.allocated_bytes = 0
        self.reservations = 0
        self.reuses = 0
        self._lock = threading.Lock()  # only for release_cached

    def reserve(self, nbytes: int) -> Buffer:
        if tracing.active:
            with tracing.span("reserve", bytes=nbytes):
                return self._reserve(nbytes)
        return self._reserve(nbytes)

    def _reserve(self, nbytes: int) -> Buffer:
        cap = size_class(nbytes)
        self.reservations += 1
        lst = self._free.get(cap)
        raw = None
        if lst:
            try:
                raw = lst.pop()
                self.cached_bytes -= cap
                self.reuses += 1
            except IndexError:
                raw = None
        if raw is None:
            raw = self._allocate(cap)
        off = (-raw.ctypes.data) % ALIGN
        return Buffer(raw, off, nbytes, cap, self)

    def _allocate(self, cap: int) -> np.ndarray:
        try:
            raw = np.empty(cap + ALIGN, np.uint8)
        except MemoryError:
            self.release_cached()
            try:
                raw = np.empty(cap + ALIGN, np.uint8)
            except MemoryError:
                raise OutOfMemoryError(
                    f"cannot allocate {cap} bytes on the cpu device even after releasing the pool's "
                    f"cached buffers ({self.allocated_bytes} bytes allocated)"
                ) from None
        self.allocated_bytes += cap
        return raw

    def _recycle(self, raw: np.ndarray, cap: int) -> None:
        if self.cached_bytes + cap > self.max_cached:
            self.allocated_bytes -= cap
            return  # dropped: numpy frees it
        self._free.setdefault(cap, []).append(raw)
        self.cached_bytes += cap

    def release_cached(self) -> int:
        """Free every cached buffer; returns the bytes released."""
        with self._lock:
            freed = 0
            for cap, lst in list(self._free.items()):
                while lst:
                    try:
                        lst.pop()
                    except IndexError:
                        break
                    freed += cap
            self.cached_bytes = 0
            self.allocated_bytes -= freed
            return freed

    def usage(self) -> dict[str, Any]:
        return {
            "allocated_bytes": self.allocated_bytes,
            "cached_bytes": self.cached_bytes,
            "reservations": self.reservations,
            "reuses": self.reuses,
        }
