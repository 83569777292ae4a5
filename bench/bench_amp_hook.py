"""What the autocast hook costs ``Tensor.matmul`` outside autocast (docs/amp.md).

The hook-free method is rebuilt from the current source of ``Tensor.matmul`` with its two hook
lines removed; the two run in alternating short batches and the median of the per-pair ratios
is reported (on a shared machine that cancels most of the drift that minima do not).

    python bench/bench_amp_hook.py [--pairs 600] [--size 8]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import textwrap
import time
import timeit
import types

import ember


def _hook_free_matmul() -> object:
    T = sys.modules["ember.tensor"]
    lines = textwrap.dedent(inspect.getsource(T.Tensor.matmul)).splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip() == "if _autocast.active:")
    del lines[i : i + 2]
    assert "_autocast" not in "\n".join(lines)
    ns: dict[str, object] = {}
    exec("from __future__ import annotations\n" + "\n".join(lines), dict(T.__dict__), ns)
    return ns["matmul"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=600)
    ap.add_argument("--size", type=int, default=8)
    args = ap.parse_args()
    plain = _hook_free_matmul()
    pc = time.perf_counter
    for dev in (ember.Device.flex(), ember.Device.flex().autodiff()):
        a = ember.randn(args.size, args.size, device=dev)
        b = ember.randn(args.size, args.size, device=dev)
        # both bound methods, so the two calls cost the same apart from the hook
        fns = {"hooked": a.matmul, "plain": types.MethodType(plain, a)}
        ratios, times = [], {"hooked": [], "plain": []}
        for i in range(args.pairs):
            order = ("hooked", "plain") if i % 2 else ("plain", "hooked")
            pair = {}
            for k in order:
                f = fns[k]
                t0 = pc()
                for _ in range(200):
                    f(b)
                pair[k] = (pc() - t0) / 200
                times[k].append(pair[k])
            ratios.append(pair["hooked"] / pair["plain"])
        print(f"{dev!r} {args.size}x{args.size} matmul: plain {statistics.median(times['plain']) * 1e6:.3f} us, "
              f"hooked {statistics.median(times['hooked']) * 1e6:.3f} us (medians); "
              f"median paired overhead {100 * (statistics.median(ratios) - 1):+.2f}%")
    gate = sys.modules["ember.tensor"]._autocast
    check = min(timeit.repeat("if g.active: pass", globals={"g": gate}, number=200_000, repeat=7)) / 200_000
    print(f"the check alone (`if _autocast.active:`): {check * 1e9:.1f} ns")


if __name__ == "__main__":
    main()
