"""Kernel IR: what a ``@cube`` function expands to, and what every compiler reads.

The IR is structured (no basic blocks): a kernel body is a list of instructions, some of
which hold nested lists (``If``, ``RangeLoop``, ``Loop``, ``Block``). Values are ``Var``s
and ``Const``s of a ``Type`` (element type and line width).

Invariants the expander guarantees and compilers rely on:

* an ``ssa`` Var is written by exactly one ``Op`` and read only after it in the same list or
  in lists nested below that point (so C block scoping is always valid);
* a ``local`` Var is a mutable variable written by ``Assign`` (and ``RangeLoop`` for its
  counter); it may be read anywhere;
* ``Op`` arguments are Vars or Consts, never nested expressions; an op with side effects
  (stores, atomics) appears exactly where it executes;
* collective instructions (``Barrier`` and plane ops) are reached by every active unit of a
  cube (GPU rules); the CPU compiler depends on it to split the body into phases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import Elem

# --------------------------------------------------------------------------- values

SSA, LOCAL, SCALAR, ARRAY, SHARED, LOCAL_ARRAY = ("ssa", "local", "scalar", "array", "shared", "local_array")


@dataclass(frozen=True, slots=True)
class Type:
    elem: Elem
    width: int = 1

    def __str__(self) -> str:
        return self.elem.name if self.width == 1 else f"{self.elem.name}x{self.width}"

    def scalar(self) -> Type:
        return self if self.width == 1 else Type(self.elem, 1)


class Var:
    """A value or memory object of the kernel. Identity-hashed.

    ``type`` of an array-like Var (array/shared/local_array) is the type of one element
    (a line when width > 1). A ``local`` created from a Python literal may start with
    ``type`` None ("weak"): it takes the type of its first typed use, else ``weak``'s default.
    """

    __slots__ = ("id", "kind", "type", "name", "weak", "size", "param", "rank")

    def __init__(
        self,
        id: int,
        kind: str,
        type: Type | None,
        name: str = "",
        *,
        weak: str = "",
        size: int = 0,
        param: int = -1,
        rank: int = 0,
    ) -> None:
        self.id = id
        self.kind = kind
        self.type = type
        self.name = name
        self.weak = weak  # "int" | "float" | "bool" for a weak local
        self.size = size  # elements (lines) of shared/local arrays
        self.param = param  # parameter index of array/scalar inputs
        self.rank = rank  # rank of array inputs (comptime)

    def __repr__(self) -> str:
        return f"%{self.name or self.kind}{self.id}:{self.type}"


@dataclass(frozen=True, slots=True)
class Const:
    value: Any  # Python bool/int/float; a tuple for a line constant
    type: Type | None  # None: takes the type of the local it is assigned to (weak)

    def __repr__(self) -> str:
        return f"{self.value!r}:{self.type}"


Operand = Var | Const

# --------------------------------------------------------------------------- instructions


@dataclass(slots=True)
class Op:
    """``out = op(args)``; ``out`` None for ops run for their effect."""

    out: Var | None
    op: str
    args: tuple[Operand, ...]
    attrs: tuple[Any, ...] = ()


@dataclass(slots=True)
class Assign:
    out: Var  # a local
    value: Operand


@dataclass(slots=True)
class Store:
    array: Var
    index: Operand
    value: Operand


@dataclass(slots=True)
class If:
    cond: Operand
    then: list[Any]
    orelse: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class RangeLoop:
    """``for var in range(start, end, step)``; bounds evaluated once before the loop."""

    var: Var
    start: Operand
    end: Operand
    step: Operand
    body: list[Any]


@dataclass(slots=True)
class Loop:
    """An endless loop left with ``Break`` (``while`` lowers to it)."""

    body: list[Any]


@dataclass(slots=True)
class Break:
    pass


@dataclass(slots=True)
class Continue:
    pass


@dataclass(slots=True)
class Return:
    """End this unit's execution of the kernel."""


@dataclass(slots=True)
class Barrier:
    """``sync_cube()``: every unit of the cube reaches it before any goes on."""


@dataclass(slots=True)
class Block:
    """An inlined ``@cube.function`` body; ``Exit(label)`` jumps to its end."""

    label: int
    body: list[Any]


@dataclass(slots=True)
class Exit:
    label: int


Instr = Op | Assign | Store | If | RangeLoop | Loop | Break | Continue | Return | Barrier | Block | Exit

#: ops that need every unit of a plane to have computed their operand
PLANE_OPS = frozenset(
    {
        "plane_sum",
        "plane_prod",
        "plane_max",
        "plane_min",
        "plane_all",
        "plane_any",
        "plane_broadcast",
        "plane_shuffle",
        "plane_shuffle_xor",
        "plane_elect",
        "plane_inclusive_sum",
        "plane_exclusive_sum",
    }
)
ATOMIC_OPS = frozenset({"atomic_add", "atomic_sub", "atomic_max", "atomic_min", "atomic_exchange"})


def is_collective(ins: Any) -> bool:
    """Whether ``ins`` is, or contains, a barrier or plane op."""
    if isinstance(ins, Barrier):
        return True
    if isinstance(ins, Op):
        return ins.op in PLANE_OPS
    if isinstance(ins, If):
        return any(map(is_collective, ins.then)) or any(map(is_collective, ins.orelse))
    if isinstance(ins, (RangeLoop, Loop, Block)):
        return any(map(is_collective, ins.body))
    return False


def walk(body: list[Any]):
    """Every instruction of ``body``, nested ones included, in program order."""
    for ins in body:
        yield ins
        if isinstance(ins, If):
            yield from walk(ins.then)
            yield from walk(ins.orelse)
        elif isinstance(ins, (RangeLoop, Loop, Block)):
            yield from walk(ins.body)


# --------------------------------------------------------------------------- kernel


@dataclass(slots=True)
class ParamIr:
    """One kernel parameter as the compiled kernel sees it.

    ``kind`` "array": ``var`` is the buffer (``buffer`` its index in the buffers argument);
    "scalar": a runtime scalar read from the info words; "comptime": folded away (kept
    for the KernelId text).
    """

    name: str
    kind: str
    var: Var | None = None
    buffer: int = -1
    alias_of: int | None = None  # another array parameter sharing this buffer


@dataclass(slots=True)
class KernelIr:
    name: str  # kernel identity (module.qualname)
    entry: str  # exported symbol name
    params: list[ParamIr]
    body: list[Any]
    cube_dim: tuple[int, int, int]
    shared: list[Var] = field(default_factory=list)
    local_arrays: list[Var] = field(default_factory=list)
    plane_size: int = 32
    #: cubes per multiprocessor asked for by ``cube.occupancy`` (a register budget hint)
    min_cubes: int = 1

    @property
    def units(self) -> int:
        x, y, z = self.cube_dim
        return x * y * z

    @property
    def arrays(self) -> list[ParamIr]:
        return [p for p in self.params if p.kind == "array"]

    @property
    def scalars(self) -> list[ParamIr]:
        return [p for p in self.params if p.kind == "scalar"]

    def dump(self) -> str:
        """A readable listing (for debugging and tests)."""
        out: list[str] = [f"kernel {self.entry} cube_dim={self.cube_dim}"]
        for p in self.params:
            out.append(f"  param {p.name}: {p.kind} {p.var!r}")
        _dump(self.body, 1, out)
        return "\n".join(out)


def _dump(body: list[Any], depth: int, out: list[str]) -> None:
    pad = "  " * depth
    for ins in body:
        if isinstance(ins, If):
            out.append(f"{pad}if {ins.cond!r}:")
            _dump(ins.then, depth + 1, out)
            if ins.orelse:
                out.append(f"{pad}else:")
                _dump(ins.orelse, depth + 1, out)
        elif isinstance(ins, RangeLoop):
            out.append(f"{pad}for {ins.var!r} in range({ins.start!r}, {ins.end!r}, {ins.step!r}):")
            _dump(ins.body, depth + 1, out)
        elif isinstance(ins, Loop):
            out.append(f"{pad}loop:")
            _dump(ins.body, depth + 1, out)
        elif isinstance(ins, Block):
            out.append(f"{pad}block {ins.label}:")
            _dump(ins.body, depth + 1, out)
        else:
            out.append(f"{pad}{ins!r}")
