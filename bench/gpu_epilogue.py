"""The wgmma matmul's bias + GELU epilogue against the matmul alone (issue 7: ``gelu(a @ b + bias)``
at 4096² bf16 within 1.05x of our matmul alone, and faster than torch eager), same GPU, same
inputs, one process.

    python bench/gpu_epilogue.py [--sizes 4096,8192] [--reps 20] [--out DIR]

Per dtype (bf16, f16) and size, rows for: our matmul alone (the library's default config: the
staged epilogue for 16-bit outputs), stored from the registers (``em_store``) with the staged
config's ring depth and with the full one, through the staged epilogue; bias + GELU from the
registers and by default (staged: drain warps of the producer warpgroup); torch's matmul and
torch eager ``gelu(a @ b + bias)``. Every output is checked against torch on float64 upcasts.
Times: medians of event pairs around calls queued back to back (``gpu_wgmma.queued_times``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_wgmma import event_timers, rel_err, setup  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch, client, prim = setup()
    from ember.cube.runtime import cuda_wgmma as W

    server = client.server
    sms = server.info.multiprocessors
    ember_time, torch_time = event_timers(torch, client, args.reps)

    rows: list[str] = []

    def row(name: str, t: float, base: float, torch_eager: float, note: str) -> None:
        line = (f"| {name} | {t * 1e3:.4f} | {t / base:.3f}x | {torch_eager / t:.2f}x | {note} |")
        rows.append(line)
        print(line, flush=True)

    def one(dtype, size: int) -> None:
        dn = "bf16" if dtype is torch.bfloat16 else "f16"
        name = "bfloat16" if dtype is torch.bfloat16 else "float16"
        at = torch.randn(size, size, device="cuda", dtype=dtype)
        bt = torch.randn(size, size, device="cuda", dtype=dtype)
        bias = torch.randn(size, device="cuda", dtype=dtype)
        out = torch.full((size, size), float("nan"), device="cuda", dtype=dtype)
        pa, pb, po, pbias = prim(at), prim(bt), prim(out), prim(bias)
        ref_mm = at.double() @ bt.double()
        ref_epi = torch.nn.functional.gelu(ref_mm + bias.double())
        t_torch_mm = torch_time(lambda: at @ bt)
        t_torch_epi = torch_time(lambda: torch.nn.functional.gelu(at @ bt + bias))
        bn, persistent = W._choose(size, size, 1, sms)

        def launch(source: str, smem: int, with_bias: bool, pers: bool) -> None:
            W._launch(server, (W._addr(pa), 0), (W._addr(pb), 0), W._addr(po),
                      W._addr(pbias) if with_bias else 0, size, size, size, 1, name, name, source, bn, smem, pers)

        stages = W.STAGES_STAGED if bn == W.BN else W.STAGES_NARROW_STAGED
        fewer = W.wgmma_source(bn, stages)
        plain, staged = W._CONFIGS[bn, False], W._CONFIGS[bn, True]
        variants = [
            ("mm alone (default)", lambda: W.matmul_wgmma(client, pa, pb, po), ref_mm),
            (f"mm alone, registers, {stages} stages", lambda: launch(fewer, W.smem_bytes(bn, stages), False,
                                                                     persistent), ref_mm),
            ("mm alone, registers", lambda: launch(*plain, False, persistent), ref_mm),
            ("mm alone, staged", lambda: launch(*staged, False, True), ref_mm),
            ("mm+bias+gelu, registers", lambda: launch(*plain, True, persistent), ref_epi),
            ("mm+bias+gelu (default)", lambda: W.matmul_wgmma(client, pa, pb, po, pbias), ref_epi),
        ]
        base = None
        for label, fn, ref in variants:
            out.fill_(float("nan"))
            fn()
            client.sync()
            text, _, _ = rel_err(torch, out, ref)
            t = ember_time(fn)
            base = base or t
            row(f"{dn} {size} {label}", t, base, t_torch_epi, f"{text}; {2 * size**3 / t / 1e12:.0f} TFLOP/s")
        rows.append(f"| {dn} {size} torch mm / torch eager gelu(mm+bias) | {t_torch_mm * 1e3:.4f} / "
                    f"{t_torch_epi * 1e3:.4f} | | | tiles 128x{bn}{', persistent' if persistent else ''} |")
        print(rows[-1], flush=True)

    for dtype in (torch.bfloat16, torch.float16):
        for size in (int(s) for s in args.sizes.split(",")):
            one(dtype, size)
    head = ["| row | ms | vs our mm alone | speed vs torch eager mm+bias+gelu | note |", "|---|---|---|---|---|"]
    print("\n".join(head + rows))
    if args.out:
        Path(args.out, "epilogue_bench.md").write_text("\n".join(head + rows) + "\n")


if __name__ == "__main__":
    main()
