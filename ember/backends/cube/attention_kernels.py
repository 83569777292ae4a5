"""Fused scaled-dot-product attention kernels of the Cube backend (flash-attention style), in the
kernel language: the forward pass and the two backward passes, generic over the input float type.

Every tensor is a rank-4 view ``(B, H, n, d)`` read through its strides (the launcher,
``attention.py``, brings other ranks to four without copying where it can) with a contiguous last
dim. Rows a unit holds for dot products (its q, k, v or dO row) are read as scalars (``e`` and
``ev``: the scalars of a q/k and of a v row; comptime, so they live in registers); rows summed
into an accumulator (v, and k / q / dO in the backward) are read in lines of ``W`` (every stride
and view offset a multiple of ``W``, so ``stride // W`` counts lines). A tile of ``bk`` keys
(queries, in the dk/dv kernel) is staged twice where needed: by component (line ``x`` holds
component ``x`` of every key of the tile, one lane per key), so a unit's scores against the whole
tile are ``e`` line multiply-adds with no horizontal sum, and by row, for the accumulations.
Scores, the running max and sum and every accumulator are float32 whatever the input type; each
output is rounded once at its store.

* ``attn_fwd``: one cube per ``(b, h, block of bq query rows)``, one unit per query row. The
  cube streams over the key tiles: its units stage K (by component) and V (by row) in shared
  memory, then each unit scores its row against the tile (a line of ``bk`` scores), rescales its
  accumulator once per tile by ``exp(m_old - m_new)`` (the online softmax) and adds ``p * v``.
  Causal cubes stop after the tile that holds their last row's diagonal (top-left alignment, as
  torch: query ``i`` sees keys ``0..i``). Query blocks run last-first, so the longest causal
  blocks start first.
* ``attn_bwd_dq``: the same grid; per query row, ``D = sum(dO * O)``, then one pass over the
  key tiles: ``p = exp(s - m)`` with the running max ``m`` (the accumulator rescaled as in the
  forward), ``ds = p * (dO . v - D)``, ``dq += ds * k``; at the end ``dq = scale * acc / l``
  and the row's log-sum-exp ``m + log l`` and ``D`` are stored for ``attn_bwd_dkv``.
* ``attn_bwd_dkv``: one cube per ``(b, h, block of bkv key rows)``, one unit per key row; the
  cube streams over the query tiles (causal: from the tile holding its first key's diagonal),
  staging Q and dO (by component and by row) and the tile's log-sum-exps and Ds (one lane per
  query); each unit accumulates ``dv += p * dO`` and ``dk += ds * q`` with ``p = exp(s - lse)``
  recomputed from the stored log-sum-exp.

Lanes past the end of a sequence read its last row (no per-lane branches) and are masked by one
comparison per line (scores -inf, probabilities exactly 0); barriers sit outside every per-unit
condition, so a cube's units all reach them. Indices are u32: every tensor stays below 2**32
elements. ``serial`` (the C target, whose cube units run one after another) picks a vectorisable
polynomial exp and plain multiply-adds; the parallel targets use libm's exp and fused
multiply-adds.
"""

from __future__ import annotations

from ...cube import (
    CUBE_COUNT_X,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS,
    Array,
    Comptime,
    ElemVar,
    Line,
    LocalArray,
    SharedMemory,
    Tensor,
    bitcast,
    cast,
    exp,
    f32,
    fma,
    function,
    i32,
    kernel,
    line,
    line_max,
    line_sum,
    log,
    select,
    sync_cube,
    u32,
    width_of,
)
from ...cube import max as cmax
from ...cube import min as cmin
from ...cube import round as cround

__all__ = ["attn_fwd", "attn_bwd_dq", "attn_bwd_dkv"]

#: the input (and output) float type; everything computed is float32
In = ElemVar("In", "float")

_NEG_INF = -float("inf")


@function
def _mac(c, x, y, serial: Comptime[bool]):
    """c + x * y: fused (one rounding) on the parallel targets, whose compilers keep a*b+c two
    operations otherwise (CUDA's --fmad=false); a multiply and an add on the C target, where
    the vector operators vectorise and a lane-by-lane fma would not."""
    if serial:
        return c + x * y
    return fma(x, y, c)


@function
def _exp_lanes(x, serial: Comptime[bool]):
    """exp of a line of scores shifted by their max (every lane <= 0, or -inf). ``serial`` (the C
    target): a polynomial the C compiler vectorises (libm's exp runs lane by lane there),
    ``2^n e^z`` with ``n = round(x log2 e)`` and ``|z| <= ln 2 / 2``, e^z to degree 7 (relative
    error below 2e-7); lanes below 2^-126 (masked ones too) give 2^-126, which the callers zero
    where masked."""
    if not serial:
        return exp(x)
    w = width_of(x)
    y = cmax(x * f32(1.4426950408889634), line(f32(-126.0), w))
    n = cround(y)
    z = (y - n) * f32(0.6931471805599453)
    r = z * f32(1.0 / 5040.0) + f32(1.0 / 720.0)
    r = r * z + f32(1.0 / 120.0)
    r = r * z + f32(1.0 / 24.0)
    r = r * z + f32(1.0 / 6.0)
    r = r * z + f32(0.5)
    r = r * z + f32(1.0)
    r = r * z + f32(1.0)
    return r * bitcast((cast(n, i32) + 127) << 23, f32)


@function
def _keys_t(k, ko, ks, k0, n_k, x, bk: Comptime[int]):
    """Line of the ``x``-th component of rows ``k0 .. k0 + bk`` of ``k`` (from ``ko``, rows ``ks``
    apart); rows past ``n_k`` read the last row (their lanes are masked), so no lane branches."""
    ln = line(f32(0), bk)
    last = n_k - 1
    for jj in range(bk):
        ln[jj] = cast(k[ko + cmin(k0 + jj, last) * ks + x], f32)
    return ln


@function
def _lanes_upto(lo, hi, bk: Comptime[int]):
    """The bool line ``lo + lane <= hi`` (as float32: exact for positions below 2**24), a
    comparison per line instead of a branch per lane. ``hi`` may be below ``lo`` (no lane)."""
    ids = line(f32(0), bk)
    for jj in range(bk):
        ids[jj] = f32(jj)
    return ids <= line(cast(hi, f32) - cast(lo, f32), bk)


@kernel
def attn_fwd(q: Tensor[In], k: Tensor[In], v: Tensor[Line[In]], out: Tensor[Line[In]], scale: f32,
             causal: Comptime[bool], e: Comptime[int], ev: Comptime[int], bq: Comptime[int], bk: Comptime[int],
             serial: Comptime[bool]):
    """out[b, h, i] = sum_j softmax_j(scale * q_i . k_j) v_j (see the module docstring); q and k
    in scalars (``e`` per row), v and out in lines (``ev`` per row)."""
    w = v.line_size()
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    qb = CUBE_COUNT_X - 1 - CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    i = qb * bq + u
    ir = cmin(i, n_q - 1)  # rows past the end read the last row (their results are not stored)
    qo = b * q.stride(0) + h * q.stride(1) + ir * q.stride(2)
    ko = b * k.stride(0) + h * k.stride(1)
    ks = k.stride(2)
    vo = (b * v.stride(0) + h * v.stride(1)) // w
    vs = v.stride(2) // w
    qv = LocalArray(f32, e)
    for t0 in range(e):
        qv[t0] = cast(q[qo + t0], f32) * scale
    acc = LocalArray(f32, ev, w)
    for t1 in range(ev):
        acc[t1] = line(f32(0), w)
    m = f32(_NEG_INF)
    total = f32(0)
    end = n_k
    if causal:
        end = cmin(n_k, qb * bq + bq)
    skt = SharedMemory(f32, e, bk)  # the tile's keys by component: line x = k[k0 .. k0 + bk, x]
    sv = SharedMemory(f32, bk * ev, w)  # the tile's values by row
    k0 = u32(0)
    while k0 < end:
        x = u
        while x < e:
            skt[x] = _keys_t(k, ko, ks, k0, n_k, x, bk)
            x += bq
        x = u
        while x < bk * ev:
            j = k0 + x // ev
            vl = line(f32(0), w)
            if j < n_k:
                vl = cast(v[vo + j * vs + x % ev], f32)
            sv[x] = vl
            x += bq
        sync_cube()
        s = skt[0] * qv[0]  # the row's scores against the tile's keys, one lane per key
        for t2 in range(1, e):
            s = _mac(s, skt[t2], qv[t2], serial)
        hi = n_k - 1
        if causal:
            hi = cmin(hi, i)
        keep = _lanes_upto(k0, hi, bk)  # the keys this row sees
        s = select(keep, s, line(f32(_NEG_INF), bk))
        # the first tile holds key 0, which every row sees: mt is finite from then on
        mt = cmax(m, line_max(s))
        alpha = exp(m - mt)
        p = select(keep, _exp_lanes(s - mt, serial), line(f32(0), bk))
        total = total * alpha + line_sum(p)
        for t3 in range(ev):
            acc[t3] = acc[t3] * alpha
        for jj in range(bk):
            pj = p[jj]
            for t4 in range(ev):
                acc[t4] = _mac(acc[t4], sv[jj * ev + t4], pj, serial)
        m = mt
        sync_cube()  # every unit has read the tile before the next one overwrites it
        k0 += bk
    if i < n_q:
        oo = (b * out.stride(0) + h * out.stride(1) + i * out.stride(2)) // w
        inv = f32(1) / total
        for t5 in range(ev):
            out[oo + u32(t5)] = cast(acc[t5] * inv, In)


@kernel
def attn_bwd_dq(q: Tensor[In], k: Tensor[In], kl: Tensor[Line[In]], v: Tensor[In], o: Tensor[In], do: Tensor[In],
                dq: Tensor[Line[In]], stats: Array[f32], scale: f32, causal: Comptime[bool], e: Comptime[int],
                ev: Comptime[int], bq: Comptime[int], bk: Comptime[int], serial: Comptime[bool]):
    """dq of the attention and, per query row r = (b * H + h) * n_q + i, its log-sum-exp in
    stats[2r] and D = dO . O in stats[2r + 1] (see the module docstring). ``kl`` is k in lines
    (the rows dq sums), ``e`` and ``ev`` count the scalars of a k and a v row."""
    w = kl.line_size()
    el = e // w
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    qb = CUBE_COUNT_X - 1 - CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    i = qb * bq + u
    ir = cmin(i, n_q - 1)
    qo = b * q.stride(0) + h * q.stride(1) + ir * q.stride(2)
    oo = b * o.stride(0) + h * o.stride(1) + ir * o.stride(2)
    go = b * do.stride(0) + h * do.stride(1) + ir * do.stride(2)
    ko = b * k.stride(0) + h * k.stride(1)
    ks = k.stride(2)
    klo = (b * kl.stride(0) + h * kl.stride(1)) // w
    kls = kl.stride(2) // w
    vo = b * v.stride(0) + h * v.stride(1)
    vs = v.stride(2)
    qv = LocalArray(f32, e)
    for t0 in range(e):
        qv[t0] = cast(q[qo + t0], f32) * scale
    gv = LocalArray(f32, ev)
    delta = f32(0)
    for t1 in range(ev):
        g = cast(do[go + t1], f32)
        gv[t1] = g
        delta += g * cast(o[oo + t1], f32)
    acc = LocalArray(f32, el, w)
    for t2 in range(el):
        acc[t2] = line(f32(0), w)
    m = f32(_NEG_INF)
    total = f32(0)
    end = n_k
    if causal:
        end = cmin(n_k, qb * bq + bq)
    skt = SharedMemory(f32, e, bk)
    svt = SharedMemory(f32, ev, bk)
    skr = SharedMemory(f32, bk * el, w)
    k0 = u32(0)
    while k0 < end:
        x = u
        while x < e:
            skt[x] = _keys_t(k, ko, ks, k0, n_k, x, bk)
            x += bq
        x = u
        while x < ev:
            svt[x] = _keys_t(v, vo, vs, k0, n_k, x, bk)
            x += bq
        x = u
        while x < bk * el:
            j = k0 + x // el
            kr = line(f32(0), w)
            if j < n_k:
                kr = cast(kl[klo + j * kls + x % el], f32)
            skr[x] = kr
            x += bq
        sync_cube()
        s = skt[0] * qv[0]
        for t3 in range(1, e):
            s = _mac(s, skt[t3], qv[t3], serial)
        dp = svt[0] * gv[0]
        for t4 in range(1, ev):
            dp = _mac(dp, svt[t4], gv[t4], serial)
        hi = n_k - 1
        if causal:
            hi = cmin(hi, i)
        keep = _lanes_upto(k0, hi, bk)  # the keys this row sees
        s = select(keep, s, line(f32(_NEG_INF), bk))
        mt = cmax(m, line_max(s))
        alpha = exp(m - mt)
        p = select(keep, _exp_lanes(s - mt, serial), line(f32(0), bk))
        total = total * alpha + line_sum(p)
        ds = p * (dp - delta)
        for t5 in range(el):
            acc[t5] = acc[t5] * alpha
        for jj in range(bk):
            dj = ds[jj]
            for t6 in range(el):
                acc[t6] = _mac(acc[t6], skr[jj * el + t6], dj, serial)
        m = mt
        sync_cube()
        k0 += bk
    if i < n_q:
        r = ((b * q.shape(1) + h) * n_q + i) * 2
        stats[r] = m + log(total)
        stats[r + 1] = delta
        dqo = (b * dq.stride(0) + h * dq.stride(1) + i * dq.stride(2)) // w
        f = scale / total
        for t7 in range(el):
            dq[dqo + u32(t7)] = cast(acc[t7] * f, In)


@kernel
def attn_bwd_dkv(q: Tensor[In], ql: Tensor[Line[In]], k: Tensor[In], v: Tensor[In], do: Tensor[In],
                 dol: Tensor[Line[In]], stats: Array[f32], dk: Tensor[Line[In]], dv: Tensor[Line[In]], scale: f32,
                 causal: Comptime[bool], e: Comptime[int], ev: Comptime[int], bkv: Comptime[int], bq: Comptime[int],
                 serial: Comptime[bool]):
    """dk and dv of the attention from the log-sum-exp and D that ``attn_bwd_dq`` stored (see the
    module docstring); ``ql`` and ``dol`` are q and dO in lines (the rows dk and dv sum)."""
    w = ql.line_size()
    el = e // w
    evl = ev // w
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    kb = CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    j = kb * bkv + u
    jr = cmin(j, n_k - 1)
    ko = b * k.stride(0) + h * k.stride(1) + jr * k.stride(2)
    vo = b * v.stride(0) + h * v.stride(1) + jr * v.stride(2)
    qo = b * q.stride(0) + h * q.stride(1)
    qs = q.stride(2)
    go = b * do.stride(0) + h * do.stride(1)
    gs = do.stride(2)
    qlo = (b * ql.stride(0) + h * ql.stride(1)) // w
    qls = ql.stride(2) // w
    glo = (b * dol.stride(0) + h * dol.stride(1)) // w
    gls = dol.stride(2) // w
    so = (b * q.shape(1) + h) * n_q * 2
    kv = LocalArray(f32, e)
    for t0 in range(e):
        kv[t0] = cast(k[ko + t0], f32) * scale
    vv = LocalArray(f32, ev)
    for t1 in range(ev):
        vv[t1] = cast(v[vo + t1], f32)
    ak = LocalArray(f32, el, w)
    for t2 in range(el):
        ak[t2] = line(f32(0), w)
    av = LocalArray(f32, evl, w)
    for t3 in range(evl):
        av[t3] = line(f32(0), w)
    sqt = SharedMemory(f32, e, bq)  # the tile's queries by component, one lane per query
    sgt = SharedMemory(f32, ev, bq)
    sqr = SharedMemory(f32, bq * el, w)  # the tile's queries by row
    sgr = SharedMemory(f32, bq * evl, w)
    sst = SharedMemory(f32, 2, bq)  # the tile's log-sum-exps and Ds, one lane per query
    i0 = u32(0)
    if causal:
        i0 = (kb * bkv) // bq * bq  # the tile holding the diagonal of the cube's first key
    while i0 < n_q:
        x = u
        while x < e:
            sqt[x] = _keys_t(q, qo, qs, i0, n_q, x, bq)
            x += bkv
        x = u
        while x < ev:
            sgt[x] = _keys_t(do, go, gs, i0, n_q, x, bq)
            x += bkv
        x = u
        while x < bq * el:
            i = i0 + x // el
            qr = line(f32(0), w)
            if i < n_q:
                qr = cast(ql[qlo + i * qls + x % el], f32)
            sqr[x] = qr
            x += bkv
        x = u
        while x < bq * evl:
            i = i0 + x // evl
            gr = line(f32(0), w)
            if i < n_q:
                gr = cast(dol[glo + i * gls + x % evl], f32)
            sgr[x] = gr
            x += bkv
        if u < 2:
            st = line(f32(0), bq)
            for ii in range(bq):
                if i0 + ii < n_q:
                    st[ii] = stats[so + (i0 + ii) * 2 + u]
            sst[u] = st
        sync_cube()
        s = sqt[0] * kv[0]  # the key's scores against the tile's queries, one lane per query
        for t4 in range(1, e):
            s = _mac(s, sqt[t4], kv[t4], serial)
        p = select(_lanes_upto(i0, n_q - 1, bq), _exp_lanes(s - sst[0], serial), line(f32(0), bq))
        if causal:  # the queries that see this key: i >= j, i.e. not (i <= j - 1)
            p = select(_lanes_upto(i0 + 1, j, bq), line(f32(0), bq), p)
        dp = sgt[0] * vv[0]
        for t5 in range(1, ev):
            dp = _mac(dp, sgt[t5], vv[t5], serial)
        ds = p * (dp - sst[1])
        for ii in range(bq):
            pi = p[ii]
            di = ds[ii]
            for t6 in range(evl):
                av[t6] = _mac(av[t6], sgr[ii * evl + t6], pi, serial)
            for t7 in range(el):
                ak[t7] = _mac(ak[t7], sqr[ii * el + t7], di, serial)
        sync_cube()
        i0 += bq
    if j < n_k:
        dko = (b * dk.stride(0) + h * dk.stride(1) + j * dk.stride(2)) // w
        dvo = (b * dv.stride(0) + h * dv.stride(1) + j * dv.stride(2)) // w
        for t8 in range(el):
            dk[dko + u32(t8)] = cast(ak[t8] * scale, In)
        for t9 in range(evl):
            dv[dvo + u32(t9)] = cast(av[t9], In)
