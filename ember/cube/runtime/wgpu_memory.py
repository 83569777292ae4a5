"""The wgpu runtime's memory: GPU buffers and the pool that recycles them in queue order."""

from __future__ import annotations

from typing import Any

from .pool import BlockPool, PooledBuffer

__all__ = ["WgpuBuffer", "WgpuPool"]

_USAGE = None  # STORAGE | COPY_SRC | COPY_DST, filled on first use (wgpu imports lazily)
_MIN_BYTES = 16


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
