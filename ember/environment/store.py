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

Trust (docs/security.md):

* Every row carries an HMAC-SHA256 (``mac``) under the per-user key of ``trust.cache_key()``,
  kept outside the root: a row whose MAC does not verify (planted, tampered, written under
  another user's key) is a miss, so a cache others could write can never make ember load code
  or launch with a layout it did not store itself. Artifact rows authenticate their path, size,
  sha256 and meta; ``read_artifact`` reads the file once and checks those bytes, which are the
  bytes the caller then loads (no hash-then-reopen window).
* Stored artifact paths are relative, under ``artifacts/``, and must resolve (symlinks
  followed) inside the root; any other row is corrupt: dropped, and no file is touched.
* The root must be owned by the user and not writable by group or others (else a warning and
  the in-memory fallback); the database, its ``-wal``/``-shm`` files and artifacts are 0600.
* The store never fails the operation that uses it: a database of another shape or program,
  a table missing, a value of the wrong type are moved aside once (then memory), each with one
  warning, and an operation that still fails is a miss.
* ``cache.max_size`` caps the store: past it, the least recently used artifacts go (``prune``,
  ``ember cache prune``). Stale temporaries of killed writers are removed at the first open of
  a root in a process, at most hourly (``clean_stale``).

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
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from . import config
from .trust import StoreWarning

try:  # POSIX advisory locks serialise corruption recovery between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: recovery is then only serialised per process
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DB_NAME",
    "Store",
    "StoreWarning",
    "get_store",
    "compile_store",
    "close_store",
    "cache_root",
    "namespace",
    "clean_stale",
]

DB_NAME = "ember.db"
SCHEMA_VERSION = 2  # 2: rows carry a MAC; artifacts a last-use time (a version-1 database is rebuilt)
BUSY_TIMEOUT_MS = 30_000

_T = TypeVar("_T")

_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS entries (
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     BLOB NOT NULL,
    updated   REAL NOT NULL,
    mac       TEXT NOT NULL,     -- trust.mac over (namespace, key, value)
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
    used      REAL NOT NULL,     -- last load, to the hour (least-recently-used eviction)
    mac       TEXT NOT NULL,     -- trust.mac over (namespace, key, path, sha256, size, meta)
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
_COLUMNS = {
    "entries": ["namespace", "key", "value", "updated", "mac"],
    "artifacts": ["namespace", "key", "path", "sha256", "size", "meta", "updated", "used", "mac"],
}
#: a load refreshes an artifact's ``used`` time only when it is older than this (a write per
#: kernel per warm start would cost more than the coarse order loses)
_USED_GRANULARITY_S = 3600.0
#: temporaries older than this whose writer is gone are removed (a compile times out at 300 s)
STALE_GRACE_S = 3600.0


class _NewerSchema(Exception):
    pass


class _Unsafe(Exception):
    """The cache root is not private to the user (another owner, or writable by others)."""


class _Foreign(Exception):
    """The file is a database, but not one of ours (another program's, or a table missing or of
    another shape): moved aside and rebuilt like a corrupt one."""


def _entry_mac(ns: str, key: str, value: bytes) -> str:
    from . import trust

    return trust.mac(b"entry", ns, key, value)


def _artifact_mac(ns: str, key: str, path: str, sha: str, size: int, meta: str) -> str:
    from . import trust

    return trust.mac(b"artifact", ns, key, path, sha, str(size), meta)


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


def _private_file(path: str) -> None:
    """Create ``path`` 0600 if missing (SQLite then gives ``-wal`` and ``-shm`` the same mode) and
    tighten the mode of an existing one of ours."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return  # unwritable: sqlite's own open reports it
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        try:
            st = os.stat(path + suffix)
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                os.chmod(path + suffix, 0o600)
        except OSError:
            pass


def _check_schema(conn: sqlite3.Connection) -> None:
    """Raise _Foreign unless the database holds exactly ember's tables with their columns."""
    tables = {
        name
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    }
    if tables != set(_COLUMNS):
        raise _Foreign(f"tables {sorted(tables)}, expected {sorted(_COLUMNS)}")
    for table, cols in _COLUMNS.items():
        have = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        if have != cols:
            raise _Foreign(f"table {table} has columns {have}, expected {cols}")


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring an empty or older database to this schema (a cache: older rows are dropped)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # again: another process may have done it
        if version == 0:
            tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            if tables:  # a database ember did not make: never write into another program's file
                raise _Foreign(f"an unversioned database with tables {tables}")
        if version < SCHEMA_VERSION:
            conn.execute("DROP TABLE IF EXISTS entries")
            conn.execute("DROP TABLE IF EXISTS artifacts")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    if version < SCHEMA_VERSION:
        conn.executescript(_SCHEMA)


def _connect(path: str) -> sqlite3.Connection:
    """Open (creating if needed) the database with the store's settings and schema."""
    if path != ":memory:":
        _private_file(path)
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
        if not isinstance(version, int) or version < 0:
            raise _Foreign(f"user_version {version!r}")
        if version < SCHEMA_VERSION:
            _migrate(conn)
        elif version > SCHEMA_VERSION:
            raise _NewerSchema(f"database schema {version} is newer than this ember's ({SCHEMA_VERSION})")
        _check_schema(conn)
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


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: a process of another user has it
        return True
    return True


def temp_name(kind: str) -> str:
    """The prefix of a temporary directory of this process (``ember-<kind>-<pid>-``): the pid lets
    ``clean_stale`` tell a live process's directory from a killed one's."""
    return f"ember-{kind}-{os.getpid()}-"


_TEMP = re.compile(r"ember-(cc|canary|kernels|cache|load)-(?:(\d+)-)?")


def clean_stale(root: Path | None, now: float | None = None, grace: float = STALE_GRACE_S) -> int:
    """Remove temporaries of killed processes; returns how many went. In the system temporary
    directory: ``ember-<kind>-<pid>-*`` directories of this user whose process is gone and
    that are older than ``grace`` (pid-less names of older embers: by age alone; they are
    compile directories, which live 300 s at most); under ``root``: ``.tmp-*`` artifact files
    older than ``grace`` (a writer holds one for milliseconds)."""
    now = time.time() if now is None else now
    removed = 0
    me = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        with os.scandir(tempfile.gettempdir()) as it:
            for e in it:
                m = _TEMP.match(e.name)
                if m is None:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode) or (me is not None and st.st_uid != me):
                    continue
                if now - st.st_mtime < grace:
                    continue
                pid = m.group(2)
                if pid is None and m.group(1) not in ("cc", "canary"):
                    continue  # a long-lived directory of an older ember: cannot tell whether it is in use
                if pid is not None and _pid_alive(int(pid)):
                    continue
                shutil.rmtree(e.path, ignore_errors=True)
                removed += 1
    except OSError:
        pass
    if root is not None:
        for d, _dirs, files in os.walk(root / "artifacts"):
            for f in files:
                if f.startswith(".tmp-"):
                    p = os.path.join(d, f)
                    try:
                        if now - os.lstat(p).st_mtime >= grace:
                            os.unlink(p)
                            removed += 1
                    except OSError:
                        pass
    return removed


def _private_tempdir() -> Path:
    d = tempfile.mkdtemp(prefix=temp_name("cache"))  # mode 0700
    pid = os.getpid()

    def cleanup() -> None:
        if os.getpid() == pid:  # a forked child that exits normally must not remove the parent's files
            shutil.rmtree(d, ignore_errors=True)

    atexit.register(cleanup)
    return Path(d)


class Store:
    """A namespaced key/value store with artifact files; see the module docstring for guarantees.

    ``Store(root)`` opens (creating) ``<root>/ember.db``; ``Store(None)`` is an in-memory store.
    ``max_size``: bytes past which the least recently used artifacts are evicted (None: no cap).
    """

    def __init__(self, root: str | os.PathLike[str] | None, max_size: int | None = None) -> None:
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        #: the root asked for (None: memory); stays the same after a fallback
        self.requested_root: Path | None = Path(root).expanduser().absolute() if root is not None else None
        #: why the store fell back to memory, or None
        self.fallback_reason: str | None = None
        self.max_size = max_size
        self._root: Path
        self._real_artifacts: str = ""
        self._db: Path | None = None
        self._recovered = 0  # databases moved aside by this Store (the second time: memory)
        self._failed_ops = 0  # operations that failed even after recovery (each a miss)
        if self.requested_root is None:
            self._open_memory()
            return
        with self._lock:
            try:
                self._open_disk(self.requested_root)
            except OSError as e:
                self._fallback(e.strerror or str(e))
            except (_NewerSchema, _Unsafe) as e:
                self._fallback(str(e))
            except _Foreign as e:
                self._recover(e)
            except sqlite3.Error as e:
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
        """Whether the database is in memory (asked for, or a fallback)."""
        return self._db is None

    def describe(self) -> str:
        """One line saying where the store is (``ember cache list``)."""
        if self._db is not None:
            return str(self._db)
        if self.fallback_reason is not None:
            return f"in memory (cannot use {self.requested_root}: {self.fallback_reason})"
        return "in memory"

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
            removed = freed = 0
            with _write(c):
                if limit is not None:
                    total = self._total(c)
                    if total > limit:
                        target = int(limit * 0.9)
                        rows = c.execute(
                            "SELECT namespace, key, path, size FROM artifacts ORDER BY used, updated"
                        ).fetchall()
                        for ns, k, path, size in rows:
                            if total <= target:
                                break
                            c.execute("DELETE FROM artifacts WHERE namespace = ? AND key = ?", (ns, k))
                            self._unlink(path)
                            n = size if isinstance(size, int) else 0
                            total -= n
                            freed += n
                            removed += 1
                known = {str(p) for (p,) in c.execute("SELECT path FROM artifacts")}
                base = self._root / "artifacts"
                for d, _dirs, files in os.walk(base):
                    for f in files:
                        full = os.path.join(d, f)
                        rel = os.path.relpath(full, self._root).replace(os.sep, "/")
                        if f.startswith(".tmp-") or rel in known:
                            continue  # temporaries: clean_stale's (by age: a writer may hold one)
                        try:
                            n = os.lstat(full).st_size
                            os.unlink(full)
                        except OSError:
                            continue
                        freed += n
                        removed += 1
            return removed, freed

        out = self._run(op, (0, 0))
        clean_stale(None if self.in_memory else self._root)
        return out

    def size(self) -> int:
        """Bytes the store holds (artifact files and values, as recorded)."""
        return self._run(self._total, 0)

    def close(self) -> None:
        """Close the database connection."""
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

    # ------------------------------------------------------------------ artifacts

    def _safe_path(self, rel: Any) -> Path | None:
        """The file a stored artifact path names, or None when the path is not one ember writes:
        relative, below ``artifacts/``, no ``.``/``..``, and inside the root with symlinks resolved."""
        if not isinstance(rel, str) or "\\" in rel or "\0" in rel or rel.startswith("/"):
            return None
        parts = rel.split("/")
        if len(parts) < 3 or parts[0] != "artifacts" or any(p in ("", ".", "..") for p in parts):
            return None
        full = self._root / rel
        if not self._real_artifacts:
            self._real_artifacts = os.path.realpath(self._root / "artifacts")
        real = os.path.realpath(full)
        if os.path.commonpath([real, self._real_artifacts]) != self._real_artifacts:
            return None
        return full

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

    def _total(self, c: sqlite3.Connection) -> int:
        a = c.execute("SELECT TOTAL(size) FROM artifacts").fetchone()[0]
        e = c.execute("SELECT TOTAL(length(value)) FROM entries").fetchone()[0]
        return int((a or 0) + (e or 0))

    def _evict_if_needed(self) -> None:
        limit = self.max_size
        if limit is None:
            return
        if self.size() > limit:
            self.prune(limit)

    # ------------------------------------------------------------------ machinery

    def _run(self, op: Callable[[sqlite3.Connection], _T], miss: _T) -> _T:
        """Run ``op`` on the connection; on corruption, a database that is not ours or an
        unwritable directory, recover (one warning) and run it once more on the new database.
        Whatever still fails is a miss (``miss``): the store never fails the caller's op."""
        with self._lock:
            if self._conn is None:
                raise ValueError("operation on a closed Store")
            try:
                return op(self._conn)
            except sqlite3.Error as e:
                if self.in_memory:
                    return self._miss(e, miss)
                try:
                    self._handle(e)
                except sqlite3.Error as e2:
                    return self._miss(e2, miss)
            except OSError as e:
                if self.in_memory or e.errno not in _FALLBACK_ERRNOS:
                    return self._miss(e, miss)
                self._fallback(e.strerror or str(e))
            except (TypeError, ValueError, AttributeError, KeyError, IndexError, UnicodeError) as e:
                return self._miss(e, miss)  # a row of an unexpected type or shape
            if self._conn is None:
                return miss
            try:
                return op(self._conn)
            except (sqlite3.Error, OSError, TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
                return self._miss(e, miss)

    def _miss(self, e: BaseException, miss: _T) -> _T:
        self._failed_ops += 1
        if self._failed_ops == 1:
            warnings.warn(
                f"ember cache: an operation on {self.describe()} failed ({type(e).__name__}: {e}); "
                "treated as a cache miss (further failures of this store are not reported)",
                StoreWarning,
                stacklevel=5,
            )
        return miss

    def _handle(self, e: sqlite3.Error) -> None:
        kind = _error_kind(e)
        if kind == "moved":
            self._reopen()
        elif kind == "unwritable":
            self._fallback(str(e))
        elif "locked" in str(e).lower() or "busy" in str(e).lower():
            raise e  # contention past the busy timeout: this operation misses, the database is fine
        else:  # corrupt, or a database this ember cannot use (a table missing, another shape)
            self._recover(e)

    def _open_disk(self, root: Path) -> None:
        self._makedirs(root)
        from . import trust

        st = os.stat(root)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, "not a directory")
        why = trust.unsafe_reason(st, allow_root=False)
        if why is not None:  # others could plant or swap what ember loads from it
            raise _Unsafe(f"the directory is {why}; the cache root must be yours and writable only by you")
        _probe_writable(root)
        self._root = root
        self._db = root / DB_NAME
        self._conn = _connect(str(self._db))

    def _open_memory(self) -> None:
        self._root = _private_tempdir()
        self._real_artifacts = ""
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

    def _unlink(self, rel: Any) -> None:
        path = self._safe_path(rel)
        if path is None:
            return  # not a path ember writes: never delete what it names
        try:
            os.unlink(path)
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
        except (_Foreign, _NewerSchema, OSError) as e:
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
        """Move an unusable database aside and start an empty one (one warning); the second time
        in one Store, use memory instead."""
        self.close()
        if self._db is None:
            self._fallback(f"the database could not be used: {err}")
            return
        if self._recovered >= 1:
            self._fallback(f"the rebuilt database could not be used either: {err}")
            return
        self._recovered += 1
        db = self._db
        try:
            # Processes that detect the same corruption take turns; the later ones find the rebuilt
            # database healthy and just use it (else each would move the previous one's new file aside).
            with _file_lock(db.with_name(DB_NAME + ".lock")):
                try:
                    conn = _connect(str(db))
                    ok = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
                    if ok == "ok":  # healthy and of our shape (rebuilt meanwhile by another process)
                        self._conn = conn
                        return
                    conn.close()
                except sqlite3.DatabaseError as e:
                    if _error_kind(e) not in ("corrupt", "other"):
                        raise
                except _Foreign:
                    pass
                stamp = time.strftime("%Y%m%dT%H%M%S")
                aside = db.with_name(f"{DB_NAME}.corrupt-{stamp}")
                n = 1
                while aside.exists():
                    n += 1
                    aside = db.with_name(f"{DB_NAME}.corrupt-{stamp}-{n}")
                os.replace(db, aside)
                for suffix in ("-wal", "-shm"):  # they belong to the moved file
                    try:
                        os.unlink(str(db) + suffix)
                    except FileNotFoundError:
                        pass
                self._conn = _connect(str(db))
        except (OSError, sqlite3.DatabaseError, _Foreign, _NewerSchema) as e:
            self._fallback(f"unusable database could not be rebuilt: {e}")
            return
        warnings.warn(
            f"ember cache: the database {db} could not be used ({type(err).__name__}: {err}); moved it aside "
            f"to {aside.name} and started an empty one",
            StoreWarning,
            stacklevel=4,
        )


def _verify(tag: Any, fn: Callable[..., str], *parts: Any) -> bool:
    """Whether ``tag`` is the MAC ``fn`` computes over ``parts`` (False for parts of the wrong type)."""
    import hmac

    if not isinstance(tag, str):
        return False
    try:
        return hmac.compare_digest(tag, fn(*parts))
    except (TypeError, ValueError, AttributeError):
        return False


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
