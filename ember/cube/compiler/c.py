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
mask of units still iterating; ``break``/``continue``/``return`` clear a unit's bits. A value
that lives in more than one region becomes a per-unit array ``name_pu[u]`` (as does every
operand and result of a plane op) -- unless it is a cheap pure function of the unit's
position, uniforms and metadata (``row = CUBE_POS_Y * T + UNIT_POS_Y``), which each region
recomputes instead; everything else stays a scalar the C compiler keeps in registers. Plane
ops run at cube level over each plane's active units (plane size 32). The unit loop of a
2-D/3-D cube is a nest ``uz > uy > ux``, so ``UNIT_POS_X`` is the innermost induction variable.

Lines are GCC vector types (``float __attribute__((vector_size(16)))``): arithmetic on them is
SIMD; ops without a vector form are a per-lane loop GCC vectorises.
"""

from __future__ import annotations

import math
from typing import Any

from .. import ir
from ..ir import LOCAL_ARRAY, Type
from ..types import BOOL, Elem
from .base import Capabilities, CompiledSource, CStyleCompiler, Lines
from .c_lines import (
    vector_math,
)
from .c_prelude import PRELUDE
from .c_regions import RegionEmitter

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
        "ABSOLUTE_POS_X": "(cpx * {DX}u + ux)",
        "ABSOLUTE_POS_Y": "(cpy * {DY}u + uy)",
        "ABSOLUTE_POS_Z": "(cpz * {DZ}u + uz)",
        "UNIT_POS": "u",
        "UNIT_POS_X": "ux",
        "UNIT_POS_Y": "uy",
        "UNIT_POS_Z": "uz",
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
        first = RegionEmitter(self, k, where, dynamic, phased, has_ret, None, {})
        first.run()
        remat = first.rematerializable()
        cross = first.cross() - remat
        regions = first.region_locals(cross)
        final = RegionEmitter(self, k, where, dynamic, phased, has_ret, cross, regions)
        final.remat, final.eligible = remat, first.eligible
        final.def_region, final.refs_first = first.def_region, first.refs
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
        self, k: ir.KernelIr, slots: list[Any], phased: bool, has_ret: bool, em: RegionEmitter, body: Lines
    ) -> str:
        # cube-level declarations first: they may need vector typedefs of their own
        per_unit = []
        for v in sorted(em.cross_set, key=lambda v: v.id):
            if v.kind == LOCAL_ARRAY:
                per_unit.append(
                    f"{self.storage_type(v.type.elem)} {self.name(v)}_pu[{k.units}][{v.size * v.type.width}];"
                )
            else:
                per_unit.append(f"{em.rtype(v.type)} {self.name(v)}_pu[{k.units}];")
        out = Lines()
        out(f"/* ember cube kernel {k.name} -> {k.entry} */")
        out.out.append(PRELUDE.strip("\n"))
        if self.checked:
            out.out.append(_oob_prelude(em.oob_names))
        for vt, (ct, w) in sorted(em.vectors.items()):
            size = w * _size(ct)
            out(f"typedef {ct} {vt} __attribute__((vector_size({size})));")
        for vt, (ct, w) in sorted(em.storage_vectors.items()):
            size = w * _size(ct)
            out(f"typedef {ct} {vt} __attribute__((vector_size({size}), aligned({_size(ct)}), may_alias));")
        for fn, vt, ct, w in sorted(em.vmath):
            out.out.append(vector_math(fn, vt, ct, w))
        out("")
        out.open(
            f"void {k.entry}(void **buffers, const uint64_t *info, uint32_t cx, uint32_t cy, uint32_t cz) {{"
        )
        out("(void)info;")
        written, aliased = buffer_access(k)
        for p in k.arrays:
            v = p.var
            st = self.storage_type(v.type.elem)
            const = "" if id(v) in written else "const "
            restrict = "" if p.buffer in aliased else "restrict "
            out(f"{const}{st} *{restrict}{self.name(v)} = ({const}{st} *)buffers[{p.buffer}];")
        self._info_reads(out, k, em, slots)
        nu = k.units
        loops = any(isinstance(i, (ir.RangeLoop, ir.Loop)) for i in ir.walk(k.body))
        threshold = 2 if loops or phased else _SERIAL_UNITS
        out("const uint64_t n_cubes = (uint64_t)cx * cy * cz;")
        out("const uint32_t cube_count = (uint32_t)n_cubes;")
        out("(void)cube_count;")
        # static: each thread streams one contiguous range of cubes (measured better than dynamic
        # chunks for memory-bound kernels, even with the cores shared)
        out(f"#pragma omp parallel for schedule(static) if (n_cubes > 1 && n_cubes * {nu}u >= {threshold}u "
            "&& EM_PARALLEL_OK)")
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
        for decl in per_unit:
            out(decl)
        for m in em.masks:
            out(f"uint8_t {m}[{nu}];")
        if has_ret:
            out(f"uint8_t ret_u[{nu}];")
            out("memset(ret_u, 0, sizeof ret_u);")
        out.out.extend(body.out)
        out.close()
        out.close()
        return out.text()

    def _info_reads(self, out: Lines, k: ir.KernelIr, em: Any, slots: list[Any]) -> None:
        """Locals for the info words: each scalar argument in its type, each array's length,
        shape or stride entry as a u32 (the C and CUDA targets share this)."""
        for i, s in enumerate(slots):
            if s.kind == "scalar":
                v = next(p.var for p in k.scalars if p.var.param == s.param)
                out(f"const {self.scalar_type(s.elem)} {self.name(v)} = {self._slot_read(s.elem, i)};")
            else:
                arr = next(p.var for p in k.arrays if p.var.param == s.param)
                out(f"const uint32_t {em.meta_name(arr, s.kind, s.dim)} = (uint32_t)info[{i}];")

    def _slot_read(self, e: Elem, i: int) -> str:
        if e.is_float:
            return f"em_slot_f64(info[{i}])" if e.bits == 64 else f"em_slot_f32(info[{i}])"
        if e.kind == BOOL:
            return f"(bool)(info[{i}] & 1u)"
        return f"({self.scalar_type(e)})info[{i}]"


def buffer_access(k: ir.KernelIr) -> tuple[set[int], set[int]]:
    """(ids of the arrays the kernel stores to or updates atomically, buffer indices that alias
    another buffer): what decides ``const`` and ``restrict`` on the C and CUDA targets."""
    written = {id(ins.array) for ins in ir.walk(k.body) if isinstance(ins, ir.Store)}
    written |= {id(ins.args[0]) for ins in ir.walk(k.body) if isinstance(ins, ir.Op) and ins.op in ir.ATOMIC_OPS}
    aliased = {p.buffer for p in k.arrays if p.alias_of is not None}
    aliased |= {p.alias_of for p in k.arrays if p.alias_of is not None}
    return written, aliased


def _oob_prelude(names: list[str]) -> str:
    """Checked mode's record of the first out-of-range access (``em_oob_hit``) and its accessors
    (``em_oob_state``: hits, array number, index, length, line width; ``em_oob_array``: a name).
    Static, so each kernel's shared object has its own record."""
    table = ", ".join('"' + n.replace("\\", "").replace('"', "'") + '"' for n in names) or '""'
    return f"""static uint64_t em_oob[5];
static const char *const em_oob_names[] = {{{table}}};
static int em_oob_hit(uint64_t a, uint64_t i, uint64_t n, uint64_t w) {{
    uint64_t z = 0;
    if (__atomic_compare_exchange_n(&em_oob[0], &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {{
        em_oob[1] = a; em_oob[2] = i; em_oob[3] = n; em_oob[4] = w;
    }}
    return 0;
}}
uint64_t *em_oob_state(void) {{ return em_oob; }}
const char *em_oob_array(uint64_t a) {{
    return a < sizeof em_oob_names / sizeof em_oob_names[0] ? em_oob_names[a] : "?";
}}"""


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
