"""Activation layers (as torch.nn), thin wrappers over ``ember.nn.functional``.

``inplace=`` is accepted and shown in ``repr`` like torch's, but it is a no-op: tensors are
values, so the layer returns a new tensor and leaves its input unchanged."""

from __future__ import annotations

from typing import Any

from ...creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = [
    "ReLU", "ReLU6", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Softmin", "LeakyReLU", "ELU",
    "SELU", "CELU", "Softplus", "Softsign", "Mish", "Hardtanh", "Hardsigmoid", "Hardswish", "PReLU", "Threshold",
    "GLU", "Tanhshrink", "LogSigmoid", "Softshrink", "Hardshrink",
]


def _inplace(flag: bool, first: bool) -> str:
    if not flag:
        return ""
    return "inplace=True" if first else ", inplace=True"


class ReLU(Module):
    """As torch.nn.ReLU."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.ReLU.forward."""
        return input.relu()

    def extra_repr(self) -> str:
        """torch's ReLU text inside the repr parentheses."""
        return _inplace(self.inplace, True)


class Hardtanh(Module):
    """As torch.nn.Hardtanh: ``clamp(x, min_val, max_val)``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if max_val < min_val:
            raise ValueError("max_val cannot be less than min_val")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Hardtanh.forward."""
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        """torch's Hardtanh text inside the repr parentheses."""
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace(self.inplace, False)


class ReLU6(Hardtanh):
    """As torch.nn.ReLU6: ``clamp(x, 0, 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        """torch's ReLU6 text inside the repr parentheses."""
        return _inplace(self.inplace, True)


class GELU(Module):
    """As torch.nn.GELU (``approximate='none'`` or ``'tanh'``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.GELU.forward."""
        return input.gelu(self.approximate)

    def extra_repr(self) -> str:
        """torch's GELU text inside the repr parentheses."""
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """As torch.nn.SiLU."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.SiLU.forward."""
        return input.silu()

    def extra_repr(self) -> str:
        """torch's SiLU text inside the repr parentheses."""
        return _inplace(self.inplace, True)


class Mish(SiLU):
    """As torch.nn.Mish: ``x * tanh(softplus(x))``."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Mish.forward."""
        return F.mish(input)


class SELU(SiLU):
    """As torch.nn.SELU."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.SELU.forward."""
        return F.selu(input)


class Tanh(Module):
    """As torch.nn.Tanh."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Tanh.forward."""
        return input.tanh()


class Sigmoid(Module):
    """As torch.nn.Sigmoid."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Sigmoid.forward."""
        return input.sigmoid()


class Softsign(Module):
    """As torch.nn.Softsign."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Softsign.forward."""
        return F.softsign(input)


class Tanhshrink(Module):
    """As torch.nn.Tanhshrink."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Tanhshrink.forward."""
        return F.tanhshrink(input)


class LogSigmoid(Module):
    """As torch.nn.LogSigmoid."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.LogSigmoid.forward."""
        return F.logsigmoid(input)


class _DimModule(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        """torch's Softmax text inside the repr parentheses."""
        return f"dim={self.dim}"


class Softmax(_DimModule):
    """As torch.nn.Softmax(dim)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Softmax.forward."""
        return F.softmax(input, self.dim)


class LogSoftmax(_DimModule):
    """As torch.nn.LogSoftmax(dim)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.LogSoftmax.forward."""
        return F.log_softmax(input, self.dim)


class Softmin(_DimModule):
    """As torch.nn.Softmin(dim)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Softmin.forward."""
        return F.softmin(input, self.dim)


class GLU(_DimModule):
    """As torch.nn.GLU(dim=-1)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.GLU.forward."""
        return F.glu(input, self.dim)  # type: ignore[arg-type]


class LeakyReLU(Module):
    """As torch.nn.LeakyReLU(negative_slope=0.01)."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.LeakyReLU.forward."""
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        """torch's LeakyReLU text inside the repr parentheses."""
        return f"negative_slope={self.negative_slope}" + _inplace(self.inplace, False)


class ELU(Module):
    """As torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.ELU.forward."""
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        """torch's ELU text inside the repr parentheses."""
        return f"alpha={self.alpha}" + _inplace(self.inplace, False)


class CELU(ELU):
    """As torch.nn.CELU(alpha=1.0)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.CELU.forward."""
        return F.celu(input, self.alpha)


class Softplus(Module):
    """As torch.nn.Softplus(beta=1.0, threshold=20.0)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Softplus.forward."""
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        """torch's Softplus text inside the repr parentheses."""
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardsigmoid(Module):
    """As torch.nn.Hardsigmoid."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Hardsigmoid.forward."""
        return F.hardsigmoid(input)


class Hardswish(Hardsigmoid):
    """As torch.nn.Hardswish."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Hardswish.forward."""
        return F.hardswish(input)


class PReLU(Module):
    """As torch.nn.PReLU(num_parameters=1, init=0.25): a learned negative slope (one, or one
    per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty((num_parameters,), device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every slope = ``init``."""
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.PReLU.forward."""
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        """torch's PReLU text inside the repr parentheses."""
        return f"num_parameters={self.num_parameters}"


class Threshold(Module):
    """As torch.nn.Threshold(threshold, value)."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Threshold.forward."""
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        """torch's Threshold text inside the repr parentheses."""
        return f"threshold={self.threshold}, value={self.value}" + _inplace(self.inplace, False)


class Softshrink(Module):
    """As torch.nn.Softshrink(lambd=0.5)."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Softshrink.forward."""
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        """torch's Softshrink text inside the repr parentheses."""
        return str(self.lambd)


class Hardshrink(Softshrink):
    """As torch.nn.Hardshrink(lambd=0.5)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Hardshrink.forward."""
        return F.hardshrink(input, self.lambd)
