"""Normalisation layers (as torch.nn): ``LayerNorm``, ``RMSNorm``, ``GroupNorm``,
``BatchNorm1d/2d/3d``, ``InstanceNorm1d/2d/3d``.

BatchNorm keeps torch's buffers (``running_mean``, ``running_var``, ``num_batches_tracked``)
and semantics: training normalises with the biased batch variance and updates
``running_var`` with the unbiased one; ``momentum=None`` is a cumulative average
(factor ``1 / num_batches_tracked``); eval uses the running statistics unless
``track_running_stats=False``. Buffer updates rebind the buffer tensors in place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import dtype as dt
from ...backends.autodiff.mode import no_grad
from ...creation import empty, ones, tensor, zeros
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..functional._norm import _shape_tuple
from ..parameter import Parameter
from .module import Module

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d"]


def _affine_parameters(m: Module, shape: tuple[int, ...], affine: bool, bias: bool, device: Any,
                       dtype: Any) -> None:
    """Register a norm's ``weight`` and ``bias`` of ``shape`` (None in their place when
    ``affine`` / ``bias`` is off), as torch's norm layers; values come from ``_reset_affine``."""
    if affine:
        m.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            m.bias = Parameter(empty(shape, device=device, dtype=dtype))
        else:
            m.register_parameter("bias", None)
    else:
        m.register_parameter("weight", None)
        m.register_parameter("bias", None)


def _reset_affine(m: Module) -> None:
    """A norm's weight to 1 and bias to 0 (torch's), where it has them."""
    if m.weight is not None:
        init.ones_(m.weight)
    if m.bias is not None:
        init.zeros_(m.bias)


class LayerNorm(Module):
    """As torch.nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight 1, bias 0 (torch's)."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.LayerNorm.forward."""
        p = self._parameters
        return F.layer_norm(input, self.normalized_shape, p["weight"], p["bias"], self.eps)

    def extra_repr(self) -> str:
        """torch's LayerNorm text inside the repr parentheses."""
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """As torch.nn.RMSNorm (torch 2.4+): ``eps=None`` uses ``finfo(input.dtype).eps``."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight 1."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.RMSNorm.forward."""
        return F.rms_norm(input, self.normalized_shape, self._parameters["weight"], self.eps)

    def extra_repr(self) -> str:
        """torch's RMSNorm text inside the repr parentheses."""
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """As torch.nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, *, bias=True)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight 1, bias 0."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.GroupNorm.forward."""
        p = self._parameters
        return F.group_norm(input, self.num_groups, p["weight"], p["bias"], self.eps)

    def extra_repr(self) -> str:
        """torch's GroupNorm text inside the repr parentheses."""
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _NormBase(Module):
    """Shared state of BatchNorm and InstanceNorm (torch's ``_NormBase``)."""

    _batch_ndims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """running_mean 0, running_var 1, num_batches_tracked 0."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Running statistics reset; weight 1, bias 0."""
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._batch_ndims:
            want = " or ".join(f"{n}D" for n in self._batch_ndims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")

    def _average_factor(self) -> float:
        """torch's exponential_average_factor (bumps num_batches_tracked in training)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self._buffers["num_batches_tracked"]
            if nbt is not None:
                with no_grad():
                    nbt.add_(1)
                if self.momentum is None:
                    factor = 1.0 / float(nbt.item())
        return factor

    def extra_repr(self) -> str:
        """torch's BatchNorm1d text inside the repr parentheses."""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.BatchNorm1d/2d/3d.forward."""
        self._check_input_dim(input)
        factor = self._average_factor()
        b = self._buffers
        rm, rv = b["running_mean"], b["running_var"]
        bn_training = True if self.training else (rm is None and rv is None)
        use_running = not self.training or self.track_running_stats
        p = self._parameters
        return F.batch_norm(input, rm if use_running else None, rv if use_running else None, p["weight"],
                            p["bias"], bn_training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """As torch.nn.BatchNorm1d over ``(N, C)`` or ``(N, C, L)``."""

    _batch_ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """As torch.nn.BatchNorm2d over ``(N, C, H, W)``."""

    _batch_ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """As torch.nn.BatchNorm3d over ``(N, C, D, H, W)``."""

    _batch_ndims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.InstanceNorm1d/2d/3d.forward."""
        self._check_input_dim(input)
        unbatched = input.ndim == self._batch_ndims[0]
        x = input.unsqueeze(0) if unbatched else input
        # torch's InstanceNorm never bumps num_batches_tracked; momentum=None means 0
        factor = 0.0 if self.momentum is None else self.momentum
        b = self._buffers
        p = self._parameters
        y = F.instance_norm(x, b["running_mean"], b["running_var"], p["weight"], p["bias"],
                            self.training or not self.track_running_stats, factor, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """As torch.nn.InstanceNorm1d over ``(N, C, L)`` or ``(C, L)``."""

    _batch_ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """As torch.nn.InstanceNorm2d over ``(N, C, H, W)`` or ``(C, H, W)``."""

    _batch_ndims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """As torch.nn.InstanceNorm3d over ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""

    _batch_ndims = (4, 5)
