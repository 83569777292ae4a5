"""The cold first unit of a bench/train.py workload on ``Device.cpu().autodiff()``, with where
its time went: wall time, the C compiler's CPU time (the children's), the main thread's CPU
time, kernels compiled and compiler runs (several kernels share one run when bundled).

    EMBER_CACHE_DIR=$(mktemp -d) python bench/cold_epoch.py                 # digits epoch
    EMBER_CACHE_DIR=$(mktemp -d) EMBER_CPU_BUNDLE=0 python bench/cold_epoch.py   # one cc per kernel

Use a fresh cache directory for every run (else nothing compiles); read wall times only
against runs at the same load (printed), CPU times hold better under load.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    """Build the workload (torch twin for the weights), run its first unit, print one line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="digits", choices=["digits", "mlp784", "gpt"])
    p.add_argument("--gpt-config", default="small")
    p.add_argument("--amp", default="off")
    args = p.parse_args()

    import torch
    from train import Workload

    import ember
    from ember.cube.runtime.client import get_client

    torch.manual_seed(0)
    tw = Workload(torch, args.workload, torch.device("cpu"), args)
    ew = Workload(ember, args.workload, ember.Device.cpu().autodiff(), args, torch_twin=tw)
    server = get_client("cpu", 0).server
    runs = lambda: getattr(server, "cc_runs", -1)  # noqa: E731 - a tree before bundles has no count
    c0, r0 = server.compiles, runs()
    load = os.getloadavg()[0]
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, m0 = time.perf_counter(), time.thread_time()
    loss = ew.run()
    wall, main_cpu = time.perf_counter() - t0, time.thread_time() - m0
    k = resource.getrusage(resource.RUSAGE_CHILDREN)
    cc = k.ru_utime + k.ru_stime - kids.ru_utime - kids.ru_stime
    print(f"{args.workload}: first unit {wall:.3f} s, load {load:.2f} -> {os.getloadavg()[0]:.2f}, "
          f"cc cpu {cc:.2f} s, main thread cpu {main_cpu:.2f} s, kernels compiled {server.compiles - c0}, "
          f"cc runs {runs() - r0}, loss {loss:.6f}")


if __name__ == "__main__":
    main()
