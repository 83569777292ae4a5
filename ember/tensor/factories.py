"""The op factories: one generated implementation per binary, unary and in-place op.

Each binary op is generated from its catalog name and a dtype rule, so the operator methods
(``a + b``), the named methods (``a.add(b)``) and the ``ember.<op>`` functions share one
implementation: validation and promotion here, then one catalog call on the backend. The
tensor-tensor fast path of ``_binary`` builds its result inline (``_make`` unrolled): it is
the path of every same-dtype elementwise op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from .. import ops as _ops
from ..backends.autodiff.mode import watch_inference
from ..errors import DTypeError, IntegerPowerError, ZeroDivisionByIntegerError
from . import core as _core
from .core import _SCALARS, Tensor, _check_device, _float_of, _make, _new, _pyscalar, _scalar_for

#: the dtype rules of binary ops: promote (``_ARITH``), promote to a float (``_TRUEDIV``,
#: ``_FLOATONLY``: no scalar reverse form), compare to bool, logical (both sides as bool)
_ARITH, _TRUEDIV, _COMPARE, _LOGICAL, _FLOATONLY = range(5)


def _binary(op: str, rule: int, rop: str | None = None, doc: str | None = None,
            rdoc: str | None = None) -> Any:
    """``(forward, reverse)`` methods of the catalog's binary ``op``: ``a op b`` and ``b op a``
    for a Tensor ``a`` and a tensor, Python/numpy scalar or numpy array ``b``."""
    scalar_op = f"{op}_scalar"
    rscalar_op = f"r{op}_scalar" if rop is None else rop

    def forward(a: Tensor, b: Any) -> Tensor:
        if isinstance(b, Tensor):
            bk = a._bk
            pa, pb = a._p, b._p
            d = a._dt
            if b._bk is bk and b._dt is d and rule == _ARITH and d is not dt.bool_:
                if pa.shape != pb.shape:
                    S.broadcast(pa.shape, pb.shape)
                t = _new(Tensor)  # ``_make`` inline: this is every tensor-tensor op's path
                t._p = getattr(bk, op)(pa, pb)
                t._bk = bk
                t._dt = d
                return t
            return _tensor_tensor(op, rule, a, b)
        if isinstance(b, _SCALARS) or isinstance(b, np.generic):
            return _tensor_scalar(op, scalar_op, rule, a, _pyscalar(b), False)
        if isinstance(b, np.ndarray):
            return forward(a, a._from_like(b))
        return NotImplemented

    def reverse(a: Tensor, b: Any) -> Tensor:
        if isinstance(b, Tensor):  # a direct call, ``t.__radd__(u)`` / ``t.rsub(u)``: u op t
            return forward(b, a)
        if isinstance(b, _SCALARS) or isinstance(b, np.generic):
            return _tensor_scalar(op, rscalar_op, rule, a, _pyscalar(b), True)
        if isinstance(b, np.ndarray):
            return forward(a._from_like(b), a)
        return NotImplemented

    forward.__name__ = op
    reverse.__name__ = f"r{op}"
    forward.__doc__ = doc
    reverse.__doc__ = rdoc
    if op in ("floor_div", "remainder"):
        return _checked_divisor(forward, reverse)
    if op == "pow":
        return _checked_power(forward, reverse)
    return forward, reverse


def _watch(on: bool) -> None:
    """Follow ``core._new`` (inference mode's marking allocator, see ``watch_inference``)."""
    global _new
    _new = _core._new_marking if on else object.__new__


watch_inference(_watch)


def _int_result(a: Tensor, b: Any) -> bool:
    """Whether ``a op b`` computes in an integer (or bool) dtype."""
    if isinstance(b, Tensor):
        return dt.result_type(a, b).category != dt.FLOAT
    if isinstance(b, _SCALARS) or isinstance(b, np.generic):
        return dt.scalar_result(a._dt, a.ndim, _pyscalar(b)).category != dt.FLOAT
    return False


def _raise_if_zero(divisor: Any, bk: Any) -> None:
    """PyTorch (CPU) raises for an integer division by zero. A Python scalar is checked
    always; a tensor divisor when its values can be read without draining a lazy stream
    (``Backend.is_ready``, as index ranges are): a queued divisor is not read, and a zero in
    it gives 0 (the kernels' answer, as on CUDA, where PyTorch does not check either)."""
    if isinstance(divisor, Tensor):
        if divisor.numel() == 0 or not (bk.eager or bk.is_ready(divisor._p)):
            return
        if not np.all(np.asarray(divisor.numpy())):
            raise ZeroDivisionByIntegerError("ZeroDivisionError: integer division or modulo by zero")
    elif not divisor:
        raise ZeroDivisionByIntegerError("ZeroDivisionError: integer division or modulo by zero")


def _checked_divisor(forward: Any, reverse: Any) -> Any:
    def f(a: Tensor, b: Any) -> Tensor:
        if _int_result(a, b):
            _raise_if_zero(b, a._bk)
        return forward(a, b)

    def r(a: Tensor, b: Any) -> Tensor:
        if _int_result(a, b):
            _raise_if_zero(a, a._bk)
        return reverse(a, b)

    f.__name__, r.__name__ = forward.__name__, reverse.__name__
    f.__doc__, r.__doc__ = forward.__doc__, reverse.__doc__
    return f, r


def _checked_power(forward: Any, reverse: Any) -> Any:
    def f(a: Tensor, b: Any) -> Tensor:
        if (isinstance(b, int | np.integer) and not isinstance(b, bool | np.bool_) and b < 0
                and a._dt.category != dt.FLOAT):
            raise IntegerPowerError("Integers to negative integer powers are not allowed.")
        return forward(a, b)

    f.__name__ = forward.__name__
    f.__doc__ = forward.__doc__
    return f, reverse


def _tensor_tensor(op: str, rule: int, a: Tensor, b: Tensor) -> Tensor:
    _check_device(a, b)
    if op == "sub" and a._dt is dt.bool_ and b._dt is dt.bool_:
        raise DTypeError("subtraction of two bool tensors is not supported; use logical_xor or ^")
    bk = a._bk
    pa, pb = a._p, b._p
    if pa.shape != pb.shape:
        S.broadcast(pa.shape, pb.shape)
    if rule == _LOGICAL:
        ca = cb = dt.bool_
        out = dt.bool_
    else:
        ca = a._dt if a._dt is b._dt else dt.result_type(a, b)
        if rule == _TRUEDIV or rule == _FLOATONLY:
            ca = _float_of(ca)
        cb = ca
        out = dt.bool_ if rule == _COMPARE else ca
    if a._dt is not ca:
        pa = bk.cast(pa, ca)
    if b._dt is not cb:
        pb = bk.cast(pb, cb)
    return _make(getattr(bk, op)(pa, pb), bk, out)


_SWAPPED_COMPARE = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


#: float binary ops of the registry without an ``<op>_scalar`` form (atan2, logaddexp, ...)
_NO_SCALAR_FORM = frozenset(_ops.names("binary", where=lambda o: not o.scalar_form))


def _tensor_scalar(op: str, scalar_op: str, rule: int, a: Tensor, s: Any, reverse: bool) -> Tensor:
    bk = a._bk
    p = a._p
    if rule == _LOGICAL or op in _NO_SCALAR_FORM:  # no scalar form in the catalog: a 0-d tensor
        d0 = dt.bool_ if rule == _LOGICAL else _float_of(dt.scalar_result(a._dt, len(p.shape), s))
        other = a._full_like_shape((), _scalar_for(d0, s), d0)
        return _tensor_tensor(op, rule, other, a) if reverse else _tensor_tensor(op, rule, a, other)
    d = dt.scalar_result(a._dt, len(p.shape), s)
    if rule == _TRUEDIV or rule == _FLOATONLY:
        d = _float_of(d)
    if a._dt is not d:
        p = bk.cast(p, d)
    s = dt.wrapped_scalar(d, s)  # an integer scalar wraps to the tensor's type, as torch's does
    if rule == _COMPARE:
        name = f"{_SWAPPED_COMPARE[op]}_scalar" if reverse else scalar_op
        return _make(getattr(bk, name)(p, s), bk, dt.bool_)
    if reverse and op in ("add", "mul", "maximum", "minimum"):
        scalar_op = f"{op}_scalar"
    return _make(getattr(bk, scalar_op)(p, s), bk, d)


def _unary(op: str, float_only: bool, doc: str | None = None) -> Any:
    """The method of the catalog's unary ``op``; ``float_only``: integer and bool inputs
    compute in the default float dtype (as torch's ``exp(int tensor)``)."""

    def f(self: Tensor) -> Tensor:
        bk = self._bk
        d = self._dt
        p = self._p
        if float_only and d.category != dt.FLOAT:
            d = dt.get_default_dtype()
            p = bk.cast(p, d)
        return _make(getattr(bk, op)(p), bk, d)

    f.__name__ = op
    f.__doc__ = doc or (f"As ``torch.{op}``" + (" (integer and bool inputs give the default float dtype)."
                                               if float_only else "."))
    return f


def _predicate(op: str) -> Any:
    """The method of the catalog's elementwise predicate ``op`` (a bool result)."""

    def f(self: Tensor) -> Tensor:
        return _make(getattr(self._bk, op)(self._p), self._bk, dt.bool_)

    f.__name__ = op
    f.__doc__ = f"As ``torch.{op}``: a bool tensor."
    return f


def _inplace(name: str) -> Any:
    """``<name>_``: the method ``name``'s result written back into the tensor (the in-place
    protocol of ``Tensor._assign``: the object is rebound, views taken before keep their values)."""

    def f(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self._assign(getattr(self, name)(*args, **kwargs))

    f.__name__ = name + "_"
    f.__doc__ = (f"As ``torch.Tensor.{name}_``: ``{name}``'s result written into this tensor (it is "
                 "rebound to the result: a view taken before keeps its values).")
    return f



def _reshape_inplace(name: str) -> Any:
    """``<name>_`` of a layout op (``unsqueeze_``, ``t_``, ...): the tensor rebound to the
    method's result, whose shape differs (``_assign`` keeps shapes, so this rebinds directly;
    a leaf that requires grad raises outside ``no_grad``, as ``_assign`` and torch do)."""

    def f(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from ..backends.autodiff.mode import is_grad_enabled
        from ..errors import AutodiffError

        result = getattr(self, name)(*args, **kwargs)
        bk = self._bk
        if bk.is_tracked(self._p) and bk.is_leaf(self._p) and is_grad_enabled():
            raise AutodiffError("a leaf tensor that requires grad is used in an in-place operation; "
                                "wrap the update in `with ember.no_grad():`")
        self._p = result._p
        return self

    f.__name__ = name + "_"
    f.__doc__ = (f"As ``torch.Tensor.{name}_``: the tensor rebound to ``{name}``'s result (a view taken "
                 "before keeps its shape and values).")
    return f


#: torch's in-place forms of same-shape methods, generated where the method exists and its
#: ``_`` form is not defined by hand (``install_inplace_variants``)
INPLACE_VARIANTS = (
    "abs", "absolute", "acos", "acosh", "asin", "asinh", "atan", "atanh", "arccos", "arccosh", "arcsin",
    "arcsinh", "arctan", "arctanh", "atan2", "arctan2", "ceil", "floor", "round", "trunc", "fix", "frac",
    "sqrt", "rsqrt", "square", "sigmoid", "tanh", "sin", "cos", "tan", "sinh", "cosh", "sinc", "log",
    "log10", "log1p", "log2", "exp2", "expm1", "erf", "erfc", "erfinv", "reciprocal", "sign", "sgn",
    "clamp_min", "clamp_max", "clip", "lerp", "addcmul", "addcdiv", "hypot", "fmod", "remainder",
    "floor_divide", "true_divide", "divide", "multiply", "subtract", "negative", "nan_to_num", "eq", "ne",
    "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift", "index_add", "index_fill", "index_copy", "index_put",
    "masked_scatter", "scatter_reduce", "cumsum", "cumprod", "logit", "digamma", "lgamma", "xlogy",
    "heaviside", "copysign", "deg2rad", "rad2deg", "i0", "nextafter", "ldexp", "gcd", "lcm", "renorm",
)
#: layout ops whose in-place form changes the shape
RESHAPE_INPLACE_VARIANTS = ("unsqueeze", "squeeze", "t", "transpose", "swapaxes", "swapdims")


def install_inplace_variants() -> None:
    """Give ``Tensor`` the ``_`` forms above whose method exists (called once every method
    table, including those of modules above the Tensor package, is installed)."""
    for name in INPLACE_VARIANTS:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace(name))
    for name in RESHAPE_INPLACE_VARIANTS:
        if hasattr(Tensor, name) and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _reshape_inplace(name))
