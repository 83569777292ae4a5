"""Host-side cost of ember's CUDA path, measured without a GPU against a fake CUDA driver.

On the GPU each tiny op costs a driver floor plus ember's own Python; this script measures the
Python part on any machine: ``bench/fake_cuda`` stands in for the driver (launches do nothing,
copies are host memcpys, syncs return at once), and everything above it runs exactly as on a
GPU -- the Tensor API, dispatch, fusion registration and drains, replays, the CUDA client's
launch and read code. **The values computed are meaningless** (no kernel runs); only the times
and the driver-call counts mean something. Kernels are still compiled with NVRTC (sm_90) and
loaded as cubins, as on the GPU: a first run with an empty cache compiles (a few small kernels,
seconds on the dev box).

Rows, per call, on 16-element float32 tensors (``Device.cuda()`` fused, ``Device.cuda(fusion=
False)`` eager): ``(a+b).sum().item()``, ``(a+b).numpy()``, ``a[0].item()``, ``a + b``
registration on the fused device (blocks of 32 chained adds, drains outside the clock) and
eager ``a + b`` (no sync per call). Each row: the best of ``--repeats`` loops of ``--n`` calls
(the loops of all rows interleaved) after ``--warmup`` calls, the clock stopped after a final
``ember.sync``, as wall time and as the process's CPU time (steadier on a shared machine); the
driver columns are the fake's launches, host-to-device copies, device-to-host copies and
stream syncs per call over the last loop.

The store is ``EMBER_CACHE_DIR`` = ``<tmp>/ember-fake-cuda/cache`` unless ``--cache-dir`` says
otherwise (kept between runs, so a second run compiles nothing; the user's cache is never
touched); the fake libcuda is built with gcc into ``<tmp>/ember-fake-cuda``. Exit status 1
when ember asked the fake for a driver function it does not implement (listed at the end).

    python bench/host_cost_cuda.py [--n 2000] [--repeats 7] [--warmup 300]
    python bench/host_cost_cuda.py --profile [--top 40]   # cProfile of the fused round trip
    python bench/host_cost_cuda.py --pyspy-loop 30        # py-spy record --pid <pid> meanwhile
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_DIR = Path(tempfile.gettempdir()) / "ember-fake-cuda"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2000, help="calls per timed loop")
    p.add_argument("--repeats", type=int, default=7, help="timed loops per row (the best is kept)")
    p.add_argument("--warmup", type=int, default=300, help="calls before the timed loops")
    p.add_argument("--cache-dir", default=str(DEFAULT_DIR / "cache"), help="EMBER_CACHE_DIR for this run")
    p.add_argument("--profile", action="store_true", help="cProfile of the fused round trip, by own time")
    p.add_argument("--top", type=int, default=40, help="rows of --profile")
    p.add_argument("--pyspy-loop", type=float, metavar="SECONDS",
                   help="only run the fused (a+b).sum().item() in a loop for SECONDS (for py-spy)")
    return p.parse_args()


args = parse()
# before ember reads its configuration: the fake device's compiles and tunings stay out of the user's cache
os.environ["EMBER_CACHE_DIR"] = args.cache_dir
sys.path.insert(0, str(HERE.parent))  # the checkout's ember, installed or not
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from fake_cuda import driver as fake_driver  # noqa: E402

import ember  # noqa: E402

FAKE = fake_driver.install(DEFAULT_DIR)
COLS = ("launches", "htod", "dtoh", "syncs")


class Row:
    """One timed row: ``sample(n)`` runs about ``n`` calls and returns (wall seconds, CPU
    seconds, calls made) of the part that is timed; the best per call over the samples is kept,
    and the driver calls per call of the last sample."""

    def __init__(self, name: str, sample: Callable[[int], tuple[float, float, int]]) -> None:
        self.name, self.sample = name, sample
        self.wall = self.cpu = float("inf")
        self.calls: dict[str, float] = {}

    def run(self, n: int) -> None:
        c0 = FAKE.counts()
        wall, cpu, done = self.sample(n)
        c1 = FAKE.counts()
        self.wall, self.cpu = min(self.wall, wall / done), min(self.cpu, cpu / done)
        self.calls = {k: (c1[k] - c0[k]) / done for k in COLS}


def loop_row(name: str, fn: Callable[[], Any], sync: Callable[[], Any]) -> Row:
    """``fn()`` ``n`` times, then ``sync()``, all on the clock."""

    def sample(n: int) -> tuple[float, float, int]:
        t0, p0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        sync()
        return time.perf_counter() - t0, time.process_time() - p0, n

    return Row(name, sample)


def registration_row(name: str, a: Any, b: Any) -> Row:
    """``acc = acc + b`` registered in blocks of 32 on the fused device; each block realised
    (drained, read back) off the clock, so the driver calls per op include 1/32 of a drain."""

    def sample(n: int) -> tuple[float, float, int]:
        blocks = max(n // 32, 1)
        wall = cpu = 0.0
        for _ in range(blocks):
            acc = a
            t0, p0 = time.perf_counter(), time.process_time()
            for _ in range(32):
                acc = acc + b
            wall += time.perf_counter() - t0
            cpu += time.process_time() - p0
            acc.numpy()
        return wall, cpu, 32 * blocks

    return Row(name, sample)


def tensors(d: ember.Device) -> tuple[Any, Any]:
    return (ember.tensor(np.ones(16, np.float32), device=d), ember.tensor(np.ones(16, np.float32), device=d))


def round_trip_calls(d: ember.Device, a: Any, b: Any) -> tuple[dict[str, int], list[str]]:
    """Driver calls of one ``(a+b).sum().item()`` (warm) and the kernels it launched."""
    for _ in range(50):
        (a + b).sum().item()
    ember.sync(d)
    c0 = FAKE.counts()
    (a + b).sum().item()
    c1 = FAKE.counts()
    diff = {k: c1[k] - c0[k] for k in (*COLS, "event_syncs", "allocs")}
    return diff, FAKE.recent_launches(diff["launches"])


def profile(fused: ember.Device, top: int) -> None:
    import cProfile
    import io
    import pstats

    a, b = tensors(fused)
    for _ in range(500):
        (a + b).sum().item()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5000):
        (a + b).sum().item()
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(top)
    print("cProfile of 5000 fused (a+b).sum().item() (by own time):")
    print(out.getvalue())


def pyspy_loop(fused: ember.Device, seconds: float) -> None:
    a, b = tensors(fused)
    for _ in range(500):
        (a + b).sum().item()
    print(f"pid {os.getpid()}: fused (a+b).sum().item() in a loop for {seconds:g} s "
          f"(py-spy record -r 1000 --pid {os.getpid()} -o profile.svg)", flush=True)
    end = time.perf_counter() + seconds
    calls = 0
    while time.perf_counter() < end:
        for _ in range(1000):
            (a + b).sum().item()
        calls += 1000
    print(f"{calls} calls, {seconds / calls * 1e6:.1f} us each (py-spy's sampling included)")


def device_rows(label: str, d: ember.Device, fused: bool) -> list[Row]:
    a, b = tensors(d)

    def sync() -> None:
        ember.sync(d)

    (a + b).sum().item(), (a + b).numpy(), a[0].item()  # compiles before any clock
    rows = [
        loop_row(f"(a+b).sum().item()  {label}", lambda: (a + b).sum().item(), sync),
        loop_row(f"(a+b).numpy()       {label}", lambda: (a + b).numpy(), sync),
        loop_row(f"a[0].item()         {label}", lambda: a[0].item(), sync),
    ]
    if fused:
        rows.append(registration_row("a+b registration    fused", a, b))
    else:
        rows.append(loop_row("a+b (no sync)       eager", lambda: a + b, sync))
    return rows


def machine() -> str:
    import platform

    from machine_info import cpu_model, usable_cores

    return f"{cpu_model()}, {usable_cores()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def revision() -> str:
    """The checkout's commit, and whether ember/ has uncommitted changes (figures of a moving tree)."""
    import subprocess

    root = HERE.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ember"], cwd=root, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return f"{head}{' + uncommitted changes under ember/' if dirty else ''}"


def main() -> int:
    fused, eager = ember.Device.cuda(), ember.Device.cuda(fusion=False)
    if args.pyspy_loop is not None:
        pyspy_loop(fused, args.pyspy_loop)
        return 0
    if args.profile:
        profile(fused, args.top)
        return 0
    n, reps, warm = args.n, args.repeats, args.warmup
    rows = device_rows("fused", fused, True) + device_rows("eager", eager, False)
    t_start = time.perf_counter()
    for row in rows:  # warm-up: plans, captures, replays, tunings
        row.sample(warm)
    # the repeats interleaved across rows: a busy spell of the machine costs each row one sample at most
    for _ in range(reps):
        for row in rows:
            row.run(n)
    elapsed = time.perf_counter() - t_start

    print(f"ember host cost on the fake CUDA driver ({fake_driver.NAME}; kernels do not run, values are meaningless)")
    print(f"machine: {machine()}")
    print(f"ember: {revision()}")
    print(f"best of {reps} loops of {n} calls after {warm} warm-up calls; wall clock and the process's CPU time "
          "(steadier on a shared machine); driver calls per call over the last loop\n")
    print(f"{'row':<26} {'wall us':>8} {'cpu us':>8}  " + "  ".join(f"{c:>8}" for c in COLS))
    for r in rows:
        print(f"{r.name:<26} {r.wall * 1e6:8.2f} {r.cpu * 1e6:8.2f}  " + "  ".join(f"{r.calls[k]:8.3f}" for k in COLS))
    print(f"\n(timed rows took {elapsed:.1f} s)")

    print("\none warm (a+b).sum().item():")
    for label, d in (("fused", fused), ("eager", eager)):
        a, b = tensors(d)
        calls, names = round_trip_calls(d, a, b)
        text = ", ".join(f"{k} {v}" for k, v in calls.items())
        print(f"  {label}: {text}; kernels: {', '.join(names) or '-'}")
    if FAKE.gaps:
        print(f"\nfake driver gaps hit (functions ember asked for that the fake lacks): {sorted(set(FAKE.gaps))}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
