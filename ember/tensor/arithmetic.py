"""Tensor arithmetic: the binary operators and their named forms, bitwise ops, matrix products.

Each binary op comes from ``factories._binary`` (catalog name + dtype rule); the methods here
add torch's extra arguments (``alpha``, ``rounding_mode``) and the compositions that have no
catalog op of their own (shifts, ``bitwise_not`` on integers, ``div(rounding_mode='trunc')``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import DTypeError, ShapeError
from .core import _SCALARS, Tensor, _autocast, _check_device, _make, _pyscalar
from .elementwise import where
from .factories import _ARITH, _COMPARE, _FLOATONLY, _LOGICAL, _TRUEDIV, _binary, _int_result, _tensor_tensor


class ArithmeticMethods:
    """Tensor's arithmetic methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    # ------------------------------------------------------------------ arithmetic
    _add, radd = _binary("add", _ARITH, doc="``self + other`` with torch's type promotion.",
                         rdoc="``other + self`` (the reflected ``+``).")
    _sub, _rsub = _binary("sub", _ARITH, doc="``self - other`` with torch's type promotion.",
                          rdoc="``other - self`` (the reflected ``-``).")
    mul, rmul = _binary("mul", _ARITH, doc="As ``torch.mul``: ``self * other`` with torch's type promotion.",
                        rdoc="``other * self`` (the reflected ``*``).")
    _div, rdiv = _binary("div", _TRUEDIV, doc="As ``torch.true_divide``: ``self / other`` in a float dtype.",
                         rdoc="``other / self`` (the reflected ``/``: true division).")
    floor_divide, rfloor_divide = _binary(
        "floor_div", _ARITH, doc="As ``torch.floor_divide``: ``self // other``, rounded toward minus infinity "
        "(an integer division by zero raises ``ZeroDivisionByIntegerError``).",
        rdoc="``other // self`` (the reflected ``//``).")
    remainder, rremainder = _binary(
        "remainder", _ARITH, doc="As ``torch.remainder``: ``self % other`` with the divisor's sign "
        "(an integer division by zero raises ``ZeroDivisionByIntegerError``).",
        rdoc="``other % self`` (the reflected ``%``).")
    pow, rpow = _binary("pow", _ARITH, doc="As ``torch.pow``: ``self ** exponent`` (an integer tensor to a "
                        "negative integer scalar power raises ``IntegerPowerError``).",
                        rdoc="``other ** self`` (the reflected ``**``).")
    maximum, _rmaximum = _binary("maximum", _ARITH, doc="As ``torch.maximum``: the elementwise maximum (nan wins).")
    minimum, _rminimum = _binary("minimum", _ARITH, doc="As ``torch.minimum``: the elementwise minimum (nan wins).")
    atan2, _ratan2 = _binary("atan2", _FLOATONLY, rop="atan2_scalar_unsupported",
                             doc="As ``torch.atan2``: the angle of (other, self) in radians (float result).")
    eq, _req = _binary("eq", _COMPARE, doc="As ``torch.eq``: ``self == other`` as a bool tensor.")
    ne, _rne = _binary("ne", _COMPARE, doc="As ``torch.ne``: ``self != other`` as a bool tensor.")
    lt, _rlt = _binary("lt", _COMPARE, doc="As ``torch.lt``: ``self < other`` as a bool tensor.")
    le, _rle = _binary("le", _COMPARE, doc="As ``torch.le``: ``self <= other`` as a bool tensor.")
    gt, _rgt = _binary("gt", _COMPARE, doc="As ``torch.gt``: ``self > other`` as a bool tensor.")
    ge, _rge = _binary("ge", _COMPARE, doc="As ``torch.ge``: ``self >= other`` as a bool tensor.")
    logical_and, _rland = _binary("logical_and", _LOGICAL, doc="As ``torch.logical_and`` (a bool result).")
    logical_or, _rlor = _binary("logical_or", _LOGICAL, doc="As ``torch.logical_or`` (a bool result).")
    logical_xor, _rlxor = _binary("logical_xor", _LOGICAL, doc="As ``torch.logical_xor`` (a bool result).")

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.add``: ``self + alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._add(other)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.sub``: ``self - alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._sub(other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """As ``torch.div``: true division, or ``rounding_mode='trunc'`` / ``'floor'``."""
        if rounding_mode is None:
            return self._div(other)
        if rounding_mode == "floor":
            return self.floor_divide(other)
        if rounding_mode != "trunc":
            raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                             f"{rounding_mode!r}")
        if not _int_result(self, other):
            return self._div(other).trunc()
        q = self.floor_divide(other)  # raises for a zero divisor
        # floor and trunc differ where the division is inexact and the signs differ
        r = self.remainder(other)
        fix = r.ne(0).logical_and((self < 0).logical_xor(other < 0 if isinstance(other, Tensor)
                                                         else self._full_like_shape((), other < 0, dt.bool_)))
        return q + fix.to(q._dt)

    true_divide = divide = _div
    multiply = mul
    subtract = sub
    greater, less, greater_equal, less_equal = gt, lt, ge, le

    __add__, __radd__ = _add, radd
    __sub__, __rsub__ = _sub, _rsub

    def rsub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.rsub``: ``other - alpha * self``."""
        return (self if alpha == 1 else self * alpha)._rsub(other)
    __mul__, __rmul__ = mul, rmul
    __truediv__, __rtruediv__ = _div, rdiv
    __rdiv__ = rdiv
    __floordiv__, __rfloordiv__ = floor_divide, rfloor_divide
    __mod__, __rmod__ = remainder, rremainder
    __pow__, __rpow__ = pow, rpow
    __eq__ = eq  # type: ignore[assignment]
    __ne__ = ne  # type: ignore[assignment]
    __lt__, __le__, __gt__, __ge__ = lt, le, gt, ge

    # bitwise ops: integers and bools (bools take the logical ops); floats raise, as torch
    def _bitwise_operands(self, other: Any, what: str) -> tuple[Tensor, Tensor] | None:
        if isinstance(other, np.ndarray):
            other = self._from_like(other)
        if isinstance(other, Tensor):
            _check_device(self, other)
            d = dt.result_type(self, other)
        elif isinstance(other, _SCALARS) or isinstance(other, np.generic):
            other = _pyscalar(other)
            d = dt.scalar_result(self._dt, self.ndim, other)
            other = self._full_like_shape((), dt.wrapped_scalar(d, other), d)  # wraps, as torch
        else:
            return None
        if d.category == dt.FLOAT:
            raise DTypeError(f"{what} is only defined for integer and bool tensors, got {d}")
        a = self if self._dt is d else self.to(d)
        b = other if other._dt is d else other.to(d)
        return a, b

    def _bitwise(self, other: Any, op: str, logical: str) -> Tensor:
        ab = self._bitwise_operands(other, op)
        if ab is None:
            return NotImplemented
        a, b = ab
        if a._dt is dt.bool_:
            return getattr(a, logical)(b)
        return _tensor_tensor(op, _ARITH, a, b)

    def bitwise_and(self, other: Any) -> Tensor:
        """As ``torch.bitwise_and`` (integer and bool tensors)."""
        return self._bitwise(other, "bitwise_and", "logical_and")

    def bitwise_or(self, other: Any) -> Tensor:
        """As ``torch.bitwise_or``."""
        return self._bitwise(other, "bitwise_or", "logical_or")

    def bitwise_xor(self, other: Any) -> Tensor:
        """As ``torch.bitwise_xor``."""
        return self._bitwise(other, "bitwise_xor", "logical_xor")

    def bitwise_not(self) -> Tensor:
        """As ``torch.bitwise_not``: ``~x`` (logical not for bools; -x - 1 for signed, max - x
        for unsigned integers, which is the complement of every bit)."""
        if self._dt is dt.bool_:
            return self.logical_not()
        if self._dt.category == dt.FLOAT:
            raise DTypeError(f"bitwise_not is only defined for integer and bool tensors, got {self._dt}")
        if self._dt is dt.uint8:
            return self._rsub(255)
        return _make(self._bk.sub_scalar(self._bk.neg(self._p), 1), self._bk, self._dt)

    def _shift(self, other: Any, left: bool) -> Tensor:
        what = "bitwise_left_shift" if left else "bitwise_right_shift"
        ab = self._bitwise_operands(other, what)
        if ab is None:
            return NotImplemented
        a, b = ab
        if a._dt is dt.bool_:
            a, b = a.long(), b.long()
        d = a._dt
        bits = 8 * d.itemsize
        signed = d is not dt.uint8
        two = a._full_like_shape((), 2, d)
        # shifts compose from exact integer arithmetic: a << b = a * 2**b (wrapping, like the
        # hardware shift) and a >> b = floor(a / 2**b) (arithmetic for signed types); amounts
        # past the width give 0 (or -1 for a negative a >> b), as PyTorch's CPU kernels do
        top = bits - 2 if signed and not left else bits - 1
        bc = b.clamp(0, top)
        p2 = _tensor_tensor("pow", _ARITH, two, bc)
        zero = a._full_like_shape((), 0, d)
        if left:
            return where(b.ge(bits), zero, _tensor_tensor("mul", _ARITH, a, p2))
        q = _tensor_tensor("floor_div", _ARITH, a, p2)
        if not signed:
            return where(b.ge(bits), zero, q)
        sat = where(a.lt(0), a._full_like_shape((), -1, d), zero)
        return where(b.gt(top), sat, q)

    def bitwise_left_shift(self, other: Any) -> Tensor:
        """As ``torch.bitwise_left_shift`` (``<<``)."""
        return self._shift(other, True)

    def bitwise_right_shift(self, other: Any) -> Tensor:
        """As ``torch.bitwise_right_shift`` (``>>``; arithmetic for signed types)."""
        return self._shift(other, False)

    __and__ = __rand__ = bitwise_and
    __or__ = __ror__ = bitwise_or
    __xor__ = __rxor__ = bitwise_xor
    __invert__ = bitwise_not
    __lshift__ = bitwise_left_shift
    __rshift__ = bitwise_right_shift

    def __rlshift__(self, other: Any) -> Tensor:
        """``other << self`` (the reflected ``<<``)."""
        ab = self._bitwise_operands(other, "bitwise_left_shift")
        return NotImplemented if ab is None else ab[1]._shift(ab[0], True)

    def __rrshift__(self, other: Any) -> Tensor:
        """``other >> self`` (the reflected ``>>``)."""
        ab = self._bitwise_operands(other, "bitwise_right_shift")
        return NotImplemented if ab is None else ab[1]._shift(ab[0], False)

    # ------------------------------------------------------------------ matmul
    def matmul(self, other: Tensor) -> Tensor:
        """As ``torch.matmul`` (``@``): 1-D operands gain and lose a dim, batch dims broadcast;
        an autocast lower-precision op."""
        if not isinstance(other, Tensor):
            if isinstance(other, np.ndarray):
                other = self._from_like(other)
            else:
                raise TypeError(f"matmul expects a Tensor, got {type(other).__name__}")
        _check_device(self, other)
        # an autocast lower-precision op (matmul, mm, bmm, @); outside autocast: one attribute read
        a, b = self, other
        if _autocast.active:
            a, b = _autocast.lower(a, b)
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul needs tensors of at least one dimension, got shapes {a.shape} and {b.shape}")
        d = a._dt if a._dt is b._dt else dt.result_type(a, b)
        if a._dt is not d:
            a = a.to(d)
        if b._dt is not d:
            b = b.to(d)
        sa, sb = a.shape, b.shape
        squeeze = []
        if len(sa) == 1:
            a = a.reshape(1, sa[0])
            squeeze.append(-2)
        if len(sb) == 1:
            b = b.reshape(sb[0], 1)
            squeeze.append(-1)
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(f"matmul shapes {sa} and {sb} do not fit: inner dimensions {a.shape[-1]} "
                             f"and {b.shape[-2]} differ")
        try:
            batch = S.broadcast(a.shape[:-2], b.shape[:-2])
        except ShapeError:
            raise ShapeError(f"matmul batch dimensions of shapes {sa} and {sb} cannot be broadcast "
                             "together") from None
        nd = len(batch) + 2
        if a.ndim < nd:
            a = a.reshape((1,) * (nd - a.ndim) + a.shape)
        if b.ndim < nd:
            b = b.reshape((1,) * (nd - b.ndim) + b.shape)
        out = _make(a._bk.matmul(a._p, b._p), a._bk, d)
        if squeeze:
            shape = list(out.shape)
            for ax in sorted(squeeze):
                del shape[ax]
            out = out.reshape(tuple(shape))
        return out

    __matmul__ = matmul

    def __rmatmul__(self, other: Any) -> Tensor:
        """``other @ self`` (the reflected ``@``; a numpy array becomes a tensor on this device)."""
        if isinstance(other, Tensor):  # a direct call: other @ self
            return other.matmul(self)
        if isinstance(other, np.ndarray):
            return self._from_like(other).matmul(self)
        return NotImplemented

    def mm(self, other: Tensor) -> Tensor:
        """As ``torch.mm``: the product of two 2-D tensors."""
        if self.ndim != 2 or other.ndim != 2:
            raise ShapeError(f"mm expects 2-D tensors, got shapes {self.shape} and {other.shape}")
        return self.matmul(other)

    def bmm(self, other: Tensor) -> Tensor:
        """As ``torch.bmm``: batched products of two 3-D tensors."""
        if self.ndim != 3 or other.ndim != 3:
            raise ShapeError(f"bmm expects 3-D tensors, got shapes {self.shape} and {other.shape}")
        return self.matmul(other)

    def dot(self, other: Tensor) -> Tensor:
        """As ``torch.dot``: the inner product of two 1-D tensors (an autocast "promote" op)."""
        if self.ndim != 1 or other.ndim != 1:
            raise ShapeError(f"dot expects 1-D tensors, got shapes {self.shape} and {other.shape}")
        if _autocast.active:  # dot is an autocast "promote" op (torch), not a lower-precision one
            with _autocast.suspend(self):
                return self.matmul(other)
        return self.matmul(other)

