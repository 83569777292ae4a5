"""nn.init: distribution moments and bounds, the same values on every device for one seed,
in-place rebinding that keeps the tensor (a leaf with its grad), calculate_gain and the fan
computation equal to torch's, the structured initialisers equal to torch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.init as tinit

import ember
import ember.nn as enn
from ember import Device
from ember.nn import init


def test_calculate_gain_equals_torch():
    for nl in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d", "sigmoid", "tanh", "relu", "selu"):
        assert init.calculate_gain(nl) == pytest.approx(tinit.calculate_gain(nl))
    for a in (None, 0, 0.2, math.sqrt(5)):
        assert init.calculate_gain("leaky_relu", a) == pytest.approx(tinit.calculate_gain("leaky_relu", a))
    with pytest.raises(ValueError):
        init.calculate_gain("nope")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", "x")


def test_fans_equal_torch():
    for shape in ((3, 5), (4, 2, 3), (6, 3, 2, 2), (2, 2, 1, 3, 3)):
        t = ember.zeros(shape)
        assert init._calculate_fan_in_and_fan_out(t) == tinit._calculate_fan_in_and_fan_out(torch.zeros(shape))
    with pytest.raises(ValueError):
        init._calculate_fan_in_and_fan_out(ember.zeros(3))


def _moments(a):
    return float(np.mean(a)), float(np.std(a))


def test_distributions():
    ember.manual_seed(3)
    n = (200, 300)
    w = init.uniform_(ember.empty(n), -0.5, 1.5).numpy()
    assert w.min() >= -0.5 and w.max() < 1.5
    m, s = _moments(w)
    assert abs(m - 0.5) < 0.01 and abs(s - 2 / math.sqrt(12)) < 0.01
    m, s = _moments(init.normal_(ember.empty(n), 1.0, 0.3).numpy())
    assert abs(m - 1.0) < 0.005 and abs(s - 0.3) < 0.005
    t = ember.empty(n)
    bound = math.sqrt(6 / (n[0] + n[1]))
    w = init.xavier_uniform_(t).numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    m, s = _moments(init.xavier_normal_(t, gain=2.0).numpy())
    assert abs(s - 2.0 * math.sqrt(2 / (n[0] + n[1]))) < 0.002
    w = init.kaiming_uniform_(t, a=math.sqrt(5)).numpy()
    bound = math.sqrt(3) * math.sqrt(2 / (1 + 5)) / math.sqrt(n[1])
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    m, s = _moments(init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu").numpy())
    assert abs(s - math.sqrt(2) / math.sqrt(n[0])) < 0.002 and abs(m) < 0.002
    w = init.trunc_normal_(t, mean=0.5, std=1.0, a=-0.5, b=1.0).numpy()
    assert w.min() >= -0.5 and w.max() <= 1.0
    # the mean of N(0.5, 1) truncated to [-0.5, 1]
    from scipy.stats import truncnorm

    assert abs(w.mean() - truncnorm.mean(-1.0, 0.5, loc=0.5)) < 0.01
    assert abs(w.std() - truncnorm.std(-1.0, 0.5, loc=0.5)) < 0.01


def test_structured_initialisers():
    ember.manual_seed(0)
    for shape in ((4, 6), (6, 4), (3, 2, 2)):
        q = init.orthogonal_(ember.empty(shape), gain=2.0).numpy().reshape(shape[0], -1)
        if q.shape[0] <= q.shape[1]:
            np.testing.assert_allclose(q @ q.T, 4 * np.eye(q.shape[0]), atol=1e-5)
        else:
            np.testing.assert_allclose(q.T @ q, 4 * np.eye(q.shape[1]), atol=1e-5)
    np.testing.assert_array_equal(init.eye_(ember.empty(3, 5)).numpy(), tinit.eye_(torch.empty(3, 5)).numpy())
    for shape, groups in (((4, 2, 3), 2), ((2, 2, 3, 3), 1), ((2, 3, 3, 3, 3), 1)):
        np.testing.assert_array_equal(init.dirac_(ember.empty(shape), groups).numpy(),
                                      tinit.dirac_(torch.empty(shape), groups).numpy())
    np.testing.assert_array_equal(init.constant_(ember.empty(2, 2), 0.25).numpy(), 0.25)
    assert init.ones_(ember.empty(3)).numpy().tolist() == [1, 1, 1]
    s = init.sparse_(ember.empty(10, 4), 0.3).numpy()
    assert np.all((s == 0).sum(0) == 3)


def test_in_place_keeps_parameter_and_grad():
    lin = enn.Linear(3, 2)
    w = lin.weight
    lin(ember.randn(4, 3)).sum().backward()
    g = w.grad.numpy().copy()
    out = init.normal_(w)
    assert out is w and lin.weight is w and w.is_leaf and w.requires_grad
    np.testing.assert_array_equal(w.grad.numpy(), g)
    with pytest.raises(NotImplementedError):
        init.uniform_(w, generator=object())


@pytest.mark.parametrize("fn", [
    lambda t: init.uniform_(t, -2, 3), lambda t: init.normal_(t, 0.5, 2.0), lambda t: init.kaiming_uniform_(t),
    lambda t: init.xavier_normal_(t), lambda t: init.trunc_normal_(t, std=0.5), lambda t: init.orthogonal_(t),
], ids=["uniform", "normal", "kaiming_uniform", "xavier_normal", "trunc_normal", "orthogonal"])
def test_same_values_on_every_device(fn, device):
    ember.manual_seed(2024)
    ref = fn(ember.empty(5, 7, device=Device.flex())).numpy()
    ember.manual_seed(2024)
    got = fn(ember.empty(5, 7, device=device)).numpy()
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-7)


def test_layer_default_inits_follow_torch():
    ember.manual_seed(1)
    lin = enn.Linear(50, 40)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) gives the same bound as the bias
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.abs(b).max() <= bound
    emb = enn.Embedding(300, 20)
    assert abs(float(emb.weight.numpy().std()) - 1.0) < 0.05
    ln = enn.LayerNorm(4)
    assert ln.weight.numpy().tolist() == [1] * 4 and ln.bias.numpy().tolist() == [0] * 4
    assert enn.PReLU(3).weight.numpy().tolist() == pytest.approx([0.25] * 3)
    bl = enn.Bilinear(9, 3, 2)
    assert np.abs(bl.weight.numpy()).max() <= 1 / 3
