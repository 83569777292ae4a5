"""Philox 4x32-10 in the kernel language: ``ember.random.philox_values`` computed on the device.

The stream layout is ``docs/random.md`` (reference implementation: ``ember/random.py``). One
unit computes one counter block and writes the E elements it feeds (E = 4 for the 32-bit
class, 2 for the 64-bit class), so no unit ever needs another unit's words and the last,
partial block simply skips the elements past ``n``.

Exactness (checked by ``tests/unit/test_cube_random.py``):

* the word stream, ``uniform`` and ``randint`` are integer or correctly rounded float
  operations (no FMA: the C runtime compiles with ``-ffp-contract=off``; CUDA must use
  ``__fmul_rn``/``__fadd_rn`` equivalents), so they are bit-identical to the reference;
* ``normal`` evaluates Box-Muller in float64 with the C library's ``log``/``sin``/``cos``,
  while the reference uses numpy's (which may dispatch to its own SIMD versions). Both are
  within about one double ulp, so float32/float16/bfloat16 results (rounded from float64)
  agree except in astronomically rare boundary cases, and float64 results agree to about
  one ulp (measured: see the test module).

64-bit arithmetic: the 32x32->64 products are written as ``u64`` multiplies of widened
``u32`` words (the language has no separate multiply-hi); the 64-bit class's
``floor(v * R / 2**64)`` is assembled from four such products, as the spec describes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ... import dtype as dt
from ... import random as er
from ...cube import (
    ABSOLUTE_POS,
    Array,
    Comptime,
    CubeCount,
    CubeDim,
    T,
    bitcast,
    cast,
    cos,
    f32,
    f64,
    function,
    i64,
    kernel,
    log,
    sin,
    sqrt,
    u32,
    u64,
)

_DIM = CubeDim(256)
_M0 = er.PHILOX_M0
_M1 = er.PHILOX_M1
_W0 = er.PHILOX_W0
_W1 = er.PHILOX_W1
_ROUNDS = er.PHILOX_ROUNDS
# Box-Muller angle scales: u2 * 2pi == x * (2pi * 2**-k) exactly (a power-of-two scaling)
_ANGLE32 = er._TWO_PI * 2.0**-32
_ANGLE53 = er._TWO_PI * 2.0**-53
_MASK32 = 0xFFFFFFFF


@function
def philox4x32(c0, c1, k0, k1):
    """The block function on counter (c0, c1, 0, 0) and key (k0, k1), all u32 words."""
    c2 = u32(0)
    c3 = u32(0)
    for _ in range(_ROUNDS):  # comptime: unrolled
        p0 = cast(c0, u64) * _M0
        p1 = cast(c2, u64) * _M1
        c0 = cast(p1 >> 32, u32) ^ c1 ^ k0
        c1 = cast(p1, u32)
        c2 = cast(p0 >> 32, u32) ^ c3 ^ k1
        c3 = cast(p0, u32)
        k0 = k0 + _W0
        k1 = k1 + _W1
    return c0, c1, c2, c3


@function
def join64(lo, hi):
    return cast(lo, u64) | (cast(hi, u64) << 32)


@function
def top53(lo, hi):
    """The top 53 bits of the 64-bit value hi:lo as a float64 (exact). Converted through i64:
    the value is < 2**53, and signed conversion is one instruction where unsigned is not."""
    return cast(bitcast(join64(lo, hi) >> 11, i64), f64)


@function
def mulhi64(v, r):
    """floor(v * r / 2**64) for u64 v and r, from 32x32->64 products (exact)."""
    vl = v & _MASK32
    vh = v >> 32
    rl = r & _MASK32
    rh = r >> 32
    ll = vl * rl
    hl = vh * rl
    lh = vl * rh
    hh = vh * rh
    cross = (ll >> 32) + (hl & _MASK32) + lh
    return hh + (hl >> 32) + (cross >> 32)


@function
def box_muller(u1, theta, mean, std):
    """(mean + std r cos(theta), mean + std r sin(theta)), r = sqrt(-2 ln u1), in float64,
    with the reference's operation order (separate multiplies and adds)."""
    r = sqrt(log(u1) * -2.0)
    z0 = cos(theta) * r * std + mean
    z1 = sin(theta) * r * std + mean
    return z0, z1


@kernel
def philox_fill(
    out: Array[T],
    seed: u64,
    offset: u64,
    fa: f64,
    fb: f64,
    fc: f64,
    fd: f64,
    ia: i64,
    ib: u64,
    dist: Comptime[str],
    wide: Comptime[bool],
    bits: Comptime[int],
    plain: Comptime[bool],
):
    """out[k] = element k of the stream (seed, offset) for ``dist``; one unit per block.

    Scalars by distribution: uniform (fa, fb, fc, fd) = (lo, span, bottom, top), exact
    values of the compute dtype / the output dtype; ``plain`` marks [0, 1) (no affine step,
    no clamp); ``bits`` = the dtype's precision. normal: (fa, fb) = (mean, std). randint:
    ia = a, ib = b - a (0 standing for 2**64). ``wide``: the 64-bit class."""
    blk = ABSOLUTE_POS
    n = out.len()
    first = blk * (2 if wide else 4)
    if first < n:
        ctr = offset + cast(blk, u64)
        w0, w1, w2, w3 = philox4x32(cast(ctr, u32), cast(ctr >> 32, u32), cast(seed, u32), cast(seed >> 32, u32))
        ws = (w0, w1, w2, w3)
        if dist == "normal":
            if wide:
                z0, z1 = box_muller((top53(w0, w1) + 1.0) * 2.0**-53, top53(w2, w3) * _ANGLE53, fa, fb)
                out[first] = cast(z0, T)
                if first + 1 < n:
                    out[first + 1] = cast(z1, T)
            else:
                for m in range(2):
                    y0, y1 = box_muller(
                        (cast(ws[2 * m], f64) + 1.0) * 2.0**-32, cast(ws[2 * m + 1], f64) * _ANGLE32, fa, fb
                    )
                    e = first + 2 * m
                    # the spec's rounding: float64 -> float32 (-> half type)
                    if e < n:
                        out[e] = cast(cast(y0, f32), T)
                    if e + 1 < n:
                        out[e + 1] = cast(cast(y1, f32), T)
        elif dist == "uniform":
            if wide:
                for j in range(2):
                    e = first + j
                    if e < n:
                        u = top53(ws[2 * j], ws[2 * j + 1]) * 2.0**-53
                        if plain:
                            out[e] = cast(u, T)
                        else:
                            r = u * fb + fa
                            out[e] = cast(min(max(r, fc), fd), T)
            else:
                for j in range(4):
                    e = first + j
                    if e < n:
                        v = cast(ws[j] >> (32 - bits), f32) * 2.0**-bits
                        if plain:
                            out[e] = cast(v, T)
                        else:
                            rv = cast(v * cast(fb, f32) + cast(fa, f32), T)
                            out[e] = min(max(rv, cast(fc, T)), cast(fd, T))
        else:  # randint
            if wide:
                for j in range(2):
                    e = first + j
                    if e < n:
                        x = join64(ws[2 * j], ws[2 * j + 1])
                        off = x
                        if ib != 0:
                            off = mulhi64(x, ib)
                        out[e] = cast(bitcast(off + bitcast(ia, u64), i64), T)
            else:
                for j in range(4):
                    e = first + j
                    if e < n:
                        off = (cast(ws[j], u64) * ib) >> 32
                        out[e] = cast(cast(off, i64) + ia, T)


def plan(
    dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int, a: float, b: float
) -> Callable[[object, object], None]:
    """Validate a draw exactly as ``philox_values`` does (same errors) and return
    ``launch(client, out)`` that fills the contiguous tensor ``out`` of ``shape``."""
    dtype = dt.as_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    seed = er._check_u64(seed, "seed")
    offset = er._check_u64(offset, "offset")
    er._converter(dist, dtype, a, b)  # every argument check of the reference, nothing else
    n = math.prod(shape)
    wide = er.words_per_element(dist, dtype) == 2
    fa = fb = fc = fd = 0.0
    ia = ib = bits = 0
    plain = False
    if dist == "uniform":
        lo, span, bottom, top = er._float_range(dtype, a, b)
        fa, fb, fc, fd = float(lo), float(span), float(bottom), float(top)
        plain = float(a) == 0.0 and float(b) == 1.0
        bits = er._PRECISION[dtype.name]
    elif dist == "normal":
        fa, fb = float(a), float(b)
    else:
        lo_i, hi_i = er._as_int(a, "a"), er._as_int(b, "b")
        ia, ib = lo_i, (hi_i - lo_i) & ((1 << 64) - 1)  # 2**64 (full int64 range) -> 0
    blocks = er.blocks_used(dist, n, dtype)

    def launch(client: object, out: object) -> None:
        if blocks:
            philox_fill.launch(
                client,
                CubeCount.covering(blocks, _DIM),
                _DIM,
                out,
                seed,
                offset,
                fa,
                fb,
                fc,
                fd,
                ia,
                ib,
                dist,
                wide,
                bits,
                plain,
            )

    return launch
