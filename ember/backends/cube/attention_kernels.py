"""Fused scaled-dot-product attention kernels of the Cube backend (flash-attention style), in the
kernel language: the forward pass and the two backward passes, generic over the input float type.

Every tensor is a rank-4 view ``(B, H, n, d)`` read through its strides (the launcher,
``attention.py``, brings other ranks to four without copying where it can), passed in lines of
``W`` elements: its last dim is contiguous and every stride and the view offset are multiples of
``W`` (so ``stride // W`` counts lines). ``e`` and ``ev`` are the lines of a q/k row and of a v
row (comptime, so rows live in registers and the per-row loops unroll). Scores, the running max
and sum and every accumulator are float32 whatever the input type; each output is rounded once
at its store.

* ``attn_fwd``: one cube per ``(b, h, block of bq query rows)``, one unit per query row. The
  cube streams over the keys in tiles of ``bk`` rows: all its units stage the K and V tile in
  shared memory, then each unit scores its row against the tile (scores in registers: the
  ``bk`` loop unrolls), rescales its accumulator once per tile by ``exp(m_old - m_new)`` (the
  online softmax) and adds ``p * v``. Causal cubes stop after the tile that holds their last
  row's diagonal (top-left alignment, as torch: query ``i`` sees keys ``0..i``). Query blocks
  run last-first, so the longest causal blocks start first.
* ``attn_bwd_dq``: the same grid; per query row, ``D = sum(dO * O)``, then one pass over the
  key tiles: ``p = exp(s - m)`` with the running max ``m`` (the accumulator rescaled as in the
  forward), ``ds = p * (dO . v - D)``, ``dq += ds * k``; at the end ``dq = scale * acc / l``
  and the row's log-sum-exp ``m + log l`` and ``D`` are stored for ``attn_bwd_dkv``.
* ``attn_bwd_dkv``: one cube per ``(b, h, block of bkv key rows)``, one unit per key row; the
  cube streams over the query tiles (causal: from the tile holding its first key's diagonal),
  staging Q, dO, the log-sum-exp and D; each unit accumulates ``dv += p * dO`` and
  ``dk += ds * q`` with ``p = exp(s - lse)`` recomputed from the stored log-sum-exp.

Positions past the end of a sequence are staged as zeros and masked (their scores -inf, their
probabilities 0); barriers sit outside every per-unit condition, so a cube's units all reach
them. Indices are u32: every tensor stays below 2**32 elements.
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
    cast,
    exp,
    f32,
    kernel,
    line,
    line_sum,
    log,
    select,
    sync_cube,
    u32,
)
from ...cube import max as cmax
from ...cube import min as cmin

__all__ = ["attn_fwd", "attn_bwd_dq", "attn_bwd_dkv"]

#: the input (and output) float type; everything computed is float32
In = ElemVar("In", "float")

_NEG_INF = -float("inf")


@kernel
def attn_fwd(q: Tensor[Line[In]], k: Tensor[Line[In]], v: Tensor[Line[In]], out: Tensor[Line[In]],
             scale: f32, causal: Comptime[bool], e: Comptime[int], ev: Comptime[int], bq: Comptime[int],
             bk: Comptime[int]):
    """out[b, h, i] = sum_j softmax_j(scale * q_i . k_j) v_j (see the module docstring)."""
    w = q.line_size()
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    qb = CUBE_COUNT_X - 1 - CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    i = qb * bq + u
    row = i < n_q
    ir = cmin(i, n_q - 1)  # rows past the end read the last row (their results are not stored)
    qo = (b * q.stride(0) + h * q.stride(1) + ir * q.stride(2)) // w
    ko = (b * k.stride(0) + h * k.stride(1)) // w
    vo = (b * v.stride(0) + h * v.stride(1)) // w
    ks = k.stride(2) // w
    vs = v.stride(2) // w
    qv = LocalArray(f32, e, w)
    for t in range(e):
        qv[t] = cast(q[qo + t], f32) * scale
    acc = LocalArray(f32, ev, w)
    for t in range(ev):
        acc[t] = line(f32(0), w)
    sc = LocalArray(f32, bk)
    m = f32(_NEG_INF)
    total = f32(0)
    end = n_k
    if causal:
        end = cmin(n_k, qb * bq + bq)
    sk = SharedMemory(f32, bk * e, w)
    sv = SharedMemory(f32, bk * ev, w)
    k0 = u32(0)
    while k0 < end:
        # stage the tile: unit u copies lines u, u + bq, ... of K and of V (zeros past the end)
        x = u
        while x < bk * e:
            j = k0 + x // e
            kv = line(f32(0), w)
            if j < n_k:
                kv = cast(k[ko + j * ks + x % e], f32)
            sk[x] = kv
            x += bq
        x = u
        while x < bk * ev:
            j = k0 + x // ev
            vv = line(f32(0), w)
            if j < n_k:
                vv = cast(v[vo + j * vs + x % ev], f32)
            sv[x] = vv
            x += bq
        sync_cube()
        mt = m
        for jj in range(bk):
            d = qv[0] * sk[jj * e]
            for t in range(1, e):
                d += qv[t] * sk[jj * e + t]
            s = line_sum(d)
            j = k0 + jj
            ok = j < n_k
            if causal:
                ok = ok and j <= i
            s = select(ok, s, f32(_NEG_INF))
            sc[jj] = s
            mt = cmax(mt, s)
        # the first tile holds key 0, which every row sees: mt is finite from then on
        alpha = exp(m - mt)
        total = total * alpha
        for t in range(ev):
            acc[t] = acc[t] * alpha
        for jj in range(bk):
            p = exp(sc[jj] - mt)
            total += p
            for t in range(ev):
                acc[t] += sv[jj * ev + t] * p
        m = mt
        sync_cube()  # every unit has read the tile before the next one overwrites it
        k0 += bk
    if row:
        oo = (b * out.stride(0) + h * out.stride(1) + i * out.stride(2)) // w
        inv = f32(1) / total
        for t in range(ev):
            out[oo + u32(t)] = cast(acc[t] * inv, In)


@kernel
def attn_bwd_dq(q: Tensor[Line[In]], k: Tensor[Line[In]], v: Tensor[Line[In]], o: Tensor[Line[In]],
                do: Tensor[Line[In]], dq: Tensor[Line[In]], stats: Array[f32], scale: f32, causal: Comptime[bool],
                e: Comptime[int], ev: Comptime[int], bq: Comptime[int], bk: Comptime[int]):
    """dq of the attention and, per query row r = (b * H + h) * n_q + i, its log-sum-exp in
    stats[2r] and D = dO . O in stats[2r + 1] (see the module docstring)."""
    w = q.line_size()
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    qb = CUBE_COUNT_X - 1 - CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    i = qb * bq + u
    row = i < n_q
    ir = cmin(i, n_q - 1)
    qo = (b * q.stride(0) + h * q.stride(1) + ir * q.stride(2)) // w
    oo = (b * o.stride(0) + h * o.stride(1) + ir * o.stride(2)) // w
    go = (b * do.stride(0) + h * do.stride(1) + ir * do.stride(2)) // w
    ko = (b * k.stride(0) + h * k.stride(1)) // w
    vo = (b * v.stride(0) + h * v.stride(1)) // w
    ks = k.stride(2) // w
    vs = v.stride(2) // w
    qv = LocalArray(f32, e, w)
    for t in range(e):
        qv[t] = cast(q[qo + t], f32) * scale
    gv = LocalArray(f32, ev, w)
    dd = line(f32(0), w)
    for t in range(ev):
        g = cast(do[go + t], f32)
        gv[t] = g
        dd += g * cast(o[oo + t], f32)
    delta = line_sum(dd)
    acc = LocalArray(f32, e, w)
    for t in range(e):
        acc[t] = line(f32(0), w)
    sc = LocalArray(f32, bk)
    dp = LocalArray(f32, bk)
    m = f32(_NEG_INF)
    total = f32(0)
    end = n_k
    if causal:
        end = cmin(n_k, qb * bq + bq)
    sk = SharedMemory(f32, bk * e, w)
    sv = SharedMemory(f32, bk * ev, w)
    k0 = u32(0)
    while k0 < end:
        x = u
        while x < bk * e:
            j = k0 + x // e
            kv = line(f32(0), w)
            if j < n_k:
                kv = cast(k[ko + j * ks + x % e], f32)
            sk[x] = kv
            x += bq
        x = u
        while x < bk * ev:
            j = k0 + x // ev
            vv = line(f32(0), w)
            if j < n_k:
                vv = cast(v[vo + j * vs + x % ev], f32)
            sv[x] = vv
            x += bq
        sync_cube()
        mt = m
        for jj in range(bk):
            d = qv[0] * sk[jj * e]
            for t in range(1, e):
                d += qv[t] * sk[jj * e + t]
            s = line_sum(d)
            j = k0 + jj
            ok = j < n_k
            if causal:
                ok = ok and j <= i
            s = select(ok, s, f32(_NEG_INF))
            sc[jj] = s
            mt = cmax(mt, s)
            g = gv[0] * sv[jj * ev]
            for t in range(1, ev):
                g += gv[t] * sv[jj * ev + t]
            dp[jj] = line_sum(g) - delta
        alpha = exp(m - mt)
        total = total * alpha
        for t in range(e):
            acc[t] = acc[t] * alpha
        for jj in range(bk):
            p = exp(sc[jj] - mt)
            total += p
            ds = p * dp[jj]
            for t in range(e):
                acc[t] += sk[jj * e + t] * ds
        m = mt
        sync_cube()
        k0 += bk
    if row:
        r = ((b * q.shape(1) + h) * n_q + i) * 2
        stats[r] = m + log(total)
        stats[r + 1] = delta
        dqo = (b * dq.stride(0) + h * dq.stride(1) + i * dq.stride(2)) // w
        f = scale / total
        for t in range(e):
            dq[dqo + u32(t)] = cast(acc[t] * f, In)


@kernel
def attn_bwd_dkv(q: Tensor[Line[In]], k: Tensor[Line[In]], v: Tensor[Line[In]], do: Tensor[Line[In]],
                 stats: Array[f32], dk: Tensor[Line[In]], dv: Tensor[Line[In]], scale: f32,
                 causal: Comptime[bool], e: Comptime[int], ev: Comptime[int], bkv: Comptime[int],
                 bq: Comptime[int]):
    """dk and dv of the attention from the log-sum-exp and D that ``attn_bwd_dq`` stored (see the
    module docstring)."""
    w = q.line_size()
    u = UNIT_POS
    b = CUBE_POS_Z
    h = CUBE_POS_Y
    kb = CUBE_POS_X
    n_q = q.shape(2)
    n_k = k.shape(2)
    j = kb * bkv + u
    col = j < n_k
    jr = cmin(j, n_k - 1)
    ko = (b * k.stride(0) + h * k.stride(1) + jr * k.stride(2)) // w
    vo = (b * v.stride(0) + h * v.stride(1) + jr * v.stride(2)) // w
    qo = (b * q.stride(0) + h * q.stride(1)) // w
    go = (b * do.stride(0) + h * do.stride(1)) // w
    qs = q.stride(2) // w
    gs = do.stride(2) // w
    so = (b * q.shape(1) + h) * n_q * 2
    kv = LocalArray(f32, e, w)
    for t in range(e):
        kv[t] = cast(k[ko + t], f32) * scale
    vv = LocalArray(f32, ev, w)
    for t in range(ev):
        vv[t] = cast(v[vo + t], f32)
    ak = LocalArray(f32, e, w)
    for t in range(e):
        ak[t] = line(f32(0), w)
    av = LocalArray(f32, ev, w)
    for t in range(ev):
        av[t] = line(f32(0), w)
    sq = SharedMemory(f32, bq * e, w)
    sg = SharedMemory(f32, bq * ev, w)
    sl = SharedMemory(f32, bq * 2)
    i0 = u32(0)
    if causal:
        i0 = (kb * bkv) // bq * bq  # the tile holding the diagonal of the cube's first key
    while i0 < n_q:
        x = u
        while x < bq * e:
            i = i0 + x // e
            qq = line(f32(0), w)
            if i < n_q:
                qq = cast(q[qo + i * qs + x % e], f32)
            sq[x] = qq
            x += bkv
        x = u
        while x < bq * ev:
            i = i0 + x // ev
            gg = line(f32(0), w)
            if i < n_q:
                gg = cast(do[go + i * gs + x % ev], f32)
            sg[x] = gg
            x += bkv
        x = u
        while x < bq * 2:
            i = i0 + x // 2
            st = f32(0)
            if i < n_q:
                st = stats[so + i * 2 + x % 2]
            sl[x] = st
            x += bkv
        sync_cube()
        for ii in range(bq):
            i = i0 + ii
            d = kv[0] * sq[ii * e]
            for t in range(1, e):
                d += kv[t] * sq[ii * e + t]
            ok = i < n_q
            if causal:
                ok = ok and j <= i
            p = select(ok, exp(line_sum(d) - sl[ii * 2]), f32(0))
            g = vv[0] * sg[ii * ev]
            for t in range(1, ev):
                g += vv[t] * sg[ii * ev + t]
            ds = p * (line_sum(g) - sl[ii * 2 + 1])
            for t in range(ev):
                av[t] += sg[ii * ev + t] * p
            for t in range(e):
                ak[t] += sq[ii * e + t] * ds
        sync_cube()
        i0 += bq
    if col:
        dko = (b * dk.stride(0) + h * dk.stride(1) + j * dk.stride(2)) // w
        dvo = (b * dv.stride(0) + h * dv.stride(1) + j * dv.stride(2)) // w
        for t in range(e):
            dk[dko + u32(t)] = cast(ak[t] * scale, In)
        for t in range(ev):
            dv[dvo + u32(t)] = cast(av[t], In)
