"""A reduction over the last axis with an elementwise *prologue* applied on read
(``sum(x * y)``, ``max(abs(x - m))``, ``sum(exp(x - m))``): one kernel, no intermediate.

The prologue is ``elementwise_kernel``'s program encoding; its ``("out", 0, r)`` names the
register that is reduced. Inputs are views of the full input shape ``(..., K)`` (zero strides
where broadcast); each is read per row in one of three modes the launcher picks:

* ``line``: contiguous along K (with K, its other strides and offset multiples of the line
  width W): one line of W per step;
* ``row``: constant along K (stride 0 there: a per-row max, a bias of the row): one scalar
  per row, broadcast against the lines;
* ``elem``: anything else, through its strides -- then the kernel runs with W = 1.

The value is cast to the accumulator type (the output's: float32 for half values, as the
unfused reductions accumulate) and combined with ``reduce_kernels.combine``; one unit folds
a row alone (many or short rows), or a cube of units splits it and folds through
``fold_cube``. The accumulation order differs from the unfused ``reduce_rows`` kernel, so
float sums agree with it to rounding, not bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

from .... import dtype as dt
from ....cube import (
    ABSOLUTE_POS,
    CUBE_POS,
    UNIT_POS,
    Array,
    Comptime,
    Line,
    Scalar,
    Sequence,
    T,
    cast,
    function,
    kernel,
    line,
    u32,
)
from ....cube.launch import CubeCount, CubeDim, lines
from ....cube.runtime.tensor import CubeTensor
from ..reduce import _identity
from ..reduce_kernels import Acc, combine, fold_cube, fold_line
from .elementwise_kernel import apply_step
from .matmul import _expanded

__all__ = ["fused_reduce_rows", "run_fused_reduce"]

_DIM = CubeDim(256)
#: one unit per row from this many rows on, or when a row has at most this many lines
_UNIT_ROWS_MIN = 256
_UNIT_ROW_LINES = 64


@function
def _row_offset(x, r):
    """Element offset of row ``r`` (row-major over every dim but the last) in view ``x``."""
    rem = r
    off = u32(0)
    for d in range(x.rank() - 2, -1, -1):  # comptime: unrolled
        n = x.shape(d)
        off += (rem % n) * x.stride(d)
        rem = rem // n
    return off


@function
def _value(ins, scalars, prog: Comptime[tuple], modes: Comptime[tuple], offs, t, w: Comptime[int]):
    """The prologue at step ``t`` of a row (elements t*w .. t*w + w - 1); ``offs[k]`` is input
    k's row offset (in lines for ``line`` inputs)."""
    regs = []
    result = 0
    found = False
    for step in prog:
        tag = step[0]
        if tag == "in":
            k = step[1]
            x = ins[k]
            mode = modes[k]
            if mode == "line":
                regs.append(x[offs[k] + t])
            elif mode == "row":
                regs.append(x[offs[k]])
            else:
                regs.append(x[offs[k] + t * x.stride(x.rank() - 1)])
        elif tag == "out":
            result = regs[step[2]]
            found = True
        else:
            assert apply_step(regs, step, scalars), f"unknown prologue instruction {step!r}"
    assert found, "the prologue program has no ('out', 0, r)"
    return result


@function
def _fold_span(
    ins, scalars, prog: Comptime[tuple], modes: Comptime[tuple], r, lo, hi, init, op: Comptime[str], w: Comptime[int]
):
    """op over steps lo .. hi - 1 of row r, as one Acc value."""
    offs = []
    for k in range(len(ins)):
        x = ins[k]
        if modes[k] == "line":
            offs.append(_row_offset(x, r) // w)
        else:
            offs.append(_row_offset(x, r))
    acc = line(init, w)
    t = lo
    while t < hi:
        acc = combine(acc, cast(_value(ins, scalars, prog, modes, offs, t, w), Acc), op)
        t += 1
    return fold_line(acc, op)


@kernel
def fused_reduce_rows(
    ins: Sequence[Array[Line[T]]],
    out: Array[Acc],
    scalars: Sequence[Scalar],
    steps: u32,
    span: u32,
    init: Acc,
    prog: Comptime[tuple],
    modes: Comptime[tuple],
    op: Comptime[str],
    w: Comptime[int],
    unit_rows: Comptime[bool],
):
    """out[r] = op over the row r of prog(ins...), ``steps`` steps of ``w`` elements a row."""
    if unit_rows:
        r = ABSOLUTE_POS
        if r < out.len():
            out[r] = _fold_span(ins, scalars, prog, modes, r, u32(0), steps, init, op, w)
        return
    r = CUBE_POS
    lo = UNIT_POS * span
    hi = min(lo + span, steps)
    v = _fold_span(ins, scalars, prog, modes, r, lo, hi, init, op, w)
    v = fold_cube(v, op)  # every unit of the cube reaches it
    if UNIT_POS == 0:
        out[r] = v


def run_fused_reduce(
    backend: Any,
    prog: tuple[Any, ...],
    inputs: list[CubeTensor],
    scalars: list[tuple[Any, Any]] | tuple[tuple[Any, Any], ...],
    shape: tuple[int, ...],
    op: str,
    acc_dtype: dt.DType,
    out_dtype: dt.DType | None = None,
    cube_rows: bool = False,
) -> CubeTensor:
    """``op`` (sum, prod, max, min) over the last axis of ``prog(inputs...)`` evaluated over
    ``shape``; returns a tensor of ``shape[:-1]`` and ``out_dtype`` (default ``acc_dtype``,
    the accumulator's: the program's value type, float32 for half values). ``cube_rows``: one
    cube per row whatever the row count (the split chunks of a few long rows: one unit per
    chunk would leave a GPU nearly idle)."""
    if op not in ("sum", "prod", "max", "min"):
        raise ValueError(f"fused reductions are sum, prod, max or min, got {op!r}")
    shape = tuple(shape)
    if not shape:
        raise ValueError("a reduction over the last axis needs an input of rank >= 1")
    rows, k = math.prod(shape[:-1]), shape[-1]
    out = backend._empty(shape[:-1], acc_dtype)
    if rows == 0:
        return out if out_dtype in (None, acc_dtype) else backend.cast(out, out_dtype)
    key = _layout_key(backend.client, prog, inputs, scalars, shape, op, acc_dtype, cube_rows)
    bound = _BOUND.get(key)
    if bound is not None:  # this layout launched before: its plan and launch geometry, no key or modes to build
        plan, strides, modes, w, steps, span, unit_rows, count, init = bound
        views = [t if st is None else t.with_layout(shape, st, t.offset) for t, st in zip(inputs, strides)]
        args = tuple(lines(v, w) if m == "line" and w > 1 else v for v, m in zip(views, modes))
        views.append(out)  # the kernel's buffers in parameter order: ins..., out
        plan.run(count, (args, out, tuple(scalars), steps, span, init, prog, modes, op, w, unit_rows), views)
    else:
        _launch_new_layout(backend.client, key, prog, inputs, scalars, shape, op, acc_dtype, out, rows, k, cube_rows)
    if out_dtype is not None and out_dtype is not acc_dtype:
        return backend.cast(out, out_dtype)
    return out


#: per input layout (``_layout_key``): the fused_reduce_rows plan and what the launcher derived
#: from the layout (views' strides, modes, line width, grid); cleared when it grows past
#: ``_BOUND_MAX`` layouts (a workload of ever new shapes)
_BOUND: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_BOUND_MAX = 4096


def _layout_key(
    client: Any, prog: tuple[Any, ...], inputs: list[CubeTensor], scalars: Any, shape: tuple[int, ...], op: str,
    acc_dtype: dt.DType, cube_rows: bool = False,
) -> tuple[Any, ...]:
    """Everything the launch below derives its views, modes, line width, grid and kernel key
    from: the program, shape, op, accumulator and scalar dtypes, and per input its dtype,
    shape, strides and offset modulo the widest line (16), plus which inputs share a buffer."""
    ids = [id(t.buffer) for t in inputs]
    alias = None if len(set(ids)) == len(ids) else tuple(ids.index(i) for i in ids)
    return (
        id(client), prog, shape, op, acc_dtype, cube_rows, tuple(d for _, d in scalars), alias,
        tuple((t.dtype, t.shape, t.strides, t.offset & 15) for t in inputs),
    )


def _launch_new_layout(
    client: Any, key: tuple[Any, ...], prog: tuple[Any, ...], inputs: list[CubeTensor], scalars: Any,
    shape: tuple[int, ...], op: str, acc_dtype: dt.DType, out: CubeTensor, rows: int, k: int,
    cube_rows: bool = False,
) -> None:
    """Pick modes, line width and grid for this layout, launch, and keep it all in ``_BOUND``."""
    views = [_expanded(t, shape) for t in inputs]
    modes = []
    for v in views:
        if v.strides[-1] == 0 or k == 1:
            modes.append("row")
        elif v.strides[-1] == 1:
            modes.append("line")
        else:
            modes.append("elem")
    w = 1
    if "elem" not in modes and k >= 16:
        w = 16
        for v, m in zip(views, modes):
            if m == "line":
                while w > 1 and (
                    w * v.dtype.itemsize > 64 or k % w or v.offset % w or any(s % w for s in v.strides[:-1])
                ):
                    w //= 2
    if w == 1:
        modes = ["elem" if m == "line" else m for m in modes]  # one element a step, through the strides
    args = tuple(lines(v, w) if m == "line" and w > 1 else v for v, m in zip(views, modes))
    steps = k // w if w > 1 else k
    unit_rows = not cube_rows and (rows >= _UNIT_ROWS_MIN or steps <= _UNIT_ROW_LINES)
    init = _identity(op, acc_dtype)
    if unit_rows:
        count, dim, span = CubeCount.covering(rows, _DIM), _DIM, 0
    else:
        count, dim, span = CubeCount(rows), _DIM, -(-steps // _DIM.x)
    modes = tuple(modes)
    plan, bargs, tensors = fused_reduce_rows.resolve(
        client, dim, args, out, tuple(scalars), steps, span, init, prog, modes, op, w, unit_rows
    )
    plan.run(count, bargs, tensors)
    if not getattr(plan.compiled, "pending", False):  # a pending plan launches nothing: not kept
        if len(_BOUND) >= _BOUND_MAX:
            _BOUND.clear()
        strides = tuple(None if v is t else v.strides for v, t in zip(views, inputs))
        _BOUND[key] = (plan, strides, modes, w, steps, span, unit_rows, count, init)
