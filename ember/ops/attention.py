"""Fused attention: ``sdpa`` (scaled-dot-product attention without mask tensors or dropout) and
its backward ``sdpa_backward``.

``sdpa(q, k, v, scale, causal)``: ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)`` with the
same leading dims (the front, ``nn.functional.scaled_dot_product_attention``, broadcasts them);
``softmax(scale * q k^T [causal: top-left lower-triangular]) v`` of shape ``(..., L, Ev)`` in
q's dtype. ``sdpa_backward(g, q, k, v, out, scale, causal)`` returns the three gradients packed
into one flat tensor ``[dq | dk | dv]`` (one op, one result: the rule takes its views).

Both are composites: a backend without attention kernels (Flex) runs the decomposition below
(matmul, softmax, matmul); the Cube backend runs its flash-attention kernels
(``backends/cube/attention_kernels.py``), which never materialise the ``(..., L, S)`` scores.
``sdpa_backward`` is not differentiable (no second derivatives through the fused op).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtype as dt
from .grad import Rule, mT
from .registry import Op, register

__all__ = ["causal_scores", "unpack_grads"]

Shape = tuple[int, ...]


def causal_scores(B: Any, s: Any) -> Any:
    """The scores ``s (..., L, S)`` with the keys past each query's diagonal set to -inf
    (torch's ``is_causal``: query ``i`` sees keys ``0..i``)."""
    n_q, n_k = s.shape[-2:]
    above = B.from_data(np.triu(np.ones((n_q, n_k), dtype=bool), 1), dt.bool_)
    # the (L, S) mask broadcasts in the op, as the Tensor API passes masks (no expanded copy
    # of its strides is needed)
    return B.masked_fill(s, above, -math.inf)


def _probs(B: Any, q: Any, k: Any, scale: float, causal: bool) -> Any:
    s = B.matmul(B.mul_scalar(q, scale), mT(B, k))
    if causal:
        s = causal_scores(B, s)  # a top-left causal row always keeps key 0: no all -inf row
    return B.softmax(s, len(s.shape) - 1)


def _sdpa_compose(B: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    return B.matmul(_probs(B, q, k, scale, causal), v)


def _sdpa_backward_compose(B: Any, g: Any, q: Any, k: Any, v: Any, out: Any, scale: float, causal: bool) -> Any:
    p = _probs(B, q, k, scale, causal)
    last = len(p.shape) - 1
    dv = B.matmul(mT(B, p), g)
    dp = B.matmul(g, mT(B, v))
    # softmax's backward with D = rowsum(g * out) = rowsum(p * dp), as the kernels compute it
    delta = B.sum(B.mul(g, out), (last,), True)
    ds = B.mul(p, B.sub(dp, delta))
    dq = B.mul_scalar(B.matmul(ds, k), scale)
    dk = B.mul_scalar(B.matmul(mT(B, ds), q), scale)
    return B.cat([B.reshape(t, (math.prod(t.shape),)) for t in (dq, dk, dv)], 0)


def unpack_grads(B: Any, flat: Any, shapes: tuple[Shape, Shape, Shape]) -> tuple[Any, Any, Any]:
    """The views ``dq, dk, dv`` of ``sdpa_backward``'s packed result."""
    out = []
    lo = 0
    for shape in shapes:
        n = math.prod(shape)
        out.append(B.reshape(B.slice(flat, (slice(lo, lo + n),)), shape))
        lo += n
    return out[0], out[1], out[2]


def _sdpa_grad(B: Any, g: Any, out: Any, q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    flat = B.sdpa_backward(g, q, k, v, out, scale, causal)
    return unpack_grads(B, flat, (q.shape, k.shape, v.shape))


def _sdpa_out(q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Shape, dt.DType]:
    return q.shape[:-1] + (v.shape[-1],), q.dtype


def _sdpa_backward_out(g: Any, q: Any, k: Any, v: Any, out: Any, scale: float,
                       causal: bool) -> tuple[Shape, dt.DType]:
    return (math.prod(q.shape) + math.prod(k.shape) + math.prod(v.shape),), q.dtype


register(
    Op("sdpa", "attention", _sdpa_out, compose=_sdpa_compose, grad=Rule("q k v out", _sdpa_grad), replay=False),
    Op("sdpa_backward", "attention", _sdpa_backward_out, compose=_sdpa_backward_compose, replay=False),
)
