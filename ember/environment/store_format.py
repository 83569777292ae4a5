"""The cache store's row format: the schema, the names rows are filed under, and the MACs.

Every row carries an HMAC-SHA256 (``mac``) under the per-user key of ``trust.cache_key()``, kept
outside the root: a row whose MAC does not verify (planted, tampered, written under another user's
key) is a miss, so a cache others could write can never make ember load code or launch with a
layout it did not store itself. Artifact rows authenticate their path, size, sha256 and meta (the
bytes a caller loads are checked against them: ``Store.read_artifact``). Namespaces are
``/``-separated names without ``.`` or ``..``: they become directories of artifacts, so no
namespace leads out of the root. Nothing here touches the database or the disk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

SCHEMA_VERSION = 2  # 2: rows carry a MAC; artifacts a last-use time (a version-1 database is rebuilt)

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

_EXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}")
_COLUMNS = {
    "entries": ["namespace", "key", "value", "updated", "mac"],
    "artifacts": ["namespace", "key", "path", "sha256", "size", "meta", "updated", "used", "mac"],
}


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


def _sha256(data: bytes) -> str:
    import hashlib  # here, not at import: OpenSSL's load is ~3 ms of a start that reads no artifact

    return hashlib.sha256(data).hexdigest()


def _verify(tag: Any, fn: Callable[..., str], *parts: Any) -> bool:
    """Whether ``tag`` is the MAC ``fn`` computes over ``parts`` (False for parts of the wrong type)."""
    import hmac

    if not isinstance(tag, str):
        return False
    try:
        return hmac.compare_digest(tag, fn(*parts))
    except (TypeError, ValueError, AttributeError):
        return False

