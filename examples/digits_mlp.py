"""Train an MLP on scikit-learn's bundled 8x8 digits (no download): >= 97% test accuracy.

    python examples/digits_mlp.py --device cpu --epochs 20
    python examples/digits_mlp.py --device cpu --epochs 30 --resume   # continue a run

Written as a PyTorch user writes it: ``ember.nn``, ``ember.optim``, ``ember.utils.data``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402

import ember  # noqa: E402
from ember import nn, optim  # noqa: E402
from ember.utils.data import DataLoader, TensorDataset  # noqa: E402


def digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Standardised features and labels, split 80/20 by class (fixed split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-3
    return (xtr - mu) / sd, (xte - mu) / sd, ytr.astype(np.int64), yte.astype(np.int64)


def accuracy(model: nn.Module, x: ember.Tensor, y: ember.Tensor) -> float:
    """Fraction of ``x`` classified as ``y`` (eval mode, no graph)."""
    model.eval()
    with ember.no_grad():
        return float((model(x).argmax(1) == y).float().mean().item())


def main() -> float:
    """Train, checkpoint every epoch, plot; returns the final test accuracy."""
    args = C.parse_args(__doc__.splitlines()[0], epochs=20, lr=3e-3, out="runs/digits_mlp",
                        extra={"hidden": (int, 128, "hidden width")})
    dev = C.device_of(args.device)
    xtr, xte, ytr, yte = digits()
    train = TensorDataset(ember.tensor(xtr, device=dev), ember.tensor(ytr, device=dev))
    x_test, y_test = ember.tensor(xte, device=dev), ember.tensor(yte, device=dev)

    ember.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(args.hidden, 10)).to(dev)
    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True)
    steps = len(loader) if args.max_steps is None else min(len(loader), args.max_steps)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * steps)

    start, history = (C.load_checkpoint(args.out, model, opt, sched, dev) if args.resume else (0, {}))
    history = history or {"train_loss": [], "test_accuracy": []}
    for epoch in C.epochs_to_run(start, args):
        ember.manual_seed(args.seed + epoch)  # this epoch's shuffle and dropout: resumable
        model.train()
        bar = C.Progress(steps, epoch, args.epochs, plain=args.no_progress)
        loss = C.train_epoch(model, loader, opt, sched, bar=bar, max_steps=args.max_steps, clip=1.0,
                             loss_of=lambda out, y: nn.functional.cross_entropy(out, y, label_smoothing=0.05))
        acc = accuracy(model, x_test, y_test)
        history["train_loss"].append(loss)
        history["test_accuracy"].append(acc)
        bar.close(f"loss {loss:.4f}, test accuracy {acc:.4f}")
        C.save_checkpoint(args.out, epoch, model, opt, sched, history)
    if not args.no_plot:
        C.plot_history(history, os.path.join(args.out, "curves.png"), "digits MLP")
    final = history["test_accuracy"][-1] if history["test_accuracy"] else float("nan")
    print(f"final test accuracy {final:.4f}")
    return final


if __name__ == "__main__":
    main()
