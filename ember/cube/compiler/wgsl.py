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
* no 8-bit storage: u8 and bool buffers are packed four bytes to an ``atomic<u32>`` word; a
  whole-word line (widths 4, 8, 16) is one atomic load/store per word, a narrower one updates
  its byte with ``atomicAnd``/``atomicOr`` (neighbouring units may own the other bytes);
  u8 values compute in u32 registers and wrap to 8 bits where the C target's ``uint8_t`` would;
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
from ..ir import ARRAY, LOCAL_ARRAY, SHARED, Const, Type, Var
from ..types import BOOL, Elem
from .base import Capabilities, CompiledSource, CStyleCompiler, Lines
from .emitter import Emitter

__all__ = ["WgslCompiler", "PRELUDE"]

#: element types whose buffers WGSL can hold (f16 only with the capability); i64 buffers hold
#: int32 (the runtime narrows on upload, refusing values beyond the int32 range, and widens on
#: read): int64 is the index dtype of the whole API, and no WGSL device has 64-bit integers
_HOLDABLE = frozenset({"f32", "i32", "i64", "u32", "u8", "bool_"})
_PACKED = frozenset({"u8", "bool_"})

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
        "f16": "f32", "f32": "f32", "i32": "i32", "i64": "i32", "u32": "u32", "u8": "u32", "bool_": "bool"
    }
    STORAGE_TYPES = {"f16": "f16", "f32": "f32", "i32": "i32", "i64": "i32", "u32": "u32", "u8": "u32", "bool_": "u32"}

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
        if e.name in ("i32", "i64"):
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
        em = _WgslEmitter(self, k, dynamic)
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
        if e.name in ("i32", "i64"):
            return f"bitcast<i32>({w})"
        if e.name == "u8":
            return f"({w} & 255u)"
        if e.name == "u32":
            return w
        raise NotImplementedError(f"WGSL has no {e.name} scalars")


class _Frame:
    """A target loop around the code being emitted: a real loop, or the one-pass loop that
    stands for an inlined function body with an early exit (``label``)."""

    __slots__ = ("label", "pending")

    def __init__(self, label: int | None) -> None:
        self.label = label  # None: a real loop
        self.pending: list[tuple[str, tuple[Any, ...]]] = []


class _WgslEmitter(Emitter):
    def __init__(self, c: WgslCompiler, k: ir.KernelIr, dynamic: dict[tuple[str, int], int]) -> None:
        super().__init__(c, k, dynamic)
        self.c: WgslCompiler = c
        self.locals: set[Var] = set()
        self.flags: set[str] = set()
        self.frames: list[_Frame] = []
        self.tmp = 0
        # how each array parameter is bound: "packed" (u8/bool bytes in atomic words), "atomic"
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
        for sm in k.shared:  # workgroup memory holds registers (u8/bool as u32): atomics need no packing
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
        if v.type.elem.name == "u8" and v.type.width <= 4:  # u8 computes in u32: wrap as uint8_t does
            expr = f"({expr}) & {self.broadcast(v.type, '255u') if v.type.width > 1 else '255u'}"
        self.out(self.decl_const(v.type, self.c.name(v), expr))

    def lanes(self, v: Var, exprs: list[str]) -> None:
        """``v`` (a line) built from one expression per lane."""
        if v.type.elem.name == "u8":
            exprs = [f"(({e}) & 255u)" for e in exprs]
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
        lanes: list[str] = []
        if w % 4 == 0:
            base = self.new_tmp("word")
            self.out(f"let {base} = {i} * {w // 4}u;")
            for k in range(w // 4):
                word = self.new_tmp("w")
                self.out(f"let {word} = atomicLoad(&{name}[{base} + {k}u]);")
                lanes += [f"(({word} >> {8 * j}u) & 255u)" for j in range(4)]
        else:
            e = self.new_tmp("byte")
            self.out(f"let {e} = {i} * {w}u;")
            for j in range(w):
                b = f"({e} + {j}u)"
                lanes.append(f"((atomicLoad(&{name}[{b} >> 2u]) >> (({b} & 3u) * 8u)) & 255u)")
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
        tmp = self.new_tmp("val")
        self.out(f"let {tmp} = {self.assigned(t, value)};")
        lanes = [f"{tmp}[{j}]" for j in range(w)] if w > 1 else [tmp]
        if t.elem.kind == BOOL:
            lanes = [f"select(0u, 1u, {x})" for x in lanes]
        else:
            lanes = [f"({x} & 255u)" for x in lanes]
        if w % 4 == 0:
            base = self.new_tmp("word")
            self.out(f"let {base} = {i} * {w // 4}u;")
            for k in range(w // 4):
                parts = [lanes[4 * k + j] if j == 0 else f"({lanes[4 * k + j]} << {8 * j}u)" for j in range(4)]
                self.out(f"atomicStore(&{name}[{base} + {k}u], {' | '.join(parts)});")
            return
        e = self.new_tmp("byte")
        self.out(f"let {e} = {i} * {w}u;")
        for j in range(w):
            b = f"({e} + {j}u)"
            sh = f"(({b} & 3u) * 8u)"
            self.out(f"atomicAnd(&{name}[{b} >> 2u], ~(255u << {sh}));")
            self.out(f"atomicOr(&{name}[{b} >> 2u], {lanes[j]} << {sh});")

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

