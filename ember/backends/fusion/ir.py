"""The Fusion layer's IR: what a queued op is, as data the fusers can read.

An ``OperationIr`` names its catalog op, its tensor inputs and outputs (``TensorIr``: id,
shape, dtype, never the handle itself, so queuing an op keeps no tensor alive), the
non-tensor arguments in catalog order, and per input a status: ``READ_ONLY``, or
``READ_WRITE`` when this op is the input's last use (nothing later in the stream reads it
and no Python handle is left), so a kernel may write its result into that buffer.
"""

from __future__ import annotations

import math
from typing import Any

from ... import dtype as dt

READ_ONLY = 0
READ_WRITE = 1


class TensorIr:
    __slots__ = ("id", "shape", "dtype")

    def __init__(self, id: int, shape: tuple[int, ...], dtype: dt.DType) -> None:
        self.id = id
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"t{self.id}{list(self.shape)}:{self.dtype.name}"


class OperationIr:
    """One queued op. ``args`` is the catalog call with every tensor replaced by its
    ``TensorIr`` (tuples of tensors stay tuples)."""

    __slots__ = ("op", "args", "inputs", "outputs", "status", "live")

    def __init__(self, op: str, args: tuple[Any, ...], inputs: tuple[TensorIr, ...],
                 outputs: tuple[TensorIr, ...]) -> None:
        self.op = op
        self.args = args
        self.inputs = inputs
        self.outputs = outputs
        self.status: tuple[int, ...] = (READ_ONLY,) * len(inputs)
        #: per output: a Python handle is alive at the drain (the value must be produced
        #: even when nothing in the queue reads it)
        self.live: tuple[bool, ...] = (True,) * len(outputs)

    def __repr__(self) -> str:
        ins = ", ".join(f"{t!r}{'*' if s == READ_WRITE else ''}" for t, s in zip(self.inputs, self.status))
        outs = ", ".join(repr(t) for t in self.outputs)
        return f"{self.op}({ins}) -> {outs}"


_FLOAT = ("v", "float")


def _relative_arg(a: Any, ids: dict[int, int], values: list[Any]) -> Any:
    if type(a) is TensorIr:
        return ("t", ids.setdefault(a.id, len(ids)), a.shape, a.dtype)
    if type(a) is tuple or type(a) is list:
        return tuple(_relative_arg(x, ids, values) for x in a)
    if type(a) is float:
        # a float is a runtime argument of a plan (a scalar operand, a fill value, a clamp
        # bound), not part of its identity: the fusers read it from the op at run time.
        # Its value goes to ``values`` (-0.0 apart from 0.0: they differ in products)
        values.append(a if a else (a, math.copysign(1.0, a)))
        return _FLOAT
    if type(a) is int or type(a) is bool:
        # ints and bools are structure (dims, keepdim, an axis) that fusers bake into the
        # plan when they claim a block: ``sum(x, (1,))`` and ``sum(x, (0,))`` of a square x
        # have one output shape and must not share a plan
        return a if type(a) is int else ("b", a)
    if type(a) is slice:
        return ("s", a.start, a.stop, a.step)
    if isinstance(a, dt.DType):
        return a.name
    if a is None or type(a) is str:
        return ("o", a)
    values.append(a)
    return ("o", type(a).__name__)


def relative_key(ops: list[OperationIr], values: list[Any] | None = None) -> tuple[Any, ...]:
    """The op sequence with tensor ids renumbered from zero in order of appearance and
    float values blanked (other objects by type), with each input's status and each output's
    liveness: equal keys mean the same plan applies (a training loop's step has the same key
    every iteration). The blanked values are appended to ``values`` in op order: with the
    key they say everything the drain's launches depend on besides its input tensors."""
    ids: dict[int, int] = {}
    if values is None:
        values = []
    key = []
    for o in ops:
        args = []
        for a in o.args:  # the common kinds inline (this runs for every op of every drain)
            ta = type(a)
            if ta is TensorIr:
                args.append(("t", ids.setdefault(a.id, len(ids)), a.shape, a.dtype))
            elif ta is int:
                args.append(a)
            else:
                args.append(_relative_arg(a, ids, values))
        outs = tuple([("t", ids.setdefault(t.id, len(ids)), t.shape, t.dtype) for t in o.outputs])
        key.append((o.op, tuple(args), outs, o.status, o.live))
    return tuple(key)
