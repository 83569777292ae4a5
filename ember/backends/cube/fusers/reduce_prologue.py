"""The reduce-prologue fuser: elementwise ops whose result is only reduced over its last
axis (``(x * y).sum(-1)``, ``(x - m).exp().sum(-1)``, ``(a - b).abs().max(-1)``) run as one
kernel that computes the prologue while reading (fuse-on-read): no intermediate is written.

The block is a run of elementwise ops over one shape ``S`` ending in ``sum``/``prod``/
``max``/``min`` over the last axis of the run's result, with no intermediate observed after
the block. ``reduce.run_fused_reduce`` runs it; its float sums agree with the unfused reduction
to rounding (a different accumulation order), not bit for bit.

The fused kernel gives each row one unit or one cube, so a large input needs enough rows to
fill the device (``MIN_ROWS``). Fewer, longer rows (a 1-d ``chain(x).sum()``) are *split*: the
last axis L becomes (s, L / s) (a view of every input, whatever its strides), the fused kernel
reduces the chunks (one cube per chunk: one unit per chunk ran a 1-d sum of 256M floats at 32x
the read floor on the H200, 4096 threads in all), and the unfused reduction combines the s
partials of each row. s is a
power of two dividing L that leaves chunks of at least ``MIN_CHUNK`` elements (``_split``); a
row length without such a factor is not claimed (the elementwise kernel and the unfused
reduction run).
"""

from __future__ import annotations

import math
from typing import Any

from .... import dtype as dt
from ...fusion.ir import OperationIr
from .elementwise import MAX_INPUTS, MAX_OPS, Builder, array_budget, fusable, observed

__all__ = ["ReducePrologueFuser"]

_REDUCE = frozenset({"sum", "prod", "max", "min"})
#: the fused kernel runs one unit or one cube per row: below this many rows a large input
#: would leave most of the device idle (a 1-d sum of 256M floats ran 100x slower on the
#: H200 than the elementwise kernel followed by the unfused, cube-splitting reduction)
MIN_ROWS = 256
#: inputs up to this many elements are launch-bound: fusing wins whatever the row count
SMALL = 1 << 16
#: the shortest chunk a split row is cut into (the second pass reads rows * L / chunk partials)
MIN_CHUNK = 1024


#: a split must give at least this many chunks in all (else the unfused reduction, which
#: splits rows over many cubes, serves better)
MIN_CHUNKS = 64


def _split(rows: int, length: int) -> int:
    """Chunks per row for a reduction of ``rows`` rows of ``length``: 1 when the rows fill the
    device or the input is small; else the largest power of two dividing ``length`` that keeps
    chunks of at least ``MIN_CHUNK`` elements (and at most 16 x ``MIN_ROWS`` chunks in all), 0
    when that gives fewer than ``MIN_CHUNKS`` chunks."""
    if rows >= MIN_ROWS or rows * length <= SMALL:
        return 1
    s = 1
    while length % (2 * s) == 0 and length // (2 * s) >= MIN_CHUNK and rows * s < MIN_ROWS * 16:
        s *= 2
    return s if rows * s >= MIN_CHUNKS else 0


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
        split = _split(math.prod(shape[:-1]), shape[-1])
        if not split:
            return None  # a few long rows that cannot be split: the unfused reduction splits them
        src = red.inputs[0]
        if src.shape != shape or src.id not in {o.outputs[0].id for o in ops[i:k]}:
            return None
        # the prologue's results are read by the reduction only
        if observed(ops, i, k + 1) != [k - i]:
            return None
        produced = {o.outputs[0].id for o in ops[i:k]}
        budget = array_budget(self.backend)  # the inputs and the output within the device's bindings
        limit = MAX_INPUTS if budget is None else min(MAX_INPUTS, budget - 1)
        if len({t.id for o in ops[i:k] for t in o.inputs if t.id not in produced}) > limit:
            return None
        return k + 1, float(k + 1 - i) + 0.5, self._prepare(ops[i:k + 1], split)

    @staticmethod
    def _prepare(block: list[OperationIr], split: int = 1) -> Any:
        b = Builder(block)
        for off in range(len(block) - 1):
            b.op(off)
        red = block[-1]
        b.prog.append(("out", 0, b.regs[red.inputs[0].id]))
        out = red.outputs[0]
        acc = dt.float32 if out.dtype in (dt.float16, dt.bfloat16) else out.dtype
        return (tuple(b.prog), b.ext, b.scalars, red.op, acc, red.inputs[0].shape, bool(red.args[2]), split)

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        from .matmul import _expanded
        from .reduce import run_fused_reduce

        prog, ext, scal, op, acc, shape, keepdim, split = data
        ins = [env[ops[off].inputs[pos].id] for off, pos in ext]
        scalars = [(ops[off].args[arg], d) for off, arg, d in scal]
        out = ops[-1].outputs[0]
        if split > 1:
            # each input expanded to the block's shape (a view), its last axis split into
            # (split, L / split): chunks reduced fused, then the partials of each row
            chunk = shape[-1] // split
            cut = shape[:-1] + (split, chunk)
            views = []
            for t in ins:
                t = _expanded(t, shape)
                st = t.strides
                views.append(t.with_layout(cut, st[:-1] + (st[-1] * chunk, st[-1]), t.offset))
            part = run_fused_reduce(inner, prog, views, scalars, cut, op, acc, acc, cube_rows=True)
            r = getattr(inner, op)(part, (len(shape) - 1,), False)
            if r.dtype is not out.dtype:
                r = inner.cast(r, out.dtype)
        else:
            r = run_fused_reduce(inner, prog, ins, scalars, shape, op, acc, out.dtype)
        if keepdim:
            r = inner.reshape(r, out.shape)
        env[out.id] = r
