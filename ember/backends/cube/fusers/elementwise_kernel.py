"""The fused elementwise kernel: one ``@cube`` kernel that interprets a comptime *program*.

A program is a tuple of instructions; each defines one register (numbered in order of
definition) except ``out``:

* ``("in", k)``: input k at this unit's position;
* ``("scalar", k)``: runtime scalar k (a ``(value, dtype)`` pair at launch);
* ``("const", value, dtype_name)``: a literal of that dtype;
* ``("unary", op, r)`` / ``("binary", op, r1, r2)``: ops of ``elementwise_kernels.UNARY_EXPRS``
  / ``BINARY_EXPRS``, through the very ``unary_expr`` / ``binary_expr`` the unfused kernels use
  (operands of a binary op have one dtype: the program casts explicitly);
* ``("where", rc, r1, r2)``: ``r1`` where ``rc`` else ``r2``;
* ``("cast", r, dtype_name)``: ``cube.cast`` to that dtype (as the unfused cast kernel);
* ``("out", k, r)``: store register r to output k (dtypes must match).

Dtype names are ember's (``"float16"``) or cube's (``"f16"``). Operands the unfused op takes
as runtime scalars should stay ``("scalar", k)``: a ``const`` is a literal the C compiler may
fold (``pow(x, 2.0)`` becomes ``x * x``, which libm's ``pow`` rounds differently). The program is expanded at
compile time into straight-line code over registers (a comptime list of runtime values); each
distinct program, input/output dtypes and layout compiles once.

Exactness against the unfused kernels: the same expressions, and the same rounding points. An
unfused op on half types computes in f32 and rounds once, at its store; here a half-typed
register is rounded to its type right after the op that defines it, so the next op reads what
the unfused one would have loaded. Every load precedes every store in a unit, so an output may
reuse an input's buffer (each unit reads and writes only its own position).

Two forms, as the unfused family: **lines** (every operand contiguous with the output's
shape: one unit per line of N elements) and **strided** (one unit per output element, each
input through its strides: stride 0 broadcasts; outputs are contiguous).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .... import cube
from .... import dtype as dt
from ....cube import (
    ABSOLUTE_POS,
    CUBE_DIM,
    CUBE_POS,
    UNIT_POS,
    Array,
    Comptime,
    Line,
    Scalar,
    Sequence,
    T,
    bf16,
    elem_of,
    f16,
    f32,
    function,
    kernel,
)
from ....cube.launch import CubeCount, CubeDim, lines
from ....cube.runtime.client import max_line_bytes
from ....cube.runtime.tensor import CubeTensor, contiguous_strides
from ....cube.types import ELEMS, Elem, elem_of_dtype
from ..elementwise import _coalesce
from ..elementwise_kernels import binary_expr, strided_offset, unary_expr

__all__ = ["fused_lines", "fused_strided", "fused_rows", "run_fused", "check_program", "apply_step", "rounded",
           "literal", "elem_named"]

_DIM = CubeDim(256)
#: below this many elements the lines form uses width 1 (launch-bound; fewer kernel variants)
_SMALL = 4096
#: small strided launches are padded to this rank (one kernel variant for ranks 1..3)
_SMALL_RANK = 3
#: lines per unit of the lines form where a cube's units run in parallel (GPUs), from
#: ``_MANY_LINES`` lines on: two independent loads in flight per thread before the first
#: result is stored (H200, 8-op chain on 256M f32: 1.06x the copy floor with one line per
#: thread, 1.01x with two; bench/gpu_chain_variants.py)
_PER_UNIT = 2
_MANY_LINES = 1 << 16


def elem_named(name: str) -> Elem:
    """The cube element type of a dtype name (ember's ``float16`` or cube's ``f16``)."""
    e = ELEMS.get(name)
    return e if e is not None else elem_of_dtype(dt.as_dtype(name))


def literal(value: Any, name: str) -> Any:
    """A literal as a buffer of that dtype holds it (half types rounded now, at expansion)."""
    e = elem_named(name)
    if e is f16:
        return float(np.float16(value))
    if e is bf16:
        import ml_dtypes

        return float(ml_dtypes.bfloat16(value))
    if e.is_float:
        return float(value)
    if e.kind == "bool":
        return bool(value)
    return int(value)


# ----------------------------------------------------------------------------- expansion helpers
@function
def rounded(v):
    """A half-typed value rounded to its type (others as they are)."""
    e = elem_of(v)
    if e is f16 or e is bf16:
        return cube.cast(cube.cast(v, f32), e)
    return v


@function
def apply_step(regs, step: Comptime[tuple], scalars):
    """Run one instruction that touches no memory (appending its register); returns whether
    ``step`` was one (``in``, ``out`` and other memory instructions are the caller's)."""
    tag = step[0]
    if tag == "scalar":
        regs.append(scalars[step[1]])
        return True
    if tag == "const":
        regs.append(cube.cast(literal(step[1], step[2]), elem_named(step[2])))
        return True
    if tag == "unary":
        regs.append(rounded(unary_expr(regs[step[2]], 0, 0, step[1])))
        return True
    if tag == "binary":
        if step[1] == "pow":
            assert elem_of(regs[step[2]]).is_float, "integer pow is not fused (its loop runs at width 1)"
        regs.append(rounded(binary_expr(regs[step[2]], regs[step[3]], step[1])))
        return True
    if tag == "where":
        regs.append(cube.select(regs[step[1]], regs[step[2]], regs[step[3]]))
        return True
    if tag == "cast":
        regs.append(cube.cast(regs[step[1]], elem_named(step[2])))
        return True
    return False


@function
def _program(ins, outs, scalars, prog: Comptime[tuple], i, strided: Comptime[bool], rows: Comptime[tuple] = (),
             w: Comptime[int] = 1, flat: Comptime[tuple] = ()):
    """Interpret ``prog`` at unit position ``i``: registers are a comptime list of runtime
    values; stores are collected and emitted after every load. ``rows`` (the rows form) gives
    each input's mode: "l" a line along the row at its strided offset, "b" one element
    broadcast along the row (stride 0 there). ``flat`` (the horizontal fuser's segments, flat
    contiguous views in lines of width ``w``): "l" line ``i`` of the input, "b" its one element
    broadcast."""
    regs = []
    stores = []
    for step in prog:
        tag = step[0]
        if tag == "in":
            x = ins[step[1]]
            if flat:
                if flat[step[1]] == "l":
                    regs.append(x[i])
                elif w == 1:
                    regs.append(x[0])
                else:
                    regs.append(cube.line(x[0], w))
            elif rows:
                if rows[step[1]] == "l":
                    regs.append(x[strided_offset(x, i * w) // w])
                else:
                    regs.append(cube.line(x[strided_offset(x, i * w)], w))
            elif strided:
                regs.append(x[strided_offset(x, i)])
            else:
                regs.append(x[i])
        elif tag == "out":
            o = outs[step[1]]
            r = regs[step[2]]
            assert elem_of(r) is elem_of(o), f"output {step[1]} is {elem_of(o)!r}, register {step[2]} {elem_of(r)!r}"
            stores.append((o, r))
        else:
            assert apply_step(regs, step, scalars), f"unknown fused elementwise instruction {step!r}"
    for o, r in stores:
        o[i] = r


@kernel
def fused_lines(
    ins: Sequence[Array[Line[T]]],
    outs: Sequence[Array[Line[T]]],
    scalars: Sequence[Scalar],
    prog: Comptime[tuple],
    per_unit: Comptime[int] = 1,
):
    """Line i of every output from line i of every input; with ``per_unit`` > 1 a unit takes
    lines base + p * CUBE_DIM for p < per_unit (the units of a cube still read consecutive
    lines at each step: coalesced)."""
    if per_unit == 1:
        i = ABSOLUTE_POS
        if i < outs[0].len():
            _program(ins, outs, scalars, prog, i, False)
    else:
        base = CUBE_POS * CUBE_DIM * per_unit + UNIT_POS
        if base + (per_unit - 1) * CUBE_DIM < outs[0].len():
            # every line in range: no branch between the steps, so the compiler may issue the
            # later loads before the earlier results are computed
            for p in range(per_unit):
                _program(ins, outs, scalars, prog, base + p * CUBE_DIM, False)
        else:
            for p in range(per_unit):
                i = base + p * CUBE_DIM
                if i < outs[0].len():
                    _program(ins, outs, scalars, prog, i, False)


@kernel
def fused_strided(
    ins: Sequence[Array[T]], outs: Sequence[Array[T]], scalars: Sequence[Scalar], prog: Comptime[tuple]
):
    i = ABSOLUTE_POS
    if i < outs[0].len():
        _program(ins, outs, scalars, prog, i, True)


@kernel
def fused_rows(
    ins: Sequence[Array[Line[T]]], outs: Sequence[Array[Line[T]]], scalars: Sequence[Scalar], prog: Comptime[tuple],
    rows: Comptime[tuple], w: Comptime[int],
):
    """Lines of ``w`` along the rows of the output: a bias row, a per-row scale (a column
    broadcast along the row) or a slice reads in lines or as one element per line."""
    i = ABSOLUTE_POS
    if i < outs[0].len():
        _program(ins, outs, scalars, prog, i, False, rows, w)


def _rows_form(n: int, views: list[CubeTensor], outs: list[CubeTensor]) -> tuple[tuple[str, ...], int] | None:
    """Per-input modes and the line width of the rows form for coalesced ``views``, or None:
    every input is contiguous along the row ("l": its row length, other strides and offset
    multiples of the width) or constant along it ("b": stride 0)."""
    if n < _SMALL or not views:
        return None
    inner = views[0].shape[-1]
    limit = max_line_bytes(views[0].client)
    w = 16
    for t in (*views, *outs):
        while w > 1 and w * t.dtype.itemsize > limit:
            w //= 2
    modes = []
    for v in views:
        if v.strides[-1] == 0:
            modes.append("b")
            continue
        if v.strides[-1] != 1:
            return None
        while w > 1 and (inner % w or v.offset % w or any(st % w for st in v.strides[:-1])):
            w //= 2
        modes.append("l")
    if w < min(4, limit // 4) or inner % w:
        return None
    return tuple(modes), w


# ----------------------------------------------------------------------------- launcher
def check_program(prog: tuple[Any, ...], n_inputs: int, n_scalars: int, n_outputs: int) -> None:
    """Structural checks (register numbers, input/scalar/output indices); dtype errors surface
    at expansion with the kernel language's messages."""
    nreg = 0
    written = set()
    for step in prog:
        tag = step[0]
        refs: tuple[Any, ...] = ()
        if tag == "in":
            if not 0 <= step[1] < n_inputs:
                raise ValueError(f"{step!r}: the launch has {n_inputs} inputs")
        elif tag == "scalar":
            if not 0 <= step[1] < n_scalars:
                raise ValueError(f"{step!r}: the launch has {n_scalars} scalars")
        elif tag == "unary":
            refs = (step[2],)
        elif tag in ("binary", "where"):
            refs = step[-3:] if tag == "where" else step[2:4]
        elif tag == "cast":
            refs = (step[1],)
        elif tag == "out":
            if not 0 <= step[1] < n_outputs:
                raise ValueError(f"{step!r}: the launch has {n_outputs} outputs")
            refs = (step[2],)
            written.add(step[1])
        elif tag != "const":
            raise ValueError(f"unknown fused elementwise instruction {step!r}")
        for r in refs:
            if not (type(r) is int and 0 <= r < nreg):
                raise ValueError(f"{step!r} reads register {r!r}, but only {nreg} are defined before it")
        if tag != "out":
            nreg += 1
    if written != set(range(n_outputs)):
        raise ValueError(f"the program writes outputs {sorted(written)}, the launch has {n_outputs}")


def _count(units: int) -> CubeCount:
    return CubeCount(1) if units <= _DIM.x else CubeCount.covering(units, _DIM)


def _line_width(n: int, ts: list[CubeTensor]) -> int:
    """The widest line (<= the runtime's max line bytes, power of two <= 16) dividing ``n``
    and every offset."""
    if n < _SMALL:
        return 1
    limit = max_line_bytes(ts[0].client) if ts else 64
    w = 16
    for t in ts:
        while w > 1 and (w * t.dtype.itemsize > limit or n % w or t.offset % w):
            w //= 2
    return w


def run_fused(
    backend: Any,
    prog: tuple[Any, ...],
    inputs: list[CubeTensor],
    scalars: list[tuple[Any, Any]] | tuple[tuple[Any, Any], ...],
    out_shapes_dtypes: list[tuple[tuple[int, ...], dt.DType]],
    inplace: dict[int, int] | None = None,
) -> list[CubeTensor]:
    """Run ``prog`` over ``inputs`` (each broadcastable to the outputs' shape) and return the
    outputs (fresh contiguous buffers from ``backend._empty``, or, for ``inplace[k] = j``,
    input j's buffer when it has output k's dtype and shape, is contiguous from offset 0 and
    no other input shares its buffer).

    ``scalars`` are ``(value, dtype)`` pairs; the program's ``("scalar", k)`` has that dtype."""
    if not out_shapes_dtypes:
        return []
    shape = tuple(out_shapes_dtypes[0][0])
    for s, _ in out_shapes_dtypes:
        if tuple(s) != shape:
            raise ValueError(f"fused elementwise outputs must share one shape, got {[s for s, _ in out_shapes_dtypes]}")
    n = math.prod(shape)
    outs: list[CubeTensor] = []
    used: set[int] = set()
    for k, (_, d) in enumerate(out_shapes_dtypes):
        j = None if inplace is None else inplace.get(k)
        if j is not None and j not in used and _donatable(inputs, j, shape, d):
            used.add(j)
            t = inputs[j]
            outs.append(t.with_layout(shape, contiguous_strides(shape), 0))
        else:
            outs.append(backend._empty(shape, d))
    if n == 0:
        return outs
    client = backend.client
    flat = (n,)
    unit = (1,)
    scalars = tuple(scalars)
    fouts = [o.with_layout(flat, unit, 0) for o in outs]
    if all(t.shape == shape and t.is_contiguous() for t in inputs):
        views = [t.with_layout(flat, unit, t.offset) for t in inputs]
    else:
        views = _coalesce(shape, inputs) if inputs else []
        if any(len(v.shape) != 1 or v.strides[0] != 1 for v in views):
            form = None if any(step[0] == "unary" and step[1] == "sign" for step in prog) else _rows_form(
                n, views, fouts)
            if form is not None:
                modes, w = form
                fused_rows.launch(
                    client, _count(n // w), _DIM,
                    tuple(lines(v, w) if m == "l" else v for v, m in zip(views, modes)),
                    tuple(lines(o, w) for o in fouts), scalars, prog, modes, w,
                )
                return outs
            if n < _SMALL and len(views[0].shape) < _SMALL_RANK:
                k = _SMALL_RANK - len(views[0].shape)
                views = [v.with_layout((1,) * k + v.shape, (0,) * k + v.strides, v.offset) for v in views]
            fused_strided.launch(client, _count(n), _DIM, tuple(views), tuple(fouts), scalars, prog)
            return outs
    # width 1 for u8 sign (GCC 12's SLP vectoriser bug, see elementwise_kernels); conservative
    w = 1 if any(step[0] == "unary" and step[1] == "sign" for step in prog) else _line_width(n, views + fouts)
    if w == 1:
        fused_lines.launch(client, _count(n), _DIM, tuple(views), tuple(fouts), scalars, prog)
    else:
        nl = n // w
        per = _PER_UNIT if nl >= _MANY_LINES and client.name != "cpu" else 1
        fused_lines.launch(
            client,
            _count(-(-nl // per)),
            _DIM,
            tuple(lines(v, w) for v in views),
            tuple(lines(o, w) for o in fouts),
            scalars,
            prog,
            per,
        )
    return outs


def _donatable(inputs: list[CubeTensor], j: int, shape: tuple[int, ...], d: dt.DType) -> bool:
    t = inputs[j]
    if not (0 <= j < len(inputs)) or t.dtype is not d or t.shape != shape or t.offset or not t.is_contiguous():
        return False
    # another view of the same buffer may read a position some other unit has written
    return not any(u.buffer is t.buffer for k, u in enumerate(inputs) if k != j)
