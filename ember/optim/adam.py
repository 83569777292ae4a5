"""Adam (and, with ``decoupled_weight_decay=True``, AdamW), as ``torch.optim.Adam``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _bump, _check, _lerp, _no_graph_options, _rebind, _step_tensor

__all__ = ["Adam"]


class Adam(Optimizer):
    """As ``torch.optim.Adam``: torch's single-tensor formula and op order
    (``bias_correction1 = 1 - beta1**step``, ``step_size = lr / bias_correction1``,
    ``denom = exp_avg_sq.sqrt() / sqrt(bias_correction2) + eps``,
    ``param += exp_avg * -step_size / denom``). ``foreach`` and ``fused`` are accepted and
    ignored; ``capturable`` and ``differentiable`` are not supported; betas are floats."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        wd = group["weight_decay"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        pairs = self._ordered(group)
        for p, _ in pairs:  # lazy state first: the chains below stay consecutive in the queue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _step_tensor(0.0)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
        for p, grad in pairs:
            state = self.state[p]
            step = _bump(state["step"])
            g: Tensor = -grad if maximize else grad
            if wd != 0:
                if decoupled:
                    _rebind(p, p * (1 - lr * wd))
                else:
                    g = g + p * wd
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            _rebind(exp_avg, _lerp(exp_avg, g, 1 - beta1))
            _rebind(exp_avg_sq, exp_avg_sq * beta2 + (g * (1 - beta2)) * g)
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = math.sqrt(bias_correction2)
            if amsgrad:
                mx = state["max_exp_avg_sq"]
                _rebind(mx, mx.maximum(exp_avg_sq))
                denom = mx.sqrt() / bias_correction2_sqrt + eps
            else:
                denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
            _rebind(p, p + (exp_avg * -step_size) / denom)
