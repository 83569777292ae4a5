"""The launch contract every runtime's server implements (cpu, cuda, wgpu), so a launch plan
(``cube/launch/plan.py``) calls each the same way.

A kernel launch is always ``server.launch(kernel, tensors, info, count)``:

* ``kernel``  -- what ``server.pipeline(kid, make_ir)`` returned (the server's own compiled
  form: a ctypes function, a CUfunction, a compute pipeline); ``kernel.source.info`` lists its
  info slots and ``kernel.pending`` is true for one handed out while preparing;
* ``tensors`` -- the array arguments, ``CubeTensor`` views in parameter order;
* ``info``    -- the packed info words (a ctypes ``c_uint64`` array: scalars, shapes, strides,
  as ``kernel.source.info`` lays them out), or None when the kernel has none;
* ``count``   -- the ``CubeCount`` grid (the cube's dims are part of the kernel).

Runtimes whose launches can be captured and replayed (``client.replayable``: cpu, cuda) also
take ``launch_ptrs(kernel, ptrs, info, count, keep)``, the same launch with each buffer's
element address given (``keep``: the buffers, alive until the launch ran), and may prepare a
captured launch once: ``replayer(kernel, info, count, slots, offsets)`` returns
``go(bufs)`` (or None: ``launch_ptrs`` serves). ``preparing_here()`` says whether the calling
thread's launches run nothing (the tuner's preparing; always False where there is none).

Hand-written CUDA sources (``backends/cube/cuda_kernels``) are not ``@cube`` kernels: the CUDA
server takes them as ``raw_function(source, entry, dynamic_smem, arch)`` then
``launch_raw(fn, grid, block, args, smem)``, or prepares one configuration's launch once:
``raw_launcher(fn, grid, block, args, smem)`` (``cuda_server.RawLauncher``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["LaunchServer", "ReplayServer"]


@runtime_checkable
class LaunchServer(Protocol):
    """A server as launch plans use it (see the module docstring)."""

    stage: str
    downstream: Any

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> Any:
        """The compiled kernel of ``kid`` (``make_ir`` renders it on a miss)."""
        ...

    def launch(self, kernel: Any, tensors: list[Any], info: Any, count: Any) -> None:
        """One launch of ``kernel`` over ``tensors`` with ``info`` words on ``count`` cubes."""
        ...

    def preparing_here(self) -> bool:
        """Whether the calling thread's launches run nothing (preparing)."""
        ...

    def sync(self) -> None:
        """Wait until every launch so far has run."""
        ...


@runtime_checkable
class ReplayServer(LaunchServer, Protocol):
    """A server whose launches can be captured and replayed (cpu, cuda)."""

    def launch_ptrs(self, kernel: Any, ptrs: list[int], info: Any, count: Any, keep: Any = ()) -> None:
        """``launch`` with each buffer argument's element address given; ``keep`` holds the
        buffers alive until the launch ran."""
        ...

    def replayer(self, kernel: Any, info: Any, count: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None] | None:
        """A captured launch prepared to run again over ``bufs[slot].ptr + offset``, or None."""
        ...
