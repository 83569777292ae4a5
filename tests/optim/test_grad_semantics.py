"""``.grad`` as in PyTorch: one object per leaf, in-place ops on it change the stored gradient,
backward accumulates into it, ``p.grad = t`` stores ``t`` itself, ``None`` resets.

Every check runs on every autodiff device and is compared with torch where torch defines the
values (accumulation over several backward calls).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember import Device
from ember.errors import AutodiffError, DTypeError, ShapeError


def _leaf(dev: Device, a: np.ndarray) -> ember.Tensor:
    return ember.tensor(a, device=dev, requires_grad=True)


def _loss(p: ember.Tensor, w: np.ndarray) -> ember.Tensor:
    return (p * ember.tensor(w, device=p.device)).sum()


def test_same_object_until_replaced(autodiff_device: Device, rng: np.random.Generator) -> None:
    a = rng.standard_normal(5).astype(np.float32)
    p = _leaf(autodiff_device, a)
    assert p.grad is None
    _loss(p, a).backward()
    g = p.grad
    assert g is not None and p.grad is g and p.grad is g
    _loss(p, a).backward()  # accumulates into the same object
    assert p.grad is g
    np.testing.assert_allclose(g.numpy(), 2 * a, rtol=1e-6)
    assert not g.requires_grad and g.dtype is p.dtype


@pytest.mark.parametrize("how", ["zero_", "mul_", "iadd", "add_", "copy_", "clamp_", "fill_"])
def test_inplace_on_grad_changes_the_stored_gradient(autodiff_device: Device, rng: np.random.Generator,
                                                    how: str) -> None:
    a = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    p = _leaf(autodiff_device, a)
    _loss(p, w).backward()
    g = p.grad
    other = rng.standard_normal(4).astype(np.float32)
    o = ember.tensor(other, device=autodiff_device)
    if how == "zero_":
        p.grad.zero_()
        want = np.zeros(4, np.float32)
    elif how == "mul_":
        p.grad.mul_(3.0)
        want = w * 3
    elif how == "iadd":
        p.grad += o
        want = w + other
    elif how == "add_":
        p.grad.add_(o)
        want = w + other
    elif how == "copy_":
        p.grad.copy_(o)
        want = other
    elif how == "clamp_":
        p.grad.clamp_(-0.1, 0.1)
        want = np.clip(w, -0.1, 0.1)
    else:
        p.grad.fill_(2.5)
        want = np.full(4, 2.5, np.float32)
    assert p.grad is g
    np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-6)
    # the next backward accumulates on top of the changed gradient
    _loss(p, w).backward()
    assert p.grad is g
    np.testing.assert_allclose(p.grad.numpy(), want + w, rtol=1e-5, atol=1e-6)


def test_set_to_none_and_set_to_tensor(autodiff_device: Device, rng: np.random.Generator) -> None:
    a = rng.standard_normal(3).astype(np.float32)
    p = _leaf(autodiff_device, a)
    _loss(p, a).backward()
    old = p.grad
    p.grad = None
    assert p.grad is None
    _loss(p, a).backward()
    assert p.grad is not old  # a fresh gradient after a reset (torch makes a new tensor too)
    np.testing.assert_allclose(p.grad.numpy(), a, rtol=1e-6)
    t = ember.tensor(np.ones(3, np.float32), device=autodiff_device)
    p.grad = t
    assert p.grad is t
    _loss(p, a).backward()
    assert p.grad is t
    np.testing.assert_allclose(t.numpy(), 1 + a, rtol=1e-6)


def test_grad_setter_checks(autodiff_device: Device) -> None:
    p = _leaf(autodiff_device, np.zeros(3, np.float32))
    with pytest.raises(ShapeError):
        p.grad = ember.zeros(4, device=autodiff_device)
    with pytest.raises(DTypeError):
        p.grad = ember.zeros(3, device=autodiff_device, dtype=ember.float64)
    with pytest.raises(TypeError):
        p.grad = np.zeros(3)  # type: ignore[assignment]
    q = ember.zeros(3, device=autodiff_device)
    with pytest.raises(AutodiffError):
        q.grad = ember.zeros(3, device=autodiff_device)
    q.grad = None  # allowed: nothing to drop


def test_zero_grad_loop_matches_torch(autodiff_device: Device, rng: np.random.Generator) -> None:
    """Several backward calls per step with ``p.grad.zero_()`` between steps (the pattern that
    silently accumulated before): the gradients equal torch's at every step."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(6)]
    p = _leaf(autodiff_device, a)
    tp = torch.tensor(a, requires_grad=True)
    for step in range(3):
        for x in xs[2 * step: 2 * step + 2]:
            (ember.tensor(x, device=autodiff_device) @ p).tanh().sum().backward()
            (torch.tensor(x) @ tp).tanh().sum().backward()
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-6)
        p.grad.zero_()
        tp.grad.zero_()


def test_update_under_no_grad_keeps_grad_object(autodiff_device: Device) -> None:
    p = _leaf(autodiff_device, np.ones(2, np.float32))
    (p * 2).sum().backward()
    g = p.grad
    with ember.no_grad():
        p.sub_(p.grad * 0.5)
    assert p.is_leaf and p.requires_grad and p.grad is g
    np.testing.assert_allclose(p.numpy(), [0.0, 0.0])


def test_grad_that_requires_grad_keeps_requiring(autodiff_device: Device) -> None:
    """As torch: a ``.grad`` set to a leaf that requires grad stays that leaf after backward."""
    p = _leaf(autodiff_device, np.ones(2, np.float32))
    t = _leaf(autodiff_device, np.ones(2, np.float32))
    p.grad = t
    (p * 2).sum().backward()
    assert p.grad is t and t.requires_grad and t.is_leaf
    np.testing.assert_allclose(t.numpy(), [3.0, 3.0])
