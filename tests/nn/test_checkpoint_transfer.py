"""Weights cross between torch and ember through safetensors files, for an MLP, a CNN and a
Transformer encoder: a file torch wrote (``safetensors.torch.save_file``) loads into the same
ember architecture, and one ember wrote (``ember.save``) loads into torch; outputs agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

import ember
from ember import nn as enn


def _mlp(nn):
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))


def _cnn(nn):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


def _encoder(nn):
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)


CASES = {"mlp": (_mlp, (4, 12)), "cnn": (_cnn, (2, 1, 6, 6)), "encoder": (_encoder, (2, 5, 8))}


def _randomise(tm: torch.nn.Module, rng: np.random.Generator) -> None:
    """Non-default weights and running statistics, so a transfer that drops any is caught
    (variances stay positive)."""
    with torch.no_grad():
        for name, t in list(tm.named_parameters()) + list(tm.named_buffers()):
            if t.is_floating_point():
                lo = 0.5 if name.endswith("running_var") else -1.0
                t.copy_(torch.from_numpy(rng.uniform(lo, 1.0 if lo < 0 else 1.5, t.shape).astype(np.float32)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_torch_file_to_ember_and_back(case: str, tmp_path: Path, rng: np.random.Generator) -> None:
    build, shape = CASES[case]
    dev = ember.Device.flex().autodiff()
    tm = build(torch.nn).eval()
    _randomise(tm, rng)
    x = rng.standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()

    torch_file = tmp_path / "torch.safetensors"
    safetensors.torch.save_file({k: v.contiguous() for k, v in tm.state_dict().items()}, str(torch_file))
    em = build(enn).eval().to(dev)
    em.load_state_dict(ember.load(torch_file, device=dev))
    with ember.no_grad():
        got = em(ember.tensor(x, device=dev)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

    ember_file = tmp_path / "ember.safetensors"
    ember.save(em.state_dict(), ember_file)
    tm2 = build(torch.nn).eval()
    tm2.load_state_dict(safetensors.torch.load_file(str(ember_file)))
    with torch.no_grad():
        back = tm2(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(back, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
