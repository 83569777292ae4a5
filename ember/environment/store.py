"""The persistent cache store: one SQLite database in the cache root, split into namespaces.

Namespaces are ``/``-separated paths; the ones in use are ``autotune/<ember version>/<device id>/<tuner>``,
``throughput/<ember version>/<probe id>`` and ``compile/<runtime>/<fingerprint>``. Values are bytes
(``put_json``/``get_json`` for JSON); files that must exist on disk to be used (compiled shared
objects) are *artifacts*: ``put_artifact`` writes them under ``<root>/artifacts/<namespace>/`` and
records their sha256 in the database.

Where the root is (``get_store()``): ``cache.root`` of the configuration -- ``user`` (default:
``platformdirs.user_cache_dir("ember")``), ``project`` (``.ember-cache/`` beside the outermost
``pyproject.toml`` above the working directory, else the user directory) or a path; the variable
``EMBER_CACHE_DIR`` overrides it. The database is ``<root>/ember.db`` (plus SQLite's ``-wal`` and
``-shm`` files).

This module is the store's API (``Store``'s operations, the process-wide store); its parts are
siblings: the row format and MACs (``store_format``), the database handle, its settings and
recovery (``store_db``: ``Store`` is a ``Database``), temporaries and the size cap
(``store_prune``). Trust: docs/security.md.

Invariants and the reasons for them:

* No pickle (nor marshal/shelve) anywhere: reading a cache must never be able to run code.
* Artifact files are written to a temporary file in their directory and ``os.replace``-d into
  place *while holding the database write lock*, and the row (relative path, sha256, size, meta)
  is committed in the same transaction; so file and row agree unless a writer is killed between
  the two. ``read_artifact`` reads the file once and checks those bytes against the row (MAC,
  size, sha256), which are the bytes the caller then loads (no hash-then-reopen window); a torn,
  stale or foreign file is never handed out (its entry is removed instead).
* The store never fails the operation that uses it (``store_db``): what cannot be recovered
  from is a miss.
* One ``Store`` may be shared by threads. Processes share the database file, never a
  connection: after ``fork`` the child drops the process-wide store (and never closes the
  parent's connection) and opens its own on first use.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import config
from .store_db import DB_NAME, Database, _write
from .store_format import (
    _EXT,
    _artifact_mac,
    _as_bytes,
    _check_key,
    _check_namespace,
    _entry_mac,
    _sha256,
    _verify,
    namespace,
)
from .store_prune import STALE_GRACE_S, clean_stale, evict, temp_name, total_size
from .trust import StoreWarning

__all__ = [
    "DB_NAME",
    "STALE_GRACE_S",
    "Store",
    "StoreWarning",
    "get_store",
    "compile_store",
    "close_store",
    "cache_root",
    "namespace",
    "clean_stale",
    "temp_name",
]

#: a load refreshes an artifact's ``used`` time only when it is older than this (a write per
#: kernel per warm start would cost more than the coarse order loses)
_USED_GRANULARITY_S = 3600.0


class Store(Database):
    """A namespaced key/value store with artifact files; see the module docstrings of ``store``
    and ``store_db`` for its guarantees.

    ``Store(root)`` opens (creating) ``<root>/ember.db``; ``Store(None)`` is an in-memory store.
    ``max_size``: bytes past which the least recently used artifacts are evicted (None: no cap).
    """

    def get(self, namespace: str, key: str) -> bytes | None:
        """The bytes stored under the key; None when absent or when its row does not verify."""
        _check_namespace(namespace)
        _check_key(key)

        def op(c: sqlite3.Connection) -> bytes | None:
            row = c.execute(
                "SELECT value, mac FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
            ).fetchone()
            if row is None or not isinstance(row[0], bytes):
                return None  # absent, or a value of another type: not a row ember wrote
            if not _verify(row[1], _entry_mac, namespace, key, row[0]):
                return None
            return row[0]

        return self._run(op, None)

    def put(self, namespace: str, key: str, value: bytes) -> None:
        """Store ``value`` under the key (replacing)."""
        _check_namespace(namespace)
        _check_key(key)
        data = _as_bytes(value)
        tag = _entry_mac(namespace, key, data)

        def op(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO entries (namespace, key, value, updated, mac) VALUES (?, ?, ?, ?, ?)",
                (namespace, key, data, time.time(), tag),
            )

        self._run(op, None)

    def get_json(self, namespace: str, key: str) -> Any | None:
        """The JSON value stored under the key; None when absent or not valid JSON (a cache miss)."""
        raw = self.get(namespace, key)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return None

    def put_json(self, namespace: str, key: str, value: Any) -> None:
        """Store ``value`` as JSON under the key."""
        data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        self.put(namespace, key, data)

    def delete(self, namespace: str, key: str) -> None:
        """Remove the entry (value and/or artifact, with its file)."""
        _check_namespace(namespace)
        _check_key(key)

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                row = c.execute(
                    "SELECT path FROM artifacts WHERE namespace = ? AND key = ?", (namespace, key)
                ).fetchone()
                c.execute("DELETE FROM entries WHERE namespace = ? AND key = ?", (namespace, key))
                c.execute("DELETE FROM artifacts WHERE namespace = ? AND key = ?", (namespace, key))
                if row is not None:
                    self._unlink(row[0])

        self._run(op, None)

    def namespaces(self) -> list[tuple[str, int]]:
        """``(namespace, entry count)`` for every namespace (values and artifacts), sorted."""

        def op(c: sqlite3.Connection) -> list[tuple[str, int]]:
            rows = c.execute(
                "SELECT namespace, SUM(n) FROM ("
                " SELECT namespace, COUNT(*) AS n FROM entries GROUP BY namespace"
                " UNION ALL SELECT namespace, COUNT(*) FROM artifacts GROUP BY namespace"
                ") GROUP BY namespace ORDER BY namespace"
            ).fetchall()
            return [(str(ns), int(n)) for ns, n in rows]

        return self._run(op, [])

    def entries(self, namespace: str) -> list[tuple[str, bytes]]:
        """``(key, value)`` of one namespace, sorted by key. An artifact's value is a JSON record
        ``{"artifact": path, "sha256": ..., "size": ..., "meta": {...}}``. Rows that do not
        verify are listed too, with ``"verified": false`` in an artifact's record."""
        _check_namespace(namespace)

        def op(c: sqlite3.Connection) -> list[tuple[str, bytes]]:
            out = [
                (str(k), v if isinstance(v, bytes) else str(v).encode())
                for k, v in c.execute("SELECT key, value FROM entries WHERE namespace = ?", (namespace,))
            ]
            for k, path, sha, size, meta, tag in c.execute(
                "SELECT key, path, sha256, size, meta, mac FROM artifacts WHERE namespace = ?", (namespace,)
            ):
                try:
                    meta_v = json.loads(meta)
                except (TypeError, ValueError):
                    meta_v = None
                record = {
                    "artifact": str(self._root / str(path)),
                    "sha256": sha,
                    "size": size,
                    "meta": meta_v,
                    "verified": _verify(tag, _artifact_mac, namespace, k, path, sha, size, meta),
                }
                out.append((str(k), json.dumps(record, sort_keys=True, default=str).encode()))
            out.sort(key=lambda kv: kv[0])
            return out

        return self._run(op, [])

    def clear(self, namespace: str | None = None) -> int:
        """Remove every entry (None) or those of a namespace and the namespaces below it
        (``clear("compile")`` clears ``compile/cpu/...``; ``clear("comp")`` does not). Returns the count."""
        prefix = None
        if namespace is not None:
            prefix = namespace.rstrip("/")
            _check_namespace(prefix)

        def op(c: sqlite3.Connection) -> int:
            with _write(c):
                if prefix is None:
                    n = c.execute("DELETE FROM entries").rowcount
                    n += c.execute("DELETE FROM artifacts").rowcount
                    # Inside the write transaction: no writer is between writing a file and committing it.
                    shutil.rmtree(self._root / "artifacts", ignore_errors=True)
                    return n
                where = "namespace = ? OR substr(namespace, 1, ?) = ?"
                args = (prefix, len(prefix) + 1, prefix + "/")
                paths = [p for (p,) in c.execute(f"SELECT path FROM artifacts WHERE {where}", args)]
                n = c.execute(f"DELETE FROM entries WHERE {where}", args).rowcount
                n += c.execute(f"DELETE FROM artifacts WHERE {where}", args).rowcount
                for p in paths:
                    self._unlink(p)
                shutil.rmtree(self._root / "artifacts" / prefix, ignore_errors=True)
                return n

        return self._run(op, 0)

    def put_artifact(self, namespace: str, key: str, data: bytes, meta: dict[str, Any]) -> Path | None:
        """Write ``data`` to ``<root>/artifacts/<namespace>/<sha256(key)>.<meta["ext"] or bin>``
        atomically, record it, and return the file's path (None: it could not be stored)."""
        _check_namespace(namespace)
        _check_key(key)
        content = _as_bytes(data)
        ext = str(meta.get("ext", "bin"))
        if not _EXT.fullmatch(ext):
            raise ValueError(f"invalid artifact extension {ext!r}")
        meta_json = json.dumps(meta, sort_keys=True)
        digest = _sha256(content)
        rel = Path("artifacts", *namespace.split("/"), f"{_sha256(key.encode())}.{ext}")
        tag = _artifact_mac(namespace, key, rel.as_posix(), digest, len(content), meta_json)

        def op(c: sqlite3.Connection) -> Path:
            # self._root is read here, not outside: after a fallback the retry writes to memory's dir.
            target = self._root / rel
            with _write(c):  # also keeps a concurrent clear() from removing the directory under us
                self._makedirs(target.parent)
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix="." + ext)
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(content)
                    os.replace(tmp, target)
                except BaseException:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass
                    raise
                now = time.time()
                c.execute(
                    "INSERT OR REPLACE INTO artifacts (namespace, key, path, sha256, size, meta, updated, used, mac)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (namespace, key, rel.as_posix(), digest, len(content), meta_json, now, now, tag),
                )
            return target

        path = self._run(op, None)
        if path is not None and self.max_size is not None:
            self._evict_if_needed()
        return path

    def get_artifact(self, namespace: str, key: str) -> tuple[Path, dict[str, Any]] | None:
        """``(path, meta)`` when the artifact's row verifies and its file's sha256 matches; else
        None. To load an artifact use ``read_artifact``: a path can be replaced between this
        check and its use; the bytes ``read_artifact`` returns cannot."""
        hit = self._lookup(namespace, key)
        return None if hit is None else (hit[0], hit[2])

    def read_artifact(self, namespace: str, key: str) -> tuple[bytes, dict[str, Any], Path] | None:
        """``(content, meta, path)`` of a verified artifact: its row's MAC holds under this user's
        key and ``content`` (read once, through one descriptor) has the row's size and sha256.
        None otherwise (a row that cannot be ours is dropped; a stale file of ours is removed)."""
        hit = self._lookup(namespace, key)
        return None if hit is None else (hit[1], hit[2], hit[0])

    def prune(self, max_size: int | None = None) -> tuple[int, int]:
        """Evict least recently used artifacts (with their files) until the store holds at most
        90% of ``max_size`` (default: this store's ``max_size``; None: no cap), and remove
        artifact files no row names and stale temporaries. Returns ``(removed, bytes freed)``."""
        limit = self.max_size if max_size is None else max_size

        def op(c: sqlite3.Connection) -> tuple[int, int]:
            with _write(c):
                return evict(c, self._root, limit, self._unlink)

        out = self._run(op, (0, 0))
        clean_stale(None if self.in_memory else self._root)
        return out

    def size(self) -> int:
        """Bytes the store holds (artifact files and values, as recorded)."""
        return self._run(total_size, 0)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.describe()})"

    def _lookup(self, namespace: str, key: str) -> tuple[Path, bytes, dict[str, Any]] | None:
        _check_namespace(namespace)
        _check_key(key)
        query = "SELECT path, sha256, size, meta, mac, used FROM artifacts WHERE namespace = ? AND key = ?"

        def check(c: sqlite3.Connection) -> tuple[Path, bytes, dict[str, Any]] | str | None:
            """The hit; None: no row; "corrupt": a row ember cannot have written; "stale": its file
            does not match (maybe a writer replaced it after our read: re-checked under the lock)."""
            row = c.execute(query, (namespace, key)).fetchone()
            if row is None:
                return None
            rel, sha, size, meta, tag, used = row
            if not _verify(tag, _artifact_mac, namespace, key, rel, sha, size, meta):
                return "corrupt"
            path = self._safe_path(rel)
            if path is None:
                return "corrupt"
            try:
                meta_v = json.loads(meta)
            except (TypeError, ValueError):
                return "corrupt"
            if not isinstance(meta_v, dict):
                return "corrupt"
            data = _read_nofollow(path)
            if data is None or len(data) != size or _sha256(data) != sha:
                return "stale"
            if isinstance(used, (int, float)) and time.time() - used > _USED_GRANULARITY_S:
                try:
                    c.execute(
                        "UPDATE artifacts SET used = ? WHERE namespace = ? AND key = ?", (time.time(), namespace, key)
                    )
                except sqlite3.OperationalError:  # busy or read-only: the order is only coarser
                    pass
            return path, data, meta_v

        def op(c: sqlite3.Connection) -> tuple[Path, bytes, dict[str, Any]] | None:
            found = check(c)
            if not isinstance(found, str):
                return found
            with _write(c):  # no writer can be between its file replace and its commit now
                found = check(c)
                if not isinstance(found, str):
                    return found
                if found == "stale":  # our own row: its file is torn or replaced; remove both
                    row = c.execute(query, (namespace, key)).fetchone()
                    self._unlink(row[0])
                # "corrupt": not our row; drop it, and touch no file it names
                c.execute("DELETE FROM artifacts WHERE namespace = ? AND key = ?", (namespace, key))
            return None

        return self._run(op, None)

    def _evict_if_needed(self) -> None:
        limit = self.max_size
        if limit is None:
            return
        if self.size() > limit:
            self.prune(limit)


def _read_nofollow(path: Path) -> bytes | None:
    """The bytes of the regular file ``path`` (its last component not a symlink), read through one
    descriptor; None where it is missing or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks = []
        while True:
            b = os.read(fd, max(st.st_size + 1, 1 << 16))
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)




def cache_root() -> Path:
    """The directory the configuration names for the store (``cache.root`` / ``EMBER_CACHE_DIR``)."""
    value = config.get("cache.root")
    if value == "project":
        d = config.project_dir()
        if d is not None:
            return d / ".ember-cache"
        value = "user"  # no project around: same fallback as the seed's stack
    if value == "user":
        import platformdirs  # imported here: only the default root needs it

        return Path(platformdirs.user_cache_dir("ember", appauthor=False))
    return Path(value)


_store: Store | None = None
_store_generation = -1  # config generation _store was checked against
_store_lock = threading.Lock()
_abandoned: list[Store] = []  # inherited across fork: kept alive, never closed (see module doc)


def get_store() -> Store:
    """The process-wide store, opened on first use; reopened when ``cache.root`` changed after
    ``config.reload()``. Thread-safe."""
    global _store, _store_generation
    s = _store
    if s is not None and _store_generation == config.generation():
        return s
    with _store_lock:
        root = cache_root()  # loads the configuration if needed
        gen = config.generation()
        max_size = config.get("cache.max_size") or None
        if _store is None or _store.requested_root != root.expanduser().absolute():
            # The previous store is dropped, not closed: another thread may still be using it;
            # its connection closes when the last reference goes.
            _store = Store(root, max_size)
            _clean_once(_store)
        _store.max_size = max_size
        _store_generation = gen
        return _store


def compile_store() -> Store | None:
    """The store compiled kernels and toolchain probes are kept in: ``get_store()``, or None
    when ``compilation.cache`` is off (a configuration that cannot be read leaves it on)."""
    try:
        if not config.get("compilation.cache"):
            return None
    except Exception:  # noqa: BLE001 - the cache is an optimisation: a bad config must not stop a compile
        pass
    return get_store()


_cleaned: set[str] = set()  # roots clean_stale ran for in this process


def _clean_once(st: Store) -> None:
    """``clean_stale`` at the first open of a root in this process, at most hourly per root (a
    stamp file's mtime says when it last ran): a warm start pays one stat."""
    root = None if st.in_memory else st.root
    tag = str(root)
    if tag in _cleaned:
        return
    _cleaned.add(tag)
    stamp = (root or Path(tempfile.gettempdir())) / (".ember-cleaned" if root is None else ".cleaned")
    try:
        if time.time() - os.stat(stamp).st_mtime < STALE_GRACE_S:
            return
    except OSError:
        pass
    try:
        clean_stale(root)
        if root is not None:
            fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            os.close(fd)
            os.utime(stamp)
    except OSError:
        pass


def close_store() -> None:
    """Close and forget the process-wide store (the next ``get_store()`` opens it again)."""
    global _store
    with _store_lock:
        if _store is not None:
            _store.close()
            _store = None


def _after_fork_in_child() -> None:
    global _store, _store_lock
    if _store is not None:
        _abandoned.append(_store)
        _store = None
    _store_lock = threading.Lock()  # the parent's lock may have been held by a thread that is gone


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(close_store)
