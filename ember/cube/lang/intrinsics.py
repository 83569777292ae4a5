"""Names the kernel language gives meaning to: position builtins and intrinsic functions.

Each is a marker object; the expander recognises it wherever a kernel refers to it
(``cube.ABSOLUTE_POS``, ``from ember.cube import sync_cube``, ``math.exp``). Calling an
intrinsic outside a kernel raises.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Builtin", "Intrinsic", "BUILTINS", "INTRINSICS", "MATH_MODULE"]


class Builtin:
    """A position builtin (``cube.ABSOLUTE_POS``); ``comptime`` ones fold to Python ints."""

    __slots__ = ("name", "comptime")

    def __init__(self, name: str, comptime: bool = False) -> None:
        self.name = name
        self.comptime = comptime

    def __repr__(self) -> str:
        return f"cube.{self.name}"

    def __reduce__(self) -> str:
        return self.name


class Intrinsic:
    """A function of the kernel language (``cube.exp``, ``cube.sync_cube``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"cube.{self.name}() can only be called inside a @cube.kernel or @cube.function")

    def __repr__(self) -> str:
        return f"cube.{self.name}"

    def __reduce__(self) -> str:
        return self.name


_POSITIONS = [
    "ABSOLUTE_POS",
    "ABSOLUTE_POS_X",
    "ABSOLUTE_POS_Y",
    "ABSOLUTE_POS_Z",
    "UNIT_POS",
    "UNIT_POS_X",
    "UNIT_POS_Y",
    "UNIT_POS_Z",
    "CUBE_POS",
    "CUBE_POS_X",
    "CUBE_POS_Y",
    "CUBE_POS_Z",
    "CUBE_COUNT",
    "CUBE_COUNT_X",
    "CUBE_COUNT_Y",
    "CUBE_COUNT_Z",
    "UNIT_POS_PLANE",
    "PLANE_POS",
]
# cube_dim is part of the KernelId and the plane size a property of the target: both comptime
_COMPTIME_POSITIONS = ["CUBE_DIM", "CUBE_DIM_X", "CUBE_DIM_Y", "CUBE_DIM_Z", "PLANE_DIM"]

BUILTINS: dict[str, Builtin] = {n: Builtin(n) for n in _POSITIONS}
BUILTINS.update({n: Builtin(n, comptime=True) for n in _COMPTIME_POSITIONS})

#: float math of one argument
MATH_UNARY = (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "erf",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sigmoid",
    "recip",
)
#: float predicates
MATH_PRED = ("isnan", "isinf", "isfinite")
NUMERIC_UNARY = ("abs", "sign")
MATH_BINARY = ("atan2", "pow", "copysign")
NUMERIC_BINARY = ("min", "max")
PLANE = (
    "plane_sum",
    "plane_prod",
    "plane_max",
    "plane_min",
    "plane_all",
    "plane_any",
    "plane_broadcast",
    "plane_shuffle",
    "plane_shuffle_xor",
    "plane_elect",
    "plane_inclusive_sum",
    "plane_exclusive_sum",
)
ATOMIC = ("atomic_add", "atomic_sub", "atomic_max", "atomic_min", "atomic_exchange")
LINE = ("line", "line_sum", "line_prod", "line_max", "line_min")
OTHER = (
    "cast",
    "bitcast",
    "select",
    "fma",
    "clamp",
    "sync_cube",
    "occupancy",
    "SharedMemory",
    "LocalArray",
    "range",
    "elem_of",
    "width_of",
    "comptime",
)

INTRINSICS: dict[str, Intrinsic] = {
    n: Intrinsic(n)
    for n in (
        MATH_UNARY + MATH_PRED + NUMERIC_UNARY + MATH_BINARY + NUMERIC_BINARY + PLANE + ATOMIC + LINE + OTHER
    )
}

#: functions of Python's math module that mean an intrinsic when called on runtime values
MATH_MODULE: dict[Any, str] = {
    math.exp: "exp",
    math.log: "log",
    math.log2: "log2",
    math.log10: "log10",
    math.log1p: "log1p",
    math.expm1: "expm1",
    math.sqrt: "sqrt",
    math.sin: "sin",
    math.cos: "cos",
    math.tan: "tan",
    math.tanh: "tanh",
    math.sinh: "sinh",
    math.cosh: "cosh",
    math.asin: "asin",
    math.acos: "acos",
    math.atan: "atan",
    math.erf: "erf",
    math.floor: "floor",
    math.ceil: "ceil",
    math.trunc: "trunc",
    math.fabs: "abs",
    math.isnan: "isnan",
    math.isinf: "isinf",
    math.isfinite: "isfinite",
    math.atan2: "atan2",
    math.pow: "pow",
    math.copysign: "copysign",
}
