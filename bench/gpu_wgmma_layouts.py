"""The wgmma kernel's operand-layout variants on a Hopper GPU: A read M-major (``x.T @ g``, a weight
gradient) and B read K-major (``x @ w.T``) in place, against the row-major kernel on copies
(the default) and torch. No GPU had run them when they were written (they compile for sm_90a);
this is the check that decides ``EMBER_WGMMA_TRANSPOSED``'s default.

    python bench/gpu_wgmma_layouts.py [--phases check,time,step] [--limits 150,90,270]

Phases, each in its own process under a time limit (a kernel that hangs or faults stops the
ones after it):

  check  every entry (bf16/f16 in, f32/16-bit out, + bias + GELU) of both tile widths in each
         variant (``_at``, ``_bt``, ``_atbt``): bit for bit equal to the row-major kernel on
         row-major copies of the same operands (the same products in the same order: only the
         shared-memory layout differs) and close to torch in float64; square, ragged (M, N, K not
         multiples of the tile) and batched shapes, outputs poisoned with NaN
  time   GPT-2-small's products at batch 8 x 1024 (bf16): ``x.T @ g`` and ``x @ w.T`` through the
         matmul candidate (``matmul._launch_wgmma``) with the variants against copy + row-major
         (device time, events around queued calls)
  step   bench/train.py's gpt2-small bf16 step in one process, steps rotating over three arms:
         the general launch path with row-major copies (as before session 11), prepared launches
         with copies (the default), prepared launches with the variants; host enqueue (the step's
         Python, no read) and the whole step, medians of 5, after warm-up units that compile

Exit status 0 when every phase run passed (the check found no difference).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

LAYOUTS = ((True, False), (False, True), (True, True))


def precompile(server) -> None:
    """Every tile config of every layout compiled together on the server's NVRTC pool (in
    ``preparing()`` a raw function's compile is queued, not run), so the phases do not wait for
    16 sources one after another."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    t = time.perf_counter()
    with server.preparing():
        for bn, staged in W._CONFIGS:
            for a_mn, b_k in ((False, False), *LAYOUTS):
                src, smem = W.layout_config(bn, staged, a_mn, b_k)
                server.raw_function(src, W.entry_name("bfloat16", "float32", False, a_mn, b_k), smem, W.WGMMA_ARCH)
    server.wait_prepared()
    print(f"compiled (or loaded) the wgmma sources in {time.perf_counter() - t:.1f} s", flush=True)


def phase_check() -> int:
    import torch
    from gpu_wgmma import rel_err, setup

    from ember.backends.cube.cuda_kernels import wgmma as W

    torch_, client, prim = setup()
    server = client.server
    precompile(server)
    shapes = [(256, 512, 256, 1), (200, 264, 72, 1), (384, 640, 1000, 1), (128, 256, 128, 3), (1160, 1800, 712, 2),
              (8192, 2304, 768, 1), (768, 768, 8192, 1)]
    bad = count = identical = 0
    for a_mn, b_k in LAYOUTS:
        for dtype in (torch.bfloat16, torch.float16):
            for m, n, k, batch in shapes:
                a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
                b = torch.randn(k, n, device="cuda", dtype=dtype)  # shared by the batch (step 0)
                bias = torch.randn(n, device="cuda", dtype=dtype)
                at = a.transpose(1, 2).contiguous()  # A^T (batch, k, m) as stored
                bt = b.t().contiguous()  # B^T (n, k) as stored
                ref = a.double() @ b.double()
                for out_dtype, with_bias in ((torch.float32, False), (dtype, False), (dtype, True)):
                    if with_bias and batch > 1:
                        continue
                    outs = []
                    for variant in (False, True):
                        out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=out_dtype)
                        pa = prim(at if variant and a_mn else a)
                        pb = prim(bt if variant and b_k else b)
                        po, pbias = prim(out), prim(bias)
                        W._launch(server, (W._addr(pa), m * k if batch > 1 else 0), (W._addr(pb), 0), W._addr(po),
                                  W._addr(pbias) if with_bias else 0, m, n, k, batch, pa.dtype.name,
                                  po.dtype.name, a_mn=variant and a_mn, b_k=variant and b_k)
                        client.sync()
                        outs.append(out)
                    want = ref
                    if with_bias:
                        z = ref + bias.double()
                        want = 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))
                    text, rel, nan = rel_err(torch_, outs[1], want)
                    same = bool(torch.equal(outs[0], outs[1]))
                    tol = 1e-5 if out_dtype is torch.float32 else 1e-2
                    ok = rel < tol and not nan
                    bad += not ok
                    count += 1
                    identical += same
                    if not ok or not same:
                        diff = int((outs[0] != outs[1]).sum())
                        print(f"{'BAD' if not ok else 'note'} {W.layout_suffix(a_mn, b_k)} {str(dtype)[6:]}->"
                              f"{str(out_dtype)[6:]}{' +bias+gelu' if with_bias else ''} {batch}x{m}x{n}x{k}: {text}, "
                              f"{diff} elements differ from the row-major kernel", flush=True)
        print(f"check {W.layout_suffix(a_mn, b_k)}: {count} products so far, {bad} bad, {identical} bit for bit "
              "equal to the row-major kernel", flush=True)
    return 1 if bad else 0


def phase_time() -> int:
    import torch
    from gpu_wgmma import event_timers, setup

    from ember.backends.cube import matmul as M
    from ember.backends.cube.cuda_kernels import wgmma as W

    torch_, client, prim = setup()
    precompile(client.server)
    ember_time, _ = event_timers(torch_, client, 20)
    rows, c = 8 * 1024, 768
    backend = type("B", (), {})()
    backend.client = client
    from ember.cube.runtime.tensor import CubeTensor, contiguous_strides

    def empty(shape, dtype):  # the copies' scratch from ember's pool, as the Cube backend's _empty
        n = math.prod(shape) * dtype.itemsize
        return CubeTensor(client, client.empty(n), tuple(shape), contiguous_strides(tuple(shape)), 0, dtype)

    backend._empty = empty
    for name, (m, k, n), a_t, b_t in (
        ("x.T @ g (dW, qkv)", (c, rows, 3 * c), True, False),
        ("x.T @ g (dW, fc)", (c, rows, 4 * c), True, False),
        ("x @ w.T (fc)", (rows, c, 4 * c), False, True),
        ("x @ w.T (proj)", (rows, 4 * c, c), False, True),
    ):
        src_a = torch.randn((k, m) if a_t else (m, k), device="cuda", dtype=torch.bfloat16)
        src_b = torch.randn((n, k) if b_t else (k, n), device="cuda", dtype=torch.bfloat16)
        pa, pb = prim(src_a), prim(src_b)
        a = pa.with_layout((m, k), (1, m), 0) if a_t else pa
        b = pb.with_layout((k, n), (1, k), 0) if b_t else pb
        out = prim(torch.empty((m, n), device="cuda", dtype=torch.bfloat16))
        assert isinstance(a, CubeTensor)
        got = {}
        for on in (False, True, False, True):
            W.TRANSPOSED[0] = on
            M._WGMMA_LAYOUTS.clear()
            got.setdefault(on, []).append(ember_time(lambda a=a, b=b, out=out: M._launch_wgmma(backend, a, b, out)))
        off, on = min(got[False]), min(got[True])
        flops = 2 * m * n * k
        print(f"time {name:18} {m}x{k} @ {k}x{n}: copy + row-major {off * 1e3:.3f} ms ({flops / off / 1e12:.0f} "
              f"TFLOP/s), in place {on * 1e3:.3f} ms ({flops / on / 1e12:.0f} TFLOP/s)", flush=True)
    return 0


def phase_step() -> int:
    import torch
    import train as T

    import ember
    from ember.backends.cube import matmul as M
    from ember.backends.cube.cuda_kernels import transpose as TR
    from ember.backends.cube.cuda_kernels import wgmma as W

    args = argparse.Namespace(gpt_config="gpt2-small", amp="bf16")
    torch.manual_seed(0)
    tw = T.Workload(torch, "gpt", torch.device("cuda"), args)
    ew = T.Workload(ember, "gpt", ember.Device.parse("cuda").autodiff(), args, torch_twin=tw)
    # (name, prepared launches, transposed operands in place)
    arms = (("general launches, copies", False, False), ("prepared, copies", True, False),
            ("prepared, in place", True, True))

    def arm(prepared: bool, transposed: bool) -> None:
        TR.PREPARED[0], W.TRANSPOSED[0] = prepared, transposed
        M._WGMMA_LAYOUTS.clear()

    t = time.perf_counter()
    for _, p, tr in arms:
        arm(p, tr)
        ew.run()
        ew.run()
    print(f"step: warm-up (compiles, every arm) {time.perf_counter() - t:.1f} s", flush=True)
    x, y = ew.data[0]
    enq: dict[str, list[float]] = {name: [] for name, _, _ in arms}
    full: dict[str, list[float]] = {name: [] for name, _, _ in arms}
    for i in range(15):
        name, p, tr = arms[i % 3]
        arm(p, tr)
        T.sync(ember, ew.dev)
        t = time.perf_counter()
        loss = ew.step(x, y)
        t1 = time.perf_counter()
        loss.item()
        T.sync(ember, ew.dev)
        enq[name].append(t1 - t)
        full[name].append(time.perf_counter() - t)
    arm(True, False)
    tt = []
    for _ in range(5):
        T.sync(torch, tw.dev)
        t = time.perf_counter()
        tw.run()
        T.sync(torch, tw.dev)
        tt.append(time.perf_counter() - t)
    for name, _, _ in arms:
        print(f"step gpt2-small bf16, {name:26}: host enqueue {statistics.median(enq[name]) * 1e3:6.1f} ms, "
              f"step {statistics.median(full[name]) * 1e3:6.1f} ms (medians of 5)", flush=True)
    print(f"step gpt2-small bf16, torch eager: {statistics.median(tt) * 1e3:.1f} ms", flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", default=None, choices=("check", "time", "step"))
    p.add_argument("--phases", default="check,time,step")
    p.add_argument("--limits", default="150,90,270", help="seconds for the check, time and step phases")
    a = p.parse_args()
    if a.phase is not None:
        return {"check": phase_check, "time": phase_time, "step": phase_step}[a.phase]()
    env = dict(os.environ)
    env.setdefault("EMBER_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp"), "ember-wgmma-cache")))
    status = 0
    for phase, limit in zip(("check", "time", "step"), (int(x) for x in a.limits.split(","))):
        if phase not in a.phases.split(","):
            continue
        t0 = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, __file__, "--phase", phase], env=env, timeout=limit)
            text, status = f"exit {r.returncode}", r.returncode
        except subprocess.TimeoutExpired:
            text, status = f"TIMED OUT after {limit} s (a hang?)", 124
        print(f"== phase {phase}: {text} in {time.perf_counter() - t0:.1f} s", flush=True)
        if status:
            break  # a kernel that hangs or fails its check is not timed
    return status


if __name__ == "__main__":
    raise SystemExit(main())
