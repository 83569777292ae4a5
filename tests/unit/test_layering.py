"""The layer rules of docs/architecture.md, checked on the source: no import cycle between
ember's modules, and no import against the layer order (module-level and function-level
imports both count; ``if TYPE_CHECKING:`` imports do not, as they never run).

Layers, top to bottom; a module imports its own layer and the layers below it:

1. the Tensor API and the training stack (``ember`` top level, ``nn``, ``optim``, ``utils``,
   ``amp``, ``linalg``, ``special``), and ``Device`` (whose ``backend()`` builds the stack)
2. the op registry and catalog (``ember.ops``, ``backends/base.py``) and Dispatch
3. the decorators (``backends/autodiff``, ``backends/fusion``)
4. the backends (``backends/cube``, ``backends/flex``)
5. autotune
6. the kernel language and launches (``ember.cube``, ``cube/lang``, ``cube/launch``)
7. the runtimes (``ember.cube.runtime``): a runtime compiles on a pipeline-cache miss, so it
   calls the compilers, which sit below it
8. the IR and its compilers (``cube/ir.py``, ``cube/types.py``, ``cube/kernel_id.py``,
   ``cube/compiler``): pure IR -> source text
9. the environment: configuration and store, errors, tracing, dtypes, shapes, device kinds,
   the Philox stream (``ember.random``: values only, no tensors)

"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "ember"

#: module prefix -> layer (the longest matching prefix wins)
LAYERS = {
    "ember": 1, "ember.device": 1,
    "ember.ops": 2, "ember.backends": 2, "ember.backends.base": 2, "ember.backends.dispatch": 2,
    "ember.backends.autodiff": 3, "ember.backends.fusion": 3,
    "ember.backends.cube": 4, "ember.backends.flex": 4,
    "ember.autotune": 5,
    "ember.cube": 6,
    "ember.cube.runtime": 7,
    "ember.cube.ir": 8, "ember.cube.types": 8, "ember.cube.kernel_id": 8, "ember.cube.compiler": 8,
    "ember.environment": 9, "ember.errors": 9, "ember.tracing": 9, "ember.dtype": 9, "ember._shape": 9,
    "ember.device_kind": 9, "ember.precision": 9, "ember.random": 9,
}
#: the contracts a lower layer implements: the registry and catalog (the decorators and the
#: backends implement them) and Fusion's IR and hooks (the Cube backend's fusers take its blocks)
CONTRACT = ("ember.ops", "ember.backends.base", "ember.backends.fusion.ir", "ember.backends.fusion.hooks")


def layer(mod: str) -> int:
    best = ""
    for prefix in LAYERS:
        if (mod == prefix or mod.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return LAYERS[best]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports(mod: str) -> set[str]:
    """The ember modules ``mod`` imports (a ``from pkg import name`` of a submodule counts as
    that submodule)."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(mod, is_pkg, child.level, child.module)
                for a in child.names:
                    sub = f"{target}.{a.name}"
                    found.add(sub if sub in MODULES else target)
            visit(child)

    visit(tree)
    return {m for m in found if m in MODULES and m != mod}


GRAPH = {m: imports(m) for m in MODULES}


def _allowed(src: str, dst: str) -> bool:
    if dst == "ember" or src.startswith(dst + "."):  # a package's own __init__ (lazy attributes)
        return True
    ls, ld = layer(src), layer(dst)
    if ld >= ls:
        return True
    return ld in (2, 3) and ls in (3, 4) and any(dst == c or dst.startswith(c + ".") for c in CONTRACT)


def test_no_import_against_the_layer_order() -> None:
    bad = sorted(f"{s} (layer {layer(s)}) imports {d} (layer {layer(d)})"
                 for s, ds in GRAPH.items() for d in ds if not _allowed(s, d))
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(GRAPH[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    # a package and its own submodules (``pkg/__init__.py`` re-exporting ``pkg.x``) are one unit
    cycles = [c for c in _cycles() if not all(m.startswith(c[0] + ".") or m == c[0] for m in c)]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("mod", ["ember.backends.flex", "ember.ops.elementwise"])
def test_the_checker_sees_imports(mod: str) -> None:
    assert GRAPH[mod], f"no imports found for {mod}: the parser is broken"
