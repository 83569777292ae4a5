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

The op tables below are the single list of ops; backends generate their methods from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtype as dt
from ..errors import AutodiffError

# Elementwise unary ops: same dtype in and out (the Tensor API lifts ints to float first
# for the float-only ones listed in FLOAT_UNARY).
UNARY_OPS = (
    "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sigmoid", "relu", "erf", "floor", "ceil", "round", "trunc", "reciprocal",
)
FLOAT_UNARY = frozenset({
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "erf", "reciprocal",
})
# Unary predicates: any dtype in, bool out.
PREDICATE_OPS = ("logical_not", "isnan", "isinf", "isfinite")

# Binary ops: operands share a dtype; shapes broadcast; result has that dtype.
ARITH_OPS = ("add", "sub", "mul", "div", "floor_div", "remainder", "pow", "maximum", "minimum",
             "atan2")
# Bitwise binary ops: integer operands of one dtype (the Tensor API sends bools to the
# logical ops and refuses floats); result has that dtype.
BITWISE_OPS = ("bitwise_and", "bitwise_or", "bitwise_xor")
# Comparisons: operands share a dtype; result is bool.
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
# Logical binary ops: bool operands, bool result.
LOGICAL_OPS = ("logical_and", "logical_or", "logical_xor")
BINARY_OPS = ARITH_OPS + BITWISE_OPS + COMPARE_OPS + LOGICAL_OPS

# ``<op>_scalar(p, s)`` computes ``op(p, s)`` and ``r<op>_scalar(p, s)`` computes ``op(s, p)``
# for a Python scalar ``s`` already representable in p's dtype.
SCALAR_OPS = ARITH_OPS[:-1] + COMPARE_OPS
REVERSED_SCALAR_OPS = ("sub", "div", "floor_div", "remainder", "pow")

# Reductions over a tuple of dims (never empty: the Tensor API expands "all dims").
REDUCE_OPS = ("sum", "prod", "max", "min", "all", "any")
# Reductions of one dim that return indices (int64).
ARG_REDUCE_OPS = ("argmax", "argmin")

# Ops whose result is a pure function of their inputs' elements at the same position:
# cheap to recompute (checkpointing) and fusable (Fusion).
ELEMENTWISE_OPS = frozenset(
    UNARY_OPS + PREDICATE_OPS + BINARY_OPS
    + tuple(f"{o}_scalar" for o in SCALAR_OPS)
    + tuple(f"r{o}_scalar" for o in REVERSED_SCALAR_OPS)
    + ("where", "clamp", "cast", "masked_fill")
)

SHAPE_OPS = ("reshape", "permute", "expand", "slice", "flip", "contiguous", "copy")
OTHER_OPS = (
    "cast", "where", "clamp", "cumsum", "matmul", "cat", "pad", "gather", "scatter",
    "scatter_add", "index_select", "index", "index_put", "slice_assign", "masked_fill",
    "tril", "triu",
)


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

    # ----------------------------------------------------------------- elementwise
    def cast(self, p: Any, dtype: dt.DType) -> Any:
        raise NotImplementedError

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """``cond`` is bool; ``a`` and ``b`` share a dtype; all three broadcast."""
        raise NotImplementedError

    def clamp(self, p: Any, lo: Any, hi: Any) -> Any:
        """Clamp to [lo, hi]; either bound may be None."""
        raise NotImplementedError

    def masked_fill(self, p: Any, mask: Any, value: Any) -> Any:
        """``value`` where ``mask`` (bool, broadcast to p's shape) is true."""
        raise NotImplementedError

    # ----------------------------------------------------------------- reductions
    def cumsum(self, p: Any, dim: int) -> Any:
        raise NotImplementedError

    # ----------------------------------------------------------------- linear algebra
    def matmul(self, a: Any, b: Any) -> Any:
        """``a``: (..., m, k), ``b``: (..., k, n), same rank >= 2, batch dims broadcast."""
        raise NotImplementedError

    # ----------------------------------------------------------------- shape
    def reshape(self, p: Any, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def permute(self, p: Any, axes: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def expand(self, p: Any, shape: tuple[int, ...]) -> Any:
        """Broadcast to ``shape`` (same rank; size-1 dims grow)."""
        raise NotImplementedError

    def slice(self, p: Any, slices: tuple[slice, ...]) -> Any:
        """Basic slicing, one normalised ``slice`` per dim (steps may be negative)."""
        raise NotImplementedError

    def flip(self, p: Any, dims: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def contiguous(self, p: Any) -> Any:
        """Same values, laid out row-major (a no-op where layout is not observable)."""
        return p

    def copy(self, p: Any) -> Any:
        """Same values as a new value (differentiable identity)."""
        raise NotImplementedError

    def cat(self, ps: Sequence[Any], dim: int) -> Any:
        raise NotImplementedError

    def pad(self, p: Any, pads: tuple[tuple[int, int], ...], value: Any) -> Any:
        """Constant padding; ``pads[d] = (before, after)`` for every dim (non-negative)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- indexing
    def gather(self, p: Any, dim: int, index: Any) -> Any:
        raise NotImplementedError

    def scatter(self, p: Any, dim: int, index: Any, src: Any) -> Any:
        raise NotImplementedError

    def scatter_add(self, p: Any, dim: int, index: Any, src: Any) -> Any:
        raise NotImplementedError

    def index_select(self, p: Any, dim: int, index: Any) -> Any:
        """``index`` is a 1-D int64 primitive."""
        raise NotImplementedError

    def index(self, p: Any, indices: tuple[Any, ...]) -> Any:
        """Advanced indexing of the leading ``len(indices)`` dims by int64 primitives that
        broadcast together: result shape = broadcast(indices) + p.shape[len(indices):]."""
        raise NotImplementedError

    def index_put(self, p: Any, indices: tuple[Any, ...], values: Any, accumulate: bool) -> Any:
        """Inverse of ``index``: ``values`` (broadcast to the indexed shape) written, or added
        when ``accumulate`` (repeated indices add up), into a copy of ``p``."""
        raise NotImplementedError

    def slice_assign(self, p: Any, slices: tuple[slice, ...], values: Any) -> Any:
        """A copy of ``p`` with ``values`` (broadcast to the sliced shape) in the slice."""
        raise NotImplementedError

    def tril(self, p: Any, diagonal: int) -> Any:
        raise NotImplementedError

    def triu(self, p: Any, diagonal: int) -> Any:
        raise NotImplementedError

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

    # ----------------------------------------------------------------- composites
    def square(self, p: Any) -> Any:
        return self.mul(p, p)

    def silu(self, p: Any) -> Any:
        return self.mul(p, self.sigmoid(p))

    def gelu(self, p: Any) -> Any:
        """0.5 x (1 + erf(x / sqrt 2))."""
        t = self.add_scalar(self.erf(self.mul_scalar(p, 1.0 / math.sqrt(2.0))), 1.0)
        return self.mul(self.mul_scalar(p, 0.5), t)

    def gelu_tanh(self, p: Any) -> Any:
        """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        inner = self.add(p, self.mul_scalar(self.mul(self.square(p), p), 0.044715))
        t = self.add_scalar(self.tanh(self.mul_scalar(inner, math.sqrt(2.0 / math.pi))), 1.0)
        return self.mul(self.mul_scalar(p, 0.5), t)

    def mean(self, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
        n = 1
        for d in dims:
            n *= p.shape[d]
        return self.div_scalar(self.sum(p, dims, keepdim), n)

    def var(self, p: Any, dims: tuple[int, ...], correction: float, keepdim: bool) -> Any:
        n = 1
        for d in dims:
            n *= p.shape[d]
        centered = self.sub(p, self.mean(p, dims, True))
        ss = self.sum(self.square(centered), dims, keepdim)
        return self.div_scalar(ss, max(n - correction, 0))

    def logsumexp(self, p: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
        m = self.detach(self.max(p, dims, True))
        # an all -inf slice has max -inf; shift by 0 there so the result stays -inf, not nan
        m = self.where(self.isinf(m), self.full(m.shape, 0.0, self.dtype(m)), m)
        s = self.log(self.sum(self.exp(self.sub(p, m)), dims, True))
        out = self.add(s, m)
        if not keepdim:
            out = self.reshape(out, tuple(n for i, n in enumerate(p.shape) if i not in dims))
        return out

    def log_softmax(self, p: Any, dim: int) -> Any:
        """x - (log(sum(exp(x - m))) + m) with m the raw max (PyTorch: an infinite max gives a
        nan row; logsumexp alone shifts by 0 there)."""
        m = self.detach(self.max(p, (dim,), True))
        s = self.add(self.log(self.sum(self.exp(self.sub(p, m)), (dim,), True)), m)
        return self.sub(p, s)

    def softmax(self, p: Any, dim: int) -> Any:
        m = self.detach(self.max(p, (dim,), True))
        e = self.exp(self.sub(p, m))
        return self.div(e, self.sum(e, (dim,), True))


def _install_abstract() -> None:
    names = (
        UNARY_OPS + PREDICATE_OPS + BINARY_OPS + REDUCE_OPS + ARG_REDUCE_OPS
        + tuple(f"{o}_scalar" for o in SCALAR_OPS)
        + tuple(f"r{o}_scalar" for o in REVERSED_SCALAR_OPS)
    )
    for n in names:
        if not hasattr(Backend, n):
            setattr(Backend, n, _abstract(n))


_install_abstract()

#: every op a backend answers, in one list (decorators forward exactly these)
CATALOG: tuple[str, ...] = tuple(sorted(
    n for n in dir(Backend)
    if not n.startswith("_") and callable(getattr(Backend, n)) and n not in ("name", "eager")
))
