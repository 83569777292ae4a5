"""The CUDA driver as the runtime uses it: cuda-bindings loaded lazily, results checked,
errors named, a lost (sticky-faulted) context remembered per device, the devices listed.

Every driver call of the runtime goes through ``_ok`` / ``_raise`` here, so a sticky error is
turned into the device's ``CudaFaultError`` wherever it surfaces. The context current on each
thread is tracked here too (``_current``): the server and the client both skip the driver call
when their context already is.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import DeviceFaultError, DeviceUnavailableError, EmberError

if TYPE_CHECKING:
    from .cuda_server import CudaServer

__all__ = ["CudaError", "CudaFaultError", "DeviceInfo", "devices", "driver_error", "STICKY_ERRORS"]


class CudaError(EmberError, RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error)."""


class CudaFaultError(CudaError, DeviceFaultError):
    """A sticky CUDA error (an illegal address, a trap, a device-side assert in a kernel): the
    context is lost. Names the last kernels launched (``DeviceFaultError``); every later call on
    the device raises it again (``CudaServer.fault``)."""


#: CUresult codes after which the context is unusable: the driver returns the same code from
#: every later call on it, and its memory is lost (cuda.h: "the process must be terminated and
#: relaunched"): ECC uncorrectable (214), illegal address (700), launch timeout (702), device
#: assert (710), hardware stack error (714), illegal instruction (715), misaligned address (716),
#: invalid address space (717), invalid PC (718), launch failed (719)
STICKY_ERRORS = frozenset({214, 700, 702, 710, 714, 715, 716, 717, 718, 719})
#: kernels remembered per device for a fault's message (the faulting kernel is among the
#: launches since the last sync; a few suffice to name it in practice)
RECENT_LAUNCHES = 8


_cu: Any = None


def _driver() -> Any:
    global _cu
    if _cu is None:
        from cuda.bindings import driver  # ModuleNotFoundError -> DeviceUnavailableError upstream

        _cu = driver
    return _cu


def _err_text(err: Any) -> str:
    """The driver's name and text of ``err``: a CUresult, or the raw code a ctypes call returns
    (one these bindings do not know is reported by number, never raised over)."""
    cu = _driver()
    try:
        err = cu.CUresult(int(err))
    except ValueError:
        return f"CUresult {int(err)} (unknown to these bindings)"
    try:
        _, name = cu.cuGetErrorName(err)
        _, text = cu.cuGetErrorString(err)
        return f"{name.decode()}: {text.decode()}"
    except Exception:  # noqa: BLE001
        return str(err)


def driver_error(err: Any, what: str) -> CudaError:
    """The ``CudaError`` of driver call ``what`` that returned ``err`` (for driver calls made
    outside the runtime: the hand-written kernels' TMA tensor maps)."""
    return CudaError(f"{what} failed: {_err_text(err)}")


def _ok(res: Any, what: str) -> Any:
    """The values of a driver call's result tuple, or CudaError (``_raise``)."""
    err = res[0]
    if int(err) != 0:
        _raise(err, what)
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


#: the server of each context (its driver pointer): a failing call finds the device it ran on
#: through the context current on its thread (every call makes its device's context current)
_servers: dict[int, CudaServer] = {}


def _raise(err: Any, what: str, server: CudaServer | None = None) -> None:
    """Raise the error of driver call ``what`` that returned ``err``: the device's fault again
    when its context was lost before, a new ``CudaFaultError`` (the device then marked lost)
    for a sticky code, else ``CudaError``. ``server``: the device the call ran on (default: the
    one whose context is current on this thread)."""
    if server is None:
        ctx = getattr(_current, "ctx", None)
        server = _servers.get(_ctx_key(ctx)) if ctx is not None else None
    if server is not None:
        if server.fault is not None:
            raise server.fault_again(what)
        if int(err) in STICKY_ERRORS:
            raise server.lost(err, what)
    raise CudaError(f"{what} failed: {_err_text(err)}")


def _ctx_key(ctx: Any) -> int:
    try:
        return int(ctx)
    except (TypeError, ValueError):
        return id(ctx)


_initialised = False
_init_lock = threading.Lock()
#: the context current on each thread, as this module last set it (one per device: a thread
#: that alternates between two devices switches contexts each time)
_current = threading.local()


def _init() -> Any:
    global _initialised
    cu = _driver()
    if not _initialised:
        with _init_lock:
            if not _initialised:
                try:
                    (err,) = cu.cuInit(0)
                except Exception as e:  # libcuda missing
                    raise DeviceUnavailableError(f"the CUDA driver could not be loaded: {e}") from None
                if int(err) != 0:
                    raise DeviceUnavailableError(f"cuInit failed: {_err_text(err)} (no usable NVIDIA driver/GPU)")
                _initialised = True
    return cu


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    major: int
    minor: int
    total_memory: int
    multiprocessors: int
    uuid: str

    @property
    def arch(self) -> str:
        return f"sm_{self.major}{self.minor}"

    def describe(self) -> str:
        return (
            f"{self.name}, compute capability {self.major}.{self.minor}, "
            f"{self.total_memory / 2**30:.1f} GiB, {self.multiprocessors} SMs"
        )


def _attr(cu: Any, dev: Any, name: str) -> int:
    return int(_ok(cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, name), dev), name))


def _device_info(cu: Any, index: int) -> DeviceInfo:
    dev = _ok(cu.cuDeviceGet(index), "cuDeviceGet")
    name = _ok(cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = name.split(b"\0", 1)[0].decode()
    total = int(_ok(cu.cuDeviceTotalMem(dev), "cuDeviceTotalMem"))
    try:
        uuid = bytes(_ok(cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes).hex()
    except Exception:  # noqa: BLE001 - older bindings
        uuid = f"index{index}"
    return DeviceInfo(
        index,
        name,
        _attr(cu, dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
        _attr(cu, dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        total,
        _attr(cu, dev, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        uuid,
    )


def devices() -> list[DeviceInfo]:
    """Every CUDA device of this machine (raises DeviceUnavailableError without a driver)."""
    cu = _init()
    n = int(_ok(cu.cuDeviceGetCount(), "cuDeviceGetCount"))
    return [_device_info(cu, i) for i in range(n)]
