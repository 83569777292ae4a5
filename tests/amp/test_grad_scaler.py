"""``ember.amp.GradScaler`` against ``torch.amp.GradScaler("cpu")``: skipped steps, the scale and
growth-tracker sequence with injected infs, unscale_ then clip, the stage errors, the state dict,
and that checking all gradients costs one device read."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.amp import GradScaler


class _SGD:
    """A stand-in optimizer with torch's interface (``param_groups`` and ``step()``)."""

    def __init__(self, params, lr: float) -> None:
        self.param_groups = [{"params": list(params), "lr": lr}]
        self.steps = 0

    def step(self):
        with ember.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p -= group["lr"] * p.grad
        self.steps += 1
        return "stepped"

    def zero_grad(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


class _TorchSGD:
    """The same stand-in for torch tensors (torch.optim's first step imports torch._dynamo: ~5 s)."""

    def __init__(self, params, lr: float) -> None:
        self.param_groups = [{"params": list(params), "lr": lr}]

    def step(self):
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p -= group["lr"] * p.grad

    def zero_grad(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


def _model(rng, device):
    """Two float32 parameters and a batch, as ember tensors on ``device`` and as torch tensors."""
    w = rng.standard_normal((4, 3), dtype=np.float32)
    b = rng.standard_normal(3, dtype=np.float32)
    x = rng.standard_normal((5, 4), dtype=np.float32)
    ep = [ember.tensor(w, device=device, requires_grad=True), ember.tensor(b, device=device, requires_grad=True)]
    tp = [torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)]
    return ep, tp, ember.tensor(x, device=device), torch.tensor(x)


def _loss(params, x):
    w, b = params
    return ((x @ w + b) ** 2).mean()


def test_skips_the_step_only_with_inf_or_nan_grads(rng):
    ep, _, x, _ = _model(rng, ember.Device.flex().autodiff())
    opt = _SGD(ep, 0.1)
    scaler = GradScaler("cpu", init_scale=8.0)
    assert scaler.is_enabled() and scaler.get_scale() == 8.0
    before = [p.numpy().copy() for p in ep]
    scaler.scale(_loss(ep, x)).backward()
    assert scaler.step(opt) == "stepped" and opt.steps == 1
    scaler.update()
    assert scaler.get_scale() == 8.0  # growth_interval (2000) not reached
    assert not np.array_equal(ep[0].numpy(), before[0])
    for bad in (float("inf"), float("nan")):
        opt.zero_grad()
        scaler.scale(_loss(ep, x)).backward()
        g = ep[1].grad.numpy().copy()
        g[0] = bad
        ep[1].grad = ember.tensor(g)
        kept = [p.numpy().copy() for p in ep]
        scale = scaler.get_scale()
        assert scaler.step(opt) is None and opt.steps == 1  # skipped
        scaler.update()
        assert scaler.get_scale() == scale * 0.5
        for p, k in zip(ep, kept):
            np.testing.assert_array_equal(p.numpy(), k)


def test_scale_sequence_and_parameters_match_torch(scaler_device, rng):
    """Twelve iterations with infs injected at chosen ones, non-default factors and a short
    growth interval: the skipped steps, the scale, the growth tracker and the parameters match
    torch's GradScaler driving the same SGD on torch tensors."""
    ep, tp, ex, tx = _model(rng, scaler_device)
    kw = dict(init_scale=3.0, growth_factor=1.7, backoff_factor=0.3, growth_interval=3)
    es, ts = GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    eopt, topt = _SGD(ep, 0.05), _TorchSGD(tp, 0.05)
    infs = {1, 5, 6, 10}
    for it in range(12):
        eopt.zero_grad()
        topt.zero_grad()
        es.scale(_loss(ep, ex)).backward()
        ts.scale(_loss(tp, tx)).backward()
        if it in infs:
            g = ep[0].grad.numpy().copy()
            g[it % 4, 0] = np.inf if it % 2 else np.nan
            ep[0].grad = ember.tensor(g, device=scaler_device)
            tp[0].grad[it % 4, 0] = float(g[it % 4, 0])
        steps = eopt.steps
        es.step(eopt)
        ts.step(topt)
        assert eopt.steps == steps + (it not in infs)
        es.update()
        ts.update()
        assert es.get_scale() == ts.get_scale(), it
        assert es._get_growth_tracker() == ts._get_growth_tracker(), it
        for e, t in zip(ep, tp):
            np.testing.assert_allclose(e.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_unscale_then_clip(rng):
    ep, _, x, _ = _model(rng, ember.Device.flex().autodiff())
    ref = [p.detach().clone().requires_grad_() for p in ep]
    _loss(ref, x).backward()
    opt = _SGD(ep, 0.1)
    scaler = GradScaler("cpu", init_scale=2.0**10)
    scaler.scale(_loss(ep, x)).backward()
    np.testing.assert_allclose(ep[0].grad.numpy(), 2.0**10 * ref[0].grad.numpy(), rtol=1e-6)
    scaler.unscale_(opt)
    for p, r in zip(ep, ref):  # the true gradients again
        np.testing.assert_allclose(p.grad.numpy(), r.grad.numpy(), rtol=1e-6, atol=1e-7)
    # clip the total norm to 0.5 (as nn.utils.clip_grad_norm_), then step: no second unscale
    total = float(np.sqrt(sum(float((p.grad * p.grad).sum().item()) for p in ep)))
    coef = min(1.0, 0.5 / (total + 1e-6))
    for p in ep:
        p.grad = p.grad * coef
    clipped = [p.grad.numpy().copy() for p in ep]
    before = [p.numpy().copy() for p in ep]
    assert scaler.step(opt) == "stepped"
    for p, b, g in zip(ep, before, clipped):
        np.testing.assert_allclose(p.numpy(), b - 0.1 * g, rtol=1e-6, atol=1e-7)
    scaler.update()


def test_stage_errors():
    p = ember.ones(3, requires_grad=True)
    opt = _SGD([p], 0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="growth factor must be > 1.0"):
        GradScaler(growth_factor=1.0)
    with pytest.raises(AssertionError, match="backoff factor must be < 1.0"):
        GradScaler(backoff_factor=1.0)
    scaler.scale(p.sum()).backward()
    with pytest.raises(AssertionError, match="No inf checks were recorded prior to update"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step"):
        scaler.unscale_(opt)
    scaler.update()
    scaler.update(new_scale=4.0)
    assert scaler.get_scale() == 4.0
    scaler.update(new_scale=ember.tensor(8.0))
    assert scaler.get_scale() == 8.0
    with pytest.raises(AssertionError, match="new_scale should be"):
        scaler.update(new_scale=ember.tensor([1.0, 2.0]))
    # an optimizer none of whose params has a gradient
    q = ember.ones(2, requires_grad=True)
    no_grads = _SGD([q], 0.1)  # (kept alive: the scaler keys its per-optimizer state by id, as torch)
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        scaler.step(no_grads)
    # float16 gradients cannot be unscaled (torch's rule)
    h = ember.ones(2, dtype=ember.float16, requires_grad=True)
    scaler.scale(h.sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(_SGD([h], 0.1))


def test_scale_outputs_and_disabled():
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b = ember.ones(2), ember.ones(2, dtype=ember.bfloat16)
    out = scaler.scale([a, (b, [a])])
    assert type(out) is list and type(out[1]) is tuple and type(out[1][1]) is list
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].dtype is ember.bfloat16 and out[1][1][0].tolist() == [4.0, 4.0]
    gen = scaler.scale(x for x in (a, a))
    assert [t.tolist() for t in gen] == [[4.0, 4.0]] * 2
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        scaler.scale(3.0)
    off = GradScaler("cpu", enabled=False)
    assert off.scale(a) is a and off.get_scale() == 1.0 and off.state_dict() == {} and not off.is_enabled()
    opt = _SGD([ember.ones(2, requires_grad=True)], 0.1)
    assert off.step(opt) == "stepped"
    off.unscale_(opt)
    off.update()
    off.load_state_dict({})


def test_state_dict_round_trip(rng):
    ep, _, x, _ = _model(rng, ember.Device.flex().autodiff())
    opt = _SGD(ep, 0.01)
    kw = dict(init_scale=16.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=4)
    scaler = GradScaler("cpu", **kw)

    def iterate(s, inf):
        opt.zero_grad()
        s.scale(_loss(ep, x)).backward()
        if inf:
            ep[0].grad = ep[0].grad * float("inf")
        s.step(opt)
        s.update()

    for inf in (False, True, False, False):
        iterate(scaler, inf)
    sd = scaler.state_dict()
    assert sd == {"scale": 4.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 4,
                  "_growth_tracker": 2}
    assert sd == torch_state(kw, (False, True, False, False))
    fresh = GradScaler("cpu")
    fresh.load_state_dict(sd)
    assert fresh.state_dict() == sd
    for inf in (False, False, True):
        iterate(scaler, inf)
        iterate(fresh, inf)
        assert fresh.state_dict() == scaler.state_dict()
    assert fresh.get_scale() == 12.0 * 0.25
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        GradScaler("cpu").load_state_dict({})


def torch_state(kw, infs):
    """torch's GradScaler state dict after iterations with the given inf pattern."""
    p = torch.ones(3, requires_grad=True)
    opt = _TorchSGD([p], 0.01)
    s = torch.amp.GradScaler("cpu", **kw)
    for inf in infs:
        opt.zero_grad()
        s.scale(p.sum()).backward()
        if inf:
            p.grad[0] = float("inf")
        s.step(opt)
        s.update()
    return s.state_dict()


def test_one_device_read_per_step(scaler_device, rng):
    """unscale_ reads nothing; step reads one bool however many gradients there are (one drain
    on a fused device); update reuses it."""
    params = [ember.tensor(rng.standard_normal(3, dtype=np.float32), device=scaler_device, requires_grad=True)
              for _ in range(4)]
    opt = _SGD(params, 0.1)
    scaler = GradScaler("cpu")
    scaler.scale(sum((p * p).sum() for p in params)).backward()
    scaler_device.sync()

    def reads(spans):
        return [s.name for s in spans
                if s.name == "drain" or (s.name == "into_data" and s.fields["layer"] == "dispatch")]

    with ember.tracing.capture() as spans:
        scaler.unscale_(opt)
    assert reads(spans) == []
    with ember.tracing.capture() as spans:
        assert scaler.step(opt) == "stepped"
        scaler.update()
    fused = scaler_device.inner().spec[0] == "cube" and scaler_device.inner().spec[3]
    assert reads(spans) == (["drain", "into_data"] if fused else ["into_data"])
