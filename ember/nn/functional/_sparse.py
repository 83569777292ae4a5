"""``embedding``, ``embedding_bag`` and ``one_hot`` (as torch.nn.functional)."""

from __future__ import annotations

import numpy as np

from ... import dtype as dt
from ...backends.autodiff.mode import no_grad
from ...creation import arange, from_numpy
from ...functional import where
from ...tensor import Tensor

__all__ = ["embedding", "embedding_bag", "one_hot"]


def _renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """torch's embedding_renorm_: rows referenced by ``input`` whose ``norm_type``-norm
    exceeds ``max_norm`` are scaled (in place, without gradient) to norm ``max_norm``."""
    rows = np.unique(np.asarray(input.numpy()).reshape(-1))
    if rows.size == 0:
        return
    with no_grad():
        idx = from_numpy(rows.astype(np.int64), device=weight.device)
        sel = weight.detach().index_select(0, idx)
        norm = sel.norm(norm_type, dim=1, keepdim=True)
        scale = where(norm > max_norm, max_norm / (norm + 1e-7), 1.0)
        weight[idx] = sel * scale


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """As torch.nn.functional.embedding: rows of ``weight`` at the integer ``input``.

    ``padding_idx`` rows get no gradient; ``max_norm`` renormalises the looked-up rows of
    ``weight`` in place first (reads the indices on the host); ``scale_grad_by_freq`` divides
    each row's gradient by its count in ``input``. ``sparse=True`` is accepted and gives dense
    gradients (ember has no sparse tensors)."""
    if input._dt.category != dt.INT:
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input._dt} instead")
    n = weight.shape[0]
    if padding_idx is not None:
        if padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx += n
        elif padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    out = weight.index_select(0, input.reshape(-1)).reshape(input.shape + (weight.shape[1],))
    if scale_grad_by_freq:
        idx = np.asarray(input.numpy()).reshape(-1)
        _, inv, counts = np.unique(idx, return_inverse=True, return_counts=True)
        s = from_numpy((1.0 / counts[inv]).astype(weight._dt.np if weight._dt is not dt.bfloat16 else np.float32)
                       .reshape(input.shape + (1,)), device=weight.device).to(weight._dt)
        if padding_idx is not None:
            s = where((input == padding_idx).unsqueeze(-1), 0.0, s)
        # same values (out - detached out is exactly 0), gradient scaled by s
        d = out.detach()
        return d + (out - d) * s
    if padding_idx is not None:
        out = where((input == padding_idx).unsqueeze(-1), out.detach(), out)
    return out


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """As torch.nn.functional.embedding_bag: ``sum``/``mean``/``max`` of the embeddings of
    each bag (rows of a 2-D ``input``, or ``offsets`` into a 1-D one). Bags are gathered on
    the host from the offsets; ``padding_idx`` entries are left out of their bag."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}')")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None")
        b, length = input.shape
        flat = input.reshape(-1)
        starts = list(range(0, b * length, length))
        ends = [s + length for s in starts]
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        flat = input
        offs = [int(o) for o in np.asarray(offsets.numpy()).reshape(-1)]
        if include_last_offset:
            starts, ends = offs[:-1], offs[1:]
        else:
            starts, ends = offs, offs[1:] + [input.shape[0]]
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if max_norm is not None:
        _renorm_(weight, flat, max_norm, norm_type)
    n = weight.shape[0]
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    ids = np.asarray(flat.numpy()).reshape(-1)
    emb = embedding(flat, weight, None, None, norm_type, scale_grad_by_freq)
    if psw is not None:
        emb = emb * psw.unsqueeze(-1)
    from ...functional import stack

    bags = []
    for s, e in zip(starts, ends):
        keep = [i for i in range(s, e) if padding_idx is None or ids[i] != padding_idx]
        if not keep:
            bags.append(weight.detach()[0] * 0.0)
            continue
        rows = emb.index_select(0, from_numpy(np.asarray(keep, np.int64), device=weight.device))
        if mode == "sum":
            bags.append(rows.sum(0))
        elif mode == "mean":
            bags.append(rows.mean(0))
        else:
            bags.append(rows.amax(0))
    if not bags:
        return weight.detach()[:0] * 0.0
    return stack(bags, 0)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """As torch.nn.functional.one_hot: int64 ``(*, num_classes)``; ``num_classes=-1`` is
    ``max + 1`` (reads the values)."""
    if tensor._dt.category != dt.INT:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        a = np.asarray(tensor.numpy())
        num_classes = int(a.max()) + 1 if a.size else 0
    if tensor.numel():
        # checked when readable without draining a lazy stream (as indexing does)
        a = np.asarray(tensor.numpy()) if tensor._bk.eager or tensor._bk.is_ready(tensor._p) else None
        if a is not None and a.size and (a.min() < 0 or a.max() >= num_classes):
            raise RuntimeError("Class values must be smaller than num_classes." if a.min() >= 0
                               else "Class values must be non-negative.")
    classes = arange(num_classes, dtype=dt.int64, device=tensor.device)
    return (tensor.to(dt.int64).unsqueeze(-1) == classes).to(dt.int64)
