"""Dropout layers (as torch.nn). The mask comes from ember's Philox stream, so one seed gives
the same mask on every device; eval mode is the identity; kept elements scale by
``1 / (1 - p)``. ``inplace`` is a no-op (tensors are values)."""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        """torch's Dropout text inside the repr parentheses."""
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """As torch.nn.Dropout(p=0.5)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Dropout.forward."""
        return F.dropout(input, self.p, self.training)


class Dropout1d(_DropoutNd):
    """As torch.nn.Dropout1d: zeroes whole channels of ``(N, C, L)``."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Dropout1d.forward."""
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    """As torch.nn.Dropout2d: zeroes whole channels of ``(N, C, H, W)``."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Dropout2d.forward."""
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    """As torch.nn.Dropout3d: zeroes whole channels of ``(N, C, D, H, W)``."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.Dropout3d.forward."""
        return F.dropout3d(input, self.p, self.training)


class AlphaDropout(_DropoutNd):
    """As torch.nn.AlphaDropout (keeps SELU's mean and variance)."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.AlphaDropout.forward."""
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """As torch.nn.FeatureAlphaDropout: alpha dropout of whole channels."""

    def forward(self, input: Tensor) -> Tensor:
        """As torch.nn.FeatureAlphaDropout.forward."""
        return F.feature_alpha_dropout(input, self.p, self.training)
