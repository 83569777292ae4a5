"""The statement and op walker shared by the C-style compilers (C now; CUDA C, WGSL next).

An ``Emitter`` renders one kernel body: every IR instruction becomes one declaration or
statement, every op expression comes from the compiler's tables. Defaults are C syntax
(CUDA C inherits them unchanged); a target overrides the hooks where it differs:

* naming and declaration: ``ref``, ``decl_const``, ``decl_var`` (WGSL: ``let``/``var``);
* lines: ``vector_type``, ``broadcast``, ``native_vector``, ``lanewise`` (C: GCC vectors and
  per-lane loops; CUDA: 16-byte structs; WGSL: ``vecN<T>``, where every op is lane-wise);
* memory: ``load``, ``store``, ``atomic``;
* control transfers: ``emit_break``/``emit_continue``/``emit_return``/``emit_exit``
  (C's phase model redirects them; WGSL has no goto);
* ``emit_collective``: barriers and plane ops (C: cube-level phases; GPUs: intrinsics).
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..ir import LOCAL_ARRAY, Const, Type, Var
from ..types import BOOL, Elem, bf16, f16
from .base import CStyleCompiler, Lines

__all__ = ["Emitter"]


class Emitter:
    def __init__(self, c: CStyleCompiler, k: ir.KernelIr, dynamic: dict[tuple[str, int], int]) -> None:
        self.c = c
        self.k = k
        self.dynamic = dynamic  # (shape|stride, param) -> info index of dim 0, for runtime dims
        self.out = Lines()
        self.loops: list[tuple[str, ...]] = []  # ("c",) for loops rendered as target loops

    # ---------------------------------------------------------------- values and declarations
    def ref(self, v: Var) -> str:
        return self.c.name(v)

    def val(self, a: Any, t: Type | None = None) -> str:
        """An operand as an expression; a constant takes ``t`` when it has no type of its own
        and broadcasts when ``t`` is a line."""
        if isinstance(a, Const):
            ty = a.type or t
            lit = self.c.literal(a.value, ty.scalar())
            if t is not None and t.width > 1 and (a.type is None or a.type.width == 1):
                return self.broadcast(t, lit)
            return lit
        return self.ref(a)

    def lane_val(self, a: Any, t: Type | None = None) -> str:
        v = self.val(a, None if isinstance(a, Const) and a.type is not None else t)
        w = a.type.width if a.type is not None else 1
        return f"{v}[l_]" if w > 1 else v

    def rtype(self, t: Type) -> str:
        return self.c.scalar_type(t.elem) if t.width == 1 else self.vector_type(t)

    def vector_type(self, t: Type) -> str:
        return self.c.vector_type(t)

    def broadcast(self, t: Type, scalar: str) -> str:
        raise NotImplementedError

    def zero(self, t: Type) -> str:
        return f"({self.vector_type(t)}){{0}}" if t.width > 1 else f"({self.c.scalar_type(t.elem)})0"

    def decl_const(self, t: Type, name: str, expr: str) -> str:
        return f"const {self.rtype(t)} {name} = {expr};"

    def decl_var(self, t: Type, name: str) -> str:
        return f"{self.rtype(t)} {name};"

    def define(self, v: Var, expr: str) -> None:
        """``v = expr`` where ``v`` is an SSA value (declared here)."""
        self.out(self.decl_const(v.type, self.c.name(v), expr))

    def declare(self, v: Var) -> str:
        """Declare ``v`` for a definition in several statements; returns its lvalue."""
        self.out(self.decl_var(v.type, self.c.name(v)))
        return self.ref(v)

    def meta_name(self, arr: Var, kind: str, d: int) -> str:
        base = self.c.name(arr)[2:]
        return f"m_{base}_len" if kind == "len" else f"m_{base}_{kind}{d}"

    def assigned(self, t: Type, value: Any) -> str:
        if isinstance(value, Const):
            return self.val(value, t)
        v = self.ref(value)
        if t.width > 1 and value.type.width == 1:
            return self.broadcast(t, v)
        return v

    # ---------------------------------------------------------------- statements
    def stmts(self, body: list[Any]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: Any) -> None:
        o = self.out
        if isinstance(s, ir.Op):
            if s.op in ir.PLANE_OPS:
                self.emit_collective(s)
            else:
                self.emit_op(s)
        elif isinstance(s, ir.Assign):
            o(f"{self.ref(s.out)} = {self.assigned(s.out.type, s.value)};")
        elif isinstance(s, ir.Store):
            self.store(s.array, s.index, s.value)
        elif isinstance(s, ir.If):
            o.open(f"if ({self.val(s.cond)}) {{")
            self.stmts(s.then)
            if s.orelse:
                o.close("} else {")
                o.depth += 1
                self.stmts(s.orelse)
            o.close()
        elif isinstance(s, ir.RangeLoop):
            v = self.ref(s.var)
            step = self.val(s.step, s.var.type)
            o.open(f"for ({v} = {self.val(s.start, s.var.type)}; {self.range_cond(s)}; {v} += {step}) {{")
            self.loops.append(("c",))
            self.stmts(s.body)
            self.loops.pop()
            o.close()
        elif isinstance(s, ir.Loop):
            o.open("for (;;) {")
            self.loops.append(("c",))
            self.stmts(s.body)
            self.loops.pop()
            o.close()
        elif isinstance(s, ir.Break):
            self.emit_break()
        elif isinstance(s, ir.Continue):
            self.emit_continue()
        elif isinstance(s, ir.Return):
            self.emit_return()
        elif isinstance(s, ir.Block):
            o.open("{")
            self.stmts(s.body)
            o.close()
            o(f"x{s.label}: ;")
        elif isinstance(s, ir.Exit):
            self.emit_exit(s.label)
        elif isinstance(s, ir.Barrier):
            self.emit_collective(s)
        else:  # pragma: no cover
            raise AssertionError(s)

    def range_cond(self, s: ir.RangeLoop) -> str:
        v, end, step = self.ref(s.var), self.val(s.end, s.var.type), s.step
        if isinstance(step, Const):
            return f"{v} < {end}" if step.value > 0 else f"{v} > {end}"
        if not s.var.type.elem.is_signed:
            return f"{v} < {end}"
        st = self.val(step)
        return f"({st} > 0 ? {v} < {end} : {v} > {end})"

    def emit_break(self) -> None:
        self.out("break;")

    def emit_continue(self) -> None:
        self.out("continue;")

    def emit_return(self) -> None:
        self.out("return;")

    def emit_exit(self, label: int) -> None:
        self.out(f"goto x{label};")

    def emit_collective(self, s: Any) -> None:
        raise NotImplementedError(f"{self.c.language} compiler: {s!r}")

    # ---------------------------------------------------------------- ops
    def native_vector(self, op: str, t: Type) -> bool:
        """Whether the op's template also works on line operands as they are."""
        return False

    def lanewise(self, out: Var, args: tuple[Any, ...], render: Any) -> None:
        """``out`` (a line) computed lane by lane: ``render`` maps lane operands to an expression."""
        tgt = self.declare(out)
        expr = render([self.lane_val(a) for a in args])
        self.out(f"for (int l_ = 0; l_ < {out.type.width}; ++l_) {tgt}[l_] = {expr};")

    def elementwise(self, out: Var, args: tuple[Any, ...], render: Any) -> None:
        if out.type.width == 1:
            self.define(out, render([self.val(a) for a in args]))
        else:
            self.lanewise(out, args, render)

    def cast_expr(self, src: Elem, dst: Elem, x: str) -> str:
        if dst.kind == BOOL:
            return f"({x} != 0)"
        if dst is f16:
            return f"em_round_f16((float)({x}))"
        if dst is bf16:
            return f"em_round_bf16((float)({x}))"
        if src.is_float and dst.is_int and dst.bits < 32:
            # float -> narrow int through int32, then wrap (numpy's and torch's CPU result for
            # values within int32): a direct conversion saturates on CUDA (cvt.rzi.s8)
            return f"({self.c.scalar_type(dst)})(int32_t)({x})"
        return f"({self.c.scalar_type(dst)})({x})"

    def bitcast_expr(self, out: Type, x: str) -> str:
        if out.width > 1:
            return f"({self.vector_type(out)})({x})"
        return f"EM_BITCAST({self.c.scalar_type(out.elem)}, {x})"

    def table_expr(self, op: str, out: Type, types: list[Type], vals: list[str]) -> str:
        return self.c.scalar_expr(op, out, types, vals)

    def emit_op(self, s: ir.Op) -> None:
        op, out, args = s.op, s.out, s.args
        if op == "read":
            return self.load(out, args[0], args[1])
        if op in ("len", "shape", "stride"):
            arr = args[0]
            if op == "len" or isinstance(args[1], Const):
                d = 0 if op == "len" else int(args[1].value)
                return self.define(out, self.meta_name(arr, op, d))
            base = self.dynamic[(op, arr.param)]
            return self.define(out, f"(uint32_t)info[{base} + {self.val(args[1])}]")
        if op == "builtin":
            return self.define(out, self.c.builtin_expr(s.attrs[0], self.k))
        if op in ir.ATOMIC_OPS:
            return self.atomic(s)
        if op == "lane_get":
            return self.define(out, f"{self.val(args[0])}[{self.val(args[1])}]")
        if op == "lane_set":
            tgt = self.declare(out)
            self.out(f"{tgt} = {self.val(args[0])};")
            self.out(f"{tgt}[{self.val(args[1])}] = {self.val(args[2], out.type.scalar())};")
            return None
        if op == "line_fill":
            return self.define(out, self.broadcast(out.type, self.val(args[0])))
        if op in ("line_sum", "line_prod", "line_max", "line_min"):
            t = args[0].type
            comb = {"line_sum": "add", "line_prod": "mul", "line_max": "max", "line_min": "min"}[op]
            tgt = self.declare(out)
            x = self.val(args[0])
            self.out(f"{tgt} = {x}[0];")
            expr = self.table_expr(comb, t.scalar(), [t.scalar(), t.scalar()], [tgt, f"{x}[l_]"])
            self.out(f"for (int l_ = 1; l_ < {t.width}; ++l_) {tgt} = {expr};")
            return None
        if op == "cast":
            src = args[0].type.elem
            return self.elementwise(out, args, lambda xs: self.cast_expr(src, out.type.elem, xs[0]))
        if op == "bitcast":
            return self.define(out, self.bitcast_expr(out.type, self.val(args[0])))
        types = [a.type for a in args]
        if (out.type.width == 1 and all(t.width == 1 for t in types)) or self.native_vector(op, out.type):
            return self.define(out, self.table_expr(op, out.type, types, [self.val(a) for a in args]))
        return self.lanewise(
            out, args, lambda xs: self.table_expr(op, out.type.scalar(), [t.scalar() for t in types], xs)
        )

    # ---------------------------------------------------------------- memory
    def ptr(self, arr: Var) -> str:
        return self.ref(arr) if arr.kind == LOCAL_ARRAY else self.c.name(arr)

    def load(self, out: Var, arr: Var, idx: Any) -> None:
        raise NotImplementedError

    def store(self, arr: Var, idx: Any, value: Any) -> None:
        raise NotImplementedError

    def atomic(self, s: ir.Op) -> None:
        raise NotImplementedError
