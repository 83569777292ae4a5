"""``Identity``, ``Linear``, ``Bilinear``, ``Flatten``, ``Unflatten`` (as torch.nn).

Layers take torch's ``device=`` and ``dtype=`` factory arguments; without them parameters
live on ``ember.get_default_device()`` (which records gradients) in the default dtype."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "LazyLinear", "Bilinear", "Flatten", "Unflatten"]


class Identity(Module):
    """As torch.nn.Identity: returns its input (constructor arguments are ignored)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Identity.forward."""
        return input


class Linear(Module):
    """As torch.nn.Linear: ``y = x @ weight.T + bias``, weight ``(out_features, in_features)``;
    torch's init (kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty((out_features,), device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default initialisation."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Linear.forward."""
        # the dict read skips __getattr__ (this is the hottest layer)
        p = self._parameters
        return F.linear(input, p["weight"], p["bias"])  # type: ignore[arg-type]

    def extra_repr(self) -> str:
        """torch's Linear text inside the repr parentheses."""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(Linear):
    """As torch.nn.LazyLinear: ``in_features`` is taken from the first input."""

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        self._lazy = (bias, device, dtype)
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """torch's initialisation, once the input size is known."""
        if self.in_features:
            super().reset_parameters()

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.LazyLinear.forward."""
        if self.weight is None:
            bias, device, dtype = self._lazy
            self.in_features = input.shape[-1]
            self.weight = Parameter(empty((self.out_features, self.in_features), device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty((self.out_features,), device=device, dtype=dtype))
            self.reset_parameters()
        return super().forward(input)


class Bilinear(Module):
    """As torch.nn.Bilinear: ``y = x1 @ weight[k] @ x2 + bias[k]``, weight ``(out, in1, in2)``,
    init U(+-1/sqrt(in1_features))."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty((out_features,), device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default initialisation."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        """As torch.nn.Bilinear.forward."""
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        """torch's Bilinear text inside the repr parentheses."""
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Flatten(Module):
    """As torch.nn.Flatten: flattens dims ``start_dim..end_dim`` (default 1..-1)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Flatten.forward."""
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        """torch's Flatten text inside the repr parentheses."""
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """As torch.nn.Unflatten: splits dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Unflatten.forward."""
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        """torch's Unflatten text inside the repr parentheses."""
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
