"""Counter-based random numbers: Philox 4x32-10, one stream layout for every backend.

The whole contract is written out in ``docs/random.md``; this module is its reference
implementation (numpy, vectorised over blocks, no Python loop per element). In short:

* ``key = seed`` (64-bit; word 0 = low 32 bits, word 1 = high 32 bits).
* Block ``i`` of a call at ``offset`` encrypts the counter ``(offset + i) mod 2**64`` (low word in
  counter word 0, high word in word 1, words 2 and 3 zero) and yields four 32-bit words.
  The words of a call form one flat stream ``W[4*i + j] = word j of block i``.
* A dtype is either of the *32-bit class* (one word per element: float32, float16, bfloat16,
  int32, uint8, bool) or the *64-bit class* (two words per element, ``W[2k]`` low and
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
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import dtype as dt
from .dtype import DType

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
    # r+1 writes its own products.
    prods = [(np.empty(n, _U64), np.empty(n, _U64)), (np.empty(n, _U64), np.empty(n, _U64))]
    new0 = np.empty(n, _U32)
    new2 = np.empty(n, _U32)
    w0: np.ndarray = c0
    w1: np.ndarray | None = c1
    w2: np.ndarray | None = c2
    w3: np.ndarray | None = c3
    for r in range(PHILOX_ROUNDS):
        last = r == PHILOX_ROUNDS - 1
        p0, p1 = prods[r & 1]
        hi1 = lo1 = None
        np.multiply(w0, _M0, out=p0)
        v = p0.view(_U32).reshape(n, 2)
        hi0, lo0 = v[:, _HI], v[:, _LO]
        if w2 is not None:
            np.multiply(w2, _M1, out=p1)
            v = p1.view(_U32).reshape(n, 2)
            hi1, lo1 = v[:, _HI], v[:, _LO]
        if last:
            _xor_into(out[:, 0], hi1, w1, k0)
            _xor_into(out[:, 2], hi0, w3, k1)
            out[:, 1] = 0 if lo1 is None else lo1
            out[:, 3] = 0 if lo0 is None else lo0
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
