"""The cache store's database handle: one SQLite connection, its root, and recovery from every failure.

Invariants and the reasons for them:

* Journal mode WAL, ``synchronous=NORMAL``, a long ``busy_timeout``: readers never wait for
  writers; writers queue instead of failing. Every write is one short transaction, and the ones
  with several statements start with ``BEGIN IMMEDIATE`` (taking the write lock first, ``_write``),
  so no transaction ever has to upgrade a read lock (which SQLite refuses immediately, busy
  handler or not). A killed writer loses only its own uncommitted transaction: WAL frames without
  a commit record are ignored by the next reader.
* Failure is never fatal: a corrupt database is moved aside (``ember.db.corrupt-<timestamp>``)
  and rebuilt; a directory where nothing can be written (read-only, not a directory, disk full)
  makes the store fall back to an in-memory database with artifacts in a private temporary
  directory. A database of another shape or program, a table missing, a value of the wrong type
  are moved aside once (then memory). Each event emits exactly one ``StoreWarning``; the failed
  operation is retried on the new database (``Database._run``), and one that still fails is a
  miss: the caller sees a cache miss, not an error.
* The root must be owned by the user and not writable by group or others (else a warning and
  the in-memory fallback); the database, its ``-wal``/``-shm`` files and artifacts are 0600,
  directories 0700.
* Stored artifact paths are relative, under ``artifacts/``, and must resolve (symlinks
  followed) inside the root (``_safe_path``); any other row is corrupt: dropped, and no file is
  touched.
* One handle may be shared by threads (a lock serialises its connection).

Testing the read-only fallback as root: root ignores permission bits, so ``chmod 0500`` does not
make a directory unwritable for it. ember does not trust ``os.access`` (it also says yes to root);
it *probes* by creating a file in the root (``_probe_writable``). The tests use a root below a
regular file (which no user can create a directory in) and, when not running as root, a
``chmod 0500`` directory.
"""

from __future__ import annotations

import errno
import os
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

from .store_format import _COLUMNS, _SCHEMA, SCHEMA_VERSION
from .store_prune import _private_tempdir
from .trust import StoreWarning

try:  # POSIX advisory locks serialise corruption recovery between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: recovery is then only serialised per process
    fcntl = None  # type: ignore[assignment]

DB_NAME = "ember.db"
BUSY_TIMEOUT_MS = 30_000

_T = TypeVar("_T")

# errno values that mean "this directory cannot hold the cache" rather than a bug
_FALLBACK_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EEXIST}
)


class _NewerSchema(Exception):
    pass


class _Unsafe(Exception):
    """The cache root is not private to the user (another owner, or writable by others)."""


class _Foreign(Exception):
    """The file is a database, but not one of ours (another program's, or a table missing or of
    another shape): moved aside and rebuilt like a corrupt one."""



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
            _set_wal(conn)
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


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another connection holds the lock: SQLite may answer
    "database is locked" to a journal-mode change without calling the busy handler (several
    processes opening a new database at once), and an open must queue, not fail."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e).lower() and "busy" not in str(e).lower():
                raise
            if time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


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


class Database:
    """The connection, root and recovery of a ``Store`` (its base class; see the module docstring).

    ``Database(root)`` opens (creating) ``<root>/ember.db``; ``Database(None)`` is in memory.
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

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except sqlite3.Error:
                    pass
                self._conn = None

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
