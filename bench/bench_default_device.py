"""Per-op cost of the default device (``dispatch<autodiff<flex>>``) against plain Flex for
untracked ops (issue 18: the default must cost <= 1.1x the plain device).

Each op runs on 8x8 float32 tensors through the Tensor API; the best of several repeats of
a timed loop gives the per-call time; the ratio is autodiff / plain.

    python bench/bench_default_device.py            # prints the table
"""

from __future__ import annotations

import sys
import time
import timeit

import ember
from ember import Device

OPS = {
    "add": lambda a, b: a + b,
    "mul_scalar": lambda a, b: a * 2.0,
    "matmul 8x8": lambda a, b: a @ b,
    "relu": lambda a, b: a.relu(),
    "sum": lambda a, b: a.sum(),
}


def per_call_us(fns: list, number: int = 5000, repeat: int = 15) -> list[float]:
    """Best per-call time of each closure; the closures alternate within every repeat so a
    noisy shared machine slows them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(f, number=number, timer=time.process_time))
    return [b / number * 1e6 for b in best]


def main() -> int:
    plain = Device.flex()
    auto = Device.flex().autodiff()
    ember.manual_seed(0)
    rows = []
    for name, fn in OPS.items():
        ap, bp = ember.rand(8, 8, device=plain), ember.rand(8, 8, device=plain)
        aa, ba = ember.rand(8, 8, device=auto), ember.rand(8, 8, device=auto)
        tp, ta = per_call_us([lambda f=fn, a=ap, b=bp: f(a, b), lambda f=fn, a=aa, b=ba: f(a, b)])
        rows.append((name, tp, ta, ta / tp))
    print(f"{'op':<12} {'flex us':>9} {'autodiff us':>12} {'ratio':>7}")
    for name, tp, ta, r in rows:
        print(f"{name:<12} {tp:9.3f} {ta:12.3f} {r:7.3f}")
    worst = max(r for *_, r in rows)
    print(f"worst ratio {worst:.3f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
