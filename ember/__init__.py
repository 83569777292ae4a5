"""ember: a layered deep-learning tensor framework.

Tensor API -> Dispatch -> Autodiff -> Fusion -> Cube kernels (C, CUDA C, WGSL), with an
eager numpy backend (Flex) as the reference. See README.md and DESIGN.md.
"""

from __future__ import annotations

from typing import Any

from . import errors, tracing
from .backends import cuda as _backends_cuda  # noqa: F401  (torch.backends.cuda.matmul.allow_tf32)
from .backends import cudnn as _backends_cudnn  # noqa: F401  (torch.backends.cudnn.benchmark = ...)
from .backends import mps as _backends_mps  # noqa: F401
from .backends.autodiff.mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .compat import *  # noqa: F403
from .compat import __all__ as _compat_all
from .creation import *  # noqa: F403
from .creation import __all__ as _creation_all
from .device import Device, DeviceKind
from .dtype import (
    DType,
    bfloat16,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from .dtype import bool_ as bool  # noqa: A001  (ember.bool is the dtype, as torch.bool)
from .functional import *  # noqa: F403
from .functional import __all__ as _functional_all
from .precision import get_float32_matmul_precision, set_float32_matmul_precision
from .serialization import load, save
from .tensor import Tensor
from .tensor.factories import install_inplace_variants as _install_inplace_variants
from .tracing import profile

_install_inplace_variants()  # every method table is on Tensor now (composite, special, ...)

__version__ = "0.1.0"

float = float32  # noqa: A001
double = float64
short = int16
half = float16
long = int64
int = int32  # noqa: A001


def backend_name(device: Device) -> str:
    """The layers a call on ``device`` crosses, innermost last (``dispatch<autodiff<flex>>``)."""
    return device.backend().name


def sync(device: Device | None = None) -> None:
    """Wait for every queued op of ``device`` (of the default device when None)."""
    (device or get_default_device()).sync()  # noqa: F405


def empty_cache() -> int:
    """As ``torch.cuda.empty_cache``, for every device: cached pool memory goes back; returns bytes freed."""
    from .cube.runtime.pool import empty_cache as _empty_cache

    return _empty_cache()


def from_dlpack(obj: Any) -> Tensor:
    """An ember tensor sharing another framework's tensor (``__dlpack__``); see ``ember.dlpack``."""
    from .dlpack import from_dlpack as _from_dlpack

    return _from_dlpack(obj)


#: subpackages reachable as attributes after ``import ember`` (``ember.nn.Linear``, as
#: ``torch.nn.Linear``) but imported on first use, so ``import ember`` stays cheap
_LAZY_SUBPACKAGES = frozenset({"cube", "nn", "optim", "utils", "amp", "linalg", "special", "autograd", "cuda"})
#: names of ``ember.amp.autocast_mode`` that are also ``ember.*`` (``ember.autocast``, as
#: ``torch.autocast``), loaded on first use like the subpackages
_LAZY_AMP = frozenset({"autocast", "is_autocast_enabled", "get_autocast_dtype"})


def __getattr__(name: str) -> Any:
    # subpackages that pull in compilers and runtimes load on first use
    if name in _LAZY_SUBPACKAGES:
        import importlib

        mod = importlib.import_module(f".{name}", __name__)
        globals()[name] = mod
        return mod
    if name in _LAZY_AMP:
        from .amp import autocast_mode

        value = globals()[name] = getattr(autocast_mode, name)
        return value
    if name == "Generator":  # as torch.Generator; its base class lives in ember.random (loaded on first use)
        from .creation import torch_generator_class

        value = globals()[name] = torch_generator_class()
        return value
    if name == "inspect_fusion":  # the Fusion layer (and dataclasses) load with the first device
        from .backends.fusion.inspect import inspect_fusion

        globals()["inspect_fusion"] = inspect_fusion
        return inspect_fusion
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


__all__ = [
    "Tensor", "Device", "DeviceKind", "DType", "errors", "tracing", "profile", "backend_name", "sync", "inspect_fusion",  # noqa: F405 (__getattr__)
    "from_dlpack", "Generator", "autocast", "is_autocast_enabled", "get_autocast_dtype",  # noqa: F405 (__getattr__)
    "empty_cache", "save", "load", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "inference_mode", "is_inference_mode_enabled",
    "float32", "float16", "bfloat16", "float64", "int8",
    "int16", "int32", "int64", "uint8", "bool", "get_default_dtype", "set_default_dtype", "promote_types",
    *_creation_all, *_functional_all, *_compat_all,
]
