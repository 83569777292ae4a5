"""The Philox 4x32-10 kernel (``random_kernels``) against ``ember.random.philox_values``.

uniform and randint must be bit-identical for every dtype, seed, offset and shape (sizes
that are not multiples of 4, counters wrapping past 2**64, empty tensors). normal is
Box-Muller in float64 through the C library's log/sin/cos: float32/float16/bfloat16 results
are bit-identical; float64 results may differ from numpy's transcendentals by one ulp in a
small fraction of elements (measured here and bounded).
"""

from __future__ import annotations

import numpy as np
import pytest

from ember import dtype as dt
from ember.backends.cube.backend import CubeBackend
from ember.cube.runtime.client import get_client
from ember.errors import DTypeError
from ember.random import philox_values, philox_words

FLOATS = [dt.float32, dt.float16, dt.bfloat16, dt.float64]
INTS = [dt.int32, dt.uint8, dt.bool_, dt.int64]
# (seed, offset): zero, a 64-bit seed with a counter that wraps mod 2**64 inside the call,
# and counters whose high word is non-zero
STREAMS = [(0, 0), (0x0123456789ABCDEF, 2**64 - 3), (42, 2**32 - 1), (2**64 - 1, 17)]
SHAPES = [(1,), (7,), (5, 3), (1001,), (2, 0, 3), ()]


@pytest.fixture(scope="module")
def bk() -> CubeBackend:
    return CubeBackend(get_client("cpu", 0))


def draw(bk: CubeBackend, *args: object) -> np.ndarray:
    return np.asarray(bk.into_data(bk._random_kernel(*args)))


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def assert_bit_exact(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_array_equal(bits(got), bits(ref))


@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("ab", [(0.0, 1.0), (-2.0, 3.5), (1.0, 2.0), (-1e-3, 1e-3)])
def test_uniform_bit_exact(bk, d, ab):
    for seed, offset in STREAMS:
        for shape in SHAPES:
            args = ("uniform", shape, d, seed, offset, *ab)
            assert_bit_exact(draw(bk, *args), philox_values(*args))


@pytest.mark.parametrize("d", INTS + FLOATS, ids=str)
def test_randint_bit_exact(bk, d):
    ranges = [(0, 2), (0, 1)]
    if d is not dt.bool_:
        ranges += [(0, 200), (3, 256)]
    if d.is_floating_point or d in (dt.int32, dt.int64):
        ranges += [(-7, 13), (-100, 0)]
    if d is dt.int32:
        ranges += [(-(2**31), 2**31), (5, 2**31 - 1)]
    if d is dt.int64:
        ranges += [(-(2**63), 2**63), (-(2**40), 2**62 + 12345), (0, 2**32), (0, 2**32 + 1)]
    if d is dt.float64:
        ranges += [(-(2**53), 2**53)]
    for a, b in ranges:
        for seed, offset in STREAMS:
            for shape in SHAPES:
                args = ("randint", shape, d, seed, offset, a, b)
                assert_bit_exact(draw(bk, *args), philox_values(*args))


@pytest.mark.parametrize("d", [dt.float32, dt.float16, dt.bfloat16], ids=str)
@pytest.mark.parametrize("ms", [(0.0, 1.0), (1.5, 0.25), (-3.0, 0.0)])
def test_normal_32_bit_class_bit_exact(bk, d, ms):
    for seed, offset in STREAMS:
        for shape in SHAPES:
            args = ("normal", shape, d, seed, offset, *ms)
            assert_bit_exact(draw(bk, *args), philox_values(*args))


def test_normal_float64_within_one_ulp(bk):
    """float64 normals go through libm: measured ~0.2% of elements one ulp away from numpy's."""
    n = 1 << 18
    for seed, offset in STREAMS:
        for ms in [(0.0, 1.0), (2.0, 3.0)]:
            got = draw(bk, "normal", (n,), dt.float64, seed, offset, *ms)
            ref = philox_values("normal", (n,), dt.float64, seed, offset, *ms)
            # a few ulps of each term of mean + std * z (the sum may cancel, so not of the result)
            bound = 4 * np.finfo(np.float64).eps * (abs(ms[0]) + np.abs(ref - ms[0]))
            assert np.all(np.abs(got - ref) <= bound)
            assert np.count_nonzero(got != ref) < n // 100
    for shape in SHAPES:  # odd sizes: the last pair's second element is dropped, nothing else
        got = draw(bk, "normal", shape, dt.float64, 9, 4, 0.0, 1.0)
        np.testing.assert_allclose(got, philox_values("normal", shape, dt.float64, 9, 4, 0.0, 1.0), rtol=1e-15)


def test_raw_word_stream_through_full_range_randint(bk):
    """randint over the whole int32 / int64 range is the word stream itself (offset by a)."""
    seed, offset, blocks = 0xDEADBEEF12345678, 2**64 - 5, 37
    words = philox_words(seed, offset, blocks)
    got32 = draw(bk, "randint", (4 * blocks,), dt.int32, seed, offset, -(2**31), 2**31)
    np.testing.assert_array_equal((got32.astype(np.int64) + 2**31).astype(np.uint32), words)
    got64 = draw(bk, "randint", (2 * blocks,), dt.int64, seed, offset, -(2**63), 2**63)
    np.testing.assert_array_equal((got64.view(np.uint64) ^ np.uint64(1 << 63)).view(np.uint32), words)


def test_large_draw_matches_and_covers_every_element(bk):
    n = 3 * (1 << 18) + 3
    for d in (dt.float32, dt.float64):
        assert_bit_exact(
            draw(bk, "uniform", (n,), d, 5, 11, 0.0, 1.0), philox_values("uniform", (n,), d, 5, 11, 0.0, 1.0)
        )


@pytest.mark.parametrize(
    "args, err",
    [
        (("uniform", (3,), dt.int32, 0, 0, 0.0, 1.0), DTypeError),
        (("normal", (3,), dt.uint8, 0, 0, 0.0, 1.0), DTypeError),
        (("uniform", (3,), dt.float32, 0, 0, 1.0, 1.0), ValueError),
        (("uniform", (3,), dt.float16, 0, 0, 0.0, 1e6), ValueError),
        (("normal", (3,), dt.float32, 0, 0, 0.0, -1.0), ValueError),
        (("randint", (3,), dt.uint8, 0, 0, -1, 5), ValueError),
        (("randint", (3,), dt.float32, 0, 0, 0, 2**25), ValueError),
        (("randint", (3,), dt.int32, 0, 0, 0.5, 5), ValueError),
        (("uniform", (3,), dt.float32, -1, 0, 0.0, 1.0), ValueError),
        (("uniform", (3,), dt.float32, 0, 2**64, 0.0, 1.0), ValueError),
        (("poisson", (3,), dt.float32, 0, 0, 0.0, 1.0), ValueError),
    ],
)
def test_errors_match_the_reference(bk, args, err):
    with pytest.raises(err):
        philox_values(*args)
    with pytest.raises(err):
        bk._random_kernel(*args)
