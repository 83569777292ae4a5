"""Shared checks of the spatial and sequence tests: a functional op or a module against torch
CPU with identical inputs (and weights, through the state dict): outputs, input gradients and
parameter gradients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from nn_reference import assert_close, copy_weights, ember_input, torch_input

import ember


def check_fn(device: ember.Device, rng: np.random.Generator, ef: Callable[..., Any], tf: Callable[..., Any],
             shapes: Sequence[tuple[int, ...]], kwargs: dict[str, Any] | None = None, what: str = "",
             grads: bool = True) -> None:
    """``ef(*inputs, **kwargs)`` (ember) equals ``tf`` (torch): output and every input's gradient
    for a random output gradient."""
    kwargs = kwargs or {}
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    exs = [ember_input(x, device, requires_grad=grads) for x in xs]
    txs = [torch_input(x, requires_grad=grads) for x in xs]
    ty = tf(*txs, **kwargs)
    ey = ef(*exs, **kwargs)
    assert_close(ey, ty, what=f"{what} output")
    if not grads:
        return
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    ey.backward(ember.tensor(g, device=device))
    for i, (ex, tx) in enumerate(zip(exs, txs)):
        assert_close(ex.grad, tx.grad, what=f"{what} grad of input {i}")


def check_module(device: ember.Device, rng: np.random.Generator, em: ember.nn.Module, tm: torch.nn.Module,
                 inputs: Sequence[np.ndarray], what: str = "", out: Callable[[Any], Any] = lambda y: y) -> None:
    """``em`` (weights copied from ``tm``) gives torch's output, input and parameter gradients;
    ``out`` picks the tensor to compare from a structured result."""
    assert list(em.state_dict()) == list(tm.state_dict()), what
    copy_weights(tm, em)
    em.to(device)
    exs = [ember_input(x, device) for x in inputs]
    txs = [torch_input(x) for x in inputs]
    ty = out(tm(*txs))
    ey = out(em(*exs))
    assert_close(ey, ty, what=f"{what} output")
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    ey.backward(ember.tensor(g, device=device))
    for i, (ex, tx) in enumerate(zip(exs, txs)):
        assert_close(ex.grad, tx.grad, what=f"{what} grad of input {i}")
    tparams = dict(tm.named_parameters())
    for name, p in em.named_parameters():
        assert_close(p.grad, tparams[name].grad, what=f"{what} grad of {name}")
