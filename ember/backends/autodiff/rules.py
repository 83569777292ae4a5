"""Autodiff's rule table: the gradient rule of every differentiable registry entry.

The rules themselves live with their ops in ``ember.ops`` (``ops/grad.py`` states the calling
convention). An entry without a rule (comparisons, predicates, logical ops, all/any,
argmax/argmin, data creation) is not differentiable: its results are untracked. Rounding
ops and ``floor_div`` are differentiable with a zero gradient, as in PyTorch.
"""

from __future__ import annotations

from ...ops import REGISTRY
from ...ops.grad import Rule

__all__ = ["Rule", "RULES", "RULE_NAMES", "rule_name"]

RULES: dict[str, Rule] = {name: op.grad for name, op in REGISTRY.items() if op.grad is not None}

# memory-bound ops: recomputed in backward under balanced checkpointing (a rule object shared
# by several ops is shared only among ops of one kind)
for _name, _rule in RULES.items():
    _rule.recompute = REGISTRY[_name].recompute

# every op its own rule object (the rounding ops share one function), so a node's rule names
# its op (``grad_fn.name()``)
_seen: set[int] = set()
for _name, _rule in list(RULES.items()):
    if id(_rule) in _seen:
        _copy = object.__new__(Rule)
        for _slot in Rule.__slots__:
            setattr(_copy, _slot, getattr(_rule, _slot))
        RULES[_name] = _copy
    _seen.add(id(RULES[_name]))
del _seen

#: rule -> the registry op it belongs to
RULE_NAMES: dict[Rule, str] = {rule: name for name, rule in RULES.items()}


def rule_name(rule: Rule) -> str:
    """A torch-style name of the op recorded with ``rule`` (``mul`` and ``mul_scalar`` give
    ``MulBackward0``): the ember op's name in CamelCase, so not always torch's own."""
    own = getattr(rule, "name", None)  # a custom function's rule names itself
    if own is not None:
        return own
    op = RULE_NAMES.get(rule, "unknown").removesuffix("_scalar")
    return "".join(part.capitalize() for part in op.split("_")) + "Backward0"
