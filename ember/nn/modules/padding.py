"""Padding layers (as ``torch.nn.ZeroPad2d``, ``ConstantPad*``, ``ReflectionPad*``,
``ReplicationPad*``, ``CircularPad*``): ``F.pad`` as modules, ``padding`` an int or a
``2 * nd`` tuple (left, right, top, bottom, front, back)."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from ..functional._conv import _ntuple
from .module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]


class _PadNd(Module):
    _nd = 0
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._nd, "padding")

    def forward(self, input: Tensor) -> Tensor:
        """The padded input."""
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        """The input padded with ``value``."""
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """As ``torch.nn.ConstantPad1d``."""

    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """As ``torch.nn.ConstantPad2d``."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """As ``torch.nn.ConstantPad3d``."""

    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """As ``torch.nn.ZeroPad1d``."""

    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """As ``torch.nn.ZeroPad2d``."""

    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """As ``torch.nn.ZeroPad3d``."""

    _nd = 3


class ReflectionPad1d(_PadNd):
    """As ``torch.nn.ReflectionPad1d``."""

    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """As ``torch.nn.ReflectionPad2d``."""

    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """As ``torch.nn.ReflectionPad3d``."""

    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """As ``torch.nn.ReplicationPad1d``."""

    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """As ``torch.nn.ReplicationPad2d``."""

    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """As ``torch.nn.ReplicationPad3d``."""

    _nd, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """As ``torch.nn.CircularPad1d``."""

    _nd, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """As ``torch.nn.CircularPad2d``."""

    _nd, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """As ``torch.nn.CircularPad3d``."""

    _nd, _mode = 3, "circular"
