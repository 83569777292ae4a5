"""Autodiff: a decorator that records a backward step for every op, over any backend.

Every op runs the inner backend's op on the inner primitives and wraps the result in an
:class:`ADTensor`. When no input is tracked (or grad mode is off) that is all it does: the
hot path is one attribute test, the inner call and one slotted object, with nothing else
allocated. Otherwise ``_record`` adds a graph node holding the op's rule (``rules.RULES``)
and the values the rule needs; ``backward`` walks the nodes (``node.run_backward``) and
runs every rule on the *inner* backend, so on a lazy backend the backward ops are fused
like any others.

The regular op families (unary, scalar, binary, reductions) get their methods generated
per instance as closures over the inner op and its rule, so a call costs one frame. The
other ops are written out below, each with its catalog signature.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from ... import dtype as dt
from ... import tracing
from ...errors import AutodiffError
from ...ops import names as op_names
from ...ops import primitives
from ..base import (
    ARG_REDUCE_OPS,
    BINARY_OPS,
    CATALOG,
    PREDICATE_OPS,
    REDUCE_OPS,
    REVERSED_SCALAR_OPS,
    SCALAR_OPS,
    UNARY_OPS,
    Backend,
)
from .checkpoint import Recipe
from .mode import mode
from .node import ADTensor, Node, holder_value, leaf, retained_bytes, run_backward
from .rules import RULES, Rule

__all__ = ["Autodiff"]

CHECKPOINTING = ("none", "balanced")
_SCALAR_NAMES = tuple(f"{o}_scalar" for o in SCALAR_OPS) + tuple(f"r{o}_scalar" for o in REVERSED_SCALAR_OPS)


def _keep(t: ADTensor) -> Any:
    """What the graph keeps to read ``t``'s value in backward: its recipe when ``t`` is a
    recomputable result (balanced checkpointing), else the value itself."""
    n = t.node
    if n is None or n.recipe is None:
        return t.inner
    return n.recipe


def _is_tensor_list(a: Any) -> bool:
    return (type(a) is tuple or type(a) is list) and len(a) > 0 and type(a[0]) is ADTensor


def _unwrap(a: Any) -> Any:
    if type(a) is ADTensor:
        return a.inner
    if _is_tensor_list(a):
        return type(a)(t.inner for t in a)
    return a


def _tracked(a: Any) -> bool:
    if type(a) is ADTensor:
        return a.node is not None
    return _is_tensor_list(a) and any(t.node is not None for t in a)


class Autodiff(Backend):
    def __init__(self, inner: Backend, checkpointing: str = "none") -> None:
        if checkpointing not in CHECKPOINTING:
            raise ValueError(f"checkpointing must be one of {CHECKPOINTING}, got {checkpointing!r}")
        self.inner = inner
        self.checkpointing = checkpointing
        self._balanced = checkpointing == "balanced"
        self.name = f"autodiff<{inner.name}>"
        self.eager = inner.eager
        #: the inner backend's op methods, bound once
        # the inner backend's replaying wrappers where it offers them (``cube.op_replay``);
        # backward rules call the inner backend's own methods
        replayed = getattr(inner, "replayed", None) or {}
        self._fns: dict[str, Callable[..., Any]] = {op: replayed.get(op) or getattr(inner, op) for op in CATALOG}
        for names, factory in (
            (UNARY_OPS + PREDICATE_OPS, self._unary_op),
            (_SCALAR_NAMES, self._scalar_op),
            (BINARY_OPS + ("matmul",), self._binary_op),
            (REDUCE_OPS, self._reduce_op),
            (ARG_REDUCE_OPS, self._arg_reduce_op),
        ):
            for op in names:
                method = factory(self._fns[op], RULES.get(op))
                method.__name__ = method.__qualname__ = op
                setattr(self, op, method)
        # every other differentiable registry op without a method of its own records its rule
        # through the generic path (tensors anywhere among the arguments)
        for op in RULES:
            if op not in self.__dict__ and op not in Autodiff.__dict__:
                setattr(self, op, functools.partial(self._mixed, op))
        # the non-differentiable primitives of the other families (argsort) and the attention
        # family's backward (one op for the inner backend's kernels) forward untracked
        for op in primitives("sort") + op_names("attention", where=lambda o: o.grad is None):
            if op not in self.__dict__ and op not in Autodiff.__dict__:
                setattr(self, op, functools.partial(self._untracked, op))

    def __repr__(self) -> str:
        return f"Autodiff({self.inner!r}, checkpointing={self.checkpointing!r})"

    # ------------------------------------------------------------------ op families
    # Each factory returns the op's method. ``rule`` None means not differentiable: the
    # result is untracked whatever the inputs.
    def _unary_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., ADTensor]:
        if rule is None:
            return lambda p: ADTensor(fn(p.inner), None)
        record = self._record

        def op(p: ADTensor) -> ADTensor:
            out = fn(p.inner)
            if p.node is None or not mode.enabled:
                return ADTensor(out, None)
            return record(rule, fn, (p,), out)

        return op

    def _scalar_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., ADTensor]:
        if rule is None:
            return lambda p, s: ADTensor(fn(p.inner, s), None)
        record = self._record

        def op(p: ADTensor, s: Any) -> ADTensor:
            out = fn(p.inner, s)
            if p.node is None or not mode.enabled:
                return ADTensor(out, None)
            return record(rule, fn, (p, s), out)

        return op

    def _binary_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., ADTensor]:
        if rule is None:
            return lambda a, b: ADTensor(fn(a.inner, b.inner), None)
        record = self._record

        def op(a: ADTensor, b: ADTensor) -> ADTensor:
            out = fn(a.inner, b.inner)
            if (a.node is None and b.node is None) or not mode.enabled:
                return ADTensor(out, None)
            return record(rule, fn, (a, b), out)

        return op

    def _reduce_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., ADTensor]:
        if rule is None:
            return lambda p, dims, keepdim: ADTensor(fn(p.inner, dims, keepdim), None)
        record = self._record

        def op(p: ADTensor, dims: tuple[int, ...], keepdim: bool) -> ADTensor:
            out = fn(p.inner, dims, keepdim)
            if p.node is None or not mode.enabled:
                return ADTensor(out, None)
            return record(rule, fn, (p, dims, keepdim), out)

        return op

    def _arg_reduce_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., ADTensor]:
        return lambda p, dim, keepdim: ADTensor(fn(p.inner, dim, keepdim), None)

    # ------------------------------------------------------------------ recording
    def _record(self, rule: Rule, fn: Callable[..., Any], call: tuple[Any, ...], out: Any,
                extra: tuple[Any, ...] = ()) -> ADTensor:
        """``out`` (= ``fn`` applied to ``call`` unwrapped) as a tracked result of ``rule``.

        ``extra`` is appended to the rule's arguments (facts the call does not carry).
        """
        parents: list[Node | None] = []
        shapes: list[tuple[int, ...]] = []
        saved: list[Any] = [None]  # [out, *call]: see Node.saved
        saves = rule.saves
        if rule.reads is not None:  # keep only what the tracked inputs' gradients read
            for i, reads in rule.reads.items():
                if call[i].node is not None:
                    saves = saves | reads
        for i, a in enumerate(call):
            if type(a) is ADTensor:
                parents.append(a.node)
                shapes.append(a.inner.shape)
                saved.append(_keep(a) if i in saves else a.inner.shape)
            elif _is_tensor_list(a):
                parents.extend(t.node for t in a)
                shapes.extend(t.inner.shape for t in a)
                saved.append(tuple(_keep(t) if i in saves else t.inner.shape for t in a))
            else:
                saved.append(a)
        node = Node(tuple(parents), tuple(shapes), rule)
        if self._balanced and rule.recompute:
            node.recipe = Recipe(fn, tuple(_keep(a) if type(a) is ADTensor else a for a in call))
        if rule.saves_out:
            saved[0] = out if node.recipe is None else node.recipe
        node.saved = (*saved, *extra)
        return ADTensor(out, node)

    def _one(self, op: str, p: ADTensor, *args: Any) -> ADTensor:
        """An op whose only tensor argument is the first."""
        fn = self._fns[op]
        out = fn(p.inner, *args)
        if p.node is None or not mode.enabled:
            return ADTensor(out, None)
        return self._record(RULES[op], fn, (p, *args), out)

    def _mixed(self, op: str, *call: Any) -> ADTensor:
        """An op with tensors (or tensor lists) anywhere among its arguments."""
        fn = self._fns[op]
        out = fn(*[_unwrap(a) for a in call])
        if mode.enabled and any(_tracked(a) for a in call):
            return self._record(RULES[op], fn, call, out)
        return ADTensor(out, None)

    def _untracked(self, op: str, *call: Any) -> ADTensor:
        """An op without a gradient (its results are never tracked)."""
        return ADTensor(self._fns[op](*[_unwrap(a) for a in call]), None)

    # ------------------------------------------------------------------ data (never tracked)
    def dtype(self, p: ADTensor) -> dt.DType:
        return self.inner.dtype(p.inner)

    def from_data(self, array: Any, dtype: dt.DType) -> ADTensor:
        if tracing.active:
            with tracing.span("from_data", layer="autodiff"):
                return ADTensor(self.inner.from_data(array, dtype), None)
        return ADTensor(self.inner.from_data(array, dtype), None)

    def into_data(self, p: ADTensor) -> Any:
        if tracing.active:
            with tracing.span("into_data", layer="autodiff"):
                return self.inner.into_data(p.inner)
        return self.inner.into_data(p.inner)

    def item(self, p: ADTensor) -> Any:
        return self.inner.item(p.inner)  # untraced: see Dispatch.item

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> ADTensor:
        return ADTensor(self.inner.full(shape, value, dtype), None)

    def random(self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int,
               a: float, b: float) -> ADTensor:
        return ADTensor(self.inner.random(dist, shape, dtype, seed, offset, a, b), None)

    def sync(self) -> None:
        self.inner.sync()

    # ------------------------------------------------------------------ elementwise
    def cast(self, p: ADTensor, dtype: dt.DType) -> ADTensor:
        fn = self._fns["cast"]
        out = fn(p.inner, dtype)
        # a cast to an integer or bool type stops the gradient
        if p.node is None or not dtype.is_floating_point or not mode.enabled:
            return ADTensor(out, None)
        return self._record(RULES["cast"], fn, (p, dtype), out, extra=(self.inner.dtype(p.inner),))

    def where(self, cond: ADTensor, a: ADTensor, b: ADTensor) -> ADTensor:
        return self._mixed("where", cond, a, b)

    def clamp(self, p: ADTensor, lo: Any, hi: Any) -> ADTensor:
        return self._one("clamp", p, lo, hi)

    def masked_fill(self, p: ADTensor, mask: ADTensor, value: Any) -> ADTensor:
        return self._mixed("masked_fill", p, mask, value)

    # ------------------------------------------------------------------ reductions and composites
    def cumsum(self, p: ADTensor, dim: int) -> ADTensor:
        return self._one("cumsum", p, dim)

    # dedicated rules (rules.REDUCE): one node and one saved output instead of the expansion
    def softmax(self, p: ADTensor, dim: int) -> ADTensor:
        return self._one("softmax", p, dim)

    def log_softmax(self, p: ADTensor, dim: int) -> ADTensor:
        return self._one("log_softmax", p, dim)

    def logsumexp(self, p: ADTensor, dims: tuple[int, ...], keepdim: bool) -> ADTensor:
        return self._one("logsumexp", p, dims, keepdim)

    # ------------------------------------------------------------------ shape
    def reshape(self, p: ADTensor, shape: tuple[int, ...]) -> ADTensor:
        return self._one("reshape", p, shape)

    def permute(self, p: ADTensor, axes: tuple[int, ...]) -> ADTensor:
        return self._one("permute", p, axes)

    def expand(self, p: ADTensor, shape: tuple[int, ...]) -> ADTensor:
        return self._one("expand", p, shape)

    def slice(self, p: ADTensor, slices: tuple[slice, ...]) -> ADTensor:
        return self._one("slice", p, slices)

    def flip(self, p: ADTensor, dims: tuple[int, ...]) -> ADTensor:
        return self._one("flip", p, dims)

    def contiguous(self, p: ADTensor) -> ADTensor:
        return self._one("contiguous", p)

    def copy(self, p: ADTensor) -> ADTensor:
        return self._one("copy", p)

    def cat(self, ps: Sequence[ADTensor], dim: int) -> ADTensor:
        return self._mixed("cat", list(ps), dim)

    def pad(self, p: ADTensor, pads: tuple[tuple[int, int], ...], value: Any) -> ADTensor:
        return self._one("pad", p, pads, value)

    def tril(self, p: ADTensor, diagonal: int) -> ADTensor:
        return self._one("tril", p, diagonal)

    def triu(self, p: ADTensor, diagonal: int) -> ADTensor:
        return self._one("triu", p, diagonal)

    # ------------------------------------------------------------------ indexing
    def gather(self, p: ADTensor, dim: int, index: ADTensor) -> ADTensor:
        return self._mixed("gather", p, dim, index)

    def scatter(self, p: ADTensor, dim: int, index: ADTensor, src: ADTensor) -> ADTensor:
        return self._mixed("scatter", p, dim, index, src)

    def scatter_add(self, p: ADTensor, dim: int, index: ADTensor, src: ADTensor) -> ADTensor:
        return self._mixed("scatter_add", p, dim, index, src)

    def index_select(self, p: ADTensor, dim: int, index: ADTensor) -> ADTensor:
        return self._mixed("index_select", p, dim, index)

    def index(self, p: ADTensor, indices: tuple[ADTensor, ...]) -> ADTensor:
        return self._mixed("index", p, tuple(indices))

    def index_put(self, p: ADTensor, indices: tuple[ADTensor, ...], values: ADTensor,
                  accumulate: bool) -> ADTensor:
        return self._mixed("index_put", p, tuple(indices), values, accumulate)

    def slice_assign(self, p: ADTensor, slices: tuple[slice, ...], values: ADTensor) -> ADTensor:
        return self._mixed("slice_assign", p, slices, values)

    # ------------------------------------------------------------------ autodiff hooks
    def require_grad(self, p: ADTensor) -> ADTensor:
        if p.node is not None:
            return p
        d = self.inner.dtype(p.inner)
        if not d.is_floating_point:
            raise AutodiffError(f"only floating point tensors can require gradients, got {d}")
        return ADTensor(p.inner, leaf())

    def is_tracked(self, p: ADTensor) -> bool:
        return p.node is not None

    def is_ready(self, p: ADTensor) -> bool:
        return self.inner.is_ready(p.inner)

    def is_leaf(self, p: ADTensor) -> bool:
        return p.node is None or p.node.rule is None

    def detach(self, p: ADTensor) -> ADTensor:
        return p if p.node is None else ADTensor(p.inner, None)

    def backward(self, p: ADTensor, grad: ADTensor | None, retain_graph: bool) -> None:
        root = p.node
        if root is None:
            raise AutodiffError("element 0 of tensors does not require grad and does not have a "
                                "grad_fn: nothing behind this tensor requires grad")
        if grad is None:
            if math.prod(p.shape) != 1:
                raise AutodiffError(f"grad can be implicitly created only for scalar outputs (this "
                                    f"output has shape {p.shape}); pass a gradient")
            g = self.inner.full(p.shape, 1.0, self.inner.dtype(p.inner))
        else:
            g = grad.inner if type(grad) is ADTensor else grad
        run_backward(self.inner, root, g, retain_graph, self._balanced)

    def grad(self, p: ADTensor) -> ADTensor | None:
        n = p.node
        if n is None:
            return None
        g = holder_value(n)
        return None if g is None else ADTensor(g, None)

    def set_grad(self, p: ADTensor, g: ADTensor | None) -> None:
        n = self._grad_node(p, g)
        if n is not None:
            n.holder = None
            n.grad = None if g is None else g.inner

    def grad_tensor(self, p: ADTensor, make: Callable[[ADTensor], Any]) -> Any:
        n = p.node
        if n is None:
            return None
        h = n.holder
        if h is None and n.grad is not None:  # first access: the object takes the gradient over
            h = n.holder = make(ADTensor(n.grad, None))
            n.grad = None
        return h

    def set_grad_tensor(self, p: ADTensor, t: Any) -> None:
        n = self._grad_node(p, t)
        if n is not None:
            n.grad = None
            n.holder = t

    @staticmethod
    def _grad_node(p: ADTensor, g: Any) -> Node | None:
        n = p.node
        if n is None and g is not None:
            raise AutodiffError("cannot set .grad of a tensor that does not require grad; "
                                "call requires_grad_() first")
        return n

    def replace_value(self, p: ADTensor, new: ADTensor) -> ADTensor:
        # a leaf keeps its node (its identity and .grad) under the new value; the graphs that
        # already saved the old value keep reading it (values are immutable)
        n = p.node
        if n is not None and n.rule is None:
            return ADTensor(new.inner, n)
        return new

    def retained_bytes(self, p: ADTensor) -> int:
        return retained_bytes(self.inner, p.node)
