"""A stream's signature, built as ops register: the key of its drain's fast replay.

Each registered op appends its name and one part per argument to ``stream.sig``: a queued
tensor as a reference to its relative index (order of first appearance in the queue), a
realised tensor on its first appearance as its layout (dtype, shape, strides, offset, and
the first realised tensor sharing its buffer), later as a reference; ints, bools and other
scalars by value, non-zero floats as a blank (their values, in order, in ``stream.fvals``;
zeros stay, -0.0 apart from 0.0), tuples part by part. Op names are the only bare
strings in it, so the sequence splits into ops one way only.

With the set of tensors whose handles are dead at the drain, the signature determines what
``relative_key`` (op sequence, structure, statuses, liveness) and ``replay_key`` (blanked
values, input layouts) would: a drain whose signature and dead set were seen before replays
its capture without computing either (``stream.Stream.drain``), and one whose floats alone
differ runs the parametric replay of its layout with the new floats patched in. Anything the
signature cannot encode (an argument of another kind, a realised input that is not of the
drain capturer's ``tensor_type``) sets ``stream.sig`` to None: that drain takes the ordinary
path.
"""

from __future__ import annotations

import math
from typing import Any

from ... import dtype as dt

__all__ = ["REF_PARTS", "const_part", "ref_part", "sig_part", "tensor_part"]

REF_PARTS = [("t", r) for r in range(1024)]
#: the part of a non-zero float (its value: ``stream.fvals``)
_FLOAT_PART = ("f",)
#: backend.FusionTensor, set on first use (backend imports this module)
_tensor_type: Any = None


def _fusion_tensor() -> Any:
    global _tensor_type
    from .backend import FusionTensor

    _tensor_type = FusionTensor
    return FusionTensor


def ref_part(r: int) -> tuple[str, int]:
    """The part of a reference to relative index ``r``."""
    return REF_PARTS[r] if r < 1024 else ("t", r)


def sig_part(a: Any, stream: Any, sig: list[Any]) -> None:
    """Append argument ``a``'s part (``a`` is not a tensor queued on ``stream``: those are
    references, appended by the caller)."""
    ta = type(a)
    ft = _tensor_type or _fusion_tensor()
    if ta is float:
        # a non-zero float is blanked (its value goes to ``stream.fvals``): the signature is then
        # the key of the drain's parametric fast replay too, whose floats vary step to step (Adam's
        # bias corrections); a zero stays in it with its sign, as ``ir.relative_key`` keeps zeros
        # apart from the floats it blanks. ``fvals`` is relative_key's ``values`` list exactly
        # (floats, and zeros as (0.0, sign)): a signature holds no other kind of blanked value
        if a:
            sig.append(_FLOAT_PART)
            stream.fvals.append(a)
        else:
            z = (a, math.copysign(1.0, a))
            sig.append(("f", z))
            stream.fvals.append(z)
    elif ta is int or a is None:
        sig.append(a)
    elif ta is bool:
        sig.append(("b", a))
    elif isinstance(a, dt.DType):
        sig.append(a)
    elif ta is ft:
        tensor_part(a, stream, sig)
    elif ta is tuple or ta is list:
        if ta is tuple:  # dims, a shape: ints only, the common case, is its own part
            for x in a:
                if type(x) is not int:
                    break
            else:
                sig.append(("(", a))
                return
        sub: list[Any] = []
        for x in a:
            if type(x) is ft and x.value is None and x.stream is stream:
                sub.append(ref_part(stream.rel[x.id]))
            else:
                sig_part(x, stream, sub)
        sig.append(("(", tuple(sub)))
    elif ta is str:
        sig.append(("s", a))
    elif ta is slice:
        sig.append(("sl", a.start, a.stop, a.step))
    else:
        stream.sig = None


def tensor_part(a: Any, stream: Any, sig: list[Any]) -> None:
    """A realised tensor (or one queued on another stream, realised by ``Fusion._ir``)."""
    r = stream.rel.get(a.id)
    if r is not None:
        sig.append(ref_part(r))
        return
    const_part(a.id, stream.consts.get(a.id), stream, sig)


def const_part(tid: int, v: Any, stream: Any, sig: list[Any]) -> None:
    """The first appearance of realised tensor ``tid`` in the queue (its value ``v``): its
    layout, and the first realised input sharing its buffer; it gets the next relative index.
    Only a value of the drain capturer's ``tensor_type`` has a layout here."""
    if type(v) is not stream.tensor_type:
        stream.sig = None
        return
    r = stream.rel[tid] = len(stream.order)
    stream.order.append(tid)
    alias = stream.bufs.setdefault(id(v.buffer), r)
    sig.append(("c", v.dtype, v.shape, v.strides, v.offset, alias))
