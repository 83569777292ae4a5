"""``ember config`` and ``ember cache list|show|clear``; the CLI calls ``config_main`` / ``cache_main``.

Both take the arguments after the command name and return an exit status (0 ok, 1 nothing found,
2 usage error); they print to the current ``sys.stdout`` and never call ``sys.exit``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from . import config
from .store import Store, cache_root, get_store

__all__ = ["config_main", "cache_main", "format_table", "format_seconds"]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned on the widest cell; the last column is not padded (no trailing blanks)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [list(headers), *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_seconds(s: float | None) -> str:
    """``1.5e-3`` -> ``1.50 ms``; None / NaN -> ``-``."""
    if s is None or not isinstance(s, (int, float)) or math.isnan(s):
        return "-"
    if math.isinf(s):
        return "inf"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _fmt_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v == "":
        return '""'
    return str(v)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    try:
        return parser.parse_args(list(argv))
    except SystemExit as e:  # --help (0) or a usage error (2): report it, don't exit the caller
        return e.code if isinstance(e.code, int) else 2


def config_main(argv: Sequence[str]) -> int:
    """``ember config``: the effective configuration, one key a line, with where each value came from."""
    parser = argparse.ArgumentParser(
        prog="ember config",
        description="Print ember's effective configuration: key, value and origin "
        "(default, a config file, env:VARIABLE).",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    args = _parse(parser, argv)
    if isinstance(args, int):
        return args
    eff = config.effective()
    if args.json:
        print(json.dumps([{"key": k, "value": v, "origin": o} for k, v, o in eff], indent=2))
        return 0
    print(format_table(("key", "value", "origin"), [(k, _fmt_value(v), o) for k, v, o in eff]))
    used = config.files()
    print()
    print("config files: " + (", ".join(str(p) for p in used) if used else "none found"))
    for path, key, why in config.ignored():
        print(f"ignored:      {key} from {path} (the file is {why})")
    print(f"cache root:   {cache_root()}")
    return 0


def cache_main(argv: Sequence[str]) -> int:
    """``ember cache list | show <namespace> | clear [namespace] | prune [--max-size SIZE]``."""
    parser = argparse.ArgumentParser(prog="ember cache", description="Inspect or clear ember's cache store.")
    sub = parser.add_subparsers(dest="cmd", metavar="{list,show,clear,prune}")
    sub.add_parser("list", help="namespaces with their entry counts, and where the store is")
    show = sub.add_parser("show", help="entries of the namespaces under a prefix")
    show.add_argument("namespace", help="namespace or prefix, e.g. autotune or compile/cpu")
    clear = sub.add_parser("clear", help="remove entries (all, or those under a namespace prefix)")
    clear.add_argument("namespace", nargs="?", help="namespace prefix; omitted: everything")
    prune = sub.add_parser(
        "prune", help="evict least recently used artifacts down to cache.max_size; remove orphans and stale temporaries"
    )
    prune.add_argument("--max-size", help="size to prune to (bytes, or 512M / 5G); default: cache.max_size")
    args = _parse(parser, argv)
    if isinstance(args, int):
        return args
    store = get_store()
    if args.cmd == "prune":
        try:
            limit = config.parse_size(args.max_size) if args.max_size else config.get("cache.max_size")
        except ValueError as e:
            print(f"ember cache prune: {e}", file=sys.stderr)
            return 2
        before = store.size()
        n, freed = store.prune(limit)
        print(f"pruned {n} file{'' if n == 1 else 's'} ({freed} bytes) in {store.describe()}: "
              f"{before} -> {store.size()} bytes (limit {limit})")
        return 0
    if args.cmd in (None, "list"):
        return _list(store)
    if args.cmd == "show":
        return _show(store, args.namespace)
    try:
        n = store.clear(args.namespace)
    except ValueError as e:
        print(f"ember cache clear: {e}", file=sys.stderr)
        return 2
    where = f" under {args.namespace}" if args.namespace else ""
    print(f"cleared {n} entr{'y' if n == 1 else 'ies'}{where} in {store.describe()}")
    return 0


def _list(store: Store) -> int:
    print(f"store: {store.describe()}")
    spaces = store.namespaces()
    if not spaces:
        print("(empty)")
        return 0
    print(format_table(("namespace", "entries"), [(ns, str(n)) for ns, n in spaces]))
    return 0


def _matching(store: Store, prefix: str) -> list[tuple[str, int]]:
    p = prefix.rstrip("/")
    return [(ns, n) for ns, n in store.namespaces() if ns == p or ns.startswith(p + "/")]


def _show(store: Store, prefix: str) -> int:
    spaces = _matching(store, prefix)
    if not spaces:
        print(f"ember cache show: no namespace under {prefix!r} in {store.describe()}", file=sys.stderr)
        return 1
    for i, (ns, n) in enumerate(spaces):
        if i:
            print()
        print(f"== {ns} ({n} entr{'y' if n == 1 else 'ies'})")
        entries = store.entries(ns)
        decisions: list[tuple[str, dict[str, Any]]] = []
        for key, raw in entries:
            value = _decode(raw)
            if ns.split("/")[0] == "autotune" and _is_decision(value):
                decisions.append((key, value))
                continue
            print(f"{key}:")
            print(_indent(_render(raw, value)))
        if decisions:
            print(_decision_table(decisions))
    return 0


_NOT_JSON = object()


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return _NOT_JSON


def _render(raw: bytes, value: Any) -> str:
    if value is not _NOT_JSON:
        return json.dumps(value, indent=2, sort_keys=True)
    try:
        text = raw.decode("utf-8")
        if all(c.isprintable() or c in "\n\t" for c in text):
            return text
    except UnicodeDecodeError:
        pass
    preview = raw[:32].hex(" ")
    return f"<{len(raw)} bytes> {preview}{' ...' if len(raw) > 32 else ''}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _is_decision(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("candidates"), list)


def _fmt_bound(bound: Any) -> str:
    if bound is None:
        return "-"
    if isinstance(bound, (int, float)) and not isinstance(bound, bool):
        return format_seconds(bound)
    return json.dumps(bound, sort_keys=True, separators=(",", ":"))


def _decision_table(decisions: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per candidate, fastest first; the key, bound and winner on the key's first row.
    Vendor candidates are marked ``(vendor)``, the best own one ``(own best)`` where a vendor
    won, untimed ones say why (``- (priority)``)."""
    rows: list[tuple[str, str, str, str, str]] = []
    for key, d in decisions:
        winner = d.get("winner")
        if isinstance(winner, dict):
            winner = winner.get("name")
        cands = [c for c in d["candidates"] if isinstance(c, dict)]

        def order(c: dict[str, Any]) -> float:
            m = c.get("median_s")
            return m if isinstance(m, (int, float)) and not math.isnan(m) else math.inf

        cands.sort(key=order)
        first = True
        for c in cands or [{}]:
            median = c.get("median_s")
            cell = format_seconds(median) if median is not None else ("failed" if c.get("error") else "-")
            name = str(c.get("name", "-"))
            if c.get("vendor"):
                name += " (vendor)"
            if winner is not None and c.get("name") == winner:
                name += " *"
            elif c.get("name") == d.get("own_best"):  # the winner is a vendor routine
                name += " (own best)"
            if median is None and c.get("skipped"):
                cell = f"- ({c['skipped']})"
            rows.append(
                (
                    key if first else "",
                    name,
                    cell,
                    _fmt_bound(d.get("bound")) if first else "",
                    str(winner if winner is not None else "-") if first else "",
                )
            )
            first = False
    return format_table(("key", "candidate", "median", "bound", "winner"), rows)
