"""Adam (and, with ``decoupled_weight_decay=True``, AdamW), as ``torch.optim.Adam``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _adam_prologue, _check, _lerp, _no_graph_options

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

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        assert step is not None
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        p, g, exp_avg, exp_avg_sq = _adam_prologue(group, p, g, state)
        exp_avg = _lerp(exp_avg, g, 1 - beta1)
        exp_avg_sq = exp_avg_sq * beta2 + (g * (1 - beta2)) * g
        out = {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)
        if group["amsgrad"]:
            mx = state.get("max_exp_avg_sq")
            mx = out["max_exp_avg_sq"] = (zeros_like(p) if mx is None else mx).maximum(exp_avg_sq)
            denom = mx.sqrt() / bias_correction2_sqrt + eps
        else:
            denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + eps
        return p + (exp_avg * -step_size) / denom, out
