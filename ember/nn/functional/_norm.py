"""Normalisation functions (as torch.nn.functional): ``layer_norm``, ``rms_norm``,
``group_norm``, ``batch_norm``, ``instance_norm``, ``local_response_norm`` is not here.

Each normalises with one reduction chain -- the mean, then the mean of the centred squares
(the biased variance) -- and ``rsqrt``, so a fused device reads the input in two reductions
and applies the rest elementwise. float16/bfloat16 inputs are normalised in float32 and the
result cast back, as torch's CPU kernels accumulate in float32."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import dtype as dt
from ...backends.autodiff.mode import no_grad
from ...tensor import Tensor, _autocast

__all__ = ["layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm"]


def _upcast(x: Tensor) -> tuple[Tensor, dt.DType | None]:
    d = x._dt
    if d is dt.float16 or d is dt.bfloat16:
        return x.to(dt.float32), d
    return x, None


def _shape_tuple(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int | np.integer):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


def _check_trailing(input: Tensor, shape: tuple[int, ...], what: str) -> tuple[int, ...]:
    n = len(shape)
    if n == 0 or input.shape[input.ndim - n:] != shape or input.ndim < n:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}")
    return tuple(range(input.ndim - n, input.ndim))


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None, back: dt.DType | None,
            shape: tuple[int, ...] | None = None) -> Tensor:
    """``y * weight + bias`` (reshaped to ``shape`` when given), computed in ``y``'s dtype and
    cast to ``back`` at the end (16-bit inputs round once, as torch's float32-accumulating kernels)."""
    if weight is not None:
        w = weight if shape is None else weight.reshape(shape)
        y = y * (w if w._dt is y._dt else w.to(y._dt))
    if bias is not None:
        b = bias if shape is None else bias.reshape(shape)
        y = y + (b if b._dt is y._dt else b.to(y._dt))
    return y if back is None else y.to(back)


def _normalise(x: Tensor, dims: tuple[int, ...], eps: float) -> Tensor:
    mean = x.mean(dims, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dims, keepdim=True)
    return xc * (var + eps).rsqrt()


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """As torch.nn.functional.layer_norm: normalise over the trailing ``normalized_shape``
    dims (biased variance), then ``* weight + bias``."""
    if _autocast.active:
        input, weight, bias = _autocast.fp32(input, weight, bias)
    shape = _shape_tuple(normalized_shape)
    dims = _check_trailing(input, shape, "layer_norm")
    x, back = _upcast(input)
    return _affine(_normalise(x, dims, eps), weight, bias, back)


def _finfo_eps(d: dt.DType) -> float:
    if d is dt.bfloat16:
        return 2.0 ** -7
    return float(np.finfo(d.np).eps)


def rms_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """As torch.nn.functional.rms_norm (torch 2.4+): ``x * rsqrt(mean(x**2) + eps) * weight``
    over the trailing dims; ``eps=None`` is ``finfo(input.dtype).eps``."""
    if _autocast.active:
        input, weight = _autocast.fp32(input, weight)
    shape = _shape_tuple(normalized_shape)
    dims = _check_trailing(input, shape, "rms_norm")
    if eps is None:
        eps = _finfo_eps(input._dt)
    x, back = _upcast(input)
    y = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    if back is not None:
        y = y.to(back)
    if weight is not None:
        y = y * weight
    return y


def _channel_shape(input: Tensor) -> tuple[int, ...]:
    # (1, C, 1, ...): per-channel tensors broadcast against (N, C, *)
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """As torch.nn.functional.group_norm: channels (dim 1) split into ``num_groups`` groups,
    each normalised over its channels and spatial dims; per-channel ``weight``/``bias``."""
    if _autocast.active:
        input, weight, bias = _autocast.fp32(input, weight, bias)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    x, back = _upcast(input)
    g = x.reshape(n, num_groups, input.numel() // max(n * num_groups, 1))  # explicit: -1 is ambiguous when n = 0
    y = _normalise(g, (2,), eps).reshape(input.shape)
    return _affine(y, weight, bias, back, _channel_shape(input))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """As torch.nn.functional.batch_norm over ``(N, C, *)``: in training, batch statistics
    (biased variance for the normalisation) and, when running buffers are given, the update
    ``running = (1 - momentum) * running + momentum * batch`` with the *unbiased* variance
    (the buffers are rebound in place); in eval, the running statistics."""
    if input.ndim < 2:
        if input.ndim == 1 and input.numel() == 0:  # torch returns an empty 1-D input as it is
            x, back = _upcast(input)
            return _affine(x, weight, bias, back, (0,))
        raise ValueError(f"expected 2D or higher input (got {input.ndim}D input)")
    dims = (0,) + tuple(range(2, input.ndim))
    cs = _channel_shape(input)
    x, back = _upcast(input)
    if training:
        count = input.numel() // input.shape[1] if input.shape[1] else 0
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
        if count == 0:  # an empty batch: an empty result, the running statistics unchanged (as torch)
            return _affine(x, weight, bias, back, cs)
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(dims, keepdim=True)
        y = xc * (var + eps).rsqrt()
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    bm = mean.detach().reshape(-1).to(running_mean._dt)
                    running_mean.copy_(running_mean * (1.0 - momentum) + bm * momentum)
                if running_var is not None:
                    bv = (var.detach().reshape(-1) * (count / (count - 1))).to(running_var._dt)
                    running_var.copy_(running_var * (1.0 - momentum) + bv * momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        rm = running_mean.reshape(cs).to(x._dt)
        rv = running_var.reshape(cs).to(x._dt)
        y = (x - rm) * (rv + eps).rsqrt()
    return _affine(y, weight, bias, back, cs)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """As torch.nn.functional.instance_norm: each (sample, channel) normalised over its
    spatial dims; running statistics (averaged over the batch) updated when given."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm expects an input of at least 3 dimensions (N, C, *), got {input.ndim}D")
    cs = _channel_shape(input)
    dims = tuple(range(2, input.ndim))
    x, back = _upcast(input)
    if use_input_stats:
        mean = x.mean(dims, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(dims, keepdim=True)
        y = xc * (var + eps).rsqrt()
        if running_mean is not None or running_var is not None:
            count = 1
            for d in dims:
                count *= input.shape[d]
            with no_grad():
                if running_mean is not None:
                    bm = mean.detach().mean(0).reshape(-1).to(running_mean._dt)
                    running_mean.copy_(running_mean * (1.0 - momentum) + bm * momentum)
                if running_var is not None:
                    bv = (var.detach().mean(0).reshape(-1) * (count / max(count - 1, 1))).to(running_var._dt)
                    running_var.copy_(running_var * (1.0 - momentum) + bv * momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
        y = (x - running_mean.reshape(cs).to(x._dt)) * (running_var.reshape(cs).to(x._dt) + eps).rsqrt()
    return _affine(y, weight, bias, back, cs)
