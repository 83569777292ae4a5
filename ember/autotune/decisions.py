"""Persistent autotune decisions: ``autotune/<ember version>/<device id>/<set name>`` in the store.

One entry per key (its text, ``level=...`` first so a decision tuned at one level is not served
to another): a JSON object with the winner, the best own candidate, every candidate's timing
(median, min, samples) or why it was not timed, the roofline bound and the limit that applied,
the checksum of the tunable set, and how trustworthy the measurement was: the machine's load
average and usable cores while it tuned, the spread of the deciding samples, and ``provisional``.
``ember cache show autotune`` prints these as a table.

Provisional decisions. Timings taken while other work shares the cores (load average above the
usable cores) or whose repeats disagree (``NOISY_SPREAD``) can crown the wrong candidate, and a
stored decision is otherwise reused for ever. Such a decision is stored ``provisional``; a
decision stored before the load was recorded counts as one. A process that starts on a quiet
machine (``quiet()``: judged once, at its first stored-decision lookup) does not reuse a
provisional decision: the key tunes again at its first use, as a new key would, and the new
record replaces it. The point is deterministic: within one process a key's decision never
changes, so results stay a function of the inputs and the decisions the process started with
(``autotune.retune_provisional`` off: provisional decisions are reused like any other).
"""

from __future__ import annotations

import os
from typing import Any

from . import keys

__all__ = ["namespace", "entry_key", "load", "save", "all_decisions", "quiet", "usable_cores", "NOISY_SPREAD"]

#: the deciding candidates' slowest sample over their fastest above this: the timing was noisy
NOISY_SPREAD = 1.5
#: this process's verdict (``quiet``), judged once
_quiet: list[bool] = []


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def quiet() -> bool:
    """Whether this process started on a quiet machine: the load average at its first
    stored-decision lookup was at most the usable cores (no load average: quiet). Judged once
    per process, so a key's decision never changes within it."""
    if not _quiet:
        la = load_average()
        _quiet.append(la is None or la <= usable_cores())
    return _quiet[0]


def provisional(value: dict[str, Any]) -> bool:
    """Whether a stored record is provisional (records without a load predate the field)."""
    return "load" not in value or bool(value.get("provisional"))


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
    elif provisional(value) and _retune():
        load = value.get("load")
        why = (f"provisional (tuned at load {load:.2f} on {value.get('cores')} cores, spread "
               f"{value.get('spread')}), and this process started on a quiet machine: tuned again"
               if isinstance(load, (int, float)) else "tuned before decisions recorded the load: tuned again")
    if why is not None:
        if log.enabled("autotune"):
            log.logger("autotune").debug("%s %s: stored decision ignored: %s", tset.name, tset.key_text(key), why)
        return None
    if log.enabled("autotune"):
        log.logger("autotune").debug(
            "%s %s: winner %s loaded from the store", tset.name, tset.key_text(key), value.get("winner")
        )
    return w


def _retune() -> bool:
    from ..environment import config

    return bool(config.get("autotune.retune_provisional")) and quiet()


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
