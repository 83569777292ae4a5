"""Values the expander handles: runtime operands, literals, arrays, and the helpers that tell
them apart. Comptime values are plain Python objects; runtime values are IR ``Var``/``Const``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ..ir import ARRAY, LOCAL, LOCAL_ARRAY, SCALAR, SHARED, SSA, Const, Var
from ..types import bool_, f32, i32
from .source import MISSING, FunctionSource

DEFAULT = {"int": i32, "float": f32, "bool": bool_}  # the type a literal takes when nothing decides
WIDTHS = (1, 2, 4, 8, 16)
MAX_UNROLL = 4096
MAX_INLINE_DEPTH = 64

# Unsupported statements and expressions: what to write instead.
UNSUPPORTED = {
    ast.Try: "kernels cannot raise or catch exceptions; check conditions with if",
    ast.With: "kernels have no context managers",
    ast.FunctionDef: "define helpers at module level and decorate them with @cube.function",
    ast.AsyncFunctionDef: "define helpers at module level and decorate them with @cube.function",
    ast.ClassDef: "define classes outside the kernel; pass their values as cube.Comptime arguments",
    ast.Lambda: "define a module-level @cube.function instead of a lambda",
    ast.Global: "kernels read module globals as comptime constants but cannot assign them; write "
    "results into an output array",
    ast.Nonlocal: "kernels cannot assign enclosing variables; write results into an output array",
    ast.Delete: "drop the del; variables end with the kernel",
    ast.Import: "import at module level",
    ast.ImportFrom: "import at module level",
    ast.ListComp: "write a for loop (runtime) or build the list outside the kernel (comptime)",
    ast.SetComp: "write a for loop",
    ast.DictComp: "write a for loop",
    ast.GeneratorExp: "write a for loop",
    ast.Yield: "kernels are not generators; write results into an output array",
    ast.YieldFrom: "kernels are not generators; write results into an output array",
    ast.Await: "kernels are not async",
    ast.NamedExpr: "assign on its own line before the expression",
    ast.Raise: "kernels cannot raise; guard with if and return",
}


class Undefined:
    """A name that exists only inside a runtime loop body (its value is per iteration), or
    a comptime container of values computed inside one branch of a runtime if (``reason``)."""

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str = "") -> None:
        self.name = name
        self.reason = reason


@dataclass
class LoopCtx:
    runtime: bool
    depth: int
    broken: bool = False


@dataclass
class Frame:
    src: FunctionSource
    env: dict[str, Any]
    kind: str  # "kernel" | "function"
    depth: int = 0  # runtime control structures open around the current statement
    loops: list[LoopCtx] = field(default_factory=list)
    label: int = -1
    result: Any = MISSING
    result_local: Var | None = None
    exits: bool = False
    node: ast.AST | None = None  # the call site, for error context


class ArrayMethod:
    __slots__ = ("array", "name")

    def __init__(self, array: Var, name: str) -> None:
        self.array = array
        self.name = name


ARRAY_METHODS = ("len", "shape", "stride", "rank", "line_size", "buffer_len")


def lit_kind(v: Any) -> str | None:
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is float:
        return "float"
    return None


def is_rt(v: Any) -> bool:
    return type(v) is Const or (type(v) is Var and v.kind in (SSA, LOCAL, SCALAR))


def is_array(v: Any) -> bool:
    return type(v) is Var and v.kind in (ARRAY, SHARED, LOCAL_ARRAY)


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


def subscript_roots(stmts: list[ast.stmt]) -> set[str]:
    """Names whose elements the statements assign: ``x[i] = v``, ``x[i][j] += v``."""
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                root = n.value
                while isinstance(root, ast.Subscript):
                    root = root.value
                if isinstance(root, ast.Name):
                    names.add(root.id)
    return names


def holds_any(v: Any, ids: set[int], depth: int = 0) -> bool:
    """Whether the comptime container ``v`` holds (at any depth) a Var whose id is in ``ids``."""
    if type(v) is Var:
        return id(v) in ids
    if depth > 8:
        return False
    if isinstance(v, (list, tuple)):
        return any(holds_any(x, ids, depth + 1) for x in v)
    if isinstance(v, dict):
        return any(holds_any(x, ids, depth + 1) for x in v.values())
    return False


# --------------------------------------------------------------------------- expander


def same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def describe(v: Any) -> str:
    if type(v) is Var:
        return {ARRAY: "an array", SHARED: "a shared array", LOCAL_ARRAY: "a local array"}.get(
            v.kind, f"a {v.type} value"
        )
    if type(v) is Const:
        return f"a {v.type} constant"
    if isinstance(v, ArrayMethod):
        return f"the method {v.name}"
    return repr(v) if len(repr(v)) < 60 else type(v).__name__


# Python builtins and what they mean in a kernel
