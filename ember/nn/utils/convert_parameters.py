"""Parameters to one vector and back, as ``torch.nn.utils.convert_parameters``."""

from __future__ import annotations

from collections.abc import Iterable

from ...backends.autodiff.mode import no_grad
from ...errors import DeviceMismatchError
from ...functional import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _one_device(params: list[Tensor]) -> None:
    for p in params[1:]:
        if p.device != params[0].device:
            raise DeviceMismatchError("Found two parameters on different devices, this is currently not supported.")


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """As ``torch.nn.utils.parameters_to_vector``: the parameters flattened and concatenated
    (differentiable, as torch's)."""
    params = list(parameters)
    _one_device(params)
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """As ``torch.nn.utils.vector_to_parameters``: slice ``vec`` into the parameters' values.
    Each parameter is rebound in place (it keeps its identity, leaf status and ``.grad``;
    torch assigns ``.data``), without gradient flow from ``vec``."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    _one_device(params)
    n = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.shape[0] < n:  # torch fails in view_as here; a longer vec is allowed
        raise ValueError(f"vec has shape {vec.shape}, but the parameters have {n} elements in all")
    at = 0
    with no_grad():
        v = vec.detach()
        for p in params:
            k = p.numel()
            p.copy_(v[at:at + k].reshape(p.shape))
            at += k
