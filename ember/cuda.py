"""``ember.cuda``: the queries of ``torch.cuda`` a training script makes.

``ember.cuda.is_available()`` says whether a CUDA device can be used here (the driver loads
and finds a GPU), so ``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` ports
unchanged. The random functions follow torch's "silently ignored without CUDA"; with CUDA
they seed the one Philox generator every device shares (``docs/random.md``).
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

from .device import Device

__all__ = [
    "is_available", "device_count", "current_device", "get_device_name", "get_device_capability",
    "is_bf16_supported", "manual_seed", "manual_seed_all", "seed", "seed_all", "synchronize",
    "empty_cache", "set_device", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "amp",
]


@functools.lru_cache(maxsize=1)
def _devices() -> tuple[Any, ...]:
    try:
        from .cube.runtime.cuda import devices
    except ImportError:  # cuda-bindings is not installed
        return ()
    try:
        return tuple(devices())
    except Exception:  # noqa: BLE001 - no driver / no GPU: CUDA is not available
        return ()


def is_available() -> bool:
    """As ``torch.cuda.is_available``: whether a CUDA GPU and its driver are usable."""
    return bool(_devices())


def device_count() -> int:
    """As ``torch.cuda.device_count``: the number of CUDA GPUs (0 without a driver)."""
    return len(_devices())


def current_device() -> int:
    """As ``torch.cuda.current_device``: ember has no current-device state, so 0."""
    return 0


def set_device(device: Any) -> None:
    """As ``torch.cuda.set_device``: accepted; ember names the GPU on each tensor (``Device.cuda(i)``)."""


def _index(device: Any) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        return int(device.partition(":")[2] or 0)
    inner = device.inner() if isinstance(device, Device) else device
    return int(inner.spec[2][0]) if isinstance(inner, Device) and inner.type == "cuda" else 0


def _device_info(device: Any) -> Any:
    found = _devices()
    i = _index(device)
    if not found:
        raise RuntimeError("Found no NVIDIA driver on your system (ember.cuda.is_available() is False)")
    if not 0 <= i < len(found):
        raise RuntimeError(f"Invalid device id {i}: {len(found)} CUDA device(s)")
    return found[i]


def get_device_name(device: Any = None) -> str:
    """As ``torch.cuda.get_device_name``: the GPU's name."""
    return str(_device_info(device).name)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """As ``torch.cuda.get_device_capability``: ``(major, minor)``."""
    info = _device_info(device)
    return int(info.major), int(info.minor)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """As ``torch.cuda.is_bf16_supported``: a GPU is there (ember's CUDA kernels take bfloat16)."""
    return is_available()


def manual_seed(seed: int) -> None:
    """As ``torch.cuda.manual_seed``: ignored without CUDA; with it, seeds the shared generator."""
    if is_available():
        from .creation import manual_seed as _seed

        _seed(seed)


manual_seed_all = manual_seed


def seed() -> None:
    """As ``torch.cuda.seed``: ignored without CUDA; with it, reseeds the shared generator."""
    if is_available():
        from .creation import seed as _seed

        _seed()


seed_all = seed


def synchronize(device: Any = None) -> None:
    """As ``torch.cuda.synchronize``: wait for the GPU's queued work (nothing to do without CUDA)."""
    if is_available():
        Device.cuda(_index(device)).sync()


def empty_cache() -> None:
    """As ``torch.cuda.empty_cache``: cached pool memory goes back (``ember.empty_cache``)."""
    from .cube.runtime.pool import empty_cache as _empty

    _empty()


def memory_allocated(device: Any = None) -> int:
    """As ``torch.cuda.memory_allocated``: not tracked per device by ember, so 0."""
    return 0


max_memory_allocated = memory_allocated


def reset_peak_memory_stats(device: Any = None) -> None:
    """As ``torch.cuda.reset_peak_memory_stats``: nothing to reset (see ``memory_allocated``)."""


def _amp_autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> Any:
    """As the deprecated ``torch.cuda.amp.autocast(...)``: ``ember.autocast("cuda", ...)`` (it
    changes ops on CUDA tensors only; ``dtype`` defaults to float16)."""
    from . import dtype as dt
    from .amp import autocast

    return autocast("cuda", dtype=dt.float16 if dtype is None else dtype, enabled=enabled,
                    cache_enabled=cache_enabled)


def _amp_grad_scaler(init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True) -> Any:
    """As the deprecated ``torch.cuda.amp.GradScaler(...)``: ``ember.amp.GradScaler("cuda", ...)``."""
    from .amp import GradScaler

    return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


#: ``torch.cuda.amp``: its two names, so ``from torch.cuda.amp import autocast, GradScaler`` ports
#: (registered as the module ``ember.cuda.amp``, which ``from ... import`` finds in ``sys.modules``)
amp = types.ModuleType(__name__ + ".amp", "As the deprecated torch.cuda.amp: autocast and GradScaler for CUDA.")
amp.autocast = _amp_autocast  # type: ignore[attr-defined]
amp.GradScaler = _amp_grad_scaler  # type: ignore[attr-defined]
sys.modules[amp.__name__] = amp
