"""Cube reductions (``ember/backends/cube/reduce.py``) on the CPU runtime against numpy float64.

Every buffer the backend allocates during these tests is poisoned first (NaN for floats, a
sentinel for ints), so an output element a kernel fails to write shows up. Shapes cover both
kernel paths (reduced axis contiguous / strided), chunk splits with a second pass, multi-dim
reductions that need a layout copy, strided (non-contiguous) inputs and odd line widths.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import Device
from ember.backends.cube import kernels
from ember.backends.cube.backend import CubeBackend

DEV = Device.cpu(fusion=False)


@pytest.fixture(autouse=True)
def poisoned_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = CubeBackend._empty

    def empty(self: CubeBackend, shape: tuple[int, ...], dtype: ember.dtype.DType):  # type: ignore[no-untyped-def]
        out = orig(self, shape, dtype)
        n = math.prod(shape)
        if n:
            v = math.nan if dtype.is_floating_point else (1 if dtype is ember.dtype.bool_ else 77)
            self._launch_lines(kernels.fill, n, out, extra=(v if dtype.is_floating_point else int(v),))
        return out

    monkeypatch.setattr(CubeBackend, "_empty", empty)


def T(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(a, dtype=ember.dtype.from_numpy_dtype(a.dtype), device=DEV)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


SHAPES = [
    ((1000,), (0,)),
    ((7, 300), (1,)),
    ((7, 300), (0,)),
    ((5, 33, 3), (1,)),  # strided axis, odd inner width (line width 1)
    ((4, 5, 6), (0, 2)),  # reduced dims not adjacent: layout copy
    ((3, 4, 5, 2), (1, 2)),  # adjacent block in the middle: a view
    ((2, 1, 3), (0, 1)),  # size-1 dims
    ((300_001,), (0,)),  # rows path with splits and a second pass
    ((3000, 40), (0,)),  # cols path with splits
    ((2, 70_000), (1,)),
    ((50, 12), (1,)),  # short rows: one unit per row
    ((6, 1, 4), (1,)),  # reducing a size-1 dim: a copy
]


@pytest.mark.parametrize("shape,dims", SHAPES)
@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_float_reductions_match_numpy(shape, dims, op, keepdim):
    a = rng(1).standard_normal(shape).astype(np.float32)
    if op == "prod":
        a = (1 + 0.001 * a).astype(np.float32)
    got = getattr(T(a), op)(dim=dims, keepdim=keepdim).numpy()
    f = {"amax": np.max, "amin": np.min}.get(op) or getattr(np, op)
    ref = f(a.astype(np.float64), axis=dims, keepdims=keepdim)
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-4)


def test_sum_accuracy_is_blocked_like_numpy():
    # 16M ones + small values: one serial float32 sum stalls at 2**24; blocks do not
    a = np.full(1 << 24, 1.0, np.float32) + rng(2).random(1 << 24, dtype=np.float32) * 1e-3
    got = float(T(a).sum().numpy())
    ref = float(a.astype(np.float64).sum())
    assert abs(got - ref) / ref < 1e-6
    assert abs(got - ref) <= 4 * abs(float(a.sum()) - ref) + 1.0


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint8])
def test_other_dtypes(dtype):
    a = (rng(3).standard_normal((6, 50)) * 10).astype(dtype)
    t = T(a)
    for dims in ((0,), (1,), (0, 1)):
        np.testing.assert_array_equal(t.amax(dim=dims).numpy(), a.max(axis=dims))
        np.testing.assert_array_equal(t.amin(dim=dims).numpy(), a.min(axis=dims))
        np.testing.assert_allclose(t.sum(dim=dims).numpy(), a.sum(axis=dims, dtype=np.float64 if
                                   a.dtype.kind == "f" else np.int64), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_types_accumulate_in_float32(dtype):
    a = np.full(4096, 1.0, dtype)  # a half-precision running sum would stop at 2048 (f16)
    assert float(T(a).sum().numpy()) == 4096.0
    assert float(T(a).mean().numpy()) == 1.0
    b = rng(4).standard_normal((9, 40)).astype(dtype)
    np.testing.assert_allclose(
        T(b).sum(dim=0).numpy().astype(np.float32), b.astype(np.float32).sum(0), rtol=1e-2, atol=1e-2
    )
    np.testing.assert_array_equal(T(b).amax(dim=1).numpy(), b.max(1))


def test_nan_propagates_through_max_min_sum():
    a = rng(5).standard_normal((4, 100)).astype(np.float32)
    a[1, 37] = np.nan
    a[3, 0] = np.nan
    for op, f in (("amax", np.max), ("amin", np.min), ("sum", np.sum)):
        for dims in ((1,), (0,), (0, 1)):
            np.testing.assert_array_equal(
                np.isnan(getattr(T(a), op)(dim=dims).numpy()), np.isnan(f(a, axis=dims))
            )


def test_empty_reductions():
    a = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(T(a).sum(dim=1).numpy(), np.zeros(3))
    np.testing.assert_array_equal(T(a).prod(dim=1).numpy(), np.ones(3))
    assert T(a).sum(dim=0).numpy().shape == (0,)
    np.testing.assert_array_equal(T(a).all(dim=1).numpy(), [True] * 3)
    np.testing.assert_array_equal(T(a).any(dim=1).numpy(), [False] * 3)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint8])
def test_all_any(dtype):
    a = (rng(6).random((5, 7, 9)) < 0.9).astype(dtype)
    a[2] = 1
    if dtype == np.float32:
        a[0, 0, 0] = np.nan  # truthy
    for dims in ((0,), (2,), (0, 2), (0, 1, 2)):
        np.testing.assert_array_equal(T(a).all(dim=dims).numpy(), a.all(axis=dims))
        np.testing.assert_array_equal(T(a).any(dim=dims).numpy(), a.any(axis=dims))
        assert T(a).all(dim=dims).dtype == ember.dtype.bool_


def test_bool_max_min():
    a = rng(7).random((6, 11)) < 0.5
    np.testing.assert_array_equal(T(a).amax(dim=1).numpy(), a.max(1))
    np.testing.assert_array_equal(T(a).amin(dim=0).numpy(), a.min(0))


@pytest.mark.parametrize("shape", [(17,), (5, 1000), (1000, 5), (3, 4, 5), (2, 3000, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_argmax_argmin_first_index(shape, dtype):
    a = rng(8).integers(-3, 4, shape).astype(dtype)  # many ties: the first index must win
    for dim in range(len(shape)):
        for keepdim in (False, True):
            g = T(a).argmax(dim=dim, keepdim=keepdim)
            assert g.dtype == ember.dtype.int64
            np.testing.assert_array_equal(g.numpy(), np.argmax(a, axis=dim, keepdims=keepdim))
            np.testing.assert_array_equal(
                T(a).argmin(dim=dim, keepdim=keepdim).numpy(), np.argmin(a, axis=dim, keepdims=keepdim)
            )
    np.testing.assert_array_equal(T(a).argmax().numpy(), np.argmax(a))


def test_argmax_nan_is_the_maximum():
    a = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 0.0, -1.0, 9.0]], np.float32)
    np.testing.assert_array_equal(T(a).argmax(dim=1).numpy(), np.argmax(a, 1))
    np.testing.assert_array_equal(T(a).argmin(dim=1).numpy(), np.argmin(a, 1))
    big = rng(9).standard_normal(100_000).astype(np.float32)
    big[77_777] = np.nan
    big[99_000] = np.nan
    assert int(T(big).argmax().numpy()) == 77_777 == int(T(big).argmin().numpy())


@pytest.mark.parametrize("shape", [(10,), (4, 300), (300, 4), (2, 3, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
def test_cumsum(shape, dtype):
    a = (rng(10).standard_normal(shape) * 5).astype(dtype)
    for dim in range(len(shape)):
        got = T(a).cumsum(dim=dim).numpy()
        if dtype == np.float16:
            ref = np.cumsum(a, axis=dim, dtype=np.float32).astype(np.float16)
            np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-2)
        else:
            np.testing.assert_allclose(got, np.cumsum(a.astype(np.float64), axis=dim), rtol=1e-5, atol=1e-4)


def _lse(x: np.ndarray, axis: tuple[int, ...] | int, keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@pytest.mark.parametrize("shape", [(10,), (4, 3000), (300, 4), (2, 3, 5)])
def test_softmax_family(shape):
    a = (rng(11).standard_normal(shape) * 4).astype(np.float32)
    x = a.astype(np.float64)
    for dim in range(len(shape)):
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        sm = e / e.sum(axis=dim, keepdims=True)
        np.testing.assert_allclose(T(a).softmax(dim).numpy(), sm, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(T(a).log_softmax(dim).numpy(), np.log(sm), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(T(a).logsumexp(dim).numpy(), _lse(x, dim, False), rtol=1e-5, atol=1e-5)
    if len(shape) == 3:
        np.testing.assert_allclose(
            T(a).logsumexp((0, 2), keepdim=True).numpy(), _lse(x, (0, 2), True), rtol=1e-5, atol=1e-5
        )


def test_softmax_family_with_infinities_matches_flex():
    a = np.array([[-np.inf, -np.inf, -np.inf], [1.0, np.inf, 2.0], [0.0, -np.inf, 1.0]], np.float32)
    flex = Device.flex()
    for f in ("softmax", "log_softmax", "logsumexp"):
        got = getattr(T(a), f)(1).numpy()
        ref = getattr(ember.tensor(a, device=flex), f)(1).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_non_contiguous_inputs():
    a = rng(12).standard_normal((40, 60)).astype(np.float32)
    t = T(a).permute(1, 0)[::2]  # (30, 40) strided view
    v = a.T[::2]
    np.testing.assert_allclose(t.sum(dim=1).numpy(), v.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.sum(dim=0).numpy(), v.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t.argmax(dim=1).numpy(), v.argmax(1))
    np.testing.assert_allclose(t.softmax(0).numpy(), np.exp(v) / np.exp(v).sum(0), rtol=1e-5)


def test_gpu_memory_order_gives_the_same_results(monkeypatch: pytest.MonkeyPatch):
    """The interleaved unit order (units_serial=False, what a GPU runtime uses) on the CPU."""
    from ember.backends.cube.reduce import ReduceOps

    monkeypatch.setattr(ReduceOps, "_units_serial", property(lambda self: False))
    for shape, dims in [((300_001,), (0,)), ((3000, 40), (0,)), ((7, 300), (1,)), ((5, 33, 3), (1,))]:
        a = rng(13).standard_normal(shape).astype(np.float32)
        for op, f in (("sum", np.sum), ("amax", np.max), ("mean", np.mean)):
            np.testing.assert_allclose(
                getattr(T(a), op)(dim=dims).numpy(), f(a.astype(np.float64), axis=dims), rtol=2e-5, atol=1e-4
            )


@pytest.mark.parametrize("repeat", [1, 300])  # short rows (one unit each), long rows (cubes)
def test_online_softmax_special_values_match_flex(repeat):
    """The one-pass max+sum: rows that start at -inf, grow the max late, hold +inf twice, NaN, or
    huge magnitudes give what Flex's max-shifted exp gives (NaN exactly where Flex has NaN)."""
    inf, nan = np.inf, np.nan
    rows = [[1, 2, 3, 4], [-inf, -inf, -inf, -inf], [inf, 1, 2, 3], [inf, inf, 0, 0], [-inf, 0, 1, -inf],
            [nan, 0, 1, 2], [1e30, -1e30, 0, 5], [-inf, -inf, 3, -inf], [-5, -4, -3, 80]]
    a = np.repeat(np.array(rows, np.float32), repeat, axis=1)
    ref = ember.tensor(a, device=Device.flex()).softmax(1).numpy()
    got = T(a).softmax(1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)
