"""DLPack export: the ABI structures and ``Tensor.__dlpack__`` / ``__dlpack_device__``
(``ember.dlpack`` builds tensors from other frameworks' capsules on top of this module).

Zero-copy both ways on CUDA devices (torch, cupy, JAX take ember tensors and give theirs): the
capsule points at the cube buffer, and the buffer lives until the consumer calls the deleter.
A tensor on a CPU device is exported through numpy's own DLPack support (host memory).

Stream contract: on export ember synchronises its stream before returning the capsule (the
values are complete for any consumer stream); on import ember passes its own stream handle
to the producer, which orders its pending work before it (the protocol's ``stream`` argument).

Tensors are values in ember, so an imported buffer is never donated to an in-place kernel:
the producer may still read it (a foreign buffer is weakly referenced, which the Cube
backend's donation test treats as shared).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .. import dtype as dt
from ..errors import DTypeError

__all__ = ["to_dlpack", "dlpack_device", "KDL_CPU", "KDL_CUDA"]

KDL_CPU, KDL_CUDA = 1, 2
_CODES = {  # ember dtype -> (DLPack type code, bits)
    "bool": (6, 8),
    "uint8": (1, 8),
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float32": (2, 32),
    "float64": (2, 64),
}
_DTYPES = {v: k for k, v in _CODES.items()}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


_NAME = b"dltensor"
_USED = b"used_dltensor"
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

#: exported tensors still owned by a consumer: address of the managed struct -> what it keeps alive
_exported: dict[int, Any] = {}


@_Deleter
def _delete_exported(addr: int) -> None:
    _exported.pop(addr, None)


_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# the destructor runs while the capsule is being freed: it must not touch it as a Python object
# (a new reference would free it again), so these take the raw pointer and keep the GIL
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))


@_CapsuleDestructor
def _capsule_destructor(cap: int) -> None:
    # a capsule nobody consumed (still named "dltensor") owns its tensor: release it
    if _raw_is_valid(cap, _NAME):
        _exported.pop(_raw_pointer(cap, _NAME), None)


# --------------------------------------------------------------------------- export
def _cube_primitive(t: Any) -> Any:
    """The CubeTensor behind an ember Tensor (draining fusion), or None for a non-cube device."""
    from ..cube.runtime.tensor import CubeTensor  # (the runtime, below: loaded with a cube device)

    bk, p = t._bk, t._p
    while type(p) is not CubeTensor:
        if hasattr(bk, "realise"):
            p = bk.realise(p)
        elif type(p).__name__ == "ADTensor":
            p = p.inner
        inner = getattr(bk, "inner", None)
        if inner is None:
            return None
        bk = inner
    return p


def dlpack_device(t: Any) -> tuple[int, int]:
    """``(kDLCUDA, index)`` for a tensor in CUDA memory, else ``(kDLCPU, 0)``."""
    p = _cube_primitive(t)
    if p is None or p.client.runtime != "cuda":
        return (KDL_CPU, 0)
    return (KDL_CUDA, int(p.client.index))


def to_dlpack(t: Any, stream: Any = None) -> Any:
    """A DLPack capsule of ``t``'s values (zero copy on CUDA)."""
    p = _cube_primitive(t)
    if p is None or p.client.runtime != "cuda":
        a = np.array(t.numpy(), copy=True, order="C")  # numpy exports writable arrays only
        if t.dtype is dt.bfloat16:
            raise DTypeError("bfloat16 tensors on CPU devices cannot be exported through numpy's DLPack")
        return a.__dlpack__()
    code, bits = _CODES[p.dtype.name]
    client = p.client
    client.sync()  # complete for any consumer stream
    nd = len(p.shape)
    shape = (ctypes.c_int64 * max(nd, 1))(*p.shape)
    strides = (ctypes.c_int64 * max(nd, 1))(*p.strides)
    m = _DLManagedTensor()
    m.dl_tensor.data = p.buffer.ptr
    m.dl_tensor.device = _DLDevice(KDL_CUDA, int(client.index))
    m.dl_tensor.ndim = nd
    m.dl_tensor.dtype = _DLDataType(code, bits, 1)
    m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.byte_offset = p.offset * p.dtype.itemsize
    m.manager_ctx = None
    m.deleter = _delete_exported
    addr = ctypes.addressof(m)
    _exported[addr] = (m, shape, strides, p)  # the buffer lives while the consumer holds it
    return _api.PyCapsule_New(addr, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
