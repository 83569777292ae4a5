"""Element types, type variables and the annotations of a ``@cube`` kernel signature.

An ``Elem`` is an interned scalar type of the kernel language (``cube.f32``). An ``ElemVar``
is a generic element type (``cube.Float``) bound at launch from the dtype of the arguments
that use it. Annotations:

* ``cube.Array[E]`` / ``cube.Tensor[E]``: a device buffer view (len, shape(d), stride(d));
  ``cube.Array[cube.Line[E]]`` reads and writes lines of N elements, N chosen at launch
  (``cube.lines(t, 4)``); ``cube.Array[cube.Line[E, 4]]`` fixes N.
* ``E`` (an ``Elem`` or ``ElemVar``): a runtime scalar.
* ``cube.Comptime[T]`` (or bare ``cube.Comptime``): a Python value that specialises the kernel.
* ``cube.Sequence[A]``: a variable number of arrays (``A`` an array annotation) or scalars
  (``A`` is ``cube.Scalar``, or a scalar type), given at launch as a tuple; the number of
  elements and each element's type are part of the KernelId.
"""

from __future__ import annotations

from typing import Any

from .. import dtype as dt

__all__ = [
    "Elem",
    "ElemVar",
    "ArraySpec",
    "ComptimeSpec",
    "Array",
    "Tensor",
    "Line",
    "Comptime",
    "Sequence",
    "SequenceSpec",
    "Scalar",
    "f16",
    "bf16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "bool_",
    "Float",
    "Int",
    "UInt",
    "Numeric",
    "T",
    "elem_of_dtype",
    "ELEMS",
]

FLOAT, INT, UINT, BOOL = "float", "int", "uint", "bool"


class Elem:
    """A scalar element type. Interned: compare with ``is``."""

    __slots__ = ("name", "kind", "bits", "dtype")

    def __init__(self, name: str, kind: str, bits: int, dtype: dt.DType | None) -> None:
        self.name = name
        self.kind = kind
        self.bits = bits
        self.dtype = dtype  # the ember dtype of buffers of this element, if any

    @property
    def is_float(self) -> bool:
        return self.kind == FLOAT

    @property
    def is_int(self) -> bool:  # signed or unsigned
        return self.kind in (INT, UINT)

    @property
    def is_signed(self) -> bool:
        return self.kind in (INT, FLOAT)

    @property
    def size(self) -> int:
        return max(self.bits // 8, 1)

    def limits(self) -> tuple[int, int]:
        """The integer range of an int element (bool: 0..1)."""
        if self.kind == BOOL:
            return 0, 1
        if self.kind == UINT:
            return 0, (1 << self.bits) - 1
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    def __call__(self, value: Any) -> Any:
        # Inside a kernel the expander turns ``cube.f32(x)`` into a cast; outside it is the
        # numpy scalar of that type, so helper code can share constants with kernels.
        import numpy as np

        return np.dtype(_NP[self.name]).type(value)

    def __repr__(self) -> str:
        return f"cube.{self.name}"

    def __reduce__(self) -> str:
        return self.name


_NP = {
    "f16": "float16",
    "bf16": "float32",
    "f32": "float32",
    "f64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "bool_": "bool",
}

f16 = Elem("f16", FLOAT, 16, dt.float16)
bf16 = Elem("bf16", FLOAT, 16, dt.bfloat16)
f32 = Elem("f32", FLOAT, 32, dt.float32)
f64 = Elem("f64", FLOAT, 64, dt.float64)
i8 = Elem("i8", INT, 8, dt.int8)
i16 = Elem("i16", INT, 16, dt.int16)
i32 = Elem("i32", INT, 32, dt.int32)
i64 = Elem("i64", INT, 64, dt.int64)
u8 = Elem("u8", UINT, 8, dt.uint8)
u16 = Elem("u16", UINT, 16, None)
u32 = Elem("u32", UINT, 32, None)
u64 = Elem("u64", UINT, 64, None)
bool_ = Elem("bool_", BOOL, 8, dt.bool_)

ELEMS: dict[str, Elem] = {
    e.name: e for e in (f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool_)
}
_BY_DTYPE = {e.dtype: e for e in ELEMS.values() if e.dtype is not None}


def elem_of_dtype(d: dt.DType) -> Elem:
    """The kernel element type of buffers of ember dtype ``d``."""
    return _BY_DTYPE[d]


class ElemVar:
    """A generic element type, bound at launch to the dtype of the arguments that use it.

    ``kinds`` restricts what it may bind to (``"float"``, ``"int"``, ``"uint"``, ``"bool"``;
    none = any). Every use of one ``ElemVar`` in a signature binds to the same element type.
    Inside the kernel it names the bound type: ``cube.Float(0)``, ``cube.cast(v, cube.Float)``.
    """

    __slots__ = ("name", "kinds")

    def __init__(self, name: str, *kinds: str) -> None:
        bad = [k for k in kinds if k not in (FLOAT, INT, UINT, BOOL)]
        if bad:
            raise ValueError(f"ElemVar kinds must be among float, int, uint, bool; got {bad}")
        self.name = name
        self.kinds = frozenset(kinds)

    def accepts(self, e: Elem) -> bool:
        return not self.kinds or e.kind in self.kinds

    def __call__(self, value: Any) -> Any:
        raise TypeError(f"{self!r} names a type bound at launch; call it only inside a @cube kernel")

    def __repr__(self) -> str:
        return f"cube.{self.name}"


Float = ElemVar("Float", FLOAT)
Int = ElemVar("Int", INT, UINT)
UInt = ElemVar("UInt", UINT)
Numeric = ElemVar("Numeric", FLOAT, INT, UINT)
T = ElemVar("T")

ElemLike = Elem | ElemVar


class LineSpec:
    """``cube.Line[E]`` (width chosen at launch) or ``cube.Line[E, N]``."""

    __slots__ = ("elem", "width")

    def __init__(self, elem: ElemLike, width: int | None) -> None:
        self.elem = elem
        self.width = width

    def __repr__(self) -> str:
        return f"cube.Line[{self.elem!r}{'' if self.width is None else f', {self.width}'}]"


class ArraySpec:
    """Annotation of a buffer parameter. ``width`` None: lines of a width chosen at launch;
    ``lines`` False: plain elements (width 1)."""

    __slots__ = ("elem", "width", "lines")

    def __init__(self, elem: ElemLike, width: int | None, lines: bool) -> None:
        self.elem = elem
        self.width = width
        self.lines = lines

    def __repr__(self) -> str:
        inner = repr(LineSpec(self.elem, self.width)) if self.lines else repr(self.elem)
        return f"cube.Array[{inner}]"


class ComptimeSpec:
    __slots__ = ("pytype",)

    def __init__(self, pytype: Any) -> None:
        self.pytype = pytype

    def __repr__(self) -> str:
        return f"cube.Comptime[{getattr(self.pytype, '__name__', self.pytype)!r}]"


_WIDTHS = (1, 2, 4, 8, 16)


def _check_elem(item: Any, where: str) -> ElemLike:
    if not isinstance(item, (Elem, ElemVar)):
        raise TypeError(f"{where} takes an element type such as cube.f32 or cube.Float, got {item!r}")
    return item


class Line:
    """Annotation helper: ``cube.Line[cube.f32]`` or ``cube.Line[cube.f32, 4]``."""

    def __class_getitem__(cls, item: Any) -> LineSpec:
        if isinstance(item, tuple):
            if len(item) != 2 or item[1] not in _WIDTHS:
                raise TypeError(f"cube.Line[E, N] takes N in {_WIDTHS}, got {item!r}")
            return LineSpec(_check_elem(item[0], "cube.Line"), int(item[1]))
        return LineSpec(_check_elem(item, "cube.Line"), None)


class Array:
    """Annotation: ``cube.Array[cube.f32]``, ``cube.Array[cube.Line[cube.Float]]``."""

    def __class_getitem__(cls, item: Any) -> ArraySpec:
        if isinstance(item, LineSpec):
            return ArraySpec(item.elem, item.width, True)
        return ArraySpec(_check_elem(item, "cube.Array"), 1, False)


Tensor = Array


class _ComptimeMeta(type):
    def __repr__(cls) -> str:
        return "cube.Comptime"


class Comptime(metaclass=_ComptimeMeta):
    """Annotation: a Python value that specialises the kernel (part of its KernelId)."""

    def __class_getitem__(cls, item: Any) -> ComptimeSpec:
        return ComptimeSpec(item)


class _ScalarMeta(type):
    def __repr__(cls) -> str:
        return "cube.Scalar"


class Scalar(metaclass=_ScalarMeta):
    """Element annotation of ``cube.Sequence[cube.Scalar]``: runtime scalars whose types are
    given at launch, as ``(value, dtype)`` pairs."""


class SequenceSpec:
    """Annotation of a parameter taking a tuple of arrays or scalars. ``item``: an
    ``ArraySpec``, ``Scalar``, or a scalar type (``Elem``/``ElemVar``). An ``ElemVar`` in
    ``item`` is bound per element (each element may have its own type) and is not shared
    with the rest of the signature."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    @property
    def arrays(self) -> bool:
        return isinstance(self.item, ArraySpec)

    def __repr__(self) -> str:
        return f"cube.Sequence[{self.item!r}]"


class Sequence:
    """Annotation: ``cube.Sequence[cube.Array[cube.Line[E]]]``, ``cube.Sequence[cube.Scalar]``.

    In the kernel the parameter is a comptime tuple: ``len(xs)``, ``xs[k]`` (comptime ``k``),
    ``for x in xs:`` (unrolled)."""

    def __class_getitem__(cls, item: Any) -> SequenceSpec:
        if isinstance(item, (ArraySpec, Elem, ElemVar)) or item is Scalar:
            return SequenceSpec(item)
        raise TypeError(
            f"cube.Sequence takes cube.Array[...], cube.Scalar or a scalar type such as cube.f32, got {item!r}"
        )
