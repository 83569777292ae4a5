"""Train a character-level GPT on the Python standard library's own source files.

The corpus is on every machine with Python (no download). Token and position embeddings,
causal self-attention, pre-norm blocks, AdamW, a cosine schedule with warmup and gradient
clipping; a sample of generated text after every epoch.

    python examples/char_gpt.py --device cpu                     # small: learns in minutes on 2 cores
    python examples/char_gpt.py --device cuda --config gpt2-small  # 12 x 768, context 1024, bf16 autocast
"""

from __future__ import annotations

import math
import os
import sys
import sysconfig
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import nn, optim  # noqa: E402
from ember.utils.data import DataLoader, Dataset, RandomSampler  # noqa: E402


@dataclass(frozen=True)
class Config:
    """Model and batch shape."""

    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    batch_size: int
    dropout: float = 0.0


CONFIGS = {
    "small": Config(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=16),
    "medium": Config(n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=32),
    "gpt2-small": Config(n_layer=12, n_head=12, n_embd=768, block_size=1024, batch_size=16),
}

#: characters outside printable ASCII (and tab, newline) map to one placeholder token
VOCAB = ["\t", "\n"] + [chr(c) for c in range(32, 127)] + ["\x00"]
_INDEX = {c: i for i, c in enumerate(VOCAB)}


def corpus(max_chars: int) -> np.ndarray:
    """The standard library's ``.py`` files (sorted, so every machine reads the same order),
    encoded as token ids, at most ``max_chars`` of them."""
    root = sysconfig.get_paths()["stdlib"]
    parts, total = [], 0
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "tests", "idlelib"))
        for f in sorted(files):
            if f.endswith(".py") and total < max_chars:
                with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                parts.append(text)
                total += len(text)
    text = "".join(parts)[:max_chars]
    unknown = _INDEX["\x00"]
    return np.fromiter((_INDEX.get(c, unknown) for c in text), dtype=np.int64, count=len(text))


def decode(ids: list[int]) -> str:
    """Token ids back to text."""
    return "".join(VOCAB[i] for i in ids)


class Windows(Dataset):
    """Every (input, next-char target) window of ``block_size`` characters."""

    def __init__(self, data: np.ndarray, block_size: int) -> None:
        self.data, self.block_size = data, block_size

    def __len__(self) -> int:
        return len(self.data) - self.block_size - 1

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        chunk = self.data[i:i + self.block_size + 1]
        return chunk[:-1], chunk[1:]


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where a position sees only itself and earlier positions."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.dropout = cfg.dropout

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        """(B, T, C) -> (B, T, C)."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        """(B, T, C) -> (B, T, C)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-2-shaped character model; the output head shares the token embedding's weight."""

    def __init__(self, cfg: Config, vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(vocab, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: ember.Tensor) -> ember.Tensor:
        """Token ids (B, T) -> logits (B, T, vocab)."""
        t = idx.shape[1]
        pos = ember.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def generate(self, idx: ember.Tensor, n: int, rng: np.random.Generator, temperature: float = 0.8) -> list[int]:
        """Sample ``n`` characters after ``idx`` (1, T)."""
        out = idx[0].tolist()
        with ember.no_grad():
            for _ in range(n):
                ctx = ember.tensor([out[-self.cfg.block_size:]], device=idx.device)
                logits = self(ctx)[0, -1].float() / temperature
                p = F.softmax(logits, dim=-1).numpy().astype(np.float64)
                out.append(int(rng.choice(len(p), p=p / p.sum())))
        return out


def main() -> float:
    """Train, sample, checkpoint every epoch, plot; returns the last validation loss."""
    args = C.parse_args(__doc__.splitlines()[0], epochs=6, lr=3e-3, out="runs/char_gpt", extra={
        "config": (str, "small", f"model size: {', '.join(CONFIGS)}"),
        "steps-per-epoch": (int, 100, "optimizer steps per epoch"),
        "corpus-chars": (int, 2_000_000, "characters of the standard library to read"),
        "amp": (str, "auto", "autocast dtype: auto (bf16 on cuda for gpt2-small), bf16, fp16, off"),
        "sample-chars": (int, 200, "characters to generate after each epoch"),
    })
    cfg = CONFIGS[args.config]
    if args.batch_size != 32:  # an explicit --batch-size wins over the config's
        cfg = Config(**{**cfg.__dict__, "batch_size": args.batch_size})
    dev = C.device_of(args.device)
    data = corpus(args.corpus_chars)
    split = int(0.95 * len(data))
    train, val = Windows(data[:split], cfg.block_size), Windows(data[split:], cfg.block_size)

    ember.manual_seed(args.seed)
    model = GPT(cfg, len(VOCAB)).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.config}: {n_params / 1e6:.2f}M parameters, {len(data):,} characters, device {dev}")
    steps = args.steps_per_epoch if args.max_steps is None else min(args.steps_per_epoch, args.max_steps)
    total_steps, warmup = args.epochs * steps, max(1, args.epochs * steps // 20)
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    opt = optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                      lr=args.lr, betas=(0.9, 0.95))
    sched = optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (
        1.0 + math.cos(math.pi * min(1.0, max(0, s - warmup) / max(1, total_steps - warmup)))))
    amp = args.amp
    if amp == "auto":
        amp = "bf16" if dev.spec[:2] == ("cube", "cuda") and args.config == "gpt2-small" else "off"
    amp_dtype = {"bf16": ember.bfloat16, "fp16": ember.float16}.get(amp)
    device_type = "cuda" if dev.spec[:2] == ("cube", "cuda") else "cpu"

    def loss_of(xb: ember.Tensor, yb: ember.Tensor) -> ember.Tensor:
        with ember.autocast(device_type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(xb)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), yb.reshape(-1))

    start, history = (C.load_checkpoint(args.out, model, opt, sched, dev) if args.resume else (0, {}))
    history = history or {"train_loss": [], "val_loss": [], "val_accuracy": []}
    rng = np.random.default_rng(args.seed)
    for epoch in C.epochs_to_run(start, args):
        ember.manual_seed(args.seed + epoch)
        model.train()
        loader = DataLoader(train, batch_size=cfg.batch_size,
                            sampler=RandomSampler(train, replacement=True, num_samples=steps * cfg.batch_size))
        bar = C.Progress(steps, epoch, args.epochs, plain=args.no_progress, unit="tokens")
        total = 0.0
        for xb, yb in loader:
            loss = loss_of(xb.to(dev), yb.to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            value = loss.item()
            total += value
            bar.update(value, cfg.batch_size * cfg.block_size)
        model.eval()
        vl, va = [], []
        with ember.no_grad():
            for i, (xb, yb) in enumerate(DataLoader(val, batch_size=cfg.batch_size, shuffle=True)):
                if i == 4:
                    break
                xb, yb = xb.to(dev), yb.to(dev)
                with ember.autocast(device_type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    logits = model(xb).float()
                vl.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1)).item())
                va.append((logits.argmax(-1) == yb).float().mean().item())
        history["train_loss"].append(total / max(steps, 1))
        history["val_loss"].append(float(np.mean(vl)))
        history["val_accuracy"].append(float(np.mean(va)))
        bar.close(f"train loss {total / max(steps, 1):.3f}, val loss {np.mean(vl):.3f}, "
                  f"val next-char accuracy {np.mean(va):.3f}")
        prompt = ember.tensor([[_INDEX[c] for c in "def "]], device=dev)
        print("sample:", decode(model.generate(prompt, args.sample_chars, rng)).replace("\n", "\n        "))
        C.save_checkpoint(args.out, epoch, model, opt, sched, history)
    if not args.no_plot:
        C.plot_history(history, os.path.join(args.out, "curves.png"), f"char GPT ({args.config})")
    return history["val_loss"][-1] if history["val_loss"] else float("nan")


if __name__ == "__main__":
    main()
