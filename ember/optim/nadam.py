"""NAdam (Adam with Nesterov momentum), as ``torch.optim.NAdam``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..tensor import Tensor
from .optimizer import Optimizer, _adam_prologue, _check, _lerp, _no_graph_options

__all__ = ["NAdam"]


def _mu(beta1: float, momentum_decay: float, step: float) -> float:
    """torch's momentum schedule ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))``."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


class NAdam(Optimizer):
    """As ``torch.optim.NAdam``: torch's single-tensor formula and op order, with the momentum
    schedule ``mu_t`` and its running product. The product is a function of the step count, so
    it is kept per group in Python (not as ``state["mu_product"]``, which torch's state dict
    has; a loaded state resumes it from ``step``). ``decoupled_weight_decay=True`` decays as
    AdamW. ``foreach`` is accepted and ignored; ``capturable`` and ``differentiable`` are not
    supported."""

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        _check(lr >= 0.0, "learning rate", lr)
        _check(eps >= 0.0, "epsilon value", eps)
        _check(0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check(0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check(momentum_decay >= 0.0, "momentum_decay value", momentum_decay)
        _no_graph_options(differentiable, capturable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)
        #: (beta1, momentum_decay) -> [prod_{i<=t} mu_i for t = 0, 1, ...]
        self._mu_products: dict[tuple[float, float], list[float]] = {}

    def _mu_product(self, beta1: float, momentum_decay: float, step: int) -> float:
        products = self._mu_products.setdefault((beta1, momentum_decay), [1.0])
        while len(products) <= step:
            products.append(products[-1] * _mu(beta1, momentum_decay, len(products)))
        return products[step]

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        assert step is not None
        lr, eps, md = group["lr"], group["eps"], group["momentum_decay"]
        beta1, beta2 = group["betas"]
        p, g, exp_avg, exp_avg_sq = _adam_prologue(group, p, g, state)
        bias_correction2 = 1 - beta2**step
        mu = _mu(beta1, md, step)
        mu_next = _mu(beta1, md, step + 1)
        mu_product = self._mu_product(beta1, md, int(step))
        mu_product_next = mu_product * mu_next
        exp_avg = _lerp(exp_avg, g, 1 - beta1)
        exp_avg_sq = exp_avg_sq * beta2 + (g * (1 - beta2)) * g
        denom = (exp_avg_sq / bias_correction2).sqrt() + eps
        p = p + (g * (-lr * (1.0 - mu) / (1.0 - mu_product))) / denom
        p = p + (exp_avg * (-lr * mu_next / (1.0 - mu_product_next))) / denom
        return p, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
