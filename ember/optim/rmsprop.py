"""RMSprop (momentum, centered), as ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _bump, _check, _lerp, _no_graph_options, _rebind, _step_tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """As ``torch.optim.RMSprop`` (single-tensor formula and op order). ``foreach`` is accepted
    and ignored; ``capturable`` and ``differentiable`` are not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(momentum >= 0.0, "momentum value", momentum)
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check(alpha >= 0.0, "alpha value", alpha)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        alpha = group["alpha"]
        eps = group["eps"]
        wd = group["weight_decay"]
        momentum = group["momentum"]
        centered = group["centered"]
        maximize = group["maximize"]
        pairs = self._ordered(group)
        for p, _ in pairs:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _step_tensor(0.0)
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
        for p, grad in pairs:
            state = self.state[p]
            _bump(state["step"])
            g: Tensor = -grad if maximize else grad
            if wd != 0:
                g = g + p * wd
            sq = state["square_avg"]
            _rebind(sq, sq * alpha + (g * (1 - alpha)) * g)
            if centered:
                ga = state["grad_avg"]
                _rebind(ga, _lerp(ga, g, 1 - alpha))
                avg = (sq + (ga * -1.0) * ga).sqrt()
            else:
                avg = sq.sqrt()
            avg = avg + eps
            if momentum > 0:
                buf = state["momentum_buffer"]
                _rebind(buf, buf * momentum + g / avg)
                _rebind(p, p + buf * (-lr))
            else:
                _rebind(p, p + (g * (-lr)) / avg)
