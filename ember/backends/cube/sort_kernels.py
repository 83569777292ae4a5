"""Sorting kernels of the Cube backend: a bitonic sort of (key, index) pairs, in the kernel
language.

The order (``before``) is total, so the network is stable and matches Flex exactly: keys
compare as PyTorch orders them (NaN greater than every number: last ascending, first
descending), equal keys by their input index. A row of ``n`` keys is padded to ``padded``, a
power of two; a pad carries an index ``>= n`` and sorts after every real element (in index
order among pads) whatever its key, so no key value has to sort last (none does when
descending puts NaN first) and the first ``n`` positions of the sorted row are the real
elements.

Bitonic stage (size, stride), for every position ``a`` whose partner ``b = a + stride`` lies in
the same block of ``2 * stride``: the pair is put in ascending order when ``a & size == 0``
(the first half of each block of ``size``), in descending order otherwise; after the stages
of the last size (``padded``) the row is sorted. Positions are the row's global positions, so
a chunk sorted on its own ends ascending or descending as the next, larger merge needs.

* ``bitonic_block``: one cube per (row, chunk of ``cap`` positions), the chunk's pairs in shared
  memory; either every stage of sizes 2 .. ``cap`` (a whole row when ``padded == cap``), or the
  strides below ``cap`` of one larger merge stage (``size0 > cap``: its longer strides ran in
  ``bitonic_global``).
* ``bitonic_global``: one unit per pair of one stage whose stride is at least ``cap``, on the
  (rows, padded) pair buffers in global memory (indices held as int32: ember has no uint32).
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

K = ElemVar("K")


@function
def before(a, ia, b, ib, n, descending: Comptime[bool]):
    """Whether (key a, index ia) sorts before (b, ib) in a row of ``n`` real elements: pads
    (index >= n) after every element, NaN above every number, ties by index."""
    a_pad = ia >= n
    b_pad = ib >= n
    a_nan = a != a
    b_nan = b != b
    lower = ia < ib
    if descending:
        keyed = (a_nan and (not b_nan or lower)) or (not a_nan and not b_nan and (a > b or (a == b and lower)))
    else:
        keyed = (b_nan and (not a_nan or lower)) or (not a_nan and not b_nan and (a < b or (a == b and lower)))
    return (not a_pad and (b_pad or keyed)) or (a_pad and b_pad and lower)


@kernel
def bitonic_block(
    x: Array[K],
    keys: Array[K],
    idx: Array[i32],
    out: Array[i64],
    k_len: u32,
    inner: u32,
    chunks: u32,
    size0: u32,
    cap: Comptime[int],
    descending: Comptime[bool],
    load_x: Comptime[bool],
    store_out: Comptime[bool],
):
    """Cube c sorts chunk c % chunks of row r = c // chunks (``cap`` positions) in shared memory.

    ``load_x``: the keys come from x viewed as (outer, k_len, inner) (row r = (o, i)), the
    indices are the positions; otherwise both come from the (rows, chunks * cap) buffers.
    ``size0 == 2``: every stage of sizes 2 .. cap; ``size0 > cap``: the strides cap / 2 .. 1
    of stage ``size0``. ``store_out``: the indices of the first k_len positions go to out
    (int64, laid out as x); otherwise the pairs go back to the buffers."""
    c = CUBE_POS
    u = UNIT_POS
    row = c // chunks
    g0 = (c % chunks) * cap
    o = row // inner
    xbase = o * k_len * inner + row % inner
    pbase = row * chunks * cap + g0
    sk = SharedMemory(K, cap)
    si = SharedMemory(u32, cap)
    j = u
    while j < cap:
        g = g0 + j
        if load_x:
            if g < k_len:
                sk[j] = x[xbase + g * inner]
            else:
                sk[j] = x[xbase]  # a pad: its key is never compared (its index is >= k_len)
            si[j] = g
        else:
            sk[j] = keys[pbase + j]
            si[j] = cast(idx[pbase + j], u32)
        j += CUBE_DIM
    sync_cube()
    half = u32(cap // 2)
    size = size0
    last = size0 if size0 > cap else u32(cap)
    while size <= last:
        stride = min(size // 2, half)
        while stride > 0:
            t = u
            while t < half:
                a = 2 * stride * (t // stride) + t % stride
                b = a + stride
                ka = sk[a]
                kb = sk[b]
                ia = si[a]
                ib = si[b]
                if ((g0 + a) & size) == 0:
                    swap = before(kb, ib, ka, ia, k_len, descending)
                else:
                    swap = before(ka, ia, kb, ib, k_len, descending)
                if swap:
                    sk[a] = kb
                    sk[b] = ka
                    si[a] = ib
                    si[b] = ia
                t += CUBE_DIM
            sync_cube()
            stride = stride // 2
        size = size * 2
    j = u
    while j < cap:
        g = g0 + j
        if store_out:
            if g < k_len:
                out[xbase + g * inner] = cast(si[j], i64)
        else:
            keys[pbase + j] = sk[j]
            idx[pbase + j] = cast(si[j], i32)
        j += CUBE_DIM


@kernel
def bitonic_global(
    keys: Array[K],
    idx: Array[i32],
    pairs: u32,
    k_len: u32,
    padded: u32,
    size: u32,
    stride: u32,
    descending: Comptime[bool],
):
    """Stage (size, stride) on the (rows, padded) pair buffers: unit t owns pair t % (padded / 2)
    of row t // (padded / 2)."""
    t = ABSOLUTE_POS
    if t < pairs:
        half = padded // 2
        q = t % half
        a = 2 * stride * (q // stride) + q % stride
        b = a + stride
        base = (t // half) * padded
        ka = keys[base + a]
        kb = keys[base + b]
        ia = cast(idx[base + a], u32)
        ib = cast(idx[base + b], u32)
        if (a & size) == 0:
            swap = before(kb, ib, ka, ia, k_len, descending)
        else:
            swap = before(ka, ia, kb, ib, k_len, descending)
        if swap:
            keys[base + a] = kb
            keys[base + b] = ka
            idx[base + a] = cast(ib, i32)
            idx[base + b] = cast(ia, i32)
