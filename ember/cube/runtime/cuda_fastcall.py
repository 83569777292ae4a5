"""Direct ``ctypes`` entry points into the CUDA driver for the calls every op makes.

cuda-bindings wraps each driver call in argument conversion and result-enum construction:
a few microseconds per call, paid by every launch and every small read (measured on the H200:
a 16-element add took 26 µs of host time per op, torch 11 µs). The hot calls -- launching a
kernel, an async device-to-host copy, waiting on the stream -- go straight to ``libcuda``
through ``ctypes`` instead, with the same handles (a cuda-bindings handle's ``int()`` is the
driver's pointer value). Everything else keeps using cuda-bindings, which also checks errors
in the cold paths. Missing ``libcuda`` (or a symbol) leaves the bindings in charge.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["FastDriver", "fast_driver"]

_c_void_p = ctypes.c_void_p


class FastDriver:
    """The driver's ``cuLaunchKernel``, ``cuMemcpyDtoHAsync_v2``, ``cuMemcpyHtoDAsync_v2`` and
    ``cuStreamSynchronize`` as ctypes functions returning the CUresult as an int."""

    __slots__ = ("launch_p", "dtoh_async", "htod_async", "stream_sync")

    def __init__(self, lib: Any) -> None:
        # the launch without argtypes: ctypes then converts each argument by its own type, a
        # third of the time for eleven (0.4 against 1.2 µs on the dev box). The caller passes
        # the handles and the parameter block as prebuilt ``c_void_p`` objects and the grid and
        # block sizes as ints below 2**31 (``CudaServer._launch_params``)
        f = lib["cuLaunchKernel"]
        f.restype = ctypes.c_int
        self.launch_p = f
        f = lib.cuMemcpyDtoHAsync_v2
        f.restype = ctypes.c_int
        f.argtypes = [_c_void_p, ctypes.c_uint64, ctypes.c_size_t, _c_void_p]
        self.dtoh_async = f
        f = lib.cuMemcpyHtoDAsync_v2
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_uint64, _c_void_p, ctypes.c_size_t, _c_void_p]
        self.htod_async = f
        f = lib.cuStreamSynchronize
        f.restype = ctypes.c_int
        f.argtypes = [_c_void_p]
        self.stream_sync = f


_cached: list[FastDriver | None] = []


def fast_driver() -> FastDriver | None:
    """The process's FastDriver, or None where libcuda or one of its symbols is missing."""
    if not _cached:
        try:
            _cached.append(FastDriver(ctypes.CDLL("libcuda.so.1")))
        except (OSError, AttributeError):
            _cached.append(None)
    return _cached[0]


def handle(obj: Any) -> int:
    """The driver pointer value of a cuda-bindings handle (CUfunction, CUstream, ...)."""
    return int(obj)
