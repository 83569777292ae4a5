"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward`` (torch's
names, arguments and mask conventions), composed from matmul, softmax and elementwise ops.

Mask conventions (as torch, and they differ between the two functions):

* ``scaled_dot_product_attention``: a bool ``attn_mask`` marks the positions that TAKE PART
  (True = attend); a float mask is added to the scores; ``is_causal`` is the lower-triangular
  mask aligned at the top-left (query ``i`` sees keys ``0..i``). A query row with every key
  masked out yields zeros (torch's "safe softmax"), not NaN.
* ``multi_head_attention_forward`` (and ``nn.MultiheadAttention``): a bool ``attn_mask`` or
  ``key_padding_mask`` marks the positions that are NOT allowed (True = masked); float masks
  are added. Both become one additive float mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _shape as S
from ... import creation as EC
from ... import dtype as dt
from ... import functional as EF
from ...errors import ShapeError
from ...tensor import Tensor, _autocast
from ._dropout import dropout

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _causal(q_len: int, k_len: int, device: Any) -> Tensor:
    return EC.tensor(np.tril(np.ones((q_len, k_len), dtype=bool)), dtype=dt.bool_, device=device)


def _safe_softmax(scores: Tensor) -> Tensor:
    """softmax over the last dim whose all -inf rows give zeros (and no NaN in the gradient):
    such rows are replaced by zeros before the softmax and their result by zeros after it."""
    full = (scores == _NEG_INF).all(-1, keepdim=True)
    p = EF.where(full, 0.0, scores).softmax(-1)
    return EF.where(full, 0.0, p)


def _repeat_heads(t: Tensor, times: int) -> Tensor:
    """``t.repeat_interleave(times, dim=-3)`` (each key/value head serves ``times`` query heads)."""
    shape = t.shape
    lead, h = shape[:-3], shape[-3]
    x = t.unsqueeze(-3).expand(lead + (h, times) + shape[-2:])
    return x.reshape(lead + (h * times,) + shape[-2:])


def _fusable(query: Tensor, key: Tensor, value: Tensor) -> bool:
    """Whether the fused ``sdpa`` op takes this call: floating q, k, v of one dtype and non-empty
    sequences and rows."""
    d = query.dtype
    return (d.category == dt.FLOAT and key.dtype is d and value.dtype is d
            and min(query.ndim, key.ndim, value.ndim) >= 2
            and query.shape[-2] > 0 and key.shape[-2] > 0 and query.shape[-1] > 0 and value.shape[-1] > 0)


def _fused(query: Tensor, key: Tensor, value: Tensor, scale: float, is_causal: bool) -> Tensor:
    """The registry's fused ``sdpa`` (one node, flash-attention kernels on the Cube backend),
    q, k and v broadcast over their leading dims first (the op takes equal ones)."""
    lead = _broadcast_lead(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    q, k, v = (t if t.shape[:-2] == lead else t.expand(lead + t.shape[-2:]) for t in (query, key, value))
    return q._op("sdpa", k, v, scale, bool(is_causal))


def _broadcast_lead(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    out: tuple[int, ...] = ()
    for sh in shapes:
        out = S.broadcast(out, sh)
    return out


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """As ``torch.nn.functional.scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v``
    for ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)``; the dropout (``dropout_p``) is
    applied whenever ``dropout_p > 0``, as torch (pass 0 in eval).

    Without ``attn_mask`` and dropout, for q, k and v of one floating dtype, this is the
    registry's fused ``sdpa`` op (one autodiff node; on Cube devices flash-attention kernels
    that never hold the ``(..., L, S)`` scores, read q, k and v through their strides and return
    a result laid out as ``(..., L, H, Ev)``, so ``out.transpose(-3, -2)`` is contiguous; float64
    or a head dim over 128 runs the op's decomposition there). Mask tensors, dropout, and mixed
    dtypes (which torch refuses; here they promote) take the composition of matmul, softmax and
    matmul."""
    if _autocast.active:
        query, key, value, attn_mask = _autocast.lower(query, key, value, attn_mask)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError("scaled_dot_product_attention expects query, key and value of at least 2 dims")
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    e = query.shape[-1]
    if key.shape[-1] != e:
        raise ShapeError(f"scaled_dot_product_attention: query and key embedding sizes differ ({e} vs "
                         f"{key.shape[-1]})")
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: key and value sequence lengths differ ({key.shape[-2]} vs "
                         f"{value.shape[-2]})")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk or value.shape[-3] != hk:
            raise RuntimeError(f"scaled_dot_product_attention: the number of query heads ({hq}) must be a multiple "
                               f"of the number of key/value heads ({hk}, {value.shape[-3]})")
        key = _repeat_heads(key, hq // hk)
        value = _repeat_heads(value, hq // hk)
    s = 1.0 / math.sqrt(e) if scale is None else float(scale)
    if attn_mask is None and dropout_p == 0.0 and _fusable(query, key, value):
        return _fused(query, key, value, s, is_causal)
    return _composed(query, key, value, attn_mask, dropout_p, is_causal, s)


def _composed(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float,
              is_causal: bool, s: float) -> Tensor:
    """The attention as matmul, mask, softmax, dropout and matmul of validated arguments
    (``s`` the scale): every case the fused op does not take."""
    scores = (query * s).matmul(key.transpose(-2, -1))  # (..., L, S)
    q_len, k_len = scores.shape[-2:]
    if is_causal:
        scores = EF.where(_causal(q_len, k_len, query.device), scores, _NEG_INF)
        attn = scores.softmax(-1)  # a top-left causal row always keeps key 0
    elif attn_mask is not None:
        if attn_mask.dtype is dt.bool_:
            scores = EF.where(attn_mask, scores, _NEG_INF)
        else:
            scores = scores + attn_mask
        attn = _safe_softmax(scores)
    else:
        attn = scores.softmax(-1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return attn.matmul(value)


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    y = x.matmul(w.T)
    return y if b is None else y + b


def _float_mask(mask: Tensor | None, like: Tensor, what: str) -> Tensor | None:
    """torch's ``_canonical_mask``: a bool mask (True = masked) as an additive float mask."""
    if mask is None:
        return None
    if mask.dtype is dt.bool_:
        return EC.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill(mask, _NEG_INF)
    if mask.dtype.category != dt.FLOAT:
        raise TypeError(f"only bool and floating types of {what} are supported")
    return mask


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
        add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
        training: bool = True, key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None, static_v: Tensor | None = None,
        average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """As ``torch.nn.functional.multi_head_attention_forward``: sequence-first ``(L, N, E)`` inputs
    (or unbatched ``(L, E)``); returns ``(output, weights or None)``."""
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
        raise ShapeError(f"multi_head_attention_forward: expected 2-D or 3-D query, key and value, got "
                         f"{query.shape}, {key.shape}, {value.shape}")
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise ShapeError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    if embed_dim % num_heads:
        raise ShapeError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    head_dim = embed_dim // num_heads
    if key.shape[:2] != value.shape[:2]:
        raise ShapeError(f"key shape {key.shape} does not match value shape {value.shape}")

    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    key_padding_mask = _float_mask(key_padding_mask, query, "key_padding_mask")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint stands for the mask: the causal path of sdpa
    else:
        attn_mask = _float_mask(attn_mask, query, "attn_mask")
        if key_padding_mask is not None:
            is_causal = False

    # input projections
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise ValueError("use_separate_proj_weight is False but in_proj_weight is None")
        if query is key and key is value:  # self-attention: one packed matmul
            qkv = _linear(query, in_proj_weight, in_proj_bias)
            q, k, v = qkv.chunk(3, -1)
        else:
            ws = in_proj_weight.chunk(3, 0)
            bs = in_proj_bias.chunk(3, 0) if in_proj_bias is not None else (None, None, None)
            q = _linear(query, ws[0], bs[0])
            if key is value:
                kv = _linear(key, EF.cat([ws[1], ws[2]], 0), None if bs[1] is None else EF.cat([bs[1], bs[2]], 0))
                k, v = kv.chunk(2, -1)
            else:
                k = _linear(key, ws[1], bs[1])
                v = _linear(value, ws[2], bs[2])
    else:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or v_proj_weight "
                             "is None")
        bs = in_proj_bias.chunk(3, 0) if in_proj_bias is not None else (None, None, None)
        q = _linear(query, q_proj_weight, bs[0])
        k = _linear(key, k_proj_weight, bs[1])
        v = _linear(value, v_proj_weight, bs[2])

    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if attn_mask.shape != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if attn_mask.shape != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise RuntimeError("bias cannot be added to static key/value.")
        k = EF.cat([k, bias_k.expand(1, bsz, embed_dim)], 0)
        v = EF.cat([v, bias_v.expand(1, bsz, embed_dim)], 0)
        if attn_mask is not None:
            attn_mask = EF.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = EF.pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise RuntimeError("bias_k and bias_v must both be given or both be None")

    # (L, N, E) -> (N * H, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        v = static_v
    if add_zero_attn:
        zeros = EC.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k = EF.cat([k, zeros], 1)
        v = EF.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = EF.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = EF.pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if key_padding_mask.shape != (bsz, src_len):
            raise RuntimeError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                               f"{key_padding_mask.shape}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = (q * (1.0 / math.sqrt(head_dim))).matmul(k.transpose(-2, -1))  # (N*H, L, S)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = scores.softmax(-1)  # torch: a fully masked row is NaN here
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = weights.matmul(v)  # (N*H, L, hd)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
        w = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(1)
        if unbatched:
            return out.squeeze(1), w.squeeze(0)
        return out, w

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q4 = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k4 = k.reshape(bsz, num_heads, src_len, head_dim)
    v4 = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q4, k4, v4, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    return (out.squeeze(1), None) if unbatched else (out, None)
