"""Element types and PyTorch's type-promotion rules.

A ``DType`` is an interned value: compare with ``is``. Categories order bool < integer <
floating; promotion inside a category widens, float16 with bfloat16 meet at float32 and
uint8 with int8 at int16 (the smallest type holding both ranges), as in PyTorch. Python
scalars are "weak": they only raise the category, never the width (``int32_tensor + 2.5`` is
float32, ``float16_tensor + 2.5`` is float16, ``int8_tensor + 300`` is int8: the scalar
converts to the tensor's type, wrapping as PyTorch does).

Integer arithmetic wraps (two's complement) on every device, as in PyTorch. A float -> integer
cast truncates toward zero; to int8/int16/uint8 it converts through int32 and keeps the low
bits, so every value within int32's range casts as torch's CPU kernels cast it on every device;
beyond that (and NaN), which PyTorch leaves undefined, the result is the device's (see
docs/dtypes.md, which also describes the packed int8/int16 storage of the WGSL devices).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DType", "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool_",
    "promote_types", "result_type", "as_dtype", "get_default_dtype", "set_default_dtype",
]

BOOL, INT, FLOAT = 0, 1, 2


class DType:
    """As ``torch.dtype``: ``ember.float32``, ``ember.int8``, ``ember.bool``, ... (one object per type).

    Every dtype lives on every device except where a device cannot hold it: the WGSL devices
    have no float64 or bfloat16, hold int64 as int32 and float16 only with the adapter's f16
    feature; they store int8/uint8/bool packed four to a 32-bit word and int16 two to a word,
    computing in 32-bit registers that wrap to the type's width (docs/dtypes.md)."""

    __slots__ = ("name", "_np", "itemsize", "category", "rank", "is_floating_point", "is_signed",
                 "_np_compute")

    def __init__(self, name: str, npdtype: Any, category: int, rank: int, itemsize: int = 0) -> None:
        """``npdtype`` None: the numpy dtype comes from ``_resolve_np`` at first use (bfloat16:
        ml_dtypes costs ~20-30 ms of ``import ember``); ``itemsize`` must then be given."""
        self.name = name
        self._np = None if npdtype is None else np.dtype(npdtype)
        self.itemsize = itemsize or self._np.itemsize
        self.category = category
        self.rank = rank
        self.is_floating_point = category == FLOAT
        self.is_signed = name not in ("uint8", "bool")
        # half types compute in float32 (as the GPU kernels do); others in themselves
        self._np_compute = np.dtype(np.float32) if name in ("float16", "bfloat16") else self._np

    @property
    def np(self) -> np.dtype:
        """The numpy dtype of this type's elements."""
        n = self._np
        if n is None:
            n = self._np = _resolve_np(self.name)
            _BY_NP[n] = self
        return n

    @property
    def compute(self) -> np.dtype:
        """numpy dtype arithmetic on this type runs in (float32 for the half types)."""
        return self._np_compute

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self) -> str:
        return self.name if self.name != "bool" else "bool_"


# rank orders promotion within a category; two types of one rank (uint8/int8, float16/bfloat16)
# meet at the next rank's type (``_promote``)
bool_ = DType("bool", np.bool_, BOOL, 0)
uint8 = DType("uint8", np.uint8, INT, 1)
int8 = DType("int8", np.int8, INT, 1)
int16 = DType("int16", np.int16, INT, 2)
int32 = DType("int32", np.int32, INT, 3)
int64 = DType("int64", np.int64, INT, 4)
float16 = DType("float16", np.float16, FLOAT, 5)
bfloat16 = DType("bfloat16", None, FLOAT, 5, itemsize=2)
float32 = DType("float32", np.float32, FLOAT, 6)
float64 = DType("float64", np.float64, FLOAT, 7)

ALL: tuple[DType, ...] = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOATS: tuple[DType, ...] = (float16, bfloat16, float32, float64)
INTS: tuple[DType, ...] = (uint8, int8, int16, int32, int64)

_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"bool_": bool_, "float": float32, "double": float64, "half": float16,
                 "long": int64, "int": int32, "short": int16, "f32": float32, "f64": float64, "f16": float16,
                 "bf16": bfloat16, "i8": int8, "i16": int16, "i32": int32, "i64": int64, "u8": uint8})
#: numpy dtype -> DType; bfloat16 joins when its numpy dtype is first needed (``_by_np``)
_BY_NP: dict[np.dtype, DType] = {d._np: d for d in ALL if d._np is not None}


def _resolve_np(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


def _by_np(npd: np.dtype) -> DType:
    """``_BY_NP[npd]``, resolving the lazy numpy dtypes first on a miss (raises KeyError)."""
    try:
        return _BY_NP[npd]
    except KeyError:
        for d in ALL:
            if d._np is None and d.name == getattr(npd, "name", None):
                d.np  # noqa: B018 - resolves and registers it
        return _BY_NP[npd]

_default_float = float32


def get_default_dtype() -> DType:
    """As ``torch.get_default_dtype``: the dtype of Python floats (``float32`` unless set)."""
    return _default_float


def set_default_dtype(d: DType | str) -> None:
    """As ``torch.set_default_dtype``: a floating point dtype (or its name)."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"default dtype must be floating point, got {d}")
    _default_float = d


def as_dtype(d: Any) -> DType:
    """Accept an ember dtype, its name, a numpy dtype/type, or Python ``bool/int/float``."""
    if type(d) is DType:
        return d
    if isinstance(d, str):
        try:
            return _BY_NAME[d]
        except KeyError:
            raise TypeError(f"unknown dtype {d!r}; choose from {sorted(x.name for x in ALL)}") from None
    if d is bool:
        return bool_
    if d is int:
        return int64
    if d is float:
        return _default_float
    try:
        return _by_np(np.dtype(d))
    except (KeyError, TypeError):
        from .errors import DTypeError

        raise DTypeError(f"ember has no dtype for {d!r}") from None


def from_numpy_dtype(npd: np.dtype) -> DType:
    try:
        return _BY_NP[npd]
    except KeyError:
        pass
    try:
        return _by_np(npd)
    except KeyError:
        from .errors import DTypeError

        raise DTypeError(
            f"numpy dtype {npd} has no ember equivalent; supported: {[d.np.name for d in ALL]}"
        ) from None


def _promote(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a.rank == b.rank:  # float16 with bfloat16, uint8 with int8
        return float32 if a.category == FLOAT else int16
    return a if a.rank > b.rank else b


_PROMOTE = {(a, b): _promote(a, b) for a in ALL for b in ALL}


def promote_types(a: DType, b: DType) -> DType:
    """As ``torch.promote_types``: the smallest dtype both ``a`` and ``b`` convert to."""
    return _PROMOTE[(a, b)]


#: the value range of each integer dtype
INT_LIMITS: dict[DType, tuple[int, int]] = {
    d: (-(1 << 8 * d.itemsize - 1), (1 << 8 * d.itemsize - 1) - 1) if d.is_signed else (0, (1 << 8 * d.itemsize) - 1)
    for d in INTS
}


def python_scalar(d: DType, s: Any) -> Any:
    """``s`` as the Python scalar type that holds a value of dtype ``d``; an integer outside
    ``d``'s range raises OverflowError (as torch's ``full``, ``fill_``, ``clamp``, ``where``)."""
    if d.category == FLOAT:
        return float(s)
    if d is bool_:
        return bool(s)
    i = int(s)
    lo, hi = INT_LIMITS[d]
    if lo <= i <= hi:
        return i
    raise OverflowError(f"value {i} cannot be converted to {d} without overflow")


def wrapped_scalar(d: DType, s: Any) -> Any:
    """``python_scalar`` for the scalar operand of arithmetic, bitwise ops and comparisons: an
    integer outside ``d``'s range wraps to it (two's complement), as torch converts the scalar
    of ``int8_tensor + 300`` (300 -> 44). Integers beyond 64 bits still raise OverflowError."""
    if d.category == FLOAT:
        return float(s)
    if d is bool_:
        return bool(s)
    i = int(s)
    lo, hi = INT_LIMITS[d]
    if lo <= i <= hi:
        return i
    if not -(1 << 63) <= i < 1 << 64:
        raise OverflowError(f"the scalar {i} does not fit 64 bits")
    span = hi - lo + 1
    return (i - lo) % span + lo


def _scalar_dtype(v: Any) -> DType:
    t = type(v)
    if t is bool or t is np.bool_:
        return bool_
    if t is int or isinstance(v, np.integer):
        return int64
    if t is float or isinstance(v, np.floating):
        return _default_float
    from .errors import DTypeError

    raise DTypeError(f"unsupported scalar {v!r} of type {t.__name__}")


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    """PyTorch's combine_categories: a lower-priority group only lifts the category."""
    if higher is None:
        return lower
    if lower is None or higher.category == FLOAT:
        return higher
    if higher is bool_ or lower.category == FLOAT:
        return _PROMOTE[(higher, lower)]
    return higher


def result_type(*operands: Any) -> DType:
    """Result dtype of an operation over tensors and Python scalars (PyTorch rules):
    dimensioned tensors outrank 0-d tensors, which outrank Python scalars, within a category."""
    dim = zero = wrapped = None
    for o in operands:
        d = getattr(o, "dtype", None)
        if type(d) is DType:
            if o.ndim:
                dim = d if dim is None else _PROMOTE[(dim, d)]
            else:
                zero = d if zero is None else _PROMOTE[(zero, d)]
        else:
            d = _scalar_dtype(o)
            wrapped = d if wrapped is None else _PROMOTE[(wrapped, d)]
    out = _combine(dim, _combine(zero, wrapped))
    assert out is not None
    return out


def scalar_result(tdt: DType, tndim: int, s: Any) -> DType:
    """Fast ``result_type(tensor, scalar)``."""
    ts = type(s)
    if ts is float:
        return tdt if tdt.category == FLOAT else _default_float
    if ts is int:
        return int64 if tdt is bool_ else tdt
    if ts is bool:
        return tdt
    return _combine(tdt, _scalar_dtype(s))  # type: ignore[return-value]
