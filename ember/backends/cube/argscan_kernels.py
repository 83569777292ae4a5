"""Scans that carry an index: where the running max / min of each row is (the registry's
``cumargmax`` / ``cumargmin``, torch's cummax / cummin indices), in the kernel language.

A later element (value v) takes over the running pair (value b, index j) when ``takes(v, b)``:
v is NaN, or b is not NaN and v >= b (v <= b for the min). That is torch's rule: ties go to the
later element, and a NaN takes over whatever came before, so after a row's first NaN the index
is its latest NaN's. Taking over is associative on pairs (the result is the last position
holding the greatest key, NaN above every number and equal to every NaN), so a row may be cut
into blocks scanned on their own and joined afterwards: the running pair (v, i) of a block
joined with the pair (b, j) of everything before the block is (v, i) if ``takes(v, b)``, else
(b, j).

* ``argscan_rows``: one unit per (o, i) row of x viewed as (outer, k_len, inner), serially.
* the block scan of contiguous rows on targets whose units run in parallel (coalesced reads,
  every cube busy): ``argscan_blocks`` scans each block of ``CUBE_DIM * span`` elements in
  shared memory and writes its total pair; ``argscan_totals`` scans each row's block totals
  (one unit per row: a row has ``k_len / block`` of them); ``argscan_add`` joins every element
  with the totals of the blocks before its own and writes the int64 index.

Values compare in the input's own type (the backend brings half types to float32 and bool to
uint8 first: exact, same order); indices are u32 in shared memory and i32 in global buffers
(ember has no uint32), i64 in the output.
"""

from __future__ import annotations

from ...cube import (
    ABSOLUTE_POS,
    CUBE_DIM,
    CUBE_POS,
    UNIT_POS,
    Array,
    Comptime,
    ElemVar,
    SharedMemory,
    cast,
    function,
    i32,
    i64,
    kernel,
    sync_cube,
    u32,
)

In = ElemVar("In")


@function
def takes(v, b, largest: Comptime[bool]):
    """Whether a later element of value ``v`` takes over the running extreme ``b``."""
    if largest:
        ge = v >= b
    else:
        ge = v <= b
    return v != v or (b == b and ge)


@kernel
def argscan_rows(x: Array[In], out: Array[i64], rows: u32, k_len: u32, inner: u32, largest: Comptime[bool]):
    """out[o, k, i] = the index of the running extreme of x[o, :k + 1, i]: one unit per row."""
    r = ABSOLUTE_POS
    if r < rows:
        o = r // inner
        p = o * k_len * inner + r % inner
        best = x[p]
        best_k = u32(0)
        k = u32(0)
        while k < k_len:
            v = x[p]
            if takes(v, best, largest):
                best = v
                best_k = k
            out[p] = cast(best_k, i64)
            p += inner
            k += 1


@kernel
def argscan_blocks(
    x: Array[In], idx: Array[i32], out: Array[i64], tot_v: Array[In], tot_i: Array[i32], k_len: u32, blocks: u32,
    span: Comptime[int], largest: Comptime[bool], store_out: Comptime[bool],
):
    """Pass 1 of the block scan of contiguous rows (x is (rows, k_len)): cube c scans block
    c % blocks of row c // blocks. Each unit scans its ``span`` consecutive elements, the
    units' pairs are scanned (Hillis-Steele), each unit joins the pair before it to its own.
    The running indices (row positions) go to ``out`` (``store_out``: one block per row) or to
    ``idx``; the block's pair to (tot_v, tot_i)[c]. A pad position past k_len repeats the
    block's last element, which never changes the running pair it is joined to."""
    c = CUBE_POS
    u = UNIT_POS
    block = CUBE_DIM * span
    start = (c % blocks) * block
    base = (c // blocks) * k_len
    n = min(k_len - start, u32(block))
    sv = SharedMemory(In, block)
    si = SharedMemory(u32, block)
    for j in range(span):
        q = j * CUBE_DIM + u
        g = start + min(q, n - 1)
        sv[q] = x[base + g]
        si[q] = g
    sync_cube()
    first = u * span
    bv = sv[first]
    bi = si[first]
    for j in range(span):
        v = sv[first + j]
        if takes(v, bv, largest):
            bv = v
            bi = si[first + j]
        sv[first + j] = bv
        si[first + j] = bi
    uv = SharedMemory(In, CUBE_DIM)
    ui = SharedMemory(u32, CUBE_DIM)
    uv[u] = bv
    ui[u] = bi
    sync_cube()
    off = u32(1)
    while off < CUBE_DIM:
        tv = uv[u]
        ti = ui[u]
        if u >= off:
            pv = uv[u - off]
            if not takes(tv, pv, largest):
                tv = pv
                ti = ui[u - off]
        sync_cube()
        uv[u] = tv
        ui[u] = ti
        sync_cube()
        off = off * 2
    if u > 0:
        pv = uv[u - 1]
        pi = ui[u - 1]
        for j in range(span):
            if not takes(sv[first + j], pv, largest):
                sv[first + j] = pv
                si[first + j] = pi
    sync_cube()
    for j in range(span):
        q = j * CUBE_DIM + u
        if q < n:
            if store_out:
                out[base + start + q] = cast(si[q], i64)
            else:
                idx[base + start + q] = cast(si[q], i32)
    if u == 0:
        tot_v[c] = uv[CUBE_DIM - 1]
        tot_i[c] = cast(ui[CUBE_DIM - 1], i32)


@kernel
def argscan_totals(tot_v: Array[In], tot_i: Array[i32], rows: u32, blocks: u32, largest: Comptime[bool]):
    """Pass 2: the running pair of each row's block totals, in place (one unit per row)."""
    r = ABSOLUTE_POS
    if r < rows:
        p = r * blocks
        bv = tot_v[p]
        bi = tot_i[p]
        b = u32(1)
        while b < blocks:
            p += 1
            v = tot_v[p]
            if takes(v, bv, largest):
                bv = v
                bi = tot_i[p]
            else:
                tot_v[p] = bv
                tot_i[p] = bi
            b += 1


@kernel
def argscan_add(
    idx: Array[i32], out: Array[i64], x: Array[In], tot_v: Array[In], tot_i: Array[i32], k_len: u32, blocks: u32,
    block: u32, largest: Comptime[bool],
):
    """Pass 3: element (row, k) of block b > 0 joins its block's running pair with the scanned
    totals of the blocks before it; every element's index goes out as int64 (one unit each)."""
    e = ABSOLUTE_POS
    if e < out.len():
        r = e // k_len
        b = (e % k_len) // block
        i = idx[e]
        if b > 0:
            t = r * blocks + b - 1
            if not takes(x[r * k_len + cast(i, u32)], tot_v[t], largest):
                i = tot_i[t]
        out[e] = cast(i, i64)
