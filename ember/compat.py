"""torch's top-level utilities that have no other home in ember: ``cdist``, ``finfo``/``iinfo``,
``set_printoptions``, the thread-count knobs and the legacy typed constructors
(``FloatTensor``, ``LongTensor``, ...), so scripts that call them port by the import alone."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dtype as dt
from .tensor import Tensor
from .tensor.core import PRINT_OPTIONS

__all__ = ["cdist", "finfo", "iinfo", "set_printoptions", "set_num_threads", "get_num_threads",
           "set_num_interop_threads", "get_num_interop_threads", "FloatTensor", "DoubleTensor", "HalfTensor",
           "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """As ``torch.cdist``: the p-norm distance between each row of ``x1`` ``(..., P, M)`` and each
    row of ``x2`` ``(..., R, M)``, shape ``(..., P, R)`` (batch dims broadcast). Computed from the
    differences (``compute_mode`` is accepted; torch's matmul form for p = 2 differs from it by
    rounding only). A zero distance has a zero gradient, as torch's."""
    from .tensor import where

    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    d = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 0:
        # torch's result is in the graph with a zero gradient: the clamped term adds zeros (and
        # no nan for infinite differences) that carry the graph
        return (d != 0).sum(-1).to(d.dtype) + (d.clamp(-1.0, 1.0) * 0.0).sum(-1)
    if p == 1:
        return d.abs().sum(-1)
    if p == float("inf"):
        return d.abs().amax(-1)
    s = (d * d).sum(-1) if p == 2 else (d.abs() ** p).sum(-1)
    positive = s > 0
    safe = where(positive, s, 1.0)  # the root's derivative is infinite at 0: keep it out of the graph there
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(positive, root, 0.0)


@dataclass(frozen=True)
class finfo:  # noqa: N801 (torch's name)
    """As ``torch.finfo(dtype)``: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution`` and ``dtype`` of a floating point dtype (default: the default dtype)."""

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str

    def __new__(cls, type: Any = None) -> finfo:  # noqa: A002 (torch's argument name)
        d = dt.get_default_dtype() if type is None else dt.as_dtype(type)
        if d.category != dt.FLOAT:
            raise TypeError(f"finfo expects a floating point dtype, got {d}")
        if d is dt.bfloat16:
            import ml_dtypes

            info: Any = ml_dtypes.finfo(ml_dtypes.bfloat16)
        else:
            info = np.finfo(d.np)
        self = object.__new__(cls)
        values = {"bits": int(info.bits), "eps": float(info.eps), "max": float(info.max), "min": float(info.min),
                  "tiny": float(info.tiny), "smallest_normal": float(info.tiny),
                  "resolution": 10.0 ** -int(info.precision), "dtype": d.name}
        for k, v in values.items():
            object.__setattr__(self, k, v)
        return self

    def __init__(self, type: Any = None) -> None:  # noqa: A002
        pass


@dataclass(frozen=True)
class iinfo:  # noqa: N801 (torch's name)
    """As ``torch.iinfo(dtype)``: ``bits``, ``max``, ``min`` and ``dtype`` of an integer dtype."""

    bits: int
    max: int
    min: int
    dtype: str

    def __new__(cls, type: Any) -> iinfo:  # noqa: A002
        d = dt.as_dtype(type)
        if d.category == dt.FLOAT:
            raise TypeError(f"iinfo expects an integer dtype, got {d}")
        info = np.iinfo(np.uint8 if d is dt.bool_ else d.np)
        self = object.__new__(cls)
        for k, v in {"bits": int(info.bits), "max": int(info.max), "min": int(info.min), "dtype": d.name}.items():
            object.__setattr__(self, k, v)
        return self

    def __init__(self, type: Any) -> None:  # noqa: A002
        pass


_PROFILES = {"default": (4, 1000, 3, 75), "short": (2, 1000, 2, 75), "full": (4, sys.maxsize, 3, 75)}


def set_printoptions(precision: int | None = None, threshold: int | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """As ``torch.set_printoptions``: digits, the element count above which tensors print
    summarised, the items kept at each edge, the line width (``profile``: ``"default"``,
    ``"short"``, ``"full"``). ``sci_mode=False`` turns numpy's scientific notation off."""
    if profile is not None:
        p, t, e, w = _PROFILES[profile]
        PRINT_OPTIONS.update(precision=p, threshold=t, edgeitems=e, linewidth=w)
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            PRINT_OPTIONS[key] = int(value)
    if sci_mode is not None:
        PRINT_OPTIONS["suppress_small"] = not sci_mode


def set_num_threads(n: int) -> None:
    """As ``torch.set_num_threads``: at most ``n`` OpenMP threads for the Cube CPU kernels (the
    other devices ignore it). Set before the first CPU kernel runs, it is ``OMP_NUM_THREADS``
    for the kernels' OpenMP runtime; later, it caps the thread count the launches choose."""
    n = int(n)
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    os.environ["OMP_NUM_THREADS"] = str(n)
    loading = sys.modules.get("ember.cube.runtime.cpu_loading")
    omp = getattr(loading, "_openmp", None)
    if omp is not None and omp.set is not None:
        omp.max = n


def get_num_threads() -> int:
    """As ``torch.get_num_threads``: the OpenMP thread cap of the Cube CPU kernels."""
    loading = sys.modules.get("ember.cube.runtime.cpu_loading")
    omp = getattr(loading, "_openmp", None)
    if omp is not None and omp.set is not None:
        return int(omp.max)
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_interop = [1]


def set_num_interop_threads(n: int) -> None:
    """As ``torch.set_num_interop_threads``: kept for ``get_num_interop_threads`` (ember runs ops in order)."""
    _interop[0] = int(n)


def get_num_interop_threads() -> int:
    """As ``torch.get_num_interop_threads``."""
    return _interop[0]


def _legacy(d: dt.DType, name: str) -> Any:
    def make(*args: Any, device: Any = None) -> Tensor:
        from .creation import empty, tensor

        if len(args) == 1 and not isinstance(args[0], int | np.integer):
            data = args[0]
            if isinstance(data, Tensor):
                return data.to(d)
            return tensor(data, dtype=d, device=device)
        return empty(*args, dtype=d, device=device)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"As the legacy ``torch.{name}``: ``{name}(data)`` is ``tensor(data, dtype={d.name})``, "
                    f"``{name}(*sizes)`` an uninitialised (here: zero) tensor of that shape.")
    return make


FloatTensor = _legacy(dt.float32, "FloatTensor")
DoubleTensor = _legacy(dt.float64, "DoubleTensor")
HalfTensor = _legacy(dt.float16, "HalfTensor")
BFloat16Tensor = _legacy(dt.bfloat16, "BFloat16Tensor")
LongTensor = _legacy(dt.int64, "LongTensor")
IntTensor = _legacy(dt.int32, "IntTensor")
ShortTensor = _legacy(dt.int16, "ShortTensor")
CharTensor = _legacy(dt.int8, "CharTensor")
ByteTensor = _legacy(dt.uint8, "ByteTensor")
BoolTensor = _legacy(dt.bool_, "BoolTensor")
