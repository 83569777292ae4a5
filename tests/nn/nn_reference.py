"""Helpers for comparing ember.nn with torch.nn (torch CPU is the reference): weights copied
through state dicts, tensors converted through numpy, per-dtype tolerances."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import ember

#: (rtol, atol at magnitude 1) per dtype
TOL = {ember.float32: (1e-5, 1e-5), ember.float64: (1e-10, 1e-10), ember.float16: (2e-3, 2e-3),
       ember.bfloat16: (2e-2, 2e-2)}

TORCH_DT = {ember.float32: torch.float32, ember.float64: torch.float64, ember.float16: torch.float16,
            ember.bfloat16: torch.bfloat16}


#: ember prints torch 2.13's module reprs (the test dependency's version); older torch prints
#: fewer arguments in several layers (LayerNorm without ``bias=``, ...), so with an older torch
#: installed (the GPU machine's 2.11) the reprs are not compared
_OLD_TORCH = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13)


def same_repr(ember_module: Any, torch_module: Any) -> bool:
    """Whether an ember module prints as torch 2.13 prints its twin (True, unchecked, when the
    installed torch is older)."""
    return _OLD_TORCH or repr(ember_module) == repr(torch_module)


def np_of(t: Any) -> np.ndarray:
    """float64 numpy values of an ember or torch tensor."""
    if isinstance(t, torch.Tensor):
        return t.detach().to(torch.float64).numpy() if t.is_floating_point() else t.detach().numpy()
    a = np.asarray(t.numpy())
    return a.astype(np.float64) if a.dtype.kind in "fV" or a.dtype.name == "bfloat16" else a


def assert_close(got: Any, want: Any, dtype: Any = ember.float32, what: str = "", scale: float | None = None) -> None:
    """``got`` (ember) matches ``want`` (torch) within the dtype's tolerance; atol scales with
    the reference's magnitude (sums of many terms round like their largest terms)."""
    g, w = np_of(got), np_of(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    rtol, atol = TOL[dtype]
    mag = scale if scale is not None else max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
    np.testing.assert_allclose(g, w, rtol=rtol * 4, atol=atol * 4 * mag, err_msg=what)


def torch_state_to_numpy(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def copy_weights(tm: torch.nn.Module, em: ember.nn.Module) -> None:
    """torch -> numpy -> ember.load_state_dict (strict: the key names must agree)."""
    em.load_state_dict(torch_state_to_numpy(tm))


def perturb(tm: torch.nn.Module, gen: np.random.Generator) -> None:
    """Random parameters (and positive running variances) so affine and statistics paths are
    exercised, not torch's identity initialisations."""
    with torch.no_grad():
        for name, p in tm.named_parameters():
            p.copy_(torch.from_numpy(gen.standard_normal(p.shape).astype(np.float32) * 0.5 + (
                1.0 if name.endswith("weight") and p.ndim == 1 else 0.0)))
        for name, b in tm.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.from_numpy(gen.standard_normal(b.shape).astype(np.float32)))
            elif name.endswith("running_var"):
                b.copy_(torch.from_numpy(gen.uniform(0.5, 2.0, b.shape).astype(np.float32)))


def ember_input(a: np.ndarray, device: ember.Device, requires_grad: bool = True, dtype: Any = None) -> ember.Tensor:
    t = ember.tensor(a, device=device)
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_() if requires_grad else t


def torch_input(a: np.ndarray, requires_grad: bool = True, dtype: Any = None) -> torch.Tensor:
    t = torch.tensor(a)
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_() if requires_grad else t


def is_slow(device: ember.Device) -> bool:
    """lavapipe WGSL: runs only a representative subset of the parametrisations."""
    return device.type in ("wgpu", "vulkan", "opengl")


def is_reduced(device: ember.Device) -> bool:
    """Devices that run a representative subset (the slow WGSL one, and the unfused Cube CPU
    one, whose kernels the fused device's cases already exercise one op at a time)."""
    return is_slow(device) or (device.type == "cpu" and device.inner().spec[-1] is False)


def is_flex(device: ember.Device) -> bool:
    return device.type == "flex"
