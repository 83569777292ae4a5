"""KernelId: everything that makes one compiled kernel different from another.

identity (module.qualname + a hash of the function's source) + comptime args + cube_dim +
line widths + element types + ranks + in-place mapping (which array arguments share a
buffer) + the target language. Two launches with equal KernelIds run the same machine
code; the entry name ends in a hash of the KernelId's text, computed with sha256, so it is
the same in every process and on every machine (``kernel_binop_f32_n4_2f077c2a``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from .types import Elem

__all__ = ["ArgSig", "KernelId", "stable_repr", "flat_args"]


@dataclass(frozen=True, slots=True)
class ArgSig:
    """One argument as the kernel is specialised for it.

    kind "array": ``elem``, ``width`` (line width), ``rank``, ``alias_of`` (index of an earlier
    array argument on the same buffer: the in-place mapping); "scalar": ``elem``;
    "comptime": ``value``; "sequence": ``value`` the tuple of its elements' ArgSigs (arrays or
    scalars; an array element's ``alias_of`` counts arrays over all parameters, flattened).
    """

    kind: str
    name: str
    elem: Elem | None = None
    width: int = 1
    rank: int = 0
    alias_of: int | None = None
    value: Any = None

    def describe(self) -> str:
        if self.kind == "array":
            line = f"Line<{self.elem.name}, {self.width}>" if self.width > 1 else self.elem.name
            alias = f", inplace: Some({self.alias_of})" if self.alias_of is not None else ""
            return f"{self.name}: Array<{line}> {{ rank: {self.rank}{alias} }}"
        if self.kind == "scalar":
            return f"{self.name}: {self.elem.name}"
        if self.kind == "sequence":
            return f"{self.name}: Sequence[{'; '.join(a.describe() for a in self.value)}]"
        return f"{self.name}: Comptime({stable_repr(self.value)})"


def flat_args(sigs: tuple[ArgSig, ...] | list[ArgSig]) -> list[tuple[int, int, ArgSig]]:
    """Every parameter, sequences expanded into their elements: ``(param index, element index
    or -1, ArgSig)``. A position in this list is the ``param`` number the IR and the compiled
    kernel's info slots use, so a kernel without sequences numbers its parameters as before."""
    out: list[tuple[int, int, ArgSig]] = []
    for i, s in enumerate(sigs):
        if s.kind == "sequence":
            out.extend((i, k, e) for k, e in enumerate(s.value))
        else:
            out.append((i, -1, s))
    return out


def stable_repr(v: Any) -> str:
    """A repr that is the same in every process (no memory addresses), or TypeError."""
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        return repr(v) if v == v else "nan"
    if isinstance(v, Elem):
        return f"cube.{v.name}"
    if isinstance(v, enum.Enum):
        return f"{type(v).__qualname__}.{v.name}"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(stable_repr(x) for x in v)
        return (
            f"({inner},)"
            if isinstance(v, tuple) and len(v) == 1
            else (f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
        )
    if isinstance(v, frozenset):
        return "frozenset({" + ", ".join(sorted(stable_repr(x) for x in v)) + "})"
    custom = getattr(v, "__cube_repr__", None)
    if custom is not None:
        return str(custom())
    r = repr(v)
    if " at 0x" in r or r.startswith("<"):
        raise TypeError(
            f"comptime value {r} has no stable repr, so it cannot be part of a KernelId; pass ints, "
            "floats, strings, tuples, enums, cube types, or give its class a __cube_repr__()"
        )
    return r


@dataclass(frozen=True)
class KernelId:
    kernel: str  # module.qualname of the @cube.kernel function
    source: str  # sha256 prefix of the function's source text
    cube_dim: tuple[int, int, int]
    args: tuple[ArgSig, ...]
    target: str = "c"  # language and options of the compiler
    _text: str = field(default="", init=False, repr=False, compare=False)

    def text(self) -> str:
        """The seed-style multi-line description (printed in the debug log)."""
        if not self._text:
            x, y, z = self.cube_dim
            lines = [
                "KernelId {",
                f"    type: {self.kernel},",
                f"    source: {self.source},",
                f"    cube_dim: Dim3 {{ x: {x}, y: {y}, z: {z} }},",
                "    args: [",
                *(f"        {a.describe()}," for a in self.args),
                "    ],",
                f"    target: {self.target},",
                "}",
            ]
            object.__setattr__(self, "_text", "\n".join(lines))
        return self._text

    def digest(self) -> str:
        """8 hex digits of sha256(text): stable across processes and machines."""
        import hashlib  # here, not at import: OpenSSL's load is ~3 ms of every device start

        return hashlib.sha256(self.text().encode()).hexdigest()[:8]

    def entry(self) -> str:
        """The exported symbol: ``<kernel>_<elems>_n<max line width>_<digest>``."""
        short = self.kernel.rsplit(".", 1)[-1]
        short = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", short).lower()
        short = re.sub(r"[^a-z0-9_]", "_", short).strip("_") or "kernel"
        flat = [a for _, _, a in flat_args(self.args)]
        elems: list[str] = []
        for a in flat:
            if a.kind == "array" and a.elem is not None and a.elem.name not in elems:
                elems.append(a.elem.name)
        if not elems:
            elems = [a.elem.name for a in flat if a.kind == "scalar" and a.elem is not None][:1]
        width = max((a.width for a in flat if a.kind == "array"), default=1)
        parts = [short, *(e.rstrip("_") for e in elems), f"n{width}", self.digest()]
        return "_".join(parts)

    def __str__(self) -> str:
        return self.text()
