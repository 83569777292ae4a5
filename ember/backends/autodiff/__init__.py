"""Autodiff: the decorator that gives any backend gradients (``device.autodiff()``).

``Autodiff(inner, checkpointing="none" | "balanced")`` implements the whole op catalog over
``inner``; ``no_grad`` / ``enable_grad`` / ``set_grad_enabled`` / ``inference_mode`` control recording per
thread.
Read in this order: ``mode`` (grad mode), ``node`` (graph and backward walk), ``rules``
(one backward rule per op), ``checkpoint`` (balanced recomputation), ``backend`` (the ops).
"""

from __future__ import annotations

from .backend import Autodiff
from .mode import enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled
from .node import ADTensor

__all__ = ["Autodiff", "ADTensor", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled",
           "inference_mode", "is_inference_mode_enabled"]
