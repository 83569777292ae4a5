"""The graph: the Autodiff primitive, graph nodes, and the backward walk.

An :class:`ADTensor` pairs an inner-backend primitive with the :class:`Node` that produced
it; it stands for a tracked value only (an untracked value is the inner primitive itself,
unwrapped: see ``backend``). A node records one op: its parents (the nodes of
its tensor inputs), the rule that maps the output's gradient to the inputs' gradients, and
the values that rule needs. Leaves are nodes without a rule; they accumulate ``.grad``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ...errors import AutodiffError
from ...ops.grad import sum_to
from .checkpoint import Recipe, Recomputer
from .mode import mode

if TYPE_CHECKING:
    from ...ops.grad import Rule
    from ..base import Backend

__all__ = ["ADTensor", "Node", "NodeHooks", "STASH", "holder_value", "run_backward", "run_graph",
           "retained_bytes", "sum_to"]


class ADTensor:
    """A tracked Autodiff primitive: ``inner`` (the inner backend's primitive) and ``node``
    (the graph node behind it: a leaf's node, or the node of the op that produced it; never
    None, since an untracked value is not wrapped)."""

    # ``shape`` is a slot, not a property: the Tensor API reads it several times per op
    __slots__ = ("inner", "node", "shape")

    def __init__(self, inner: Any, node: Node) -> None:
        self.inner = inner
        self.node = node
        self.shape: tuple[int, ...] = inner.shape

    def __repr__(self) -> str:
        kind = "leaf" if self.node.rule is None else "tracked"
        return f"ADTensor({kind}, shape={self.shape})"


class Node:
    """One recorded op, or a leaf (``rule is None``).

    Invariants:
    * ``parents[i]`` and ``shapes[i]`` describe the op's i-th tensor input, counted in argument
      order with tensor lists flattened; ``parents[i]`` is None for an untracked input.
    * ``saved`` is what ``rule.backward`` takes after ``(B, g)``: the op's output (or None)
      followed by the op's arguments, each tensor replaced by its kept value when the rule
      needs it and by its shape otherwise. A kept value is an inner primitive, or a
      :class:`Recipe` under balanced checkpointing. ``saved`` is None once freed by a
      backward without ``retain_graph``.
    * ``recipe`` recomputes this node's output (balanced checkpointing, memory-bound ops).
    * ``grad`` is the gradient accumulated so far (leaves; any node after ``set_grad``) while
      no API object holds it; ``holder`` is that object (the Tensor that ``.grad`` returns)
      once one exists. At most one of the two is set: with a holder, the gradient is
      ``holder._p`` (unwrapped: ``holder_value``) and backward adds into it by rebinding
      ``holder._p``, so in-place ops on ``.grad`` (``zero_``, ``+=``) change the stored
      gradient and the object keeps its identity (PyTorch's AccumulateGrad adds in place into the existing ``.grad``).
    * ``hooks`` is None until a hook, ``retain_grad`` or ``grad_fn`` asks for a :class:`NodeHooks`.
    * ``links`` says which kept values are tracked inputs, for a ``create_graph`` backward to
      differentiate through them: ``(saved index, parent index, list position or -1)`` per kept
      tracked value. Set by the generic recorder only; unset (read with a default) it means the
      fixed layout of the one- and two-input recorders, ``saved[1 + i]`` from ``parents[i]``.
    """

    __slots__ = ("parents", "shapes", "rule", "saved", "recipe", "grad", "holder", "hooks", "links")

    def __init__(self, parents: tuple[Node | None, ...], shapes: tuple[tuple[int, ...], ...],
                 rule: Rule | None) -> None:
        self.parents = parents
        self.shapes = shapes
        self.rule = rule
        self.saved: tuple[Any, ...] | None = ()
        self.recipe: Recipe | None = None
        self.grad: Any = None
        self.holder: Any = None
        self.hooks: NodeHooks | None = None


class NodeHooks:
    """What the API attached to one node (allocated on first use, so recording never pays).

    * ``pre``: hooks on the gradient of the node's output (``Tensor.register_hook``), by handle
      id in registration order; each takes the gradient (an Autodiff primitive) and returns
      None or its replacement. They run once the gradient is complete, before a leaf
      accumulates it and before the node's rule runs.
    * ``retain``: a non-leaf keeps its gradient as ``.grad`` (``retain_grad``), after the hooks.
    * ``post``: hooks on the node itself (``grad_fn.register_hook``): ``fn(grad_inputs,
      grad_outputs)`` (tuples of primitives or None) after the rule ran; a tuple return replaces
      the gradients of the inputs.
    * ``api``: the API object standing for the node (``grad_fn``), cached so it keeps its identity.
    """

    __slots__ = ("pre", "retain", "post", "api")

    def __init__(self) -> None:
        self.pre: dict[int, Callable[[Any], Any]] = {}
        self.retain = False
        self.post: dict[int, Callable[[Any, Any], Any]] = {}
        self.api: Any = None


def hooks_of(n: Node) -> NodeHooks:
    """``n``'s hooks, allocated on first use."""
    h = n.hooks
    if h is None:
        h = n.hooks = NodeHooks()
    return h


class _Stash:
    """The gradient a custom function's output node hands its function node: a token (the
    real gradient went into the function's context), never added to another. ``shape`` is the
    function node's shape in its outputs' ``shapes``, so the engine never sums it."""

    __slots__ = ()
    shape: tuple[int, ...] = ()


#: the one token (``_Stash``)
STASH = _Stash()


def holder_value(n: Node) -> Any:
    """``n``'s gradient as an inner primitive (from its holder when it has one), or None."""
    h = n.holder
    if h is None:
        return n.grad
    hp = h._p
    return hp.inner if hp.__class__ is ADTensor else hp


def leaf() -> Node:
    return Node((), (), None)


def _topo(roots: Iterable[Node]) -> list[Node]:
    """Nodes reachable from ``roots``, every node before its parents (roots first).

    Iterative post-order DFS, so graph depth is not bounded by Python's recursion limit; one
    ``seen`` set over all roots, so the reversed post-order is a topological order of the union.
    """
    post: list[Node] = []
    seen: set[Node] = set()
    for root in roots:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if expanded:
                post.append(n)
            elif n not in seen:
                seen.add(n)
                stack.append((n, True))
                for p in n.parents:
                    if p is not None and p not in seen:
                        stack.append((p, False))
    post.reverse()
    return post


def _tracked_saved(n: Node, saved: tuple[Any, ...]) -> tuple[Any, ...]:
    """``saved`` of node ``n`` for a ``create_graph`` pass: each kept value of a tracked input
    re-joined with the input's node, and the output with ``n`` itself, so the rule's ops on them
    are recorded (``Node.links``)."""
    out = list(saved)
    if n.rule.saves_out and out[0] is not None:  # type: ignore[union-attr]
        out[0] = ADTensor(out[0], n)
    links = getattr(n, "links", None)
    parents = n.parents
    if links is None:  # the one- and two-input recorders: saved[1 + i] is input i's value or shape
        for i, p in enumerate(parents):
            v = out[1 + i]
            if p is not None and v.__class__ is not tuple and hasattr(v, "shape"):
                out[1 + i] = ADTensor(v, p)
    else:
        for si, pi, j in links:
            if j < 0:
                out[si] = ADTensor(out[si], parents[pi])
            else:
                lst = list(out[si])
                lst[j] = ADTensor(lst[j], parents[pi])
                out[si] = tuple(lst)
    return tuple(out)


def _accumulate(B: Backend, n: Node, g: Any, create_graph: bool) -> None:
    """Add ``g`` into node ``n``'s ``.grad`` (a leaf's, or a retained non-leaf's)."""
    h = n.holder
    if create_graph:  # B is the Autodiff backend: the sum is recorded, the grad may be tracked
        if h is None:
            n.grad = g if n.grad is None else B.add(n.grad, g)
        else:
            h._p = B.add(h._p, g)
        return
    if h is None:
        old = n.grad
        if old.__class__ is ADTensor:  # recorded by an earlier create_graph pass: this sum is not
            old = old.inner
        n.grad = g if old is None else B.add(old, g)
    else:  # rebind the .grad object (a holder that is itself a leaf stays one)
        hp = h._p
        if hp.__class__ is ADTensor:
            s = B.add(hp.inner, g)
            h._p = ADTensor(s, hp.node) if hp.node.rule is None else s
        else:
            h._p = B.add(hp, g)


def run_backward(B: Backend, root: Node, grad: Any, retain_graph: bool, recompute: bool) -> None:
    """Propagate ``grad`` (the gradient of ``root``'s output, an inner primitive) to the
    leaves behind ``root``, adding into their ``.grad`` (``run_graph`` with one root)."""
    run_graph(B, [root], [grad], retain_graph, recompute)


def run_graph(B: Backend, roots: list[Node], grads_in: list[Any], retain_graph: bool, recompute: bool,
              targets: list[Node] | None = None, accumulate: bool = True,
              create_graph: bool = False) -> dict[Node, Any]:
    """Propagate ``grads_in[i]`` (the gradient of ``roots[i]``'s output) back through the graph.

    Nodes run in reverse topological order, so every consumer of a value has contributed to
    its gradient before the value's own rule runs (diamonds sum first, propagate once). With
    ``targets`` None every leaf reached adds its gradient into ``.grad``; with ``targets``
    only those nodes (leaves or not) receive one, and only the nodes with a path to a target
    run. ``accumulate`` False (``autograd.grad``) adds into no ``.grad`` and returns the
    targets' gradients instead (a target that got none is absent). Retained non-leaves
    (``retain_grad``) take theirs in every mode, as torch's.

    Without ``create_graph`` the rules run on the inner backend ``B`` with grad mode off. With
    it ``B`` is the Autodiff backend and grad mode stays on: the gradients are tracked values,
    the rules see the tracked inputs they kept (``_tracked_saved``), so the pass is recorded.
    """
    order = _topo(roots)
    need: set[Node] | None = None
    if targets is not None:  # prune: the nodes with a path to a target
        tset = set(targets)
        need = set()
        for n in reversed(order):  # parents first
            if n in tset or any(p in need for p in n.parents):
                need.add(n)
        order = [n for n in order if n in need]
    # check before touching anything, so a refused backward leaves every .grad as it was
    for n in order:
        if n.rule is not None and n.saved is None and (need is None or any(p in need for p in n.parents)):
            raise AutodiffError(
                "Trying to backward through the graph a second time (or to read values that a "
                "previous backward already freed); pass retain_graph=True to the first backward() "
                "if you need to backward through the graph again"
            )
    rec = Recomputer(n.saved for n in order if n.rule is not None) if recompute else None
    grads: dict[Node, Any] = {}
    for root, g0 in zip(roots, grads_in):
        acc = grads.get(root)
        grads[root] = g0 if acc is None else B.add(acc, g0)
    prev, mode.enabled = mode.enabled, create_graph
    try:
        if need is None and not create_graph:
            _plain(B, order, grads, retain_graph, rec)
            return {}
        return _general(B, order, grads, retain_graph, rec, need, targets, accumulate, create_graph)
    finally:
        mode.enabled = prev


def _plain(B: Backend, order: list[Node], grads: dict[Node, Any], retain_graph: bool,
           rec: Recomputer | None) -> None:
    """``run_graph``'s loop for a plain ``backward()``: every leaf reached accumulates, nothing
    is recorded (the training step's path, kept to what it needs)."""
    for n in order:
        g = grads.pop(n, None)
        if g is None:  # no consumer's rule passed it a gradient
            continue
        rule = n.rule
        h = n.hooks
        if h is not None:
            g = _pre_hooks(B, n, h, g, rule is not None, False)
        if rule is None:
            _accumulate(B, n, g, False)
            continue
        saved = n.saved
        assert saved is not None  # checked above
        if rec is not None:
            saved = rec.take(saved)
        if rule.reads is None:
            gs = rule.backward(B, g, *saved)
        else:  # a partial rule: only the gradients of tracked inputs
            gs = rule.backward(B, g, *saved, need=tuple(p is not None for p in n.parents))
        if not retain_graph:
            n.saved = None
            n.recipe = None
        if type(gs) is not tuple:  # single-input rules return the gradient itself
            gs = (gs,)
        if h is not None and h.post:
            gs = _post_hooks(B, n, h, gs, g)
        for parent, shape, pg in zip(n.parents, n.shapes, gs):
            if parent is None or pg is None:
                continue
            if pg.shape != shape:  # the op broadcast this input
                pg = sum_to(B, pg, shape)
            acc = grads.get(parent)
            if acc is None:
                grads[parent] = pg
            elif pg is not STASH:  # (a custom function's outputs: the gradients are in its context)
                grads[parent] = B.add(acc, pg)


def _general(B: Backend, order: list[Node], grads: dict[Node, Any], retain_graph: bool,
             rec: Recomputer | None, need: set[Node] | None, targets: list[Node] | None,
             accumulate: bool, create_graph: bool) -> dict[Node, Any]:
    """``run_graph``'s loop with targets (``inputs=``, ``autograd.grad``) or ``create_graph``."""
    captured: dict[Node, Any] = {}
    tset = None if targets is None else set(targets)
    for n in order:
        g = grads.pop(n, None)
        if g is None:
            continue
        rule = n.rule
        h = n.hooks
        if h is not None:
            # a retained target that accumulates takes its gradient once, below
            g = _pre_hooks(B, n, h, g, rule is not None and not (accumulate and tset is not None and n in tset),
                           create_graph)
        if tset is not None and n in tset:
            if accumulate:
                _accumulate(B, n, g, create_graph)
            else:
                captured[n] = g
            if rule is None or not any(p in need for p in n.parents):  # type: ignore[operator]
                continue
        elif rule is None:
            if tset is None:
                _accumulate(B, n, g, create_graph)
            continue
        saved = n.saved
        assert saved is not None
        if rec is not None:
            saved = rec.take(saved)
        if create_graph:
            saved = _tracked_saved(n, saved)
        if rule.reads is None:
            gs = rule.backward(B, g, *saved)
        else:
            gs = rule.backward(B, g, *saved, need=tuple(p is not None for p in n.parents))
        if not retain_graph:
            n.saved = None
            n.recipe = None
        if type(gs) is not tuple:
            gs = (gs,)
        if h is not None and h.post:
            gs = _post_hooks(B, n, h, gs, g)
        for parent, shape, pg in zip(n.parents, n.shapes, gs):
            if parent is None or pg is None or (need is not None and parent not in need):
                continue
            if pg.shape != shape:
                pg = sum_to(B, pg, shape)
            acc = grads.get(parent)
            if acc is None:
                grads[parent] = pg
            elif pg is not STASH:
                grads[parent] = B.add(acc, pg)
    return captured


def _pre_hooks(B: Backend, n: Node, h: NodeHooks, g: Any, retain: bool, create_graph: bool) -> Any:
    """Run ``n``'s tensor hooks on its complete gradient ``g`` (each may replace it), then keep
    it as ``.grad`` when the node retains it (``retain``: a non-leaf, not also a target that
    accumulates); returns the gradient the node goes on with."""
    for fn in list(h.pre.values()):
        r = fn(g)
        if r is not None:
            g = r
    if retain and h.retain:
        _accumulate(B, n, g, create_graph)
    return g


def _post_hooks(B: Backend, n: Node, h: NodeHooks, gs: tuple[Any, ...], g: Any) -> tuple[Any, ...]:
    """Run ``n``'s node hooks on the gradients its rule gave its inputs (summed to the inputs'
    shapes first, one entry per input) and the gradient of its output."""
    full = tuple(None if pg is None or pg is STASH else (sum_to(B, pg, shape) if pg.shape != shape else pg)
                 for pg, shape in zip(gs + (None,) * (len(n.shapes) - len(gs)), n.shapes))
    for fn in list(h.post.values()):
        r = fn(full, (g,))
        if r is not None:
            full = tuple(r)
    return full


def retained_bytes(B: Backend, root: Node | None) -> int:
    """Bytes of inner values the graph behind ``root`` keeps for backward, each value counted
    once (by identity), found through saved values and recipes."""
    total = 0
    nodes: set[int] = set()
    seen: set[int] = set()
    stack: list[Node | None] = [root]
    while stack:
        n = stack.pop()
        if n is None or id(n) in nodes:
            continue
        nodes.add(id(n))
        stack.extend(n.parents)
        values: list[Any] = [*(n.saved or ()), n.recipe]
        while values:
            v = values.pop()
            if v is None or id(v) in seen:
                continue
            if type(v) is Recipe:
                seen.add(id(v))
                values.extend(v.args)
            elif type(v) is tuple or type(v) is list:
                values.extend(v)
            elif hasattr(v, "shape"):
                seen.add(id(v))
                total += math.prod(v.shape) * B.dtype(v).itemsize
    return total
