"""The GPU-shaped matmul kernel of the Cube backend: block tiles staged through shared memory,
a register block of line accumulators per unit, vectorised global and shared accesses.

``out[..., i, j] = sum_t a[..., i, t] * b[..., t, j]``, one cube per ``bm x bn`` block of one
batch entry (cube grid: (n blocks, m blocks, batch)), ``(bn / tn) * (bm / tm)`` units per cube,
each unit accumulating ``tm`` rows x ``tn / 4`` lines of 4 columns.

Shared memory, in lines of 4 like every accumulator (so each shared access is one 16-byte
access on targets with vectors):

* ``sa``: the A tile, in one of two layouts (comptime ``at``):

  - row-major (``at=False``): ``bm`` rows of ``bk / 4`` lines along k. A unit reads its ``tm``
    rows one line at a time, which gives it 4 consecutive k steps per read; the inner loop
    takes lane ``j`` of each row's line as the broadcast scalar of step ``j``. This reads
    shared memory exactly as often per FMA as the k-major layout (``tm`` + ``4 * tn / 4``
    line reads per ``4 * tm * tn`` FMAs) and stages global lines of A unchanged, at the cost
    of ``tm`` lines of A held in registers per 4 k steps;
  - k-major (``at=True``, A "transposed"): ``bk`` rows of ``bm / 4`` lines along m, so each k
    step reads ``tm / 4`` lines. A staging unit loads the same k line of 4 consecutive rows
    and transposes the 4 x 4 block in registers before storing it (fewer registers in the
    inner loop, more work and bank conflicts when staging).

  Either way the units of a quarter-warp share their rows (``tx`` varies fastest), so A reads
  are broadcasts.
* ``sb``: the B tile, ``bk`` rows of ``bn / 4`` lines along n. Unit ``tx`` owns columns
  ``q * bn / (tn/4) + 4 * tx + (0..3)`` for ``q < tn / 4`` (not ``tn`` adjacent columns):
  consecutive units read consecutive lines (no bank conflicts) and store consecutive lines
  of ``out`` (coalesced).

Global loads: A in lines of ``width_of(a)`` along k, B in lines of ``width_of(b)`` along n (4
when the launcher found the operand contiguous along that axis with every other stride, the
offset and the axis length multiples of 4; else 1: scalar loads through the strides, which
serves transposed and sliced views). Each unit stages ``ceil(tile lines / units)`` lines of
each tile. With ``db`` (double buffering) the next tile's lines are loaded into registers
before the current tile's products, stored to the other shared buffer after them, and one
``sync_cube`` per k step separates the phases; without it a k step is load, sync, compute,
sync.

Bounds: a cube whose block lies inside (m, n) and a k step inside k load without checks; the
others (edge blocks, the k tail) take the guarded copy of the load code, chosen by a branch
that is uniform across the cube, and stage zeros past the edges, so the products need no
checks. Stores test the cube's ``interior`` flag first (short-circuit), so only edge blocks
compare indices. With lines of 4 a line is wholly in or out (the launcher picks 4 only when
the axis length is a multiple of 4).

Floats accumulate with ``fma`` (``use_fma``); integers multiply-add exactly (the kernel is
generic so the CPU tests can exercise it on every dtype). Half types hold registers in f32, so
they accumulate in f32 and round once at the store.
"""

from __future__ import annotations

from ...cube import (
    CUBE_DIM,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS,
    Comptime,
    Line,
    SharedMemory,
    T,
    Tensor,
    function,
    kernel,
    line,
    occupancy,
    sync_cube,
    u32,
    width_of,
)
from .matmul_kernels import _mac

__all__ = ["matmul_gpu"]


@function
def _gather(x, base, step, w: Comptime[int]):
    """A line of 4 elements of ``x`` starting at element ``base``: one load of a line when
    ``x`` is read in lines of 4 (``base`` then is a multiple of 4), else 4 scalar loads
    ``step`` elements apart."""
    if w == 4:
        return x[base // 4]
    v = line(x[base], 4)
    v[1] = x[base + step]
    v[2] = x[base + 2 * step]
    v[3] = x[base + 3 * step]
    return v


@function
def _gather_guarded(x, base, step, w: Comptime[int], inside, first, limit):
    """``_gather`` with elements past the matrix edge read as 0: ``inside`` tells whether the
    other axis is in range; lane ``l`` lies at index ``first + l`` of an axis of ``limit``."""
    v = line(T(0), 4)
    if w == 4:
        if inside and first < limit:
            v = x[base // 4]
    else:
        if inside:
            for l in range(4):  # comptime: unrolled
                if first + l < limit:
                    v[l] = x[base + l * step]
    return v


@function
def _load_a(a, regs, off, sam, sak, m0, t0, m, k, full, kq: Comptime[int], tile: Comptime[int], at: Comptime[bool]):
    """Registers ``regs`` = this unit's lines (along k) of the A tile at rows ``m0..``, k ``t0..``
    (``tile`` lines, ``kq`` per row). Work item ``UNIT_POS + s * CUBE_DIM`` is one line, or with
    ``at`` (A staged k-major) the same line of 4 consecutive rows, which ``_stage_t``
    transposes. Unchecked loads where ``full`` (uniform across the cube: the tile lies inside
    the matrix), zeros past the edges else."""
    w = width_of(a)
    per = 4 if at else 1
    items = tile // per
    for s in range(len(regs) // per):  # comptime: unrolled
        idx = UNIT_POS + s * CUBE_DIM
        if (len(regs) // per) * CUBE_DIM == items or idx < items:
            kc = t0 + (idx % kq) * 4
            for p in range(per):
                row = m0 + (idx // kq) * per + p
                if full:
                    regs[s * per + p] = _gather(a, off + row * sam + kc * sak, sak, w)
                else:
                    regs[s * per + p] = _gather_guarded(a, off + row * sam + kc * sak, sak, w, row < m, kc, k)


@function
def _load_b(b, regs, off, sbk, sbn, n0, t0, n, k, full, bq: Comptime[int], tile: Comptime[int]):
    """As ``_load_a`` for the B tile at k ``t0..``, columns ``n0..`` (``bq`` lines per row)."""
    w = width_of(b)
    for s in range(len(regs)):
        idx = UNIT_POS + s * CUBE_DIM
        if len(regs) * CUBE_DIM == tile or idx < tile:
            kr = t0 + idx // bq
            col = n0 + (idx % bq) * 4
            if full:
                regs[s] = _gather(b, off + kr * sbk + col * sbn, sbn, w)
            else:
                regs[s] = _gather_guarded(b, off + kr * sbk + col * sbn, sbn, w, kr < k, col, n)


@function
def _stage(sm, regs, base, tile: Comptime[int]):
    """Shared lines ``base + UNIT_POS + s * CUBE_DIM`` = ``regs[s]`` (the layout of the loads)."""
    for s in range(len(regs)):
        idx = UNIT_POS + s * CUBE_DIM
        if len(regs) * CUBE_DIM == tile or idx < tile:
            sm[base + idx] = regs[s]


@function
def _stage_t(sm, regs, base, rows: Comptime[int], kq: Comptime[int], tile: Comptime[int]):
    """The A tile k-major: the 4 lines a work item of ``_load_a(at=True)`` holds (rows
    ``4 * rq + p`` at k line ``c``) transposed in registers into 4 lines along m, stored at
    ``base + (4 * c + j) * rows / 4 + rq``."""
    for s in range(len(regs) // 4):
        idx = UNIT_POS + s * CUBE_DIM
        if (len(regs) // 4) * CUBE_DIM == tile // 4 or idx < tile // 4:
            c = idx % kq
            rq = idx // kq
            for j in range(4):
                v = line(regs[4 * s][j], 4)
                v[1] = regs[4 * s + 1][j]
                v[2] = regs[4 * s + 2][j]
                v[3] = regs[4 * s + 3][j]
                sm[base + (c * 4 + j) * (rows // 4) + rq] = v


@function
def _stage_a(sm, regs, base, rows: Comptime[int], kq: Comptime[int], tile: Comptime[int], at: Comptime[bool]):
    """The A tile from the registers of ``_load_a``, in the layout ``at`` selects."""
    if at:
        _stage_t(sm, regs, base, rows, kq, tile)
    else:
        _stage(sm, regs, base, tile)


@function
def _load(a, b, ra, rb, offa, offb, sam, sak, sbk, sbn, m0, n0, t0, m, n, k, full,
          kq: Comptime[int], bq: Comptime[int], a_lines: Comptime[int], b_lines: Comptime[int], at: Comptime[bool]):
    """Both tiles of the k step at ``t0`` into registers."""
    _load_a(a, ra, offa, sam, sak, m0, t0, m, k, full, kq, a_lines, at)
    _load_b(b, rb, offb, sbk, sbn, n0, t0, n, k, full, bq, b_lines)


@kernel
def matmul_gpu(
    a: Tensor[Line[T]],
    b: Tensor[Line[T]],
    out: Tensor[Line[T]],
    bm: Comptime[int],
    bn: Comptime[int],
    bk: Comptime[int],
    tm: Comptime[int],
    tn: Comptime[int],
    use_fma: Comptime[bool],
    db: Comptime[bool],
    at: Comptime[bool],
    occ: Comptime[int] = 1,
):
    """See the module docstring. Launch with ``CubeDim((bn // tn) * (bm // tm))``; ``occ``: cubes
    per multiprocessor to fit (a register cap on CUDA, ``cube.occupancy``)."""
    occupancy(occ)
    wo = width_of(out)
    ux = bn // tn  # units along n
    nq = tn // 4  # accumulator lines per row of a unit's block
    kq = bk // 4  # lines per row of the A tile
    bq = bn // 4  # lines per row of the B tile
    a_lines = bm * kq
    b_lines = bk * bq
    nu = CUBE_DIM
    assert nu == ux * (bm // tm) and bm % tm == 0 and bn % tn == 0 and tn % 4 == 0 and bk % 4 == 0
    assert tm % 4 == 0 or not at
    if at:
        la = 4 * ((a_lines // 4 + nu - 1) // nu)  # lines of the A tile each unit stages
    else:
        la = (a_lines + nu - 1) // nu
    lb = (b_lines + nu - 1) // nu
    nbuf = 2 if db else 1
    sa = SharedMemory(T, nbuf * a_lines, 4)
    sb = SharedMemory(T, nbuf * b_lines, 4)

    r = out.rank()
    m = out.shape(r - 2)
    n = out.shape(r - 1)
    k = a.shape(r - 1)
    u = UNIT_POS
    tx = u % ux
    ty = u // ux
    m0 = CUBE_POS_Y * bm
    n0 = CUBE_POS_X * bn
    z = CUBE_POS_Z
    offa = u32(0)
    offb = u32(0)
    offo = u32(0)
    for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
        sd = out.shape(d)
        bi = z % sd
        z = z // sd
        offa += bi * a.stride(d)
        offb += bi * b.stride(d)
        offo += bi * out.stride(d)
    sam = a.stride(r - 2)
    sak = a.stride(r - 1)
    sbk = b.stride(r - 2)
    sbn = b.stride(r - 1)
    som = out.stride(r - 2)
    interior = m0 + bm <= m and n0 + bn <= n  # uniform across the cube

    # registers: the staged lines (tile line u + s * units) and the accumulators
    zero = line(T(0), 4)
    ra = []
    for _ in range(la):
        ra.append(zero)
    rb = []
    for _ in range(lb):
        rb.append(zero)
    acc = []
    for _ in range(tm * nq):
        acc.append(zero)

    ntiles = (k + (bk - 1)) // bk
    if db:
        # stage tile 0; each step then loads tile t + 1 into registers before multiplying
        # tile t and stores it to the other buffer after: one barrier per step
        _load(a, b, ra, rb, offa, offb, sam, sak, sbk, sbn, m0, n0, u32(0), m, n, k,
              interior and bk <= k, kq, bq, a_lines, b_lines, at)
        _stage_a(sa, ra, u32(0), bm, kq, a_lines, at)
        _stage(sb, rb, u32(0), b_lines)
        sync_cube()
    for t in range(ntiles):  # runtime loop, barriers inside (uniform: every unit runs it)
        cur = u32(0)
        if db:
            cur = t % 2
            t1 = (t + 1) * bk
            if t + 1 < ntiles:
                _load(a, b, ra, rb, offa, offb, sam, sak, sbk, sbn, m0, n0, t1, m, n, k,
                      interior and t1 + bk <= k, kq, bq, a_lines, b_lines, at)
        else:
            t1 = t * bk
            _load(a, b, ra, rb, offa, offb, sam, sak, sbk, sbn, m0, n0, t1, m, n, k,
                  interior and t1 + bk <= k, kq, bq, a_lines, b_lines, at)
            _stage_a(sa, ra, u32(0), bm, kq, a_lines, at)
            _stage(sb, rb, u32(0), b_lines)
            sync_cube()

        # products of the staged tile: per line of A (4 k steps), tm A lines and per k step
        # nq B lines feed tm * nq line FMAs
        abase = cur * a_lines + ty * (tm // 4 if at else tm * kq)
        bbase = cur * b_lines + tx
        for c in range(kq):  # comptime: unrolled
            al = []
            if not at:
                for i in range(tm):
                    al.append(sa[abase + i * kq + c])
            for j in range(4):
                if at:  # k-major A: per k step, tm / 4 lines of this unit's rows
                    al = []
                    for p in range(tm // 4):
                        al.append(sa[abase + (c * 4 + j) * (bm // 4) + p])
                bl = []
                for q in range(nq):
                    bl.append(sb[bbase + (c * 4 + j) * bq + q * ux])
                for i in range(tm):
                    av = al[i // 4][i % 4] if at else al[i][j]
                    for q in range(nq):
                        acc[i * nq + q] = _mac(acc[i * nq + q], bl[q], av, use_fma)

        if db:
            if t + 1 < ntiles:
                _stage_a(sa, ra, (1 - cur) * a_lines, bm, kq, a_lines, at)
                _stage(sb, rb, (1 - cur) * b_lines, b_lines)
        sync_cube()

    # ------------------------------------------------------------------ store
    for i in range(tm):
        row = m0 + ty * tm + i
        for q in range(nq):
            col = n0 + q * ux * 4 + tx * 4
            o = offo + row * som + col
            v = acc[i * nq + q]
            if wo == 4:
                if interior or (row < m and col < n):
                    out[o // 4] = v
            else:
                if row < m:
                    for l in range(4):
                        if interior or col + l < n:
                            out[o + l] = v[l]
