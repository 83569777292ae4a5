"""Adadelta, as ``torch.optim.Adadelta``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _check, _no_graph_options

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """As ``torch.optim.Adadelta``: torch's single-tensor formula and op order
    (``square_avg = rho * square_avg + (1 - rho) * g * g``,
    ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``,
    ``acc_delta = rho * acc_delta + (1 - rho) * delta * delta``, ``param -= lr * delta``).
    ``foreach`` is accepted and ignored; ``capturable`` and ``differentiable`` are not supported."""

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(0.0 <= rho <= 1.0, "rho value", rho)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        rho, eps = group["rho"], group["eps"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        square_avg = state.get("square_avg")
        if square_avg is None:
            square_avg = zeros_like(p)
        acc_delta = state.get("acc_delta")
        if acc_delta is None:
            acc_delta = zeros_like(p)
        square_avg = square_avg * rho + (g * (1 - rho)) * g
        std = (square_avg + eps).sqrt()
        delta = (acc_delta + eps).sqrt() / std * g
        acc_delta = acc_delta * rho + (delta * (1 - rho)) * delta
        return p + delta * -group["lr"], {"square_avg": square_avg, "acc_delta": acc_delta}
