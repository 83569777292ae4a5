"""Matmul kernels of the Cube backend, in the kernel language (generic over element type).

Three families, all computing ``out[..., i, j] = sum_t a[..., i, t] * b[..., t, j]``:

* ``matmul_naive`` lives in ``kernels.py`` (one unit per output element, any strides);
* ``matmul_tiled``: the GPU-classic cube-level tiles staged in shared memory, two
  ``sync_cube()`` per K step; any strides, batch dims through the cube's z position;
* ``pack_panels`` + ``matmul_blocked``: the register-blocked, vectorised CPU path. Both
  operands are first packed into zero-padded *panels* (GotoBLAS style): A into row panels of
  ``MR`` rows stored k-major (``MR`` consecutive scalars per k step), B into column panels of
  ``NR = NL * W`` columns stored k-major (``NL`` lines of ``W`` per k step). Each unit of the
  microkernel then streams one A panel and one B panel contiguously and keeps an ``MR x NR``
  tile of C in ``NL * MR`` line registers: one broadcast scalar times ``NL`` lines per row
  and k step, which the C compiler turns into SIMD multiply-adds. Zero padding makes edge
  tiles compute like interior ones; only the stores are guarded.

Invariants shared by the launchers (``matmul.py``): every index is ``u32`` (tensors stay
below 2**32 elements), ``out`` is a fresh contiguous (batch..., m, n) tensor, and batch dims
arrive either broadcast already (expanded views with zero strides) or, for packed panels,
as the operand's own batch dims expanded to the output's with zero strides -- a broadcast
operand is packed once, never once per output batch.

Half types (f16/bf16) hold registers in f32 (the compiler's register type), so every
accumulator here accumulates in f32 and rounds once at the store.
"""

from __future__ import annotations

from ...cube import (
    ABSOLUTE_POS,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS_X,
    UNIT_POS_Y,
    Array,
    Comptime,
    Line,
    SharedMemory,
    T,
    Tensor,
    fma,
    function,
    kernel,
    line,
    sync_cube,
    u32,
)

__all__ = ["matmul_tiled", "pack_panels", "matmul_blocked", "MR_MAX"]

#: the microkernel's tile is a comptime ``mr x nl`` lines with mr <= MR_MAX and nl in (2, 3):
#: its accumulators are spelled out as variables (the rest vanish at expansion)
MR_MAX = 8


# --------------------------------------------------------------------------- tiled (shared memory)


@kernel
def matmul_tiled(a: Tensor[T], b: Tensor[T], out: Tensor[T], tile: Comptime[int]):
    """Cube (tile x tile units) computes a tile x tile block of one batch entry; the A and B
    tiles of each K step are staged in shared memory (out-of-range elements staged as 0, so
    edge blocks need no special case). Cube grid: (n tiles, m tiles, batch)."""
    sa = SharedMemory(T, tile * tile)
    sb = SharedMemory(T, tile * tile)
    r = out.rank()
    m = out.shape(r - 2)
    n = out.shape(r - 1)
    k = a.shape(r - 1)
    ty = UNIT_POS_Y
    tx = UNIT_POS_X
    row = CUBE_POS_Y * tile + ty
    col = CUBE_POS_X * tile + tx
    z = CUBE_POS_Z
    offa = u32(0)
    offb = u32(0)
    offo = u32(0)
    for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
        s = out.shape(d)
        bi = z % s
        z = z // s
        offa += bi * a.stride(d)
        offb += bi * b.stride(d)
        offo += bi * out.stride(d)
    sam = a.stride(r - 2)
    sak = a.stride(r - 1)
    sbk = b.stride(r - 2)
    sbn = b.stride(r - 1)
    acc = T(0)
    for t0 in range(0, k, tile):  # runtime loop with barriers inside
        ac = t0 + tx
        if row < m and ac < k:
            sa[ty * tile + tx] = a[offa + row * sam + ac * sak]
        else:
            sa[ty * tile + tx] = T(0)
        br = t0 + ty
        if br < k and col < n:
            sb[ty * tile + tx] = b[offb + br * sbk + col * sbn]
        else:
            sb[ty * tile + tx] = T(0)
        sync_cube()
        for kk in range(tile):  # comptime: unrolled
            acc += sa[ty * tile + kk] * sb[kk * tile + tx]
        sync_cube()
    if row < m and col < n:
        out[offo + row * out.stride(r - 2) + col * out.stride(r - 1)] = acc


# --------------------------------------------------------------------------- packing


@kernel
def pack_panels(src: Tensor[T], out: Array[T], width: Comptime[int], rows: Comptime[bool]):
    """Pack the matrices of ``src`` (batch..., R, C) into zero-padded panels of ``width``.

    ``rows=True`` (the A operand): panels of ``width`` rows; layout (batch, R/width, C, width).
    ``rows=False`` (the B operand): panels of ``width`` columns; layout (batch, C/width, R, width).
    Either way the k axis is the middle one, so the microkernel reads one panel as a
    contiguous stream of ``width`` elements per k step. One unit per (batch, panel, k) writes
    those ``width`` elements (one div/mod chain per ``width`` elements); elements past the
    matrix edge are written as 0 (the microkernel relies on that)."""
    i = ABSOLUTE_POS
    if i < out.len() // width:
        r = src.rank()
        pd = r - 2 if rows else r - 1  # the panelled axis
        kd = r - 1 if rows else r - 2  # the k axis
        p_len = src.shape(pd)
        k = src.shape(kd)
        n_panels = (p_len + (width - 1)) // width
        kk = i % k
        rest = i // k
        p = rest % n_panels
        rest = rest // n_panels
        off = u32(0)
        for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
            s = src.shape(d)
            off += (rest % s) * src.stride(d)
            rest = rest // s
        sp = src.stride(pd)
        p0 = p * width
        base = off + kk * src.stride(kd) + p0 * sp
        o = i * width
        if p0 + width <= p_len:  # a full panel: no bounds checks
            for q in range(width):  # comptime: unrolled
                out[o + q] = src[base + q * sp]
        else:
            for q in range(width):
                if p0 + q < p_len:
                    out[o + q] = src[base + q * sp]
                else:
                    out[o + q] = T(0)


# --------------------------------------------------------------------------- register-blocked


@function
def _mac(c, x, y, use_fma: Comptime[bool]):
    """c + x * y: ``use_fma`` (floats only) fuses it, one rounding (the C target compiles with
    -ffp-contract=off, so a*b+c stays two operations); otherwise a multiply and an add --
    native vector operators, exact for integers, two roundings for floats."""
    if use_fma:
        return fma(x, y, c)
    return c + x * y


@function
def _store_row(out, base, row, m, n, j0, c0, c1, c2, w: Comptime[int], nl: Comptime[int]):
    """Store one row of the tile (``nl`` lines) where it lies inside the (m, n) matrix."""
    if row < m:
        o = base + row * n + j0
        for q in range(w):  # comptime: unrolled
            if j0 + q < n:
                out[o + q] = c0[q]
        for q in range(w):
            if j0 + w + q < n:
                out[o + w + q] = c1[q]
        if nl > 2:
            for q in range(w):
                if j0 + 2 * w + q < n:
                    out[o + 2 * w + q] = c2[q]


@kernel
def matmul_blocked(
    pa: Tensor[T],
    pb: Tensor[Line[T]],
    out: Tensor[T],
    mr: Comptime[int],
    nl: Comptime[int],
    use_fma: Comptime[bool],
):
    """One unit = one ``mr x nl*W`` tile of C (W = pb's line width), from packed panels.

    ``pa``: (batch..., m panels, k * mr) scalars; ``pb``: (batch..., n panels, k * nl*W) in
    lines of W; both broadcast over the output's batch dims through zero strides; ``out``:
    contiguous (batch..., m, n). Cube grid (m panels, n panels, batch): consecutive cubes --
    which OpenMP's static schedule gives to one thread -- share a B panel, so it stays in
    cache while A panels stream past it. Accumulators are ``nl * mr`` line variables, spelled
    out (rows past ``mr``, lines past ``nl`` vanish at expansion), which the C compiler keeps
    in vector registers."""
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
    for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
        s = out.shape(d)
        bi = z % s
        z = z // s
        la += bi * pa.stride(d)
        lb += bi * (pb.stride(d) // w)
        oo += bi * out.stride(d)
    zero = line(T(0), w)
    c00 = zero
    c01 = zero
    c02 = zero
    c10 = zero
    c11 = zero
    c12 = zero
    c20 = zero
    c21 = zero
    c22 = zero
    c30 = zero
    c31 = zero
    c32 = zero
    c40 = zero
    c41 = zero
    c42 = zero
    c50 = zero
    c51 = zero
    c52 = zero
    c60 = zero
    c61 = zero
    c62 = zero
    c70 = zero
    c71 = zero
    c72 = zero
    for _ in range(k):
        b0 = pb[lb]
        b1 = pb[lb + 1]
        b2 = zero
        if nl > 2:
            b2 = pb[lb + 2]
        a0 = pa[la]
        c00 = _mac(c00, b0, a0, use_fma)
        c01 = _mac(c01, b1, a0, use_fma)
        if nl > 2:
            c02 = _mac(c02, b2, a0, use_fma)
        if mr > 1:
            a1 = pa[la + 1]
            c10 = _mac(c10, b0, a1, use_fma)
            c11 = _mac(c11, b1, a1, use_fma)
            if nl > 2:
                c12 = _mac(c12, b2, a1, use_fma)
        if mr > 2:
            a2 = pa[la + 2]
            c20 = _mac(c20, b0, a2, use_fma)
            c21 = _mac(c21, b1, a2, use_fma)
            if nl > 2:
                c22 = _mac(c22, b2, a2, use_fma)
        if mr > 3:
            a3 = pa[la + 3]
            c30 = _mac(c30, b0, a3, use_fma)
            c31 = _mac(c31, b1, a3, use_fma)
            if nl > 2:
                c32 = _mac(c32, b2, a3, use_fma)
        if mr > 4:
            a4 = pa[la + 4]
            c40 = _mac(c40, b0, a4, use_fma)
            c41 = _mac(c41, b1, a4, use_fma)
            if nl > 2:
                c42 = _mac(c42, b2, a4, use_fma)
        if mr > 5:
            a5 = pa[la + 5]
            c50 = _mac(c50, b0, a5, use_fma)
            c51 = _mac(c51, b1, a5, use_fma)
            if nl > 2:
                c52 = _mac(c52, b2, a5, use_fma)
        if mr > 6:
            a6 = pa[la + 6]
            c60 = _mac(c60, b0, a6, use_fma)
            c61 = _mac(c61, b1, a6, use_fma)
            if nl > 2:
                c62 = _mac(c62, b2, a6, use_fma)
        if mr > 7:
            a7 = pa[la + 7]
            c70 = _mac(c70, b0, a7, use_fma)
            c71 = _mac(c71, b1, a7, use_fma)
            if nl > 2:
                c72 = _mac(c72, b2, a7, use_fma)
        lb += nl
        la += mr
    i0 = ti * mr
    j0 = tj * nl * w
    _store_row(out, oo, i0, m, n, j0, c00, c01, c02, w, nl)
    if mr > 1:
        _store_row(out, oo, i0 + 1, m, n, j0, c10, c11, c12, w, nl)
    if mr > 2:
        _store_row(out, oo, i0 + 2, m, n, j0, c20, c21, c22, w, nl)
    if mr > 3:
        _store_row(out, oo, i0 + 3, m, n, j0, c30, c31, c32, w, nl)
    if mr > 4:
        _store_row(out, oo, i0 + 4, m, n, j0, c40, c41, c42, w, nl)
    if mr > 5:
        _store_row(out, oo, i0 + 5, m, n, j0, c50, c51, c52, w, nl)
    if mr > 6:
        _store_row(out, oo, i0 + 6, m, n, j0, c60, c61, c62, w, nl)
    if mr > 7:
        _store_row(out, oo, i0 + 7, m, n, j0, c70, c71, c72, w, nl)
