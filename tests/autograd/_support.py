"""Helpers of the autograd API tests: the devices they run on and inputs twinned with torch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ember
from ember import Device

#: the default device (None: creation without ``device=``), Flex and the Cube CPU device with autodiff
DEVICES = [
    pytest.param(None, id="default"),
    pytest.param(Device.flex().autodiff(), id="flex.autodiff"),
    pytest.param(Device.cpu().autodiff(), id="cpu.autodiff"),
]


def pair(rng: np.random.Generator, dev: Device | None, shapes: list[tuple[int, ...]],
         requires_grad: bool = False) -> tuple[list[Any], list[torch.Tensor]]:
    """Fresh random float32 tensors of ``shapes`` on ``dev`` and their torch twins (same values)."""
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [ember.tensor(a, device=dev, requires_grad=requires_grad) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=requires_grad) for a in arrays]
    return ours, theirs


def close(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """``a`` (an ember tensor) equals ``b`` (a torch tensor) within float32 tolerances; ``atol``
    scales with the largest magnitude in ``b`` (rounding noise of sums grows with the terms)."""
    assert a is not None and b is not None, (a, b)
    want = b.detach().double().numpy()
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(np.asarray(a.numpy(), dtype=np.float64), want, rtol=rtol, atol=atol * scale)
