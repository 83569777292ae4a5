"""Host cost of one tiny op, step by step: ember on one device against torch on the same kind.

Each row is the host time per call of a loop of ``--n`` calls on 16-element f32 tensors (after
a warm-up that compiles and plans), the clock stopped after a final synchronisation:

  register add        ``a + b`` on the fused device, drains excluded (blocks of 32 chained adds)
  add (eager)         ``a + b`` on the device without fusion: one launch per call
  add, realised       ``(a + b)`` then a synchronisation: registration, drain, launch, sync
  (a+b).sum().item()  the realised tiny-op round trip (issue 7: <= 40 us on the H200)
  a[0].item()         a view and a one-element read
  (a+b).numpy()       one tiny op realised and read back (torch: ``(a + b).cpu().numpy()``)
  cube backend add    the Cube backend's add on its own buffers (no dispatch, no Tensor)
  runtime 4-byte read the runtime's read of one float (copy back + stream sync); torch: .item()
                      of a 0-d tensor

torch rows use ``torch.ones(16)`` on the same device kind (``cuda`` or ``cpu``); torch's eager
``a + b`` stands beside both add rows (it has no registration). Ratios are ember / torch.
``--profile`` also prints a cProfile (by own time) of the round trip on both ember device forms.
``--thread-time`` times with ``time.thread_time``, for a shared, loaded CPU machine: time the
thread lost to other processes is not counted. Keep the wall clock on CUDA, where a wait the
driver blocks in would not count either.

    python bench/bench_roundtrip.py [--device cpu|cuda] [--n 2000] [--profile] [--top 35] [--thread-time]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember import Device  # noqa: E402

try:
    import torch
except ImportError:  # the torch column stays empty
    torch = None


#: the clock of every row (``--thread-time`` swaps in ``time.thread_time``)
CLOCK = time.perf_counter


def per_call(fn: Callable[[], Any], sync: Callable[[], Any], n: int) -> float:
    for _ in range(max(n // 10, 50)):
        fn()
    sync()
    t0 = CLOCK()
    for _ in range(n):
        fn()
    sync()
    return (CLOCK() - t0) / n


def registration(fused: Device, n: int) -> float:
    """Per-op registration of chained adds, the drains outside the clock."""
    a = ember.tensor(np.ones(16, np.float32), device=fused)
    b = ember.tensor(np.ones(16, np.float32), device=fused)
    total, count = 0.0, 0
    for rep in range(10 + max(n // 32, 10)):
        acc = a
        t0 = CLOCK()
        for _ in range(32):
            acc = acc + b
        if rep >= 10:  # warm-up: plan search and compile
            total += CLOCK() - t0
            count += 32
        acc.numpy()
    return total / count


def device_rows(d: Device, label: str, eager: bool, n: int) -> dict[str, float]:
    a = ember.tensor(np.ones(16, np.float32), device=d)
    b = ember.tensor(np.ones(16, np.float32), device=d)

    def sync() -> None:
        ember.sync(d)

    got = ((a + b).sum().item(), a[0].item())
    if got != (32.0, 1.0):  # the timings below would be of a broken path
        raise SystemExit(f"wrong values on {d}: (a + b).sum().item(), a[0].item() = {got}, expected (32.0, 1.0)")
    rows = {}
    if eager:
        rows["add (eager, no sync)"] = per_call(lambda: a + b, sync, n)
    rows[f"add realised ({label})"] = per_call(lambda: (a + b, sync()), sync, n)
    rows[f"(a+b).sum().item() ({label})"] = per_call(lambda: (a + b).sum().item(), sync, n)
    rows[f"a[0].item() ({label})"] = per_call(lambda: a[0].item(), sync, n)
    rows[f"(a+b).numpy() ({label})"] = per_call(lambda: (a + b).numpy(), sync, n)
    return rows


def layer_rows(eager: Device, n: int) -> dict[str, float]:
    """The floor under the Tensor API: the Cube backend's add on its own buffers (dispatch and
    the tensor wrapper left out) and the runtime's 4-byte read (copy back + stream sync)."""
    bk = eager.backend()
    while not hasattr(bk, "client") and hasattr(bk, "inner"):
        bk = bk.inner
    if not hasattr(bk, "client"):
        return {}
    a = bk.from_data(np.ones(16, np.float32), ember.float32)
    b = bk.from_data(np.ones(16, np.float32), ember.float32)
    client = bk.client
    one = bk.from_data(np.ones((), np.float32), ember.float32)
    f32 = np.dtype(np.float32)
    return {
        "cube backend add (no sync)": per_call(lambda: bk.add(a, b), client.sync, n),
        "runtime 4-byte read": per_call(lambda: client.read(one.buffer, f32, (), (), 0), client.sync, n),
    }


def ember_rows(kind: str, n: int) -> dict[str, float]:
    fused, eager = (Device.cuda(), Device.cuda(fusion=False)) if kind == "cuda" else (
        Device.cpu(), Device.cpu(fusion=False))
    rows = {"register add (fused)": registration(fused, n)}
    rows.update(device_rows(eager, "eager", True, n))
    rows.update(device_rows(fused, "fused", False, n))
    rows.update(layer_rows(eager, n))
    return rows


def torch_rows(kind: str, n: int) -> dict[str, float]:
    if torch is None or (kind == "cuda" and not torch.cuda.is_available()):
        return {}
    a, b = torch.ones(16, device=kind), torch.ones(16, device=kind)
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    t_add = per_call(lambda: a + b, sync, n)
    t_real = per_call(lambda: (a + b, sync()), sync, n)
    t_item = per_call(lambda: (a + b).sum().item(), sync, n)
    t_one = per_call(lambda: a[0].item(), sync, n)
    t_np = per_call(lambda: (a + b).cpu().numpy(), sync, n)
    one = a.sum()
    t_read = per_call(lambda: one.item(), sync, n)
    return {"register add (fused)": t_add, "add (eager, no sync)": t_add, "add realised (eager)": t_real,
            "add realised (fused)": t_real, "(a+b).sum().item() (eager)": t_item,
            "(a+b).sum().item() (fused)": t_item, "a[0].item() (eager)": t_one, "a[0].item() (fused)": t_one,
            "(a+b).numpy() (eager)": t_np, "(a+b).numpy() (fused)": t_np,
            "cube backend add (no sync)": t_add, "runtime 4-byte read": t_read}


def profile(kind: str, n: int, top: int) -> None:
    for fusion in (True, False):
        d = Device.cuda(fusion=fusion) if kind == "cuda" else Device.cpu(fusion=fusion)
        a = ember.tensor(np.ones(16, np.float32), device=d)
        b = ember.tensor(np.ones(16, np.float32), device=d)
        for _ in range(200):
            (a + b).sum().item()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            (a + b).sum().item()
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(top)
        print(f"\n=== cProfile {n}x (a + b).sum().item() on {d} (fusion={fusion}) ===")
        print(out.getvalue())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--top", type=int, default=35)
    p.add_argument("--thread-time", action="store_true", help="time rows with time.thread_time")
    args = p.parse_args()
    if args.thread_time:
        global CLOCK
        CLOCK = time.thread_time
    mine = ember_rows(args.device, args.n)
    peer = torch_rows(args.device, args.n)
    peer_name = f"torch {torch.__version__}" if peer else "torch (not installed)"
    print(f"tiny-op host cost per call, 16 f32, device={args.device}, n={args.n}; peer: {peer_name}")
    print(f"{'step':32} {'ember us':>9} {'torch us':>9} {'ratio':>7}")
    for name, t in mine.items():
        pt = peer.get(name)
        ratio = f"{t / pt:7.2f}" if pt else f"{'-':>7}"
        ptxt = f"{pt * 1e6:9.1f}" if pt else f"{'-':>9}"
        print(f"{name:32} {t * 1e6:9.1f} {ptxt} {ratio}")
    if args.profile:
        profile(args.device, args.n, args.top)


if __name__ == "__main__":
    main()
