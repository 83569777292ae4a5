"""The Philox 4x32-10 stream contract of docs/random.md, checked against an independent scalar
reference written here from the spec (Python ints, no numpy tricks), plus distribution sanity.

Every statistical check uses a fixed seed, so it is deterministic: a threshold was chosen at
roughly the 1e-4 tail of the statistic, and a broken generator (wrong bits, wrong scaling,
reused counters) lands far outside it.
"""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np
import pytest

import ember.dtype as D
import ember.random as R
from ember.errors import DTypeError

MASK32 = 0xFFFFFFFF
MASK64 = (1 << 64) - 1


# ------------------------------------------------------------------------------ reference

def ref_philox(c: list[int], k: list[int]) -> list[int]:
    """Philox 4x32-10 on Python ints, straight from Salmon et al. / Random123."""
    c, k = list(c), list(k)
    for r in range(10):
        if r:
            k = [(k[0] + 0x9E3779B9) & MASK32, (k[1] + 0xBB67AE85) & MASK32]
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK32, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK32]
    return c


def ref_words(seed: int, offset: int, n_blocks: int) -> list[int]:
    out: list[int] = []
    for i in range(n_blocks):
        ctr = (offset + i) & MASK64
        out += ref_philox([ctr & MASK32, ctr >> 32, 0, 0], [seed & MASK32, seed >> 32])
    return out


KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([MASK32] * 4, [MASK32] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


# ------------------------------------------------------------------------------ block function

@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_reference_matches_random123_known_answers(ctr, key, expected):
    assert ref_philox(ctr, key) == expected


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox4x32_known_answers(ctr, key, expected):
    lo = np.array([ctr[0] | ctr[1] << 32], np.uint64)
    hi = np.array([ctr[2] | ctr[3] << 32], np.uint64)
    words = R.philox4x32(lo, key[0] | key[1] << 32, counter_hi=hi)
    assert [int(w[0]) for w in words] == expected
    assert all(w.dtype == np.uint32 and w.shape == (1,) for w in words)


def test_philox4x32_zero_high_words_matches_reference():
    rng = np.random.default_rng(0)
    ctrs = rng.integers(0, 2**63, 200, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    ctrs[:4] = [0, MASK32, MASK32 + 1, MASK64]  # the low->high word boundary and the top
    key = 0x0123456789ABCDEF
    words = R.philox4x32(ctrs.reshape(10, 20), key)
    assert words[0].shape == (10, 20)
    for i, c in enumerate(ctrs.tolist()):
        exp = ref_philox([c & MASK32, c >> 32, 0, 0], [key & MASK32, key >> 32])
        assert [int(w.reshape(-1)[i]) for w in words] == exp


def test_philox_words_layout_and_chunk_boundaries():
    # more than one internal chunk, so chunking and threads are exercised
    n = R._CHUNK_BLOCKS + 1000
    seed, offset = 0xDEADBEEF12345678, (1 << 32) - 500  # counter crosses into word 1
    w = R.philox_words(seed, offset, n)
    assert w.dtype == np.uint32 and w.shape == (4 * n,)
    probe = [0, 1, 499, 500, 501, R._CHUNK_BLOCKS - 1, R._CHUNK_BLOCKS, n - 1]
    for i in probe:
        assert w[4 * i: 4 * i + 4].tolist() == ref_words(seed, offset + i, 1)
    # whole-array cross-check against the vectorised block function
    ctr = (np.uint64(offset) + np.arange(n, dtype=np.uint64))
    direct = np.stack(R.philox4x32(ctr, seed), axis=1).reshape(-1)
    np.testing.assert_array_equal(w, direct)


def test_counter_wraps_modulo_2_64():
    w = R.philox_words(7, MASK64, 2)
    assert w.tolist() == ref_words(7, MASK64, 1) + ref_words(7, 0, 1)


def test_threads_do_not_change_values(monkeypatch):
    args = ("normal", (3 * R._CHUNK_BLOCKS * 4 + 5,), D.float32, 99, 12345, 0.0, 1.0)
    threaded = R.philox_values(*args)
    monkeypatch.setattr(R, "_cpu_count", lambda: 1)
    serial = R.philox_values(*args)
    np.testing.assert_array_equal(threaded, serial)


# ------------------------------------------------------------------------------ layout

@pytest.mark.parametrize("dist,dtype,per_block", [
    ("uniform", D.float32, 4), ("uniform", D.float16, 4), ("uniform", D.bfloat16, 4),
    ("uniform", D.float64, 2), ("normal", D.float32, 4), ("normal", D.float64, 2),
    ("randint", D.int32, 4), ("randint", D.uint8, 4), ("randint", D.bool_, 4),
    ("randint", D.int64, 2), ("randint", D.float32, 2),
])
def test_blocks_used(dist, dtype, per_block):
    assert R.elements_per_block(dist, dtype) == per_block
    for n in (0, 1, 2, 3, 4, 5, 8, 1001):
        assert R.blocks_used(dist, n, dtype) == -(-n // per_block)


def test_uniform_float_bits_follow_spec():
    seed, off, n = 11, 77, 64
    w = ref_words(seed, off, n // 2)  # 32 blocks = 128 words
    f32 = R.philox_values("uniform", (n,), D.float32, seed, off, 0.0, 1.0)
    assert f32.tolist() == [(x >> 8) * 2.0**-24 for x in w[:n]]
    f16 = R.philox_values("uniform", (n,), D.float16, seed, off, 0.0, 1.0)
    assert f16.dtype == np.float16 and f16.astype(float).tolist() == [(x >> 21) * 2.0**-11
                                                                       for x in w[:n]]
    bf = R.philox_values("uniform", (n,), D.bfloat16, seed, off, 0.0, 1.0)
    assert bf.dtype == ml_dtypes.bfloat16
    assert bf.astype(float).tolist() == [(x >> 24) * 2.0**-8 for x in w[:n]]
    f64 = R.philox_values("uniform", (n,), D.float64, seed, off, 0.0, 1.0)
    assert f64.tolist() == [((w[2 * k] | w[2 * k + 1] << 32) >> 11) * 2.0**-53 for k in range(n)]


def test_uniform_range_formula_and_clamp():
    seed, off, n = 5, 0, 400
    w = ref_words(seed, off, n // 4)
    a, b = -2.5, 0.7
    got = R.philox_values("uniform", (n,), D.float32, seed, off, a, b)
    u = np.array([(x >> 8) for x in w[:n]], np.float32) * np.float32(2.0**-24)
    exp = np.float32(a) + u * np.float32(b - a)  # float32 multiply, then float32 add
    np.testing.assert_array_equal(got, np.clip(exp, np.float32(a), np.nextafter(np.float32(b),
                                                                               np.float32(-1))))
    assert got.min() >= a and got.max() < b


def test_uniform_never_reaches_b_after_rounding():
    # 1 + (1 - 2**-8) rounds to 2.0 in bfloat16 (round-to-even): the clamp must catch it
    x = R.philox_values("uniform", (200_000,), D.bfloat16, 3, 0, 1.0, 2.0).astype(np.float64)
    assert x.max() == 2.0 - 2.0**-7  # the largest bfloat16 below 2, and it is reached
    assert x.min() == 1.0
    h = R.philox_values("uniform", (200_000,), D.float16, 3, 0, 1.0, 2.0).astype(np.float64)
    assert h.max() < 2.0 and h.min() >= 1.0


@pytest.mark.parametrize("dtype", [D.float16, D.bfloat16, D.float32])
def test_uniform_never_one_over_10m_draws(dtype):
    x = R.philox_values("uniform", (10_000_000,), dtype, 2024, 0, 0.0, 1.0)
    top = 1.0 - 2.0 ** -R._PRECISION[dtype.name]
    assert float(x.max()) <= top < 1.0
    assert float(x.min()) >= 0.0
    if dtype is not D.float32:  # 2**11 or 2**8 buckets: the top value is certainly drawn
        assert float(x.max()) == top


def test_normal_follows_spec():
    seed, off, n = 123, 9, 2001  # odd n: the last pair's sine is dropped
    w = ref_words(seed, off, -(-n // 4))
    got = R.philox_values("normal", (n,), D.float32, seed, off, 1.5, 2.0)
    exp = []
    for m in range((n + 1) // 2):
        u1 = (w[2 * m] + 1) * 2.0**-32
        theta = (w[2 * m + 1] * 2.0**-32) * (2 * math.pi)
        r = math.sqrt(-2.0 * math.log(u1))
        exp += [1.5 + 2.0 * (r * math.cos(theta)), 1.5 + 2.0 * (r * math.sin(theta))]
    exp32 = np.array(exp[:n], np.float64).astype(np.float32)
    # float64 then one rounding: equal unless a libm ulp crosses a float32 rounding boundary
    # (~1 in 2**28 per element); allow none here
    np.testing.assert_array_equal(got, exp32)
    # the first n-1 values do not depend on n
    np.testing.assert_array_equal(
        R.philox_values("normal", (n - 1,), D.float32, seed, off, 1.5, 2.0), got[:-1])


def test_normal_float64_follows_spec():
    seed, off, n = 4, 2, 101
    w = ref_words(seed, off, (n + 1) // 2)
    got = R.philox_values("normal", (n,), D.float64, seed, off, 0.0, 1.0)
    exp = []
    for m in range((n + 1) // 2):
        va = w[4 * m] | w[4 * m + 1] << 32
        vb = w[4 * m + 2] | w[4 * m + 3] << 32
        u1 = ((va >> 11) + 1) * 2.0**-53
        theta = ((vb >> 11) * 2.0**-53) * (2 * math.pi)
        r = math.sqrt(-2.0 * math.log(u1))
        exp += [r * math.cos(theta), r * math.sin(theta)]
    np.testing.assert_allclose(got, exp[:n], rtol=1e-14, atol=1e-15)


def test_half_normals_round_through_float32():
    args = ("normal", (1000,), D.float32, 8, 0, 0.0, 1.0)
    f32 = R.philox_values(*args)
    for dt in (D.float16, D.bfloat16):
        half = R.philox_values("normal", (1000,), dt, 8, 0, 0.0, 1.0)
        np.testing.assert_array_equal(half, f32.astype(dt.np))


def _mulhi_ref(v: int, r: int, bits: int) -> int:
    return (v * r) >> bits


@pytest.mark.parametrize("a,b", [(0, 10), (-5, 5), (-(2**31), 2**31), (0, 2**31 - 1), (3, 4)])
def test_randint_int32_follows_spec(a, b):
    seed, off, n = 21, 3, 256
    w = ref_words(seed, off, n // 4)
    got = R.philox_values("randint", (n,), D.int32, seed, off, a, b)
    assert got.dtype == np.int32
    assert got.tolist() == [a + _mulhi_ref(x, b - a, 32) for x in w[:n]]


@pytest.mark.parametrize("a,b", [
    (0, 10), (-7, 2**32 + 5), (0, 2**33), (-(2**40), 3 * 2**61), (-(2**63), 2**63),
    (-(2**63), 2**63 - 1), (2**62, 2**62 + 2**32 - 1),
])
def test_randint_int64_follows_spec(a, b):
    seed, off, n = 31, 0, 300
    w = ref_words(seed, off, n // 2)
    got = R.philox_values("randint", (n,), D.int64, seed, off, a, b)
    assert got.dtype == np.int64
    exp = [a + _mulhi_ref(w[2 * k] | w[2 * k + 1] << 32, b - a, 64) for k in range(n)]
    assert got.tolist() == exp


def test_mulhi64_edges():
    v = np.array([0, 1, MASK32, MASK32 + 1, MASK64 - 1, MASK64, 0x8000000000000000,
                  0x123456789ABCDEF0], np.uint64)
    for r in (1, 2, 3, MASK32, MASK32 + 1, MASK32 + 2, 2**63, MASK64, 2**64):
        got = R._mulhi64(v.copy(), r).tolist()
        assert got == [_mulhi_ref(int(x), r, 64) for x in v.tolist()], r


def test_randint_small_dtypes():
    u8 = R.philox_values("randint", (10_000,), D.uint8, 1, 0, 0, 256)
    assert u8.dtype == np.uint8 and u8.min() == 0 and u8.max() == 255
    bo = R.philox_values("randint", (1000,), D.bool_, 1, 0, 0, 2)
    assert bo.dtype == np.bool_ and 400 < bo.sum() < 600
    f = R.philox_values("randint", (1000,), D.float32, 1, 0, -3, 3)
    assert f.dtype == np.float32 and set(f.tolist()) == {-3.0, -2.0, -1.0, 0.0, 1.0, 2.0}
    i64 = R.philox_values("randint", (1000,), D.int64, 1, 0, -3, 3)
    np.testing.assert_array_equal(f, i64.astype(np.float32))  # floats use the int64 path


def test_shape_and_c_order():
    flat = R.philox_values("uniform", (24,), D.float32, 3, 4, 0.0, 1.0)
    shaped = R.philox_values("uniform", (2, 3, 4), D.float32, 3, 4, 0.0, 1.0)
    assert shaped.shape == (2, 3, 4) and shaped.flags.c_contiguous
    np.testing.assert_array_equal(shaped.reshape(-1), flat)
    assert R.philox_values("normal", (0, 3), D.float32, 3, 4, 0.0, 1.0).shape == (0, 3)
    assert R.philox_values("uniform", (), D.float64, 3, 4, 0.0, 1.0).shape == ()


# ------------------------------------------------------------------------------ determinism

def test_deterministic_and_sensitive_to_seed_and_offset():
    def draw(seed, off):
        return R.philox_values("uniform", (1000,), D.float32, seed, off, 0.0, 1.0)

    np.testing.assert_array_equal(draw(1, 0), draw(1, 0))
    assert not np.array_equal(draw(1, 0), draw(2, 0))
    assert not np.array_equal(draw(1, 0), draw(1, 1))
    # offset is in blocks: shifting by one block shifts float32 elements by four
    np.testing.assert_array_equal(draw(1, 1)[:-4], draw(1, 0)[4:])


def test_consecutive_calls_use_disjoint_counters():
    gen = R.Generator(42)
    calls = [("uniform", 10, D.float32), ("normal", 7, D.float64), ("randint", 5, D.int64),
             ("uniform", 1, D.float16), ("normal", 9, D.float32)]
    spans = []
    for dist, n, dtype in calls:
        blocks = R.blocks_used(dist, n, dtype)
        seed, off = gen.next_offset(blocks)
        assert seed == 42
        spans.append((off, off + blocks))
    assert spans[0][0] == 0
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start == end  # adjacent, never overlapping
    assert gen.get_state() == (42, spans[-1][1])


def test_consecutive_calls_concatenate_to_one_stream():
    gen = R.Generator(9)
    parts = []
    for n in (8, 12, 4):
        seed, off = gen.next_offset(R.blocks_used("uniform", n, D.float32))
        parts.append(R.philox_values("uniform", (n,), D.float32, seed, off, 0.0, 1.0))
    whole = R.philox_values("uniform", (24,), D.float32, 9, 0, 0.0, 1.0)
    np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_global_generator_seed_state_roundtrip():
    saved = R.get_rng_state()
    try:
        assert R.manual_seed(1234) is R.default_generator
        assert R.get_rng_state() == (1234, 0)
        first = R.next_offset(3)
        state = R.get_rng_state()
        assert first == (1234, 0) and state == (1234, 3)
        after = R.next_offset(5)
        R.set_rng_state(state)
        assert R.next_offset(5) == after
        R.manual_seed(-1)
        assert R.initial_seed() == MASK64  # PyTorch's wrap of negative seeds
        s = R.seed()
        assert R.get_rng_state() == (s, 0)
    finally:
        R.set_rng_state(saved)


def test_default_seed_is_not_fixed():
    assert R.Generator().initial_seed() != R.Generator().initial_seed()


def test_next_offset_is_thread_safe():
    gen = R.Generator(0)
    got: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker(blocks: int) -> None:
        for _ in range(2000):
            _, off = gen.next_offset(blocks)
            with lock:
                got.append((off, off + blocks))

    threads = [threading.Thread(target=worker, args=(b,)) for b in (1, 2, 3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got.sort()
    assert got[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(got, got[1:]))  # a tiling: no gap, no overlap
    assert gen.get_state()[1] == 2000 * (1 + 2 + 3 + 5)


# ------------------------------------------------------------------------------ distributions

def chi_square(counts: np.ndarray, expected: np.ndarray) -> float:
    return float(((counts - expected) ** 2 / expected).sum())


def chi_square_limit(df: int) -> float:
    # Wilson-Hilferty upper ~1e-4 tail (z = 3.72): a generous but failing-able bound
    z = 3.72
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("dtype", [D.float32, D.float64, D.float16, D.bfloat16])
def test_uniform_moments_and_buckets(dtype):
    n = 1_000_000
    x = R.philox_values("uniform", (n,), dtype, 77, 0, 0.0, 1.0).astype(np.float64)
    # the exact mean of the grid k * 2**-p is 1/2 - 2**-(p+1)
    p = R._PRECISION[dtype.name]
    assert abs(x.mean() - (0.5 - 2.0 ** -(p + 1))) < 5 * math.sqrt(1 / 12 / n)
    assert abs(x.var() - 1 / 12) < 0.002
    buckets = 64  # a power of two: every dtype's grid fills the buckets evenly
    counts = np.bincount((x * buckets).astype(np.int64), minlength=buckets)
    assert chi_square(counts, np.full(buckets, n / buckets)) < chi_square_limit(buckets - 1)


def test_uniform_scaled_moments():
    x = R.philox_values("uniform", (1_000_000,), D.float32, 5, 0, -3.0, 5.0).astype(np.float64)
    assert abs(x.mean() - 1.0) < 0.012 and abs(x.var() - 64 / 12) < 0.03
    assert x.min() >= -3.0 and x.max() < 5.0


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


@pytest.mark.parametrize("dtype", [D.float32, D.float64])
def test_normal_moments_and_ks(dtype):
    n = 400_000
    x = R.philox_values("normal", (n,), dtype, 2, 0, 0.0, 1.0).astype(np.float64)
    assert abs(x.mean()) < 5 / math.sqrt(n)
    assert abs(x.std() - 1) < 5 / math.sqrt(2 * n)
    # even and odd elements (cos and sin halves) must each be normal and uncorrelated
    assert abs(np.corrcoef(x[0::2], x[1::2])[0, 1]) < 5 / math.sqrt(n / 2)
    # Kolmogorov-Smirnov on a subsample (sqrt(n) D < 1.95: p ~ 0.001)
    s = np.sort(x[:20_000])
    cdf = _normal_cdf(s)
    i = np.arange(1, s.size + 1)
    d = max(np.max(i / s.size - cdf), np.max(cdf - (i - 1) / s.size))
    assert math.sqrt(s.size) * d < 1.95
    # tails: P(|z| > 3) = 0.0027
    assert abs((np.abs(x) > 3).mean() - 0.0027) < 0.0006


def test_normal_mean_std_and_zero_std():
    x = R.philox_values("normal", (200_000,), D.float32, 8, 0, 10.0, 3.0).astype(np.float64)
    assert abs(x.mean() - 10) < 0.05 and abs(x.std() - 3) < 0.03
    c = R.philox_values("normal", (10,), D.float32, 8, 0, 2.5, 0.0)
    assert c.tolist() == [2.5] * 10


@pytest.mark.parametrize("dtype,a,b", [(D.int32, 0, 10), (D.int32, -3, 4), (D.int64, 5, 17),
                                       (D.uint8, 0, 200)])
def test_randint_buckets(dtype, a, b):
    n = 500_000
    x = R.philox_values("randint", (n,), dtype, 13, 0, a, b)
    assert x.min() == a and x.max() == b - 1
    counts = np.bincount(x.astype(np.int64) - a, minlength=b - a)
    assert chi_square(counts, np.full(b - a, n / (b - a))) < chi_square_limit(b - a - 1)


def test_words_are_uniform_bits():
    # each of the 32 bit positions of the stream is set half the time
    w = R.philox_words(17, 0, 1 << 16)
    bits = (w[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    frac = bits.mean(axis=0)
    assert np.all(np.abs(frac - 0.5) < 5 * math.sqrt(0.25 / w.size))


# ------------------------------------------------------------------------------ errors

@pytest.mark.parametrize("args,exc", [
    (("gamma", (3,), D.float32, 0, 0, 0.0, 1.0), ValueError),
    (("uniform", (3,), D.int32, 0, 0, 0.0, 1.0), DTypeError),
    (("normal", (3,), D.int64, 0, 0, 0.0, 1.0), DTypeError),
    (("uniform", (3,), D.float32, 0, 0, 1.0, 1.0), ValueError),
    (("uniform", (3,), D.float32, 0, 0, 0.0, math.inf), ValueError),
    (("uniform", (3,), D.float16, 0, 0, -1e6, 1.0), ValueError),  # beyond float16's range
    (("uniform", (3,), D.float32, 0, 0, -3e38, 3e38), ValueError),  # b - a overflows float32
    (("uniform", (3,), D.float32, 0, 0, 1 + 1e-12, 1 + 2e-12), ValueError),  # no float32 inside
    (("normal", (3,), D.float32, 0, 0, 0.0, -1.0), ValueError),
    (("randint", (3,), D.uint8, 0, 0, 0, 257), ValueError),
    (("randint", (3,), D.int32, 0, 0, 5, 5), ValueError),
    (("randint", (3,), D.int64, 0, 0, 0.5, 5), ValueError),
    (("randint", (3,), D.float16, 0, 0, 0, 5000), ValueError),
    (("uniform", (3,), D.float32, -1, 0, 0.0, 1.0), ValueError),
    (("uniform", (3,), D.float32, 0, 2**64, 0.0, 1.0), ValueError),
    (("uniform", (-1,), D.float32, 0, 0, 0.0, 1.0), ValueError),
])
def test_errors(args, exc):
    with pytest.raises(exc):
        R.philox_values(*args)


def test_float16_wide_range_is_fine():
    # span 120000 overflows float16 but is computed in float32: allowed
    x = R.philox_values("uniform", (1000,), D.float16, 0, 0, -60000.0, 60000.0)
    assert np.isfinite(x.astype(np.float32)).all()


def test_seed_validation():
    with pytest.raises(ValueError):
        R.Generator(2**64)
    with pytest.raises(TypeError):
        R.Generator(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        R.Generator(0).next_offset(-1)
