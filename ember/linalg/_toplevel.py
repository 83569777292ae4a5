"""The ``torch.*`` spellings of linear algebra (``torch.det``, ``torch.svd``, ``torch.lu``, ...)
and the Tensor methods of the same names, on top of ``ember.linalg``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from . import _decomp as D
from . import _lu
from . import _norms as N
from ._common import const

__all__ = [
    "det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd",
    "pinverse", "matrix_exp", "matrix_power", "lu", "lu_solve", "lu_unpack", "triangular_solve",
]


def det(input: Tensor) -> Tensor:
    """As ``torch.det``."""
    return D.det(input)


logdet = D.logdet


def slogdet(input: Tensor) -> tuple[Tensor, Tensor]:
    """As ``torch.slogdet``: (sign, log|det|)."""
    return D.slogdet(input)


def inverse(input: Tensor) -> Tensor:
    """As ``torch.inverse``."""
    return D.inv(input)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """As ``torch.cholesky``."""
    return D.cholesky(input, upper=upper)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """As ``torch.cholesky_solve``: X with (L L^T) X = B (U^T U with ``upper``). The value reads
    only L's triangle; the gradient is that of the full-matrix formula, as torch's."""
    tri = L.triu() if upper else L.tril()
    f = tri.detach() + (L - L.detach())  # the triangle's values, the full matrix's gradient
    return D.solve(f.mT @ f if upper else f @ f.mT, B)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """As ``torch.cholesky_inverse``: (L L^T)^-1 (U^T U with ``upper``) from the factor."""
    eye = const(np.broadcast_to(np.eye(L.shape[-1]), L.shape), L)
    return cholesky_solve(eye, L, upper)


def qr(input: Tensor, some: bool = True) -> tuple[Tensor, Tensor]:
    """As ``torch.qr`` (``some`` False is the complete mode)."""
    return D.qr(input, "reduced" if some else "complete")


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """As ``torch.svd``: (U, S, V), V not transposed; zero U and V (m-by-m, n-by-n) without
    ``compute_uv``."""
    if not compute_uv:
        m, n = input.shape[-2:]
        s = D.svdvals(input)
        b = tuple(input.shape[:-2])
        return const(np.zeros(b + (m, m)), input), s, const(np.zeros(b + (n, n)), input)
    u, s, vh = D.svd(input, full_matrices=not some)
    return u, s, vh.mT


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """As ``torch.pinverse``: ``linalg.pinv`` with ``rtol=rcond``."""
    return D.pinv(input, rtol=rcond)


def matrix_exp(input: Tensor) -> Tensor:
    """As ``torch.matrix_exp``."""
    return N.matrix_exp(input)


def matrix_power(input: Tensor, n: int) -> Tensor:
    """As ``torch.matrix_power``."""
    return N.matrix_power(input, n)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:
    """As ``torch.lu``: (LU, pivots) or (LU, pivots, infos)."""
    if get_infos:
        return _lu.lu_factor_ex(A, pivot=pivot)
    return _lu.lu_factor(A, pivot=pivot)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """As ``torch.lu_solve``."""
    return _lu.lu_solve(LU_data, LU_pivots, b)


lu_unpack = _lu.lu_unpack


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> tuple[Tensor, Tensor]:
    """As ``torch.triangular_solve``: (X, A clone) with A X = b (A^T X = b with ``transpose``)."""
    a = A.mT if transpose else A
    x = D.solve_triangular(a, b, upper=upper != transpose, unitriangular=unitriangular)
    return x, A.clone()


def _install() -> None:
    # Tensor methods of the same names (``A.det()``, ``A.svd()``), as composite.py's _install
    for name in __all__:
        if name not in Tensor.__dict__:
            setattr(Tensor, name, globals()[name])
    if "mH" not in Tensor.__dict__:  # real tensors: the conjugate transpose is the transpose
        Tensor.mH = property(lambda self: self.mT, doc="As ``torch.Tensor.mH`` (real tensors: ``mT``).")
    if "H" not in Tensor.__dict__:
        Tensor.H = property(lambda self: self.T, doc="As ``torch.Tensor.H`` (real tensors: ``T``).")


_install()
