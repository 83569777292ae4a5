"""Gradient clipping, as ``torch.nn.utils.clip_grad``.

The total norm is torch's: the norm of all gradients' elements (torch computes the norm of each
gradient, then the norm of those norms: the same value up to float rounding), so
``clip_grad_norm_`` returns the same 0-d tensor torch does. Nothing is read back to the host
unless ``error_if_nonfinite=True`` asks for the check: the norm and the scaling stay on the
device. The gradients of one device and dtype are flattened and concatenated (one launch on a
Cube device, whatever their layouts: the ``flat_cat`` fuser), the concatenation is reduced
once (two launches where a long vector is split), one small elementwise kernel combines the
results, and the scaling multiplies the concatenation once (one launch); every gradient is
then rebound in place to its slice of the scaled vector (a view: the ``.grad`` objects keep
their identity). ``clip_grad_norm_`` is so 4-6 launches for any number of gradients
(``norm_type=0``: one reduction per gradient, as its total counts the gradients with a nonzero
element). ``foreach`` is accepted and ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ...backends.autodiff.mode import no_grad
from ...creation import tensor
from ...functional import cat
from ...tensor import Tensor, _make

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(tensors: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [g for g in (p.grad for p in _as_list(parameters)) if g is not None]


def _reduced(t: Tensor, p: float) -> Tensor:
    """The reduction of ``torch.linalg.vector_norm(t, p)`` before its root, as a 0-d tensor.
    ``t`` is flattened first so the elementwise part runs inside the (last-axis) reduction."""
    v = t.reshape(-1)
    if p == math.inf:
        return v.abs().amax()
    if p == -math.inf:
        return v.abs().amin()
    if p == 0:
        return (v != 0).sum().to(t.dtype)
    if p == 1:
        return v.abs().sum()
    if p == 2:
        return (v * v).sum()
    return (v.abs() ** p).sum()


def _root(s: Tensor, p: float) -> Tensor:
    """The norm from its reduction (``_reduced``)."""
    if p == 2:
        return s.sqrt()
    if p in (math.inf, -math.inf, 0, 1):
        return s
    return s ** (1.0 / p)


def _combine(norms: list[Tensor], p: float) -> Tensor:
    """The ``p``-norm of the per-tensor norms (torch: ``vector_norm(stack(norms), p)``),
    written as elementwise ops on 0-d tensors (a stack would cost a copy per tensor)."""
    if p == math.inf or p == -math.inf:
        out = norms[0]
        for n in norms[1:]:
            out = out.maximum(n) if p > 0 else out.minimum(n)
        return out
    if p == 0:
        out = (norms[0] != 0).to(norms[0].dtype)
        for n in norms[1:]:
            out = out + (n != 0).to(n.dtype)
        return out
    if p == 1:
        out = norms[0]
        for n in norms[1:]:
            out = out + n
        return out
    powered = [n * n if p == 2 else n**p for n in norms]
    out = powered[0]
    for n in powered[1:]:
        out = out + n
    return out.sqrt() if p == 2 else out ** (1.0 / p)


def _flat(ts: list[Tensor]) -> list[tuple[Tensor, list[Tensor]]]:
    """The tensors by (device, dtype): (their flattened concatenation, the tensors)."""
    buckets: dict[tuple[Any, Any], list[Tensor]] = {}
    for t in ts:
        buckets.setdefault((t.device, t.dtype), []).append(t)
    return [(m[0].reshape(-1) if len(m) == 1 else cat([t.reshape(-1) for t in m]), m) for m in buckets.values()]


def _total(ts: list[Tensor], flats: list[tuple[Tensor, list[Tensor]]], p: float, error_if_nonfinite: bool) -> Tensor:
    """The total ``p``-norm of ``ts`` (``flats``: their concatenations by device and dtype).
    For p != 0 the norm of a concatenation is the norm of the parts' norms (only the rounding
    of the float sums differs from torch's per-tensor norms); the "0-norm" of the norms counts
    the tensors with a nonzero element: per tensor."""
    dev = ts[0].device
    parts = [f for f, _ in flats] if p != 0 else ts
    sums = [_reduced(t, p) for t in parts]
    sums = [n if n.device == dev else n.to(dev) for n in sums]
    total = _combine([_root(n, p) for n in sums], p)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is non-finite, so it cannot "
                           "be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """As ``torch.nn.utils.get_total_norm``: the norm of the tensors' norms (0-d, on the first
    tensor's device); ``tensor(0.0)`` for no tensors."""
    ts = _as_list(tensors)
    p = float(norm_type)
    if not ts:
        return tensor(0.0)
    with no_grad():
        return _total(ts, _flat(ts) if p != 0 else [], p, error_if_nonfinite)


def _scale(flats: list[tuple[Tensor, list[Tensor]]], max_norm: float, total_norm: Tensor) -> None:
    """Every tensor of ``flats`` times ``min(max_norm / (total_norm + 1e-6), 1)``, in place:
    one multiply per concatenation, each tensor rebound to its slice of the product."""
    coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
    for flat, members in flats:
        c = coef if coef.device == flat.device else coef.to(flat.device)
        if len(members) == 1 or len({id(g) for g in members}) != len(members):
            for g in members:  # one tensor (or one listed twice: torch scales it twice)
                g.mul_(c.to(flat.dtype))
            continue
        scaled = flat * c.to(flat.dtype)
        bk, sp, dt = scaled._bk, scaled._p, scaled._dt
        at = 0
        for g in members:
            # g = scaled[at:at + n].view(g.shape) through the catalog directly (the Tensor
            # API's checks are known to pass: a view of a contiguous vector)
            shape = g.shape
            n = math.prod(shape)
            v = bk.slice(sp, (slice(at, at + n, 1),))
            g._assign(_make(v if len(shape) == 1 else bk.reshape(v, shape), bk, dt))
            at += n


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """As ``torch.nn.utils.clip_grads_with_norm_``: scale every gradient in place by
    ``min(max_norm / (total_norm + 1e-6), 1)`` (always multiplied, no host read)."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        _scale(_flat(grads), max_norm, total_norm)


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """As ``torch.nn.utils.clip_grad_norm_``: clip the gradients' total norm to ``max_norm``
    in place; returns the total norm before clipping (a 0-d tensor)."""
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    p = float(norm_type)
    with no_grad():
        flats = _flat(grads)  # one concatenation for the norm and the scaling
        total = _total(grads, flats, p, error_if_nonfinite)
        _scale(flats, max_norm, total)
    return total


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None) -> None:
    """As ``torch.nn.utils.clip_grad_value_``: clamp every gradient in place to
    ``[-clip_value, clip_value]``."""
    v = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-v, v)
