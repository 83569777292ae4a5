"""Where a CUDA training step's time goes: bench/train.py's workload on ``cuda``, its wall time
against torch eager, the host's enqueue time of one step (no read), a cProfile of one step, and
the device time of every launch (CUDA events around each launch).

    python bench/gpu_profile.py --config gpt2-small --amp bf16
    EMBER_CUDA_FASTCALL=0 python bench/gpu_profile.py --kernels   # replayed launches evented too

Replayed launches bypass ``CudaServer._launch_params`` on the ctypes fast path, so the per-kernel
table counts them only with ``EMBER_CUDA_FASTCALL=0`` (the device time per kernel is the same).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import os
import pstats
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as T  # noqa: E402


def timed(w: Any, n: int = 3) -> float:
    """Seconds per unit of workload ``w`` over ``n`` units, synchronised at both ends."""
    T.sync(w.lib, w.dev)
    t = time.perf_counter()
    for _ in range(n):
        w.run()
    T.sync(w.lib, w.dev)
    return (time.perf_counter() - t) / n


def kernel_table(ember: Any, ew: Any) -> None:
    """Run one unit with events around every launch; print device milliseconds per kernel."""
    from ember.cube.runtime import cuda_server

    s = next(o for o in gc.get_objects() if isinstance(o, cuda_server.CudaServer))
    cu = s.cu
    rec: list[tuple[str, Any, Any]] = []
    params, raw = s._launch_params, s.launch_raw

    def evented(name: str, fn: Any, *args: Any) -> Any:
        e0, e1 = s.event(), s.event()
        cu.cuEventRecord(e0, s.stream)
        r = fn(*args)
        cu.cuEventRecord(e1, s.stream)
        rec.append((name, e0, e1))
        return r

    s._launch_params = lambda k, *a: evented(k.entry, params, k, *a)
    s.launch_raw = lambda fn, *a: evented("raw:" + s._raw_names.get(id(fn), "?"), raw, fn, *a)
    ew.run()
    T.sync(ember, ew.dev)
    acc: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for name, e0, e1 in rec:
        acc[name][0] += 1
        acc[name][1] += float(cu.cuEventElapsedTime(e0, e1)[1])
    print(f"device kernel time {sum(v[1] for v in acc.values()):.2f} ms over {len(rec)} launches")
    family: dict[str, float] = collections.defaultdict(float)
    for name, v in acc.items():
        family[name.rsplit("_", 2)[0]] += v[1]
    for name, ms in sorted(family.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  family {ms:8.2f} ms {name}")
    for name, v in sorted(acc.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"  {v[1]:8.2f} ms {int(v[0]):4d}x {name}")


def main() -> None:
    """Build the twin workloads, time them, profile the host, then (``--kernels``) the device."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="gpt2-small", choices=sorted(T.GPT_CONFIGS))
    ap.add_argument("--amp", default="bf16", choices=["off", "bf16", "fp16"])
    ap.add_argument("--workload", default="gpt")
    ap.add_argument("--kernels", action="store_true", help="also time every launch with events")
    a = ap.parse_args()
    import torch

    import ember

    args = argparse.Namespace(gpt_config=a.config, amp=a.amp)
    torch.manual_seed(0)
    tw = T.Workload(torch, a.workload, torch.device("cuda"), args)
    ew = T.Workload(ember, a.workload, ember.Device.parse("cuda").autodiff(), args, torch_twin=tw)
    t = time.perf_counter()
    ew.run()
    print(f"first unit {time.perf_counter() - t:.1f} s", flush=True)
    for _ in range(2):
        ew.run()
        tw.run()
    print(f"step ember {timed(ew) * 1e3:.2f} ms torch {timed(tw) * 1e3:.2f} ms")
    T.sync(ember, ew.dev)
    t = time.perf_counter()
    x, y = ew.data[0]
    ew.step(x, y)
    host = time.perf_counter() - t
    T.sync(ember, ew.dev)
    print(f"host enqueue {host * 1e3:.2f} ms, enqueue+sync {(time.perf_counter() - t) * 1e3:.2f} ms")
    pr = cProfile.Profile()
    pr.enable()
    ew.run()
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(45)
    if a.kernels:
        kernel_table(ember, ew)


if __name__ == "__main__":
    main()
