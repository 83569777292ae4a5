"""What the replay tests share: the devices they run on and their random inputs."""

from __future__ import annotations

import os

import numpy as np

from ember import Device


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
