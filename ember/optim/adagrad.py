"""Adagrad, as ``torch.optim.Adagrad``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import full_like
from ..tensor import Tensor
from .optimizer import Optimizer, _bump, _check, _no_graph_options, _rebind, _step_tensor

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
                state["step"] = _step_tensor(0.0)
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        lr_decay = group["lr_decay"]
        wd = group["weight_decay"]
        eps = group["eps"]
        maximize = group["maximize"]
        for p, grad in self._ordered(group):
            state = self.state[p]
            if len(state) == 0:  # a parameter added by add_param_group after construction
                state["step"] = _step_tensor(0.0)
                state["sum"] = full_like(p, group["initial_accumulator_value"])
            step = _bump(state["step"])
            g: Tensor = -grad if maximize else grad
            if wd != 0:
                g = g + p * wd
            clr = lr / (1 + (step - 1) * lr_decay)
            s = state["sum"]
            _rebind(s, s + g * g)
            std = s.sqrt() + eps
            _rebind(p, p + (g * -clr) / std)
