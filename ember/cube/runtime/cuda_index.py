"""KernelId -> stored cubin, so a warm process launches without expanding or rendering a kernel.

The cubin store is keyed by the rendered source (``cuda_nvrtc``): finding a cubin that way
needs the kernel expanded to IR and rendered first (tens of milliseconds per kernel in a new
process, most of a warm start). This index maps the KernelId text to that key plus what a
launch needs from the rendering (entry, info layout, buffer order), under a namespace that
also names a digest of the kernel language and compiler sources: any change to how kernels
expand or render moves to a fresh index (the cubins themselves stay keyed by source).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..compiler.base import CompiledSource, InfoSlot
from ..types import ELEMS

__all__ = ["CubinIndex", "code_digest"]

_digest: str | None = None


def code_digest() -> str:
    """sha256 prefix of the kernel language, compiler and KernelId sources (once per process)."""
    global _digest
    if _digest is None:
        root = Path(__file__).resolve().parents[1]  # ember/cube
        h = hashlib.sha256()
        files = sorted(root.glob("lang/*.py")) + sorted(root.glob("compiler/*.py"))
        files += [root / "kernel_id.py", root / "types.py", root / "ir.py", root / "launch.py"]
        for f in files:
            try:
                h.update(f.name.encode())
                h.update(f.read_bytes())
            except OSError:
                h.update(b"?")
        _digest = h.hexdigest()[:16]
    return _digest


class CubinIndex:
    """``lookup(kid)`` -> (cubin, CompiledSource) or None; ``record(kid, src, key)``."""

    def __init__(self, store: Any, artifact_ns: str) -> None:
        self.store = store
        self.artifact_ns = artifact_ns
        self.ns = f"{artifact_ns}/index-{code_digest()}"

    def lookup(self, kid: Any) -> tuple[bytes, CompiledSource] | None:
        """The verified cubin and rendering facts of ``kid``; None where it must be rendered. The
        index row is authenticated by the store (tampered: a miss) and checked for shape here."""
        if self.store is None:
            return None
        rec = self.store.get_json(self.ns, kid.text())
        if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or not isinstance(rec.get("entry"), str):
            return None
        try:
            info = [InfoSlot(str(k), int(p), int(d), ELEMS[e] if e else None) for k, p, d, e in rec["info"]]
            buffers = [int(b) for b in rec["buffers"]]
        except (KeyError, ValueError, TypeError):
            return None
        hit = self.store.read_artifact(self.artifact_ns, rec["key"])
        if hit is None:
            return None
        cubin, meta, _path = hit
        return cubin, CompiledSource(rec["entry"], str(meta.get("source", "")), "cuda", info, buffers, {})

    def record(self, kid: Any, src: CompiledSource, key: str) -> None:
        if self.store is None:
            return
        info = [[s.kind, s.param, s.dim, s.elem.name if s.elem is not None else ""] for s in src.info]
        self.store.put_json(self.ns, kid.text(), {"key": key, "entry": src.entry, "info": info, "buffers": src.buffers})
