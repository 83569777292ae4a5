"""IR -> C for the CPU runtime, with real cube semantics.

The exported function runs every cube of a launch::

    void <entry>(void **buffers, const uint64_t *info, uint32_t cx, uint32_t cy, uint32_t cz)

``buffers`` holds one pointer per array parameter (already offset to the view's first
element); ``info`` holds one 64-bit word per scalar parameter and per metadata value the
body reads (``CompiledSource.info`` lists them). Cubes are iterations of an OpenMP
``parallel for``; the units of one cube run on one thread.

The phase model: a body without ``sync_cube()`` or plane ops is one loop over the units.
A body with them is split at each such point into *regions*, each a loop over the units, so
every unit finishes region k before any unit starts region k+1 -- exactly the guarantee a
barrier gives. Control flow that contains a barrier runs at cube level with per-unit
activity masks (as SIMT hardware does): an ``if`` computes a mask per branch, a loop keeps a
mask of units still iterating; ``break``/``continue``/``return`` clear a unit's bits. Values
that live in more than one region (and every operand and result of a plane op) become
per-unit arrays ``name_pu[u]``; everything else stays a scalar the C compiler keeps in
registers. Plane ops run at cube level over each plane's active units (plane size 32).

Lines are GCC vector types (``float __attribute__((vector_size(16)))``): arithmetic on them is
SIMD; ops without a vector form are a per-lane loop GCC vectorises.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .. import ir
from ..ir import ARRAY, LOCAL, LOCAL_ARRAY, SCALAR, SSA, Const, Type, Var
from ..types import BOOL, Elem, bf16, f16
from .base import Capabilities, CompiledSource, CStyleCompiler, Lines
from .c_prelude import PRELUDE

__all__ = ["CCompiler"]

_INT_TYPES = {
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
}
# name of the vector family of each register/storage scalar type
_VEC = {
    "float": "f32",
    "double": "f64",
    "_Float16": "f16",
    "int8_t": "i8",
    "int16_t": "i16",
    "int32_t": "i32",
    "int64_t": "i64",
    "uint8_t": "u8",
    "uint16_t": "u16",
    "uint32_t": "u32",
    "uint64_t": "u64",
    "bool": "u8",
}
_VEC_ELEM = {v: k for k, v in _VEC.items() if k != "bool"}

#: ops whose C operator also works on GCC vectors (mixed with a scalar operand too)
_NATIVE_VECTOR = frozenset({"add", "sub", "mul", "neg", "and", "or", "xor", "not", "shl", "shr", "copy"})

#: below this many units in a launch, cubes run on the calling thread (a parallel region costs
#: more than it saves); a body with a runtime loop has unknown cost per unit: threshold 2 cubes
_SERIAL_UNITS = 1 << 15


class CCompiler(CStyleCompiler):
    language = "c"
    capabilities = Capabilities(line_widths=(1, 2, 4, 8, 16), plane_size=32, max_shared_bytes=1 << 20)

    SCALAR_TYPES = {
        "f16": "float",
        "bf16": "float",
        "f32": "float",
        "f64": "double",
        "bool_": "bool",
        **_INT_TYPES,
    }
    STORAGE_TYPES = {
        "f16": "_Float16",
        "bf16": "uint16_t",
        "f32": "float",
        "f64": "double",
        "bool_": "uint8_t",
        **_INT_TYPES,
    }

    BINARY = {
        "add": "{a} + {b}",
        "sub": "{a} - {b}",
        "mul": "{a} * {b}",
        "div": "{a} / {b}",
        "floordiv": {"float": "em_floordiv_{s}({a}, {b})", "*": "({t})em_floordiv_{s}({a}, {b})"},
        "mod": {"float": "em_mod_{s}({a}, {b})", "*": "({t})em_mod_{s}({a}, {b})"},
        "pow": "pow({a}, {b})",
        "atan2": "atan2({a}, {b})",
        "copysign": "copysign({a}, {b})",
        "min": {"float": "em_min_{s}({a}, {b})", "*": "({a} < {b} ? {a} : {b})"},
        "max": {"float": "em_max_{s}({a}, {b})", "*": "({a} > {b} ? {a} : {b})"},
        "and": {"bool": "{a} && {b}", "*": "{a} & {b}"},
        "or": {"bool": "{a} || {b}", "*": "{a} | {b}"},
        "xor": {"bool": "{a} != {b}", "*": "{a} ^ {b}"},
        "shl": "{a} << {b}",
        "shr": "{a} >> {b}",
        "land": "{a} && {b}",
        "lor": "{a} || {b}",
        "lt": "{a} < {b}",
        "le": "{a} <= {b}",
        "gt": "{a} > {b}",
        "ge": "{a} >= {b}",
        "eq": "{a} == {b}",
        "ne": "{a} != {b}",
    }
    UNARY = {
        "copy": "{a}",
        "neg": "-{a}",
        "not": "~{a}",
        "lnot": "!{a}",
        "abs": {"float": "fabs({a})", "int": "({a} < 0 ? -{a} : {a})", "uint": "{a}"},
        "sign": {
            "float": "em_sign_{s}({a})",
            "int": "({t})(({a} > 0) - ({a} < 0))",
            "uint": "({t})({a} > 0)",
        },
        "exp": "exp({a})",
        "exp2": "exp2({a})",
        "log": "log({a})",
        "log2": "log2({a})",
        "log10": "log10({a})",
        "log1p": "log1p({a})",
        "expm1": "expm1({a})",
        "sqrt": "sqrt({a})",
        "rsqrt": "({t})1 / sqrt({a})",
        "sin": "sin({a})",
        "cos": "cos({a})",
        "tan": "tan({a})",
        "tanh": "tanh({a})",
        "sinh": "sinh({a})",
        "cosh": "cosh({a})",
        "asin": "asin({a})",
        "acos": "acos({a})",
        "atan": "atan({a})",
        "erf": "erf({a})",
        "floor": "floor({a})",
        "ceil": "ceil({a})",
        "round": "rint({a})",
        "trunc": "trunc({a})",
        "sigmoid": "({t})1 / (({t})1 + exp(-{a}))",
        "recip": "({t})1 / {a}",
        "isnan": "isnan({a})",
        "isinf": "isinf({a})",
        "isfinite": "isfinite({a})",
    }
    TERNARY = {"fma": "fma({a}, {b}, {c})", "select": "{a} ? {b} : {c}"}
    ATOMIC = {
        "atomic_add": {
            "float": "EM_ATOMIC_RMW({st}, {p}, {v}, EM_ADD)",
            "*": "__atomic_fetch_add({p}, {v}, __ATOMIC_RELAXED)",
        },
        "atomic_sub": {
            "float": "EM_ATOMIC_RMW({st}, {p}, {v}, EM_SUB)",
            "*": "__atomic_fetch_sub({p}, {v}, __ATOMIC_RELAXED)",
        },
        "atomic_max": {
            "float": "EM_ATOMIC_RMW({st}, {p}, {v}, em_max_{s})",
            "*": "EM_ATOMIC_RMW({st}, {p}, {v}, EM_MAX)",
        },
        "atomic_min": {
            "float": "EM_ATOMIC_RMW({st}, {p}, {v}, em_min_{s})",
            "*": "EM_ATOMIC_RMW({st}, {p}, {v}, EM_MIN)",
        },
        "atomic_exchange": {
            "float": "EM_ATOMIC_RMW({st}, {p}, {v}, EM_SECOND)",
            "*": "__atomic_exchange_n({p}, {v}, __ATOMIC_RELAXED)",
        },
    }
    BUILTINS = {
        "ABSOLUTE_POS": "(cube_pos * {NU}u + u)",
        "ABSOLUTE_POS_X": "(cpx * {DX}u + u % {DX}u)",
        "ABSOLUTE_POS_Y": "(cpy * {DY}u + u / {DX}u % {DY}u)",
        "ABSOLUTE_POS_Z": "(cpz * {DZ}u + u / {DXY}u)",
        "UNIT_POS": "u",
        "UNIT_POS_X": "(u % {DX}u)",
        "UNIT_POS_Y": "(u / {DX}u % {DY}u)",
        "UNIT_POS_Z": "(u / {DXY}u)",
        "CUBE_POS": "cube_pos",
        "CUBE_POS_X": "cpx",
        "CUBE_POS_Y": "cpy",
        "CUBE_POS_Z": "cpz",
        "CUBE_COUNT": "cube_count",
        "CUBE_COUNT_X": "cx",
        "CUBE_COUNT_Y": "cy",
        "CUBE_COUNT_Z": "cz",
        "UNIT_POS_PLANE": "(u % {P}u)",
        "PLANE_POS": "(u / {P}u)",
    }

    def __init__(self, checked: bool = False) -> None:
        self.checked = checked

    def builtin_expr(self, name: str, k: ir.KernelIr) -> str:
        x, y, z = k.cube_dim
        return self.BUILTINS[name].format(NU=x * y * z, DX=x, DY=y, DZ=z, DXY=x * y, P=k.plane_size)

    # ---------------------------------------------------------------- types and literals
    def vector_type(self, t: Type) -> str:
        return f"em_{_VEC[self.scalar_type(t.elem)]}x{t.width}"

    def storage_vector_type(self, t: Type) -> str:
        """Vector type for loads and stores: element-aligned, may alias the buffer's elements."""
        return f"em_{_VEC[self.storage_type(t.elem)]}x{t.width}u"

    def float_literal(self, x: float, e: Elem) -> str:
        double = e.bits == 64
        if math.isnan(x):
            return "((double)NAN)" if double else "NAN"
        if math.isinf(x):
            s = "INFINITY" if x > 0 else "(-INFINITY)"
            return f"((double){s})" if double else s
        r = repr(x)
        if "e" not in r and "." not in r:
            r += ".0"
        r = r if double else r + "f"
        return f"({r})" if x < 0 else r

    def int_literal(self, n: int, e: Elem) -> str:
        if e.name == "i32":
            return str(n) if n >= 0 else ("(-2147483647-1)" if n == -(1 << 31) else f"({n})")
        if e.name == "u32":
            return f"{n}u"
        if e.name == "i64":
            return f"{n}LL" if n >= 0 else ("(-9223372036854775807LL-1)" if n == -(1 << 63) else f"({n}LL)")
        if e.name == "u64":
            return f"{n}ULL"
        return f"(({self.scalar_type(e)}){n})"

    # ---------------------------------------------------------------- compile
    def compile(self, k: ir.KernelIr) -> CompiledSource:
        slots, where, dynamic = self.info_layout(k)
        phased = any(ir.is_collective(i) for i in ir.walk(k.body))
        has_ret = phased and any(isinstance(i, ir.Return) for i in ir.walk(k.body))
        first = _Emitter(self, k, where, dynamic, phased, has_ret, None, {})
        first.run()
        cross = first.cross()
        regions = first.region_locals(cross)
        final = _Emitter(self, k, where, dynamic, phased, has_ret, cross, regions)
        body = final.run()
        src = self._assemble(k, slots, phased, has_ret, final, body)
        return CompiledSource(
            k.entry,
            src,
            self.language,
            slots,
            [p.var.param for p in k.arrays],
            {"phased": phased, "per_unit": sorted(self.name(v) for v in cross)},
        )

    def _assemble(
        self, k: ir.KernelIr, slots: list[Any], phased: bool, has_ret: bool, em: _Emitter, body: Lines
    ) -> str:
        out = Lines()
        out(f"/* ember cube kernel {k.name} -> {k.entry} */")
        out.out.append(PRELUDE.strip("\n"))
        for vt, (ct, w) in sorted(em.vectors.items()):
            size = w * _size(ct)
            out(f"typedef {ct} {vt} __attribute__((vector_size({size})));")
        for vt, (ct, w) in sorted(em.storage_vectors.items()):
            size = w * _size(ct)
            out(f"typedef {ct} {vt} __attribute__((vector_size({size}), aligned({_size(ct)}), may_alias));")
        out("")
        out.open(
            f"void {k.entry}(void **buffers, const uint64_t *info, uint32_t cx, uint32_t cy, uint32_t cz) {{"
        )
        out("(void)info;")
        written = {id(ins.array) for ins in ir.walk(k.body) if isinstance(ins, ir.Store)}
        written |= {
            id(ins.args[0]) for ins in ir.walk(k.body) if isinstance(ins, ir.Op) and ins.op in ir.ATOMIC_OPS
        }
        aliased = {p.buffer for p in k.arrays if p.alias_of is not None}
        aliased |= {p.alias_of for p in k.arrays if p.alias_of is not None}
        for p in k.arrays:
            v = p.var
            st = self.storage_type(v.type.elem)
            const = "" if id(v) in written else "const "
            restrict = "" if p.buffer in aliased else "restrict "
            out(f"{const}{st} *{restrict}{self.name(v)} = ({const}{st} *)buffers[{p.buffer}];")
        for i, s in enumerate(slots):
            if s.kind == "scalar":
                v = next(p.var for p in k.scalars if p.var.param == s.param)
                out(f"const {self.scalar_type(s.elem)} {self.name(v)} = {self._slot_read(s.elem, i)};")
            else:
                arr = next(p.var for p in k.arrays if p.var.param == s.param)
                out(f"const uint32_t {em.meta_name(arr, s.kind, s.dim)} = (uint32_t)info[{i}];")
        nu = k.units
        loops = any(isinstance(i, (ir.RangeLoop, ir.Loop)) for i in ir.walk(k.body))
        threshold = 2 if loops or phased else _SERIAL_UNITS
        out("const uint64_t n_cubes = (uint64_t)cx * cy * cz;")
        out("const uint32_t cube_count = (uint32_t)n_cubes;")
        out("(void)cube_count;")
        # static: each thread streams one contiguous range of cubes (measured better than dynamic
        # chunks for memory-bound kernels, even with the cores shared)
        out(f"#pragma omp parallel for schedule(static) if (n_cubes > 1 && n_cubes * {nu}u >= {threshold}u)")
        out.open("for (uint64_t cube = 0; cube < n_cubes; ++cube) {")
        out("const uint32_t cube_pos = (uint32_t)cube;")
        out(
            "const uint32_t cpx = (uint32_t)(cube % cx), cpy = (uint32_t)(cube / cx % cy), "
            "cpz = (uint32_t)(cube / ((uint64_t)cx * cy));"
        )
        out("(void)cube_pos; (void)cpx; (void)cpy; (void)cpz;")
        for sm in k.shared:
            out(
                f"{self.storage_type(sm.type.elem)} {self.name(sm)}[{sm.size * sm.type.width}] "
                "__attribute__((aligned(64)));"
            )
        for v in sorted(em.cross_set, key=lambda v: v.id):
            if v.kind == LOCAL_ARRAY:
                out(f"{self.storage_type(v.type.elem)} {self.name(v)}_pu[{nu}][{v.size * v.type.width}];")
            else:
                out(f"{self.reg_type(v.type)} {self.name(v)}_pu[{nu}];")
        for m in em.masks:
            out(f"uint8_t {m}[{nu}];")
        if has_ret:
            out(f"uint8_t ret_u[{nu}];")
            out("memset(ret_u, 0, sizeof ret_u);")
        out.out.extend(body.out)
        out.close()
        out.close()
        return out.text()

    def _slot_read(self, e: Elem, i: int) -> str:
        if e.is_float:
            return f"em_slot_f64(info[{i}])" if e.bits == 64 else f"em_slot_f32(info[{i}])"
        if e.kind == BOOL:
            return f"(bool)(info[{i}] & 1u)"
        return f"({self.scalar_type(e)})info[{i}]"


def _size(ctype: str) -> int:
    return {
        "float": 4,
        "double": 8,
        "_Float16": 2,
        "int8_t": 1,
        "int16_t": 2,
        "int32_t": 4,
        "int64_t": 8,
        "uint8_t": 1,
        "uint16_t": 2,
        "uint32_t": 4,
        "uint64_t": 8,
        "bool": 1,
    }[ctype]


class _Emitter:
    """One rendering pass over the body. The first pass records in which regions each value
    is used; the second knows which values are per-unit arrays and renders for real."""

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
        self.c = c
        self.k = k
        self.where = where
        self.dynamic = dynamic
        self.phased = phased
        self.has_ret = has_ret
        self.recording = cross is None
        self.cross_set: set[Var] = cross or set()
        self.regions = regions
        self.refs: dict[Var, set[int]] = defaultdict(set)
        self.forced: set[Var] = set()
        self.out = Lines()
        self.out.depth = 2
        self.region = -1
        self.n_regions = 0
        self.label = ""
        self.masks: list[str] = []
        self.loops: list[tuple[str, ...]] = []
        self.vectors: dict[str, tuple[str, int]] = {}
        self.storage_vectors: dict[str, tuple[str, int]] = {}
        self.nu = k.units

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

    def val(self, a: Any, t: Type | None = None) -> str:
        if isinstance(a, Const):
            ty = a.type or t
            lit = self.c.literal(a.value, ty.scalar())
            if t is not None and t.width > 1 and (a.type is None or a.type.width == 1):
                return self.broadcast(t, lit)
            return lit
        return self.ref(a)

    def vt(self, t: Type) -> str:
        name = self.c.vector_type(t)
        self.vectors[name] = (self.c.scalar_type(t.elem) if t.elem.kind != BOOL else "uint8_t", t.width)
        return name

    def svt(self, t: Type) -> str:
        name = self.c.storage_vector_type(t)
        self.storage_vectors[name] = (self.c.storage_type(t.elem), t.width)
        return name

    def rtype(self, t: Type) -> str:
        return self.c.scalar_type(t.elem) if t.width == 1 else self.vt(t)

    def broadcast(self, t: Type, scalar: str) -> str:
        elem = self.c.scalar_type(t.elem) if t.elem.kind != BOOL else "uint8_t"
        return f"(({self.vt(t)}){{0}} + ({elem})({scalar}))"

    def define(self, v: Var, expr: str) -> None:
        if v in self.cross_set:
            self.out(f"{self.ref(v)} = {expr};")
        else:
            self.note(v)
            self.out(f"const {self.rtype(v.type)} {self.c.name(v)} = {expr};")

    def declare(self, v: Var) -> str:
        """Declare ``v`` for statement-form definitions; returns its lvalue."""
        if v not in self.cross_set:
            self.note(v)
            self.out(f"{self.rtype(v.type)} {self.c.name(v)};")
        return self.ref(v)

    def meta_name(self, arr: Var, kind: str, d: int) -> str:
        base = self.c.name(arr)[2:]
        return f"m_{base}_len" if kind == "len" else f"m_{base}_{kind}{d}"

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

    def open_units(self, rid: int, start: str = "0", end: str | None = None) -> None:
        self.out.open(f"for (uint32_t u = {start}; u < {end or f'{self.nu}u'}; ++u) {{")
        for v in self.regions.get(rid, ()):
            if v.kind == LOCAL_ARRAY:
                self.out(f"{self.c.storage_type(v.type.elem)} {self.c.name(v)}[{v.size * v.type.width}];")
            else:
                zero = "{0}" if v.type.width > 1 else "0"
                self.out(f"{self.rtype(v.type)} {self.c.name(v)} = {zero};")

    def unit_region(self, stmts: list[Any], mask: str | None) -> None:
        rid = self.new_region()
        label = f"r{rid}"
        self.open_units(rid)
        guard = self.active(mask)
        if guard != "1":
            self.out(f"if (!({guard})) continue;")
        saved, self.label = self.label, label
        self.unit_stmts(stmts)
        self.label = saved
        self.out(f"{label}: ;")
        self.out.close()
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
            self.open_units(rid)
            self.out(f"const uint8_t act_ = {self.active(mask)};")
            self.out(f"const uint8_t c_ = act_ && ({self.val(s.cond)});")
            self.out(f"{mt}[u] = c_;" + (f" {me}[u] = act_ && !c_;" if me else ""))
            self.out.close()
            self.region = -1
            self.cube_block(s.then, mt)
            if me:
                self.cube_block(s.orelse, me)
        elif isinstance(s, ir.RangeLoop):
            self.masked_loop(s, mask)
        elif isinstance(s, ir.Loop):
            self.masked_loop(s, mask)
        elif isinstance(s, ir.Block):
            self.cube_block(s.body, mask)
        else:  # pragma: no cover - is_collective admits nothing else
            raise AssertionError(s)

    def masked_loop(self, s: ir.RangeLoop | ir.Loop, mask: str | None) -> None:
        ml, mc = self.new_mask(), self.new_mask()
        rng = isinstance(s, ir.RangeLoop)
        rid = self.new_region()
        self.open_units(rid)
        self.out(f"{ml}[u] = {self.active(mask)};")
        if rng:
            self.out(f"if ({ml}[u]) {self.ref(s.var)} = {self.val(s.start)};")
        self.out.close()
        self.out.open("for (;;) {")
        self.out("uint8_t any_ = 0;")
        rid = self.new_region()
        self.open_units(rid)
        if rng:
            self.out(f"if ({ml}[u]) {ml}[u] = {self.range_cond(s)};")
        ret = " && !ret_u[u]" if self.has_ret else ""
        self.out(f"{mc}[u] = {ml}[u]{ret};")
        self.out(f"any_ |= {mc}[u];")
        self.out.close()
        self.region = -1
        self.out("if (!any_) break;")
        self.loops.append(("masked", ml, mc))
        self.cube_block(s.body, mc)
        self.loops.pop()
        if rng:
            rid = self.new_region()
            self.open_units(rid)
            self.out(f"if ({ml}[u]{ret}) {self.ref(s.var)} += {self.val(s.step, s.var.type)};")
            self.out.close()
            self.region = -1
        self.out.close()

    def range_cond(self, s: ir.RangeLoop) -> str:
        v, end, step = self.ref(s.var), self.val(s.end, s.var.type), s.step
        if isinstance(step, Const):
            return f"{v} < {end}" if step.value > 0 else f"{v} > {end}"
        st = self.val(step)
        if not s.var.type.elem.is_signed:
            return f"{v} < {end}"
        return f"({st} > 0 ? {v} < {end} : {v} > {end})"

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
        else:
            tpl = self.c.op_template(op, t.elem, 2)
            expr = tpl.format(
                a=f"{a}[l_]", b=f"{b}[l_]", t=self.c.scalar_type(t.elem), s=self.c.suffix(t.elem)
            )
            self.out(f"for (int l_ = 0; l_ < {t.width}; ++l_) {target}[l_] = {expr};")

    # ---------------------------------------------------------------- statements in a unit loop
    def unit_stmts(self, stmts: list[Any]) -> None:
        for s in stmts:
            self.unit_stmt(s)

    def unit_stmt(self, s: Any) -> None:
        o = self.out
        if isinstance(s, ir.Op):
            self.emit_op(s)
        elif isinstance(s, ir.Assign):
            o(f"{self.ref(s.out)} = {self.assigned(s.out.type, s.value)};")
        elif isinstance(s, ir.Store):
            self.store(s.array, s.index, s.value)
        elif isinstance(s, ir.If):
            o.open(f"if ({self.val(s.cond)}) {{")
            self.unit_stmts(s.then)
            if s.orelse:
                o.close("} else {")
                o.depth += 1
                self.unit_stmts(s.orelse)
            o.close()
        elif isinstance(s, ir.RangeLoop):
            v = self.ref(s.var)
            step = self.val(s.step, s.var.type)
            o.open(f"for ({v} = {self.val(s.start, s.var.type)}; {self.range_cond(s)}; {v} += {step}) {{")
            self.loops.append(("c",))
            self.unit_stmts(s.body)
            self.loops.pop()
            o.close()
        elif isinstance(s, ir.Loop):
            o.open("for (;;) {")
            self.loops.append(("c",))
            self.unit_stmts(s.body)
            self.loops.pop()
            o.close()
        elif isinstance(s, (ir.Break, ir.Continue)):
            top = self.loops[-1]
            brk = isinstance(s, ir.Break)
            if top[0] == "c":
                o("break;" if brk else "continue;")
            else:
                _, ml, mc = top
                o(
                    f"{{ {ml}[u] = 0; {mc}[u] = 0; goto {self.label}; }}"
                    if brk
                    else f"{{ {mc}[u] = 0; goto {self.label}; }}"
                )
        elif isinstance(s, ir.Return):
            o(f"{{ ret_u[u] = 1; goto {self.label}; }}" if self.has_ret else f"goto {self.label};")
        elif isinstance(s, ir.Block):
            o.open("{")
            self.unit_stmts(s.body)
            o.close()
            o(f"x{s.label}: ;")
        elif isinstance(s, ir.Exit):
            o(f"goto x{s.label};")
        else:  # pragma: no cover - collectives never reach a unit loop
            raise AssertionError(f"{s!r} inside a unit loop")

    def assigned(self, t: Type, value: Any) -> str:
        if isinstance(value, Const):
            return self.val(value, t)
        v = self.ref(value)
        if t.width > 1 and value.type.width == 1:
            return self.broadcast(t, v)
        return v

    # ---------------------------------------------------------------- memory
    def ptr(self, arr: Var) -> str:
        if arr.kind == LOCAL_ARRAY:
            return self.ref(arr)
        return self.c.name(arr)

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
        """The bounds test of index ``i`` (in lines) when the compiler is checked."""
        if not self.c.checked:
            return None
        limit = self.meta_name(arr, "len", 0) if arr.kind == ARRAY else f"{arr.size}u"
        return f"((size_t)({i}) < (size_t){limit})"

    def zero(self, t: Type) -> str:
        return f"({self.vt(t)}){{0}}" if t.width > 1 else f"({self.c.scalar_type(t.elem)})0"

    def load(self, out: Var, arr: Var, idx: Any) -> None:
        t = arr.type
        p, i = self.ptr(arr), self.val(idx)
        ok = self.in_bounds(arr, i)
        if t.elem in (f16, bf16) and t.width > 1:
            tgt = self.declare(out)
            elem = self.load_scalar(t.elem, p, f"(size_t)({i}) * {t.width} + l_")
            loop = f"for (int l_ = 0; l_ < {t.width}; ++l_) {tgt}[l_] = {elem};"
            self.out(loop if ok is None else f"if ({ok}) {{ {loop} }} else {tgt} = {self.zero(t)};")
            return
        if t.width == 1:
            expr = self.load_scalar(t.elem, p, i)
        else:
            expr = f"*(const {self.svt(t)} *)({p} + (size_t)({i}) * {t.width})"
        self.define(out, expr if ok is None else f"({ok} ? {expr} : {self.zero(t)})")

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

    # ---------------------------------------------------------------- ops
    def lane_val(self, a: Any, t: Type | None = None) -> str:
        v = self.val(a, None if isinstance(a, Const) and a.type is not None else t)
        w = a.type.width if a.type is not None else 1
        return f"{v}[l_]" if w > 1 else v

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
            arr, idx, v = args
            e = arr.type.elem
            tpl = self.c.ATOMIC[op]
            tpl = tpl.get(e.kind) or tpl["*"]
            p = f"&{self.ptr(arr)}[{self.val(idx)}]"
            expr = tpl.format(st=self.c.storage_type(e), p=p, v=self.val(v, arr.type), s=self.c.suffix(e))
            ok = self.in_bounds(arr, self.val(idx))
            return self.define(out, expr if ok is None else f"({ok} ? {expr} : {self.zero(out.type)})")
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
            tpl = self.c.op_template(comb, t.elem, 2)
            expr = tpl.format(a=tgt, b=f"{x}[l_]", t=self.c.scalar_type(t.elem), s=self.c.suffix(t.elem))
            self.out(f"for (int l_ = 1; l_ < {t.width}; ++l_) {tgt} = {expr};")
            return None
        if op == "cast":
            return self.elementwise(
                out, args, lambda xs: self.cast_expr(args[0].type.elem, out.type.elem, xs[0])
            )
        if op == "bitcast":
            if out.type.width > 1:
                return self.define(out, f"({self.vt(out.type)})({self.val(args[0])})")
            return self.define(out, f"EM_BITCAST({self.c.scalar_type(out.type.elem)}, {self.val(args[0])})")
        types = [a.type for a in args]
        if out.type.width == 1 and all(t.width == 1 for t in types):
            vals = [self.val(a) for a in args]
            return self.define(out, self.c.scalar_expr(op, out.type, types, vals))
        if op in _NATIVE_VECTOR or (op == "div" and out.type.elem.is_float):
            vals = [self.val(a) for a in args]
            return self.define(out, self.c.scalar_expr(op, out.type, types, vals))
        return self.elementwise(
            out, args, lambda xs: self.c.scalar_expr(op, out.type.scalar(), [t.scalar() for t in types], xs)
        )

    def elementwise(self, out: Var, args: tuple[Any, ...], render: Any) -> None:
        if out.type.width == 1:
            return self.define(out, render([self.val(a) for a in args]))
        tgt = self.declare(out)
        expr = render([self.lane_val(a) for a in args])
        self.out(f"for (int l_ = 0; l_ < {out.type.width}; ++l_) {tgt}[l_] = {expr};")
        return None

    def cast_expr(self, src: Elem, dst: Elem, x: str) -> str:
        if dst.kind == BOOL:
            return f"({x} != 0)"
        if dst is f16:
            return f"em_round_f16((float)({x}))"
        if dst is bf16:
            return f"em_round_bf16((float)({x}))"
        return f"({self.c.scalar_type(dst)})({x})"
