"""Issue 21, trust and failure: each test is one reproducer of the issue, run as an attacker or a
careless user would (hostile config, traversing row, planted artefact, tampered index row,
foreign database, failed block, checked mode, stale temporaries, size cap).

Files "owned by another user" are made with ``os.chown`` to uid 65534 when the tests run as
root (CI does); as a normal user those cases pretend instead, by moving ``trust.euid``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import Device
from ember.environment import commands, config, store, store_format, store_prune, trust
from ember.environment.config import ConfigWarning
from ember.environment.store import DB_NAME, Store, StoreWarning

ROOT = os.geteuid() == 0
OTHER = 65534
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def key_file(tmp_path, monkeypatch):
    """A private cache key per test (the user's own stays untouched)."""
    monkeypatch.setenv(trust.KEY_ENV, str(tmp_path / "keys" / "cache.key"))
    yield
    trust._keys.clear()


def owned_by_other(path: Path, monkeypatch) -> None:
    """Make ``path`` belong to another user: chown as root, else pretend we are someone else."""
    if ROOT:
        os.chown(path, OTHER, OTHER)
    else:  # pragma: no cover - CI runs as root
        me = os.geteuid()
        monkeypatch.setattr(trust, "euid", lambda: me + 1)


# ----------------------------------------------------------------------------- 1. config


@pytest.fixture
def shared_tree(tmp_path, monkeypatch):
    """A world-writable shared directory holding a planted ember.toml, and a working directory
    below it; the configuration is re-read afterwards."""
    for name in list(os.environ):
        if name.startswith("EMBER_") and name != trust.KEY_ENV or name == "CC":
            monkeypatch.delenv(name)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    mark = tmp_path / "pwned"
    planted = shared / "ember.toml"
    planted.write_text(textwrap.dedent(f"""\
        [cpu]
        cc = "sh -c 'touch {mark}' sh"
        cflags = "-fplugin=/tmp/evil.so"
        [cache]
        root = "{tmp_path / 'attacker-cache'}"
        [fusion]
        queue_limit = 7
    """))
    os.chmod(planted, 0o666)
    work = shared / "project" / "src"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    yield planted, mark
    monkeypatch.undo()
    config.reload()


def test_planted_config_in_a_shared_directory_runs_nothing(shared_tree, monkeypatch, capsys):
    planted, mark = shared_tree
    owned_by_other(planted, monkeypatch)
    with pytest.warns(ConfigWarning) as rec:
        config.reload()
    msgs = [str(w.message) for w in rec if str(planted) in str(w.message)]
    assert len(msgs) == 1 and "cpu.cc" in msgs[0] and "cache.root" in msgs[0]
    assert config.get("cpu.cc") == "cc"
    assert config.get("cpu.cflags") == "-O3 -march=native -fopenmp -fPIC -shared"
    assert config.get("cache.root") == "user"
    assert config.get("fusion.queue_limit") == 7  # a harmless key still applies
    assert {k for _, k, _ in config.ignored()} == {"cpu.cc", "cpu.cflags", "cache.root"}
    from ember.cube.runtime.cpu import CToolchain

    assert CToolchain().command == ["cc"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        assert commands.config_main([]) == 0
    out = capsys.readouterr().out
    assert f"cpu.cc from {planted}" in out and "ignored:" in out
    assert not mark.exists()


def test_config_file_writable_by_others_is_refused_even_when_ours(shared_tree):
    planted, _ = shared_tree  # ours, but mode 0666 in a 0777 directory
    with pytest.warns(ConfigWarning, match="writable by others"):
        config.reload()
    assert config.get("cpu.cc") == "cc"
    os.chmod(planted, 0o644)  # ours and private, but its directory lets anyone replace it
    with pytest.warns(ConfigWarning, match="no sticky bit"):
        config.reload()
    assert config.get("cpu.cc") == "cc"
    os.chmod(planted.parent, 0o755)  # a safe file: trusted keys apply
    config.reload()
    assert config.get("cpu.cc").startswith("sh -c")
    assert config.ignored() == []


def test_environment_variables_stay_trusted(shared_tree, monkeypatch):
    monkeypatch.setenv("EMBER_CPU_CC", "gcc-12")
    with pytest.warns(ConfigWarning):
        config.reload()
    assert config.get("cpu.cc") == "gcc-12"


# ----------------------------------------------------------------------------- 2. traversal


def _forge_artifact(s: Store, ns: str, key: str, rel: str, data: bytes, meta: str = '{"ext": "so"}') -> None:
    """A row as someone holding the key would write it: only the path confinement stops it."""
    import hashlib

    sha = hashlib.sha256(data).hexdigest()
    tag = store_format._artifact_mac(ns, key, rel, sha, len(data), meta)
    conn = sqlite3.connect(s.path)
    conn.execute(
        "INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?)", (ns, key, rel, sha, len(data), meta, tag)
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("form", ["absolute", "dotdot", "inner-dotdot", "symlink-out", "database"])
@pytest.mark.parametrize("matching", [True, False])
def test_artifact_rows_cannot_leave_the_cache(tmp_path, form, matching):
    root = tmp_path / "cache"
    s = Store(root)
    s.put_artifact("compile/cpu/fp", "good", b"fine", {"ext": "so"})
    victim = tmp_path / "victim.so"
    victim.write_bytes(b"precious")
    content = b"precious" if matching else b"something else"
    rel = {
        "absolute": str(victim),
        "dotdot": "../victim.so",
        "inner-dotdot": "artifacts/compile/../../../victim.so",
        "symlink-out": "artifacts/compile/cpu/fp/link.so",
        "database": DB_NAME,
    }[form]
    if form == "symlink-out":
        (root / "artifacts/compile/cpu/fp/link.so").symlink_to(victim)
    if form == "database":
        content = (root / DB_NAME).read_bytes() if matching else b"x"
    _forge_artifact(s, "compile/cpu/fp", "evil", rel, content)
    assert s.get_artifact("compile/cpu/fp", "evil") is None
    assert s.read_artifact("compile/cpu/fp", "evil") is None
    assert victim.read_bytes() == b"precious"  # neither loaded nor deleted
    assert (root / DB_NAME).exists()
    assert s.namespaces() == [("compile/cpu/fp", 1)]  # the corrupt row was dropped
    s.delete("compile/cpu/fp", "evil")
    assert victim.exists()
    assert s.read_artifact("compile/cpu/fp", "good")[0] == b"fine"


# ----------------------------------------------------------------------------- 3. private cache, MAC


def test_cache_root_of_another_user_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "shared-cache"
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.warns(StoreWarning, match="writable by others"):
        s = Store(root)
    assert s.in_memory and not (root / DB_NAME).exists()
    os.chmod(root, 0o700)
    owned_by_other(root, monkeypatch)
    with pytest.warns(StoreWarning, match="owned by uid"):
        s = Store(root)
    assert s.in_memory


def test_store_files_are_private(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "umask", os.umask)  # restored below
    old = os.umask(0o022)
    try:
        root = tmp_path / "c"
        s = Store(root)
        s.put("a", "k", b"v")
        p = s.put_artifact("compile/cpu/fp", "k", b"so", {"ext": "so"})
    finally:
        os.umask(old)
    for f in (root / DB_NAME, Path(str(root / DB_NAME) + "-wal"), Path(str(root / DB_NAME) + "-shm"), p):
        assert f.stat().st_mode & 0o777 == 0o600, f
    key = trust.key_path()
    assert key.stat().st_mode & 0o777 == 0o600 and root not in key.parents


def test_rows_written_without_the_key_are_misses(tmp_path):
    root = tmp_path / "c"
    s = Store(root)
    s.put("ns", "k", b"mine")
    s.put_artifact("compile/cpu/fp", "k", b"\x7fELF mine", {"ext": "so"})
    conn = sqlite3.connect(root / DB_NAME)
    conn.execute("UPDATE entries SET value = ? WHERE key = 'k'", (b"forged",))
    conn.commit()
    assert s.get("ns", "k") is None
    s.put("ns", "k", b"mine")
    assert s.get("ns", "k") == b"mine"
    # another user's key (or none): every row is a miss, nothing of theirs is loaded
    trust._keys.clear()
    os.environ[trust.KEY_ENV] = str(tmp_path / "other.key")
    assert Store(root).get("ns", "k") is None
    assert Store(root).read_artifact("compile/cpu/fp", "k") is None


def test_unsafe_key_file_is_not_used(tmp_path):
    key = trust.key_path()
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o644)
    with pytest.warns(StoreWarning, match="readable by group or others"):
        k1 = trust.cache_key()
    assert k1 != key.read_bytes()


_EVIL_SO = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void pwn(void) {
    FILE *f = fopen(getenv("EMBER_TEST_MARK"), "w"); if (f) { fputs("ran", f); fclose(f); }
}
"""

_RUN = """
import ember, numpy as np
from ember import Device
d = Device.cpu()
x = ember.tensor(np.arange(64, dtype=np.float32).reshape(8, 8), device=d)
print(float(x.sum().item()), float((x @ x).sum().item()))
"""


def _run(env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-c", _RUN], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_planted_shared_object_and_tampered_index_rows_are_not_used(tmp_path):
    import hashlib

    root = tmp_path / "cache"
    mark = tmp_path / "pwned"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env.update(EMBER_CACHE_DIR=str(root), EMBER_TEST_MARK=str(mark), PYTHONPATH=str(REPO),
               EMBER_CACHE_KEY_FILE=os.environ[trust.KEY_ENV])
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    expected = f"{float(x.sum())} {float((x @ x).sum())}"
    assert _run(env) == expected
    # an attacker with write access to the cache: every shared object replaced by one with a
    # constructor, its row's sha256 and size updated to match; every index row's info rotated
    src = tmp_path / "evil.c"
    src.write_text(_EVIL_SO)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "evil.so"), str(src)], check=True)
    evil = (tmp_path / "evil.so").read_bytes()
    conn = sqlite3.connect(root / DB_NAME)
    rows = conn.execute("SELECT namespace, key, path FROM artifacts").fetchall()
    assert rows
    for ns, key, rel in rows:
        (root / rel).write_bytes(evil)
        conn.execute("UPDATE artifacts SET sha256 = ?, size = ? WHERE namespace = ? AND key = ?",
                     (hashlib.sha256(evil).hexdigest(), len(evil), ns, key))
    n_index = 0
    for ns, key, value in conn.execute("SELECT namespace, key, value FROM entries WHERE namespace LIKE '%/index-%'"):
        rec = json.loads(value)
        rec["info"] = rec["info"][1:] + rec["info"][:1]
        conn.execute("UPDATE entries SET value = ? WHERE namespace = ? AND key = ?",
                     (json.dumps(rec).encode(), ns, key))
        n_index += 1
    conn.commit()
    conn.close()
    assert n_index
    assert _run(env) == expected  # recompiled, right results
    assert not mark.exists()  # the planted constructor never ran


# ----------------------------------------------------------------------------- 4. index rows


def test_tampered_index_row_is_a_miss(tmp_path):
    from ember.cube.compiler.base import CompiledSource, InfoSlot
    from ember.cube.runtime import cpu_index
    from ember.cube.types import ELEMS

    class Kid:
        kernel = "ember.test.kernel"

        def text(self) -> str:
            return "ember.test.kernel<f32>"

    s = Store(tmp_path / "c")
    s.put_artifact("compile/cpu/fp", "akey", b"\x7fELF", {"ext": "so", "source": "int x;"})
    info = [InfoSlot("len", 0, 0), InfoSlot("scalar", 1, 0, ELEMS["f32"])]
    cpu_index.record(s, "compile/cpu/fp", Kid(), CompiledSource("e", "int x;", "c", info, [0, 1]), "akey")
    hit = cpu_index.lookup(s, "compile/cpu/fp", Kid(), "c")
    assert hit is not None and hit[1].info == info and hit[1].buffers == [0, 1]
    ns = cpu_index._namespace("compile/cpu/fp")
    conn = sqlite3.connect(s.path)
    (raw,) = conn.execute("SELECT value FROM entries WHERE namespace = ?", (ns,)).fetchone()
    rec = json.loads(raw)
    for tamper in ({"info": rec["info"][::-1]}, {"buffers": [1, 0]}, {"info": [["len", 0, 0, "f99"]]}):
        conn.execute("UPDATE entries SET value = ? WHERE namespace = ?", (json.dumps({**rec, **tamper}).encode(), ns))
        conn.commit()
        assert cpu_index.lookup(s, "compile/cpu/fp", Kid(), "c") is None
    conn.close()


# ----------------------------------------------------------------------------- 5. foreign databases


def _foreign(kind: str, db: Path) -> None:
    conn = sqlite3.connect(db)
    if kind == "v1-missing-table":
        conn.execute("CREATE TABLE entries (namespace TEXT, key TEXT, value BLOB, updated REAL)")
        conn.execute("PRAGMA user_version = 1")
    elif kind == "v2-missing-table":
        conn.execute("CREATE TABLE entries (namespace TEXT, key TEXT, value BLOB, updated REAL, mac TEXT)")
        conn.execute("PRAGMA user_version = 2")
    elif kind == "other-program":
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
    elif kind == "bad-version":
        conn.execute("PRAGMA user_version = -3")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["v1-missing-table", "v2-missing-table", "other-program", "bad-version"])
def test_foreign_database_is_moved_aside_once(tmp_path, kind):
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    _foreign(kind, root / DB_NAME)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = Store(root)
        s.put("a", "k", b"v")
        assert s.get("a", "k") == b"v"
        assert s.get_json("autotune/x", "k") is None
        assert s.put_artifact("compile/cpu/fp", "k", b"so", {"ext": "so"}) is not None
        s2 = Store(root)  # a later process finds the rebuilt database healthy
        assert s2.get("a", "k") == b"v"
    store_warnings = [w for w in rec if issubclass(w.category, StoreWarning)]
    # v1 is this ember's own older schema: rebuilt in place, silently; the others: one warning
    assert len(store_warnings) == (0 if kind == "v1-missing-table" else 1)
    aside = list(root.glob(f"{DB_NAME}.corrupt-*"))
    assert len(aside) == (0 if kind == "v1-missing-table" else 1)
    if kind == "other-program":
        assert sqlite3.connect(aside[0]).execute("SELECT url FROM moz_places").fetchone() == ("https://example.org",)


def test_rows_of_the_wrong_type_or_shape_are_misses(tmp_path):
    root = tmp_path / "c"
    s = Store(root)
    s.put_artifact("compile/cpu/fp", "k", b"so", {"ext": "so"})
    conn = sqlite3.connect(root / DB_NAME)
    conn.execute("INSERT INTO entries VALUES ('a', 'text', 'TEXT, not a BLOB', 0, 'x')")
    conn.execute("INSERT INTO entries VALUES ('a', 'int', 42, 0, 42)")
    conn.execute("UPDATE artifacts SET meta = '[1]', size = 'big', path = 7")
    conn.commit()
    conn.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of this is worth a warning: plain misses
        assert s.get("a", "text") is None and s.get("a", "int") is None
        assert s.get_artifact("compile/cpu/fp", "k") is None
        assert s.entries("a")  # listing still works
    # a toolchain record of another shape (as a store with the key would hold it)
    from ember.cube.runtime.cpu import CToolchain

    tc = CToolchain()
    for bad in ([1], {"ok": True, "version": 3, "mvec": "yes"}, {"ok": 1}):
        s.put_json("compile/cpu/toolchains", tc._probe_key(), bad)
    with config.override({"cache.root": str(root)}):
        store.close_store()
        store.get_store().put_json("compile/cpu/toolchains", tc._probe_key(), [1])
        tc.ensure()  # probes the compiler again instead of raising
        assert isinstance(tc.version, str) and tc.version
    store.close_store()


def test_an_operation_that_keeps_failing_is_a_miss(tmp_path, monkeypatch):
    class Broken:
        def execute(self, *a, **k):
            raise sqlite3.OperationalError("no such table: entries")

        def close(self) -> None:
            pass

    s = Store(tmp_path / "c")
    s.put("a", "k", b"v")
    real = s._conn
    s._conn = Broken()  # the database is healthy: reopened, the operation retried
    assert s.get("a", "k") == b"v"
    real.close()
    m = Store(None)
    m._conn = Broken()  # nothing to recover to: a miss, one warning for the store's lifetime
    with pytest.warns(StoreWarning, match="treated as a cache miss"):
        assert m.get("a", "k") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.put("a", "k", b"v")
        assert m.namespaces() == []


# ----------------------------------------------------------------------------- 6. failed blocks


def test_failed_block_fails_only_its_dependents():
    d = Device.cpu()
    x = ember.rand(8, 8, device=d)
    idx = ember.tensor([[0, 9]], device=d) + 0  # queued: checked when the drain reaches the gather
    g = x.gather(1, idx)
    h = g * 3.0  # depends on the failed gather
    c = x * 2.0
    dd = (x @ x.T).sum()
    with pytest.raises(ember.errors.IndexOutOfRangeError):
        g.numpy()
    xn = x.numpy()
    np.testing.assert_allclose(c.numpy(), xn * 2.0, rtol=1e-6)
    np.testing.assert_allclose(dd.item(), float((xn.astype(np.float64) @ xn.T).sum()), rtol=1e-4)
    # the device reported the bad index once (the gather read no host copy of it): an op that
    # depends on the failed gather computed with its unspecified values, as on a GPU after a
    # device-side error (docs/evaluation.md, "Index errors")
    assert h.numpy().shape == (1, 2)


# ----------------------------------------------------------------------------- 7. checked mode


def test_checked_mode_compiles_every_builtin_kernel():
    """Every kernel the op catalog renders, all families, through the C compiler in checked mode,
    for float32 (vector lines) and float16 (the per-lane load path); other dtypes take the same
    emitter paths with other type names. ``python -m ember compile-check c --checked`` runs all
    dtypes (1441 kernels, all passing at this commit; ~2.5 min on 2 shared cores)."""
    from ember import compile_check
    from ember import dtype as dt

    rep = compile_check.run_check("c", dtypes=[dt.float32, dt.float16], jobs=2, checked=True)
    assert rep.ok, "\n".join(f"{n}: {log[:800]}" for n, log in rep.failures[:5])
    assert rep.kernels > 300 and not rep.skipped


_CHECKED_RUN = """
import ember, numpy as np
from ember import Device, cube
from ember.errors import KernelBoundsError
d = Device.cpu()
ember.manual_seed(0)
x = ember.rand(64, device=d)
xn = x.numpy()
assert abs(x.sum().item() - xn.sum()) < 1e-3
a = ember.rand(8, 5, device=d); b = ember.rand(5, 3, device=d)
assert np.allclose((a @ b).numpy(), a.numpy() @ b.numpy(), atol=1e-5)
assert abs(x.var().item() - xn.var(ddof=1)) < 1e-5
p = ember.rand(4, 3, device=d); q = ember.rand(4, 2, device=d)
assert np.array_equal(ember.cat([p, q], dim=1).numpy(), np.concatenate([p.numpy(), q.numpy()], 1))

@cube.kernel
def shifted(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i + 3]

from ember.cube.runtime.tensor import CubeTensor
bk = d.backend()
while not hasattr(bk, "client"):
    bk = bk.inner
c = bk.client
src = CubeTensor(c, c.create(np.arange(8, dtype=np.float32)), (8,), (1,), 0, ember.float32)
out = CubeTensor(c, c.create(np.zeros(8, np.float32)), (8,), (1,), 0, ember.float32)
try:
    shifted.launch(c, 1, 8, src, out)
except KernelBoundsError as e:
    print("raised", e.array, e.index, e.length)
"""


def test_checked_mode_runs_builtins_and_reports_a_user_kernel(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env.update(EMBER_CUBE_CHECKED="1", EMBER_CACHE_DIR=str(tmp_path / "c"), PYTHONPATH=str(REPO),
               EMBER_CACHE_KEY_FILE=os.environ[trust.KEY_ENV])
    script = tmp_path / "checked_run.py"  # a file: the kernel language reads the kernel's source
    script.write_text(_CHECKED_RUN)
    r = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["raised", "x", "(argument", "0)", "8", "8"]


# ----------------------------------------------------------------------------- 8. leaks


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temporaries_are_removed(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(store_prune.tempfile, "gettempdir", lambda: str(tmp))
    old = time.time() - 2 * store.STALE_GRACE_S
    dead, live = _dead_pid(), os.getpid()
    made = {
        f"ember-cc-{dead}-abc": (old, True),  # a killed compile
        "ember-cc-legacy1": (old, True),  # an older ember's compile dir: by age
        f"ember-load-{dead}-x": (old, True),  # a killed process's loaded kernels
        f"ember-load-{live}-x": (old, False),  # a live process's
        f"ember-cc-{dead}-new": (time.time(), False),  # within the grace period
        "ember-kernels-legacy": (old, False),  # long-lived, pid unknown: kept
        "unrelated-dir": (old, False),
    }
    for name, (mtime, _) in made.items():
        (tmp / name).mkdir()
        os.utime(tmp / name, (mtime, mtime))
    root = tmp_path / "cache"
    s = Store(root)
    s.put_artifact("compile/cpu/fp", "k", b"so", {"ext": "so"})
    d = root / "artifacts/compile/cpu/fp"
    (d / ".tmp-killed.so").write_bytes(b"half")
    os.utime(d / ".tmp-killed.so", (old, old))
    (d / ".tmp-writing.so").write_bytes(b"now")
    assert store.clean_stale(root) == 4
    for name, (_, gone) in made.items():
        assert (tmp / name).exists() != gone, name
    assert not (d / ".tmp-killed.so").exists() and (d / ".tmp-writing.so").exists()
    assert s.read_artifact("compile/cpu/fp", "k")[0] == b"so"


def test_cache_size_cap_evicts_least_recently_used(tmp_path, capsys):
    root = tmp_path / "c"
    s = Store(root, max_size=10_000)
    for i in range(8):
        s.put_artifact("compile/cpu/fp", f"k{i}", bytes([i]) * 3000, {"ext": "so"})
        conn = sqlite3.connect(root / DB_NAME)
        conn.execute("UPDATE artifacts SET used = ? WHERE key = ?", (1000.0 + i, f"k{i}"))
        conn.commit()
        conn.close()
    assert s.size() <= 10_000
    kept = sorted(k for k in (f"k{i}" for i in range(8)) if s.read_artifact("compile/cpu/fp", k) is not None)
    assert kept == ["k5", "k6", "k7"][-len(kept):] and kept
    assert len(list((root / "artifacts/compile/cpu/fp").iterdir())) == len(kept)
    # ember cache prune, with an orphan file no row names
    (root / "artifacts/compile/cpu/fp/orphan.so").write_bytes(b"o" * 100)
    with config.override({"cache.root": str(root)}):
        store.close_store()
        assert commands.cache_main(["prune", "--max-size", "4K"]) == 0
        assert store.get_store().size() <= 4096
    store.close_store()
    assert "pruned" in capsys.readouterr().out
    assert not (root / "artifacts/compile/cpu/fp/orphan.so").exists()


def test_max_size_setting_parses_sizes():
    with config.override({"cache.max_size": "512M", "cpu.pool_limit": "64M"}):
        assert config.get("cache.max_size") == 512 << 20
        assert config.get("cpu.pool_limit") == 64 << 20
        from ember.cube.runtime.memory import MemoryPool

        assert MemoryPool().max_cached == 64 << 20
    with pytest.raises(ValueError):
        config.parse_size("lots")


def test_empty_cache_returns_pool_memory():
    d = Device.cpu(fusion=False)
    t = ember.zeros(1 << 20, device=d)  # 4 MiB
    t.numpy()
    bk = d.backend()
    while not hasattr(bk, "client"):
        bk = bk.inner
    pool = bk.client.pool
    del t
    assert pool.cached_bytes >= 4 << 20
    assert ember.empty_cache() >= 4 << 20
    assert pool.cached_bytes == 0
