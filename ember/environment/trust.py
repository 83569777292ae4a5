"""What ember trusts on disk: owner checks for config files and cache directories, and the
per-user key that authenticates the cache store's rows (docs/security.md).

* A file or directory is *safe* when it is owned by the current user (or root) and neither
  group nor others may write it. Settings that run a program, pass flags to one or move where
  ember writes are read only from safe config files; the cache root must be safe (and owned by
  the user, not root, unless the user is root).
* The cache key: 32 random bytes in ``<user config dir>/ember/cache.key`` (``platformdirs``), or
  the file named by ``EMBER_CACHE_KEY_FILE``; created on first use with mode 0600 and
  ``O_EXCL``. It lives outside the cache root on purpose: whoever can write the cache cannot
  forge a row without it. A key file that is not safe (another owner, readable or writable by
  group/others, not a regular file) is not used: the process then authenticates with a key of
  its own that dies with it, so nothing stored earlier is loaded and nothing it stores will be
  loaded later (one ``StoreWarning``).

``mac(*parts)`` is HMAC-SHA256 over the parts, each length-prefixed (no two part lists give the
same message).
"""

from __future__ import annotations

import os
import stat
import threading
import warnings
from pathlib import Path

__all__ = ["euid", "unsafe_reason", "key_path", "cache_key", "mac", "verify", "KEY_ENV"]

KEY_ENV = "EMBER_CACHE_KEY_FILE"
_KEY_BYTES = 32


class StoreWarning(UserWarning):
    """The cache store had to recover (corrupt database moved aside, or fell back to memory), or
    its key could not be used. Defined here, below the store, so trust checks can warn with it."""


def euid() -> int:
    """The user ember acts for (a function, so tests can pretend to be someone else)."""
    return os.geteuid() if hasattr(os, "geteuid") else 0


def unsafe_reason(st: os.stat_result, *, allow_root: bool = True) -> str | None:
    """Why an entry with this ``stat`` must not be trusted, or None when it is safe: owned by the
    user (or by root where ``allow_root``), not writable by group or others."""
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows: no POSIX owners to check
        return None
    me = euid()
    if st.st_uid != me and not (allow_root and st.st_uid == 0):
        return f"owned by uid {st.st_uid}, not by the current user (uid {me})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def key_path() -> Path:
    """Where the cache key lives (``EMBER_CACHE_KEY_FILE``, else the user config directory)."""
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env).expanduser().absolute()
    try:
        import platformdirs
    except ImportError:  # a declared dependency, but an environment may lack it: XDG's default
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return base.absolute() / "ember" / "cache.key"
    return Path(platformdirs.user_config_dir("ember", appauthor=False)) / "cache.key"


_lock = threading.Lock()
_keys: dict[str, bytes] = {}  # key path -> key (read once per process and path)


def cache_key() -> bytes:
    """The per-user key of the cache store (created on first use; see the module docstring)."""
    path = key_path()
    k = _keys.get(str(path))
    if k is not None:
        return k
    with _lock:
        k = _keys.get(str(path))
        if k is None:
            k = _keys[str(path)] = _load_key(path)
        return k


def _load_key(path: Path) -> bytes:
    problem = None
    try:
        return _read_key(path)
    except FileNotFoundError:
        try:
            return _create_key(path)
        except FileExistsError:  # another process created it meanwhile
            try:
                return _read_key(path)
            except (OSError, ValueError) as e:
                problem = str(e)
        except OSError as e:
            problem = f"cannot create it: {e.strerror or e}"
    except (OSError, ValueError) as e:
        problem = str(e)
    warnings.warn(
        f"ember cache: the cache key {path} cannot be used ({problem}); this process uses a key of its own, "
        "so nothing in the cache is loaded and what it stores is not loaded later",
        StoreWarning,
        stacklevel=4,
    )
    return os.urandom(_KEY_BYTES)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        why = unsafe_reason(st, allow_root=False)
        if why is None and st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
            why = f"readable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
        if why is not None:
            raise ValueError(why)
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    if len(data) < _KEY_BYTES:
        raise ValueError(f"{len(data)} bytes, expected {_KEY_BYTES}")
    return data[:_KEY_BYTES]


def _create_key(path: Path) -> bytes:
    d = path.parent
    if not d.is_dir():
        os.makedirs(d, mode=0o700, exist_ok=True)
    key = os.urandom(_KEY_BYTES)
    # written under a temporary name and linked into place: a reader never sees a short key
    tmp = d / f".{path.name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails with FileExistsError when another process won the race
    finally:
        os.unlink(tmp)
    return key


def mac(*parts: bytes | str) -> str:
    """HMAC-SHA256 (hex) under the cache key of the length-prefixed parts."""
    import hmac

    msg = bytearray()
    for p in parts:
        if isinstance(p, str):
            b = p.encode()
        elif isinstance(p, bytes):
            b = p
        else:
            raise TypeError(f"MAC parts are str or bytes, got {type(p).__name__}")
        msg += len(b).to_bytes(8, "little")
        msg += b
    return hmac.digest(cache_key(), bytes(msg), "sha256").hex()  # one-shot: the C fast path


def verify(tag: object, *parts: bytes | str) -> bool:
    """Whether ``tag`` is the MAC of ``parts`` (constant-time compare)."""
    import hmac

    return isinstance(tag, str) and hmac.compare_digest(tag, mac(*parts))
