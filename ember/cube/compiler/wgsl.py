"""IR -> WGSL for the wgpu runtime.

The entry point of a kernel::

    @group(0) @binding(i) var<storage, read_write> b_<name>: array<...>;   one per array parameter
    @group(0) @binding(n) var<storage, read> info: array<u32>;
    @compute @workgroup_size(x, y, z) fn <entry>(...builtins...)

``info`` holds the 64-bit words of ``CompiledSource.info`` as pairs of u32 (WGSL has no 64-bit
integers without extensions: a scalar or metadata value sits in the low word), followed by one
u32 per array parameter: the offset of the view's first *line* in its buffer (views share
buffers at any element offset, and WGSL bindings cannot start at arbitrary bytes).

What WGSL cannot hold, and how this compiler copes:

* no pointers: every access is ``b[offset + index]``; all buffers are bound ``read_write``
  (two views of one buffer are bound twice, as the seed's stack does, but accessed through
  the first view's binding: the drivers assume distinct bindings never alias);
* no 8- or 16-bit integer storage: u8, i8 and bool buffers are packed four bytes to an
  ``atomic<u32>`` word, i16 buffers two halves to a word (the tensor's bytes as they are: the
  runtime uploads and reads them unchanged); a whole-word line (widths 4, 8, 16; for i16 also
  2) is one atomic load/store per word, a narrower one updates its byte or half with
  ``atomicAnd``/``atomicOr`` (neighbouring units may own the rest of the word); u8 values
  compute in u32 registers, i8 and i16 in i32 (sign-extended on load), and every value of
  these types wraps to its width where the C target's ``uint8_t``/``int8_t``/``int16_t``
  would, so results match the other devices bit for bit;
* no 64-bit types and no bf16: ``WgslCompiler.holds`` says which dtypes a device can hold, and
  the runtime refuses the others with a typed error before any kernel is built;
* f16 only with the ``f16`` capability (the runtime's canary); it computes in f32 registers
  and rounds at casts, as the C target does;
* vectors only up to 4 lanes: lines of 8 and 16 are ``array<T, N>`` values, computed lane by
  lane in straight-line code;
* no ``goto``: an inlined function with an early exit becomes ``loop { ...; break; }``, and a
  ``break``/``continue``/exit that must cross such a loop is carried by a flag;
* plane (subgroup) operations only with the ``subgroups`` capability; without it the plane
  size is 1 (every unit is its own plane), which kernels written against ``PLANE_DIM`` handle;
* float atomics are compare-and-swap loops on the bits (``atomic<u32>``).
"""

from __future__ import annotations

import math
import struct
from typing import Any

from ...errors import UnsupportedDTypeError
from .. import ir
from ..ir import Type
from ..types import BOOL, Elem
from .base import Capabilities, CompiledSource, CStyleCompiler, Lines
from .wgsl_emitter import WgslEmitter

__all__ = ["WgslCompiler", "PRELUDE"]

#: element types whose buffers WGSL can hold (f16 only with the capability); i64 buffers hold
#: int32 (the runtime narrows on upload, refusing values beyond the int32 range, and widens on
#: read): int64 is the index dtype of the whole API, and no WGSL device has 64-bit integers
_HOLDABLE = frozenset({"f32", "i8", "i16", "i32", "i64", "u32", "u8", "bool_"})

PRELUDE = r"""
// ember WGSL prelude: numpy semantics for what WGSL leaves undefined or lacks
// signed floor division and modulo from unsigned magnitudes: drivers disagree on signed
// division and remainder of negative operands (NVIDIA's Vulkan differs from lavapipe)
fn em_mag(a: i32) -> u32 { return select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i); }
fn em_floordiv_i32(a: i32, b: i32) -> i32 {
    if (b == 0i) { return 0i; }
    let q = em_mag(a) / em_mag(b);
    let r = em_mag(a) % em_mag(b);
    if ((a < 0i) == (b < 0i)) { return bitcast<i32>(q); }
    return 0i - bitcast<i32>(q + select(0u, 1u, r != 0u));
}
fn em_mod_i32(a: i32, b: i32) -> i32 {
    if (b == 0i) { return 0i; }
    let r = em_mag(a) % em_mag(b);
    if (r == 0u) { return 0i; }
    let t = select(bitcast<i32>(r), 0i - bitcast<i32>(r), a < 0i);  // C's remainder: a's sign
    return select(t + b, t, (a < 0i) == (b < 0i));
}
fn em_floordiv_u32(a: u32, b: u32) -> u32 { return select(0u, a / max(b, 1u), b != 0u); }
fn em_mod_u32(a: u32, b: u32) -> u32 { return select(0u, a % max(b, 1u), b != 0u); }
fn em_isnan(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u; }
fn em_isinf(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) == 0x7f800000u; }
fn em_isfinite(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) < 0x7f800000u; }
// WGSL leaves NaN comparisons to the driver (SPIR-V from naga uses ordered ones): != must be unordered
fn em_ne_f32(a: f32, b: f32) -> bool { return !(a == b) || em_isnan(a) || em_isnan(b); }
fn em_copysign(a: f32, b: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));
}
fn em_fmod(a: f32, b: f32) -> f32 {
    // C's fmod, exact: subtract b scaled by a power of two with y <= x < 2y (Sterbenz: exact)
    let y = abs(b);
    if (!em_isfinite(a) || em_isnan(b) || y == 0.0f) { return bitcast<f32>(0x7fc00000u); }
    var x = abs(a);
    if (em_isinf(b) || x < y) { return a; }
    let fy = frexp(y);
    loop {
        if (x < y) { break; }
        let fx = frexp(x);
        var e = fx.exp - fy.exp;
        if (fy.fract > fx.fract) { e = e - 1i; }
        x = x - ldexp(y, e);
    }
    return em_copysign(x, a);
}
fn em_mod_f32(a: f32, b: f32) -> f32 {
    var r = em_fmod(a, b);
    if (r != 0.0f) { if ((b < 0.0f) != (r < 0.0f)) { r = r + b; } } else { r = em_copysign(0.0f, b); }
    return r;
}
fn em_max_f32(a: f32, b: f32) -> f32 { return select(b, a, a > b || em_isnan(a)); }
fn em_min_f32(a: f32, b: f32) -> f32 { return select(b, a, a < b || em_isnan(a)); }
fn em_sign_f32(a: f32) -> f32 { return select(select(a, -1.0f, a < 0.0f), 1.0f, a > 0.0f); }
fn em_pow(a: f32, b: f32) -> f32 {
    if (b == 0.0f) { return 1.0f; }
    if (a == 1.0f) { return 1.0f; }
    let m = pow(abs(a), b);
    if (a < 0.0f) {
        if (trunc(b) != b) { return bitcast<f32>(0x7fc00000u); }
        let odd = abs(b) < 16777216.0f && (i32(abs(b)) & 1i) == 1i;
        return select(m, -m, odd);
    }
    if (a == 0.0f && b < 0.0f) { return bitcast<f32>(0x7f800000u); }
    return m;
}
fn em_log1p(x: f32) -> f32 {
    let u = 1.0f + x;
    if (u == 1.0f) { return x; }
    if (em_isinf(u)) { return u; }
    return log(u) * (x / (u - 1.0f));
}
fn em_expm1(x: f32) -> f32 {
    if (abs(x) < 1e-5f) { return x + 0.5f * x * x; }
    if (x > 88.7f) { return bitcast<f32>(0x7f800000u); }
    let u = exp(x);
    if (u == 1.0f) { return x; }
    let um1 = u - 1.0f;
    if (um1 == -1.0f) { return -1.0f; }
    if (abs(x) > 0.5f) { return um1; }
    return um1 * (x / log(u));
}
fn em_erf(x: f32) -> f32 {
    let a = abs(x);
    if (a < 0.5f) {  // Taylor series: relative error < 1e-7 on |x| < 0.5
        let t = x * x;
        let s = ((((-t / 1320.0f + 1.0f / 216.0f) * t - 1.0f / 42.0f) * t + 0.1f) * t - 1.0f / 3.0f) * t + 1.0f;
        return 1.1283791670955126f * x * s;
    }
    if (a >= 4.0f) { return em_copysign(1.0f, x); }
    // Abramowitz-Stegun 7.1.26: absolute error < 1.5e-7
    let t = 1.0f / (1.0f + 0.3275911f * a);
    let y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t
        + 0.254829592f) * t * exp(-a * a);
    return em_copysign(y, x);
}
fn em_tanh(x: f32) -> f32 { return select(tanh(clamp(x, -15.0f, 15.0f)), x, em_isnan(x)); }
// sin/cos/tan of x reduced to [-pi, pi] first (Cody-Waite, 2*pi in three parts): GPU sin/cos
// are accurate on that interval only (NVIDIA's lose digits as |x| grows)
fn em_reduce(x: f32) -> f32 {
    let k = round(x * 0.15915494309189535f);
    return fma(-k, 1.0253131677018246e-11f, fma(-k, 0.0019353071693331003f, fma(-k, 6.28125f, x)));
}
fn em_sin(x: f32) -> f32 { return sin(select(em_reduce(x), x, abs(x) <= 3.1415927f)); }
fn em_cos(x: f32) -> f32 { return cos(select(em_reduce(x), x, abs(x) <= 3.1415927f)); }
fn em_tan(x: f32) -> f32 { return tan(select(em_reduce(x), x, abs(x) <= 3.1415927f)); }
fn em_sigmoid(x: f32) -> f32 { return 1.0f / (1.0f + exp(-x)); }
"""

class WgslCompiler(CStyleCompiler):
    """WGSL for one adapter's capabilities (``f16``, ``subgroups`` with its plane size)."""

    language = "wgsl"

    #: i64 values (scalar parameters, casts) compute in 32 bits: no buffer holds them, and the
    #: runtime refuses an i64 scalar argument outside the i32 range
    SCALAR_TYPES = {
        "f16": "f32", "f32": "f32", "i8": "i32", "i16": "i32", "i32": "i32", "i64": "i32", "u32": "u32",
        "u8": "u32", "bool_": "bool",
    }
    STORAGE_TYPES = {
        "f16": "f16", "f32": "f32", "i8": "u32", "i16": "u32", "i32": "i32", "i64": "i32", "u32": "u32",
        "u8": "u32", "bool_": "u32",
    }

    BINARY = {
        "add": "{a} + {b}",
        "sub": "{a} - {b}",
        "mul": "{a} * {b}",
        "div": "{a} / {b}",
        "floordiv": {"float": "floor({a} / {b})", "int": "em_floordiv_i32({a}, {b})", "*": "em_floordiv_u32({a}, {b})"},
        "mod": {"float": "em_mod_f32({a}, {b})", "int": "em_mod_i32({a}, {b})", "*": "em_mod_u32({a}, {b})"},
        "pow": "em_pow({a}, {b})",
        "atan2": "atan2({a}, {b})",
        "copysign": "em_copysign({a}, {b})",
        "min": {"float": "em_min_f32({a}, {b})", "*": "min({a}, {b})"},
        "max": {"float": "em_max_f32({a}, {b})", "*": "max({a}, {b})"},
        "and": "{a} & {b}",
        "or": "{a} | {b}",
        "xor": {"bool": "{a} != {b}", "*": "{a} ^ {b}"},
        "shl": "{a} << u32({b})",
        "shr": "{a} >> u32({b})",
        "land": "{a} & {b}",
        "lor": "{a} | {b}",
        "lt": "{a} < {b}",
        "le": "{a} <= {b}",
        "gt": "{a} > {b}",
        "ge": "{a} >= {b}",
        "eq": "{a} == {b}",
        "ne": {"float": "em_ne_f32({a}, {b})", "*": "{a} != {b}"},
    }
    UNARY = {
        "copy": "{a}",
        "neg": {"uint": "(0u - {a})", "*": "-{a}"},
        "not": "~{a}",
        "lnot": "!{a}",
        "abs": {"uint": "{a}", "*": "abs({a})"},
        "sign": {"float": "em_sign_f32({a})", "int": "sign({a})", "uint": "select(0u, 1u, {a} > 0u)"},
        "exp": "exp({a})",
        "exp2": "exp2({a})",
        "log": "log({a})",
        "log2": "log2({a})",
        "log10": "(log2({a}) * 0.30102999566398120f)",
        "log1p": "em_log1p({a})",
        "expm1": "em_expm1({a})",
        "sqrt": "sqrt({a})",
        "rsqrt": "inverseSqrt({a})",
        "sin": "em_sin({a})",
        "cos": "em_cos({a})",
        "tan": "em_tan({a})",
        "tanh": "em_tanh({a})",
        "sinh": "sinh({a})",
        "cosh": "cosh({a})",
        "asin": "asin({a})",
        "acos": "acos({a})",
        "atan": "atan({a})",
        "erf": "em_erf({a})",
        "floor": "floor({a})",
        "ceil": "ceil({a})",
        "round": "round({a})",
        "trunc": "trunc({a})",
        "sigmoid": "em_sigmoid({a})",
        "recip": "(1.0f / {a})",
        "isnan": {"float": "em_isnan({a})", "*": "false"},
        "isinf": {"float": "em_isinf({a})", "*": "false"},
        "isfinite": {"float": "em_isfinite({a})", "*": "true"},
    }
    TERNARY = {"fma": "fma({a}, {b}, {c})", "select": "select({c}, {b}, {a})"}
    #: ops whose template is also valid on vecN operands (lines of 2 and 4)
    NATIVE_VECTOR = frozenset(
        {
            "add", "sub", "mul", "div", "and", "or", "not", "lnot", "land", "lor", "copy",
            "lt", "le", "gt", "ge", "eq", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
            "sinh", "cosh", "asin", "acos", "atan", "atan2", "floor", "ceil",
            "round", "trunc", "fma", "select",
        }
    )  # fmt: skip
    PLANE = {
        "plane_sum": "subgroupAdd({a})",
        "plane_prod": "subgroupMul({a})",
        "plane_max": "subgroupMax({a})",
        "plane_min": "subgroupMin({a})",
        "plane_all": "subgroupAll({a})",
        "plane_any": "subgroupAny({a})",
        "plane_broadcast": "subgroupShuffle({a}, u32({b}))",
        "plane_shuffle": "subgroupShuffle({a}, u32({b}))",
        "plane_shuffle_xor": "subgroupShuffleXor({a}, u32({b}))",
        "plane_elect": "(lidx == subgroupBroadcastFirst(lidx))",  # naga has no subgroupElect
        "plane_inclusive_sum": "subgroupInclusiveAdd({a})",
        "plane_exclusive_sum": "subgroupExclusiveAdd({a})",
    }
    ATOMIC = {
        "atomic_add": "atomicAdd",
        "atomic_sub": "atomicSub",
        "atomic_max": "atomicMax",
        "atomic_min": "atomicMin",
        "atomic_exchange": "atomicExchange",
    }
    #: float atomics as compare-and-swap: the new value from the old one ``o`` and ``v``
    FLOAT_ATOMIC = {
        "atomic_add": "{o} + {v}",
        "atomic_sub": "{o} - {v}",
        "atomic_max": "em_max_f32({o}, {v})",
        "atomic_min": "em_min_f32({o}, {v})",
        "atomic_exchange": "{v}",
    }
    BUILTINS = {
        "ABSOLUTE_POS": "(cube_pos * {NU}u + lidx)",
        "ABSOLUTE_POS_X": "(wid.x * {DX}u + lid.x)",
        "ABSOLUTE_POS_Y": "(wid.y * {DY}u + lid.y)",
        "ABSOLUTE_POS_Z": "(wid.z * {DZ}u + lid.z)",
        "UNIT_POS": "lidx",
        "UNIT_POS_X": "lid.x",
        "UNIT_POS_Y": "lid.y",
        "UNIT_POS_Z": "lid.z",
        "CUBE_POS": "cube_pos",
        "CUBE_POS_X": "wid.x",
        "CUBE_POS_Y": "wid.y",
        "CUBE_POS_Z": "wid.z",
        "CUBE_COUNT": "(nwg.x * nwg.y * nwg.z)",
        "CUBE_COUNT_X": "nwg.x",
        "CUBE_COUNT_Y": "nwg.y",
        "CUBE_COUNT_Z": "nwg.z",
        "UNIT_POS_PLANE": "(lidx % {P}u)",
        "PLANE_POS": "(lidx / {P}u)",
    }

    def __init__(
        self,
        f16: bool = False,
        subgroups: bool = False,
        plane_size: int = 32,
        max_shared_bytes: int = 16384,
    ) -> None:
        self.f16 = f16
        self.subgroups = subgroups
        self.capabilities = Capabilities(
            line_widths=(1, 2, 4, 8, 16),
            plane_size=plane_size if subgroups else 1,
            max_shared_bytes=max_shared_bytes,
            atomics=("f32", "i32", "u32"),
        )

    @property
    def target_name(self) -> str:
        """``wgsl``, ``wgsl+f16``, ``wgsl+subgroups32``, ``wgsl+f16+subgroups32``: part of every
        KernelId, so kernels specialised for one capability set never serve another."""
        name = self.language
        if self.f16:
            name += "+f16"
        if self.subgroups:
            name += f"+subgroups{self.capabilities.plane_size}"
        return name

    def holds(self, elem: Elem) -> bool:
        """Whether buffers of this element type exist on the target."""
        return elem.name in _HOLDABLE or (elem.name == "f16" and self.f16)

    def builtin_expr(self, name: str, k: ir.KernelIr) -> str:
        x, y, z = k.cube_dim
        P = self.capabilities.plane_size
        return self.BUILTINS[name].format(NU=x * y * z, DX=x, DY=y, DZ=z, DXY=x * y, P=P)

    # ---------------------------------------------------------------- types and literals
    def scalar_type(self, e: Elem) -> str:
        t = self.SCALAR_TYPES.get(e.name)
        if t is None:
            raise NotImplementedError(f"WGSL has no {e.name} values on this device")
        return t

    def vector_type(self, t: Type) -> str:
        s = self.scalar_type(t.elem)
        return f"vec{t.width}<{s}>" if t.width <= 4 else f"array<{s}, {t.width}>"

    def float_literal(self, x: float, e: Elem) -> str:
        f = struct.unpack("<f", struct.pack("<f", x))[0] if math.isfinite(x) and abs(x) < 3.5e38 else x
        if math.isnan(f) or math.isinf(f) or (f != 0.0 and abs(f) < 1.1754943508222875e-38):
            bits = 0x7FC00000 if math.isnan(f) else struct.unpack("<I", struct.pack("<f", f))[0]
            return f"bitcast<f32>({bits:#x}u)"
        r = repr(f)
        if "e" not in r and "." not in r:
            r += ".0"
        return f"({r}f)" if f < 0 or r.startswith("-") else f"{r}f"

    def int_literal(self, n: int, e: Elem) -> str:
        if e.name == "i64":
            # i64 computes in 32 bits: an extreme constant saturates, which keeps the identities
            # of min/max reductions (INT64_MAX...) right for data that fits int32 (all there is)
            n = max(-(1 << 31), min(n, (1 << 31) - 1))
        if e.name in ("i8", "i16", "i32", "i64"):
            if not -(1 << 31) <= n < (1 << 31):
                raise NotImplementedError(f"the {e.name} constant {n} does not fit the 32 bits WGSL computes in")
            if n == -(1 << 31):
                return "i32(-2147483647 - 1)"
            return f"{n}i" if n >= 0 else f"({n}i)"
        if e.name in ("u32", "u8"):
            return f"{n & 0xFFFFFFFF}u"
        raise NotImplementedError(f"WGSL has no {e.name} literals")

    def literal(self, value: Any, t: Type) -> str:
        if t.elem.kind == BOOL:
            return "true" if value else "false"
        return super().literal(value, t)

    # ---------------------------------------------------------------- compile
    def compile(self, k: ir.KernelIr) -> CompiledSource:
        for p in k.arrays:
            e = p.var.type.elem
            if not self.holds(e):
                raise UnsupportedDTypeError(
                    f"WGSL buffers cannot hold {e.dtype.name if e.dtype else e.name} on this device "
                    f"(kernel {k.entry}, argument {p.name!r})"
                )
        slots, where, dynamic = self.info_layout(k)
        em = WgslEmitter(self, k, dynamic)
        em.out.depth = 1
        em.stmts(k.body)
        out = Lines()
        if self.f16:
            out("enable f16;")
        out(f"// ember cube kernel {k.name} -> {k.entry}")
        out.out.extend(PRELUDE.strip("\n").split("\n"))
        arrays = k.arrays
        for p in arrays:
            out(
                f"@group(0) @binding({p.buffer}) var<storage, read_write> {self.name(p.var)}: "
                f"array<{em.binding_elem(p.var)}>;"
            )
        out(f"@group(0) @binding({len(arrays)}) var<storage, read> info: array<u32>;")
        for sm in k.shared:
            out(f"var<workgroup> {self.name(sm)}: array<{em.shared_elem(sm)}, {sm.size}>;")
        x, y, z = k.cube_dim
        builtins = [
            "@builtin(local_invocation_id) lid: vec3<u32>",
            "@builtin(local_invocation_index) lidx: u32",
            "@builtin(workgroup_id) wid: vec3<u32>",
            "@builtin(num_workgroups) nwg: vec3<u32>",
        ]
        out(f"@compute @workgroup_size({x}, {y}, {z})")
        out.open(f"fn {k.entry}({', '.join(builtins)}) {{")
        out("let cube_pos = wid.x + nwg.x * (wid.y + nwg.y * wid.z);")
        n = len(slots)
        for p in arrays:
            out(f"let o_{self.name(p.var)[2:]} = info[{2 * n + p.buffer}u];")
        for i, s in enumerate(slots):
            if s.kind == "scalar":
                v = next(p.var for p in k.scalars if p.var.param == s.param)
                out(f"let {self.name(v)}: {self.scalar_type(s.elem)} = {self._slot_read(s.elem, i)};")
            else:
                arr = next(p.var for p in arrays if p.var.param == s.param)
                out(f"let {em.meta_name(arr, s.kind, s.dim)} = info[{2 * i}u];")
        for v in sorted(em.locals, key=lambda v: v.id):
            out(f"var {self.name(v)}: {em.rtype(em.local_type(v))};")
        for la in k.local_arrays:
            out(f"var {self.name(la)}: array<{em.rtype(la.type)}, {la.size}>;")
        for f in sorted(em.flags):
            out(f"var {f}: bool = false;")
        out.out.extend(em.out.out)
        out.close()
        return CompiledSource(
            k.entry,
            out.text(),
            self.language,
            slots,
            [p.var.param for p in arrays],
            {
                "widths": [p.var.type.width for p in arrays],
                "info_words": 2 * n + len(arrays),
                "narrowed": [i for i, s in enumerate(slots) if s.kind == "scalar" and s.elem.name == "i64"],
            },
        )

    def _slot_read(self, e: Elem, i: int) -> str:
        w = f"info[{2 * i}u]"
        if e.is_float:
            return f"bitcast<f32>({w})"
        if e.kind == BOOL:
            return f"(({w} & 1u) != 0u)"
        if e.name in ("i8", "i16", "i32", "i64"):  # the launch packs a narrow int sign-extended to 32 bits
            return f"bitcast<i32>({w})"
        if e.name == "u8":
            return f"({w} & 255u)"
        if e.name == "u32":
            return w
        raise NotImplementedError(f"WGSL has no {e.name} scalars")
