"""The Cube backend's elementwise family (``ember/backends/cube/elementwise*.py``) on the CPU
runtime, against numpy references computed in float64 (exact, in the dtype itself, for
integer and bool results).

Sizes of at least 4096 elements take the vectorised lines path (widths 16/8/4 by dtype and
divisibility); small, broadcast, sliced and permuted operands take the strided path. Output
buffers come from the memory pool, so ``poison_pool`` fills the pool's free buffers of the
size class with 0xFF bytes (NaN for floats, -1 / 255 for ints) before a launch: an element a
kernel leaves unwritten shows up.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
import pytest

import ember
from ember import Device
from ember.backends.cube import elementwise as EW
from ember.backends.cube import elementwise_kernels as K

DEV = Device.cpu(fusion=False)
BK = DEV.backend().inner  # the CubeBackend under Dispatch
FLOATS = (ember.float64, ember.float32, ember.float16, ember.bfloat16)
INTS = (ember.int64, ember.int32, ember.uint8)
TOL = {
    ember.float64: (1e-12, 1e-12),
    ember.float32: (2e-6, 1e-6),
    ember.float16: (2e-3, 1e-3),
    ember.bfloat16: (1.6e-2, 1e-2),
}
N = 8192  # lines path, widest lines for every dtype


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def poison_pool(nbytes: int, count: int = 4) -> None:
    """Leave ``count`` 0xFF-filled buffers of ``nbytes``' size class on the pool's free list."""
    bufs = [BK.client.empty(nbytes) for _ in range(count)]
    for b in bufs:
        ctypes.memset(b.ptr, 0xFF, b.capacity)
    del bufs, b


def tensor(a: np.ndarray, d: ember.dtype) -> ember.Tensor:
    return ember.tensor(np.asarray(a).astype(d.np), dtype=d, device=DEV)


def data(d: ember.dtype, shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0, seed: int = 0) -> np.ndarray:
    """Values of dtype ``d`` (as its numpy dtype): uniform floats, small ints, random bools."""
    r = rng(seed)
    if d is ember.bool:
        return r.random(shape) < 0.5
    if not d.is_floating_point:
        lo_i = 0 if d is ember.uint8 else -9
        return r.integers(lo_i, 10, shape).astype(d.np)
    return r.uniform(lo, hi, shape).astype(d.np)


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def check(got: ember.Tensor, ref: np.ndarray, d: ember.dtype, what: str = "") -> None:
    g = got.numpy()
    assert g.shape == np.shape(ref), f"{what}: shape {g.shape} vs {np.shape(ref)}"
    if d.is_floating_point:
        rtol, atol = TOL[d]
        with np.errstate(all="ignore"):  # the reference rounded to d (overflow to inf included)
            ref = f64(np.asarray(ref).astype(d.np))
        np.testing.assert_allclose(f64(g), ref, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, np.asarray(ref).astype(d.np), err_msg=what)


# --------------------------------------------------------------------------- unary ops
def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_erf = np.vectorize(math.erf, otypes=[np.float64])
# name: (reference in float64, (lo, hi) of the data)
FLOAT_UNARY = {
    "exp": (np.exp, (-5, 5)),
    "log": (np.log, (0.05, 9)),
    "log1p": (np.log1p, (-0.9, 5)),
    "expm1": (np.expm1, (-3, 3)),
    "sqrt": (np.sqrt, (0, 9)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 9)),
    "sin": (np.sin, (-6, 6)),
    "cos": (np.cos, (-6, 6)),
    "tan": (np.tan, (-1.2, 1.2)),
    "tanh": (np.tanh, (-4, 4)),
    "sigmoid": (_sigmoid, (-20, 20)),
    "erf": (_erf, (-3, 3)),
    "reciprocal": (lambda x: 1 / x, (0.5, 4)),
}
def _torch_sign(x):
    """PyTorch's sign: 0 for nan (numpy's sign keeps nan)."""
    return np.where(np.isnan(x), 0, np.sign(x)) if np.asarray(x).dtype.kind == "f" else np.sign(x)


NUMERIC_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": _torch_sign,
    "relu": lambda x: np.maximum(x, 0),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
}


@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
def test_float_unary_ops_on_lines(op: str, d: ember.dtype) -> None:
    ref, (lo, hi) = FLOAT_UNARY[op]
    x = data(d, (N,), lo, hi)
    poison_pool(N * d.itemsize)
    check(getattr(tensor(x, d), op)(), ref(f64(x)), d, op)


@pytest.mark.parametrize("d", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", sorted(NUMERIC_UNARY))
def test_numeric_unary_ops_on_lines(op: str, d: ember.dtype) -> None:
    if op == "neg" and d is ember.uint8:
        pytest.skip("uint8 negation wraps: checked in test_integer_semantics")
    x = data(d, (N,))
    if d.is_floating_point:  # halves (.5) make round's ties-to-even observable
        x[:64] = (np.arange(64) - 32) * 0.5
    poison_pool(N * d.itemsize)
    ref = NUMERIC_UNARY[op](f64(x)) if d.is_floating_point else NUMERIC_UNARY[op](x)
    check(getattr(tensor(x, d), op)(), ref, d, op)


@pytest.mark.parametrize("d", FLOATS + INTS + (ember.bool,), ids=str)
def test_predicates(d: ember.dtype) -> None:
    x = data(d, (N,))
    if d.is_floating_point:
        x[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
    t = tensor(x, d)
    for op, ref in (("logical_not", np.logical_not), ("isnan", np.isnan), ("isinf", np.isinf),
                    ("isfinite", np.isfinite)):
        if d is ember.bool and op != "logical_not":
            continue
        poison_pool(N)
        got = getattr(t, op)()
        assert got.dtype is ember.bool
        check(got, ref(f64(x)) if d.is_floating_point else ref(x), ember.bool, op)


@pytest.mark.parametrize("n", [1, 7, 4096, 4099, 4100, 4104, 8200, N])
def test_every_line_width_and_odd_sizes(n: int) -> None:
    x = data(ember.float32, (n,))
    poison_pool(n * 4)
    check(tensor(x, ember.float32).exp(), np.exp(f64(x)), ember.float32)
    assert EW._line_width(n, (BK.from_data(x, ember.float32),)) == (
        1 if n < EW._SMALL else math.gcd(n, 16)
    )


def test_edge_values_of_math() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, 1000.0, -1000.0, 88.0, -88.0, 1e-30],
                 np.float32)
    t = tensor(x, ember.float32)
    with np.errstate(all="ignore"):
        check(t.sigmoid(), _sigmoid(f64(x)), ember.float32, "sigmoid")  # no nan for large |x|
        check(t.relu(), np.maximum(f64(x), 0), ember.float32, "relu keeps nan")
        check(t.sign(), _torch_sign(f64(x)), ember.float32, "sign")
        check(t.tanh(), np.tanh(f64(x)), ember.float32, "tanh")
        check(t.erf(), _erf(f64(x)), ember.float32, "erf")
        check(t.expm1(), np.expm1(f64(x)), ember.float32, "expm1 of tiny x")
        check(t.log1p(), np.log1p(f64(x)), ember.float32, "log1p")
        check(t.rsqrt(), 1 / np.sqrt(f64(x)), ember.float32, "rsqrt")
    s = t.sigmoid().numpy()
    assert s[6] > 0 and s[6] < 1e-40 and s[5] == 1.0  # sigmoid(-100) = 3.7e-44 (denormal)
    r = tensor(np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5], np.float32), ember.float32).round()
    np.testing.assert_array_equal(r.numpy(), [0, 2, 2, -0.0, -2, -2])  # half to even


# --------------------------------------------------------------------------- binary ops
def _fdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


ARITH = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "floor_div": _fdiv,
    "remainder": np.remainder, "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
    "atan2": np.arctan2,
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}


def _operands(op: str, d: ember.dtype, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> tuple:
    a, b = data(d, shape_a, seed=1), data(d, shape_b, seed=2)
    if op == "pow":
        if d.is_floating_point:
            a, b = data(d, shape_a, 0.3, 2.5, 1), data(d, shape_b, -2, 2, 2)
        else:
            b = np.abs(b) % 4
    if op in ("div", "floor_div", "remainder") and d.is_floating_point:
        b[b == 0] = 1
    if d.is_floating_point and op not in ("pow", "atan2") and a.size > 8:
        a.reshape(-1)[:8] = np.round(a.reshape(-1)[:8])  # ties for the comparisons and min/max
        b.reshape(-1)[:8] = a.reshape(-1)[:8] if b.size >= 8 else b.reshape(-1)[:8]
    return a, b


def _ref(fn, a: np.ndarray, b: np.ndarray, d: ember.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        if d.is_floating_point:
            return fn(f64(a), f64(b))
        return fn(a, b)


@pytest.mark.parametrize("d", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", sorted(ARITH))
def test_arith_on_lines(op: str, d: ember.dtype) -> None:
    if op in ("div", "atan2") and not d.is_floating_point:
        pytest.skip("float-only (the Tensor API lifts integers to float)")
    a, b = _operands(op, d, (N,), (N,))
    poison_pool(N * d.itemsize)
    got = getattr(BK, op)(BK.from_data(a, d), BK.from_data(b, d))
    check(_wrap(got, d), _ref(ARITH[op], a, b, d), d, op)


def _wrap(p: object, d: ember.dtype) -> ember.Tensor:
    from ember.tensor import _make

    return _make(p, DEV.backend(), d)


@pytest.mark.parametrize("d", FLOATS + INTS + (ember.bool,), ids=str)
def test_comparisons_and_logic_on_lines(d: ember.dtype) -> None:
    a, b = _operands("eq", d, (N,), (N,))
    if d.is_floating_point:
        a[8:10] = np.nan
    ta, tb = BK.from_data(a, d), BK.from_data(b, d)
    for op, fn in {**COMPARE, **LOGICAL}.items():
        poison_pool(N)
        got = getattr(BK, op)(ta, tb)
        assert got.dtype is ember.bool
        check(_wrap(got, ember.bool), _ref(fn, a, b, d), ember.bool, op)


def test_bool_arithmetic_is_logic() -> None:
    a, b = data(ember.bool, (N,), seed=1), data(ember.bool, (N,), seed=2)
    ta, tb = BK.from_data(a, ember.bool), BK.from_data(b, ember.bool)
    for op, ref in (("add", a | b), ("mul", a & b), ("maximum", a | b), ("minimum", a & b)):
        check(_wrap(getattr(BK, op)(ta, tb), ember.bool), ref, ember.bool, op)


BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3, 2)),
              ((4,), ()), ((1,), (2, 1, 3)), ((64, 1, 80), (1, 70, 80)), ((0, 3), (3,))]


@pytest.mark.parametrize("d", (ember.float32, ember.float16, ember.int32, ember.uint8), ids=str)
@pytest.mark.parametrize("sa,sb", BROADCASTS, ids=str)
def test_broadcasting_binary(sa: tuple, sb: tuple, d: ember.dtype) -> None:
    for op in ("add", "sub", "maximum", "floor_div", "lt"):
        a, b = _operands(op, d, sa, sb)
        if op == "floor_div" and not d.is_floating_point:
            b[b == 0] = 1
        out_d = ember.bool if op == "lt" else d
        n = int(np.prod(np.broadcast_shapes(sa, sb)))
        poison_pool(max(n, 1) * out_d.itemsize)
        got = getattr(BK, op)(BK.from_data(a, d), BK.from_data(b, d))
        ref = _ref({**ARITH, **COMPARE}[op], a, b, d)
        check(_wrap(got, out_d), ref, out_d, f"{op} {sa} {sb}")


def test_strided_views_permuted_sliced_and_offset() -> None:
    r = rng(3)
    big = r.standard_normal((6, 10, 8)).astype(np.float32)
    t = tensor(big, ember.float32)
    views = [
        (t.permute(2, 0, 1), big.transpose(2, 0, 1)),
        (t[1:5, ::3, 2:7], big[1:5, ::3, 2:7]),
        (t[:, 3], big[:, 3]),
        (t.transpose(0, 2)[::2], big.transpose(2, 1, 0)[::2]),
    ]
    for tv, v in views:
        check(tv.exp(), np.exp(f64(v)), ember.float32, "exp of a view")
        check(tv * tv.abs(), f64(v) * np.abs(f64(v)), ember.float32, "product of views")
        check(tv + 1.5, f64(v) + 1.5, ember.float32, "scalar op of a view")
        e = ember.tensor(np.ones(v.shape[-1], np.float32), device=DEV)
        check(tv - e, f64(v) - 1.0, ember.float32, "view minus a broadcast row")


def test_coalescing_reduces_rank() -> None:
    a = BK.from_data(np.zeros((2, 3, 4), np.float32), ember.float32)
    b = BK.from_data(np.zeros((3, 1), np.float32), ember.float32)
    va, vb = EW._coalesce((2, 3, 4), [a, b])  # b repeats along dims 0 and 2: nothing merges
    assert va.shape == vb.shape == (2, 3, 4) and vb.strides == (0, 1, 0)
    row = BK.from_data(np.zeros((4,), np.float32), ember.float32)
    va, vr = EW._coalesce((2, 3, 4), [a, row])  # a row broadcast over (2, 3): rank 2
    assert va.shape == vr.shape == (6, 4)
    assert va.strides == (4, 1) and vr.strides == (0, 1)
    (vc,) = EW._coalesce((2, 3, 4), [a])
    assert vc.shape == (24,) and vc.strides == (1,)
    (vs,) = EW._coalesce((1, 1), [BK.from_data(np.zeros((1, 1), np.float32), ember.float32)])
    assert vs.shape == (1,)


# --------------------------------------------------------------------------- integer semantics
@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_semantics(d: ember.dtype) -> None:
    lo = 0 if d is ember.uint8 else -20
    a = np.repeat(np.arange(lo, 21), 9).astype(d.np)
    b = np.tile(np.arange(-4, 5) if d is not ember.uint8 else np.arange(0, 9), len(a) // 9).astype(d.np)
    ta, tb = BK.from_data(a, d), BK.from_data(b, d)
    with np.errstate(all="ignore"):
        for op, fn in (("floor_div", np.floor_divide), ("remainder", np.remainder)):
            # Python signs; x // 0 == x % 0 == 0, as numpy (and flex)
            check(_wrap(getattr(BK, op)(ta, tb), d), fn(a, b), d, op)
    e = np.abs(b) % 9
    check(_wrap(BK.pow(ta, BK.from_data(e, d)), d), np.power(a, e), d, "pow")
    big = np.array([3, 7, 2, 255], d.np)
    ex = np.array([40, 30, 70, 3], d.np)
    with np.errstate(all="ignore"):
        check(_wrap(BK.pow(BK.from_data(big, d), BK.from_data(ex, d)), d), np.power(big, ex), d, "pow wraps")
    check(_wrap(BK.neg(ta), d), np.negative(a), d, "neg wraps for uint8")
    if d is not ember.uint8:
        neg = np.array([1, -1, -1, 2, 0], d.np)
        got = BK.pow(BK.from_data(neg, d), BK.from_data(np.array([-3, -3, -2, -1, -1], d.np), d))
        np.testing.assert_array_equal(BK.into_data(got), [1, -1, 1, 0, 0])  # PyTorch's answers
    x = tensor(a, d)
    check(7 // (x + (x == 0).to(d)), np.floor_divide(7, a + (a == 0)), d, "rfloor_div_scalar")
    check(x % 3, np.remainder(a, 3), d, "remainder_scalar")
    check(2 - x, (2 - a.astype(np.int64)).astype(d.np), d, "rsub_scalar wraps")


def test_float_floor_div_and_remainder_follow_numpy() -> None:
    a = np.array([1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, 1.0, np.inf, 3.0, 1.0, -1.0], np.float64)
    b = np.array([0.1, 0.1, -2.0, 2.0, 3.0, -3.0, 0.0, np.inf, 2.0, 0.0, -0.0, 0.0], np.float64)
    for d in (ember.float64, ember.float32):
        ta, tb = BK.from_data(a, d), BK.from_data(b, d)
        with np.errstate(all="ignore"):
            fd = np.floor_divide(a.astype(d.np), b.astype(d.np))
            rm = np.remainder(a.astype(d.np), b.astype(d.np))
        got_fd = BK.into_data(BK.floor_div(ta, tb))
        got_rm = BK.into_data(BK.remainder(ta, tb))
        np.testing.assert_array_equal(got_fd, fd)  # 1 // 0.1 == 9 (not floor(1 / 0.1) == 10)
        np.testing.assert_array_equal(np.signbit(got_fd), np.signbit(fd))
        np.testing.assert_array_equal(got_rm, rm)
        np.testing.assert_array_equal(np.signbit(got_rm[~np.isnan(rm)]), np.signbit(rm[~np.isnan(rm)]))


def test_nan_propagation_of_maximum_minimum_and_clamp() -> None:
    a = np.array([np.nan, 1.0, np.nan, -2.0, 5.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, -3.0, 4.0], np.float32)
    ta, tb = tensor(a, ember.float32), tensor(b, ember.float32)
    check(ember.maximum(ta, tb), np.maximum(f64(a), f64(b)), ember.float32, "maximum")
    check(ember.minimum(ta, tb), np.minimum(f64(a), f64(b)), ember.float32, "minimum")
    check(ta.clamp(-1.0, 2.0), np.clip(f64(a), -1, 2), ember.float32, "clamp")
    check(ta.clamp(min=0.0), np.maximum(f64(a), 0), ember.float32, "clamp min")
    check(ta.clamp(max=0.0), np.minimum(f64(a), 0), ember.float32, "clamp max")
    check(tensor(b, ember.float32).maximum(2.0), np.maximum(f64(b), 2), ember.float32, "maximum_scalar")


# --------------------------------------------------------------------------- scalar ops
@pytest.mark.parametrize("d", FLOATS + INTS, ids=str)
def test_scalar_and_reversed_scalar_ops(d: ember.dtype) -> None:
    x = data(d, (N,), 0.5, 3.0)
    if not d.is_floating_point:
        x = (np.abs(x) % 6 + 1).astype(d.np)  # 1..6: no zero divisors, no negative exponents
    p = BK.from_data(x, d)
    xf = f64(x) if d.is_floating_point else x
    s = 2.5 if d.is_floating_point else 3
    for op in EW.SCALAR_OPS:
        if op == "div" and not d.is_floating_point:
            continue  # the Tensor API lifts integers to float for true division
        fn = {**ARITH, **COMPARE}[op]
        got = getattr(BK, f"{op}_scalar")(p, s)
        out_d = ember.bool if op in COMPARE else d
        with np.errstate(all="ignore"):
            ref = fn(xf, np.asarray(s, xf.dtype)) if not d.is_floating_point else fn(xf, s)
        if d is ember.uint8 and op == "sub":
            ref = (x.astype(np.int64) - s).astype(np.uint8)
        check(_wrap(got, out_d), ref, out_d, f"{op}_scalar")
    for op in EW.REVERSED_SCALAR_OPS:
        if op == "div" and not d.is_floating_point:
            continue
        got = getattr(BK, f"r{op}_scalar")(p, s)
        with np.errstate(all="ignore"):
            ref = ARITH[op](np.asarray(s, xf.dtype), xf) if not d.is_floating_point else ARITH[op](s, xf)
        if d is ember.uint8 and op == "sub":
            ref = (s - x.astype(np.int64)).astype(np.uint8)
        if op == "pow" and not d.is_floating_point:
            ref = np.power(np.asarray(s, d.np), x)
        check(_wrap(got, d), ref, d, f"r{op}_scalar")


# --------------------------------------------------------------------------- where / masked_fill
@pytest.mark.parametrize("d", FLOATS + INTS + (ember.bool,), ids=str)
def test_where_and_masked_fill(d: ember.dtype) -> None:
    for sc, sa, sb in (((N,), (N,), (N,)), ((3, 1), (3, 4), (4,)), ((2, 1, 4), (3, 1), ())):
        c, a, b = data(ember.bool, sc, seed=4), data(d, sa, seed=5), data(d, sb, seed=6)
        got = BK.where(BK.from_data(c, ember.bool), BK.from_data(a, d), BK.from_data(b, d))
        ref = np.where(c, f64(a), f64(b)) if d.is_floating_point else np.where(c, a, b)
        check(_wrap(got, d), ref, d, f"where {sc} {sa} {sb}")
    x, m = data(d, (64, 130), seed=7), data(ember.bool, (130,), seed=8)
    v = True if d is ember.bool else (-1.5 if d.is_floating_point else 3)
    got = BK.masked_fill(BK.from_data(x, d), BK.from_data(m, ember.bool), v)
    ref = np.where(m, v, f64(x) if d.is_floating_point else x)
    check(_wrap(got, d), ref, d, "masked_fill")


# --------------------------------------------------------------------------- in-place output
def _reservations() -> int:
    return BK.client.pool.reservations


def test_temporaries_are_donated_and_held_values_never_change() -> None:
    x = BK.from_data(np.linspace(-2, 2, N, dtype=np.float32), ember.float32)
    y = BK.from_data(np.ones(N, np.float32), ember.float32)
    ref = np.exp(np.linspace(-2, 2, N, dtype=np.float32))
    r = _reservations()
    out = BK.neg(BK.exp(x))  # the exp result is a temporary: neg writes into its buffer
    assert _reservations() - r == 1
    np.testing.assert_allclose(BK.into_data(out), -ref, rtol=1e-6)
    r = _reservations()
    t = BK.exp(x)
    out = BK.add(y, t)  # t is held: a new buffer, t unchanged
    assert _reservations() - r == 2
    np.testing.assert_allclose(BK.into_data(t), ref, rtol=1e-6)
    r = _reservations()
    out = BK.add(y, BK.exp(x))  # the second operand is donated
    assert _reservations() - r == 1
    np.testing.assert_allclose(BK.into_data(out), ref + 1, rtol=1e-6)
    v = BK.reshape(BK.exp(x), (N // 2, 2))
    w = BK.reshape(v, (N,))  # two views of one buffer: never donated
    r = _reservations()
    out = BK.mul_scalar(w, 2.0)
    assert _reservations() - r == 1
    np.testing.assert_allclose(BK.into_data(v).reshape(-1), ref, rtol=1e-6)
    # a temporary whose layout differs from the output's is not donated
    small = BK.from_data(np.ones((1, 4), np.float32), ember.float32)
    r = _reservations()
    out = BK.add(BK.exp(small), BK.from_data(np.ones((3, 4), np.float32), ember.float32))
    assert out.shape == (3, 4) and _reservations() - r == 3  # exp, the (3, 4) operand, the output
    # through the Tensor API a Tensor holds every operand: nothing is donated
    xt = ember.tensor(np.ones(8, np.float32), device=DEV)
    z = xt.exp()
    z2 = z.neg()
    np.testing.assert_allclose(z.numpy(), np.e, rtol=1e-6)
    np.testing.assert_allclose(z2.numpy(), -np.e, rtol=1e-6)


def test_inplace_kernel_id_records_the_aliasing() -> None:
    a = np.zeros(64, np.float32)
    b = np.ones(64, np.float32)
    fresh = K.binary_lines.kernel_id(256, a, b, np.zeros(64, np.float32), "add")
    inplace = K.binary_lines.kernel_id(256, a, b, a, "add")
    assert "inplace: Some(0)" in inplace.text() and "inplace" not in fresh.text()
    assert inplace.entry() != fresh.entry()


def test_composites_use_donation_and_stay_correct() -> None:
    x = np.linspace(-4, 4, N).astype(np.float32)
    p = BK.from_data(x, ember.float32)
    r = _reservations()
    g = BK.gelu(p)
    assert _reservations() - r <= 3  # gelu's five elementwise steps reuse their temporaries
    ref = 0.5 * f64(x) * (1 + _erf(f64(x) / math.sqrt(2)))
    np.testing.assert_allclose(f64(BK.into_data(g)), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(BK.into_data(p), x)  # the input is held by the caller


# --------------------------------------------------------------------------- kernel variants
def test_small_tensors_share_one_variant_per_op() -> None:
    """Below _SMALL elements every contiguous launch uses width 1 (one compiled kernel per
    op and dtype, whatever the size); broadcast shapes coalesce to low ranks."""
    before = len(K.unary_lines._plans)
    for n in (1, 2, 3, 8, 12, 24, 100):
        tensor(np.ones(n, np.float32), ember.float32).tanh()
    assert len(K.unary_lines._plans) - before <= 1


def test_the_op_tables_cover_the_catalog() -> None:
    from ember.backends import base

    assert set(base.UNARY_OPS + base.PREDICATE_OPS) <= set(K.UNARY_EXPRS)
    assert set(base.BINARY_OPS) <= set(K.BINARY_EXPRS)
    for name in base.ELEMENTWISE_OPS - {"cast"}:
        assert callable(getattr(BK, name)), name


def test_rows_path_for_large_broadcasts_and_row_slices() -> None:
    """Operands contiguous along the last dim only (a bias row, a column slice, an offset):
    lines along the rows (unary_rows / binary_rows / ternary_rows)."""
    r = rng(11)
    m = r.standard_normal((96, 160)).astype(np.float32)
    row = r.standard_normal(160).astype(np.float32)
    tm, trow = tensor(m, ember.float32), tensor(row, ember.float32)
    before = len(K.binary_rows._plans) + len(K.unary_rows._plans) + len(K.ternary_rows._plans)
    poison_pool(96 * 160 * 4)
    check(tm + trow, f64(m) + f64(row), ember.float32, "bias row")
    check(trow * tm, f64(row) * f64(m), ember.float32, "bias row on the left")
    sl = tm[:, 16:144]  # rows of 128 at offset 16, stride 160
    check(sl.exp(), np.exp(f64(m[:, 16:144])), ember.float32, "column slice")
    check(sl - tm[:, 0:128], f64(m[:, 16:144]) - f64(m[:, 0:128]), ember.float32, "two slices")
    c = tensor(r.random(160) < 0.5, ember.bool)
    check(ember.where(c, tm, trow), np.where(c.numpy(), f64(m), f64(row)),
          ember.float32, "where with a row condition")
    after = len(K.binary_rows._plans) + len(K.unary_rows._plans) + len(K.ternary_rows._plans)
    assert after > before  # the rows kernels ran
    odd = tm[:, 1:150]  # inner size 149: no lines, the strided path
    check(odd * 2.0, f64(m[:, 1:150]) * 2, ember.float32, "odd slice")


@pytest.mark.parametrize("op", ["logical_not", "eq0", "ne1", "lt2", "ge2"])
def test_byte_comparisons_on_lines_store_zero_or_one(op: str) -> None:
    """GCC 12 -O3 vectorises a per-lane comparison of u8 lanes into 0xFF for true; bools
    must be stored as 0/1 (a cast to int reads the byte)."""
    ours: dict[str, Any] = {
        "logical_not": lambda x: x.logical_not(), "eq0": lambda x: x == 0, "ne1": lambda x: x != 1,
        "lt2": lambda x: x < 2, "ge2": lambda x: x >= 2,
    }
    ref: dict[str, Any] = {
        "logical_not": np.logical_not, "eq0": lambda x: x == 0, "ne1": lambda x: x != 1,
        "lt2": lambda x: x < 2, "ge2": lambda x: x >= 2,
    }
    rng = np.random.default_rng()
    for dtype in (np.uint8, np.bool_):
        if dtype is np.bool_ and op != "logical_not":
            continue
        a = rng.integers(0, 4, 8192).astype(dtype)
        y = ours[op](ember.tensor(a, device=DEV)).numpy()
        assert set(np.unique(y.view(np.uint8)).tolist()) <= {0, 1}
        np.testing.assert_array_equal(y, ref[op](a))
