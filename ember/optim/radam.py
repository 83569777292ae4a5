"""RAdam (rectified Adam), as ``torch.optim.RAdam``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..tensor import Tensor
from .optimizer import Optimizer, _adam_prologue, _check, _lerp, _no_graph_options

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """As ``torch.optim.RAdam``: Adam's moments; while the variance's length of the
    approximated SMA ``rho_t`` is at most 5 the step is the bias-corrected momentum alone
    (``param -= lr * exp_avg / (1 - beta1**t)``), after it that step times the adaptive lr
    ``sqrt(1 - beta2**t) / (sqrt(exp_avg_sq) + eps)`` and the rectification term.
    ``decoupled_weight_decay=True`` decays as AdamW. ``foreach`` is accepted and ignored;
    ``capturable`` and ``differentiable`` are not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        assert step is not None
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        p, g, exp_avg, exp_avg_sq = _adam_prologue(group, p, g, state)
        exp_avg = _lerp(exp_avg, g, 1 - beta1)
        exp_avg_sq = exp_avg_sq * beta2 + (g * (1 - beta2)) * g
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive_lr = math.sqrt(bias_correction2) / (exp_avg_sq.sqrt() + eps)
            new_p = p - corrected * lr * adaptive_lr * rect
        else:
            new_p = p - corrected * lr
        return new_p, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
