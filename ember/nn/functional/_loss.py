"""Loss functions (as torch.nn.functional), in numerically stable forms: cross entropy
through ``log_softmax``, the logits forms of binary cross entropy through log-sigmoid
(``max(-x, 0) + log1p(exp(-|x|))``), ``binary_cross_entropy`` with its logs clamped at -100
like torch. ``reduction`` is ``'none' | 'mean' | 'sum'``; the legacy ``size_average`` and
``reduce`` arguments map onto it as in torch (with its deprecation warning)."""

from __future__ import annotations

import math
import warnings

from ... import dtype as dt
from ...functional import broadcast_tensors, where
from ...tensor import Tensor, _autocast
from ._activation import logsigmoid
from ._misc import pairwise_distance

__all__ = [
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss", "margin_ranking_loss",
    "soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss", "triplet_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss",
]


def _legacy_reduction(size_average: bool | None, reduce: bool | None) -> str:
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='...' instead.",
                  stacklevel=3)
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    if sa and rd:
        return "mean"
    return "sum" if rd else "none"


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _weighted(loss: Tensor, weight: Tensor | None, reduction: str) -> Tensor:
    """torch's weighted elementwise losses (mse/l1/huber): mean is ``sum(w * l) / sum(w)``."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != loss.shape:
        raise ValueError("Weights and input must have the same size.")
    wl = loss * weight
    if reduction == "mean":
        return wl.sum() / weight.sum()
    return wl.sum() if reduction == "sum" else wl


def _check_same_size(input: Tensor, target: Tensor, name: str) -> tuple[Tensor, Tensor]:
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=3)
    a, b = broadcast_tensors(input, target)
    return a, b


# --------------------------------------------------------------------------- classification
def _nll(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str,
         label_smoothing: float = 0.0) -> Tensor:
    """Negative log likelihood of class indices over log-probabilities ``logp`` of shape
    ``(N, C, *)`` (or ``(C,)``), with torch's weighting, ignore_index and smoothing rules."""
    unbatched = logp.ndim == 1
    if unbatched:
        if target.ndim != 0:
            raise RuntimeError(f"Expected a 0-D target for a 1-D input, got shape {target.shape}")
        logp = logp.unsqueeze(0)
        target = target.unsqueeze(0)
    if logp.ndim < 2:
        raise ValueError(f"Expected 2 or more dimensions (got {logp.ndim})")
    n, c = logp.shape[0], logp.shape[1]
    if target.shape != (n,) + logp.shape[2:]:
        if target.shape[:1] != (n,):
            raise ValueError(f"Expected input batch_size ({n}) to match target batch_size "
                             f"({target.shape[0] if target.ndim else 0}).")
        raise RuntimeError(f"Expected target size {list((n,) + logp.shape[2:])}, got {list(target.shape)}")
    if target._dt.category != dt.INT:
        raise RuntimeError(f"expected scalar type Long but found {target._dt}")
    target = target.to(dt.int64) if target._dt is not dt.int64 else target
    if weight is None and not _may_hold(target, ignore_index):
        # fast path (the common case): nothing ignored, no weights -- no masks, the mean is a mean
        # the (N, 1, *) gather reduces as is: no squeeze (one op less) unless reduction='none'
        picked = logp.gather(1, target.unsqueeze(1))
        if reduction == "mean":
            out = -picked.mean()
        elif reduction == "sum":
            out = -picked.sum()
        else:
            picked = picked.squeeze(1)
            out = -(picked.squeeze(0) if unbatched else picked)
        if label_smoothing > 0.0:
            smooth = logp.sum(1)
            if reduction == "mean":
                sm = -smooth.mean()
            elif reduction == "sum":
                sm = -smooth.sum()
            else:
                sm = -(smooth.squeeze(0) if unbatched else smooth)
            out = out * (1.0 - label_smoothing) + sm * (label_smoothing / c)
        return out
    valid = target != ignore_index
    safe = where(valid, target, 0)  # an ignored target may be out of range (-100)
    picked = logp.gather(1, safe.unsqueeze(1)).squeeze(1)
    if weight is not None:
        if weight.shape != (c,):
            raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no classes but got "
                               f"weight tensor of shape: {list(weight.shape)}")
        w = weight.index_select(0, safe.reshape(-1)).reshape(safe.shape).to(logp._dt)
        w = where(valid, w, 0.0)
    else:
        w = valid.to(logp._dt)
    loss = -(picked * w)
    if reduction == "mean":
        denom = w.sum()
        out = loss.sum() / denom
    elif reduction == "sum":
        out = loss.sum()
    else:
        out = loss.squeeze(0) if unbatched else loss
    if label_smoothing > 0.0:
        if weight is not None:
            ws = weight.to(logp._dt).reshape((1, c) + (1,) * (logp.ndim - 2))
            smooth = -(logp * ws).sum(1)
        else:
            smooth = -logp.sum(1)
        smooth = where(valid, smooth, 0.0)
        if reduction == "mean":
            sm = smooth.sum() / denom
        elif reduction == "sum":
            sm = smooth.sum()
        else:
            sm = smooth.squeeze(0) if unbatched else smooth
        out = out * (1.0 - label_smoothing) + sm * (label_smoothing / c)
    return out


def _may_hold(target: Tensor, value: int) -> bool:
    """Whether ``target`` may contain ``value``: read when it is readable without draining a
    lazy stream and without waiting for a GPU (targets are usually uploaded host data), else
    assumed (the masked path: a few more fused elementwise ops, no read). A read on a GPU device
    would wait for every kernel queued before it, the previous step's included, once per loss."""
    bk = target._bk
    if not (bk.eager or (bk.is_ready(target._p) and target.is_cpu)):
        return True
    a = target.numpy()
    if a.size == 0:
        return False
    # class indices are >= 0: a negative ignore_index (torch's -100) only needs the minimum
    return bool(a.min() <= value) if value < 0 else bool((a == value).any())


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: bool | None = None,
             ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.nll_loss: ``-input[n, target[n]]`` (weighted), over ``(N, C)``,
    ``(N, C, d1, ...)`` or ``(C,)``; the weighted mean divides by the sum of the weights of the
    non-ignored targets."""
    if _autocast.active:
        input, weight = _autocast.fp32(input, weight)
    return _nll(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: bool | None = None,
                  ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """As torch.nn.functional.cross_entropy: ``log_softmax`` over the class dim (1, or 0 for a
    1-D input) then the NLL of integer class targets (``weight``, ``ignore_index``,
    ``label_smoothing`` with torch's formulas) or, for a floating point target of the input's
    shape, ``-sum(target * log_softmax)`` (class probabilities; the mean divides by the number
    of samples)."""
    if _autocast.active:
        input, target, weight = _autocast.fp32(input, target, weight)
    red = _reduction(size_average, reduce, reduction)
    if (weight is None and label_smoothing == 0.0 and red != "none" and input.ndim == 2 and target.ndim == 1
            and target._dt is dt.int64 and target.shape[0] == input.shape[0] and not _may_hold(target, ignore_index)):
        # the common case, as short as the hand-written form: -mean(log_softmax(x)[n, t[n]])
        picked = input.log_softmax(1).gather(1, target.unsqueeze(1))
        return -picked.mean() if red == "mean" else -picked.sum()
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = input.log_softmax(class_dim)
    if target._dt.is_floating_point:
        if target.shape != input.shape:
            raise RuntimeError(f"Expected target size {list(input.shape)}, got {list(target.shape)}")
        c = input.shape[class_dim]
        t = target * (1.0 - label_smoothing) + label_smoothing / c if label_smoothing > 0 else target
        prod = logp * t
        if weight is not None:
            prod = prod * weight.reshape((c,) + (1,) * (input.ndim - class_dim - 1))
        if red == "mean":
            return -prod.sum() / (input.numel() // c)
        if red == "sum":
            return -prod.sum()
        return -prod.sum(class_dim)
    return _nll(logp, target, weight, ignore_index, red, label_smoothing)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.binary_cross_entropy over probabilities: each log clamped at
    -100 like torch (so a 0 or 1 input gives a finite loss)."""
    red = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    loss = -(target * input.log().clamp(min=-100.0) + (1.0 - target) * (1.0 - input).log().clamp(min=-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.binary_cross_entropy_with_logits:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x)`` in the stable form
    ``softplus(-x) = max(-x, 0) + log1p(exp(-|x|))``, times ``weight``."""
    if _autocast.active:
        input, target, weight, pos_weight = _autocast.fp32(input, target, weight, pos_weight)
    red = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    sp = (-input).clamp(min=0.0) + (-input.abs()).exp().log1p()  # softplus(-x) = -logsigmoid(x)
    if pos_weight is not None:
        loss = (1.0 - target) * input + (target * (pos_weight - 1.0) + 1.0) * sp
    else:
        loss = (1.0 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """As torch.nn.functional.kl_div: ``target * (log(target) - input)`` (0 where target is 0),
    or ``exp(target) * (target - input)`` with ``log_target``; ``reduction='batchmean'``
    divides the sum by the batch size."""
    if _autocast.active:
        input, target = _autocast.fp32(input, target)
    if size_average is not None or reduce is not None:
        red = _legacy_reduction(size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        red = reduction
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # xlogy(t, t): log of 1 where t <= 0, so the unused branch has a finite gradient
        loss = target * where(target > 0, target, 1.0).log() - target * input
    if red == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, red)


# --------------------------------------------------------------------------- regression
def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.mse_loss (``weight``: the weighted mean divides by its sum)."""
    if _autocast.active:
        input, target = _autocast.fp32(input, target)
    red = _reduction(size_average, reduce, reduction)
    a, b = _check_same_size(input, target, "mse_loss")
    d = a - b
    return _weighted(d * d, weight, red)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.l1_loss."""
    if _autocast.active:
        input, target = _autocast.fp32(input, target)
    red = _reduction(size_average, reduce, reduction)
    a, b = _check_same_size(input, target, "l1_loss")
    return _weighted((a - b).abs(), weight, red)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """As torch.nn.functional.smooth_l1_loss: ``0.5 d**2 / beta`` below ``beta``, else
    ``d - 0.5 beta`` (``beta=0`` is l1)."""
    if _autocast.active:
        input, target = _autocast.fp32(input, target)
    red = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    a, b = _check_same_size(input, target, "smooth_l1_loss")
    d = (a - b).abs()
    if beta == 0.0:
        return _reduce(d, red)
    return _reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), red)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.huber_loss: ``0.5 d**2`` below ``delta``, else
    ``delta (d - 0.5 delta)``."""
    if _autocast.active:
        input, target = _autocast.fp32(input, target)
    red = _reduction(None, None, reduction)
    a, b = _check_same_size(input, target, "huber_loss")
    d = (a - b).abs()
    return _weighted(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), weight, red)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.poisson_nll_loss: ``exp(x) - t x`` (``log_input``) or
    ``x - t log(x + eps)``; ``full`` adds Stirling's term where ``t > 1``."""
    red = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        safe = where(target > 1, target, 2.0)
        stirling = safe * safe.log() - safe + (safe * (2 * math.pi)).log() * 0.5
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, red)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.gaussian_nll_loss: ``0.5 (log(var) + (x - t)**2 / var)``; ``var``
    is clamped at ``eps`` without affecting its gradient (torch clamps under no_grad)."""
    red = _reduction(None, None, reduction)
    if not isinstance(var, Tensor):
        var = input.detach() * 0.0 + float(var)
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if (var.detach() < 0).any().item():
        raise ValueError("var has negative entry/entries")
    v = var + (var.clamp(min=eps) - var).detach()
    d = input - target
    loss = ((v.log() + d * d / v) * 0.5)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, red)


# --------------------------------------------------------------------------- margins / embeddings
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.cosine_embedding_loss: ``1 - cos`` for target 1,
    ``max(0, cos - margin)`` for target -1 (torch's ``EPSILON = 1e-12`` in the norms)."""
    red = _reduction(size_average, reduce, reduction)
    dim = 1 if input1.ndim == 2 else 0
    prod = (input1 * input2).sum(dim)
    m1 = (input1 * input1).sum(dim) + 1e-12
    m2 = (input2 * input2).sum(dim) + 1e-12
    cos = prod / (m1 * m2).sqrt()
    loss = where(target == 1, 1.0 - cos, 0.0) + where(target == -1, (cos - margin).clamp(min=0.0), 0.0)
    return _reduce(loss, red)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.margin_ranking_loss: ``max(0, -y (x1 - x2) + margin)``."""
    red = _reduction(size_average, reduce, reduction)
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0.0), red)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average: bool | None = None,
                         reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.hinge_embedding_loss: ``x`` where ``y == 1``,
    ``max(0, margin - x)`` where ``y == -1``."""
    red = _reduction(size_average, reduce, reduction)
    loss = where(target != 1, (margin - input).clamp(min=0.0), 0.0) + where(target != -1, input, 0.0)
    return _reduce(loss, red)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.soft_margin_loss: ``log(1 + exp(-y x))`` (stable softplus)."""
    red = _reduction(size_average, reduce, reduction)
    z = -target * input
    return _reduce(z.clamp(min=0.0) + (-z.abs()).exp().log1p(), red)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.triplet_margin_loss: ``max(d(a, p) - d(a, n) + margin, 0)``."""
    red = _reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0.0), red)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.multilabel_soft_margin_loss: the mean over classes of
    ``-(y logsigmoid(x) + (1 - y) logsigmoid(-x))``, weighted per class."""
    red = _reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    return _reduce(loss, red)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average: bool | None = None, reduce: bool | None = None,
                      reduction: str = "mean") -> Tensor:
    """As torch.nn.functional.multi_margin_loss: ``sum_{j != y} max(0, margin - x_y + x_j)**p / C``
    (times ``weight[y]``)."""
    red = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)  # a 0-d input is one sample of one class
    t = (target if target.ndim == 1 else target.reshape(1)).to(dt.int64)
    c = x.shape[1]
    xy = x.gather(1, t.unsqueeze(1))
    z = (x - xy + margin).clamp(min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1)
    from ...creation import arange

    not_y = t.unsqueeze(1) != arange(c, device=x.device).unsqueeze(0)
    loss = where(not_y, z, 0.0).sum(1) / c
    if input.ndim < 2 and red == "none":
        loss = loss.reshape(target.shape)  # as torch: () for a 0-d target, (1,) for a (1,) one
    return _reduce(loss, red)

