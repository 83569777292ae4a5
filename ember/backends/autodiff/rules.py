"""Autodiff's rule table: the gradient rule of every differentiable registry entry.

The rules themselves live with their ops in ``ember.ops`` (``ops/grad.py`` states the calling
convention). An entry without a rule (comparisons, predicates, logical ops, all/any,
argmax/argmin, data creation) is not differentiable: its results are untracked. Rounding
ops and ``floor_div`` are differentiable with a zero gradient, as in PyTorch.
"""

from __future__ import annotations

from ...ops import REGISTRY
from ...ops.grad import Rule

__all__ = ["Rule", "RULES"]

RULES: dict[str, Rule] = {name: op.grad for name, op in REGISTRY.items() if op.grad is not None}

# memory-bound ops: recomputed in backward under balanced checkpointing (a rule object shared
# by several ops is shared only among ops of one kind)
for _name, _rule in RULES.items():
    _rule.recompute = REGISTRY[_name].recompute
