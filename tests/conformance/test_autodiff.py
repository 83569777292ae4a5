"""Autodiff behaviours (PyTorch semantics): accumulation, retain_graph, no_grad, detach,
requires_grad propagation, leaves and in-place rules, explicit upstream gradients."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import AutodiffError, ShapeError

from ._support import name_of, read


def leaf(values: list[float], device: ember.Device) -> ember.Tensor:
    return ember.tensor(values, dtype=ember.float64, device=device, requires_grad=True)


def test_grad_accumulates_across_backward_calls(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0, 3.0], autodiff_device)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]
    x.grad = None
    x.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_assigned_grad_accumulates(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    x.grad = ember.tensor([10.0, 20.0], dtype=ember.float64, device=autodiff_device)
    (x * x).sum().backward()
    assert x.grad.tolist() == [12.0, 24.0]


def test_grad_dtype_device_and_shape(autodiff_device: ember.Device) -> None:
    for dtype in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        x = ember.ones((2, 3), dtype=dtype, device=autodiff_device, requires_grad=True)
        (x * 2).sum().backward()
        assert x.grad.dtype == dtype and x.grad.device == autodiff_device and x.grad.shape == (2, 3)
        assert x.grad.tolist() == [[2.0] * 3] * 2
        assert not x.grad.requires_grad


def test_tensor_used_twice_and_diamond(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, -2.0], autodiff_device)
    a = x * 2
    b = x.exp()
    (a * b + a).sum().backward()  # d/dx (2x e^x + 2x) = 2 e^x + 2x e^x + 2
    xv = np.array([1.0, -2.0])
    np.testing.assert_allclose(read(x.grad), 2 * np.exp(xv) + 2 * xv * np.exp(xv) + 2, rtol=1e-12)


def test_second_backward_needs_retain_graph(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = read(x.grad).copy()
    y.backward()
    np.testing.assert_allclose(read(x.grad), 2 * first, rtol=1e-12)
    with pytest.raises(AutodiffError):
        y.backward()
    np.testing.assert_allclose(read(x.grad), 2 * first, rtol=1e-12)


def test_backward_with_explicit_gradient(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0, 3.0], autodiff_device)
    y = x * x
    y.backward(gradient=ember.tensor([1.0, 0.5, -1.0], dtype=ember.float64, device=autodiff_device))
    assert x.grad.tolist() == [2.0, 2.0, -6.0]


def test_backward_of_non_scalar_needs_gradient(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    with pytest.raises(AutodiffError):
        (x * 2).backward()
    with pytest.raises(ShapeError):
        (x * 2).backward(gradient=ember.ones(3, dtype=ember.float64, device=autodiff_device))


def test_requires_grad_propagation(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    c = ember.tensor([3.0, 4.0], dtype=ember.float64, device=autodiff_device)
    assert x.requires_grad and x.is_leaf and x.grad is None
    assert not c.requires_grad
    assert (x + c).requires_grad and (c * x).requires_grad and x[0].requires_grad
    assert x.sum().requires_grad and (x @ c).requires_grad and ember.cat([c, x]).requires_grad
    assert not (c + 1).requires_grad and not c.exp().requires_grad
    y = x * 2
    assert not y.is_leaf
    assert not (x > 1).requires_grad and not x.argmax().requires_grad
    r = c.requires_grad_()
    assert r is c and c.requires_grad and c.is_leaf
    c.requires_grad_(False)
    assert not c.requires_grad


def test_non_leaf_grad_is_none(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf"):  # as torch
        assert y.grad is None
    assert x.grad.tolist() == [2.0, 2.0]


def test_no_grad(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    with ember.no_grad():
        y = x * 2
        z = (x.exp() + y).sum()
    assert not y.requires_grad and not z.requires_grad
    with pytest.raises(AutodiffError):
        z.backward()
    w = x * 3  # recording resumes after the block
    assert w.requires_grad
    w.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_no_grad_as_decorator(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)

    @ember.no_grad()
    def f(t: ember.Tensor) -> ember.Tensor:
        return t * 2

    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_detach(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    d = x.detach()
    assert not d.requires_grad and d.tolist() == [1.0, 2.0]
    assert d.device == autodiff_device
    y = (x * 2).detach() * x  # gradient flows through the second factor only
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_inplace_on_leaf_requiring_grad_raises(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    for op in (lambda t: t.add_(1.0), lambda t: t.mul_(2.0), lambda t: t.zero_(), lambda t: t.fill_(3.0),
               lambda t: t.copy_(ember.zeros(2, dtype=ember.float64, device=autodiff_device))):
        with pytest.raises(AutodiffError):
            op(x)
        assert x.tolist() == [1.0, 2.0] and x.requires_grad and x.is_leaf
    with pytest.raises(AutodiffError):
        x[0] = 5.0
    assert x.tolist() == [1.0, 2.0]


def test_inplace_on_leaf_under_no_grad_is_an_update(autodiff_device: ember.Device) -> None:
    """The optimizer step: ``with no_grad(): w.sub_(lr * w.grad)`` keeps w a leaf."""
    w = leaf([1.0, -2.0], autodiff_device)
    (w * w).sum().backward()
    with ember.no_grad():
        w.sub_(0.25 * w.grad)
    assert w.tolist() == [0.5, -1.0]
    assert w.requires_grad and w.is_leaf
    w.grad = None
    (w * w).sum().backward()
    assert w.grad.tolist() == [1.0, -2.0]


def test_inplace_on_non_leaf_is_recorded(autodiff_device: ember.Device) -> None:
    x = leaf([1.0, 2.0], autodiff_device)
    y = x * 1.0
    y.mul_(x)  # y = x * x
    y.add_(x)  # y = x * x + x
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 5.0]


def test_backward_through_integer_tensors_raises(autodiff_device: ember.Device) -> None:
    x = leaf([1.5, 2.5], autodiff_device)
    n = (x * 2).long()
    assert name_of(n.dtype) == "int64" and not n.requires_grad
    with pytest.raises(AutodiffError):
        n.sum().backward()
    with pytest.raises(AutodiffError):
        ember.tensor([1, 2], device=autodiff_device, requires_grad=True)
    with pytest.raises(AutodiffError):
        ember.tensor([1, 2], device=autodiff_device).requires_grad_()


def test_backward_of_tensor_not_requiring_grad_raises(autodiff_device: ember.Device) -> None:
    c = ember.tensor([1.0, 2.0], device=autodiff_device)
    with pytest.raises(AutodiffError):
        c.sum().backward()


def test_training_loop_converges(autodiff_device: ember.Device, rng: np.random.Generator) -> None:
    """A few steps of gradient descent on least squares reach the numpy solution."""
    a = rng.standard_normal((20, 3))
    b = rng.standard_normal(20)
    A = ember.tensor(a, device=autodiff_device)
    B = ember.tensor(b, device=autodiff_device)
    w = ember.zeros(3, dtype=ember.float64, device=autodiff_device, requires_grad=True)
    lr = float(1.0 / np.linalg.norm(a, 2) ** 2)
    for _ in range(300):
        loss = ((A @ w - B) ** 2).sum() * 0.5
        w.grad = None
        loss.backward()
        with ember.no_grad():
            w.sub_(lr * w.grad)
    np.testing.assert_allclose(read(w), np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-4, atol=1e-6)


def test_balanced_checkpointing_retains_fewer_bytes(autodiff_none_device: ember.Device,
                                                    rng: np.random.Generator) -> None:
    """Balanced recomputes elementwise results in backward instead of keeping them: the same
    gradients from a smaller retained graph."""
    x0 = rng.standard_normal((64, 64))
    grads, retained = [], []
    for dev in (autodiff_none_device, autodiff_none_device.inner().autodiff(checkpointing="balanced")):
        x = ember.tensor(x0, device=dev, requires_grad=True)
        y = x
        for _ in range(6):
            y = (y.sigmoid() * 2.0 - 0.5).tanh() * y.exp().clamp(max=3.0)
        loss = y.sum()
        retained.append(loss.retained_bytes())
        loss.backward()
        grads.append(read(x.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-14)
    assert retained[0] > 0, "no retained bytes reported for checkpointing='none'"
    assert retained[1] < retained[0], f"balanced retains {retained[1]} bytes, none {retained[0]}"
