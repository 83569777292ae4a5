"""Counter-based random numbers: Philox 4x32-10, one stream layout for every backend.

One idea over ~670 lines: one stream contract. The block function, the chunked parallel draw,
the element conversions and the global stream state define the bits every backend must
reproduce, and change together.

The whole contract is written out in ``docs/random.md``; this module is its reference
implementation (numpy, vectorised over blocks, no Python loop per element). In short:

* ``key = seed`` (64-bit; word 0 = low 32 bits, word 1 = high 32 bits).
* Block ``i`` of a call at ``offset`` encrypts the counter ``(offset + i) mod 2**64`` (low word in
  counter word 0, high word in word 1, words 2 and 3 zero) and yields four 32-bit words.
  The words of a call form one flat stream ``W[4*i + j] = word j of block i``.
* A dtype is either of the *32-bit class* (one word per element: float32, float16, bfloat16,
  int32, int16, int8, uint8, bool) or the *64-bit class* (two words per element, ``W[2k]`` low and
  ``W[2k+1]`` high: float64, int64, and every dtype of ``randint`` that is floating). Element
  ``k`` (C order) therefore lives in block ``k // E`` with ``E = 4`` or ``2`` elements per block,
  so a kernel thread can compute any element from ``(seed, offset, k)`` alone.
* ``uniform`` keeps the top precision-width bits of its word(s), so it is never 1.0;
  ``normal`` is Box-Muller on element pairs ``(2m, 2m+1)`` computed in float64; ``randint``
  is the multiply-high of the word(s) with the range.

The global generator hands out ``(seed, offset)`` pairs and advances its offset by the blocks a
call consumes (``blocks_used``), so consecutive calls never share a counter.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from . import dtype as dt
from .dtype import DType
from .errors import DTypeError

if TYPE_CHECKING:  # concurrent.futures (and logging under it) load with the first pool: ~4 ms of start
    from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "PHILOX_M0", "PHILOX_M1", "PHILOX_W0", "PHILOX_W1", "PHILOX_ROUNDS",
    "DISTRIBUTIONS", "philox4x32", "philox_words", "philox_values", "blocks_used",
    "elements_per_block", "words_per_element",
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed", "next_offset",
    "get_rng_state", "set_rng_state",
]

# Philox 4x32 constants (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
PHILOX_M0 = 0xD2511F53  # multiplier applied to counter word 0
PHILOX_M1 = 0xCD9E8D57  # multiplier applied to counter word 2
PHILOX_W0 = 0x9E3779B9  # key word 0 bump per round (golden ratio)
PHILOX_W1 = 0xBB67AE85  # key word 1 bump per round (sqrt(3) - 1)
PHILOX_ROUNDS = 10

DISTRIBUTIONS = ("uniform", "normal", "randint")

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_M0 = np.uint64(PHILOX_M0)
_M1 = np.uint64(PHILOX_M1)
# Position of the low and high 32-bit halves inside a uint64 viewed as two uint32.
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)

# Blocks per work chunk: a chunk's working set (~10 arrays of 32768 words) stays in L2, which
# is what makes the numpy version fast (whole-array passes are ~4x slower, memory bound).
# Must be even so that a chunk boundary never splits a normal pair or a 64-bit element.
_CHUNK_BLOCKS = 32768
assert _CHUNK_BLOCKS % 2 == 0

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
_TWO_PI = 2.0 * math.pi  # the double nearest to 2*pi; Box-Muller's angle is u2 * _TWO_PI


# ---------------------------------------------------------------------------------------------
# The block function
# ---------------------------------------------------------------------------------------------

def _xor_into(out: np.ndarray, a: np.ndarray | None, b: np.ndarray | None, k: int) -> np.ndarray:
    """``out = a ^ b ^ k`` where ``None`` stands for an all-zero word (at least one is an array)."""
    if a is None:
        a, b = b, None
    assert a is not None
    if b is None:
        return np.bitwise_xor(a, np.uint32(k), out=out)
    np.bitwise_xor(a, b, out=out)
    return np.bitwise_xor(out, np.uint32(k), out=out)


def _philox_rounds(c0: np.ndarray, c1: np.ndarray, c2: np.ndarray | None, c3: np.ndarray | None,
                   k0: int, k1: int, out: np.ndarray) -> None:
    """Philox 4x32-10 on ``n`` counters given as four uint32 word arrays; writes ``out[:, j]``.

    ``c2``/``c3`` may be ``None`` (all zero: ember's counters), which skips the work of round
    0 that multiplies or xors a zero word. ``out`` is a ``(n, 4)`` uint32 array.

    One round (Random123's ``philox4x32round``)::

        hi0:lo0 = M0 * c0 (64-bit product)      hi1:lo1 = M1 * c2
        c = (hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0)

    and the key is bumped by (W0, W1) mod 2**32 between rounds. The 32x32->64 products are
    exact in uint64; their halves are read through a uint32 view (no shift/mask passes).
    """
    n = c0.shape[0]
    # Double-buffered products: round r's low halves are still read (as c1/c3) while round
    # r+1 writes its own products. The (hi, lo) uint32 views of each buffer are made once.
    prods = []
    for _ in range(2):
        pair = []
        for _ in range(2):
            p = np.empty(n, _U64)
            v = p.view(_U32).reshape(n, 2)
            pair.append((p, v[:, _HI], v[:, _LO]))
        prods.append(pair)
    new0 = np.empty(n, _U32)
    new2 = np.empty(n, _U32)
    w0: np.ndarray = c0
    w1: np.ndarray | None = c1
    w2: np.ndarray | None = c2
    w3: np.ndarray | None = c3
    for r in range(PHILOX_ROUNDS):
        (p0, hi0, lo0), (p1, hi1_, lo1_) = prods[r & 1]
        np.multiply(w0, _M0, out=p0)
        hi1 = lo1 = None  # a zero word 2 gives a zero product
        if w2 is not None:
            np.multiply(w2, _M1, out=p1)
            hi1, lo1 = hi1_, lo1_
        if r == PHILOX_ROUNDS - 1:
            _xor_into(out[:, 0], hi1, w1, k0)
            _xor_into(out[:, 2], hi0, w3, k1)
            out[:, 1] = 0 if lo1 is None else lo1
            out[:, 3] = lo0
            return
        # w0 / w2 are read by this round's multiplies only, so from round 1 on (when they are
        # new0 / new2) the xors may overwrite them. In round 0 they are the caller's arrays,
        # which new0 / new2 are not. w1 / w3 (views of the previous round's products) are
        # read here before being rebound, and the next round writes the other product pair.
        w0 = _xor_into(new0, hi1, w1, k0)
        w2 = _xor_into(new2, hi0, w3, k1)
        w1, w3 = lo1, lo0
        k0 = (k0 + PHILOX_W0) & _MASK32
        k1 = (k1 + PHILOX_W1) & _MASK32


def philox4x32(counter_lo: np.ndarray, key: int, counter_hi: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox 4x32-10 of each counter: four uint32 arrays (output words 0..3), shaped like
    ``counter_lo``.

    ``counter_lo`` (uint64) fills counter words 0 (low 32 bits) and 1 (high 32 bits);
    ``counter_hi`` (uint64, default zero, which is what ember's streams use) fills words 2 and 3
    the same way; ``key`` (0 <= key < 2**64) gives key word 0 (low half) and word 1 (high half).
    """
    lo = np.ascontiguousarray(counter_lo, dtype=_U64)
    shape = lo.shape
    key = _check_u64(key, "key")
    lo = lo.reshape(-1)
    n = lo.shape[0]
    v = lo.view(_U32).reshape(n, 2)
    c2 = c3 = None
    if counter_hi is not None:
        hi = np.ascontiguousarray(np.broadcast_to(np.asarray(counter_hi, dtype=_U64), shape))
        vh = hi.reshape(-1).view(_U32).reshape(n, 2)
        c2, c3 = vh[:, _LO], vh[:, _HI]
    out = np.empty((n, 4), _U32)
    _philox_rounds(v[:, _LO], v[:, _HI], c2, c3, key & _MASK32, key >> 32, out)
    w0, w1, w2, w3 = (np.ascontiguousarray(out[:, j]).reshape(shape) for j in range(4))
    return w0, w1, w2, w3


# uint64 0, 1, 2, ...: block indices inside a chunk (read-only, shared by all threads).
_IOTA = np.arange(_CHUNK_BLOCKS, dtype=_U64)
_IOTA.flags.writeable = False


def _chunk_words(key: int, first_counter: int, count: int) -> np.ndarray:
    """Words of ``count`` consecutive blocks starting at counter ``first_counter`` (mod 2**64),
    as a flat uint32 array ``W`` with ``W[4*i + j]`` = word ``j`` of block ``i``."""
    ctr = np.add(_IOTA[:count], np.uint64(first_counter & _MASK64))  # wraps mod 2**64
    v = ctr.view(_U32).reshape(count, 2)
    out = np.empty((count, 4), _U32)
    _philox_rounds(v[:, _LO], v[:, _HI], None, None, key & _MASK32, key >> 32, out)
    return out.reshape(-1)


# ---------------------------------------------------------------------------------------------
# Threads: numpy releases the GIL inside ufunc loops, so chunks run in parallel. Each chunk
# writes a disjoint slice of the output, so the values never depend on scheduling.
# ---------------------------------------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _executor() -> ThreadPoolExecutor | None:
    """The shared pool (``None`` on one core). Recreated after ``fork``: a child inherits the
    pool object but not its threads, and submitting to it would wait forever."""
    global _pool, _pool_pid
    workers = min(_cpu_count(), 8)
    if workers < 2:
        return None
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(workers, thread_name_prefix="ember-random")
            _pool_pid = os.getpid()
        return _pool


def _for_each_chunk(n_blocks: int, fn: Callable[[int, int], None]) -> None:
    """Call ``fn(first_block, count)`` for every chunk of ``n_blocks``, in parallel if large."""
    starts = range(0, n_blocks, _CHUNK_BLOCKS)
    pool = _executor() if len(starts) > 1 else None
    if pool is None:
        for s in starts:
            fn(s, min(_CHUNK_BLOCKS, n_blocks - s))
        return
    futures = [pool.submit(fn, s, min(_CHUNK_BLOCKS, n_blocks - s)) for s in starts]
    for f in futures:
        f.result()  # re-raises a worker's exception on the calling thread


def philox_words(seed: int, offset: int, n_blocks: int) -> np.ndarray:
    """The flat word stream ``W`` (uint32, ``4 * n_blocks`` long) of a call at ``offset``:
    ``W[4*i + j]`` is word ``j`` of the block whose counter is ``(offset + i) mod 2**64``."""
    seed = _check_u64(seed, "seed")
    offset = _check_u64(offset, "offset")
    out = np.empty(4 * n_blocks, _U32)

    def chunk(s: int, count: int) -> None:
        out[4 * s: 4 * (s + count)] = _chunk_words(seed, offset + s, count)

    _for_each_chunk(n_blocks, chunk)
    return out


# ---------------------------------------------------------------------------------------------
# Words -> values
# ---------------------------------------------------------------------------------------------

# A converter writes ``len(out)`` elements into ``out`` from the flat words of the chunk that
# holds them (element 0 of ``out`` is the chunk's first element).
_Converter = Callable[[np.ndarray, np.ndarray], None]

_PRECISION = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}  # significand bits
_INT_BOUNDS = {"bool": (0, 1), "uint8": (0, 255), "int8": (-128, 127), "int16": (-(2**15), 2**15 - 1),
               "int32": (-(2**31), 2**31 - 1),
               "int64": (-(2**63), 2**63 - 1)}


def words_per_element(dist: str, dtype: DType) -> int:
    """1 for the 32-bit class, 2 for the 64-bit class (float64, int64, and floating
    ``randint``)."""
    dtype = dt.as_dtype(dtype)
    _check_dist_dtype(dist, dtype)
    if dtype.name in ("float64", "int64") or (dist == "randint" and dtype.is_floating_point):
        return 2
    return 1


def elements_per_block(dist: str, dtype: DType) -> int:
    """Elements one 128-bit block feeds: 4 (32-bit class) or 2 (64-bit class). Always even, so a
    Box-Muller pair never straddles two blocks."""
    return 4 // words_per_element(dist, dtype)


def blocks_used(dist: str, n_elements: int, dtype: DType) -> int:
    """How many counter blocks a call of ``n_elements`` consumes: the global generator advances
    its offset by this much, so the next call starts on fresh counters."""
    if n_elements < 0:
        raise ValueError(f"n_elements must be >= 0, got {n_elements}")
    e = elements_per_block(dist, dtype)
    return (n_elements + e - 1) // e


def _check_dist_dtype(dist: str, dtype: DType) -> None:
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; choose from {DISTRIBUTIONS}")
    if dist != "randint" and not dtype.is_floating_point:
        raise DTypeError(f"{dist} random values need a floating dtype, got {dtype}")


def _check_u64(v: int, what: str) -> int:
    v = int(v)
    if not 0 <= v <= _MASK64:
        raise ValueError(f"{what} must be in [0, 2**64), got {v}")
    return v


def _uniform_bits(words: np.ndarray, bits: int, compute: np.dtype, out: np.ndarray) -> np.ndarray:
    """``(w >> (32 - bits)) * 2**-bits`` in ``compute`` (exact: bits <= 24 fits a float32)."""
    top = np.right_shift(words, 32 - bits)
    return np.multiply(top, compute.type(2.0 ** -bits), out=out, dtype=compute, casting="unsafe")


def _u64_values(words: np.ndarray, m: int) -> np.ndarray:
    """The 64-bit values ``W[2k] | W[2k+1] << 32`` of elements 0..m-1 (a fresh array)."""
    w = words[: 2 * m]
    if _LO == 0:  # little-endian: a uint64 view of the word pairs is exactly that
        return w.view(_U64).copy()
    return (w[1::2].astype(_U64) << np.uint64(32)) | w[0::2]


def _top53(words: np.ndarray, m: int) -> np.ndarray:
    """``v >> 11`` (the top 53 bits) of the 64-bit values of elements 0..m-1."""
    v = _u64_values(words, m)
    return np.right_shift(v, np.uint64(11), out=v)


def _float_range(dtype: DType, a: float, b: float) -> tuple[np.generic, np.generic, np.generic,
                                                                np.generic]:
    """Host-side constants of ``uniform`` on [a, b): ``lo``, ``span`` (in the compute dtype) and
    ``bottom``, ``top``: the smallest / largest ``dtype`` values in [a, b). Every backend
    receives these same four scalars, so kernels do no host-dependent arithmetic."""
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b)) or not a < b:
        raise ValueError(f"uniform needs finite a < b, got [{a}, {b})")
    biggest = float(ml_dtypes.finfo(dtype.np).max)
    if max(abs(a), abs(b)) > biggest:
        raise ValueError(f"uniform bounds [{a}, {b}) lie outside the {dtype} range +-{biggest}")
    compute = dtype.compute
    with np.errstate(over="ignore"):
        span = compute.type(b - a)
        if not np.isfinite(span):
            raise ValueError(f"uniform range [{a}, {b}) is wider than the largest {dtype} value")
        t = dtype.np.type
        top = t(b)
        if not float(top) < b:  # b rounded up (or to inf): step down
            top = np.nextafter(top, t(-np.inf))
        bottom = t(a)
        if not float(bottom) >= a:
            bottom = np.nextafter(bottom, t(np.inf))
    if not (np.isfinite(bottom) and np.isfinite(top) and bottom <= top):
        raise ValueError(f"no finite {dtype} value lies in [{a}, {b})")
    return compute.type(a), span, bottom, top


def _uniform(dtype: DType, a: float, b: float) -> _Converter:
    name = dtype.name
    lo, span, bottom, top = _float_range(dtype, a, b)
    # u itself: skipping the affine step and the clamp is bit-exact for [0, 1).
    default = float(a) == 0.0 and float(b) == 1.0
    compute = dtype.compute

    def affine(u: np.ndarray) -> None:
        # r = lo + u * span: two correctly rounded ops in the compute dtype, never an FMA.
        np.multiply(u, span, out=u)
        np.add(u, lo, out=u)

    def clamp(r: np.ndarray) -> None:
        # After rounding to the dtype, r may equal b (or fall below a): clamp into [a, b).
        np.clip(r, bottom, top, out=r)

    if name == "float64":
        def conv64(words: np.ndarray, out: np.ndarray) -> None:
            v = _top53(words, out.shape[0])
            np.multiply(v, 2.0 ** -53, out=out, casting="unsafe")  # exact: v < 2**53
            if not default:
                affine(out)
                clamp(out)
        return conv64

    bits = _PRECISION[name]
    if name == "float32":
        def conv32(words: np.ndarray, out: np.ndarray) -> None:
            _uniform_bits(words[: out.shape[0]], bits, compute, out)
            if not default:
                affine(out)
                clamp(out)
        return conv32

    def conv16(words: np.ndarray, out: np.ndarray) -> None:  # float16 / bfloat16 via float32
        u = _uniform_bits(words[: out.shape[0]], bits, compute, np.empty(out.shape[0], compute))
        if not default:
            affine(u)
        out[...] = u  # round to nearest even (exact in the default case)
        if not default:
            clamp(out)
    return conv16


def _box_muller(u1: np.ndarray, theta: np.ndarray, mean: float, std: float,
                out: np.ndarray) -> None:
    """``out[0::2] = mean + std * r cos(theta)``, ``out[1::2] = mean + std * r sin(theta)``,
    ``r = sqrt(-2 ln u1)``, all in float64, then rounded to ``out`` (via float32 for the half
    types). ``u1`` is overwritten. ``out`` may be one shorter than ``2 * len(u1)``."""
    r = np.log(u1, out=u1)
    r *= -2.0
    np.sqrt(r, out=r)
    m = out.shape[0]
    half = out.dtype not in (np.float64, np.float32)
    for j, f in ((0, np.cos), (1, np.sin)):
        cnt = (m - j + 1) // 2
        z = f(theta[:cnt])
        z *= r[:cnt]
        z *= std  # mean + std * z: a separate multiply and add, never an FMA
        z += mean
        # specified double rounding for half types: float64 -> float32 -> float16/bfloat16
        out[j::2] = z.astype(np.float32) if half else z


def _normal(dtype: DType, mean: float, std: float) -> _Converter:
    mean, std = float(mean), float(std)
    if not (math.isfinite(mean) and math.isfinite(std)) or std < 0:
        raise ValueError(f"normal needs a finite mean and a finite std >= 0, got {mean}, {std}")

    if dtype.name == "float64":
        def conv64(words: np.ndarray, out: np.ndarray) -> None:
            # Pair m uses block m whole: u1 from words 0-1, u2 from words 2-3.
            pairs = (out.shape[0] + 1) // 2
            v = _top53(words, 2 * pairs)
            u1 = np.add(v[0::2], 1.0)  # (x + 1) * 2**-53 in (0, 1]: log never sees 0
            u1 *= 2.0 ** -53
            theta = np.multiply(v[1::2], _TWO_PI * 2.0 ** -53)  # == (x * 2**-53) * 2pi exactly
            _box_muller(u1, theta, mean, std, out)
        return conv64

    def conv32(words: np.ndarray, out: np.ndarray) -> None:
        # Pair m uses words 2m (u1) and 2m+1 (u2), all 32 bits of each, in float64.
        pairs = (out.shape[0] + 1) // 2
        w = words[: 2 * pairs]
        u1 = np.add(w[0::2], 1.0)  # (x + 1) * 2**-32 in (0, 1]: log never sees 0
        u1 *= 2.0 ** -32
        theta = np.multiply(w[1::2], _TWO_PI * 2.0 ** -32)  # == (x * 2**-32) * 2pi exactly
        _box_muller(u1, theta, mean, std, out)
    return conv32


def _as_int(v: float, what: str) -> int:
    if isinstance(v, (int, np.integer)):
        return int(v)
    if not (math.isfinite(v) and float(v).is_integer()):
        raise ValueError(f"randint bound {what} must be an integer, got {v}")
    return int(v)


def _mulhi64(v: np.ndarray, r: int) -> np.ndarray:
    """``floor(v * r / 2**64)`` for uint64 ``v`` and ``1 <= r <= 2**64``, from 32x32->64
    products only (the kernel language has 32-bit multiply-hi/lo, no 128-bit integers)."""
    if r == 1 << 64:
        return v
    n = v.shape[0]
    halves = v.view(_U32).reshape(n, 2)
    v_lo, v_hi = halves[:, _LO], halves[:, _HI]
    r_lo, r_hi = np.uint64(r & _MASK32), np.uint64(r >> 32)
    s32 = np.uint64(32)
    ll = np.multiply(v_lo, r_lo, dtype=_U64)
    hl = np.multiply(v_hi, r_lo, dtype=_U64)
    if r >> 32 == 0:
        # (v_hi*r + (v_lo*r >> 32)) >> 32; the sum is < 2**64 - 2**32 + 1: no overflow.
        ll >>= s32
        hl += ll
        hl >>= s32
        return hl
    lh = np.multiply(v_lo, r_hi, dtype=_U64)
    hh = np.multiply(v_hi, r_hi, dtype=_U64)
    # cross = (ll >> 32) + (hl & mask) + lh <= 3 (2**32 - 1) + (2**32 - 1)**2 < 2**64.
    ll >>= s32
    ll += hl & np.uint64(_MASK32)
    ll += lh
    ll >>= s32
    hl >>= s32
    hh += hl
    hh += ll
    return hh


def _randint(dtype: DType, a: float, b: float) -> _Converter:
    lo, hi = _as_int(a, "a"), _as_int(b, "b")
    if dtype.is_floating_point:
        # Every integer in range must be exact in the dtype, so the final cast is exact.
        limit = 2 ** _PRECISION[dtype.name]
        bounds = (-limit, limit - 1)
    else:
        bounds = _INT_BOUNDS[dtype.name]
    if not bounds[0] <= lo < hi <= bounds[1] + 1:
        raise ValueError(f"randint needs {bounds[0]} <= a < b <= {bounds[1] + 1} for {dtype}, "
                         f"got [{lo}, {hi})")
    r = hi - lo  # 1 <= r <= 2**32 (32-bit class) or 2**64 (64-bit class)

    if words_per_element("randint", dtype) == 1:
        def conv32(words: np.ndarray, out: np.ndarray) -> None:
            w = words[: out.shape[0]]
            if r == 1 << 32:
                off = w.astype(np.int64)
            else:  # floor(w * r / 2**32): the product is exact in uint64 since r <= 2**32
                prod = np.multiply(w, np.uint64(r), dtype=_U64)
                prod >>= np.uint64(32)
                off = prod.view(np.int64)  # < 2**32: same value
            np.add(off, np.int64(lo), out=out, casting="unsafe")  # in [lo, hi) by construction
        return conv32

    lo_u64 = np.uint64(lo & _MASK64)

    def conv64(words: np.ndarray, out: np.ndarray) -> None:
        off = _mulhi64(_u64_values(words, out.shape[0]), r)
        off += lo_u64  # lo + off mod 2**64 is the two's complement of the in-range result
        if out.dtype == np.int64:
            out[...] = off.view(np.int64)
        else:
            out[...] = off.view(np.int64).astype(np.float64)  # exact: |value| <= 2**53
    return conv64


def _converter(dist: str, dtype: DType, a: float, b: float) -> _Converter:
    _check_dist_dtype(dist, dtype)
    if dist == "uniform":
        return _uniform(dtype, a, b)
    if dist == "normal":
        return _normal(dtype, a, b)
    return _randint(dtype, a, b)


def philox_values(dist: str, shape: Sequence[int], dtype: DType, seed: int, offset: int,
                  a: float, b: float) -> np.ndarray:
    """Values of ``dist`` for a tensor of ``shape`` and ``dtype`` from the stream (seed, offset):
    ``uniform`` on [a, b), ``normal`` with mean a and std b, ``randint`` on [a, b).

    A pure function of its arguments, the same on every backend (``docs/random.md`` states
    the one caveat, for ``normal``). The call reads the blocks with counters
    ``offset .. offset + blocks_used(dist, n, dtype) - 1``; the result is a fresh C-contiguous
    array of ``dtype.np``.
    """
    dtype = dt.as_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    seed = _check_u64(seed, "seed")
    offset = _check_u64(offset, "offset")
    conv = _converter(dist, dtype, a, b)  # validates everything before any work
    n = math.prod(shape)
    epb = elements_per_block(dist, dtype)
    out = np.empty(n, dtype.np)

    def chunk(s: int, count: int) -> None:
        words = _chunk_words(seed, offset + s, count)
        e0 = s * epb
        conv(words, out[e0: min(n, e0 + count * epb)])

    _for_each_chunk(blocks_used(dist, n, dtype), chunk)
    return out.reshape(shape)


# ---------------------------------------------------------------------------------------------
# The generator: (seed, offset) handed out under a lock
# ---------------------------------------------------------------------------------------------

def _normalise_seed(n: int) -> int:
    """PyTorch's accepted range: [-2**63, 2**64); negative seeds wrap to n + 2**64."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(n).__name__}")
    n = int(n)
    if not -(2**63) <= n <= _MASK64:
        raise ValueError(f"seed must be in [-2**63, 2**64), got {n}")
    return n & _MASK64


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


class Generator:
    """A Philox stream position: ``seed`` (the key) and ``offset`` (the next unused block).

    ``next_offset`` is atomic, so threads drawing at once get disjoint block ranges. After
    ``os.fork`` a child continues from the parent's state (as in PyTorch): reseed it if the
    two must differ.
    """

    __slots__ = ("_lock", "_seed", "_offset")

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._seed = _fresh_seed() if seed is None else _normalise_seed(seed)
        self._offset = 0

    def manual_seed(self, n: int) -> Generator:
        """Key the stream with ``n`` and restart it at offset 0."""
        s = _normalise_seed(n)
        with self._lock:
            self._seed, self._offset = s, 0
        return self

    def seed(self) -> int:
        """Reseed from ``os.urandom`` (offset 0) and return the new seed."""
        s = _fresh_seed()
        with self._lock:
            self._seed, self._offset = s, 0
        return s

    def initial_seed(self) -> int:
        """As ``torch.Generator.initial_seed``: the seed this generator was seeded with."""
        return self._seed

    def next_offset(self, blocks: int) -> tuple[int, int]:
        """Reserve ``blocks`` counter blocks: returns ``(seed, offset)`` of the first one and
        advances the offset past them (mod 2**64)."""
        blocks = int(blocks)
        if blocks < 0:
            raise ValueError(f"blocks must be >= 0, got {blocks}")
        with self._lock:
            state = (self._seed, self._offset)
            self._offset = (self._offset + blocks) & _MASK64
        return state

    def get_state(self) -> tuple[int, int]:
        """The ``(seed, offset)`` pair that resumes the stream (torch: a ``ByteTensor``)."""
        with self._lock:
            return (self._seed, self._offset)

    def set_state(self, state: Sequence[int]) -> None:
        """Resume the stream at a ``(seed, offset)`` pair from ``get_state``."""
        seed_, offset = state
        seed_, offset = _check_u64(seed_, "seed"), _check_u64(offset, "offset")
        with self._lock:
            self._seed, self._offset = seed_, offset

    def __repr__(self) -> str:
        s, o = self.get_state()
        return f"Generator(seed={s}, offset={o})"


default_generator = Generator()


def manual_seed(n: int) -> Generator:
    """Seed the global generator (offset back to 0); returns it, as ``torch.manual_seed``."""
    return default_generator.manual_seed(n)


def seed() -> int:
    """Reseed the global generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """As ``torch.random.initial_seed``: the seed of the default generator."""
    return default_generator.initial_seed()


def next_offset(blocks: int) -> tuple[int, int]:
    """Reserve ``blocks`` blocks of the global generator: ``(seed, offset)`` for one call."""
    return default_generator.next_offset(blocks)


def get_rng_state() -> tuple[int, int]:
    """The global generator's ``(seed, offset)`` (PyTorch returns a byte tensor; ours is this
    pair, which is the whole state of a counter-based generator)."""
    return default_generator.get_state()


def set_rng_state(state: Sequence[int]) -> None:
    """Restore a state from ``get_rng_state``: the next draws repeat the ones made after it."""
    default_generator.set_state(state)
