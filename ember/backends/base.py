"""The op catalog: the one protocol every backend and every decorator implements.

A backend works on *primitives* (its own tensor handles: a numpy array for Flex, an
autodiff node wrapper for Autodiff, a lazy handle for Fusion, a device buffer view for Cube).
Every primitive has a ``.shape`` tuple; ``Backend.dtype(p)`` gives its ember dtype.

Division of labour (the contract that lets decorators stack freely):

* The Tensor API validates and normalises before it calls a backend: shapes broadcast,
  ``dim`` arguments are non-negative ints, operands of a binary op already share one dtype
  (the promoted one), float-only ops receive floating inputs, indices are in range where
  that can be checked without reading data. Backends may therefore assume valid input.
* Backends never mutate a primitive they were given: tensors are values. In-place Tensor
  methods (``add_``) rebind the Tensor to the op's result.
* Composite ops (softmax, var, gelu, ...) have default implementations here in terms of
  primitives, so a decorator that does not override them (Autodiff) sees only primitives,
  while an eager backend (Flex) may override them with a faster direct implementation.

The ops themselves are the registry's entries (``ember.ops``): the tables below, the
abstract method of each primitive and the default method of each composite (its
``compose``) are derived from it; this class adds the data, autodiff and runtime hooks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as dt
from ..errors import AutodiffError
from ..ops import REGISTRY, names, primitives

# The catalog's op tables, derived from the registry (``ember.ops``), which says what each
# family's calling convention is. The Tensor API lifts ints to float before the ops listed
# in FLOAT_UNARY; binary ops receive operands of one dtype.
UNARY_OPS = primitives("unary")
FLOAT_UNARY = frozenset(names("unary", where=lambda op: op.float_only))
PREDICATE_OPS = primitives("predicate")
ARITH_OPS = primitives("binary")
BITWISE_OPS = primitives("bitwise")
COMPARE_OPS = primitives("compare")
LOGICAL_OPS = primitives("logical")
BINARY_OPS = ARITH_OPS + BITWISE_OPS + COMPARE_OPS + LOGICAL_OPS

# ``<op>_scalar(p, s)`` computes ``op(p, s)`` and ``r<op>_scalar(p, s)`` computes ``op(s, p)``
# for a Python scalar ``s`` already representable in p's dtype.
SCALAR_OPS = tuple(n.removesuffix("_scalar") for n in names("scalar"))
REVERSED_SCALAR_OPS = tuple(n[1:].removesuffix("_scalar") for n in names("rscalar"))

# Reductions over a tuple of dims (never empty: the Tensor API expands "all dims").
REDUCE_OPS = primitives("reduce")
# Reductions of one dim that return indices (int64).
ARG_REDUCE_OPS = primitives("arg_reduce")

# Ops whose result is a pure function of their inputs' elements at the same position:
# cheap to recompute (checkpointing) and fusable (Fusion).
ELEMENTWISE_OPS = frozenset(names(where=lambda op: op.elementwise))

SHAPE_OPS = names("shape", where=lambda op: op.compose is None and op.recompute)
OTHER_OPS = tuple(n for n in primitives("select", "scan", "matmul", "shape", "index") if n not in SHAPE_OPS)


def _abstract(name: str):
    def method(self: Backend, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"backend {self.name} does not implement op {name!r}")

    method.__name__ = name
    return method


class Backend:
    """Base of every backend and decorator. Subclasses implement the primitives; the
    composites below are written in terms of them."""

    name: str = "backend"
    #: whether ops run when called (False for lazy backends such as Fusion)
    eager: bool = True
    #: whether the index ops check their index values themselves, reporting a bad one at a
    #: later read (the Cube backend's kernels: ``backends/cube/indexing.py``), so that a lazy
    #: layer above need not read them to the host; decorators take their inner backend's
    checks_indices: bool = False

    # ----------------------------------------------------------------- data
    def dtype(self, p: Any) -> dt.DType:
        raise NotImplementedError

    def from_data(self, array: Any, dtype: dt.DType) -> Any:
        """A primitive holding a copy of ``array`` (a numpy array already of ``dtype.np``)."""
        raise NotImplementedError

    def into_data(self, p: Any) -> Any:
        """The values of ``p`` as a numpy array of ``dtype.np`` (read-only, maybe shared)."""
        raise NotImplementedError

    def item(self, p: Any) -> Any:
        """The one element of ``p`` as a Python scalar (``Tensor.item``); a runtime with a
        cheaper single-element read than a whole array overrides it. Untraced: while tracing,
        ``Tensor.item`` reads through ``numpy()``, whose ``into_data`` spans name every layer."""
        return np.asarray(self.into_data(p)).item()

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> Any:
        raise NotImplementedError

    def random(self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int,
               a: float, b: float) -> Any:
        """Philox 4x32-10 values (see ``ember.random``): ``dist`` is ``uniform`` on [a, b),
        ``normal`` with mean a and std b, or ``randint`` on [a, b)."""
        raise NotImplementedError

    def sync(self) -> None:
        """Wait until every queued op of this backend has finished."""

    def is_ready(self, p: Any) -> bool:
        """Whether ``p``'s values can be read without running queued work (always, on an
        eager backend). The Tensor API checks data-dependent arguments (index ranges) only
        then, so validation never forces a lazy stream to drain."""
        return True

    def contiguous(self, p: Any) -> Any:
        """Same values, laid out row-major (a no-op where layout is not observable)."""
        return p

    # ----------------------------------------------------------------- autodiff hooks
    # A backend without autodiff treats every tensor as untracked.
    def require_grad(self, p: Any) -> Any:
        raise AutodiffError(
            f"tensors on a {self.name} device cannot require grad; wrap the device for "
            "gradients: device.autodiff()"
        )

    def is_tracked(self, p: Any) -> bool:
        return False

    def is_leaf(self, p: Any) -> bool:
        return True

    def detach(self, p: Any) -> Any:
        return p

    def backward(self, p: Any, grad: Any, retain_graph: bool) -> None:
        raise AutodiffError(
            f"backward() needs an autodiff device, but this tensor lives on {self.name}; "
            "create it on device.autodiff() (e.g. Device.flex().autodiff())"
        )

    def grad(self, p: Any) -> Any:
        return None

    def set_grad(self, p: Any, g: Any) -> None:
        raise AutodiffError(f"{self.name} keeps no gradients; use device.autodiff()")

    def grad_tensor(self, p: Any, make: Any) -> Any:
        """The API object that is ``p``'s ``.grad`` (one object per leaf until replaced):
        ``make(primitive)`` builds it from a plain gradient on first access; None when ``p``
        has no gradient."""
        return None

    def set_grad_tensor(self, p: Any, t: Any) -> None:
        """Make the API object ``t`` (whose ``_p`` is a primitive of this backend) ``p``'s
        ``.grad`` itself, or drop the gradient when ``t`` is None."""
        if t is not None:
            raise AutodiffError(f"{self.name} keeps no gradients; use device.autodiff()")

    def replace_value(self, p: Any, new: Any) -> Any:
        """``new``'s values under ``p``'s autodiff identity (a leaf keeps its grad): how an
        in-place update under ``no_grad`` (an optimizer step) rebinds a leaf."""
        return new

    def retained_bytes(self, p: Any) -> int:
        """Bytes of device values the autodiff graph behind ``p`` keeps for backward."""
        return 0

    def run_autograd(self, outputs: list[Any], grads: list[Any], inputs: list[Any] | None,
                     retain_graph: bool, create_graph: bool, accumulate: bool) -> list[Any] | None:
        """Backward from several ``outputs`` (tracked primitives) with their gradients (None:
        ones). ``inputs`` None: every leaf reached accumulates into ``.grad``; else only those
        (tracked) primitives' nodes take a gradient: into ``.grad`` when ``accumulate``, else
        returned, one per input (None where none arrived). ``create_graph`` records the pass."""
        raise AutodiffError(
            f"backward() needs an autodiff device, but this tensor lives on {self.name}; "
            "create it on device.autodiff() (e.g. Device.flex().autodiff())"
        )

    def graph_node(self, p: Any) -> Any:
        """The graph node behind tracked ``p`` (a leaf's node for a leaf), or None."""
        return None


def _composite(name: str, compose: Any) -> Any:
    def method(self: Backend, *args: Any) -> Any:
        return compose(self, *args)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = compose.__doc__
    return method


def _install_abstract() -> None:
    """Every registry op as a method: the decomposition of a composite (a backend with a
    kernel of its own overrides it), an abstract method for a primitive."""
    for n, op in REGISTRY.items():
        if n in Backend.__dict__:
            continue
        setattr(Backend, n, _abstract(n) if op.compose is None else _composite(n, op.compose))


_install_abstract()

#: every op a backend answers, in one list (decorators forward exactly these)
CATALOG: tuple[str, ...] = tuple(sorted(
    n for n in dir(Backend)
    if not n.startswith("_") and callable(getattr(Backend, n)) and n not in ("name", "eager")
))
