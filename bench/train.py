"""The training step as the unit of measure: ember and torch side by side, in one process.

Three workloads, each built twice from one definition (``lib`` is ``torch`` or ``ember``: the
same code, which is the point of matching torch's API), with the same initial weights copied
through the state dict:

* ``digits``: the 64-128-10 MLP on scikit-learn's digits, one epoch (batch 32, AdamW),
* ``mlp784``: a 784-512-512-10 MLP step (batch 256, Adam),
* ``gpt``: a character-level GPT step (AdamW, gradient clipping); ``--gpt-config`` picks the size.

Rounds alternate ember and torch so both see the same machine load; the table gives the median
per round and the ratio ember/torch (below 1: ember is faster).

    python bench/train.py                                  # dev box: Device.cpu(), flex, torch CPU
    python bench/train.py --devices cuda --gpt-config gpt2-small --amp bf16   # on a GPU machine
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import cpu_model, usable_cores  # noqa: E402

GPT_CONFIGS = {
    "small": dict(n_layer=2, n_head=4, n_embd=64, block=64, batch=16),
    "medium": dict(n_layer=4, n_head=4, n_embd=128, block=128, batch=32),
    "gpt2-small": dict(n_layer=12, n_head=12, n_embd=768, block=1024, batch=8),
}


def mlp(lib: Any, sizes: list[int]) -> Any:
    """Linear/ReLU stack."""
    nn = lib.nn
    layers: list[Any] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def gpt(lib: Any, vocab: int, n_layer: int, n_head: int, n_embd: int, block: int, **_: Any) -> Any:
    """A pre-norm GPT (the shape of examples/char_gpt.py) built from ``lib.nn``."""
    nn, F = lib.nn, lib.nn.functional

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(n_embd), Attn(), nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * n_embd, n_embd))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos(lib.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    return GPT()


def copy_weights(src: Any, dst: Any) -> None:
    """torch module -> ember module (same architecture, same parameter names)."""
    import ember

    state = {k: ember.tensor(v.detach().cpu().float().numpy() if v.is_floating_point() else v.cpu().numpy())
             for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


class Workload:
    """One model + optimizer + data for one framework; ``run()`` does one timed unit."""

    def __init__(self, lib: Any, name: str, dev: Any, args: argparse.Namespace, torch_twin: Any = None) -> None:
        self.lib, self.name, self.dev = lib, name, dev
        is_torch = lib.__name__ == "torch"
        rng = np.random.default_rng(0)
        self.amp = None
        if name == "digits":
            from sklearn.datasets import load_digits

            x, y = load_digits(return_X_y=True)
            x = (x / 16.0).astype(np.float32)
            self.model = mlp(lib, [64, 128, 10])
            self.batches = [(x[i:i + 32], y[i:i + 32].astype(np.int64)) for i in range(0, len(x), 32)]
            make_opt = lambda p: lib.optim.AdamW(p, lr=3e-3, weight_decay=0.01)  # noqa: E731
        elif name == "mlp784":
            self.model = mlp(lib, [784, 512, 512, 10])
            self.batches = [(rng.standard_normal((256, 784)).astype(np.float32),
                             rng.integers(0, 10, 256).astype(np.int64))]
            make_opt = lambda p: lib.optim.Adam(p, lr=1e-3)  # noqa: E731
        else:
            cfg = GPT_CONFIGS[args.gpt_config]
            self.model = gpt(lib, 98, **cfg)
            toks = rng.integers(0, 98, (cfg["batch"], cfg["block"] + 1)).astype(np.int64)
            self.batches = [(toks[:, :-1], toks[:, 1:])]
            make_opt = lambda p: lib.optim.AdamW(p, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)  # noqa: E731
            self.amp = {"bf16": lib.bfloat16, "fp16": lib.float16}.get(args.amp)
        if is_torch:
            self.model.to(dev)
        else:
            copy_weights(torch_twin.model, self.model)
            self.model.to(dev)
        self.opt = make_opt(self.model.parameters())
        self.device_type = "cuda" if "cuda" in str(dev).lower() else "cpu"
        # data on the device up front: the step, not the input pipeline, is measured here
        self.data = [(self._tensor(x), self._tensor(y)) for x, y in self.batches]

    def _tensor(self, a: np.ndarray) -> Any:
        if self.lib.__name__ == "torch":
            return self.lib.from_numpy(a).to(self.dev)
        return self.lib.tensor(a, device=self.dev)

    def step(self, x: Any, y: Any) -> Any:
        lib = self.lib
        F = lib.nn.functional
        with lib.autocast(self.device_type, dtype=self.amp, enabled=self.amp is not None):
            out = self.model(x)
        loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.name == "gpt":
            lib.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return loss

    def run(self) -> float:
        """One unit (an epoch of digits, one step otherwise) ending in a read of the loss."""
        loss = None
        for x, y in self.data:
            loss = self.step(x, y)
        return float(loss.item())


def sync(lib: Any, dev: Any) -> None:
    if lib.__name__ == "torch":
        if "cuda" in str(dev):
            lib.cuda.synchronize()
    else:
        lib.sync(dev)


def time_rounds(work: dict[str, Workload], rounds: int, per_round: int) -> dict[str, list[float]]:
    """Alternate the frameworks, ``per_round`` units each, ``rounds`` times: seconds per unit."""
    out: dict[str, list[float]] = {k: [] for k in work}
    for _ in range(rounds):
        for k, w in work.items():
            sync(w.lib, w.dev)
            t = time.perf_counter()
            for _ in range(per_round):
                w.run()
            sync(w.lib, w.dev)
            out[k].append((time.perf_counter() - t) / per_round)
    return out


def main() -> None:
    """Parse flags, build, warm up, time, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="cpu,flex", help="ember devices (autodiff is added)")
    p.add_argument("--workloads", default="digits,mlp784,gpt")
    p.add_argument("--gpt-config", default="small", choices=sorted(GPT_CONFIGS))
    p.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--per-round", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()

    import torch

    import ember

    torch.set_num_threads(usable_cores())
    print(f"# bench/train.py on {cpu_model()} ({usable_cores()} cores), Python {platform.python_version()}, "
          f"torch {torch.__version__}, load {os.getloadavg()[0]:.2f}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, gpt config {args.gpt_config}, amp {args.amp}")
    print("| workload | ember device | ember ms | torch ms | ember/torch |")
    print("|---|---|---|---|---|")
    for name in args.workloads.split(","):
        for dname in args.devices.split(","):
            dev = ember.Device.parse(dname)
            dev = dev if dev.is_autodiff else dev.autodiff()
            tdev = torch.device("cuda" if dname.startswith("cuda") else "cpu")
            torch.manual_seed(0)
            tw = Workload(torch, name, tdev, args)
            ew = Workload(ember, name, dev, args, torch_twin=tw)
            t0 = time.perf_counter()
            ew.run()
            first = time.perf_counter() - t0
            for _ in range(args.warmup):
                ew.run()
                tw.run()
            times = time_rounds({"ember": ew, "torch": tw}, args.rounds, args.per_round)
            e, t = statistics.median(times["ember"]), statistics.median(times["torch"])
            print(f"| {name} | {dname} | {e * 1e3:.2f} | {t * 1e3:.2f} | {e / t:.2f} |  (first unit {first:.2f} s)",
                  flush=True)
            if not math.isfinite(ew.run()):
                print(f"  warning: {name} on {dname} produced a non-finite loss")


if __name__ == "__main__":
    main()
