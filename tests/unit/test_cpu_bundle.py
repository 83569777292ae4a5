"""Bundles: prepared CPU kernels compiled several to one ``cc`` run (``cpu_bundle``).

What must hold: a bundle's kernels compute what they compute compiled alone (bit for bit: a
training run with bundles and one without end on the same parameter bytes); a bundled kernel is
found again per kernel (a second process compiles nothing); a bundle that cannot be built falls
back to one compile per kernel; and the member rows and bundle files keep every artifact's
integrity checks (a tampered row or file is a miss, never a load)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import cube
from ember.cube.compiler.base import CompiledSource
from ember.cube.compiler.c_prelude import PRELUDE
from ember.cube.runtime import cpu as cpu_runtime
from ember.cube.runtime import cpu_bundle
from ember.cube.runtime.client import ComputeClient
from ember.cube.runtime.cpu import CpuServer
from ember.cube.runtime.memory import MemoryPool
from ember.cube.runtime.tensor import CubeTensor
from ember.environment import config, store
from ember.environment.store import Store

REPO = Path(__file__).resolve().parents[2]
N = 257  # not a multiple of any line width


@pytest.fixture(autouse=True)
def private_store(tmp_path):
    with config.override({"cache.root": str(tmp_path / "cache"), "autotune.defer": False}):
        store.close_store()
        yield tmp_path / "cache"
        store.close_store()


@pytest.fixture
def client(monkeypatch) -> ComputeClient:
    monkeypatch.setattr(cpu_runtime, "_compile_workers", lambda: 1)  # one pool thread: one bundle
    c = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())
    c.server.toolchain.ensure()
    return c


@cube.kernel
def affine(x: cube.Array[cube.f32], out: cube.Array[cube.f32], k: cube.Comptime[int], b: cube.f32):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * k + b


def tensor(client: ComputeClient, values: np.ndarray) -> CubeTensor:
    a = np.ascontiguousarray(values, dtype=np.float32)
    return CubeTensor(client, client.create(a), a.shape, (1,), 0, ember.float32)


def read(client: ComputeClient, t: CubeTensor) -> np.ndarray:
    return client.read(t.buffer, np.float32, t.shape)


def prepare_held(client: ComputeClient, ks: list[int], x: CubeTensor, outs: list[CubeTensor]) -> None:
    """Prepare one kernel per k while the (single) pool thread is held, so all of them are queued
    when it is free: its turn takes them as one bundle."""
    server = client.server
    gate = threading.Event()
    server._compile_pool(True).submit(gate.wait)
    with server.preparing_now():
        for k, out in zip(ks, outs):
            affine.launch(client, cube.CubeCount(3), cube.CubeDim(128), x, out, k, 0.5)
    gate.set()
    server.wait_prepared()


def test_prepared_kernels_compile_as_one_bundle_and_compute_as_alone(client):
    x = tensor(client, np.random.default_rng(1).standard_normal(N))
    ks = [3, 5, 7, 11]
    outs = [tensor(client, np.full(N, np.nan)) for _ in ks]
    prepare_held(client, ks, x, outs)
    server = client.server
    assert server.compiles == len(ks) and server.cc_runs == 1
    assert all(np.isnan(read(client, o)).all() for o in outs)  # prepared launches ran nothing
    for k, out in zip(ks, outs):
        affine.launch(client, cube.CubeCount(3), cube.CubeDim(128), x, out, k, 0.5)
    xs = read(client, x)
    for k, out in zip(ks, outs):
        np.testing.assert_array_equal(read(client, out), xs * np.float32(k) + np.float32(0.5))
    assert server.compiles == len(ks) and server.cc_runs == 1  # the real launches compiled nothing
    # the same kernels in a fresh server (an empty pipeline table) come from the store: the
    # bundle is loaded once, nothing compiles
    fresh = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())
    y = tensor(fresh, xs)
    for k in ks:
        o = tensor(fresh, np.zeros(N))
        affine.launch(fresh, cube.CubeCount(3), cube.CubeDim(128), y, o, k, 0.5)
        np.testing.assert_array_equal(read(fresh, o), xs * np.float32(k) + np.float32(0.5))
    assert fresh.server.compiles == 0 and fresh.server.store_loads == len(ks)
    assert len(fresh.server._bundles) == 1


def _raise(sources):
    raise RuntimeError("merge failed")


@pytest.mark.parametrize("merge", [lambda sources: "this is not C;", _raise], ids=["cc-error", "merge-raises"])
def test_a_bundle_that_does_not_build_falls_back_to_one_compile_per_kernel(client, monkeypatch, merge):
    monkeypatch.setattr(cpu_bundle, "merge", merge)
    x = tensor(client, np.arange(N))
    ks = [2, 4, 6]
    outs = [tensor(client, np.zeros(N)) for _ in ks]
    prepare_held(client, ks, x, outs)
    assert client.server.compiles == client.server.cc_runs == len(ks)
    for k, out in zip(ks, outs):
        affine.launch(client, cube.CubeCount(3), cube.CubeDim(128), x, out, k, 0.0)
        np.testing.assert_array_equal(read(client, out), np.arange(N, dtype=np.float32) * k)


def test_bundling_off_compiles_one_kernel_per_run(monkeypatch):
    monkeypatch.setattr(cpu_runtime, "_compile_workers", lambda: 1)
    with config.override({"cpu.bundle": False}):
        c = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())
    x = tensor(c, np.arange(N))
    outs = [tensor(c, np.zeros(N)) for _ in range(3)]
    prepare_held(c, [2, 3, 4], x, outs)
    assert c.server.compiles == c.server.cc_runs == 3


def _src(entry: str, decls: str, body: str) -> CompiledSource:
    text = (f"/* ember cube kernel test -> {entry} */\n{PRELUDE.strip(chr(10))}\n{decls}\n\n"
            f"void {entry}(void **buffers, const uint64_t *info, uint32_t cx, uint32_t cy, uint32_t cz) {{\n"
            f"{body}\n}}\n")
    return CompiledSource(entry, text, "c", [], [0], {})


def test_merge_keeps_one_copy_of_shared_declarations_and_refuses_other_shapes():
    vt = "typedef float em_f32x4 __attribute__((vector_size(16)));"
    body = "    (void)info; (void)cx; (void)cy; (void)cz; float *o = (float *)buffers[0]; em_f32x4 v = {1, 2, 3, 4};" \
           " o[0] = v[{i}];"
    a = _src("ka", vt, body.replace("{i}", "1"))
    b = _src("kb", vt, body.replace("{i}", "3"))
    merged = cpu_bundle.merge([a, b])
    assert merged is not None and merged.count(vt) == 1 and merged.count(PRELUDE.strip("\n")) == 1
    from ember.cube.runtime.cpu_loading import load_shared_object
    from ember.cube.runtime.cpu_toolchain import CToolchain

    lib, _ = load_shared_object(CToolchain().compile(merged, "bundle_test"), "bundle")
    import ctypes

    for entry, want in (("ka", 2.0), ("kb", 4.0)):
        out = (ctypes.c_float * 1)(0.0)
        bufs = (ctypes.c_void_p * 1)(ctypes.addressof(out))
        getattr(lib, entry)(bufs, None, 1, 1, 1)
        assert out[0] == want
    # shapes merge does not take: a macro among the declarations, a repeated entry, no prelude
    assert cpu_bundle.merge([a, _src("kc", "#define EM_X 1", body.replace("{i}", "0"))]) is None
    assert cpu_bundle.merge([a, a]) is None
    assert cpu_bundle.merge([a, CompiledSource("kd", "void kd(void) {}", "c", [], [], {})]) is None


# ----------------------------------------------------------------------------- integrity


def _stored_bundle(tmp_path: Path) -> tuple[Store, str, str]:
    s = Store(tmp_path / "c")
    srcs = [_src("ka", "", "(void)0;"), _src("kb", "", "(void)0;")]
    key = cpu_bundle.bundle_key(["mk-a", "mk-b"])
    cpu_bundle.record(s, "compile/cpu/fp", key, ["mk-a", "mk-b"], srcs, ["a", "b"], b"\x7fELF bundle", {})
    return s, key, cpu_bundle.members_namespace("compile/cpu/fp")


def test_member_rows_find_their_bundle_and_tampering_is_a_miss(tmp_path):
    s, key, ns = _stored_bundle(tmp_path)
    hit = cpu_bundle.read(s, "compile/cpu/fp", "mk-b")
    assert hit is not None and hit[0] == b"\x7fELF bundle" and hit[3] == key and hit[1]["entry"] == "kb"
    assert cpu_bundle.read(s, "compile/cpu/fp", "mk-c") is None
    conn = sqlite3.connect(s.path)
    (raw,) = conn.execute("SELECT value FROM entries WHERE namespace = ? AND key = 'mk-b'", (ns,)).fetchone()
    rec = json.loads(raw)
    # a row changed without the key (another entry, another bundle) does not verify: a miss
    for tamper in ({"entry": "ka"}, {"bundle": cpu_bundle.bundle_key(["x"])}, {"source": "int y;"}):
        conn.execute("UPDATE entries SET value = ? WHERE namespace = ? AND key = 'mk-b'",
                     (json.dumps({**rec, **tamper}).encode(), ns))
        conn.commit()
        assert cpu_bundle.read(s, "compile/cpu/fp", "mk-b") is None
    conn.close()


def test_a_replaced_bundle_file_or_a_row_whose_entry_the_bundle_lacks_is_a_miss(tmp_path):
    s, key, ns = _stored_bundle(tmp_path)
    # a member row ember wrote, but for a bundle that does not list its entry (a row of
    # another bundle replayed under this key): never handed out
    s.put_json(ns, "mk-z", {"bundle": key, "entry": "kz", "source": "", "kernel_id": "z"})
    assert cpu_bundle.read(s, "compile/cpu/fp", "mk-z") is None
    path = s.get_artifact("compile/cpu/fp", key)[0]
    os.chmod(path, 0o600)
    path.write_bytes(b"\x7fELF planted")  # the bundle file replaced: its sha256 no longer matches
    assert cpu_bundle.read(s, "compile/cpu/fp", "mk-a") is None


# ----------------------------------------------------------------------------- bit-identical training

_TRAIN = """
import hashlib, numpy as np, ember
from ember import Device, nn, optim
from ember.cube.runtime.client import get_client
dev = Device.cpu().autodiff()
ember.manual_seed(0)
rng = np.random.default_rng(0)
X = ember.tensor(rng.standard_normal((96, 20)).astype(np.float32), device=dev)
Y = ember.tensor(rng.integers(0, 5, 96), device=dev)
model = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 5)).to(dev)
opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
for step in range(6):
    for i in range(0, 96, 32):
        loss = nn.functional.cross_entropy(model(X[i:i + 32]), Y[i:i + 32])
        opt.zero_grad(); loss.backward(); opt.step()
h = hashlib.sha256()
for k, v in sorted(model.state_dict().items()):
    h.update(k.encode()); h.update(np.ascontiguousarray(v.numpy()).tobytes())
s = get_client("cpu", 0).server
print(h.hexdigest(), s.compiles, s.cc_runs)
"""


def _train(cache: Path, bundle: bool) -> tuple[str, int, int]:
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), EMBER_CPU_BUNDLE="1" if bundle else "0",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_TRAIN)], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    digest, compiles, runs = r.stdout.split()[-3:]
    return digest, int(compiles), int(runs)


def test_training_with_bundles_is_bit_identical_to_without_and_a_warm_process_compiles_nothing(tmp_path):
    bundled = _train(tmp_path / "b", True)
    alone = _train(tmp_path / "a", False)
    assert bundled[0] == alone[0]
    assert bundled[1] == alone[1] == alone[2] > 0
    assert 0 < bundled[2] < bundled[1], "no bundle was compiled"
    warm = _train(tmp_path / "b", True)
    assert warm == (bundled[0], 0, 0)
