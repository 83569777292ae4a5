"""Cube backend ops through the Tensor API on ``Device.cpu()``: ratios against numpy.

    python bench/bench_cube_ops.py                 # prints the table
    python bench/bench_cube_ops.py --save          # also writes bench/results/cube_ops_<date>[_<tag>].md
    python bench/bench_cube_ops.py --only add,launch   # rows whose name contains a substring
    python bench/bench_cube_ops.py --check         # exit status 1 when a goal is missed

Every row times the ember call and its numpy counterpart alternately in one process (the
cores may be shared: both sides see the same load), each call allocating its result, as a
user's ``c = a + b`` does. Ratios are numpy time / ember time (>= 1: ember faster).
Rows are grouped by op family; each family adds its rows to ``FAMILIES``.

Elementwise goals (issue 4): 16M float32 ``a + b`` >= 0.8x numpy; launch overhead of a cached
tiny elementwise op through the Tensor API <= 30 us (median over many calls).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ember  # noqa: E402
from ember import Device  # noqa: E402

N = 16 * 1024 * 1024


@dataclass
class Row:
    name: str
    ember_s: float
    numpy_s: float | None = None
    #: "ratio>=x" (numpy time / ember time at least x) or "us<=x" (ember time at most x us)
    goal: str = ""
    note: str = ""

    def ratio(self) -> float | None:
        return None if self.numpy_s is None else self.numpy_s / self.ember_s

    def met(self) -> bool | None:
        if not self.goal:
            return None
        kind, _, x = self.goal.partition(">=") if ">=" in self.goal else self.goal.partition("<=")
        if kind == "ratio":
            r = self.ratio()
            return r is not None and r >= float(x)
        return self.ember_s * 1e6 <= float(x)


def paired(fn_ember: Callable[[], object], fn_numpy: Callable[[], object], reps: int) -> tuple[float, float]:
    """Medians of the two functions timed alternately (a short pause before each call lets
    OpenMP's spinning workers park, so neither side pays for the other's threads)."""
    fn_ember(), fn_numpy()
    te, tn = [], []
    for _ in range(reps):
        for fn, ts in ((fn_ember, te), (fn_numpy, tn)):
            time.sleep(0.003)
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(te), statistics.median(tn)


def per_call(fn: Callable[[], object], calls: int = 20000, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean time of ``calls`` back-to-back calls (the launch
    overhead: a tiny op is all overhead)."""
    for _ in range(200):
        fn()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls)
    return statistics.median(out)


# ----------------------------------------------------------------------------- elementwise
def elementwise_rows(dev: Device, quick: bool) -> list[Row]:
    reps = 5 if quick else 21
    r = np.random.default_rng(0)
    a = r.random(N, dtype=np.float32)
    b = r.random(N, dtype=np.float32)
    ta = ember.tensor(a, device=dev)
    tb = ember.tensor(b, device=dev)
    assert np.array_equal((ta + tb).numpy(), a + b)
    rows = []
    t, tn = paired(lambda: ta + tb, lambda: a + b, reps)
    rows.append(Row("add 16M f32 (a + b)", t, tn, "ratio>=0.8"))
    t, tn = paired(lambda: ta * 2.5, lambda: a * np.float32(2.5), reps)
    rows.append(Row("mul_scalar 16M f32 (a * 2.5)", t, tn))
    t, tn = paired(lambda: ta.exp(), lambda: np.exp(a), reps)
    rows.append(Row("exp 16M f32", t, tn))
    t, tn = paired(lambda: ta.sigmoid(), lambda: 1 / (1 + np.exp(-a)), reps)
    rows.append(Row("sigmoid 16M f32 (numpy: 1 / (1 + exp(-a)))", t, tn))
    m = a > 0.5
    tm = ember.tensor(m, device=dev)
    t, tn = paired(lambda: ember.where(tm, ta, tb), lambda: np.where(m, a, b), reps)
    rows.append(Row("where 16M f32", t, tn))
    a2, row = a.reshape(4096, 4096), b[:4096].copy()
    ta2, trow = ta.reshape(4096, 4096), ember.tensor(row, device=dev)
    t, tn = paired(lambda: ta2 + trow, lambda: a2 + row, reps)
    rows.append(Row("add (4096, 4096) + (4096,) broadcast", t, tn, note="rows path: lines along the last dim"))
    t, tn = paired(lambda: ta2.T + ta2, lambda: a2.T + a2, max(reps // 2, 3))
    rows.append(Row("add (4096, 4096).T + (4096, 4096)", t, tn, note="strided path (a transpose)"))
    h = a.astype(np.float16)
    th = ember.tensor(h, dtype=ember.float16, device=dev)
    t, tn = paired(lambda: th + th, lambda: h + h, reps)
    rows.append(Row("add 16M f16 (computed in f32)", t, tn))
    # launch overhead: tiny cached ops through the Tensor API (the op is all overhead)
    x = ember.tensor(np.ones(4, np.float32), device=dev)
    y = ember.tensor(np.ones(4, np.float32), device=dev)
    xn, yn = np.ones(4, np.float32), np.ones(4, np.float32)
    calls = 2000 if quick else 20000
    rows.append(Row("launch: tiny x + y (4 f32)", per_call(lambda: x + y, calls), per_call(lambda: xn + yn, calls),
                    "us<=30", "numpy column: numpy's own per-call cost"))
    rows.append(Row("launch: tiny x.exp()", per_call(lambda: x.exp(), calls), per_call(lambda: np.exp(xn), calls)))
    rows.append(Row("launch: tiny x * 2.0", per_call(lambda: x * 2.0, calls), per_call(lambda: xn * 2.0, calls)))
    return rows


FAMILIES: dict[str, Callable[[Device, bool], list[Row]]] = {
    "elementwise": elementwise_rows,
}


# ----------------------------------------------------------------------------- report
def _fmt(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def _goal_text(goal: str) -> str:
    if goal.startswith("ratio>="):
        return f">= {goal[7:]}x"
    if goal.startswith("us<="):
        return f"<= {goal[4:]} us"
    return goal


def table(rows: list[Row]) -> str:
    out = [
        "| op | ember cpu | numpy | ratio (numpy / ember) | goal | met | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r.ratio()
        met = r.met()
        out.append(
            f"| {r.name} | {_fmt(r.ember_s)} | {_fmt(r.numpy_s)} | "
            f"{'' if ratio is None else f'{ratio:.2f}x'} | {_goal_text(r.goal)} | "
            f"{'' if met is None else ('yes' if met else 'NO')} | {r.note} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", action="store_true", help="write bench/results/cube_ops_<date>[_<tag>].md")
    ap.add_argument("--tag", default="", help="machine tag in the results file name")
    ap.add_argument("--only", default="", help="comma-separated substrings of row or family names")
    ap.add_argument("--quick", action="store_true", help="few repeats: a smoke run, noisy")
    ap.add_argument("--check", action="store_true", help="exit status 1 when a goal is missed")
    args = ap.parse_args()
    from bench_cube_kernels import machine

    dev = Device.cpu()
    dev.init()
    only = [s for s in args.only.split(",") if s]
    rows: list[Row] = []
    for fam, fn in FAMILIES.items():
        got = fn(dev, args.quick)
        rows += [r for r in got if not only or any(s in r.name or s in fam for s in only)]
    text = table(rows)
    print(text)
    if args.save:
        m = machine()
        date = datetime.date.today().isoformat()
        tag = f"_{args.tag}" if args.tag else ""
        path = REPO / "bench" / "results" / f"cube_ops_{date}{tag}.md"
        body = [
            f"# Cube backend ops through the Tensor API ({date})",
            "",
            f"Run: `python bench/bench_cube_ops.py --save{' --tag ' + args.tag if args.tag else ''}` "
            "(medians, ember and numpy alternated in one process; each call allocates its result).",
            "",
            "## Machine",
            "",
            *[f"- {k}: {v}" for k, v in m.items()],
            "",
            "## Results",
            "",
            text,
            "",
        ]
        path.write_text("\n".join(body))
        print(f"\nwrote {path}")
    missed = [r.name for r in rows if r.met() is False]
    if missed:
        print("goals missed: " + "; ".join(missed))
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
