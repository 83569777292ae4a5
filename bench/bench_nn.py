"""ember.nn's cost over the bare tensor code it wraps, in one run (issue 19 goals).

    python bench/bench_nn.py            # prints the machine and the tables
    python bench/bench_nn.py --save     # also writes bench/results/nn_[<tag>_]<date>.md (--tag NAME)
    python bench/bench_nn.py --quick    # fewer samples (a smoke run: noisy)

Rows:

* ``Linear forward``: ``lin(x)`` for a tiny input (8x16 -> 16) against ``x @ w.T + b`` on the
  same tensors, on ``Device.flex()`` and ``Device.cpu()`` (fused; each call is followed by
  ``ember.sync`` so its replayed kernel runs inside the timing) [<= 1.5x].
* ``MLP step``: one training step of the digits 64-128-10 MLP (ReLU, batch 128): forward,
  cross entropy, backward, a hand-written SGD update under ``no_grad``, the loss read; written
  with ``nn.Linear`` + ``F.cross_entropy`` against the same model as bare tensors with a
  hand-written cross entropy (``-log_softmax(z).gather(1, y.unsqueeze(1)).mean()``), on
  ``Device.flex().autodiff()`` and ``Device.cpu().autodiff()`` [<= 1.05x]. The update list is
  built once (as an optimizer holds its parameters).

Method: each sample times a short block of calls of one side (50 Linear calls, 2 MLP steps),
then of the other (the order alternates between samples); the figure is the median of the
per-sample ratios over hundreds of samples, which stays stable while the shared machine
changes speed (long blocks gave ratios swinging by +-25% at load 7 on two cores). Before
timing, the two MLP forms are checked to give the same loss and gradients.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine_info import cpu_model, usable_cores  # noqa: E402

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import Device  # noqa: E402


def paired_ratio(a: Callable[[], object], b: Callable[[], object], calls: int, samples: int) -> tuple[float, float,
                                                                                                       float]:
    """median(time(a) / time(b)) over samples of ``calls`` calls each, and the median per-call
    times of a and b (seconds)."""
    for _ in range(max(3, calls // 4)):  # warm-up: plans, replays, caches
        a()
        b()
    ratios, ta, tb = [], [], []
    for i in range(samples):
        order = (a, b) if i % 2 == 0 else (b, a)
        times = {}
        for fn in order:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[fn] = (time.perf_counter() - t0) / calls
        ratios.append(times[a] / times[b])
        ta.append(times[a])
        tb.append(times[b])
    return statistics.median(ratios), statistics.median(ta), statistics.median(tb)


def linear_rows(calls: int, samples: int) -> list[tuple[str, float, float, float, str]]:
    return [linear_row(name, dev, calls, samples) for name, dev in (("flex", Device.flex()),
                                                                      ("cpu (fused)", Device.cpu()))]


def linear_row(name: str, dev: Device, calls: int, samples: int) -> tuple[str, float, float, float, str]:
    ember.manual_seed(0)
    lin = nn.Linear(16, 16, device=dev)
    x = ember.randn(8, 16, device=dev)
    w, b = lin.weight.detach(), lin.bias.detach()
    sync = dev.sync if name != "flex" else (lambda: None)

    def layer() -> None:
        lin(x)
        sync()

    def bare() -> None:
        x @ w.T + b  # noqa: B018
        sync()

    np.testing.assert_allclose(lin(x).numpy(), (x @ w.T + b).numpy(), rtol=1e-6)
    r, t1, t2 = paired_ratio(layer, bare, calls, samples)
    return (f"Linear forward 8x16->16, {name}", r, t1, t2, "<= 1.5x")


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def mlp_rows(calls: int, samples: int) -> list[tuple[str, float, float, float, str]]:
    X, Y = digits()
    return [mlp_row(name, dev, X, Y, calls, samples)
            for name, dev in (("flex.autodiff", Device.flex().autodiff()), ("cpu.autodiff", Device.cpu().autodiff()))]


def mlp_row(name: str, dev: Device, X: np.ndarray, Y: np.ndarray, calls: int,
            samples: int) -> tuple[str, float, float, float, str]:
    lr = 0.1
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128, device=dev), nn.ReLU(), nn.Linear(128, 10, device=dev))
    params = list(model.parameters())  # as an optimizer holds them
    bare = [p.detach().clone().requires_grad_() for p in params]
    x = ember.tensor(X[:128], device=dev)
    y = ember.tensor(Y[:128], device=dev)

    def nn_step() -> float:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with ember.no_grad():
            for p in params:
                p.sub_(p.grad * lr)
                p.grad = None
        return loss.item()

    def bare_loss() -> ember.Tensor:
        w1, b1, w2, b2 = bare
        logits = (x @ w1.T + b1).relu() @ w2.T + b2
        return -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean()

    def bare_step() -> float:
        loss = bare_loss()
        loss.backward()
        with ember.no_grad():
            for p in bare:
                p.sub_(p.grad * lr)
                p.grad = None
        return loss.item()

    # same math: one step from the same weights gives the same loss and gradients
    l1 = F.cross_entropy(model(x), y)
    l2 = bare_loss()
    l1.backward()
    l2.backward()
    assert abs(l1.item() - l2.item()) <= 1e-5 * max(1.0, abs(l2.item())), (l1.item(), l2.item())
    for p, q in zip(params, bare):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4,
                                   atol=1e-5 * float(np.abs(q.grad.numpy()).max()))
        p.grad = None
        q.grad = None
    r, t1, t2 = paired_ratio(nn_step, bare_step, calls, samples)
    return (f"MLP step 64-128-10 (digits, batch 128), {name}", r, t1, t2, "<= 1.05x")


def fmt_t(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    # short blocks, many samples: the shared machine's speed drifts less within a pair
    quick = args.quick
    header = [
        f"- date: {datetime.date.today().isoformat()}",
        f"- CPU: {cpu_model()}, {usable_cores()} usable cores",
        f"- Python {platform.python_version()}, numpy {np.__version__}, {platform.platform()}",
        f"- OMP_NUM_THREADS: {os.environ.get('OMP_NUM_THREADS', '(unset: all cores)')}",
        f"- load average at start: {', '.join(f'{v:.2f}' for v in os.getloadavg())}",
    ]
    rows = linear_rows(calls=50, samples=31 if quick else 301) + mlp_rows(calls=2, samples=11 if quick else 101)
    lines = ["| row | ratio nn / bare | nn per call | bare per call | goal |", "| --- | --- | --- | --- | --- |"]
    for name, r, t1, t2, goal in rows:
        lines.append(f"| {name} | {r:.3f}x | {fmt_t(t1)} | {fmt_t(t2)} | {goal} |")
    text = "# ember.nn overhead\n\n" + "\n".join(header) + "\n\n" + "\n".join(lines) + (
        "\n\nRatios are medians of per-sample ratios (nn time / bare time, the two timed back to back, "
        "order alternating); times are medians per call.\n")
    print(text)
    if args.save:
        tag = f"{args.tag}_" if args.tag else ""
        out = REPO / "bench" / "results" / f"nn_{tag}{datetime.date.today().isoformat()}.md"
        out.write_text(text)
        print(f"written {out}")


if __name__ == "__main__":
    main()
