"""``@cube`` functions -> kernel IR, by walking the function's AST.

The expander evaluates the body statement by statement. Every expression yields either a
*comptime* value (a Python object: literals, comptime parameters, tuples, cube types, ...)
or a *runtime* operand (an IR ``Var``/``Const``); operations on comptime values are done
in Python (so comptime ``if``s pick a branch and comptime ``range``s unroll), operations
with a runtime operand emit IR.

Typing: runtime values have an element type and a line width. Python literals are weak:
they take the type of the other operand. Mixing two different runtime element types is an
error that tells the user where to cast; a variable first set from a literal and changed in
a runtime loop takes the type of its first typed use (``acc = 0`` then ``acc += x[i]``).

Python names are bound to values; a name assigned inside runtime control flow becomes a
mutable ``local`` (merged after an ``if``, carried through a loop).
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ir
from ..ir import ARRAY, LOCAL, LOCAL_ARRAY, SCALAR, SHARED, SSA, Const, Type, Var
from ..kernel_id import ArgSig
from ..types import (
    BOOL,
    FLOAT,
    UINT,
    ArraySpec,
    Comptime,
    ComptimeSpec,
    Elem,
    ElemVar,
    bool_,
    f32,
    i32,
    u32,
)
from . import intrinsics as K
from .errors import CubeSyntaxError
from .source import MISSING, FunctionSource

__all__ = ["Target", "expand_kernel", "kernel_params", "ParamSpec"]

_DEFAULT = {"int": i32, "float": f32, "bool": bool_}
_WIDTHS = (1, 2, 4, 8, 16)
_MAX_UNROLL = 4096
_MAX_INLINE_DEPTH = 64

_ARITH = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
          ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
          ast.LShift: "shl", ast.RShift: "shr"}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PYOP = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
         "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
         "and": operator.and_, "or": operator.or_, "xor": operator.xor, "shl": operator.lshift,
         "shr": operator.rshift, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
         "ge": operator.ge, "eq": operator.eq, "ne": operator.ne}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=",
           "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

# Unsupported statements and expressions: what to write instead.
_UNSUPPORTED = {
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


@dataclass(frozen=True)
class Target:
    """What the compiler's target can do; kernels read it as comptime values."""

    name: str = "c"
    plane_size: int = 32
    line_widths: tuple[int, ...] = _WIDTHS
    max_shared_bytes: int = 1 << 20


@dataclass(frozen=True)
class ParamSpec:
    """A kernel parameter as its annotation declares it: "array", "scalar" or "comptime"."""

    name: str
    kind: str
    spec: Any  # ArraySpec | Elem | ElemVar | ComptimeSpec
    default: Any = MISSING


def kernel_params(src: FunctionSource) -> list[ParamSpec]:
    """Parse a kernel signature from its annotations (every parameter must have one)."""
    fdef = src.fdef
    a = fdef.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise src.error(fdef, "kernel parameters must be plain named parameters",
                        hint="list every argument explicitly: def k(x: cube.Array[cube.f32], n: cube.u32)")
    anns = src.annotations()
    defaults = src.fn.__defaults__ or ()
    kwdefaults = src.fn.__kwdefaults__ or {}
    names = [p.arg for p in a.args] + [p.arg for p in a.kwonlyargs]
    first_default = len(a.args) - len(defaults)
    out: list[ParamSpec] = []
    for i, name in enumerate(names):
        ann = anns.get(name, MISSING)
        node = (a.args + a.kwonlyargs)[i]
        if i < len(a.args):
            default = defaults[i - first_default] if i >= first_default else MISSING
        else:
            default = kwdefaults.get(name, MISSING)
        if ann is MISSING:
            raise src.error(node, f"kernel parameter {name!r} has no annotation",
                            hint=f"annotate it: {name}: cube.Array[cube.f32], {name}: cube.f32 or "
                                 f"{name}: cube.Comptime[int]")
        if isinstance(ann, ArraySpec):
            kind = "array"
        elif isinstance(ann, (Elem, ElemVar)):
            kind = "scalar"
        elif isinstance(ann, ComptimeSpec) or ann is Comptime:
            kind = "comptime"
            ann = ann if isinstance(ann, ComptimeSpec) else ComptimeSpec(None)
        else:
            raise src.error(node, f"kernel parameter {name!r} has annotation {ann!r}, which the kernel "
                                  "language does not know",
                            hint="use cube.Array[E], cube.Array[cube.Line[E]], a scalar type such as "
                                 "cube.f32 / cube.Float, or cube.Comptime[...]")
        if default is not MISSING and kind != "comptime":
            raise src.error(node, f"only comptime parameters may have defaults ({name!r})")
        out.append(ParamSpec(name, kind, ann, default))
    return out


# --------------------------------------------------------------------------- helper objects


class _Undefined:
    """A name that exists only inside a runtime loop body (its value is per iteration)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


@dataclass
class _LoopCtx:
    runtime: bool
    depth: int
    broken: bool = False


@dataclass
class _Frame:
    src: FunctionSource
    env: dict[str, Any]
    kind: str  # "kernel" | "function"
    depth: int = 0  # runtime control structures open around the current statement
    loops: list[_LoopCtx] = field(default_factory=list)
    label: int = -1
    result: Any = MISSING
    result_local: Var | None = None
    exits: bool = False
    node: ast.AST | None = None  # the call site, for error context


class _ArrayMethod:
    __slots__ = ("array", "name")

    def __init__(self, array: Var, name: str) -> None:
        self.array = array
        self.name = name


_ARRAY_METHODS = ("len", "shape", "stride", "rank", "line_size", "buffer_len")


def _lit_kind(v: Any) -> str | None:
    t = type(v)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is float:
        return "float"
    return None


def _is_rt(v: Any) -> bool:
    return type(v) is Const or (type(v) is Var and v.kind in (SSA, LOCAL, SCALAR))


def _is_array(v: Any) -> bool:
    return type(v) is Var and v.kind in (ARRAY, SHARED, LOCAL_ARRAY)


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


# --------------------------------------------------------------------------- expander


class Expander:
    def __init__(self, target: Target, cube_dim: tuple[int, int, int], bindings: dict[ElemVar, Elem]) -> None:
        self.target = target
        self.cube_dim = cube_dim
        self.bindings = bindings
        self.block: list[Any] = []
        self.frames: list[_Frame] = []
        self.shared: list[Var] = []
        self.local_arrays: list[Var] = []
        self.locals: list[Var] = []
        self._ids = 0

    # ---------------------------------------------------------------- basics
    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def error(self, node: ast.AST | None, what: str, hint: str = "") -> CubeSyntaxError:
        return self.frame.src.error(node, what, hint)

    def new_var(self, kind: str, type: Type | None, name: str = "", **kw: Any) -> Var:
        self._ids += 1
        v = Var(self._ids, kind, type, name, **kw)
        if kind == LOCAL:
            self.locals.append(v)
        return v

    def emit(self, ins: Any) -> None:
        self.block.append(ins)

    def op(self, name: str, type: Type, *args: Any, attrs: tuple[Any, ...] = ()) -> Var:
        out = self.new_var(SSA, type)
        self.emit(ir.Op(out, name, tuple(args), attrs))
        return out

    def new_local(self, name: str, type: Type | None, weak: str = "") -> Var:
        return self.new_var(LOCAL, type, name, weak=weak)

    # ---------------------------------------------------------------- typing
    def resolve_elem(self, node: ast.AST, e: Any) -> Elem:
        if isinstance(e, Elem):
            return e
        if isinstance(e, ElemVar):
            b = self.bindings.get(e)
            if b is None:
                raise self.error(node, f"{e!r} is not bound in this kernel",
                                 hint=f"use {e!r} in the type of a kernel parameter, so a launch binds it")
            return b
        from ... import dtype as dt

        if isinstance(e, dt.DType):
            from ..types import elem_of_dtype

            return elem_of_dtype(e)
        raise self.error(node, f"{e!r} is not an element type", hint="use cube.f32, cube.i32, cube.Float, ...")

    def type_of(self, v: Any) -> Type | None:
        """Type of a runtime operand; None for a literal or a weak local not yet typed."""
        return v.type if type(v) in (Var, Const) else None

    def weak_kind(self, v: Any) -> str:
        k = _lit_kind(v)
        return k if k is not None else v.weak

    def fix(self, node: ast.AST, var: Var, t: Type) -> None:
        """Give a weak local its type (at its first typed use)."""
        k = var.weak
        e = t.elem
        if (k == "float" and not e.is_float) or (k == "bool" and e.kind != BOOL) or (
                k == "int" and e.kind == BOOL):
            raise self.error(node, f"{var.name!r} was set from a {k} literal but is used as {t}",
                             hint=f"give it its type where you set it, e.g. {var.name} = "
                                  f"cube.{e.name}(...)")
        var.type = t

    def lit(self, node: ast.AST, value: Any, elem: Elem) -> Any:
        """A Python literal converted to ``elem`` (checked)."""
        k = _lit_kind(value)
        if elem.kind == BOOL:
            if k != "bool":
                raise self.error(node, f"{value!r} used as a bool", hint="compare explicitly, e.g. x != 0")
            return value
        if k == "float":
            if not elem.is_float:
                raise self.error(node, f"float literal {value!r} used with a {elem.name} value",
                                 hint=f"cast the other side: cube.cast(x, cube.f32), or write an int")
            return value
        if elem.is_float:
            return float(value)
        lo, hi = elem.limits()
        if not lo <= int(value) <= hi:
            raise self.error(node, f"literal {value!r} does not fit {elem.name} (range {lo}..{hi})",
                             hint="use a wider or signed type (cast the other operand)")
        return int(value)

    def coerce(self, node: ast.AST, v: Any, t: Type) -> Any:
        """``v`` as an operand of element type ``t.elem`` (literals and weak locals adapt)."""
        if _lit_kind(v) is not None:
            return Const(self.lit(node, v, t.elem), Type(t.elem))
        if type(v) is Var and v.type is None:
            self.fix(node, v, t)
            return v
        if not _is_rt(v):
            raise self.error(node, f"{_describe(v)} is not a value a kernel can compute with")
        if v.type.elem is not t.elem:
            raise self.error(node, f"mixing {v.type.elem.name} and {t.elem.name} values",
                             hint=f"cast one side: cube.cast(x, cube.{t.elem.name}) (the kernel "
                                  "language does not promote types implicitly)")
        return v

    def unify(self, node: ast.AST, a: Any, b: Any) -> tuple[Type, Any, Any]:
        ta, tb = self.type_of(a), self.type_of(b)
        if ta is None and tb is None:
            kinds = {self.weak_kind(a), self.weak_kind(b)}
            k = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
            t = Type(_DEFAULT[k])
            return t, self.coerce(node, a, t), self.coerce(node, b, t)
        if ta is None:
            if type(a) is Var:  # weak local: takes the other side's full type (lines too)
                self.fix(node, a, tb)
                ta = tb
            else:
                return tb, self.coerce(node, a, tb), b
        if tb is None:
            if type(b) is Var:
                self.fix(node, b, ta)
                tb = ta
            else:
                return ta, a, self.coerce(node, b, ta)
        if ta.elem is not tb.elem:
            raise self.error(node, f"mixing {ta} and {tb} values",
                             hint=f"cast one side, e.g. cube.cast(x, cube.{ta.elem.name}) (no implicit "
                                  "promotion in kernels)")
        if ta.width != tb.width and 1 not in (ta.width, tb.width):
            raise self.error(node, f"mixing lines of widths {ta.width} and {tb.width}")
        return Type(ta.elem, max(ta.width, tb.width)), a, b

    def materialize(self, node: ast.AST, v: Any) -> Any:
        """A runtime operand for ``v`` (literals get their default type)."""
        k = _lit_kind(v)
        if k is not None:
            return Const(v, Type(_DEFAULT[k]))
        if type(v) is Var and v.type is None:
            self.fix(node, v, Type(_DEFAULT[v.weak]))
            return v
        if _is_rt(v):
            return v
        raise self.error(node, f"{_describe(v)} is not a value a kernel can compute with")

    def snapshot(self, node: ast.AST, v: Any) -> Any:
        """The current value of a mutable local (so later assignments do not change it)."""
        if type(v) is Var and v.kind == LOCAL:
            v = self.materialize(node, v)
            return self.op("copy", v.type, v)
        return v

    def to_cond(self, node: ast.AST, v: Any) -> Any:
        """A condition: Python truthiness for comptime values, a bool operand otherwise."""
        if not (_is_rt(v)):
            if _is_array(v):
                raise self.error(node, "an array used as a condition", hint="compare its len(): x.len() > 0")
            return bool(v)
        v = self.materialize(node, v)
        if v.type.width != 1:
            raise self.error(node, "a line used as a condition",
                             hint="reduce it first (cube.line_max(...)) or test one lane: v[0]")
        if v.type.elem.kind == BOOL:
            return v
        return self.op("ne", Type(bool_), v, Const(self.lit(node, 0, v.type.elem), Type(v.type.elem)))

    def index(self, node: ast.AST, v: Any) -> Any:
        k = _lit_kind(v)
        if k == "int":
            if v < 0:
                raise self.error(node, f"negative index {v}", hint="kernels index from the start of the array")
            return Const(v, Type(u32))
        if k is not None:
            raise self.error(node, f"index {v!r} is not an int")
        v = self.materialize(node, v)
        if not v.type.elem.is_int or v.type.width != 1:
            raise self.error(node, f"index of type {v.type}", hint="indices are integers: cube.cast(i, cube.u32)")
        return v

    # ---------------------------------------------------------------- names
    def lookup(self, node: ast.Name) -> Any:
        name = node.id
        fr = self.frame
        v = fr.env.get(name, MISSING)
        if v is MISSING:
            v = fr.src.lookup(name)
            if v is MISSING:
                raise self.error(node, f"name {name!r} is not defined")
            return self.pyval(node, v)
        if isinstance(v, _Undefined):
            raise self.error(node, f"{name!r} is set only inside a runtime loop, so it has no value here",
                             hint=f"assign {name} before the loop, then update it inside")
        return v

    def pyval(self, node: ast.AST, v: Any) -> Any:
        """A Python object met in a kernel, as the kernel sees it."""
        if isinstance(v, K.Builtin):
            return self.builtin(node, v.name)
        if isinstance(v, np.generic):
            from ... import dtype as dt
            from ..types import elem_of_dtype

            try:
                e = elem_of_dtype(dt.from_numpy_dtype(v.dtype))
            except Exception:
                raise self.error(node, f"numpy scalar of dtype {v.dtype} has no kernel type") from None
            return Const(v.item(), Type(e))
        return v

    def builtin(self, node: ast.AST, name: str) -> Any:
        x, y, z = self.cube_dim
        comptime = {"CUBE_DIM": x * y * z, "CUBE_DIM_X": x, "CUBE_DIM_Y": y, "CUBE_DIM_Z": z,
                    "PLANE_DIM": self.target.plane_size}
        if name in comptime:
            return comptime[name]
        return self.op("builtin", Type(u32), attrs=(name,))

    def bind(self, node: ast.AST, name: str, value: Any) -> None:
        env = self.frame.env
        cur = env.get(name, MISSING)
        if type(cur) is Var and cur.kind == LOCAL and (_is_rt(value) or _lit_kind(value) is not None):
            self.emit(ir.Assign(cur, self.assign_value(node, cur, value)))
            return
        value = self.snapshot(node, value)
        if type(value) is Var and value.kind == SSA and not value.name:
            value.name = name
        env[name] = value

    def assign_value(self, node: ast.AST, local: Var, value: Any) -> Any:
        """``value`` converted for ``Assign(local, ...)``."""
        if local.type is None:
            k = _lit_kind(value)
            if k is not None:
                if k == local.weak or (local.weak == "int" and k == "float"):
                    local.weak = k  # an int-started local assigned a float literal is a float
                    return Const(value, None)
                if local.weak == "float" and k == "int":
                    return Const(float(value), None)
                raise self.error(node, f"{local.name!r} holds a {local.weak} but is assigned {value!r}")
            if type(value) is Var and value.type is None:
                value = self.materialize(node, value)
            self.fix(node, local, value.type)
            return value
        t = local.type
        if _lit_kind(value) is not None:
            return Const(self.lit(node, value, t.elem), Type(t.elem))
        if type(value) is Var and value.type is None:
            self.fix(node, value, t)
            return value
        if value.type.elem is not t.elem:
            raise self.error(node, f"{local.name!r} holds {t} but is assigned a {value.type} value",
                             hint=f"cast: {local.name} = cube.cast(..., cube.{t.elem.name})")
        if value.type.width not in (1, t.width):
            raise self.error(node, f"{local.name!r} holds {t} but is assigned a {value.type} value")
        return value

    # ---------------------------------------------------------------- entry points
    def expand_kernel(self, src: FunctionSource, params: list[ParamSpec], sigs: list[ArgSig],
                      kernel_name: str, entry: str) -> ir.KernelIr:
        env: dict[str, Any] = {}
        pirs: list[ir.ParamIr] = []
        buffer = 0
        for i, (p, s) in enumerate(zip(params, sigs)):
            if s.kind == "array":
                v = self.new_var(ARRAY, Type(s.elem, s.width), p.name, param=i, rank=s.rank)
                pirs.append(ir.ParamIr(p.name, "array", v, buffer, s.alias_of))
                buffer += 1
                env[p.name] = v
            elif s.kind == "scalar":
                v = self.new_var(SCALAR, Type(s.elem), p.name, param=i)
                pirs.append(ir.ParamIr(p.name, "scalar", v))
                env[p.name] = v
            else:
                pirs.append(ir.ParamIr(p.name, "comptime"))
                env[p.name] = s.value
        self.frames.append(_Frame(src, env, "kernel"))
        body: list[Any] = []
        self.block = body
        self.stmts(src.fdef.body)
        self.frames.pop()
        self.finish_types()
        return ir.KernelIr(kernel_name, entry, pirs, body, self.cube_dim, self.shared,
                           self.local_arrays, self.target.plane_size)

    def finish_types(self) -> None:
        for v in self.locals:
            if v.type is None:
                v.type = Type(_DEFAULT[v.weak or "int"])

    # ---------------------------------------------------------------- statements
    def stmts(self, body: list[ast.stmt]) -> bool:
        """Expand statements; True when the block ends here (return/break/continue)."""
        for s in body:
            if self.stmt(s):
                return True
        return False

    def stmt(self, s: ast.stmt) -> bool:
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            hint = _UNSUPPORTED.get(type(s), "see the kernel language reference in ember/cube/__init__.py")
            raise self.error(s, f"'{type(s).__name__}' statements are not part of the kernel language",
                             hint=hint)
        return bool(m(s))

    def s_Pass(self, s: ast.Pass) -> None:
        return None

    def s_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return None  # docstring
        self.expr(s.value)
        return None

    def s_Assign(self, s: ast.Assign) -> None:
        value = self.expr(s.value)
        for t in s.targets:
            self.assign_target(t, value)
        return None

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if not isinstance(s.target, ast.Name):
            raise self.error(s, "annotated assignment to something other than a name")
        ann = self.expr(s.annotation)
        if isinstance(ann, ComptimeSpec) or ann is Comptime:
            if s.value is None:
                raise self.error(s, "a comptime variable needs a value")
            v = self.expr(s.value)
            if _is_rt(v):
                raise self.error(s, f"{s.target.id!r} is declared comptime but its value is computed at run time")
            self.frame.env[s.target.id] = v
            return None
        elem = self.resolve_elem(s.annotation, ann)
        if s.value is None:
            local = self.new_local(s.target.id, Type(elem))
            self.frame.env[s.target.id] = local
            return None
        v = self.coerce(s.value, self.expr(s.value), Type(elem))
        self.bind(s, s.target.id, v)
        return None

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        op = _ARITH.get(type(s.op))
        if op is None:
            raise self.error(s, f"operator {type(s.op).__name__} is not supported")
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.lookup(ast.Name(id=t.id, ctx=ast.Load(), lineno=t.lineno, col_offset=t.col_offset))
            self.bind(s, t.id, self.binary(s, op, cur, self.expr(s.value)))
        elif isinstance(t, ast.Subscript):
            base = self.expr(t.value)
            if not _is_array(base):
                raise self.error(s, "augmented assignment to an element of something that is not an array")
            idx = self.subscript_index(t, base, self.expr(t.slice))
            cur = self.op("read", base.type, base, idx)
            self.store(s, base, idx, self.binary(s, op, cur, self.expr(s.value)))
        else:
            raise self.error(s, "augmented assignment target must be a name or an array element")
        return None

    def assign_target(self, t: ast.expr, value: Any) -> None:
        if isinstance(t, ast.Name):
            self.bind(t, t.id, value)
        elif isinstance(t, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)):
                raise self.error(t, "unpacking a value that is not a comptime tuple",
                                 hint="assign the parts one by one")
            if len(value) != len(t.elts):
                raise self.error(t, f"unpacking {len(value)} values into {len(t.elts)} names")
            vals = [self.snapshot(t, v) for v in value]
            for tt, v in zip(t.elts, vals):
                self.assign_target(tt, v)
        elif isinstance(t, ast.Subscript):
            base = self.expr(t.value)
            if _is_array(base):
                idx = self.subscript_index(t, base, self.expr(t.slice))
                self.store(t, base, idx, value)
            elif _is_rt(base) and base.type is not None and base.type.width > 1 and isinstance(t.value, ast.Name):
                k = self.lane(t, base, self.expr(t.slice))
                v = self.coerce(t, value, base.type.scalar())
                self.bind(t, t.value.id, self.op("lane_set", base.type, base, k, v))
            else:
                raise self.error(t, f"cannot assign to an element of {_describe(base)}")
        else:
            raise self.error(t, f"cannot assign to {type(t).__name__}",
                             hint="assign to a name, an array element x[i], or a lane v[k]")

    def store(self, node: ast.AST, arr: Var, idx: Any, value: Any) -> None:
        t = arr.type
        if _lit_kind(value) is not None:
            value = Const(self.lit(node, value, t.elem), Type(t.elem))
        elif type(value) is Var and value.type is None:
            self.fix(node, value, t)
        elif not _is_rt(value):
            raise self.error(node, f"cannot store {_describe(value)} in an array")
        if value.type.elem is not t.elem:
            raise self.error(node, f"storing a {value.type} value into an array of {t}",
                             hint=f"cast it: cube.cast(v, cube.{t.elem.name})")
        if value.type.width not in (1, t.width):
            raise self.error(node, f"storing a line of width {value.type.width} into an array of {t}")
        self.emit(ir.Store(arr, idx, value))

    def s_Return(self, s: ast.Return) -> bool:
        fr = self.frame
        if fr.kind == "kernel":
            if s.value is not None:
                raise self.error(s, "a kernel returns nothing", hint="write results into an output array")
            self.emit(ir.Return())
            return True
        value = None if s.value is None else self.expr(s.value)
        if fr.depth == 0 and not fr.exits:
            fr.result = value
            return True
        # a return inside runtime control flow: assign the result and jump to the end of the body
        if isinstance(value, (tuple, list)) or (value is not None and not (_is_rt(value) or _lit_kind(value))):
            raise self.error(s, "a @cube.function that returns from inside runtime control flow must "
                                "return one value", hint="return at the end of the function instead")
        if fr.result_local is None:
            fr.result_local = self.new_local("ret", None, weak=self.weak_kind(value) if _lit_kind(value) else "int")
        if value is not None:
            self.emit(ir.Assign(fr.result_local, self.assign_value(s, fr.result_local, value)))
        fr.exits = True
        self.emit(ir.Exit(fr.label))
        return True

    def loop_ctx(self, s: ast.stmt) -> _LoopCtx:
        fr = self.frame
        if not fr.loops:
            raise self.error(s, f"'{type(s).__name__.lower()}' outside a loop")
        ctx = fr.loops[-1]
        if not ctx.runtime and fr.depth != ctx.depth:
            raise self.error(s, f"'{type(s).__name__.lower()}' under a runtime condition inside a comptime-"
                                "unrolled loop",
                             hint="make the loop a runtime loop: for i in cube.range(n, unroll=False)")
        return ctx

    def s_Break(self, s: ast.Break) -> bool:
        ctx = self.loop_ctx(s)
        if ctx.runtime:
            self.emit(ir.Break())
        else:
            ctx.broken = True
        return True

    def s_Continue(self, s: ast.Continue) -> bool:
        ctx = self.loop_ctx(s)
        if ctx.runtime:
            self.emit(ir.Continue())
        return True

    def s_Assert(self, s: ast.Assert) -> None:
        test = self.expr(s.test)
        if _is_rt(test):
            raise self.error(s, "assert on a runtime value", hint="asserts are checked at expansion on comptime values")
        if not test:
            msg = self.expr(s.msg) if s.msg is not None else "assertion failed"
            raise self.error(s, f"comptime assertion failed: {msg}")
        return None

    # ---------------------------------------------------------------- control flow
    def sub_block(self, body: list[ast.stmt], env: dict[str, Any] | None = None) -> tuple[list[Any], bool]:
        """Expand ``body`` into a new instruction list inside one more runtime structure."""
        fr = self.frame
        saved_block, saved_env = self.block, fr.env
        out: list[Any] = []
        self.block = out
        if env is not None:
            fr.env = env
        fr.depth += 1
        try:
            ended = self.stmts(body)
        finally:
            fr.depth -= 1
            self.block = saved_block
            fr.env = saved_env
        return out, ended

    def s_If(self, s: ast.If) -> bool:
        test = self.expr(s.test)
        cond = self.to_cond(s.test, test)
        if not _is_rt(cond):
            return self.stmts(s.body if cond else s.orelse)
        fr = self.frame
        before = fr.env
        then_env, else_env = dict(before), dict(before)
        then_block, t_end = self.sub_block(s.body, then_env)
        else_block, e_end = self.sub_block(s.orelse, else_env)
        self.merge(s, before, [(then_env, then_block, t_end), (else_env, else_block, e_end)])
        self.emit(ir.If(cond, then_block, else_block))
        return t_end and e_end

    def merge(self, node: ast.AST, before: dict[str, Any],
              branches: list[tuple[dict[str, Any], list[Any], bool]]) -> None:
        """Bind the names the branches of a runtime ``if`` changed (through locals)."""
        names = sorted(set().union(*(b[0].keys() for b in branches)))
        for n in names:
            b = before.get(n, MISSING)
            live = [(env.get(n, MISSING), blk) for env, blk, ended in branches if not ended]
            if not live or all(v is b for v, _ in live):
                continue
            vals = [v for v, _ in live]
            if all(not _is_rt(v) and v is not MISSING for v in vals):
                first = vals[0]
                if all(type(v) is type(first) and _same(v, first) for v in vals):
                    before[n] = first
                    continue
                if not all(_lit_kind(v) is not None for v in vals):
                    raise self.error(node, f"{n!r} is bound to different comptime objects in the branches of "
                                           "a runtime if", hint="bind it before the if, or use a comptime condition")
            for v in vals:
                if type(v) is Var and v.kind == LOCAL and all(w is v or w is MISSING for w in vals):
                    break
            else:
                v = None
            if v is not None:  # every branch left the same mutable local bound
                before[n] = v
                continue
            typed = [self.type_of(v) for v in vals if v is not MISSING and self.type_of(v) is not None]
            if typed:
                local = self.new_local(n, typed[0])
            else:
                kinds = {self.weak_kind(v) for v in vals if v is not MISSING}
                k = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
                local = self.new_local(n, None, weak=k)
            for v, blk in live:
                if v is MISSING:
                    continue
                if not (_is_rt(v) or _lit_kind(v) is not None):
                    raise self.error(node, f"{n!r} is a value in one branch and {_describe(v)} in another")
                saved = self.block
                self.block = blk
                try:
                    self.emit(ir.Assign(local, self.assign_value(node, local, v)))
                finally:
                    self.block = saved
            before[n] = local

    def carry(self, node: ast.AST, body: list[ast.stmt], exclude: set[str]) -> dict[str, Any]:
        """Turn names a runtime loop assigns into locals before the loop; returns their prior values."""
        env = self.frame.env
        names = sorted(assigned_names(body) - exclude)
        prior: dict[str, Any] = {}
        for n in names:
            v = env.get(n, MISSING)
            prior[n] = v
            if v is MISSING or isinstance(v, _Undefined):
                continue
            if type(v) is Var and v.kind == LOCAL:
                continue
            k = _lit_kind(v)
            if k is not None:
                local = self.new_local(n, None, weak=k)
                self.emit(ir.Assign(local, Const(v, None)))
                env[n] = local
            elif _is_rt(v):
                local = self.new_local(n, v.type)
                self.emit(ir.Assign(local, v))
                env[n] = local
        return prior

    def uncarry(self, prior: dict[str, Any]) -> None:
        """After a runtime loop: names it bound to per-iteration values have no value."""
        env = self.frame.env
        for n, before in prior.items():
            v = env.get(n, MISSING)
            if v is before or (type(v) is Var and v.kind == LOCAL):
                continue
            env[n] = _Undefined(n)

    def s_While(self, s: ast.While) -> bool:
        if s.orelse:
            raise self.error(s, "while ... else is not supported", hint="use a flag variable")
        test = self.try_comptime(s.test)
        if test is not MISSING and not (isinstance(s.test, ast.Constant) and s.test.value is True):
            return self.comptime_while(s, test)
        prior = self.carry(s, s.body, set())
        fr = self.frame
        ctx = _LoopCtx(True, fr.depth + 1)
        fr.loops.append(ctx)
        saved = self.block
        body: list[Any] = []
        self.block = body
        fr.depth += 1
        try:
            cond = self.to_cond(s.test, self.expr(s.test))
            if _is_rt(cond):
                self.emit(ir.If(self.op("lnot", Type(bool_), cond), [ir.Break()], []))
            if cond is not False:
                self.stmts(s.body)
        finally:
            fr.depth -= 1
            fr.loops.pop()
            self.block = saved
        if cond is not False:
            self.emit(ir.Loop(body))
        self.uncarry(prior)
        return False

    def try_comptime(self, node: ast.expr) -> Any:
        """The value of ``node`` if it is comptime (runtime code it emits is thrown away)."""
        saved = self.block
        self.block = []
        try:
            v = self.expr(node)
        except CubeSyntaxError:
            return MISSING
        finally:
            self.block = saved
        return MISSING if _is_rt(v) or _is_array(v) else v

    def comptime_while(self, s: ast.While, test: Any) -> bool:
        fr = self.frame
        n = 0
        while test:
            n += 1
            if n > _MAX_UNROLL:
                raise self.error(s, f"comptime while loop ran {_MAX_UNROLL} times without ending",
                                 hint="make its condition depend on a runtime value to get a runtime loop")
            ctx = _LoopCtx(False, fr.depth)
            fr.loops.append(ctx)
            try:
                self.stmts(s.body)
            finally:
                fr.loops.pop()
            if ctx.broken:
                break
            test = self.expr(s.test)
            if _is_rt(test):
                raise self.error(s.test, "the condition of this while loop was comptime and became runtime",
                                 hint="initialise the variables it tests with runtime values (cube.u32(0))")
        return False

    def s_For(self, s: ast.For) -> bool:
        if s.orelse:
            raise self.error(s, "for ... else is not supported", hint="use a flag variable")
        it = s.iter
        if isinstance(it, ast.Call):
            fn = self.expr(it.func)
            if fn is builtins.range or (isinstance(fn, K.Intrinsic) and fn.name == "range"):
                return self.for_range(s, it, fn is builtins.range)
        seq = self.expr(it)
        if _is_rt(seq) or _is_array(seq):
            raise self.error(it, f"iterating over {_describe(seq)}",
                             hint="iterate indices: for i in range(x.len()): ... x[i]")
        try:
            items = list(seq)
        except TypeError:
            raise self.error(it, f"{_describe(seq)} is not iterable") from None
        return self.unrolled(s, items)

    def unrolled(self, s: ast.For, items: list[Any]) -> bool:
        fr = self.frame
        if len(items) > _MAX_UNROLL:
            raise self.error(s, f"unrolling {len(items)} iterations",
                             hint="use a runtime loop: for i in cube.range(n, unroll=False)")
        for item in items:
            self.assign_target(s.target, item)
            ctx = _LoopCtx(False, fr.depth)
            fr.loops.append(ctx)
            try:
                self.stmts(s.body)
            finally:
                fr.loops.pop()
            if ctx.broken:
                break
        return False

    def for_range(self, s: ast.For, call: ast.Call, python_range: bool) -> bool:
        args = [self.expr(a) for a in call.args]
        kw = {k.arg: self.expr(k.value) for k in call.keywords}
        unroll = kw.pop("unroll", None)
        if kw or python_range and call.keywords:
            raise self.error(call, f"unexpected keyword arguments {sorted(kw)} to range")
        if not 1 <= len(args) <= 3:
            raise self.error(call, "range takes 1 to 3 arguments")
        start, end, step = (0, args[0], 1) if len(args) == 1 else (
            (args[0], args[1], 1) if len(args) == 2 else tuple(args))
        comptime = not any(_is_rt(a) for a in (start, end, step))
        for a in (start, end, step):
            if _is_array(a):
                raise self.error(call, "range over an array", hint="use its length: range(x.len())")
        if comptime and unroll is not False:
            try:
                items = list(range(start, end, step))
            except TypeError as e:
                raise self.error(call, f"range({start!r}, {end!r}, {step!r}): {e}") from None
            return self.unrolled(s, items)
        if unroll is True:
            raise self.error(call, "cube.range(..., unroll=True) needs comptime bounds")
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "a runtime range loop binds one name")
        if _lit_kind(step) is not None and step == 0:
            raise self.error(call, "range step is zero")
        rt = [v for v in (start, end, step) if _is_rt(v) and v.type is not None]
        if rt:
            t = Type(rt[0].type.elem)
        elif comptime:
            t = Type(u32) if min(start, end) >= 0 and step > 0 else Type(i32)
        else:
            t = Type(i32)
        start, end, step = (self.coerce(call, v, t) for v in (start, end, step))
        for v in (start, end, step):
            if v.type.width != 1 or not v.type.elem.is_int:
                raise self.error(call, f"range bounds must be integers, got {v.type}")
        if s.target.id in assigned_names(s.body):
            raise self.error(s, f"assigning to the loop variable {s.target.id!r} inside the loop",
                             hint="copy it to another name first")
        prior = self.carry(s, s.body, {s.target.id})
        fr = self.frame
        var = self.new_local(s.target.id, t)
        prior.setdefault(s.target.id, fr.env.get(s.target.id, MISSING))
        fr.env[s.target.id] = var
        ctx = _LoopCtx(True, fr.depth + 1)
        fr.loops.append(ctx)
        try:
            body, _ = self.sub_block(s.body)
        finally:
            fr.loops.pop()
        self.emit(ir.RangeLoop(var, start, end, step, body))
        self.uncarry(prior)
        fr.env[s.target.id] = var
        return False

    # ---------------------------------------------------------------- expressions
    def expr(self, e: ast.expr) -> Any:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            hint = _UNSUPPORTED.get(type(e), "see the kernel language reference in ember/cube/__init__.py")
            raise self.error(e, f"'{type(e).__name__}' expressions are not part of the kernel language",
                             hint=hint)
        return m(e)

    def e_Constant(self, e: ast.Constant) -> Any:
        return e.value

    def e_Name(self, e: ast.Name) -> Any:
        return self.lookup(e)

    def e_Tuple(self, e: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.snapshot(e, v) for v in self.elements(e.elts))

    def e_List(self, e: ast.List) -> list[Any]:
        return [self.snapshot(e, v) for v in self.elements(e.elts)]

    def elements(self, elts: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for x in elts:
            if isinstance(x, ast.Starred):
                v = self.expr(x.value)
                if _is_rt(v):
                    raise self.error(x, "unpacking a runtime value")
                out.extend(v)
            else:
                out.append(self.expr(x))
        return out

    def e_Dict(self, e: ast.Dict) -> dict[Any, Any]:
        out = {}
        for k, v in zip(e.keys, e.values):
            if k is None:
                raise self.error(e, "** in a dict literal")
            kk, vv = self.expr(k), self.expr(v)
            if _is_rt(kk):
                raise self.error(k, "dict keys must be comptime")
            out[kk] = vv
        return out

    def e_JoinedStr(self, e: ast.JoinedStr) -> str:
        parts = []
        for v in e.values:
            x = self.expr(v.value) if isinstance(v, ast.FormattedValue) else self.expr(v)
            if _is_rt(x):
                raise self.error(e, "formatting a runtime value", hint="strings exist at comptime only")
            parts.append(str(x))
        return "".join(parts)

    def e_Slice(self, e: ast.Slice) -> slice:
        parts = [None if p is None else self.expr(p) for p in (e.lower, e.upper, e.step)]
        if any(_is_rt(p) for p in parts):
            raise self.error(e, "slicing with runtime bounds", hint="kernels index one element at a time")
        return slice(*parts)

    def e_Attribute(self, e: ast.Attribute) -> Any:
        base = self.expr(e.value)
        if _is_array(base):
            if e.attr in _ARRAY_METHODS:
                return _ArrayMethod(base, e.attr)
            raise self.error(e, f"arrays have no attribute {e.attr!r}",
                             hint="arrays offer len(), shape(d), stride(d), rank(), line_size()")
        if _is_rt(base):
            raise self.error(e, f"runtime values have no attribute {e.attr!r}")
        try:
            v = getattr(base, e.attr)
        except AttributeError as x:
            raise self.error(e, str(x)) from None
        return self.pyval(e, v)

    def subscript_index(self, node: ast.AST, arr: Var, key: Any) -> Any:
        if isinstance(key, tuple):
            if arr.kind != ARRAY:
                raise self.error(node, "multi-dimensional index of a shared or local array",
                                 hint="compute the flat index yourself")
            if len(key) != arr.rank:
                raise self.error(node, f"{len(key)} indices for an array of rank {arr.rank}")
            if arr.type.width != 1:
                raise self.error(node, "multi-dimensional index of an array of lines")
            flat: Any = None
            for d, k in enumerate(key):
                k = self.index(node, k)
                if k.type.elem is not u32:
                    k = self.op("cast", Type(u32), k)
                term = self.op("mul", Type(u32), k, self.op("stride", Type(u32), arr, Const(d, Type(u32))))
                flat = term if flat is None else self.op("add", Type(u32), flat, term)
            return flat if flat is not None else Const(0, Type(u32))
        return self.index(node, key)

    def lane(self, node: ast.AST, v: Var | Const, k: Any) -> Any:
        if _lit_kind(k) == "int" and not 0 <= k < v.type.width:
            raise self.error(node, f"lane {k} of a line of width {v.type.width}")
        return self.index(node, k)

    def e_Subscript(self, e: ast.Subscript) -> Any:
        base = self.expr(e.value)
        key = self.expr(e.slice)
        if _is_array(base):
            return self.op("read", base.type, base, self.subscript_index(e, base, key))
        if _is_rt(base):
            base = self.materialize(e, base)
            if base.type.width == 1:
                raise self.error(e, "indexing a scalar value")
            return self.op("lane_get", base.type.scalar(), base, self.lane(e, base, key))
        if _is_rt(key):
            raise self.error(e, f"indexing the comptime value {_describe(base)} with a runtime index",
                             hint="index comptime sequences with comptime values (e.g. in an unrolled loop)")
        if isinstance(base, _ArrayMethod):
            raise self.error(e, f"{base.name} is a method", hint=f"call it: x.{base.name}(d)")
        try:
            return self.pyval(e, base[key])
        except Exception as x:
            raise self.error(e, f"{type(x).__name__}: {x}") from None

    def e_BinOp(self, e: ast.BinOp) -> Any:
        op = _ARITH.get(type(e.op))
        if op is None:
            raise self.error(e, f"operator {type(e.op).__name__} is not part of the kernel language",
                             hint="matrix products are written with loops")
        return self.binary(e, op, self.expr(e.left), self.expr(e.right))

    def binary(self, node: ast.AST, op: str, a: Any, b: Any) -> Any:
        if not _is_rt(a) and not _is_rt(b):
            if _is_array(a) or _is_array(b):
                raise self.error(node, f"arrays in an arithmetic expression ({_SYMBOL[op]})",
                                 hint="index them: x[i]")
            try:
                return _PYOP[op](a, b)
            except Exception as x:
                raise self.error(node, f"{type(x).__name__}: {x}") from None
        if _is_array(a) or _is_array(b):
            raise self.error(node, f"arrays in an arithmetic expression ({_SYMBOL[op]})", hint="index them: x[i]")
        if op == "pow":
            return self.power(node, a, b)
        t, a, b = self.unify(node, a, b)
        k = t.elem.kind
        if op == "div" and k != FLOAT:
            raise self.error(node, f"'/' on {t} values",
                             hint="use // for integer division, or cast to a float type first")
        if op in ("add", "sub", "mul", "floordiv", "mod") and k == BOOL:
            raise self.error(node, f"'{_SYMBOL[op]}' on bool values", hint="use & | ^ or cast to an int")
        if op in ("shl", "shr") and not t.elem.is_int:
            raise self.error(node, f"'{_SYMBOL[op]}' on {t} values", hint="shifts need integer operands")
        if op in ("and", "or", "xor") and k == FLOAT:
            raise self.error(node, f"'{_SYMBOL[op]}' on {t} values",
                             hint="bitwise operators need ints or bools; use cube.bitcast for bits")
        if op in ("lt", "le", "gt", "ge") and k == BOOL:
            raise self.error(node, "ordering comparison of bools", hint="compare with == or !=")
        if op in _CMP.values():
            return self.op(op, Type(bool_, t.width), a, b)
        return self.op(op, t, a, b)

    def power(self, node: ast.AST, a: Any, b: Any) -> Any:
        if not _is_rt(b) and _lit_kind(b) == "int" and 0 <= b <= 16:
            a = self.materialize(node, a)
            if b == 0:
                return Const(self.lit(node, 1, a.type.elem), Type(a.type.elem))
            acc = a
            for _ in range(b - 1):
                acc = self.op("mul", a.type, acc, a)
            return acc
        t, a, b = self.unify(node, a, b)
        if not t.elem.is_float:
            raise self.error(node, f"'**' on {t} values with a runtime or negative exponent",
                             hint="cast to a float type, or use a comptime exponent in 0..16")
        return self.op("pow", t, a, b)

    def e_UnaryOp(self, e: ast.UnaryOp) -> Any:
        v = self.expr(e.operand)
        if not _is_rt(v):
            if _is_array(v):
                raise self.error(e, "an array in an arithmetic expression")
            try:
                return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                        ast.Invert: operator.invert}[type(e.op)](v)
            except Exception as x:
                raise self.error(e, f"{type(x).__name__}: {x}") from None
        v = self.materialize(e, v)
        k = v.type.elem.kind
        if isinstance(e.op, ast.UAdd):
            return v
        if isinstance(e.op, ast.USub):
            if k == BOOL:
                raise self.error(e, "negating a bool", hint="use 'not x'")
            return self.op("neg", v.type, v)
        if isinstance(e.op, ast.Invert):
            if not v.type.elem.is_int:
                raise self.error(e, f"'~' on {v.type}", hint="use 'not x' for bools; '~' needs ints")
            return self.op("not", v.type, v)
        # not
        if v.type.width != 1:
            raise self.error(e, "'not' on a line", hint="compare lane-wise: v == 0")
        if k == BOOL:
            return self.op("lnot", v.type, v)
        return self.op("eq", Type(bool_), v, Const(self.lit(e, 0, v.type.elem), Type(v.type.elem)))

    def e_Compare(self, e: ast.Compare) -> Any:
        left = self.expr(e.left)
        result: Any = True
        for opn, right_node in zip(e.ops, e.comparators):
            right = self.expr(right_node)
            if isinstance(opn, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if _is_rt(left) or _is_rt(right):
                    raise self.error(e, f"'{type(opn).__name__}' with runtime values", hint="use == / !=")
                f = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                     ast.In: lambda x, y: x in y, ast.NotIn: lambda x, y: x not in y}[type(opn)]
                part: Any = f(left, right)
            else:
                part = self.binary(e, _CMP[type(opn)], left, right)
            result = part if result is True else self.logical(e, "and", result, part)
            left = right
        return result

    def logical(self, node: ast.AST, which: str, a: Any, b: Any) -> Any:
        """Non-short-circuit combination of two evaluated conditions (for comparison chains)."""
        if not _is_rt(a) and not _is_rt(b):
            return (a and b) if which == "and" else (a or b)
        if not _is_rt(a):
            return b if (bool(a) if which == "and" else not a) else a
        if not _is_rt(b):
            return a if (bool(b) if which == "and" else not b) else b
        t, a, b = self.unify(node, a, b)
        return self.op("land" if which == "and" else "lor", t, a, b)

    def e_BoolOp(self, e: ast.BoolOp) -> Any:
        which = "and" if isinstance(e.op, ast.And) else "or"
        first = self.expr(e.values[0])
        rest = e.values[1:]
        if not rest:
            return first
        if not _is_rt(first):
            if (which == "and" and not first) or (which == "or" and first):
                return first
            return self.expr(ast.BoolOp(op=e.op, values=rest, lineno=e.lineno, col_offset=e.col_offset)) \
                if len(rest) > 1 else self.expr(rest[0])
        # short-circuit: the right side runs only when the left does not decide
        c = self.to_cond(e.values[0], first)
        r = self.new_local("_" + which, Type(bool_))
        self.emit(ir.Assign(r, c))
        tail = ast.BoolOp(op=e.op, values=rest, lineno=e.lineno, col_offset=e.col_offset) \
            if len(rest) > 1 else rest[0]
        saved = self.block
        blk: list[Any] = []
        self.block = blk
        self.frame.depth += 1
        try:
            v = self.to_cond(tail, self.expr(tail))
            self.emit(ir.Assign(r, v if _is_rt(v) else Const(bool(v), Type(bool_))))
        finally:
            self.frame.depth -= 1
            self.block = saved
        self.emit(ir.If(r, blk, []) if which == "and" else ir.If(r, [], blk))
        return self.snapshot(e, r)

    def e_IfExp(self, e: ast.IfExp) -> Any:
        cond = self.to_cond(e.test, self.expr(e.test))
        if not _is_rt(cond):
            return self.expr(e.body if cond else e.orelse)
        r = self.new_local("_sel", None, weak="int")
        blocks = []
        saved = self.block
        for node in (e.body, e.orelse):
            blk: list[Any] = []
            self.block = blk
            self.frame.depth += 1
            try:
                v = self.expr(node)
                if not (_is_rt(v) or _lit_kind(v) is not None):
                    raise self.error(node, f"a conditional expression choosing {_describe(v)} at run time")
                if r.type is None and _lit_kind(v) is not None and r.weak != "float":
                    r.weak = _lit_kind(v)
                self.emit(ir.Assign(r, self.assign_value(node, r, v)))
            finally:
                self.frame.depth -= 1
                self.block = saved
            blocks.append(blk)
        self.emit(ir.If(cond, blocks[0], blocks[1]))
        return self.snapshot(e, r)

    # ---------------------------------------------------------------- calls
    def e_Call(self, e: ast.Call) -> Any:
        fn = self.expr(e.func)
        args = self.elements(e.args)
        kwargs: dict[str, Any] = {}
        for k in e.keywords:
            v = self.expr(k.value)
            if k.arg is None:
                if not isinstance(v, dict):
                    raise self.error(k, "** of a value that is not a comptime dict")
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(fn, K.Intrinsic):
            return self.intrinsic(e, fn.name, args, kwargs)
        if isinstance(fn, _ArrayMethod):
            return self.array_method(e, fn, args, kwargs)
        if getattr(fn, "__cube_function__", False):
            return self.inline(e, fn, args, kwargs)
        if getattr(fn, "__cube_kernel__", False):
            raise self.error(e, "a kernel called from a kernel",
                             hint="make the shared code a @cube.function and call that")
        if isinstance(fn, (Elem, ElemVar)):
            if len(args) != 1 or kwargs:
                raise self.error(e, f"{fn!r}(x) takes one value")
            return self.cast(e, args[0], self.resolve_elem(e, fn), bits=False)
        rt = any(_is_rt(a) or _is_array(a) for a in list(args) + list(kwargs.values()))
        if fn in _PY_BUILTINS:
            return _PY_BUILTINS[fn](self, e, args, kwargs)
        if fn in K.MATH_MODULE and rt:
            return self.intrinsic(e, K.MATH_MODULE[fn], args, kwargs)
        if rt:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(e, f"call of the Python function {name} with runtime values",
                             hint="decorate it with @cube.function to inline it into kernels")
        if not callable(fn):
            raise self.error(e, f"{_describe(fn)} is not callable")
        try:
            return self.pyval(e, fn(*args, **kwargs))  # comptime evaluation
        except CubeSyntaxError:
            raise
        except Exception as x:
            raise self.error(e, f"comptime call failed: {type(x).__name__}: {x}") from None

    def inline(self, e: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(self.frames) > _MAX_INLINE_DEPTH:
            raise self.error(e, "@cube.function calls nest too deep (recursion?)",
                             hint="kernels cannot recurse; write a loop")
        src: FunctionSource = fn.__cube_source__()
        fdef = src.fdef
        a = fdef.args
        if a.vararg or a.kwarg:
            raise src.error(fdef, "*args/**kwargs in a @cube.function")
        names = [p.arg for p in a.posonlyargs + a.args]
        kwnames = [p.arg for p in a.kwonlyargs]
        defaults = list(src.fn.__defaults__ or ())
        env: dict[str, Any] = {}
        if len(args) > len(names):
            raise self.error(e, f"{fdef.name}() takes {len(names)} positional arguments, got {len(args)}")
        for n, v in zip(names, args):
            env[n] = self.snapshot(e, v)
        for k, v in kwargs.items():
            if k not in names and k not in kwnames:
                raise self.error(e, f"{fdef.name}() got an unexpected keyword argument {k!r}")
            if k in env:
                raise self.error(e, f"{fdef.name}() got multiple values for {k!r}")
            env[k] = self.snapshot(e, v)
        first_default = len(names) - len(defaults)
        for i, n in enumerate(names):
            if n not in env:
                if i >= first_default:
                    env[n] = self.pyval(e, defaults[i - first_default])
                else:
                    raise self.error(e, f"{fdef.name}() is missing argument {n!r}")
        for n in kwnames:
            if n not in env:
                d = (src.fn.__kwdefaults__ or {}).get(n, MISSING)
                if d is MISSING:
                    raise self.error(e, f"{fdef.name}() is missing keyword argument {n!r}")
                env[n] = self.pyval(e, d)
        anns = src.annotations()
        for n, ann in anns.items():
            if n in env and (isinstance(ann, ComptimeSpec) or ann is Comptime) and _is_rt(env[n]):
                raise self.error(e, f"argument {n!r} of {fdef.name}() is comptime but got a runtime value")
            if n in env and isinstance(ann, Elem) and (_lit_kind(env[n]) is not None or _is_rt(env[n])):
                env[n] = self.coerce(e, env[n], Type(ann)) if _lit_kind(env[n]) is not None else env[n]
        self._ids += 1
        fr = _Frame(src, env, "function", label=self._ids, node=e)
        saved = self.block
        body: list[Any] = []
        self.block = body
        self.frames.append(fr)
        try:
            self.stmts(fdef.body)
        finally:
            self.frames.pop()
            self.block = saved
        if fr.exits:
            if any(map(ir.is_collective, body)):
                raise src.error(fdef, f"{fdef.name}() uses sync_cube/plane ops and returns from inside "
                                      "runtime control flow", hint="return only at the end of the function")
            if fr.result is not MISSING and fr.result is not None and fr.result_local is not None:
                saved = self.block
                self.block = body
                self.emit(ir.Assign(fr.result_local, self.assign_value(e, fr.result_local, fr.result)))
                self.block = saved
            self.emit(ir.Block(fr.label, body))
            return self.snapshot(e, fr.result_local) if fr.result_local is not None else None
        self.block.extend(body)
        return None if fr.result is MISSING else fr.result

    def array_method(self, e: ast.Call, m: _ArrayMethod, args: list[Any], kwargs: dict[str, Any]) -> Any:
        arr = m.array
        if kwargs:
            raise self.error(e, f"{m.name}() takes no keyword arguments")
        if m.name in ("len", "buffer_len", "rank", "line_size"):
            if args:
                raise self.error(e, f"{m.name}() takes no arguments")
            if m.name == "rank":
                return arr.rank if arr.kind == ARRAY else 1
            if m.name == "line_size":
                return arr.type.width
            if arr.kind != ARRAY:
                return arr.size
            return self.op("len", Type(u32), arr)
        if len(args) != 1:
            raise self.error(e, f"{m.name}(d) takes the dimension")
        if arr.kind != ARRAY:
            if m.name == "shape" and args[0] == 0:
                return arr.size * arr.type.width
            if m.name == "stride" and args[0] == 0:
                return 1
            raise self.error(e, f"{m.name}({args[0]!r}) of a shared or local array")
        d = args[0]
        if _lit_kind(d) == "int":
            if not 0 <= d < arr.rank:
                raise self.error(e, f"dimension {d} of an array of rank {arr.rank}")
            d = Const(d, Type(u32))
        else:
            d = self.index(e, d)
        return self.op(m.name, Type(u32), arr, d)

    def cast(self, node: ast.AST, v: Any, elem: Elem, bits: bool) -> Any:
        if _lit_kind(v) is not None and not bits:
            k = elem.kind
            if k == BOOL:
                return Const(bool(v), Type(elem))
            if elem.is_float:
                return Const(float(v), Type(elem))
            iv = int(v)
            lo, hi = elem.limits()
            if not lo <= iv <= hi:
                raise self.error(node, f"{v!r} does not fit {elem.name}")
            return Const(iv, Type(elem))
        v = self.materialize(node, v)
        if bits:
            if v.type.elem.bits != elem.bits or v.type.elem.kind == BOOL or elem.kind == BOOL:
                raise self.error(node, f"bitcast from {v.type.elem.name} to {elem.name} (sizes differ)")
            return self.op("bitcast", Type(elem, v.type.width), v)
        if v.type.elem is elem:
            return v
        return self.op("cast", Type(elem, v.type.width), v)

    def intrinsic(self, e: ast.Call, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        h = getattr(self, "i_" + name, None)
        if h is not None:
            return h(e, args, kwargs)
        if kwargs:
            raise self.error(e, f"cube.{name}() takes no keyword arguments")
        if name in K.MATH_UNARY or name in K.MATH_PRED:
            (x,) = self.nargs(e, name, args, 1)
            if _lit_kind(x) == "int":
                x = float(x)
            x = self.materialize(e, x)
            if not x.type.elem.is_float:
                raise self.error(e, f"cube.{name} of a {x.type} value",
                                 hint=f"cast to a float type first: cube.{name}(cube.cast(x, cube.f32))")
            if name in K.MATH_PRED:
                return self.op(name, Type(bool_, x.type.width), x)
            return self.op(name, x.type, x)
        if name in K.NUMERIC_UNARY:
            (x,) = self.nargs(e, name, args, 1)
            if _lit_kind(x) is not None:
                return abs(x) if name == "abs" else (x > 0) - (x < 0)
            x = self.materialize(e, x)
            if x.type.elem.kind == BOOL:
                raise self.error(e, f"cube.{name} of a bool")
            return self.op(name, x.type, x)
        if name in K.MATH_BINARY:
            a, b = self.nargs(e, name, args, 2)
            if _lit_kind(a) == "int" and not _is_rt(b):
                a = float(a)
            t, a, b = self.unify(e, a if _lit_kind(a) != "int" or _is_rt(b) else float(a), b)
            if not t.elem.is_float:
                raise self.error(e, f"cube.{name} of {t} values", hint="cast to a float type first")
            return self.op(name, t, a, b)
        if name in K.NUMERIC_BINARY:
            return self.minmax(e, name, args)
        if name in K.PLANE:
            return self.plane(e, name, args)
        if name in K.ATOMIC:
            return self.atomic(e, name, args)
        raise self.error(e, f"cube.{name} is not implemented")

    def nargs(self, e: ast.AST, name: str, args: list[Any], n: int) -> list[Any]:
        if len(args) != n:
            raise self.error(e, f"cube.{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        return args

    def minmax(self, e: ast.AST, name: str, args: list[Any]) -> Any:
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            args = list(args[0])
        if len(args) < 2:
            raise self.error(e, f"{name}() needs at least two values")
        acc = args[0]
        for b in args[1:]:
            if not _is_rt(acc) and not _is_rt(b):
                acc = (min if name == "min" else max)(acc, b)
                continue
            t, a2, b2 = self.unify(e, acc, b)
            if t.elem.kind == BOOL:
                raise self.error(e, f"{name}() of bools", hint="use & / | for bools")
            acc = self.op(name, t, a2, b2)
        return acc

    def i_fma(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        a, b, c = self.nargs(e, "fma", args, 3)
        t, a, b = self.unify(e, a, b)
        t2, ab, c = self.unify(e, self.op("copy", t, a) if not _is_rt(a) else a, c)
        if not t2.elem.is_float:
            raise self.error(e, "cube.fma of non-float values")
        return self.op("fma", Type(t2.elem, max(t.width, t2.width)), a, b, c)

    def i_clamp(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        x, lo, hi = self.nargs(e, "clamp", args, 3)
        return self.minmax(e, "max", [self.minmax(e, "min", [x, hi]), lo])

    def i_select(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        c, a, b = self.nargs(e, "select", args, 3)
        if not _is_rt(c):
            return a if c else b
        c = self.materialize(e, c)
        if c.type.elem.kind != BOOL:
            raise self.error(e, "the condition of cube.select must be a bool", hint="compare: x > 0")
        t, a, b = self.unify(e, a, b)
        if c.type.width not in (1, t.width) and t.width != 1:
            raise self.error(e, "cube.select with condition and values of different line widths")
        return self.op("select", Type(t.elem, max(t.width, c.type.width)), c, a, b)

    def i_cast(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, t = self.nargs(e, "cast", args, 2)
        return self.cast(e, v, self.resolve_elem(e, t), bits=False)

    def i_bitcast(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, t = self.nargs(e, "bitcast", args, 2)
        if _lit_kind(v) is not None:
            v = self.materialize(e, v)
        return self.cast(e, v, self.resolve_elem(e, t), bits=True)

    def i_line(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, w = self.nargs(e, "line", args, 2)
        if _is_rt(w) or w not in self.target.line_widths:
            raise self.error(e, f"line width must be a comptime value in {self.target.line_widths}")
        v = self.materialize(e, v)
        if v.type.width != 1:
            raise self.error(e, "cube.line(value, n) takes a scalar value")
        return v if w == 1 else self.op("line_fill", Type(v.type.elem, w), v)

    def _line_reduce(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        (v,) = self.nargs(e, name, args, 1)
        v = self.materialize(e, v)
        if v.type.width == 1:
            return v
        if v.type.elem.kind == BOOL:
            raise self.error(e, f"cube.{name} of a bool line")
        return self.op(name, v.type.scalar(), v)

    def i_line_sum(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_sum", args)

    def i_line_prod(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_prod", args)

    def i_line_max(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_max", args)

    def i_line_min(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_min", args)

    def i_sync_cube(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> None:
        self.nargs(e, "sync_cube", args, 0)
        self.emit(ir.Barrier())
        return None

    def _memory(self, e: ast.Call, name: str, kind: str, args: list[Any], kw: dict[str, Any]) -> Var:
        if len(args) == 3 and "line" not in kw:
            kw = {"line": args[2]}
            args = args[:2]
        elem, size = self.nargs(e, name, args, 2)
        line = kw.pop("line", 1)
        if kw:
            raise self.error(e, f"cube.{name}() got unexpected keywords {sorted(kw)}")
        elem = self.resolve_elem(e, elem)
        if _is_rt(size) or _lit_kind(size) != "int" or size <= 0:
            raise self.error(e, f"the size of cube.{name} must be a positive comptime int, got {_describe(size)}",
                             hint="sizes are known when the kernel is compiled: use cube.CUBE_DIM or a "
                                  "cube.Comptime parameter")
        if _is_rt(line) or line not in self.target.line_widths:
            raise self.error(e, f"line width must be a comptime value in {self.target.line_widths}")
        v = self.new_var(kind, Type(elem, line), name="sm" if kind == SHARED else "la", size=size)
        if kind == SHARED:
            total = sum(s.size * s.type.width * s.type.elem.size for s in self.shared) + size * line * elem.size
            if total > self.target.max_shared_bytes:
                raise self.error(e, f"shared memory of {total} bytes exceeds the target's "
                                    f"{self.target.max_shared_bytes}")
            self.shared.append(v)
        else:
            self.local_arrays.append(v)
        return v

    def i_SharedMemory(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Var:
        return self._memory(e, "SharedMemory", SHARED, args, dict(kw))

    def i_LocalArray(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Var:
        return self._memory(e, "LocalArray", LOCAL_ARRAY, args, dict(kw))

    def i_range(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        raise self.error(e, "cube.range() outside a for statement", hint="for i in cube.range(n): ...")

    def i_elem_of(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Elem:
        (v,) = self.nargs(e, "elem_of", args, 1)
        if _is_array(v):
            return v.type.elem
        return self.materialize(e, v).type.elem

    def i_comptime(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        (v,) = self.nargs(e, "comptime", args, 1)
        if _is_rt(v) or _is_array(v):
            raise self.error(e, "cube.comptime() of a runtime value")
        return v

    def plane(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        if name == "plane_elect":
            self.nargs(e, name, args, 0)
            return self.op(name, Type(bool_))
        nin = 2 if name in ("plane_broadcast", "plane_shuffle", "plane_shuffle_xor") else 1
        args = self.nargs(e, name, args, nin)
        v = self.materialize(e, args[0])
        k = v.type.elem.kind
        if name in ("plane_all", "plane_any"):
            if k != BOOL:
                raise self.error(e, f"cube.{name} of a {v.type} value", hint="pass a condition: x > 0")
        elif name not in ("plane_broadcast", "plane_shuffle", "plane_shuffle_xor") and k == BOOL:
            raise self.error(e, f"cube.{name} of bools", hint="use plane_any / plane_all")
        if nin == 2:
            lane = self.index(e, args[1])
            return self.op(name, v.type, v, lane)
        return self.op(name, v.type, v)

    def atomic(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        arr, idx, v = self.nargs(e, name, args, 3)
        if not _is_array(arr) or arr.kind == LOCAL_ARRAY:
            raise self.error(e, f"cube.{name} needs a global or shared array", hint=f"cube.{name}(out, i, v)")
        if arr.type.width != 1:
            raise self.error(e, f"cube.{name} on an array of lines")
        if arr.type.elem.kind == BOOL or arr.type.elem.bits < 32:
            raise self.error(e, f"cube.{name} on {arr.type.elem.name} (atomics need 32- or 64-bit elements)")
        v = self.coerce(e, v, arr.type) if not (_is_rt(v) and v.type is not None) else v
        if v.type.elem is not arr.type.elem or v.type.width != 1:
            raise self.error(e, f"cube.{name} of a {v.type} value into an array of {arr.type}")
        return self.op(name, arr.type, arr, self.index(e, idx), v)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _describe(v: Any) -> str:
    if type(v) is Var:
        return {ARRAY: "an array", SHARED: "a shared array", LOCAL_ARRAY: "a local array"}.get(
            v.kind, f"a {v.type} value")
    if type(v) is Const:
        return f"a {v.type} constant"
    if isinstance(v, _ArrayMethod):
        return f"the method {v.name}"
    return repr(v) if len(repr(v)) < 60 else type(v).__name__


# Python builtins and what they mean in a kernel
def _b_len(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if len(args) == 1 and _is_array(args[0]):
        return x.array_method(e, _ArrayMethod(args[0], "len"), [], {})
    if any(_is_rt(a) for a in args):
        raise x.error(e, "len() of a runtime value")
    return len(*args)


def _b_minmax(name: str) -> Any:
    def h(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        if not any(_is_rt(a) for a in args) and not (len(args) == 1 and any(_is_rt(a) for a in args[0])):
            return (min if name == "min" else max)(*args, **kw)
        return x.minmax(e, name, args)
    return h


def _b_abs(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    return x.intrinsic(e, "abs", args, kw)


def _b_conv(elem: Elem) -> Any:
    def h(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        if len(args) == 1 and not _is_rt(args[0]):
            return {"f32": float, "i32": int, "bool_": bool}[elem.name](args[0])
        (v,) = x.nargs(e, elem.name, args, 1)
        return x.cast(e, v, elem, bits=False)
    return h


def _b_round(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if not any(_is_rt(a) for a in args):
        return round(*args)
    return x.intrinsic(e, "round", args, kw)


def _b_pow(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    a, b = x.nargs(e, "pow", args, 2)
    return x.binary(e, "pow", a, b)


def _b_range(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if any(_is_rt(a) for a in args):
        raise x.error(e, "range() with runtime bounds outside a for statement",
                      hint="write the loop: for i in range(n): ...")
    return range(*args)


def _b_print(x: Expander, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> None:
    if any(_is_rt(a) for a in args):
        raise x.error(e, "print() of a runtime value", hint="kernels have no output but arrays")
    print(*args, **kw)  # comptime: prints while the kernel expands
    return None


_PY_BUILTINS: dict[Any, Any] = {
    builtins.len: _b_len, builtins.min: _b_minmax("min"), builtins.max: _b_minmax("max"),
    builtins.abs: _b_abs, builtins.float: _b_conv(f32), builtins.int: _b_conv(i32),
    builtins.bool: _b_conv(bool_), builtins.round: _b_round, builtins.pow: _b_pow,
    builtins.range: _b_range, builtins.print: _b_print,
}
_ = (UINT, math)


def expand_kernel(src: FunctionSource, params: list[ParamSpec], sigs: list[ArgSig], target: Target,
                  cube_dim: tuple[int, int, int], bindings: dict[ElemVar, Elem], kernel_name: str,
                  entry: str) -> ir.KernelIr:
    """The IR of one specialisation of a kernel."""
    return Expander(target, cube_dim, bindings).expand_kernel(src, params, sigs, kernel_name, entry)
