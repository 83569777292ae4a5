"""``ember.linalg``: as ``torch.linalg`` for real (float32, float64) tensors.

Factorisations (LU, Cholesky, QR, SVD, eigh) and what is built on them run on the host in
float64 numpy and come back in the input's dtype: on a GPU device each is a copy to the host and
back. Their gradients are exact (a linear surrogate of ember ops, see ``_common``), so they
train on every device. Norms, products and matrix_exp are composed of ember ops and run on the
device. Differences from torch: no complex dtypes (so no eig/eigvals), no ``out=``, and LU
without pivoting (CUDA-only in torch) is refused.
"""

from __future__ import annotations

from ._common import LinAlgError
from ._decomp import *  # noqa: F403
from ._decomp import __all__ as _decomp_all
from ._lu import lu, lu_factor, lu_factor_ex, lu_solve
from ._norms import *  # noqa: F403
from ._norms import __all__ as _norms_all

__all__ = ["LinAlgError", "lu", "lu_factor", "lu_factor_ex", "lu_solve", *_decomp_all, *_norms_all]
__all__ = [n for n in __all__ if n not in ("logdet",)]
