"""Indexing and data-movement kernels of the Cube backend, in the kernel language.

Conventions shared by every kernel here:

* one unit per element of the *iteration shape* (the output for gathers, the index or the
  values for scatters); the unit unravels its row-major position over that shape, one
  div/mod per dim, unrolled because ``rank()`` is comptime;
* every tensor is read and written through its own strides (``Tensor`` params), so no
  input needs to be contiguous and broadcast operands arrive as zero-stride views;
* index values are int64, checked by the kernel that reads them (``index_value``): a
  negative one wraps once (as Python's), one still outside ``[0, n)`` is *reported* in the
  backend's error flags (``err``, read at the next read of any tensor: ``IndexOps``) and never
  used as a position (a gather writes 0 for it, a scatter skips it), so no access leaves the
  indexed dim whatever the values; the checked value becomes a ``u32`` position (positions
  and metadata are ``u32`` in the kernel language);
* strides are non-negative (``CubeTensor``'s invariant): reversed traversal (flip,
  negative slice steps) is a per-dim *flip mask* applied to coordinates, never a negative
  stride.

Kernels are generic over the element type and specialised by rank (comptime) and by a few
small comptime switches (``dim``, ``k``, ``add``, ``upper``), so one kernel serves every dtype.
"""

from __future__ import annotations

import math
from typing import Any

from ...cube import (
    ABSOLUTE_POS,
    CUBE_DIM,
    CUBE_POS,
    UNIT_POS,
    Array,
    Comptime,
    Scalar,
    Sequence,
    T,
    Tensor,
    atomic_add,
    cast,
    function,
    i32,
    i64,
    kernel,
    select,
    u32,
)
from ...cube.types import u32 as dt_u32

#: words of the error flags (``err``): the count of bad index values, then the first one's
#: site (``SITES``), dim, value (saturated to i32) and the dim's size
ERR_WORDS = 5
#: the ops whose kernels report bad index values, by site code (``err[1]``)
SITES = ("", "gather", "scatter", "scatter_add", "index_select", "index", "index_put")


@function
def report(flags, at, bad_dim, bad, bad_size):
    """Record a bad index value ``bad`` for dim ``bad_dim`` of size ``bad_size`` (``at``: the
    site code): ``flags[0]`` counts them, the first unit to find one leaves its site, dim,
    value and size in ``flags[1:5]`` (later finds only count, so the words describe one value).
    (Parameter names distinct from the calling kernels' locals.)"""
    if atomic_add(flags, 0, i32(1)) == 0:
        flags[1] = cast(at, i32)
        flags[2] = cast(bad_dim, i32)
        flags[3] = cast(max(min(bad, i64(2147483647)), i64(-2147483647)), i32)
        flags[4] = cast(bad_size, i32)


@function
def index_value(raw, dim_size):
    """``raw`` wrapped once into ``[0, dim_size)`` when negative (``dim_size`` an i64); the
    result is outside ``[0, dim_size)`` exactly when ``raw`` is out of range (the caller
    reports it)."""
    return raw + dim_size if raw < 0 else raw


@function
def indexed_offset(t, idx, first, base, k, flags, at):
    """``base`` plus the offset in ``t`` of the position that the ``k`` index values
    ``idx[first + j * idx.stride(0)]`` (j < k) give its leading dims, as an i64; -1 where one
    of them is bad (each bad one is reported). A function of its own, so that its comptime loop
    variable is no name of the calling kernel (there a runtime ``if`` around an unrolled loop
    would turn it into a runtime local)."""
    off = cast(base, i64)
    good = True
    for j in range(k):
        size = cast(t.shape(j), i64)
        raw = idx[first + j * idx.stride(0)]
        v = index_value(raw, size)
        if v >= 0 and v < size:
            off += v * cast(t.stride(j), i64)
        else:
            good = False
            report(flags, at, j, raw, size)
    return off if good else i64(-1)


@kernel
def copy_view(src: Tensor[T], dst: Tensor[T], flips: u32, rows: u32, chunks: u32, k: Comptime[int]):
    """dst[c] = src[c'] over dst's shape, where c'_d = n_d - 1 - c_d for the dims whose bit
    is set in ``flips`` (bit d = dim d) and c'_d = c_d otherwise.

    The workhorse of flip, cat, pad, slice_assign, negative-step slices and index stacking:
    ``dst`` is usually a strided window of a fresh buffer, ``src`` any view (zero strides
    broadcast it). Row-chunked: one unit per ``k`` consecutive elements of one row (rank >= 1;
    ``rows`` = elements / last dim, ``chunks`` = ceil(last dim / k)), so the unravel's
    divisions are paid once per chunk, not once per element."""
    u = ABSOLUTE_POS
    row = u // chunks
    if row < rows:
        r = dst.rank()
        nl = dst.shape(r - 1)
        c0 = (u % chunks) * k
        rem = row
        so = u32(0)
        do = u32(0)
        for d in range(r - 2, -1, -1):
            n = dst.shape(d)
            c = rem % n
            rem = rem // n
            do += c * dst.stride(d)
            if (flips >> d) & 1 == 1:
                c = n - 1 - c
            so += c * src.stride(d)
        sl = src.stride(r - 1)
        dl = dst.stride(r - 1)
        flip_last = (flips >> (r - 1)) & 1 == 1
        for t in range(k):
            cl = c0 + t
            if cl < nl:
                sc = nl - 1 - cl if flip_last else cl
                dst[do + cl * dl] = src[so + sc * sl]


def piece_table(pieces: list[tuple[Any, int]], chunk: int, units: int) -> tuple[tuple[tuple[int, Any], ...], int]:
    """The ``meta`` argument of ``cat_pieces`` and of the flat_cat fuser's ``flat_pieces`` for
    ``pieces`` ((view, at) pairs; ``chunk`` elements per unit, ``units`` per cube): four u32 per
    piece, (first cube, at, rows, chunks), then the end cube; and the number of cubes in all."""
    meta: list[tuple[int, Any]] = []
    cubes = 0
    for t, a in pieces:
        nl = t.shape[-1]
        rows = math.prod(t.shape) // nl
        chunks = -(-nl // chunk)
        meta += [(cubes, dt_u32), (a, dt_u32), (rows, dt_u32), (chunks, dt_u32)]
        cubes += -(-(rows * chunks) // units)
    meta.append((cubes, dt_u32))
    return tuple(meta), cubes


@kernel
def cat_pieces(ins: Sequence[Tensor[T]], out: Tensor[T], meta: Sequence[Scalar], dim: Comptime[int], k: Comptime[int]):
    """``cat`` of every piece in one launch: piece p (any view) is copied into ``out`` at
    position ``at_p`` along ``dim``. ``meta`` holds four u32 per piece, (first cube, at, rows,
    chunks), then the end cube: piece p runs on cubes [first_p, first_{p+1}), row-chunked over
    its own shape as ``copy_view`` (``rows`` = its elements / its last dim, ``chunks`` = ceil(last
    dim / k) per row)."""
    c = CUBE_POS
    for p in range(len(ins)):
        src = ins[p]
        if c >= meta[4 * p] and c < meta[4 * p + 4]:
            u = (c - meta[4 * p]) * CUBE_DIM + UNIT_POS
            chunks = meta[4 * p + 3]
            row = u // chunks
            if row < meta[4 * p + 2]:
                r = src.rank()
                nl = src.shape(r - 1)
                c0 = (u % chunks) * k
                rem = row
                so = u32(0)
                do = u32(0)
                for d in range(r - 2, -1, -1):
                    n = src.shape(d)
                    cd = rem % n
                    rem = rem // n
                    so += cd * src.stride(d)
                    do += cd * out.stride(d)
                do += meta[4 * p + 1] * out.stride(dim)
                sl = src.stride(r - 1)
                dl = out.stride(r - 1)
                for t in range(k):
                    cl = c0 + t
                    if cl < nl:
                        out[do + cl * dl] = src[so + cl * sl]


@kernel
def gather_dim(
    src: Tensor[T], index: Tensor[i64], out: Tensor[T], dim: Comptime[int], rows: u32, chunks: u32, k: Comptime[int],
    err: Array[i32], site: u32,
):
    """out[c] = src[c with c_dim replaced by index[c]] over index's shape (== out's shape).

    The index may be smaller than ``src`` on the other dims (torch's gather): those
    coordinates simply address the leading part of ``src``. index_select is this kernel
    with a zero-stride (expanded) 1-D index. Row-chunked like ``copy_view``. A bad index
    value is reported (``report``) and gives 0."""
    u = ABSOLUTE_POS
    row = u // chunks
    if row < rows:
        r = out.rank()
        nl = out.shape(r - 1)
        c0 = (u % chunks) * k
        rem = row
        so = u32(0)
        io = u32(0)
        oo = u32(0)
        for d in range(r - 2, -1, -1):
            n = out.shape(d)
            c = rem % n
            rem = rem // n
            io += c * index.stride(d)
            oo += c * out.stride(d)
            if d != dim:
                so += c * src.stride(d)
        size = cast(src.shape(dim), i64)
        for t in range(k):
            cl = c0 + t
            if cl < nl:
                v0 = index[io + cl * index.stride(r - 1)]
                v = index_value(v0, size)
                if v >= 0 and v < size:
                    s = so + cast(v, u32) * src.stride(dim)
                    if dim != r - 1:
                        s += cl * src.stride(r - 1)
                    out[oo + cl * out.stride(r - 1)] = src[s]
                else:
                    report(err, site, dim, v0, size)
                    out[oo + cl * out.stride(r - 1)] = cast(0, T)


@kernel
def scatter_dim(
    index: Tensor[i64], src: Tensor[T], out: Tensor[T], dim: Comptime[int], add: Comptime[bool],
    err: Array[i32], site: u32,
):
    """For every c in index's shape: out[c with c_dim = index[c]] = src[c] (or += with
    ``add``, through an atomic so repeated targets sum up).

    ``out`` is a fresh copy of the input (tensors are values); ``src`` is read on the index's
    extent only. Without ``add``, repeated targets keep one of the candidates (which one is
    unspecified, as in torch). A bad index value is reported (``report``) and writes nothing."""
    i = ABSOLUTE_POS
    if i < index.len():
        rem = i
        io = u32(0)
        so = u32(0)
        oo = u32(0)
        for d in range(index.rank() - 1, -1, -1):
            n = index.shape(d)
            c = rem % n
            rem = rem // n
            io += c * index.stride(d)
            so += c * src.stride(d)
            if d != dim:
                oo += c * out.stride(d)
        size = cast(out.shape(dim), i64)
        v0 = index[io]
        v = index_value(v0, size)
        if v >= 0 and v < size:
            oo += cast(v, u32) * out.stride(dim)
            if add:
                atomic_add(out, oo, src[so])
            else:
                out[oo] = src[so]
        else:
            report(err, site, dim, v0, size)


@kernel
def index_gather(
    src: Tensor[T], idx: Tensor[i64], out: Tensor[T], k: Comptime[int], rows: u32, chunks: u32, w: Comptime[int],
    err: Array[i32], site: u32,
):
    """Advanced indexing of src's leading ``k`` dims: ``idx`` has shape (k, *B) (the k
    broadcast index tensors stacked), out has shape B + src.shape[k:] (rank >= 1), and
    out[b, r] = src[idx[0, b], ..., idx[k-1, b], r]. Row-chunked (``w`` elements per unit).
    A bad index value is reported (``report``) and gives 0."""
    u = ABSOLUTE_POS
    row = u // chunks
    if row < rows:
        nb = idx.rank() - 1
        r = out.rank()
        nl = out.shape(r - 1)
        c0 = (u % chunks) * w
        rem = row
        so = u32(0)
        io = u32(0)
        oo = u32(0)
        for d in range(r - 2, -1, -1):
            n = out.shape(d)
            c = rem % n
            rem = rem // n
            oo += c * out.stride(d)
            if d >= nb:
                so += c * src.stride(d - nb + k)
            else:
                io += c * idx.stride(d + 1)
        for t in range(w):
            cl = c0 + t
            if cl < nl:
                s = so
                i = io
                if r - 1 >= nb:
                    s += cl * src.stride(r - 1 - nb + k)
                else:
                    i += cl * idx.stride(r)
                at = indexed_offset(src, idx, i, s, k, err, site)
                if at >= 0:
                    out[oo + cl * out.stride(r - 1)] = src[cast(at, u32)]
                else:
                    out[oo + cl * out.stride(r - 1)] = cast(0, T)


@kernel
def index_scatter(
    values: Tensor[T], idx: Tensor[i64], out: Tensor[T], k: Comptime[int], add: Comptime[bool],
    err: Array[i32], site: u32,
):
    """Inverse of ``index_gather``: for every (b, r) of values' shape B + R,
    out[idx[0, b], ..., idx[k-1, b], r] = values[b, r] (or += atomically with ``add``).
    A bad index value is reported (``report``) and writes nothing."""
    i = ABSOLUTE_POS
    if i < values.len():
        nb = idx.rank() - 1
        rem = i
        vo = u32(0)
        io = u32(0)
        oo = u32(0)
        for d in range(values.rank() - 1, -1, -1):
            n = values.shape(d)
            c = rem % n
            rem = rem // n
            vo += c * values.stride(d)
            if d >= nb:
                oo += c * out.stride(d - nb + k)
            else:
                io += c * idx.stride(d + 1)
        at = indexed_offset(out, idx, io, oo, k, err, site)
        if at >= 0:
            if add:
                atomic_add(out, cast(at, u32), values[vo])
            else:
                out[cast(at, u32)] = values[vo]


@kernel
def tri(src: Tensor[T], out: Tensor[T], diagonal: i64, upper: Comptime[bool], rows: u32, chunks: u32, k: Comptime[int]):
    """tril (keep col - row <= diagonal) or triu (``upper``: keep col - row >= diagonal) of
    the last two dims, zeros elsewhere; batch dims ride along. Row-chunked like copy_view."""
    u = ABSOLUTE_POS
    row = u // chunks
    if row < rows:
        r = out.rank()
        nl = out.shape(r - 1)
        c0 = (u % chunks) * k
        rem = row
        so = u32(0)
        oo = u32(0)
        mrow = u32(0)
        for d in range(r - 2, -1, -1):
            n = out.shape(d)
            c = rem % n
            rem = rem // n
            so += c * src.stride(d)
            oo += c * out.stride(d)
            if d == r - 2:
                mrow = c
        for t in range(k):
            cl = c0 + t
            if cl < nl:
                delta = cast(cl, i64) - cast(mrow, i64)
                if upper:
                    keep = delta >= diagonal
                else:
                    keep = delta <= diagonal
                out[oo + cl * out.stride(r - 1)] = select(keep, src[so + cl * src.stride(r - 1)], cast(0, T))
