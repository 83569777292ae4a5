"""Cube backend indexing and data-movement ops (``IndexOps``) against numpy references.

Every buffer the backend allocates is prefilled with a sentinel (NaN for floats, an
out-of-range-looking value for ints), so an element a kernel leaves unwritten shows up.
Inputs are checked to be unchanged afterwards (tensors are values). Strided, permuted,
offset and broadcast (zero-stride) inputs go through the same kernels as contiguous ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember import dtype as dt
from ember.backends.cube import kernels
from ember.backends.cube.backend import CubeBackend
from ember.backends.flex import FlexBackend
from ember.cube.runtime.client import get_client
from ember.cube.runtime.tensor import CubeTensor

ALL = [dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.uint8, dt.bool_]
NUMERIC = [d for d in ALL if d is not dt.bool_]
FLEX = FlexBackend()


class PoisonedBackend(CubeBackend):
    """Fresh buffers arrive full of a sentinel instead of whatever the pool held."""

    def _empty(self, shape: tuple[int, ...], dtype: dt.DType) -> CubeTensor:
        out = super()._empty(shape, dtype)
        n = math.prod(shape)
        if n:
            if dtype.is_floating_point:
                v: object = float("nan")
            elif dtype is dt.bool_:
                v = True
            else:
                v = 201 if dtype is dt.uint8 else -12345
            self._launch_lines(kernels.fill, n, out, extra=(v,))
        return out


@pytest.fixture(scope="module")
def bk() -> PoisonedBackend:
    return PoisonedBackend(get_client("cpu", 0))


def data(rng: np.random.Generator, shape: tuple[int, ...], d: dt.DType) -> np.ndarray:
    if d is dt.bool_:
        return rng.random(shape) < 0.5
    if d is dt.uint8:
        return rng.integers(0, 256, shape).astype(np.uint8)
    if d.is_floating_point:
        return (rng.standard_normal(shape) * 4).astype(d.np)
    return rng.integers(-100, 100, shape).astype(d.np)


def put(bk: CubeBackend, a: np.ndarray, d: dt.DType | None = None) -> CubeTensor:
    return bk.from_data(a, d or dt.from_numpy_dtype(a.dtype))


def get(bk: CubeBackend, p: CubeTensor) -> np.ndarray:
    return np.asarray(bk.into_data(p))


def strided(bk: CubeBackend, a: np.ndarray) -> CubeTensor:
    """``a`` as a non-contiguous view: the transpose of a buffer holding a.T, offset by a row."""
    d = dt.from_numpy_dtype(a.dtype)
    host = np.concatenate([np.zeros((1,) + a.T.shape[1:], a.dtype), np.ascontiguousarray(a.T)])
    p = bk.from_data(host, d)
    view = bk.slice(p, (slice(1, host.shape[0], 1),))
    return bk.permute(view, tuple(range(a.ndim - 1, -1, -1)))


def same(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    # bit patterns: a NaN sentinel left in place never compares equal to data by accident
    bits = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in (got, ref)]
    np.testing.assert_array_equal(bits[0], bits[1])


# ------------------------------------------------------------------ flip / slices / cat / pad / tri


@pytest.mark.parametrize("d", ALL, ids=str)
def test_flip_every_dim_set_and_strided_input(bk, d):
    r = np.random.default_rng(0)
    x = data(r, (3, 4, 5), d)
    for dims in [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()]:
        same(get(bk, bk.flip(put(bk, x), dims)), np.flip(x, dims))
        same(get(bk, bk.flip(strided(bk, x), dims)), np.flip(x, dims))
    same(get(bk, bk.flip(put(bk, x[0, 0, 0]), ())), x[0, 0, 0])  # rank 0


@pytest.mark.parametrize(
    "key",
    [
        (slice(None, None, -1),),
        (slice(-1, 0, -2), slice(None), slice(3, 0, -1)),
        (slice(1, 3), slice(None, None, -3)),
        (slice(2, 2, -1),),  # empty
        (slice(None, None, -7), slice(None, None, -5)),
    ],
)
def test_negative_step_slices_are_kernel_copies(bk, key):
    r = np.random.default_rng(1)
    x = data(r, (4, 5, 6), dt.float32)
    norm = tuple(slice(*s.indices(n)) for s, n in zip(key, x.shape))
    for p in (put(bk, x), strided(bk, x)):
        same(get(bk, bk._slice_kernel(p, norm)), x[norm])
    view = bk._slice_kernel(put(bk, x), (slice(1, 3, 1), slice(0, 5, 2)))
    assert view.strides == (30, 12, 1)  # positive steps stay views


@pytest.mark.parametrize("d", ALL, ids=str)
def test_cat_along_every_dim_with_strided_and_empty_parts(bk, d):
    r = np.random.default_rng(2)
    for dim in range(3):
        shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
        parts = []
        for j, s in enumerate(shapes):
            s = list(s)
            s[dim] = [2, 0, 3][j]
            parts.append(data(r, tuple(s), d))
        ps = [put(bk, parts[0]), put(bk, parts[1]), strided(bk, parts[2])]
        same(get(bk, bk.cat(ps, dim)), np.concatenate(parts, dim))


@pytest.mark.parametrize("d", ALL, ids=str)
def test_pad_with_values(bk, d):
    r = np.random.default_rng(3)
    x = data(r, (3, 4, 2), d)
    for pads, value in [(((1, 2), (0, 0), (3, 1)), 0), (((0, 0), (2, 2), (0, 1)), 1), (((0, 0),) * 3, 0)]:
        v = bool(value) if d is dt.bool_ else value
        same(get(bk, bk.pad(strided(bk, x), pads, v)), FLEX.pad(x, pads, v))


@pytest.mark.parametrize("d", ALL, ids=str)
def test_tril_triu_batched_and_extreme_diagonals(bk, d):
    r = np.random.default_rng(4)
    x = data(r, (2, 4, 5), d)
    for diag in (-(10**12), -3, -1, 0, 1, 2, 4, 10**12):
        same(get(bk, bk.tril(put(bk, x), diag)), np.tril(x, diag))
        same(get(bk, bk.triu(strided(bk, x), diag)), np.triu(x, diag))


# ------------------------------------------------------------------ gather / scatter


@pytest.mark.parametrize("d", ALL, ids=str)
def test_gather_with_index_smaller_than_input(bk, d):
    r = np.random.default_rng(5)
    x = data(r, (4, 5, 3), d)
    for dim, ishape in [(0, (6, 5, 3)), (1, (2, 7, 2)), (2, (4, 5, 9)), (0, (1, 1, 1))]:
        idx = r.integers(0, x.shape[dim], ishape)
        ref = FLEX.gather(x, dim, idx)
        same(get(bk, bk.gather(put(bk, x), dim, put(bk, idx))), ref)
        same(get(bk, bk.gather(strided(bk, x), dim, strided(bk, idx))), ref)
    zero = np.array(0)
    same(get(bk, bk.gather(put(bk, x[0, 0, 0]), 0, put(bk, zero))), x[0, 0, 0])  # 0-d


@pytest.mark.parametrize("d", ALL, ids=str)
def test_index_select_strided_index(bk, d):
    r = np.random.default_rng(6)
    x = data(r, (4, 5, 3), d)
    idx_host = r.integers(0, 5, 14)
    idx = bk.slice(put(bk, idx_host), (slice(0, 14, 2),))  # stride-2 view of the index
    same(get(bk, bk.index_select(strided(bk, x), 1, idx)), np.take(x, idx_host[::2], axis=1))
    empty = put(bk, np.zeros(0, np.int64))
    same(get(bk, bk.index_select(put(bk, x), 0, empty)), x[:0])


@pytest.mark.parametrize("d", ALL, ids=str)
def test_scatter_unique_targets_uses_only_src_under_the_index(bk, d):
    r = np.random.default_rng(7)
    x = data(r, (4, 5), d)
    idx = np.stack([r.permutation(4)[:3] for _ in range(4)], axis=1)  # (3, 4), unique per column
    src = data(r, (5, 6), d)  # larger than the index on both dims
    xp = put(bk, x)
    same(get(bk, bk.scatter(xp, 0, put(bk, idx), strided(bk, src))), FLEX.scatter(x, 0, idx, src))
    same(get(bk, xp), x)  # the input is a value: untouched


@pytest.mark.parametrize("d", NUMERIC, ids=str)
def test_scatter_add_repeated_targets(bk, d):
    r = np.random.default_rng(8)
    x = data(r, (4, 5), d)
    for dim, ishape in [(0, (9, 5)), (1, (4, 11)), (1, (2, 3))]:
        idx = r.integers(0, x.shape[dim], ishape)
        src = data(r, (9, 11), d)
        xp = put(bk, x)
        got = get(bk, bk.scatter_add(xp, dim, put(bk, idx), put(bk, src)))
        ref = FLEX.scatter_add(x, dim, idx, src)
        if d.is_floating_point:  # atomic float adds run in any order: compare with float64 sums
            exact = FLEX.scatter_add(x.astype(np.float64), dim, idx, src.astype(np.float64))
            tol = {dt.float32: 1e-5, dt.float64: 1e-12}.get(d, 1e-2)
            np.testing.assert_allclose(got.astype(np.float64), exact, rtol=tol, atol=tol * 10)
            assert got.dtype == ref.dtype
        else:
            same(got, ref)  # integer sums are exact (uint8 wraps, as numpy)
        same(get(bk, xp), x)


def test_scatter_add_bool_is_logical_or(bk):
    x = np.array([False, True, False, False])
    idx = np.array([0, 0, 2, 2, 2])
    src = np.array([True, True, False, False, False])
    same(get(bk, bk.scatter_add(put(bk, x), 0, put(bk, idx), put(bk, src))), FLEX.scatter_add(x, 0, idx, src))


@pytest.mark.parametrize("d", [dt.int32, dt.int64, dt.float32, dt.uint8], ids=str)
def test_scatter_add_contention_across_parallel_cubes(bk, d):
    """200k adds into 3 targets from many cubes at once: atomics must not lose any."""
    n = 200_000
    idx = np.arange(n) % 3
    src = np.ones(n, d.np)
    got = get(bk, bk.scatter_add(put(bk, np.zeros(3, d.np)), 0, put(bk, idx), put(bk, src)))
    expect = np.array([66667, 66667, 66666]).astype(d.np)  # uint8 wraps mod 256
    same(got, expect)


# ------------------------------------------------------------------ advanced indexing


@pytest.mark.parametrize("d", ALL, ids=str)
def test_index_by_broadcast_index_tensors(bk, d):
    r = np.random.default_rng(9)
    x = data(r, (4, 5, 3), d)
    i0 = r.integers(0, 4, (2, 3))
    i1 = r.integers(0, 5, (3,))
    i2 = r.integers(0, 3, (2, 1))
    for p in (put(bk, x), strided(bk, x)):
        same(get(bk, bk.index(p, (put(bk, i0),))), x[i0])
        same(get(bk, bk.index(p, (put(bk, i0), put(bk, i1)))), x[i0, i1])
        same(get(bk, bk.index(p, (put(bk, i0), strided(bk, i1), put(bk, i2)))), x[i0, i1, i2])
        same(get(bk, bk.index(p, (put(bk, np.zeros((0,), np.int64)),))), x[np.zeros(0, np.int64)])
    i3 = np.array(2)  # 0-d indices: a 0-d result
    same(get(bk, bk.index(put(bk, x), (put(bk, i3), put(bk, i3), put(bk, i3)))), x[i3, i3, i3])
    same(get(bk, bk.index(put(bk, x[0, 0]), (put(bk, i3),))), x[0, 0][i3])


@pytest.mark.parametrize("d", ALL, ids=str)
def test_index_put_set_and_broadcast_values(bk, d):
    r = np.random.default_rng(10)
    x = data(r, (4, 5, 3), d)
    i0 = np.array([3, 0, 1])
    i1 = np.array([[4], [2]])
    vals = data(r, (3,), d)  # broadcast to the indexed shape (2, 3, 3)
    xp = put(bk, x)
    got = bk.index_put(xp, (put(bk, i0), put(bk, i1)), put(bk, vals), False)
    same(get(bk, got), FLEX.index_put(x, (i0, i1), vals, False))
    same(get(bk, xp), x)


@pytest.mark.parametrize("d", NUMERIC, ids=str)
def test_index_put_accumulate_repeats(bk, d):
    r = np.random.default_rng(11)
    x = data(r, (4, 5), d)
    i0 = np.array([0, 0, 3, 0, 3, 1])
    vals = data(r, (6, 5), d)
    got = get(bk, bk.index_put(put(bk, x), (put(bk, i0),), put(bk, vals), True))
    ref = FLEX.index_put(x, (i0,), vals, True)
    if d.is_floating_point:
        exact = FLEX.index_put(x.astype(np.float64), (i0,), vals.astype(np.float64), True)
        tol = {dt.float32: 1e-5, dt.float64: 1e-12}.get(d, 1e-2)
        np.testing.assert_allclose(got.astype(np.float64), exact, rtol=tol, atol=tol * 10)
    else:
        same(got, ref)


@pytest.mark.parametrize("d", ALL, ids=str)
def test_slice_assign_with_negative_steps_and_broadcast(bk, d):
    r = np.random.default_rng(12)
    x = data(r, (4, 5, 3), d)
    for key, vshape in [
        ((slice(1, 3, 1), slice(0, 5, 2), slice(0, 3, 1)), (2, 3, 3)),
        ((slice(None, None, -1), slice(4, 0, -3), slice(0, 3, 1)), (1, 3)),
        ((slice(0, 4, 1), slice(0, 5, 1), slice(2, 3, 1)), ()),
        ((slice(3, 3, 1),), (5, 3)),
    ]:
        norm = tuple(slice(*s.indices(n)) for s, n in zip(key, x.shape))
        v = data(r, vshape, d)
        xp = put(bk, x)
        same(get(bk, bk.slice_assign(xp, norm, put(bk, v))), FLEX.slice_assign(x, norm, v))
        same(get(bk, xp), x)


def test_kernel_count_is_small():
    """One generic kernel per op shape, specialised at launch (dtype, rank, comptime switches)."""
    from ember.backends.cube import index_kernels, random_kernels
    from ember.cube.launch import CubeKernel

    found = [k for m in (index_kernels, random_kernels) for k in vars(m).values() if isinstance(k, CubeKernel)]
    assert len(found) <= 8
