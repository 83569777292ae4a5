"""Tensor reductions: ``sum``, ``mean``, ``max``, ``var``, ``softmax``, ``cumsum``, ``norm``, ...

Every reduction takes torch's ``dim`` (an int, a sequence, or None for every dim) and
``keepdim``; a 0-d tensor reduces over nothing. Empty inputs follow torch: ``sum`` gives 0,
``mean`` nan, ``amax``/``argmax`` raise.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from ..backends.autodiff.mode import watch_inference
from ..errors import DTypeError, ShapeError
from . import core as _core
from .core import Tensor, _autocast, _make, _new

#: the result of ``max(dim)`` / ``min(dim)``, as torch's ``torch.return_types.max``
MinMax = namedtuple("MinMax", ["values", "indices"])


def _watch(on: bool) -> None:
    """Follow ``core._new`` (inference mode's marking allocator, see ``watch_inference``)."""
    global _new
    _new = _core._new_marking if on else object.__new__


watch_inference(_watch)


class ReductionMethods:
    """Tensor's reductions (a method table: ``install_methods`` copies it onto Tensor)."""

    __slots__ = ()

    # ------------------------------------------------------------------ reductions
    def _reduce(self, op: str, dim: Any, keepdim: bool, d: dt.DType | None = None) -> Tensor:
        p, bk = self._p, self._bk
        dims = S.norm_dims(dim, len(p.shape))
        d = d or self._dt
        if d is not self._dt:
            p = bk.cast(p, d)
        if not dims:  # 0-d tensor: reducing nothing
            return _make(p, bk, d)
        t = _new(Tensor)
        t._p = getattr(bk, op)(p, dims, keepdim)
        t._bk = bk
        t._dt = d
        return t

    def sum(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """As ``torch.sum``: over ``dim`` (every dim when None); integer and bool inputs sum as int64."""
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        return self._reduce("sum", dim, keepdim, d)

    def prod(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """As ``torch.prod`` (integer and bool inputs multiply as int64)."""
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        return self._reduce("prod", dim, keepdim, d)

    def mean(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """As ``torch.mean``: a float input (or ``dtype=``) is required, as torch; an empty input gives nan."""
        d = dt.as_dtype(dtype) if dtype is not None else self._dt
        if d.category != dt.FLOAT:
            raise DTypeError(f"mean() needs a floating point input, got {self._dt}; pass dtype= or "
                             "call .float() first")
        if self.numel() == 0:
            return self._reduce("sum", dim, keepdim, d) / 0.0
        return self._reduce("mean", dim, keepdim, d)

    def _nonempty(self, what: str, dims: tuple[int, ...]) -> None:
        for dd in dims:
            if self._p.shape[dd] == 0:
                raise ShapeError(f"{what}() of an empty dimension (shape {self.shape}, dim {dd})")
        if self.numel() == 0 and not dims:
            raise ShapeError(f"{what}() of an empty tensor")

    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.amax``: the maximum over ``dim`` (an empty dimension raises)."""
        self._nonempty("amax", S.norm_dims(dim, self.ndim))
        return self._reduce("max", dim, keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.amin``: the minimum over ``dim`` (an empty dimension raises)."""
        self._nonempty("amin", S.norm_dims(dim, self.ndim))
        return self._reduce("min", dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """As ``torch.max``: ``max()`` the maximum, ``max(dim)`` a ``(values, indices)`` named tuple,
        ``max(other)`` the elementwise ``maximum``."""
        if isinstance(dim, Tensor):
            return self.maximum(dim)
        if dim is None:
            return self.amax()
        return MinMax(self.amax(dim, keepdim), self.argmax(dim, keepdim))

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """As ``torch.min``: ``min()`` the minimum, ``min(dim)`` a ``(values, indices)`` named tuple,
        ``min(other)`` the elementwise ``minimum``."""
        if isinstance(dim, Tensor):
            return self.minimum(dim)
        if dim is None:
            return self.amin()
        return MinMax(self.amin(dim, keepdim), self.argmin(dim, keepdim))

    def _argreduce(self, op: str, dim: Any, keepdim: bool) -> Tensor:
        bk = self._bk
        if dim is None:
            self._nonempty(op, ())
            flat = bk.reshape(self._p, (self.numel(),))
            out = getattr(bk, op)(flat, 0, False)
            if keepdim:
                out = bk.reshape(out, (1,) * self.ndim)
            return _make(out, bk, dt.int64)
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return _make(bk.full((), 0, dt.int64), bk, dt.int64)
        self._nonempty(op, (d,))
        return _make(getattr(bk, op)(self._p, d, keepdim), bk, dt.int64)

    def argmax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.argmax``: int64 indices of the maximum (over the flattened tensor when ``dim`` is None)."""
        return self._argreduce("argmax", dim, keepdim)

    def argmin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.argmin``: int64 indices of the minimum (over the flattened tensor when ``dim`` is None)."""
        return self._argreduce("argmin", dim, keepdim)

    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.all``: a bool tensor, whether every element over ``dim`` is non-zero."""
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return self.bool()
        return _make(self._bk.all(self._p, dims, keepdim), self._bk, dt.bool_)

    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """As ``torch.any``: a bool tensor, whether some element over ``dim`` is non-zero."""
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return self.bool()
        return _make(self._bk.any(self._p, dims, keepdim), self._bk, dt.bool_)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """As ``torch.var``, both overloads: ``var(dim, unbiased, keepdim, *, correction)`` and
        ``var(unbiased)`` (a bool first argument is ``unbiased``, not a dim)."""
        if isinstance(dim, bool | np.bool_):
            dim, unbiased = None, bool(dim)
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        t = self if self._dt.is_floating_point else self.float()
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return t * 0.0 / max(1 - correction, 0) if correction else t * 0.0
        return _make(t._bk.var(t._p, dims, float(correction), keepdim), t._bk, t._dt)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """As ``torch.std`` (both overloads, as ``var``)."""
        return self.var(dim, unbiased, keepdim, correction=correction).sqrt()

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        """As ``torch.logsumexp`` (integer inputs give the default float dtype; an autocast float32 op)."""
        src = _autocast.fp32(self)[0] if _autocast.active else self  # an autocast float32 op
        t = src if src._dt.is_floating_point else src.float()
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return t
        return _make(t._bk.logsumexp(t._p, dims, keepdim), t._bk, t._dt)

    def softmax(self, dim: int, dtype: Any = None) -> Tensor:
        """As ``torch.softmax`` (an autocast float32 op unless ``dtype`` is given)."""
        # an autocast float32 op, unless dtype= is given (torch's rule)
        src = _autocast.fp32(self)[0] if _autocast.active and dtype is None else self
        t = src.to(dtype) if dtype is not None else (src if src._dt.is_floating_point else src.float())
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t.reshape(1).softmax(0).reshape(())
        return _make(t._bk.softmax(t._p, d), t._bk, t._dt)

    def log_softmax(self, dim: int, dtype: Any = None) -> Tensor:
        """As ``torch.log_softmax`` (an autocast float32 op unless ``dtype`` is given)."""
        # an autocast float32 op, unless dtype= is given (torch's rule)
        src = _autocast.fp32(self)[0] if _autocast.active and dtype is None else self
        t = src.to(dtype) if dtype is not None else (src if src._dt.is_floating_point else src.float())
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t.reshape(1).log_softmax(0).reshape(())
        return _make(t._bk.log_softmax(t._p, d), t._bk, t._dt)

    def cumsum(self, dim: int, dtype: Any = None) -> Tensor:
        """As ``torch.cumsum`` (integer and bool inputs accumulate as int64)."""
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        t = self.to(d)
        k = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t
        return _make(t._bk.cumsum(t._p, k), t._bk, d)

    def allclose(self, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        """As ``torch.allclose``: a Python bool (compared on the host in float64)."""
        return bool(np.allclose(self.numpy().astype(np.float64), np.asarray(other.numpy()).astype(np.float64),
                                rtol=rtol, atol=atol))

    def equal(self, other: Tensor) -> bool:
        """As ``torch.equal``: a Python bool, same shape and the same values."""
        return self.shape == other.shape and bool(np.array_equal(self.numpy(), other.numpy()))

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """As ``torch.norm``: vector p-norms (``p`` any float, ``inf``, ``-inf``, 0: the count of
        non-zeros) over ``dim`` (every dim when None), ``'fro'`` (the 2-norm of the elements)
        and ``'nuc'`` (the sum of the singular values of the matrices over the last two dims or
        ``dim``'s pair: the SVD runs on the host, the result is ``sum(x * (U @ Vh))``, whose
        gradient ``U @ Vh`` is the nuclear norm's)."""
        t = self
        if dtype is not None:
            t = t.to(dtype)
        elif not t._dt.is_floating_point:
            raise DTypeError(f"norm needs a floating point input, got {t._dt}; pass dtype=")
        if p is None:
            p = "fro"
        if p == "nuc":
            return t._nuclear_norm(dim, keepdim)
        if p == "fro":
            if dim is not None and not isinstance(dim, int | np.integer) and len(tuple(dim)) > 2:
                raise ShapeError(f"the Frobenius norm takes at most 2 dims, got {dim}")
            p = 2
        p = builtins.float(p)
        a = t.abs()
        if p == 2:
            return (t * t).sum(dim, keepdim).sqrt()
        if p == 1:
            return a.sum(dim, keepdim)
        if p == math.inf:
            return a.amax(dim, keepdim) if a.numel() else a.sum(dim, keepdim)
        if p == -math.inf:
            return a.amin(dim, keepdim)
        if p == 0:
            # the count of non-zeros, kept in the graph with a zero gradient (as torch)
            zero = t.masked_fill(t._full_like_shape((), True, dt.bool_), 0.0)
            return (t.ne(0).to(t._dt) + zero).sum(dim, keepdim)
        return (a ** p).sum(dim, keepdim) ** (1.0 / p)

    def _nuclear_norm(self, dim: Any, keepdim: bool) -> Tensor:
        if dim is None:
            if self.ndim != 2:
                raise ShapeError(f"the nuclear norm of a {self.ndim}-D tensor needs dim= (two dims)")
            dim = (0, 1)
        dims = tuple(S.norm_dim(d, self.ndim) for d in dim)
        if len(dims) != 2 or dims[0] == dims[1]:
            raise ShapeError(f"the nuclear norm needs two distinct dims, got {dim}")
        rest = [i for i in range(self.ndim) if i not in dims]
        x = self.permute(rest + list(dims))
        a = np.asarray(x.detach().numpy(), dtype=np.float64)
        if a.size:
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            uv = (u @ vh).astype(x._dt.np if x._dt is not dt.bfloat16 else np.float32)
        else:
            uv = np.zeros(a.shape, np.float32)
        w = x._from_like(uv).to(x._dt)
        out = (x * w).sum((-2, -1))
        if keepdim:
            for d in sorted(dims):
                out = out.unsqueeze(d)
        return out


