"""Run a user script (written for torch) under torch and, ported, under ember.

The port is what a user does: ``import torch`` becomes ``import ember as torch`` and
``torch.x`` submodule imports become ``ember.x`` (the hidden trial suites port the same way).
A script calls ``sync_weights(model)`` after building a model whose outputs are compared: the
torch run records the initial state dict (numpy copies, in call order), the ember run loads the
same values into its own model (ember's Philox init draws other values than torch's for one
seed). A script leaves its figures in ``RESULT``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

SCRIPTS = Path(__file__).parent / "scripts"

_PORTS = [
    (re.compile(r"^(\s*)import torch\.(\w+(?:\.\w+)*) as (\w+)", re.M), r"\1import ember.\2 as \3"),
    (re.compile(r"^(\s*)from torch(\.[\w.]+)? import ", re.M), r"\1from ember\2 import "),
    (re.compile(r"^(\s*)import torch$", re.M), r"\1import ember as torch"),
]


def port(source: str) -> str:
    """The script with torch's imports replaced by ember's."""
    for pattern, repl in _PORTS:
        source = pattern.sub(repl, source)
    return source


def run_script(name: str, framework: str, weights: list[dict[str, np.ndarray]] | None = None) -> tuple[Any, list]:
    """Run ``scripts/<name>.py`` with ``framework`` ("torch" or "ember"); returns its RESULT and
    the initial weights it recorded (torch) or loaded (ember)."""
    path = SCRIPTS / f"{name}.py"
    source = path.read_text()
    if framework == "ember":
        source = port(source)
    recorded: list[dict[str, np.ndarray]] = []

    def sync_weights(model: Any) -> Any:
        if framework == "torch":
            recorded.append({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
        elif weights is not None:
            import ember

            state = weights[len(recorded)]
            model.load_state_dict({k: ember.from_numpy(v) for k, v in state.items()})
            recorded.append(state)
        return model

    ns: dict[str, Any] = {"__name__": "__main__", "__file__": str(path), "sync_weights": sync_weights}
    exec(compile(source, str(path), "exec"), ns)  # noqa: S102 (the test's own scripts)
    return ns["RESULT"], recorded


def names() -> list[str]:
    """Every script's name."""
    return sorted(p.stem for p in SCRIPTS.glob("*.py"))


def compare(a: Any, b: Any, rtol: float, atol: float, where: str = "") -> list[str]:
    """Differences between two RESULT trees (floats within tolerance, the rest equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in compare(a[k], b[k], rtol, atol, f"{where}.{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in compare(x, y, rtol, atol, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool) or not np.isclose(a, b, rtol=rtol, atol=atol):
            return [f"{where}: {a!r} != {b!r}"]
        return []
    if a == b and type(a) is type(b):
        return []
    return [f"{where}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"]


if __name__ == "__main__":
    import traceback

    for name in sys.argv[1:] or names():
        want, w = run_script(name, "torch")
        try:
            got, _ = run_script(name, "ember", w)
        except Exception:
            print(f"== {name}: ember FAILED")
            traceback.print_exc()
            continue
        diffs = compare(got, want, 1e-4, 1e-5)
        print(f"== {name}: {'OK' if not diffs else 'DIFF'}")
        for d in diffs[:20]:
            print("   ", d)
