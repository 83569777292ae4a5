"""ember.nn.utils (gradient clipping, parameters <-> vector) against torch.nn.utils."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember
from ember import Device, tracing
from ember.nn import utils as U

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def _setup(dev: Device, rng: np.random.Generator, scale: float) -> tuple[list[ember.Tensor], list[torch.Tensor]]:
    ep, tp = [], []
    for s in SHAPES:
        a = rng.standard_normal(s).astype(np.float32)
        g = (rng.standard_normal(s) * scale).astype(np.float32)
        p = ember.tensor(a, device=dev, requires_grad=True)
        p.grad = ember.tensor(g, device=dev)
        q = torch.tensor(a, requires_grad=True)
        q.grad = torch.tensor(g)
        ep.append(p)
        tp.append(q)
    return ep, tp


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0, 0.0, -math.inf])
def test_clip_grad_norm_matches_torch(autodiff_device: Device, rng: np.random.Generator, norm_type: float) -> None:
    if "wgpu" in repr(autodiff_device.spec) and norm_type not in (2.0, math.inf):
        pytest.skip("wgpu.cpu runs two norm types")
    for scale in (0.01, 10.0):  # below and above max_norm
        ep, tp = _setup(autodiff_device, rng, scale)
        grads = [p.grad for p in ep]
        en = U.clip_grad_norm_(ep, max_norm=1.0, norm_type=norm_type)
        tn = torch.nn.utils.clip_grad_norm_(tp, max_norm=1.0, norm_type=norm_type)
        assert en.shape == () and en.dtype is ember.float32
        np.testing.assert_allclose(en.item(), tn.item(), rtol=1e-5)
        for p, q, g in zip(ep, tp, grads):
            assert p.grad is g  # clipped in place
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_edges() -> None:
    dev = Device.flex().autodiff()
    p = ember.tensor([1.0, 2.0], device=dev, requires_grad=True)
    assert U.clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients: tensor(0.)
    p.grad = ember.tensor([3.0, 4.0], device=dev)
    assert U.clip_grad_norm_(p, 10.0).item() == pytest.approx(5.0)  # a single tensor is accepted
    assert p.grad.tolist() == [3.0, 4.0]  # coefficient clamped to 1
    p.grad = ember.tensor([float("nan"), 1.0], device=dev)
    with pytest.raises(RuntimeError, match="non-finite"):
        U.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    total = U.get_total_norm([ember.tensor([3.0, 4.0], device=dev), ember.tensor([12.0], device=dev)])
    assert total.item() == pytest.approx(13.0)
    q = ember.tensor([1.0], device=dev, requires_grad=True)
    q.grad = ember.tensor([10.0], device=dev)
    U.clip_grads_with_norm_([q], 1.0, ember.tensor(10.0, device=dev))
    assert q.grad.item() == pytest.approx(1.0 / (1 + 1e-7), rel=1e-6)


def test_clip_grad_value_matches_torch(autodiff_device: Device, rng: np.random.Generator) -> None:
    ep, tp = _setup(autodiff_device, rng, 1.0)
    assert U.clip_grad_value_(ep, 0.5) is None
    torch.nn.utils.clip_grad_value_(tp, 0.5)
    for p, q in zip(ep, tp):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_parameters_to_vector_and_back(autodiff_device: Device, rng: np.random.Generator) -> None:
    ep, tp = _setup(autodiff_device, rng, 1.0)
    v = U.parameters_to_vector(ep)
    np.testing.assert_array_equal(v.numpy(), torch.nn.utils.parameters_to_vector(tp).detach().numpy())
    v.sum().backward()  # differentiable, as torch's
    new = rng.standard_normal(v.shape[0]).astype(np.float32)
    grads = [p.grad for p in ep]
    U.vector_to_parameters(ember.tensor(new, device=autodiff_device), ep)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tp)
    for p, q, g in zip(ep, tp, grads):
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy())
        assert p.is_leaf and p.requires_grad and p.grad is g
    with pytest.raises(TypeError):
        U.vector_to_parameters(new, ep)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        U.vector_to_parameters(ember.zeros(3, device=autodiff_device), ep)


@pytest.mark.parametrize("shapes", [SHAPES, [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]],
                         ids=["small", "mlp"])
def test_clip_grad_norm_launches_on_fused_cpu(shapes: list[tuple[int, ...]]) -> None:
    """The gradients concatenated in one launch, one reduction (two launches where a long
    vector is split, plus its prologue where it is not fused), one kernel combining the
    results, one scaling launch for every shape (the horizontal fuser): at most 6 launches
    whatever the number of gradients, nothing read."""
    dev = Device.cpu().autodiff()
    rng = np.random.default_rng(0)
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32), device=dev, requires_grad=True) for s in shapes]
    counts = []
    for _ in range(4):
        for p in ps:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32) * 5, device=dev)
        ember.sync(dev)
        with tracing.capture() as spans:
            n = U.clip_grad_norm_(ps, 1.0)
            ember.sync(dev)
        counts.append(sum(s.name == "launch" for s in spans))
    assert counts[-1] <= 6, counts
    assert n.item() > 1.0
