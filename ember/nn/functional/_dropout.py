"""Dropout (as torch.nn.functional). The mask comes from ember's Philox stream, drawn as
float32 uniforms on the input's device, so one seed gives the same mask on every device
(and for every input dtype). Kept elements are scaled by ``1 / (1 - p)``; ``training=False``
returns the input. ``inplace`` is a no-op (tensors are values)."""

from __future__ import annotations

from ... import dtype as dt
from ...creation import rand
from ...functional import where
from ...tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape: tuple[int, ...], p: float, input: Tensor) -> Tensor:
    # keep where u < 1 - p (torch's bernoulli(1 - p)); float32 draws for every input dtype
    return rand(shape, dtype=dt.float32, device=input.device) < (1.0 - p)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.dropout: zero each element with probability ``p`` and scale the
    rest by ``1 / (1 - p)`` (when ``training``)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return where(_keep_mask(input.shape, p, input), input * (1.0 / (1.0 - p)), 0.0)


def _channel_dropout(input: Tensor, p: float, training: bool, batched_ndim: int, name: str) -> Tensor:
    _check_p(p)
    nd = input.ndim
    if nd not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
                           f"{nd}D input.")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    lead = 2 if nd == batched_ndim else 1  # (N, C) or (C,): one draw per channel
    shape = input.shape[:lead] + (1,) * (nd - lead)
    return where(_keep_mask(shape, p, input), input * (1.0 / (1.0 - p)), 0.0)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.dropout1d: whole channels of ``(N, C, L)`` / ``(C, L)``."""
    return _channel_dropout(input, p, training, 3, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.dropout2d: whole channels of ``(N, C, H, W)`` / ``(C, H, W)``."""
    return _channel_dropout(input, p, training, 4, "dropout2d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.dropout3d: whole channels of ``(N, C, D, H, W)``."""
    return _channel_dropout(input, p, training, 5, "dropout3d")


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_ALPHA_P = -_SELU_ALPHA * _SELU_SCALE  # the value a dropped SELU output takes


def _alpha(input: Tensor, p: float, training: bool, shape: tuple[int, ...]) -> Tensor:
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    # torch's affine correction keeps mean 0 and variance 1 for SELU activations
    a = ((1.0 - p) * (1.0 + p * _ALPHA_P ** 2)) ** -0.5
    b = -a * _ALPHA_P * p
    kept = _keep_mask(shape, p, input)
    return where(kept, input, _ALPHA_P) * a + b


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.alpha_dropout (for SELU networks)."""
    return _alpha(input, p, training, input.shape)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """As torch.nn.functional.feature_alpha_dropout: alpha dropout of whole channels."""
    shape = input.shape[:2] + (1,) * (input.ndim - 2)
    return _alpha(input, p, training, shape)
