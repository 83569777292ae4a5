"""Gradient rules: the ``Rule`` type every registry entry's ``grad`` is, and the helpers rules share.

A rule is ``Rule(saves, backward)``. ``backward(B, g, out, *args)`` receives the inner
backend ``B``, the gradient ``g`` of the op's output, and the op's own arguments, where each
tensor argument arrives as

* its value (an inner primitive) when its parameter name is listed in ``saves``,
* its shape otherwise (all a linear rule needs, and it keeps nothing alive);

``out`` is the op's output when ``saves`` lists ``out``, else None. It returns the gradient
of each tensor input in argument order (tensor lists flattened): a single value for a
one-tensor op, None for an input that takes no gradient, and trailing inputs may be left
out. A gradient may keep the output's broadcast shape: the engine sums it down to the
input's shape (``sum_to``), so rules never repeat that step.

A few binary rules are *partial* (``Rule(saves, backward, reads={input: values})``): where an
input's gradient is expensive (matmul) or reads a value nothing else keeps (mul), the rule
takes ``need`` and computes, and the graph keeps values for, only the tracked inputs.

An entry without a rule (comparisons, predicates, logical ops, all/any, argmax/argmin,
data creation) is not differentiable: their results are untracked. Rounding ops and
``floor_div`` are differentiable with a zero gradient, as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = ["Rule", "sum_to", "zeros", "kept", "unreduce", "mT", "gate", "tie_split", "fit", "zero_grad"]

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
def sum_to(B: Backend, g: Any, shape: tuple[int, ...]) -> Any:
    """``g`` (of a broadcast result's shape) summed down to ``shape``: over the leading dims
    ``shape`` lacks and over the dims where ``shape`` has 1 and ``g`` does not."""
    gs = g.shape
    if gs == shape:
        return g
    lead = len(gs) - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and gs[lead + i] != 1
    )
    if dims:
        g = B.sum(g, dims, True)
    return g if g.shape == shape else B.reshape(g, shape)


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


def zero_grad(B: Backend, g: Any, out: Any, p: Shape, *args: Any) -> Any:
    """Piecewise-constant ops (round, sign, ...): zero gradient, as in PyTorch."""
    return zeros(B, p, g)



