"""Lion (EvoLved Sign Momentum; Chen et al. 2023, "Symbolic Discovery of Optimization
Algorithms", arXiv:2302.06675). Not part of torch.optim.

The paper's update, per parameter with gradient ``g`` and momentum ``m``::

    c = beta1 * m + (1 - beta1) * g          # interpolation, used only for the sign
    p = p * (1 - lr * weight_decay)          # decoupled weight decay
    p = p - lr * sign(c)
    m = beta2 * m + (1 - beta2) * g

The state is ``exp_avg`` (``m``); there is no step counter (no bias correction). The paper
recommends a learning rate 3-10x smaller than AdamW's and a weight decay 3-10x larger.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, _check

__all__ = ["Lion"]


class Lion(Optimizer):
    """Lion (not in torch): ``lr=1e-4``, ``betas=(0.9, 0.99)``, ``weight_decay=0.0``
    (decoupled, as AdamW), ``maximize``; the paper's update (see the module docstring)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0, *, maximize: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(0.0 <= betas[0] <= 1.0, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] <= 1.0, "beta parameter at index 1", betas[1])
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    _counted = False

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        lr = group["lr"]
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        if group["maximize"]:
            g = -g
        m = state.get("exp_avg")
        if m is None:
            m = zeros_like(p)
        if wd != 0:
            p = p * (1 - lr * wd)
        update = (m * beta1 + g * (1 - beta1)).sign()
        return p + update * (-lr), {"exp_avg": m * beta2 + g * (1 - beta2)}
