"""What the three examples share: command line, device choice, progress bar, per-epoch
checkpoints with ``--resume``, and the loss/accuracy plot.

Resuming is exact: every epoch starts with ``ember.manual_seed(seed + epoch)``, which fixes
that epoch's shuffle order and dropout masks, and a checkpoint holds the model, the optimizer,
the scheduler and the history. Stopping after epoch k and resuming therefore gives the same
weights as an uninterrupted run.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from typing import Any

import ember
from ember import Device


def parse_args(description: str, **defaults: Any) -> argparse.Namespace:
    """The examples' common flags; ``defaults`` overrides per example."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default=defaults.get("device", "cpu+autodiff"),
                   help="flex, cpu, cuda[:i], wgpu, vulkan (autodiff is added when missing)")
    p.add_argument("--epochs", type=int, default=defaults.get("epochs", 10))
    p.add_argument("--batch-size", type=int, default=defaults.get("batch_size", 32))
    p.add_argument("--lr", type=float, default=defaults.get("lr", 3e-3))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop each epoch after this many steps (smoke tests)")
    p.add_argument("--out", default=defaults.get("out", "runs"), help="checkpoints and plots go here")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this many epochs in total (as if interrupted; --resume continues)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG of the curves")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    for name, (kind, value, text) in defaults.get("extra", {}).items():
        p.add_argument(f"--{name}", type=kind, default=value, help=text)
    return p.parse_args()


def device_of(text: str) -> Device:
    """``Device.parse`` plus autodiff: training needs gradients on every device."""
    dev = Device.parse(text)
    return dev if dev.is_autodiff else dev.autodiff()


class Progress:
    """A ``rich`` progress bar over one epoch showing loss and samples/s (plain lines when
    rich is missing, the output is not a terminal, or ``--no-progress``)."""

    def __init__(self, total: int, epoch: int, epochs: int, plain: bool = False, unit: str = "samples") -> None:
        self.total, self.epoch, self.epochs, self.unit = total, epoch, epochs, unit
        self.samples, self.t0, self.loss = 0, time.perf_counter(), float("nan")
        self._bar = None
        if not plain:
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            except ImportError:
                plain = True
            else:
                self._bar = Progress(TextColumn(f"epoch {epoch + 1}/{epochs}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("loss {task.fields[loss]:.4f}"),
                                     TextColumn("{task.fields[rate]:.0f} " + unit + "/s"), TimeElapsedColumn())
                self._task = self._bar.add_task("train", total=total, loss=float("nan"), rate=0.0)
                self._bar.start()

    def update(self, loss: float, batch: int) -> None:
        """One step done: ``loss`` of the batch, ``batch`` samples (or tokens) in it."""
        self.samples += batch
        self.loss = loss
        if self._bar is not None:
            self._bar.update(self._task, advance=1, loss=loss, rate=self.rate)

    @property
    def rate(self) -> float:
        """Samples per second since the epoch began."""
        return self.samples / max(time.perf_counter() - self.t0, 1e-9)

    def close(self, message: str) -> None:
        """End the bar and print the epoch's summary line."""
        if self._bar is not None:
            self._bar.stop()
        print(f"epoch {self.epoch + 1}/{self.epochs}: {message} ({self.rate:.0f} {self.unit}/s)", flush=True)


def checkpoint_path(out: str) -> str:
    """The single rolling checkpoint of a run directory."""
    return os.path.join(out, "checkpoint.safetensors")


def save_checkpoint(out: str, epoch: int, model: Any, opt: Any, sched: Any, history: dict[str, list]) -> None:
    """Everything a resumed run needs after ``epoch`` (0-based) finished."""
    os.makedirs(out, exist_ok=True)
    state = {"epoch": epoch, "model": model.state_dict(), "opt": opt.state_dict(), "history": history}
    if sched is not None:
        state["sched"] = sched.state_dict()
    ember.save(state, checkpoint_path(out))


def load_checkpoint(out: str, model: Any, opt: Any, sched: Any, device: Device) -> tuple[int, dict[str, list]]:
    """Restore a run; returns (first epoch to run, history). A missing checkpoint starts fresh."""
    path = checkpoint_path(out)
    if not os.path.exists(path):
        print(f"no checkpoint at {path}: starting fresh")
        return 0, {}
    state = ember.load(path, device=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    if sched is not None and "sched" in state:
        sched.load_state_dict(state["sched"])
    print(f"resumed from {path} after epoch {state['epoch'] + 1}")
    return int(state["epoch"]) + 1, {k: list(v) for k, v in state["history"].items()}


def plot_history(history: dict[str, list], path: str, title: str) -> None:
    """Loss and accuracy curves as a PNG (matplotlib is an optional extra: skipped without it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'ember[examples]'): no plot")
        return
    keys = [k for k in history if history[k]]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.5), squeeze=False)
    for ax, k in zip(axes[0], keys):
        ax.plot(range(1, len(history[k]) + 1), history[k], marker="o", markersize=3)
        ax.set_xlabel("epoch")
        ax.set_title(k.replace("_", " "))
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"curves written to {path}")


def epochs_to_run(start: int, args: argparse.Namespace) -> range:
    """The epochs this invocation runs: from ``start`` to ``--epochs``, or to ``--stop-after``."""
    end = args.epochs if args.stop_after is None else min(args.epochs, args.stop_after)
    return range(start, end)


def train_epoch(model: Any, loader: Any, opt: Any, sched: Any, loss_of: Any, bar: Progress,
                max_steps: int | None, clip: float | None = None) -> float:
    """One epoch of (x, y) batches: ``loss_of(model(x), y)``, backward, optional gradient
    clipping to norm ``clip``, optimizer and scheduler steps; the sample-weighted mean loss."""
    import ember.nn.utils

    total, n = 0.0, 0
    for xb, yb in batches(loader, max_steps):
        loss = loss_of(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            ember.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        value = loss.item()
        total, n = total + value * len(yb), n + len(yb)
        bar.update(value, len(yb))
    return total / max(n, 1)


def batches(loader: Any, max_steps: int | None) -> Iterator[Any]:
    """The loader's batches, at most ``max_steps`` of them."""
    for i, b in enumerate(loader):
        if max_steps is not None and i >= max_steps:
            return
        yield b
