"""Autodiff: a decorator that records a backward step for every op, over any backend.

Two kinds of primitive (the invariant the whole module keeps):

* an untracked value is the inner backend's primitive itself, unwrapped;
* a tracked value is an :class:`ADTensor`: the inner primitive and the (never None) graph
  :class:`Node` that produced it. Only floating point values are ever tracked.

So an op whose arguments are all untracked (or that runs under ``no_grad``) is the inner
op on the same arguments: its method tests each tensor argument's class and calls the inner
method, allocating nothing; the plain device's call plus one frame (issue 18: <= 1.1x the
plain device per op). Otherwise the tracked arguments are unwrapped, and while grad mode is
on (read only here, on the tracked path) ``_record`` adds a node holding the op's rule
(``rules.RULES``) and the values the rule needs; ``backward`` walks the nodes
(``node.run_graph``) and runs every rule on the *inner* backend, so on a lazy backend the
backward ops are fused like any others. A ``create_graph`` backward (``run_autograd``) runs
the rules on this backend instead, on the kept values re-joined with their nodes, so the
backward pass is recorded too (double backward).

Every op method is generated per instance as a closure over the inner op and its rule (one
frame per call), by the factory of its calling convention: the first argument the only
tensor (``_first_op``, by arity), two tensors (``_binary_op``), tensors anywhere
(``_mixed_op``), a composite without a rule of its own (``_composite_op``: the inner
backend's composite when untracked, its decomposition over this backend when tracked), no
gradient at all (``_untracked_op``). ``cast`` and the data and autodiff hooks are written out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ... import dtype as dt
from ... import tracing
from ...errors import AutodiffError
from ...ops import REGISTRY, primitives
from ...ops import names as op_names
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
from .node import ADTensor, Node, holder_value, leaf, retained_bytes, run_backward, run_graph
from .rules import RULES, Rule

__all__ = ["Autodiff"]

CHECKPOINTING = ("none", "balanced")
_SCALAR_NAMES = tuple(f"{o}_scalar" for o in SCALAR_OPS) + tuple(f"r{o}_scalar" for o in REVERSED_SCALAR_OPS)

#: ops whose only tensor argument is the first, with their arity
_FIRST_ONLY: dict[str, int] = {
    "clamp": 3, "cumsum": 2, "cumprod": 2, "softmax": 2, "log_softmax": 2, "logsumexp": 3,
    "reshape": 2, "permute": 2, "expand": 2, "slice": 2, "flip": 2, "contiguous": 1, "copy": 1,
    "pad": 3, "tril": 2, "triu": 2, "roll": 3, "diagonal": 4,
    **{op: 1 for op in UNARY_OPS + PREDICATE_OPS},
    **{op: 2 for op in _SCALAR_NAMES},
    **{op: 3 for op in REDUCE_OPS + ARG_REDUCE_OPS},
}
#: ops of three positional arguments, any of which may be a tensor (``_three_op``)
_THREE = ("where", "masked_fill")
#: composite families whose only tensor argument is the first (``_composite_op``)
_FIRST_COMPOSITES = ("unary", "normalize")


def _keep(t: ADTensor) -> Any:
    """What the graph keeps to read tracked ``t``'s value in backward: its recipe when ``t``
    is a recomputable result (balanced checkpointing), else the value itself."""
    r = t.node.recipe
    return t.inner if r is None else r


def _any_tracked(seq: Any) -> bool:
    for t in seq:
        if t.__class__ is ADTensor:
            return True
    return False


def _tracked(a: Any) -> bool:
    """Whether argument ``a`` is, or is a tensor list holding, a tracked value."""
    c = a.__class__
    return c is ADTensor or ((c is tuple or c is list) and _any_tracked(a))


def _unwrap(a: Any) -> Any:
    """Argument ``a`` with every tracked value replaced by its inner primitive."""
    c = a.__class__
    if c is ADTensor:
        return a.inner
    if (c is tuple or c is list) and _any_tracked(a):
        return c(t.inner if t.__class__ is ADTensor else t for t in a)
    return a


def _is_value(a: Any) -> bool:
    """Whether argument ``a`` is a tensor (tracked or an inner primitive). The catalog's other
    arguments (Python scalars, tuples of dims, sizes, slices or pads, dtypes, strings, None)
    have no ``shape``; every primitive has one."""
    return a.__class__ is ADTensor or hasattr(a, "shape")


class Autodiff(Backend):
    def __init__(self, inner: Backend, checkpointing: str = "none") -> None:
        if checkpointing not in CHECKPOINTING:
            raise ValueError(f"checkpointing must be one of {CHECKPOINTING}, got {checkpointing!r}")
        self.inner = inner
        self.checkpointing = checkpointing
        self._balanced = checkpointing == "balanced"
        self.name = f"autodiff<{inner.name}>"
        self.eager = inner.eager
        self.checks_indices = inner.checks_indices
        #: the inner backend's op methods, bound once
        # the inner backend's replaying wrappers where it offers them (``cube.op_replay``);
        # backward rules call the inner backend's own methods
        replayed = getattr(inner, "replayed", None) or {}
        self._fns: dict[str, Callable[..., Any]] = {op: replayed.get(op) or getattr(inner, op) for op in CATALOG}
        methods: dict[str, Callable[..., Any]] = {}
        for op, arity in _FIRST_ONLY.items():
            methods[op] = self._first_op(self._fns[op], RULES.get(op), arity)
        for op in BINARY_OPS + ("matmul",):
            methods[op] = self._binary_op(self._fns[op], RULES.get(op))
        for op in _THREE:
            methods[op] = self._three_op(self._fns[op], RULES[op])
        methods["cat"] = self._cat_op(self._fns["cat"], RULES["cat"])
        # every other differentiable registry op records its rule through the generic path
        # (tensors anywhere among the arguments: where, cat, the indexing ops, lerp, ...)
        for op in RULES:
            if op not in methods and op not in Autodiff.__dict__:
                methods[op] = self._mixed_op(self._fns[op], RULES[op])
        # the non-differentiable primitives (argsort, cumargmax) and the attention family's
        # backward (one op for the inner backend's kernels) forward untracked
        untracked = set(primitives("sort", "scan"))
        backward_only = set(op_names("attention", where=lambda o: o.grad is None))
        for op, entry in REGISTRY.items():
            if op in methods or op in Autodiff.__dict__:
                continue
            if op in untracked:
                methods[op] = self._untracked_op(self._fns[op])
            elif op in backward_only:
                methods[op] = self._backward_only_op(self._fns[op], op)
            elif entry.compose is not None:  # a composite without a rule of its own (mean, gelu, ...)
                methods[op] = self._composite_op(self._fns[op], getattr(Backend, op),
                                                 entry.family in _FIRST_COMPOSITES)
        for op, method in methods.items():
            method.__name__ = method.__qualname__ = op
            setattr(self, op, method)
        self.cast = self._cast_op(self._fns["cast"])  # a closure, as the generated methods
        # creation makes untracked values: the inner methods themselves
        self.full = self._fns["full"]
        self.random = self._fns["random"]

    def __repr__(self) -> str:
        return f"Autodiff({self.inner!r}, checkpointing={self.checkpointing!r})"

    # ------------------------------------------------------------------ op families
    # Each factory returns the op's method. ``rule`` None means not differentiable: the
    # result is untracked whatever the inputs. Fast path first: no tracked argument, the
    # inner op on the arguments as they are.
    def _first_op(self, fn: Callable[..., Any], rule: Rule | None, arity: int) -> Callable[..., Any]:
        """An op whose only tensor argument is the first, taking ``arity`` arguments."""
        AD = ADTensor
        if rule is None:  # not differentiable: unwrap, never record
            if arity == 1:
                return lambda p: fn(p.inner if p.__class__ is AD else p)
            if arity == 2:
                return lambda p, a: fn(p.inner if p.__class__ is AD else p, a)
            return lambda p, *args: fn(p.inner if p.__class__ is AD else p, *args)
        record = self._record if rule.reads is not None else self._first_recorder(rule, fn)
        if arity == 1:
            def op1(p: Any) -> Any:
                if p.__class__ is not AD:
                    return fn(p)
                out = fn(p.inner)
                return record(rule, fn, (p,), out) if mode.enabled else out

            return op1
        if arity == 2:
            def op2(p: Any, a: Any) -> Any:
                if p.__class__ is not AD:
                    return fn(p, a)
                out = fn(p.inner, a)
                return record(rule, fn, (p, a), out) if mode.enabled else out

            return op2
        if arity == 3:
            def op3(p: Any, a: Any, b: Any) -> Any:
                if p.__class__ is not AD:
                    return fn(p, a, b)
                out = fn(p.inner, a, b)
                return record(rule, fn, (p, a, b), out) if mode.enabled else out

            return op3

        def op(p: Any, *args: Any) -> Any:
            if p.__class__ is not AD:
                return fn(p, *args)
            out = fn(p.inner, *args)
            return record(rule, fn, (p, *args), out) if mode.enabled else out

        return op

    def _binary_op(self, fn: Callable[..., Any], rule: Rule | None) -> Callable[..., Any]:
        AD = ADTensor
        if rule is None:
            def untracked(a: Any, b: Any) -> Any:
                return fn(a.inner if a.__class__ is AD else a, b.inner if b.__class__ is AD else b)

            return untracked
        record = self._binary_recorder(rule, fn)

        def op(a: Any, b: Any) -> Any:
            ta = a.__class__ is AD
            tb = b.__class__ is AD
            if not (ta or tb):
                return fn(a, b)
            out = fn(a.inner if ta else a, b.inner if tb else b)
            return record(rule, fn, (a, b), out) if mode.enabled else out

        return op

    def _three_op(self, fn: Callable[..., Any], rule: Rule) -> Callable[..., Any]:
        """An op of exactly three positional arguments, tensors or not (``where``,
        ``masked_fill``): ``_mixed_op`` unrolled, without the argument loop and tuple."""
        AD = ADTensor
        record = self._record

        def op(a: Any, b: Any, c: Any) -> Any:
            ta = a.__class__ is AD
            tb = b.__class__ is AD
            tc = c.__class__ is AD
            if not (ta or tb or tc):
                return fn(a, b, c)
            out = fn(a.inner if ta else a, b.inner if tb else b, c.inner if tc else c)
            return record(rule, fn, (a, b, c), out) if mode.enabled else out

        return op

    def _cat_op(self, fn: Callable[..., Any], rule: Rule) -> Callable[..., Any]:
        """``cat(ps, dim)``: the list's members tested in place (``_mixed_op`` without its
        argument loop and the ``_any_tracked`` call)."""
        AD = ADTensor
        record = self._record

        def cat(ps: Any, dim: int) -> Any:
            for t in ps:
                if t.__class__ is AD:
                    break
            else:
                return fn(ps, dim)
            out = fn(_unwrap(ps), dim)
            return record(rule, fn, (ps, dim), out) if mode.enabled else out

        return cat

    def _mixed_op(self, fn: Callable[..., Any], rule: Rule) -> Callable[..., Any]:
        """An op with tensors (or tensor lists) anywhere among its arguments."""
        record = self._record

        def op(*call: Any) -> Any:
            for a in call:  # (``_tracked`` inlined: this loop is the untracked path)
                c = a.__class__
                if c is ADTensor or ((c is tuple or c is list) and _any_tracked(a)):
                    break
            else:
                return fn(*call)
            if not mode.enabled:
                return fn(*map(_unwrap, call))
            return record(rule, fn, call, fn(*map(_unwrap, call)))

        return op

    def _composite_op(self, fn: Callable[..., Any], compose: Callable[..., Any],
                      first_only: bool = False) -> Callable[..., Any]:
        """A composite op without a rule: the inner backend's own (maybe direct) implementation
        when no argument is tracked, else its decomposition over this backend (``compose``,
        the catalog's default method), which records the primitives it is made of.
        ``first_only``: the first argument is the only tensor (gelu, mean, ...), tested alone."""
        AD = ADTensor
        if first_only:
            def first(p: Any, *args: Any) -> Any:
                if p.__class__ is not AD:
                    return fn(p, *args)
                if mode.enabled:
                    return compose(self, p, *args)
                return fn(p.inner, *args)

            return first

        def op(*call: Any) -> Any:
            for a in call:
                c = a.__class__
                if c is ADTensor or ((c is tuple or c is list) and _any_tracked(a)):
                    break
            else:
                return fn(*call)
            if mode.enabled:
                return compose(self, *call)
            return fn(*map(_unwrap, call))

        return op

    def _untracked_op(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An op without a gradient (its results are never tracked)."""

        def op(*call: Any) -> Any:
            return fn(*map(_unwrap, call))

        return op

    def _backward_only_op(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        """An op that only backward rules call (the attention family's backward): untracked, and
        refused where it would be recorded (a ``create_graph`` pass), as its own gradient is
        not defined: double backward through it would silently miss terms."""

        def op(*call: Any) -> Any:
            if mode.enabled and any(_tracked(a) for a in call):
                raise AutodiffError(f"double backward (create_graph=True) through {name} is not "
                                    "supported: it has no gradient rule of its own")
            return fn(*map(_unwrap, call))

        return op

    # ------------------------------------------------------------------ recording
    def _first_recorder(self, rule: Rule, fn: Callable[..., Any]) -> Callable[..., ADTensor]:
        """``_record`` for the ops whose only tensor argument is the first (``call[0]``, tracked):
        one node of one parent, the kept value or shape of ``call[0]`` and the other arguments
        as they are (``Node.saved``'s layout), without the generic argument walk."""
        keep_p = 0 in rule.saves
        saves_out = rule.saves_out
        recipe = self._balanced and rule.recompute

        def record(_rule: Rule, _fn: Callable[..., Any], call: tuple[Any, ...], out: Any) -> ADTensor:
            p = call[0]
            node = Node((p.node,), (p.shape,), rule)
            if recipe:
                node.recipe = Recipe(fn, (_keep(p), *call[1:]))
            o = (out if node.recipe is None else node.recipe) if saves_out else None
            node.saved = (o, _keep(p) if keep_p else p.shape, *call[1:])
            return ADTensor(out, node)

        return record

    def _binary_recorder(self, rule: Rule, fn: Callable[..., Any]) -> Callable[..., ADTensor]:
        """``_record`` for the ops of two tensor arguments (at least one tracked), unrolled."""
        AD = ADTensor
        none: frozenset[int] = frozenset()
        reads = rule.reads or {}
        reads0, reads1 = reads.get(0, none), reads.get(1, none)
        saves_out = rule.saves_out
        recipe = self._balanced and rule.recompute

        def record(_rule: Rule, _fn: Callable[..., Any], call: tuple[Any, ...], out: Any) -> ADTensor:
            a, b = call
            ta = a.__class__ is AD
            tb = b.__class__ is AD
            saves = rule.saves
            if ta and reads0:
                saves = saves | reads0
            if tb and reads1:
                saves = saves | reads1
            node = Node((a.node if ta else None, b.node if tb else None), (a.shape, b.shape), rule)
            if recipe:
                node.recipe = Recipe(fn, (_keep(a) if ta else a, _keep(b) if tb else b))
            o = (out if node.recipe is None else node.recipe) if saves_out else None
            node.saved = (o, ((_keep(a) if ta else a) if 0 in saves else a.shape),
                          ((_keep(b) if tb else b) if 1 in saves else b.shape))
            return ADTensor(out, node)

        return record

    def _record(self, rule: Rule, fn: Callable[..., Any], call: tuple[Any, ...], out: Any,
                extra: tuple[Any, ...] = ()) -> ADTensor:
        """``out`` (= ``fn`` applied to ``call`` unwrapped) as a tracked result of ``rule``;
        ``call`` has at least one tracked value.

        ``extra`` is appended to the rule's arguments (facts the call does not carry).
        """
        parents: list[Node | None] = []
        shapes: list[tuple[int, ...]] = []
        saved: list[Any] = [None]  # [out, *call]: see Node.saved
        links: list[tuple[int, int, int]] = []  # see Node.links
        saves = rule.saves
        if rule.reads is not None:  # keep only what the tracked inputs' gradients read
            for i, reads in rule.reads.items():
                if _tracked(call[i]):
                    saves = saves | reads
        for i, a in enumerate(call):
            c = a.__class__
            if c is ADTensor:
                if i in saves:
                    links.append((len(saved), len(parents), -1))
                parents.append(a.node)
                shapes.append(a.shape)
                saved.append(_keep(a) if i in saves else a.shape)
            elif (c is tuple or c is list) and a and _is_value(a[0]):  # a tensor list
                keep = i in saves
                for j, t in enumerate(a):
                    if keep and t.__class__ is ADTensor:
                        links.append((len(saved), len(parents), j))
                    parents.append(t.node if t.__class__ is ADTensor else None)
                    shapes.append(t.shape)
                saved.append(tuple((_keep(t) if t.__class__ is ADTensor else t) if keep else t.shape for t in a))
            elif hasattr(a, "shape"):  # an untracked tensor: its own value
                parents.append(None)
                shapes.append(a.shape)
                saved.append(a if i in saves else a.shape)
            else:
                saved.append(a)
        node = Node(tuple(parents), tuple(shapes), rule)
        node.links = tuple(links)
        if self._balanced and rule.recompute:
            node.recipe = Recipe(fn, tuple(_keep(a) if a.__class__ is ADTensor else a for a in call))
        if rule.saves_out:
            saved[0] = out if node.recipe is None else node.recipe
        node.saved = (*saved, *extra)
        return ADTensor(out, node)

    # ------------------------------------------------------------------ data (never tracked)
    def dtype(self, p: Any) -> dt.DType:
        return self.inner.dtype(p.inner if p.__class__ is ADTensor else p)

    def from_data(self, array: Any, dtype: dt.DType) -> Any:
        if tracing.active:
            with tracing.span("from_data", layer="autodiff"):
                return self.inner.from_data(array, dtype)
        return self.inner.from_data(array, dtype)

    def into_data(self, p: Any) -> Any:
        if p.__class__ is ADTensor:
            p = p.inner
        if tracing.active:
            with tracing.span("into_data", layer="autodiff"):
                return self.inner.into_data(p)
        return self.inner.into_data(p)

    def item(self, p: Any) -> Any:
        return self.inner.item(p.inner if p.__class__ is ADTensor else p)  # untraced: see Dispatch.item

    def sync(self) -> None:
        self.inner.sync()

    def is_ready(self, p: Any) -> bool:
        return self.inner.is_ready(p.inner if p.__class__ is ADTensor else p)

    # ------------------------------------------------------------------ elementwise
    def cast(self, p: Any, dtype: dt.DType) -> Any:
        return self._cast_op(self._fns["cast"])(p, dtype)  # (each instance binds the closure)

    def _cast_op(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        AD = ADTensor
        rule = RULES["cast"]
        inner_dtype = self.inner.dtype

        def cast(p: Any, dtype: dt.DType) -> Any:
            if p.__class__ is not AD:
                return fn(p, dtype)
            out = fn(p.inner, dtype)
            # a cast to an integer or bool type stops the gradient
            if not dtype.is_floating_point or not mode.enabled:
                return out
            return self._record(rule, fn, (p, dtype), out, extra=(inner_dtype(p.inner),))

        return cast

    # ------------------------------------------------------------------ autodiff hooks
    def require_grad(self, p: Any) -> ADTensor:
        if p.__class__ is ADTensor:
            return p
        d = self.inner.dtype(p)
        if not d.is_floating_point:
            raise AutodiffError(f"only floating point tensors can require gradients, got {d}")
        return ADTensor(p, leaf())

    def is_tracked(self, p: Any) -> bool:
        return p.__class__ is ADTensor

    def is_leaf(self, p: Any) -> bool:
        return p.__class__ is not ADTensor or p.node.rule is None

    def detach(self, p: Any) -> Any:
        return p.inner if p.__class__ is ADTensor else p

    def backward(self, p: Any, grad: Any, retain_graph: bool) -> None:
        if p.__class__ is not ADTensor:
            raise AutodiffError("element 0 of tensors does not require grad and does not have a "
                                "grad_fn: nothing behind this tensor requires grad")
        if grad is None:
            if math.prod(p.shape) != 1:
                raise AutodiffError(f"grad can be implicitly created only for scalar outputs (this "
                                    f"output has shape {p.shape}); pass a gradient")
            g = self.inner.full(p.shape, 1.0, self.inner.dtype(p.inner))
        else:
            g = grad.inner if grad.__class__ is ADTensor else grad
        run_backward(self.inner, p.node, g, retain_graph, self._balanced)

    def grad(self, p: Any) -> Any:
        if p.__class__ is not ADTensor:
            return None
        return holder_value(p.node)

    def set_grad(self, p: Any, g: Any) -> None:
        n = self._grad_node(p, g)
        if n is not None:
            n.holder = None
            n.grad = None if g is None else (g.inner if g.__class__ is ADTensor else g)

    def grad_tensor(self, p: Any, make: Callable[[Any], Any]) -> Any:
        if p.__class__ is not ADTensor:
            return None
        n = p.node
        h = n.holder
        if h is None and n.grad is not None:  # first access: the object takes the gradient over
            h = n.holder = make(n.grad)
            n.grad = None
        return h

    def set_grad_tensor(self, p: Any, t: Any) -> None:
        n = self._grad_node(p, t)
        if n is not None:
            n.grad = None
            n.holder = t

    @staticmethod
    def _grad_node(p: Any, g: Any) -> Node | None:
        if p.__class__ is ADTensor:
            return p.node
        if g is not None:
            raise AutodiffError("cannot set .grad of a tensor that does not require grad; "
                                "call requires_grad_() first")
        return None

    def replace_value(self, p: Any, new: Any) -> Any:
        # a leaf keeps its node (its identity and .grad) under the new value; the graphs that
        # already saved the old value keep reading it (values are immutable)
        if p.__class__ is ADTensor and p.node.rule is None:
            return ADTensor(new.inner if new.__class__ is ADTensor else new, p.node)
        return new

    def retained_bytes(self, p: Any) -> int:
        return retained_bytes(self.inner, p.node if p.__class__ is ADTensor else None)

    def run_autograd(self, outputs: list[Any], grads: list[Any], inputs: list[Any] | None,
                     retain_graph: bool, create_graph: bool, accumulate: bool) -> list[Any] | None:
        if create_graph and self._balanced:
            raise AutodiffError("create_graph=True needs every saved value as recorded; it is not "
                                "supported under checkpointing='balanced' (recomputed values are untracked)")
        roots: list[Node] = []
        seeds: list[Any] = []
        for p, g in zip(outputs, grads):
            if g is None:
                g = self.inner.full(p.shape, 1.0, self.inner.dtype(p.inner))
            elif not create_graph and g.__class__ is ADTensor:
                g = g.inner
            roots.append(p.node)
            seeds.append(g)
        targets = None if inputs is None else [p.node for p in inputs]
        B = self if create_graph else self.inner
        got = run_graph(B, roots, seeds, retain_graph, self._balanced, targets, accumulate, create_graph)
        if targets is None or accumulate:
            return None
        return [got.get(n) for n in targets]

    def graph_node(self, p: Any) -> Node | None:
        return p.node if p.__class__ is ADTensor else None
