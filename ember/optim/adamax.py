"""Adamax (Adam with the infinity norm), as ``torch.optim.Adamax``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _bump, _check, _lerp, _no_graph_options, _rebind, _step_tensor

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """As ``torch.optim.Adamax`` (single-tensor formula and op order). ``foreach`` is accepted
    and ignored; ``capturable`` and ``differentiable`` are not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        wd = group["weight_decay"]
        maximize = group["maximize"]
        pairs = self._ordered(group)
        for p, _ in pairs:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _step_tensor(0.0)
                state["exp_avg"] = zeros_like(p)
                state["exp_inf"] = zeros_like(p)
        for p, grad in pairs:
            state = self.state[p]
            step = _bump(state["step"])
            g: Tensor = -grad if maximize else grad
            if wd != 0:
                g = g + p * wd
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            _rebind(exp_avg, _lerp(exp_avg, g, 1 - beta1))
            _rebind(exp_inf, (exp_inf * beta2).maximum(g.abs() + eps))
            clr = lr / (1 - beta1**step)
            _rebind(p, p + (exp_avg * -clr) / exp_inf)
