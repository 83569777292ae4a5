"""ember on the wgpu runtime against a peer measured in the same run.

Peers: torch on CUDA when a CUDA GPU is present (the same GPU the Vulkan adapter drives), else
numpy on the host (lavapipe runs on the host's cores too). ember's times are device timestamps
(``client.profile``, ``timing`` column) of the fused work, after a warm-up that compiles and
tunes; peers' are CUDA events or host clocks. Each sample is ``BATCH`` back-to-back calls, reported
per call. Ratios > 1 mean ember is slower.

    python bench/bench_wgpu.py [--device vulkan|wgpu|wgpu:cpu] [--n ELEMENTS] [--mm SIZE] [--out FILE]

Rows:
  copy     peer clone of n f32 (the bandwidth floor: bytes read + written)
  chain8   8 elementwise ops on n f32, fused, output realised: ember vs peer eager, and vs the floor
           (2 * 4n bytes); chain8 + sum: the same chain read by a sum
  sum      sum of n f32
  matmul   f32 SIZE^3 (peer without tf32)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember import Device  # noqa: E402
from ember.cube.launch import _client_of  # noqa: E402


def chain(x):
    y = x * 1.5 + 0.25
    y = y.abs().sqrt() - 0.5
    y = y * y + x
    return (y.sigmoid() * 2.0).tanh()


def chain_np(x):
    y = x * np.float32(1.5) + np.float32(0.25)
    y = np.sqrt(np.abs(y)) - np.float32(0.5)
    y = y * y + x
    return np.tanh(np.float32(2.0) / (np.float32(1.0) + np.exp(-y)))


WALL: dict[int, float] = {}
#: calls per timed sample: back to back, so the host work of one call overlaps the device work
#: of the previous (as in a training loop); rows report the median per call
BATCH = 5


def ember_time(dev: Device, fn, reps: int = 5) -> float:
    """Median device time (timestamps around the work, host gaps inside it included); the
    median host wall time of the same runs goes to WALL[id(fn)]."""
    c = _client_of(dev)
    fn()
    dev.sync()
    times, walls = [], []
    def batch() -> None:
        for _ in range(BATCH):
            fn()
        dev.sync()

    for _ in range(reps):
        t0 = time.perf_counter()
        _, s = c.profile(batch)
        walls.append((time.perf_counter() - t0) / BATCH)
        times.append(s / BATCH)
    WALL[id(fn)] = statistics.median(walls)
    return statistics.median(times)


def peer_time(fn, cuda: bool, reps: int = 5) -> float:
    fn()
    if cuda:
        import torch

        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(BATCH):
                fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) * 1e-3 / BATCH)
        return statistics.median(times)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="vulkan")
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--mm", type=int, default=512)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    dev = Device.parse(args.device)
    dev.init()
    c = _client_of(dev)
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    rows = []
    n, mm = args.n, args.mm
    rng = np.random.default_rng(0)
    xs = rng.standard_normal(n).astype(np.float32)
    x = ember.tensor(xs, device=dev)
    if cuda:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        tx = torch.from_numpy(xs).cuda()
        copy = peer_time(lambda: tx.clone(), True)
        peer_chain = peer_time(lambda: chain(tx), True)
        peer_sum = peer_time(lambda: tx.sum(), True)
        ta = torch.randn(mm, mm, device="cuda")
        tb = torch.randn(mm, mm, device="cuda")
        peer_mm = peer_time(lambda: ta @ tb, True)
        peer = f"torch {torch.__version__} cuda"
    else:
        copy = peer_time(lambda: xs.copy(), False)
        peer_chain = peer_time(lambda: chain_np(xs), False)
        peer_sum = peer_time(lambda: xs.sum(), False)
        na = rng.standard_normal((mm, mm)).astype(np.float32)
        nb = rng.standard_normal((mm, mm)).astype(np.float32)
        peer_mm = peer_time(lambda: na @ nb, False)
        peer = f"numpy {np.__version__} host"
    from ember.dlpack import _cube_primitive

    # drained at every call (as a read would): undrained, the batch's five chains over the same
    # x would be fused into one five-output kernel, a different workload from the peer's
    chain_fn = lambda: _cube_primitive(chain(x).sum())  # noqa: E731
    e_chain = ember_time(dev, chain_fn)
    # the chain alone, its output realised (drained) on the device: the floor's own traffic
    e_chain8 = ember_time(dev, lambda: _cube_primitive(chain(x)))
    e_sum = ember_time(dev, lambda: _cube_primitive(x.sum()))
    a = ember.tensor(rng.standard_normal((mm, mm)).astype(np.float32), device=dev)
    b = ember.tensor(rng.standard_normal((mm, mm)).astype(np.float32), device=dev)
    e_mm = ember_time(dev, lambda: _cube_primitive(a @ b), reps=3)
    rows.append(("copy (floor)", None, copy, ""))
    rows.append(("chain8 (output realised)", e_chain8, peer_chain, f"vs floor {e_chain8 / copy:.2f}x"))
    note = f"vs floor {e_chain / copy:.2f}x; host wall {WALL[id(chain_fn)] * 1e3:.2f} ms"
    rows.append(("chain8 + sum", e_chain, peer_chain + peer_sum, note))
    rows.append(("sum", e_sum, peer_sum, ""))
    flops = 2 * mm**3
    rows.append((f"matmul {mm}", e_mm, peer_mm, f"ember {flops / e_mm / 1e9:.1f} GFLOP/s"))
    lines = [
        f"# wgpu bench: {ember.backend_name(dev)} on {c.adapter_text()}",
        "",
        f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}; "
        f"date {time.strftime('%Y-%m-%d %H:%M')}; command: python bench/bench_wgpu.py {' '.join(sys.argv[1:])}",
        f"ember timing: {c.timing}; peer: {peer}; n = {n} f32, matmul {mm}^3",
        "",
        "| row | ember ms | peer ms | ratio | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, e, p, note in rows:
        es = "" if e is None else f"{e * 1e3:.3f}"
        ratio = "" if e is None else f"{e / p:.2f}"
        lines.append(f"| {name} | {es} | {p * 1e3:.3f} | {ratio} | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
