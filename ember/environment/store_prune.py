"""What the cache store removes: temporaries of killed processes, and artifacts past the size cap.

``cache.max_size`` caps the store: past it, the least recently used artifacts go (``evict``, run by
``Store.prune`` and ``ember cache prune``) down to 90% of the cap, with artifact files no row names.
Temporaries are named ``temp_name(kind)`` (``ember-<kind>-<pid>-``), the one format ``clean_stale``
parses: the pid tells a live process's directory from a killed one's. Stale temporaries are removed
at the first open of a root in a process, at most hourly (``store._clean_once``).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: temporaries older than this whose writer is gone are removed (a compile times out at 300 s)
STALE_GRACE_S = 3600.0


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


def total_size(c: sqlite3.Connection) -> int:
    """Bytes the store holds as recorded: artifact sizes plus value lengths."""
    a = c.execute("SELECT TOTAL(size) FROM artifacts").fetchone()[0]
    e = c.execute("SELECT TOTAL(length(value)) FROM entries").fetchone()[0]
    return int((a or 0) + (e or 0))


def evict(c: sqlite3.Connection, root: Path, limit: int | None, unlink: Callable[[Any], None]) -> tuple[int, int]:
    """Inside the caller's write transaction: drop the least recently used artifacts (rows, and
    their files through ``unlink``) until the store holds at most 90% of ``limit`` (None: no cap),
    and remove files under ``<root>/artifacts`` that no row names. Returns ``(removed, bytes freed)``."""
    removed = freed = 0
    if limit is not None:
        total = total_size(c)
        if total > limit:
            target = int(limit * 0.9)
            rows = c.execute("SELECT namespace, key, path, size FROM artifacts ORDER BY used, updated").fetchall()
            for ns, k, path, size in rows:
                if total <= target:
                    break
                c.execute("DELETE FROM artifacts WHERE namespace = ? AND key = ?", (ns, k))
                unlink(path)
                n = size if isinstance(size, int) else 0
                total -= n
                freed += n
                removed += 1
    known = {str(p) for (p,) in c.execute("SELECT path FROM artifacts")}
    for d, _dirs, files in os.walk(root / "artifacts"):
        for f in files:
            full = os.path.join(d, f)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
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
