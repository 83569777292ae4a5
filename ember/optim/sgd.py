"""Stochastic gradient descent (momentum, dampening, Nesterov, weight decay), as ``torch.optim.SGD``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..tensor import Tensor
from .optimizer import Optimizer, _check, _no_graph_options, _rebind

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

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        momentum = group["momentum"]
        dampening = group["dampening"]
        wd = group["weight_decay"]
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        for p, grad in self._ordered(group):
            state = self.state[p]
            g: Tensor = -grad if maximize else grad
            if wd != 0:
                g = g + p * wd
            if momentum != 0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    # torch: grad.detach().clone(); a new object around the (immutable) value
                    buf = state["momentum_buffer"] = g.detach()
                else:
                    _rebind(buf, buf * momentum + g * (1 - dampening))
                g = g + buf * momentum if nesterov else buf
            _rebind(p, p + g * (-lr))
