"""A fake CUDA driver, for measuring the host-side Python cost of ember's CUDA path without a GPU.

ember reaches the driver two ways (``ember/cube/runtime/cuda_driver.py``): the cold paths through the
``cuda.bindings.driver`` module, cached in ``ember.cube.runtime.cuda_driver._cu``, and the per-op hot
paths (launch, the two async copies, stream sync) through ctypes straight into libcuda
(``cuda_fastcall.FastDriver``, cached in ``cuda_fastcall._cached``). ``install()`` replaces both
before the first CUDA device is made: ``FakeDriver`` below for the module, and a ``FastDriver``
over ``fake_libcuda.c`` (compiled here with gcc on first use) for the ctypes calls.

The fake device is a "Fake H200": compute capability 9.0, 132 SMs, 141 GB. Device memory is
host memory (numpy blocks, so a "device pointer" is a real host address and uploads and
downloads round-trip their bytes); module loads check that the image is an ELF cubin holding
the entry asked for and hand out dummy handles; launches record the kernel and return; events
report a fixed time per launch recorded between them (``LAUNCH_MS``), so the autotuner and the
throughput probes finish; ``cuTensorMapEncodeTiled`` returns a real ``CUtensorMap`` struct
with dummy words. The enums and handle types are cuda-bindings' own (they need no libcuda).

**Kernels never run: every value computed on the fake device is meaningless.** Only the host
path is real -- the Tensor API, dispatch, fusion, replays and the CUDA client's own code.

Honesty: a driver function the fake does not implement raises ``FakeDriverGap`` naming it
(and is recorded in ``FakeDriver.gaps``, in case ember's code swallows the error), rather than
returning something plausible but wrong.

Faults, for tests of ember's error paths (``tests/unit/test_fake_cuda_faults.py``):

* ``memory_limit`` (bytes; default the H200's 141 GB): a ``cuMemAlloc`` that would take the
  device's live allocations past it returns ``CUDA_ERROR_OUT_OF_MEMORY``, as a full device does
  (freeing blocks makes room again); ``fail_allocs(n)`` makes the next ``n`` allocations fail
  whatever the room.
* ``inject_fault(700)``: the next ``cuStreamSynchronize`` (a sync, or the wait of a read)
  returns the code, as the real driver reports a kernel's illegal address at the next call that
  waits for it; a sticky code then sticks: every later call on the context -- launches, copies,
  syncs, allocations, frees, module loads, events -- returns it (``sticky``), as on a context the
  real driver has lost.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FakeDriver", "FakeDriverGap", "build_lib", "install", "installed"]

#: what the fake device reports
NAME = "Fake H200"
CC = (9, 0)
SMS = 132
TOTAL_MEMORY = 143_771 * 2**20  # an H200's 141 GB, as the real one reports it (143771 MiB)
UUID = b"fake-h200-uuid-0"  # 16 bytes
#: an event pair's elapsed time: this much per launch recorded between the two events, plus
#: EVENT_FLOOR_MS (an H200's launch floor for a tiny kernel is a few microseconds)
LAUNCH_MS = 0.005
EVENT_FLOOR_MS = 0.001
#: device allocations are aligned like cuMemAlloc's (the wgmma path checks 16-byte alignment)
ALIGN = 256

#: attribute name -> value, for the attributes whose value on an H200 is known; any other
#: attribute asked for raises FakeDriverGap
ATTRIBUTES = {
    "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": CC[0],
    "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": CC[1],
    "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": SMS,
    "CU_DEVICE_ATTRIBUTE_WARP_SIZE": 32,
    "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR": 2048,
    "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X": 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y": 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z": 64,
    "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X": 2**31 - 1,
    "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y": 65535,
    "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z": 65535,
    "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 228 * 1024,
    "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK": 65536,
    "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE": 50 * 2**20,
}

_SOURCE = Path(__file__).with_name("fake_libcuda.c")
_COUNTERS = ("fake_launches", "fake_htod", "fake_dtoh", "fake_syncs", "fake_htod_bytes", "fake_dtoh_bytes")
#: the driver's sticky errors (the context is lost after one): ECC, illegal address, launch
#: timeout, assert, hardware stack, illegal instruction, misaligned, address space, PC, launch failed
STICKY = frozenset({214, 700, 702, 710, 714, 715, 716, 717, 718, 719})


class FakeDriverGap(NotImplementedError):
    """ember called a driver function (or asked for a value) the fake does not serve."""


# ------------------------------------------------------------------------------ the C library
def build_lib(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``fake_libcuda.c`` compiled into ``cache_dir`` (default ``<tmp>/ember-fake-cuda``), once
    per source text: the file's name carries the source's hash."""
    src = _SOURCE.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:16]
    d = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "ember-fake-cuda"
    d.mkdir(parents=True, exist_ok=True)
    so = d / f"fake_libcuda-{tag}.so"
    if not so.exists():
        tmp = d / f".{so.name}.{os.getpid()}.tmp"
        cc = os.environ.get("CC", "gcc")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(_SOURCE)], check=True)
        os.replace(tmp, so)
    return so


# ------------------------------------------------------------------------------ the driver module
class FakeDriver:
    """Stands in for the ``cuda.bindings.driver`` module: each driver function returns the
    result tuple the bindings would (``(CUresult, values...)``), with cuda-bindings' own enums
    and handle types. ``lib``: the loaded fake libcuda (its counters are shared with the
    cold-path copies, launches and syncs made here)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        from cuda.bindings import driver as real

        self._real = real
        self.lib = lib
        self._lock = threading.Lock()
        self._handles = itertools.count(0x10000, 0x100)  # dummy handles: nonzero, distinct
        self._ok = real.CUresult.CUDA_SUCCESS
        self._counters = {n: ctypes.c_uint64.in_dll(lib, n) for n in _COUNTERS}
        self._ring = (ctypes.c_uint64 * ctypes.c_uint64.in_dll(lib, "fake_ring_size").value).in_dll(lib, "fake_ring")
        self._faults = {n: ctypes.c_int.in_dll(lib, n) for n in ("fake_pending", "fake_pending_sticky", "fake_sticky")}
        #: the device's capacity for allocations (``cuMemAlloc`` past it: out of memory)
        self.memory_limit = TOTAL_MEMORY
        self._fail_allocs = 0
        #: "device" and pinned host allocations: address -> the numpy block that holds it
        self._device: dict[int, np.ndarray] = {}
        self._host: dict[int, np.ndarray] = {}
        self._device_bytes = 0
        self._modules: dict[int, bytes] = {}
        #: function handle -> kernel entry name (``cuModuleGetFunction``)
        self.functions: dict[int, str] = {}
        self._events: dict[int, int | None] = {}  # event -> launches counted when recorded
        #: driver functions ember asked for that the fake does not implement, in order
        self.gaps: list[str] = []
        #: calls made through this module (the cold path), by function name
        self.calls: dict[str, int] = {}
        self.current_ctx: Any = None
        self._primary: Any = None

    # -------------------------------------------------------------- plumbing
    def __getattr__(self, name: str) -> Any:
        # only reached for names not defined on the class: the bindings' enums and types are
        # served as they are; a driver function missing here is a gap, loudly
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._real, name)
        if isinstance(value, type) or not callable(value):
            return value
        self.gaps.append(name)
        raise FakeDriverGap(f"fake CUDA driver: {name} is not implemented (bench/fake_cuda/driver.py)")

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _err(self, code: str) -> Any:
        return getattr(self._real.CUresult, code)

    def _handle(self, kind: Any) -> Any:
        with self._lock:
            return kind(next(self._handles))

    def counts(self) -> dict[str, int]:
        """Launches, copies and syncs so far, through ctypes and this module together."""
        # the cold-path launches, copies and syncs below go through the C library too: its
        # counters hold them all
        c = {n.removeprefix("fake_"): v.value for n, v in self._counters.items()}
        c["event_syncs"] = self.calls.get("cuEventSynchronize", 0)
        c["allocs"] = self.calls.get("cuMemAlloc", 0)
        return c

    def recent_launches(self, n: int) -> list[str]:
        """The kernel names of the last ``n`` launches, oldest first."""
        total = self._counters["fake_launches"].value
        size = len(self._ring)
        n = min(n, total, size)
        return [self.functions.get(self._ring[i % size], hex(self._ring[i % size])) for i in range(total - n, total)]

    # -------------------------------------------------------------- fault injection
    def inject_fault(self, code: int = 700, sticky: bool | None = None) -> None:
        """The next ``cuStreamSynchronize`` returns ``code`` (as a kernel's fault is reported
        at the next wait); when ``sticky`` (default: for the driver's sticky codes) every call
        after it returns ``code`` too."""
        sticky = int(code) in STICKY if sticky is None else sticky
        self._faults["fake_pending_sticky"].value = int(sticky)
        self._faults["fake_pending"].value = int(code)

    @property
    def sticky(self) -> int:
        """The sticky error the context holds (0: none)."""
        return self._faults["fake_sticky"].value

    def fail_allocs(self, n: int = 1) -> None:
        """The next ``n`` ``cuMemAlloc`` calls return ``CUDA_ERROR_OUT_OF_MEMORY``."""
        self._fail_allocs = int(n)

    @property
    def device_bytes(self) -> int:
        """Bytes of the device's live allocations."""
        return self._device_bytes

    def _lost(self) -> tuple[Any] | None:
        """``(the sticky code,)`` once the context is lost, else None (the calls on a context
        return it first)."""
        code = self._faults["fake_sticky"].value
        return (self._real.CUresult(code),) if code else None

    # -------------------------------------------------------------- errors
    def cuGetErrorName(self, err: Any) -> tuple[Any, bytes]:
        try:
            name = self._real.CUresult(int(err)).name
        except ValueError:
            return (self._err("CUDA_ERROR_INVALID_VALUE"), b"")
        return (self._ok, name.encode())

    def cuGetErrorString(self, err: Any) -> tuple[Any, bytes]:
        res, name = self.cuGetErrorName(err)
        return (res, name.decode().removeprefix("CUDA_ERROR_").replace("_", " ").lower().encode() + b" (fake driver)")

    # -------------------------------------------------------------- device and context
    def cuInit(self, flags: int) -> tuple[Any]:
        self._count("cuInit")
        return (self._ok,)

    def cuDeviceGetCount(self) -> tuple[Any, int]:
        return (self._ok, 1)

    def cuDeviceGet(self, ordinal: int) -> tuple[Any, Any]:
        if int(ordinal) != 0:
            return (self._err("CUDA_ERROR_INVALID_DEVICE"), None)
        return (self._ok, self._real.CUdevice(0))

    def _bad_dev(self, dev: Any) -> tuple[Any, None] | None:
        """The driver's answer for a device other than the one there is (0), else None."""
        return (self._err("CUDA_ERROR_INVALID_DEVICE"), None) if int(dev) != 0 else None

    def cuDeviceGetName(self, length: int, dev: Any) -> tuple[Any, bytes]:
        if (bad := self._bad_dev(dev)) is not None:
            return bad
        name = NAME.encode()[: max(int(length) - 1, 0)]
        return (self._ok, name + b"\0" * (int(length) - len(name)))

    def cuDeviceTotalMem(self, dev: Any) -> tuple[Any, int]:
        if (bad := self._bad_dev(dev)) is not None:
            return bad
        return (self._ok, TOTAL_MEMORY)

    def cuDeviceGetUuid(self, dev: Any) -> tuple[Any, Any]:
        if (bad := self._bad_dev(dev)) is not None:
            return bad

        class _Uuid:  # CUuuid's ``bytes`` cannot be written from Python; ember reads only that
            bytes = UUID

        return (self._ok, _Uuid())

    def cuDeviceGetAttribute(self, attrib: Any, dev: Any) -> tuple[Any, int]:
        if (bad := self._bad_dev(dev)) is not None:
            return bad
        name = self._real.CUdevice_attribute(int(attrib)).name
        if name not in ATTRIBUTES:
            self.gaps.append(f"cuDeviceGetAttribute({name})")
            raise FakeDriverGap(f"fake CUDA driver: attribute {name} has no value in ATTRIBUTES")
        return (self._ok, ATTRIBUTES[name])

    def cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple[Any, Any]:
        if (bad := self._bad_dev(dev)) is not None:
            return bad
        with self._lock:
            if self._primary is None:
                self._primary = self._real.CUcontext(next(self._handles))
        return (self._ok, self._primary)

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[Any]:
        self._count("cuCtxSetCurrent")
        self.current_ctx = ctx
        return (self._ok,)

    def cuStreamCreate(self, flags: Any) -> tuple[Any, Any]:
        if (lost := self._lost()) is not None:
            return (*lost, None)
        return (self._ok, self._handle(self._real.CUstream))

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        self._count("cuStreamSynchronize")
        return (self._real.CUresult(self.lib.cuStreamSynchronize(ctypes.c_void_p(int(stream)))),)

    # -------------------------------------------------------------- memory
    def _block(self, nbytes: int) -> tuple[int, np.ndarray]:
        mem = np.zeros(int(nbytes) + ALIGN, np.uint8)  # calloc: untouched pages cost nothing
        addr = mem.ctypes.data
        addr += -addr % ALIGN
        return addr, mem

    def cuMemAlloc(self, nbytes: int) -> tuple[Any, Any]:
        self._count("cuMemAlloc")
        if (lost := self._lost()) is not None:
            return (*lost, self._real.CUdeviceptr(0))
        n = int(nbytes)
        if n == 0:
            return (self._err("CUDA_ERROR_INVALID_VALUE"), self._real.CUdeviceptr(0))
        with self._lock:
            if self._fail_allocs > 0:
                self._fail_allocs -= 1
                return (self._err("CUDA_ERROR_OUT_OF_MEMORY"), self._real.CUdeviceptr(0))
            if self._device_bytes + n > min(self.memory_limit, TOTAL_MEMORY):
                return (self._err("CUDA_ERROR_OUT_OF_MEMORY"), self._real.CUdeviceptr(0))
            try:
                addr, mem = self._block(n)
            except MemoryError:  # the host ran out first: the device's answer is the same
                return (self._err("CUDA_ERROR_OUT_OF_MEMORY"), self._real.CUdeviceptr(0))
            self._device[addr] = mem
            self._device_bytes += n
        return (self._ok, self._real.CUdeviceptr(addr))

    def cuMemFree(self, dptr: Any) -> tuple[Any]:
        self._count("cuMemFree")
        if (lost := self._lost()) is not None:  # the block is lost with the context
            return lost
        with self._lock:
            mem = self._device.pop(int(dptr), None)
            if mem is None:
                return (self._err("CUDA_ERROR_INVALID_VALUE"),)
            self._device_bytes -= mem.nbytes - ALIGN
        return (self._ok,)

    def cuMemAllocHost(self, nbytes: int) -> tuple[Any, int]:
        self._count("cuMemAllocHost")
        if (lost := self._lost()) is not None:
            return (*lost, 0)
        addr, mem = self._block(int(nbytes))
        with self._lock:
            self._host[addr] = mem
        return (self._ok, addr)

    def cuMemFreeHost(self, p: Any) -> tuple[Any]:
        with self._lock:
            found = self._host.pop(int(p), None)
        return (self._ok if found is not None else self._err("CUDA_ERROR_INVALID_VALUE"),)

    # the bindings' copies, launch and sync (ember's cold path, or every path when
    # EMBER_CUDA_FASTCALL=0) run the C library's: one set of counters, one launch record
    def cuMemcpyHtoDAsync(self, dst: Any, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        self._count("cuMemcpyHtoDAsync")
        f = self.lib.cuMemcpyHtoDAsync_v2
        err = f(ctypes.c_uint64(int(dst)), ctypes.c_void_p(int(src)), ctypes.c_size_t(int(nbytes)),
                ctypes.c_void_p(int(stream)))
        return (self._real.CUresult(err),)

    def cuMemcpyDtoHAsync(self, dst: Any, src: Any, nbytes: int, stream: Any) -> tuple[Any]:
        self._count("cuMemcpyDtoHAsync")
        f = self.lib.cuMemcpyDtoHAsync_v2
        err = f(ctypes.c_void_p(int(dst)), ctypes.c_uint64(int(src)), ctypes.c_size_t(int(nbytes)),
                ctypes.c_void_p(int(stream)))
        return (self._real.CUresult(err),)

    # -------------------------------------------------------------- modules and launches
    def cuModuleLoadData(self, image: Any) -> tuple[Any, Any]:
        self._count("cuModuleLoadData")
        if (lost := self._lost()) is not None:
            return (*lost, None)
        data = bytes(image)
        if not data.startswith(b"\x7fELF"):  # ember loads cubins only, never PTX
            return (self._err("CUDA_ERROR_INVALID_IMAGE"), None)
        mod = self._handle(self._real.CUmodule)
        with self._lock:
            self._modules[int(mod)] = data
        return (self._ok, mod)

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple[Any, Any]:
        self._count("cuModuleGetFunction")
        if (lost := self._lost()) is not None:
            return (*lost, None)
        image = self._modules.get(int(module))
        if image is None:
            return (self._err("CUDA_ERROR_INVALID_HANDLE"), None)
        if b"\0" + bytes(name) + b"\0" not in image:  # the entry's symbol in the cubin's string table
            return (self._err("CUDA_ERROR_NOT_FOUND"), None)
        fn = self._handle(self._real.CUfunction)
        self.functions[int(fn)] = bytes(name).decode()
        return (self._ok, fn)

    def cuFuncSetAttribute(self, fn: Any, attrib: Any, value: int) -> tuple[Any]:
        if (lost := self._lost()) is not None:
            return lost
        if int(fn) not in self.functions:
            return (self._err("CUDA_ERROR_INVALID_HANDLE"),)
        return (self._ok,)

    def cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, stream: Any,
                       params: Any, extra: Any) -> tuple[Any]:
        """The bindings' launch (ember's path when the ctypes one is off): nothing runs."""
        self._count("cuLaunchKernel")
        if int(f) not in self.functions:
            return (self._err("CUDA_ERROR_INVALID_HANDLE"),)
        u = ctypes.c_uint
        err = self.lib.cuLaunchKernel(ctypes.c_void_p(int(f)), u(int(gx)), u(int(gy)), u(int(gz)), u(int(bx)),
                                      u(int(by)), u(int(bz)), u(int(smem)), ctypes.c_void_p(int(stream)),
                                      ctypes.c_void_p(int(params) if params else None),
                                      ctypes.c_void_p(int(extra) if extra else None))
        return (self._real.CUresult(err),)

    # -------------------------------------------------------------- events
    def _launches(self) -> int:
        return self._counters["fake_launches"].value

    def cuEventCreate(self, flags: Any) -> tuple[Any, Any]:
        if (lost := self._lost()) is not None:
            return (*lost, None)
        ev = self._handle(self._real.CUevent)
        self._events[int(ev)] = None
        return (self._ok, ev)

    def cuEventRecord(self, ev: Any, stream: Any) -> tuple[Any]:
        if (lost := self._lost()) is not None:
            return lost
        if int(ev) not in self._events:
            return (self._err("CUDA_ERROR_INVALID_HANDLE"),)
        self._events[int(ev)] = self._launches()
        return (self._ok,)

    def cuEventSynchronize(self, ev: Any) -> tuple[Any]:
        self._count("cuEventSynchronize")
        if (lost := self._lost()) is not None:
            return lost
        return (self._ok,) if int(ev) in self._events else (self._err("CUDA_ERROR_INVALID_HANDLE"),)

    def cuEventElapsedTime(self, start: Any, end: Any) -> tuple[Any, float]:
        if (lost := self._lost()) is not None:
            return (*lost, 0.0)
        t0, t1 = self._events.get(int(start)), self._events.get(int(end))
        if t0 is None or t1 is None:  # unknown or never recorded
            return (self._err("CUDA_ERROR_INVALID_HANDLE"), 0.0)
        return (self._ok, EVENT_FLOOR_MS + LAUNCH_MS * (t1 - t0))

    def cuEventDestroy(self, ev: Any) -> tuple[Any]:
        known = int(ev) in self._events
        self._events.pop(int(ev), None)
        return (self._ok,) if known else (self._err("CUDA_ERROR_INVALID_HANDLE"),)

    # -------------------------------------------------------------- TMA descriptors
    def cuTensorMapEncodeTiled(self, dtype: Any, rank: int, addr: Any, dims: list[Any], strides: list[Any],
                               box: list[Any], elem_strides: list[Any], interleave: Any, swizzle: Any, l2: Any,
                               oob: Any) -> tuple[Any, Any]:
        """A real ``CUtensorMap`` struct (ember reads its 16 ``opaque`` words into the kernel's
        arguments) holding dummy words; the driver's documented argument rules are checked."""
        rank, address = int(rank), int(addr)
        ok = (
            1 <= rank <= 5
            and address % 16 == 0
            and len(dims) == rank
            and len(strides) == rank - 1
            and len(box) == rank
            and len(elem_strides) == rank
            and all(0 < int(d) <= 2**32 for d in dims)
            and all(int(s) % 16 == 0 and 0 < int(s) < 2**40 for s in strides)
            and all(0 < int(b) <= 256 for b in box)
            and all(0 < int(e) <= 8 for e in elem_strides)
        )
        if not ok:
            return (self._err("CUDA_ERROR_INVALID_VALUE"), None)
        m = self._real.CUtensorMap()
        words = [address, *(int(d) for d in dims), *(int(s) for s in strides), *(int(b) for b in box)]
        m.opaque = [self._real.cuuint64_t(w) for w in (words + [0] * 16)[:16]]
        return (self._ok, m)


# ------------------------------------------------------------------------------ install
_installed: list[FakeDriver] = []


def installed() -> FakeDriver | None:
    """The fake installed in this process, if any."""
    return _installed[0] if _installed else None


def install(cache_dir: str | os.PathLike[str] | None = None) -> FakeDriver:
    """Put the fake in place of the CUDA driver, for both of ember's routes to it. Call it
    before the first CUDA device is made (a device made before keeps whatever it had)."""
    if _installed:
        return _installed[0]
    from ember.cube.runtime import cuda_driver, cuda_fastcall

    if cuda_driver._cu is not None or cuda_fastcall._cached:
        raise RuntimeError("install() the fake CUDA driver before the first CUDA device is made")
    lib = ctypes.CDLL(str(build_lib(cache_dir)))
    fake = FakeDriver(lib)
    cuda_driver._cu = fake
    cuda_fastcall._cached.append(cuda_fastcall.FastDriver(lib))
    _installed.append(fake)
    return fake
