"""Matmul candidates of the Cube backend on the CPU runtime, each against numpy float64.

Every candidate of ``MATMUL_CANDIDATES`` is launched directly into an output prefilled with
poison (NaN for floats, a sentinel for ints), so an element a kernel leaves unwritten fails.
Shapes cover the register-blocked kernel's edges (rows past its MR, columns past its 2W
panel), 1-row/1-col products, k = 0, broadcast batches, transposed and offset views.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember import Device
from ember.backends.cube import matmul as mm

DEV = Device.cpu(fusion=False)
SENT = -12345
CANDS = [c.name for c in mm.MATMUL_CANDIDATES]
_BY_NAME = {c.name: c for c in mm.MATMUL_CANDIDATES}


def backend() -> Any:
    bk = DEV.backend()
    while not hasattr(bk, "client") and hasattr(bk, "inner"):
        bk = bk.inner
    return bk


BK = backend()


def data(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f" or dtype is ember.bfloat16.np:
        return r.standard_normal(shape).astype(dtype)
    return r.integers(-5, 6, shape).astype(dtype)


def dev(x: np.ndarray, dtype: ember.dtype.DType | None = None) -> Any:
    return BK.from_data(x, dtype or ember.dtype.from_numpy_dtype(x.dtype))


def run(name: str, a: Any, b: Any) -> np.ndarray:
    """Launch candidate ``name`` into a poisoned output; the result as numpy."""
    A, B, out = BK._matmul_operands(a, b)
    dtype = out.dtype
    poison = np.nan if dtype.is_floating_point else (77 if dtype is ember.uint8 else SENT)
    if out.numel:
        out = BK.full(out.shape, poison, dtype)
    cand = _BY_NAME[name]
    assert cand.valid(A, B)
    cand.launch(BK, A, B, out)
    return np.asarray(BK.into_data(out))


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def check(got: np.ndarray, ref: np.ndarray, dtype: ember.dtype.DType, k: int) -> None:
    assert got.shape == ref.shape
    if not dtype.is_floating_point:
        np.testing.assert_array_equal(got, ref.astype(got.dtype))
        return
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), "unwritten (poisoned) elements"
    # accumulation error ~ sqrt(k) eps |a||b|; half types round the result once (f32 accumulation)
    eps = {"float64": 1e-15, "float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[dtype.name]
    scale = np.sqrt(max(k, 1)) * 4.0
    np.testing.assert_allclose(got, ref, rtol=4 * eps, atol=eps * scale * 8 + (0.02 if eps > 1e-4 else 0))


# --------------------------------------------------------------------------- shapes and edges

SHAPES = [
    ((1, 1), (1, 1)),
    ((1, 7), (7, 1)),  # 1 row, 1 col
    ((1, 40), (40, 70)),
    ((70, 40), (40, 1)),
    ((8, 8), (8, 48)),  # exactly one blocked tile (8 x 3 lines of 16)
    ((9, 9), (9, 49)),  # one past the tile in every direction
    ((4, 8), (8, 32)),  # narrow: tiles of 2 lines
    ((5, 9), (9, 33)),
    ((37, 53), (53, 29)),
    ((67, 130), (130, 45)),
    ((3, 0), (0, 4)),  # k = 0: zeros
    ((0, 5), (5, 3)),
    ((4, 5), (5, 0)),
]


@pytest.mark.parametrize("name", CANDS)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_shapes_f32(name, sa, sb):
    a, b = data(sa, np.float32, 1), data(sb, np.float32, 2)
    got = run(name, dev(a), dev(b))
    check(got, reference(a, b), ember.float32, sa[-1])


DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int32, ember.int64, ember.uint8]


@pytest.mark.parametrize("name", CANDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_dtypes_with_broadcast_batch(name, dtype):
    """int dtypes exact (uint8 wraps like numpy); half types accumulate in f32; batch (2, 1) x
    (1, 3) broadcast."""
    sa, sb = (2, 1, 9, 21), (1, 3, 21, 35)
    a, b = data(sa, dtype.np, 3), data(sb, dtype.np, 4)
    got = run(name, dev(a, dtype), dev(b, dtype))
    ref = reference(a, b) if dtype.is_floating_point else np.matmul(a, b)  # ints: same wrap-around
    if dtype in (ember.float16, ember.bfloat16):
        # the f32-accumulated result rounded once to the half type
        ref = ref.astype(np.float32).astype(dtype.np).astype(np.float64)
    check(got, ref, dtype, sa[-1])


@pytest.mark.parametrize("name", CANDS)
def test_k0_writes_zeros_over_poison(name):
    for dtype in (ember.float32, ember.int32):
        a, b = np.zeros((2, 3, 0), dtype.np), np.zeros((2, 0, 5), dtype.np)
        got = run(name, dev(a), dev(b))
        np.testing.assert_array_equal(got, np.zeros((2, 3, 5), dtype.np))


# --------------------------------------------------------------------------- views


@pytest.mark.parametrize("name", CANDS)
def test_transposed_views(name):
    """a.mT @ b, a @ b.mT and a.mT @ b.mT through permuted strides (no copies)."""
    m, k, n = 19, 23, 37
    at = data((3, k, m), np.float32, 5)  # a = at.mT
    bt = data((3, n, k), np.float32, 6)  # b = bt.mT
    a_, b_ = np.swapaxes(at, -1, -2), np.swapaxes(bt, -1, -2)
    va = BK.permute(dev(at), (0, 2, 1))
    vb = BK.permute(dev(bt), (0, 2, 1))
    for x, y, rx, ry in (
        (va, dev(np.ascontiguousarray(b_)), a_, b_),
        (dev(np.ascontiguousarray(a_)), vb, a_, b_),
        (va, vb, a_, b_),
    ):
        check(run(name, x, y), reference(rx, ry), ember.float32, k)


@pytest.mark.parametrize("name", CANDS)
def test_offset_slices_and_expanded_inputs(name):
    """A sliced view (offset, strided rows), and an operand that is itself an expanded view
    (zero batch stride): batch entries share one matrix."""
    big = data((1, 50, 60), np.float32, 7)
    va = BK.slice(dev(big), (slice(None), slice(3, 40, 2), slice(5, 30)))  # (1, 19, 25), offset
    a = big[:, 3:40:2, 5:30]
    b = data((4, 25, 18), np.float32, 8)
    check(run(name, va, dev(b)), reference(a, b), ember.float32, 25)
    b1 = data((1, 25, 18), np.float32, 9)
    vb = BK.expand(dev(b1), (4, 25, 18))
    a3 = data((4, 19, 25), np.float32, 10)
    check(run(name, dev(a3), vb), reference(a3, np.broadcast_to(b1, (4, 25, 18))), ember.float32, 25)


def test_blocked_packs_a_broadcast_operand_once():
    """The packed panels of a broadcast operand keep its own batch (zero strides), never one
    copy per output batch entry."""
    b = dev(data((1, 3, 40, 20), np.float32, 11))
    vb = BK.expand(b, (5, 3, 40, 20))
    w = mm.blocked_line_width(ember.float32)
    packed = mm._pack(BK, vb, 2 * w, False, (5, 3))
    assert packed.shape == (5, 3, 1, 40 * 2 * w)
    assert packed.strides[0] == 0 and packed.strides[1] != 0
    assert packed.buffer.nbytes >= 3 * 40 * 2 * w * 4
    assert packed.buffer.nbytes < 5 * 3 * 40 * 2 * w * 4


# --------------------------------------------------------------------------- the chosen path


def test_bool_matmul_through_the_api():
    r = np.random.default_rng(14)
    a, b = r.random((2, 5, 40)) < 0.1, r.random((1, 40, 7)) < 0.1
    got = (ember.tensor(a, device=DEV) @ ember.tensor(b, device=DEV)).numpy()
    np.testing.assert_array_equal(got, np.matmul(a, b))


def test_choice_heuristic():
    small = dev(np.zeros((2, 2), np.float32))
    big = dev(np.zeros((64, 64), np.float32))
    assert mm.choose(small, small).name == "naive"
    assert mm.choose(big, big).name == "blocked"


@pytest.mark.parametrize("sa,sb", [((2, 2), (2, 2)), ((3, 33, 65), (1, 65, 17)), ((129, 70), (70, 130))])
def test_tensor_api_matmul(sa, sb):
    a, b = data(sa, np.float32, 12), data(sb, np.float32, 13)
    ta, tb = ember.tensor(a, device=DEV), ember.tensor(b, device=DEV)
    check((ta @ tb).numpy(), reference(a, b), ember.float32, sa[-1])
    x = ember.tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), device=DEV)
    y = ember.tensor(np.array([[5.0, 6.0], [7.0, 8.0]], np.float32), device=DEV)
    assert (x @ y).numpy().ravel().tolist() == [19.0, 22.0, 43.0, 50.0]
