"""Every op of the table against its numpy float64 reference, on every device and dtype."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember

from ._support import check, describe, is_float, name_of, native, read
from .optable import SPECS, OpSpec, Sampler

CASES = [pytest.param(spec, dt, id=f"{spec.name}-{dt}") for spec in SPECS for dt in spec.dtypes]


def to_tensor(a: np.ndarray, dtype: str, device: ember.Device, requires_grad: bool = False) -> Any:
    """Data arrays (float64) become tensors of ``dtype``; indices and masks keep theirs."""
    if a.dtype == np.float64:
        return ember.tensor(native(a, dtype), dtype=getattr(ember, dtype), device=device,
                            requires_grad=requires_grad)
    d = ember.int64 if a.dtype == np.int64 else ember.bool
    return ember.tensor(a, dtype=d, device=device)


def ref_input(a: np.ndarray, dtype: str) -> np.ndarray:
    return native(a, dtype) if a.dtype == np.float64 else a


def as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, tuple | list) else (x,)


def out_dtypes(spec: OpSpec, dtype: str, n: int) -> tuple[str, ...]:
    o = spec.out(dtype)
    return tuple(o) if isinstance(o, tuple) else (o,) * n


def strided_tensor(a: np.ndarray, dtype: str, device: ember.Device) -> Any:
    """A tensor holding ``a`` as a non-contiguous view: every other row of a larger tensor,
    with its first and last dims swapped in memory."""
    if a.ndim == 0 or a.dtype != np.float64:
        return to_tensor(a, dtype, device)
    big = np.zeros((2 * a.shape[0],) + a.shape[1:])
    big[::2] = a
    t = to_tensor(np.ascontiguousarray(np.swapaxes(big, 0, -1)), dtype, device)
    return t.transpose(0, -1)[::2] if a.ndim > 1 else t[::2]


def run_case(spec: OpSpec, dtype: str, device: ember.Device, case: tuple[np.ndarray, ...], what: str,
             make_input: Callable[[np.ndarray, str, ember.Device], Any] = to_tensor) -> None:
    # a floating result is computed from float64 data (numpy would compute exp(uint8) in
    # float16); an integer or bool result from the data in its own dtype (exact semantics)
    floating = any(is_float(o) for o in out_dtypes(spec, dtype, 1))
    ins = tuple(a if floating else ref_input(a, dtype) for a in case)
    with np.errstate(all="ignore"):
        expected = as_tuple(spec.ref(*ins))
    inputs = [make_input(a, dtype, device) for a in case]
    before = [read(t).copy() for t in inputs]
    got = spec.fn(*inputs)
    got_t = as_tuple(got)
    for k, (t, v) in enumerate(zip(inputs, before)):  # tensors are values: ops never mutate inputs
        np.testing.assert_array_equal(read(t), v, err_msg=f"{what}: input {k} changed by the op")
    assert len(got_t) == len(expected), f"{what}: {len(got_t)} outputs, expected {len(expected)}"
    for k, (g, e, od) in enumerate(zip(got_t, expected, out_dtypes(spec, dtype, len(expected)))):
        assert isinstance(g, ember.Tensor), f"{what}: output {k} is {type(g).__name__}, not a Tensor"
        assert g.device == device, f"{what}: output on {g.device}, expected {device}"
        e = np.asarray(e)
        mag = None
        if spec.mag is not None and len(expected) == 1:
            with np.errstate(all="ignore"):
                mag = spec.mag(ins, e)
        check(g, e, od, tol=spec.tol, mag=mag, what=f"{what} output {k}")


@pytest.mark.parametrize("spec,dtype", CASES)
def test_op_matches_reference(spec: OpSpec, dtype: str, device: ember.Device,
                              rng: np.random.Generator) -> None:
    for i, case in enumerate(spec.gen(Sampler(rng, dtype, "forward"))):
        run_case(spec, dtype, device, case, f"{spec.name}[{dtype}] case {i} ({describe(case)})")


STRIDED_CASES = [pytest.param(spec, "float32" if "float32" in spec.dtypes else spec.dtypes[0], id=spec.name)
                 for spec in SPECS]


@pytest.mark.parametrize("spec,dtype", STRIDED_CASES)
def test_op_on_strided_inputs(spec: OpSpec, dtype: str, device: ember.Device,
                              rng: np.random.Generator) -> None:
    """The same ops on non-contiguous inputs (sliced with a step, transposed in memory)."""
    for i, case in enumerate(spec.gen(Sampler(rng, dtype, "forward"))):
        run_case(spec, dtype, device, case, f"{spec.name}[{dtype}, strided] case {i} ({describe(case)})",
                 strided_tensor)


# --------------------------------------------------------------------------- function forms
# ``ember.<name>(t, *args)`` and ``t.<name>(*args)`` are the same op.
FUNCTION_FORMS: list[tuple[str, tuple[Any, ...]]] = [
    (n, ()) for n in (
        "neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "silu",
        "erf", "gelu", "isnan", "isinf", "logical_not", "clone", "flatten", "squeeze", "sum",
        "mean", "prod", "max", "min", "argmax", "argmin", "all", "any", "var", "std", "tril", "triu",
    )
] + [
    ("softmax", (1,)), ("log_softmax", (1,)), ("cumsum", (0,)), ("logsumexp", (1,)), ("sum", (1,)),
    ("mean", ((0, 1),)), ("reshape", ((4, 3),)), ("permute", ((1, 0),)), ("transpose", (0, 1)),
    ("unsqueeze", (0,)), ("flip", ((0,),)), ("triu", (1,)), ("clamp", (0.7, 1.5)), ("split", (2,)),
    ("chunk", (2,)), ("var", (0,)), ("std", (1,)), ("argmax", (1,)), ("repeat", ((2, 1),)),
]
BINARY_FUNCTIONS = ("maximum", "minimum", "logical_and", "logical_or", "eq", "ne", "lt", "le", "gt", "ge",
                    "add", "sub", "mul", "div", "pow", "remainder", "matmul")


def _same(a: Any, b: Any, what: str) -> None:
    for x, y in zip(as_tuple(a), as_tuple(b), strict=True):
        assert x.shape == y.shape, f"{what}: shape {x.shape} vs {y.shape}"
        assert x.dtype == y.dtype, f"{what}: dtype {x.dtype} vs {y.dtype}"
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=what)


@pytest.mark.parametrize("name,args", FUNCTION_FORMS, ids=[f"{n}{list(a)}" for n, a in FUNCTION_FORMS])
def test_function_form_equals_method(name: str, args: tuple[Any, ...], device: ember.Device,
                                     rng: np.random.Generator) -> None:
    x = ember.tensor(rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32), device=device)
    _same(getattr(ember, name)(x, *args), getattr(x, name)(*args), f"ember.{name} vs Tensor.{name}")


@pytest.mark.parametrize("name", BINARY_FUNCTIONS)
def test_binary_function_form_equals_method(name: str, device: ember.Device,
                                            rng: np.random.Generator) -> None:
    a = ember.tensor(rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32), device=device)
    b = ember.tensor(rng.uniform(0.5, 2.0, (4, 4) if name == "matmul" else (4,)).astype(np.float32),
                     device=device)
    _same(getattr(ember, name)(a, b), getattr(a, name)(b), f"ember.{name} vs Tensor.{name}")


def test_builtin_abs_and_neg(device: ember.Device) -> None:
    x = ember.tensor([-1.5, 0.0, 2.0], device=device)
    assert abs(x).tolist() == [1.5, 0.0, 2.0]
    assert (-x).tolist() == [1.5, -0.0, -2.0]


def test_max_returns_namedtuple(device: ember.Device) -> None:
    x = ember.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], device=device)
    r = x.max(dim=1)
    values, indices = r
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
    assert r[0].tolist() == [5.0, 7.0] and name_of(r.indices.dtype) == "int64"
    m = x.min(1, keepdim=True)
    assert m.values.shape == (2, 1) and m.indices.tolist() == [[0], [1]]
    whole = x.max()
    assert isinstance(whole, ember.Tensor) and whole.shape == () and whole.item() == 7.0


# Half-precision results accumulate in float32 (as PyTorch and the GPU kernels do): summing
# 4096 ones in float16 stalls at 2048 if the accumulator is float16, at 256 in bfloat16.
ACCUMULATION: list[tuple[str, Callable[[Any], Any], float]] = [
    ("sum", lambda x: x.sum(), 4096.0),
    ("sum.dim", lambda x: x.reshape(1, 4096).sum(dim=1)[0], 4096.0),
    ("mean", lambda x: (x * 3).mean(), 3.0),
    ("cumsum", lambda x: x.cumsum(0)[-1], 4096.0),
    ("matmul", lambda x: x.reshape(1, 4096) @ x.reshape(4096, 1), 4096.0),
    ("dot", lambda x: x @ x, 4096.0),
    ("logsumexp", lambda x: (x * 0).logsumexp(0), float(np.log(4096.0))),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op,expected", [c[1:] for c in ACCUMULATION], ids=[c[0] for c in ACCUMULATION])
def test_half_precision_accumulates_in_float32(op: Callable[[Any], Any], expected: float, dtype: str,
                                               device: ember.Device) -> None:
    r = op(ember.ones(4096, dtype=getattr(ember, dtype), device=device))
    assert name_of(r.dtype) == dtype
    assert abs(float(r.item()) - expected) <= 2e-2 * abs(expected), f"got {r.item()}, expected {expected}"


def test_issue_example(device: ember.Device) -> None:
    """The example of the foundation issue, on every device (gradients where there are)."""
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=device, requires_grad=device.is_autodiff)
    b = ember.tensor([[5.0, 6.0], [7.0, 8.0]], device=device)
    c = a @ b
    assert c.tolist() == [[19.0, 22.0], [43.0, 50.0]]
    if device.is_autodiff:
        c.sum().backward()
        assert a.grad.tolist() == [[11.0, 15.0], [11.0, 15.0]]
