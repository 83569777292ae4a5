"""The op registry: one entry per op, kept by family, from which every layer derives its
tables (see ``registry.py`` for what an entry holds).

=====================  =============================================================
``elementwise.py``     unary math, predicates, binary and scalar arithmetic, bitwise,
                       comparisons, logical ops, cast/where/clamp/masked_fill, lerp,
                       and the activation composites (square, silu, gelu)
``reduce.py``          sum ... any, argmax/argmin, cumsum/cumprod, mean, var,
                       logsumexp, softmax, log_softmax
``shape.py``           reshape ... triu, roll, diagonal
``index.py``           gather, scatter, index_select, index, index_put, slice_assign
``linalg.py``          matmul
``attention.py``       sdpa, sdpa_backward (fused attention; composites with Cube kernels)
``sort.py``            argsort (stable, NaN ordered as torch)
=====================  =============================================================

Adding an op: an entry in its family's module (output rule, gradient rule, numpy form, flags,
or a decomposition), a kernel beside the Cube backend if it needs one, and a case in
``tests/conformance/optable.py``. ``docs/architecture.md`` walks through an example.
"""

from __future__ import annotations

from . import attention, elementwise, index, linalg, reduce, shape, sort  # noqa: F401  (each registers its entries)
from .registry import FAMILIES, REGISTRY, Op, get, names, register

__all__ = ["Op", "REGISTRY", "FAMILIES", "get", "names", "register", "primitives"]


def primitives(*families: str) -> tuple[str, ...]:
    """The ops of ``families`` that every backend implements itself (no decomposition)."""
    return names(*families, where=lambda op: op.compose is None)
