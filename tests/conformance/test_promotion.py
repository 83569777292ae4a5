"""Result dtypes of mixed operations: PyTorch's type-promotion rules, as a table.

Operands are written ``"t:<dtype>"`` (a tensor with dimensions), ``"0d:<dtype>"`` (a 0-d
tensor) or a Python scalar. Rules: categories bool < integer < floating; within a category
dimensioned tensors outrank 0-d tensors, which outrank Python scalars (a lower-priority operand
only lifts the category, to its own dtype for tensors and to the default float32 / int64 for
scalars); float16 with bfloat16 is float32; int / int is float32.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ember

from ._support import edt, name_of

Operand = Any  # "t:<dtype>", "0d:<dtype>" or a Python scalar

BINARY_PROMOTION: list[tuple[Operand, str, Operand, str]] = [
    # same category: the wider dtype
    ("t:int32", "+", "t:int64", "int64"),
    ("t:uint8", "+", "t:int32", "int32"),
    ("t:float32", "*", "t:float64", "float64"),
    ("t:float16", "+", "t:float32", "float32"),
    ("t:float16", "+", "t:bfloat16", "float32"),
    ("t:bfloat16", "-", "t:float16", "float32"),
    ("t:bool", "+", "t:uint8", "uint8"),
    ("t:bool", "*", "t:bool", "bool"),
    # across categories
    ("t:int32", "+", "t:float16", "float16"),
    ("t:int64", "*", "t:bfloat16", "bfloat16"),
    ("t:bool", "+", "t:float32", "float32"),
    ("t:uint8", "-", "t:float64", "float64"),
    # true division of integers is float32
    ("t:int32", "/", "t:int32", "float32"),
    ("t:int64", "/", "t:int64", "float32"),
    ("t:uint8", "/", 2, "float32"),
    ("t:float16", "/", 2, "float16"),
    # Python scalars are weak: they only lift the category
    ("t:int32", "+", 2, "int32"),
    ("t:uint8", "*", 3, "uint8"),
    ("t:int32", "+", 2.5, "float32"),
    ("t:int64", "*", 2.5, "float32"),
    ("t:float16", "+", 2.5, "float16"),
    ("t:bfloat16", "*", 2.5, "bfloat16"),
    ("t:float64", "+", 2, "float64"),
    ("t:bool", "+", 2, "int64"),
    ("t:bool", "+", 2.5, "float32"),
    ("t:bool", "+", True, "bool"),
    (2, "-", "t:int32", "int32"),
    (2.5, "-", "t:int32", "float32"),
    # 0-d tensors rank below dimensioned ones within a category ...
    ("t:float32", "+", "0d:float64", "float32"),
    ("t:float16", "*", "0d:float32", "float16"),
    ("t:int32", "+", "0d:int64", "int32"),
    ("t:uint8", "+", "0d:int64", "uint8"),
    # ... but lift the category, to their own dtype
    ("t:int32", "+", "0d:float64", "float64"),
    ("t:int64", "+", "0d:float16", "float16"),
    ("t:bool", "+", "0d:int32", "int32"),
    # and outrank Python scalars
    ("0d:int32", "+", 2.5, "float32"),
    ("0d:float16", "+", 2.5, "float16"),
    ("0d:int32", "+", "0d:int64", "int64"),
    ("0d:int32", "*", 3, "int32"),
    # powers, floor division, remainder
    ("t:int32", "**", 2, "int32"),
    ("t:int32", "**", 2.5, "float32"),
    (2, "**", "t:int32", "int32"),
    (2.5, "**", "t:int32", "float32"),
    ("t:int32", "//", 2, "int32"),
    ("t:int32", "//", 2.5, "float32"),
    ("t:int64", "%", "t:int32", "int64"),
    ("t:float16", "%", "t:int64", "float16"),
    # comparisons are bool whatever the operands
    ("t:float16", "<", "t:float32", "bool"),
    ("t:int32", "==", 2.5, "bool"),
    ("t:uint8", ">=", "t:bool", "bool"),
]

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<": operator.lt,
    "==": operator.eq, ">=": operator.ge,
}


def make(o: Operand, device: ember.Device) -> Any:
    if not isinstance(o, str):
        return o
    kind, dtype = o.split(":")
    shape = (3,) if kind == "t" else ()
    values = np.ones(shape) * (1 if dtype == "bool" else 2)
    return ember.tensor(values, dtype=edt(dtype), device=device)


@pytest.mark.parametrize("lhs,op,rhs,expected", BINARY_PROMOTION,
                         ids=[f"{a} {op} {b}" for a, op, b, _ in BINARY_PROMOTION])
def test_binary_promotion(lhs: Operand, op: str, rhs: Operand, expected: str, device: ember.Device) -> None:
    a, b = make(lhs, device), make(rhs, device)
    r = OPS[op](a, b)
    assert name_of(r.dtype) == expected, f"{lhs} {op} {rhs}: got {r.dtype}, expected {expected}"
    assert r.shape == ((3,) if "t:" in f"{lhs}{rhs}" else ())


# (description, op on one tensor of the given dtype, input dtype, result dtype)
UNARY_PROMOTION: list[tuple[str, Callable[[Any], Any], str, str]] = [
    ("sum", lambda t: t.sum(), "int32", "int64"),
    ("sum", lambda t: t.sum(), "uint8", "int64"),
    ("sum", lambda t: t.sum(), "bool", "int64"),
    ("sum", lambda t: t.sum(dim=0), "int32", "int64"),
    ("sum", lambda t: t.sum(), "float16", "float16"),
    ("sum", lambda t: t.sum(), "bfloat16", "bfloat16"),
    ("prod", lambda t: t.prod(), "int32", "int64"),
    ("prod", lambda t: t.prod(), "uint8", "int64"),
    ("cumsum", lambda t: t.cumsum(0), "int32", "int64"),
    ("cumsum", lambda t: t.cumsum(0), "bool", "int64"),
    ("mean", lambda t: t.mean(), "float16", "float16"),
    ("max", lambda t: t.max(), "int32", "int32"),
    ("max", lambda t: t.max(), "uint8", "uint8"),
    ("argmax", lambda t: t.argmax(), "float16", "int64"),
    ("argmin", lambda t: t.argmin(dim=0), "int32", "int64"),
    ("all", lambda t: t.all(), "float32", "bool"),
    ("any", lambda t: t.any(dim=0), "int64", "bool"),
    ("exp", lambda t: t.exp(), "int32", "float32"),
    ("sqrt", lambda t: t.sqrt(), "int64", "float32"),
    ("sigmoid", lambda t: t.sigmoid(), "uint8", "float32"),
    ("log", lambda t: t.log(), "bool", "float32"),
    ("abs", lambda t: t.abs(), "int32", "int32"),
    ("neg", lambda t: -t, "int64", "int64"),
    ("relu", lambda t: t.relu(), "int32", "int32"),
    ("isnan", lambda t: t.isnan(), "float16", "bool"),
    ("logical_not", lambda t: t.logical_not(), "int32", "bool"),
    ("float", lambda t: t.float(), "int64", "float32"),
    ("double", lambda t: t.double(), "float16", "float64"),
    ("half", lambda t: t.half(), "float64", "float16"),
    ("bfloat16", lambda t: t.bfloat16(), "float32", "bfloat16"),
    ("int", lambda t: t.int(), "float32", "int32"),
    ("long", lambda t: t.long(), "bool", "int64"),
    ("bool", lambda t: t.bool(), "float32", "bool"),
    ("to", lambda t: t.to(ember.uint8), "int64", "uint8"),
]


@pytest.mark.parametrize("what,fn,dtype,expected", UNARY_PROMOTION,
                         ids=[f"{w}({d})" for w, _, d, _ in UNARY_PROMOTION])
def test_unary_result_dtype(what: str, fn: Callable[[Any], Any], dtype: str, expected: str,
                            device: ember.Device) -> None:
    t = ember.tensor(np.array([1, 0, 2]), dtype=edt(dtype), device=device)
    assert name_of(fn(t).dtype) == expected


# (description, op building a result from tensors of the given dtypes, dtypes, result dtype)
MULTI_PROMOTION: list[tuple[str, Callable[..., Any], tuple[str, ...], str]] = [
    ("cat", lambda a, b: ember.cat([a, b]), ("float32", "float64"), "float64"),
    ("cat", lambda a, b: ember.cat([a, b]), ("int32", "float16"), "float16"),
    ("stack", lambda a, b: ember.stack([a, b]), ("uint8", "int64"), "int64"),
    ("where", lambda a, b: ember.where(a > 0, a, b), ("float32", "float64"), "float64"),
    ("where", lambda a, b: ember.where(a > 0, a, b), ("int32", "float16"), "float16"),
    ("where scalar", lambda a, b: ember.where(a > 0, a, 2.5), ("int32", "int32"), "float32"),
    ("maximum", lambda a, b: ember.maximum(a, b), ("int32", "float16"), "float16"),
    ("minimum", lambda a, b: ember.minimum(a, b), ("uint8", "int32"), "int32"),
    ("logical_and", lambda a, b: ember.logical_and(a, b), ("float32", "int32"), "bool"),
    ("matmul", lambda a, b: a.reshape(1, 3) @ b.reshape(3, 1), ("float32", "float32"), "float32"),
    ("matmul", lambda a, b: a @ b, ("int64", "int64"), "int64"),
]


@pytest.mark.parametrize("what,fn,dtypes,expected", MULTI_PROMOTION,
                         ids=[f"{w}{d}" for w, _, d, _ in MULTI_PROMOTION])
def test_multi_operand_result_dtype(what: str, fn: Callable[..., Any], dtypes: tuple[str, ...], expected: str,
                                    device: ember.Device) -> None:
    ts = [ember.tensor(np.array([1, 0, 2]), dtype=edt(d), device=device) for d in dtypes]
    assert name_of(fn(*ts).dtype) == expected


# Default dtypes of creation (values inferred like torch.tensor / torch.full / torch.arange).
CREATION_DTYPES: list[tuple[str, Callable[[ember.Device], Any], str]] = [
    ("tensor(float list)", lambda d: ember.tensor([1.0, 2.0], device=d), "float32"),
    ("tensor(int list)", lambda d: ember.tensor([1, 2], device=d), "int64"),
    ("tensor(bool list)", lambda d: ember.tensor([True, False], device=d), "bool"),
    ("tensor(mixed list)", lambda d: ember.tensor([1, 2.5], device=d), "float32"),
    ("tensor(float scalar)", lambda d: ember.tensor(3.5, device=d), "float32"),
    ("tensor(np.float64)", lambda d: ember.tensor(np.zeros(2), device=d), "float64"),
    ("tensor(np.int32)", lambda d: ember.tensor(np.zeros(2, np.int32), device=d), "int32"),
    ("tensor(np.float16)", lambda d: ember.tensor(np.zeros(2, np.float16), device=d), "float16"),
    ("tensor(np.uint8)", lambda d: ember.tensor(np.zeros(2, np.uint8), device=d), "uint8"),
    ("tensor(np.int8)", lambda d: ember.tensor(np.zeros(2, np.int8), device=d), "int8"),
    ("tensor(np.int16)", lambda d: ember.tensor(np.zeros(2, np.int16), device=d), "int16"),
    ("tensor(dtype=)", lambda d: ember.tensor([1, 2], dtype=ember.float16, device=d), "float16"),
    ("zeros", lambda d: ember.zeros(2, 3, device=d), "float32"),
    ("ones", lambda d: ember.ones((2,), device=d), "float32"),
    ("full(float)", lambda d: ember.full((2,), 7.5, device=d), "float32"),
    ("full(int)", lambda d: ember.full((2,), 7, device=d), "int64"),
    ("full(bool)", lambda d: ember.full((2,), True, device=d), "bool"),
    ("arange(int)", lambda d: ember.arange(5, device=d), "int64"),
    ("arange(float)", lambda d: ember.arange(0.0, 1.0, 0.25, device=d), "float32"),
    ("linspace", lambda d: ember.linspace(0, 1, 5, device=d), "float32"),
    ("eye", lambda d: ember.eye(3, device=d), "float32"),
    ("rand", lambda d: ember.rand(3, device=d), "float32"),
    ("randn", lambda d: ember.randn(3, device=d), "float32"),
    ("randint", lambda d: ember.randint(0, 5, (3,), device=d), "int64"),
    ("zeros_like(int32)", lambda d: ember.zeros_like(ember.tensor([1], dtype=ember.int32, device=d)),
     "int32"),
    ("full_like(float16)", lambda d: ember.full_like(ember.tensor([1.0], dtype=ember.float16, device=d), 2),
     "float16"),
    ("ones_like(dtype=)", lambda d: ember.ones_like(ember.tensor([1], device=d), dtype=ember.float64),
     "float64"),
]


@pytest.mark.parametrize("what,make_tensor,expected", CREATION_DTYPES, ids=[w for w, _, _ in CREATION_DTYPES])
def test_creation_default_dtype(what: str, make_tensor: Callable[[ember.Device], Any], expected: str,
                                device: ember.Device) -> None:
    t = make_tensor(device)
    assert name_of(t.dtype) == expected
    assert t.device == device


# --------------------------------------------------------------------------- full grids
# Result dtype of ``a + b`` and ``a * b`` for every pair of dtypes (rows: a, columns: b),
# as PyTorch computes it. Abbreviations: b u8 i32 i64 f16 bf16 f32 f64.
ABBREV = {"b": "bool", "u8": "uint8", "i32": "int32", "i64": "int64", "f16": "float16", "bf16": "bfloat16",
          "f32": "float32", "f64": "float64"}
COLUMNS = ["b", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"]
# dimensioned tensor with dimensioned tensor (and 0-d with 0-d: the same grid)
TENSOR_TENSOR = """
      b    u8   i32  i64  f16  bf16 f32  f64
b     b    u8   i32  i64  f16  bf16 f32  f64
u8    u8   u8   i32  i64  f16  bf16 f32  f64
i32   i32  i32  i32  i64  f16  bf16 f32  f64
i64   i64  i64  i64  i64  f16  bf16 f32  f64
f16   f16  f16  f16  f16  f16  f32  f32  f64
bf16  bf16 bf16 bf16 bf16 f32  bf16 f32  f64
f32   f32  f32  f32  f32  f32  f32  f32  f64
f64   f64  f64  f64  f64  f64  f64  f64  f64
"""
# dimensioned tensor (rows) with a 0-d tensor (columns): the 0-d one only lifts the category
TENSOR_ZERO_DIM = """
      b    u8   i32  i64  f16  bf16 f32  f64
b     b    u8   i32  i64  f16  bf16 f32  f64
u8    u8   u8   u8   u8   f16  bf16 f32  f64
i32   i32  i32  i32  i32  f16  bf16 f32  f64
i64   i64  i64  i64  i64  f16  bf16 f32  f64
f16   f16  f16  f16  f16  f16  f16  f16  f16
bf16  bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16
f32   f32  f32  f32  f32  f32  f32  f32  f32
f64   f64  f64  f64  f64  f64  f64  f64  f64
"""
# tensor (dimensioned or 0-d, rows) with a Python scalar (columns)
TENSOR_SCALAR = """
      True 2    2.5
b     b    i64  f32
u8    u8   u8   f32
i32   i32  i32  f32
i64   i64  i64  f32
f16   f16  f16  f16
bf16  bf16 bf16 bf16
f32   f32  f32  f32
f64   f64  f64  f64
"""


def grid(text: str) -> list[tuple[str, str, str]]:
    rows = [line.split() for line in text.strip().splitlines()]
    cols = rows[0]
    return [(r[0], c, v) for r in rows[1:] for c, v in zip(cols, r[1:])]


GRID_CASES = (
    [pytest.param(f"t:{ABBREV[a]}", f"t:{ABBREV[b]}", ABBREV[r], id=f"t:{a}+t:{b}")
     for a, b, r in grid(TENSOR_TENSOR)]
    + [pytest.param(f"0d:{ABBREV[a]}", f"0d:{ABBREV[b]}", ABBREV[r], id=f"0d:{a}+0d:{b}")
       for a, b, r in grid(TENSOR_TENSOR)]
    + [pytest.param(f"t:{ABBREV[a]}", f"0d:{ABBREV[b]}", ABBREV[r], id=f"t:{a}+0d:{b}")
       for a, b, r in grid(TENSOR_ZERO_DIM)]
    + [pytest.param(f"{k}:{ABBREV[a]}", {"True": True, "2": 2, "2.5": 2.5}[s], ABBREV[r], id=f"{k}:{a}+{s}")
       for k in ("t", "0d") for a, s, r in grid(TENSOR_SCALAR)]
)


def _value(o: Operand) -> float:
    """The value ``make`` fills an operand with (1 for bool, 2 otherwise; scalars as they are)."""
    if not isinstance(o, str):
        return float(o)
    return 1.0 if o.endswith(":bool") else 2.0


@pytest.mark.parametrize("lhs,rhs,expected", GRID_CASES)
def test_promotion_grid(lhs: Operand, rhs: Operand, expected: str, device: ember.Device) -> None:
    a, b = make(lhs, device), make(rhs, device)
    x, y = _value(lhs), _value(rhs)
    as_bool = expected == "bool"  # bool + bool is logical or, bool * bool logical and
    for name, r, v in (("a + b", a + b, x + y), ("b + a", b + a, x + y), ("a * b", a * b, x * y)):
        assert name_of(r.dtype) == expected, f"{name}, a={lhs}, b={rhs}: got {r.dtype}, expected {expected}"
        want = float(bool(v)) if as_bool else v
        assert np.all(np.asarray(r.numpy(), dtype=np.float64) == want), f"{name}, a={lhs}, b={rhs}: {r}"
