"""Matrix functions that need a factorisation: det, slogdet, inv, solve, cholesky, qr, svd,
eigh, pinv, lstsq, matrix_rank, solve_triangular.

Each runs its factorisation on the host in float64 (``_common.host``) and returns constants in
the input's dtype; the gradient is the surrogate of ``_common.attach``, a linear expression in
the tracked inputs whose Jacobian is the function's differential (the formulas are in each
function's comments). Inputs that torch treats as symmetric (cholesky, eigh) are differentiated
through their symmetric part, which gives torch's symmetric gradients.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as dt
from ..errors import ShapeError
from ..tensor import Tensor
from ._common import LinAlgError, attach, check_float, check_matrix, const, host, lu_host, sym

__all__ = [
    "det", "slogdet", "logdet", "inv", "inv_ex", "solve", "solve_ex", "cholesky", "cholesky_ex", "qr", "svd",
    "svdvals", "eigh", "eigvalsh", "pinv", "matrix_rank", "lstsq", "solve_triangular",
]


def _adjugate(a: np.ndarray) -> np.ndarray:
    """adj(A) of a batch of square matrices, through the SVD so that singular matrices work:
    A = U S V^T gives adj(A) = det(U) det(V) V diag(prod_{j != i} s_j) U^T."""
    n = a.shape[-1]
    if n == 0:
        return np.zeros(a.shape)
    if n == 1:
        return np.ones(a.shape)
    u, s, vh = np.linalg.svd(a)
    # prod over j != i without dividing by s_i (which may be 0): prefix times suffix products
    pre = np.concatenate([np.ones(s.shape[:-1] + (1,)), np.cumprod(s, -1)[..., :-1]], -1)
    suf = np.concatenate([np.cumprod(s[..., ::-1], -1)[..., ::-1][..., 1:], np.ones(s.shape[:-1] + (1,))], -1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign[..., None, None] * (np.swapaxes(vh, -1, -2) * (pre * suf)[..., None, :]) @ np.swapaxes(u, -1, -2)


def det(A: Tensor) -> Tensor:
    """As ``torch.linalg.det`` (host LU; d det = tr(adj(A) dA), adj through the SVD)."""
    check_float("det", A)
    check_matrix("det", A, square=True)
    a = host(A)
    value = const(np.linalg.det(a) if a.shape[-1] else np.ones(a.shape[:-2]), A)
    return attach(value, lambda: (A * const(np.swapaxes(_adjugate(a), -1, -2), A)).sum((-2, -1)), A)


def _inverse_t(a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        try:
            return np.swapaxes(np.linalg.inv(a), -1, -2)
        except np.linalg.LinAlgError:
            return np.full(a.shape, np.nan)


def slogdet(A: Tensor) -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.slogdet``: (sign, log|det|); d log|det| = tr(A^-1 dA)."""
    check_float("slogdet", A)
    check_matrix("slogdet", A, square=True)
    a = host(A)
    sign, logabs = np.linalg.slogdet(a)
    value = const(logabs, A)
    return const(sign, A), attach(value, lambda: (A * const(_inverse_t(a), A)).sum((-2, -1)), A)


def logdet(input: Tensor) -> Tensor:
    """As ``torch.logdet``: log(det(A)), nan where det < 0."""
    from ..tensor import where

    sign, logabs = slogdet(input)
    return where(sign.lt(0), float("nan"), logabs)


def _inv_host(name: str, a: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"linalg.{name}: the input is singular") from None


def inv(A: Tensor) -> Tensor:
    """As ``torch.linalg.inv``; d A^-1 = -A^-1 dA A^-1."""
    check_float("inv", A)
    check_matrix("inv", A, square=True)
    x = _inv_host("inv", host(A))
    X = const(x, A)
    return attach(X, lambda: -(X @ A @ X), A)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.inv_ex``: (inverse, info); info is 0 for invertible matrices, else the
    (1-based) index of a zero pivot, and raises only with ``check_errors``."""
    check_float("inv_ex", A)
    check_matrix("inv_ex", A, square=True)
    a = host(A)
    batch = a.reshape(int(np.prod(a.shape[:-2])), *a.shape[-2:])
    info = np.zeros(batch.shape[0], np.int32)
    out = np.empty_like(batch)
    for i, m in enumerate(batch):
        try:
            out[i] = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            info[i] = _zero_pivot(m)
            out[i] = np.nan
    if check_errors and info.any():
        raise LinAlgError("linalg.inv_ex: the input is singular")
    X = const(out.reshape(a.shape), A)
    return attach(X, lambda: -(X @ A @ X), A), const(info.reshape(a.shape[:-2]), A, dt.int32)


def _zero_pivot(m: np.ndarray) -> int:
    """The 1-based index of the first zero pivot of partial-pivoting LU (LAPACK's info)."""
    lu, _ = lu_host(m[None])
    d = np.abs(np.diagonal(lu[0]))
    zero = np.nonzero(d == 0)[0]
    return int(zero[0]) + 1 if zero.size else 1


def _rhs(A: Tensor, B: Tensor) -> tuple[Tensor, bool]:
    """B as a batch of matrices and whether it was a (batch of) vector(s), as torch decides."""
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    return (B.unsqueeze(-1), True) if vector else (B, False)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """As ``torch.linalg.solve``: X with AX = B (XA = B when not ``left``); B may be a (batch
    of) vector(s). dX = A^-1 (dB - dA X) (left) and (dB - X dA) A^-1 (right)."""
    check_float("solve", A, B)
    check_matrix("solve", A, square=True)
    if A.dtype != B.dtype:
        raise TypeError(f"linalg.solve: A and B must have the same dtype, got {A.dtype} and {B.dtype}")
    b, vector = (B.unsqueeze(-2), True) if (not left and B.ndim == 1) else _rhs(A, B) if left else (B, False)
    ainv = _inv_host("solve", host(A))
    ai = const(ainv, A)
    if left:
        x = ainv @ host(b)
        X = const(x, A)
        out = attach(X, lambda: ai @ (b - A @ X), A, b)
        return out.squeeze(-1) if vector else out
    x = host(b) @ ainv
    X = const(x, A)
    out = attach(X, lambda: (b - X @ A) @ ai, A, b)
    return out.squeeze(-2) if vector else out


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.solve_ex``: (solution, info)."""
    return solve(A, B, left=left), const(np.zeros(A.shape[:-2], np.int32), A, dt.int32)


def _tril_half(n: int, like: Tensor) -> Tensor:
    """The mask of Phi (the lower triangle, the diagonal halved) used by Cholesky's differential."""
    return const(np.tril(np.ones((n, n))) - 0.5 * np.eye(n), like)


def _cholesky_host(name: str, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L, info) of a batch; info is LAPACK's: 0, or the order of the first non-positive minor."""
    batch = a.reshape(int(np.prod(a.shape[:-2])), *a.shape[-2:])
    out = np.zeros_like(batch)
    info = np.zeros(batch.shape[0], np.int32)
    for i, m in enumerate(batch):
        lower = np.tril(m)  # LAPACK reads one triangle: the lower one (symmetrised here)
        full = lower + np.tril(m, -1).T
        try:
            out[i] = np.linalg.cholesky(full)
        except np.linalg.LinAlgError:
            info[i] = next((k for k in range(1, m.shape[0] + 1)
                            if np.linalg.eigvalsh(full[:k, :k]).min() <= 0), m.shape[0])
    return out.reshape(a.shape), info.reshape(a.shape[:-2])


def _cholesky(A: Tensor, upper: bool, l_: np.ndarray) -> Tensor:
    # dL = L Phi(L^-1 sym(dA) L^-T), Phi the lower triangle with the diagonal halved
    n = A.shape[-1]
    L = const(l_, A)

    def surrogate() -> Tensor:
        with np.errstate(all="ignore"):
            li = const(np.linalg.inv(l_) if n else l_, A)
        return L @ ((li @ sym(A) @ li.mT) * _tril_half(n, A))

    out = attach(L, surrogate, A)
    return out.mT if upper else out


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """As ``torch.linalg.cholesky`` (raises LinAlgError for a matrix that is not positive-definite)."""
    check_float("cholesky", A)
    check_matrix("cholesky", A, square=True)
    a = host(A)
    if upper:
        a = np.swapaxes(a, -1, -2)
    l_, info = _cholesky_host("cholesky", a)
    if info.any():
        k = int(info.reshape(-1)[np.nonzero(info.reshape(-1))[0][0]])
        raise LinAlgError(f"linalg.cholesky: the leading minor of order {k} is not positive-definite")
    return _cholesky(A.mT if upper else A, upper, l_)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.cholesky_ex``: (L, info), info 0 or the order of the failing minor."""
    check_float("cholesky_ex", A)
    check_matrix("cholesky_ex", A, square=True)
    a = host(A)
    if upper:
        a = np.swapaxes(a, -1, -2)
    l_, info = _cholesky_host("cholesky_ex", a)
    if check_errors and info.any():
        raise LinAlgError("linalg.cholesky_ex: the input is not positive-definite")
    return _cholesky(A.mT if upper else A, upper, l_), const(info, A, dt.int32)


def _skew_lower(c: Tensor, n: int) -> Tensor:
    low = c.tril(-1)
    return low - low.mT


def qr(A: Tensor, mode: str = "reduced") -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.qr`` (modes ``reduced``, ``complete``, ``r``; Householder QR on the host,
    LAPACK's signs). For A = QR with A (m, n), k = min(m, n), A1 the first k columns and
    C = Q^T dA1 R1^-1: dQ = Q (L - L^T) + (I - QQ^T) dA1 R1^-1 with L = tril(C, -1),
    dR1 = (C - (L - L^T)) R1, and the remaining columns of R: dR2 = Q^T (dA2 - dQ R2)."""
    check_float("qr", A)
    check_matrix("qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced', 'complete', 'r'")
    a = host(A)
    m, n = a.shape[-2:]
    k = min(m, n)
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    Q, R = const(q, A), const(r, A)
    if mode == "r":
        return const(np.zeros((0,)), A), attach(R, lambda: _qr_surrogate(A, q, r, k)[1], A)
    sq = {}

    def part(i: int) -> Tensor:
        if not sq:
            sq["v"] = _qr_surrogate(A, q, r, k)
        return sq["v"][i]

    return attach(Q, lambda: part(0), A), attach(R, lambda: part(1), A)


def _qr_surrogate(A: Tensor, q: np.ndarray, r: np.ndarray, k: int) -> tuple[Tensor, Tensor]:
    m, n = A.shape[-2:]
    qk, r1, r2 = q[..., :, :k], r[..., :k, :k], r[..., :k, k:]
    with np.errstate(all="ignore"):
        r1i = np.linalg.inv(r1) if k else r1
    Qk, R1, R1i, R2 = const(qk, A), const(r1, A), const(r1i, A), const(r2, A)
    a1, a2 = A[..., :, :k], A[..., :, k:]
    c = Qk.mT @ a1 @ R1i
    om = _skew_lower(c, k)
    dq = Qk @ om + (a1 - Qk @ (Qk.mT @ a1)) @ R1i
    dr1 = (c - om) @ R1
    from ..tensor import cat

    dr = cat([dr1, Qk.mT @ (a2 - dq @ R2)], -1) if n > k else dr1
    if q.shape[-1] > k:  # complete mode with m > n: the extra columns are not differentiable
        dq = cat([dq, const(np.zeros(q[..., :, k:].shape), A)], -1)
    if r.shape[-2] > k:
        dr = cat([dr, const(np.zeros(r[..., k:, :].shape), A)], -2)
    return dq, dr


def _svd_parts(A: Tensor, full_matrices: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = host(A)
    m, n = a.shape[-2:]
    if a.size == 0:
        k = min(m, n)
        u = np.broadcast_to(np.eye(m, m if full_matrices else k), (*a.shape[:-2], m, m if full_matrices else k))
        vh = np.broadcast_to(np.eye(n if full_matrices else k, n), (*a.shape[:-2], n if full_matrices else k, n))
        return u, np.zeros((*a.shape[:-2], k)), vh
    return np.linalg.svd(a, full_matrices=full_matrices)


def _svd_surrogate(A: Tensor, u: np.ndarray, s: np.ndarray, vh: np.ndarray) -> tuple[Tensor, Tensor, Tensor]:
    # A = U S V^T, P = U^T dA V, F_ij = 1 / (s_j^2 - s_i^2) (0 on the diagonal):
    # dS = diag(P), dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1,
    # dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1
    k = s.shape[-1]
    uk, vk = u[..., :, :k], np.swapaxes(vh[..., :k, :], -1, -2)
    with np.errstate(all="ignore"):
        diff = s[..., None, :] ** 2 - s[..., :, None] ** 2
        f = np.where(np.eye(k, dtype=bool), 0.0, 1.0 / diff)
        sinv = 1.0 / s
    U, V, Sv, F, Si = const(uk, A), const(vk, A), const(s, A), const(f, A), const(sinv, A)
    p = U.mT @ A @ V
    ds = p.diagonal(0, -2, -1)
    srow, scol = Sv.unsqueeze(-2), Sv.unsqueeze(-1)
    av = A @ V
    du = U @ (F * (p * srow + scol * p.mT)) + (av - U @ (U.mT @ av)) * Si.unsqueeze(-2)
    atu = A.mT @ U
    dv = V @ (F * (scol * p + p.mT * srow)) + (atu - V @ (V.mT @ atu)) * Si.unsqueeze(-2)
    return du, ds, dv.mT


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """As ``torch.linalg.svd`` (host LAPACK gesdd; the singular vectors' signs are LAPACK's, as
    torch's on CPU). With ``full_matrices`` and m != n the extra columns of U (rows of Vh) are
    not unique and get no gradient, as in torch."""
    check_float("svd", A)
    check_matrix("svd", A)
    u, s, vh = _svd_parts(A, full_matrices)
    k = s.shape[-1]
    U, Sv, Vh = const(u, A), const(s, A), const(vh, A)
    memo: dict[str, Any] = {}

    def part(i: int) -> Tensor:
        if not memo:
            memo["v"] = _svd_surrogate(A, u, s, vh)
        return memo["v"][i]

    def padded(i: int, full: np.ndarray, axis: int) -> Tensor:
        p = part(i)
        extra = full.shape[axis] - k
        if extra == 0:
            return p
        from ..tensor import cat

        shape = list(full.shape)
        shape[axis] = extra
        return cat([p, const(np.zeros(shape), A)], axis)

    return (attach(U, lambda: padded(0, u, -1), A), attach(Sv, lambda: part(1), A),
            attach(Vh, lambda: padded(2, vh, -2), A))


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """As ``torch.linalg.svdvals``."""
    check_float("svdvals", A)
    check_matrix("svdvals", A)
    u, s, vh = _svd_parts(A, False)
    k = s.shape[-1]
    U, V = const(u[..., :, :k], A), const(np.swapaxes(vh[..., :k, :], -1, -2), A)
    return attach(const(s, A), lambda: (U.mT @ A @ V).diagonal(0, -2, -1), A)


def _eigh_host(A: Tensor, UPLO: str) -> tuple[np.ndarray, np.ndarray]:
    if UPLO not in ("L", "U"):
        raise ValueError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    a = host(A)
    if a.size == 0:
        return np.zeros(a.shape[:-1]), a.copy()
    return np.linalg.eigh(a, UPLO=UPLO)


def eigh(A: Tensor, UPLO: str = "L") -> tuple[Tensor, Tensor]:
    """As ``torch.linalg.eigh`` (eigenvalues ascending; the eigenvectors' signs are LAPACK's).
    With P = V^T sym(dA) V: dw = diag(P), dV = V (F o P), F_ij = 1 / (w_j - w_i)."""
    check_float("eigh", A)
    check_matrix("eigh", A, square=True)
    w, v = _eigh_host(A, UPLO)
    W, Vt = const(w, A), const(v, A)
    n = w.shape[-1]
    memo: dict[str, Any] = {}

    def part(i: int) -> Tensor:
        if not memo:
            with np.errstate(all="ignore"):
                f = np.where(np.eye(n, dtype=bool), 0.0, 1.0 / (w[..., None, :] - w[..., :, None]))
            p = Vt.mT @ sym(A) @ Vt
            memo["v"] = (p.diagonal(0, -2, -1), Vt @ (const(f, A) * p))
        return memo["v"][i]

    return attach(W, lambda: part(0), A), attach(Vt, lambda: part(1), A)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """As ``torch.linalg.eigvalsh``."""
    check_float("eigvalsh", A)
    check_matrix("eigvalsh", A, square=True)
    w, v = _eigh_host(A, UPLO)
    V = const(v, A)
    return attach(const(w, A), lambda: (V.mT @ sym(A) @ V).diagonal(0, -2, -1), A)


def _tolerance(s_max: np.ndarray, m: int, n: int, atol: Any, rtol: Any, dtype: dt.DType) -> np.ndarray:
    """torch's cut-off max(atol, rtol * s_max); rtol defaults to eps * max(m, n) when atol is
    None or 0 and to 0 otherwise."""
    a = 0.0 if atol is None else (host(atol) if isinstance(atol, Tensor) else np.float64(atol))
    if rtol is None:
        given = atol is not None and np.any(np.asarray(a) > 0)
        r = 0.0 if given else float(np.finfo(dtype.np).eps) * max(m, n)
    else:
        r = host(rtol) if isinstance(rtol, Tensor) else np.float64(rtol)
    return np.maximum(a, r * s_max)


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Tensor:
    """As ``torch.linalg.pinv`` (through the host SVD, or eigh when ``hermitian``). For constant
    rank, with X = A^+: dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X."""
    check_float("pinv", A)
    check_matrix("pinv", A)
    a = host(A)
    m, n = a.shape[-2:]
    if hermitian:
        w, v = np.linalg.eigh(a) if a.size else (np.zeros(a.shape[:-1]), a)
        tol = _tolerance(np.abs(w).max(-1, initial=0.0), m, n, atol, rtol, A.dtype)
        with np.errstate(all="ignore"):
            winv = np.where(np.abs(w) > tol[..., None], 1.0 / w, 0.0)
        x = (v * winv[..., None, :]) @ np.swapaxes(v, -1, -2)
    else:
        if a.size:
            u, s, vh = np.linalg.svd(a, full_matrices=False)
        else:
            u, s, vh = np.zeros((*a.shape[:-1], 0)), np.zeros((*a.shape[:-2], 0)), np.zeros((*a.shape[:-2], 0, n))
        tol = _tolerance(s.max(-1, initial=0.0), m, n, atol, rtol, A.dtype)
        with np.errstate(all="ignore"):
            sinv = np.where(s > tol[..., None], 1.0 / s, 0.0)
        x = (np.swapaxes(vh, -1, -2) * sinv[..., None, :]) @ np.swapaxes(u, -1, -2)
    X = const(x, A)

    def surrogate() -> Tensor:
        ac = const(a, A)
        im = const(np.eye(m), A)
        in_ = const(np.eye(n), A)
        return -(X @ A @ X) + X @ X.mT @ A.mT @ (im - ac @ X) + (in_ - X @ ac) @ A.mT @ X.mT @ X

    return attach(X, surrogate, A)


def matrix_rank(A: Tensor, tol: Any = None, hermitian: bool = False, *, atol: Any = None,
                rtol: Any = None) -> Tensor:
    """As ``torch.linalg.matrix_rank`` (``tol`` is the deprecated positional ``atol``): the
    count of singular values above max(atol, rtol * s_max), as int64."""
    check_float("matrix_rank", A)
    check_matrix("matrix_rank", A)
    if tol is not None:
        atol = tol
    a = host(A)
    m, n = a.shape[-2:]
    if a.size == 0:
        return const(np.zeros(a.shape[:-2], np.int64), A, dt.int64)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    t = _tolerance(s.max(-1), m, n, atol, rtol, A.dtype)
    return const((s > t[..., None]).sum(-1), A, dt.int64)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None
          ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """As ``torch.linalg.lstsq`` on CPU: (solution, residuals, rank, singular_values). The
    solution is pinv(A) B (SVD with rcond's cut-off, default eps * max(m, n)); residuals are the
    squared residual norms when m > n and A has full rank, else empty; rank is filled for every
    driver but ``gels``, singular_values for ``gelsd`` and ``gelss``, as torch does."""
    check_float("lstsq", A, B)
    check_matrix("lstsq", A)
    drivers = ("gels", "gelsy", "gelsd", "gelss")
    driver = driver or "gelsy"
    if driver not in drivers:
        raise ValueError(f"torch.linalg.lstsq: parameter `driver` should be one of {drivers}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise ShapeError(f"linalg.lstsq: A has {A.shape[-2]} rows but B has {b.shape[-2]}")
    m, n = A.shape[-2:]
    r = float(np.finfo(A.dtype.np).eps) * max(m, n) if rcond is None or rcond < 0 else rcond
    X = pinv(A, rtol=r) @ b
    a = host(A)
    s = np.linalg.svd(a, compute_uv=False) if a.size else np.zeros((*a.shape[:-2], 0))
    rank = (s > r * s.max(-1, initial=0.0)[..., None]).sum(-1)
    if m > n and driver != "gelsy" and bool(np.all(rank == n)):
        res = ((A @ X - b) ** 2).sum(-2)
    else:
        res = const(np.zeros((0,)), A)
    rank_t = const(rank if driver != "gels" else np.zeros((0,)), A, dt.int64)
    sv = const(s if driver in ("gelsd", "gelss") else np.zeros((0,)), A)
    return (X.squeeze(-1) if vector else X), res, rank_t, sv


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """As ``torch.linalg.solve_triangular``: only the ``upper`` (or lower) triangle of A is read
    (its diagonal taken as ones when ``unitriangular``), and only that triangle gets a gradient."""
    check_float("solve_triangular", A, B)
    check_matrix("solve_triangular", A, square=True)
    n = A.shape[-1]
    t = A.triu(1 if unitriangular else 0) if upper else A.tril(-1 if unitriangular else 0)
    if unitriangular:
        t = t + const(np.eye(n), A)
    return solve(t, B, left=left)
