"""tf32 matmul variants on the GPU against torch (cuBLAS, ``allow_tf32 = True``) on the same inputs.

First every variant is checked on small and ragged shapes (outputs poisoned with NaN; relative
error against float64 on rna-rounded, truncated and exact inputs; first mismatching indices
printed), then each is timed at 4096² and 8192² (event-timed medians, ``bench/gpu.py``'s
``ember_time`` / ``torch_time``) and a table is printed last.

    python bench/gpu_tf32.py [--quick] [--sizes 4096,8192]

Variants: ``wgmma`` (the candidate: B transposed into pooled scratch, then wgmma + TMA; tile
width and grid from ``_choose``), ``wgmma (no transpose)`` (the product alone on a B^T made
once), ``transpose`` (the B pass alone), ``wgmma n128`` / ``wgmma flip-persistent`` (the other
tile width / grid), ``mma.sync`` (sm_80 kernel, 128 x 128 x 16 tiles), ``public a@b`` (the
tuned choice through the Tensor API on ``Device.cuda(fusion=False)``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
from gpu import EAGER, client_of, ember_time, torch_time  # noqa: E402

import ember  # noqa: E402
from ember.dlpack import _cube_primitive  # noqa: E402

ember.set_float32_matmul_precision("high")
C = client_of(EAGER)


def prim(t: torch.Tensor):
    return _cube_primitive(ember.from_dlpack(t))


def rna(x: torch.Tensor) -> torch.Tensor:
    u = x.contiguous().view(torch.int32)
    return ((u + 0x1000) & ~0x1FFF).view(torch.float32).double()


def trunc(x: torch.Tensor) -> torch.Tensor:
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32).double()


def errors(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float, str]:
    """(vs rna-rounded, vs truncated, vs exact) relative Frobenius errors, first bad index."""
    got = out.double()
    nan = torch.isnan(got)
    if nan.any():
        return float("nan"), float("nan"), float("nan"), f"{int(nan.sum())} NaN, first {nan.nonzero()[0].tolist()}"
    res = []
    for ref in (rna(a) @ rna(b), trunc(a) @ trunc(b), a.double() @ b.double()):
        res.append(float((got - ref).norm() / ref.norm()))
    ref = a.double() @ b.double()
    bad = ((got - ref).abs() > 1e-2 * ref.abs().max()).nonzero()
    return res[0], res[1], res[2], (f"first bad {bad[0].tolist()} of {len(bad)}" if len(bad) else "")


def variants():
    from ember.backends.cube.cuda_kernels import mma as M
    from ember.backends.cube.cuda_kernels import wgmma as W

    def wgmma(a, b, o):
        W.matmul_wgmma(C, a, b, o)

    def wgmma_n128(a, b, o):
        (m, k), n = a.shape, b.shape[1]
        W._launch_tf32(C, (W._addr(a), 0), (W._addr(b), 0), W._addr(o), m, n, k, 1, bn=128)

    def wgmma_flip(a, b, o):
        (m, k), n = a.shape, b.shape[1]
        _, persistent = W._choose(m, n, 1, C.server.info.multiprocessors)
        W._launch_tf32(C, (W._addr(a), 0), (W._addr(b), 0), W._addr(o), m, n, k, 1, persistent=not persistent)

    def mma(a, b, o):
        M.matmul_mma(C, a, b, o)

    def config(bn: int, stages: int, cluster: int):
        """Other ring depths / CTA pairs sharing B^T (not among ``_CONFIGS_TF32``)."""
        src, smem = W.wgmma_source(bn, stages, cluster=cluster, tf32=True), W.smem_bytes(bn, stages)

        def run(a, b, o):
            (m, k), n = a.shape, b.shape[1]
            _, persistent = W._choose(m, n, 1, C.server.info.multiprocessors)
            bt = W._transpose_b(C, (W._addr(b), 0), k, n, 1)
            W._launch(C.server, (W._addr(a), 0), (bt.ptr, 0), W._addr(o), 0, m, n, k, 1, "float32", "float32", src,
                      bn, smem, persistent, cluster)

        return run

    return {"wgmma": wgmma, "wgmma n128": wgmma_n128, "wgmma flip-persistent": wgmma_flip,
            "wgmma n128 7 stages": config(128, 7, 1), "wgmma cluster 2": config(W.BN, W.STAGES, 2), "mma.sync": mma}


def check_all() -> bool:
    from ember.backends.cube.cuda_kernels import mma as M

    ok = True
    shapes = [(128, 128, 16), (256, 384, 272), (200, 264, 72), (8, 8, 8), (1160, 1800, 712), (2048, 2048, 2048)]
    for name, fn in variants().items():
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda")
            b = torch.randn(k, n, device="cuda")
            o = torch.full((m, n), float("nan"), device="cuda")
            torch.cuda.synchronize()
            pa, pb, po = prim(a), prim(b), prim(o)
            if name == "mma.sync" and not M.supports(pa, pb, po, 90):
                continue
            try:
                fn(pa, pb, po)
                C.sync()
            except Exception as e:  # noqa: BLE001
                print(f"CHECK {name:22} {m}x{n}x{k}: FAILED {type(e).__name__}: {e}"[:300], flush=True)
                ok = False
                continue
            e_rna, e_tr, e_ex, note = errors(o, a, b)
            good = min(e_rna, e_tr) < 2e-5 and e_ex < 3e-3
            ok &= good
            print(f"CHECK {name:22} {m}x{n}x{k}: rna {e_rna:.2e} trunc {e_tr:.2e} exact {e_ex:.2e} "
                  f"{'ok' if good else 'BAD'} {note}", flush=True)
    return ok


def time_size(s: int, reps: int, table: list[tuple]) -> None:
    flops = 2 * s**3
    a = torch.randn(s, s, device="cuda")
    b = torch.randn(s, s, device="cuda")
    o = torch.empty(s, s, device="cuda")
    torch.cuda.synchronize()
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        t_t = torch_time(lambda: a @ b, reps)
        ref = a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    torch.cuda.synchronize()
    pa, pb, po = prim(a), prim(b), prim(o)

    def add(name: str, t: float, got: torch.Tensor | None = None) -> None:
        err = None if got is None else float((got - ref).norm() / ref.norm())
        table.append((s, name, t * 1e3, flops / t / 1e12, t_t / t, err))
        print(f"TIME {s} {name:24} {t * 1e3:8.3f} ms {flops / t / 1e12:6.0f} TFLOP/s {t_t / t:5.2f}x torch"
              + (f"  rel err vs torch {err:.1e}" if err is not None else ""), flush=True)

    table.append((s, "torch tf32", t_t * 1e3, flops / t_t / 1e12, 1.0, None))
    print(f"TIME {s} {'torch tf32':24} {t_t * 1e3:8.3f} ms {flops / t_t / 1e12:6.0f} TFLOP/s", flush=True)
    for name, fn in variants().items():
        try:
            t = ember_time(C, lambda fn=fn: fn(pa, pb, po), reps)
            C.sync()
            add(name, t, o)
        except Exception as e:  # noqa: BLE001
            print(f"TIME {s} {name}: FAILED {type(e).__name__}: {e}"[:300], flush=True)
    # the product alone on a B^T made once, and the transpose alone
    try:
        _time_parts(s, reps, pa, pb, po, o, add, table)
    except Exception as e:  # noqa: BLE001
        print(f"TIME {s} parts: FAILED {type(e).__name__}: {e}"[:300], flush=True)
    # the public API: the tuned choice (tuning happens in the warm-up calls)
    try:
        ea, eb = ember.from_dlpack(a), ember.from_dlpack(b)
        t = ember_time(C, lambda: _cube_primitive(ea @ eb), reps)
        got = torch.from_dlpack(ea @ eb)
        C.sync()
        add("public a@b", t, got)
    except Exception as e:  # noqa: BLE001
        print(f"TIME {s} public: FAILED {type(e).__name__}: {e}"[:300], flush=True)


def _time_parts(s, reps, pa, pb, po, o, add, table) -> None:
    from ember.backends.cube.cuda_kernels import wgmma as W

    bt = W._transpose_b(C, (W._addr(pb), 0), s, s, 1)
    t = ember_time(C, lambda: W._launch(C.server, (W._addr(pa), 0), (bt.ptr, 0), W._addr(po), 0, s, s, s, 1,
                                        "float32", "float32"), reps)
    C.sync()
    add("wgmma (no transpose)", t, o)
    t = ember_time(C, lambda: W._transpose_b(C, (W._addr(pb), 0), s, s, 1), reps)
    print(f"TIME {s} {'transpose':24} {t * 1e3:8.3f} ms {2 * 4 * s * s / t / 1e12:.2f} TB/s", flush=True)
    table.append((s, "transpose (B pass)", t * 1e3, 0.0, 0.0, None))


def time_all(sizes: list[int], reps: int) -> list[tuple]:
    table: list[tuple] = []
    for s in sizes:
        time_size(s, reps, table)
        torch.cuda.empty_cache()
    from ember.autotune import tuner

    winners = {(k[4][0], k[4][2], k[4][-2]): w.name for k, w in tuner._decisions.items() if k[1] == "matmul"}
    print("autotune matmul decisions:", winners, flush=True)
    return table


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--skip-check", action="store_true")
    args = p.parse_args()
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | ember {ember.__version__} | "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    ok = True if args.skip_check else check_all()
    table = time_all([int(s) for s in args.sizes.split(",")], 5 if args.quick else 20)
    print("\n| size | variant | ms | TFLOP/s | x torch | rel err vs torch |\n|---|---|---|---|---|---|")
    for s, name, ms, tf, ratio, err in table:
        print(f"| {s} | {name} | {ms:.3f} | {tf:.0f} | {ratio:.2f} | {'' if err is None else f'{err:.1e}'} |")
    print("checks:", "all ok" if ok else "SOME FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
