"""Distance modules (as ``torch.nn.PairwiseDistance`` and ``torch.nn.CosineSimilarity``): the
functional forms with their arguments kept as attributes."""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


class PairwiseDistance(Module):
    """As ``torch.nn.PairwiseDistance(p=2.0, eps=1e-6, keepdim=False)``: ``F.pairwise_distance``."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """``||x1 - x2 + eps||_p`` over the last dim."""
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """As ``torch.nn.CosineSimilarity(dim=1, eps=1e-8)``: ``F.cosine_similarity``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The cosine of the angle between ``x1`` and ``x2`` along ``dim``."""
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
