"""Per-op cost of untracked ops on an autodiff device against the same device without autodiff
(issue 18: an op on tensors that need no gradient costs <= 1.1x the plain device's).

Pairs: ``Device.flex()`` vs ``Device.flex().autodiff()`` and ``Device.cpu()`` vs
``Device.cpu().autodiff()``. Every op runs on small tensors (8x8 float32) through the Tensor
API, so the per-op Python cost dominates. Each round times a loop of ``--number`` calls on the
plain device, then on the autodiff one (the order alternating between rounds, in one process);
a lazy device is synced at the end of every loop, inside the timed part. A row's figure is
the median over rounds of the per-round ratio autodiff / plain, which stays stable while the
shared machine changes speed; the times shown are the medians per call.

Rows marked ``no_grad`` run the op on ``requires_grad=True`` inputs inside ``ember.no_grad()``
(inference with a model's parameters): nothing is recorded, so they are held to the same
goal. Rows marked ``tracked`` run it on ``requires_grad=True`` inputs with recording on (no
backward) and compare with the plain device too: they show what recording costs, and are
the figures to compare before and after a change of the autodiff layer.

    python bench/untracked.py                    # both pairs, every op
    python bench/untracked.py --pairs flex       # Flex only
    python bench/untracked.py --only add,sum     # rows whose names contain these substrings
    python bench/untracked.py --kinds untracked  # only the untracked rows
    python bench/untracked.py --save PATH        # also write the table (markdown) to PATH
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ember  # noqa: E402
from ember import Device  # noqa: E402

Inputs = dict[str, Any]


def _inputs(dev: Device, tracked: bool) -> Inputs:
    """The operands of every op on ``dev``; the float ones require grad when ``tracked``."""
    ember.manual_seed(0)
    a = ember.rand(8, 8, device=dev)
    b = ember.rand(8, 8, device=dev)
    if tracked:
        a.requires_grad_()
        b.requires_grad_()
    return {
        "a": a, "b": b, "row": ember.rand(8, device=dev),
        "idx": ember.tensor([0, 2, 5], device=dev), "mask": ember.rand(8, 8, device=dev) > 0.5,
        "dev": dev,
    }


#: name -> (op, whether it has a tracked row: it takes float inputs and is differentiable)
OPS: dict[str, tuple[Callable[[Inputs], Any], bool]] = {
    "add": (lambda x: x["a"] + x["b"], True),
    "mul": (lambda x: x["a"] * x["b"], True),
    "add bcast row": (lambda x: x["a"] + x["row"], True),
    "add scalar": (lambda x: x["a"] + 1.0, True),
    "mul scalar": (lambda x: x["a"] * 2.0, True),
    "rsub scalar": (lambda x: 1.0 - x["a"], True),
    "gt": (lambda x: x["a"] > x["b"], False),
    "neg": (lambda x: -x["a"], True),
    "exp": (lambda x: x["a"].exp(), True),
    "relu": (lambda x: x["a"].relu(), True),
    "sigmoid": (lambda x: x["a"].sigmoid(), True),
    "sum": (lambda x: x["a"].sum(), True),
    "sum dim": (lambda x: x["a"].sum(1), True),
    "mean": (lambda x: x["a"].mean(), True),
    "amax dim": (lambda x: x["a"].amax(0), True),
    "argmax": (lambda x: x["a"].argmax(1), False),
    "softmax": (lambda x: x["a"].softmax(-1), True),
    "matmul": (lambda x: x["a"] @ x["b"], True),
    "reshape": (lambda x: x["a"].reshape(4, 16), True),
    "view": (lambda x: x["a"].view(64), True),
    "transpose": (lambda x: x["a"].t(), True),
    "permute": (lambda x: x["a"].permute(1, 0), True),
    "unsqueeze": (lambda x: x["a"].unsqueeze(0), True),
    "getitem int": (lambda x: x["a"][3], True),
    "getitem slice": (lambda x: x["a"][:, 1:5], True),
    "getitem tensor": (lambda x: x["a"][x["idx"]], True),
    "masked_fill": (lambda x: x["a"].masked_fill(x["mask"], 0.0), True),
    "where": (lambda x: ember.where(x["mask"], x["a"], x["b"]), True),
    "cat": (lambda x: ember.cat([x["a"], x["b"]]), True),
    "to float64": (lambda x: x["a"].to(ember.float64), True),
    "zeros": (lambda x: ember.zeros(8, 8, device=x["dev"]), False),
    "full": (lambda x: ember.full((8, 8), 3.0, device=x["dev"]), False),
    "rand": (lambda x: ember.rand(8, 8, device=x["dev"]), False),
    "tensor": (lambda x: ember.tensor([1.0, 2.0, 3.0], device=x["dev"]), False),
}

PAIRS = {"flex": (Device.flex, lambda: Device.flex().autodiff()),
         "cpu": (Device.cpu, lambda: Device.cpu().autodiff())}


def _loop(fn: Callable[[Inputs], Any], x: Inputs, number: int, sync: Callable[[], None],
          grad: bool) -> float:
    """Seconds (process time) per call of ``number`` calls of ``fn(x)``, synced at the end;
    inside ``no_grad`` unless ``grad``."""
    with ember.enable_grad() if grad else ember.no_grad():
        t0 = time.process_time()
        for _ in range(number):
            fn(x)
        sync()
        return (time.process_time() - t0) / number


def measure(fn: Callable[[Inputs], Any], plain: Inputs, auto: Inputs, rounds: int,
            number: int, grad: bool = True) -> tuple[float, float, float]:
    """(plain s/call, autodiff s/call, median per-round ratio), alternating the order per round."""
    sp, sa = plain["dev"].backend().sync, auto["dev"].backend().sync
    for _ in range(2):  # warm-up: caches, compiled kernels, replay plans
        _loop(fn, plain, number, sp, grad)
        _loop(fn, auto, number, sa, grad)
    tp, ta, ratios = [], [], []
    gc_was = gc.isenabled()
    gc.disable()  # a collection inside one side's loop would charge it alone
    try:
        for r in range(rounds):
            if r % 2 == 0:
                p = _loop(fn, plain, number, sp, grad)
                a = _loop(fn, auto, number, sa, grad)
            else:
                a = _loop(fn, auto, number, sa, grad)
                p = _loop(fn, plain, number, sp, grad)
            tp.append(p)
            ta.append(a)
            ratios.append(a / p)
            gc.collect()
    finally:
        if gc_was:
            gc.enable()
    return statistics.median(tp), statistics.median(ta), statistics.median(ratios)


def _header() -> str:
    la = os.getloadavg()
    return (f"python {platform.python_version()}, {os.cpu_count()} cores, ember {os.path.dirname(ember.__file__)}, "
            f"load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, "
            f"EMBER_CACHE_DIR={os.environ.get('EMBER_CACHE_DIR', '(default)')}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default="flex,cpu", help="comma-separated: flex, cpu")
    ap.add_argument("--only", default="", help="comma-separated substrings of row names")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--number", type=int, default=400)
    ap.add_argument("--kinds", default="untracked,no_grad,tracked", help="comma-separated row kinds")
    ap.add_argument("--save", default="", help="also write the markdown table to this path")
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    lines = [f"<!-- {_header()} -->", "", "| pair | op | plain us | autodiff us | ratio |",
             "| --- | --- | ---: | ---: | ---: |"]
    print(lines[0])
    summary = []
    for pair in [p for p in args.pairs.split(",") if p]:
        mk_plain, mk_auto = PAIRS[pair]
        plain_dev, auto_dev = mk_plain(), mk_auto()
        plain, auto, auto_t = _inputs(plain_dev, False), _inputs(auto_dev, False), _inputs(auto_dev, True)
        for kind in ("untracked", "no_grad", "tracked"):
            tracked_rows = kind != "untracked"
            if kind not in args.kinds.split(","):
                continue
            ratios = []
            for name, (fn, has_tracked) in OPS.items():
                if only and not any(s in name for s in only):
                    continue
                if tracked_rows and not has_tracked:
                    continue
                tp, ta, r = measure(fn, plain, auto_t if tracked_rows else auto, args.rounds, args.number,
                                    grad=kind != "no_grad")
                ratios.append(r)
                row = f"| {pair} {kind} | {name} | {tp * 1e6:.2f} | {ta * 1e6:.2f} | {r:.3f} |"
                lines.append(row)
                print(row, flush=True)
            if ratios:
                gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                s = (f"| {pair} {kind} | **geometric mean** ({len(ratios)} ops, worst {max(ratios):.3f}) "
                     f"| | | **{gm:.3f}** |")
                lines.append(s)
                summary.append(s)
                print(s, flush=True)
    la = os.getloadavg()
    tail = f"<!-- load average at the end {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} -->"
    lines.append("")
    lines.append(tail)
    print(tail)
    if args.save:
        with open(args.save, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
