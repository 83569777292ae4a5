"""IR -> CUDA C++ for NVRTC (the ``cuda`` runtime).

One ``__global__`` function per kernel, with C linkage so the driver finds it by entry name::

    extern "C" __global__ void __launch_bounds__(NU) <entry>(T *b_x, ..., const em_info<N> info)

One pointer parameter per array parameter (already offset to the view's first element), then
the info words by value (absent when the kernel reads none): no per-launch upload, and the
driver copies them with the launch. A cube is a thread block, a unit a thread, a plane a warp:
``sync_cube`` is ``__syncthreads``, plane ops are warp shuffles, shared memory is ``__shared__``.

Unlike the C target there is no phase model: the hardware runs every unit. Lines are
``em_vec<T, N>`` (aligned to their size up to 16 bytes, so a 16-byte line is one vector
load/store); operations on lines run lane by lane in unrolled loops. Half types are 16-bit
storage computing in f32, as on the C target (see ``cuda_prelude``).
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..ir import LOCAL, LOCAL_ARRAY, Type, Var
from ..types import BOOL, Elem, bf16, f16
from .base import Capabilities, CompiledSource, CStyleCompiler, Lines
from .c import CCompiler, buffer_access
from .cuda_prelude import PRELUDE
from .emitter import Emitter

__all__ = ["CudaCompiler", "ARCHES"]

#: architectures the compile-only path knows (sm_90a: wgmma / setmaxnreg)
ARCHES = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

_PLANE_FOLDS = {
    "plane_sum": "em_op_add",
    "plane_prod": "em_op_mul",
    "plane_max": "em_op_max",
    "plane_min": "em_op_min",
    "plane_all": "em_op_land",
    "plane_any": "em_op_lor",
}


def sm_number(arch: str) -> int:
    """The compute capability of a target as a number: ``sm_90a`` -> 90 (0 for none)."""
    digits = "".join(c for c in arch if c.isdigit())
    return int(digits or 0)


class CudaCompiler(CStyleCompiler):
    """Tables of the C target (C++ accepts the same expressions), CUDA's execution model."""

    language = "cuda"

    SCALAR_TYPES = CCompiler.SCALAR_TYPES
    STORAGE_TYPES = {**CCompiler.STORAGE_TYPES, "f16": "uint16_t"}  # f16 bits; arithmetic in float
    BINARY = CCompiler.BINARY
    UNARY = {**CCompiler.UNARY, "rsqrt": "({t})1 / sqrt({a})"}
    TERNARY = CCompiler.TERNARY
    _UNIT = "(threadIdx.x + {DX}u * (threadIdx.y + {DY}u * threadIdx.z))"
    _CUBE = "(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))"
    BUILTINS = {
        "ABSOLUTE_POS": f"({_CUBE} * {{NU}}u + {_UNIT})",
        "ABSOLUTE_POS_X": "(blockIdx.x * {DX}u + threadIdx.x)",
        "ABSOLUTE_POS_Y": "(blockIdx.y * {DY}u + threadIdx.y)",
        "ABSOLUTE_POS_Z": "(blockIdx.z * {DZ}u + threadIdx.z)",
        "UNIT_POS": _UNIT,
        "UNIT_POS_X": "threadIdx.x",
        "UNIT_POS_Y": "threadIdx.y",
        "UNIT_POS_Z": "threadIdx.z",
        "CUBE_POS": _CUBE,
        "CUBE_POS_X": "blockIdx.x",
        "CUBE_POS_Y": "blockIdx.y",
        "CUBE_POS_Z": "blockIdx.z",
        "CUBE_COUNT": "(gridDim.x * gridDim.y * gridDim.z)",
        "CUBE_COUNT_X": "gridDim.x",
        "CUBE_COUNT_Y": "gridDim.y",
        "CUBE_COUNT_Z": "gridDim.z",
        "UNIT_POS_PLANE": f"({_UNIT} & 31u)",
        "PLANE_POS": f"({_UNIT} >> 5)",
    }

    float_literal = CCompiler.float_literal
    int_literal = CCompiler.int_literal

    def __init__(self, arch: str = "sm_90") -> None:
        self.arch = arch
        sm = sm_number(arch)
        # static __shared__ is capped at 48 KiB per block; mma.sync needs sm_80+
        self.capabilities = Capabilities(
            line_widths=(1, 2, 4, 8, 16),
            plane_size=32,
            max_shared_bytes=48 * 1024,
            atomics=("f32", "f64", "i32", "i64", "u32", "u64"),
            matrix_units=sm >= 80,
        )

    def builtin_expr(self, name: str, k: ir.KernelIr) -> str:
        x, y, z = k.cube_dim
        text = self.BUILTINS[name]
        if y == 1 and z == 1:
            text = text.replace(self._UNIT, "threadIdx.x")
        return text.format(NU=x * y * z, DX=x, DY=y, DZ=z)

    # ---------------------------------------------------------------- types
    def vector_type(self, t: Type) -> str:
        e = "uint8_t" if t.elem.kind == BOOL else self.scalar_type(t.elem)
        return f"em_vec<{e}, {t.width}>"

    def storage_vector_type(self, t: Type) -> str:
        return f"em_vec<{self.storage_type(t.elem)}, {t.width}>"

    # ---------------------------------------------------------------- compile
    def compile(self, k: ir.KernelIr) -> CompiledSource:
        slots, where, dynamic = self.info_layout(k)
        em = _Emitter(self, k, dynamic)
        em.stmts(k.body)
        out = Lines()
        out(f"/* ember cube kernel {k.name} -> {k.entry} */")
        out.out.append(PRELUDE.strip("\n"))
        out("")
        written, aliased = buffer_access(k)
        params = []
        for p in k.arrays:
            v = p.var
            const = "" if id(v) in written else "const "
            restrict = "" if p.buffer in aliased else " __restrict__"
            params.append(f"{const}{self.storage_type(v.type.elem)} *{restrict} {self.name(v)}")
        if slots:
            params.append(f"const em_info<{len(slots)}> info")
        bounds = f"{k.units}, {k.min_cubes}" if k.min_cubes > 1 else f"{k.units}"
        out.open(
            f'extern "C" __global__ void __launch_bounds__({bounds}) {k.entry}({", ".join(params)}) {{'
        )
        self._info_reads(out, k, em, slots)
        for sm in k.shared:
            st = self.storage_type(sm.type.elem)
            out(f"__shared__ __align__(16) {st} {self.name(sm)}[{sm.size * sm.type.width}];")
        for la in _local_arrays(k):
            out(f"alignas(16) {self.storage_type(la.type.elem)} {self.name(la)}[{la.size * la.type.width}];")
        for v in _locals(k):
            init = "{}" if v.type.width > 1 else " = 0"
            out(f"{em.rtype(v.type)} {self.name(v)}{init};")
        if em.planes:
            unit = self.builtin_expr("UNIT_POS", k)
            nu = k.units
            out(f"const uint32_t em_u_ = {unit};")
            out("const int em_lane_ = (int)(em_u_ & 31u);")
            if nu % 32 == 0:
                out("const int em_n_ = 32;")
                out("const uint32_t em_mask_ = 0xffffffffu;")
            else:
                out(f"const int em_n_ = {nu}u - (em_u_ & ~31u) < 32u ? (int)({nu}u - (em_u_ & ~31u)) : 32;")
                out("const uint32_t em_mask_ = em_n_ == 32 ? 0xffffffffu : ((1u << em_n_) - 1u);")
        out.out.extend("    " + ln if ln else ln for ln in em.out.out)
        out.close()
        return CompiledSource(
            k.entry,
            out.text(),
            self.language,
            slots,
            [p.var.param for p in k.arrays],
            {"arch": self.arch, "info_words": len(slots), "units": k.units},
        )

    # the info words are read as on the C target
    _info_reads = CCompiler._info_reads
    _slot_read = CCompiler._slot_read


def _locals(k: ir.KernelIr) -> list[Var]:
    """Every mutable local of the body (declared once at the top, zeroed as the C target does)."""
    seen: dict[int, Var] = {}

    def note(v: Any) -> None:
        if isinstance(v, Var) and v.kind == LOCAL:
            seen.setdefault(v.id, v)

    for ins in ir.walk(k.body):
        if isinstance(ins, ir.Assign):
            note(ins.out)
            note(ins.value)
        elif isinstance(ins, ir.RangeLoop):
            for a in (ins.var, ins.start, ins.end, ins.step):
                note(a)
        elif isinstance(ins, ir.Op):
            for a in ins.args:
                note(a)
        elif isinstance(ins, ir.Store):
            note(ins.index)
            note(ins.value)
        elif isinstance(ins, ir.If):
            note(ins.cond)
    return [seen[i] for i in sorted(seen)]


def _local_arrays(k: ir.KernelIr) -> list[Var]:
    seen: dict[int, Var] = {v.id: v for v in k.local_arrays}
    for ins in ir.walk(k.body):
        arrs: list[Any] = []
        if isinstance(ins, ir.Store):
            arrs.append(ins.array)
        elif isinstance(ins, ir.Op):
            arrs.extend(ins.args)
        for a in arrs:
            if isinstance(a, Var) and a.kind == LOCAL_ARRAY:
                seen.setdefault(a.id, a)
    return [seen[i] for i in sorted(seen)]


class _Emitter(Emitter):
    def __init__(self, c: CudaCompiler, k: ir.KernelIr, dynamic: dict[tuple[str, int], int]) -> None:
        super().__init__(c, k, dynamic)
        self.c: CudaCompiler = c
        self.planes = False

    # ---------------------------------------------------------------- lines
    def broadcast(self, t: Type, scalar: str) -> str:
        e = "uint8_t" if t.elem.kind == BOOL else self.c.scalar_type(t.elem)
        return f"em_splat<{e}, {t.width}>(({e})({scalar}))"

    def zero(self, t: Type) -> str:
        return f"{self.vector_type(t)}{{}}" if t.width > 1 else f"({self.c.scalar_type(t.elem)})0"

    def bitcast_expr(self, out: Type, x: str) -> str:
        return f"em_bitcast<{self.rtype(out)}>({x})"

    def lanewise(self, out: Var, args: tuple[Any, ...], render: Any) -> None:
        tgt = self.declare(out)
        expr = render([self.lane_val(a) for a in args])
        self.out(f"#pragma unroll\nfor (int l_ = 0; l_ < {out.type.width}; ++l_) {tgt}[l_] = {expr};")

    # ---------------------------------------------------------------- collectives
    def emit_collective(self, s: Any) -> None:
        if isinstance(s, ir.Barrier):
            self.out("__syncthreads();")
            return
        self.planes = True
        op, out, args = s.op, s.out, s.args
        x = self.val(args[0], out.type) if args else ""
        m, lane, n = "em_mask_", "em_lane_", "em_n_"
        if op in _PLANE_FOLDS:
            t = self.rtype(out.type)
            expr = f"em_plane_fold<{_PLANE_FOLDS[op]}, {t}>({m}, {lane}, {n}, ({t})({x}))"
        elif op == "plane_inclusive_sum":
            expr = f"em_plane_inclusive_sum({m}, {lane}, {x})"
        elif op == "plane_exclusive_sum":
            expr = f"em_plane_exclusive_sum({m}, {lane}, {x})"
        elif op == "plane_elect":
            expr = f"({lane} == __ffs(__activemask()) - 1)"
        elif op in ("plane_broadcast", "plane_shuffle"):
            expr = f"em_plane_read({m}, {lane}, {n}, {x}, (uint32_t)({self.val(args[1])}))"
        elif op == "plane_shuffle_xor":
            expr = f"em_plane_read({m}, {lane}, {n}, {x}, (uint32_t)({lane} ^ (int)({self.val(args[1])})))"
        else:  # pragma: no cover - PLANE_OPS lists nothing else
            raise NotImplementedError(op)
        self.define(out, expr)

    # ---------------------------------------------------------------- memory
    def ptr(self, arr: Var) -> str:
        return self.c.name(arr)

    def _load_scalar(self, e: Elem, p: str, i: str) -> str:
        if e is f16:
            return f"em_h2f({p}[{i}])"
        if e is bf16:
            return f"em_bf2f({p}[{i}])"
        if e.kind == BOOL:
            return f"({p}[{i}] != 0)"
        return f"{p}[{i}]"

    def load(self, out: Var, arr: Var, idx: Any) -> None:
        t = arr.type
        p, i = self.ptr(arr), self.val(idx)
        if t.width == 1:
            return self.define(out, self._load_scalar(t.elem, p, i))
        at = f"{p} + (em_size_t)({i}) * {t.width}"
        if t.elem in (f16, bf16):
            return self.define(out, f"em_load_{t.elem.name}<{t.width}>({at})")
        return self.define(out, f"*(const {self.c.storage_vector_type(t)} *)({at})")

    def store(self, arr: Var, idx: Any, value: Any) -> None:
        t = arr.type
        p, i = self.ptr(arr), self.val(idx)
        if t.width == 1:
            v = self.val(value, t)
            if t.elem is f16:
                self.out(f"{p}[{i}] = em_f2h({v});")
            elif t.elem is bf16:
                self.out(f"{p}[{i}] = em_f2bf({v});")
            elif t.elem.kind == BOOL:
                self.out(f"{p}[{i}] = (uint8_t)({v});")
            else:
                self.out(f"{p}[{i}] = {v};")
            return
        at = f"{p} + (em_size_t)({i}) * {t.width}"
        v = self.assigned(t, value)
        if t.elem in (f16, bf16):
            self.out(f"em_store_{t.elem.name}<{t.width}>({at}, {v});")
        else:
            self.out(f"*({self.c.storage_vector_type(t)} *)({at}) = {v};")

    def atomic(self, s: ir.Op) -> None:
        arr, idx, v = s.args
        e = arr.type.elem
        st = self.c.storage_type(e)
        if e.kind == BOOL or e.bits < 32:
            raise NotImplementedError(f"cuda compiler: {s.op} on {e.name} (atomics need 32- or 64-bit elements)")
        p = f"&{self.ptr(arr)}[{self.val(idx)}]"
        self.define(s.out, f"em_{s.op}(({st} *){p}, ({st})({self.val(v, arr.type)}))")

    # local Vars are declared at the top of the kernel: nothing to declare at the assignment
    def declare(self, v: Var) -> str:
        if v.kind == LOCAL:
            return self.ref(v)
        return super().declare(v)
