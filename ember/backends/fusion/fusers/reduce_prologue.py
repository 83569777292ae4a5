"""The reduce-prologue fuser: elementwise ops whose result is only reduced over its last
axis (``(x * y).sum(-1)``, ``(x - m).exp().sum(-1)``, ``(a - b).abs().max(-1)``) run as one
kernel that computes the prologue while reading (fuse-on-read): no intermediate is written.

The block is a run of elementwise ops over one shape ``S`` ending in ``sum``/``prod``/
``max``/``min`` over the last axis of the run's result, with no intermediate observed after
the block, and enough rows to fill the device (``MIN_ROWS``) unless the input is small.
``reduce.run_fused_reduce`` runs it; its float sums agree with the unfused reduction to
rounding (a different accumulation order), not bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

from .... import dtype as dt
from ..ir import OperationIr
from .elementwise import MAX_INPUTS, MAX_OPS, Builder, fusable, observed

__all__ = ["ReducePrologueFuser"]

_REDUCE = frozenset({"sum", "prod", "max", "min"})
#: the fused kernel runs one unit or one cube per row: below this many rows a large input
#: would leave most of the device idle (a 1-d sum of 256M floats ran 100x slower on the
#: H200 than the elementwise kernel followed by the unfused, cube-splitting reduction)
MIN_ROWS = 256
#: inputs up to this many elements are launch-bound: fusing wins whatever the row count
SMALL = 1 << 16


class ReducePrologueFuser:
    name = "reduce_prologue"

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        if not fusable(ops[i]):
            return None
        shape = ops[i].outputs[0].shape
        if not shape or shape[-1] == 0:
            return None
        k = i
        while k < len(ops) and k - i < MAX_OPS and fusable(ops[k]) and ops[k].outputs[0].shape == shape:
            k += 1
        if k >= len(ops):
            return None
        red = ops[k]
        if red.op not in _REDUCE or tuple(red.args[1]) != (len(shape) - 1,):
            return None
        rows = math.prod(shape[:-1])
        if rows < MIN_ROWS and rows * shape[-1] > SMALL:
            return None  # a few long rows: the unfused reduction splits them over many cubes
        src = red.inputs[0]
        if src.shape != shape or src.id not in {o.outputs[0].id for o in ops[i:k]}:
            return None
        # the prologue's results are read by the reduction only
        if observed(ops, i, k + 1) != [k - i]:
            return None
        produced = {o.outputs[0].id for o in ops[i:k]}
        if len({t.id for o in ops[i:k] for t in o.inputs if t.id not in produced}) > MAX_INPUTS:
            return None
        return k + 1, float(k + 1 - i) + 0.5, self._prepare(ops[i:k + 1])

    @staticmethod
    def _prepare(block: list[OperationIr]) -> Any:
        b = Builder(block)
        for off in range(len(block) - 1):
            b.op(off)
        red = block[-1]
        b.prog.append(("out", 0, b.regs[red.inputs[0].id]))
        out = red.outputs[0]
        acc = dt.float32 if out.dtype in (dt.float16, dt.bfloat16) else out.dtype
        return (tuple(b.prog), b.ext, b.scalars, red.op, acc, red.inputs[0].shape, bool(red.args[2]))

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        from .reduce import run_fused_reduce

        prog, ext, scal, op, acc, shape, keepdim = data
        ins = [env[ops[off].inputs[pos].id] for off, pos in ext]
        scalars = [(ops[off].args[arg], d) for off, arg, d in scal]
        out = ops[-1].outputs[0]
        r = run_fused_reduce(inner, prog, ins, scalars, shape, op, acc, out.dtype)
        if keepdim:
            r = inner.reshape(r, out.shape)
        env[out.id] = r
