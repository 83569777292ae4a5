"""Matmul candidates of the Cube backend on the CPU runtime vs numpy/OpenBLAS, in one run.

    python bench/bench_cube_matmul.py                 # prints the table
    python bench/bench_cube_matmul.py --save --tag X  # also writes bench/results/cube_matmul_<date>_X.md

For square float32 sizes 256, 512, 1024: GFLOP/s (2 n^3 / median time) of every candidate of
``MATMUL_CANDIDATES`` (launched directly, including its packing launches), of the backend's
chosen path through the Tensor API (``a @ b`` + a read barrier), and of numpy ``a @ b`` on
the same machine. numpy and ember are timed alternately per size so both see the same load.
Goal (issue 4): 1024² float32, best own candidate >= 0.3x numpy.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import ember  # noqa: E402
from ember import Device  # noqa: E402
from ember.backends.cube.matmul import MATMUL_CANDIDATES  # noqa: E402

SIZES = (256, 512, 1024)
#: calls timed per block (the slow naive and tiled kernels: a quarter, in the first round only)
REPS = {256: 20, 512: 8, 1024: 4}
ROUNDS = 3
#: (size, contestant, median seconds, fastest seconds)
Row = tuple[int, str, float, float]


def cube_backend(dev: Device) -> Any:
    bk = dev.backend()
    while not hasattr(bk, "client") and hasattr(bk, "inner"):
        bk = bk.inner
    return bk


def machine() -> dict[str, str]:
    info = {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "L2 cache", "L3 cache"):
                info[k] = v.strip()
            elif k == "Flags":
                info[k] = " ".join(f for f in v.split() if f.startswith(("avx", "fma")))
    except OSError:
        pass
    try:
        cc = os.environ.get("CC", "cc")
        info["cc"] = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        pass
    blas = [
        f"{d.get('internal_api', '?')} {d.get('version', '')} ({d.get('architecture', '')}, "
        f"{d.get('num_threads', '?')} threads)"
        for d in _threadpool_info()
    ]
    info["numpy BLAS"] = "; ".join(blas) or "(threadpoolctl not installed)"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        info[var] = os.environ.get(var, "(unset: all cores)")
    info["CPU affinity of the run"] = f"{len(os.sched_getaffinity(0))} cores"
    info["load average at the end (1, 5, 15 min)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return info


def _threadpool_info() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [d for d in threadpool_info() if d.get("user_api") == "blas"]


def bench(dev: Device) -> list[Row]:
    """(size, name, seconds) rows; names 'numpy a @ b' and 'chosen ...' included."""
    rows: list[Row] = []
    for n in SIZES:
        rows += bench_size(dev, n)
    return rows


def bench_size(dev: Device, n: int) -> list[Row]:
    """Medians of every contestant's calls (candidates launched directly on one set of
    operands, the Tensor API path, numpy)."""
    bk = cube_backend(dev)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ta = ember.tensor(a, device=dev)
    tb = ember.tensor(b, device=dev)
    A, B, out = bk._matmul_operands(bk.from_data(a, ember.float32), bk.from_data(b, ember.float32))

    def candidate(c: Any) -> Any:
        def run() -> None:
            c.launch(bk, A, B, out)
            bk.sync()

        return run

    fns: dict[str, Any] = {}
    for c in MATMUL_CANDIDATES:
        c.launch(bk, A, B, out)  # compile and check once
        err = np.abs(bk.into_data(out) - ref).max()
        assert err < 1e-3 * n**0.5, (c.name, n, err)
        fns[c.name] = candidate(c)
    fns["chosen (a @ b, incl. read)"] = lambda: (ta @ tb).numpy()
    fns["numpy a @ b"] = lambda: a @ b
    # rounds of blocks: within a block one contestant runs back to back (after one warm-up
    # call, so the other's spinning worker threads -- OpenBLAS's, OpenMP's -- have gone idle);
    # the rounds interleave the contestants so all see the same machine load
    times: dict[str, list[float]] = {k: [] for k in fns}
    for rnd in range(ROUNDS):
        for name, fn in fns.items():
            slow = name in ("naive", "tiled")
            if slow and rnd:
                continue
            fn()
            for _ in range(max(1, REPS[n] // (4 if slow else 1))):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return [(n, name, statistics.median(ts), min(ts)) for name, ts in times.items()]


def table(rows: list[Row]) -> str:
    """GFLOP/s and ratios from both the median and the fastest call: on a shared machine the
    median carries the load of other processes, the minimum is the kernel's own speed."""
    np_med = {n: med for n, name, med, _ in rows if name == "numpy a @ b"}
    np_min = {n: best for n, name, _, best in rows if name == "numpy a @ b"}
    lines = [
        "| size | candidate | median | GFLOP/s (median) | ratio (median) | min | GFLOP/s (min) | ratio (min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, name, med, best in rows:
        flop = 2 * n**3 / 1e9
        lines.append(
            f"| {n}² | {name} | {med * 1e3:.2f} ms | {flop / med:.1f} | {np_med[n] / med:.2f}x "
            f"| {best * 1e3:.2f} ms | {flop / best:.1f} | {np_min[n] / best:.2f}x |"
        )
    return "\n".join(lines)


def best_ratio(rows: list[Row], n: int) -> tuple[float, float]:
    """(median-based, min-based) ratio vs numpy of the best own candidate at size n."""
    own = {c.name for c in MATMUL_CANDIDATES}
    np_med, np_min = next((med, best) for m, name, med, best in rows if m == n and name == "numpy a @ b")
    mine = [(med, best) for m, name, med, best in rows if m == n and name in own]
    return max(np_med / med for med, _ in mine), max(np_min / best for _, best in mine)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", action="store_true", help="write bench/results/cube_matmul_<date>[_<tag>].md")
    ap.add_argument("--tag", default="", help="machine tag in the results file name")
    ap.add_argument("--note", default="", help="a sentence about the run, written into the results")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="folder of the results file")
    args = ap.parse_args()
    dev = Device.cpu()
    dev.init()
    rows = bench(dev)
    text = table(rows)
    print(text)
    r_med, r_min = best_ratio(rows, 1024)
    summary = (
        f"1024² float32, best own candidate: {r_med:.2f}x numpy on medians, {r_min:.2f}x on the "
        "fastest calls (goal of issue 4: >= 0.3x)"
    )
    print("\n" + summary)
    if args.save:
        date = datetime.date.today().isoformat()
        tag = f"_{args.tag}" if args.tag else ""
        path = Path(args.out) / f"cube_matmul_{date}{tag}.md"
        body = [
            f"# Cube matmul candidates on the CPU runtime ({date})",
            "",
            f"Run: `python bench/bench_cube_matmul.py --save{' --tag ' + args.tag if args.tag else ''}` "
            "(medians and fastest calls; one run, same machine; float32, square).",
            "",
            *([args.note, ""] if args.note else []),
            "## Machine",
            "",
            *[f"- {k}: {v}" for k, v in machine().items()],
            "",
            "## Results",
            "",
            text,
            "",
            summary + ".",
            "",
            "Candidates are launched directly (the register-blocked one includes its two packing",
            "launches); 'chosen' goes through the Tensor API (dispatch, static heuristic, output",
            "allocation and the read back to numpy). numpy uses OpenBLAS (threads: see Machine).",
        ]
        path.write_text("\n".join(body) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
