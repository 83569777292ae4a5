"""Fused kernels (``ember/backends/cube/fusers``) vs the same work unfused, in one run.

    python bench/bench_fused_kernels.py                 # prints the tables
    python bench/bench_fused_kernels.py --save --tag X  # also writes bench/results/fused_kernels_<date>_X.md

* elementwise: the gelu program (7 ops, 3 scalars) over n float32 elements: one
  ``run_fused`` launch vs the op-by-op Cube kernels vs numpy (the same expression);
* matmul epilogue: ``relu(a @ b + bias)`` at square float32 sizes: ``run_matmul_epilogue``
  vs the ``blocked`` candidate followed by the unfused add and relu, and vs the ``blocked``
  matmul alone (the epilogue's own cost).

Every contestant is timed alternately per size, and the fastest of the rounds is reported (the
machine is shared: the minimum is the least disturbed figure), so all see the same load.
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ember import Device  # noqa: E402
from ember import dtype as dt  # noqa: E402
from ember.backends.cube.fusers.elementwise_kernel import run_fused  # noqa: E402
from ember.backends.cube.fusers.matmul import run_matmul_epilogue  # noqa: E402
from ember.backends.cube.matmul import BLOCKED_MR, BLOCKED_NL, _blocked  # noqa: E402

GELU = (
    ("in", 0),
    ("scalar", 0),
    ("binary", "mul", 0, 1),
    ("unary", "erf", 2),
    ("scalar", 1),
    ("binary", "add", 3, 4),
    ("binary", "mul", 0, 5),
    ("scalar", 2),
    ("binary", "mul", 6, 7),
    ("out", 0, 8),
)
BIAS_RELU = (("acc",), ("in", 0), ("binary", "add", 0, 1), ("unary", "relu", 2), ("out", 0, 3))


def backend() -> Any:
    bk = Device.cpu(fusion=False).backend()
    while not hasattr(bk, "_empty"):
        bk = bk.inner
    return bk


def timeit(fn: Any, sync: Any, reps: int) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def race(contestants: dict[str, Any], sync: Any, reps: int, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in contestants}
    for _ in range(rounds):
        for k, fn in contestants.items():
            times[k].append(timeit(fn, sync, reps))
    return {k: min(v) for k, v in times.items()}


def elementwise_row(bk: Any, n: int, rounds: int) -> str:
    erf = np.vectorize(math.erf, otypes=[np.float32])
    f32 = dt.float32
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    t = bk.from_data(x, f32)
    scal = [(0.7071067811865476, f32), (1.0, f32), (0.5, f32)]
    with_numpy = n <= 1 << 20  # np.vectorize(erf) is a Python loop: skip the huge size

    def fused() -> Any:
        return run_fused(bk, GELU, [t], scal, [((n,), f32)])

    def unfused() -> Any:
        return bk.mul_scalar(bk.mul(t, bk.add_scalar(bk.erf(bk.mul_scalar(t, 0.7071067811865476)), 1.0)), 0.5)

    def numpy_side() -> Any:
        return x * (erf(x * np.float32(0.7071067811865476)) + np.float32(1)) * np.float32(0.5)

    contestants = {"fused": fused, "unfused": unfused}
    if with_numpy:
        contestants["numpy"] = numpy_side
    r = race(contestants, bk.sync, max(1, (1 << 22) // n), rounds)
    np_ms = f"{r['numpy'] * 1e3:.3f} ms" if with_numpy else "n/a"
    np_ratio = f"{r['numpy'] / r['fused']:.2f}x" if with_numpy else "n/a"
    return (
        f"| {n:,} | {r['fused'] * 1e3:.3f} ms | {r['unfused'] * 1e3:.3f} ms | {np_ms} | "
        f"{r['unfused'] / r['fused']:.2f}x | {np_ratio} |"
    )


def matmul_row(bk: Any, s: int, rounds: int) -> str:
    f32 = dt.float32
    blocked = _blocked(BLOCKED_MR, BLOCKED_NL, True)
    rng = np.random.default_rng(1)
    a = bk.from_data(rng.standard_normal((s, s)).astype(np.float32), f32)
    b = bk.from_data(rng.standard_normal((s, s)).astype(np.float32), f32)
    bias = bk.from_data(rng.standard_normal(s).astype(np.float32), f32)

    def fused() -> Any:
        return run_matmul_epilogue(bk, a, b, BIAS_RELU, [bias])

    def plain() -> Any:
        aa, bb, o = bk._matmul_operands(a, b)
        blocked(bk, aa, bb, o)
        return o

    def unfused() -> Any:
        return bk.relu(bk.add(plain(), bias))

    got = np.asarray(bk.into_data(fused()))
    if not np.array_equal(got, np.asarray(bk.into_data(unfused()))):
        raise AssertionError(f"fused and unfused results differ at {s}")
    r = race({"fused": fused, "unfused": unfused, "plain": plain}, bk.sync, max(1, int(2e9 // (2 * s**3))), rounds)
    gf = 2 * s**3 / 1e9
    return (
        f"| {s} | {r['fused'] * 1e3:.2f} ms ({gf / r['fused']:.0f} GFLOP/s) | {r['unfused'] * 1e3:.2f} ms | "
        f"{r['plain'] * 1e3:.2f} ms | {r['unfused'] / r['fused']:.2f}x | {r['fused'] / r['plain']:.2f}x |"
    )


EW_HEAD = [
    "| n | fused | unfused (5 launches) | numpy | unfused / fused | numpy / fused |",
    "|---|---|---|---|---|---|",
]
MM_HEAD = [
    "| size | fused epilogue | blocked + add + relu | blocked alone | unfused / fused | fused / blocked alone |",
    "|---|---|---|---|---|---|",
]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--save", action="store_true")
    p.add_argument("--tag", default="")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    rounds = 2 if args.quick else 5
    bk = backend()
    sizes = [4096, 1 << 20] if args.quick else [4096, 1 << 20, 1 << 24]
    ew = EW_HEAD + [elementwise_row(bk, n, rounds) for n in sizes]
    mm = MM_HEAD + [matmul_row(bk, s, rounds) for s in ([256, 512] if args.quick else [256, 512, 1024])]
    from machine_info import cpu_model, usable_cores

    cpu = cpu_model()
    head = [
        f"# Fused kernels vs unfused — {datetime.date.today()}",
        "",
        f"machine: {cpu}, {usable_cores()} CPUs usable; python {platform.python_version()}, numpy {np.__version__}",
        f"command: python bench/bench_fused_kernels.py{' --quick' if args.quick else ''}",
        "",
        "## elementwise: gelu, float32 (fused: 1 launch; unfused: mul_scalar, erf, add_scalar, mul, mul_scalar)",
        "",
        *ew,
        "",
        "## matmul epilogue: relu(a @ b + bias), float32",
        "",
        *mm,
    ]
    text = "\n".join(head) + "\n"
    print(text)
    if args.save:
        tag = f"_{args.tag}" if args.tag else ""
        path = REPO / "bench" / "results" / f"fused_kernels_{datetime.date.today()}{tag}.md"
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
