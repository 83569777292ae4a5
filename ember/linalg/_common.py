"""Shared pieces of ``ember.linalg``: the host round trip and the gradient surrogate.

Decompositions (LU, Cholesky, QR, SVD, eigh) run on the host in float64 numpy (on GPU devices
that is a copy to the host and back) and come back as constants in the input's dtype. Their
gradients come from a *surrogate*: an expression ``s(A)`` of ember ops, linear in the tracked
inputs, whose coefficients are those host constants and whose Jacobian is the decomposition's
derivative at ``A``. The result is ``value + (s - s.detach())``: its value is ``value`` (the
difference is exactly zero for finite ``s``) and its gradient is ``s``'s, on every device and
through every later op. Invariant: a surrogate is built only when grad mode is on and an input
requires grad, so inference pays for the host work alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtype as dt
from ..backends.autodiff.mode import is_grad_enabled
from ..creation import tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor


class LinAlgError(RuntimeError):
    """As ``torch.linalg.LinAlgError``: a matrix is singular, not positive-definite, ..."""


def check_float(name: str, *xs: Tensor) -> None:
    """torch's linalg functions take floating point inputs only (ember has no complex dtypes)."""
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(f"linalg.{name} expects tensors, got {type(x).__name__}")
        if x.dtype not in (dt.float32, dt.float64):
            raise DTypeError(f"linalg.{name}: expected a float32 or float64 tensor, got {x.dtype}")


def check_matrix(name: str, x: Tensor, square: bool = False) -> None:
    if x.ndim < 2:
        raise ShapeError(f"linalg.{name}: the input must have at least 2 dimensions, got {x.ndim}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.{name}: a batch of square matrices expected, got shape {tuple(x.shape)}")


def host(x: Tensor) -> np.ndarray:
    """``x``'s values as a float64 numpy array (a host round trip on GPU devices)."""
    return np.asarray(x.detach().numpy(), dtype=np.float64)


def const(a: Any, like: Tensor, dtype: dt.DType | None = None) -> Tensor:
    """A constant on ``like``'s device in ``dtype`` (``like``'s dtype when None)."""
    d = dtype or like.dtype
    arr = np.asarray(a)
    with np.errstate(all="ignore"):
        arr = arr.astype(d.np)
    return tensor(arr, dtype=d, device=like.device)


def tracks(*xs: Any) -> bool:
    """Whether a surrogate is needed: grad mode is on and some input requires grad."""
    return is_grad_enabled() and any(isinstance(x, Tensor) and x.requires_grad for x in xs)


def attach(value: Tensor, surrogate: Callable[[], Tensor], *inputs: Any) -> Tensor:
    """``value`` with the gradient of ``surrogate()`` (see the module docstring)."""
    if not tracks(*inputs):
        return value
    s = surrogate()
    return value + (s - s.detach())


def sym(a: Tensor) -> Tensor:
    """The symmetric part of a batch of square matrices."""
    return (a + a.mT) * 0.5


def batch_eye(n: int, like: Tensor) -> np.ndarray:
    return np.broadcast_to(np.eye(n), (*like.shape[:-2], n, n))


def lu_host(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(packed LU, 0-based row swaps) of a batch (..., m, n), as LAPACK getrf."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu_ = a.reshape(int(np.prod(a.shape[:-2])), m, n).copy()
    b = lu_.shape[0]
    piv = np.zeros((b, k), np.int64)
    rows = np.arange(b)
    for j in range(k):
        p = j + np.argmax(np.abs(lu_[:, j:, j]), axis=1)
        piv[:, j] = p
        top = lu_[rows, j].copy()
        lu_[rows, j] = lu_[rows, p]
        lu_[rows, p] = top
        pivot = lu_[:, j, j]
        nz = pivot != 0
        with np.errstate(all="ignore"):
            lu_[:, j + 1:, j] = np.where(nz[:, None], lu_[:, j + 1:, j] / np.where(nz, pivot, 1.0)[:, None],
                                         lu_[:, j + 1:, j])
        lu_[:, j + 1:, j + 1:] -= lu_[:, j + 1:, j:j + 1] * lu_[:, j:j + 1, j + 1:]
    return lu_.reshape(a.shape), piv.reshape(*a.shape[:-2], k)
