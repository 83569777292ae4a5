"""Host cost of one warm GPT-2-small training step on ember's CUDA path, without a GPU.

``bench/fake_cuda`` stands in for the CUDA driver (kernels never run, copies are memcpys, syncs
return at once); everything above it -- the Tensor API, dispatch, autodiff, fusion, plan
replay, the CUDA client and the launch code -- runs as on the H200. The step is
``bench/train.py``'s gpt workload (``--amp bf16``, AdamW, gradient clipping) with the
gpt2-small shape (12 layers x 768, 12 heads); ``--batch``/``--block`` shrink the activations
(the fake's device memory is host memory) without changing the op count per step.

Printed: the step's enqueue time (no read) and its full time (read of the loss included), as
wall time and as the process's CPU time (steadier on a shared machine), best of ``--steps``
timed steps after ``--warmup`` steps; the driver calls per step (launches, copies, syncs,
allocations) and the launches per kernel family. ``--profile`` adds a cProfile of one step
by own time (inflated by cProfile's per-call cost, so read it for shares, not for microseconds).

**Values computed on the fake device are meaningless**; only times and counts mean something.

    python bench/cuda_host_step.py [--batch 2] [--block 256] [--steps 5] [--profile] [--top 50]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_DIR = Path(tempfile.gettempdir()) / "ember-fake-cuda"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=2, help="sequences per step (gpt2-small's is 8)")
    p.add_argument("--block", type=int, default=256, help="tokens per sequence (gpt2-small's is 1024)")
    p.add_argument("--layers", type=int, default=12, help="transformer blocks (gpt2-small's is 12)")
    p.add_argument("--warmup", type=int, default=4, help="steps before the clock (plans, captures, tunings)")
    p.add_argument("--steps", type=int, default=5, help="timed steps (the best is kept)")
    p.add_argument("--cache-dir", default=os.environ.get("EMBER_CACHE_DIR", str(DEFAULT_DIR / "cache")),
                   help="EMBER_CACHE_DIR for this run (default: $EMBER_CACHE_DIR or <tmp>/ember-fake-cuda/cache)")
    p.add_argument("--amp", default="bf16", choices=["off", "bf16", "fp16"])
    p.add_argument("--profile", action="store_true", help="cProfile of one step, by own time")
    p.add_argument("--sort", default="tottime", help="cProfile sort key (tottime, cumulative)")
    p.add_argument("--top", type=int, default=50, help="rows of --profile")
    p.add_argument("--families", type=int, default=25, help="rows of the launches-per-family table")
    p.add_argument("--ab", type=int, default=0, metavar="N",
                   help="A/B in this process: N pairs of steps, alternately with --knob off (A) and on (B)")
    p.add_argument("--knob", default="prepared", choices=["prepared", "transposed"],
                   help="what --ab switches: the prepared hand-written launches (cuda_kernels.transpose.PREPARED) "
                        "or the wgmma kernel reading transposed operands in place (cuda_kernels.wgmma.TRANSPOSED, "
                        "else copied row-major)")
    p.add_argument("--fake-tuning", action="store_true",
                   help="let the tuner time candidates on the fake (which times every launch alike, so it "
                        "prefers fewer launches) instead of taking the H200's winners (see h200_choices)")
    return p.parse_args()


args = parse()
os.environ["EMBER_CACHE_DIR"] = args.cache_dir  # before ember reads its configuration
sys.path.insert(0, str(HERE.parent))  # the checkout's ember, installed or not
sys.path.insert(0, str(HERE))

from fake_cuda import driver as fake_driver  # noqa: E402

import ember  # noqa: E402

FAKE = fake_driver.install(DEFAULT_DIR)
import train as T  # noqa: E402

#: tunable set -> the candidates the H200 picks for this workload's products, the first valid one
#: (bench/results/gpu_2026-12-02_h200-s10-profile.md: every matmul ran the wgmma kernel, an
#: epilogue other than bias + GELU as its own kernel after it)
H200_WINNERS = {"matmul": ("wgmma",), "matmul_epilogue": ("wgmma_bias_gelu", "separate")}


def h200_choices() -> None:
    """Make the tuner decide a matmul key as the H200 did, where that candidate is valid: the
    fake's events time every launch alike, so its own tuning would pick kernels (the cube tile
    kernels, which need no operand copy) the real device does not, and the launch mix (and the
    host cost) would not be the H200's. Other keys tune as usual."""
    from ember.autotune import tuner

    decide = tuner._decide

    def _decide(client: Any, tset: Any, lvl: Any, key: Any, mk: Any, args: Any, defer: bool = False) -> Any:
        for name in H200_WINNERS.get(tset.name, ()):
            w = tset.by_name(name)
            if w is not None and (w.valid is None or w.valid(*args)):
                tuner._decisions[mk] = w
                return w, "memory", None
        return decide(client, tset, lvl, key, mk, args, defer)

    tuner._decide = _decide

COLS = ("launches", "htod", "dtoh", "syncs", "event_syncs", "allocs")


def workload() -> Any:
    """bench/train.py's gpt workload on the fake H200, gpt2-small's width, a smaller batch."""
    import torch

    T.GPT_CONFIGS["host"] = dict(n_layer=args.layers, n_head=12, n_embd=768, block=args.block, batch=args.batch)
    ns = argparse.Namespace(gpt_config="host", amp=args.amp)
    torch.manual_seed(0)
    tw = T.Workload(torch, "gpt", torch.device("cpu"), ns)
    return T.Workload(ember, "gpt", ember.Device.parse("cuda").autodiff(), ns, torch_twin=tw)


def one_step(w: Any) -> tuple[float, float, float, float]:
    """(enqueue wall, enqueue cpu, step wall, step cpu) seconds of one step; the loss's read
    and a sync close the step."""
    x, y = w.data[0]
    ember.sync(w.dev)
    t0, p0 = time.perf_counter(), time.process_time()
    loss = w.step(x, y)
    t1, p1 = time.perf_counter(), time.process_time()
    loss.item()
    ember.sync(w.dev)
    t2, p2 = time.perf_counter(), time.process_time()
    return t1 - t0, p1 - p0, t2 - t0, p2 - p0


def families(names: list[str]) -> list[tuple[str, int]]:
    """Launch counts by kernel family (the entry name less its hash and specialisation tail)."""
    fam: collections.Counter[str] = collections.Counter()
    for n in names:
        fam[n.rsplit("_", 1)[0] if n.startswith("em_") or "_" in n else n] += 1
    return fam.most_common()


#: CPU seconds spent in the hand-written matmul candidates' launchers, and their calls (``--ab``)
_IN_MATMUL = [0.0, 0]
#: CPU seconds spent in launch-capture replays (``Replay.run``: the drains' replayed launches and
#: call steps, the matmuls' included), and their calls (``--ab``)
_IN_REPLAY = [0.0, 0]


def time_matmul_candidates() -> None:
    """Wrap the wgmma candidates' launchers with a CPU-time counter, before anything captures
    them (a drain replay's call step keeps the function it saw)."""
    from ember.backends.cube import matmul
    from ember.backends.cube.fusers import matmul_epilogue

    for tset in (matmul.MATMUL_TUNABLES, matmul_epilogue.EPILOGUE_TUNABLES):
        for cand in tset.candidates:
            if cand.name.startswith("wgmma"):
                fn = cand.fn

                def timed(*a: Any, _fn: Any = fn) -> Any:
                    t = time.thread_time()
                    try:
                        return _fn(*a)
                    finally:
                        _IN_MATMUL[0] += time.thread_time() - t
                        _IN_MATMUL[1] += 1

                cand.fn = timed

    from ember.cube.runtime import capture

    run = capture.Replay.run

    def timed_run(self: Any, client: Any, inputs: Any) -> Any:
        t = time.thread_time()
        try:
            return run(self, client, inputs)
        finally:
            _IN_REPLAY[0] += time.thread_time() - t
            _IN_REPLAY[1] += 1

    capture.Replay.run = timed_run


def ab(w: Any, pairs: int) -> None:
    """Alternate steps with the prepared launches off (A) and on (B): CPU ms per step, min and
    median of each arm (a busy spell of the shared machine costs both arms alike)."""
    import statistics

    from ember.backends.cube import matmul
    from ember.backends.cube.cuda_kernels import transpose, wgmma

    knob = transpose.PREPARED if args.knob == "prepared" else wgmma.TRANSPOSED
    was = knob[0]
    got: dict[str, list[float]] = {"A": [], "B": []}
    inner: dict[str, list[float]] = {"A": [], "B": []}
    replay: dict[str, list[float]] = {"A": [], "B": []}
    launches: dict[str, int] = {}
    calls: dict[str, int] = {}
    for i in range(2 * pairs + 2):
        arm = "AB"[i % 2]
        knob[0] = arm == "B"
        matmul._WGMMA_LAYOUTS.clear()  # each operand layout decided anew under the knob
        c0 = FAKE.counts()["launches"]
        m0, n0 = _IN_MATMUL
        r0 = _IN_REPLAY[0]
        r = one_step(w)
        if i >= 2:  # the first pair settles each arm's caches
            got[arm].append(r[3])
            inner[arm].append(_IN_MATMUL[0] - m0)
            replay[arm].append(_IN_REPLAY[0] - r0)
        launches[arm] = FAKE.counts()["launches"] - c0
        calls[arm] = _IN_MATMUL[1] - n0
    knob[0] = was
    matmul._WGMMA_LAYOUTS.clear()
    print(f"A/B of --knob {args.knob} over {pairs} pairs (CPU ms per step, load average {os.getloadavg()[0]:.2f}):")
    labels = {"prepared": ("general launch path", "prepared launches"),
              "transposed": ("row-major copies", "transposed in place")}[args.knob]
    for arm, label in zip("AB", labels):
        v = got[arm]
        u = inner[arm]
        print(f"  {arm} {label:<22} step min {min(v) * 1e3:7.2f}  median {statistics.median(v) * 1e3:7.2f}; "
              f"in {calls[arm]} wgmma launcher calls min {min(u) * 1e3:6.2f}  median {statistics.median(u) * 1e3:6.2f} "
              f"({statistics.median(u) / max(calls[arm], 1) * 1e6:.1f} us each); replays min "
              f"{min(replay[arm]) * 1e3:6.2f} median {statistics.median(replay[arm]) * 1e3:6.2f}; "
              f"launches {launches[arm]}")


def main() -> int:
    if not args.fake_tuning:
        h200_choices()
    if args.ab:
        time_matmul_candidates()
    t = time.perf_counter()
    w = workload()
    print(f"built in {time.perf_counter() - t:.1f} s", flush=True)
    for i in range(args.warmup):
        t = time.perf_counter()
        w.run()
        print(f"warm-up step {i}: {time.perf_counter() - t:.2f} s", flush=True)
    best = [float("inf")] * 4
    calls: dict[str, int] = {}
    for _ in range(args.steps):
        c0 = FAKE.counts()
        r = one_step(w)
        c1 = FAKE.counts()
        best = [min(a, b) for a, b in zip(best, r)]
        calls = {k: c1[k] - c0[k] for k in COLS}
    print(f"\nember host cost of one warm GPT step on the fake CUDA driver ({fake_driver.NAME}; kernels do not run)")
    print(f"shape: {args.layers} layers x 768, 12 heads, batch {args.batch}, block {args.block}, amp {args.amp}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; best of {args.steps} steps after {args.warmup}")
    print(f"enqueue  wall {best[0] * 1e3:8.1f} ms  cpu {best[1] * 1e3:8.1f} ms")
    print(f"step     wall {best[2] * 1e3:8.1f} ms  cpu {best[3] * 1e3:8.1f} ms")
    print("driver calls per step: " + ", ".join(f"{k} {v}" for k, v in calls.items()))
    names = FAKE.recent_launches(calls["launches"])
    if len(names) == calls["launches"]:
        print(f"launches by family (top {args.families}):")
        for n, c in families(names)[:args.families]:
            print(f"  {c:5d} {n}")
    if args.ab:
        ab(w, args.ab)
    if args.profile:
        import cProfile
        import io
        import pstats

        pr = cProfile.Profile()
        x, y = w.data[0]
        ember.sync(w.dev)
        pr.enable()
        w.step(x, y).item()
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats(args.sort).print_stats(args.top)
        print(out.getvalue())
    if FAKE.gaps:
        print(f"\nfake driver gaps hit: {sorted(set(FAKE.gaps))}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
