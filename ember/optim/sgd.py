"""Stochastic gradient descent (momentum, dampening, Nesterov, weight decay), as ``torch.optim.SGD``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..tensor import Tensor
from .optimizer import Optimizer, _check, _no_graph_options

__all__ = ["SGD"]


class SGD(Optimizer):
    """As ``torch.optim.SGD`` (the single-tensor formula and op order). ``foreach`` and
    ``fused`` are accepted and ignored; ``differentiable=True`` is not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(momentum >= 0.0, "momentum value", momentum)
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _no_graph_options(differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    _counted = False

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        lr = group["lr"]
        momentum = group["momentum"]
        wd = group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd != 0:
            g = g + p * wd
        out: dict[str, Tensor] = {}
        if momentum != 0:
            buf = state.get("momentum_buffer")
            # torch's first buffer is a clone of the gradient (the bucket stores a new object)
            buf = g if buf is None else buf * momentum + g * (1 - group["dampening"])
            out["momentum_buffer"] = buf
            g = g + buf * momentum if group["nesterov"] else buf
        return p + g * (-lr), out
