"""Autocast through ember.nn: Linear runs in the low dtype, norms and losses in float32, and the
float32 parameters get float32 gradients; outputs follow torch.autocast within bf16 tolerance."""

from __future__ import annotations

import numpy as np
import torch

import ember
import ember.nn.functional as F
from ember import nn


def _pair(dev: ember.Device) -> tuple[nn.Module, torch.nn.Module]:
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    em = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4)).to(dev)
    em.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return em, tm


def test_linear_low_norm_and_loss_float32(rng: np.random.Generator) -> None:
    dev = ember.Device.flex().autodiff()
    em, tm = _pair(dev)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = rng.integers(0, 4, 5)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        h = em[0](ember.tensor(x, device=dev))
        assert h.dtype is ember.bfloat16
        assert em[1](h).dtype is ember.float32
        out = em(ember.tensor(x, device=dev))
        assert out.dtype is ember.bfloat16
        loss = F.cross_entropy(out, ember.tensor(y, device=dev))
        assert loss.dtype is ember.float32
    loss.backward()
    for name, p in em.named_parameters():
        assert p.grad is not None and p.grad.dtype is ember.float32, name
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y))
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=3e-2, atol=3e-2)
    for (name, p), tp in zip(em.named_parameters(), tm.parameters()):
        g, tg = p.grad.numpy(), tp.grad.numpy()
        np.testing.assert_allclose(g, tg, rtol=0.1, atol=0.05 * np.abs(tg).max() + 1e-3, err_msg=name)
