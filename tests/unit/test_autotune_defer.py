"""Deferred tuning: a new key runs a quick candidate while its candidates compile, then tunes.

On the CPU runtime (``client.compiling``) a key without a stored decision starts the compiles
of its candidates on the pool and, until none is in flight, launches the set's quick candidate
(a vendor routine, else the highest priority one, or ``TunableSet(quick=...)``). These tests
run on a private CPU client with a private store; a gate inside the compiler call holds the
background compiles, so "still compiling" is a state the test controls, not a race.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import ember
from ember import autotune, cube
from ember.autotune import decisions
from ember.cube.runtime import capture
from ember.cube.runtime import cpu as cpu_runtime
from ember.cube.runtime.client import ComputeClient
from ember.cube.runtime.cpu import CpuServer, CToolchain
from ember.cube.runtime.memory import MemoryPool
from ember.cube.runtime.tensor import CubeTensor
from ember.environment import config, store

N = 64


@pytest.fixture(autouse=True)
def private_store(tmp_path):
    with config.override({"cache.root": str(tmp_path / "cache"), "autotune.defer": True,
                          "autotune.retune_provisional": False}):
        store.close_store()
        autotune.forget()
        yield tmp_path / "cache"
        autotune.forget()
        store.close_store()


@pytest.fixture
def client(monkeypatch) -> ComputeClient:
    monkeypatch.setattr(cpu_runtime, "_compile_workers", lambda: 2)
    c = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())
    c.server.toolchain.ensure()
    return c


@pytest.fixture
def gate(monkeypatch) -> threading.Event:
    """Compiles on the pool wait for this event (those of the calling thread do not)."""
    ev = threading.Event()
    real = CToolchain.compile
    main = threading.get_ident()

    def compile(self: CToolchain, source: str, entry: str) -> bytes:
        if threading.get_ident() != main:
            assert ev.wait(60), "the test never opened the gate"
        return real(self, source, entry)

    monkeypatch.setattr(CToolchain, "compile", compile)
    return ev


@cube.kernel
def scaled(x: cube.Array[cube.f32], out: cube.Array[cube.f32], k: cube.Comptime[int]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * k


def tensor(client: ComputeClient, values: np.ndarray) -> CubeTensor:
    a = np.ascontiguousarray(values, dtype=np.float32)
    return CubeTensor(client, client.create(a), a.shape, (1,), 0, ember.float32)


def read(client: ComputeClient, t: CubeTensor) -> np.ndarray:
    return client.read(t.buffer, np.float32, t.shape)


def own(k: int, calls: list[str]) -> Any:
    def fn(client: ComputeClient, x: CubeTensor, out: CubeTensor) -> None:
        if not client.server.preparing_here():
            calls.append(f"k{k}")
        scaled.launch(client, 1, N, x, out, 3)  # every candidate computes x * 3 (k names a kernel only)
        if k == 3:  # a kernel of its own (k5 uses only the first)
            scaled.launch(client, 1, N, out, out, 1)

    return fn


def host(calls: list[str]) -> Any:
    def fn(client: ComputeClient, x: CubeTensor, out: CubeTensor) -> None:
        calls.append("host")
        client.write(out.buffer, read(client, x) * 3)

    return fn


def times3(name: str, calls: list[str], vendor: bool = True, **kw: Any) -> autotune.TunableSet:
    cands = [autotune.Tunable("k3", own(3, calls), priority=1), autotune.Tunable("k5", own(5, calls), priority=2)]
    if vendor:
        cands.append(autotune.Tunable("host", host(calls), vendor=True))
    return autotune.TunableSet(
        name, cands, key=lambda level, client, x, out: (level.anchor(x.shape[0]),), key_fields=("n",), **kw
    )


def stored(name: str) -> list[dict[str, Any]]:
    return [d for _, _, d in decisions.all_decisions() if d["op"] == name]


def test_a_new_key_runs_the_vendor_while_compiling_then_tunes(client, gate):
    calls: list[str] = []
    tset = times3("defer_vendor", calls)
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    for _ in range(3):  # the compiles are held: the vendor runs, nothing is decided or stored
        autotune.execute(client, tset, client, x, out)
        np.testing.assert_array_equal(read(client, out), np.arange(N) * 3)
    assert calls == ["host"] * 3 and client.compiling()
    assert stored("defer_vendor") == []
    gate.set()
    client.wait_prepared()
    assert not client.compiling() and client.server.compiles == 2  # both own kernels, on the pool
    calls.clear()
    out2 = tensor(client, np.zeros(N))
    autotune.execute(client, tset, client, x, out2)  # nothing compiling: this call tunes
    np.testing.assert_array_equal(read(client, out2), np.arange(N) * 3)
    assert {"k3", "k5", "host"} <= set(calls) and len(calls) > 3  # warm-ups and samples
    (rec,) = stored("defer_vendor")
    assert all("median_s" in c for c in rec["candidates"])
    calls.clear()
    autotune.execute(client, tset, client, x, out2)  # decided: the winner alone
    assert calls == [rec["winner"]]


def test_without_a_vendor_the_highest_priority_or_the_named_quick_candidate_runs(client, gate):
    calls: list[str] = []
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    # k5 has the higher priority: it compiles on the calling thread, k3 on the (held) pool
    autotune.execute(client, times3("defer_prio", calls, vendor=False), client, x, out)
    assert calls == ["k5"] and client.compiling()
    np.testing.assert_array_equal(read(client, out), np.arange(N) * 3)
    calls.clear()
    autotune.execute(client, times3("defer_named", calls, quick="host"), client, x, out)
    assert calls == ["host"]
    gate.set()


def test_a_key_whose_kernels_are_compiled_tunes_at_once(client, gate):
    gate.set()
    calls: list[str] = []
    tset = times3("defer_ready", calls)
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    autotune.execute(client, tset, client, x, out)
    client.wait_prepared()
    autotune.execute(client, tset, client, x, out)
    assert len(stored("defer_ready")) == 1
    # another process (here: the in-memory decisions forgotten, the kernels kept): tuned at its first call
    autotune.forget()
    with config.override({"autotune.disable_cache": True}):
        calls.clear()
        autotune.execute(client, tset, client, x, out)
        assert len(calls) > 3  # tuned right away: nothing had to compile


def test_no_tuning_while_a_capture_is_open(client, gate, monkeypatch):
    calls: list[str] = []
    tset = times3("defer_capture", calls)
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    autotune.execute(client, tset, client, x, out)
    gate.set()
    client.wait_prepared()
    monkeypatch.setattr(capture, "active", 1)  # a capture on some thread: timed candidates would be recorded
    calls.clear()
    autotune.execute(client, tset, client, x, out)
    assert calls == ["host"] and stored("defer_capture") == []
    monkeypatch.setattr(capture, "active", 0)
    autotune.execute(client, tset, client, x, out)
    assert len(stored("defer_capture")) == 1


def test_off_and_checks_mode_tune_at_the_first_call(client, gate):
    gate.set()
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    for name, over in (("defer_off", {"autotune.defer": False}), ("defer_checks", {"autotune.checks": True})):
        calls: list[str] = []
        with config.override(over):
            autotune.execute(client, times3(name, calls), client, x, out)
        assert len(stored(name)) == 1 and len(calls) > 3, name

