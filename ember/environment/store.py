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

Invariants and the reasons for them:

* No pickle (nor marshal/shelve) anywhere: reading a cache must never be able to run code.
* Journal mode WAL, ``synchronous=NORMAL``, a long ``busy_timeout``: readers never wait for
  writers; writers queue instead of failing. Every write is one short transaction, and the ones
  with several statements start with ``BEGIN IMMEDIATE`` (taking the write lock first), so no
  transaction ever has to upgrade a read lock (which SQLite refuses immediately, busy handler or
  not). A killed writer loses only its own uncommitted transaction: WAL frames without a commit
  record are ignored by the next reader.
* Artifact files are written to a temporary file in their directory and ``os.replace``-d into
  place *while holding the database write lock*, and the row (relative path, sha256, size, meta)
  is committed in the same transaction; so file and row agree unless a writer is killed between
  the two, and ``get_artifact`` hashes the file before returning it, so a torn, stale or foreign
  file is never handed out (its entry is removed instead).
* Failure is never fatal: a corrupt database is moved aside (``ember.db.corrupt-<timestamp>``)
  and rebuilt; a directory where nothing can be written (read-only, not a directory, disk full)
  makes the store fall back to an in-memory database with artifacts in a private temporary
  directory. Each event emits exactly one ``StoreWarning``; the failed operation is retried on
  the new database, so the caller sees a cache miss, not an error.
* One ``Store`` may be shared by threads (a lock serialises its connection). Processes share the
  database file, never a connection: after ``fork`` the child drops the process-wide store (and
  never closes the parent's connection) and opens its own on first use.

Testing the read-only fallback as root: root ignores permission bits, so ``chmod 0500`` does not
make a directory unwritable for it. ember does not trust ``os.access`` (it also says yes to root);
it *probes* by creating a file in the root. The tests use a root below a regular file (which no
user can create a directory in) and, when not running as root, a ``chmod 0500`` directory.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from . import config

try:  # POSIX advisory locks serialise corruption recovery between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: recovery is then only serialised per process
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DB_NAME",
    "Store",
    "StoreWarning",
    "get_store",
    "close_store",
    "cache_root",
    "namespace",
]

DB_NAME = "ember.db"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000

_T = TypeVar("_T")

_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS entries (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     BLOB NOT NULL,
    updated   REAL NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    path      TEXT NOT NULL,     -- relative to the root, so a moved cache directory still works
    sha256    TEXT NOT NULL,     -- of the file's content
    size      INTEGER NOT NULL,
    meta      TEXT NOT NULL,     -- JSON object given to put_artifact
    updated   REAL NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""

# errno values that mean "this directory cannot hold the cache" rather than a bug
_FALLBACK_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EEXIST}
)
_EXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}")


class StoreWarning(UserWarning):
    """The cache store had to recover (corrupt database moved aside, or fell back to memory)."""


class _NewerSchema(Exception):
    pass


def namespace(*parts: str) -> str:
    """Join parts into a namespace, replacing ``/`` inside a part.

    ``namespace("autotune", version, device_id, "matmul")`` -> ``autotune/0.1.0/<device id>/matmul``."""
    return "/".join(str(p).replace("/", "_").replace("\\", "_") for p in parts)


def _check_namespace(ns: str) -> None:
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"namespace must be a non-empty string, got {ns!r}")
    # Namespaces become directories of artifacts: no way out of the root.
    if "\\" in ns or "\0" in ns or any(p in ("", ".", "..") for p in ns.split("/")):
        raise ValueError(f"invalid namespace {ns!r}: '/'-separated non-empty names, no '.' or '..'")


def _check_key(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"Store values are bytes (use put_json for objects), got {type(value).__name__}")


def _error_kind(e: BaseException) -> str:
    """Classify a SQLite error: corrupt | moved | unwritable | other."""
    name = getattr(e, "sqlite_errorname", "") or ""
    msg = str(e).lower()
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in msg or "not a database" in msg:
        return "corrupt"
    if name == "SQLITE_READONLY_DBMOVED":  # another process moved the file aside: reopen the new one
        return "moved"
    if (
        name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_IOERR", "SQLITE_FULL"))
        or "readonly" in msg
        or "unable to open" in msg
        or "disk i/o error" in msg
        or "database or disk is full" in msg
    ):
        return "unwritable"
    return "other"


def _probe_writable(root: Path) -> None:
    """Raise OSError unless a file can be created in ``root`` (os.access lies to root)."""
    fd, name = tempfile.mkstemp(dir=root, prefix=".probe-")
    os.close(fd)
    os.unlink(name)


def _connect(path: str) -> sqlite3.Connection:
    """Open (creating if needed) the database with the store's settings and schema."""
    # isolation_level=None: autocommit; multi-statement writes say BEGIN IMMEDIATE themselves.
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable against a killed process
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.executescript(_SCHEMA)
        elif version > SCHEMA_VERSION:
            raise _NewerSchema(f"database schema {version} is newer than this ember's ({SCHEMA_VERSION})")
        # Touch both tables' root pages: a damaged file fails here, at open, rather than mid-run.
        conn.execute("SELECT 1 FROM entries LIMIT 1").fetchall()
        conn.execute("SELECT 1 FROM artifacts LIMIT 1").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that holds SQLite's write lock from its first statement."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise
    conn.execute("COMMIT")


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _sha256(data: bytes) -> str:
    import hashlib  # here, not at import: OpenSSL's load is ~3 ms of a start that reads no artifact

    return hashlib.sha256(data).hexdigest()


def _sha256_file(path: Path) -> tuple[str, int] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _sha256(data), len(data)


def _private_tempdir() -> Path:
    d = tempfile.mkdtemp(prefix="ember-cache-")  # mode 0700
    pid = os.getpid()

    def cleanup() -> None:
        if os.getpid() == pid:  # a forked child that exits normally must not remove the parent's files
            shutil.rmtree(d, ignore_errors=True)

    atexit.register(cleanup)
    return Path(d)


class Store:
    """A namespaced key/value store with artifact files; see the module docstring for guarantees.

    ``Store(root)`` opens (creating) ``<root>/ember.db``; ``Store(None)`` is an in-memory store.
    """

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        #: the root asked for (None: memory); stays the same after a fallback
        self.requested_root: Path | None = Path(root).expanduser().absolute() if root is not None else None
        #: why the store fell back to memory, or None
        self.fallback_reason: str | None = None
        self._root: Path
        self._db: Path | None = None
        if self.requested_root is None:
            self._open_memory()
            return
        with self._lock:
            try:
                self._open_disk(self.requested_root)
            except OSError as e:
                self._fallback(e.strerror or str(e))
            except _NewerSchema as e:
                self._fallback(str(e))
            except sqlite3.DatabaseError as e:
                self._handle(e)

    # ------------------------------------------------------------------ public API

    @property
    def root(self) -> Path:
        """Directory holding the database and ``artifacts/`` (a private temp dir when in memory)."""
        return self._root

    @property
    def path(self) -> Path | None:
        """The database file, or None for an in-memory store."""
        return self._db

    @property
    def in_memory(self) -> bool:
        return self._db is None

    def describe(self) -> str:
        """One line saying where the store is (``ember cache list``)."""
        if self._db is not None:
            return str(self._db)
        if self.fallback_reason is not None:
            return f"in memory (cannot use {self.requested_root}: {self.fallback_reason})"
        return "in memory"

    def get(self, namespace: str, key: str) -> bytes | None:
        _check_namespace(namespace)
        _check_key(key)

        def op(c: sqlite3.Connection) -> bytes | None:
            row = c.execute(
                "SELECT value FROM entries WHERE namespace = ? AND key = ?", (namespace, key)
            ).fetchone()
            return None if row is None else bytes(row[0])

        return self._run(op)

    def put(self, namespace: str, key: str, value: bytes) -> None:
        _check_namespace(namespace)
        _check_key(key)
        data = _as_bytes(value)

        def op(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO entries (namespace, key, value, updated) VALUES (?, ?, ?, ?)",
                (namespace, key, data, time.time()),
            )

        self._run(op)

    def get_json(self, namespace: str, key: str) -> Any | None:
        """The JSON value stored under the key; None when absent or not valid JSON (a cache miss)."""
        raw = self.get(namespace, key)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def put_json(self, namespace: str, key: str, value: Any) -> None:
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

        self._run(op)

    def namespaces(self) -> list[tuple[str, int]]:
        """``(namespace, entry count)`` for every namespace (values and artifacts), sorted."""

        def op(c: sqlite3.Connection) -> list[tuple[str, int]]:
            rows = c.execute(
                "SELECT namespace, SUM(n) FROM ("
                " SELECT namespace, COUNT(*) AS n FROM entries GROUP BY namespace"
                " UNION ALL SELECT namespace, COUNT(*) FROM artifacts GROUP BY namespace"
                ") GROUP BY namespace ORDER BY namespace"
            ).fetchall()
            return [(ns, int(n)) for ns, n in rows]

        return self._run(op)

    def entries(self, namespace: str) -> list[tuple[str, bytes]]:
        """``(key, value)`` of one namespace, sorted by key. An artifact's value is a JSON record
        ``{"artifact": path, "sha256": ..., "size": ..., "meta": {...}}``."""
        _check_namespace(namespace)

        def op(c: sqlite3.Connection) -> list[tuple[str, bytes]]:
            out = [
                (k, bytes(v))
                for k, v in c.execute("SELECT key, value FROM entries WHERE namespace = ?", (namespace,))
            ]
            for k, path, sha, size, meta in c.execute(
                "SELECT key, path, sha256, size, meta FROM artifacts WHERE namespace = ?", (namespace,)
            ):
                record = {
                    "artifact": str(self._root / path),
                    "sha256": sha,
                    "size": size,
                    "meta": json.loads(meta),
                }
                out.append((k, json.dumps(record, sort_keys=True).encode()))
            out.sort(key=lambda kv: kv[0])
            return out

        return self._run(op)

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

        return self._run(op)

    def put_artifact(self, namespace: str, key: str, data: bytes, meta: dict[str, Any]) -> Path:
        """Write ``data`` to ``<root>/artifacts/<namespace>/<sha256(key)>.<meta["ext"] or bin>``
        atomically, record it, and return the file's path."""
        _check_namespace(namespace)
        _check_key(key)
        content = _as_bytes(data)
        ext = str(meta.get("ext", "bin"))
        if not _EXT.fullmatch(ext):
            raise ValueError(f"invalid artifact extension {ext!r}")
        meta_json = json.dumps(meta, sort_keys=True)
        digest = _sha256(content)
        rel = Path("artifacts", *namespace.split("/"), f"{_sha256(key.encode())}.{ext}")

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
                c.execute(
                    "INSERT OR REPLACE INTO artifacts (namespace, key, path, sha256, size, meta, updated)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (namespace, key, rel.as_posix(), digest, len(content), meta_json, time.time()),
                )
            return target

        return self._run(op)

    def get_artifact(self, namespace: str, key: str) -> tuple[Path, dict[str, Any]] | None:
        """``(path, meta)`` when the artifact exists and its file's sha256 matches the record; else
        None (a stale entry is removed, with its file)."""
        _check_namespace(namespace)
        _check_key(key)
        query = "SELECT path, sha256, size, meta FROM artifacts WHERE namespace = ? AND key = ?"

        def check(c: sqlite3.Connection) -> tuple[Path, dict[str, Any]] | None | bool:
            row = c.execute(query, (namespace, key)).fetchone()
            if row is None:
                return None
            path = self._root / row[0]
            if _sha256_file(path) == (row[1], row[2]):
                return path, json.loads(row[3])
            return False  # mismatch: maybe a writer replaced the file after our read; re-check under the lock

        def op(c: sqlite3.Connection) -> tuple[Path, dict[str, Any]] | None:
            found = check(c)
            if found is not False:
                return found  # type: ignore[return-value]
            with _write(c):  # no writer can be between its file replace and its commit now
                found = check(c)
                if found is not False:
                    return found  # type: ignore[return-value]
                row = c.execute(query, (namespace, key)).fetchone()
                c.execute("DELETE FROM artifacts WHERE namespace = ? AND key = ?", (namespace, key))
                self._unlink(row[0])
            return None

        return self._run(op)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except sqlite3.Error:
                    pass
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.describe()})"

    # ------------------------------------------------------------------ machinery

    def _run(self, op: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``op`` on the connection; on corruption or an unwritable directory, recover (one
        warning) and run it once more on the new database."""
        with self._lock:
            if self._conn is None:
                raise ValueError("operation on a closed Store")
            try:
                return op(self._conn)
            except sqlite3.DatabaseError as e:
                if self.in_memory:
                    raise
                self._handle(e)
            except OSError as e:
                if self.in_memory or e.errno not in _FALLBACK_ERRNOS:
                    raise
                self._fallback(e.strerror or str(e))
            assert self._conn is not None
            return op(self._conn)

    def _handle(self, e: sqlite3.DatabaseError) -> None:
        kind = _error_kind(e)
        if kind == "corrupt":
            self._recover(e)
        elif kind == "moved":
            self._reopen()
        elif kind == "unwritable":
            self._fallback(str(e))
        else:
            raise e

    def _open_disk(self, root: Path) -> None:
        self._makedirs(root)
        _probe_writable(root)
        self._root = root
        self._db = root / DB_NAME
        self._conn = _connect(str(self._db))

    def _open_memory(self) -> None:
        self._root = _private_tempdir()
        self._db = None
        self._conn = _connect(":memory:")

    def _makedirs(self, d: Path) -> None:
        """Create ``d`` (and parents) private to the user: 0700, whatever the umask."""
        if d.is_dir():
            return
        missing = []
        while not d.is_dir():  # mkdir(parents=True) would give the parents the default mode
            missing.append(d)
            if d.parent == d:
                break
            d = d.parent
        for m in reversed(missing):
            try:
                m.mkdir(mode=0o700)
            except FileExistsError:
                if not m.is_dir():
                    raise
                continue  # a concurrent process created it
            os.chmod(m, 0o700)

    def _unlink(self, rel: str) -> None:
        try:
            os.unlink(self._root / rel)
        except OSError:
            pass

    def _reopen(self) -> None:
        self.close()
        assert self._db is not None
        try:
            self._conn = _connect(str(self._db))
        except sqlite3.DatabaseError as e:
            if _error_kind(e) == "corrupt":
                self._recover(e)
            else:
                self._fallback(str(e))

    def _fallback(self, reason: str) -> None:
        self.close()
        self._open_memory()
        self.fallback_reason = reason
        warnings.warn(
            f"ember cache: cannot use the cache directory {self.requested_root} ({reason}); "
            "using an in-memory cache for this process (nothing will persist)",
            StoreWarning,
            stacklevel=4,
        )

    def _recover(self, err: BaseException) -> None:
        """Move a corrupt database aside and start an empty one (one warning)."""
        self.close()
        assert self._db is not None
        db = self._db
        try:
            # Processes that detect the same corruption take turns; the later ones find the rebuilt
            # database healthy and just use it (else each would move the previous one's new file aside).
            with _file_lock(db.with_name(DB_NAME + ".lock")):
                try:
                    conn = _connect(str(db))
                    ok = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                    if ok == "ok":
                        self._conn = conn
                        return
                    conn.close()
                except sqlite3.DatabaseError as e:
                    if _error_kind(e) != "corrupt":
                        raise
                stamp = time.strftime("%Y%m%dT%H%M%S")
                aside = db.with_name(f"{DB_NAME}.corrupt-{stamp}")
                n = 1
                while aside.exists():
                    n += 1
                    aside = db.with_name(f"{DB_NAME}.corrupt-{stamp}-{n}")
                os.replace(db, aside)
                for suffix in ("-wal", "-shm"):  # they belong to the corrupt file
                    try:
                        os.unlink(str(db) + suffix)
                    except FileNotFoundError:
                        pass
                self._conn = _connect(str(db))
        except (OSError, sqlite3.DatabaseError) as e:
            self._fallback(f"corrupt database could not be rebuilt: {e}")
            return
        warnings.warn(
            f"ember cache: the database {db} was corrupt ({err}); moved it aside to {aside.name} "
            "and started an empty one",
            StoreWarning,
            stacklevel=4,
        )


# --------------------------------------------------------------------------- the process-wide store


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
        if _store is None or _store.requested_root != root.expanduser().absolute():
            # The previous store is dropped, not closed: another thread may still be using it;
            # its connection closes when the last reference goes.
            _store = Store(root)
        _store_generation = gen
        return _store


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
