"""Property: a random Sequential stack of ember.nn layers gives the same outputs, input
gradients and parameter gradients on the fused CPU device (``Device.cpu().autodiff()``) as on
the reference (``Device.flex().autodiff()``)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
from ember import Device

REF = Device.flex().autodiff()
FUSED = Device.cpu().autodiff()

# width-preserving layers (the width w is fixed per example); Linear may change it
_ACTS = [nn.ReLU, nn.GELU, lambda: nn.GELU("tanh"), nn.SiLU, nn.Tanh, nn.Sigmoid, nn.LeakyReLU, nn.ELU, nn.Softplus,
         nn.Mish, nn.Hardswish, nn.Hardsigmoid, lambda: nn.Softmax(-1), lambda: nn.LogSoftmax(-1), nn.LogSigmoid]


@st.composite
def stacks(draw):
    width = draw(st.integers(2, 6))
    batch = draw(st.integers(1, 4))
    n_layers = draw(st.integers(1, 5))
    specs = []
    w = width
    for _ in range(n_layers):
        kind = draw(st.sampled_from(["linear", "act", "layernorm", "rmsnorm", "dropout", "prelu"]))
        if kind == "linear":
            out = draw(st.integers(2, 6))
            specs.append(("linear", w, out, draw(st.booleans())))
            w = out
        elif kind == "act":
            specs.append(("act", draw(st.integers(0, len(_ACTS) - 1))))
        else:
            specs.append((kind, w))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return width, batch, specs, seed


def _build(specs):
    layers = []
    for s in specs:
        if s[0] == "linear":
            layers.append(nn.Linear(s[1], s[2], bias=s[3]))
        elif s[0] == "act":
            layers.append(_ACTS[s[1]]())
        elif s[0] == "layernorm":
            layers.append(nn.LayerNorm(s[1]))
        elif s[0] == "rmsnorm":
            layers.append(nn.RMSNorm(s[1], eps=1e-5))
        elif s[0] == "dropout":
            layers.append(nn.Dropout(0.3))
        else:
            layers.append(nn.PReLU())
    return nn.Sequential(*layers)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_stack_fused_cpu_matches_flex(case):
    width, batch, specs, seed = case
    ember.manual_seed(seed)
    ref = _build(specs).to(REF).eval()  # eval: Dropout is the identity
    fused = _build(specs).to(FUSED).eval()
    fused.load_state_dict(ref.state_dict())
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    outs, grads = [], []
    for model, dev in ((ref, REF), (fused, FUSED)):
        xt = ember.tensor(x, device=dev, requires_grad=True)
        y = model(xt)
        g = ember.tensor(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(y.shape), device=dev)
        (y * g).sum().backward()
        outs.append(y.numpy())
        grads.append([xt.grad.numpy()] + [p.grad.numpy() for p in model.parameters()])
    scale = max(1.0, float(np.abs(outs[0]).max()))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-5 * scale)
    for a, b in zip(grads[1], grads[0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max())))
