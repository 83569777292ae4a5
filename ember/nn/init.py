"""Parameter initialisation (as torch.nn.init).

Every function runs under ``no_grad``, draws from ember's Philox stream on the tensor's own
device (so one seed gives the same values on every device), rebinds the tensor to the new
values in place (its identity, leaf status and ``.grad`` are kept) and returns it.
``generator=`` is accepted for torch compatibility; ember has one global stream, so a value
other than None raises. ``trunc_normal_``, ``orthogonal_`` and the QR/rejection steps draw on
the device, then finish on the host (numpy) and upload the result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtype as dt
from ..backends.autodiff.mode import no_grad
from ..creation import _random, from_numpy
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_", "xavier_uniform_",
    "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_", "sparse_",
]


def _no_generator(generator: Any) -> None:
    if generator is not None:
        raise NotImplementedError("ember.nn.init draws from ember's global Philox stream; generator= must be None "
                                  "(seed it with ember.manual_seed)")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """As torch.nn.init.calculate_gain: the recommended gain for ``nonlinearity``."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int | float):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """As torch's: ``(size(1) * receptive field, size(0) * receptive field)``."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor: Tensor, values: Tensor) -> Tensor:
    with no_grad():
        tensor.copy_(values)
    return tensor


def _draw(dist: str, tensor: Tensor, a: float, b: float) -> Tensor:
    d = tensor._dt
    if not d.is_floating_point:
        raise TypeError(f"initialising a {d} tensor with random floats; use a floating point tensor")
    return _random(dist, tensor.shape, d, tensor.device, float(a), float(b), False)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """As torch.nn.init.uniform_: values from U(a, b)."""
    _no_generator(generator)
    return _fill(tensor, _draw("uniform", tensor, a, b))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """As torch.nn.init.normal_: values from N(mean, std**2)."""
    _no_generator(generator)
    return _fill(tensor, _draw("normal", tensor, mean, std))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """As torch.nn.init.constant_: every element ``val``."""
    with no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """As torch.nn.init.zeros_."""
    return constant_(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    """As torch.nn.init.ones_."""
    return constant_(tensor, 1)


def _host(tensor: Tensor, a: np.ndarray) -> Tensor:
    # uploaded in the tensor's dtype (float32 for the 16-bit ones): WGSL devices hold no float64
    d = tensor._dt
    npd = np.float64 if d is dt.float64 else np.float32
    return from_numpy(np.array(a, dtype=npd, order="C"), device=tensor.device).to(d)


def eye_(tensor: Tensor) -> Tensor:
    """As torch.nn.init.eye_: the identity in a 2-D tensor."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _host(tensor, np.eye(*tensor.shape)))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """As torch.nn.init.dirac_: the identity convolution kernel in a 3/4/5-D tensor."""
    nd = tensor.ndim
    if nd not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    out_per = sizes[0] // groups
    m = min(out_per, sizes[1])
    a = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(m):
            a[(g * out_per + d, d) + centre] = 1
    return _fill(tensor, _host(tensor, a))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """As torch.nn.init.xavier_uniform_: U(-a, a), ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """As torch.nn.init.xavier_normal_: N(0, std**2), ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Any = None) -> Tensor:
    """As torch.nn.init.kaiming_uniform_: U(-b, b), ``b = gain * sqrt(3 / fan)``."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Any = None) -> Tensor:
    """As torch.nn.init.kaiming_normal_: N(0, std**2), ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Any = None) -> Tensor:
    """As torch.nn.init.trunc_normal_: N(mean, std**2) restricted to [a, b], by rejection:
    standard normals drawn from the Philox stream, those outside redrawn (exact, unlike an
    approximate inverse CDF)."""
    _no_generator(generator)
    n = tensor.numel()
    lo, hi = (a - mean) / std, (b - mean) / std
    if not lo < hi:
        raise ValueError(f"trunc_normal_ needs a < b, got a={a}, b={b}")
    out = np.empty(n)
    todo = np.arange(n)
    # the acceptance probability is at least that of the mass in [lo, hi]; draw in rounds
    for _ in range(1000):
        if todo.size == 0:
            break
        # float32 draws on every device (WGSL has no float64), so every device gets the same values
        z = np.asarray(_random("normal", (todo.size,), dt.float32, tensor.device, 0.0, 1.0, False).numpy(),
                       dtype=np.float64)
        ok = (z >= lo) & (z <= hi)
        out[todo[ok]] = z[ok]
        todo = todo[~ok]
    if todo.size:
        raise ValueError(f"trunc_normal_: the interval [{a}, {b}] holds too little of N({mean}, {std}**2)")
    vals = np.clip(out * std + mean, a, b).reshape(tensor.shape)
    return _fill(tensor, _host(tensor, vals))


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """As torch.nn.init.orthogonal_: a (semi-)orthogonal matrix from the QR decomposition of a
    normal draw (signs fixed so the decomposition is unique), times ``gain``."""
    _no_generator(generator)
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = np.asarray(_random("normal", (rows, cols), dt.float32, tensor.device, 0.0, 1.0, False).numpy(),
                      dtype=np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, _host(tensor, (q * gain).reshape(tensor.shape)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """As torch.nn.init.sparse_: a 2-D tensor, N(0, std**2), with ``ceil(sparsity * rows)``
    zeros per column at random rows."""
    _no_generator(generator)
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    nz = int(math.ceil(sparsity * rows))
    vals = np.asarray(_random("normal", (rows, cols), dt.float32, tensor.device, 0.0, std, False).numpy(),
                      dtype=np.float64)
    keys = np.asarray(_random("uniform", (rows, cols), dt.float32, tensor.device, 0.0, 1.0, False).numpy())
    order = np.argsort(keys, axis=0, kind="stable")
    for c in range(cols):
        vals[order[:nz, c], c] = 0.0
    return _fill(tensor, _host(tensor, vals))
