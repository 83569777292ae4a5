"""``ember info``: the seed's experiment as a command."""

from __future__ import annotations

import subprocess
import sys


def test_info_runs_the_seed_matmul_on_every_flex_device() -> None:
    out = subprocess.run([sys.executable, "-m", "ember", "info"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "Device<Flex(Cpu)>" in text
    assert "name = dispatch<flex>" in text
    assert "Device<Autodiff { device: Flex(Cpu), checkpointing: None }>" in text
    assert "name = dispatch<autodiff<flex>>" in text
    assert text.count("result = [19.0, 22.0, 43.0, 50.0]") >= 2
