"""Adamax (Adam with the infinity norm), as ``torch.optim.Adamax``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _check, _lerp, _no_graph_options

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

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        assert step is not None
        beta1, beta2 = group["betas"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        exp_avg, exp_inf = state.get("exp_avg"), state.get("exp_inf")
        exp_avg = _lerp(zeros_like(p) if exp_avg is None else exp_avg, g, 1 - beta1)
        exp_inf = ((zeros_like(p) if exp_inf is None else exp_inf) * beta2).maximum(g.abs() + group["eps"])
        clr = group["lr"] / (1 - beta1**step)
        return p + (exp_avg * -clr) / exp_inf, {"exp_avg": exp_avg, "exp_inf": exp_inf}
