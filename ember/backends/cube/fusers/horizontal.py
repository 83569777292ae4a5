"""The horizontal fuser: independent elementwise blocks of different shapes in one launch.

The elementwise fuser turns a run of elementwise ops of one output shape into one kernel; a
run that changes shape starts a new kernel. An optimizer step (each parameter's update is a
chain over its own shape), gradient clipping's scaling, or any per-tensor loop over tensors of
several shapes therefore costs one launch per distinct shape. This fuser claims a sequence of
such blocks (*segments*: maximal runs of one shape, each within the elementwise fuser's limits)
that do not read each other's results, and runs them as ONE launch of ``fused_segments``: the
launch's cubes are split into consecutive ranges, one per segment, and each range runs its
segment's program (the elementwise fuser's encoding, input and output numbers shifted into the
launch's lists) over its own element count, in lines of its own width.

A segment is taken only when every operand is contiguous with its shape, or a single element
broadcast (a 0-d scale); others (a bias row, a strided view) run as their own ordinary fused
kernel (``ElementwiseFuser.execute``), decided at run time from the layouts. A dropped input at
its last use lends its buffer to an output as in the elementwise fuser, unless another segment
of the launch also reads that buffer (it may run at the same time). Numerics are those of the
elementwise fuser: the same programs through the same interpreter (``elementwise_kernel._program``).

Everything prepared at claim time is relative (segment offsets in the block, the elementwise
fuser's per-segment data), as plans are replayed on later drains with new tensor ids.
"""

from __future__ import annotations

import math
from typing import Any

from .... import cube
from ....cube import CUBE_DIM, CUBE_POS, UNIT_POS, Array, Comptime, Line, Scalar, Sequence, T, kernel
from ....cube.launch import CubeCount, CubeDim, lines
from ...fusion.ir import OperationIr
from .elementwise import ElementwiseFuser, array_budget, exclusive, fusable, observed, run_stop
from .elementwise_kernel import _program

__all__ = ["HorizontalFuser", "fused_segments", "MAX_SEGMENTS"]

#: the most segments one claim takes (the kernel inlines every segment's program)
MAX_SEGMENTS = 32
#: the most ops of all segments together (compile time grows with the inlined programs)
MAX_TOTAL_OPS = 512
#: the most array parameters of one launch where the device sets no lower limit
MAX_ARRAYS = 96

_DIM = CubeDim(256)


@kernel
def fused_segments(
    ins: Sequence[Array[Line[T]]],
    outs: Sequence[Array[Line[T]]],
    scalars: Sequence[Scalar],
    starts: Sequence[Scalar],
    segs: Comptime[tuple],
    modes: Comptime[tuple],
):
    """Segment s (``segs[s]`` = (program, an output of it, line width)) runs on the cubes
    ``starts[s] <= CUBE_POS < starts[s + 1]``, one line per unit, over its output's lines."""
    c = CUBE_POS
    for s in range(len(segs)):
        seg = segs[s]
        if c >= starts[s] and c < starts[s + 1]:
            i = (c - starts[s]) * CUBE_DIM + UNIT_POS
            if i < outs[seg[1]].len():
                # every load before every store (an output may reuse an input's buffer);
                # ``modes[k]``: "l" input k is read in lines, "b" its one element is broadcast
                _program(ins, outs, scalars, seg[0], i, False, (), seg[2], modes)


def _shifted(prog: tuple[Any, ...], di: int, ds: int, do: int) -> tuple[Any, ...]:
    """``prog`` with its input, scalar and output numbers moved by ``di``, ``ds``, ``do``."""
    out = []
    for step in prog:
        tag = step[0]
        if tag == "in":
            out.append(("in", step[1] + di))
        elif tag == "scalar":
            out.append(("scalar", step[1] + ds))
        elif tag == "out":
            out.append(("out", step[1] + do, step[2]))
        else:
            out.append(step)
    return tuple(out)


class HorizontalFuser:
    """Claims two or more consecutive independent elementwise segments; runs them as one launch."""

    name = "horizontal"

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._inner = ElementwiseFuser(backend)

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        limit = _array_limit(self.backend)
        segs: list[tuple[int, int]] = []
        produced: set[int] = set()
        j = i
        total = 0
        while j < len(ops) and len(segs) < MAX_SEGMENTS:
            stop = run_stop(ops, j)  # a segment is the elementwise fuser's run
            if stop is None or total + (stop - j) > MAX_TOTAL_OPS:
                break
            seg_ops = ops[j:stop]
            # independent: no op of this segment reads a result of an earlier one (the segments
            # of a launch run at the same time)
            if produced and any(t.id in produced for o in seg_ops for t in o.inputs):
                break
            outs = {o.outputs[0].id for o in seg_ops}
            # a segment feeding the op right after it (a reduction, a matmul) is left to the
            # fusers that take it as their prologue
            if stop < len(ops) and not fusable(ops[stop]) and any(t.id in outs for t in ops[stop].inputs):
                break
            n_arrays = len({t.id for o in seg_ops for t in o.inputs if t.id not in outs}) + len(
                observed(ops, j, stop))
            if n_arrays > limit:
                break
            segs.append((j, stop))
            produced |= outs
            total += stop - j
            j = stop
        if len(segs) < 2:
            return None
        data = tuple((a - i, b - i, self._inner._prepare(ops, a, b)) for a, b in segs)
        # a quarter more than the ops: ahead of the elementwise fuser's claim of the first segment
        return j, float(j - i) + 0.25, data

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        ready = []  # per segment taken: (ops, data, inputs, scalars)
        for a, b, d in data:
            seg_ops = ops[a:b]
            ins = d.inputs(seg_ops, env)
            n = math.prod(d.shape)
            if all(t.shape == d.shape and t.is_contiguous() or math.prod(t.shape) == 1 for t in ins) and n:
                ready.append((seg_ops, d, ins, d.scalar_values(seg_ops)))
            else:  # a broadcast row, a strided view: its own fused kernel
                ElementwiseFuser.run(inner, seg_ops, d, env, ins, d.scalar_values(seg_ops))
        if len(ready) == 1:
            ElementwiseFuser.run(inner, *ready[0][:2], env, *ready[0][2:])
        elif ready:
            run_segments(inner, ready, env)


def run_segments(backend: Any, ready: list[Any], env: dict[int, Any]) -> None:
    """Launch the ``ready`` segments (ops, elementwise data, inputs, scalars), as few launches
    as the device's bindings allow, and put their outputs into ``env``."""
    limit = _array_limit(backend)
    batch: list[Any] = []
    used = 0
    for seg in ready:
        n = len(seg[2]) + len(seg[1].outs)
        if batch and used + n > limit:
            _launch(backend, batch, env)
            batch, used = [], 0
        batch.append(seg)
        used += n
    if len(batch) == 1:
        seg_ops, d, ins, scal = batch[0]
        ElementwiseFuser.run(backend, seg_ops, d, env, ins, scal)
    elif batch:
        _launch(backend, batch, env)


def _array_limit(backend: Any) -> int:
    """The most array parameters of one launch on ``backend``'s device."""
    budget = array_budget(backend)
    return MAX_ARRAYS if budget is None else min(MAX_ARRAYS, budget)


def _launch(backend: Any, batch: list[Any], env: dict[int, Any]) -> None:
    from ....cube.runtime.tensor import contiguous_strides
    from .elementwise_kernel import _line_width

    # buffers read by more than one segment (or twice in one) are never donated: another
    # segment may read them while this one writes
    seen: dict[int, int] = {}
    for _, _, ins, _ in batch:
        for t in ins:
            seen[id(t.buffer)] = seen.get(id(t.buffer), 0) + 1
    all_ins: list[Any] = []
    all_outs: list[Any] = []
    modes: list[str] = []
    scalars: list[Any] = []
    segs: list[tuple[Any, ...]] = []
    starts = [0]
    results: list[tuple[list[OperationIr], Any, list[Any]]] = []
    for seg_ops, d, ins, scal in batch:
        shape = d.shape
        n = math.prod(shape)
        outs = []
        taken: set[int] = set()
        for k, off in enumerate(d.outs):
            dtype = seg_ops[off].outputs[0].dtype
            j = d.donors[k]
            t = ins[j] if j is not None else None
            if (t is not None and j not in taken and seen[id(t.buffer)] == 1 and exclusive(t) and t.dtype is dtype
                    and t.shape == shape and not t.offset and t.is_contiguous()):
                taken.add(j)
                outs.append(t.with_layout(shape, contiguous_strides(shape), 0))
            else:
                outs.append(backend._empty(shape, dtype))
        flat = (n,)
        views = [t.with_layout(flat, (1,), t.offset) if math.prod(t.shape) == n else t.with_layout((1,), (1,), t.offset)
                 for t in ins]
        fouts = [o.with_layout(flat, (1,), 0) for o in outs]
        seg_modes = ["l" if math.prod(t.shape) == n else "b" for t in ins]
        lined = [v for v, m in zip(views, seg_modes) if m == "l"]
        # width 1 for a uint8 sign only (GCC 12's SLP bug, see elementwise_kernels)
        u8_sign = any(o.op == "sign" and o.outputs[0].dtype.name == "uint8" for o in seg_ops)
        w = 1 if u8_sign else _line_width(n, lined + fouts)
        prog = _shifted(d.prog, len(all_ins), len(scalars), len(all_outs))
        segs.append((prog, len(all_outs), w))
        all_ins.extend(lines(v, w) if m == "l" and w > 1 else v for v, m in zip(views, seg_modes))
        modes.extend(seg_modes)
        all_outs.extend(lines(o, w) if w > 1 else o for o in fouts)
        scalars.extend(scal)
        starts.append(starts[-1] + -(-(n // w) // _DIM.x))
        results.append((seg_ops, d, outs))
    fused_segments.launch(
        backend.client, CubeCount(starts[-1]), _DIM, tuple(all_ins), tuple(all_outs), tuple(scalars),
        tuple((s, cube.u32) for s in starts), tuple(segs), tuple(modes),
    )
    for seg_ops, d, outs in results:
        for off, r in zip(d.outs, outs):
            env[seg_ops[off].outputs[0].id] = r
