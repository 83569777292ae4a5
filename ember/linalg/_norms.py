"""Norms and the linalg functions composed of ember ops (on every device, differentiated by
autodiff): vector_norm, matrix_norm, norm, cond, cross, vecdot, diagonal, matrix_power,
multi_dot, vander, tensorinv, tensorsolve, matrix_exp, householder_product."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _shape as S
from ..errors import ShapeError
from ..tensor import Tensor
from ._common import check_float, check_matrix, const, host
from ._decomp import inv, solve, svdvals

__all__ = [
    "vector_norm", "matrix_norm", "norm", "cond", "cross", "vecdot", "diagonal", "matrix_power", "multi_dot",
    "vander", "tensorinv", "tensorsolve", "matrix_exp", "householder_product",
]


def _dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    if isinstance(dim, int | np.integer):
        return (S.norm_dim(int(dim), max(ndim, 1)),)
    return tuple(S.norm_dim(int(d), max(ndim, 1)) for d in dim)


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.linalg.vector_norm``; at a zero vector the gradient is 0 for ord > 0 (torch's
    subgradient), which is why the root is taken of ``where(s == 0, 1, s)``."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise TypeError(f"linalg.vector_norm: expected a floating point input, got {x.dtype}")
    dims = _dims(dim, x.ndim)
    if dims == ():
        dims = None
    ord = float(ord)
    a = x.abs()
    if x.ndim == 0:
        a = a.reshape(1)
        dims = None
    if ord == math.inf or ord == -math.inf:
        if a.numel() == 0 and dims is None:
            raise ShapeError("linalg.vector_norm: expected a non-empty input for ord = +-inf without dim")
        out = a.amax(dims, keepdim) if ord > 0 else a.amin(dims, keepdim)
    elif ord == 0:
        out = (a.ne(0).to(a.dtype) + a * 0).sum(dims, keepdim)
    elif ord == 1:
        out = a.sum(dims, keepdim)
    else:
        from ..tensor import where

        if ord == 2:
            s = (a * a).sum(dims, keepdim)
        else:  # |0|^ord without its infinite (ord < 1) derivative: torch's subgradient 0 there
            at0 = a.eq(0)
            s = where(at0, 0.0 if ord > 0 else math.inf, where(at0, 1.0, a) ** ord).sum(dims, keepdim)
        if ord > 0:
            zero = s.eq(0)
            out = where(zero, 1.0, s) ** (1.0 / ord) * zero.logical_not().to(s.dtype)
        else:
            out = s ** (1.0 / ord)
    if x.ndim == 0:
        out = out.reshape(())
    return out


def _matrix_dims(dim: Any, ndim: int) -> tuple[int, int]:
    d = _dims(dim, ndim)
    if d is None or len(d) != 2 or d[0] == d[1]:
        raise ShapeError(f"linalg.matrix_norm: dim must be a pair of distinct dims, got {dim}")
    return d[0], d[1]


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Sequence[int] = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """As ``torch.linalg.matrix_norm``: 'fro', 'nuc', +-1, +-2, +-inf over the two ``dim``."""
    if dtype is not None:
        A = A.to(dtype)
    check_matrix("matrix_norm", A)
    d0, d1 = _matrix_dims(dim, A.ndim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord == "nuc":
        return A.norm("nuc", (d0, d1), keepdim)
    ord = float(ord)
    if ord in (2.0, -2.0):
        rest = [i for i in range(A.ndim) if i not in (d0, d1)]
        s = svdvals(A.permute(rest + [d0, d1]))
        if ord > 0 and s.shape[-1] == 0:  # as torch: an empty matrix's largest singular value is 0
            out = s.sum(-1)
        else:
            out = s.amax(-1) if ord > 0 else s.amin(-1)
        if keepdim:
            out = out.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return out
    if ord in (1.0, -1.0):
        inner, outer = d0, d1
    elif ord in (math.inf, -math.inf):
        inner, outer = d1, d0
    else:
        raise ValueError(f"linalg.matrix_norm: order {ord} not supported")
    s = A.abs().sum(inner, keepdim=True)
    if ord > 0 and s.shape[outer] == 0:  # as torch: the largest of no sums (all >= 0) is 0; amin raises
        out = s.sum(outer, keepdim=True)
    else:
        out = s.amax(outer, keepdim=True) if ord > 0 else s.amin(outer, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """As ``torch.linalg.norm``: a vector norm for one dim (or a 1-D input), a matrix norm for
    two (or a 2-D input with ``ord``), the 2-norm of all elements when ``ord`` and ``dim`` are None."""
    if dim is not None:
        dims = _dims(dim, A.ndim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ShapeError(f"linalg.norm: with ord and no dim the input must be 1-D or 2-D, got {A.ndim}-D")


def cond(A: Tensor, p: Any = None) -> Tensor:
    """As ``torch.linalg.cond``: s_max / s_min for p None or 2 (s_min / s_max for -2), else
    norm(A, p) * norm(A^-1, p)."""
    check_float("cond", A)
    check_matrix("cond", A)
    if p is None or p in (2, -2):
        s = svdvals(A)
        hi, lo = s.amax(-1), s.amin(-1)
        return hi / lo if p != -2 else lo / hi
    check_matrix("cond", A, square=True)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """As ``torch.linalg.cross`` (``dim`` defaults to -1, unlike ``torch.cross``)."""
    from ..composite import cross as _cross

    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """As ``torch.linalg.vecdot`` (real tensors: sum(x * y, dim))."""
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """As ``torch.linalg.diagonal`` (``torch.diagonal`` with the last two dims as default)."""
    from ..ops.shape import diagonal as _diagonal

    return _diagonal(A, offset, dim1, dim2)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """As ``torch.linalg.matrix_power``: repeated squaring; negative n powers the inverse."""
    check_matrix("matrix_power", A, square=True)
    if n == 0:
        return const(np.broadcast_to(np.eye(A.shape[-1]), A.shape), A) + A * 0
    if n < 0:
        A, n = inv(A), -n
    result: Tensor | None = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    assert result is not None
    return result


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """As ``torch.linalg.multi_dot``: a first 1-D operand is a row, a last 1-D operand a column
    (both dropped from the result); the product is taken left to right."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError("multi_dot(): expected at least 2 tensors")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    if first:
        ts[0] = ts[0].unsqueeze(0)
    if last:
        ts[-1] = ts[-1].unsqueeze(-1)
    for t in ts:
        if t.ndim != 2:
            raise ShapeError("multi_dot(): the inner tensors must be 2-D")
    out = ts[0]
    for t in ts[1:]:
        out = out @ t
    if first:
        out = out.squeeze(0)
    if last:
        out = out.squeeze(-1)
    return out


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """As ``torch.linalg.vander``: columns x^0, x^1, ..., x^(N-1) (N = x.shape[-1] by default),
    built by running products so the gradient at x = 0 stays finite."""
    from ..tensor import stack

    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n <= 0:
        raise ValueError("N must be greater than 1.")
    cols = [x * 0 + 1]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """As ``torch.linalg.tensorinv``."""
    if ind <= 0:
        raise ValueError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape, in_shape = tuple(A.shape[ind:]), tuple(A.shape[:ind])
    rows, cols = math.prod(in_shape), math.prod(out_shape)
    if rows != cols:
        raise ShapeError("tensorinv: prod(A.shape[:ind]) must equal prod(A.shape[ind:])")
    return inv(A.reshape(rows, cols)).reshape(out_shape + in_shape)


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """As ``torch.linalg.tensorsolve``."""
    if dims is not None:
        ds = [S.norm_dim(d, A.ndim) for d in dims]
        A = A.permute([i for i in range(A.ndim) if i not in ds] + ds)
    rest = tuple(A.shape[B.ndim:])
    n = math.prod(rest)
    return solve(A.reshape(B.numel(), n), B.reshape(B.numel())).reshape(rest)


#: Taylor degree of matrix_exp after scaling to norm <= 1/2: the remainder 2^-19 / 19! is far
#: below float64's epsilon
_EXP_TERMS = 18


def matrix_exp(A: Tensor) -> Tensor:
    """As ``torch.linalg.matrix_exp``: scaling and squaring, exp(A) = exp(A / 2^s)^(2^s) with
    the Taylor series of degree 18 (s from the largest 1-norm of the batch, read on the host);
    composed of matmuls, so it runs on the device and autodiff gives its gradient."""
    check_matrix("matrix_exp", A, square=True)
    n = A.shape[-1]
    a = host(A)
    norm1 = float(np.abs(a).sum(-2).max()) if a.size else 0.0
    s = max(0, math.ceil(math.log2(norm1)) + 1) if norm1 > 0 and math.isfinite(norm1) else 0
    x = A * (0.5 ** s)
    eye = const(np.broadcast_to(np.eye(n), A.shape), A)
    # Horner: I + x (I + x/2 (I + x/3 (...)))
    out = eye
    for k in range(_EXP_TERMS, 0, -1):
        out = eye + (x @ out) * (1.0 / k)
    for _ in range(s):
        out = out @ out
    return out


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """As ``torch.linalg.householder_product``: the first n columns of H_1 ... H_k, H_i = I -
    tau_i v_i v_i^T, v_i the i-th column of A below the diagonal with 1 on it (composed of ember
    ops: differentiable in A and tau)."""
    check_matrix("householder_product", A)
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    if k > n or n > m:
        raise ShapeError("householder_product: needs m >= n >= k")
    from ..tensor import cat

    if k == 0:  # the identity's first n columns, kept in the graph as torch does
        return const(np.broadcast_to(np.eye(m, n), A.shape), A) + A * 0
    unit = np.zeros((m, 1))
    q = const(np.broadcast_to(np.eye(m, n), (*A.shape[:-2], m, n)), A)
    # apply the reflectors right to left to the columns of the identity: Q = H_1 (H_2 (... I))
    for i in range(k - 1, -1, -1):
        u = unit.copy()
        u[i] = 1.0
        below = A[..., i + 1:, i:i + 1]
        v = cat([const(np.broadcast_to(u[: i + 1], (*A.shape[:-2], i + 1, 1)), A), below], -2)
        t = tau[..., i:i + 1].unsqueeze(-1)
        q = q - (v * t) @ (v.mT @ q)
    return q
