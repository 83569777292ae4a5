"""The graph: the Autodiff primitive, graph nodes, and the backward walk.

An :class:`ADTensor` pairs an inner-backend primitive with the :class:`Node` that produced
it; it stands for a tracked value only (an untracked value is the inner primitive itself,
unwrapped: see ``backend``). A node records one op: its parents (the nodes of
its tensor inputs), the rule that maps the output's gradient to the inputs' gradients, and
the values that rule needs. Leaves are nodes without a rule; they accumulate ``.grad``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...errors import AutodiffError
from ...ops.grad import sum_to
from .checkpoint import Recipe, Recomputer
from .mode import mode

if TYPE_CHECKING:
    from ...ops.grad import Rule
    from ..base import Backend

__all__ = ["ADTensor", "Node", "holder_value", "run_backward", "retained_bytes", "sum_to"]


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
    """

    __slots__ = ("parents", "shapes", "rule", "saved", "recipe", "grad", "holder")

    def __init__(self, parents: tuple[Node | None, ...], shapes: tuple[tuple[int, ...], ...],
                 rule: Rule | None) -> None:
        self.parents = parents
        self.shapes = shapes
        self.rule = rule
        self.saved: tuple[Any, ...] | None = ()
        self.recipe: Recipe | None = None
        self.grad: Any = None
        self.holder: Any = None


def holder_value(n: Node) -> Any:
    """``n``'s gradient as an inner primitive (from its holder when it has one), or None."""
    h = n.holder
    if h is None:
        return n.grad
    hp = h._p
    return hp.inner if hp.__class__ is ADTensor else hp


def leaf() -> Node:
    return Node((), (), None)


def _topo(root: Node) -> list[Node]:
    """Nodes reachable from ``root``, every node before its parents (root first).

    Iterative post-order DFS, so graph depth is not bounded by Python's recursion limit.
    """
    post: list[Node] = []
    seen: set[Node] = set()
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


def run_backward(B: Backend, root: Node, grad: Any, retain_graph: bool, recompute: bool) -> None:
    """Propagate ``grad`` (the gradient of ``root``'s output, an inner primitive) to the
    leaves behind ``root``, adding into their ``.grad``.

    Nodes run in reverse topological order, so every consumer of a value has contributed to
    its gradient before the value's own rule runs (diamonds sum first, propagate once).
    Backward ops run on the inner backend ``B`` with grad mode off.
    """
    order = _topo(root)
    # check before touching anything, so a refused backward leaves every .grad as it was
    for n in order:
        if n.rule is not None and n.saved is None:
            raise AutodiffError(
                "Trying to backward through the graph a second time (or to read values that a "
                "previous backward already freed); pass retain_graph=True to the first backward() "
                "if you need to backward through the graph again"
            )
    rec = Recomputer(n.saved for n in order if n.rule is not None) if recompute else None
    grads: dict[Node, Any] = {root: grad}
    prev, mode.enabled = mode.enabled, False
    try:
        for n in order:
            g = grads.pop(n, None)
            if g is None:  # no consumer's rule passed it a gradient
                continue
            rule = n.rule
            if rule is None:
                h = n.holder
                if h is None:
                    n.grad = g if n.grad is None else B.add(n.grad, g)
                else:  # rebind the .grad object (a holder that is itself a leaf stays one)
                    hp = h._p
                    if hp.__class__ is ADTensor:
                        s = B.add(hp.inner, g)
                        h._p = ADTensor(s, hp.node) if hp.node.rule is None else s
                    else:
                        h._p = B.add(hp, g)
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
            for parent, shape, pg in zip(n.parents, n.shapes, gs):
                if parent is None or pg is None:
                    continue
                if pg.shape != shape:  # the op broadcast this input
                    pg = sum_to(B, pg, shape)
                acc = grads.get(parent)
                grads[parent] = pg if acc is None else B.add(acc, pg)
    finally:
        mode.enabled = prev


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
