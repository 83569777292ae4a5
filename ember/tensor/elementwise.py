"""Elementwise Tensor methods: unary math, rounding, ``clamp``, ``where``, ``masked_fill`` and the
in-place forms (``add_``, ``copy_``, ``fill_``, ...), plus the function ``where``.

In-place methods follow the value protocol of ``Tensor._assign``: the tensor object is rebound to
the op's result (views taken before keep their values).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import DTypeError, ShapeError
from .core import Tensor, _check_device, _make, _pyscalar, _scalar_for
from .factories import _inplace, _predicate, _unary


def where(condition: Tensor, input: Any, other: Any) -> Tensor:
    """As ``torch.where(condition, input, other)``: elements of ``input`` where ``condition``
    holds, else of ``other`` (tensors or scalars; the result has their promoted dtype and the
    broadcast shape)."""
    if not isinstance(condition, Tensor):
        raise TypeError("where expects a bool condition tensor")
    if condition._dt is not dt.bool_:
        raise DTypeError(f"where expects a bool condition, got {condition._dt}")
    tensors = [x for x in (input, other) if isinstance(x, Tensor)]
    for x in tensors:
        _check_device(condition, x)
    ops = [_pyscalar(x) if not isinstance(x, Tensor) else x for x in (input, other)]
    d = dt.result_type(*ops)
    shape = S.broadcast_many([condition.shape] + [x.shape for x in tensors])
    bk = condition._bk

    def prim(x: Any) -> Any:
        if isinstance(x, Tensor):
            return x._p if x._dt is d else bk.cast(x._p, d)
        return bk.full((), _scalar_for(d, x), d)

    out = bk.where(condition._p, prim(ops[0]), prim(ops[1]))
    t = _make(out, bk, d)
    return t if t.shape == shape else t.expand(shape)


class ElementwiseMethods:
    """Tensor's elementwise methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    # ------------------------------------------------------------------ unary math
    neg = _unary("neg", False)
    abs = _unary("abs", False)
    sign = _unary("sign", False)
    exp = _unary("exp", True)
    log = _unary("log", True)
    log1p = _unary("log1p", True)
    expm1 = _unary("expm1", True)
    sqrt = _unary("sqrt", True)
    rsqrt = _unary("rsqrt", True)
    sin = _unary("sin", True)
    cos = _unary("cos", True)
    tan = _unary("tan", True)
    tanh = _unary("tanh", True)
    sigmoid = _unary("sigmoid", True)
    erf = _unary("erf", True)
    reciprocal = _unary("reciprocal", True)
    relu = _unary("relu", False)
    silu = _unary("silu", True)
    def square(self) -> Tensor:
        """As ``torch.square`` (a bool tensor squares as int64, as torch)."""
        t = self.long() if self._dt is dt.bool_ else self
        return _make(t._bk.square(t._p), t._bk, t._dt)

    logical_not = _predicate("logical_not")
    isnan = _predicate("isnan")
    isinf = _predicate("isinf")
    isfinite = _predicate("isfinite")

    def _rounding(op: str) -> Any:  # type: ignore[misc]
        def f(self: Tensor) -> Tensor:
            if self._dt.category != dt.FLOAT:
                return self
            return _make(getattr(self._bk, op)(self._p), self._bk, self._dt)

        f.__name__ = op
        f.__doc__ = f"As ``torch.{op}`` (an integer or bool tensor is returned as it is)."
        return f

    floor = _rounding("floor")
    ceil = _rounding("ceil")
    _round = _rounding("round")
    trunc = _rounding("trunc")
    fix = trunc
    del _rounding

    def round(self, decimals: int = 0) -> Tensor:
        """As ``torch.round``: half to even; ``decimals`` rounds at 10**-decimals as torch does
        (``round(x * 10**d) / 10**d``, or ``round(x / 10**-d) * 10**-d`` for negative d)."""
        if not decimals:
            return self._round()
        if self._dt.category != dt.FLOAT:
            raise DTypeError(f"round with decimals is not defined for {self._dt} tensors")
        ten = 10.0 ** builtins.abs(int(decimals))
        if decimals > 0:
            return (self * ten)._round() / ten
        return (self / ten)._round() * ten

    def __neg__(self) -> Tensor:
        """As ``torch.neg`` (``-x``; a bool tensor raises, as torch)."""
        if self._dt is dt.bool_:
            raise DTypeError("negation of a bool tensor is not supported; use ~ or logical_not()")
        return _make(self._bk.neg(self._p), self._bk, self._dt)

    __abs__ = abs

    def __pos__(self) -> Tensor:
        """``+x``: the tensor itself."""
        return self

    negative = __neg__
    absolute = abs

    def gelu(self, approximate: str = "none") -> Tensor:
        """As ``torch.nn.functional.gelu``: ``approximate`` is ``'none'`` (erf) or ``'tanh'``."""
        t = self if self._dt.is_floating_point else self.float()
        if approximate == "none":
            return _make(t._bk.gelu(t._p), t._bk, t._dt)
        if approximate == "tanh":
            return _make(t._bk.gelu_tanh(t._p), t._bk, t._dt)
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        """As ``torch.clamp``: scalar or tensor bounds (a scalar bound promotes as ``+`` would)."""
        if min is None and max is None:
            raise ValueError("clamp needs at least one of min and max")
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            t = self
            if min is not None:
                t = t.maximum(min) if isinstance(min, Tensor) else t.clamp(min=min)
            if max is not None:
                t = t.minimum(max) if isinstance(max, Tensor) else t.clamp(max=max)
            return t
        lo, hi = _pyscalar(min), _pyscalar(max)
        d = self._dt
        for s in (lo, hi):
            if s is not None:
                d = dt.promote_types(d, dt.scalar_result(self._dt, self.ndim, s))
        p = self._p if d is self._dt else self._bk.cast(self._p, d)
        lo = None if lo is None else _scalar_for(d, lo)
        hi = None if hi is None else _scalar_for(d, hi)
        return _make(self._bk.clamp(p, lo, hi), self._bk, d)

    clip = clamp

    def where(self, condition: Tensor, other: Any) -> Tensor:
        """As ``torch.Tensor.where``: ``ember.where(condition, self, other)``."""
        return where(condition, self, other)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        """As ``torch.masked_fill``: ``value`` (a scalar or a 0-d tensor, converted to the
        tensor's dtype; a tensor value gets the gradient of the filled positions) where
        ``mask``; the result has the broadcast shape of the tensor and the mask."""
        if not isinstance(mask, Tensor) or mask._dt is not dt.bool_:
            raise DTypeError("masked_fill expects a bool mask tensor")
        _check_device(self, mask)
        shape = S.broadcast(mask.shape, self.shape)
        t = self if shape == self.shape else self.expand(shape)
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor "
                                 f"with {value.ndim} dimension(s)")
            _check_device(self, value)
            if value.requires_grad and self._dt.is_floating_point:
                return where(mask, value.to(self._dt), t)
            value = value.item()
        value = _pyscalar(value)
        # like PyTorch, the value is converted to the tensor's dtype
        return _make(t._bk.masked_fill(t._p, mask._p, _scalar_for(t._dt, value)), t._bk, t._dt)

    # ------------------------------------------------------------------ in-place
    add_ = _inplace("add")
    sub_ = _inplace("sub")
    mul_ = _inplace("mul")
    div_ = _inplace("div")
    pow_ = _inplace("pow")
    clamp_ = _inplace("clamp")
    masked_fill_ = _inplace("masked_fill")
    relu_ = _inplace("relu")
    neg_ = _inplace("neg")
    exp_ = _inplace("exp")

    def copy_(self, src: Any) -> Tensor:
        """As ``torch.Tensor.copy_``: ``src``'s values (broadcast, cast, moved to this device); the
        gradient flows to ``src``, what this tensor was computed from gets none (torch: zeros)."""
        if not isinstance(src, Tensor):
            src = self._from_like(np.asarray(src))
        if src._bk is not self._bk:
            src = src.to(self._bk.device)
        return self._assign(src.to(self._dt).expand(self.shape))

    def zero_(self) -> Tensor:
        """As ``torch.Tensor.zero_``."""
        return self.fill_(0)

    def fill_(self, value: Any) -> Tensor:
        """As ``torch.Tensor.fill_``: every element ``value`` (a non-leaf stays in the graph, with
        a zero gradient)."""
        if isinstance(value, Tensor):
            value = value.item()
        v = _scalar_for(self._dt, _pyscalar(value))
        if self._bk.is_tracked(self._p) and not self._bk.is_leaf(self._p):
            # stay in the graph with a zero gradient, as PyTorch's fill_ does
            every = self._full_like_shape((), True, dt.bool_)
            return self._assign(self.masked_fill(every, v))
        return self._assign(self._full_like_shape(self.shape, v, self._dt))

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

