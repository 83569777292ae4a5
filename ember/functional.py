"""``ember.<op>(tensor, ...)`` functions: the Tensor methods as functions, the ops that take
several tensors (``where``, ``cat``, ``stack``, ``pad``: defined with the Tensor class) and the
compositions of ``ember.composite``.

This module only gathers: it sits above ``ember.tensor`` and ``ember.composite`` and nothing
below imports it."""

from __future__ import annotations

import inspect
from typing import Any

from . import composite as _composite
from . import dtype as dt
from .composite import *  # noqa: F403
from .tensor import Tensor, broadcast_tensors, cat, concat, concatenate, pad, stack, where

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

from . import random_ops as _random_ops  # noqa: E402  (bernoulli, multinomial, normal, randperm, ... and the fills)
from . import sorting as _sorting  # noqa: E402  (sort, topk, median, quantile, ... and their methods)
from .linalg import _toplevel as _linalg_top  # noqa: E402  (torch.det, torch.svd, ... and their methods)
from .linalg._toplevel import *  # noqa: E402,F403
from .ops import REGISTRY as _REGISTRY  # noqa: E402
from .random_ops import *  # noqa: E402,F403
from .sorting import *  # noqa: E402,F403
from .special import TOPLEVEL as _SPECIAL_TOP  # noqa: E402  (torch.lgamma, torch.i0, ... and their methods)
from .special import digamma, erfinv, i0, lgamma, mvlgamma, polygamma  # noqa: E402,F401

#: registry ops with a user-facing form of their own (``front``) or derived from their family
_REGISTRY_FUNCTIONS = tuple(n for n, op in _REGISTRY.items() if op.front is not None or (
    op.family == "binary" and op.float_only and not op.scalar_form and n not in _METHODS))

__all__ = list(_METHODS) + ["where", "cat", "concat", "concatenate", "stack", "pad", "broadcast_tensors",
                            "result_type"] + list(_composite.__all__) + list(_REGISTRY_FUNCTIONS)
__all__ += list(_linalg_top.__all__) + list(_sorting.__all__) + list(_SPECIAL_TOP) + list(_random_ops.__all__)


def _method(name: str) -> Any:
    """``ember.<name>(input, ...)``: ``input.<name>(...)``, with the method's docstring and its
    signature (``self`` named ``input``, as torch's functions name it)."""

    def f(t: Tensor, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(t, Tensor):
            raise TypeError(f"ember.{name} expects a Tensor first, got {type(t).__name__}")
        return getattr(t, name)(*args, **kwargs)

    method = getattr(Tensor, name)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = method.__doc__
    try:
        sig = inspect.signature(method)
    except (TypeError, ValueError):  # a builtin without a signature: keep (t, *args, **kwargs)
        return f
    params = list(sig.parameters.values())
    if params:
        params[0] = params[0].replace(name="input")
    f.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return f


for _n in _METHODS:
    globals()[_n] = _method(_n)
for _n in _REGISTRY_FUNCTIONS:
    _front = _REGISTRY[_n].front
    globals()[_n] = _front if _front is not None else _method(_n)


def result_type(*operands: Any) -> dt.DType:
    """As ``torch.result_type``: the dtype torch's promotion gives ``operands`` (tensors, scalars)."""
    return dt.result_type(*operands)
