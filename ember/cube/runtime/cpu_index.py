"""KernelId -> stored shared object, so a warm process loads ember's kernels without rendering.

The CPU runtime's artifacts are keyed by the rendered C source (``cpu.CToolchain.artifact_key``):
finding one that way needs the kernel expanded to IR and rendered first, tens of milliseconds
per kernel in a new process. This index maps the KernelId text to that key plus what a launch
needs from the rendering (entry, info layout, buffer order).

The KernelId names the kernel function's own source, not the ``@cube.function`` helpers it
inlines nor the compiler that renders it, so the index namespace names every ember source file
(path, size, mtime): any edit of ember moves to a fresh index. Only kernels defined in ember are
indexed; a user's kernel may inline helpers from anywhere, and is always rendered.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compiler.base import CompiledSource
    from ..kernel_id import KernelId

__all__ = ["lookup", "record", "tree_digest"]

_tree: list[str] = []


def tree_digest() -> str:
    """crc32 of (path, size, mtime) of every source file of the ember package (once per process)."""
    if not _tree:
        root = Path(__file__).resolve().parents[3]  # the directory holding the ember package
        parts = []
        for d, dirs, files in os.walk(root / "ember"):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(d, f)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    parts.append(f"{os.path.relpath(path, root)}|{st.st_size}|{st.st_mtime_ns}")
        _tree.append(f"{zlib.crc32(chr(10).join(parts).encode()):08x}")
    return _tree[0]


def _namespace(artifacts: str) -> str:
    return f"{artifacts}/index-{tree_digest()}"


def lookup(
    store: Any, artifacts: str, kid: KernelId, language: str, loaded: dict[str, Any] | None = None
) -> tuple[bytes | None, CompiledSource, Path, str | None, dict[str, Any]] | None:
    """The verified shared object, rendering facts, cache file, bundle key (None: the kernel's
    own artifact) and artifact meta of an ember kernel held under the artifact namespace ``artifacts``,
    found by its KernelId alone; None where it must be rendered. A kernel compiled in a bundle
    is found through its member row (``cpu_bundle.read``; ``loaded`` as there: no bytes for a
    member of a bundle this process has loaded). The index row is authenticated by the store (a
    tampered info layout or buffer order is a miss, then a recompile) and checked for shape here."""
    if store is None or not kid.kernel.startswith("ember."):
        return None
    rec = store.get_json(_namespace(artifacts), kid.text())
    if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or not isinstance(rec.get("entry"), str):
        return None
    from ..compiler.base import CompiledSource, InfoSlot
    from ..types import ELEMS

    try:
        info = [InfoSlot(str(k), int(i), int(d), ELEMS[e] if e else None) for k, i, d, e in rec["info"]]
        buffers = [int(b) for b in rec["buffers"]]
    except (KeyError, ValueError, TypeError):
        return None
    from . import cpu_bundle

    hit = cpu_bundle.read(store, artifacts, rec["key"], loaded)
    if hit is None or (hit[3] is not None and hit[1].get("entry") != rec["entry"]):
        return None
    src = CompiledSource(rec["entry"], str(hit[1].get("source", "")), language, info, buffers, {})
    return hit[0], src, hit[2], hit[3], hit[1]


def record(store: Any, artifacts: str, kid: KernelId, src: CompiledSource, key: str) -> None:
    """Remember that ``kid`` renders to ``src``, stored under artifact ``key`` (ember kernels)."""
    if store is None or not kid.kernel.startswith("ember."):
        return
    info = [[x.kind, x.param, x.dim, x.elem.name if x.elem is not None else ""] for x in src.info]
    store.put_json(
        _namespace(artifacts), kid.text(), {"key": key, "entry": src.entry, "info": info, "buffers": src.buffers}
    )
