"""Custom differentiable ops: ``ember.autograd.Function``, as ``torch.autograd.Function``.

``MyOp.apply(*args)`` runs ``MyOp.forward(ctx, *args)`` with grad mode off and, when grad mode
is on and a tensor argument requires grad, records one graph node for the call whose rule
calls ``MyOp.backward(ctx, *grad_outputs)`` (one gradient per forward output) and maps what it
returns (one gradient per forward argument, None where there is none) onto the tensor inputs.

A node stands for one output in Autodiff's graph. A call with one differentiable output gives
that output the function's node itself. With several, each output gets a small node of its
own whose rule puts the output's gradient into the context (``ctx._stash``) and hands the
function node the ``STASH`` token; the engine's topological order runs every output node
before the function node, which then reads all the gradients at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import _shape as S
from ..backends.autodiff.mode import mode, no_grad
from ..backends.autodiff.node import STASH, ADTensor, Node
from ..errors import AutodiffError, GradientShapeError
from ..tensor import Tensor
from ..tensor.core import _make
from ..tensor.graph import _to_prim

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class _FunctionRule:
    """A rule (``ops.grad.Rule``'s attributes, as the engine reads them) that calls a custom
    function's backward: ``backward(B, g, ctx)`` for the function node, ``backward(B, g, ctx,
    j)`` for the node of output ``j`` (``function_output``)."""

    __slots__ = ("backward", "saves", "saves_out", "reads", "recompute", "name", "function_output")

    def __init__(self, name: str, backward: Callable[..., Any], function_output: bool) -> None:
        self.backward = backward
        self.saves: frozenset[int] = frozenset()
        self.saves_out = False
        self.reads = None
        self.recompute = False
        self.name = name
        self.function_output = function_output


class FunctionCtx:
    """The ``ctx`` a custom function's ``forward`` and ``backward`` share, as torch's: any
    attribute may be set on it; ``save_for_backward`` / ``saved_tensors`` keep tensors for
    backward; ``needs_input_grad`` tells per forward argument whether it needs a gradient."""

    def __init__(self) -> None:
        #: per forward argument: a tensor that requires grad (with grad mode on)
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True
        self._saved: tuple[Tensor | None, ...] = ()
        self._non_differentiable: set[int] = set()
        self._stash: dict[int, Any] = {}

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (inputs, outputs or None) for ``backward`` (``saved_tensors``)."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors (or None), got {type(t).__name__}")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The tensors given to ``save_for_backward``."""
        return self._saved

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """These outputs take no gradient: they do not require grad, and backward gets zeros
        (or None, see ``set_materialize_grads``) for them."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (True, the default) or None for outputs that took no gradient."""
        self.materialize_grads = bool(value)

    # ------------------------------------------------------------------ engine side
    def _output_grad(self, B: Any, g: Any, j: int) -> Any:
        """Rule of output ``j``'s node: keep its gradient for the function node."""
        self._stash[j] = g
        return STASH

    def _run_backward(self, B: Any, g: Any) -> tuple[Any, ...]:
        """Rule of the function node: the user's backward on Tensors, its results as primitives
        of the tensor inputs (checked as torch checks them)."""
        cls = self._cls
        if self._direct is not None:
            gouts: list[Any] = [None] * len(self._out_meta)
            gouts[self._direct] = g
        else:
            gouts = [self._stash.pop(j, None) for j in range(len(self._out_meta))]
        bk = self._bk
        args: list[Tensor | None] = []
        for go, meta in zip(gouts, self._out_meta):
            if go is None:
                if not self.materialize_grads or meta is None:
                    args.append(None)
                    continue
                go = B.full(meta[0], 0.0, meta[1])
            args.append(_make(go, bk, bk.dtype(go)))
        res = cls.backward(self, *args)
        if not isinstance(res, tuple):
            res = (res,)
        kinds = self._in_meta
        name = f"{cls.__name__}Backward"
        if len(res) < len(kinds) or any(r is not None for r in res[len(kinds):]):
            raise AutodiffError(f"function {name} returned an incorrect number of gradients (expected "
                                f"{len(kinds)}, got {len(res)})")
        out: list[Any] = []
        for i, (meta, r) in enumerate(zip(kinds, res)):
            if meta is None:  # not a tensor argument
                if r is not None:
                    raise AutodiffError(f"function {name} returned a gradient different than None at position "
                                        f"{i + 1}, but the corresponding forward input was not a Tensor")
                continue
            if r is None or not self.needs_input_grad[i]:
                out.append(None)
                continue
            if not isinstance(r, Tensor):
                raise TypeError(f"function {name} returned a {type(r).__name__} as gradient {i}, not a Tensor")
            shape, d = meta
            if r.shape != shape:
                try:
                    ok = S.broadcast(shape, r.shape) == r.shape
                except Exception:
                    ok = False
                if not ok:
                    raise GradientShapeError(f"Function {name} returned an invalid gradient at index {i} - "
                                             f"got {list(r.shape)} but expected shape compatible with {list(shape)}")
            if r._dt is not d:
                r = r.to(d)
            out.append(_to_prim(r, f"function {name}"))
        return tuple(out)


def _function_backward(B: Any, g: Any, ctx: FunctionCtx) -> tuple[Any, ...]:
    return ctx._run_backward(B, g)


def _output_backward(B: Any, g: Any, ctx: FunctionCtx, j: int) -> Any:
    return ctx._output_grad(B, g, j)


class Function:
    """As ``torch.autograd.Function``: subclass it with static ``forward(ctx, *args)`` and
    ``backward(ctx, *grad_outputs)`` (or ``forward(*args)`` plus ``setup_context(ctx, inputs,
    output)``) and call ``apply``. ``mark_dirty`` and forward-mode (``jvp``) are not supported
    (docs/autograd.md)."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """The op's values (runs with grad mode off)."""
        raise NotImplementedError("a Function subclass must define forward")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        """Optional: fill ``ctx`` from the inputs and output (then ``forward`` takes no ctx)."""
        return NotImplemented

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """One gradient per forward argument (None where there is none)."""
        raise NotImplementedError("a Function subclass must define backward to be differentiated")

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the function on ``args``, recording it for backward when an argument requires grad."""
        ctx = FunctionCtx()
        needs = tuple(isinstance(a, Tensor) and a._bk.is_tracked(a._p) for a in args)
        record = mode.enabled and any(needs)
        ctx.needs_input_grad = needs if mode.enabled else tuple(False for _ in args)
        separate = cls.setup_context is not Function.setup_context
        with no_grad():
            if separate:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        if not record:
            return out
        outs = out if isinstance(out, tuple) else (out,)
        first = next(a for a, n in zip(args, needs) if n)
        parents, shapes, in_meta = [], [], []
        for a in args:
            if isinstance(a, Tensor):
                node = a._bk.graph_node(a._p)
                parents.append(node)
                shapes.append(a.shape)
                in_meta.append((a.shape, a._dt))
            else:
                in_meta.append(None)
        diff = [j for j, o in enumerate(outs) if isinstance(o, Tensor) and o._dt.is_floating_point
                and id(o) not in ctx._non_differentiable and o._bk is first._bk]
        ctx._cls = cls
        ctx._bk = first._bk
        ctx._in_meta = tuple(in_meta)
        ctx._out_meta = tuple((o.shape, o._dt) if isinstance(o, Tensor) else None for o in outs)
        ctx._direct = diff[0] if len(diff) == 1 else None
        fnode = Node(tuple(parents), tuple(shapes), _rule(cls, False))
        fnode.saved = (ctx,)
        fnode.links = ()  # its saved values are the context, no tensors (Node.links)
        result = list(outs)
        for j in diff:
            if ctx._direct is None:
                node = Node((fnode,), ((),), _rule(cls, True))
                node.saved = (ctx, j)
                node.links = ()
            else:
                node = fnode
            result[j] = _tracked_output(outs[j], args, node)
        for j, o in enumerate(outs):  # the other tensor outputs: untracked (an input returned as-is too)
            if j not in diff and isinstance(o, Tensor) and o._bk.is_tracked(o._p):
                result[j] = _make(o._bk.detach(o._p), o._bk, o._dt)
        return tuple(result) if isinstance(out, tuple) else result[0]


def _tracked_output(o: Tensor, args: tuple[Any, ...], node: Node) -> Tensor:
    """``o`` as the tracked output of ``node``: the object itself unless it is one of the
    arguments (then a new tensor of its values, so the argument stays what it was)."""
    inner = o._p.inner if o._p.__class__ is ADTensor else o._p
    p = ADTensor(inner, node)
    if any(o is a for a in args):
        return _make(p, o._bk, o._dt)
    o._p = p
    return o


def _rule(cls: type, output: bool) -> _FunctionRule:
    """The rule object of ``cls`` (one per class and kind, cached on the class)."""
    key = "_ember_output_rule" if output else "_ember_rule"
    r = cls.__dict__.get(key)
    if r is None:
        r = _FunctionRule(f"{cls.__name__}Backward", _output_backward if output else _function_backward, output)
        setattr(cls, key, r)
    return r


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """As ``torch.autograd.function.once_differentiable``: the backward runs with grad mode off,
    so it is not itself differentiated (a ``create_graph`` pass gets untracked gradients)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper
