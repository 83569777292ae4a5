"""The registry's entry type and its lookups.

An :class:`Op` holds everything about one op that is not a device kernel: its family and
parameters, the rule giving its output's shape and dtype, its gradient rule, its flags, its
numpy implementation (Flex) and, for ops built from others, its decomposition. The layers
derive their tables from the registry: the catalog (``backends/base.py``: the protocol and
the composite defaults), Flex's methods, Autodiff's rules, Fusion's shape rules, the replay
set of the Cube backend and ``ember compile-check``'s samples. A device kernel stays beside
its backend (``backends/cube``); a backend without one runs the decomposition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Op", "REGISTRY", "register", "names", "get"]

#: op families, in catalog order; each family shares a calling convention
FAMILIES = (
    "unary",        # op(p): same dtype out
    "predicate",    # op(p): bool out
    "binary",       # op(a, b): one dtype in and out; shapes broadcast
    "bitwise",      # op(a, b): integer operands
    "compare",      # op(a, b): bool out
    "logical",      # op(a, b): bool operands and result
    "scalar",       # op(p, s): s a Python scalar representable in p's dtype
    "rscalar",      # r<op>_scalar(p, s) = op(s, p)
    "select",       # where, clamp, masked_fill, cast
    "reduce",       # op(p, dims, keepdim) over a non-empty tuple of dims
    "arg_reduce",   # op(p, dim, keepdim) -> int64 indices
    "scan",         # op(p, dim): same shape, running along dim
    "sort",         # op(p, dim, descending, stable) -> int64 permutation of each slice along dim
    "normalize",    # softmax family and moments: reductions with a dedicated kernel or rule
    "matmul",
    "attention",    # fused scaled-dot-product attention and its backward (composites with kernels)
    "shape",        # layout and views
    "index",        # gather / scatter / advanced indexing
)


class Op:
    """One registry entry.

    * ``out(*args) -> (shape, dtype)``: computed from the arguments (primitives carry
      ``.shape`` and ``.dtype`` at the Fusion layer); the Tensor API has validated them.
    * ``grad``: a :class:`ember.ops.grad.Rule`, or None (not differentiable: results untracked).
    * ``flex``: the numpy implementation (a plain function of the op's arguments), or None
      when Flex runs ``compose``.
    * ``compose(B, *args)``: the op as other ops of backend ``B`` (the catalog's default
      method); None for a primitive every backend implements.
    * ``elementwise``: a pure function of its inputs' elements at one position (fusable,
      cheap to recompute in backward); ``replay``: a Cube backend call may be replayed from a
      capture of its launches; ``float_only``: the Tensor API lifts integer inputs to float;
      ``scalar_form``: a binary op that also has ``<op>_scalar`` (and maybe ``r<op>_scalar``);
      ``recompute``: memory-bound, so balanced checkpointing recomputes it in backward
      (default: ``elementwise``).
    * ``front``: the user-facing function (``ember.<name>`` and ``Tensor.<name>``), written
      against the Tensor API: it validates and normalises torch's arguments, then calls the
      op through ``Tensor._op``. None where the Tensor API spells the method out, or derives
      it from the family (a float binary op without a scalar form).
    """

    __slots__ = ("name", "family", "out", "grad", "flex", "compose", "elementwise", "replay",
                 "float_only", "scalar_form", "recompute", "front")

    def __init__(self, name: str, family: str, out: Callable[..., Any] | None = None, *,
                 grad: Any = None, flex: Callable[..., Any] | None = None,
                 compose: Callable[..., Any] | None = None, elementwise: bool = False,
                 replay: bool = True, float_only: bool = False, scalar_form: bool = False,
                 recompute: bool | None = None, front: Callable[..., Any] | None = None) -> None:
        if family not in FAMILIES:
            raise ValueError(f"op {name!r}: unknown family {family!r}")
        self.name = name
        self.family = family
        self.out = out
        self.grad = grad
        self.flex = flex
        self.compose = compose
        self.elementwise = elementwise
        self.replay = replay
        self.float_only = float_only
        self.scalar_form = scalar_form
        #: memory-bound: recomputed in backward under balanced checkpointing
        self.recompute = elementwise if recompute is None else recompute
        self.front = front

    def __repr__(self) -> str:
        return f"Op({self.name!r}, {self.family!r})"


#: name -> entry, in registration order (the family modules register in catalog order)
REGISTRY: dict[str, Op] = {}


def register(*ops: Op) -> None:
    """Add entries; a name may be registered once."""
    for op in ops:
        if op.name in REGISTRY:
            raise ValueError(f"op {op.name!r} is registered twice")
        REGISTRY[op.name] = op


def names(*families: str, where: Callable[[Op], bool] | None = None) -> tuple[str, ...]:
    """The names of the entries of ``families`` (all when none given), in registration order,
    keeping those ``where`` accepts."""
    return tuple(n for n, op in REGISTRY.items()
                 if (not families or op.family in families) and (where is None or where(op)))


def get(name: str) -> Op:
    """The entry named ``name`` (KeyError when the registry has none)."""
    return REGISTRY[name]
