"""DLPack exchange: ``Tensor.__dlpack__`` / ``__dlpack_device__`` and ``ember.from_dlpack``.

The exchange's contract (zero copy on CUDA, the stream order, no donation of imported
buffers) is stated once, in ``ember.tensor.dlpack``.

The export half and the ABI structures live in ``ember.tensor.dlpack`` (below the Tensor
class, which exports through it); this module adds the import, which builds tensors.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from . import dtype as dt
from .creation import from_numpy
from .device import Device
from .errors import DTypeError
from .tensor import Tensor, _make
from .tensor.dlpack import (  # noqa: F401  (the ABI names: tests build capsules with them)
    _DTYPES,
    _NAME,
    _USED,
    KDL_CPU,
    KDL_CUDA,
    _api,
    _capsule_destructor,
    _cube_primitive,
    _delete_exported,
    _DLDataType,
    _DLDevice,
    _DLManagedTensor,
    _DLTensor,
    _exported,
    dlpack_device,
    to_dlpack,
)

__all__ = ["to_dlpack", "dlpack_device", "from_dlpack", "KDL_CPU", "KDL_CUDA"]


# --------------------------------------------------------------------------- import
class _Imported:
    """Owner of an imported DLManagedTensor: calls its deleter when ember drops the buffer."""

    __slots__ = ("addr", "capsule")

    def __init__(self, addr: int, capsule: Any) -> None:
        self.addr = addr
        self.capsule = capsule

    def __del__(self) -> None:
        m = _DLManagedTensor.from_address(self.addr)
        if m.deleter:
            m.deleter(self.addr)


_foreign = weakref.WeakSet()  # keeps a weak reference on every imported buffer (never donated)


def from_dlpack(obj: Any) -> Tensor:
    """As ``torch.from_dlpack``: an ember tensor over another framework's tensor (anything with
    ``__dlpack__``).

    CUDA memory is shared, not copied: the result lives on ``Device.cuda(i, fusion=False)``
    and sees the producer's later writes. Host memory is copied to a Flex tensor (as
    ``from_numpy`` copies)."""
    dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (KDL_CPU, 0)
    if int(dev_type) != KDL_CUDA:
        return from_numpy(np.from_dlpack(obj))
    # the CUDA runtime (below this layer) loads only when a CUDA capsule arrives
    from .cube.runtime.client import get_client
    from .cube.runtime.cuda_memory import CudaBuffer
    from .cube.runtime.tensor import CubeTensor, contiguous_strides

    device = Device.cuda(int(dev_id), fusion=False)
    bk = device.backend()
    client = get_client("cuda", (int(dev_id),))
    try:
        cap = obj.__dlpack__(stream=int(client.server.stream))
    except TypeError:
        cap = obj.__dlpack__()
        client.sync()
    addr = _api.PyCapsule_GetPointer(cap, _NAME)
    m = _DLManagedTensor.from_address(addr)
    t = m.dl_tensor
    key = (int(t.dtype.code), int(t.dtype.bits))
    if t.dtype.lanes != 1 or key not in _DTYPES:
        raise DTypeError(f"DLPack type (code {key[0]}, {key[1]} bits, {t.dtype.lanes} lanes) has no ember dtype")
    d = dt.as_dtype(_DTYPES[key])
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else contiguous_strides(shape)
    if any(s < 0 for s in strides):
        raise ValueError("from_dlpack: negative strides are not supported; pass a contiguous copy")
    _api.PyCapsule_SetName(cap, _USED)  # consumed: the deleter is ours to call now
    owner = _Imported(addr, cap)
    nbytes = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * d.itemsize if all(shape) else 0
    buf = CudaBuffer(int(t.data or 0) + int(t.byte_offset), nbytes, nbytes, None, owner)
    _foreign.add(buf)
    p = CubeTensor(client, buf, shape, strides, 0, d)
    return _make(p, bk, d)
