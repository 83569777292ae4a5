"""Property tests (hypothesis): random shapes, broadcasting pairs and strided views (slices with
steps, negative steps, new axes, permutes, expands) composed with elementwise ops and
reductions, compared with numpy; gradients through them on autodiff devices.

Values are drawn from a numpy generator seeded by hypothesis (fast for large arrays, and
reproducible from the falsifying example hypothesis prints); shapes, index keys, dims and op
choices are drawn by hypothesis, so those shrink.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conformance._support import assert_close, check, edt, is_float, read, round_to
from conformance.conftest import device_holds
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember

FLOAT_DTYPES = st.sampled_from(["float64", "float32"])
ANY_DTYPE = st.sampled_from(["float64", "float32", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5)
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4)


def keys(shape: tuple[int, ...]) -> st.SearchStrategy[Any]:
    """Basic index keys: ints, slices (steps, negative steps), None, Ellipsis."""
    return hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True)


def values(data: st.DataObject, shape: tuple[int, ...], dtype: str, lo: float = -3.0,
           hi: float = 3.0) -> np.ndarray:
    """Random data of ``shape`` representable in ``dtype`` (float64 for floats, native otherwise)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="value seed"))
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if not is_float(dtype):
        lo_i = 0 if dtype == "uint8" else -20
        return np.asarray(rng.integers(lo_i, 20, size=shape), dtype=np.dtype(dtype))
    return round_to(np.asarray(rng.uniform(lo, hi, size=shape)), dtype)


def make(a: np.ndarray, dtype: str, device: ember.Device, requires_grad: bool = False) -> Any:
    # a dtype the device cannot hold at all (float64 on WGSL) is not an example for it; the
    # gradient tests (float64 only, for their finite differences) skip such a device whole
    if requires_grad and not device_holds(device, dtype):
        pytest.skip(f"{device!r} cannot hold {dtype} tensors (gradient checks need them)")
    assume(device_holds(device, dtype))
    return ember.tensor(a, dtype=edt(dtype), device=device, requires_grad=requires_grad)


# --------------------------------------------------------------------------- strided views
View = Callable[[Any], Any]


@st.composite
def view_chains(draw: st.DrawFn, shape: tuple[int, ...]) -> list[tuple[str, Any]]:
    """1-3 view steps (basic index, permute, expand), valid for ``shape`` in turn."""
    steps: list[tuple[str, Any]] = []
    cur = shape
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["index", "permute", "expand"]))
        if kind == "index" or not cur:
            key = draw(keys(cur))
            steps.append(("index", key))
            cur = np.empty(cur)[key].shape
        elif kind == "permute":
            perm = tuple(draw(st.permutations(range(len(cur)))))
            steps.append(("permute", perm))
            cur = tuple(cur[p] for p in perm)
        else:
            target = tuple(draw(st.integers(1, 3)) if n == 1 else n for n in cur)
            steps.append(("expand", target))
            cur = target
    return steps


def apply_np(x: np.ndarray, steps: list[tuple[str, Any]]) -> np.ndarray:
    for kind, arg in steps:
        if kind == "index":
            x = x[arg]
        elif kind == "permute":
            x = np.transpose(x, arg)
        else:
            x = np.broadcast_to(x, arg)
    return x


def apply_ember(t: Any, steps: list[tuple[str, Any]]) -> Any:
    for kind, arg in steps:
        if kind == "index":
            t = t[arg]
        elif kind == "permute":
            t = t.permute(*arg)
        else:
            t = t.expand(*arg)
    return t


UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "tanh": (lambda t: t.tanh(), np.tanh),
    "exp": (lambda t: t.exp(), np.exp),
    "abs": (lambda t: t.abs(), np.abs),
    "affine": (lambda t: t * 2.0 - 1.0, lambda a: a * 2.0 - 1.0),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "square": (lambda t: t * t, lambda a: a * a),
}
REDUCE: dict[str, tuple[Callable[[Any, Any, bool], Any], Callable[[np.ndarray, Any, bool], np.ndarray]]] = {
    "sum": (lambda t, d, k: t.sum(dim=d, keepdim=k), lambda a, d, k: np.sum(a, axis=d, keepdims=k)),
    "mean": (lambda t, d, k: t.mean(dim=d, keepdim=k), lambda a, d, k: np.mean(a, axis=d, keepdims=k)),
    "amax": (lambda t, d, k: t.amax(dim=d, keepdim=k), lambda a, d, k: np.max(a, axis=d, keepdims=k)),
    "amin": (lambda t, d, k: t.amin(dim=d, keepdim=k), lambda a, d, k: np.min(a, axis=d, keepdims=k)),
    "prod": (lambda t, d, k: t.prod(dim=d, keepdim=k), lambda a, d, k: np.prod(a, axis=d, keepdims=k)),
}


@st.composite
def dims_of(draw: st.DrawFn, ndim: int) -> tuple[int, ...]:
    """A non-empty set of dims, each maybe spelled negative."""
    dims = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(d - ndim if draw(st.booleans()) else d for d in dims)


@settings(deadline=None)
@given(data=st.data(), shape=SHAPES, dtype=FLOAT_DTYPES, unary=st.sampled_from(sorted(UNARY)),
       reduce=st.sampled_from(sorted(REDUCE)), keepdim=st.booleans())
def test_strided_view_elementwise_reduction(device: ember.Device, data: st.DataObject, shape: tuple[int, ...],
                                            dtype: str, unary: str, reduce: str, keepdim: bool) -> None:
    steps = data.draw(view_chains(shape), label="view steps")
    x = values(data, shape, dtype, -1.5, 1.5)
    v_np = apply_np(x, steps)
    t = apply_ember(make(x, dtype, device), steps)
    assert t.shape == v_np.shape
    check(t, v_np, dtype, what=f"view {steps}")
    uf, unp = UNARY[unary]
    e_np = unp(v_np)
    e = uf(t)
    assert_close(e, e_np, dtype, tol=2, what=f"{unary} of view {steps}")
    if v_np.ndim == 0 or v_np.size == 0:
        return
    dims = data.draw(dims_of(v_np.ndim), label="dims")
    rf, rnp = REDUCE[reduce]
    r_np = rnp(e_np, dims, keepdim)
    mag = rnp(np.abs(e_np), dims, keepdim) if reduce in ("sum", "mean", "prod") else None
    assert_close(rf(e, dims, keepdim), r_np, dtype, tol=4, mag=mag, what=f"{reduce}{dims} of {unary}(view)")


BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any], bool]] = {
    # name: (ember, numpy, integer dtypes too)
    "add": (lambda a, b: a + b, np.add, True),
    "sub": (lambda a, b: a - b, np.subtract, True),
    "mul": (lambda a, b: a * b, np.multiply, True),
    "div": (lambda a, b: a / (b.abs() + 0.5), lambda a, b: a / (np.abs(b) + 0.5), False),
    "maximum": (lambda a, b: ember.maximum(a, b), np.maximum, True),
    "minimum": (lambda a, b: ember.minimum(a, b), np.minimum, True),
    "pow": (lambda a, b: a.abs() ** b, lambda a, b: np.abs(a) ** b, False),
    "lt": (lambda a, b: a < b, np.less, True),
    "where": (lambda a, b: ember.where(a > b, a, b * 2), lambda a, b: np.where(a > b, a, b * 2), True),
}


@settings(deadline=None)
@given(data=st.data(), shapes=PAIRS,
       op=st.sampled_from(sorted(BINARY)), dtype=st.sampled_from(["float64", "float32", "int64", "int32"]))
def test_broadcast_binary(device: ember.Device, data: st.DataObject, shapes: Any, op: str,
                          dtype: str) -> None:
    fe, fn, ints = BINARY[op]
    if not ints and not is_float(dtype):
        dtype = "float64"
    sa, sb = shapes.input_shapes
    a, b = values(data, sa, dtype), values(data, sb, dtype)
    r = fe(make(a, dtype, device), make(b, dtype, device))
    with np.errstate(all="ignore"):
        expected = fn(a, b)
    assert r.shape == shapes.result_shape
    out = "bool" if expected.dtype == bool else dtype
    check(r, expected, out, tol=2, what=f"{op} {sa} {sb}")


@settings(deadline=None)
@given(data=st.data(), shape=SHAPES, dtype=ANY_DTYPE)
def test_basic_indexing(device: ember.Device, data: st.DataObject, shape: tuple[int, ...],
                        dtype: str) -> None:
    key = data.draw(keys(shape), label="key")
    x = values(data, shape, dtype)
    check(make(x, dtype, device)[key], x[key], dtype, tol=0, what=f"x{list(shape)}[{key}]")


@settings(deadline=None)
@given(data=st.data(), shape=SHAPES, dtype=ANY_DTYPE)
def test_setitem_basic_index(device: ember.Device, data: st.DataObject, shape: tuple[int, ...],
                             dtype: str) -> None:
    key = data.draw(keys(shape), label="key")
    x = values(data, shape, dtype)
    target = x[key].shape
    vshape = target[data.draw(st.integers(0, len(target)), label="value rank cut"):]
    v = values(data, vshape, dtype)
    t = make(x, dtype, device)
    t[key] = make(v, dtype, device)
    y = x.copy()
    y[key] = v
    check(t, y, dtype, tol=0, what=f"x{list(shape)}[{key}] = v{list(vshape)}")


@settings(deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5),
       dtype=ANY_DTYPE, keepdim=st.booleans())
def test_reductions_over_dims(device: ember.Device, data: st.DataObject, shape: tuple[int, ...], dtype: str,
                              keepdim: bool) -> None:
    x = values(data, shape, dtype)
    t = make(x, dtype, device)
    dims = data.draw(dims_of(len(shape)), label="dims")
    acc = dtype if is_float(dtype) else "int64"
    check(t.sum(dim=dims, keepdim=keepdim), np.sum(x, axis=dims, keepdims=keepdim), acc, tol=4,
          mag=np.sum(np.abs(x.astype(np.float64)), axis=dims, keepdims=keepdim), what=f"sum{dims}")
    check(t.any(dim=dims, keepdim=keepdim), np.any(x, axis=dims, keepdims=keepdim), "bool", what=f"any{dims}")
    check(t.all(dim=dims, keepdim=keepdim), np.all(x, axis=dims, keepdims=keepdim), "bool", what=f"all{dims}")
    if dtype == "bool":
        return
    check(t.amax(dim=dims, keepdim=keepdim), np.max(x, axis=dims, keepdims=keepdim), dtype, tol=0,
          what=f"amax{dims}")
    d = dims[0]
    r = t.min(dim=d, keepdim=keepdim)
    check(r.values, np.min(x, axis=d, keepdims=keepdim), dtype, tol=0, what=f"min({d}).values")
    # indices may point at any tied minimum: check that they select a minimum
    idx = read(r.indices)
    assert idx.dtype == np.int64
    picked = np.take_along_axis(x, idx if keepdim else np.expand_dims(idx, d), d)
    np.testing.assert_array_equal(picked, np.min(x, axis=d, keepdims=True), err_msg=f"min({d}).indices")
    if is_float(dtype):
        check(t.mean(dim=dims, keepdim=keepdim), np.mean(x, axis=dims, keepdims=keepdim), dtype, tol=4,
              mag=np.mean(np.abs(x), axis=dims, keepdims=keepdim), what=f"mean{dims}")
        n = int(np.prod([shape[i] for i in dims]))
        if n > 1:
            check(t.var(dim=dims, keepdim=keepdim), np.var(x, axis=dims, keepdims=keepdim, ddof=1), dtype,
                  tol=8, mag=9.0, what=f"var{dims}")


@settings(deadline=None)
@given(data=st.data(), shapes=hnp.mutually_broadcastable_shapes(signature="(m?,n),(n,p?)->(m?,p?)",
                                                                 max_dims=4, max_side=4),
       dtype=FLOAT_DTYPES)
def test_matmul_broadcast(device: ember.Device, data: st.DataObject, shapes: Any, dtype: str) -> None:
    sa, sb = shapes.input_shapes
    a, b = values(data, sa, dtype), values(data, sb, dtype)
    r = make(a, dtype, device) @ make(b, dtype, device)
    assert r.shape == shapes.result_shape
    assert_close(r, a @ b, dtype, tol=2, mag=np.abs(a) @ np.abs(b), what=f"{sa} @ {sb}")


@settings(deadline=None)
@given(data=st.data(), shape=SHAPES, dtype=ANY_DTYPE)
def test_permute_reshape_roundtrip(device: ember.Device, data: st.DataObject, shape: tuple[int, ...],
                                   dtype: str) -> None:
    x = values(data, shape, dtype)
    perm = tuple(data.draw(st.permutations(range(len(shape))), label="perm"))
    n = x.size
    divisors = [k for k in range(1, n + 1) if n % k == 0]
    first = data.draw(st.sampled_from(divisors), label="reshape first dim")
    p_np = np.transpose(x, perm).reshape(first, -1)
    t = make(x, dtype, device).permute(*perm).reshape(first, -1)
    check(t, p_np, dtype, tol=0, what=f"permute{perm}.reshape({first}, -1)")
    check(t.flatten(), p_np.reshape(-1), dtype, tol=0, what="flatten")
    inv = tuple(int(i) for i in np.argsort(perm))
    back = make(x, dtype, device).permute(*perm).contiguous().permute(*inv)
    check(back, x, dtype, tol=0, what="permute roundtrip")


@settings(deadline=None)
@given(data=st.data(), base=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), dtype=ANY_DTYPE,
       count=st.integers(1, 4))
def test_cat_and_stack(device: ember.Device, data: st.DataObject, base: tuple[int, ...], dtype: str,
                       count: int) -> None:
    dim = data.draw(st.integers(-len(base), len(base) - 1), label="dim")
    shapes = [tuple(data.draw(st.integers(0, 3)) if i == dim % len(base) else n for i, n in enumerate(base))
              for _ in range(count)]
    xs = [values(data, s, dtype) for s in shapes]
    ts = [make(x, dtype, device) for x in xs]
    check(ember.cat(ts, dim=dim), np.concatenate(xs, axis=dim), dtype, tol=0, what=f"cat {shapes} dim {dim}")
    same = [values(data, base, dtype) for _ in range(count)]
    sdim = data.draw(st.integers(-len(base) - 1, len(base)), label="stack dim")
    check(ember.stack([make(x, dtype, device) for x in same], dim=sdim), np.stack(same, axis=sdim), dtype,
          tol=0, what=f"stack dim {sdim}")


# --------------------------------------------------------------------------- gradients
@settings(deadline=None)
@given(data=st.data(), shapes=PAIRS)
def test_grad_of_broadcast_product(autodiff_device: ember.Device, data: st.DataObject, shapes: Any) -> None:
    sa, sb = shapes.input_shapes
    a, b = values(data, sa, "float64"), values(data, sb, "float64")
    w = values(data, shapes.result_shape, "float64")
    ta, tb = make(a, "float64", autodiff_device, True), make(b, "float64", autodiff_device, True)
    (ta * tb * make(w, "float64", autodiff_device)).sum().backward()

    def reduce_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
        return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)

    full = shapes.result_shape
    ga = reduce_to(np.broadcast_to(b, full) * w, sa)
    gb = reduce_to(np.broadcast_to(a, full) * w, sb)
    assert_close(ta.grad, ga, "float64", mag=1e2, what=f"d/da of a{list(sa)} * b{list(sb)}")
    assert_close(tb.grad, gb, "float64", mag=1e2, what=f"d/db of a{list(sa)} * b{list(sb)}")


@settings(deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
def test_grad_through_strided_view(autodiff_device: ember.Device, data: st.DataObject,
                                   shape: tuple[int, ...]) -> None:
    """d/dx sum(w * view(x)) scatters w back through the view: every element of x gets the
    sum of the weights of the view positions that read it (computed with an index map)."""
    steps = data.draw(view_chains(shape), label="view steps")
    x = values(data, shape, "float64")
    where = apply_np(np.arange(x.size).reshape(shape), steps)
    w = values(data, where.shape, "float64")
    t = make(x, "float64", autodiff_device, True)
    v = apply_ember(t, steps)
    if v.numel() == 0:
        return
    (v * make(w, "float64", autodiff_device)).sum().backward()
    expected = np.bincount(where.reshape(-1), weights=w.reshape(-1), minlength=x.size).reshape(shape)
    assert t.grad is not None, f"no grad through {steps}"
    assert_close(t.grad, expected, "float64", mag=10.0, what=f"grad through {steps}")


@settings(deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
       keepdim=st.booleans(), op=st.sampled_from(["sum", "mean", "amax", "logsumexp", "softmax"]))
def test_grad_of_reduction(autodiff_device: ember.Device, data: st.DataObject, shape: tuple[int, ...],
                           keepdim: bool, op: str) -> None:
    x = values(data, shape, "float64")
    dims = data.draw(dims_of(len(shape)), label="dims")
    t = make(x, "float64", autodiff_device, True)
    if op == "softmax":
        out, f = t.softmax(dims[0]), (lambda a: np.exp(a - a.max(dims[0], keepdims=True))
                                      / np.exp(a - a.max(dims[0], keepdims=True)).sum(dims[0], keepdims=True))
    elif op == "logsumexp":
        out, f = t.logsumexp(dim=dims, keepdim=keepdim), (
            lambda a: np.log(np.sum(np.exp(a), axis=dims, keepdims=keepdim)))
    else:
        out = getattr(t, op)(dim=dims, keepdim=keepdim)
        f = {"sum": lambda a: np.sum(a, axis=dims, keepdims=keepdim),
             "mean": lambda a: np.mean(a, axis=dims, keepdims=keepdim),
             "amax": lambda a: np.max(a, axis=dims, keepdims=keepdim)}[op]
    w = values(data, out.shape, "float64")
    (out * make(w, "float64", autodiff_device)).sum().backward()
    eps = 1e-6
    fd = np.zeros_like(x)
    for ix in np.ndindex(*shape):
        xp, xm = x.copy(), x.copy()
        xp[ix] += eps
        xm[ix] -= eps
        fd[ix] = (np.sum(w * f(xp)) - np.sum(w * f(xm))) / (2 * eps)
    if op == "amax" and len(np.unique(x)) < x.size:
        return  # ties: max's subgradient is a convention, finite differences are not defined
    assert_close(t.grad, fd, "float64", tol=1e5, mag=max(1.0, float(np.abs(fd).max())),
                 what=f"d {op}{dims} keepdim={keepdim}")
