"""``ember.amp.GradScaler``: dynamic loss scaling for float16 training (as ``torch.amp.GradScaler``).

``scaler.scale(loss).backward()`` multiplies the loss by the scale so small float16 gradients
do not underflow; ``scaler.step(optimizer)`` divides the gradients by it again and skips
``optimizer.step()`` when any gradient is inf/NaN; ``scaler.update()`` halves the scale after a
skipped step and doubles it after ``growth_interval`` good steps in a row.

The optimizer may be any object with ``param_groups`` (a list of dicts whose ``"params"`` lists
hold tensors) and a ``step()`` method, as torch's.

The scale and growth tracker live on the host as numbers rounded to float32 after every update
(torch keeps them in a float32 and an int32 tensor and computes a new scale in double before
storing it, so both give the same sequence). Checking the gradients costs one device read per
device that holds them: the per-gradient ``isfinite().all()`` flags are stacked and reduced
on the device, and only that one bool is read (one drain on a fused device).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..backends.autodiff.mode import no_grad
from ..device import Device
from ..tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    """Where an optimizer is in the current iteration (torch's names)."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh() -> dict[str, Any]:
    # found_inf_per_device: device -> [the on-device "some gradient is not finite" flag, its host
    # value once read (None before)]
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _f32(x: float) -> float:
    """``x`` rounded to float32 (the scale is a float32 value in torch)."""
    return float(np.float32(x))


class GradScaler:
    """As ``torch.amp.GradScaler``: ``scale``, ``unscale_``, ``step``, ``update``, ``get_scale``,
    ``state_dict``/``load_state_dict``, the growth/backoff getters and setters.

    Differences from torch: the scale is kept on the host, so it multiplies outputs on any
    device and ``device`` is only recorded (torch disables a ``"cuda"`` scaler on a machine
    without CUDA; ember's keeps working, with tensors of whatever device the model uses);
    ``get_scale()`` and ``state_dict()`` never read the device.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        if not isinstance(device, str):
            raise TypeError(f"device must be a device type string such as 'cuda' or 'cpu', got {device!r}")
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = float(init_scale)
            #: None until the first scale() (torch creates its scale tensor lazily too)
            self._scale: float | None = None
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = int(growth_interval)
            self._init_growth_tracker = 0
            self._growth_tracker: int | None = None
            self._per_optimizer_states: dict[int, dict[str, Any]] = {}

    # ------------------------------------------------------------------ helpers
    def _opt_state(self, optimizer: Any) -> dict[str, Any]:
        st = self._per_optimizer_states.get(id(optimizer))
        if st is None:
            st = self._per_optimizer_states[id(optimizer)] = _refresh()
        return st

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[float, int]:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init(self) -> float:
        if self._scale is None:
            self._scale = _f32(self._init_scale)
            self._growth_tracker = self._init_growth_tracker
        return self._scale

    # ------------------------------------------------------------------ the training-loop API
    def scale(self, outputs: Any) -> Any:
        """As ``torch.amp.GradScaler.scale``: ``outputs`` (a tensor, or nested lists/tuples/iterables
        of them) multiplied by the scale factor; unchanged when the scaler is disabled."""
        if not self._enabled:
            return outputs
        s = self._lazy_init()

        def apply(val: Any) -> Any:
            if isinstance(val, Tensor):
                # a Python scalar is weak in type promotion: the output keeps its dtype (torch
                # multiplies by a 0-d float32 tensor, which is just as weak)
                return val * s
            if isinstance(val, Iterable):
                it = map(apply, val)
                return type(val)(it) if isinstance(val, list | tuple) else it
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(self, optimizer: Any, inv_scale: float, allow_fp16: bool) -> dict[Device, list[Any]]:
        """Divide every gradient of ``optimizer`` by the scale and build, per device, the flag
        "some gradient is not finite" (on the device: nothing is read here)."""
        flags: dict[Device, list[Tensor]] = {}
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(f"expected param to be ember.Tensor, got {type(param).__name__}")
                    g = param.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype.name == "float16":
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g = g * inv_scale
                    param.grad = g
                    flags.setdefault(g.device, []).append(g.isfinite().all())
        from ..functional import stack

        # one reduction per device; reading it later is that device's only read
        return {dev: [stack(fs).all().logical_not() if len(fs) > 1 else fs[0].logical_not(), None]
                for dev, fs in flags.items()}

    def unscale_(self, optimizer: Any) -> None:
        """As ``torch.amp.GradScaler.unscale_``: divide ``optimizer``'s gradients by the scale (in
        place: each ``param.grad`` is replaced) and record whether any is inf/NaN. At most once
        per optimizer between ``update()`` calls; raises RuntimeError otherwise, as torch."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        st = self._opt_state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        assert self._scale is not None
        # torch: the reciprocal in double, then rounded to float32
        inv_scale = _f32(1.0 / self._scale)
        st["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        st["stage"] = OptState.UNSCALED

    @staticmethod
    def _found_inf(entry: list[Any]) -> bool:
        """The host value of one device's flag, read at most once."""
        if entry[1] is None:
            entry[1] = bool(entry[0].item())
        return entry[1]

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """As ``torch.amp.GradScaler.step``: ``unscale_(optimizer)`` unless already done, then
        ``optimizer.step(*args, **kwargs)`` unless some gradient is inf/NaN. Returns what
        ``optimizer.step`` returns, or None when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        st = self._opt_state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        found = st["found_inf_per_device"]
        if len(found) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not any(self._found_inf(e) for e in found.values()):
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """As ``torch.amp.GradScaler.update``: with ``new_scale``, set the scale to it; otherwise
        multiply it by ``backoff_factor`` if any optimizer stepped over inf/NaN gradients this
        iteration (and reset the growth tracker), or by ``growth_factor`` after ``growth_interval``
        consecutive good iterations (unless the result would overflow float32)."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale = _f32(new_scale)
            else:
                reason = "new_scale should be a float or a 1-element ember.Tensor with requires_grad=False."
                if not isinstance(new_scale, Tensor) or new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                self._scale = _f32(float(new_scale.item()))
        else:
            entries = [e for st in self._per_optimizer_states.values() for e in st["found_inf_per_device"].values()]
            if len(entries) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(self._found_inf(e) for e in entries):  # each flag is read at most once per iteration
                self._scale = _f32(scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = tracker + 1
                if successful == self._growth_interval:
                    grown = _f32(scale * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = {}

    # ------------------------------------------------------------------ getters, setters, state
    def get_scale(self) -> float:
        """As ``torch.amp.GradScaler.get_scale``: the current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        """As ``torch.amp.GradScaler.get_growth_factor``."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """As ``torch.amp.GradScaler.set_growth_factor``."""
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """As ``torch.amp.GradScaler.get_backoff_factor``."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """As ``torch.amp.GradScaler.set_backoff_factor``."""
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """As ``torch.amp.GradScaler.get_growth_interval``."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """As ``torch.amp.GradScaler.set_growth_interval``."""
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        """As ``torch.amp.GradScaler.is_enabled``."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """As ``torch.amp.GradScaler.state_dict``: scale, factors, interval and growth tracker
        (empty when disabled). Take it after ``update()``."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As ``torch.amp.GradScaler.load_state_dict`` (a no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = _f32(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    def __repr__(self) -> str:
        if not self._enabled:
            return "GradScaler(enabled=False)"
        return (f"GradScaler(device={self._device!r}, scale={self.get_scale()}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, growth_interval={self._growth_interval})")
