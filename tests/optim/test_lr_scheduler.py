"""ember.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning-rate (and
momentum) sequences over 50 steps, to 1e-12 relative; state_dict round trips; errors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import ember
from ember import optim
from ember.optim import lr_scheduler as E

T = torch.optim.lr_scheduler
STEPS = 50


def _pair(kind: str = "sgd", groups: int = 2) -> tuple[optim.Optimizer, torch.optim.Optimizer]:
    ep = [ember.tensor([1.0], requires_grad=True) for _ in range(groups)]
    tp = [torch.tensor([1.0], requires_grad=True) for _ in range(groups)]
    lrs = [0.1, 0.03][:groups]
    if kind == "adam":
        return (optim.Adam([{"params": [p], "lr": lr} for p, lr in zip(ep, lrs)]),
                torch.optim.Adam([{"params": [p], "lr": lr} for p, lr in zip(tp, lrs)]))
    return (optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ep, lrs)], momentum=0.9),
            torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(tp, lrs)], momentum=0.9))


def _close(a: list[float], b: list[float]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == pytest.approx(y, rel=1e-12, abs=1e-300), (a, b)


def _lam(e: int) -> float:
    return 0.95**e


# name -> (make(ember or torch module, optimizer), optimizer kind)
SCHEDULES: dict[str, tuple[Callable[[Any, Any], Any], str]] = {
    "lambda": (lambda m, o: m.LambdaLR(o, _lam), "sgd"),
    "lambda-per-group": (lambda m, o: m.LambdaLR(o, [_lam, lambda e: 1.0 / (1 + e)]), "sgd"),
    "multiplicative": (lambda m, o: m.MultiplicativeLR(o, lambda e: 0.97), "sgd"),
    "step": (lambda m, o: m.StepLR(o, step_size=7, gamma=0.5), "sgd"),
    "multistep": (lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3), "sgd"),
    "constant": (lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=9), "sgd"),
    "linear": (lambda m, o: m.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=17), "sgd"),
    "exponential": (lambda m, o: m.ExponentialLR(o, gamma=0.93), "sgd"),
    "cosine": (lambda m, o: m.CosineAnnealingLR(o, T_max=12, eta_min=0.001), "sgd"),
    "warm-restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.002), "sgd"),
    "polynomial": (lambda m, o: m.PolynomialLR(o, total_iters=30, power=2.0), "sgd"),
    "onecycle-cos": (lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=STEPS + 1), "sgd"),
    "onecycle-linear-3phase-adam": (lambda m, o: m.OneCycleLR(o, max_lr=0.2, total_steps=STEPS + 1,
                                                              anneal_strategy="linear", three_phase=True,
                                                              pct_start=0.25), "adam"),
    "onecycle-epochs-nomom": (lambda m, o: m.OneCycleLR(o, max_lr=0.3, epochs=5, steps_per_epoch=11,
                                                        cycle_momentum=False, div_factor=10.0), "sgd"),
    "sequential": (lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.2, total_iters=5),
                                                  m.CosineAnnealingLR(o, T_max=20),
                                                  m.ExponentialLR(o, 0.9)], milestones=[5, 25]), "sgd"),
    "chained": (lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.5, total_iters=4),
                                                m.ExponentialLR(o, 0.95), m.StepLR(o, 10, 0.5)]), "sgd"),
}


def _drive(sched: Any, opt: Any) -> list[list[float]]:
    seq = []
    for _ in range(STEPS):
        opt.step()
        sched.step()
        groups = opt.param_groups
        seq.append(sched.get_last_lr() + [g["lr"] for g in groups]
                   + [g.get("momentum", g.get("betas", (0.0,))[0]) for g in groups])
    return seq


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_sequence_matches_torch(name: str) -> None:
    make, kind = SCHEDULES[name]
    eo, to = _pair(kind)
    es, ts = make(E, eo), make(T, to)
    _close(es.get_last_lr(), ts.get_last_lr())  # the initial step
    for a, b in zip(_drive(es, eo), _drive(ts, to)):
        _close(a, b)
    if "initial_lr" in to.param_groups[0]:
        _close([g["initial_lr"] for g in eo.param_groups], [g["initial_lr"] for g in to.param_groups])


@pytest.mark.parametrize("name", ["step", "cosine", "onecycle-cos", "sequential", "warm-restarts", "lambda"])
def test_state_dict_resumes(name: str) -> None:
    """Stop after 20 steps, restore optimizer and scheduler into fresh objects, continue: the
    sequence equals an uninterrupted run's."""
    make, kind = SCHEDULES[name]
    eo, _ = _pair(kind)
    es = make(E, eo)
    full = _drive(es, eo)
    eo1, _ = _pair(kind)
    es1 = make(E, eo1)
    for _ in range(20):
        eo1.step()
        es1.step()
    o_sd, s_sd = eo1.state_dict(), es1.state_dict()
    eo2, _ = _pair(kind)
    es2 = make(E, eo2)
    eo2.load_state_dict(o_sd)
    es2.load_state_dict(s_sd)
    rest = []
    for _ in range(STEPS - 20):
        eo2.step()
        es2.step()
        groups = eo2.param_groups
        rest.append(es2.get_last_lr() + [g["lr"] for g in groups]
                    + [g.get("momentum", g.get("betas", (0.0,))[0]) for g in groups])
    for a, b in zip(rest, full[20:]):
        _close(a, b)


@pytest.mark.parametrize("opts", [
    dict(),
    dict(mode="max", factor=0.5, patience=2, threshold=0.01, threshold_mode="abs", cooldown=3, min_lr=[0.01, 0.02]),
    dict(mode="min", factor=0.2, patience=0, threshold=0.1, cooldown=1, min_lr=0.004, eps=1e-3),
])
def test_reduce_on_plateau_matches_torch(opts: dict[str, Any]) -> None:
    rng = np.random.default_rng(3)
    metrics = np.cumsum(rng.standard_normal(80) * 0.3) + np.linspace(0, 2, 80) * rng.choice([-1, 1])
    eo, to = _pair()
    es, ts = E.ReduceLROnPlateau(eo, **opts), T.ReduceLROnPlateau(to, **opts)
    for m in metrics:
        if m > 0:  # a 0-d tensor is a metric too (float32 on both sides)
            es.step(ember.tensor(float(m)))
            ts.step(torch.tensor(float(m)))
        else:
            es.step(float(m))
            ts.step(float(m))
        _close(es.get_last_lr(), ts.get_last_lr())
        _close([g["lr"] for g in eo.param_groups], [g["lr"] for g in to.param_groups])
    assert es.num_bad_epochs == ts.num_bad_epochs and es.best == ts.best
    es2 = E.ReduceLROnPlateau(_pair()[0], **opts)
    es2.load_state_dict(es.state_dict())
    assert es2.best == es.best and es2.cooldown_counter == es.cooldown_counter


def test_closed_form_with_epoch_argument() -> None:
    eo, to = _pair()
    es, ts = E.StepLR(eo, 3, 0.5), T.StepLR(to, 3, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in (4, 9, 2):
            es.step(e)
            ts.step(e)
            _close(es.get_last_lr(), ts.get_last_lr())


def test_errors_and_warnings() -> None:
    eo, _ = _pair()
    with pytest.raises(TypeError, match="not an Optimizer"):
        E.StepLR(object(), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        E.ConstantLR(eo, factor=2.0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        E.ReduceLROnPlateau(eo, factor=1.0)
    with pytest.raises(ValueError, match="total_steps"):
        E.OneCycleLR(eo, 0.1)
    with pytest.raises(ValueError, match="Tried to step"):
        s = E.OneCycleLR(eo, 0.1, total_steps=2)
        for _ in range(3):
            eo.step()
            s.step()
    fresh, _ = _pair()
    with pytest.raises(KeyError, match="initial_lr"):
        E.StepLR(fresh, 3, last_epoch=4)
    with pytest.raises(ValueError, match="milestone"):
        E.SequentialLR(fresh, [E.StepLR(fresh, 3)], milestones=[2])
    other, _ = _pair()
    with pytest.raises(ValueError, match="same optimizer"):
        E.ChainedScheduler([E.StepLR(fresh, 3), E.StepLR(other, 3)])
    s = E.ExponentialLR(fresh, 0.9)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
