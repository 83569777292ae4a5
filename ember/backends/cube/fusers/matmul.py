"""Matmul with an elementwise *epilogue* applied where the product is written (bias add,
gelu, relu, scale, a cast...): one kernel instead of a matmul and an elementwise pass.

The kernel is the register-blocked microkernel of ``backends/cube/matmul_kernels.py``
(packed panels, an ``mr x nl`` tile of line accumulators per unit, the same ``_mac``), with
its accumulators held in a comptime list of registers; at the store each element of the
tile runs the epilogue program. The program is ``elementwise_kernel``'s encoding plus
``("acc",)``: the product at this element, rounded to the matmul's dtype as the unfused
matmul's store would round it. ``("in", k)`` reads extra input k (a bias row, a residual)
at the element's (batch..., row, col) through its strides, so broadcast operands cost
nothing. The program ends with ``("out", 0, r)``; the output dtype is that register's.

Results equal the unfused ``blocked`` matmul candidate followed by the unfused elementwise
kernels, bit for bit (same accumulation order, same rounding points).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .... import cube
from .... import dtype as dt
from ....cube import (
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    Array,
    Comptime,
    ElemVar,
    Line,
    Scalar,
    Sequence,
    T,
    Tensor,
    elem_of,
    function,
    kernel,
    line,
    u32,
)
from ....cube.launch import CubeCount, CubeDim, lines
from ....cube.runtime.tensor import CubeTensor
from ..matmul import BLOCKED_MR, BLOCKED_NL, NAIVE_MAX_WORK, _pack, blocked_line_width
from ..matmul_kernels import _mac
from .elementwise_kernel import apply_step, rounded, run_fused

__all__ = ["matmul_epilogue", "run_matmul_epilogue"]

O = ElemVar("O")  # the output's element type (the epilogue may cast)
X = ElemVar("X")  # each extra input's own (bound per element of the sequence)


@function
def _load_extra(x, batch, row, col0, n, w: Comptime[int], full: Comptime[bool]):
    """Extra input ``x`` at columns ``col0 .. col0 + w - 1`` of ``row``, as a line of ``w``.

    An input passed in lines of ``w`` (last dim contiguous, the launcher checked that its
    size, other strides and offset are multiples of ``w``) is one line read; otherwise the
    lanes are gathered through the strides (``full``: every column is inside the matrix;
    else columns past ``n`` read column ``n - 1``, in bounds and never stored)."""
    rk = x.rank()
    base = row * x.stride(rk - 2)
    for d, bi in batch:
        base += bi * x.stride(d)
    if x.line_size() == w:
        return x[(base + col0) // w]
    sc = x.stride(rk - 1)
    if full:
        v = cube.line(x[base + col0 * sc], w)
        for q in range(1, w):  # comptime: unrolled
            v[q] = x[base + (col0 + q) * sc]
        return v
    last = n - 1
    v = cube.line(x[base + cube.min(col0, last) * sc], w)
    for q in range(1, w):
        v[q] = x[base + cube.min(col0 + q, last) * sc]
    return v


@function
def _epilogue(
    acc,
    extra,
    scalars,
    prog: Comptime[tuple],
    batch,
    row,
    col0,
    n,
    w: Comptime[int],
    full: Comptime[bool],
    out_elem: Comptime,
):
    """The program on one line of the tile (``w`` output elements from column ``col0``);
    returns the line to store."""
    regs = []
    result = 0
    found = False
    for step in prog:
        tag = step[0]
        if tag == "acc":
            regs.append(rounded(acc))
        elif tag == "in":
            regs.append(_load_extra(extra[step[1]], batch, row, col0, n, w, full))
        elif tag == "out":
            assert step[1] == 0, "a matmul epilogue writes one output"
            result = regs[step[2]]
            found = True
        else:
            assert apply_step(regs, step, scalars), f"unknown epilogue instruction {step!r}"
    assert found, "the epilogue program has no ('out', 0, r)"
    assert elem_of(result) is out_elem, f"the output is {out_elem!r} but the program's result is {elem_of(result)!r}"
    if w > 1 and cube.width_of(result) == 1:
        result = cube.line(result, w)  # a program that ignores the product (a constant)
    return result


@kernel
def matmul_epilogue(
    pa: Tensor[T],
    pb: Tensor[Line[T]],
    out: Tensor[O],
    extra: Sequence[Array[Line[X]]],
    scalars: Sequence[Scalar],
    prog: Comptime[tuple],
    mr: Comptime[int],
    nl: Comptime[int],
    use_fma: Comptime[bool],
):
    """``matmul_blocked`` (same panels, grid and accumulation) storing ``prog(acc, extra...)``.

    ``extra`` are views of the output's shape (zero strides where broadcast)."""
    r = out.rank()
    m = out.shape(r - 2)
    n = out.shape(r - 1)
    w = pb.line_size()
    k = pa.shape(r - 1) // mr
    ti = CUBE_POS_X
    tj = CUBE_POS_Y
    la = ti * pa.stride(r - 2)
    lb = tj * (pb.stride(r - 2) // w)  # strides count elements, pb is indexed in lines
    z = CUBE_POS_Z
    oo = u32(0)
    batch = []  # (dim, index) of this cube's batch entry, for the extra inputs' offsets
    for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
        s = out.shape(d)
        bi = z % s
        z = z // s
        la += bi * pa.stride(d)
        lb += bi * (pb.stride(d) // w)
        oo += bi * out.stride(d)
        batch.append((d, bi))
    zero = line(T(0), w)
    acc = []  # mr x nl line registers, carried through the k loop
    for _i in range(mr):
        tile_row = []
        for _j in range(nl):
            tile_row.append(zero)
        acc.append(tile_row)
    for _ in range(k):
        bl = []
        for j in range(nl):
            bl.append(pb[lb + j])
        for i in range(mr):
            av = pa[la + i]
            for j in range(nl):
                acc[i][j] = _mac(acc[i][j], bl[j], av, use_fma)
        lb += nl
        la += mr
    i0 = ti * mr
    j0 = tj * nl * w
    for i in range(mr):
        row = i0 + i
        if row < m:
            o = oo + row * n
            if j0 + nl * w <= n:  # the row of the tile lies inside the matrix: no lane checks
                for j in range(nl):
                    col0 = j0 + j * w
                    res = _epilogue(acc[i][j], extra, scalars, prog, batch, row, col0, n, w, True, elem_of(out))
                    for q in range(w):  # comptime: unrolled
                        out[o + col0 + q] = res[q]
            else:
                for j in range(nl):
                    col0 = j0 + j * w
                    if col0 < n:
                        res = _epilogue(acc[i][j], extra, scalars, prog, batch, row, col0, n, w, False, elem_of(out))
                        for q in range(w):
                            if col0 + q < n:
                                out[o + col0 + q] = res[q]


def _expanded(t: CubeTensor, shape: tuple[int, ...]) -> CubeTensor:
    """``t`` as a view of ``shape`` (numpy broadcasting: zero strides where it is broadcast)."""
    if t.shape == shape and 1 not in shape:  # nothing broadcast, no size-1 stride to zero: ``t`` itself
        return t
    k = len(shape) - len(t.shape)
    if k < 0:
        raise ValueError(f"an operand of shape {t.shape} does not broadcast to {shape}")
    strides = []
    for i, n in enumerate(shape):
        if i < k or t.shape[i - k] == 1:
            strides.append(0)
        elif t.shape[i - k] == n:
            strides.append(t.strides[i - k])
        else:
            raise ValueError(f"an operand of shape {t.shape} does not broadcast to {shape}")
    return t.with_layout(tuple(shape), tuple(strides), t.offset)


def _line_view(t: CubeTensor, w: int) -> Any:
    """``t`` in lines of ``w`` where the kernel may read whole lines of it: last dim contiguous
    and a multiple of ``w``, every other stride and the offset multiples of ``w``."""
    if t.shape[-1] % w == 0 and t.strides[-1] == 1 and t.offset % w == 0 and not any(s % w for s in t.strides[:-1]):
        return lines(t, w)
    return t


def run_matmul_epilogue(
    backend: Any,
    a: CubeTensor,
    b: CubeTensor,
    prog: tuple[Any, ...],
    extra: list[CubeTensor] | tuple[CubeTensor, ...] = (),
    scalars: list[tuple[Any, Any]] | tuple[tuple[Any, Any], ...] = (),
    out_dtype: dt.DType | None = None,
    use_fma: bool = True,
) -> CubeTensor:
    """``prog`` applied to ``a @ b`` (batched, batch dims broadcast) where it is written.

    ``out_dtype`` (default ``a``'s) must be the dtype of the program's output register.
    Tiny products (``m*n*k <= NAIVE_MAX_WORK``), an empty k and bool operands take the
    unfused matmul and one fused elementwise launch instead (two launches, same results as
    the unfused path)."""
    out_dtype = out_dtype or a.dtype
    bshape = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a = _expanded(a, bshape + a.shape[-2:])
    b = _expanded(b, bshape + b.shape[-2:])
    shape = bshape + (a.shape[-2], b.shape[-1])
    batch, m, k, n = math.prod(bshape), a.shape[-2], a.shape[-1], b.shape[-1]
    if a.dtype is dt.bool_ or k == 0 or m * n * k <= NAIVE_MAX_WORK:
        mm = backend.matmul(a, b)
        at = len(extra)
        prog2 = tuple(("in", at) if step[0] == "acc" else step for step in prog)
        return run_fused(backend, prog2, [*extra, mm], scalars, [(shape, out_dtype)])[0]
    out = backend._empty(shape, out_dtype)
    if not (batch and m and n):
        return out
    w = blocked_line_width(a.dtype)
    views = tuple(_line_view(_expanded(t, shape), w) for t in extra)
    lanes = BLOCKED_NL if n > 2 * w else 2
    mr = BLOCKED_MR
    pa = _pack(backend, a, mr, True, bshape)
    pb = _pack(backend, b, lanes * w, False, bshape)
    count = CubeCount(-(-m // mr), -(-n // (lanes * w)), batch)
    matmul_epilogue.launch(
        backend.client,
        count,
        CubeDim(1),
        pa,
        lines(pb, w),
        out,
        views,
        tuple(scalars),
        prog,
        mr,
        lanes,
        use_fma and a.dtype.is_floating_point,
    )
    return out
