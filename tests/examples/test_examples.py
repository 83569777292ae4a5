"""The three examples as smoke tests: a few steps each, the loss goes down, checkpoints resume
exactly, the plot is written. Each runs as a user runs it: a subprocess on the script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(script: str, out: Path, *args: str, timeout: float = 600) -> str:
    """Run one example to completion; its stdout (stderr joins it on failure)."""
    cmd = [sys.executable, str(EXAMPLES / script), "--out", str(out), "--no-progress", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def history(out: Path) -> dict:
    """The history stored in the run's checkpoint."""
    return ember.load(out / "checkpoint.safetensors", device=ember.Device.flex())["history"]


def model_state(out: Path) -> dict[str, np.ndarray]:
    """The model weights stored in the run's checkpoint, as numpy arrays."""
    state = ember.load(out / "checkpoint.safetensors", device=ember.Device.flex())["model"]
    return {k: v.numpy() for k, v in state.items()}


def test_digits_mlp_learns_and_plots(tmp_path: Path) -> None:
    text = run("digits_mlp.py", tmp_path, "--device", "flex", "--epochs", "3")
    h = history(tmp_path)
    assert h["train_loss"][-1] < h["train_loss"][0]
    assert h["test_accuracy"][-1] > 0.85, text
    assert (tmp_path / "curves.png").stat().st_size > 1000


@pytest.mark.parametrize("where", ["flex", "cpu"])
def test_digits_mlp_resume_is_exact(tmp_path: Path, where: str) -> None:
    # an uninterrupted 3-epoch run against 2 epochs + a resumed third: bit-identical weights
    # (the DataLoader order and the dropout masks of each epoch come from seed + epoch)
    flags = ["--device", where, "--epochs", "3", "--max-steps", "6", "--no-plot"]
    run("digits_mlp.py", tmp_path / "whole", *flags)
    run("digits_mlp.py", tmp_path / "split", *flags, "--stop-after", "2")
    assert len(history(tmp_path / "split")["train_loss"]) == 2
    text = run("digits_mlp.py", tmp_path / "split", *flags, "--resume")
    assert "resumed from" in text
    whole, split = model_state(tmp_path / "whole"), model_state(tmp_path / "split")
    assert whole.keys() == split.keys()
    for k in whole:
        np.testing.assert_array_equal(whole[k], split[k], err_msg=k)
    assert history(tmp_path / "whole") == history(tmp_path / "split")


def test_digits_cnn_learns(tmp_path: Path) -> None:
    run("digits_cnn.py", tmp_path, "--device", "flex", "--epochs", "2", "--max-steps", "15", "--no-plot")
    h = history(tmp_path)
    assert h["train_loss"][-1] < h["train_loss"][0]


def test_char_gpt_learns_and_samples(tmp_path: Path) -> None:
    text = run("char_gpt.py", tmp_path, "--device", "flex", "--epochs", "2", "--steps-per-epoch", "15",
               "--corpus-chars", "200000", "--sample-chars", "20", "--lr", "1e-2")
    h = history(tmp_path)
    assert h["train_loss"][-1] < h["train_loss"][0]
    assert h["val_loss"][-1] < np.log(99.0)  # better than uniform over the vocabulary
    assert text.count("sample:") == 2
