"""LU with partial pivoting: lu_factor(_ex), lu, lu_unpack, lu_solve (and torch.lu's form).

The factorisation runs on the host in float64 with LAPACK getrf's choices (the first row of
largest magnitude is the pivot, a zero pivot column is left unscaled), so pivots match torch's.
With A' = P^T A = L U (L m-by-k unit lower, U k-by-n upper, k = min(m, n)) and the square
block A'1 = L1 U1: X = L1^-1 dA'1 U1^-1 gives dL1 = L1 tril(X, -1) and dU1 = triu(X) U1; the
rows below (m > n) get dL2 = (dA'2 - L2 dU1) U1^-1, the columns right of it (m < n)
dU2 = L1^-1 (dA'2 - dL1 U2). That is the surrogate of the packed result (``_common.attach``).
"""

from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..tensor import Tensor
from ._common import attach, check_float, check_matrix, const, host, lu_host

__all__ = ["lu_factor", "lu_factor_ex", "lu", "lu_unpack", "lu_solve"]


def _perm(piv: np.ndarray, m: int) -> np.ndarray:
    """perm with A'[i] = A[perm[i]] for the row swaps ``piv`` (0-based) of a batch."""
    flat = piv.reshape(int(np.prod(piv.shape[:-1])), piv.shape[-1])
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        top = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = top
    return perm.reshape(*piv.shape[:-1], m)


def _perm_matrix(perm: np.ndarray) -> np.ndarray:
    """P with A = P A' (P[perm[i], i] = 1)."""
    m = perm.shape[-1]
    eye = np.eye(m)
    return np.swapaxes(eye[perm], -1, -2)


def _packed_surrogate(A: Tensor, lu_: np.ndarray, p: np.ndarray) -> Tensor:
    from ..tensor import cat

    m, n = A.shape[-2:]
    k = min(m, n)
    l1 = np.tril(lu_[..., :k, :k], -1) + np.eye(k)
    u1 = np.triu(lu_[..., :k, :k])
    with np.errstate(all="ignore"):
        l1i, u1i = np.linalg.inv(l1), np.linalg.inv(u1)
    L1, U1, L1i, U1i = const(l1, A), const(u1, A), const(l1i, A), const(u1i, A)
    a = const(np.swapaxes(p, -1, -2), A) @ A  # A' = P^T A
    x = L1i @ a[..., :k, :k] @ U1i
    dl1 = L1 @ x.tril(-1)
    du1 = x.triu() @ U1
    d = dl1 + du1  # the packed block: dL1 strictly lower (L1's diagonal is fixed), dU1 upper
    if m > n:
        l2 = const(lu_[..., k:, :], A)
        d = cat([d, (a[..., k:, :] - l2 @ du1) @ U1i], -2)
    elif n > m:
        u2 = const(lu_[..., :, k:], A)
        d = cat([d, L1i @ (a[..., :, k:] - dl1 @ u2)], -1)
    return d


def _factor(A: Tensor, name: str) -> tuple[Tensor, np.ndarray, np.ndarray]:
    check_float(name, A)
    check_matrix(name, A)
    lu_, piv = lu_host(host(A))
    p = _perm_matrix(_perm(piv, A.shape[-2]))
    return attach(const(lu_, A), lambda: _packed_surrogate(A, lu_, p), A), piv, lu_


def _info(lu_: np.ndarray) -> np.ndarray:
    k = min(lu_.shape[-2:])
    d = np.diagonal(lu_, 0, -2, -1)[..., :k] == 0
    first = np.argmax(d, -1) + 1
    return np.where(d.any(-1), first, 0).astype(np.int32)


def lu_factor(A: Tensor, *, pivot: bool = True) -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.lu_factor``: (LU, pivots), pivots 1-based int32 as LAPACK's (``pivot``
    False is CUDA-only in torch and refused here)."""
    if not pivot:
        raise NotImplementedError("linalg.lu_factor: LU without pivoting is not available (CUDA-only in torch)")
    out, piv, _ = _factor(A, "lu_factor")
    return out, const(piv + 1, A, dt.int32)


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """As ``torch.linalg.lu_factor_ex``: (LU, pivots, info), info the 1-based index of the first
    zero pivot (0 when there is none)."""
    if not pivot:
        raise NotImplementedError("linalg.lu_factor_ex: LU without pivoting is not available (CUDA-only in torch)")
    out, piv, lu_ = _factor(A, "lu_factor_ex")
    return out, const(piv + 1, A, dt.int32), const(_info(lu_), A, dt.int32)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True
              ) -> tuple[Tensor, Tensor, Tensor]:
    """As ``torch.lu_unpack``: (P, L, U) from a packed LU and its 1-based pivots (empty tensors
    for the parts not unpacked)."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = const(np.zeros((0,)), LU_data)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + const(np.eye(m, k), LU_data)
        U = LU_data[..., :k, :].triu()
    else:
        L = U = empty
    if unpack_pivots:
        piv = np.asarray(LU_pivots.numpy(), np.int64) - 1
        piv = np.broadcast_to(piv, (*LU_data.shape[:-2], piv.shape[-1]))
        P = const(_perm_matrix(_perm(piv, m)), LU_data)
    else:
        P = empty
    return P, L, U


def lu(A: Tensor, *, pivot: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """As ``torch.linalg.lu``: (P, L, U) with A = P L U."""
    LU_, piv = lu_factor(A, pivot=pivot)
    return lu_unpack(LU_, piv)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """As ``torch.linalg.lu_solve``: X with A X = B (X A = B when not ``left``; A^T for
    ``adjoint``), A = P L U given by ``lu_factor``; two triangular solves, differentiable in
    LU and B."""
    from ._decomp import solve_triangular

    P, L, U = lu_unpack(LU, pivots)
    if left and not adjoint:  # X = U^-1 L^-1 P^T B
        y = solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
        return solve_triangular(U, y, upper=True)
    if left:  # A^T X = B: U^T L^T P^T X = B
        y = solve_triangular(U.mT, B, upper=False)
        return P @ solve_triangular(L.mT, y, upper=True, unitriangular=True)
    if not adjoint:  # X P L U = B
        y = solve_triangular(U, B, upper=True, left=False)
        return solve_triangular(L, y, upper=False, left=False, unitriangular=True) @ P.mT
    # X A^T = B: X U^T L^T P^T = B
    y = solve_triangular(L.mT, B @ P, upper=True, left=False, unitriangular=True)
    return solve_triangular(U.mT, y, upper=False, left=False)
