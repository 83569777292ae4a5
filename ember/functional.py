"""``ember.<op>(tensor, ...)`` functions: the Tensor methods as functions, plus the ops that
take several tensors (``where``, ``cat``, ``stack``, ``pad``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from . import _shape as S
from . import dtype as dt
from .errors import DTypeError, ShapeError
from .tensor import Tensor, _check_device, _make, _pyscalar, _scalar_for

# functions that simply call the Tensor method of the same name
_METHODS = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "maximum", "minimum",
    "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
    "neg", "negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "floor", "ceil", "round", "trunc",
    "reciprocal", "square", "isnan", "isinf", "isfinite", "clamp", "clip", "sum", "mean", "max", "min",
    "amax", "amin", "argmax", "argmin", "prod", "var", "std", "all", "any", "logsumexp", "softmax",
    "log_softmax", "cumsum", "matmul", "mm", "bmm", "dot", "reshape", "permute", "transpose",
    "squeeze", "unsqueeze", "flatten", "flip", "repeat", "tile", "split", "chunk", "unbind", "narrow",
    "gather", "scatter", "scatter_add", "index_select", "masked_fill", "tril", "triu", "nonzero",
    "allclose", "equal", "clone", "detach", "numel", "norm", "select",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "swapaxes", "unflatten", "t",
)

from . import composite as _composite  # noqa: E402  (attaches its Tensor methods)
from . import sorting as _sorting  # noqa: E402  (sort, topk, median, quantile, cumprod, ... and their methods)
from .composite import *  # noqa: E402,F403
from .linalg import _toplevel as _linalg_top  # noqa: E402  (torch.det, torch.svd, ... and their methods)
from .linalg._toplevel import *  # noqa: E402,F403
from .ops import REGISTRY as _REGISTRY  # noqa: E402
from .sorting import *  # noqa: E402,F403
from .special import TOPLEVEL as _SPECIAL_TOP  # noqa: E402  (torch.lgamma, torch.i0, ... and their methods)
from .special import digamma, erfinv, i0, lgamma, mvlgamma, polygamma  # noqa: E402,F401

#: registry ops with a user-facing form of their own (``front``) or derived from their family
_REGISTRY_FUNCTIONS = tuple(n for n, op in _REGISTRY.items() if op.front is not None or (
    op.family == "binary" and op.float_only and not op.scalar_form and n not in _METHODS))

__all__ = list(_METHODS) + ["where", "cat", "concat", "concatenate", "stack", "pad", "broadcast_tensors",
                            "result_type"] + list(_composite.__all__) + list(_REGISTRY_FUNCTIONS)
__all__ += list(_linalg_top.__all__) + list(_sorting.__all__) + list(_SPECIAL_TOP)


def _method(name: str) -> Any:
    def f(t: Tensor, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(t, Tensor):
            raise TypeError(f"ember.{name} expects a Tensor first, got {type(t).__name__}")
        return getattr(t, name)(*args, **kwargs)

    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Same as ``Tensor.{name}``."
    return f


for _n in _METHODS:
    globals()[_n] = _method(_n)
for _n in _REGISTRY_FUNCTIONS:
    _front = _REGISTRY[_n].front
    globals()[_n] = _front if _front is not None else _method(_n)


def result_type(*operands: Any) -> dt.DType:
    return dt.result_type(*operands)


def where(condition: Tensor, input: Any, other: Any) -> Tensor:
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (tensors or scalars)."""
    if not isinstance(condition, Tensor):
        raise TypeError("where expects a bool condition tensor")
    if condition._dt is not dt.bool_:
        raise DTypeError(f"where expects a bool condition, got {condition._dt}")
    tensors = [x for x in (input, other) if isinstance(x, Tensor)]
    for x in tensors:
        _check_device(condition, x)
    ops = [_pyscalar(x) if not isinstance(x, Tensor) else x for x in (input, other)]
    d = dt.result_type(*ops)
    shape = S.broadcast_many([condition.shape] + [x.shape for x in tensors])
    bk = condition._bk

    def prim(x: Any) -> Any:
        if isinstance(x, Tensor):
            return x._p if x._dt is d else bk.cast(x._p, d)
        return bk.full((), _scalar_for(d, x), d)

    out = bk.where(condition._p, prim(ops[0]), prim(ops[1]))
    t = _make(out, bk, d)
    return t if t.shape == shape else t.expand(shape)


def _same_device(tensors: Sequence[Tensor], what: str) -> None:
    if not tensors:
        raise ValueError(f"{what} needs at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what} expects tensors, got {type(t).__name__}")
        _check_device(tensors[0], t)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    _same_device(tensors, "cat")
    # PyTorch skips legacy 1-D empty tensors in cat
    ts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = ts[0]
    if ref.ndim == 0:
        raise ShapeError("zero-dimensional tensors cannot be concatenated; use stack")
    d = S.norm_dim(dim, ref.ndim)
    for t in ts[1:]:
        if t.ndim != ref.ndim or builtins.any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise ShapeError(f"cat: shapes {ref.shape} and {t.shape} differ outside dim {d}")
    out_dt = ts[0]._dt
    for t in ts[1:]:
        out_dt = dt.promote_types(out_dt, t._dt)
    ps = [t._p if t._dt is out_dt else t._bk.cast(t._p, out_dt) for t in ts]
    if len(ps) == 1:
        return _make(ps[0], ref._bk, out_dt)
    return _make(ref._bk.cat(ps, d), ref._bk, out_dt)


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    _same_device(tensors, "stack")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ShapeError(f"stack expects tensors of one shape, got {shape} and {t.shape}")
    d = S.norm_dim(dim, len(shape) + 1)
    return cat([t.unsqueeze(d) for t in tensors], d)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """PyTorch's ``F.pad``: ``pad`` lists (before, after) pairs starting from the last dim.
    Negative amounts crop. Only ``constant`` mode."""
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}: only 'constant' is supported")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad {tuple(pad)} needs pairs for at most {input.ndim} dims")
    pairs = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        pairs[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    t = input
    if builtins.any(a < 0 or b < 0 for a, b in pairs):  # crop first
        key = tuple(slice(-a if a < 0 else 0, n + b if b < 0 else n) for (a, b), n in zip(pairs, t.shape))
        t = t[key]
        pairs = [(builtins.max(a, 0), builtins.max(b, 0)) for a, b in pairs]
    if builtins.all(a == 0 and b == 0 for a, b in pairs):
        return t
    v = _scalar_for(t._dt, 0 if value is None else _pyscalar(value))
    return _make(t._bk.pad(t._p, tuple(pairs), v), t._bk, t._dt)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shape = S.broadcast_many(t.shape for t in tensors)
    return tuple(t.expand(shape) for t in tensors)

