"""Cube reductions on the CPU runtime: ratios against numpy, through the Tensor API.

    python bench/bench_cube_reduce.py            # prints the table
    python bench/bench_cube_reduce.py --save     # also writes bench/results/cube_reduce_<date>[_tag].md

Each row times ember and numpy alternately in one process on the same values (medians of
interleaved repeats, after a warm-up that also compiles the kernels), so both see the same
machine load. The ember side includes reading the (small) result back to the host, so the
kernels are known to have finished. Goals (issue 4): 16M float32 sum >= 0.8x numpy ``a.sum()``;
(4096, 4096) float32 sum over the strided axis 0 >= 0.8x numpy ``a.sum(axis=0)``. Other rows
are informational. Accuracy of the 16M sum against a float64 reference is printed for both.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cube_kernels import machine  # noqa: E402

import ember  # noqa: E402

DEV = ember.Device.cpu()


def timed(f: Callable[[], object], g: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median seconds of f and g, run alternately."""
    f(), g(), f(), g()
    tf, tg = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        t1 = time.perf_counter()
        g()
        t2 = time.perf_counter()
        tf.append(t1 - t0)
        tg.append(t2 - t1)
    return statistics.median(tf), statistics.median(tg)


def rows(repeats: int) -> list[tuple[str, float, float, str]]:
    rng = np.random.default_rng(0)
    a16 = rng.standard_normal(16 * 1024 * 1024).astype(np.float32)
    sq = rng.standard_normal((4096, 4096)).astype(np.float32)
    small = rng.standard_normal((4096, 1000)).astype(np.float32)
    t16, tsq, tsmall = (ember.tensor(x, device=DEV) for x in (a16, sq, small))
    out: list[tuple[str, float, float, str]] = []

    def add(name: str, f: Callable[[], object], g: Callable[[], object], goal: str = "") -> None:
        e, n = timed(f, g, repeats)
        out.append((name, e, n, goal))

    add("sum 16M f32 (all)", lambda: t16.sum().numpy(), lambda: a16.sum(), ">= 0.8x")
    add("sum (4096, 4096) f32, axis 0 (strided)", lambda: tsq.sum(dim=0).numpy(),
        lambda: sq.sum(axis=0), ">= 0.8x")
    add("sum (4096, 4096) f32, axis 1 (contiguous)", lambda: tsq.sum(dim=1).numpy(), lambda: sq.sum(axis=1))
    add("max 16M f32", lambda: t16.amax().numpy(), lambda: a16.max())
    add("mean (4096, 4096) f32, axis 0", lambda: tsq.mean(dim=0).numpy(), lambda: sq.mean(axis=0))
    add("argmax (4096, 1000) f32, axis 1", lambda: tsmall.argmax(dim=1).numpy(),
        lambda: small.argmax(axis=1))

    def np_softmax() -> object:
        e = np.exp(small - small.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    add("softmax (4096, 1000) f32, axis 1", lambda: tsmall.softmax(1).numpy(), np_softmax)
    add("cumsum (4096, 1000) f32, axis 1", lambda: tsmall.cumsum(1).numpy(), lambda: small.cumsum(axis=1))
    return out


def accuracy() -> str:
    a = (np.random.default_rng(1).random(16 * 1024 * 1024, dtype=np.float32) + 0.5).astype(np.float32)
    ref = a.astype(np.float64).sum()
    e = float(ember.tensor(a, device=DEV).sum().numpy())
    n = float(a.sum())
    return (f"16M uniform [0.5, 1.5) float32 sum, relative error vs float64: ember {abs(e - ref) / ref:.2e}, "
            f"numpy {abs(n - ref) / ref:.2e}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--tag", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = ap.parse_args()
    results = rows(5 if args.quick else 25)
    lines = ["| measurement | ember cube | numpy | ratio (numpy time / ember time) | goal |",
             "|---|---|---|---|---|"]
    missed = False
    for name, e, n, goal in results:
        r = n / e
        if goal and r < 0.8:
            missed = True
        lines.append(f"| {name} | {e * 1e3:.2f} ms | {n * 1e3:.2f} ms | {r:.2f}x | {goal} |")
    acc = accuracy()
    info = machine()
    md = [f"# Cube reductions on the CPU runtime ({datetime.date.today()})", "",
          f"Run: `python bench/bench_cube_reduce.py --save{' --tag ' + args.tag if args.tag else ''}` "
          "(medians of interleaved repeats; one run, same machine).", "", "## Machine", ""]
    md += [f"- {k}: {v}" for k, v in info.items()]
    md += ["", "## Results", "", *lines, "",
           f"Accuracy: {acc}.", ""]
    text = "\n".join(md)
    print(text)
    if args.save:
        tag = f"_{args.tag}" if args.tag else ""
        path = REPO / "bench" / "results" / f"cube_reduce_{datetime.date.today()}{tag}.md"
        path.write_text(text)
        print(f"saved {path}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
