"""``ember.autograd.graph``, as ``torch.autograd.graph``: ``Node`` is the type of ``grad_fn``."""

from __future__ import annotations

from ..tensor.graph import GradFn, RemovableHandle

#: torch's name for the type of ``Tensor.grad_fn``
Node = GradFn

__all__ = ["Node", "GradFn", "RemovableHandle"]
