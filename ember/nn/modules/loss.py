"""Loss modules (as torch.nn): each holds its options and calls the functional form.
Weighted losses register ``weight`` (and ``pos_weight``) as buffers, as torch does, so
they appear in ``state_dict`` and move with ``.to()``."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from ..functional._loss import _legacy_reduction
from .module import Module

__all__ = [
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
    "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "SoftMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "HingeEmbeddingLoss", "TripletMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
]


class _Loss(Module):
    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = _legacy_reduction(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """As torch.nn.CrossEntropyLoss (see ``F.cross_entropy``)."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.CrossEntropyLoss.forward."""
        return F.cross_entropy(input, target, weight=self._buffers["weight"], ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """As torch.nn.NLLLoss."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.NLLLoss.forward."""
        return F.nll_loss(input, target, weight=self._buffers["weight"], ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """As torch.nn.MSELoss."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.MSELoss.forward."""
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """As torch.nn.L1Loss."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.L1Loss.forward."""
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """As torch.nn.SmoothL1Loss(beta=1.0)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.SmoothL1Loss.forward."""
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """As torch.nn.HuberLoss(delta=1.0)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.HuberLoss.forward."""
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """As torch.nn.BCELoss (logs clamped at -100)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.BCELoss.forward."""
        return F.binary_cross_entropy(input, target, weight=self._buffers["weight"], reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """As torch.nn.BCEWithLogitsLoss(weight, pos_weight) in the stable log-sigmoid form."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.BCEWithLogitsLoss.forward."""
        b = self._buffers
        return F.binary_cross_entropy_with_logits(input, target, b["weight"], reduction=self.reduction,
                                                  pos_weight=b["pos_weight"])


class KLDivLoss(_Loss):
    """As torch.nn.KLDivLoss(reduction='mean', log_target=False)."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.KLDivLoss.forward."""
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _MarginLoss(_Loss):
    def __init__(self, margin: float = 0.0, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_MarginLoss):
    """As torch.nn.CosineEmbeddingLoss(margin=0)."""

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.CosineEmbeddingLoss.forward."""
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """As torch.nn.MarginRankingLoss(margin=0)."""

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.MarginRankingLoss.forward."""
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """As torch.nn.HingeEmbeddingLoss(margin=1.0)."""

    def __init__(self, margin: float = 1.0, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.HingeEmbeddingLoss.forward."""
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """As torch.nn.SoftMarginLoss."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.SoftMarginLoss.forward."""
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """As torch.nn.PoissonNLLLoss(log_input=True, full=False, eps=1e-8)."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average: bool | None = None,
                 eps: float = 1e-8, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.PoissonNLLLoss.forward."""
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """As torch.nn.GaussianNLLLoss(full=False, eps=1e-6)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Any) -> Tensor:
        """As torch.nn.GaussianNLLLoss.forward."""
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """As torch.nn.TripletMarginLoss(margin=1.0, p=2, eps=1e-6, swap=False)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """As torch.nn.TripletMarginLoss.forward."""
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """As torch.nn.MultiLabelSoftMarginLoss."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.MultiLabelSoftMarginLoss.forward."""
        return F.multilabel_soft_margin_loss(input, target, weight=self._buffers["weight"], reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """As torch.nn.MultiMarginLoss(p=1, margin=1.0)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        """As torch.nn.MultiMarginLoss.forward."""
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self._buffers["weight"],
                                   reduction=self.reduction)
