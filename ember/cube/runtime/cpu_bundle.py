"""Bundles: several rendered CPU kernels compiled by one ``cc`` run into one shared object.

A kernel's C source is the shared prelude, a few file-scope declarations of its own (vector
typedefs, vector-math helpers) and its entry function. Most of one ``cc`` run's time for a small
kernel is fixed cost (the driver, the front end on the prelude and headers, the assembler, the
link): one translation unit holding many kernels pays it once. ``merge`` builds that unit:
the prelude once, each distinct declaration once, every entry function.

Caching stays per kernel (docs/security.md, "Bundles"): the bundle's shared object is one
artifact under its own key (``bundle_key``: a digest of its members' artifact keys), and each
member's artifact key gets an authenticated row in ``<artifacts>/bundled`` naming the bundle
and the member's entry and source. ``read`` finds a kernel either way: its own artifact, or its
row and then the bundle's artifact, whose bytes the store checks as every artifact's.

Numerics: kernels compiled together run the same code as compiled alone. The flags are the
same; GCC keeps IEEE semantics at every optimisation decision it makes across functions
(inlining of the always-inline helpers, cloning) without -ffast-math, and contraction is off
(``-ffp-contract=off``), so a kernel's results do not depend on the kernels beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from ..compiler.base import CompiledSource

__all__ = ["MAX_MEMBERS", "bundle_key", "members_namespace", "merge", "read", "record"]

#: the most kernels one bundle holds: a member's compile error makes the whole bundle fall back
#: to one compile per kernel, and a waiter needs its whole bundle compiled
MAX_MEMBERS = 24

#: lines a member's file-scope declarations may not hold: they would change the meaning of the
#: members after it (macros) or are per-object state (checked mode's statics)
_UNSAFE = ("#define", "#undef", "#include", "#pragma", "static ")


def _split(src: CompiledSource, prelude: str) -> tuple[list[str], str] | None:
    """(declaration items, entry function) of one rendered kernel; None where its source is not
    the renderer's usual shape (prelude once, declarations, then ``void <entry>(``), so it is
    compiled alone."""
    text = src.source
    if text.count(prelude) != 1:
        return None
    start = text.index(prelude) + len(prelude)
    head = f"\nvoid {src.entry}(void **buffers"
    at = text.find(head, start)
    if at < 0 or text.find(head, at + 1) >= 0:
        return None
    body = text[at + 1:]
    if any(ln.lstrip().startswith(("#define", "#undef", "#include")) for ln in body.splitlines()):
        return None
    items: list[str] = []
    block: list[str] = []
    depth = 0
    for ln in text[start:at].splitlines():
        s = ln.strip()
        if not s:
            continue
        if s.startswith(_UNSAFE):
            return None
        if s.startswith("#if"):
            depth += 1
        if depth:
            block.append(ln)
            if s.startswith("#endif"):
                depth -= 1
                if not depth:
                    items.append("\n".join(block))
                    block = []
            continue
        if s.startswith("#"):  # an #else/#endif outside a block: not a shape made here
            return None
        items.append(ln)
    if depth:
        return None
    return items, body


def merge(sources: list[CompiledSource]) -> str | None:
    """One translation unit defining every kernel of ``sources``: the prelude once, each distinct
    declaration item once (an identical item twice would be a redefinition), the entry functions
    in order. None when a source is not of the renderer's shape. Two members declaring one name
    differently make a unit the compiler rejects; the caller then compiles them one by one."""
    from ..compiler.c_prelude import PRELUDE

    prelude = PRELUDE.strip("\n")
    seen: set[str] = set()
    decls: list[str] = []
    bodies: list[str] = []
    entries: set[str] = set()
    for src in sources:
        part = _split(src, prelude)
        if part is None or src.entry in entries:
            return None
        entries.add(src.entry)
        for item in part[0]:
            if item not in seen:
                seen.add(item)
                decls.append(item)
        bodies.append(f"/* {src.entry} */\n{part[1]}")
    names = ", ".join(s.entry for s in sources)
    return "\n".join([f"/* ember cube kernel bundle: {names} */", prelude, *decls, "", *bodies])


def bundle_key(member_keys: list[str]) -> str:
    """The bundle artifact's key: a digest of its members' artifact keys (each of which names
    its source and the toolchain), in order."""
    import hashlib

    h = hashlib.sha256(b"ember cpu bundle\0")
    for k in member_keys:
        h.update(k.encode())
        h.update(b"\0")
    return "bundle-" + h.hexdigest()


def members_namespace(artifacts: str) -> str:
    """Where the member rows of the bundles under artifact namespace ``artifacts`` live."""
    return f"{artifacts}/bundled"


def record(store: Any, artifacts: str, key: str, member_keys: list[str], sources: list[CompiledSource],
           kernel_ids: list[str], so: bytes, meta: dict[str, Any]) -> None:
    """Store bundle ``so`` under ``key`` and one row per member (its artifact key -> the bundle,
    its entry, source and KernelId). The bundle is written first: a member row never names a
    bundle that was not stored (a lookup of a row whose bundle is gone is a miss anyway)."""
    meta = dict(meta, ext="so", entries=[s.entry for s in sources], bundle=True)
    if store.put_artifact(artifacts, key, so, meta) is None:
        return
    ns = members_namespace(artifacts)
    for mk, src, kid in zip(member_keys, sources, kernel_ids):
        store.put_json(ns, mk, {"bundle": key, "entry": src.entry, "source": src.source, "kernel_id": kid})


def read(store: Any, artifacts: str, key: str, loaded: dict[str, Any] | None = None,
         ) -> tuple[bytes | None, dict[str, Any], Path, str | None] | None:
    """(verified shared object, meta, cache file, bundle key or None) of the kernel whose artifact
    key is ``key``: its own artifact, else the bundle its authenticated member row names, when
    that bundle's verified meta lists the row's entry. ``meta`` carries the member's
    ``source`` and ``entry`` either way. ``loaded``: bundles this process has loaded already
    (bundle key -> an object with ``entries`` and ``path``, made from bytes verified then): a
    member of one of them comes back with no bytes (None), its bundle not read again."""
    hit = store.read_artifact(artifacts, key)
    if hit is not None:
        return hit[0], hit[1], hit[2], None
    row = member(store, artifacts, key)
    if row is None:
        return None
    have = loaded.get(row["bundle"]) if loaded else None
    if have is not None:
        if row["entry"] not in have.entries:
            return None
        return None, {"source": row["source"], "entry": row["entry"]}, have.path, row["bundle"]
    found = store.read_artifact(artifacts, row["bundle"])
    if found is None or row["entry"] not in (found[1].get("entries") or ()):
        return None
    return found[0], dict(found[1], source=row["source"], entry=row["entry"]), found[2], row["bundle"]


def member(store: Any, artifacts: str, key: str) -> dict[str, str] | None:
    """The member row of artifact key ``key`` (``bundle``, ``entry``, ``source``), when it is
    well formed; None otherwise."""
    row = store.get_json(members_namespace(artifacts), key)
    if not isinstance(row, dict):
        return None
    if not all(isinstance(row.get(f), str) for f in ("bundle", "entry", "source")):
        return None
    if not row["bundle"].startswith("bundle-"):
        return None
    return row
