"""f32 matmul variants of ``matmul_gpu`` (ember/backends/cube/matmul_gpu_kernels.py) and of the
hand-written SGEMM (``sgemm*`` rows, CUDA only: ember/backends/cube/cuda_kernels/sgemm.py) against torch
f32 (no tf32) on the same GPU, same inputs, same process: issue 7 (CUDA: >= 0.9x torch) and
issue 8 (Vulkan: >= 0.5x torch). torch is timed again after each size's variants ("torch f32
again": the reference's spread).

For every tile variant and each size (4096^2 and 2048^2 by default) the kernel runs on
``Device.cuda(fusion=False)`` and, where wgpu finds a Vulkan adapter, on
``Device.vulkan(fusion=False)``. The result is checked against a float64 torch product
(relative Frobenius error, printed; a variant above 1e-4 is flagged BAD), then timed: CUDA
with events around the launch (``client.profile``), Vulkan with timestamp queries where the
adapter offers them inside encoders, else host time between two syncs (the ``timing`` column
says which). Times are medians; the repeat count adapts so each row takes ~0.3 s. torch is
timed with CUDA events on the same inputs. ``speed`` = torch time / ember time (1.0 = torch's
speed; the goals are >= 0.9 on CUDA and >= 0.5 on Vulkan).

Every variant runs in its own try/except (an error is printed and the run goes on); rows stop
being started once ``--budget`` seconds (default 170) have passed, so a run stays under 3 minutes.

    python bench/gpu_matmul_f32.py [--sizes 4096,2048] [--runtimes cuda,vulkan]
                                   [--variants gpu128x128x8_8x8,...] [--out bench/results]

``--out DIR`` also writes ``gpu_matmul_f32_<date>[_<tag>].md`` there (machine, date, command, commit,
the table). ``--smoke`` runs the same code paths without a GPU (torch on the CPU timed with the
host clock, ember on ``Device.cpu`` and on lavapipe, sizes 256 and 128): a check of the script.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
from ember import Device  # noqa: E402
from ember.backends.cube.cuda_kernels import sgemm as cuda_sgemm  # noqa: E402
from ember.backends.cube.matmul import GPU_TILES, MATMUL_CANDIDATES, GpuTiles, launch_gpu  # noqa: E402

#: tile variants: (bm, bn, bk, tm, tn, double buffering, A staged k-major)
VARIANTS: list[GpuTiles] = list(dict.fromkeys([
    *GPU_TILES,
    GpuTiles(128, 128, 8, 8, 8, True, True),
    GpuTiles(128, 128, 8, 8, 8, False, True),
    GpuTiles(128, 128, 8, 8, 8, False, False),
    GpuTiles(128, 128, 16, 8, 8, True, True),
    GpuTiles(128, 128, 16, 8, 8, False, False),
    GpuTiles(128, 128, 16, 8, 8, False, True),
    GpuTiles(128, 128, 32, 8, 8, False, False),
    GpuTiles(128, 64, 8, 8, 4, True, True),
    GpuTiles(64, 128, 8, 4, 8, True, False),
    GpuTiles(128, 128, 8, 4, 8, True, True),  # 512 units
    GpuTiles(64, 64, 16, 4, 4, True, True),
    # two cubes per multiprocessor forced (``cube.occupancy``: 128 registers, no spills on sm_90)
    GpuTiles(128, 128, 16, 8, 8, occ=2),
    GpuTiles(128, 128, 16, 8, 8, True, True, occ=2),
    GpuTiles(128, 128, 8, 8, 8, True, True, occ=2),
    GpuTiles(128, 128, 8, 8, 8, occ=2),
]))
#: the hand-written SGEMM (``ember/backends/cube/cuda_kernels/sgemm.py``): CUDA only
SGEMM_VARIANTS: list[cuda_sgemm.SgemmTiles] = list(dict.fromkeys([*cuda_sgemm.SGEMM_TILES, *cuda_sgemm.SGEMM_SWEEP]))
ROWS: list[dict[str, Any]] = []
T0 = time.perf_counter()


def inner_backend(dev: Device) -> Any:
    bk = dev.backend()
    while not hasattr(bk, "client") and hasattr(bk, "inner"):
        bk = bk.inner
    return bk


TORCH_DEVICE = "cuda"


def torch_time(fn: Any, reps: int) -> float:
    for _ in range(2):
        fn()
    if TORCH_DEVICE != "cuda":
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return statistics.median(out)


def ember_time(client: Any, fn: Any) -> float:
    """Median device seconds of ``fn`` (the first call, which compiles, is not timed)."""
    fn()
    client.sync()
    first = client.profile(fn)[1]
    reps = max(3, min(20, int(0.3 / max(first, 1e-6))))
    return statistics.median([first] + [client.profile(fn)[1] for _ in range(reps - 1)])


def row(variant: str, runtime: str, size: int, timing: str, s: float | None, t_torch: float, note: str) -> None:
    flops = 2.0 * size**3
    r = {
        "variant": variant,
        "runtime": runtime,
        "size": size,
        "timing": timing,
        "ms": None if s is None else s * 1e3,
        "tflops": None if s is None else flops / s / 1e12,
        "speed": None if s is None else t_torch / s,
        "note": note,
    }
    ROWS.append(r)
    ms = "-" if s is None else f"{r['ms']:.3f}"
    tf = "-" if s is None else f"{r['tflops']:.3g}"
    sp = "-" if s is None else f"{r['speed']:.2f}"
    print(f"{variant:28} {runtime:7} {size:5} {timing:6} {ms:>9} {tf:>7} {sp:>6}  {note}", flush=True)


class Runtime:
    """One ember device (eager) with the operands of the current size on it."""

    def __init__(self, name: str, dev: Device) -> None:
        self.name = name
        self.bk = inner_backend(dev)
        self.client = self.bk.client
        self.timing = "event" if name == "cuda" else getattr(self.client, "timing", "host")
        self.ops: Any = None

    def load(self, a: np.ndarray, b: np.ndarray) -> None:
        self.ops = None
        A = self.bk.from_data(a, ember.float32)
        B = self.bk.from_data(b, ember.float32)
        self.ops = self.bk._matmul_operands(A, B)
        self.client.sync()

    def run(self, launch: Any) -> tuple[float, np.ndarray]:
        a, b, out = self.ops
        if getattr(launch, "cuda_only", False) and self.name != "cuda":
            raise NotImplementedError("CUDA only")
        s = ember_time(self.client, lambda: launch(self.bk, a, b, out))
        return s, np.asarray(self.bk.into_data(out))


def runtimes(wanted: list[str]) -> list[Runtime]:
    out = []
    if "cpu" in wanted:  # --smoke
        out.append(Runtime("cpu", Device.cpu(fusion=False)))
    if "lavapipe" in wanted:  # --smoke
        try:
            from ember.device import DeviceKind

            out.append(Runtime("lavapipe", Device.wgpu(DeviceKind.cpu(), fusion=False)))
        except Exception as e:  # noqa: BLE001
            print(f"# lavapipe: skipped ({type(e).__name__}: {e})")
    if "cuda" in wanted:
        try:
            out.append(Runtime("cuda", Device.cuda(fusion=False)))
        except Exception as e:  # noqa: BLE001
            print(f"# cuda: unavailable ({type(e).__name__}: {e})")
    if "vulkan" in wanted:
        try:
            import wgpu  # noqa: F401

            rt = Runtime("vulkan", Device.vulkan(fusion=False))
            print(f"# vulkan: {getattr(rt.client, 'device_id', '?')} ({rt.client.name}), timing {rt.timing}")
            out.append(rt)
        except Exception as e:  # noqa: BLE001 - no wgpu, no Vulkan adapter: skip the runtime
            print(f"# vulkan: skipped ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return out


def _sgemm_launch(t: cuda_sgemm.SgemmTiles) -> Any:
    def launch(bk: Any, a: Any, b: Any, out: Any) -> None:
        if not cuda_sgemm.supports(a, b, out, t):
            raise ValueError(f"{t.name}: operands not supported")
        cuda_sgemm.matmul_sgemm(bk.client, a, b, out, t)

    launch.cuda_only = True  # type: ignore[attr-defined]
    return launch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,2048")
    p.add_argument("--runtimes", default="cuda,vulkan")
    p.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    p.add_argument("--no-tiled", action="store_true", help="leave out the old tiled candidate's row")
    p.add_argument("--budget", type=float, default=170.0, help="seconds after which no new row starts")
    p.add_argument("--out", default="", help="folder for gpu_matmul_f32_<date>[_<tag>].md")
    p.add_argument("--tag", default="", help="suffix of the results file name (default: smoke for --smoke)")
    p.add_argument("--smoke", action="store_true", help="no GPU: torch on the CPU, ember on Device.cpu and lavapipe")
    args = p.parse_args(argv)
    global TORCH_DEVICE
    if args.smoke:
        TORCH_DEVICE = "cpu"
        if args.sizes == "4096,2048":
            args.sizes = "256,128"
        if args.runtimes == "cuda,vulkan":
            args.runtimes = "cpu,lavapipe"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sizes = [int(s) for s in args.sizes.split(",") if s]
    names = {v for v in args.variants.split(",") if v}
    variants: list[tuple[str, Any]] = [
        (t.name, lambda bk, a, b, out, t=t: launch_gpu(t, bk, a, b, out))
        for t in VARIANTS
        if not names or t.name in names
    ]
    for t in SGEMM_VARIANTS:
        if not names or t.name in names:
            variants.append((t.name, _sgemm_launch(t)))
    if not args.no_tiled:
        tiled = next(c for c in MATMUL_CANDIDATES if c.name == "tiled")
        variants.append(("tiled (old candidate)", tiled.launch))
    rts = runtimes([r for r in args.runtimes.split(",") if r])
    gpu = torch.cuda.get_device_name(0) if TORCH_DEVICE == "cuda" else f"no GPU (smoke run: {_cpu_name()})"
    print(f"# {gpu}; torch {torch.__version__}; allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
    print(f"{'variant':28} {'runtime':7} {'size':>5} {'timing':6} {'ms':>9} {'TFLOP/s':>7} {'speed':>6}  note")
    for size in sizes:
        gen = torch.Generator(device=TORCH_DEVICE).manual_seed(size)
        at = torch.rand(size, size, device=TORCH_DEVICE, generator=gen) - 0.5
        bt = torch.rand(size, size, device=TORCH_DEVICE, generator=gen) - 0.5
        t_torch = torch_time(lambda at=at, bt=bt: at @ bt, 20)
        timing = "event" if TORCH_DEVICE == "cuda" else "host"
        row("torch f32 (no tf32)", TORCH_DEVICE, size, timing, t_torch, t_torch, "cuBLAS" if timing == "event" else "")
        ref = (at.double() @ bt.double()).cpu().numpy()
        ref_norm = float(np.linalg.norm(ref))
        a_np, b_np = at.cpu().numpy(), bt.cpu().numpy()
        for rt in rts:
            try:
                rt.load(a_np, b_np)
            except Exception as e:  # noqa: BLE001
                row("(operands)", rt.name, size, rt.timing, None, t_torch, f"upload failed: {e}"[:100])
                continue
            for name, launch in variants:
                if time.perf_counter() - T0 > args.budget:
                    row(name, rt.name, size, rt.timing, None, t_torch, "not run: time budget spent")
                    continue
                try:
                    s, got = rt.run(launch)
                    rel = float(np.linalg.norm(got.astype(np.float64) - ref)) / ref_norm
                    flag = "" if rel < 1e-4 else "  BAD"
                    row(name, rt.name, size, rt.timing, s, t_torch, f"rel err {rel:.1e}{flag}")
                except NotImplementedError:
                    continue
                except Exception as e:  # noqa: BLE001 - one variant failing never ends the run
                    msg = str(e).splitlines()[0] if str(e) else ""
                    row(name, rt.name, size, rt.timing, None, t_torch, f"failed: {type(e).__name__}: {msg}"[:120])
                    traceback.print_exc(limit=3, file=sys.stderr)
            rt.ops = None
        t_again = torch_time(lambda at=at, bt=bt: at @ bt, 20)
        row("torch f32 again", TORCH_DEVICE, size, timing, t_again, t_torch, "the reference's spread")
        del at, bt, ref
        if TORCH_DEVICE == "cuda":
            torch.cuda.empty_cache()
    best = {}
    for r in ROWS:
        if r["speed"] is not None and not r["variant"].startswith("torch") and "BAD" not in r["note"]:
            k = (r["runtime"], r["size"])
            if k not in best or r["speed"] > best[k]["speed"]:
                best[k] = r
    print("\n# best per runtime and size (goal: cuda >= 0.9, vulkan >= 0.5 of torch's speed)")
    for (rt, size), r in sorted(best.items()):
        print(f"#   {rt:7} {size:5}: {r['variant']} {r['tflops']:.3g} TFLOP/s, {r['speed']:.2f}x torch")
    print(f"# total {time.perf_counter() - T0:.0f} s")
    if args.out:
        write_markdown(Path(args.out), gpu, best, args.tag or ("smoke" if args.smoke else ""))
    return 0


def _cpu_name() -> str:
    from machine_info import cpu_model

    return f"{cpu_model()}, {os.cpu_count()} cores"


def write_markdown(folder: Path, gpu: str, best: dict[Any, Any], tag: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "?"
    lines = [
        f"# f32 matmul variants of matmul_gpu vs torch (no tf32), {date}",
        "",
        f"- machine: {gpu}, {platform.node()}, Python {platform.python_version()}, torch {torch.__version__}",
        f"- commit: {commit or '?'}",
        f"- command: `python {' '.join(sys.argv)}`",
        "- speed = torch time / ember time; goals: CUDA >= 0.9, Vulkan >= 0.5",
    ]
    if TORCH_DEVICE != "cuda":
        lines.append(
            "- smoke run without a GPU: torch on the CPU (host clock), ember on the C target and on lavapipe; "
            "no goal applies, the figures are for the record (a shared machine: noisy)"
        )
    lines += [
        "",
        "| variant | runtime | size | timing | ms | TFLOP/s | speed vs torch | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in ROWS:
        def f(x: Any, fmt: str) -> str:
            return "-" if x is None else format(x, fmt)

        lines.append(
            f"| {r['variant']} | {r['runtime']} | {r['size']} | {r['timing']} | {f(r['ms'], '.3f')} | "
            f"{f(r['tflops'], '.3g')} | {f(r['speed'], '.2f')} | {r['note']} |"
        )
    lines += ["", "Best per runtime and size:", ""]
    for (rt, size), r in sorted(best.items()):
        lines.append(f"- {rt} {size}: {r['variant']}, {r['tflops']:.3g} TFLOP/s, {r['speed']:.2f}x torch")
    path = folder / f"gpu_matmul_f32_{date}{'_' + tag if tag else ''}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"# wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
