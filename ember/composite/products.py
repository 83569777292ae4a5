"""Matrix-product compositions: ``mv``, ``outer``, ``inner``, the ``add*`` family (``beta * input +
alpha * product``), ``tensordot``, ``kron``, ``einsum``, ``chain_matmul``, ``cross``.

``einsum`` multiplies the operands with broadcasting and sums (no contraction-path search).
"""

from __future__ import annotations

import builtins
import math
import string
from typing import Any

import numpy as np

from .. import _shape as S
from ..errors import ShapeError
from ..ops.shape import diagonal, roll
from ..tensor import Tensor

__all__ = [
    "mv", "vdot", "outer", "ger", "inner", "addmm", "addmv", "addr", "addbmm", "baddbmm", "tensordot", "kron",
    "einsum", "chain_matmul", "cross"
]

#: the functions torch also has as Tensor methods
TENSOR_METHODS = (
    "mv", "vdot", "outer", "ger", "inner", "addmm", "addmv", "addr", "addbmm", "baddbmm", "kron", "cross",
)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """As ``torch.mv``."""
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv expects a matrix and a vector, got shapes {input.shape} and {vec.shape}")
    return input.matmul(vec)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.vdot`` (real tensors: ``dot``)."""
    return input.dot(other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """As ``torch.outer``."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer expects vectors, got shapes {input.shape} and {vec2.shape}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def inner(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.inner``: contraction over the last dims."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


def _beta_alpha(input: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    term = prod if alpha == 1 else prod * alpha
    if beta == 0:  # torch ignores input then (its nan and inf do not propagate)
        return term.expand(S.broadcast(input.shape, term.shape))
    base = input if beta == 1 else input * beta
    return base + term


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addmm``: beta * input + alpha * (mat1 @ mat2)."""
    return _beta_alpha(input, mat1.mm(mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addmv``."""
    return _beta_alpha(input, mv(mat, vec), beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addr``."""
    return _beta_alpha(input, outer(vec1, vec2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.addbmm``: the batch products summed."""
    return _beta_alpha(input, batch1.bmm(batch2).sum(0), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """As ``torch.baddbmm``."""
    return _beta_alpha(input, batch1.bmm(batch2), beta, alpha)


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """As ``torch.tensordot``: the contracted dims permuted together, one matmul."""
    if out is not None:
        raise TypeError("tensordot: out= is not supported (tensors are values)")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int | np.integer):
        k = int(dims)
        da, db = list(range(a.ndim - k, a.ndim)), list(range(k))
    else:
        da, db = dims
        da = [da] if isinstance(da, int | np.integer) else list(da)
        db = [db] if isinstance(db, int | np.integer) else list(db)
    da = [S.norm_dim(d, a.ndim) for d in da]
    db = [S.norm_dim(d, b.ndim) for d in db]
    if len(da) != len(db):
        raise ShapeError(f"tensordot: {len(da)} and {len(db)} contracted dims")
    for x, y in zip(da, db):  # a contracted dim of size 1 broadcasts against the other (torch)
        if a.shape[x] != b.shape[y]:
            if a.shape[x] == 1:
                a = a.expand(tuple(b.shape[y] if i == x else n for i, n in enumerate(a.shape)))
            elif b.shape[y] == 1:
                b = b.expand(tuple(a.shape[x] if i == y else n for i, n in enumerate(b.shape)))
            else:
                raise ShapeError(f"tensordot: contracted dims of size {a.shape[x]} and {b.shape[y]}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [i for i in range(b.ndim) if i not in db]
    k = math.prod(a.shape[i] for i in da)
    ma = a.permute(fa + da).reshape(math.prod(a.shape[i] for i in fa), k)
    mb = b.permute(db + fb).reshape(k, math.prod(b.shape[i] for i in fb))
    return ma.matmul(mb).reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))


def kron(input: Tensor, other: Tensor) -> Tensor:
    """As ``torch.kron``."""
    nd = builtins.max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + input.shape)
    b = other.reshape((1,) * (nd - other.ndim) + other.shape)
    ia: list[int] = []
    ib: list[int] = []
    for n, m in zip(a.shape, b.shape):
        ia += [n, 1]
        ib += [1, m]
    prod = a.reshape(tuple(ia)) * b.reshape(tuple(ib))
    return prod.reshape(tuple(n * m for n, m in zip(a.shape, b.shape)))


def chain_matmul(*matrices: Tensor) -> Tensor:
    """As ``torch.chain_matmul``."""
    out = matrices[0]
    for m in matrices[1:]:
        out = out.mm(m)
    return out


def einsum(equation: str, *operands: Any) -> Tensor:
    """As ``torch.einsum`` (``...`` and repeated indices included): each operand's repeated
    indices become diagonals, then the operands are brought to one index order, multiplied
    with broadcasting and summed over the indices the output drops."""
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], list | tuple) else list(operands)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise ShapeError(f"einsum: {len(terms)} operand subscripts for {len(ops)} operands")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    nell = 0
    for t, x in zip(terms, ops):
        if "..." in t:
            nell = builtins.max(nell, x.ndim - (len(t) - 3))
    ell = "".join(spare[:nell])
    subs = []
    for t, x in zip(terms, ops):
        if "..." in t:
            k = x.ndim - (len(t) - 3)
            t = t.replace("...", ell[nell - k:] if k else "")
        if len(t) != x.ndim:
            raise ShapeError(f"einsum: subscripts {t!r} for an operand of shape {x.shape}")
        subs.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in subs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    # repeated indices within an operand: take the diagonal
    fixed = []
    for t, x in zip(subs, ops):
        while True:
            rep = next((c for c in t if t.count(c) > 1), None)
            if rep is None:
                break
            i = t.index(rep)
            j = t.index(rep, i + 1)
            x = diagonal(x, 0, i, j)
            t = "".join(c for k, c in enumerate(t) if k not in (i, j)) + rep
        fixed.append((t, x))
    letters = list(out) + sorted(set("".join(t for t, _ in fixed)) - set(out))
    sizes: dict[str, int] = {}
    for t, x in fixed:
        for c, n in zip(t, x.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise ShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
                sizes[c] = n
    aligned = []
    for t, x in fixed:
        perm = [t.index(c) for c in letters if c in t]
        y = x.permute(perm) if perm else x
        shape = tuple(x.shape[t.index(c)] if c in t else 1 for c in letters)
        aligned.append(y.reshape(shape))
    prod = aligned[0]
    for y in aligned[1:]:
        prod = prod * y
    full = tuple(sizes.get(c, 1) for c in letters)
    if prod.shape != full:
        prod = prod.expand(full)
    red = tuple(range(len(out), len(letters)))
    return prod.sum(red) if red else prod


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """As ``torch.cross`` (``dim`` None: the first dim of size 3)."""
    shape = S.broadcast(input.shape, other.shape)
    a, b = input.expand(shape), other.expand(shape)
    if dim is None:
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"no dimension of size 3 in shape {shape}")
    d = S.norm_dim(dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} of shape {shape} has size {shape[d]}, not 3")
    return roll(a, -1, d) * roll(b, -2, d) - roll(a, -2, d) * roll(b, -1, d)
