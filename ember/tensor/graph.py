"""The autograd surface of a Tensor: ``backward``, hooks, ``retain_grad``, ``grad_fn``, and the
engine entry that ``Tensor.backward`` and ``ember.autograd.grad`` / ``backward`` share.

The graph itself is Autodiff's (``backends/autodiff/node.py``): one node per recorded op, and a
tracked primitive's node is the node of the op that made it (one output per node). This module
only validates arguments the way torch does, turns gradients into Tensors for the user's hooks
and back, and stands for nodes with :class:`GradFn` objects. Nothing here runs on an op's path:
hooks live on the node (``Node.hooks``, None until asked for).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends.autodiff.mode import mode
from ..backends.autodiff.node import STASH, ADTensor, Node, hooks_of
from ..backends.autodiff.rules import rule_name
from ..errors import AutodiffError, DeviceMismatchError, GradientShapeError
from .core import Tensor, _make

__all__ = ["GraphMethods", "GradFn", "RemovableHandle", "run_engine", "as_tensors"]

_ids = itertools.count()


class RemovableHandle:
    """As ``torch.utils.hooks.RemovableHandle``: ``remove()`` takes the hook off (a context
    manager too: the hook is removed on exit)."""

    __slots__ = ("_table", "id")

    def __init__(self, table: dict[int, Any]) -> None:
        self._table = table
        self.id = next(_ids)

    def remove(self) -> None:
        """Take the hook off; removing twice is harmless."""
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _to_prim(r: Any, what: str) -> Any:
    """The primitive of a hook's (or a custom backward's) Tensor result; a tracked value is
    unwrapped unless the pass records itself (``create_graph``: grad mode is on)."""
    if not isinstance(r, Tensor):
        raise TypeError(f"{what} must return a Tensor or None, got {type(r).__name__}")
    p = r._p
    if p.__class__ is ADTensor and not mode.enabled:
        p = p.inner
    return p


def _wrap(bk: Any, g: Any) -> Tensor | None:
    """A gradient primitive as a Tensor of ``bk``'s device (None stays None)."""
    if g is None or g is STASH:
        return None
    return _make(g, bk, bk.dtype(g))


class GradFn:
    """As torch's ``grad_fn`` objects (``torch.autograd.graph.Node``): the recorded op behind a
    tensor. ``name()`` is ``<Op>Backward0`` from the ember op's name (``MulBackward0``;
    ``torch::autograd::AccumulateGrad`` for a leaf, as torch names it; a custom function's class name + ``Backward``);
    ``next_functions`` pairs each input's node with 0 (None for an input that needs no gradient)."""

    __slots__ = ("_node", "_bk")

    def __init__(self, node: Node, bk: Any) -> None:
        self._node = node
        self._bk = bk

    def name(self) -> str:
        """The op's name, torch-style (see the class docstring)."""
        rule = self._node.rule
        return "torch::autograd::AccumulateGrad" if rule is None else rule_name(rule)

    @property
    def next_functions(self) -> tuple[tuple[GradFn | None, int], ...]:
        """``((grad_fn or AccumulateGrad of each tensor input, 0), ...)``; ``(None, 0)`` for an
        input that needs no gradient."""
        return tuple((None if p is None else _grad_fn_of(p, self._bk), 0) for p in self._node.parents)

    def register_prehook(self, hook: Callable[[tuple[Tensor | None, ...]], Any]) -> RemovableHandle:
        """``hook(grad_outputs)`` before the node runs; a returned tuple replaces the gradient."""
        bk = self._bk
        table = hooks_of(self._node).pre
        handle = RemovableHandle(table)

        def run(g: Any) -> Any:
            r = hook((_wrap(bk, g),))
            if r is None:
                return None
            return None if r[0] is None else _to_prim(r[0], "a grad_fn pre-hook")

        table[handle.id] = run
        return handle

    def register_hook(self, hook: Callable[[tuple[Tensor | None, ...], tuple[Tensor | None, ...]], Any]
                      ) -> RemovableHandle:
        """``hook(grad_inputs, grad_outputs)`` after the node ran (``grad_inputs``: one entry per
        tensor input, None where it takes none); a returned tuple replaces ``grad_inputs``."""
        if self._node.rule is None:
            raise AutodiffError("register_hook on AccumulateGrad: register the hook on the leaf "
                                "tensor instead (Tensor.register_hook)")
        bk = self._bk
        table = hooks_of(self._node).post
        handle = RemovableHandle(table)

        def run(gs: tuple[Any, ...], go: tuple[Any, ...]) -> Any:
            r = hook(tuple(_wrap(bk, g) for g in gs), tuple(_wrap(bk, g) for g in go))
            if r is None:
                return None
            return tuple(None if x is None else _to_prim(x, "a grad_fn hook") for x in r)

        table[handle.id] = run
        return handle

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


def _grad_fn_of(node: Node, bk: Any) -> GradFn:
    """The one GradFn standing for ``node`` (cached on it, so ``t.grad_fn is t.grad_fn``); an
    output of a custom function with several outputs stands for the function's node."""
    if getattr(node.rule, "function_output", False):
        node = node.parents[0]  # type: ignore[assignment]
    h = hooks_of(node)
    if h.api is None:
        h.api = GradFn(node, bk)
    return h.api


def as_tensors(x: Any, what: str) -> list[Any]:
    """``x`` (a Tensor or a sequence of them; None entries kept) as a list."""
    if isinstance(x, Tensor) or x is None:
        return [x]
    if isinstance(x, Sequence):
        return list(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def run_engine(outputs: list[Any], grad_outputs: list[Any], inputs: list[Any] | None,
               retain_graph: bool | None, create_graph: bool, accumulate: bool) -> list[Any] | None:
    """Validate as torch does and run Autodiff's backward from ``outputs``.

    ``grad_outputs[i]`` None means ones (a one-element output only). With ``inputs`` the
    gradients go to those tensors only: into their ``.grad`` when ``accumulate``, else they are
    returned (primitives, None where none arrived). ``retain_graph`` None means ``create_graph``.
    """
    if not outputs:
        raise AutodiffError("backward needs at least one output tensor")
    if len(grad_outputs) != len(outputs):
        raise AutodiffError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    bk = None
    grads: list[Any] = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(t, Tensor):
            raise TypeError(f"element {i} of the outputs is a {type(t).__name__}, not a Tensor")
        if bk is None:
            bk = t._bk
        elif t._bk is not bk:
            raise DeviceMismatchError(f"outputs on {bk.device!r} and {t._bk.device!r}: one backward runs on one device")
        if not t._dt.is_floating_point:
            raise AutodiffError(f"backward() through a {t._dt} tensor: only floating point tensors carry gradients")
        if not bk.is_tracked(t._p):
            if "autodiff" not in bk.name:
                bk.run_autograd([], [], None, False, False, True)  # raises: not an autodiff device
            raise AutodiffError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise AutodiffError(f"grad can be implicitly created only for scalar outputs (output {i} has "
                                    f"shape {t.shape}); pass a gradient")
            grads.append(None)
            continue
        if not isinstance(g, Tensor):
            g = t._from_like(np.asarray(g))
        if g._bk is not bk:
            raise DeviceMismatchError(f"the gradient of output {i} is on {g.device!r}, the output on {bk.device!r}")
        if g.shape != t.shape:
            raise GradientShapeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                                     f"output[{i}] has a shape of {t.shape}")
        gp = (g if g._dt is t._dt else g.to(t._dt))._p
        if gp.__class__ is ADTensor and not create_graph:
            gp = gp.inner
        grads.append(gp)
    prims = [t._p for t in outputs]
    ips = None
    if inputs is not None:
        ips = []
        for j, x in enumerate(inputs):
            if not isinstance(x, Tensor):
                raise TypeError(f"input {j} is a {type(x).__name__}, not a Tensor")
            if x._bk is not bk or not bk.is_tracked(x._p):
                raise AutodiffError("One of the differentiated Tensors does not require grad")
            ips.append(x._p)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    return bk.run_autograd(prims, grads, ips, retain, bool(create_graph), accumulate)  # type: ignore[union-attr]


class GraphMethods:
    """Tensor's autograd methods (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    def backward(self: Any, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """As ``torch.Tensor.backward``: accumulate the gradients of this tensor into the ``.grad``
        of the leaves it was computed from (``gradient`` is required unless the tensor has one
        element). ``retain_graph`` (default: ``create_graph``) keeps the graph for another
        backward; ``create_graph`` records the backward pass (double backward); ``inputs``
        (tensors) limits which tensors get a ``.grad``, leaves or not."""
        ins = None
        if inputs is not None:
            ins = as_tensors(inputs, "inputs")
            if not ins:
                raise AutodiffError("`inputs` argument to `backward()` cannot be empty.")
        run_engine([self], [gradient], ins, retain_graph, create_graph, True)

    def register_hook(self: Any, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """As ``torch.Tensor.register_hook``: ``hook(grad)`` runs when this tensor's gradient is
        complete, before a leaf accumulates it into ``.grad``; a returned tensor replaces the
        gradient. Returns a handle whose ``remove()`` takes the hook off."""
        bk = self._bk
        node = bk.graph_node(self._p)
        if node is None:
            raise AutodiffError("cannot register a hook on a tensor that doesn't require gradient")
        table = hooks_of(node).pre
        handle = RemovableHandle(table)
        shape = self.shape

        def run(g: Any) -> Any:
            r = hook(_make(g, bk, bk.dtype(g)))
            if r is None:
                return None
            p = _to_prim(r, "a tensor hook")
            if tuple(p.shape) != shape:
                raise GradientShapeError(f"hook returned a gradient of shape {tuple(p.shape)} for a tensor of "
                                         f"shape {shape}")
            return p

        table[handle.id] = run
        return handle

    def retain_grad(self: Any) -> None:
        """As ``torch.Tensor.retain_grad``: a non-leaf keeps its gradient as ``.grad`` in later
        backward passes (after its hooks ran); a no-op on a leaf."""
        bk = self._bk
        node = bk.graph_node(self._p)
        if node is None:
            raise AutodiffError("can't retain_grad on Tensor that has requires_grad=False")
        if node.rule is not None:
            hooks_of(node).retain = True

    @property
    def retains_grad(self: Any) -> bool:
        """As ``torch.Tensor.retains_grad``: whether ``retain_grad()`` was called on this non-leaf."""
        node = self._bk.graph_node(self._p)
        return node is not None and node.rule is not None and node.hooks is not None and node.hooks.retain

    @property
    def grad_fn(self: Any) -> GradFn | None:
        """As ``torch.Tensor.grad_fn``: the recorded op that made this tensor (:class:`GradFn`),
        None for a leaf or a tensor that does not require grad."""
        node = self._bk.graph_node(self._p)
        if node is None or node.rule is None:
            return None
        return _grad_fn_of(node, self._bk)

    def is_inference(self: Any) -> bool:
        """As ``torch.Tensor.is_inference``: whether the tensor was made inside ``inference_mode()``."""
        return self._inference

    def _warn_nonleaf_grad(self: Any) -> None:
        warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                      "attribute won't be populated during backward(); call .retain_grad() on it if you want "
                      "the gradient of a non-leaf Tensor.", UserWarning, stacklevel=3)

