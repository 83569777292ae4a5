"""The Autodiff decorator at the backend level, over Flex.

Every backward rule is checked against central finite differences in float64, under both
checkpointing modes; then the graph semantics (diamonds, retain_graph, accumulation, grad
mode, freed graphs), the untracked results of non-differentiable ops, checkpointing
(identical gradients, fewer retained bytes), and the hooks the Tensor API uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ember import dtype as dt
from ember import tracing
from ember.backends.autodiff import ADTensor, Autodiff, enable_grad, is_grad_enabled, no_grad
from ember.backends.autodiff.rules import RULES
from ember.backends.base import CATALOG, Backend
from ember.backends.flex import FlexBackend
from ember.errors import AutodiffError

F64 = dt.float64
MODES = ("none", "balanced")
_DT = {np.dtype(np.float64): dt.float64, np.dtype(np.float32): dt.float32,
       np.dtype(np.int64): dt.int64, np.dtype(np.bool_): dt.bool_}


def _rand(*shape: int, lo: float | None = None, seed: int = 0) -> np.ndarray:
    """Standard normal values, or uniform on [lo, lo + 1.5) when ``lo`` is given."""
    g = np.random.default_rng(seed + 7919 * len(shape) + sum(shape))
    if lo is not None:
        return g.uniform(lo, lo + 1.5, shape)
    return g.standard_normal(shape)


def _i64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _ad(checkpointing: str = "none", inner: Backend | None = None) -> Autodiff:
    return Autodiff(inner or FlexBackend(), checkpointing)


def _const(B: Autodiff, x: Any) -> ADTensor:
    x = np.asarray(x)
    return B.from_data(x, _DT[x.dtype])


def _leaf(B: Autodiff, x: Any) -> ADTensor:
    return B.require_grad(_const(B, np.asarray(x, dtype=np.float64)))


def _val(B: Autodiff, p: ADTensor) -> np.ndarray:
    return np.asarray(B.into_data(p))


def _grad(B: Autodiff, p: ADTensor) -> np.ndarray:
    g = B.grad(p)
    assert g is not None, "no gradient reached this leaf"
    return np.asarray(B.into_data(g))


# ------------------------------------------------------------------------------ finite differences
Fn = Callable[..., ADTensor]


def _check_fd(fn: Fn, args: tuple[np.ndarray, ...], checkpointing: str, eps: float = 1e-6,
              rtol: float = 1e-6, atol: float = 1e-7) -> None:
    """Gradients of ``sum(w * fn(*args))`` for every float64 argument, analytic vs central
    differences (the other arguments are constants: indices, masks)."""
    B = _ad(checkpointing)
    wrt = [i for i, a in enumerate(args) if a.dtype == np.float64]
    ins = [_leaf(B, a) if i in wrt else _const(B, a) for i, a in enumerate(args)]
    out = fn(B, *ins)
    assert B.is_tracked(out)
    w = _rand(*out.shape, seed=99)

    def loss(xs: list[np.ndarray]) -> float:
        plain = _ad()
        return float(np.sum(w * _val(plain, fn(plain, *[_const(plain, x) for x in xs]))))

    B.backward(out, _const(B, w), False)
    for i in wrt:
        analytic = _grad(B, ins[i])
        assert analytic.shape == args[i].shape and analytic.dtype == np.float64
        numeric = np.zeros_like(args[i])
        for j in np.ndindex(args[i].shape):
            xs = [a.copy() for a in args]
            xs[i][j] += eps
            hi = loss(xs)
            xs[i][j] -= 2 * eps
            numeric[j] = (hi - loss(xs)) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol * max(1.0, np.abs(numeric).max()),
                                   err_msg=f"gradient of argument {i}")


def _u(op: str) -> Fn:
    return lambda B, p: getattr(B, op)(p)


def _s(op: str, s: float) -> Fn:
    return lambda B, p: getattr(B, op)(p, s)


def _b(op: str) -> Fn:
    return lambda B, a, b: getattr(B, op)(a, b)


_POSITIVE = {"log", "log1p", "sqrt", "rsqrt", "reciprocal"}
_SMALL = {"tan": 0.6, "expm1": 1.0}

# op -> list of (fn, args); every rule in RULES must appear (test_every_rule_has_a_case)
CASES: dict[str, list[tuple[Fn, tuple[np.ndarray, ...]]]] = {}


def case(op: str, fn: Fn, *args: np.ndarray) -> None:
    CASES.setdefault(op, []).append((fn, args))


for _op in ("neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
            "tanh", "sigmoid", "relu", "erf", "floor", "ceil", "round", "trunc", "reciprocal"):
    _x = _rand(3, 4, lo=0.2) if _op in _POSITIVE else _rand(3, 4) * _SMALL.get(_op, 1.0)
    case(_op, _u(_op), _x)

for _op, _sc in (("add_scalar", 1.5), ("sub_scalar", 0.5), ("mul_scalar", -2.0), ("div_scalar", 4.0),
                 ("floor_div_scalar", 0.7), ("remainder_scalar", 0.7), ("maximum_scalar", 0.1),
                 ("minimum_scalar", 0.1), ("rsub_scalar", 2.0), ("rfloor_div_scalar", 2.0)):
    case(_op, _s(_op, _sc), _rand(2, 5))
for _op, _sc in (("pow_scalar", 2.5), ("pow_scalar", 0.0), ("pow_scalar", -1.5), ("rdiv_scalar", 3.0),
                 ("rremainder_scalar", 2.5), ("rpow_scalar", 1.7), ("rpow_scalar", 0.5)):
    case(_op, _s(_op, _sc), _rand(2, 5, lo=0.3))
case("pow_scalar", _s("pow_scalar", 3), _rand(2, 5))  # integral exponent, negative bases

for _op in ("add", "sub", "mul", "div", "maximum", "minimum", "atan2", "remainder", "floor_div"):
    _a, _bb = _rand(3, 4, seed=1), _rand(3, 4, seed=2)
    if _op in ("div", "remainder", "floor_div"):
        _bb = np.sign(_bb) * (np.abs(_bb) + 0.5)
    case(_op, _b(_op), _a, _bb)
    case(_op, _b(_op), _rand(3, 1, 4, seed=3), np.abs(_rand(2, 4, seed=4)) + 0.5)  # broadcast, ranks differ
case("pow", _b("pow"), _rand(3, 4, lo=0.3), _rand(3, 4, seed=5))
case("pow", _b("pow"), _rand(2, 1, lo=0.3), _rand(1, 3, seed=6))  # both sides broadcast
case("matmul", _b("matmul"), _rand(3, 4), _rand(4, 2))
case("matmul", _b("matmul"), _rand(2, 1, 3, 4), _rand(1, 3, 4, 2))  # broadcast batch dims
case("matmul", _b("matmul"), _rand(2, 3, 4), _rand(1, 4, 5))

for _op in ("sum", "prod", "max", "min", "logsumexp"):
    case(_op, lambda B, p, op=_op: getattr(B, op)(p, (1,), False), _rand(3, 4, 2))
    case(_op, lambda B, p, op=_op: getattr(B, op)(p, (0, 2), True), _rand(3, 4, 2))
    case(_op, lambda B, p, op=_op: getattr(B, op)(p, (0, 1), False), _rand(2, 3))
_z = _rand(3, 4)
_z[0, 1] = 0.0  # one zero in a slice
_z[2, 0] = _z[2, 3] = 0.0  # two zeros in a slice
case("prod", lambda B, p: B.prod(p, (1,), False), _z)
case("prod", lambda B, p: B.prod(p, (0, 1), True), _z)
case("softmax", lambda B, p: B.softmax(p, 1), _rand(3, 5))
case("log_softmax", lambda B, p: B.log_softmax(p, 0), _rand(3, 5))
case("cumsum", lambda B, p: B.cumsum(p, 1), _rand(3, 4))
case("cumprod", lambda B, p: B.cumprod(p, 1), _rand(3, 4))
case("cumprod", lambda B, p: B.cumprod(p, 1), _z)  # zeros: one and two in a slice
case("logaddexp", lambda B, a, b: B.logaddexp(a, b), _rand(3, 4), _rand(4))
case("hypot", lambda B, a, b: B.hypot(a, b), _rand(3, 4), _rand(3, 1))
case("lerp", lambda B, a, b, w: B.lerp(a, b, w), _rand(3, 4), _rand(4), _rand(3, 1))
case("roll", lambda B, p: B.roll(p, (1, 2), (0, 1)), _rand(3, 4))
case("diagonal", lambda B, p: B.diagonal(p, 1, 0, 2), _rand(3, 2, 4))
case("diagonal", lambda B, p: B.diagonal(p, -1, 1, 0), _rand(4, 3))

case("reshape", lambda B, p: B.reshape(p, (4, 3)), _rand(2, 6))
case("permute", lambda B, p: B.permute(p, (2, 0, 1)), _rand(2, 3, 4))
case("expand", lambda B, p: B.expand(p, (3, 4, 2)), _rand(3, 1, 1))
case("slice", lambda B, p: B.slice(p, (slice(1, 4, 2), slice(0, 5, 1))), _rand(5, 5))
case("slice", lambda B, p: B.slice(p, (slice(None, None, -1), slice(4, 0, -2))), _rand(4, 5))
case("flip", lambda B, p: B.flip(p, (0, 2)), _rand(2, 3, 2))
case("contiguous", lambda B, p: B.contiguous(B.permute(p, (1, 0))), _rand(3, 4))
case("copy", lambda B, p: B.copy(p), _rand(3, 4))
case("cat", lambda B, a, b, c: B.cat([a, b, c], 1), _rand(2, 1), _rand(2, 3), _rand(2, 2))
case("pad", lambda B, p: B.pad(p, ((1, 0), (2, 3)), 0.5), _rand(2, 3))
case("tril", lambda B, p: B.tril(p, 0), _rand(4, 4))
case("triu", lambda B, p: B.triu(p, 1), _rand(3, 4))
case("cast", lambda B, p: B.cast(p, dt.float64), _rand(3, 4))

_m = _rand(3, 4, seed=8) > 0
case("where", lambda B, c, a, b: B.where(c, a, b), _m, _rand(3, 4), _rand(4))
case("masked_fill", lambda B, p, m: B.masked_fill(p, m, 2.0), _rand(3, 4), _m)
case("masked_fill", lambda B, p, m: B.masked_fill(p, m, -1.0), _rand(3, 4), _m[:1])
case("clamp", lambda B, p: B.clamp(p, -0.5, 0.5), _rand(4, 5))
case("clamp", lambda B, p: B.clamp(p, None, 0.2), _rand(4, 5))
case("clamp", lambda B, p: B.clamp(p, -0.2, None), _rand(4, 5))

_idx = _i64([[0, 2, 1], [1, 1, 0]])
case("gather", lambda B, p, i: B.gather(p, 1, i), _rand(2, 4), _idx)
case("gather", lambda B, p, i: B.gather(p, 0, i), _rand(3, 4), _i64([[2, 0, 2]]))  # index smaller than p
case("scatter", lambda B, p, i, s: B.scatter(p, 1, i, s), _rand(2, 4), _i64([[0, 2], [3, 1]]), _rand(2, 2))
# src larger than the index (beyond it: no gradient)
case("scatter", lambda B, p, i, s: B.scatter(p, 1, i, s), _rand(3, 3), _i64([[2, 0]]), _rand(2, 2))
case("scatter_add", lambda B, p, i, s: B.scatter_add(p, 1, i, s), _rand(2, 4), _idx, _rand(2, 3))
case("index_select", lambda B, p, i: B.index_select(p, 1, i), _rand(3, 4), _i64([3, 0, 3]))
case("index", lambda B, p, i: B.index(p, (i,)), _rand(4, 3), _i64([[1, 1], [3, 0]]))
case("index", lambda B, p, i, j: B.index(p, (i, j)), _rand(4, 3), _i64([0, 2, 0]), _i64([1]))
case("index_put", lambda B, p, i, v: B.index_put(p, (i,), v, False), _rand(4, 3), _i64([2, 0]), _rand(2, 3))
case("index_put", lambda B, p, i, v: B.index_put(p, (i,), v, True), _rand(4, 3), _i64([2, 2, 1]), _rand(3))
case("slice_assign", lambda B, p, v: B.slice_assign(p, (slice(3, 0, -2), slice(0, 3, 1)), v),
     _rand(4, 3), _rand(2, 1))

# composites written in base.py over the primitives above
for _op in ("gelu", "gelu_tanh", "silu", "square"):
    case(_op, _u(_op), _rand(3, 4))
case("mean", lambda B, p: B.mean(p, (0,), True), _rand(3, 4))
# fused attention (its backward is the op sdpa_backward): causal with L < S, and plain with Ev != E
case("sdpa", lambda B, q, k, v: B.sdpa(q, k, v, 0.7, True), _rand(1, 2, 3, 4), _rand(1, 2, 5, 4), _rand(1, 2, 5, 4))
case("sdpa", lambda B, q, k, v: B.sdpa(q, k, v, 0.5, False), _rand(2, 4, 3), _rand(2, 3, 3), _rand(2, 3, 2))
case("var", lambda B, p: B.var(p, (1,), 1.0, False), _rand(3, 4))


_ALL_CASES = [
    pytest.param(fn, args, id=f"{op}-{k}") for op, cs in CASES.items() for k, (fn, args) in enumerate(cs)
]


@pytest.mark.parametrize("checkpointing", MODES)
@pytest.mark.parametrize(("fn", "args"), _ALL_CASES)
def test_gradient_matches_finite_differences(fn: Fn, args: tuple[np.ndarray, ...],
                                             checkpointing: str) -> None:
    _check_fd(fn, args, checkpointing)


def test_every_rule_has_a_case() -> None:
    assert set(RULES) - set(CASES) == set()


def test_every_catalog_op_is_implemented() -> None:
    B = _ad()
    inherited = {"square", "silu", "gelu", "gelu_tanh", "mean", "var"}  # composites over our primitives
    for op in CATALOG:
        method = getattr(B, op)
        if op in inherited:
            continue
        assert getattr(method, "__func__", None) is not Backend.__dict__.get(op), op
        # a generated op method is an instance attribute; a written one lives on the class
        assert op in vars(B) or op in vars(Autodiff), op


# ------------------------------------------------------------------------------ ties and edges
def test_maximum_minimum_ties_split_half() -> None:
    B = _ad()
    a, b = _leaf(B, [1.0, 2.0, 3.0]), _leaf(B, [1.0, 5.0, 0.0])
    B.backward(B.maximum(a, b), _const(B, np.ones(3)), False)
    assert _grad(B, a).tolist() == [0.5, 0.0, 1.0] and _grad(B, b).tolist() == [0.5, 1.0, 0.0]
    B = _ad()
    a, b = _leaf(B, [1.0, 2.0, 3.0]), _leaf(B, [1.0, 5.0, 0.0])
    B.backward(B.minimum(a, b), _const(B, np.ones(3)), False)
    assert _grad(B, a).tolist() == [0.5, 1.0, 0.0] and _grad(B, b).tolist() == [0.5, 0.0, 1.0]
    B = _ad()
    x = _leaf(B, [1.0, 2.0, 3.0])
    B.backward(B.maximum_scalar(x, 2.0), _const(B, np.ones(3)), False)
    assert _grad(B, x).tolist() == [0.0, 0.5, 1.0]


def test_max_min_reductions_share_the_gradient_among_ties() -> None:
    B = _ad()
    x = _leaf(B, [[1.0, 3.0, 3.0, 3.0], [2.0, 0.0, 2.0, 1.0]])
    B.backward(B.max(x, (1,), False), _const(B, np.array([3.0, 1.0])), False)
    np.testing.assert_allclose(_grad(B, x), [[0, 1, 1, 1], [0.5, 0, 0.5, 0]])
    B = _ad()
    x = _leaf(B, [[1.0, 3.0], [1.0, 2.0]])
    B.backward(B.min(x, (0, 1), False), None, False)
    np.testing.assert_allclose(_grad(B, x), [[0.5, 0], [0.5, 0]])


def test_clamp_bounds_pass_the_gradient_and_relu_zero_does_not() -> None:
    B = _ad()
    x = _leaf(B, [-2.0, -1.0, 0.0, 1.0, 2.0])
    B.backward(B.clamp(x, -1.0, 1.0), _const(B, np.ones(5)), False)
    assert _grad(B, x).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    B = _ad()
    x = _leaf(B, [-1.0, 0.0, 1.0])
    B.backward(B.relu(x), _const(B, np.ones(3)), False)
    assert _grad(B, x).tolist() == [0.0, 0.0, 1.0]


def test_prod_with_zeros() -> None:
    B = _ad()
    x = _leaf(B, [[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    B.backward(B.prod(x, (1,), False), _const(B, np.ones(3)), False)
    np.testing.assert_allclose(_grad(B, x), [[0, 6, 0], [0, 0, 0], [8, 4, 2]])


def test_pow_at_zero_base_and_zero_exponent() -> None:
    B = _ad()
    a, b = _leaf(B, [0.0, 0.0, 2.0]), _leaf(B, [2.0, 0.0, 0.0])
    B.backward(B.pow(a, b), _const(B, np.ones(3)), False)
    np.testing.assert_allclose(_grad(B, a), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(_grad(B, b), [0.0, 0.0, np.log(2.0)])


def test_piecewise_constant_ops_give_zero_gradients() -> None:
    for op in ("sign", "floor", "ceil", "round", "trunc"):
        B = _ad()
        x = _leaf(B, [0.3, -1.7])
        y = getattr(B, op)(x)
        assert B.is_tracked(y)
        B.backward(y, _const(B, np.ones(2)), False)
        assert _grad(B, x).tolist() == [0.0, 0.0]


def test_cast_round_trip_and_integer_casts_stop_the_gradient() -> None:
    B = _ad()
    x = _leaf(B, [1.5, -2.0])
    y = B.cast(B.mul_scalar(B.cast(x, dt.float32), 3.0), dt.float64)
    B.backward(y, _const(B, np.ones(2)), False)
    g = _grad(B, x)
    assert g.dtype == np.float64 and g.tolist() == [3.0, 3.0]
    for target in (dt.int64, dt.int32, dt.bool_):
        assert not B.is_tracked(B.cast(x, target))


def test_non_differentiable_ops_give_untracked_results() -> None:
    B = _ad()
    x, y = _leaf(B, [[1.0, -2.0], [3.0, 0.5]]), _leaf(B, [[0.0, 1.0], [3.0, 2.0]])
    outs = [getattr(B, op)(x, y) for op in ("eq", "ne", "lt", "le", "gt", "ge")]
    outs += [getattr(B, f"{op}_scalar")(x, 1.0) for op in ("eq", "ne", "lt", "le", "gt", "ge")]
    outs += [getattr(B, op)(x) for op in ("isnan", "isinf", "isfinite", "logical_not")]
    outs += [B.argmax(x, 1, False), B.argmin(x, 0, True), B.all(B.gt(x, y), (0,), False),
             B.any(B.gt(x, y), (0, 1), True), B.full((2,), 1.0, F64),
             B.random("uniform", (2,), F64, 0, 0, 0.0, 1.0), B.from_data(np.ones(2), F64)]
    for o in outs:
        # an untracked value is the inner backend's primitive itself, unwrapped
        assert type(o) is not ADTensor and not B.is_tracked(o) and hasattr(o, "shape")


def test_require_grad_only_on_floats() -> None:
    B = _ad()
    for x in (np.array([1, 2]), np.array([True])):
        with pytest.raises(AutodiffError, match="floating point"):
            B.require_grad(_const(B, x))
    p = _leaf(B, [1.0])
    assert B.require_grad(p) is p and B.is_leaf(p) and B.is_tracked(p)


# ------------------------------------------------------------------------------ the graph
def test_diamond_accumulates_before_propagating() -> None:
    # t_{k+1} = t_k + t_k, 60 times: 2^60 paths, so only a walk that sums each node's
    # gradient before running its rule finishes
    B = _ad()
    x = _leaf(B, [1.0, 2.0])
    t = B.exp(x)
    for _ in range(60):
        t = B.add(t, t)
    B.backward(t, _const(B, np.ones(2)), False)
    np.testing.assert_allclose(_grad(B, x), 2.0**60 * np.exp([1.0, 2.0]))


def test_shared_input_gradients_add_up() -> None:
    B = _ad()
    x = _leaf(B, [0.5, -1.0])
    e = B.exp(x)
    y = B.add(B.mul(e, e), B.mul(e, x))  # e^2x + x e^x
    B.backward(y, _const(B, np.ones(2)), False)
    xv = np.array([0.5, -1.0])
    np.testing.assert_allclose(_grad(B, x), 2 * np.exp(2 * xv) + np.exp(xv) * (1 + xv))


@pytest.mark.parametrize("checkpointing", MODES)
def test_deep_graph_needs_no_recursion(checkpointing: str) -> None:
    B = _ad(checkpointing)
    x = _leaf(B, [0.1, 0.2])
    y = x
    for _ in range(20_000):
        y = B.mul_scalar(B.sin(y), 1.0)
    assert B.retained_bytes(y) > 0
    B.backward(y, _const(B, np.ones(2)), False)
    assert np.all(np.isfinite(_grad(B, x)))


def test_retain_graph_and_second_backward() -> None:
    B = _ad()
    x = _leaf(B, [1.0, 2.0])
    y = B.sum(B.mul(x, x), (0,), False)
    B.backward(y, None, True)
    B.backward(y, None, False)
    assert _grad(B, x).tolist() == [4.0, 8.0]  # 2x, twice
    with pytest.raises(AutodiffError, match=r"retain_graph=True"):
        B.backward(y, None, False)
    assert _grad(B, x).tolist() == [4.0, 8.0]  # a refused backward changes nothing
    assert B.retained_bytes(y) == 0  # freed


def test_grad_accumulates_and_set_grad_resets() -> None:
    B = _ad()
    x = _leaf(B, [1.0, 2.0])
    for _ in range(3):
        B.backward(B.mul_scalar(x, 2.0), _const(B, np.ones(2)), False)
    assert _grad(B, x).tolist() == [6.0, 6.0]
    B.set_grad(x, None)
    assert B.grad(x) is None
    B.set_grad(x, _const(B, np.array([0.5, 0.5])))
    B.backward(B.mul_scalar(x, 2.0), _const(B, np.ones(2)), False)
    assert _grad(B, x).tolist() == [2.5, 2.5]
    assert not B.is_tracked(B.grad(x))


def test_non_leaves_get_no_grad_and_detach_cuts() -> None:
    B = _ad()
    x = _leaf(B, [1.0])
    h = B.mul_scalar(x, 3.0)
    d = B.detach(h)
    assert not B.is_leaf(h) and B.is_leaf(d) and not B.is_tracked(d)
    y = B.add(B.mul(h, d), h)
    B.backward(y, None, False)
    assert B.grad(h) is None
    assert _grad(B, x).tolist() == [12.0]  # d(3x * 3 + 3x)/dx with d constant


def test_backward_errors() -> None:
    B = _ad()
    x = _leaf(B, [1.0, 2.0])
    with pytest.raises(AutodiffError, match="implicitly created only for scalar outputs"):
        B.backward(B.exp(x), None, False)
    with pytest.raises(AutodiffError, match="does not require grad"):
        B.backward(_const(B, np.ones(1)), None, False)
    B.backward(x, _const(B, np.array([3.0, 4.0])), False)  # a leaf as the root
    assert _grad(B, x).tolist() == [3.0, 4.0]


def test_replace_value_keeps_the_leaf_and_its_grad() -> None:
    B = _ad()
    w = _leaf(B, [1.0, 2.0])
    B.backward(B.mul(w, w), _const(B, np.ones(2)), False)
    with no_grad():
        w2 = B.replace_value(w, B.sub(w, B.mul_scalar(B.grad(w), 0.1)))
    assert w2.node is w.node and B.is_leaf(w2)
    np.testing.assert_allclose(_val(B, w2), [0.8, 1.6])
    np.testing.assert_allclose(_grad(B, w2), [2.0, 4.0])


# ------------------------------------------------------------------------------ grad mode
def test_no_grad_and_enable_grad() -> None:
    B = _ad()
    x = _leaf(B, [1.0])
    assert is_grad_enabled()
    with no_grad():
        assert not is_grad_enabled()
        m = B.reshape(x, (1, 1))
        assert not B.is_tracked(B.exp(x)) and not B.is_tracked(B.matmul(m, m))
        with enable_grad():
            assert B.is_tracked(B.exp(x))
        assert not is_grad_enabled()
    assert is_grad_enabled() and B.is_tracked(B.exp(x))

    @no_grad()
    def step() -> bool:
        return B.is_tracked(B.exp(x))

    assert step() is False and is_grad_enabled()


def test_grad_mode_is_per_thread() -> None:
    seen: list[bool] = []
    with no_grad():
        t = threading.Thread(target=lambda: seen.append(is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


class _Spy(FlexBackend):
    """Flex that records grad mode and counts calls of a few ops."""

    def __init__(self) -> None:
        self.modes: list[bool] = []
        self.calls: dict[str, int] = {}

    def _note(self, op: str) -> None:
        self.modes.append(is_grad_enabled())
        self.calls[op] = self.calls.get(op, 0) + 1

    def mul(self, a: Any, b: Any) -> Any:
        self._note("mul")
        return np.multiply(a, b)

    def exp(self, p: Any) -> Any:
        self._note("exp")
        return np.exp(p)


def test_backward_runs_on_the_inner_backend_with_grad_mode_off() -> None:
    spy = _Spy()
    B = _ad(inner=spy)
    x = _leaf(B, [1.0, 2.0])
    y = B.mul(B.exp(x), x)
    spy.modes.clear()
    B.backward(y, _const(B, np.ones(2)), False)
    assert spy.modes and not any(spy.modes)


# ------------------------------------------------------------------------------ checkpointing
def _network(B: Autodiff, xs: dict[str, np.ndarray]) -> tuple[ADTensor, dict[str, ADTensor]]:
    leaves = {k: _leaf(B, v) for k, v in xs.items()}
    h = B.add(B.matmul(leaves["x"], leaves["w1"]), leaves["b1"])
    h = B.gelu(h)
    h = B.add(h, B.reshape(B.permute(h, (1, 0)), (3, 5)))  # views: recipes under balanced
    h = B.mul(B.tanh(h), B.sigmoid(h))
    h = B.matmul(B.exp(B.mul_scalar(h, 0.1)), leaves["w2"])
    loss = B.sum(B.mul(B.log_softmax(h, 1), B.softmax(h, 1)), (0, 1), False)
    return loss, leaves


def test_balanced_checkpointing_gives_identical_gradients() -> None:
    xs = {"x": _rand(3, 4), "w1": _rand(4, 5, seed=1), "b1": _rand(5, seed=2), "w2": _rand(5, 2, seed=3)}
    grads = {}
    for mode in MODES:
        B = _ad(mode)
        loss, leaves = _network(B, xs)
        B.backward(loss, None, False)
        grads[mode] = {k: _grad(B, v) for k, v in leaves.items()}
    for k in xs:
        np.testing.assert_array_equal(grads["none"][k], grads["balanced"][k])


def test_balanced_retains_fewer_bytes_on_an_elementwise_chain() -> None:
    n = 1 << 20
    x0 = np.linspace(-1.0, 1.0, n, dtype=np.float32)
    retained, grads = {}, {}
    for mode in MODES:
        B = _ad(mode)
        x = B.require_grad(B.from_data(x0, dt.float32))
        y = x
        for op in ("sin", "cos", "erf", "abs", "log1p", "sin", "cos", "erf", "abs", "sin"):
            y = getattr(B, op)(y)  # each rule reads its input: none keeps x and 9 intermediates
        retained[mode] = B.retained_bytes(y)
        B.backward(y, B.full((n,), 1.0, dt.float32), False)
        grads[mode] = _grad(B, x)
    mb = 4 * n
    assert retained["none"] == 10 * mb
    assert retained["balanced"] == mb  # only x itself
    np.testing.assert_array_equal(grads["none"], grads["balanced"])


def test_balanced_recomputes_each_value_once_per_pass() -> None:
    spy = _Spy()
    B = _ad("balanced", inner=spy)
    x = _leaf(B, [0.5, 1.0])
    e = B.exp(x)  # read back by the three muls below and by exp's own rule
    y = B.mul(B.mul(e, e), B.mul(e, x))
    spy.calls.clear()
    B.backward(y, _const(B, np.ones(2)), False)
    assert spy.calls["exp"] == 1  # e recomputed once, memoised for all its readers
    xv = np.array([0.5, 1.0])
    np.testing.assert_allclose(_grad(B, x), np.exp(3 * xv) * (3 * xv + 1))


def test_partial_rules_skip_untracked_inputs() -> None:
    spy = _Spy()
    B = _ad(inner=spy)
    x = _leaf(B, np.ones(100))
    y = B.sin(x)  # keeps x
    c = _const(B, np.full(100, 2.0))
    z = B.mul(y, c)  # y's gradient reads c; c takes none, so y is not kept
    assert B.retained_bytes(z) == 800 + 800
    spy.calls.clear()
    B.backward(z, _const(B, np.ones(100)), False)
    assert spy.calls == {"mul": 2}  # g * c, then g * cos(x): no g * y for c
    np.testing.assert_allclose(_grad(B, x), 2 * np.cos(1.0) * np.ones(100))

    B = _ad()
    w = _leaf(B, _rand(4, 3))
    data = _const(B, _rand(5, 4))
    out = B.matmul(data, w)
    assert B.retained_bytes(out) == data.nbytes  # w is not needed for data's gradient
    B.backward(out, _const(B, np.ones((5, 3))), False)
    np.testing.assert_allclose(_grad(B, w), data.T @ np.ones((5, 3)))


def test_retained_bytes_counts_each_value_once() -> None:
    B = _ad()
    x = _leaf(B, np.ones(1000))
    y = B.mul(x, x)  # saves x twice: one buffer
    assert B.retained_bytes(y) == 8000
    assert B.retained_bytes(x) == 0
    assert B.retained_bytes(B.add(x, x)) == 0  # add keeps nothing


# ------------------------------------------------------------------------------ tracing
def test_data_transfer_spans_show_the_layer() -> None:
    B = _ad()
    with tracing.capture() as spans:
        p = B.from_data(np.ones(2), F64)
        B.into_data(p)
    chains = {(s.name, s.fields.get("layer")): s.parents for s in spans}
    assert chains[("from_data", "flex")] == ("from_data",)
    assert chains[("into_data", "flex")] == ("into_data",)
    assert ("from_data", "autodiff") in chains and ("into_data", "autodiff") in chains


def test_name_and_flags() -> None:
    B = _ad("balanced")
    assert B.name == "autodiff<flex>" and B.eager is True
    with pytest.raises(ValueError, match="checkpointing"):
        Autodiff(FlexBackend(), "sometimes")
