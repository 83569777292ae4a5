"""Conversions: ``to`` (devices and dtypes), ``cpu``, ``cuda``, the dtype casts (``float``,
``long``, ...), ``contiguous`` and ``clone``.

A move across devices carries values, not gradient flow; ``memory_format=`` and
``non_blocking=`` are accepted and ignored (layouts are not observable, transfers complete
before the call returns).
"""

from __future__ import annotations

from typing import Any

from .. import dtype as dt
from ..device import Device
from .core import Tensor, _make, get_default_device

#: dtype name -> the stem of torch's legacy tensor type name (``Tensor.type()``)
_LEGACY_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


class ConversionMethods:
    """Tensor's conversions (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    # ------------------------------------------------------------------ casting, devices
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """As ``torch.Tensor.to``: ``to(dtype, non_blocking=False, copy=False)``,
        ``to(device, dtype=None, non_blocking=False, copy=False)``, ``to(other, non_blocking,
        copy)``; ``memory_format=`` is accepted and ignored (layouts are not observable).

        The string ``"cpu"`` (as ``.cpu()``) means the host: a tensor already on a host device
        (Flex, the Cube CPU device) stays there; one on a GPU device moves to the default device
        when that is a host device, else to Flex, keeping its autodiff wrapping. Every other
        string or a ``Device`` names the target exactly (``"cpu"`` in creation functions is
        ``Device.cpu()``). A move across devices carries values, not gradient flow."""
        target_dev = kwargs.pop("device", None)
        target_dt = kwargs.pop("dtype", None)
        non_blocking = kwargs.pop("non_blocking", False)
        copy = bool(kwargs.pop("copy", False))
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        flags: list[bool] = []
        for a in args:
            if isinstance(a, bool):  # before dtypes: positional non_blocking / copy
                flags.append(a)
            elif isinstance(a, Device):
                target_dev = a
            elif isinstance(a, Tensor):
                target_dev, target_dt = a.device, a.dtype
            elif isinstance(a, str) and a.split(":")[0].split("+")[0] in ("flex", "cpu", "cuda", "wgpu", "vulkan",
                                                                          "opengl"):
                target_dev = a
            elif a is None:
                continue
            else:
                target_dt = a
        if len(flags) > 2:
            raise TypeError("to() takes at most two bool arguments (non_blocking, copy)")
        if len(flags) == 2:
            non_blocking, copy = flags
        elif len(flags) == 1:
            non_blocking = flags[0]
        del non_blocking  # every transfer completes before the call returns (values)
        if isinstance(target_dev, str):
            target_dev = self._host_device() if target_dev.strip().lower() in ("cpu", "cpu:0") \
                else Device.parse(target_dev)
        t = self
        if target_dev is not None and target_dev != self._bk.device:
            src = self.numpy()
            bk = target_dev.backend()
            t = _make(bk.from_data(src, self._dt), bk, self._dt)
            copy = False
        if target_dt is not None:
            d = dt.as_dtype(target_dt)
            if d is not t._dt:
                t = _make(t._bk.cast(t._p, d), t._bk, d)
                copy = False
        return t.clone() if copy else t

    def _host_device(self) -> Device:
        """Where ``.cpu()`` / ``.to("cpu")`` go (see ``to``)."""
        dev = self._bk.device
        inner = dev.inner()
        if inner.spec[0] in ("flex", "fusion") or (inner.spec[0] == "cube" and inner.spec[1] == "cpu"):
            return dev
        host = get_default_device().inner()
        if not (host.spec[0] in ("flex", "fusion") or (host.spec[0] == "cube" and host.spec[1] == "cpu")):
            host = Device.flex()
        return host.autodiff() if dev.is_autodiff else host

    def cpu(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.cpu``: the tensor on the host (``to("cpu")``: a host tensor is
        returned as is, a GPU one moves to the default host device keeping autodiff)."""
        return self.to(self._host_device())

    def type_as(self, other: Tensor) -> Tensor:
        """As ``torch.Tensor.type_as``: this tensor cast to ``other``'s dtype (the device stays)."""
        return self.to(other.dtype)

    def element_size(self) -> int:
        """As ``torch.Tensor.element_size``: bytes per element."""
        return self._dt.itemsize

    @property
    def itemsize(self) -> int:
        """As ``torch.Tensor.itemsize``: bytes per element."""
        return self._dt.itemsize

    @property
    def nbytes(self) -> int:
        """As ``torch.Tensor.nbytes``: bytes of the elements."""
        return self._dt.itemsize * self.numel()

    def nelement(self) -> int:
        """As ``torch.Tensor.nelement``: the number of elements (``numel``)."""
        return self.numel()

    def ndimension(self) -> int:
        """As ``torch.Tensor.ndimension``: the number of dims (``dim``)."""
        return self.ndim

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """As ``torch.Tensor.is_contiguous``: True (layouts are not observable; ``contiguous`` is free)."""
        return True

    def is_complex(self) -> bool:
        """As ``torch.Tensor.is_complex``: False (ember has no complex dtypes)."""
        return False

    def is_signed(self) -> bool:
        """As ``torch.Tensor.is_signed``: whether the dtype holds negative values."""
        return bool(self._dt.is_signed)

    def get_device(self) -> int:
        """As ``torch.Tensor.get_device``: the CUDA index, or -1 on a host device."""
        inner = self._bk.device.inner()
        return int(inner.spec[2][0]) if inner.type == "cuda" else -1

    def pin_memory(self, device: Any = None) -> Tensor:
        """As ``torch.Tensor.pin_memory``: the tensor itself (transfers complete before they return)."""
        return self

    def is_pinned(self, device: Any = None) -> bool:
        """As ``torch.Tensor.is_pinned``: False (no pinned host memory)."""
        return False

    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.cuda``: the tensor on ``Device.cuda(device)`` (index or device),
        keeping its autodiff wrapping."""
        if isinstance(device, Device):
            target = device
        else:
            if isinstance(device, str):
                device = int(device.partition(":")[2] or 0)
            target = Device.cuda(0 if device is None else int(device))
            if self._bk.device.is_autodiff:
                target = target.autodiff()
        return self.to(target)

    def type(self, d: Any = None, non_blocking: bool = False) -> Any:
        """As ``torch.Tensor.type``: ``to(d)`` (a dtype or its name); without ``d`` the legacy
        type name, as torch spells it (``"torch.FloatTensor"``, ``"torch.LongTensor"``, ...), so
        a ported script's comparisons with torch's strings hold."""
        if d is None:
            return "torch." + _LEGACY_NAMES.get(self._dt.name, self._dt.name) + "Tensor"
        return self.to(d)

    def float(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.float`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float32)

    def double(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.double`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float64)

    def half(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.half`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float16)

    def bfloat16(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.bfloat16`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.bfloat16)

    def int(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.int`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.int32)

    def long(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.long`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.int64)

    def bool(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.bool`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.bool_)

    def byte(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.byte`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.uint8)

    def char(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.char``: to int8 (``memory_format`` accepted and ignored)."""
        return self.to(dt.int8)

    def short(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.short``: to int16 (``memory_format`` accepted and ignored)."""
        return self.to(dt.int16)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.contiguous``; ``memory_format`` is accepted and ignored."""
        return _make(self._bk.contiguous(self._p), self._bk, self._dt)

    def clone(self, *, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.clone``; ``memory_format`` is accepted and ignored."""
        return _make(self._bk.copy(self._p), self._bk, self._dt)

