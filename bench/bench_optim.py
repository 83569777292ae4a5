"""Optimizer steps on a fused device: kernel launches per ``step()`` and step time.

The model is the MLP of ``bench_flex.py`` (784-512-512-10: 6 parameters of 4+ shapes). Its
gradients are set to fresh realised tensors before every step (as a backward leaves them),
then one ``step()`` is queued and drained (``ember.sync``); the launches are the ``launch``
spans of ``ember.tracing.capture()`` around that, the time the median wall time of the same
without tracing. Also ``clip_grad_norm_`` over the same gradients.

    python bench/bench_optim.py            # Device.cpu().autodiff()
    python bench/bench_optim.py --device wgpu --steps 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember import Device, optim, tracing  # noqa: E402

SHAPES = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]

OPTIMIZERS: dict[str, Callable[[list[Any]], Any]] = {
    "Adam": lambda ps: optim.Adam(ps, lr=1e-3),
    "AdamW": lambda ps: optim.AdamW(ps, lr=1e-3),
    "SGD momentum": lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9),
    "SGD nesterov+wd": lambda ps: optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "RMSprop": lambda ps: optim.RMSprop(ps, lr=1e-3),
    "Adagrad": lambda ps: optim.Adagrad(ps, lr=1e-2),
    "Adamax": lambda ps: optim.Adamax(ps, lr=1e-3),
    "Lion": lambda ps: optim.Lion(ps, lr=1e-4),
}


def _device(name: str) -> Device:
    if name == "cpu":
        return Device.cpu().autodiff()
    if name == "wgpu":
        from ember.device import DeviceKind

        return Device.wgpu(DeviceKind.cpu()).autodiff()
    raise SystemExit(f"unknown device {name!r}")


def _grads(dev: Device, ps: list[Any], rng: np.random.Generator) -> None:
    for p in ps:
        p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32) * 0.01, device=dev)
    ember.sync(dev)


def measure(dev: Device, make: Callable[[list[Any]], Any], steps: int) -> tuple[int, int, float, float]:
    """(launches of the first step, launches per step in steady state, fastest and median step
    seconds: on a shared machine the fastest is the figure to compare)."""
    rng = np.random.default_rng(0)
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32) * 0.05, device=dev, requires_grad=True)
          for s in SHAPES]
    o = make(ps)
    counts = []
    for _ in range(3):
        _grads(dev, ps, rng)
        with tracing.capture() as spans:
            o.step()
            ember.sync(dev)
        counts.append(sum(1 for s in spans if s.name == "launch"))
    times = []
    for _ in range(steps):
        _grads(dev, ps, rng)
        t0 = time.perf_counter()
        o.step()
        ember.sync(dev)
        times.append(time.perf_counter() - t0)
    return counts[0], counts[-1], min(times), statistics.median(times)


def measure_clip(dev: Device, steps: int) -> tuple[int, float, float]:
    rng = np.random.default_rng(1)
    ps = [ember.tensor(rng.standard_normal(s).astype(np.float32), device=dev, requires_grad=True) for s in SHAPES]
    from ember.nn.utils import clip_grad_norm_

    n = 0
    for _ in range(3):
        _grads(dev, ps, rng)
        with tracing.capture() as spans:
            clip_grad_norm_(ps, 1.0)
            ember.sync(dev)
        n = sum(1 for s in spans if s.name == "launch")
    times = []
    for _ in range(steps):
        _grads(dev, ps, rng)
        t0 = time.perf_counter()
        clip_grad_norm_(ps, 1.0)
        ember.sync(dev)
        times.append(time.perf_counter() - t0)
    return n, min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "wgpu"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated substrings of optimizer names")
    a = ap.parse_args()
    dev = _device(a.device)
    wanted = [w.strip().lower() for w in a.only.split(",") if w.strip()]
    print(f"device {dev!r}, MLP {SHAPES}, {a.steps} timed steps")
    print("| optimizer | launches, first step | launches per step | step time, fastest (ms) | median (ms) |")
    print("|---|---|---|---|---|")
    for name, make in OPTIMIZERS.items():
        if wanted and not any(w in name.lower() for w in wanted):
            continue
        first, steady, t, med = measure(dev, make, a.steps)
        print(f"| {name} | {first} | {steady} | {t * 1e3:.2f} | {med * 1e3:.2f} |")
    if not wanted or any("clip" in w for w in wanted):
        n, t, med = measure_clip(dev, a.steps)
        print(f"| clip_grad_norm_ | - | {n} | {t * 1e3:.2f} | {med * 1e3:.2f} |")


if __name__ == "__main__":
    main()
