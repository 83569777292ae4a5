"""Attention as the unit of measure: ember's fused ``sdpa`` vs ember's composition (matmul,
causal where, softmax, matmul) vs torch, forward and forward+backward, in one process.

q, k and v come from a packed ``qkv`` tensor (batch, T, 3C) by ``split`` + ``view`` +
``transpose``, as in a GPT block, so the fused kernels read them through their strides; the
backward's gradient reaches ``qkv``. Rounds alternate the variants so all see the same load;
the table gives the median per call and the ratio to torch.

    python bench/attention.py                              # dev box: Device.cpu(), gpt-small shape
    python bench/attention.py --device cuda --shape gpt2 --dtype bf16 --check   # on the H200
    python bench/attention.py --train                      # bench/train.py's gpt step, fused vs composed

``--check`` first compares the fused op with torch on the same device (outputs and gradients,
causal and not, L != S, lengths off the tile sizes, the benchmark shape) and exits non-zero on
a mismatch. ``--train`` times bench/train.py's gpt step (``--gpt-config``) with the fused op and
with the composition, alternating in one process, against torch.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import cpu_model, usable_cores  # noqa: E402

#: (batch, heads, T, head dim)
SHAPES = {"gpt-small": (16, 4, 64, 16), "gpt-medium": (32, 4, 128, 32), "gpt2": (8, 12, 1024, 64)}
_TOL = {"float32": (2e-4, 2e-5), "bfloat16": (3e-2, 3e-2), "float16": (5e-3, 5e-3)}


def _attention_module() -> Any:
    """``ember.nn.functional._attention`` (the package's namespace rebinds the name)."""
    import importlib

    return importlib.import_module("ember.nn.functional._attention")


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


class Case:
    """One framework's q/k/v (views of one packed leaf) and its attention call."""

    def __init__(self, lib: Any, dev: Any, qkv: np.ndarray, heads: int, dtype: str, fn: Callable[..., Any],
                 causal: bool, grad: bool) -> None:
        self.lib, self.dev, self.fn, self.causal, self.grad = lib, dev, fn, causal, grad
        self.torch = lib.__name__ == "torch"
        d = getattr(lib, dtype)
        if self.torch:
            self.qkv = lib.from_numpy(qkv).to(dev).to(d).requires_grad_(grad)
        else:
            self.qkv = lib.tensor(qkv, device=dev, dtype=d, requires_grad=grad)
        self.heads = heads
        self.kept: list[Any] = []
        b, t, c3 = qkv.shape
        self.g = self._data(np.random.default_rng(1).standard_normal((b, heads, t, c3 // 3 // heads)), d)

    def _data(self, a: np.ndarray, d: Any) -> Any:
        a = a.astype(np.float32)
        return self.lib.from_numpy(a).to(self.dev).to(d) if self.torch else self.lib.tensor(a, device=self.dev,
                                                                                            dtype=d)

    def qkv_views(self) -> tuple[Any, Any, Any]:
        b, t, c3 = self.qkv.shape
        c = c3 // 3
        q, k, v = self.qkv.split(c, dim=2)
        return tuple(z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))

    def run(self) -> None:
        """One call; its results (output, and the gradient of a backward) stay referenced until
        the next sync: a lazy device skips work whose results are dropped before it runs, so a
        result replaced before the sync would time nothing."""
        if self.grad:
            self.qkv.grad = None
            out = self.fn(*self.qkv_views(), is_causal=self.causal)
            out.backward(self.g)
            self.kept.append((out, self.qkv.grad))
            return
        with self.lib.no_grad():
            self.kept.append(self.fn(*self.qkv_views(), is_causal=self.causal))

    def sync(self) -> None:
        _sync(self.lib, self.dev)
        self.kept = []


def _sync(lib: Any, dev: Any) -> None:
    if lib.__name__ == "torch":
        if "cuda" in str(dev):
            lib.cuda.synchronize()
    else:
        lib.sync(dev)


def _variants(dev: Any, tdev: Any) -> dict[str, tuple[Any, Any, Callable[..., Any]]]:
    import torch
    import torch.nn.functional as TF

    import ember
    from ember.nn.functional import scaled_dot_product_attention as sdpa

    _attention = _attention_module()

    def composed(q: Any, k: Any, v: Any, is_causal: bool) -> Any:
        return _attention._composed(q, k, v, None, 0.0, is_causal, 1.0 / math.sqrt(q.shape[-1]))

    return {"ember fused": (ember, dev, sdpa), "ember composed": (ember, dev, composed),
            "torch": (torch, tdev, TF.scaled_dot_product_attention)}


def bench(args: argparse.Namespace, dev: Any, tdev: Any) -> None:
    b, h, t, e = SHAPES[args.shape] if args.shape in SHAPES else tuple(int(x) for x in args.shape.split(","))
    qkv = np.random.default_rng(0).standard_normal((b, t, 3 * h * e)).astype(np.float32)
    print(f"# shape (B, H, T, E) = {(b, h, t, e)}, {args.dtype}, causal {not args.no_causal}, {_load()}")
    print("| mode | variant | ms per call | vs torch | process CPU ms per call |")
    print("|---|---|---|---|---|")
    for grad in (False, True):
        cases = {name: Case(lib, d, qkv, h, args.dtype, fn, not args.no_causal, grad)
                 for name, (lib, d, fn) in _variants(dev, tdev).items()}
        for c in cases.values():  # warm: kernels compiled, autotune decided
            for _ in range(args.warmup):
                c.run()
            c.sync()
        times: dict[str, list[float]] = {k: [] for k in cases}
        cpu: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for name, c in cases.items():
                c.sync()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.per_round):
                    c.run()
                c.sync()
                times[name].append((time.perf_counter() - t0) / args.per_round)
                cpu[name].append((time.process_time() - c0) / args.per_round)
        ref = statistics.median(times["torch"])
        mode = "fwd+bwd" if grad else "fwd"
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"| {mode} | {name} | {m * 1e3:.3f} | {m / ref:.2f} | {statistics.median(cpu[name]) * 1e3:.3f} |",
                  flush=True)
    print(f"# after: {_load()}")


def check(args: argparse.Namespace, dev: Any, tdev: Any) -> bool:
    """The fused op against torch on ``tdev``: outputs and q/k/v gradients."""
    import torch
    import torch.nn.functional as TF

    import ember
    import ember.nn.functional as F

    rtol, atol = _TOL[args.dtype]
    b, h, t, e = SHAPES[args.shape] if args.shape in SHAPES else tuple(int(x) for x in args.shape.split(","))
    # one head dim throughout (it specialises the kernels: each more costs compiles on a GPU)
    shapes = [((2, 3, 70, e), (2, 3, 70, e), (2, 3, 70, e), True),
              ((2, 2, 37, e), (2, 2, 19, e), (2, 2, 19, e), False),
              ((1, 2, 19, e), (1, 2, 83, e), (1, 2, 83, e), True), ((b, h, t, e),) * 3 + (True,)]
    rng = np.random.default_rng(0)
    ok = True
    td = getattr(torch, args.dtype)
    for qs, ks, vs, causal in shapes:
        xs = [rng.standard_normal(s).astype(np.float32) for s in (qs, ks, vs)]
        tx = [torch.from_numpy(x).to(tdev).to(td).requires_grad_(True) for x in xs]
        ex = [ember.tensor(x, device=dev, dtype=getattr(ember, args.dtype), requires_grad=True) for x in xs]
        ty = TF.scaled_dot_product_attention(*tx, is_causal=causal)
        ey = F.scaled_dot_product_attention(*ex, is_causal=causal)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(g).to(tdev).to(td))
        ey.backward(ember.tensor(g, device=dev, dtype=getattr(ember, args.dtype)))
        pairs = [("out", ey, ty)] + [(f"d{n}", a.grad, r.grad) for n, a, r in zip("qkv", ex, tx)]
        for name, a, r in pairs:
            an = a.float().numpy()
            rn = r.float().detach().cpu().numpy()
            err = float(np.max(np.abs(an - rn)))
            scale = max(1.0, float(np.max(np.abs(rn))))
            good = an.shape == rn.shape and np.allclose(an, rn, rtol=rtol, atol=atol * scale)
            ok &= bool(good)
            print(f"check q{qs} k{ks} v{vs} causal={causal} {name}: max abs err {err:.3g} "
                  f"{'ok' if good else 'MISMATCH'}")
    return ok


def train(args: argparse.Namespace, dev: Any, tdev: Any) -> None:
    """bench/train.py's gpt step with the fused op and with the composition (the front's
    ``_fusable`` answering False), alternating in one process, against torch."""
    import torch
    from train import Workload

    import ember

    _attention = _attention_module()

    targs = argparse.Namespace(gpt_config=args.gpt_config, amp=args.amp)
    torch.manual_seed(0)
    tw = Workload(torch, "gpt", tdev, targs)
    ew = Workload(ember, "gpt", dev, targs, torch_twin=tw)
    fusable = _attention._fusable
    modes: dict[str, Callable[..., bool]] = {"fused": fusable, "composed": lambda q, k, v: False}
    for m in modes.values():
        _attention._fusable = m
        for _ in range(args.warmup):
            ew.run()
    for _ in range(args.warmup):
        tw.run()
    print(f"# bench/train.py gpt {args.gpt_config} step, amp {args.amp}, {_load()}")
    times: dict[str, list[float]] = {"ember fused": [], "ember composed": [], "torch": []}
    cpu: dict[str, list[float]] = {k: [] for k in times}
    for _ in range(args.rounds):
        for name in times:
            if name != "torch":
                _attention._fusable = modes[name.split()[1]]
            w = tw if name == "torch" else ew
            _sync(w.lib, w.dev)
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.per_round):
                w.run()
            _sync(w.lib, w.dev)
            times[name].append((time.perf_counter() - t0) / args.per_round)
            cpu[name].append((time.process_time() - c0) / args.per_round)
    _attention._fusable = fusable
    ref = statistics.median(times["torch"])
    print("| step | ms | vs torch | process CPU ms |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"| {name} | {m * 1e3:.2f} | {m / ref:.2f} | {statistics.median(cpu[name]) * 1e3:.2f} |")
    print(f"# after: {_load()}")


def main() -> None:
    """Parse flags, check, time, print the tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="ember device (autodiff is added): cpu, cuda, wgpu, ...")
    p.add_argument("--shape", default="gpt-small", help=f"{', '.join(SHAPES)} or B,H,T,E")
    p.add_argument("--dtype", default="float32", choices=sorted(_TOL))
    p.add_argument("--no-causal", action="store_true")
    p.add_argument("--check", action="store_true", help="compare with torch first; exit 1 on a mismatch")
    p.add_argument("--train", action="store_true", help="time bench/train.py's gpt step instead")
    p.add_argument("--gpt-config", default="small")
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--per-round", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    if args.dtype.startswith("bf"):
        args.dtype = "bfloat16"

    import torch

    import ember

    torch.set_num_threads(usable_cores())
    dev = ember.Device.parse(args.device)
    dev = dev if dev.is_autodiff else dev.autodiff()
    tdev = torch.device("cuda" if args.device.startswith("cuda") else "cpu")
    print(f"# bench/attention.py on {cpu_model()} ({usable_cores()} cores), Python {platform.python_version()}, "
          f"torch {torch.__version__}, ember device {dev}, torch device {tdev}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}")
    if args.check and not check(args, dev, tdev):
        print("# check FAILED")
        sys.exit(1)
    if args.train:
        train(args, dev, tdev)
    else:
        bench(args, dev, tdev)


if __name__ == "__main__":
    main()
