"""The Tensor API modules import down their order, never up, and form no import cycle (issue 17).

Imports are read from the source (module level and inside functions; ``if TYPE_CHECKING`` blocks
are not imports), so a cycle that only a function-level import closes is caught too. From the
top: ``ember.functional``; ``ember.composite`` and ``ember.dlpack``; ``ember.creation``;
``ember.tensor`` (docs/architecture.md, "Layer rules").
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: API module (or package) -> the API modules it must never import
FORBIDDEN = {
    "ember.tensor": ("ember.creation", "ember.functional", "ember.composite", "ember.dlpack", "ember.nn",
                     "ember.optim", "ember.amp", "ember.utils", "ember.serialization"),
    "ember.creation": ("ember.functional", "ember.composite", "ember.dlpack"),
    "ember.composite": ("ember.functional", "ember.dlpack"),
    "ember.dlpack": ("ember.functional", "ember.composite"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "ember").rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    text = path.read_text()
    tree = ast.parse(text)
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)} if "TYPE_CHECKING" in text else set()
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("ember"):
                found.add(t)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Module -> the ember modules it imports (parsed once per session)."""
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_tensor_api_modules_never_import_up():
    graph = _graph()
    bad = [f"{m} imports {t}" for m, targets in graph.items() for low, highs in FORBIDDEN.items()
           if _within(m, low) for t in targets if any(_within(t, h) for h in highs)]
    assert not bad, "\n".join(bad)


def test_no_import_cycle_through_the_tensor_api():
    graph = _graph()
    api = ("ember.tensor", "ember.creation", "ember.functional", "ember.composite", "ember.dlpack")

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            for t in graph.get(m, ()):
                if t == goal:
                    return True
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return False

    cycles = [(m, t) for m, targets in graph.items() if any(_within(m, a) for a in api)
              for t in targets if reaches(t, m)]
    assert not cycles, "import cycles: " + ", ".join(f"{m} -> {t} -> ... -> {m}" for m, t in cycles)


def test_the_walk_sees_the_imports():
    """The graph is not vacuous: known downward imports are found."""
    graph = _graph()
    assert "ember.tensor.core" in graph["ember.creation"] or "ember.tensor" in graph["ember.creation"]
    assert "ember.composite" in graph["ember.functional"]
    assert "ember.tensor.core" in graph["ember.tensor.arithmetic"]
