"""The caching pool every runtime's memory goes through: free lists of blocks per size class.

A block (host bytes, a device pointer, a wgpu buffer) returns to the free list of its size
class when the buffer object wrapping it dies, with no driver call, so it is safe from
``__del__`` on any thread: list append and pop are atomic under the GIL, and counters are
approximate under concurrency (they only steer trimming). A failed allocation releases the
cached blocks and retries once before raising ``OutOfMemoryError``; the pool stays usable.

A runtime subclasses ``BlockPool`` with how a block is made (``_new_block``), wrapped in its
buffer type (``_wrap``), and given back (``_free_block``; nothing where the garbage collector
or the driver's own lifetime rules free it).

Every pool registers itself (weakly) so ``empty_cache()`` (``ember.empty_cache``, as
``torch.cuda.empty_cache`` but for every device) can give all cached blocks back.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

from ... import tracing
from ...errors import OutOfMemoryError

__all__ = ["BlockPool", "PooledBuffer", "size_class", "ALIGN", "empty_cache"]

ALIGN = 64

_pools: weakref.WeakSet[BlockPool] = weakref.WeakSet()


def empty_cache() -> int:
    """Give every pool's cached blocks (memory no live tensor uses) back to its device; returns
    the bytes released. Live tensors keep theirs. A pool whose device fails (a CUDA context
    with a sticky error) is skipped."""
    freed = 0
    for pool in list(_pools):
        try:
            freed += pool.release_cached()
        except Exception:  # noqa: BLE001 - one broken device must not keep the others' memory
            continue
    return freed


class PooledBuffer:
    """Base of the runtimes' buffer types (slots ``pool`` and ``capacity`` in the subclass): a
    dying buffer hands its block back to its pool; ``pool`` None marks one the pool does not
    own (a DLPack import)."""

    __slots__ = ()
    pool: Any
    capacity: int
    ptr: int

    def _block(self) -> Any:
        """What ``_new_block`` made for this buffer (default: the device pointer or id)."""
        return self.ptr

    def __del__(self) -> None:
        pool = self.pool
        if pool is not None:
            try:
                pool._recycle(self._block(), self.capacity)
            except Exception:  # interpreter shutdown
                pass


def size_class(nbytes: int) -> int:
    """The capacity a request of ``nbytes`` gets: multiples of 64 up to 4 KiB, then four
    classes per power of two (at most 25% slack)."""
    if nbytes <= ALIGN:
        return ALIGN
    if nbytes <= 4096:
        return (nbytes + ALIGN - 1) // ALIGN * ALIGN
    step = 1 << (nbytes.bit_length() - 3)
    return (nbytes + step - 1) // step * step


class BlockPool:
    #: names the device in out-of-memory messages
    device = "device"
    #: what ``_new_block`` raises when the device is out of memory
    oom_errors: tuple[type[BaseException], ...] = (MemoryError,)

    def __init__(self, max_cached_bytes: float = math.inf, min_bytes: int = 0) -> None:
        self.max_cached = max_cached_bytes
        self.min_bytes = min_bytes
        self._free: dict[int, list[Any]] = {}
        self.cached_bytes = 0
        self.allocated_bytes = 0
        self.peak_bytes = 0
        self.reservations = 0
        self.reuses = 0
        self.device_allocs = 0
        self._lock = threading.Lock()  # only for release_cached
        _pools.add(self)

    # ---------------------------------------------------------------- runtime hooks
    def _new_block(self, cap: int) -> Any:
        raise NotImplementedError

    def _wrap(self, block: Any, nbytes: int, cap: int) -> Any:
        raise NotImplementedError

    def _free_block(self, block: Any) -> None:
        """Give a block back to the device (default: dropping the reference does it)."""

    def _before_release(self) -> None:
        """Runs before cached blocks are freed (CUDA: wait until no queued work reads them)."""

    # ---------------------------------------------------------------- the pool
    def reserve(self, nbytes: int) -> Any:
        if tracing.active:
            with tracing.span("reserve", bytes=nbytes):
                return self._reserve(nbytes)
        return self._reserve(nbytes)

    def _reserve(self, nbytes: int) -> Any:
        n = nbytes if nbytes >= self.min_bytes else self.min_bytes
        cap = ALIGN if n <= ALIGN else size_class(n)
        self.reservations += 1
        lst = self._free.get(cap)
        block = None
        if lst:
            try:
                block = lst.pop()
                self.cached_bytes -= cap
                self.reuses += 1
            except IndexError:
                block = None
        if block is None:
            block = self._allocate(cap)
        return self._wrap(block, nbytes, cap)

    def _allocate(self, cap: int) -> Any:
        try:
            block = self._new_block(cap)
        except self.oom_errors as first:
            released = self.release_cached()
            try:
                block = self._new_block(cap)
            except self.oom_errors:
                raise OutOfMemoryError(
                    f"cannot allocate {cap} bytes on the {self.device} even after releasing {released} cached "
                    f"bytes ({self.allocated_bytes} bytes held by live tensors): {first}",
                    requested=cap, allocated=self.allocated_bytes, released=released, device=self.device,
                ) from None
        self.device_allocs += 1
        self.allocated_bytes += cap
        self.peak_bytes = max(self.peak_bytes, self.allocated_bytes)
        return block

    def _recycle(self, block: Any, cap: int) -> None:
        """Called by a dying buffer: its block joins the free list (or, past the cache limit,
        goes back to the device)."""
        if self.cached_bytes + cap > self.max_cached:
            self.allocated_bytes -= cap
            self._free_block(block)
            return
        lst = self._free.get(cap)
        if lst is None:
            lst = self._free[cap] = []
        lst.append(block)
        self.cached_bytes += cap

    def release_cached(self) -> int:
        """Give every cached block back to the device; returns the bytes released."""
        with self._lock:
            self._before_release()
            freed = 0
            for cap, lst in list(self._free.items()):
                while lst:
                    try:
                        block = lst.pop()
                    except IndexError:
                        break
                    self._free_block(block)
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
            "device_allocs": self.device_allocs,
        }
