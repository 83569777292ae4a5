"""Training steps written with bare ember tensors, against the same models in torch (issue 20).

    python bench/train_step_bare.py                  # the three workloads + the cold first epoch
    python bench/train_step_bare.py --only gpt       # workloads whose name contains a substring
    python bench/train_step_bare.py --rounds 3       # fewer alternations (noisier)
    python bench/train_step_bare.py --no-cold        # skip the cold-start subprocess
    python bench/train_step_bare.py --cold-child     # (internal) one cold digits epoch, prints seconds

Workloads (parameters are a dict of leaf tensors that require grad on the device; the loss is a
hand-written cross entropy through ``log_softmax`` + ``gather``; the optimiser is a hand-written
Adam/AdamW under ``no_grad`` with in-place ops; every step ends with ``loss.item()``):

* ``digits``: sklearn digits (1797 x 64, the first 1437 samples as the training split), MLP
  64-128-10 with relu, batch 32, Adam lr 1e-3: one epoch (45 steps) is the unit timed.
* ``mlp784``: MLP 784-512-512-10 with relu, batch 256 of fixed random data, Adam: one step.
* ``gpt``: char-level GPT, 2 layers, width 64, 4 heads, context 64, batch 16 (attention as
  matmul + causal mask + softmax + matmul, LayerNorm from mean/var, gelu MLP, AdamW): one step.

Sides: ember ``Device.cpu().autodiff()`` (fused Cube CPU), ember ``Device.flex().autodiff()``
(numpy), torch CPU eager. Each round runs every side once (the order rotates per round), so
all sides see the same machine load; the table gives medians over rounds, the load average
(``os.getloadavg()``) at the start and end, and per workload the fusion counters of one
steady-state unit (drains, blocks, the fraction of ops in fused blocks, kernel launches:
``ember.tracing.capture()`` spans of a traced unit, which runs without replays).

The cold line: a fresh process with ``EMBER_CACHE_DIR`` pointing at an empty temporary
directory builds the digits model and runs one epoch on ``Device.cpu().autodiff()``; the
figure is that first epoch's wall time (the import is reported apart), with the number of C
compiles it ran (``compile`` spans that were not cached).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


# --------------------------------------------------------------------------- data
def digits_data() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    return x[:1437], y[:1437]


def text_data() -> tuple[np.ndarray, int]:
    text = (REPO / "README.md").read_text() + "".join(
        p.read_text() for p in sorted((REPO / "ember" / "tensor").glob("*.py")))
    chars = sorted(set(text))
    lut = {c: i for i, c in enumerate(chars)}
    return np.array([lut[c] for c in text], dtype=np.int64), len(chars)


# --------------------------------------------------------------------------- models (one code for both libraries)
class Lib:
    """What differs between ember and torch in the model code: creating tensors, no_grad."""

    def __init__(self, name: str, device: Any = None) -> None:
        self.name = name
        self.device = device
        if name == "torch":
            import torch

            self.m = torch
        else:
            import ember

            self.m = ember

    def param(self, a: np.ndarray) -> Any:
        if self.name == "torch":
            return self.m.tensor(a, requires_grad=True)
        return self.m.tensor(a, device=self.device, requires_grad=True)

    def const(self, a: np.ndarray) -> Any:
        if self.name == "torch":
            return self.m.from_numpy(a)
        return self.m.tensor(a, device=self.device)

    def zeros_like(self, p: Any) -> Any:
        if self.name == "torch":
            return self.m.zeros_like(p.detach())
        return self.m.zeros(p.shape, device=self.device)

    def no_grad(self) -> Any:
        return self.m.no_grad()

    def gelu(self, x: Any) -> Any:
        return self.m.nn.functional.gelu(x) if self.name == "torch" else self.m.gelu(x)


def cross_entropy(logits: Any, target: Any) -> Any:
    """Mean negative log likelihood through log_softmax + gather (target: int64 of shape (N,))."""
    return -logits.log_softmax(-1).gather(1, target.unsqueeze(1)).mean()


class Adam:
    """Adam (AdamW when ``wd``), hand-written with in-place ops, identical for both libraries."""

    def __init__(self, lib: Lib, params: dict[str, Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, wd: float = 0.0) -> None:
        self.lib, self.params, self.lr, self.b1, self.b2, self.eps, self.wd = lib, params, lr, *betas, eps, wd
        self.m = {k: lib.zeros_like(p) for k, p in params.items()}
        self.v = {k: lib.zeros_like(p) for k, p in params.items()}
        self.t = 0

    def step(self) -> None:
        self.t += 1
        b1, b2 = self.b1, self.b2
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        with self.lib.no_grad():
            for k, p in self.params.items():
                g = p.grad
                if self.wd:
                    p.mul_(1 - self.lr * self.wd)
                m, v = self.m[k], self.v[k]
                m.mul_(b1).add_(g * (1 - b1))
                v.mul_(b2).add_(g * g * (1 - b2))
                p.sub_((m / c1) * self.lr / ((v / c2).sqrt() + self.eps))
                p.grad = None


def init_mlp(sizes: list[int], seed: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(seed)
    out = {}
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        bound = 1 / math.sqrt(a)
        out[f"w{i}"] = g.uniform(-bound, bound, (a, b)).astype(np.float32)
        out[f"b{i}"] = g.uniform(-bound, bound, (b,)).astype(np.float32)
    return out


def mlp_loss(P: dict[str, Any], x: Any, y: Any, layers: int) -> Any:
    h = x
    for i in range(layers):
        h = h @ P[f"w{i}"] + P[f"b{i}"]
        if i < layers - 1:
            h = h.relu()
    return cross_entropy(h, y)


GPT = {"layers": 2, "width": 64, "heads": 4, "ctx": 64, "batch": 16}


def init_gpt(vocab: int, seed: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(seed)
    c, n = GPT["width"], GPT["layers"]

    def w(*shape: int) -> np.ndarray:
        return (g.standard_normal(shape) * 0.02).astype(np.float32)

    P = {"wte": w(vocab, c), "wpe": w(GPT["ctx"], c), "lnf_w": np.ones(c, np.float32),
         "lnf_b": np.zeros(c, np.float32), "head": w(c, vocab)}
    for i in range(n):
        P |= {f"ln1_w{i}": np.ones(c, np.float32), f"ln1_b{i}": np.zeros(c, np.float32),
              f"qkv_w{i}": w(c, 3 * c), f"qkv_b{i}": np.zeros(3 * c, np.float32),
              f"proj_w{i}": w(c, c), f"proj_b{i}": np.zeros(c, np.float32),
              f"ln2_w{i}": np.ones(c, np.float32), f"ln2_b{i}": np.zeros(c, np.float32),
              f"fc_w{i}": w(c, 4 * c), f"fc_b{i}": np.zeros(4 * c, np.float32),
              f"fc2_w{i}": w(4 * c, c), f"fc2_b{i}": np.zeros(c, np.float32)}
    return P


def layer_norm(x: Any, w: Any, b: Any, eps: float = 1e-5) -> Any:
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, correction=0)
    return (x - mu) / (var + eps).sqrt() * w + b


def gpt_loss(P: dict[str, Any], idx: Any, tgt: Any, mask: Any, gelu: Callable[[Any], Any]) -> Any:
    B, T, C, H = GPT["batch"], GPT["ctx"], GPT["width"], GPT["heads"]
    D = C // H
    x = P["wte"].index_select(0, idx.reshape(-1)).reshape(B, T, C) + P["wpe"]
    for i in range(GPT["layers"]):
        h = layer_norm(x, P[f"ln1_w{i}"], P[f"ln1_b{i}"])
        qkv = h @ P[f"qkv_w{i}"] + P[f"qkv_b{i}"]
        q, k, v = qkv.split(C, dim=2)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k = k.reshape(B, T, H, D).transpose(1, 2)
        v = v.reshape(B, T, H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ P[f"proj_w{i}"] + P[f"proj_b{i}"])
        h = layer_norm(x, P[f"ln2_w{i}"], P[f"ln2_b{i}"])
        x = x + (gelu(h @ P[f"fc_w{i}"] + P[f"fc_b{i}"]) @ P[f"fc2_w{i}"] + P[f"fc2_b{i}"])
    x = layer_norm(x, P["lnf_w"], P["lnf_b"])
    logits = x @ P["head"]
    return cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


# --------------------------------------------------------------------------- workloads
class Workload:
    """A model + data + optimiser on one side; ``unit()`` runs the timed unit (an epoch or a step)."""

    name = ""
    unit_name = "step"

    def __init__(self, lib: Lib) -> None:
        self.lib = lib

    def unit(self) -> float:
        raise NotImplementedError


class Digits(Workload):
    name = "digits"
    unit_name = "epoch"

    def __init__(self, lib: Lib) -> None:
        super().__init__(lib)
        self.x, self.y = digits_data()
        self.P = {k: lib.param(v) for k, v in init_mlp([64, 128, 10], 0).items()}
        self.opt = Adam(lib, self.P)
        self.perm = np.random.default_rng(1).permutation(len(self.x))

    def unit(self) -> float:
        total = 0.0
        for s in range(0, len(self.x), 32):
            j = self.perm[s:s + 32]
            xb, yb = self.lib.const(self.x[j]), self.lib.const(self.y[j])
            loss = mlp_loss(self.P, xb, yb, 2)
            loss.backward()
            self.opt.step()
            total += loss.item()
        return total


class Mlp784(Workload):
    name = "mlp784"

    def __init__(self, lib: Lib) -> None:
        super().__init__(lib)
        g = np.random.default_rng(3)
        self.P = {k: lib.param(v) for k, v in init_mlp([784, 512, 512, 10], 0).items()}
        self.opt = Adam(lib, self.P)
        self.xs = [g.random((256, 784), dtype=np.float32) for _ in range(4)]
        self.ys = [g.integers(0, 10, 256).astype(np.int64) for _ in range(4)]
        self.i = 0

    def unit(self) -> float:
        self.i += 1
        xb, yb = self.lib.const(self.xs[self.i % 4]), self.lib.const(self.ys[self.i % 4])
        loss = mlp_loss(self.P, xb, yb, 3)
        loss.backward()
        self.opt.step()
        return loss.item()


class Gpt(Workload):
    name = "gpt"

    def __init__(self, lib: Lib) -> None:
        super().__init__(lib)
        self.data, vocab = text_data()
        self.P = {k: lib.param(v) for k, v in init_gpt(vocab, 0).items()}
        self.opt = Adam(lib, self.P, lr=3e-4, wd=0.01)
        T = GPT["ctx"]
        self.mask = lib.const(~np.tril(np.ones((T, T), dtype=bool)))
        self.g = np.random.default_rng(4)

    def unit(self) -> float:
        B, T = GPT["batch"], GPT["ctx"]
        starts = self.g.integers(0, len(self.data) - T - 1, B)
        idx = np.stack([self.data[s:s + T] for s in starts])
        tgt = np.stack([self.data[s + 1:s + T + 1] for s in starts])
        loss = gpt_loss(self.P, self.lib.const(idx), self.lib.const(tgt), self.mask, self.lib.gelu)
        loss.backward()
        self.opt.step()
        return loss.item()


WORKLOADS: dict[str, type[Workload]] = {"digits": Digits, "mlp784": Mlp784, "gpt": Gpt}


# --------------------------------------------------------------------------- measuring
def fusion_counters(w: Workload) -> dict[str, Any]:
    """Fusion counters of one steady-state unit (untraced: replays on) and its spans (traced)."""
    import ember
    from ember.backends.fusion import Fusion

    b: Any = w.lib.device.backend()
    while not isinstance(b, Fusion):
        b = b.inner
    st = b.stats
    before = (st.drains, st.replays, st.fused_blocks, st.unfused_ops)
    w.unit()
    after = (st.drains, st.replays, st.fused_blocks, st.unfused_ops)
    drains, replays, fused, unfused = (a - c for a, c in zip(after, before))
    with ember.tracing.capture() as spans:
        w.unit()
    fuse = [s for s in spans if s.name == "fuse"]
    fused_ops = sum(s.fields.get("ops", 0) for s in fuse)
    return {"drains": drains, "replayed": replays, "fused blocks": fused, "unfused ops": unfused,
            "fused op share": fused_ops / max(1, fused_ops + unfused),
            "launches": sum(1 for s in spans if s.name == "launch"),
            "compiles": sum(1 for s in spans if s.name == "compile" and not s.fields.get("cached"))}


def load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


def measure(name: str, rounds: int) -> dict[str, Any]:
    from ember import Device

    sides: dict[str, Workload] = {
        "ember cpu": WORKLOADS[name](Lib("ember", Device.cpu().autodiff())),
        "ember flex": WORKLOADS[name](Lib("ember", Device.flex().autodiff())),
        "torch": WORKLOADS[name](Lib("torch")),
    }
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    t_first = {}
    for side, w in sides.items():  # first unit: compiles, tunes, searches
        t0 = time.perf_counter()
        w.unit()
        t_first[side] = time.perf_counter() - t0
    for _ in range(3):  # a drain replays from its 3rd sighting (4th where its floats change)
        for w in sides.values():
            w.unit()
    counters = fusion_counters(sides["ember cpu"])
    times: dict[str, list[float]] = {k: [] for k in sides}
    load0 = load()
    order = list(sides)
    reps = 1 if name == "digits" else 5
    for r in range(rounds):
        for side in order[r % 3:] + order[:r % 3]:
            w = sides[side]
            time.sleep(0.005)
            t0 = time.perf_counter()
            for _ in range(reps):
                w.unit()
            times[side].append((time.perf_counter() - t0) / reps)
    return {"name": name, "unit": sides["ember cpu"].unit_name, "first": t_first,
            "median": {k: statistics.median(v) for k, v in times.items()},
            "min": {k: min(v) for k, v in times.items()},
            "load": f"{load0} -> {load()}", "counters": counters}


def cold_child() -> None:
    t0 = time.perf_counter()
    import ember
    from ember import Device

    t_import = time.perf_counter() - t0
    w = Digits(Lib("ember", Device.cpu().autodiff()))
    t1 = time.perf_counter()
    with ember.tracing.capture() as spans:
        w.unit()
    t_epoch = time.perf_counter() - t1
    compiles = [s for s in spans if s.name == "compile" and not s.fields.get("cached")]
    t2 = time.perf_counter()
    w.unit()
    print(json.dumps({"import_s": t_import, "first_epoch_s": t_epoch, "second_epoch_s": time.perf_counter() - t2,
                      "compiles": len(compiles), "compile_spans_s": sum(s.duration for s in compiles)}))


def cold(repeats: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="ember-cold-") as d:
            env = dict(os.environ, EMBER_CACHE_DIR=d)
            la = load()
            r = subprocess.run([sys.executable, __file__, "--cold-child"], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(r.stderr)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            res["load"] = la
            out.append(res)
    return out


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--cold-repeats", type=int, default=2)
    ap.add_argument("--cold-child", action="store_true")
    ap.add_argument("--json", default="", help="also write the results as JSON to this path")
    a = ap.parse_args()
    if a.cold_child:
        cold_child()
        return
    os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="ember-bench-train-"))
    import platform

    print(f"# train_step_bare: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
          f"Python {platform.python_version()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
          f"load {load()}")
    results = []
    hdr = ["workload", "ember cpu ms", "ember flex ms", "torch ms", "cpu/torch", "cpu/flex", "load (1/5/15 min)",
           "first unit cpu/flex/torch s", "drains", "replayed", "fused blocks", "unfused ops", "fused op share",
           "launches (traced)"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr), flush=True)
    for name in WORKLOADS:
        if a.only and a.only not in name:
            continue
        r = measure(name, a.rounds)
        results.append(r)
        m, k = r["median"], r["counters"]
        c, f, t = m["ember cpu"], m["ember flex"], m["torch"]
        first = "/".join(f"{r['first'][s]:.2f}" for s in ("ember cpu", "ember flex", "torch"))
        row = [f"{name} ({r['unit']})", fmt_ms(c), fmt_ms(f), fmt_ms(t), f"{c / t:.2f}", f"{c / f:.2f}", r["load"],
               first, str(k["drains"]), str(k["replayed"]), str(k["fused blocks"]), str(k["unfused ops"]),
               f"{k['fused op share']:.0%}", str(k["launches"])]
        print("| " + " | ".join(row) + " |", flush=True)
    if not a.no_cold and (not a.only or a.only in "digits"):
        cr = cold(a.cold_repeats)
        print()
        for c in cr:
            print(f"cold digits epoch (empty EMBER_CACHE_DIR): first epoch {c['first_epoch_s']:.2f} s "
                  f"(second {c['second_epoch_s'] * 1e3:.0f} ms, import {c['import_s'] * 1e3:.0f} ms), "
                  f"{c['compiles']} C compiles, load {c['load']}")
        results.append({"cold": cr})
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
