"""The C target's body lowering: the serial-cube phase model (``sync_cube`` and plane ops as
region boundaries, per-unit activity masks for control flow around them, per-unit arrays for
values that cross regions) and the element/line rendering of loads, stores, atomics and
lanewise ops. ``c.py`` holds the target's tables and assembles the exported function around
what this pass renders; its module docstring states the model.

One idea, over ~500 lines: the two rendering passes of one body (the first records where each
value is used, the second renders with that knowledge) share every method here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from .. import ir
from ..ir import ARRAY, LOCAL, LOCAL_ARRAY, SCALAR, SSA, Const, Type, Var
from ..types import BOOL, Elem, bf16, f16
from .base import Lines
from .c_lines import COMPARE, FLOAT_MINMAX, LIBM_CALL, byte_sized, vector_minmax
from .emitter import Emitter

if TYPE_CHECKING:
    from .c import CCompiler

__all__ = ["RegionEmitter"]

#: ops whose C operator also works on GCC vectors (mixed with a scalar operand too)
_NATIVE_VECTOR = frozenset({"add", "sub", "mul", "neg", "and", "or", "xor", "not", "shl", "shr", "copy"})

#: ops a region recomputes instead of storing per unit (pure and cheap)
_REMAT_OPS = frozenset(
    {
        "builtin",
        "len",
        "shape",
        "stride",
        "copy",
        "add",
        "sub",
        "mul",
        "floordiv",
        "mod",
        "shl",
        "shr",
        "and",
        "or",
        "xor",
        "min",
        "max",
        "neg",
        "not",
        "lnot",
        "land",
        "lor",
        "lt",
        "le",
        "gt",
        "ge",
        "eq",
        "ne",
        "cast",
        "select",
    }
)


class RegionEmitter(Emitter):
    """One rendering pass over the body, with the phase model. The first pass records in
    which regions each value is used; the second knows which values are per-unit arrays."""

    def lanewise(self, out: Var, args: tuple[Any, ...], render: Any) -> None:
        tgt = self.declare(out)
        expr = render([self.lane_val(a) for a in args])
        m = LIBM_CALL.match(expr)
        if m and out.type.elem.name in ("f32", "f64"):
            # one libm call per lane: a vector-math helper (libmvec's SIMD variant where the
            # toolchain found it, else the same per-lane loop), see ``vector_math``
            vt = self.vector_type(out.type)
            self.vmath.add((m.group(1), vt, self.c.scalar_type(out.type.elem), out.type.width))
            self.out(f"{tgt} = em_v_{m.group(1)}_{vt}({m.group(2)});")
            return
        mm = FLOAT_MINMAX.match(expr)
        if mm and len(args) == 2 and out.type.elem.name in ("f32", "f64"):
            # NaN-propagating max/min (numpy's maximum/minimum) as vector compares and a bit
            # select: GCC leaves the per-lane loop of em_max_* scalar (branches per lane)
            a, b = (self.val(x) for x in args)
            self.out(vector_minmax(mm.group(1), self.vector_type(out.type), tgt, a, b))
            return
        if out.type.elem.kind == BOOL and COMPARE.match(expr) and all(byte_sized(a) for a in args):
            # a comparison of byte-sized lanes: GCC 12 at -O3 vectorises the per-lane loop into
            # 0xFF lanes for true (it keeps the vector compare's -1); the native vector compare,
            # negated, is 1 for true by construction
            vexpr = render([self.val(a) for a in args])
            self.out(f"{tgt} = -({self.vector_type(out.type)})({vexpr});")
            return
        self.out(f"for (int l_ = 0; l_ < {out.type.width}; ++l_) {tgt}[l_] = {expr};")

    def __init__(
        self,
        c: CCompiler,
        k: ir.KernelIr,
        where: dict[tuple[str, int, int], int],
        dynamic: dict[tuple[str, int], int],
        phased: bool,
        has_ret: bool,
        cross: set[Var] | None,
        regions: dict[int, list[Var]],
    ) -> None:
        super().__init__(c, k, dynamic)
        self.c: CCompiler = c
        self.where = where
        self.phased = phased
        self.has_ret = has_ret
        self.cross_set: set[Var] = cross or set()
        self.regions = regions
        self.refs: dict[Var, set[int]] = defaultdict(set)
        self.forced: set[Var] = set()
        self.out.depth = 2
        self.region = -1
        self.n_regions = 0
        self.label = ""
        self.masks: list[str] = []
        #: checked mode: names of the arrays bounds tests report (index = the array's number)
        self.oob_names: list[str] = []
        self.vectors: dict[str, tuple[str, int]] = {}
        #: (libm function, vector type, C element type, width) of the vector-math helpers used
        self.vmath: set[tuple[str, str, str, int]] = set()
        self.storage_vectors: dict[str, tuple[str, int]] = {}
        self.nu = k.units
        # values recomputed in each region that reads them instead of stored per unit (pure,
        # cheap functions of the unit's position, uniforms and metadata): filled for pass 2
        self.remat: set[Var] = set()
        self.eligible: set[Var] = set()
        self.def_region: dict[Var, int] = {}
        self.refs_first: dict[Var, set[int]] = {}
        self.defs: dict[Var, ir.Op] = {
            i.out: i for i in ir.walk(k.body) if isinstance(i, ir.Op) and i.out is not None
        }

    # ---------------------------------------------------------------- bookkeeping
    def run(self) -> Lines:
        if self.phased:
            self.cube_block(self.k.body, None)
        else:
            self.unit_region(self.k.body, None)
        return self.out

    def cross(self) -> set[Var]:
        return {v for v, rs in self.refs.items() if len(rs) > 1} | self.forced

    def region_locals(self, cross: set[Var]) -> dict[int, list[Var]]:
        out: dict[int, list[Var]] = defaultdict(list)
        for v, rs in self.refs.items():
            if v.kind in (LOCAL, LOCAL_ARRAY) and v not in cross:
                for r in rs:
                    out[r].append(v)
        for r in out:
            out[r].sort(key=lambda v: v.id)
        return out

    def note(self, v: Var) -> None:
        if v.kind in (SSA, LOCAL, LOCAL_ARRAY):
            self.refs[v].add(self.region)

    def rematerializable(self) -> set[Var]:
        """Values used in several regions that are cheap to recompute: builtins, metadata and
        integer/bool arithmetic on them, constants and scalar parameters (never memory reads,
        which a barrier may change, nor locals). Keeps e.g. ``row = CUBE_POS_Y * T + UNIT_POS_Y``
        a register in every region instead of a per-unit array that blocks vectorisation."""
        ok: set[Var] = set()
        for v, op in sorted(self.defs.items(), key=lambda kv: kv[0].id):
            if v in self.forced or op.op not in _REMAT_OPS or v.type.width != 1:
                continue
            if all(
                isinstance(a, Const) or (isinstance(a, Var) and (a.kind in (SCALAR, ARRAY) or a in ok))
                for a in op.args
            ):
                ok.add(v)
        self.eligible = ok
        return {v for v in ok if len(self.refs.get(v, ())) > 1}

    # ---------------------------------------------------------------- hooks of the walker
    def ref(self, v: Var) -> str:
        self.note(v)
        name = self.c.name(v)
        return f"{name}_pu[u]" if v in self.cross_set else name

    def ref_at(self, v: Any, idx: str) -> str:
        """``v`` as seen by unit ``idx`` (cube-level plane code)."""
        if isinstance(v, Const) or v.kind == SCALAR:
            return self.val(v)
        self.note(v)
        self.forced.add(v)
        return f"{self.c.name(v)}_pu[{idx}]"

    def vector_type(self, t: Type) -> str:
        name = self.c.vector_type(t)
        self.vectors[name] = (self.c.scalar_type(t.elem) if t.elem.kind != BOOL else "uint8_t", t.width)
        return name

    def svt(self, t: Type) -> str:
        name = self.c.storage_vector_type(t)
        self.storage_vectors[name] = (self.c.storage_type(t.elem), t.width)
        return name

    def broadcast(self, t: Type, scalar: str) -> str:
        elem = self.c.scalar_type(t.elem) if t.elem.kind != BOOL else "uint8_t"
        return f"(({self.vector_type(t)}){{0}} + ({elem})({scalar}))"

    def native_vector(self, op: str, t: Type) -> bool:
        return op in _NATIVE_VECTOR or (op == "div" and t.elem.is_float)

    def define(self, v: Var, expr: str) -> None:
        self.def_region.setdefault(v, self.region)
        if v in self.cross_set:
            self.out(f"{self.ref(v)} = {expr};")
        else:
            self.note(v)
            super().define(v, expr)

    def declare(self, v: Var) -> str:
        if v not in self.cross_set:
            self.note(v)
            self.out(self.decl_var(v.type, self.c.name(v)))
        return self.ref(v)

    def emit_break(self) -> None:
        top = self.loops[-1]
        if top[0] == "c":
            return super().emit_break()
        _, ml, mc = top  # a cube-level loop: the unit leaves it
        self.out(f"{{ {ml}[u] = 0; {mc}[u] = 0; goto {self.label}; }}")
        return None

    def emit_continue(self) -> None:
        top = self.loops[-1]
        if top[0] == "c":
            return super().emit_continue()
        _, _, mc = top  # a cube-level loop: the unit sits out the rest of this iteration
        self.out(f"{{ {mc}[u] = 0; goto {self.label}; }}")
        return None

    def emit_return(self) -> None:
        # the unit's work ends: skip to the end of its region (and of every later one)
        self.out(f"{{ ret_u[u] = 1; goto {self.label}; }}" if self.has_ret else f"goto {self.label};")

    def emit_collective(self, s: Any) -> None:  # pragma: no cover - regions take them first
        raise AssertionError(f"{s!r} inside a unit loop")

    # ---------------------------------------------------------------- regions
    def new_region(self) -> int:
        self.region = self.n_regions
        self.n_regions += 1
        return self.region

    def active(self, mask: str | None) -> str:
        parts = []
        if mask:
            parts.append(f"{mask}[u]")
        if self.has_ret:
            parts.append("!ret_u[u]")
        return " && ".join(parts) if parts else "1"

    def open_units(self, rid: int, start: str = "0", end: str | None = None) -> int:
        """Open the loop over a cube's units; returns how many C loops to close.

        A 2-D/3-D cube is a nest ``uz > uy > ux`` (``UNIT_POS_X`` is the innermost induction
        variable: no div/mod per unit, and GCC can vectorise across x-units); a 1-D cube or a
        sub-range (a plane) is one loop over the linear ``u``."""
        x, y, z = self.k.cube_dim
        o = self.out
        if start != "0" or end is not None or (y == 1 and z == 1):
            o.open(f"for (uint32_t u = {start}; u < {end or f'{self.nu}u'}; ++u) {{")
            o("const uint32_t ux = u, uy = 0, uz = 0; (void)ux; (void)uy; (void)uz;")
            n = 1
        else:
            n = 0
            for name, extent in (("uz", z), ("uy", y)):
                if extent > 1:
                    o.open(f"for (uint32_t {name} = 0; {name} < {extent}u; ++{name}) {{")
                    n += 1
            o.open(f"for (uint32_t ux = 0; ux < {x}u; ++ux) {{")
            n += 1
            consts = [f"{name} = 0" for name, extent in (("uz", z), ("uy", y)) if extent == 1]
            if consts:
                o(f"const uint32_t {', '.join(consts)};")
            o(f"const uint32_t u = ux + {x}u * (uy + {y}u * uz); (void)u;")
        for v in self.regions.get(rid, ()):
            if v.kind == LOCAL_ARRAY:
                self.out(f"{self.c.storage_type(v.type.elem)} {self.c.name(v)}[{v.size * v.type.width}];")
            else:
                zero = "{0}" if v.type.width > 1 else "0"
                self.out(f"{self.rtype(v.type)} {self.c.name(v)} = {zero};")
        if start == "0" and end is None:
            self.rematerialize(rid)
        return n

    def rematerialize(self, rid: int) -> None:
        """Recompute here the rematerialisable values this region reads but did not define."""
        need = {v for v in self.remat if rid in self.refs_first.get(v, ()) and self.def_region.get(v) != rid}
        todo = list(need)
        while todo:  # with the values they are computed from
            for a in self.defs[todo.pop()].args:
                if isinstance(a, Var) and a in self.eligible and a not in need:
                    need.add(a)
                    todo.append(a)
        for v in sorted(need, key=lambda v: v.id):
            self.emit_op(self.defs[v])

    def close_units(self, n: int) -> None:
        for _ in range(n):
            self.out.close()

    def unit_region(self, stmts: list[Any], mask: str | None) -> None:
        rid = self.new_region()
        label = f"r{rid}"
        n = self.open_units(rid)
        guard = self.active(mask)
        if guard != "1":
            self.out(f"if (!({guard})) continue;")
        saved, self.label = self.label, label
        self.stmts(stmts)
        self.label = saved
        self.out(f"{label}: ;")
        self.close_units(n)
        self.region = -1

    def new_mask(self) -> str:
        m = f"m{len(self.masks)}"
        self.masks.append(m)
        return m

    def cube_block(self, stmts: list[Any], mask: str | None) -> None:
        run: list[Any] = []
        for s in stmts:
            if ir.is_collective(s):
                if run:
                    self.unit_region(run, mask)
                    run = []
                self.collective(s, mask)
            else:
                run.append(s)
        if run:
            self.unit_region(run, mask)

    def collective(self, s: Any, mask: str | None) -> None:
        if isinstance(s, ir.Barrier):
            self.out("/* sync_cube: region boundary */")
        elif isinstance(s, ir.Op):
            self.plane_op(s, mask)
        elif isinstance(s, ir.If):
            mt, me = self.new_mask(), self.new_mask() if s.orelse else None
            rid = self.new_region()
            n = self.open_units(rid)
            self.out(f"const uint8_t act_ = {self.active(mask)};")
            self.out(f"const uint8_t c_ = act_ && ({self.val(s.cond)});")
            self.out(f"{mt}[u] = c_;" + (f" {me}[u] = act_ && !c_;" if me else ""))
            self.close_units(n)
            self.region = -1
            self.cube_block(s.then, mt)
            if me:
                self.cube_block(s.orelse, me)
        elif isinstance(s, (ir.RangeLoop, ir.Loop)):
            self.masked_loop(s, mask)
        elif isinstance(s, ir.Block):
            self.cube_block(s.body, mask)
        else:  # pragma: no cover - is_collective admits nothing else
            raise AssertionError(s)

    def masked_loop(self, s: ir.RangeLoop | ir.Loop, mask: str | None) -> None:
        ml, mc = self.new_mask(), self.new_mask()
        rng = isinstance(s, ir.RangeLoop)
        rid = self.new_region()
        n = self.open_units(rid)
        self.out(f"{ml}[u] = {self.active(mask)};")
        if rng:
            self.out(f"if ({ml}[u]) {self.ref(s.var)} = {self.val(s.start)};")
        self.close_units(n)
        self.out.open("for (;;) {")
        self.out("uint8_t any_ = 0;")
        rid = self.new_region()
        n = self.open_units(rid)
        if rng:
            self.out(f"if ({ml}[u]) {ml}[u] = {self.range_cond(s)};")
        ret = " && !ret_u[u]" if self.has_ret else ""
        self.out(f"{mc}[u] = {ml}[u]{ret};")
        self.out(f"any_ |= {mc}[u];")
        self.close_units(n)
        self.region = -1
        self.out("if (!any_) break;")
        self.loops.append(("masked", ml, mc))
        self.cube_block(s.body, mc)
        self.loops.pop()
        if rng:
            rid = self.new_region()
            n = self.open_units(rid)
            self.out(f"if ({ml}[u]{ret}) {self.ref(s.var)} += {self.val(s.step, s.var.type)};")
            self.close_units(n)
            self.region = -1
        self.out.close()

    def plane_op(self, s: ir.Op, mask: str | None) -> None:
        P, nu = self.k.plane_size, self.nu
        op, out, args = s.op, s.out, s.args
        rid = self.new_region()
        self.out.open(f"for (uint32_t p0_ = 0; p0_ < {nu}u; p0_ += {P}u) {{")
        self.out(f"const uint32_t p1_ = p0_ + {P}u < {nu}u ? p0_ + {P}u : {nu}u;")
        act = self.active(mask)
        dst = self.ref_at(out, "u")
        if op in ("plane_sum", "plane_prod", "plane_max", "plane_min", "plane_all", "plane_any"):
            t = out.type
            self.out(f"{self.rtype(t)} acc_; uint8_t have_ = 0;")
            self.open_units(rid, "p0_", "p1_")
            self.out(f"if (!({act})) continue;")
            self.out(f"if (!have_) {{ acc_ = {self.ref_at(args[0], 'u')}; have_ = 1; }}")
            comb = {
                "plane_sum": "add",
                "plane_prod": "mul",
                "plane_max": "max",
                "plane_min": "min",
                "plane_all": "land",
                "plane_any": "lor",
            }[op]
            self.out("else {")
            self.combine(comb, t, "acc_", "acc_", self.ref_at(args[0], "u"))
            self.out("}")
            self.out.close()
            self.open_units(rid, "p0_", "p1_")
            self.out(f"if ({act}) {dst} = acc_;")
            self.out.close()
        elif op in ("plane_inclusive_sum", "plane_exclusive_sum"):
            t = out.type
            zero = "{0}" if t.width > 1 else "0"
            self.out(f"{self.rtype(t)} acc_ = {zero};")
            self.open_units(rid, "p0_", "p1_")
            self.out(f"if (!({act})) continue;")
            x = self.ref_at(args[0], "u")
            if op == "plane_exclusive_sum":
                self.out(f"{dst} = acc_; acc_ = acc_ + {x};")
            else:
                self.out(f"acc_ = acc_ + {x}; {dst} = acc_;")
            self.out.close()
        elif op == "plane_elect":
            self.out("uint8_t have_ = 0;")
            self.open_units(rid, "p0_", "p1_")
            self.out(f"if (!({act})) continue;")
            self.out(f"{dst} = !have_; have_ = 1;")
            self.out.close()
        else:  # broadcast / shuffle / shuffle_xor: read another unit's value
            self.open_units(rid, "p0_", "p1_")
            self.out(f"if (!({act})) continue;")
            lane = self.ref_at(args[1], "u")
            src = {
                "plane_broadcast": f"p0_ + ({lane})",
                "plane_shuffle": f"p0_ + ({lane})",
                "plane_shuffle_xor": f"p0_ + ((u - p0_) ^ ({lane}))",
            }[op]
            self.out(f"uint32_t src_ = {src}; if (src_ >= p1_) src_ = u;")
            self.out(f"{dst} = {self.ref_at(args[0], 'src_')};")
            self.out.close()
        self.out.close()
        self.region = -1

    def combine(self, op: str, t: Type, target: str, a: str, b: str) -> None:
        """``target = op(a, b)`` for values of type ``t`` given as C expressions."""
        if t.width == 1 or op in _NATIVE_VECTOR:
            tpl = self.c.op_template(op, t.elem, 2)
            self.out(
                f"{target} = {tpl.format(a=a, b=b, t=self.c.scalar_type(t.elem), s=self.c.suffix(t.elem))};"
            )
        elif op in ("max", "min") and t.elem.name in ("f32", "f64"):
            self.out(vector_minmax(op, self.vector_type(t), target, a, b))
        else:
            tpl = self.c.op_template(op, t.elem, 2)
            expr = tpl.format(
                a=f"{a}[l_]", b=f"{b}[l_]", t=self.c.scalar_type(t.elem), s=self.c.suffix(t.elem)
            )
            self.out(f"for (int l_ = 0; l_ < {t.width}; ++l_) {target}[l_] = {expr};")

    # ---------------------------------------------------------------- memory
    def load_scalar(self, e: Elem, p: str, i: str) -> str:
        if e is f16:
            return f"(float){p}[{i}]"
        if e is bf16:
            return f"em_bf16_float({p}[{i}])"
        if e.kind == BOOL:
            return f"({p}[{i}] != 0)"
        return f"{p}[{i}]"

    def store_scalar(self, e: Elem, p: str, i: str, v: str) -> str:
        if e is f16:
            return f"{p}[{i}] = (_Float16)({v});"
        if e is bf16:
            return f"{p}[{i}] = em_bf16_bits({v});"
        if e.kind == BOOL:
            return f"{p}[{i}] = (uint8_t)({v});"
        return f"{p}[{i}] = {v};"

    def in_bounds(self, arr: Var, i: str) -> str | None:
        """The bounds test of index ``i`` (in lines) when the compiler is checked: true in range;
        out of range it records the first bad access (``em_oob_hit``: array, index, length) for
        the runtime to raise, and is false (the read gives 0, the write is dropped)."""
        if not self.c.checked:
            return None
        # an array's limit is its view's extent in its buffer, not its element count: a strided
        # window (cat's destination) reaches past ``len`` within memory it may use
        limit = self.meta_name(arr, "extent", 0) if arr.kind == ARRAY else f"{arr.size}u"
        name = arr.name or f"array{arr.id}"
        if arr.kind == ARRAY:
            name = f"{name} (argument {arr.param})"
        elif arr.kind == LOCAL_ARRAY:
            name = f"{name} (local array)"
        else:
            name = f"{name} (shared array)"
        if name not in self.oob_names:
            self.oob_names.append(name)
        a = self.oob_names.index(name)
        return (
            f"(((size_t)({i}) < (size_t){limit}) || "
            f"em_oob_hit({a}u, (uint64_t)(int64_t)({i}), (uint64_t){limit}, {arr.type.width}u))"
        )

    def load(self, out: Var, arr: Var, idx: Any) -> None:
        t = arr.type
        p, i = self.ptr(arr), self.val(idx)
        ok = self.in_bounds(arr, i)
        if t.elem in (f16, bf16) and t.width > 1:
            tgt = self.declare(out)
            elem = self.load_scalar(t.elem, p, f"(size_t)({i}) * {t.width} + l_")
            loop = f"for (int l_ = 0; l_ < {t.width}; ++l_) {tgt}[l_] = {elem};"
            zero = f"for (int l_ = 0; l_ < {t.width}; ++l_) {tgt}[l_] = 0;"
            self.out(loop if ok is None else f"if ({ok}) {{ {loop} }} else {{ {zero} }}")
            return
        if t.width == 1:
            expr = self.load_scalar(t.elem, p, i)
            zero = self.zero(t)
        else:
            expr = f"*(const {self.svt(t)} *)({p} + (size_t)({i}) * {t.width})"
            zero = f"({self.svt(t)}){{0}}"  # the load's own type: both arms of ?: must agree
        self.define(out, expr if ok is None else f"({ok} ? {expr} : {zero})")

    def store(self, arr: Var, idx: Any, value: Any) -> None:
        ok = self.in_bounds(arr, self.val(idx))
        if ok is None:
            return self._store(arr, idx, value)
        self.out.open(f"if ({ok}) {{")
        self._store(arr, idx, value)
        self.out.close()
        return None

    def _store(self, arr: Var, idx: Any, value: Any) -> None:
        t = arr.type
        p, i = self.ptr(arr), self.val(idx)
        if t.width == 1:
            self.out(self.store_scalar(t.elem, p, i, self.val(value, t)))
            return
        if t.elem in (f16, bf16):
            v = self.val(value, value.type if value.type is not None else t)
            lane = f"{v}[l_]" if (value.type is not None and value.type.width > 1) else v
            st = self.store_scalar(t.elem, p, f"(size_t)({i}) * {t.width} + l_", lane)
            self.out(f"for (int l_ = 0; l_ < {t.width}; ++l_) {st}")
            return
        v = self.assigned(t, value)
        self.out(f"*({self.svt(t)} *)({p} + (size_t)({i}) * {t.width}) = {v};")

    def atomic(self, s: ir.Op) -> None:
        arr, idx, v = s.args
        e = arr.type.elem
        tpl = self.c.ATOMIC[s.op]
        tpl = tpl.get(e.kind) or tpl["*"]
        p = f"&{self.ptr(arr)}[{self.val(idx)}]"
        expr = tpl.format(st=self.c.storage_type(e), p=p, v=self.val(v, arr.type), s=self.c.suffix(e))
        ok = self.in_bounds(arr, self.val(idx))
        self.define(s.out, expr if ok is None else f"({ok} ? {expr} : {self.zero(s.out.type)})")
