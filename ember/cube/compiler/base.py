"""The C-style compiler base that the C, CUDA C and WGSL compilers share.

A target is mostly *tables*: element type names, one template per IR op (``"{a} + {b}"``,
with per-kind variants), position builtins, literals. ``emitter.Emitter`` walks the
structured IR and renders each instruction through those tables; a target subclasses both
where its syntax or execution model differs (declarations, kernel signature, barriers,
lines). The info layout (which scalar and metadata words a kernel reads) is decided here,
once for every target.

Templates see ``{a} {b} {c}`` (operands, always atoms: names or literals, so no
parenthesisation is ever needed), ``{t}`` (the result's register type) and ``{s}`` (the
suffix of the helper family for the operand type, e.g. ``f32`` for f16/bf16/f32 values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import ir
from ..ir import ARRAY, LOCAL, LOCAL_ARRAY, SCALAR, SHARED, SSA, Const, Type, Var
from ..types import BOOL, Elem

__all__ = ["CStyleCompiler", "CompiledSource", "InfoSlot", "Capabilities", "template"]


@dataclass(frozen=True)
class Capabilities:
    """What a target offers; kernels ask for these instead of branching on target names."""

    line_widths: tuple[int, ...] = (1, 2, 4, 8, 16)
    plane_size: int = 32
    max_shared_bytes: int = 48 * 1024
    atomics: tuple[str, ...] = ("f32", "f64", "i32", "i64", "u32", "u64")
    matrix_units: bool = False


@dataclass(frozen=True)
class InfoSlot:
    """One 64-bit word of the ``info`` argument: a scalar parameter or array metadata.

    kind: "scalar" (``param`` its index, ``elem`` its type), "len", "shape", "stride", "extent"
    (checked mode: lines from the view's offset to the end of its buffer, the bounds tests' limit)
    (``param`` the array parameter, ``dim`` the dimension).
    """

    kind: str
    param: int
    dim: int = 0
    elem: Elem | None = None


@dataclass
class CompiledSource:
    entry: str
    source: str
    language: str
    info: list[InfoSlot]
    buffers: list[int]  # parameter index of each entry of the buffers argument
    notes: dict[str, Any] = field(default_factory=dict)


# The compute suffix of an element: half types compute in f32, small ints in 32 bits.
_SUFFIX = {
    "f16": "f32",
    "bf16": "f32",
    "f32": "f32",
    "f64": "f64",
    "i8": "i32",
    "i16": "i32",
    "i32": "i32",
    "i64": "i64",
    "u8": "u32",
    "u16": "u32",
    "u32": "u32",
    "u64": "u64",
    "bool_": "u32",
}


def template(table: dict[str, Any], op: str, elem: Elem) -> str | None:
    """The template of ``op`` for operands of ``elem``: exact name, then kind, then ``*``."""
    entry = table.get(op)
    if entry is None or isinstance(entry, str):
        return entry
    return entry.get(elem.name) or entry.get(elem.kind) or entry.get("*")


class CStyleCompiler:
    """Shared machinery; subclasses fill the tables and hooks."""

    language = "c"
    capabilities = Capabilities()
    #: bounds-checked memory access: out-of-range reads give 0, writes and atomics are dropped
    checked = False

    @property
    def target_name(self) -> str:
        """Language plus options: part of every KernelId compiled by this compiler."""
        return self.language + ("+checked" if self.checked else "")

    #: register (compute) type of each element
    SCALAR_TYPES: dict[str, str] = {}
    #: type of each element in memory (buffers, shared and local arrays)
    STORAGE_TYPES: dict[str, str] = {}
    #: op -> template (or {kind: template})
    BINARY: dict[str, Any] = {}
    UNARY: dict[str, Any] = {}
    TERNARY: dict[str, Any] = {}
    #: position builtin -> expression; formatted with NU, DX, DY, DXY, P
    BUILTINS: dict[str, str] = {}

    # ---------------------------------------------------------------- names and types
    def name(self, v: Var) -> str:
        tag = "".join(c if c.isalnum() else "_" for c in v.name)
        if v.kind == ARRAY:
            return f"b_{tag}"
        if v.kind == SCALAR:
            return f"s_{tag}"
        prefix = {SSA: "v", LOCAL: "l", SHARED: "sm", LOCAL_ARRAY: "la"}[v.kind]
        return f"{prefix}{v.id}_{tag}" if tag and v.kind in (SSA, LOCAL) else f"{prefix}{v.id}"

    def scalar_type(self, e: Elem) -> str:
        return self.SCALAR_TYPES[e.name]

    def storage_type(self, e: Elem) -> str:
        return self.STORAGE_TYPES[e.name]

    def reg_type(self, t: Type) -> str:
        """Register type of a value (a vector type for lines)."""
        return self.scalar_type(t.elem) if t.width == 1 else self.vector_type(t)

    def vector_type(self, t: Type) -> str:
        raise NotImplementedError

    def suffix(self, e: Elem) -> str:
        return _SUFFIX[e.name]

    # ---------------------------------------------------------------- literals
    def literal(self, value: Any, t: Type) -> str:
        e = t.elem
        if e.kind == BOOL:
            return "1" if value else "0"
        if e.is_float:
            return self.float_literal(float(value), e)
        return self.int_literal(int(value), e)

    def float_literal(self, x: float, e: Elem) -> str:
        raise NotImplementedError

    def int_literal(self, n: int, e: Elem) -> str:
        raise NotImplementedError

    # ---------------------------------------------------------------- expressions
    def op_template(self, op: str, elem: Elem, nargs: int) -> str | None:
        table = self.UNARY if nargs == 1 else self.BINARY if nargs == 2 else self.TERNARY
        return template(table, op, elem)

    def scalar_expr(self, op: str, out: Type, arg_types: list[Type], args: list[str]) -> str:
        """The expression of a scalar op from the tables."""
        ref_elem = arg_types[0].elem if arg_types else out.elem
        if op == "select":
            ref_elem = arg_types[1].elem
        tpl = self.op_template(op, ref_elem, len(args))
        if tpl is None:
            raise NotImplementedError(f"{self.language} compiler has no template for {op} on {ref_elem.name}")
        keys = dict(zip("abc", args))
        return tpl.format(**keys, t=self.scalar_type(out.elem), s=self.suffix(ref_elem))

    def builtin_expr(self, name: str, k: ir.KernelIr) -> str:
        x, y, z = k.cube_dim
        return self.BUILTINS[name].format(NU=x * y * z, DX=x, DY=y, DXY=x * y, P=k.plane_size)

    # ---------------------------------------------------------------- info layout
    def info_layout(
        self, k: ir.KernelIr
    ) -> tuple[list[InfoSlot], dict[tuple[str, int, int], int], dict[tuple[str, int], int]]:
        """Slots for scalars then the metadata the body reads.

        Returns the slots, a map (kind, param, dim) -> slot index, and for arrays whose
        shape/stride is read with a runtime dimension, (kind, param) -> index of dim 0
        (all dims of that kind are then laid out in order)."""
        slots: list[InfoSlot] = []
        where: dict[tuple[str, int, int], int] = {}
        dynamic: dict[tuple[str, int], int] = {}
        for p in k.scalars:
            where[("scalar", p.var.param, 0)] = len(slots)
            slots.append(InfoSlot("scalar", p.var.param, 0, p.var.type.elem))
        need: dict[tuple[str, int], set[int] | None] = {}
        for ins in ir.walk(k.body):
            if isinstance(ins, ir.Op) and ins.op in ("len", "shape", "stride"):
                arr = ins.args[0]
                key = (ins.op, arr.param)
                if ins.op == "len":
                    need.setdefault(key, set()).add(0)
                elif isinstance(ins.args[1], Const):
                    s = need.setdefault(key, set())
                    if s is not None:
                        s.add(int(ins.args[1].value))
                else:
                    need[key] = None  # every dim, in order
        for p in k.arrays:
            param = p.var.param
            if self.checked:  # the bounds tests' limit: elements from the view's start to its buffer's end
                need.setdefault(("extent", param), set()).add(0)
            for kind in ("len", "shape", "stride", "extent"):
                dims = need.get((kind, param), set())
                if dims is None:
                    dims = set(range(p.var.rank))
                    dynamic[(kind, param)] = len(slots)
                for d in sorted(dims):
                    where[(kind, param, d)] = len(slots)
                    slots.append(InfoSlot(kind, param, d))
        return slots, where, dynamic

    # ---------------------------------------------------------------- output
    def compile(self, k: ir.KernelIr) -> CompiledSource:
        raise NotImplementedError


class Lines:
    """An indented list of source lines."""

    __slots__ = ("out", "depth")

    def __init__(self) -> None:
        self.out: list[str] = []
        self.depth = 0

    def __call__(self, text: str) -> None:
        self.out.append("    " * self.depth + text)

    def open(self, text: str) -> None:
        self(text)
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)

    def text(self) -> str:
        return "\n".join(self.out) + "\n"
