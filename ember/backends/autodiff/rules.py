"""Backward rules, one per differentiable op of the catalog, in tables by op family.

A rule is ``Rule(saves, backward)``. ``backward(B, g, out, *args)`` receives the inner
backend ``B``, the gradient ``g`` of the op's output, and the op's own arguments, where each
tensor argument arrives as

* its value (an inner primitive) when its parameter name is listed in ``saves``,
* its shape otherwise (all a linear rule needs, and it keeps nothing alive);

``out`` is the op's output when ``saves`` lists ``out``, else None. It returns the gradient
of each tensor input in argument order (tensor lists flattened): a single value for a
one-tensor op, None for an input that takes no gradient, and trailing inputs may be left
out. A gradient may keep the output's broadcast shape: the engine sums it down to the
input's shape (see ``node.sum_to``), so rules never repeat that step.

A few binary rules are *partial* (``Rule(saves, backward, reads={input: values})``): where an
input's gradient is expensive (matmul) or reads a value nothing else keeps (mul), the rule
takes ``need`` and computes, and the graph keeps values for, only the tracked inputs.

Ops absent from ``RULES`` (comparisons, predicates, logical ops, all/any, argmax/argmin,
data creation) are not differentiable: their results are untracked. Rounding ops and
``floor_div`` are differentiable with a zero gradient, as in PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..base import ELEMENTWISE_OPS, SHAPE_OPS, Backend
from .node import sum_to

__all__ = ["Rule", "RULES"]

Shape = tuple[int, ...]


def _positional_names(fn: Callable[..., Any]) -> list[str]:
    """The positional-or-keyword parameter names of ``fn``, from its code object where it has one
    (``inspect.signature`` over every rule costs milliseconds of ``import ember``)."""
    code = getattr(fn, "__code__", None)
    if code is not None and not hasattr(fn, "__wrapped__"):
        return list(code.co_varnames[code.co_posonlyargcount:code.co_argcount])
    import inspect

    return [n for n, p in inspect.signature(fn).parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]


class Rule:
    """A backward rule: what it reads (``saves``, and ``reads`` for a partial rule) and
    ``backward``; see the module docstring for the calling convention."""

    __slots__ = ("backward", "saves", "saves_out", "reads", "recompute")

    def __init__(self, saves: str, backward: Callable[..., Any], reads: dict[str, str] | None = None) -> None:
        params = _positional_names(backward)[3:]  # after (B, g, out)

        def positions(spec: str) -> frozenset[int]:
            unknown = [n for n in spec.split() if n != "out" and n not in params]
            if unknown:
                raise TypeError(f"rule reads {unknown}, which are not parameters of {backward}")
            return frozenset(params.index(n) for n in spec.split() if n != "out")

        self.backward = backward
        #: positions (in the op's arguments) of the tensors whose values the rule reads
        self.saves = positions(saves)
        self.saves_out = "out" in saves.split()
        #: a partial rule maps each tensor input to the values its gradient reads; it gets
        #: ``need`` (per tensor input: is it tracked?) and computes only those gradients, and
        #: the graph keeps only what they read (``a * mask`` keeps the mask, not ``a``)
        self.reads = None if reads is None else {params.index(k): positions(v) for k, v in reads.items()}
        #: whether the output is memory-bound, hence a recipe under balanced checkpointing
        self.recompute = False


# ---------------------------------------------------------------------------- helpers
def zeros(B: Backend, shape: Shape, like: Any) -> Any:
    return B.full(shape, 0.0, B.dtype(like))


def kept(B: Backend, v: Any, shape: Shape, dims: tuple[int, ...], keepdim: bool) -> Any:
    """A reduction's result ``v`` with the reduced dims of ``shape`` kept as size 1."""
    if keepdim:
        return v
    return B.reshape(v, tuple(1 if i in dims else n for i, n in enumerate(shape)))


def unreduce(B: Backend, g: Any, shape: Shape, dims: tuple[int, ...], keepdim: bool) -> Any:
    """The gradient of a sum over ``dims``: ``g`` broadcast back over them."""
    return B.expand(kept(B, g, shape, dims, keepdim), shape)


def mT(B: Backend, x: Any) -> Any:
    n = len(x.shape)
    return B.permute(x, tuple(range(n - 2)) + (n - 1, n - 2))


def gate(B: Backend, g: Any, keep: Any) -> Any:
    """``g`` where the bool ``keep`` (broadcasting to g) holds, else 0.

    A multiply by the mask, not a select: on CPUs a select over an unpredictable mask is
    branchy and about 10x slower (numpy ``where``); GPUs fuse either. The price: a
    non-finite upstream gradient at a dropped position gives NaN instead of 0."""
    return B.mul(g, B.cast(keep, B.dtype(g)))


def tie_split(B: Backend, g: Any, wins: Any, ties: Any) -> Any:
    """``g`` where ``wins``, ``g / 2`` where ``ties`` (PyTorch's maximum/minimum), else 0."""
    d = B.dtype(g)
    return B.mul(g, B.add(B.cast(wins, d), B.mul_scalar(B.cast(ties, d), 0.5)))


def fit(B: Backend, v: Any, shape: Shape) -> Any:
    """``v`` zero-padded at the end up to ``shape`` (a scatter's ``src`` may be larger than
    its index; the part beyond the index is not read and takes no gradient)."""
    if v.shape == shape:
        return v
    return B.pad(v, tuple((0, s - n) for n, s in zip(v.shape, shape)), 0.0)


def _zero(B: Backend, g: Any, out: Any, p: Shape, *args: Any) -> Any:
    """Piecewise-constant ops (round, sign, ...): zero gradient, as in PyTorch."""
    return zeros(B, p, g)


_ERF_SCALE = 2.0 / math.sqrt(math.pi)

# ---------------------------------------------------------------------------- unary: op(p)
UNARY = {
    "neg": Rule("", lambda B, g, out, p: B.neg(g)),
    "abs": Rule("p", lambda B, g, out, p: B.mul(g, B.sign(p))),
    "exp": Rule("out", lambda B, g, out, p: B.mul(g, out)),
    "log": Rule("p", lambda B, g, out, p: B.div(g, p)),
    "log1p": Rule("p", lambda B, g, out, p: B.div(g, B.add_scalar(p, 1.0))),
    "expm1": Rule("out", lambda B, g, out, p: B.mul(g, B.add_scalar(out, 1.0))),
    "sqrt": Rule("out", lambda B, g, out, p: B.div(g, B.mul_scalar(out, 2.0))),
    "rsqrt": Rule("out", lambda B, g, out, p: B.mul(g, B.mul_scalar(B.mul(out, B.mul(out, out)), -0.5))),
    "sin": Rule("p", lambda B, g, out, p: B.mul(g, B.cos(p))),
    "cos": Rule("p", lambda B, g, out, p: B.neg(B.mul(g, B.sin(p)))),
    "tan": Rule("out", lambda B, g, out, p: B.mul(g, B.add_scalar(B.mul(out, out), 1.0))),
    "tanh": Rule("out", lambda B, g, out, p: B.mul(g, B.rsub_scalar(B.mul(out, out), 1.0))),
    "sigmoid": Rule("out", lambda B, g, out, p: B.mul(g, B.mul(out, B.rsub_scalar(out, 1.0)))),
    # relu reads its input, not its output: the input is usually a kept matmul result
    "relu": Rule("p", lambda B, g, out, p: gate(B, g, B.gt_scalar(p, 0.0))),
    # erf' = 2 / sqrt(pi) * exp(-p^2)
    "erf": Rule("p", lambda B, g, out, p: B.mul(g, B.mul_scalar(B.exp(B.neg(B.mul(p, p))), _ERF_SCALE))),
    "reciprocal": Rule("out", lambda B, g, out, p: B.neg(B.mul(g, B.mul(out, out)))),
    **{op: Rule("", _zero) for op in ("sign", "floor", "ceil", "round", "trunc")},
}


# ---------------------------------------------------------------------------- scalar: op(p, s)
def _pow_scalar(B: Backend, g: Any, out: Any, p: Any, s: Any) -> Any:
    if s == 0:  # p ** 0 is constant, even at p = 0
        return zeros(B, p.shape, g)
    return B.mul(g, B.mul_scalar(B.pow_scalar(p, s - 1), s))


def _rpow_scalar(B: Backend, g: Any, out: Any, p: Shape, s: Any) -> Any:
    """d(s ** p)/dp = s ** p * log(s); PyTorch takes 0 for s = 0 (where s ** p is 0 or 1)."""
    if s == 0:
        return zeros(B, p, g)
    return B.mul_scalar(B.mul(g, out), math.log(s) if s > 0 else math.nan)


SCALAR = {
    "add_scalar": Rule("", lambda B, g, out, p, s: g),
    "sub_scalar": Rule("", lambda B, g, out, p, s: g),
    "mul_scalar": Rule("", lambda B, g, out, p, s: B.mul_scalar(g, s)),
    "div_scalar": Rule("", lambda B, g, out, p, s: B.div_scalar(g, s)),
    "floor_div_scalar": Rule("", _zero),
    "remainder_scalar": Rule("", lambda B, g, out, p, s: g),
    "pow_scalar": Rule("p", _pow_scalar),
    "maximum_scalar": Rule("p", lambda B, g, out, p, s:
        tie_split(B, g, B.gt_scalar(p, s), B.eq_scalar(p, s))),
    "minimum_scalar": Rule("p", lambda B, g, out, p, s:
        tie_split(B, g, B.lt_scalar(p, s), B.eq_scalar(p, s))),
    # reversed: r<op>_scalar(p, s) = op(s, p)
    "rsub_scalar": Rule("", lambda B, g, out, p, s: B.neg(g)),
    "rdiv_scalar": Rule("p", lambda B, g, out, p, s: B.mul_scalar(B.div(g, B.mul(p, p)), -s)),
    "rfloor_div_scalar": Rule("", _zero),
    "rremainder_scalar": Rule("p", lambda B, g, out, p, s: B.neg(B.mul(g, B.rfloor_div_scalar(p, s)))),
    "rpow_scalar": Rule("out", _rpow_scalar),
}


# ---------------------------------------------------------------------------- binary: op(a, b)
def _div(B: Backend, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    ga = B.div(g, b)
    return ga if need[0] else None, B.neg(B.mul(ga, B.div(a, b))) if need[1] else None


def _mul(B: Backend, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    return B.mul(g, b) if need[0] else None, B.mul(g, a) if need[1] else None


def _matmul(B: Backend, g: Any, out: Any, a: Any, b: Any, *, need: tuple[bool, ...]) -> Any:
    # batch dims broadcast: the engine sums each gradient back over them
    return (B.matmul(g, mT(B, b)) if need[0] else None,
            B.matmul(mT(B, a), g) if need[1] else None)


def _pow(B: Backend, g: Any, out: Any, a: Any, b: Any) -> Any:
    # d/da = b * a^(b-1), with exponent 0 where b = 0 (a^0 is constant, even at a = 0)
    e = B.masked_fill(B.sub_scalar(b, 1.0), B.eq_scalar(b, 0.0), 0.0)
    ga = B.mul(g, B.mul(b, B.pow(a, e)))
    # d/db = a^b * log(a), taken as 0 at a = 0 (PyTorch's convention for b >= 0; for b < 0
    # a^b is infinite there anyway), so no 0 * -inf appears
    gb = B.mul(g, B.mul(out, B.log(B.masked_fill(a, B.eq_scalar(a, 0.0), 1.0))))
    return ga, gb


def _maximum(B: Backend, g: Any, out: Any, a: Any, b: Any) -> Any:
    ties = B.eq(a, b)
    return tie_split(B, g, B.gt(a, b), ties), tie_split(B, g, B.lt(a, b), ties)


def _minimum(B: Backend, g: Any, out: Any, a: Any, b: Any) -> Any:
    ties = B.eq(a, b)
    return tie_split(B, g, B.lt(a, b), ties), tie_split(B, g, B.gt(a, b), ties)


def _atan2(B: Backend, g: Any, out: Any, a: Any, b: Any) -> Any:
    gd = B.div(g, B.add(B.mul(a, a), B.mul(b, b)))
    return B.mul(gd, b), B.neg(B.mul(gd, a))


BINARY = {
    "add": Rule("", lambda B, g, out, a, b: (g, g)),
    "sub": Rule("", lambda B, g, out, a, b: (g, B.neg(g))),
    "mul": Rule("", _mul, reads={"a": "b", "b": "a"}),
    "div": Rule("", _div, reads={"a": "b", "b": "a b"}),
    "pow": Rule("a b out", _pow),
    "maximum": Rule("a b", _maximum),
    "minimum": Rule("a b", _minimum),
    "atan2": Rule("a b", _atan2),
    # remainder(a, b) = a - floor(a / b) * b
    "remainder": Rule("a b", lambda B, g, out, a, b: (g, B.neg(B.mul(g, B.floor_div(a, b))))),
    "floor_div": Rule("", lambda B, g, out, a, b: (zeros(B, a, g), zeros(B, b, g))),
    "matmul": Rule("", _matmul, reads={"a": "b", "b": "a"}),
}


# ---------------------------------------------------------------------------- reductions
def _prod(B: Backend, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """d prod / d p_i = product of the others, without dividing by zero: a slice with no zero
    gives prod / p_i; with exactly one zero, only the zero gets the product of the rest;
    with two or more, everything is 0. Data-independent, so lazy backends can run it."""
    d = B.dtype(g)
    is0 = B.eq_scalar(p, 0.0)
    nonzero_prod = B.prod(B.masked_fill(p, is0, 1.0), dims, True)
    zeros_per_slice = B.sum(B.cast(is0, d), dims, True)
    others = B.masked_fill(B.div(nonzero_prod, B.masked_fill(p, is0, 1.0)),
                           B.ne_scalar(zeros_per_slice, 0.0), 0.0)
    lone_zero = B.logical_and(is0, B.eq_scalar(zeros_per_slice, 1.0))
    return B.mul(kept(B, g, p.shape, dims, keepdim), B.where(lone_zero, nonzero_prod, others))


def _extreme(B: Backend, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """max/min: the gradient is shared evenly among the elements equal to the result
    (PyTorch's amax/amin)."""
    d = B.dtype(g)
    hit = B.cast(B.eq(p, kept(B, out, p.shape, dims, keepdim)), d)
    share = B.div(kept(B, g, p.shape, dims, keepdim), B.sum(hit, dims, True))
    return B.mul(hit, share)


def _logsumexp(B: Backend, g: Any, out: Any, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    return B.mul(kept(B, g, p.shape, dims, keepdim), B.exp(B.sub(p, kept(B, out, p.shape, dims, keepdim))))


REDUCE = {
    "sum": Rule("", lambda B, g, out, p, dims, keepdim: unreduce(B, g, p, dims, keepdim)),
    "prod": Rule("p", _prod),
    "max": Rule("p out", _extreme),
    "min": Rule("p out", _extreme),
    # composites with a dedicated rule: one node, fewer saved values than their expansion
    "logsumexp": Rule("p out", _logsumexp),
    "softmax": Rule("out", lambda B, g, out, p, dim:
                    B.mul(out, B.sub(g, B.sum(B.mul(g, out), (dim,), True)))),
    "log_softmax": Rule("out", lambda B, g, out, p, dim: B.sub(g, B.mul(B.exp(out), B.sum(g, (dim,), True)))),
    "cumsum": Rule("", lambda B, g, out, p, dim: B.flip(B.cumsum(B.flip(g, (dim,)), dim), (dim,))),
}


# ---------------------------------------------------------------------------- shape and layout
def _cat(B: Backend, g: Any, out: Any, ps: tuple[Shape, ...], dim: int) -> tuple[Any, ...]:
    grads, start = [], 0
    for shape in ps:
        cut = tuple(slice(start, start + shape[dim], 1) if i == dim else slice(0, n, 1)
                    for i, n in enumerate(g.shape))
        grads.append(B.slice(g, cut))
        start += shape[dim]
    return tuple(grads)


def _inverse(axes: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


LAYOUT = {
    "reshape": Rule("", lambda B, g, out, p, shape: B.reshape(g, p)),
    "permute": Rule("", lambda B, g, out, p, axes: B.permute(g, _inverse(axes))),
    "expand": Rule("", lambda B, g, out, p, shape: sum_to(B, g, p)),
    "slice": Rule("", lambda B, g, out, p, slices: B.slice_assign(zeros(B, p, g), slices, g)),
    "flip": Rule("", lambda B, g, out, p, dims: B.flip(g, dims)),
    "contiguous": Rule("", lambda B, g, out, p: g),
    "copy": Rule("", lambda B, g, out, p: g),
    "cat": Rule("", _cat),
    "pad": Rule("", lambda B, g, out, p, pads, value: B.slice(
        g, tuple(slice(lo, lo + n, 1) for (lo, _), n in zip(pads, p)))),
    "tril": Rule("", lambda B, g, out, p, diagonal: B.tril(g, diagonal)),
    "triu": Rule("", lambda B, g, out, p, diagonal: B.triu(g, diagonal)),
    # cast to a float type (a cast to int or bool is untracked); ``src`` is the input's dtype
    "cast": Rule("", lambda B, g, out, p, dtype, src: B.cast(g, src)),
}


# ---------------------------------------------------------------------------- selection and indexing
def _clamp(B: Backend, g: Any, out: Any, p: Any, lo: Any, hi: Any) -> Any:
    """Gradient where lo <= p <= hi (bounds included, NaN excluded, as in PyTorch)."""
    inside = None
    if lo is not None:
        inside = B.ge_scalar(p, lo)
    if hi is not None:
        below = B.le_scalar(p, hi)
        inside = below if inside is None else B.logical_and(inside, below)
    return g if inside is None else gate(B, g, inside)


def _index_select(B: Backend, g: Any, out: Any, p: Shape, dim: int, index: Any) -> Any:
    # scatter-add g back along dim; the 1-D index broadcast to g's shape says where
    line = tuple(index.shape[0] if i == dim else 1 for i in range(len(p)))
    return B.scatter_add(zeros(B, p, g), dim, B.expand(B.reshape(index, line), g.shape), g)


def _index_put(B: Backend, g: Any, out: Any, p: Shape, indices: tuple[Any, ...], values: Shape,
               accumulate: bool) -> tuple[Any, ...]:
    # overwritten positions take no gradient to p; values get what their positions received
    gp = g if accumulate else B.index_put(g, indices, zeros(B, (), g), False)
    return (gp, *(None for _ in indices), B.index(g, indices))


SELECT = {
    "where": Rule("cond", lambda B, g, out, cond, a, b: (
        None, gate(B, g, cond), gate(B, g, B.logical_not(cond)))),
    "masked_fill": Rule("mask", lambda B, g, out, p, mask, value: gate(B, g, B.logical_not(mask))),
    "clamp": Rule("p", _clamp),
    "gather": Rule("index", lambda B, g, out, p, dim, index: B.scatter_add(zeros(B, p, g), dim, index, g)),
    "scatter": Rule("index", lambda B, g, out, p, dim, index, src: (
        B.scatter(g, dim, index, zeros(B, index.shape, g)), None, fit(B, B.gather(g, dim, index), src))),
    "scatter_add": Rule("index", lambda B, g, out, p, dim, index, src: (
        g, None, fit(B, B.gather(g, dim, index), src))),
    "index_select": Rule("index", _index_select),
    "index": Rule("indices", lambda B, g, out, p, indices: B.index_put(zeros(B, p, g), indices, g, True)),
    "index_put": Rule("indices", _index_put),
    "slice_assign": Rule("", lambda B, g, out, p, slices, values: (
        B.slice_assign(g, slices, zeros(B, (), g)), B.slice(g, slices))),
}

RULES: dict[str, Rule] = {**UNARY, **SCALAR, **BINARY, **REDUCE, **LAYOUT, **SELECT}

# memory-bound ops: recomputed in backward under balanced checkpointing
for _name, _rule in RULES.items():
    _rule.recompute = _name in ELEMENTWISE_OPS or _name in SHAPE_OPS
