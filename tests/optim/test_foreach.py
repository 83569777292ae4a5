"""The multi-tensor step (``ember/optim/_foreach.py``) and the flatten-cat fuser it relies on.

The flat buffers are a cache of the per-parameter tensors; these tests change what a bucket
holds between steps in every way torch allows (parameters joining and leaving, a parameter
or a state tensor changed in place, a duplicate parameter, odd shapes, two dtypes in a group)
and compare every step with torch. Also: state tensors stay live, the launches of a real
training step (strided weight gradients) on the fused CPU device and on wgpu, and the
``flat_cat`` fuser's values and launches.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

import ember
from ember import Device, optim, tracing
from ember.device import DeviceKind

SHAPES = [(5, 4), (4,), (), (0, 3), (3, 2, 2)]


def _slow(dev: Device) -> bool:
    return "wgpu" in repr(dev.spec)


def _rel(a: Any, b: Any) -> float:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def _compare(ep: list[ember.Tensor], tp: list[torch.Tensor], eo: optim.Optimizer, to: Any, what: str) -> None:
    """Parameters and every state entry equal torch's to 1e-6 of the entry's largest magnitude
    over all parameters (a 0-d entry alone would be held to its own rounding: centered RMSprop
    cancels digits there, and torch's fused multiply-adds round once where ember rounds twice)."""
    def close(es: list[np.ndarray], ts: list[np.ndarray], where: Any) -> None:
        assert _rel(np.concatenate([e.reshape(-1) for e in es]), np.concatenate([t.reshape(-1) for t in ts])) <= 1e-6, \
            where

    close([p.numpy() for p in ep], [q.detach().numpy() for q in tp], (what, "params"))
    for p, q in zip(ep, tp):
        assert list(eo.state[p]) == list(to.state[q]), what
    for k in {k for q in tp for k in to.state[q]}:
        have = [(eo.state[p][k], to.state[q][k]) for p, q in zip(ep, tp) if k in to.state[q]]
        close([e.numpy() for e, _ in have], [t.numpy() for _, t in have], (what, k))


CASES = {
    "adam-amsgrad": (optim.Adam, torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.01)),
    "sgd-momentum": (optim.SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
    "adagrad": (optim.Adagrad, torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01)),
    "rmsprop": (optim.RMSprop, torch.optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_buckets_follow_every_change_like_torch(autodiff_device: Device, rng: np.random.Generator,
                                                case: str) -> None:
    """12 steps over 0-d, empty and ordinary parameters: one joins late (its own step count),
    one skips steps, a parameter and a state tensor are changed in place between steps, the
    optimizer's state is reloaded mid-run; parameters and state equal torch's at every step."""
    if _slow(autodiff_device) and case != "adam-amsgrad":
        pytest.skip("wgpu.cpu runs one case")
    ecls, tcls, opts = CASES[case]
    dev = autodiff_device
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    ep = [ember.tensor(a, device=dev, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    eo, to = ecls(ep, **opts), tcls(tp, **opts)
    objs = [id(p) for p in ep]
    for step in range(12):
        for i, (p, q) in enumerate(zip(ep, tp)):
            skip = (i == 2 and step < 4) or (i == 0 and step in (6, 7))
            g = rng.standard_normal(SHAPES[i]).astype(np.float32)
            p.grad = None if skip else ember.tensor(g, device=dev)
            q.grad = None if skip else torch.tensor(g)
        if step == 5:  # the user scales a parameter in place between steps
            with ember.no_grad():
                ep[1].mul_(0.5)
            with torch.no_grad():
                tp[1].mul_(0.5)
        if step == 8:  # ... and changes a state tensor in place
            name = next(k for k in to.state[tp[4]] if k != "step")
            eo.state[ep[4]][name].mul_(0.25)
            to.state[tp[4]][name].mul_(0.25)
        if step == 10:  # the optimizer's own state dict loaded back mid-run
            eo.load_state_dict(eo.state_dict())
        eo.step()
        to.step()
        _compare(ep, tp, eo, to, f"step {step}")
    assert [id(p) for p in ep] == objs and all(p.is_leaf and p.requires_grad for p in ep)


def test_state_tensors_are_live_and_steps_counted(rng: np.random.Generator) -> None:
    """A state tensor taken from ``state`` or ``state_dict()`` keeps following the steps (as
    torch's live tensors); every parameter has its own ``step`` tensor, host float32."""
    dev = Device.cpu().autodiff()
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32), device=dev, requires_grad=True)
          for s in [(3, 4), (4,)]]
    qs = [torch.tensor(p.numpy(), requires_grad=True) for p in ps]
    eo, to = optim.Adam(ps, lr=0.01), torch.optim.Adam(qs, lr=0.01)
    held = None
    for step in range(6):
        for p, q in zip(ps, qs):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, q.grad = ember.tensor(g, device=dev), torch.tensor(g)
        eo.step()
        to.step()
        if step == 1:
            held = (eo.state[ps[0]]["exp_avg"], eo.state_dict()["state"][1]["exp_avg_sq"], eo.state[ps[1]]["step"])
    assert held is not None
    assert _rel(held[0].numpy(), to.state[qs[0]]["exp_avg"].numpy()) <= 1e-6
    assert _rel(held[1].numpy(), to.state[qs[1]]["exp_avg_sq"].numpy()) <= 1e-6
    assert held[2].item() == 6.0 and held[2].dtype is ember.float32 and held[2].device == Device.flex()
    s0, s1 = eo.state[ps[0]]["step"], eo.state[ps[1]]["step"]
    assert s0 is not s1
    s0.add_(10.0)  # one parameter's count changed in place: the other keeps its own
    assert s1.item() == 6.0 and s0.item() == 16.0


def test_two_dtypes_and_a_duplicate_in_one_group(rng: np.random.Generator) -> None:
    """float32 and float64 parameters in one group (a bucket each) and a parameter listed
    twice (torch updates it twice), against torch."""
    for dev in (Device.flex().autodiff(), Device.cpu().autodiff()):
        arrs = [rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(4),
                rng.standard_normal(5).astype(np.float32)]
        ep = [ember.tensor(a, device=dev, requires_grad=True) for a in arrs]
        tp = [torch.tensor(a, requires_grad=True) for a in arrs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            eo = optim.Adam(ep + [ep[0]], lr=0.01)
            to = torch.optim.Adam(tp + [tp[0]], lr=0.01)
        for _ in range(5):
            for p, q in zip(ep, tp):
                g = rng.standard_normal(p.shape).astype(np.float32 if p.dtype is ember.float32 else np.float64)
                p.grad, q.grad = ember.tensor(g, device=dev), torch.tensor(g)
            eo.step()
            to.step()
        assert ep[1].dtype is ember.float64
        _compare(ep, tp, eo, to, repr(dev))


def _mlp_step_launches(dev: Device, make: Any, clip: bool) -> tuple[list[int], list[int]]:
    """Launches of ``step()`` (and of ``clip_grad_norm_``) after a real backward of a
    64-32-10 MLP: its weight gradients are strided (transposed) views."""
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(64, 32), ember.nn.ReLU(), ember.nn.Linear(32, 10)).to(dev)
    o = make(model.parameters())
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((16, 64)).astype(np.float32), device=dev)
    y = ember.tensor(rng.integers(0, 10, 16), device=dev)
    steps, clips = [], []
    for _ in range(4):
        o.zero_grad()
        ember.nn.functional.cross_entropy(model(x), y).backward()
        ember.sync(dev)
        if clip:
            with tracing.capture() as spans:
                ember.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                ember.sync(dev)
            clips.append(sum(s.name == "launch" for s in spans))
        with tracing.capture() as spans:
            o.step()
            ember.sync(dev)
        steps.append(sum(s.name == "launch" for s in spans))
    return steps, clips


@pytest.mark.parametrize("kind", ["cpu", "wgpu"])
def test_real_step_is_two_launches(kind: str) -> None:
    """Issue 20's bound with the gradients a backward leaves (strided weight gradients): a
    step of AdamW and of SGD with momentum is 2 launches (the gather, the update) on the fused
    CPU device and on wgpu; ``clip_grad_norm_`` before it at most 6."""
    dev = Device.cpu().autodiff() if kind == "cpu" else Device.wgpu(DeviceKind.cpu()).autodiff()
    steps, clips = _mlp_step_launches(dev, lambda ps: optim.AdamW(ps, lr=1e-3), clip=True)
    assert all(n <= 2 for n in steps[1:]), steps
    assert all(n <= 6 for n in clips[1:]), clips
    if kind == "cpu":
        steps, _ = _mlp_step_launches(dev, lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9), clip=False)
        assert all(n <= 2 for n in steps[1:]), steps


@pytest.mark.parametrize("kind", ["cpu", "wgpu"])
def test_flat_cat_of_any_layouts(kind: str, rng: np.random.Generator) -> None:
    """``cat([t.reshape(-1) ...])`` over transposed, permuted, offset, 0-d, empty and
    contiguous pieces equals numpy's; one launch on the fused CPU device, and on wgpu (which
    binds few arrays per kernel) as many as its bindings need for 20 pieces."""
    dev = Device.cpu() if kind == "cpu" else Device.wgpu(DeviceKind.cpu())
    base = [rng.standard_normal(s).astype(np.float32) for s in [(4, 6), (2, 3, 4), (7, 5), (), (0, 3), (9,)]]
    ts = [ember.tensor(a, device=dev) for a in base]
    ember.sync(dev)
    with tracing.capture() as spans:
        pieces = [ts[0].T, ts[1].permute(2, 0, 1), ts[2][1:6, 2:], ts[3], ts[4], ts[5]]
        out = ember.cat([t.reshape(-1) for t in pieces]).numpy()
    want = np.concatenate([base[0].T.reshape(-1), base[1].transpose(2, 0, 1).reshape(-1),
                           base[2][1:6, 2:].reshape(-1), base[3].reshape(-1), base[4].reshape(-1), base[5]])
    np.testing.assert_array_equal(out, want)
    if kind == "cpu":
        assert [s.fields.get("kernel", "").split("_f32")[0] for s in spans if s.name == "launch"] == ["flat_pieces"]
    many = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(20)]
    mt = [ember.tensor(a, device=dev) for a in many]
    ember.sync(dev)
    out = ember.cat([t.T.reshape(-1) for t in mt]).numpy()
    np.testing.assert_array_equal(out, np.concatenate([a.T.reshape(-1) for a in many]))


def test_lr_schedule_and_a_new_group_reach_every_step(rng: np.random.Generator) -> None:
    """On the fused CPU device (whose drains replay recorded plans) the learning rate changed
    at every step by a scheduler and a group added mid-run with ``add_param_group`` give
    torch's parameters: the floats of a step reach its kernels, nothing stale is replayed."""
    dev = Device.cpu().autodiff()
    arrs = [rng.standard_normal(s).astype(np.float32) for s in [(6, 3), (3,), (2, 2)]]
    ep = [ember.tensor(a, device=dev, requires_grad=True) for a in arrs]
    tp = [torch.tensor(a, requires_grad=True) for a in arrs]
    eo = optim.AdamW(ep[:2], lr=0.05, weight_decay=0.1)
    to = torch.optim.AdamW(tp[:2], lr=0.05, weight_decay=0.1)
    es = optim.lr_scheduler.ExponentialLR(eo, gamma=0.7)
    ts = torch.optim.lr_scheduler.ExponentialLR(to, gamma=0.7)
    for step in range(8):
        if step == 3:
            eo.add_param_group({"params": [ep[2]], "lr": 0.2})
            to.add_param_group({"params": [tp[2]], "lr": 0.2})
        for p, q in zip(ep, tp):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, q.grad = ember.tensor(g, device=dev), torch.tensor(g)
        eo.step()
        to.step()
        es.step()
        ts.step()
        _compare(ep, tp, eo, to, f"step {step}")
