"""Activation functions (as torch.nn.functional), composed from catalog ops so they run on
every device, with autodiff, and fuse as elementwise chains.

``inplace=`` is accepted everywhere torch has it and is a no-op: tensors are values, so an
"in-place" activation returns the same result as the out-of-place one (the input tensor is
left unchanged)."""

from __future__ import annotations

import warnings
from typing import Any

from ...functional import where
from ...tensor import Tensor

__all__ = [
    "relu", "relu_", "relu6", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "softmin",
    "leaky_relu", "elu", "selu", "celu", "softplus", "softsign", "mish", "hardtanh", "hardsigmoid",
    "hardswish", "prelu", "threshold", "glu", "logsigmoid", "tanhshrink", "softshrink", "hardshrink",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.relu (``inplace`` is a no-op)."""
    return input.relu()


def relu_(input: Tensor) -> Tensor:
    """As torch.nn.functional.relu_: rebinds ``input`` to relu(input) and returns it."""
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.relu6: ``min(max(x, 0), 6)``."""
    return input.clamp(0.0, 6.0)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """As torch.nn.functional.gelu (``approximate='none'`` or ``'tanh'``)."""
    return input.gelu(approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.silu: ``x * sigmoid(x)``."""
    return input.silu()


def tanh(input: Tensor) -> Tensor:
    """As torch.nn.functional.tanh."""
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """As torch.nn.functional.sigmoid."""
    return input.sigmoid()


def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """As torch.nn.functional.softmax (``dim=None`` picks torch's legacy implicit dim, with its
    warning); ``dtype`` casts the input first."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return input.softmax(dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """As torch.nn.functional.log_softmax (the stable ``x - logsumexp(x)`` form)."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return input.log_softmax(dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """As torch.nn.functional.softmin: ``softmax(-x)``."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim)
    t = input.to(dtype) if dtype is not None else input
    return (-t).softmax(dim)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.leaky_relu: ``x`` where ``x > 0``, else ``negative_slope * x``."""
    return where(input > 0, input, input * negative_slope)


def _expm1_neg(x: Tensor, scale: float = 1.0) -> Tensor:
    # expm1 of the non-positive part only: the branch where() discards never overflows, so
    # its zero gradient stays 0 (0 * inf would be NaN)
    z = x.clamp(max=0.0)
    return (z / scale).expm1() if scale != 1.0 else z.expm1()


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.elu: ``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    return where(input > 0, input, _expm1_neg(input) * alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.selu (torch's alpha and scale constants)."""
    return where(input > 0, input, _expm1_neg(input) * _SELU_ALPHA) * _SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.celu: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return where(input > 0, input, _expm1_neg(input, alpha) * alpha)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """As torch.nn.functional.softplus: ``log(1 + exp(beta * x)) / beta``, linear where
    ``beta * x > threshold``."""
    z = input * beta if beta != 1.0 else input
    soft = z.clamp(max=threshold).exp().log1p()
    if beta != 1.0:
        soft = soft / beta
    return where(z > threshold, input, soft)


def softsign(input: Tensor) -> Tensor:
    """As torch.nn.functional.softsign: ``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.mish: ``x * tanh(softplus(x))``."""
    return input * softplus(input).tanh()


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.hardtanh: ``clamp(x, min_val, max_val)``."""
    if max_val < min_val:
        raise ValueError("max_val cannot be less than min_val")
    return input.clamp(min_val, max_val)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.hardsigmoid: ``clamp(x / 6 + 1/2, 0, 1)``."""
    return (input / 6.0 + 0.5).clamp(0.0, 1.0)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.hardswish: ``x * clamp(x + 3, 0, 6) / 6``."""
    return input * ((input + 3.0).clamp(0.0, 6.0) / 6.0)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """As torch.nn.functional.prelu: ``weight`` (one value, or one per channel = dim 1)
    scales the negative part."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    if weight.numel() == 1:
        w = weight.reshape(())  # one weight for every element: 0-d, so the result has input's shape
    else:  # one weight per channel (dim 1)
        if input.ndim < 2 or input.shape[1] != weight.numel():
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {input.shape[1] if input.ndim > 1 else 1}.")
        w = weight.reshape((weight.numel(),) + (1,) * (input.ndim - 2))
    return where(input > 0, input, input * w)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.threshold: ``x`` where ``x > threshold``, else ``value``."""
    return where(input > threshold, input, float(value) if input._dt.is_floating_point else value)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """As torch.nn.functional.glu: ``a * sigmoid(b)`` of the two halves along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    a, b = input.split(n // 2, dim)
    return a * b.sigmoid()


def logsigmoid(input: Tensor) -> Tensor:
    """As torch.nn.functional.logsigmoid, in the stable form ``min(x, 0) - log1p(exp(-|x|))``."""
    return input.clamp(max=0.0) - (-input.abs()).exp().log1p()


def tanhshrink(input: Tensor) -> Tensor:
    """As torch.nn.functional.tanhshrink: ``x - tanh(x)``."""
    return input - input.tanh()


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """As torch.nn.functional.softshrink: ``x - lambd`` above ``lambd``, ``x + lambd`` below
    ``-lambd``, else 0."""
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """As torch.nn.functional.hardshrink: ``x`` where ``|x| > lambd``, else 0."""
    return where((input > lambd) | (input < -lambd), input, 0.0)

