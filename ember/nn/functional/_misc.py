"""Distance and normalisation helpers (as torch.nn.functional): ``normalize``,
``cosine_similarity``, ``pairwise_distance``; and ``gumbel_softmax``."""

from __future__ import annotations

import math

from ...functional import broadcast_tensors
from ...tensor import Tensor

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "gumbel_softmax"]


def _norm_at_least(x: Tensor, p: float, dim: int, eps: float, keepdim: bool = True) -> Tensor:
    """``max(||x||_p, eps)`` along ``dim``. For p = 2 the clamp is applied to the sum of
    squares (``sqrt(max(s, eps**2))``, the same value) so a zero vector gets a zero gradient
    instead of NaN (sqrt's derivative at 0). Clamping the root's argument is the same value
    only for ``p > 0`` (``s ** (1/p)`` increasing); for ``p <= 0`` (0: the count of non-zeros,
    negative p, -inf: the smallest magnitude) the norm is clamped itself, as torch."""
    if p <= 0:
        n = x.norm(p, dim, keepdim)
        return n.clamp(min=eps) if eps > 0 else n
    if p == 2:
        return (x * x).sum(dim, keepdim=keepdim).clamp(min=eps * eps).sqrt()
    if p == 1:
        return x.abs().sum(dim, keepdim=keepdim).clamp(min=eps)
    if p == math.inf:
        return x.abs().amax(dim, keepdim=keepdim).clamp(min=eps)
    return (x.abs() ** p).sum(dim, keepdim=keepdim).clamp(min=eps ** p) ** (1.0 / p)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.normalize: ``x / max(||x||_p, eps)`` along ``dim``
    (``out=`` is not supported: tensors are values)."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not supported (tensors are values); use the result")
    return input / _norm_at_least(input, p, dim, eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """As torch.nn.functional.cosine_similarity:
    ``sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim`` (broadcasting)."""
    a, b = broadcast_tensors(x1, x2)
    return ((a / _norm_at_least(a, 2, dim, eps)) * (b / _norm_at_least(b, 2, dim, eps))).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """As torch.nn.functional.pairwise_distance: ``||x1 - x2 + eps||_p`` over the last dim."""
    d = x1 - x2 + eps
    if d.ndim == 0:
        d = d.reshape(1)
    return _norm_at_least(d, p, -1, 0.0, keepdim)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """As torch.nn.functional.gumbel_softmax: ``softmax((logits + g) / tau)`` with Gumbel(0, 1)
    noise ``g = -log(E)``, ``E`` standard exponential draws from ember's Philox stream (other
    values than torch's for one seed). ``hard=True`` returns the one-hot of the argmax in the
    forward pass with the soft sample's gradient (straight-through). ``eps`` is unused, as in torch."""
    gumbels = -logits.detach().new_empty(logits.shape).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = y_soft.detach().new_zeros(y_soft.shape).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
