"""The Hopper tensor-core matmul (ember.backends.cube.cuda_kernels.wgmma: wgmma + TMA, sm_90a) against
ember's mma.sync kernel and torch (cuBLAS), same GPU, same inputs, same process.

    python bench/gpu_wgmma.py [--configs 256x4g16,128x6g16p,256x4g16c2] [--sweep 2048,3072] [--out DIR]

Three phases, each in its own process under a time limit (a wrong mbarrier parity hangs a
kernel; a phase that hangs or fails stops the ones after it):

  diag   a TMA probe (one 128 x 64 box copied to shared memory and dumped: the 128-byte swizzle
         the wgmma descriptors assume) and a one-warpgroup wgmma kernel without TMA or mbarriers
         (operands stored swizzled by plain stores): which half is wrong when the main kernel is
  check  every entry of every tile config against torch on float64 upcasts: square, ragged (M, N,
         K not multiples of the tile) and batched shapes, outputs poisoned with NaN
  time   bf16 and f16 at 4096 and 8192: each config, ember mma.sync, the library's own choice
         (``matmul_wgmma``, timed twice: the spread of one kernel), torch; bf16 at the ``--sweep``
         sizes; bf16 4096 mm + bias + gelu with the GELU inlined and called

Configs ``BNxSTAGES[gGROUP_M][c2][p]``: tile 128 x BN, ring depth, tile-group rows, clusters of 2
CTAs sharing B by multicast, persistent blocks. Times are medians of event pairs around each call
with the calls queued back to back (host launch cost hidden while the GPU is busy). Prints one
table (TFLOP/s, speed relative to torch); ``--out DIR`` also writes ``wgmma_bench.md``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: diagnostic kernels (not library kernels): the TMA probe and the plain one-warpgroup wgmma
DIAG_KERNELS = r"""
extern __shared__ __align__(1024) unsigned char em_diag_smem[];

extern "C" __global__ void em_diag_tma(const __grid_constant__ em_tmap t, uint16_t *out, int c0, int c1, int bytes) {
    const uint32_t raw = em_smem(em_diag_smem);
    const uint32_t base = (raw + 1023u) & ~1023u;
    const uint32_t bar = base + bytes;
    if (threadIdx.x == 0) {
        em_bar_init(bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        em_bar_expect_tx(bar, bytes);
        em_tma_3d(base, &t, bar, c0, c1, 0);
    }
    em_bar_wait(bar, 0);
    const uint16_t *s = (const uint16_t *)(em_diag_smem + (base - raw));
    for (int i = threadIdx.x; i < bytes / 2; i += blockDim.x) out[i] = s[i];
}

/* 64 x 128 tile per block of one warpgroup, k steps of 64, operands stored swizzled by hand */
extern "C" __global__ void __launch_bounds__(128) em_diag_simple(const uint16_t *A, const uint16_t *B, float *C,
                                                                int M, int N, int K) {
    const uint32_t raw = em_smem(em_diag_smem);
    const uint32_t base = (raw + 1023u) & ~1023u;
    unsigned char *sA = em_diag_smem + (base - raw);   /* 64 rows x 128 bytes */
    unsigned char *sB = sA + 64 * 128;                 /* 2 chunks of 64 k-rows x 128 bytes */
    const int tid = threadIdx.x, m0 = blockIdx.y * 64, n0 = blockIdx.x * 128;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    for (int k0 = 0; k0 < K; k0 += 64) {
        for (int i = tid; i < 512; i += 128) {
            const int r = i >> 3, c = i & 7;
            const uint4 v = *(const uint4 *)(A + (size_t)(m0 + r) * K + k0 + c * 8);
            *(uint4 *)(sA + r * 128 + ((c ^ (r & 7)) * 16)) = v;
        }
        for (int i = tid; i < 1024; i += 128) {
            const int r = i >> 4, c = i & 15;
            const uint4 v = *(const uint4 *)(B + (size_t)(k0 + r) * N + n0 + c * 8);
            *(uint4 *)(sB + (c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) * 16)) = v;
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        em_fence_acc(acc);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            em_wgmma_n128_bf16(acc, em_desc(em_smem(sA) + kk * 32, 16, 1024),
                               em_desc(em_smem(sB) + kk * 2048, 8192, 1024));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        em_fence_acc(acc);
        __syncthreads();
    }
    em_store<1, 0, 0>(acc, C, (const void *)0, M, N, m0, n0, tid);
}
"""


def diag_source() -> str:
    from ember.backends.cube.cuda_kernels import wgmma as W

    return W._COMMON + W._wgmma_fn(128, "bf16") + DIAG_KERNELS


def parse_configs(text: str) -> list[tuple[int, int, int, bool, int]]:
    """``BNxSTAGES[gGROUP_M][c2][p]``: e.g. ``256x4g16c2p`` (c2: clusters of 2 CTAs sharing B by
    TMA multicast; p: persistent blocks, one per multiprocessor)."""
    import re

    out = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)x(\d+)(?:g(\d+))?(c2)?(p?)", part.strip().lower())
        if not m:
            raise SystemExit(f"bad config {part!r}")
        out.append((int(m[1]), int(m[2]), int(m[3] or 16), m[5] == "p", 2 if m[4] else 1))
    return out


def config_name(cfg: tuple[int, int, int, bool, int]) -> str:
    bn, st, g, p, cl = cfg
    return f"{bn}x{st}g{g}" + ("c2" if cl == 2 else "") + ("p" if p else "")


# --------------------------------------------------------------------------- helpers (GPU phases)
def setup():
    import torch

    import ember
    from ember import Device
    from ember.cube.launch import _client_of
    from ember.dlpack import _cube_primitive

    dev = Device.cuda(fusion=False)
    client = _client_of(dev)

    def prim(t):
        torch.cuda.synchronize()
        return _cube_primitive(ember.from_dlpack(t))

    return torch, client, prim


_SOURCES: dict = {}


def launch_config(client, cfg, a, b, out, bias=None, batch=1, sa=0, sb=0) -> None:
    """One wgmma launch of tile config ``cfg`` on CubeTensors (2-d, or flattened batches)."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    bn, st, g, persistent, cl = cfg
    key = (bn, st, g, cl)
    src = _SOURCES.get(key)
    if src is None:
        src = _SOURCES[key] = W.wgmma_source(bn, st, g, cluster=cl)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    W._launch(
        client.server, (W._addr(a), sa), (W._addr(b), sb), W._addr(out), 0 if bias is None else W._addr(bias),
        m, n, k, batch, a.dtype.name, out.dtype.name, src, bn, W.smem_bytes(bn, st), persistent, cl,
    )


def rel_err(torch, got, ref) -> str:
    got = got.double()
    nan = int(torch.isnan(got).sum())
    rel = float((got.nan_to_num(0) - ref).norm() / ref.norm())
    return f"rel {rel:.2e}" + (f" NaN {nan}" if nan else ""), rel, nan


def first_bad(torch, got, ref, tol: float) -> str:
    diff = (got.double().nan_to_num(1e30) - ref).abs()
    bad = diff > tol * ref.abs().max()
    idx = bad.nonzero()[:6].tolist()
    frac = float(bad.double().mean())
    return f"{frac:.1%} wrong, first {idx}"


# --------------------------------------------------------------------------- phase: diag
def phase_diag() -> None:
    import ctypes

    torch, client, prim = setup()
    from ember.backends.cube.cuda_kernels import wgmma as W

    server = client.server
    src = diag_source()
    # TMA probe: the 128 x 64 box at (k = 64, m = 128) of a (256, 192) bf16 matrix of distinct ids
    m, k = 256, 192
    ids = torch.arange(m * k, device="cuda", dtype=torch.int32).reshape(m, k)
    a = (ids % 30000).to(torch.int16).view(torch.bfloat16)
    dump = torch.zeros(128 * 64, device="cuda", dtype=torch.int16)
    pa = prim(a)
    pd = prim(dump.view(torch.bfloat16))
    smem = 1024 + 128 * 128 + 64
    fn = server.raw_function(src, "em_diag_tma", smem, W.WGMMA_ARCH)
    tmap = W._tensor_map(server, "bfloat16", W._addr(pa), k, m, 1, 0, 128)
    args = [tmap, ctypes.c_uint64(W._addr(pd)), ctypes.c_int32(64), ctypes.c_int32(128), ctypes.c_int32(128 * 128)]
    server.launch_raw(fn, (1, 1, 1), (128, 1, 1), args, smem)
    client.sync()
    got = dump.view(torch.int16).reshape(128, 8, 8).cpu()  # (row, stored chunk, element)
    want = torch.empty_like(got)
    src_ids = (ids % 30000).to(torch.int16).cpu()
    for r in range(128):
        for c in range(8):
            want[r, c ^ (r & 7)] = src_ids[128 + r, 64 + c * 8: 64 + c * 8 + 8]
    ok = bool((got == want).all())
    print(f"diag tma probe (128B swizzle, box 64x128 at (64, 128)): {'OK' if ok else 'MISMATCH'}", flush=True)
    if not ok:
        print("  got row 0..2 chunks:", got[:3, :, 0].tolist(), "want:", want[:3, :, 0].tolist())
    # plain one-warpgroup wgmma
    m, n, k = 128, 256, 192
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda")
    pa, pb, po = prim(a), prim(b), prim(out)
    smem = 1024 + 64 * 128 * 3
    fn = server.raw_function(src, "em_diag_simple", smem, W.WGMMA_ARCH)
    args = [ctypes.c_uint64(W._addr(t)) for t in (pa, pb, po)] + [ctypes.c_int32(v) for v in (m, n, k)]
    server.launch_raw(fn, (n // 128, m // 64, 1), (128, 1, 1), args, smem)
    client.sync()
    ref = a.double() @ b.double()
    text, rel, nan = rel_err(torch, out, ref)
    print(f"diag simple wgmma (1 warpgroup, no TMA) {m}x{n}x{k} bf16->f32: {text}"
          + ("" if rel < 1e-4 and not nan else "  " + first_bad(torch, out, ref, 1e-3)), flush=True)


# --------------------------------------------------------------------------- phase: check
def phase_check(configs: list[tuple[int, int]]) -> None:
    torch, client, prim = setup()
    import math

    shapes = [(256, 512, 256, 1), (200, 264, 72, 1), (384, 640, 1000, 1), (128, 256, 128, 3), (1160, 1800, 712, 2)]
    bad = 0
    for cfg in configs:
        worst: dict = {}
        count = 0
        for dtype in (torch.bfloat16, torch.float16):
            for m, n, k, batch in shapes:
                a = torch.randn(batch, m, k, device="cuda", dtype=dtype)
                b = torch.randn(k, n, device="cuda", dtype=dtype)  # shared by the batch (step 0)
                bias = torch.randn(n, device="cuda", dtype=dtype)
                ref = a.double() @ b.double()
                for out_dtype, with_bias in ((torch.float32, False), (dtype, False), (dtype, True)):
                    if with_bias and batch > 1:
                        continue
                    out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=out_dtype)
                    pa, pb, po, pbias = prim(a), prim(b), prim(out), prim(bias)
                    t0 = time.perf_counter()
                    launch_config(client, cfg, pa, pb, po, pbias if with_bias else None, batch, m * k, 0)
                    client.sync()
                    want = ref
                    if with_bias:
                        z = ref + bias.double()
                        want = 0.5 * z * (1 + torch.erf(z / math.sqrt(2)))
                    text, rel, nan = rel_err(torch, out, want)
                    tol = 1e-5 if out_dtype is torch.float32 else 1e-2
                    ok = rel < tol and not nan
                    bad += not ok
                    epi = " +bias+gelu" if with_bias else ""
                    label = f"check {config_name(cfg)} {str(dtype)[6:]}->{str(out_dtype)[6:]}{epi}"
                    worst[tol] = max(worst.get(tol, 0.0), rel)
                    count += 1
                    if not ok:
                        print(f"{label:42} {batch}x{m}x{n}x{k}: BAD {text}  {first_bad(torch, out, want, 3e-2)}"
                              f"  ({time.perf_counter() - t0:.2f}s)", flush=True)
        print(f"check {config_name(cfg)}: {count} products (every entry, shapes {shapes}), {bad} bad so far; "
              f"worst rel err f32 out {worst.get(1e-5, 0):.2e}, 16-bit out {worst.get(1e-2, 0):.2e}", flush=True)
    if bad:
        sys.exit(f"{bad} checks failed")


# --------------------------------------------------------------------------- phase: time
def queued_times(record, fn, sync, reps: int) -> float:
    """Median seconds of ``fn`` between events recorded around each call, the calls queued back
    to back (no host wait in between, so host launch cost is hidden while the GPU is busy)."""
    for _ in range(3):
        fn()
    marks = []
    for _ in range(reps):
        e0 = record()
        fn()
        marks.append((e0, record()))
    return statistics.median(sync(e0, e1) for e0, e1 in marks)


def event_timers(torch, client, reps: int):
    """(ember_time, torch_time): ``queued_times`` of a callable with events on ember's CUDA
    stream or torch's current stream."""
    server = client.server
    cu = server.cu

    def t_record():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def t_sync(e0, e1) -> float:
        e1.synchronize()
        return e0.elapsed_time(e1) / 1e3

    def e_record():
        _, e = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT)
        cu.cuEventRecord(e, server.stream)
        return e

    def e_sync(e0, e1) -> float:
        cu.cuEventSynchronize(e1)
        ms = float(cu.cuEventElapsedTime(e0, e1)[1])
        cu.cuEventDestroy(e0)
        cu.cuEventDestroy(e1)
        return ms / 1e3

    def torch_time(fn) -> float:
        torch.cuda.synchronize()
        return queued_times(t_record, fn, t_sync, reps)

    def ember_time(fn) -> float:
        client.sync()
        return queued_times(e_record, fn, e_sync, reps)

    return ember_time, torch_time


def phase_time(configs, reps: int, out_dir: str | None, sweep: list[int]) -> None:
    torch, client, prim = setup()
    from ember.backends.cube.cuda_kernels.mma import matmul_mma
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma

    server = client.server
    ember_time, torch_time = event_timers(torch, client, reps)

    rows = []

    def row(name: str, t: float | None, t_ref: float, flops: float, note: str = "") -> None:
        tf = "-" if t is None else f"{flops / t / 1e12:.0f}"
        ratio = "-" if t is None else f"{t_ref / t:.2f}"
        ms = "-" if t is None else f"{t * 1e3:.3f}"
        rows.append((name, ms, tf, f"{t_ref * 1e3:.3f}", f"{flops / t_ref / 1e12:.0f}", ratio, note))
        print(f"{name:36} {ms:>8} ms {tf:>5} TFLOP/s | torch {t_ref * 1e3:.3f} ms {flops / t_ref / 1e12:.0f} "
              f"TFLOP/s | {ratio}x torch's speed  {note}", flush=True)

    def product(dtype, size: int, with_mma: bool) -> None:
        at = torch.randn(size, size, device="cuda", dtype=dtype)
        bt = torch.randn(size, size, device="cuda", dtype=dtype)
        out = torch.empty(size, size, device="cuda", dtype=dtype)
        flops = 2.0 * size**3
        t_t = torch_time(lambda: at @ bt)
        ref = (at.float() @ bt.float()).double()
        pa, pb, po = prim(at), prim(bt), prim(out)
        dn = str(dtype)[6:]
        for cfg in configs:
            try:
                t = ember_time(lambda cfg=cfg: launch_config(client, cfg, pa, pb, po))
                text, _, _ = rel_err(torch, out, ref)
            except Exception as e:  # noqa: BLE001 - reported in the table
                t, text = None, f"failed: {e}"[:60]
            row(f"{dn} {size} wgmma {config_name(cfg)}", t, t_t, flops, text)
        if with_mma:
            t = ember_time(lambda: matmul_mma(client, pa, pb, po))
            row(f"{dn} {size} mma.sync", t, t_t, flops)
        for rep in (1, 2):  # twice: the spread between two timings of one kernel
            t = ember_time(lambda: matmul_wgmma(client, pa, pb, po))
            text, _, _ = rel_err(torch, out, ref)
            row(f"{dn} {size} wgmma default #{rep}", t, t_t, flops, f"{text}; {choice(size)}")

    def choice(size: int) -> str:
        from ember.backends.cube.cuda_kernels.wgmma import _choose

        bn, persistent = _choose(size, size, 1, server.info.multiprocessors)
        return f"tiles 128x{bn}" + (", persistent" if persistent else "")

    for dtype in (torch.bfloat16, torch.float16):
        for size in (4096, 8192):
            product(dtype, size, True)
    for size in sweep:
        product(torch.bfloat16, size, False)
    # bf16 4096 mm + bias + gelu, the library default (GELU called) and the inlined GELU
    from ember.backends.cube.cuda_kernels import wgmma as W

    size = 4096
    at = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(size, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    pa, pb, po, pbias = prim(at), prim(bt), prim(out), prim(bias)
    t_torch = torch_time(lambda: torch.nn.functional.gelu(at @ bt + bias))
    ref = torch.nn.functional.gelu(at.float() @ bt.float() + bias.float()).double()
    bn, persistent = W._choose(size, size, 1, server.info.multiprocessors)
    inline = W.wgmma_source(bn, W.STAGES, W.GROUP_M, gelu_call=False)

    def inline_epi():
        W._launch(server, (W._addr(pa), 0), (W._addr(pb), 0), W._addr(po), W._addr(pbias), size, size, size, 1,
                  "bfloat16", "bfloat16", inline, bn, W.smem_bytes(bn), persistent)

    for label, fn in (("called GELU", lambda: matmul_wgmma(client, pa, pb, po, pbias)), ("inlined GELU", inline_epi)):
        t_mm = ember_time(lambda: matmul_wgmma(client, pa, pb, po))
        t_epi = ember_time(fn)
        text, _, _ = rel_err(torch, out, ref)
        row(f"bf16 4096 mm+bias+gelu ({label})", t_epi, t_torch, 2.0 * size**3,
            f"{t_epi / t_mm:.3f}x our mm alone ({t_mm * 1e3:.3f} ms); {text}; torch = eager gelu(a@b+bias)")
    # host cost of one call (descriptors cached): launches queued without waiting
    client.sync()
    n_calls = 200
    t0 = time.perf_counter()
    for _ in range(n_calls):
        matmul_wgmma(client, pa, pb, po)
    host = (time.perf_counter() - t0) / n_calls
    client.sync()
    print(f"host cost of matmul_wgmma (cached tensor maps): {host * 1e6:.1f} us per call", flush=True)
    if out_dir:
        lines = ["| row | ember ms | ember TFLOP/s | torch ms | torch TFLOP/s | speed vs torch | note |",
                 "|---|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append(f"\nhost cost of matmul_wgmma (cached tensor maps): {host * 1e6:.1f} us per call")
        Path(out_dir, "wgmma_bench.md").write_text("\n".join(lines) + "\n")
    print()
    print("\n".join(f"{r[0]:36} {r[2]:>5} TFLOP/s  torch {r[4]:>5}  {r[5]:>5}x" for r in rows))


# --------------------------------------------------------------------------- driver
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", default="all", choices=("all", "diag", "check", "time"))
    p.add_argument("--configs", default="256x4g16,256x4g16p,128x6g16,128x6g16p",
                   help="tile configs BNxSTAGES[gGROUP_M][p], comma-separated")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--sweep", default="2048,3072,6144", help="extra bf16 sizes timed for every config")
    p.add_argument("--limits", default="60,90,150", help="seconds for the diag, check and time phases")
    p.add_argument("--phases", default="diag,check,time", help="the phases to run (driver mode)")
    a = p.parse_args()
    configs = parse_configs(a.configs)
    if a.phase == "diag":
        return phase_diag()
    if a.phase == "check":
        return phase_check(configs)
    if a.phase == "time":
        return phase_time(configs, a.reps, a.out, [int(x) for x in a.sweep.split(",") if x])
    env = dict(os.environ)
    env.setdefault("EMBER_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp"), "ember-wgmma-cache")))
    for phase, limit in zip(("diag", "check", "time"), (int(x) for x in a.limits.split(","))):
        if phase not in a.phases.split(","):
            continue
        cmd = [sys.executable, __file__, "--phase", phase, "--configs", a.configs, "--reps", str(a.reps),
               "--sweep", a.sweep]
        if a.out:
            cmd += ["--out", a.out]
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, env=env, timeout=limit)
            status = f"exit {r.returncode}"
        except subprocess.TimeoutExpired:
            status = f"TIMED OUT after {limit} s (a hang?)"
        print(f"== phase {phase}: {status} in {time.perf_counter() - t0:.1f} s", flush=True)
        if status != "exit 0":
            break  # a kernel that hangs or fails its check is not timed


if __name__ == "__main__":
    main()
