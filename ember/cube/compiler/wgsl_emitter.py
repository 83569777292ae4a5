"""The WGSL target's body lowering: statements, loads and stores (with the narrowed 64-bit
words and the bounds WGSL needs), loops and early exits of inlined functions (``_Frame``),
plane ops as subgroup calls. ``wgsl.py`` holds the target's tables and assembles the entry
point around what this pass renders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import ir
from ..ir import ARRAY, LOCAL_ARRAY, SHARED, Const, Type, Var
from ..types import BOOL, Elem
from .emitter import Emitter

if TYPE_CHECKING:
    from .wgsl import WgslCompiler

__all__ = ["WgslEmitter"]

#: element types stored packed in 32-bit words (WGSL has no 8- or 16-bit integer storage), with
#: their width in bits: four bytes or two halves to a word
_PACKED = {"u8": 8, "i8": 8, "bool_": 8, "i16": 16}


def wrap(name: str, expr: str, width: int) -> str:
    """``expr`` (a value of element ``name`` in its 32-bit register, ``width`` lanes, at most 4)
    wrapped to the element's width, as the C target's narrow types wrap; other elements as
    they are. ``extractBits`` rather than shifts: a shift of a constant that overflows is a
    shader-creation error in WGSL, and extractBits sign-extends the signed types."""
    if name == "u8":
        return f"({expr}) & {f'vec{width}<u32>(255u)' if width > 1 else '255u'}"
    if name in ("i8", "i16"):
        return f"extractBits({expr}, 0u, {_PACKED[name]}u)"
    return expr


class _Frame:
    """A target loop around the code being emitted: a real loop, or the one-pass loop that
    stands for an inlined function body with an early exit (``label``)."""

    __slots__ = ("label", "pending")

    def __init__(self, label: int | None) -> None:
        self.label = label  # None: a real loop
        self.pending: list[tuple[str, tuple[Any, ...]]] = []


class WgslEmitter(Emitter):
    def __init__(self, c: WgslCompiler, k: ir.KernelIr, dynamic: dict[tuple[str, int], int]) -> None:
        super().__init__(c, k, dynamic)
        self.c: WgslCompiler = c
        self.locals: set[Var] = set()
        self.flags: set[str] = set()
        self.frames: list[_Frame] = []
        self.tmp = 0
        # how each array parameter is bound: "packed" (u8/i8/bool bytes or i16 halves in atomic
        # words), "atomic"
        # (target of atomics: every access is atomic), or "plain"
        atomic_targets = {
            id(s.args[0]) for s in ir.walk(k.body) if isinstance(s, ir.Op) and s.op in ir.ATOMIC_OPS
        }
        self.mode: dict[int, str] = {}
        for p in k.arrays:
            e = p.var.type.elem
            self.mode[id(p.var)] = (
                "packed" if e.name in _PACKED else "atomic" if id(p.var) in atomic_targets else "plain"
            )
        for sm in k.shared:  # workgroup memory holds registers (u8/bool as u32, i8/i16 as i32): no packing
            self.mode[id(sm)] = "atomic" if id(sm) in atomic_targets else "plain"
        # Array parameters on one buffer (an output written into a donated input) are accessed
        # through ONE binding variable, the first one's: naga's output (SPIR-V without an
        # ``Aliased`` decoration, or GLSL) lets the driver assume two bindings never overlap and
        # move a load of one past a store to the other (llvmpipe does: an input was read after
        # the output that took its buffer had been stored). Each view keeps its own offset word,
        # and the runtime still binds every view (the layout has one entry per array). Views
        # whose bindings have different types (other line widths, atomic access) cannot share a
        # variable; no launcher donates a buffer across such views (``run_fused`` and the
        # unfused elementwise kernels give the output the donor's dtype, width and layout).
        self.binding: dict[int, str] = {}
        arrays = k.arrays
        for p in arrays:
            if p.alias_of is not None:
                root = arrays[p.alias_of]
                if self.binding_elem(root.var) == self.binding_elem(p.var):
                    self.binding[id(p.var)] = self.binding.get(id(root.var), c.name(root.var))
        for s in ir.walk(k.body):
            if isinstance(s, ir.Assign):
                self.locals.add(s.out)
            elif isinstance(s, ir.RangeLoop):
                self.locals.add(s.var)
        exits = {s.label for s in ir.walk(k.body) if isinstance(s, ir.Exit)}
        self.exits = exits

    def new_tmp(self, base: str) -> str:
        self.tmp += 1
        return f"t{self.tmp}_{base}"

    def local_type(self, v: Var) -> Type:
        if v.type is not None:
            return v.type
        from ..types import bool_, f32, i32

        return Type({"int": i32, "float": f32, "bool": bool_}.get(v.weak, i32))

    # ---------------------------------------------------------------- declarations
    def rtype(self, t: Type) -> str:
        return self.c.scalar_type(t.elem) if t.width == 1 else self.c.vector_type(t)

    def decl_const(self, t: Type, name: str, expr: str) -> str:
        return f"let {name}: {self.rtype(t)} = {expr};"

    def decl_var(self, t: Type, name: str) -> str:
        return f"var {name}: {self.rtype(t)};"

    def broadcast(self, t: Type, scalar: str) -> str:
        if t.width <= 4:
            return f"{self.rtype(t)}({scalar})"
        return f"{self.rtype(t)}({', '.join([scalar] * t.width)})"

    def zero(self, t: Type) -> str:
        return f"{self.rtype(t)}()"

    def shared_elem(self, v: Var) -> str:
        if self.mode[id(v)] == "atomic":
            return "atomic<u32>" if v.type.elem.is_float else f"atomic<{self.c.scalar_type(v.type.elem)}>"
        return self.rtype(v.type)

    def buffer_name(self, arr: Var) -> str:
        """The binding variable ``arr`` is accessed through (an aliased view's: the first view's
        on its buffer, see ``__init__``)."""
        return self.binding.get(id(arr)) or self.c.name(arr)

    def binding_elem(self, v: Var) -> str:
        t, mode = v.type, self.mode[id(v)]
        if mode == "packed":
            return "atomic<u32>"
        st = self.c.storage_type(t.elem)
        if mode == "atomic":
            return "atomic<u32>" if t.elem.is_float else f"atomic<{st}>"
        if t.width in (2, 4):
            return f"vec{t.width}<{st}>"
        return f"vec4<{st}>" if t.width > 4 and st != "f16" else st  # 8/16 lanes: 2/4 vec4 loads

    def meta_name(self, arr: Var, kind: str, d: int) -> str:
        base = self.c.name(arr)[2:]
        return f"m_{base}_len" if kind == "len" else f"m_{base}_{kind}{d}"

    def define(self, v: Var, expr: str) -> None:
        if v.type.width <= 4:  # u8/i8/i16 compute in 32 bits: wrap as uint8_t/int8_t/int16_t do
            expr = wrap(v.type.elem.name, expr, v.type.width)
        self.out(self.decl_const(v.type, self.c.name(v), expr))

    def lanes(self, v: Var, exprs: list[str]) -> None:
        """``v`` (a line) built from one expression per lane."""
        name = v.type.elem.name
        if name in ("u8", "i8", "i16"):
            exprs = [f"({wrap(name, e, 1)})" for e in exprs]
        self.out(self.decl_const(v.type, self.c.name(v), f"{self.rtype(v.type)}({', '.join(exprs)})"))

    def assigned(self, t: Type, value: Any) -> str:
        if isinstance(value, Const):
            return self.val(value, t)
        v = self.ref(value)
        if t.width > 1 and value.type.width == 1:
            return self.broadcast(t, v)
        return v

    # ---------------------------------------------------------------- statements
    def stmt(self, s: Any) -> None:
        o = self.out
        if isinstance(s, ir.Assign):
            t = self.local_type(s.out)
            o(f"{self.ref(s.out)} = {self.assigned(t, s.value)};")
        elif isinstance(s, ir.If):
            o.open(f"if ({self.val(s.cond)}) {{")
            self.stmts(s.then)
            if s.orelse:
                o.close("} else {")
                o.depth += 1
                self.stmts(s.orelse)
            o.close()
        elif isinstance(s, ir.RangeLoop):
            v, t = self.ref(s.var), self.local_type(s.var)
            o(f"{v} = {self.val(s.start, t)};")
            o.open("loop {")
            o(f"if (!({self.range_cond(s)})) {{ break; }}")
            self.frames.append(_Frame(None))
            self.stmts(s.body)
            o.open("continuing {")
            o(f"{v} = {v} + {self.val(s.step, t)};")
            o.close()
            self.close_frame()
        elif isinstance(s, ir.Loop):
            o.open("loop {")
            self.frames.append(_Frame(None))
            self.stmts(s.body)
            self.close_frame()
        elif isinstance(s, ir.Block):
            if s.label in self.exits:
                o.open("loop {")
                self.frames.append(_Frame(s.label))
                self.stmts(s.body)
                o("break;")
                self.close_frame()
            else:
                o.open("{")
                self.stmts(s.body)
                o.close()
        elif isinstance(s, ir.Break):
            self.jump(("break",))
        elif isinstance(s, ir.Continue):
            self.jump(("continue",))
        elif isinstance(s, ir.Exit):
            self.jump(("exit", s.label))
        else:
            super().stmt(s)

    def close_frame(self) -> None:
        f = self.frames.pop()
        self.out.close()
        for flag, action in f.pending:
            self.out(f"if ({flag}) {{ {flag} = false; {self.jump_code(action)} }}")

    def jump(self, action: tuple[Any, ...]) -> None:
        self.out(self.jump_code(action))

    def jump_code(self, action: tuple[Any, ...]) -> str:
        """Leave the innermost target loop towards ``action``'s target (a flag carries the
        rest of the way when the innermost loop is not the target)."""
        f = self.frames[-1]
        if action[0] == "exit" and f.label == action[1]:
            return "break;"
        if action[0] != "exit" and f.label is None:
            return f"{action[0]};"
        flag = f"j{len(self.flags)}_"
        self.flags.add(flag)
        f.pending.append((flag, action))
        return f"{flag} = true; break;"

    def range_cond(self, s: ir.RangeLoop) -> str:
        v, t = self.ref(s.var), self.local_type(s.var)
        end, step = self.val(s.end, t), s.step
        if isinstance(step, Const):
            return f"{v} < {end}" if step.value > 0 else f"{v} > {end}"
        if not t.elem.is_signed:
            return f"{v} < {end}"
        return f"select({v} > {end}, {v} < {end}, {self.val(step, t)} > 0i)"

    def emit_return(self) -> None:
        self.out("return;")

    def emit_collective(self, s: Any) -> None:
        if isinstance(s, ir.Barrier):
            self.out("workgroupBarrier();")
            return
        op, out, args = s.op, s.out, s.args
        if not self.c.subgroups:  # plane size 1: every unit is its own plane
            if op == "plane_elect":
                return self.define(out, "true")
            if op == "plane_exclusive_sum":
                return self.define(out, self.zero(out.type))
            return self.define(out, self.assigned(out.type, args[0]))
        tpl = self.c.PLANE[op]
        vals = [self.val(a) for a in args]
        if out.type.width > 4:
            return self.lanes(out, [tpl.format(a=f"{vals[0]}[{i}]", b=vals[1] if len(vals) > 1 else "")
                                    for i in range(out.type.width)])
        return self.define(out, tpl.format(a=vals[0] if vals else "", b=vals[1] if len(vals) > 1 else ""))

    # ---------------------------------------------------------------- ops
    def emit_op(self, s: ir.Op) -> None:
        op, out, args = s.op, s.out, s.args
        if op == "read":
            return self.load(out, args[0], args[1])
        if op in ir.ATOMIC_OPS:
            return self.atomic(s)
        if op == "line_fill":
            return self.define(out, self.broadcast(out.type, self.val(args[0])))
        if op in ("len", "shape", "stride"):
            arr = args[0]
            if op == "len" or isinstance(args[1], Const):
                d = 0 if op == "len" else int(args[1].value)
                expr = self.meta_name(arr, op, d)
            else:
                base = self.dynamic[(op, arr.param)]
                expr = f"info[2u * ({base}u + u32({self.val(args[1])}))]"
            return self.define(out, self.conv(expr, "u32", out.type))
        if op == "builtin":
            return self.define(out, self.conv(self.c.builtin_expr(s.attrs[0], self.k), "u32", out.type))
        if op == "lane_get":
            return self.define(out, f"{self.val(args[0])}[{self.val(args[1])}]")
        if op == "lane_set":
            tmp = self.new_tmp("set")
            self.out(f"var {tmp} = {self.val(args[0])};")
            self.out(f"{tmp}[{self.val(args[1])}] = {self.val(args[2], out.type.scalar())};")
            return self.define(out, tmp)
        if op in ("line_sum", "line_prod", "line_max", "line_min"):
            t = args[0].type
            comb = {"line_sum": "add", "line_prod": "mul", "line_max": "max", "line_min": "min"}[op]
            x = self.val(args[0])
            acc = f"{x}[0]"
            for i in range(1, t.width):
                tmp = self.new_tmp("fold")
                expr = self.table_expr(comb, t.scalar(), [t.scalar(), t.scalar()], [acc, f"{x}[{i}]"])
                self.out(self.decl_const(t.scalar(), tmp, expr))
                acc = tmp
            return self.define(out, acc)
        if op == "cast":
            return self.cast(out, args[0])
        if op == "bitcast":
            return self.define(out, f"bitcast<{self.rtype(out.type)}>({self.val(args[0])})")
        w = out.type.width
        types = [a.type if a.type is not None else out.type.scalar() for a in args]
        if w == 1 and all(t.width == 1 for t in types):
            return self.define(out, self.table_expr(op, out.type, types, [self.val(a) for a in args]))
        if w <= 4 and op in self.c.NATIVE_VECTOR:
            vals = []
            for i, (a, t) in enumerate(zip(args, types)):
                if op == "select" and i == 0:
                    vals.append(self.val(a))  # a scalar condition selects whole lines
                elif t.width == 1:
                    vals.append(self.broadcast(Type(t.elem, w), self.val(a, t)))
                else:
                    vals.append(self.val(a))
            vtypes = [Type(t.elem, w) for t in types]
            return self.define(out, self.table_expr(op, out.type, vtypes, vals))
        lanes = []
        for i in range(w):
            xs = [self.lane_of(a, t, i) for a, t in zip(args, types)]
            lanes.append(self.table_expr(op, out.type.scalar(), [t.scalar() for t in types], xs))
        return self.lanes(out, lanes)

    def lane_of(self, a: Any, t: Type, i: int) -> str:
        if isinstance(a, Const):
            if a.type is not None and a.type.width > 1 and isinstance(a.value, tuple):
                return self.c.literal(a.value[i], a.type.scalar())
            return self.val(a, t.scalar())
        return f"{self.ref(a)}[{i}]" if a.type.width > 1 else self.ref(a)

    def conv(self, expr: str, src: str, t: Type) -> str:
        dst = self.c.scalar_type(t.elem)
        return expr if dst == src else f"{dst}({expr})"

    def cast_scalar(self, src: Elem, dst: Elem, x: str) -> str:
        if dst.kind == BOOL:
            if src.kind == BOOL:
                return x
            if src.is_float:
                return f"em_ne_f32({x}, 0.0f)"
            return f"({x} != {self.c.literal(0, Type(src))})"
        d = self.c.scalar_type(dst)
        if src.kind == BOOL:
            return f"select({self.c.literal(0, Type(dst))}, {self.c.literal(1, Type(dst))}, {x})"
        if dst.name == "u8":
            return f"(u32(i32({x})) & 255u)" if src.is_float else f"(u32({x}) & 255u)"
        if dst.name == "f16":
            return f"f32(f16({x}))"
        return f"{d}({x})"

    def cast(self, out: Var, a: Any) -> None:
        src, dst, w = a.type.elem, out.type.elem, out.type.width
        if w == 1:
            return self.define(out, self.cast_scalar(src, dst, self.val(a)))
        return self.lanes(out, [self.cast_scalar(src, dst, self.lane_of(a, a.type, i)) for i in range(w)])

    # ---------------------------------------------------------------- memory
    def index(self, arr: Var, idx: Any) -> str:
        """The index of line ``idx`` of ``arr`` as a u32 expression (views add their offset)."""
        if isinstance(idx, Const):
            i = f"{int(idx.value)}u"
        else:
            i = self.ref(idx) if idx.type.elem.name == "u32" else f"u32({self.ref(idx)})"
        if arr.kind == ARRAY:
            return f"(o_{self.c.name(arr)[2:]} + {i})"
        return i

    def load(self, out: Var, arr: Var, idx: Any) -> None:
        t, e = arr.type, arr.type.elem
        name = self.buffer_name(arr)
        i = self.index(arr, idx)
        mode = self.mode.get(id(arr), "plain")
        if arr.kind == LOCAL_ARRAY or (arr.kind == SHARED and mode == "plain"):
            return self.define(out, f"{name}[{i}]")
        if mode == "packed":
            return self.load_packed(out, name, i, t)
        if mode == "atomic":
            x = f"atomicLoad(&{name}[{i}])"
            return self.define(out, f"bitcast<f32>({x})" if e.is_float else x)
        if t.width in (1, 2, 4):
            x = f"{name}[{i}]"
            return self.define(out, f"{self.rtype(t)}({x})" if e.name == "f16" else x)
        base = self.new_tmp("base")
        if e.name != "f16":  # whole vec4s: wide, aligned loads
            q = t.width // 4
            self.out(f"let {base} = {i} * {q}u;")
            quads = []
            for k in range(q):
                quads.append(self.new_tmp("q"))
                self.out(f"let {quads[-1]} = {name}[{base} + {k}u];")
            return self.lanes(out, [f"{quads[j // 4]}[{j % 4}]" for j in range(t.width)])
        self.out(f"let {base} = {i} * {t.width}u;")
        return self.lanes(out, [f"f32({name}[{base} + {j}u])" for j in range(t.width)])

    def load_packed(self, out: Var, name: str, i: str, t: Type) -> None:
        w = t.width
        is_bool = t.elem.kind == BOOL
        bits = _PACKED[t.elem.name]
        per = 32 // bits  # elements per word
        # a signed element sign-extends from its bits of the word (bitcast, then extractBits)
        signed = t.elem.kind != BOOL and t.elem.is_signed

        def field(word: str, off: str) -> str:
            if signed:
                return f"extractBits(bitcast<i32>({word}), {off}, {bits}u)"
            return f"extractBits({word}, {off}, {bits}u)"

        lanes: list[str] = []
        if w % per == 0:
            base = self.new_tmp("word")
            self.out(f"let {base} = {i} * {w // per}u;")
            for k in range(w // per):
                word = self.new_tmp("w")
                self.out(f"let {word} = atomicLoad(&{name}[{base} + {k}u]);")
                lanes += [field(word, f"{bits * j}u") for j in range(per)]
        else:
            e = self.new_tmp("elem")
            self.out(f"let {e} = {i} * {w}u;")
            for j in range(w):
                b = f"({e} + {j}u)"
                lanes.append(field(f"atomicLoad(&{name}[{b} / {per}u])", f"(({b} % {per}u) * {bits}u)"))
        if is_bool:
            lanes = [f"({x} != 0u)" for x in lanes]
        if w == 1:
            return self.define(out, lanes[0])
        return self.lanes(out, lanes)

    def store(self, arr: Var, idx: Any, value: Any) -> None:
        t, e = arr.type, arr.type.elem
        name = self.buffer_name(arr)
        i = self.index(arr, idx)
        mode = self.mode.get(id(arr), "plain")
        if arr.kind == LOCAL_ARRAY or (arr.kind == SHARED and mode == "plain"):
            self.out(f"{name}[{i}] = {self.assigned(t, value)};")
            return None
        if mode == "packed":
            return self.store_packed(name, i, t, value)
        v = self.assigned(t, value)
        if mode == "atomic":
            self.out(f"atomicStore(&{name}[{i}], {f'bitcast<u32>({v})' if e.is_float else v});")
            return None
        if t.width in (1, 2, 4):
            if e.name == "f16":
                v = f"f16({v})" if t.width == 1 else f"vec{t.width}<f16>({v})"
            self.out(f"{name}[{i}] = {v};")
            return None
        base = self.new_tmp("base")
        tmp = self.new_tmp("val")
        self.out(f"let {tmp} = {v};")
        if e.name != "f16":
            q = t.width // 4
            st = self.c.storage_type(e)
            self.out(f"let {base} = {i} * {q}u;")
            for k in range(q):
                lanes = ", ".join(f"{tmp}[{4 * k + j}]" for j in range(4))
                self.out(f"{name}[{base} + {k}u] = vec4<{st}>({lanes});")
            return None
        self.out(f"let {base} = {i} * {t.width}u;")
        for j in range(t.width):
            x = f"{tmp}[{j}]"
            self.out(f"{name}[{base} + {j}u] = {'f16(' + x + ')' if e.name == 'f16' else x};")
        return None

    def store_packed(self, name: str, i: str, t: Type, value: Any) -> None:
        w = t.width
        bits = _PACKED[t.elem.name]
        per, mask = 32 // bits, (1 << bits) - 1
        tmp = self.new_tmp("val")
        self.out(f"let {tmp} = {self.assigned(t, value)};")
        lanes = [f"{tmp}[{j}]" for j in range(w)] if w > 1 else [tmp]
        if t.elem.kind == BOOL:
            lanes = [f"select(0u, 1u, {x})" for x in lanes]
        elif t.elem.is_signed:  # the element's bits of its two's complement
            lanes = [f"(bitcast<u32>({x}) & {mask}u)" for x in lanes]
        else:
            lanes = [f"({x} & {mask}u)" for x in lanes]
        if w % per == 0:
            base = self.new_tmp("word")
            self.out(f"let {base} = {i} * {w // per}u;")
            for k in range(w // per):
                parts = [lanes[per * k + j] if j == 0 else f"({lanes[per * k + j]} << {bits * j}u)"
                         for j in range(per)]
                self.out(f"atomicStore(&{name}[{base} + {k}u], {' | '.join(parts)});")
            return
        e = self.new_tmp("elem")
        self.out(f"let {e} = {i} * {w}u;")
        for j in range(w):
            b = f"({e} + {j}u)"
            sh = f"(({b} % {per}u) * {bits}u)"
            self.out(f"atomicAnd(&{name}[{b} / {per}u], ~({mask}u << {sh}));")
            self.out(f"atomicOr(&{name}[{b} / {per}u], {lanes[j]} << {sh});")

    def atomic(self, s: ir.Op) -> None:
        arr, idx, v = s.args
        if self.mode.get(id(arr)) != "atomic" or arr.type.width != 1:
            raise NotImplementedError("WGSL atomics are implemented on i32/u32/f32 buffers and shared memory only")
        e = arr.type.elem
        p = f"&{self.buffer_name(arr)}[{self.index(arr, idx)}]"
        val = self.val(v, arr.type)
        if not e.is_float:
            return self.define(s.out, f"{self.c.ATOMIC[s.op]}({p}, {val})")
        old = self.new_tmp("old")
        r = self.new_tmp("cas")
        new = self.c.FLOAT_ATOMIC[s.op].format(o=f"bitcast<f32>({old})", v=val)
        self.out(f"var {old} = atomicLoad({p});")
        self.out.open("loop {")
        self.out(f"let {r} = atomicCompareExchangeWeak({p}, {old}, bitcast<u32>({new}));")
        self.out(f"if ({r}.exchanged) {{ break; }}")
        self.out(f"{old} = {r}.old_value;")
        self.out.close()
        return self.define(s.out, f"bitcast<f32>({old})")

