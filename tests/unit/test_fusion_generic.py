"""The Fusion layer is generic (``backends/fusion/hooks.py``): it imports nothing of the Cube
backend, the kernel language or the runtimes, and Dispatch's build hands a fused Cube device
its fusers and drain capturer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ember
from ember import Device

FUSION = Path(ember.__file__).parent / "backends" / "fusion"
#: what the Fusion package may not import (absolute module names)
FORBIDDEN = ("ember.cube", "ember.backends.cube", "ember.autotune")


def _imports(path: Path) -> list[str]:
    """The absolute names of the modules ``path`` imports, its relative imports resolved (also
    those inside functions)."""
    package = ["ember", "backends", "fusion"]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append(mod)
            if not node.module:  # ``from .. import x``: x may be a module
                out.extend(f"{mod}.{a.name}" for a in node.names)
    return out


def test_the_fusion_package_imports_no_backend_kernel_language_or_runtime() -> None:
    files = sorted(FUSION.glob("*.py"))
    assert len(files) >= 8
    bad = [(f.name, m) for f in files for m in _imports(f) if m.startswith(FORBIDDEN)]
    assert bad == []


def test_the_import_check_resolves_relative_imports() -> None:
    # the check itself: the fusion modules' relative imports resolve to ember's packages
    names = _imports(FUSION / "stream.py")
    assert "ember.tracing" in names and "ember.backends.fusion.drain_replay" in names


def test_using_the_fusion_layer_over_flex_loads_no_cube_module() -> None:
    code = (
        "import sys, ember\n"
        "from ember import Device\n"
        "x = ember.tensor([1.0, 2.0], device=Device.lazy_flex())\n"
        "assert (x * 2 + 1).tolist() == [3.0, 5.0]\n"
        "print([m for m in sys.modules if m.startswith(('ember.cube', 'ember.backends.cube'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_dispatch_composes_a_fused_cube_device() -> None:
    from ember.backends.cube.drain_capturer import CubeDrainCapturer
    from ember.backends.fusion import Fusion

    f = Device.cpu().backend().inner
    assert isinstance(f, Fusion)
    assert [x.name for x in f.fusers] == ["elementwise", "matmul_epilogue", "reduce_prologue", "horizontal", "flat_cat"]
    assert f.replayable == (type(f.capturer) is CubeDrainCapturer)
    assert not isinstance(Device.cpu(fusion=False).backend().inner, Fusion)
