"""``ember.autograd``, as ``torch.autograd``: ``grad``, ``backward``, custom ops (``Function``) and
the grad-mode switches.

The engine is Autodiff's (``ember/backends/autodiff``); ``ember.tensor.graph`` validates the
arguments as torch does. Differences from torch are listed in ``docs/autograd.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends.autodiff.mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ..errors import AutodiffError
from ..tensor import Tensor
from ..tensor.core import _make
from ..tensor.graph import GradFn, RemovableHandle, as_tensors, run_engine
from . import graph
from .function import Function, FunctionCtx

__all__ = ["grad", "backward", "Function", "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "graph", "GradFn",
           "RemovableHandle"]


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor | None] | None = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """As ``torch.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``, one per
    input, without touching any ``.grad``.

    ``grad_outputs`` (one per output; None means ones, for one-element outputs) weigh the
    outputs. ``retain_graph`` defaults to ``create_graph``; ``create_graph=True`` records the
    pass, so the results can be differentiated again. An input the outputs do not depend on
    raises unless ``allow_unused`` (its gradient is then None, or zeros with
    ``materialize_grads``). ``is_grads_batched`` is not supported (NotImplementedError)."""
    if is_grads_batched:
        raise NotImplementedError("ember.autograd.grad: is_grads_batched=True (vmap over grad_outputs) is "
                                  "not supported")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outs = as_tensors(outputs, "outputs")
    ins = as_tensors(inputs, "inputs")
    if not ins:
        raise AutodiffError("grad requires at least one input")
    gos = [None] * len(outs) if grad_outputs is None else as_tensors(grad_outputs, "grad_outputs")
    got = run_engine(outs, gos, ins, retain_graph, create_graph, False)
    assert got is not None
    result: list[Tensor | None] = []
    for i, (x, g) in enumerate(zip(ins, got)):
        if g is None:
            if not allow_unused:
                raise AutodiffError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                                    "graph. Set allow_unused=True if this is the desired behavior.")
            result.append(x.new_zeros(x.shape) if materialize_grads else None)
        else:
            result.append(_make(g, x._bk, x._dt))
    return tuple(result)


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False, grad_variables: Any = None,
             inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """As ``torch.autograd.backward``: ``sum(t.backward(g))`` over ``tensors`` and their
    ``grad_tensors`` in one pass (shared parts of the graph run once), accumulating into the
    ``.grad`` of the leaves (or of ``inputs`` only)."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    outs = as_tensors(tensors, "tensors")
    gs = [None] * len(outs) if grad_tensors is None else as_tensors(grad_tensors, "grad_tensors")
    ins = None
    if inputs is not None:
        ins = as_tensors(inputs, "inputs")
        if not ins:
            raise AutodiffError("`inputs` argument to `backward()` cannot be empty.")
    run_engine(outs, gs, ins, retain_graph, create_graph, True)
