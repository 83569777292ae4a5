"""Persistent autotune decisions: ``autotune/<ember version>/<device id>/<set name>`` in the store.

One entry per key (its text, ``level=...`` first so a decision tuned at one level is not served
to another): a JSON object with the winner, the best own candidate, every candidate's timing
(median, min, samples) or why it was not timed, the roofline bound and the limit that applied,
and the checksum of the tunable set. ``ember cache show autotune`` prints these as a table.
"""

from __future__ import annotations

from typing import Any

from . import keys

__all__ = ["namespace", "entry_key", "load", "save", "all_decisions"]


def namespace(device: str, set_name: str) -> str:
    from ..environment.store import namespace as ns
    from ..environment.version import ember_version

    return ns("autotune", ember_version(), device, set_name)


def entry_key(tset: Any, level_name: str, key: tuple[Any, ...]) -> str:
    return f"level={level_name}," + tset.key_text(key)


def load(device: str, tset: Any, lvl: keys.Level, key: tuple[Any, ...], args: tuple[Any, ...]) -> Any | None:
    """The stored winner (a Tunable of ``tset``), or None when there is none or it cannot be used:
    another tunable set (checksum), a winner no longer in the set, or one invalid for ``args``."""
    from ..environment import log
    from ..environment.store import get_store

    value = get_store().get_json(namespace(device, tset.name), entry_key(tset, lvl.name, key))
    if not isinstance(value, dict):
        return None
    why = None
    w = tset.by_name(value.get("winner", ""))
    if value.get("checksum") != tset.checksum:
        why = f"the tunable set changed (checksum {value.get('checksum')} -> {tset.checksum})"
    elif w is None:
        why = f"winner {value.get('winner')!r} is not a candidate"
    elif w.valid is not None and not w.valid(*args):
        why = f"winner {w.name!r} cannot run these arguments"
    if why is not None:
        if log.enabled("autotune"):
            log.logger("autotune").debug("%s %s: stored decision ignored: %s", tset.name, tset.key_text(key), why)
        return None
    if log.enabled("autotune"):
        log.logger("autotune").debug(
            "%s %s: winner %s loaded from the store", tset.name, tset.key_text(key), value.get("winner")
        )
    return w


def save(device: str, tset: Any, key: tuple[Any, ...], record: dict[str, Any]) -> None:
    from ..environment.store import get_store

    record = dict(record, device=device)
    get_store().put_json(namespace(device, tset.name), entry_key(tset, record["level"], key), record)


def all_decisions(device: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, key, decision) of every stored decision of this ember version (one device or all)."""
    import json

    from ..environment.store import get_store
    from ..environment.version import ember_version

    st = get_store()
    prefix = f"autotune/{ember_version()}/"
    out = []
    for ns, _ in st.namespaces():
        if not ns.startswith(prefix):
            continue
        if device is not None and not ns.startswith(namespace(device, "")):
            continue
        for k, raw in st.entries(ns):
            try:
                v = json.loads(raw)
            except ValueError:
                continue
            if isinstance(v, dict):
                out.append((ns, k, v))
    return out
