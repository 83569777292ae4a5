"""ember.environment.store: namespaces, artifacts, the process-wide store, robustness, `ember cache`."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import signal
import sqlite3
import stat
import threading
import time
import traceback
import warnings
from pathlib import Path

import pytest

from ember.environment import commands, config, store, store_db
from ember.environment.store import DB_NAME, Store, StoreWarning, get_store

ctx = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    """No EMBER_* variables, a working directory without config files, the process store pointed at
    a temporary root; everything re-read after the test."""
    for name in list(os.environ):
        if name.startswith("EMBER_"):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    config.reload()
    yield work
    store.close_store()
    monkeypatch.undo()
    config.reload()


@pytest.fixture
def root(tmp_path) -> Path:
    return tmp_path / "root"


def store_warnings(rec) -> list[str]:
    return [str(w.message) for w in rec if issubclass(w.category, StoreWarning)]


# ----------------------------------------------------------------------------- basics


def test_values_roundtrip(root):
    s = Store(root)
    assert s.get("a/b", "k") is None
    s.put("a/b", "k", b"\x00\x01")
    assert s.get("a/b", "k") == b"\x00\x01"
    s.put("a/b", "k", bytearray(b"new"))  # overwrite
    assert s.get("a/b", "k") == b"new"
    s.put_json("a/c", "j", {"x": [1, 2.5, None], "y": "z"})
    assert s.get_json("a/c", "j") == {"x": [1, 2.5, None], "y": "z"}
    assert s.get_json("a/c", "missing") is None
    s.put("a/c", "raw", b"\xff not json")
    assert s.get_json("a/c", "raw") is None  # undecodable = a miss, not an exception
    s.delete("a/b", "k")
    assert s.get("a/b", "k") is None
    s.delete("a/b", "k")  # deleting a missing entry is fine
    assert s.path == root / DB_NAME and not s.in_memory


def test_values_must_be_bytes_and_namespaces_safe(root):
    s = Store(root)
    with pytest.raises(TypeError, match="put_json"):
        s.put("a", "k", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        s.put_json("a", "k", object())
    for bad in ["", "/a", "a/", "a//b", "a/../b", "..", "a\\b"]:
        with pytest.raises(ValueError):
            s.put(bad, "k", b"v")
    ns = store.namespace("autotune", "0.1.0", "cuda/0 (H200)", "matmul")
    assert ns == "autotune/0.1.0/cuda_0 (H200)/matmul"


def test_persistence_across_instances(root):
    with Store(root) as s:
        s.put_json("throughput/0.1.0/cpu", "peak", {"flops": 1e12})
    with Store(root) as s2:
        assert s2.get_json("throughput/0.1.0/cpu", "peak") == {"flops": 1e12}


def test_namespaces_entries_and_prefix_clear(root):
    s = Store(root)
    s.put("compile/cpu/f1", "a", b"1")
    s.put("compile/cpu/f1", "b", b"2")
    s.put("compile/cuda/f2", "a", b"3")
    s.put("compiled", "x", b"4")  # shares a string prefix with "compile", not a path prefix
    s.put("autotune/0.1.0/cpu/matmul", "k", b"5")
    s.put_artifact("compile/cpu/so", "kern", b"ELF", {"ext": "so"})
    assert s.namespaces() == [
        ("autotune/0.1.0/cpu/matmul", 1),
        ("compile/cpu/f1", 2),
        ("compile/cpu/so", 1),
        ("compile/cuda/f2", 1),
        ("compiled", 1),
    ]
    assert s.entries("compile/cpu/f1") == [("a", b"1"), ("b", b"2")]
    ((key, rec),) = s.entries("compile/cpu/so")
    rec = json.loads(rec)
    assert key == "kern" and rec["size"] == 3 and rec["meta"] == {"ext": "so"}
    art = Path(rec["artifact"])
    assert art.exists()

    assert s.clear("compile/cpu") == 3
    assert not art.exists()
    assert [ns for ns, _ in s.namespaces()] == ["autotune/0.1.0/cpu/matmul", "compile/cuda/f2", "compiled"]
    assert s.clear("compile") == 1
    assert [ns for ns, _ in s.namespaces()] == ["autotune/0.1.0/cpu/matmul", "compiled"]
    assert s.clear() == 2
    assert s.namespaces() == []


def test_root_directory_created_private(tmp_path):
    root = tmp_path / "deep" / "er" / "root"
    s = Store(root)
    for d in (tmp_path / "deep", tmp_path / "deep" / "er", root):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    p = s.put_artifact("compile/cpu/x", "k", b"data", {})
    d = p.parent
    while d != root:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
        d = d.parent
    # WAL journal
    assert sqlite3.connect(root / DB_NAME).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_no_pickle_anywhere():
    src = Path(store.__file__).parent
    for f in src.glob("*.py"):
        text = f.read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|marshal|shelve|dill)\b", text, re.M), f


# ----------------------------------------------------------------------------- artifacts


def test_artifacts_roundtrip_layout_and_atomic(root):
    s = Store(root)
    assert s.get_artifact("compile/cpu/fp", "kid") is None
    data = b"\x7fELF" + os.urandom(1000)
    p = s.put_artifact("compile/cpu/fp", "kid", data, {"ext": "so", "entry": "kernel_add_f32_1234"})
    want = root / "artifacts" / "compile" / "cpu" / "fp" / (hashlib.sha256(b"kid").hexdigest() + ".so")
    assert p == want and p.read_bytes() == data
    assert [x.name for x in p.parent.iterdir()] == [p.name]  # no temp files left behind
    got = s.get_artifact("compile/cpu/fp", "kid")
    assert got == (p, {"ext": "so", "entry": "kernel_add_f32_1234"})
    # default extension, replacement
    p2 = s.put_artifact("compile/cpu/fp", "other", b"1", {})
    assert p2.suffix == ".bin"
    s.put_artifact("compile/cpu/fp", "kid", b"v2", {"ext": "so"})
    assert s.get_artifact("compile/cpu/fp", "kid")[0].read_bytes() == b"v2"
    with pytest.raises(ValueError):
        s.put_artifact("compile/cpu/fp", "k", b"", {"ext": "../so"})
    # visible from another instance (another process would see the same)
    assert Store(root).get_artifact("compile/cpu/fp", "other")[0] == p2


def test_tampered_or_missing_artifact_is_a_miss_and_is_removed(root):
    s = Store(root)
    p = s.put_artifact("compile/cpu/fp", "kid", b"good bytes", {"ext": "so"})
    p.write_bytes(b"evil bytes")  # same size, different content
    assert s.get_artifact("compile/cpu/fp", "kid") is None
    assert not p.exists()
    assert s.namespaces() == []  # the stale entry is gone
    p = s.put_artifact("compile/cpu/fp", "kid", b"good bytes", {"ext": "so"})
    p.unlink()
    assert s.get_artifact("compile/cpu/fp", "kid") is None
    assert s.namespaces() == []


# ----------------------------------------------------------------------------- the process-wide store


def test_get_store_follows_config(tmp_path, monkeypatch):
    s = get_store()
    assert s.path == tmp_path / "cache" / DB_NAME
    assert get_store() is s
    config.reload()
    assert get_store() is s  # same root: same store
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "other"))
    assert get_store() is s  # no reload yet
    config.reload()
    s2 = get_store()
    assert s2 is not s and s2.path == tmp_path / "other" / DB_NAME
    s.put("a", "k", b"old store still usable by whoever holds it")


def test_user_and_project_roots(clean_env, tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    config.reload()
    assert store.cache_root() == Path(platformdirs.user_cache_dir("ember")) == tmp_path / "xdg" / "ember"
    assert get_store().path == tmp_path / "xdg" / "ember" / DB_NAME

    outer = clean_env
    (outer / "pyproject.toml").write_text("[project]\nname='outer'\n")
    inner = outer / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname='inner'\n[tool.ember.cache]\nroot = 'project'\n")
    os.chdir(inner)
    config.reload()
    assert config.get("cache.root") == "project"
    assert get_store().path == outer / ".ember-cache" / DB_NAME  # beside the *outermost* pyproject.toml
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "env"))  # the variable wins
    config.reload()
    assert get_store().path == tmp_path / "env" / DB_NAME


def test_threads_share_one_store():
    results: list[object] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            s = get_store()
            results.append(s)
            for j in range(100):
                s.put(f"t/{i}", str(j), str(j).encode())
                assert s.get(f"t/{i}", str(j)) == str(j).encode()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(s) for s in results}) == 1
    assert get_store().namespaces() == [(f"t/{i}", 100) for i in range(8)]


# ----------------------------------------------------------------------------- concurrent processes


def _worker(root: str, wid: int, n: int, errfile: str, start) -> None:
    try:
        start.wait(20)  # all open the (not yet existing) database at once, then write at once
        s = Store(root)
        for i in range(n):
            s.put(f"proc/{wid % 2}", f"{wid}-{i}", f"v{wid}-{i}".encode())
            assert s.get(f"proc/{wid % 2}", f"{wid}-{i}") == f"v{wid}-{i}".encode()
            s.put_json("shared", "last", {"wid": wid, "i": i})  # everyone writes the same key
            assert s.get_json("shared", "last") is not None
            if i % 25 == 0:
                content = f"artifact from {wid} at {i}".encode() * 100
                s.put_artifact("compile/cpu/shared", "kernel", content, {"ext": "so", "wid": wid})
                got = s.get_artifact("compile/cpu/shared", "kernel")
                assert got is not None, "a complete artifact must always be readable"
                assert got[0].read_bytes().startswith(b"artifact from ")
        s.close()
    except BaseException:
        Path(errfile).write_text(traceback.format_exc())
        os._exit(1)
    os._exit(0)


def test_concurrent_processes_lose_nothing(root, tmp_path):
    nproc, n = 4, 400
    start = ctx.Barrier(nproc)
    procs = [
        ctx.Process(target=_worker, args=(str(root), w, n, str(tmp_path / f"err{w}"), start))
        for w in range(nproc)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    errors = [f.read_text() for f in tmp_path.glob("err*")]
    assert not errors, errors[0]
    assert [p.exitcode for p in procs] == [0] * nproc
    s = Store(root)
    counts = dict(s.namespaces())
    assert counts["proc/0"] == counts["proc/1"] == nproc * n // 2
    for w in range(nproc):
        for i in range(n):
            assert s.get(f"proc/{w % 2}", f"{w}-{i}") == f"v{w}-{i}".encode()
    assert s.get_artifact("compile/cpu/shared", "kernel") is not None
    conn = sqlite3.connect(root / DB_NAME)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ----------------------------------------------------------------------------- killed writer


def _hold_write_transaction(db: str, ready) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for i in range(2000):
        conn.execute(
            "INSERT INTO entries (namespace, key, value, updated, mac) VALUES ('doomed', ?, ?, 0, '')",
            (str(i), os.urandom(200)),
        )
    ready.set()
    time.sleep(60)  # killed long before


def _write_forever(root: str, ready) -> None:
    s = Store(root)
    i = 0
    while True:
        s.put("loop", str(i), os.urandom(500))
        if i % 10 == 0:
            s.put_artifact("compile/cpu/loop", str(i % 3), os.urandom(5000), {"ext": "so"})
        if i == 50:
            ready.set()
        i += 1


def test_killed_writer_leaves_a_usable_store(root):
    s = Store(root)
    s.put("kept", "k", b"committed")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_write_transaction, args=(str(root / DB_NAME), ready))
    child.start()
    assert ready.wait(20)
    os.kill(child.pid, signal.SIGKILL)  # mid-transaction, holding the write lock
    child.join(10)
    assert child.exitcode == -signal.SIGKILL

    t0 = time.perf_counter()
    s.put("after", "k", b"written")  # the lock died with the writer: no waiting
    assert time.perf_counter() - t0 < 5
    s2 = Store(root)
    assert s2.get("kept", "k") == b"committed"
    assert s2.get("after", "k") == b"written"
    assert s2.entries("doomed") == []  # the uncommitted transaction is gone

    ready = ctx.Event()
    child = ctx.Process(target=_write_forever, args=(str(root), ready))
    child.start()
    assert ready.wait(20)
    time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # somewhere in a put or an artifact write
    child.join(10)
    s3 = Store(root)
    assert dict(s3.namespaces())["loop"] >= 50
    for k in ("0", "1", "2"):
        got = s3.get_artifact("compile/cpu/loop", k)  # complete and verified, or a clean miss
        assert got is None or got[0].stat().st_size == 5000
    s3.put_artifact("compile/cpu/loop", "0", b"fresh", {"ext": "so"})
    assert s3.get_artifact("compile/cpu/loop", "0")[0].read_bytes() == b"fresh"
    assert sqlite3.connect(root / DB_NAME).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ----------------------------------------------------------------------------- corruption


@pytest.mark.parametrize("damage", ["whole", "pages"])
def test_corrupt_database_is_moved_aside_and_rebuilt(root, damage):
    with Store(root) as s:
        for i in range(50):
            s.put("ns", str(i), os.urandom(300))
    db = root / DB_NAME
    original = db.read_bytes()
    if damage == "whole":
        garbage = b"this is not a database at all " * 300
    else:  # keep the header page, scribble over the tables
        garbage = original[:4096] + b"\xde\xad\xbe\xef" * ((len(original) - 4096) // 4)
    db.write_bytes(garbage)

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = Store(root)
        assert s.get("ns", "1") is None  # empty, rebuilt
        s.put("ns", "new", b"v")
        assert s.get("ns", "new") == b"v"
        assert s.namespaces() == [("ns", 1)]
        Store(root).get("ns", "new")  # a second opener finds it healthy: no second warning
    msgs = store_warnings(rec)
    assert len(msgs) == 1, msgs
    assert "corrupt" in msgs[0] and str(db) in msgs[0]
    aside = list(root.glob(f"{DB_NAME}.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    assert not s.in_memory


# ----------------------------------------------------------------------------- unwritable directory


def _check_memory_store_works(s: Store) -> None:
    assert s.in_memory and s.path is None
    s.put("a/b", "k", b"v")
    assert s.get("a/b", "k") == b"v"
    s.put_json("autotune/x", "k", {"winner": "tiled"})
    assert s.get_json("autotune/x", "k") == {"winner": "tiled"}
    p = s.put_artifact("compile/cpu/f", "kid", b"ELF", {"ext": "so"})
    assert p.read_bytes() == b"ELF" and stat.S_IMODE(s.root.stat().st_mode) == 0o700
    assert s.get_artifact("compile/cpu/f", "kid") == (p, {"ext": "so"})
    assert dict(s.namespaces()) == {"a/b": 1, "autotune/x": 1, "compile/cpu/f": 1}
    assert s.clear("compile") == 1 and not p.exists()


def test_unwritable_root_falls_back_to_memory(tmp_path):
    # A directory below a regular file can be created by nobody, root included (tests run as root,
    # which ignores permission bits -- see the store module docstring).
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = Store(blocker / "cache")
        _check_memory_store_works(s)
    msgs = store_warnings(rec)
    assert len(msgs) == 1 and "in-memory" in msgs[0] and str(blocker / "cache") in msgs[0]
    assert "in memory" in s.describe()


def test_unwritable_root_probe(tmp_path, monkeypatch):
    # EACCES as a non-root user would get it from a chmod 0500 directory.
    def refuse(root):
        raise PermissionError(13, "Permission denied", str(root))

    monkeypatch.setattr(store_db, "_probe_writable", refuse)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _check_memory_store_works(Store(tmp_path / "ro"))
    assert len(store_warnings(rec)) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_chmod_readonly_root_falls_back_to_memory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            _check_memory_store_works(Store(ro))
        assert len(store_warnings(rec)) == 1
    finally:
        ro.chmod(0o700)


class _ReadonlyConnection:
    """Stands in for a connection to a database whose directory became read-only mid-run."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    def execute(self, sql: str, *args):
        if sql.lstrip().upper().startswith(("INSERT", "BEGIN IMMEDIATE")):
            e = sqlite3.OperationalError("attempt to write a readonly database")
            e.sqlite_errorname = "SQLITE_READONLY"
            raise e
        return self.real.execute(sql, *args)

    def close(self) -> None:
        self.real.close()


def test_write_failure_mid_run_falls_back_once_and_retries(root):
    s = Store(root)
    s._conn = _ReadonlyConnection(s._conn)  # type: ignore[assignment]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s.put("a/b", "k", b"v")  # fails on disk, retried in memory: no error for the caller
        assert s.get("a/b", "k") == b"v"
        _check_memory_store_works(s)
    assert len(store_warnings(rec)) == 1
    assert s.fallback_reason and "readonly" in s.fallback_reason


def test_process_store_falls_back_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(blocker / "cache"))
    config.reload()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(5):
            get_store().put("a", "k", b"v")
        config.reload()  # same root: the memory store stays
        assert get_store().get("a", "k") == b"v"
    assert len(store_warnings(rec)) == 1


# ----------------------------------------------------------------------------- ember cache


def test_cache_list_show_clear(tmp_path, capsys):
    s = get_store()
    ns = "autotune/0.1.0/cpu-x86_64/matmul"
    s.put_json(
        ns,
        "m=1024 n=1024 k=1024 f32",
        {
            "candidates": [
                {"name": "naive", "median_s": 0.25},
                {"name": "blas", "median_s": 0.0021},
                {"name": "tiled", "median_s": 0.0154},
                {"name": "broken", "median_s": None, "error": "CompilationError"},
            ],
            "bound": 0.0018,
            "winner": "blas",
            "checksum": "abc",
        },
    )
    s.put_json("throughput/0.1.0/cpu", "peak", {"gflops": 512.5})
    s.put_artifact("compile/cpu/fp1", "kernel_add", b"ELF", {"ext": "so"})

    assert commands.cache_main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"store: {tmp_path / 'cache' / DB_NAME}" in out
    assert re.search(rf"^{re.escape(ns)}\s+1$", out, re.M)
    assert re.search(r"^compile/cpu/fp1\s+1$", out, re.M)
    assert re.search(r"^namespace\s+entries$", out, re.M)

    assert commands.cache_main(["show", "autotune"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"== {ns} (1 entry)"
    assert lines[1].split() == ["key", "candidate", "median", "bound", "winner"]
    first = lines[2]
    assert first.startswith("m=1024 n=1024 k=1024 f32") and "blas *" in first
    assert "2.1 ms" in first and "1.8 ms" in first and first.rstrip().endswith("blas")
    order = [line.split()[0] for line in lines[3:6]]
    assert order == ["tiled", "naive", "broken"]  # fastest first, failures last
    assert "failed" in lines[5]

    assert commands.cache_main(["show", "throughput"]) == 0
    out = capsys.readouterr().out
    assert '"gflops": 512.5' in out and "peak:" in out
    assert commands.cache_main(["show", "nothing"]) == 1

    assert commands.cache_main(["clear", "autotune"]) == 0
    assert "cleared 1 entry" in capsys.readouterr().out
    assert [n for n, _ in s.namespaces()] == ["compile/cpu/fp1", "throughput/0.1.0/cpu"]
    assert commands.cache_main(["clear"]) == 0
    assert "cleared 2 entries" in capsys.readouterr().out
    assert commands.cache_main(["list"]) == 0
    assert "(empty)" in capsys.readouterr().out
    assert commands.cache_main(["frobnicate"]) == 2
