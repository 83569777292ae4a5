"""Adagrad, as ``torch.optim.Adagrad``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import full_like
from ..tensor import Tensor
from ._foreach import step_tensor
from .optimizer import Optimizer, _check, _no_graph_options

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """As ``torch.optim.Adagrad`` (dense gradients; state made at construction, as torch).
    ``foreach`` and ``fused`` are accepted and ignored; ``differentiable`` is not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(lr_decay >= 0.0, "lr_decay value", lr_decay)
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check(initial_accumulator_value >= 0.0, "initial_accumulator_value value", initial_accumulator_value)
        _check(eps >= 0.0, "epsilon value", eps)
        _no_graph_options(differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = step_tensor(0.0)
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        assert step is not None
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        s = state.get("sum")
        if s is None:  # a parameter added by add_param_group after construction
            s = full_like(p, group["initial_accumulator_value"])
        s = s + g * g
        std = s.sqrt() + group["eps"]
        return p + (g * -clr) / std, {"sum": s}
