"""Train a small CNN (Conv2d + BatchNorm + pooling) on scikit-learn's 8x8 digits: >= 98%.

    python examples/digits_cnn.py --device cpu --epochs 15
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common as C  # noqa: E402
from digits_mlp import accuracy, digits  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import nn, optim  # noqa: E402
from ember.utils.data import DataLoader, TensorDataset  # noqa: E402


class Net(nn.Module):
    """Two conv blocks (conv, batch norm, relu, 2x2 max pool) and a linear classifier."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.norm1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.norm2 = nn.BatchNorm2d(2 * width)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(2 * width * 2 * 2, 10)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        """Logits of a batch of (N, 64) or (N, 1, 8, 8) images."""
        x = x.reshape(-1, 1, 8, 8)
        x = F.max_pool2d(F.relu(self.norm1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.norm2(self.conv2(x))), 2)
        return self.fc(self.drop(x.flatten(1)))


def main() -> float:
    """Train, checkpoint every epoch, plot; returns the final test accuracy."""
    args = C.parse_args(__doc__.splitlines()[0], epochs=15, lr=3e-3, out="runs/digits_cnn",
                        extra={"width": (int, 16, "channels of the first conv")})
    dev = C.device_of(args.device)
    xtr, xte, ytr, yte = digits()
    train = TensorDataset(ember.tensor(xtr, device=dev), ember.tensor(ytr, device=dev))
    x_test, y_test = ember.tensor(xte, device=dev), ember.tensor(yte, device=dev)

    ember.manual_seed(args.seed)
    model = Net(args.width).to(dev)
    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True)
    steps = len(loader) if args.max_steps is None else min(len(loader), args.max_steps)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * steps)

    start, history = (C.load_checkpoint(args.out, model, opt, sched, dev) if args.resume else (0, {}))
    history = history or {"train_loss": [], "test_accuracy": []}
    for epoch in C.epochs_to_run(start, args):
        ember.manual_seed(args.seed + epoch)
        model.train()
        bar = C.Progress(steps, epoch, args.epochs, plain=args.no_progress)
        loss = C.train_epoch(model, loader, opt, sched, F.cross_entropy, bar, args.max_steps)
        acc = accuracy(model, x_test, y_test)
        history["train_loss"].append(loss)
        history["test_accuracy"].append(acc)
        bar.close(f"loss {loss:.4f}, test accuracy {acc:.4f}")
        C.save_checkpoint(args.out, epoch, model, opt, sched, history)
    if not args.no_plot:
        C.plot_history(history, os.path.join(args.out, "curves.png"), "digits CNN")
    final = history["test_accuracy"][-1] if history["test_accuracy"] else float("nan")
    print(f"final test accuracy {final:.4f}")
    return final


if __name__ == "__main__":
    main()
