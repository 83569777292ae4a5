"""Reduction kernels of the Cube backend, in the kernel language.

Two layouts cover every reduction (``reduce.py`` brings the input to one of them):

* **rows** -- the reduced axis is the contiguous one: the input is ``(rows, K)`` row-major,
  read in lines of ``w`` elements (``w`` divides ``K``). A row is split into ``splits`` chunks of
  ``CUBE_DIM * span`` lines, one cube per (row, chunk); each unit folds ``span`` lines into a
  line accumulator, then the lanes fold (``line_sum``), then the plane (``plane_sum``), then the
  planes through shared memory. When ``splits > 1`` the (rows, splits) partials go through the
  same kernel again. Accumulation is blocked (span lines per lane, then trees), so float32
  error grows like numpy's pairwise summation, not like one long serial sum.
* **cols** -- the reduced axis is strided: the input is ``(outer, K, inner)`` row-major with
  ``inner > 1``. Each unit owns one line of output columns and walks the reduced axis, so the
  units of a cube read consecutive lines of one row at a time (coalesced on a GPU). ``K`` is
  split into ``splits`` chunks of ``span`` rows (a cube per (outer, chunk, column block)) for
  parallelism and blocked accumulation; partials (outer, splits, inner) go through again.

``units_serial`` (comptime) says the target runs the units of a cube one after another on one
thread (the CPU runtime). The kernels then choose the memory order that suits that: in rows, a
unit takes ``span`` consecutive lines (instead of lines ``u, u + CUBE_DIM, ...``, whose 16 KiB
jumps defeat the CPU prefetcher); in cols, a ``sync_cube()`` every ``_ROWS`` rows makes the CPU
code walk all units' columns of a few rows before moving on (rows stream through the cache)
instead of walking one column down the whole axis. Results are identical either way up to the
order of float additions inside one unit.

The accumulator type ``Acc`` is the output array's element type: float32 for half inputs (the
host casts the result back), the input's own type otherwise. Combining ops: ``sum``, ``prod``,
``max``, ``min`` (NaN-propagating for floats, through ``cube.max``/``cube.min``). ``all`` and
``any`` arrive as ``min``/``max`` over a bool-as-uint8 input.
"""

from __future__ import annotations

from ...cube import (
    ABSOLUTE_POS,
    CUBE_DIM,
    CUBE_POS,
    PLANE_DIM,
    PLANE_POS,
    UNIT_POS,
    UNIT_POS_PLANE,
    Array,
    Comptime,
    ElemVar,
    Line,
    SharedMemory,
    cast,
    exp,
    function,
    i64,
    kernel,
    line,
    line_max,
    line_min,
    line_prod,
    line_sum,
    log,
    plane_max,
    plane_min,
    plane_prod,
    plane_sum,
    select,
    sync_cube,
    u32,
)
from ...cube import max as cmax
from ...cube import min as cmin

In = ElemVar("In")
Acc = ElemVar("Acc")
F = ElemVar("F", "float")

#: rows walked between barriers by the cols kernel on a serial-units target
_ROWS = 8


@function
def combine(a, b, op: Comptime[str]):
    if op == "sum":
        return a + b
    if op == "prod":
        return a * b
    if op == "max":
        return cmax(a, b)
    return cmin(a, b)


@function
def fold_line(v, op: Comptime[str]):
    if op == "sum":
        return line_sum(v)
    if op == "prod":
        return line_prod(v)
    if op == "max":
        return line_max(v)
    return line_min(v)


@function
def fold_plane(v, op: Comptime[str]):
    if op == "sum":
        return plane_sum(v)
    if op == "prod":
        return plane_prod(v)
    if op == "max":
        return plane_max(v)
    return plane_min(v)


@function
def fold_cube(v, op: Comptime[str]):
    """The op over every unit's ``v``; the result is valid in unit 0 (all units must call)."""
    r = fold_plane(v, op)
    if CUBE_DIM > PLANE_DIM:
        sm = SharedMemory(Acc, CUBE_DIM // PLANE_DIM)
        if UNIT_POS_PLANE == 0:
            sm[PLANE_POS] = r
        sync_cube()
        if UNIT_POS == 0:
            for p in range(1, CUBE_DIM // PLANE_DIM):
                r = combine(r, sm[p], op)
    return r


@kernel
def reduce_rows(
    x: Array[Line[In]],
    out: Array[Acc],
    row_lines: u32,
    splits: u32,
    span: u32,
    init: Acc,
    scale: Acc,
    op: Comptime[str],
    scaled: Comptime[bool],
    units_serial: Comptime[bool],
    unit_rows: Comptime[bool],
):
    """out[c] = op over chunk c % splits of row c // splits (divided by ``scale`` when
    ``scaled``: the element count, for mean)."""
    if unit_rows:
        # short rows (splits == 1): one unit per row folds it alone, no cooperation
        r = ABSOLUTE_POS
        if r < out.len():
            a = line(init, x.line_size())
            for t in range(row_lines):
                a = combine(a, cast(x[r * row_lines + t], Acc), op)
            v = fold_line(a, op)
            if scaled:
                out[r] = v / scale
            else:
                out[r] = v
        return
    c = CUBE_POS
    u = UNIT_POS
    row = c // splits
    part = c % splits
    base = row * row_lines
    lo = part * CUBE_DIM * span
    hi = min(lo + CUBE_DIM * span, row_lines)
    acc = line(init, x.line_size())
    if c < out.len():
        if units_serial:
            j = lo + u * span
            end = min(j + span, hi)
            while j < end:
                acc = combine(acc, cast(x[base + j], Acc), op)
                j += 1
        else:
            j = lo + u
            while j < hi:
                acc = combine(acc, cast(x[base + j], Acc), op)
                j += CUBE_DIM
    r = fold_cube(fold_line(acc, op), op)
    if u == 0 and c < out.len():
        if scaled:
            out[c] = r / scale
        else:
            out[c] = r


@kernel
def reduce_cols(
    x: Array[Line[In]],
    out: Array[Line[Acc]],
    k_len: u32,
    inner_lines: u32,
    col_blocks: u32,
    splits: u32,
    span: u32,
    init: Acc,
    scale: Acc,
    op: Comptime[str],
    scaled: Comptime[bool],
    units_serial: Comptime[bool],
):
    """out[o, part, j] = op over k in chunk ``part`` of x[o, k, j] (lines j of the inner dim)."""
    c = CUBE_POS
    cb = c % col_blocks
    rest = c // col_blocks
    part = rest % splits
    o = rest // splits
    j = cb * CUBE_DIM + UNIT_POS
    dst = (o * splits + part) * inner_lines + j
    active = j < inner_lines and dst < out.len()  # cubes past the last (o, part) idle
    k = part * span
    k_end = min(k + span, k_len)
    row0 = o * k_len
    acc = line(init, x.line_size())
    if units_serial:
        # every unit of the cube walks _ROWS rows, then the next unit: rows stream through cache
        while k < k_end:
            kb_end = min(k + _ROWS, k_end)
            if active:
                kk = k
                while kk < kb_end:
                    acc = combine(acc, cast(x[(row0 + kk) * inner_lines + j], Acc), op)
                    kk += 1
            sync_cube()
            k = kb_end
    else:
        if active:
            while k < k_end:
                acc = combine(acc, cast(x[(row0 + k) * inner_lines + j], Acc), op)
                k += 1
    if active:
        if scaled:
            out[dst] = acc / scale
        else:
            out[dst] = acc


@function
def beats(a, ia, b, ib, largest: Comptime[bool]):
    """Whether (a, ia) wins over (b, ib): the extreme value, NaN above everything (numpy), the
    lower index on ties."""
    a_nan = a != a
    b_nan = b != b
    tie = ia < ib
    if largest:
        better = a > b
    else:
        better = a < b
    return (a_nan and (not b_nan or tie)) or (not a_nan and not b_nan and (better or (a == b and tie)))


@kernel
def arg_rows(
    x: Array[In],
    out: Array[i64],
    k_len: u32,
    inner: u32,
    span: u32,
    largest: Comptime[bool],
    unit_rows: Comptime[bool],
):
    """out[o, i] = the first index k of the max (largest) / min of x[o, :, i]; one cube per
    (o, i) with unit u scanning k in [u * span, (u + 1) * span), or (``unit_rows``, for short
    rows) one unit per (o, i)."""
    if unit_rows:  # short rows: one unit per row, no cooperation
        c = ABSOLUTE_POS
        u = u32(0)
        k = u32(0)
        end = k_len
    else:
        c = CUBE_POS
        u = UNIT_POS
        k = u * span
        end = min(k + span, k_len)
    if c >= out.len():
        return  # a whole cube (or, for unit_rows, a unit) past the last row: no barrier skipped
    o = c // inner
    i = c % inner
    base = o * k_len * inner + i
    best_i = u32(0)
    best = x[base]  # any element: replaced by the first one the unit owns (k == start)
    have = False
    while k < end:
        v = x[base + k * inner]
        if not have or beats(v, k, best, best_i, largest):
            best = v
            best_i = k
            have = True
        k += 1
    if unit_rows:
        out[c] = cast(best_i, i64)
    else:
        sv = SharedMemory(In, CUBE_DIM)
        si = SharedMemory(u32, CUBE_DIM)
        sh = SharedMemory(u32, CUBE_DIM)
        sv[u] = best
        si[u] = best_i
        sh[u] = select(have, u32(1), u32(0))
        sync_cube()
        if u == 0:
            # units own ascending index ranges: scanning them in order keeps the first extreme
            for p in range(1, CUBE_DIM):
                if sh[p] == 1 and (sh[0] == 0 or beats(sv[p], si[p], sv[0], si[0], largest)):
                    sv[0] = sv[p]
                    si[0] = si[p]
                    sh[0] = u32(1)
            out[c] = cast(si[0], i64)


@kernel
def softmax_rows(
    x: Array[In],
    out: Array[F],
    rows: u32,
    k_len: u32,
    inner: u32,
    span: u32,
    mode: Comptime[str],
    unit_rows: Comptime[bool],
    interleave: Comptime[bool] = False,
):
    """Per row (o, i) of x[o, :, i] (computed in F, the output's float type):
    ``softmax``: out[o, k, i] = exp(x - max) / sum exp(x - max);
    ``logsumexp``: out[o, i] = log(sum exp(x - m)) + m, with m = max, or 0 where the max is
    infinite (so an all -inf row gives -inf, not NaN, as in Flex);
    ``log_softmax``: out[o, k, i] = x - (log(sum exp(x - max)) + max), with the raw max."""
    if unit_rows:  # short rows: one unit per row, no cooperation
        c = ABSOLUTE_POS
        u = u32(0)
        lo = u32(0)
        end = k_len
    elif interleave:  # one cube per row, unit u owns u, u + CUBE_DIM, ... (coalesced on a GPU)
        c = CUBE_POS
        u = UNIT_POS
        lo = u
        end = k_len
    else:  # one cube per row, unit u owns [u * span, (u + 1) * span) (serial units: the CPU)
        c = CUBE_POS
        u = UNIT_POS
        lo = u * span
        end = min(lo + span, k_len)
    if c >= rows:
        return  # a whole cube (or, for unit_rows, a unit) past the last row: no barrier skipped
    step = u32(CUBE_DIM) if interleave and not unit_rows else u32(1)
    o = c // inner
    i = c % inner
    base = o * k_len * inner + i
    m = F(-float("inf"))
    k = lo
    while k < end:
        m = cmax(m, cast(x[base + k * inner], F))
        k += step
    mx = m
    sm = SharedMemory(F, 1)
    if not unit_rows:
        mx = fold_cube_f(m, "max")
        if u == 0:
            sm[0] = mx
        sync_cube()
        mx = sm[0]
    if mode == "logsumexp":
        # Flex's logsumexp shifts by 0 where the max is infinite, so an all -inf row gives
        # -inf (not NaN) and +inf entries give inf; log_softmax keeps the raw max (PyTorch:
        # an infinite max makes the row nan)
        if mx == F(float("inf")) or mx == F(-float("inf")):
            mx = F(0)
    s = F(0)
    k = lo
    while k < end:
        s += exp(cast(x[base + k * inner], F) - mx)
        k += step
    tot = s
    if not unit_rows:
        tot = fold_cube_f(s, "sum")
        sync_cube()  # every unit has read sm[0] (the max) before it is overwritten
        if u == 0:
            sm[0] = tot
        sync_cube()
        tot = sm[0]
    if mode == "logsumexp":
        if u == 0:
            out[c] = log(tot) + mx
    elif mode == "softmax":
        inv = F(1) / tot
        k = lo
        while k < end:
            p = base + k * inner
            out[p] = exp(cast(x[p], F) - mx) * inv
            k += step
    else:
        # Flex subtracts the logsumexp rounded to the input type (a no-op unless half)
        lt = cast(cast(log(tot) + mx, In), F)
        k = lo
        while k < end:
            p = base + k * inner
            out[p] = cast(x[p], F) - lt
            k += step


@kernel
def softmax_staged(
    x: Array[Line[In]], out: Array[Line[F]], row_lines: u32, cap: Comptime[int], mode: Comptime[str]
):
    """``softmax`` / ``log_softmax`` of contiguous rows of at most ``cap`` lines on targets whose
    units run in parallel: one cube per row; the row is read from global memory once, into
    shared memory (each unit stages and later re-reads only its own lines u, u + CUBE_DIM, ...,
    so the folds' barriers are the only ones), and the max, the sum and the output come from
    there. Same results as ``softmax_rows`` up to the order of float additions."""
    c = CUBE_POS
    u = UNIT_POS
    base = c * row_lines
    w = x.line_size()
    row = SharedMemory(F, cap, w)
    m = line(F(-float("inf")), w)
    j = u
    while j < row_lines:
        v = cast(x[base + j], F)
        row[j] = v
        m = cmax(m, v)
        j += CUBE_DIM
    sm = SharedMemory(F, 1)
    mx = fold_cube_f(line_max(m), "max")
    if u == 0:
        sm[0] = mx
    sync_cube()
    mx = sm[0]
    if mode == "logsumexp":
        if mx == F(float("inf")) or mx == F(-float("inf")):
            mx = F(0)  # as softmax_rows: Flex's logsumexp shifts by 0 where the max is infinite
    s = line(F(0), w)
    j = u
    while j < row_lines:
        s += exp(row[j] - mx)
        j += CUBE_DIM
    tot = fold_cube_f(line_sum(s), "sum")
    sync_cube()  # every unit has read sm[0] (the max) before it is overwritten
    if u == 0:
        sm[0] = tot
    sync_cube()
    tot = sm[0]
    j = u
    if mode == "softmax":
        inv = F(1) / tot
        while j < row_lines:
            out[base + j] = exp(row[j] - mx) * inv
            j += CUBE_DIM
    else:
        lt = cast(cast(log(tot) + mx, In), F)  # Flex subtracts the logsumexp rounded to In
        while j < row_lines:
            out[base + j] = row[j] - lt
            j += CUBE_DIM


@function
def fold_cube_f(v, op: Comptime[str]):
    """``fold_cube`` for the float type F of softmax_rows (shared memory typed by F)."""
    r = fold_plane(v, op)
    if CUBE_DIM > PLANE_DIM:
        sm = SharedMemory(F, CUBE_DIM // PLANE_DIM)
        if UNIT_POS_PLANE == 0:
            sm[PLANE_POS] = r
        sync_cube()
        if UNIT_POS == 0:
            for p in range(1, CUBE_DIM // PLANE_DIM):
                r = combine(r, sm[p], op)
    return r


@kernel
def scan_rows(x: Array[In], out: Array[Acc], rows: u32, k_len: u32, inner: u32, op: Comptime[str]):
    """out[o, k, i] = op-fold of x[o, :k + 1, i] (``op`` is a scan op of the registry: cumsum,
    cumprod): one unit per (o, i) row, a running Acc value."""
    r = ABSOLUTE_POS
    if r < rows:
        o = r // inner
        i = r % inner
        p = o * k_len * inner + i
        if op == "cumprod":
            acc = Acc(1)
            for _ in range(k_len):
                acc *= cast(x[p], Acc)
                out[p] = acc
                p += inner
        elif op == "cumsum":
            acc = Acc(0)
            for _ in range(k_len):
                acc += cast(x[p], Acc)
                out[p] = acc
                p += inner
        else:
            assert False, f"unknown scan op {op!r}"  # noqa: B011 - a comptime assert (expansion error)


@function
def scan_identity(op: Comptime[str]):
    if op == "cumprod":
        return Acc(1)
    return Acc(0)


@function
def scan_combine(a, b, op: Comptime[str]):
    if op == "cumprod":
        return a * b
    return a + b


@kernel
def scan_blocks(
    x: Array[In], out: Array[Acc], totals: Array[Acc], k_len: u32, blocks: u32, span: Comptime[int],
    op: Comptime[str],
):
    """Pass 1 of the block scan of contiguous rows (x is (rows, k_len)): cube c scans block
    c % blocks (``CUBE_DIM * span`` elements) of row c // blocks. The block is staged in shared
    memory with coalesced reads; each unit scans its ``span`` consecutive elements, the units'
    totals are scanned (Hillis-Steele, log2(CUBE_DIM) steps), each unit adds the exclusive
    prefix back, and the block goes out coalesced: out = the inclusive scan within the block,
    totals[c] = the block's fold. Padding past k_len holds the op's identity."""
    c = CUBE_POS
    u = UNIT_POS
    block = CUBE_DIM * span
    start = (c % blocks) * block
    base = (c // blocks) * k_len + start
    n = min(k_len - start, u32(block))
    sm = SharedMemory(Acc, block)
    ident = scan_identity(op)
    for j in range(span):
        q = j * CUBE_DIM + u
        v = ident
        if q < n:
            v = cast(x[base + q], Acc)
        sm[q] = v
    sync_cube()
    acc = ident
    for j in range(span):
        acc = scan_combine(acc, sm[u * span + j], op)
        sm[u * span + j] = acc
    tot = SharedMemory(Acc, CUBE_DIM)
    tot[u] = acc
    sync_cube()
    off = u32(1)
    while off < CUBE_DIM:
        t = tot[u]
        if u >= off:
            t = scan_combine(tot[u - off], t, op)
        sync_cube()
        tot[u] = t
        sync_cube()
        off = off * 2
    if u > 0:
        prefix = tot[u - 1]
        for j in range(span):
            sm[u * span + j] = scan_combine(prefix, sm[u * span + j], op)
    sync_cube()
    for j in range(span):
        q = j * CUBE_DIM + u
        if q < n:
            out[base + q] = sm[q]
    if u == 0:
        totals[c] = tot[CUBE_DIM - 1]


@kernel
def scan_add(out: Array[Acc], scanned: Array[Acc], k_len: u32, blocks: u32, block: u32, op: Comptime[str]):
    """Pass 3 of the block scan: element (row, k) of block b > 0 combines with the inclusive scan
    of its row's block totals up to block b - 1 (one unit per element)."""
    e = ABSOLUTE_POS
    if e < out.len():
        b = (e % k_len) // block
        if b > 0:
            out[e] = scan_combine(scanned[(e // k_len) * blocks + b - 1], out[e], op)
