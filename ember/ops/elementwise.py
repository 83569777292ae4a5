"""Elementwise ops: unary math, predicates, binary arithmetic, bitwise, comparisons, logical
ops, their scalar forms, and the selection ops (cast, where, clamp, masked_fill).

Every op here is a pure function of its inputs' elements at one position: fusable, and cheap
to recompute in backward. The Tensor API has already promoted the operands to one dtype (or
lifted ints to float for ``float_only`` ops) and checked that shapes broadcast.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..errors import DTypeError
from ._numpy import F32, HALF, quiet, swap
from .grad import Rule, gate, tie_split, zero_grad, zeros
from .registry import Op, register

Shape = tuple[int, ...]


# ----------------------------------------------------------------------------- output rules
def same(p: Any, *_: Any) -> tuple[Shape, dt.DType]:
    """Output of an op that keeps its first input's shape and dtype."""
    return p.shape, p.dtype


def pred(p: Any, *_: Any) -> tuple[Shape, dt.DType]:
    return p.shape, dt.bool_


def arith(a: Any, b: Any) -> tuple[Shape, dt.DType]:
    return (a.shape if a.shape == b.shape else S.broadcast(a.shape, b.shape)), a.dtype


def compare(a: Any, b: Any) -> tuple[Shape, dt.DType]:
    return (a.shape if a.shape == b.shape else S.broadcast(a.shape, b.shape)), dt.bool_


def _compare_scalar(p: Any, s: Any) -> tuple[Shape, dt.DType]:
    return p.shape, dt.bool_


# ----------------------------------------------------------------------------- numpy forms
def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-log(1 + exp(-x))) stays accurate for large |x| in both directions
    with np.errstate(all="ignore"):
        if x.dtype in HALF:
            return np.exp(-np.logaddexp(0.0, -x.astype(F32))).astype(x.dtype)
        return np.exp(-np.logaddexp(x.dtype.type(0), -x))


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    if x.dtype in HALF:
        return erf(x.astype(F32)).astype(x.dtype)
    return erf(x)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.reciprocal(np.sqrt(x))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _reciprocal(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.divide(x.dtype.type(1), x)


def _sign(x: np.ndarray) -> np.ndarray:
    """PyTorch's sign: (x > 0) - (x < 0), so sign(nan) = sign(-0.0) = 0; bools are their own."""
    if x.dtype == np.bool_:
        return x
    if x.dtype.kind == "u":
        return (x > 0).astype(x.dtype)
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _int_negative_power(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's integer power where the exponent is negative: 1 for a base of 1, +-1 for -1
    (by the exponent's parity), 0 otherwise; ``r`` holds the non-negative exponents' powers."""
    neg = b < 0
    if not np.any(neg):
        return r
    odd = (b & 1) == 1
    one = np.ones_like(r)
    special = np.where(a == 1, one, np.where(a == -1, np.where(odd, -one, one), np.zeros_like(r)))
    return np.where(neg, special, r)


def _power(a: Any, b: Any) -> np.ndarray:
    """numpy's power, except integer powers with negative exponents (numpy raises): PyTorch's
    answer, as the Cube kernels give it."""
    t = getattr(a, "dtype", None)
    if t is None:
        t = b.dtype
    if t.kind == "i":
        aa = np.asarray(a, dtype=t)
        bb = np.asarray(b, dtype=t)
        if np.any(bb < 0):
            r = np.power(aa, np.maximum(bb, 0))
            return _int_negative_power(r, np.broadcast_to(aa, r.shape), np.broadcast_to(bb, r.shape))
    with np.errstate(all="ignore"):
        return np.power(a, b)


def _binary_f32(f: Any) -> Any:
    """A float binary op computed in float32 for half operands."""

    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if a.dtype in HALF:
                return f(a.astype(F32), b.astype(F32)).astype(a.dtype)
            return f(a, b)

    return op


def _cast(p: np.ndarray, dtype: dt.DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        return p.astype(dtype.np)


def _clamp(p: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    t = p.dtype.type
    if lo is not None:
        p = np.maximum(p, t(lo))
    if hi is not None:
        p = np.minimum(p, t(hi))
    return p


def _masked_fill(p: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
    out = np.array(p, copy=True)  # copyto with a mask is ~10x faster than np.where
    np.copyto(out, p.dtype.type(value), where=mask)
    return out


# ----------------------------------------------------------------------------- gradient rules
_ERF_SCALE = 2.0 / math.sqrt(math.pi)


def _pow_scalar(B: Any, g: Any, out: Any, p: Any, s: Any) -> Any:
    if s == 0:  # p ** 0 is constant, even at p = 0
        return zeros(B, p.shape, g)
    return B.mul(g, B.mul_scalar(B.pow_scalar(p, s - 1), s))


def _rpow_scalar(B: Any, g: Any, out: Any, p: Shape, s: Any) -> Any:
    """d(s ** p)/dp = s ** p * log(s); PyTorch takes 0 for s = 0 (where s ** p is 0 or 1)."""
    if s == 0:
        return zeros(B, p, g)
    return B.mul_scalar(B.mul(g, out), math.log(s) if s > 0 else math.nan)


def _div(B: Any, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    ga = B.div(g, b)
    return ga if need[0] else None, B.neg(B.mul(ga, B.div(a, b))) if need[1] else None


def _mul(B: Any, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    return B.mul(g, b) if need[0] else None, B.mul(g, a) if need[1] else None


def _pow(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    # d/da = b * a^(b-1), with exponent 0 where b = 0 (a^0 is constant, even at a = 0)
    e = B.masked_fill(B.sub_scalar(b, 1.0), B.eq_scalar(b, 0.0), 0.0)
    ga = B.mul(g, B.mul(b, B.pow(a, e)))
    # d/db = a^b * log(a), taken as 0 at a = 0 (PyTorch's convention for b >= 0; for b < 0
    # a^b is infinite there anyway), so no 0 * -inf appears
    gb = B.mul(g, B.mul(out, B.log(B.masked_fill(a, B.eq_scalar(a, 0.0), 1.0))))
    return ga, gb


def _maximum(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    ties = B.eq(a, b)
    return tie_split(B, g, B.gt(a, b), ties), tie_split(B, g, B.lt(a, b), ties)


def _minimum(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    ties = B.eq(a, b)
    return tie_split(B, g, B.lt(a, b), ties), tie_split(B, g, B.gt(a, b), ties)


def _atan2(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    gd = B.div(g, B.add(B.mul(a, a), B.mul(b, b)))
    return B.mul(gd, b), B.neg(B.mul(gd, a))


def _logaddexp(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    # torch's form: g / (1 + exp(b - a)) and g / (1 + exp(a - b))
    return (B.div(g, B.add_scalar(B.exp(B.sub(b, a)), 1.0)),
            B.div(g, B.add_scalar(B.exp(B.sub(a, b)), 1.0)))


def _hypot(B: Any, g: Any, out: Any, a: Any, b: Any) -> Any:
    q = B.div(g, out)
    return B.mul(q, a), B.mul(q, b)


def _clamp_grad(B: Any, g: Any, out: Any, p: Any, lo: Any, hi: Any) -> Any:
    """Gradient where lo <= p <= hi (bounds included, NaN excluded, as in PyTorch)."""
    inside = None
    if lo is not None:
        inside = B.ge_scalar(p, lo)
    if hi is not None:
        below = B.le_scalar(p, hi)
        inside = below if inside is None else B.logical_and(inside, below)
    return g if inside is None else gate(B, g, inside)


# ----------------------------------------------------------------------------- entries
def _unary(name: str, flex: Any, grad: Any = None, float_only: bool = False) -> Op:
    return Op(name, "unary", same, grad=grad, flex=flex, elementwise=True, float_only=float_only)


_ZERO = Rule("", zero_grad)

register(
    _unary("neg", np.negative, Rule("", lambda B, g, out, p: B.neg(g))),
    _unary("abs", np.absolute, Rule("p", lambda B, g, out, p: B.mul(g, B.sign(p)))),
    _unary("sign", _sign, _ZERO),
    _unary("exp", quiet(np.exp), Rule("out", lambda B, g, out, p: B.mul(g, out)), True),
    _unary("log", quiet(np.log), Rule("p", lambda B, g, out, p: B.div(g, p)), True),
    _unary("log1p", quiet(np.log1p), Rule("p", lambda B, g, out, p: B.div(g, B.add_scalar(p, 1.0))), True),
    _unary("expm1", quiet(np.expm1), Rule("out", lambda B, g, out, p: B.mul(g, B.add_scalar(out, 1.0))), True),
    _unary("sqrt", quiet(np.sqrt), Rule("out", lambda B, g, out, p: B.div(g, B.mul_scalar(out, 2.0))), True),
    _unary("rsqrt", _rsqrt, Rule("out", lambda B, g, out, p:
                                 B.mul(g, B.mul_scalar(B.mul(out, B.mul(out, out)), -0.5))), True),
    _unary("sin", np.sin, Rule("p", lambda B, g, out, p: B.mul(g, B.cos(p))), True),
    _unary("cos", np.cos, Rule("p", lambda B, g, out, p: B.neg(B.mul(g, B.sin(p)))), True),
    _unary("tan", np.tan, Rule("out", lambda B, g, out, p: B.mul(g, B.add_scalar(B.mul(out, out), 1.0))), True),
    _unary("tanh", np.tanh, Rule("out", lambda B, g, out, p: B.mul(g, B.rsub_scalar(B.mul(out, out), 1.0))), True),
    _unary("sigmoid", _sigmoid, Rule("out", lambda B, g, out, p:
                                     B.mul(g, B.mul(out, B.rsub_scalar(out, 1.0)))), True),
    # relu reads its input, not its output: the input is usually a kept matmul result
    _unary("relu", _relu, Rule("p", lambda B, g, out, p: gate(B, g, B.gt_scalar(p, 0.0)))),
    # erf' = 2 / sqrt(pi) * exp(-p^2)
    _unary("erf", _erf, Rule("p", lambda B, g, out, p:
                             B.mul(g, B.mul_scalar(B.exp(B.neg(B.mul(p, p))), _ERF_SCALE))), True),
    _unary("floor", np.floor, _ZERO),
    _unary("ceil", np.ceil, _ZERO),
    _unary("round", np.rint, _ZERO),
    _unary("trunc", np.trunc, _ZERO),
    _unary("reciprocal", _reciprocal, Rule("out", lambda B, g, out, p: B.neg(B.mul(g, B.mul(out, out)))), True),
)

register(*(Op(name, "predicate", pred, flex=f, elementwise=True) for name, f in (
    ("logical_not", np.logical_not), ("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite))))


def _binary(name: str, flex: Any, grad: Any = None, *, scalar_form: bool = True, float_only: bool = False) -> Op:
    return Op(name, "binary", arith, grad=grad, flex=flex, elementwise=True, scalar_form=scalar_form,
              float_only=float_only)


register(
    _binary("add", np.add, Rule("", lambda B, g, out, a, b: (g, g))),
    _binary("sub", np.subtract, Rule("", lambda B, g, out, a, b: (g, B.neg(g)))),
    _binary("mul", np.multiply, Rule("", _mul, reads={"a": "b", "b": "a"})),
    _binary("div", quiet(np.divide), Rule("", _div, reads={"a": "b", "b": "a b"})),
    _binary("floor_div", quiet(np.floor_divide),
            Rule("", lambda B, g, out, a, b: (zeros(B, a, g), zeros(B, b, g)))),
    # remainder(a, b) = a - floor(a / b) * b
    _binary("remainder", quiet(np.remainder),
            Rule("a b", lambda B, g, out, a, b: (g, B.neg(B.mul(g, B.floor_div(a, b)))))),
    _binary("pow", _power, Rule("a b out", _pow)),
    # bfloat16 comparisons warn on NaN (ml_dtypes); NaN propagation is the answer here
    _binary("maximum", quiet(np.maximum), Rule("a b", _maximum)),
    _binary("minimum", quiet(np.minimum), Rule("a b", _minimum)),
    # float-only binary ops without a scalar form: the Tensor API makes a scalar a 0-d tensor
    _binary("atan2", np.arctan2, Rule("a b", _atan2), scalar_form=False, float_only=True),
    _binary("logaddexp", _binary_f32(np.logaddexp), Rule("a b", _logaddexp), scalar_form=False, float_only=True),
    _binary("hypot", _binary_f32(np.hypot), Rule("a b out", _hypot), scalar_form=False, float_only=True),
)

register(*(Op(name, "bitwise", arith, flex=f, elementwise=True) for name, f in (
    ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor))))
register(*(Op(name, "compare", compare, flex=f, elementwise=True, scalar_form=True) for name, f in (
    ("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
    ("ge", np.greater_equal))))
register(*(Op(name, "logical", compare, flex=f, elementwise=True) for name, f in (
    ("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor))))

# ``<op>_scalar(p, s)`` = op(p, s) for a Python scalar ``s`` already representable in p's dtype;
# numpy treats Python scalars as weak, so the array's dtype wins (the Tensor API has already
# converted numpy scalars to Python ones and lifted the array's dtype).
_SCALAR = {
    "add": (np.add, Rule("", lambda B, g, out, p, s: g)),
    "sub": (np.subtract, Rule("", lambda B, g, out, p, s: g)),
    "mul": (np.multiply, Rule("", lambda B, g, out, p, s: B.mul_scalar(g, s))),
    "div": (quiet(np.divide), Rule("", lambda B, g, out, p, s: B.div_scalar(g, s))),
    "floor_div": (quiet(np.floor_divide), _ZERO),
    "remainder": (quiet(np.remainder), Rule("", lambda B, g, out, p, s: g)),
    "pow": (_power, Rule("p", _pow_scalar)),
    "maximum": (np.maximum, Rule("p", lambda B, g, out, p, s:
                                 tie_split(B, g, B.gt_scalar(p, s), B.eq_scalar(p, s)))),
    "minimum": (np.minimum, Rule("p", lambda B, g, out, p, s:
                                 tie_split(B, g, B.lt_scalar(p, s), B.eq_scalar(p, s)))),
    "eq": (np.equal, None), "ne": (np.not_equal, None), "lt": (np.less, None),
    "le": (np.less_equal, None), "gt": (np.greater, None), "ge": (np.greater_equal, None),
}
register(*(Op(f"{name}_scalar", "scalar", _compare_scalar if rule is None else same, grad=rule, flex=f,
              elementwise=True) for name, (f, rule) in _SCALAR.items()))

# ``r<op>_scalar(p, s)`` = op(s, p)
_RSCALAR = {
    "sub": (np.subtract, Rule("", lambda B, g, out, p, s: B.neg(g))),
    "div": (quiet(np.divide), Rule("p", lambda B, g, out, p, s: B.mul_scalar(B.div(g, B.mul(p, p)), -s))),
    "floor_div": (quiet(np.floor_divide), _ZERO),
    "remainder": (quiet(np.remainder), Rule("p", lambda B, g, out, p, s: B.neg(B.mul(g, B.rfloor_div_scalar(p, s))))),
    "pow": (_power, Rule("out", _rpow_scalar)),
}
register(*(Op(f"r{name}_scalar", "rscalar", same, grad=rule, flex=swap(f), elementwise=True)
           for name, (f, rule) in _RSCALAR.items()))

register(
    # a cast to a float type is differentiable (to int or bool: untracked); ``src`` is the
    # input's dtype, which Autodiff appends to the rule's arguments
    Op("cast", "select", lambda p, d: (p.shape, d), flex=_cast, elementwise=True,
       grad=Rule("", lambda B, g, out, p, dtype, src: B.cast(g, src))),
    Op("where", "select", lambda c, a, b: (S.broadcast_many((c.shape, a.shape, b.shape)), a.dtype),
       flex=np.where, elementwise=True,
       grad=Rule("cond", lambda B, g, out, cond, a, b: (None, gate(B, g, cond), gate(B, g, B.logical_not(cond))))),
    Op("clamp", "select", same, flex=_clamp, elementwise=True, grad=Rule("p", _clamp_grad)),
    Op("masked_fill", "select", same, flex=_masked_fill, elementwise=True,
       grad=Rule("mask", lambda B, g, out, p, mask, value: gate(B, g, B.logical_not(mask)))),
)


# ----------------------------------------------------------------------------- composites
# Entries built from the ops above: every backend runs ``compose`` unless it has a kernel of
# its own; Autodiff differentiates the composition.
def _gelu(B: Any, p: Any) -> Any:
    """0.5 x (1 + erf(x / sqrt 2))."""
    t = B.add_scalar(B.erf(B.mul_scalar(p, 1.0 / math.sqrt(2.0))), 1.0)
    return B.mul(B.mul_scalar(p, 0.5), t)


def _gelu_tanh(B: Any, p: Any) -> Any:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = B.add(p, B.mul_scalar(B.mul(B.square(p), p), 0.044715))
    t = B.add_scalar(B.tanh(B.mul_scalar(inner, math.sqrt(2.0 / math.pi))), 1.0)
    return B.mul(B.mul_scalar(p, 0.5), t)


def _lerp(p: np.ndarray, end: np.ndarray, weight: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        diff = end - p
        return np.where(np.abs(weight) < 0.5, p + weight * diff, end - diff * (1 - weight)).astype(p.dtype)


def _lerp_compose(B: Any, p: Any, end: Any, weight: Any) -> Any:
    """torch's formula, exact at both ends: from ``p`` below |w| = 0.5, from ``end`` above."""
    diff = B.sub(end, p)
    lo = B.add(p, B.mul(weight, diff))
    hi = B.sub(end, B.mul(diff, B.rsub_scalar(weight, 1.0)))
    return B.where(B.lt_scalar(B.abs(weight), 0.5), lo, hi)


def lerp(input: Any, end: Any, weight: Any) -> Any:
    """As ``torch.lerp``: ``input + weight * (end - input)`` by torch's formula (exact at both
    ends); ``weight`` is a float or a tensor. Operands of different float dtypes promote (torch
    raises)."""
    if not isinstance(weight, type(input)):
        weight = input._full_like_shape((), float(weight), input._dt)
    d = dt.result_type(input, end, weight)
    if not d.is_floating_point:
        raise DTypeError(f"lerp expects floating point tensors, got {d}")
    S.broadcast_many((input.shape, end.shape, weight.shape))
    a, b, w = (t if t._dt is d else t.to(d) for t in (input, end, weight))
    return a._op("lerp", b, w, dtype=d)


register(
    # lerp(p, end, weight): three tensors of one float dtype, broadcasting together
    Op("lerp", "select", front=lerp, compose=_lerp_compose, flex=_lerp, grad=Rule(
        "p end weight", lambda B, g, out, p, end, weight: (
            B.mul(g, B.rsub_scalar(weight, 1.0)), B.mul(g, weight), B.mul(g, B.sub(end, p))))),
    Op("square", "unary", compose=lambda B, p: B.mul(p, p)),
    Op("silu", "unary", compose=lambda B, p: B.mul(p, B.sigmoid(p))),
    Op("gelu", "unary", compose=_gelu),
    Op("gelu_tanh", "unary", compose=_gelu_tanh),
)

__all__ = ["same", "pred", "arith", "compare"]
