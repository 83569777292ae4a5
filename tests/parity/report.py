"""The full OpInfo run: every float32 sample of every mapped entry, forward and gradients, on
the devices named (default: flex and cpu, both with autodiff), written as a Markdown report.

    python -m tests.parity.report                      # bench/results/opinfo_<date>.md
    python -m tests.parity.report --devices flex --limit 3 --out /tmp/r.md
    python -m tests.parity.report --devices wgpu.cpu --no-grad   # forward values only
    scripts/opinfo-report                              # the same as the first line
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ember import Device  # noqa: E402
from parity.opinfo_map import load_op_db, run_entry  # noqa: E402

DEVICES = {
    "flex": lambda: Device.flex().autodiff(),
    "cpu": lambda: Device.cpu().autodiff(),
    "wgpu.cpu": lambda: __import__("ember").Device.wgpu(__import__("ember").DeviceKind.cpu()).autodiff(),
    "cuda": lambda: Device.cuda().autodiff(),
}


def _sum(results: list[Any], part: str) -> dict[str, int]:
    tot: dict[str, int] = {}
    for r in results:
        for k, v in getattr(r, part).items():
            tot[k] = tot.get(k, 0) + v
    return tot


def _rate(c: dict[str, int]) -> str:
    counted = sum(v for k, v in c.items() if k in ("pass", "wrong", "raised", "lacks"))
    if not counted:
        return "n/a"
    return f"{100.0 * c.get('pass', 0) / counted:.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="flex,cpu")
    ap.add_argument("--limit", type=int, default=None, help="samples per entry (default: all)")
    ap.add_argument("--only", default=None, help="comma-separated entry names")
    ap.add_argument("--no-grad", action="store_true", help="forward samples only (no gradient checks)")
    ap.add_argument("--progress", action="store_true", help="print each entry's counts as it finishes")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"opinfo_{datetime.date.today()}.md"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    ops = load_op_db()
    if args.only:
        keep = set(args.only.split(","))
        ops = [o for o in ops if o.name in keep]
    lines = [f"# OpInfo parity report ({datetime.date.today()})", "",
             f"torch {__import__('torch').__version__}: {len(ops)} OpInfo entries; float32 samples; "
             f"{'all' if args.limit is None else f'the first {args.limit}'} samples per entry"
             f"{', forward only' if args.no_grad else ''}. "
             "Categories: pass / wrong (values, shape or dtype differ) / raised / lacks (an argument or "
             "input ember does not have). Produced by `python -m tests.parity.report`.", ""]
    summary = []
    details = []
    for name in args.devices.split(","):
        dev = DEVICES[name]()
        t1 = time.perf_counter()
        results = []
        for op in ops:
            te = time.perf_counter()
            r = run_entry(op, dev, args.limit, grads=not args.no_grad)
            results.append(r)
            if args.progress and r.mapped:
                print(f"  {r.entry}: forward {r.forward} grad {r.grad} {time.perf_counter() - te:.1f} s", flush=True)
        mapped = [r for r in results if r.mapped]
        fw, gr = _sum(mapped, "forward"), _sum(mapped, "grad")
        summary.append((name, len(mapped), fw, gr, time.perf_counter() - t1))
        details.append((name, results))
        print(f"{name}: mapped {len(mapped)}; forward {fw}; grad {gr}; {time.perf_counter() - t1:.0f} s", flush=True)
    lines += ["| device | entries mapped | forward pass | wrong | raised | lacks | forward pass rate | "
              "grad pass | wrong | raised | lacks | grad pass rate |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, n, fw, gr, _ in summary:
        lines.append(f"| {name} | {n} | {fw.get('pass', 0)} | {fw.get('wrong', 0)} | {fw.get('raised', 0)} | "
                     f"{fw.get('lacks', 0)} | {_rate(fw)} | {gr.get('pass', 0)} | {gr.get('wrong', 0)} | "
                     f"{gr.get('raised', 0)} | {gr.get('lacks', 0)} | {_rate(gr)} |")
    name, results = details[0]
    unmapped = [r for r in results if not r.mapped]
    lines += ["", f"## Entries not run ({len(unmapped)})", ""]
    by_reason: dict[str, list[str]] = {}
    for r in unmapped:
        by_reason.setdefault(r.reason, []).append(r.entry)
    for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- **{reason}** ({len(names)}): {', '.join(sorted(names))}")
    for name, results in details:
        bad = [r for r in results if r.failures]
        lines += ["", f"## Failing samples on {name} ({len(bad)} entries)", ""]
        for r in bad:
            lines.append(f"- `{r.entry}`: " + "; ".join(r.failures[:4]) + (" ..." if len(r.failures) > 4 else ""))
    lines += ["", f"Total time {time.perf_counter() - t0:.0f} s."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
