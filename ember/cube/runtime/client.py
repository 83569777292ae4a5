"""``ComputeClient``: the device as kernels and the backend see it.

launch / read / write / empty / sync / profile, over one server (compile, pipeline table,
execution stage) and one memory pool. One client per device (``get_client("cpu", 0)``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import capture
from .cpu import CpuServer
from .memory import Buffer, MemoryPool

__all__ = ["ComputeClient", "get_client", "max_arrays", "max_line_bytes", "shared_limit"]


class ComputeClient:
    def __init__(self, runtime: str, index: int, server: CpuServer, pool: MemoryPool) -> None:
        self.runtime = runtime
        self.index = index
        self.server = server
        self.pool = pool

    @property
    def name(self) -> str:
        """Runtime name as it appears in backend names (``cpu``)."""
        return self.runtime

    # ---------------------------------------------------------------- memory
    #: launches and reservations can be captured and replayed (``capture``)
    replayable = True

    def empty(self, nbytes: int) -> Buffer:
        buf = self.pool.reserve(nbytes)
        if capture.active:
            capture.alloc(buf, nbytes)
        return buf

    def create(self, array: np.ndarray) -> Buffer:
        """A new buffer holding a copy of ``array``'s elements in C order."""
        if capture.active:
            capture.broken("an upload")
        buf = self.pool.reserve(array.nbytes)
        if array.nbytes:
            np.copyto(buf.view(array.dtype, array.shape), array, casting="no")
        return buf

    def write(self, buf: Buffer, array: np.ndarray, byte_offset: int = 0) -> None:
        if capture.active:
            capture.broken("an upload")
        self.server.sync()
        if array.nbytes:
            np.copyto(buf.view(array.dtype, array.shape, None, byte_offset), array, casting="no")

    def read(
        self,
        buf: Buffer,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
    ) -> np.ndarray:
        """A copy of the elements (``strides`` in bytes; None = C order)."""
        if capture.active:
            capture.broken("a read back")
        self.server.sync()
        if 0 in shape:  # no elements: numpy refuses an offset past the end of a (0-byte) buffer
            return np.empty(shape, dtype)
        return np.array(buf.view(dtype, shape, strides, byte_offset), copy=True, order="C")

    def read_scalar(self, buf: Buffer, dtype: np.dtype, byte_offset: int = 0) -> Any:
        """The element of ``dtype`` at ``byte_offset`` as a Python scalar."""
        if capture.active:
            capture.broken("a read back")
        self.server.sync()
        return buf.view(dtype, (), None, byte_offset).item()

    # ---------------------------------------------------------------- kernels
    def launch(self, kernel: Any, count: Any, dim: Any, *args: Any, **kwargs: Any) -> None:
        """Launch a ``@cube.kernel`` on this device (``kernel.launch(client, ...)``)."""
        kernel.launch(self, count, dim, *args, **kwargs)

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> Any:
        return self.server.pipeline(kid, make_ir)

    def sync(self) -> None:
        if capture.active:
            capture.broken("a sync")
        self.server.sync()

    def preparing(self) -> Any:
        """Context manager: launches from this thread run nothing and start their kernels'
        compiles on a pool, all at once (see ``CpuServer.preparing``); ``wait_prepared()``
        then waits for them. The tuner uses it before timing candidates."""
        return self.server.preparing()

    def wait_prepared(self) -> None:
        self.server.wait_prepared()

    def compiling(self) -> bool:
        """Whether a compile is in flight on this device (the tuner's deferred keys wait for none)."""
        return self.server.compiling()

    def profile(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Run ``fn`` between two syncs; returns (its result, seconds). Host timing."""
        self.sync()
        t0 = time.perf_counter()
        r = fn()
        self.sync()
        return r, time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"ComputeClient({self.runtime}:{self.index})"


_clients: dict[tuple[str, Any], Any] = {}
_lock = threading.Lock()


def _cpu_client(index: Any) -> ComputeClient:
    server = CpuServer(index)
    server.toolchain.ensure()
    return ComputeClient("cpu", index, server, MemoryPool())


#: runtime name -> "module:function" building its client from the device args; a runtime
#: module is imported only when a device of it is first used (``import ember`` stays cheap)
RUNTIMES: dict[str, str] = {
    "cpu": "ember.cube.runtime.client:_cpu_client",
    "cuda": "ember.cube.runtime.cuda:create_client",
    "wgpu": "ember.cube.runtime.wgpu:create_client",
}


def get_client(runtime: str = "cpu", index: Any = 0) -> Any:
    """The client of a device, created on first use (``index``: the runtime's device args,
    hashable). Raises the runtime's own error when it cannot start (ToolchainError for a
    CPU without a working C compiler)."""
    key = (runtime, index)
    c = _clients.get(key)
    if c is not None:
        return c
    with _lock:
        c = _clients.get(key)
        if c is None:
            target = RUNTIMES.get(runtime)
            if target is None:
                raise ValueError(f"no {runtime!r} runtime in this build ({', '.join(RUNTIMES)})")
            import importlib

            mod, _, fn = target.partition(":")
            c = _clients[key] = getattr(importlib.import_module(mod), fn)(index)
    return c


def shared_limit(client: Any) -> int | None:
    """Bytes of shared memory a cube may use on ``client``'s target (None: unknown)."""
    caps = getattr(getattr(getattr(client, "server", None), "compiler", None), "capabilities", None)
    return getattr(caps, "max_shared_bytes", None)


def max_line_bytes(client: Any) -> int:
    """The widest access per unit the backend's line choices should use on ``client``'s
    runtime (64 bytes on the CPU; 16 on CUDA and wgpu, where a wider line per thread spreads
    a warp's accesses)."""
    return getattr(client, "max_line_bytes", 64)


def max_arrays(client: Any) -> int | None:
    """The most array parameters one kernel may take on ``client``'s runtime (None: no limit
    that matters; wgpu: the device's storage buffers per shader stage, less the info buffer)."""
    return getattr(client, "max_arrays", None)
