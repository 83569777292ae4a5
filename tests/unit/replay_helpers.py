"""What the fusion and replay tests share: the devices they run on, their random inputs, and the
Fusion backend of a device."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ember import Device
from ember.backends.fusion import Fusion


def devices() -> list[str]:
    out = ["cpu"]
    if os.environ.get("EMBER_TEST_REPLAY_CUDA", "1") != "0":
        try:
            Device.cuda().backend()
            out.append("cuda")
        except Exception:  # noqa: BLE001 - no GPU here
            pass
    return out


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def fusion_of(dev: Device) -> Fusion:
    """The Fusion layer of ``dev``'s backend stack."""
    b = dev.backend().inner
    while not isinstance(b, Fusion):
        b = b.inner
    return b


def replaying(dev: Device) -> Fusion:
    """``fusion_of(dev)``, skipping the test where its drains do not replay (cube.replay off)."""
    f = fusion_of(dev)
    if not f.replayable:
        pytest.skip("replays turned off (cube.replay)")
    return f
