"""Reduction compositions: ``nansum``, ``nanmean``, ``var_mean``, ``aminmax``, ``count_nonzero``,
``trace``, ``sum_to_size``, ``dist``, ``trapezoid``, ``cov``, ``corrcoef``, ...
"""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any

from .. import _shape as S
from .. import dtype as dt
from ..errors import DTypeError, ShapeError
from ..ops.shape import diagonal
from ..tensor import Tensor, _flat
from ._common import _float, _where
from .shape import diff

__all__ = [
    "trace", "nansum", "nanmean", "var_mean", "std_mean", "count_nonzero", "aminmax", "trapezoid", "trapz",
    "cumulative_trapezoid", "sum_to_size", "dist", "cov", "corrcoef"
]

#: the functions torch also has as Tensor methods
TENSOR_METHODS = (
    "trace", "nansum", "nanmean", "count_nonzero", "aminmax", "sum_to_size", "dist", "cov", "corrcoef",
)


AMinMax = namedtuple("AMinMax", ["min", "max"])


def trace(input: Tensor) -> Tensor:
    """As ``torch.trace``."""
    if input.ndim != 2:
        raise ShapeError(f"trace expects a matrix, got shape {input.shape}")
    d = diagonal(input)
    return d.sum() if input._dt.is_floating_point else d.sum(dtype=dt.int64)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.nansum``: nan counts as 0."""
    x = input
    if x._dt.is_floating_point:
        x = _where(x.isnan(), x._full_like_shape((), 0.0, x._dt), x)
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.nanmean``: the mean of the non-nan elements."""
    x = input if dtype is None else input.to(dtype)
    if not x._dt.is_floating_point:
        raise DTypeError(f"nanmean needs a floating point input, got {x._dt}")
    keep = x.isnan().logical_not()
    return nansum(x, dim, keepdim) / keep.to(x._dt).sum(dim, keepdim)


def var_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """As ``torch.var_mean``: (var, mean)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (input.var(dim, unbiased, keepdim, correction=correction), _float(input).mean(dim, keepdim))


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """As ``torch.std_mean``: (std, mean)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (input.std(dim, unbiased, keepdim, correction=correction), _float(input).mean(dim, keepdim))


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """As ``torch.count_nonzero`` (int64)."""
    return input.ne(0).sum(dim)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> AMinMax:
    """As ``torch.aminmax``: (min, max)."""
    return AMinMax(input.amin(dim, keepdim), input.amax(dim, keepdim))


def sum_to_size(input: Tensor, *size: Any) -> Tensor:
    """As ``torch.Tensor.sum_to_size``: summed down to a shape it broadcasts from."""
    shape = tuple(_flat(size))
    lead = input.ndim - len(shape)
    if lead < 0 or S.broadcast(shape, input.shape) != input.shape:
        raise ShapeError(f"size {shape} is not expandable to the tensor's shape {input.shape}")
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and input.shape[lead + i] != 1)
    out = input.sum(dims, keepdim=True) if dims else input
    return out.reshape(shape)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """As ``torch.dist``: the p-norm of the difference."""
    return (input - other).norm(p)


def trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.trapezoid``."""
    d = S.norm_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return _float(y).sum(d)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    if isinstance(x, Tensor):
        xd = diff(x, dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            xd = xd.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
        return (mid * xd).sum(d)
    step = dx if dx is not None else (1.0 if x is None else float(x))
    return mid.sum(d) * step


def trapz(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.trapz``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """As ``torch.cumulative_trapezoid``."""
    d = S.norm_dim(dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return _float(y)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
    if isinstance(x, Tensor):
        xd = diff(x, dim=-1 if x.ndim == 1 else d)
        if x.ndim == 1:
            xd = xd.reshape(tuple(n - 1 if i == d else 1 for i in range(y.ndim)))
        return (mid * xd).cumsum(d)
    step = dx if dx is not None else (1.0 if x is None else float(x))
    return mid.cumsum(d) * step


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """As ``torch.cov`` (rows are variables, columns observations)."""
    x = _float(input)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights.to(x._dt)
    if aweights is not None:
        w = aweights.to(x._dt) if w is None else w * aweights.to(x._dt)
    if w is None:
        mean = x.mean(1, keepdim=True)
        xc = x - mean
        c = xc.matmul(xc.t()) / builtins.max(n - correction, 0)
    else:
        wsum = w.sum()
        mean = (x * w).sum(1, keepdim=True) / wsum
        xc = x - mean
        if correction == 0:
            norm = wsum
        elif aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights.to(x._dt)).sum() / wsum
        c = (xc * w).matmul(xc.t()) / norm
    return c.reshape(()) if c.shape == (1, 1) else c  # one variable: a 0-d result (torch)


def corrcoef(input: Tensor) -> Tensor:
    """As ``torch.corrcoef``."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = diagonal(c).sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1, 1)
