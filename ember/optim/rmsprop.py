"""RMSprop (momentum, centered), as ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _check, _lerp, _no_graph_options

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

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        lr = group["lr"]
        alpha = group["alpha"]
        momentum = group["momentum"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + p * group["weight_decay"]
        sq = state.get("square_avg")
        sq = (zeros_like(p) if sq is None else sq) * alpha + (g * (1 - alpha)) * g
        out = {"square_avg": sq}
        if momentum > 0:
            out["momentum_buffer"] = state.get("momentum_buffer")  # keeps torch's key order
        if group["centered"]:
            ga = state.get("grad_avg")
            ga = out["grad_avg"] = _lerp(zeros_like(p) if ga is None else ga, g, 1 - alpha)
            avg = (sq + (ga * -1.0) * ga).sqrt()
        else:
            avg = sq.sqrt()
        avg = avg + group["eps"]
        if momentum > 0:
            buf = out["momentum_buffer"]
            buf = out["momentum_buffer"] = (zeros_like(p) if buf is None else buf) * momentum + g / avg
            return p + buf * (-lr), out
        return p + (g * (-lr)) / avg, out
