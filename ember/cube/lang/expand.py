"""``@cube`` functions -> kernel IR, by walking the function's AST.

One class over ~780 lines: the ``Expander``'s statement walk, its names and frames; expressions,
control flow and calls are its mixins (exprs.py, control.py, calls.py), values and intrinsics
their own modules.

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
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ir
from ..ir import ARRAY, LOCAL, SCALAR, SSA, Const, Type, Var
from ..kernel_id import ArgSig, flat_args
from ..types import BOOL, ArraySpec, Comptime, ComptimeSpec, Elem, ElemVar, SequenceSpec, bool_, u32
from . import intrinsics as K
from .calls import Calls
from .control import ControlFlow
from .errors import CubeSyntaxError
from .exprs import _ARITH, Expressions
from .source import MISSING, FunctionSource
from .values import (
    DEFAULT,
    UNSUPPORTED,
    WIDTHS,
    Frame,
    LoopCtx,
    Undefined,
    describe,
    is_array,
    is_rt,
    lit_kind,
)

__all__ = ["Target", "expand_kernel", "kernel_params", "ParamSpec", "Expander"]


@dataclass(frozen=True)
class Target:
    """What the compiler's target can do; kernels read it as comptime values."""

    name: str = "c"
    plane_size: int = 32
    line_widths: tuple[int, ...] = WIDTHS
    max_shared_bytes: int = 1 << 20


@dataclass(frozen=True)
class ParamSpec:
    """A kernel parameter as its annotation declares it: "array", "scalar", "sequence" or "comptime"."""

    name: str
    kind: str
    spec: Any  # ArraySpec | Elem | ElemVar | ComptimeSpec
    default: Any = MISSING


def kernel_params(src: FunctionSource) -> list[ParamSpec]:
    """Parse a kernel signature from its annotations (every parameter must have one)."""
    fdef = src.fdef
    a = fdef.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise src.error(
            fdef,
            "kernel parameters must be plain named parameters",
            hint="list every argument explicitly: def k(x: cube.Array[cube.f32], n: cube.u32)",
        )
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
            raise src.error(
                node,
                f"kernel parameter {name!r} has no annotation",
                hint=f"annotate it: {name}: cube.Array[cube.f32], {name}: cube.f32 or "
                f"{name}: cube.Comptime[int]",
            )
        if isinstance(ann, ArraySpec):
            kind = "array"
        elif isinstance(ann, (Elem, ElemVar)):
            kind = "scalar"
        elif isinstance(ann, SequenceSpec):
            kind = "sequence"
        elif isinstance(ann, ComptimeSpec) or ann is Comptime:
            kind = "comptime"
            ann = ann if isinstance(ann, ComptimeSpec) else ComptimeSpec(None)
        else:
            raise src.error(
                node,
                f"kernel parameter {name!r} has annotation {ann!r}, which the kernel language does not know",
                hint="use cube.Array[E], cube.Array[cube.Line[E]], a scalar type such as "
                "cube.f32 / cube.Float, cube.Sequence[...] or cube.Comptime[...]",
            )
        if default is not MISSING and kind != "comptime":
            raise src.error(node, f"only comptime parameters may have defaults ({name!r})")
        out.append(ParamSpec(name, kind, ann, default))
    return out


# --------------------------------------------------------------------------- helper objects


class Expander(ControlFlow, Expressions, Calls):
    def __init__(self, target: Target, cube_dim: tuple[int, int, int], bindings: dict[ElemVar, Elem]) -> None:
        self.target = target
        self.cube_dim = cube_dim
        self.bindings = bindings
        self.block: list[Any] = []
        self.frames: list[Frame] = []
        self.shared: list[Var] = []
        self.local_arrays: list[Var] = []
        self.locals: list[Var] = []
        #: cubes per multiprocessor the kernel asked for (``cube.occupancy``)
        self.min_cubes = 1
        self._ids = 0
        # comptime lists/dicts built by the kernel: id -> (object, runtime depth it was made at)
        self.containers: dict[int, tuple[Any, int]] = {}

    # ---------------------------------------------------------------- basics
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def error(self, node: ast.AST | None, what: str, hint: str = "") -> CubeSyntaxError:
        return self.frame.src.error(node, what, hint)

    def rt_depth(self) -> int:
        """Runtime control structures (if/loops) open around this point, inlined calls included."""
        return sum(f.depth for f in self.frames)

    def made_container(self, obj: Any) -> Any:
        self.containers[id(obj)] = (obj, self.rt_depth())
        return obj

    def check_mutable(self, node: ast.AST, obj: Any) -> None:
        """A comptime list/dict changes at expansion, so it may change only under the runtime
        control flow it was made in (an append under a runtime ``if`` would happen whatever
        the condition; in a runtime loop, once instead of per iteration)."""
        rec = self.containers.get(id(obj))
        made = rec[1] if rec is not None and rec[0] is obj else 0
        if self.rt_depth() != made:
            kind = type(obj).__name__
            raise self.error(
                node,
                f"changing a comptime {kind} inside a runtime if/loop it was not created in",
                hint=f"the {kind} exists only while the kernel expands, so the change cannot depend on "
                f"run-time conditions: create the {kind} inside the same block, or choose values with "
                "a variable (v = a if c else b) or cube.select",
            )

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
                raise self.error(
                    node,
                    f"{e!r} is not bound in this kernel",
                    hint=f"use {e!r} in the type of a kernel parameter, so a launch binds it",
                )
            return b
        from ... import dtype as dt

        if isinstance(e, dt.DType):
            from ..types import elem_of_dtype

            return elem_of_dtype(e)
        raise self.error(
            node, f"{e!r} is not an element type", hint="use cube.f32, cube.i32, cube.Float, ..."
        )

    def type_of(self, v: Any) -> Type | None:
        """Type of a runtime operand; None for a literal or a weak local not yet typed."""
        return v.type if type(v) in (Var, Const) else None

    def weak_kind(self, v: Any) -> str:
        k = lit_kind(v)
        return k if k is not None else v.weak

    def fix(self, node: ast.AST, var: Var, t: Type) -> None:
        """Give a weak local its type (at its first typed use)."""
        k = var.weak
        e = t.elem
        if (
            (k == "float" and not e.is_float)
            or (k == "bool" and e.kind != BOOL)
            or (k == "int" and e.kind == BOOL)
        ):
            raise self.error(
                node,
                f"{var.name!r} was set from a {k} literal but is used as {t}",
                hint=f"give it its type where you set it, e.g. {var.name} = cube.{e.name}(...)",
            )
        var.type = t

    def lit(self, node: ast.AST, value: Any, elem: Elem) -> Any:
        """A Python literal converted to ``elem`` (checked)."""
        k = lit_kind(value)
        if elem.kind == BOOL:
            if k != "bool":
                raise self.error(node, f"{value!r} used as a bool", hint="compare explicitly, e.g. x != 0")
            return value
        if k == "float":
            if not elem.is_float:
                raise self.error(
                    node,
                    f"float literal {value!r} used with a {elem.name} value",
                    hint="cast the other side: cube.cast(x, cube.f32), or write an int",
                )
            return value
        if elem.is_float:
            return float(value)
        lo, hi = elem.limits()
        if not lo <= int(value) <= hi:
            raise self.error(
                node,
                f"literal {value!r} does not fit {elem.name} (range {lo}..{hi})",
                hint="use a wider or signed type (cast the other operand)",
            )
        return int(value)

    def coerce(self, node: ast.AST, v: Any, t: Type) -> Any:
        """``v`` as an operand of element type ``t.elem`` (literals and weak locals adapt)."""
        if lit_kind(v) is not None:
            return Const(self.lit(node, v, t.elem), Type(t.elem))
        if type(v) is Var and v.type is None:
            self.fix(node, v, t)
            return v
        if not is_rt(v):
            raise self.error(node, f"{describe(v)} is not a value a kernel can compute with")
        if v.type.elem is not t.elem:
            raise self.error(
                node,
                f"mixing {v.type.elem.name} and {t.elem.name} values",
                hint=f"cast one side: cube.cast(x, cube.{t.elem.name}) (the kernel "
                "language does not promote types implicitly)",
            )
        return v

    def unify(self, node: ast.AST, a: Any, b: Any) -> tuple[Type, Any, Any]:
        ta, tb = self.type_of(a), self.type_of(b)
        if ta is None and tb is None:
            kinds = {self.weak_kind(a), self.weak_kind(b)}
            k = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
            t = Type(DEFAULT[k])
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
            raise self.error(
                node,
                f"mixing {ta} and {tb} values",
                hint=f"cast one side, e.g. cube.cast(x, cube.{ta.elem.name}) (no implicit "
                "promotion in kernels)",
            )
        if ta.width != tb.width and 1 not in (ta.width, tb.width):
            raise self.error(node, f"mixing lines of widths {ta.width} and {tb.width}")
        return Type(ta.elem, max(ta.width, tb.width)), a, b

    def unify_all(self, node: ast.AST, vals: list[Any], floats: bool = False) -> tuple[Type, list[Any]]:
        """One type for several operands (the first typed one decides; literals adapt, int
        literals count as floats where ``floats``); widths broadcast."""
        if floats:
            vals = [float(v) if lit_kind(v) == "int" else v for v in vals]
        typed = [v for v in vals if is_rt(v) and v.type is not None]
        if typed:
            t = Type(typed[0].type.elem)
        else:
            kinds = {self.weak_kind(v) for v in vals}
            t = Type(DEFAULT["float" if "float" in kinds else "int" if "int" in kinds else "bool"])
        out = [self.coerce(node, v, t) for v in vals]
        widths = {v.type.width for v in out} - {1}
        if len(widths) > 1:
            raise self.error(node, f"mixing lines of widths {sorted(widths)}")
        return Type(t.elem, max(widths, default=1)), out

    def materialize(self, node: ast.AST, v: Any) -> Any:
        """A runtime operand for ``v`` (literals get their default type)."""
        k = lit_kind(v)
        if k is not None:
            return Const(v, Type(DEFAULT[k]))
        if type(v) is Var and v.type is None:
            self.fix(node, v, Type(DEFAULT[v.weak]))
            return v
        if is_rt(v):
            return v
        raise self.error(node, f"{describe(v)} is not a value a kernel can compute with")

    def snapshot(self, node: ast.AST, v: Any) -> Any:
        """The current value of a mutable local (so later assignments do not change it)."""
        if type(v) is Var and v.kind == LOCAL:
            v = self.materialize(node, v)
            return self.op("copy", v.type, v)
        return v

    def to_cond(self, node: ast.AST, v: Any) -> Any:
        """A condition: Python truthiness for comptime values, a bool operand otherwise."""
        if not (is_rt(v)):
            if is_array(v):
                raise self.error(node, "an array used as a condition", hint="compare its len(): x.len() > 0")
            return bool(v)
        v = self.materialize(node, v)
        if v.type.width != 1:
            raise self.error(
                node,
                "a line used as a condition",
                hint="reduce it first (cube.line_max(...)) or test one lane: v[0]",
            )
        if v.type.elem.kind == BOOL:
            return v
        return self.op("ne", Type(bool_), v, Const(self.lit(node, 0, v.type.elem), Type(v.type.elem)))

    def index(self, node: ast.AST, v: Any) -> Any:
        k = lit_kind(v)
        if k == "int":
            if v < 0:
                raise self.error(
                    node, f"negative index {v}", hint="kernels index from the start of the array"
                )
            return Const(v, Type(u32))
        if k is not None:
            raise self.error(node, f"index {v!r} is not an int")
        v = self.materialize(node, v)
        if not v.type.elem.is_int or v.type.width != 1:
            raise self.error(
                node, f"index of type {v.type}", hint="indices are integers: cube.cast(i, cube.u32)"
            )
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
        if isinstance(v, Undefined):
            if v.reason:
                raise self.error(
                    node, f"{name!r} {v.reason}", hint="build it before the if, or read it inside the branch"
                )
            raise self.error(
                node,
                f"{name!r} is set only inside a runtime loop, so it has no value here",
                hint=f"assign {name} before the loop, then update it inside",
            )
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
        comptime = {
            "CUBE_DIM": x * y * z,
            "CUBE_DIM_X": x,
            "CUBE_DIM_Y": y,
            "CUBE_DIM_Z": z,
            "PLANE_DIM": self.target.plane_size,
        }
        if name in comptime:
            return comptime[name]
        return self.op("builtin", Type(u32), attrs=(name,))

    def bind(self, node: ast.AST, name: str, value: Any) -> None:
        env = self.frame.env
        cur = env.get(name, MISSING)
        if type(cur) is Var and cur.kind == LOCAL and (is_rt(value) or lit_kind(value) is not None):
            self.emit(ir.Assign(cur, self.assign_value(node, cur, value)))
            return
        value = self.snapshot(node, value)
        if type(value) is Var and value.kind == SSA and not value.name:
            value.name = name
        env[name] = value

    def assign_value(self, node: ast.AST, local: Var, value: Any) -> Any:
        """``value`` converted for ``Assign(local, ...)``."""
        if local.type is None:
            k = lit_kind(value)
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
        if lit_kind(value) is not None:
            return Const(self.lit(node, value, t.elem), Type(t.elem))
        if type(value) is Var and value.type is None:
            self.fix(node, value, t)
            return value
        if value.type.elem is not t.elem:
            raise self.error(
                node,
                f"{local.name!r} holds {t} but is assigned a {value.type} value",
                hint=f"cast: {local.name} = cube.cast(..., cube.{t.elem.name})",
            )
        if value.type.width not in (1, t.width):
            raise self.error(node, f"{local.name!r} holds {t} but is assigned a {value.type} value")
        return value

    # ---------------------------------------------------------------- entry points
    def expand_kernel(
        self, src: FunctionSource, params: list[ParamSpec], sigs: list[ArgSig], kernel_name: str, entry: str
    ) -> ir.KernelIr:
        env: dict[str, Any] = {}
        pirs: list[ir.ParamIr] = []
        buffer = 0
        seqs: dict[int, list[Any]] = {i: [] for i, s in enumerate(sigs) if s.kind == "sequence"}
        # ``param`` of a Var is its position among the flattened parameters (see flat_args)
        for flat, (i, k, s) in enumerate(flat_args(sigs)):
            name = params[i].name if k < 0 else f"{params[i].name}__{k}"
            if s.kind == "array":
                v = self.new_var(ARRAY, Type(s.elem, s.width), name, param=flat, rank=s.rank)
                pirs.append(ir.ParamIr(name, "array", v, buffer, s.alias_of))
                buffer += 1
            elif s.kind == "scalar":
                v = self.new_var(SCALAR, Type(s.elem), name, param=flat)
                pirs.append(ir.ParamIr(name, "scalar", v))
            else:
                pirs.append(ir.ParamIr(name, "comptime"))
                v = s.value
            if k < 0:
                env[name] = v
            else:
                seqs[i].append(v)
        for i, vs in seqs.items():
            env[params[i].name] = tuple(vs)  # a comptime tuple of arrays / scalars
        self.frames.append(Frame(src, env, "kernel"))
        body: list[Any] = []
        self.block = body
        self.stmts(src.fdef.body)
        self.frames.pop()
        self.finish_types()
        return ir.KernelIr(
            kernel_name,
            entry,
            pirs,
            body,
            self.cube_dim,
            self.shared,
            self.local_arrays,
            self.target.plane_size,
            self.min_cubes,
        )

    def finish_types(self) -> None:
        for v in self.locals:
            if v.type is None:
                v.type = Type(DEFAULT[v.weak or "int"])

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
            hint = UNSUPPORTED.get(type(s), "see the kernel language reference in ember/cube/__init__.py")
            raise self.error(
                s, f"'{type(s).__name__}' statements are not part of the kernel language", hint=hint
            )
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
            if is_rt(v):
                raise self.error(
                    s, f"{s.target.id!r} is declared comptime but its value is computed at run time"
                )
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
            if isinstance(base, (list, dict)):
                key = self.expr(t.slice)
                if is_rt(key):
                    raise self.error(
                        s,
                        f"augmented assignment to an element of a comptime {type(base).__name__} "
                        "with a runtime index",
                        hint="index it with comptime values, or use a cube.LocalArray",
                    )
                try:
                    cur = base[key]
                except Exception as x:
                    raise self.error(s, f"{type(x).__name__}: {x}") from None
                new = self.binary(s, op, cur, self.expr(s.value))
                if type(cur) is Var and cur.kind == LOCAL:
                    self.emit(ir.Assign(cur, self.assign_value(s, cur, new)))
                    return None
                self.check_mutable(s, base)
                base[key] = self.snapshot(s, new)
                return None
            if not is_array(base):
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
                raise self.error(
                    t, "unpacking a value that is not a comptime tuple", hint="assign the parts one by one"
                )
            if len(value) != len(t.elts):
                raise self.error(t, f"unpacking {len(value)} values into {len(t.elts)} names")
            vals = [self.snapshot(t, v) for v in value]
            for tt, v in zip(t.elts, vals):
                self.assign_target(tt, v)
        elif isinstance(t, ast.Subscript):
            base = self.expr(t.value)
            if is_array(base):
                idx = self.subscript_index(t, base, self.expr(t.slice))
                self.store(t, base, idx, value)
            elif isinstance(base, (list, dict)):
                key = self.expr(t.slice)
                if is_rt(key):
                    raise self.error(
                        t,
                        f"assigning to an element of a comptime {type(base).__name__} with a runtime index",
                        hint="its elements exist at expansion only: index it with comptime values (e.g. in "
                        "an unrolled loop), or use a cube.LocalArray to index at run time",
                    )
                cur = _element(base, key)
                if type(cur) is Var and cur.kind == LOCAL and (is_rt(value) or lit_kind(value) is not None):
                    self.emit(ir.Assign(cur, self.assign_value(t, cur, value)))  # a register: runtime
                    return
                self.check_mutable(t, base)
                try:
                    base[key] = self.snapshot(t, value)
                except Exception as x:
                    raise self.error(t, f"{type(x).__name__}: {x}") from None
            elif isinstance(base, tuple):
                raise self.error(t, "tuples cannot be changed", hint="build a list instead: vals = [a, b]")
            elif is_rt(base) and base.type is not None and isinstance(t.value, ast.Name):
                k = self.lane(t, base, self.expr(t.slice))
                v = self.coerce(t, value, base.type.scalar())
                # a width-1 line is a scalar: its only lane is itself
                self.bind(
                    t, t.value.id, v if base.type.width == 1 else self.op("lane_set", base.type, base, k, v)
                )
            else:
                raise self.error(t, f"cannot assign to an element of {describe(base)}")
        else:
            raise self.error(
                t,
                f"cannot assign to {type(t).__name__}",
                hint="assign to a name, an array element x[i], or a lane v[k]",
            )

    def store(self, node: ast.AST, arr: Var, idx: Any, value: Any) -> None:
        t = arr.type
        if lit_kind(value) is not None:
            value = Const(self.lit(node, value, t.elem), Type(t.elem))
        elif type(value) is Var and value.type is None:
            self.fix(node, value, t)
        elif not is_rt(value):
            raise self.error(node, f"cannot store {describe(value)} in an array")
        if value.type.elem is not t.elem:
            raise self.error(
                node,
                f"storing a {value.type} value into an array of {t}",
                hint=f"cast it: cube.cast(v, cube.{t.elem.name})",
            )
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
        if isinstance(value, (tuple, list)) or (value is not None and not (is_rt(value) or lit_kind(value))):
            raise self.error(
                s,
                "a @cube.function that returns from inside runtime control flow must return one value",
                hint="return at the end of the function instead",
            )
        if fr.result_local is None:
            fr.result_local = self.new_local(
                "ret", None, weak=self.weak_kind(value) if lit_kind(value) else "int"
            )
        if value is not None:
            self.emit(ir.Assign(fr.result_local, self.assign_value(s, fr.result_local, value)))
        fr.exits = True
        self.emit(ir.Exit(fr.label))
        return True

    def loop_ctx(self, s: ast.stmt) -> LoopCtx:
        fr = self.frame
        if not fr.loops:
            raise self.error(s, f"'{type(s).__name__.lower()}' outside a loop")
        ctx = fr.loops[-1]
        if not ctx.runtime and fr.depth != ctx.depth:
            raise self.error(
                s,
                f"'{type(s).__name__.lower()}' under a runtime condition inside a comptime-unrolled loop",
                hint="make the loop a runtime loop: for i in cube.range(n, unroll=False)",
            )
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
        if is_rt(test):
            raise self.error(
                s, "assert on a runtime value", hint="asserts are checked at expansion on comptime values"
            )
        if not test:
            msg = self.expr(s.msg) if s.msg is not None else "assertion failed"
            raise self.error(s, f"comptime assertion failed: {msg}")
        return None

    # ---------------------------------------------------------------- control flow


def _element(c: Any, key: Any) -> Any:
    try:
        return c[key]
    except Exception:
        return None


def expand_kernel(
    src: FunctionSource,
    params: list[ParamSpec],
    sigs: list[ArgSig],
    target: Target,
    cube_dim: tuple[int, int, int],
    bindings: dict[ElemVar, Elem],
    kernel_name: str,
    entry: str,
) -> ir.KernelIr:
    """The IR of one specialisation of a kernel."""
    return Expander(target, cube_dim, bindings).expand_kernel(src, params, sigs, kernel_name, entry)
