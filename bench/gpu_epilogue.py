"""The wgmma matmul's bias + GELU epilogue against the matmul alone (issue 7: ``gelu(a @ b + bias)``
at 4096² bf16 within 1.05x of our matmul alone, and faster than torch eager), same GPU, same
inputs, one process.

    python bench/gpu_epilogue.py [--sizes 4096,8192] [--reps 20] [--rounds 3] [--variants] [--public]
                                 [--probe] [--out DIR]

First the device's ``em_gelu1`` against float64 (max relative error where |gelu| > 1e-3; the
bound is 2e-4). Then per dtype (bf16, f16) and size, rows for: our matmul alone (the library's
default config: the staged epilogue for 16-bit outputs), stored from the registers
(``em_store``); bias + GELU by default (staged: bias, GELU and stores by the drain warps of the
producer warpgroup), from the registers, and as the kernel was before 2026-11-29 20:00 (old
GELU form, bias added by the consumers: ``KNOBS_BEFORE``); with ``--variants`` also the
measurement variants (identity instead of GELU, GELU without bias, GELU twice, bias added by
the consumers). torch's matmul and torch eager ``gelu(a @ b + bias)`` last; with ``--public``
also ``gelu(x @ w + b)`` against ``x @ w`` through the public API (bf16 4096); with ``--probe``
per-block clock stamps of the kernel's phases (``probe_rows``). Every output is
checked against torch on float64 upcasts before its time counts.

Times (``interleaved_times``): ``--rounds`` x ``--reps`` sweeps, each timing every row once with
an event pair around each call, all queued back to back. Under load the H200 holds its power cap
by moving its clock (1.4-1.98 GHz within a second, seen at 700 W), so times of rows timed apart
differ by 10-20%; rows of one sweep run within milliseconds of each other. A row's ratio to the
matmul alone is the median of its per-sweep ratios (quartiles beside it); its time the median.
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_wgmma import event_timers, rel_err, setup  # noqa: E402

#: the staged epilogue as measured before 2026-11-29 20:00 (bench/results/epilogue_2026-11-29_h200.md)
KNOBS_BEFORE = {"GELU_OLD": 1, "BIAS_DRAIN": 0, "PREGS": 40}
#: (label, knobs, reference kind) of the ``--variants`` rows
MEASUREMENT_VARIANTS = [
    ("mm+bias+gelu, bias added by the consumers", {"BIAS_DRAIN": 0}, "epi"),
    ("mm+bias, identity instead of GELU", {"X_GELU": 0}, "id"),
    ("mm+gelu, no bias", {"X_BIAS": 0}, "nobias"),
    ("mm+bias+gelu, GELU twice", {"X_GELU": 2}, "twice"),
]

GELU_TEST = r"""
extern "C" __global__ void em_gelu_test(const float *x, float *y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = em_gelu1(x[i]);
}
"""


def gelu_accuracy(torch, client, prim) -> str:
    """The device's em_gelu1 on a dense grid of [-12, 12] and on 3 x normal samples."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    server = client.server
    x = torch.cat([torch.linspace(-12, 12, 4_000_001, device="cuda"), 3 * torch.randn(4_000_000, device="cuda")])
    y = torch.full_like(x, float("nan"))
    fn = server.raw_function("#define EM_GELU_CALL 0\n" + W._COMMON + GELU_TEST, "em_gelu_test", 0, W.WGMMA_ARCH)
    px, py = prim(x), prim(y)
    n = x.numel()
    server.launch_raw(fn, ((n + 255) // 256, 1, 1), (256, 1, 1),
                      [ctypes.c_uint64(W._addr(px)), ctypes.c_uint64(W._addr(py)), ctypes.c_int32(n)])
    client.sync()
    ref = torch.nn.functional.gelu(x.double())
    big = ref.abs() > 1e-3
    rel = float(((y.double() - ref).abs()[big] / ref.abs()[big]).max())
    return (f"em_gelu1 on the device: max relative error {rel:.3e} where |gelu| > 1e-3 (bound 2e-4), "
            f"max absolute {float((y.double() - ref).abs().max()):.2e}, NaN {int(torch.isnan(y).sum())}")


def interleaved_times(client, fns, rounds: int, reps: int) -> dict[str, list[float]]:
    """Per callable, ``rounds * reps`` times: each sweep times every callable once, one after the
    other, with event pairs around calls queued back to back (no host wait inside a sweep). The
    clocks of a power-capped H200 drift by 10-20% within a second (1.4-1.98 GHz seen at 700 W);
    calls of one sweep run within a few ms of each other, so the per-sweep ratio of two rows is
    what the drift spares."""
    cu = client.server.cu
    stream = client.server.stream
    out: dict[str, list[float]] = {label: [] for label, _ in fns}
    for _label, fn in fns:  # warm-up: compiled, loaded, tensor maps cached
        fn()
    client.sync()
    for _ in range(rounds):
        marks = []
        for _ in range(reps):
            for label, fn in fns:
                e0 = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT)[1]
                e1 = cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT)[1]
                cu.cuEventRecord(e0, stream)
                fn()
                cu.cuEventRecord(e1, stream)
                marks.append((label, e0, e1))
        cu.cuEventSynchronize(marks[-1][2])
        for label, e0, e1 in marks:
            out[label].append(float(cu.cuEventElapsedTime(e0, e1)[1]) / 1e3)
            cu.cuEventDestroy(e0)
            cu.cuEventDestroy(e1)
    return out


def public_rows(torch, rounds: int, reps: int, rows: list[str], batch: int = 5) -> None:
    """``gelu(x @ w + b)`` against ``x @ w`` through the public API on the fused ``Device.cuda()``
    (bf16 4096: the matmul-epilogue fuser's tuned choice against the tuned matmul). Host-timed
    batches of ``batch`` calls between syncs (the fused device may use more than one stream),
    the two alternating."""
    import ember
    from ember import Device
    from ember.autotune import tuner
    from ember.cube.launch import _client_of
    from ember.dlpack import _cube_primitive

    dev = Device.cuda()
    client = _client_of(dev)
    size = 4096
    at, bt = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    bias = torch.randn(size, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()

    from gpu import _copy_to  # a fused-device tensor with a view's values (device-to-device copy)

    x, w, b = (_copy_to(ember.from_dlpack(t), dev) for t in (at, bt, bias))

    def public(epilogue: bool):
        y = (x @ w + b).gelu() if epilogue else x @ w
        _cube_primitive(y)
        return y

    ref = torch.nn.functional.gelu(at.double() @ bt.double() + bias.double())
    got = torch.from_dlpack(public(True)).double()
    rel = float((got - ref).norm() / ref.norm())
    times: dict[bool, list[float]] = {False: [], True: []}
    for epilogue in (False, True):  # tuned, compiled, warm
        for _ in range(3):
            public(epilogue)
    for _ in range(rounds * reps // batch):
        for epilogue in (False, True):
            times[epilogue].append(client.profile(lambda e=epilogue: [public(e) for _ in range(batch)])[1] / batch)
    ratios = [e / m for e, m in zip(times[True], times[False])]
    q1, q3 = statistics.quantiles(ratios, n=4)[0::2]
    t_mm, t_epi = statistics.median(times[False]), statistics.median(times[True])
    names = sorted({d.name for k, d in tuner._decisions.items() if k[1] == "matmul_epilogue"})
    rows.append(f"| bf16 4096 public gelu(x @ w + b) / x @ w | {t_epi * 1e3:.4f} / {t_mm * 1e3:.4f} | "
                f"{statistics.median(ratios):.3f}x ({q1:.3f}-{q3:.3f}) | | rel {rel:.2e}; matmul_epilogue "
                f"winners {','.join(names) or 'none'}; host-timed batches of {batch} |")
    print(rows[-1], flush=True)


#: the probe slots the kernel writes (EM_PROBE): per block 64 stamps
PROBE_SLOTS = 64


def probe_rows(torch, client, prim, size: int, rows: list[str]) -> None:
    """Clock stamps per block (the kernel's ``EM_PROBE`` knob, bf16, one launch after warm-up):
    clock64 at the start, after each tile's main loop and after its staging (consumer warpgroup 1,
    slots 2 + 2 lt and 3 + 2 lt), after each tile's drain (drain warp 1, 34 + lt), after the last
    drain (50), globaltimer at the start (1) and end (51). Reported: medians over the blocks with
    the most tiles, in us at each block's own clock rate (clock64 ticks over globaltimer ns); the
    kernel span from the earliest start to the latest end. Ported from the run-2 script of
    bench/results/epilogue_2026-11-29_h200.md."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    server = client.server
    sms = server.info.multiprocessors
    at, bt = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    bias = torch.randn(size, device="cuda", dtype=torch.bfloat16)
    out = torch.full((size, size), float("nan"), device="cuda", dtype=torch.bfloat16)
    stamps = torch.zeros(sms * PROBE_SLOTS, device="cuda", dtype=torch.int64)
    pa, pb, po, pbias, pst = prim(at), prim(bt), prim(out), prim(bias), prim(stamps)
    mm = at.double() @ bt.double()
    refs = {False: mm, True: torch.nn.functional.gelu(mm + bias.double())}
    bn, _ = W._choose(size, size, 1, sms)
    stages = W.STAGES_STAGED if bn == W.BN else W.STAGES_NARROW_STAGED
    smem = W.smem_bytes(bn, stages, True)
    rows += ["", f"Clock probes, bf16 {size}: medians over blocks with the most tiles; us at the block's clock",
             "", "| variant | MHz | tiles | main loop per tile | staging | drain per tile (not last) | last tile "
             "(stage + drain) | block | kernel span | check |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label, knobs, with_bias in (("mm alone", {}, False), ("mm+bias+gelu (default)", {}, True),
                                    ("mm+bias+gelu, as committed before", KNOBS_BEFORE, True),
                                    ("mm+bias, identity", {"X_GELU": 0}, True)):
        src = W.wgmma_source(bn, stages, staged=True, knobs={**knobs, "PROBE": W._addr(pst)})

        def launch(src=src, with_bias=with_bias) -> None:
            W._launch(server, (W._addr(pa), 0), (W._addr(pb), 0), W._addr(po), W._addr(pbias) if with_bias else 0,
                      size, size, size, 1, "bfloat16", "bfloat16", src, bn, smem, True)
        for _ in range(5):
            launch()
        client.sync()
        stamps.zero_()
        out.fill_(float("nan"))
        torch.cuda.synchronize()
        launch()
        client.sync()
        text, _, _ = rel_err(torch, out, refs[with_bias])
        blocks = stamps.view(sms, PROBE_SLOTS).cpu().tolist()
        ntiles = [sum(1 for i in range(16) if b[2 + 2 * i]) for b in blocks]
        most = max(ntiles)
        per = []
        for b, nt in zip(blocks, ntiles):
            c0, g0, fin, g1 = b[0], b[1], b[50], b[51]
            if nt != most or not fin or g1 <= g0:  # stamps cover tiles 0-15 of a block
                continue
            us = (g1 - g0) / 1e3 / (fin - c0)  # us per clock tick
            loop = [b[2] - c0] + [b[2 + 2 * i] - b[3 + 2 * (i - 1)] for i in range(1, nt)]
            stage = [b[3 + 2 * i] - b[2 + 2 * i] for i in range(nt)]
            drain = [b[34 + i] - b[3 + 2 * i] for i in range(nt - 1)]
            per.append(((fin - c0) / ((g1 - g0) / 1e3), statistics.median(loop) * us,
                        statistics.median(stage) * us, statistics.median(drain) * us if drain else 0.0,
                        (fin - b[2 + 2 * (nt - 1)]) * us, (g1 - g0) / 1e3, g0, g1))
        if not per:
            rows.append(f"| {label} | no complete blocks | | | | | | | | {text} |")
            continue
        med = [statistics.median(r[i] for r in per) for i in range(6)]
        span = (max(r[7] for r in per) - min(r[6] for r in per)) / 1e3
        rows.append(f"| {label} | {med[0]:.0f} | {most} | {med[1]:.2f} | {med[2]:.2f} | {med[3]:.2f} | {med[4]:.2f} | "
                    f"{med[5]:.1f} | {span:.1f} | {text} |")
        print(rows[-1], flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", action="store_true", help="also the measurement variants (knobs)")
    p.add_argument("--public", action="store_true", help="also gelu(x @ w + b) against x @ w on Device.cuda()")
    p.add_argument("--probe", action="store_true", help="also per-block clock stamps (bf16, the first size)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch, client, prim = setup()
    from ember.backends.cube.cuda_kernels import wgmma as W

    server = client.server
    sms = server.info.multiprocessors
    _, torch_time = event_timers(torch, client, args.reps)

    head = [gelu_accuracy(torch, client, prim), ""]
    print(head[0], flush=True)
    rows: list[str] = []

    def one(dtype, size: int) -> None:
        dn = "bf16" if dtype is torch.bfloat16 else "f16"
        name = "bfloat16" if dtype is torch.bfloat16 else "float16"
        at = torch.randn(size, size, device="cuda", dtype=dtype)
        bt = torch.randn(size, size, device="cuda", dtype=dtype)
        bias = torch.randn(size, device="cuda", dtype=dtype)
        out = torch.full((size, size), float("nan"), device="cuda", dtype=dtype)
        pa, pb, po, pbias = prim(at), prim(bt), prim(out), prim(bias)
        mm = at.double() @ bt.double()
        gelu = torch.nn.functional.gelu
        refs = {"mm": mm, "epi": gelu(mm + bias.double()), "id": mm + bias.double(), "nobias": gelu(mm),
                "twice": gelu(gelu(mm + bias.double()))}
        del mm
        t_torch_mm = torch_time(lambda: at @ bt)
        t_torch_epi = torch_time(lambda: gelu(at @ bt + bias))
        bn, persistent = W._choose(size, size, 1, sms)
        stages = W.STAGES_STAGED if bn == W.BN else W.STAGES_NARROW_STAGED

        def launch(source: str, smem: int, with_bias: bool, pers: bool) -> None:
            W._launch(server, (W._addr(pa), 0), (W._addr(pb), 0), W._addr(po),
                      W._addr(pbias) if with_bias else 0, size, size, size, 1, name, name, source, bn, smem, pers)

        def staged(knobs: dict) -> tuple[str, int]:
            return W.wgmma_source(bn, stages, staged=True, knobs=knobs), W.smem_bytes(bn, stages, True)

        plain = W._CONFIGS[bn, False]
        before = staged(KNOBS_BEFORE)
        variants = [
            ("mm alone (default)", lambda: W.matmul_wgmma(client, pa, pb, po), "mm"),
            ("mm alone, registers", lambda: launch(*plain, False, persistent), "mm"),
            ("mm+bias+gelu (default)", lambda: W.matmul_wgmma(client, pa, pb, po, pbias), "epi"),
            ("mm+bias+gelu, registers", lambda: launch(*plain, True, persistent), "epi"),
            ("mm+bias+gelu, as committed before (KNOBS_BEFORE)", lambda: launch(*before, True, True), "epi"),
        ]
        if args.variants:
            for label, knobs, kind in MEASUREMENT_VARIANTS:
                src = staged(knobs)
                variants.append((label, lambda src=src: launch(*src, True, True), kind))
        checked = []
        for label, fn, kind in variants:
            out.fill_(float("nan"))
            fn()
            client.sync()
            text, rel, nan = rel_err(torch, out, refs[kind])
            checked.append((label, fn, text, nan == 0 and rel < 1e-2))
        ok_fns = [(label, fn) for label, fn, _text, ok in checked if ok]
        times = interleaved_times(client, ok_fns, args.rounds, args.reps) if checked[0][3] else {}
        base = times.get(checked[0][0])
        for label, _fn, text, ok in checked:
            if not ok or base is None:
                rows.append(f"| {dn} {size} {label} | {'FAILED CHECK' if not ok else ''} | | | | {text} |")
                print(rows[-1], flush=True)
                continue
            ts = times[label]
            t = statistics.median(ts)
            ratios = [x / y for x, y in zip(ts, base)]
            ratio = statistics.median(ratios)
            q1, q3 = statistics.quantiles(ratios, n=4)[0::2]
            rows.append(f"| {dn} {size} {label} | {t * 1e3:.4f} | {ratio:.3f}x ({q1:.3f}-{q3:.3f}) | "
                        f"{t_torch_epi / t:.2f}x | {text}; {2 * size**3 / t / 1e12:.0f} TFLOP/s |")
            print(rows[-1], flush=True)
        rows.append(f"| {dn} {size} torch mm / torch eager gelu(mm+bias) | {t_torch_mm * 1e3:.4f} / "
                    f"{t_torch_epi * 1e3:.4f} | | | tiles 128x{bn}{', persistent' if persistent else ''} |")
        print(rows[-1], flush=True)

    for dtype in (torch.bfloat16, torch.float16):
        for size in (int(s) for s in args.sizes.split(",")):
            one(dtype, size)
    if args.probe:
        probe_rows(torch, client, prim, int(args.sizes.split(",")[0]), rows)
    if args.public:
        try:
            public_rows(torch, args.rounds, args.reps, rows)
        except Exception as e:  # noqa: BLE001 - the kernel rows above still count
            rows.append(f"| bf16 4096 public gelu(x @ w + b) / x @ w | FAILED | | | {type(e).__name__}: {e} |")
            print(rows[-1], flush=True)
    table = ["| row | ms (median) | vs our mm alone: median of per-sweep ratios (quartiles) | "
             "speed vs torch eager mm+bias+gelu | note |", "|---|---|---|---|---|"]
    print("\n".join(head + table + rows))
    if args.out:
        Path(args.out, "epilogue_bench.md").write_text("\n".join(head + table + rows) + "\n")


if __name__ == "__main__":
    main()
