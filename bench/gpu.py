"""ember on the CUDA runtime against torch on the same GPU, same inputs, same process.

Every row times both sides with device events unless it says "host": each sample brackets
``BATCH`` back-to-back calls with two events, a first call already in flight when the first
event is recorded (the host work of call i + 1, such as ember's registration and drain or
torch's dispatch, overlaps the device work of call i, as in a training loop: steady-state
throughput), and the row reports the median per call. Host costs have their own rows: per-op
latency and start times are host clocks around a synchronisation. Prints one table; ``--out
DIR`` also writes ``gpu_bench.json`` and ``gpu_bench.md`` there.

    python bench/gpu.py [--quick] [--only chain,matmul] [--out DIR]

Rows (issue 7's goals in the last column):
  copy            torch clone of 1 GiB f32 (the bandwidth ceiling: bytes read + written)
  chain8          8 elementwise ops on 256M f32: ember fused (Device.cuda()), ember eager, torch eager
  sum / softmax   sum of 256M f32; softmax over rows of (32768, 8192) f32
  matmul          f32 at 4096 (ember's choice and each candidate that finishes) vs torch (no tf32)
  tf32            f32 at 4096 and 8192 under set_float32_matmul_precision("high") vs torch allow_tf32
  mma             bf16/f16 at 4096 and 8192: the wgmma (TMA) and mma.sync kernels vs torch; bf16 4096
                  matmul + bias + GELU epilogue vs the same kernel alone and torch eager
  per-op          tiny add: eager launch, fusion registration, realised round trip (.item())
  start           new processes: import ember; first 1024^2 f32 matmul with empty / warm caches
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
from ember import Device  # noqa: E402
from ember.dlpack import _cube_primitive  # noqa: E402

FUSED, EAGER = Device.cuda(), Device.cuda(fusion=False)
ROWS: list[dict] = []
#: calls per timed sample (see the module docstring)
BATCH = 5


def row(name: str, ember_s: float | None, peer_s: float | None, peer: str, note: str = "", goal: str = "") -> None:
    r = {
        "row": name,
        "ember_ms": None if ember_s is None else ember_s * 1e3,
        "peer": peer,
        "peer_ms": None if peer_s is None else peer_s * 1e3,
        "ratio": (ember_s / peer_s) if ember_s and peer_s else None,
        "note": note,
        "goal": goal,
    }
    ROWS.append(r)
    e = "-" if r["ember_ms"] is None else f"{r['ember_ms']:.4g}"
    p = "-" if r["peer_ms"] is None else f"{r['peer_ms']:.4g}"
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}x"
    print(f"{name:34} ember {e:>10} ms   {peer:14} {p:>10} ms   {ratio:>8}   {note}", flush=True)


def torch_time(fn, reps: int) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()  # in flight when the first event is recorded: the samples see a busy device
        a.record()
        for _ in range(BATCH):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / BATCH)
    return statistics.median(out)


def ember_time(client, fn, reps: int) -> float:
    for _ in range(2):
        fn()
    client.sync()

    def batch() -> None:
        for _ in range(BATCH):
            fn()

    out = []
    for _ in range(reps):
        fn()  # in flight when the first event is recorded (see torch_time)
        out.append(client.profile(batch)[1] / BATCH)
    return statistics.median(out)


def ember_pair(client, base, other, reps: int) -> tuple[float, float, float]:
    """``base`` and ``other`` timed in alternating batches (each as ``ember_time`` times one):
    under load the H200 moves its clock by 10-20% within a second, so two rows timed one
    after the other can differ by more than a few-percent effect between them. Returns the
    median time per call of each and the median of the per-pair ratios other / base."""
    for fn in (base, other):
        for _ in range(2):
            fn()
    client.sync()

    def batch(fn) -> None:
        for _ in range(BATCH):
            fn()

    tb, to, ratios = [], [], []
    for _ in range(reps):
        base()
        x = client.profile(lambda: batch(base))[1] / BATCH
        other()
        y = client.profile(lambda: batch(other))[1] / BATCH
        tb.append(x)
        to.append(y)
        ratios.append(y / x)
    return statistics.median(tb), statistics.median(to), statistics.median(ratios)


def client_of(dev: Device):
    from ember.cube.launch import _client_of

    return _client_of(dev)


def to_ember(t: torch.Tensor, dev: Device) -> ember.Tensor:
    """The same values on an ember device (a device-to-device copy through DLPack)."""
    view = ember.from_dlpack(t)
    if dev == EAGER:
        return view + 0 if t.dtype != torch.bool else view
    return ember.tensor(view.numpy(), device=dev) if t.numel() < 1 << 20 else _copy_to(view, dev)


def _copy_to(view: ember.Tensor, dev: Device) -> ember.Tensor:
    # a fresh fused-device tensor with the view's values (host round trip is too slow at 1 GiB)
    out = ember.zeros(view.shape, dtype=view.dtype, device=dev) + 0
    ember.sync(dev)

    dst, src = _cube_primitive(out), _cube_primitive(view)
    s = dst.client.server
    s.current()
    s.cu.cuMemcpyDtoDAsync(dst.buffer.ptr, src.buffer.ptr, src.buffer.nbytes, s.stream)
    s.sync()
    return out


def chain(x):
    y = x * 2.0
    y = y + 1.0
    y = y.sigmoid()
    y = y * x
    y = y - 0.5
    y = y.abs()
    y = y.sqrt()
    return y + 1.0


# --------------------------------------------------------------------------- rows
def bench_copy(reps: int) -> float:
    x = torch.rand(1 << 28, device="cuda")
    t = torch_time(lambda: x.clone(), reps)
    row("copy 1 GiB f32 (torch clone)", None, t, "torch", f"{2 * x.numel() * 4 / t / 1e12:.2f} TB/s")
    return 2 * x.numel() * 4 / t


def bench_chain(reps: int, bw: float) -> None:
    n = 1 << 28
    xt = torch.rand(n, device="cuda")
    floor = 2 * n * 4 / bw
    t_torch = torch_time(lambda: chain(xt), reps)
    ref = chain(xt)
    for label, dev in (("fused", FUSED), ("eager", EAGER)):
        x = to_ember(xt, dev)
        c = client_of(dev)

        def run(x=x):
            y = chain(x)
            _cube_primitive(y)  # drains the fused chain (launches it; no host wait)
            return y

        y = run()
        err = float((torch.from_dlpack(y) - ref).abs().max()) if dev == EAGER else float(
            np.abs(np.asarray(y.numpy()[:4096]) - ref[:4096].cpu().numpy()).max()
        )
        t = ember_time(c, run, reps)
        row(f"chain8 256M f32 ({label})", t, t_torch, "torch eager",
            f"{t / floor:.2f}x floor ({floor * 1e3:.3f} ms); max err {err:.1e}", "fused <= 1.1x floor")
        if dev == FUSED:
            # the chain's sum: the reduce-prologue fuser splits the 1-d row into chunks, so the
            # chain is never written (floor: one read of x)
            def run_sum(x=x):
                s = chain(x).sum()
                _cube_primitive(s)
                return s

            got = float(run_sum().item())
            want = float(chain(xt).double().sum())
            t = ember_time(c, run_sum, reps)
            t_ts = torch_time(lambda: chain(xt).sum(), reps)
            row("chain8 + sum 256M f32 (fused)", t, t_ts, "torch eager",
                f"{t / (floor / 2):.2f}x the read floor ({floor / 2 * 1e3:.3f} ms); rel err "
                f"{abs(got - want) / abs(want):.1e}", "")
        del x, y


def bench_lines(reps: int, bw: float) -> None:
    """One binary kernel over 256M f32 in lines of w lanes: which access width the CUDA target
    should prefer (4 lanes = one 16-byte load per operand)."""
    from ember import cube

    @cube.kernel
    def add_lines(x: cube.Array[cube.Line[cube.f32]], y: cube.Array[cube.Line[cube.f32]],
                  out: cube.Array[cube.Line[cube.f32]]):
        i = cube.ABSOLUTE_POS
        if i < out.len():
            out[i] = x[i] + y[i]

    n = 1 << 28
    xt, yt = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    x, y = to_ember(xt, EAGER), to_ember(yt, EAGER)
    out = x + 0
    c = client_of(EAGER)

    px, py, po = (_cube_primitive(t) for t in (x, y, out))
    t_t = torch_time(lambda: torch.add(xt, yt), reps)
    for w in (1, 2, 4, 8, 16):
        count = cube.CubeCount.covering(n // w, 256)
        t = ember_time(c, lambda w=w, count=count: add_lines.launch(
            c, count, cube.CubeDim(256), cube.lines(px, w), cube.lines(py, w), cube.lines(po, w)), reps)
        row(f"add lines w={w} 256M f32", t, t_t, "torch add", f"{3 * n * 4 / t / 1e12:.2f} TB/s")


def bench_reduce(reps: int, bw: float) -> None:
    n = 1 << 28
    xt = torch.rand(n, device="cuda")
    x = to_ember(xt, EAGER)
    c = client_of(EAGER)
    t_t = torch_time(lambda: xt.sum(), reps)
    t_e = ember_time(c, lambda: x.sum(), reps)
    got, want = float(x.sum().item()), float(xt.double().sum())
    row("sum 256M f32", t_e, t_t, "torch", f"{n * 4 / t_e / bw:.0%} of copy bw; rel err {abs(got - want) / want:.1e}",
        ">= 85% of copy bw")
    c.max_line_bytes = 64  # the same sum reading 64-byte lines (4 loads per unit and step)
    try:
        t_64 = ember_time(c, lambda: x.sum(), reps)
    finally:
        del c.max_line_bytes
    row("sum 256M f32, 64-byte lines", t_64, t_t, "torch", f"{n * 4 / t_64 / bw:.0%} of copy bw")
    del x, xt
    xt = torch.rand(32768, 8192, device="cuda")
    x = to_ember(xt, EAGER)
    t_t = torch_time(lambda: xt.softmax(1), reps)
    t_e = ember_time(c, lambda: x.softmax(1), reps)
    err = float((torch.from_dlpack(x.softmax(1)) - xt.softmax(1)).abs().max())
    row("softmax (32768, 8192) f32", t_e, t_t, "torch",
        f"{2 * xt.numel() * 4 / t_e / bw:.0%} of copy bw; max err {err:.1e}", ">= 85% of copy bw")


def bench_matmul(reps: int, size: int = 4096) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    at, bt = torch.rand(size, size, device="cuda"), torch.rand(size, size, device="cuda")
    flops = 2 * size**3
    t_t = torch_time(lambda: at @ bt, reps)
    ref = (at.double() @ bt.double())
    a, b = to_ember(at, EAGER), to_ember(bt, EAGER)
    c = client_of(EAGER)
    from ember.backends.cube.matmul import MATMUL_CANDIDATES

    bk = EAGER.backend().inner
    pa, pb = _cube_primitive(a), _cube_primitive(b)
    for cand in MATMUL_CANDIDATES:
        if cand.name in ("naive", "blocked", "blocked_muladd") and size > 1024:
            continue  # one unit per output / per cube: far too slow at this size on a GPU
        a2, b2, out = bk._matmul_operands(pa, pb)
        try:
            t = ember_time(c, lambda cand=cand, a2=a2, b2=b2, out=out: cand.launch(bk, a2, b2, out), max(3, reps // 3))
        except Exception as e:  # noqa: BLE001
            row(f"matmul f32 {size} [{cand.name}]", None, t_t, "torch (no tf32)", f"failed: {e}"[:80])
            continue
        from ember.tensor import _make

        got = torch.from_dlpack(_make(out, EAGER.backend(), ember.float32)).double()
        rel = float((got - ref).norm() / ref.norm())
        row(f"matmul f32 {size} [{cand.name}]", t, t_t, "torch (no tf32)",
            f"{flops / t / 1e12:.1f} vs {flops / t_t / 1e12:.1f} TFLOP/s; rel err {rel:.1e}", ">= 0.9x torch")
    # the hand-written SGEMM tiles, then the public a @ b (the tuner's choice)
    from ember.backends.cube.cuda_kernels import sgemm as cuda_sgemm

    for tiles in cuda_sgemm.SGEMM_TILES:
        a2, b2, out = bk._matmul_operands(pa, pb)
        t = ember_time(c, lambda a2=a2, b2=b2, out=out, tiles=tiles: cuda_sgemm.matmul_sgemm(c, a2, b2, out, tiles),
                       reps)
        from ember.tensor import _make

        got = torch.from_dlpack(_make(out, EAGER.backend(), ember.float32)).double()
        rel = float((got - ref).norm() / ref.norm())
        row(f"matmul f32 {size} [{tiles.name}]", t, t_t, "torch (no tf32)",
            f"{flops / t / 1e12:.1f} vs {flops / t_t / 1e12:.1f} TFLOP/s; rel err {rel:.1e}", ">= 0.9x torch")

    def public():
        y = a @ b
        _cube_primitive(y)
        return y

    got = torch.from_dlpack(public()).double()
    rel = float((got - ref).norm() / ref.norm())
    t = ember_time(c, public, reps)
    row(f"matmul f32 {size} [public a@b]", t, t_t, "torch (no tf32)",
        f"{flops / t / 1e12:.1f} vs {flops / t_t / 1e12:.1f} TFLOP/s; rel err {rel:.1e}; {_winners('matmul')}",
        ">= 0.9x torch")


def _winners(tset: str) -> str:
    """A tuner's in-memory winners (which candidate a public row ran)."""
    from ember.autotune import tuner

    names = sorted({w.name for k, w in tuner._decisions.items() if k[1] == tset})
    return f"{tset} winners " + ",".join(names) if names else f"no {tset} decision"


def bench_tf32(reps: int) -> None:
    """float32 on the tf32 tensor cores (``ember.set_float32_matmul_precision("high")``: wgmma +
    TMA after B's transpose, the tuned choice through the public API) vs torch with
    ``allow_tf32`` on the same inputs; both switches restored after."""
    before, flag = ember.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32
    ember.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        c = client_of(EAGER)
        for size in (4096, 8192):
            at, bt = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
            torch.cuda.synchronize()
            a, b = ember.from_dlpack(at), ember.from_dlpack(bt)
            flops = 2 * size**3
            t_t = torch_time(lambda at=at, bt=bt: at @ bt, reps)
            t_e = ember_time(c, lambda a=a, b=b: _cube_primitive(a @ b), reps)
            got = torch.from_dlpack(a @ b).double()
            c.sync()
            ref = at.double() @ bt.double()
            rel = float((got - ref).norm() / ref.norm())
            row(f"matmul tf32 {size} [public a@b]", t_e, t_t, "torch tf32",
                f"{flops / t_e / 1e12:.0f} vs {flops / t_t / 1e12:.0f} TFLOP/s; rel err vs f64 {rel:.1e}",
                ">= 0.8x torch")
            del at, bt, a, b, got, ref
    finally:
        ember.set_float32_matmul_precision(before)
        torch.backends.cuda.matmul.allow_tf32 = flag


def bench_mma(reps: int) -> None:
    """The tensor-core kernels (``cuda_wgmma``: wgmma + TMA on sm_90a, the top candidate;
    ``cuda_mma``: mma.sync) vs torch (cuBLAS)."""
    from ember.backends.cube.cuda_kernels.mma import matmul_mma
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma

    c = client_of(EAGER)
    kernels = (("wgmma", matmul_wgmma), ("mma.sync", matmul_mma))
    for dtype in (torch.bfloat16, torch.float16):
        for size in (4096, 8192):
            at = torch.randn(size, size, device="cuda", dtype=dtype)
            bt = torch.randn(size, size, device="cuda", dtype=dtype)
            out = torch.empty(size, size, device="cuda", dtype=dtype)
            torch.cuda.synchronize()
            pa, pb, po = (_cube_primitive(ember.from_dlpack(t)) for t in (at, bt, out))
            flops = 2 * size**3
            t_t = torch_time(lambda at=at, bt=bt: at @ bt, reps)
            ref = (at.float() @ bt.float())
            for name, mm in kernels:
                t_e = ember_time(c, lambda pa=pa, pb=pb, po=po, mm=mm: mm(c, pa, pb, po), reps)
                c.sync()
                rel = float((out.float() - ref).norm() / ref.norm())
                row(f"matmul {str(dtype)[6:]} {size} [{name}]", t_e, t_t, "torch",
                    f"{flops / t_e / 1e12:.0f} vs {flops / t_t / 1e12:.0f} TFLOP/s; rel err {rel:.1e}",
                    ">= 0.8x torch")
            del at, bt, out, ref
    size = 4096
    at = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(size, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    pa, pb, po, pbias = (_cube_primitive(ember.from_dlpack(t)) for t in (at, bt, out, bias))
    t_torch = torch_time(lambda: torch.nn.functional.gelu(at @ bt + bias), reps)
    ref = torch.nn.functional.gelu(at.float() @ bt.float() + bias.float())
    for name, mm in kernels:
        t_mm, t_epi, ratio = ember_pair(c, lambda mm=mm: mm(c, pa, pb, po), lambda mm=mm: mm(c, pa, pb, po, pbias),
                                        2 * reps)
        c.sync()
        rel = float((out.float() - ref).norm() / ref.norm())
        row(f"bf16 4096 mm+bias+gelu [{name}]", t_epi, t_torch, "torch eager",
            f"{ratio:.3f}x our mm alone ({t_mm * 1e3:.3f} ms), batches interleaved; rel err {rel:.1e}",
            "<= 1.05x mm, < torch")
    # the same through the public API on the fused device: the matmul-epilogue fuser's tuned choice
    # against the tuned matmul alone (each call drained: launches queued, no host wait)
    x, w, b = (to_ember(t, FUSED) for t in (at, bt, bias))
    c = client_of(FUSED)

    def public(epilogue: bool):
        y = (x @ w + b).gelu() if epilogue else x @ w
        _cube_primitive(y)
        return y

    rel = float((torch.from_dlpack(public(True)).float() - ref).norm() / ref.norm())
    t_mm, t_epi, ratio = ember_pair(c, lambda: public(False), lambda: public(True), 2 * reps)
    row("bf16 4096 gelu(x@w+b) [public API]", t_epi, t_torch, "torch eager",
        f"{ratio:.3f}x x@w on the same device ({t_mm * 1e3:.3f} ms), batches interleaved; rel err {rel:.1e}; "
        f"{_winners('matmul_epilogue')}", "<= 1.05x mm, < torch")
    # a transposed weight (x @ w.T, as a Linear layer and the backward compute): the tensor
    # cores take a row-major copy of w first
    wt = w.t()
    t_tt = torch_time(lambda: at @ bt.t(), reps)
    ref_t = at.float() @ bt.float().t()

    def public_t():
        y = x @ wt
        _cube_primitive(y)
        return y

    rel = float((torch.from_dlpack(public_t()).float() - ref_t).norm() / ref_t.norm())
    t_t = ember_time(c, public_t, reps)
    row("bf16 4096 x@w.T [public API]", t_t, t_tt, "torch",
        f"{t_t / t_mm:.3f}x x@w ({t_mm * 1e3:.3f} ms); rel err {rel:.1e}", "")


def bench_per_op(n: int = 2000) -> None:
    a = ember.tensor(np.ones(16, np.float32), device=EAGER)
    b = ember.tensor(np.ones(16, np.float32), device=EAGER)
    at, bt = torch.ones(16, device="cuda"), torch.ones(16, device="cuda")

    def host_loop(fn, sync) -> float:
        for _ in range(50):
            fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t0) / n

    te = host_loop(lambda: a + b, lambda: ember.sync(EAGER))
    tt = host_loop(lambda: at + bt, torch.cuda.synchronize)
    row("per-op add 16 f32 (eager, host)", te, tt, "torch eager", "launch cost per op")
    # registration alone: blocks of 32 chained adds (one cached plan, one fused kernel, compiled
    # in the warm-up), the host clock stopped before each drain
    fa = ember.tensor(np.ones(16, np.float32), device=FUSED)
    fb = ember.tensor(np.ones(16, np.float32), device=FUSED)
    total, count = 0.0, 0
    for rep in range(60):
        acc = fa
        t0 = time.perf_counter()
        for _ in range(32):
            acc = acc + fb
        if rep >= 10:  # warm-up: plan search and compile
            total += time.perf_counter() - t0
            count += 32
        acc.numpy()
    row("lazy registration (fusion, host)", total / count, None, "", "per op, drains excluded", "<= 5 us")
    tt = host_loop(lambda: (at + bt).sum().item(), lambda: None)
    te = host_loop(lambda: (fa + fb).sum().item(), lambda: None)
    row("tiny op round trip .item() (host)", te, tt, "torch eager", "(a+b).sum().item(), Device.cuda()", "<= 40 us")
    te = host_loop(lambda: (a + b).sum().item(), lambda: None)
    row("tiny op round trip .item() (host, eager)", te, tt, "torch eager", "the same on Device.cuda(fusion=False)",
        "<= 40 us")
    # one op, realised and read back: the round trip of a single tiny op
    tt = host_loop(lambda: (at + bt).cpu().numpy(), lambda: None)
    te = host_loop(lambda: (fa + fb).numpy(), lambda: None)
    row("one tiny op (a+b).numpy() (host)", te, tt, "torch eager", "Device.cuda(); torch (a+b).cpu().numpy()")
    te = host_loop(lambda: (a + b).numpy(), lambda: None)
    row("one tiny op (a+b).numpy() (host, eager)", te, tt, "torch eager", "Device.cuda(fusion=False)")


def bench_start() -> None:
    code = textwrap.dedent(
        """
        import time, json
        t0 = time.perf_counter()
        import ember, numpy as np
        t1 = time.perf_counter()
        d = ember.Device.cuda(fusion=False)
        a = ember.tensor(np.random.rand(1024, 1024).astype(np.float32), device=d)
        b = ember.tensor(np.random.rand(1024, 1024).astype(np.float32), device=d)
        t2 = time.perf_counter()
        (a @ b).numpy()
        t3 = time.perf_counter()
        from ember.cube.runtime.client import get_client
        s = get_client("cuda", (0,)).server
        print(json.dumps({"import": t1 - t0, "init": t2 - t1, "first_matmul": t3 - t2,
                          "compiles": s.compiles, "loads": s.store_loads, "launches": s.launches}))
        """
    )
    with tempfile.TemporaryDirectory() as cache:
        path = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
        env = dict(os.environ, EMBER_CACHE_DIR=cache, PYTHONPATH=path)
        for label in ("cold", "warm"):
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
            if r.returncode:
                row(f"start ({label})", None, None, "", "failed: " + r.stderr.strip().splitlines()[-1][:80])
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            row(f"start {label}: first 1024^2 matmul", d["first_matmul"], None, "",
                f"import {d['import'] * 1e3:.0f} ms, init {d['init'] * 1e3:.0f} ms, {d['compiles']} compiles, "
                f"{d['loads']} store loads, {d['launches']} launches", "cold <= 1 s, warm <= 30 ms")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--out", default="")
    a = p.parse_args()
    reps = 5 if a.quick else 20
    only = [s for s in a.only.split(",") if s]

    def want(name: str) -> bool:
        return not only or any(o in name for o in only)

    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | ember {ember.__version__} | "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    bw = bench_copy(reps)
    failed = False
    for name, fn in (
        ("chain", lambda: bench_chain(reps, bw)),
        ("lines", lambda: bench_lines(reps, bw)),
        ("reduce", lambda: bench_reduce(reps, bw)),
        ("matmul", lambda: bench_matmul(reps)),
        ("mma", lambda: bench_mma(reps)),
        ("tf32", lambda: bench_tf32(reps)),
        ("per-op", bench_per_op),
        ("start", bench_start),
    ):
        if want(name):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - keep the other rows
                import traceback

                traceback.print_exc()
                row(name, None, None, "", f"ERROR {type(e).__name__}: {e}"[:100])
                failed = True
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_bench.json").write_text(json.dumps(ROWS, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
