"""Preparing: the tuner starts the compiles of all its candidates together before timing any.

On the CPU runtime ``client.preparing()`` makes launches of the calling thread run nothing and
compile new kernels on a pool (one ``cc`` per core); the tuner calls every candidate of the
first group once that way, waits, then warms up and times as before. These tests run on a
private CPU client (an empty pipeline table) with a private store, so every kernel compiles.
Concurrency is shown with a barrier inside the compiler call, not with timings: two compiles
pass it only when they run at the same time.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import ember
from ember import autotune, cube, tracing
from ember.autotune import decisions, keys
from ember.cube.runtime import cpu as cpu_runtime
from ember.cube.runtime.client import ComputeClient
from ember.cube.runtime.cpu import CpuServer, CToolchain
from ember.cube.runtime.memory import MemoryPool
from ember.cube.runtime.tensor import CubeTensor
from ember.environment import config, store


@pytest.fixture(autouse=True)
def private_store(tmp_path):
    # tuning at the first call (deferred tuning: test_autotune_defer.py)
    with config.override({"cache.root": str(tmp_path / "cache"), "autotune.defer": False}):
        store.close_store()
        autotune.forget()
        yield tmp_path / "cache"
        autotune.forget()
        store.close_store()


@pytest.fixture
def client(monkeypatch) -> ComputeClient:
    monkeypatch.setattr(cpu_runtime, "_compile_workers", lambda: 2)  # two compiles at once on any machine
    c = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())
    c.server.toolchain.ensure()
    return c


@cube.kernel
def scaled(x: cube.Array[cube.f32], out: cube.Array[cube.f32], k: cube.Comptime[int]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * k


N = 64


def tensor(client: ComputeClient, values: np.ndarray) -> CubeTensor:
    a = np.ascontiguousarray(values, dtype=np.float32)
    return CubeTensor(client, client.create(a), a.shape, (1,), 0, ember.float32)


def read(client: ComputeClient, t: CubeTensor) -> np.ndarray:
    return client.read(t.buffer, np.float32, t.shape)


def candidate(k: int, log: list[Any] | None = None) -> Any:
    def fn(client: ComputeClient, x: CubeTensor, out: CubeTensor) -> None:
        if log is not None:
            log.append((k, client.server._preparer == threading.get_ident()))
        scaled.launch(client, 1, N, x, out, k)

    return fn


def scale_set(name: str, ks: list[int], log: list[Any] | None = None, **kw: Any) -> autotune.TunableSet:
    return autotune.TunableSet(
        name,
        [autotune.Tunable(f"k{k}", candidate(k, log)) for k in ks],
        key=lambda level, client, x, out: (level.anchor(x.shape[0]),),
        key_fields=("n",),
        **kw,
    )


def barrier_compiles(monkeypatch, parties: int) -> list[str]:
    """Make every C compile wait at a barrier of ``parties``: compiles that run one after
    another break it (the compile then fails)."""
    barrier = threading.Barrier(parties, timeout=30)
    real = CToolchain.compile
    entries: list[str] = []

    def compile(self: CToolchain, source: str, entry: str) -> bytes:
        entries.append(entry)
        barrier.wait()
        return real(self, source, entry)

    monkeypatch.setattr(CToolchain, "compile", compile)
    return entries


def test_candidates_compile_at_the_same_time_then_are_timed(client, monkeypatch):
    entries = barrier_compiles(monkeypatch, 2)
    calls: list[Any] = []
    tset = scale_set("prep_two", [3, 5], calls)
    x = tensor(client, np.arange(N))
    out = tensor(client, np.full(N, np.nan))
    with tracing.capture() as spans:
        autotune.execute(client, tset, client, x, out)
    # both kernels passed the barrier together: each compiled once, on the pool
    assert sorted(entries) == sorted({e for e in entries}) and len(entries) == 2
    assert client.server.compiles == 2
    compiles = [s for s in spans if s.name == "compile"]
    assert len(compiles) == 2 and all(s.fields["deferred"] and s.fields["cached"] is False for s in compiles)
    assert all(s.fields["cc_s"] > 0 for s in compiles)  # the pool thread filled in the compiler's time
    # each candidate ran once prepared (nothing executed), then warmed up and was timed for real
    assert [k for k, prepared in calls if prepared] == [3, 5]
    assert sum(1 for _, prepared in calls if not prepared) >= 4
    rec = [d for _, _, d in decisions.all_decisions() if d["op"] == "prep_two"][0]
    assert all("median_s" in c for c in rec["candidates"])
    k = int(rec["winner"][1:])
    np.testing.assert_array_equal(read(client, out), np.arange(N) * k)


def test_candidates_are_prepared_in_their_prepare_order(client):
    """Lower ``prepare_order`` first (the longest compiles start while the calling thread still
    expands the others); equal orders keep the set's order; every candidate is timed after."""
    calls: list[Any] = []
    orders = {2: 0, 3: -1, 4: 0, 5: -2, 6: -1}
    tset = autotune.TunableSet(
        "prep_order",
        [autotune.Tunable(f"k{k}", candidate(k, calls), prepare_order=o) for k, o in orders.items()],
        key=lambda level, client, x, out: (level.anchor(x.shape[0]),),
        key_fields=("n",),
    )
    x = tensor(client, np.arange(N))
    out = tensor(client, np.full(N, np.nan))
    autotune.execute(client, tset, client, x, out)
    assert [k for k, prepared in calls if prepared] == [5, 3, 6, 2, 4]
    assert {k for k, prepared in calls if not prepared} == set(orders)


def test_prepared_launches_run_nothing_and_pending_plans_are_not_kept(client):
    x = tensor(client, np.arange(N))
    out = tensor(client, np.full(N, -1.0))
    scaled.launch(client, 1, N, x, out, 2)  # compiled and run: out = 2x
    np.testing.assert_array_equal(read(client, out), np.arange(N) * 2)
    poison = tensor(client, np.full(N, -1.0))
    with tracing.capture() as spans, client.preparing():
        scaled.launch(client, 1, N, x, poison, 2)  # compiled already: still runs nothing
        scaled.launch(client, 1, N, x, poison, 7)  # new: its compile starts on the pool
    np.testing.assert_array_equal(read(client, poison), -1.0)
    # nothing ran, so the trace shows no launch (counts of launches see what ran); the new
    # kernel's compile has its span
    assert [s for s in spans if s.name == "launch"] == []
    assert [s.fields.get("deferred") for s in spans if s.name == "compile"] == [True]
    client.wait_prepared()
    assert client.server.compiles == 2
    scaled.launch(client, 1, N, x, poison, 7)  # the real kernel now (no no-op plan was kept)
    np.testing.assert_array_equal(read(client, poison), np.arange(N) * 7)
    assert client.server.compiles == 2


def test_only_the_preparing_thread_is_affected(client):
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    scaled.launch(client, 1, N, x, out, 4)
    other = tensor(client, np.zeros(N))
    with client.preparing():
        t = threading.Thread(target=lambda: scaled.launch(client, 1, N, x, other, 4))
        t.start()
        t.join()
    np.testing.assert_array_equal(read(client, other), np.arange(N) * 4)


def test_a_new_tuned_key_inside_a_prepared_candidate_is_not_tuned_while_preparing(client):
    inner_calls: list[Any] = []
    inner = scale_set("prep_inner", [2, 6], inner_calls)

    def outer_fn(client: ComputeClient, x: CubeTensor, out: CubeTensor) -> None:
        autotune.execute(client, inner, client, x, out)

    outer = autotune.TunableSet(
        "prep_outer",
        [autotune.Tunable("via_inner", outer_fn), autotune.Tunable("k9", candidate(9))],
        key=lambda level, client, x, out: (level.anchor(x.shape[0]),),
        key_fields=("n",),
    )
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    with tracing.capture() as spans:
        autotune.execute(client, outer, client, x, out)
    # the inner key was tuned once, by the outer candidate's warm-up: its own preparation (each
    # inner candidate once, launches off) and then real warm-ups and samples only
    assert inner_calls[:2] == [(2, True), (6, True)]
    assert len(inner_calls) > 4 and not any(prepared for _, prepared in inner_calls[2:])
    tuned = [s.fields["op"] for s in spans if s.name == "autotune" and s.fields.get("origin") == "tuned"]
    assert tuned.count("prep_inner") == 1 and tuned.count("prep_outer") == 1
    recs = {d["op"]: d for _, _, d in decisions.all_decisions()}
    assert all("median_s" in c for c in recs["prep_inner"]["candidates"])
    # a second outer key: the inner decision exists now, so preparing runs its winner (launches off)
    inner_calls.clear()
    x2 = tensor(client, np.arange(4 * N))
    out2 = tensor(client, np.zeros(4 * N))
    autotune.execute(client, outer, client, x2, out2)
    assert any(prepared for _, prepared in inner_calls)


def test_a_prepared_candidate_that_fails_to_compile_is_skipped_on_the_calling_thread(client, monkeypatch):
    from ember.cube.compiler.c import CCompiler
    from ember.errors import CompilationError

    real = CCompiler.compile

    def broken(self: CCompiler, k: Any) -> Any:
        src = real(self, k)
        if "* 11.0f;" in src.source:  # the k=11 candidate's kernel only
            src.source += "\nthis is not C;\n"
        return src

    monkeypatch.setattr(CCompiler, "compile", broken)
    calls: list[Any] = []
    tset = scale_set("prep_broken", [11, 13], calls)
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    autotune.execute(client, tset, client, x, out)
    rec = [d for _, _, d in decisions.all_decisions() if d["op"] == "prep_broken"][0]
    by = {c["name"]: c for c in rec["candidates"]}
    assert by["k11"]["error"].startswith("CompilationError") and rec["winner"] == "k13"
    np.testing.assert_array_equal(read(client, out), np.arange(N) * 13)
    # the failed compile is not cached as a result: asking again compiles (and fails) again
    with pytest.raises(CompilationError):
        scaled.launch(client, 1, N, x, out, 11)


def test_one_compile_per_kernel_when_threads_ask_at_once(client, monkeypatch):
    real = CToolchain.compile
    count: list[str] = []
    started = threading.Event()

    def slow(self: CToolchain, source: str, entry: str) -> bytes:
        count.append(entry)
        started.set()
        return real(self, source, entry)

    monkeypatch.setattr(CToolchain, "compile", slow)
    x = tensor(client, np.arange(N))
    outs = [tensor(client, np.zeros(N)) for _ in range(4)]
    go = threading.Barrier(4, timeout=60)

    def run(o: CubeTensor) -> None:
        go.wait()
        scaled.launch(client, 1, N, x, o, 21)

    threads = [threading.Thread(target=run, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(count) == 1
    for o in outs:
        np.testing.assert_array_equal(read(client, o), np.arange(N) * 21)


def test_checks_mode_and_opted_out_sets_do_not_prepare(client):
    calls: list[Any] = []
    x = tensor(client, np.arange(N))
    out = tensor(client, np.zeros(N))
    autotune.execute(client, scale_set("prep_off", [3, 4], calls, prepare=False), client, x, out)
    assert calls and not any(prepared for _, prepared in calls)
    calls.clear()
    with config.override({"autotune.checks": True}):
        autotune.execute(client, scale_set("prep_checks", [3, 4], calls), client, x, out)
    assert calls and not any(prepared for _, prepared in calls)


def test_level_is_a_plain_value():
    lvl = keys.LEVELS["balanced"]
    assert (lvl.base, lvl.threshold, lvl.samples) == (2.0, 0.8, 5) and "balanced" in repr(lvl)


# ------------------------------------------------------------------------------ device start


def test_one_canary_checks_openmp_and_libmvec_and_openmp_alone_where_libmvec_fails(monkeypatch):
    builds: list[list[str]] = []
    real = CToolchain._build

    def build(self: CToolchain, source: str, entry: str, extra: list[str] | None = None) -> bytes:
        builds.append(list(extra or ()))
        return real(self, source, entry, extra)

    monkeypatch.setattr(CToolchain, "_build", build)
    tc = CToolchain()
    tc.ensure()
    assert len(builds) == 1 and "-lmvec" in builds[0]  # one compile on a cold start
    assert tc.mvec == ("-DEM_MVEC" in tc.flags)
    store.close_store()  # a fresh toolchain record: the next one probes again

    def no_mvec(self: CToolchain, source: str, entry: str, extra: list[str] | None = None) -> bytes:
        builds.append(list(extra or ()))
        if "-lmvec" in (extra or ()):
            from ember.errors import CompilationError

            raise CompilationError("no libmvec here", source, "ld: cannot find -lmvec")
        return real(self, source, entry, extra)

    monkeypatch.setattr(CToolchain, "_build", no_mvec)
    builds.clear()
    with config.override({"cpu.cflags": "-O2 -fopenmp -fPIC -shared"}):  # another toolchain key
        tc2 = CToolchain()
        tc2.ensure()
    assert builds == [["-DEM_MVEC", "-lmvec"], []]
    assert not tc2.mvec and "-DEM_MVEC" not in tc2.flags and "-lmvec" not in tc2.libs


# ------------------------------------------------------------------------------ warm start


def test_a_new_server_finds_ember_kernels_by_kernel_id_without_rendering(monkeypatch):
    from ember.autotune.probes import throughput_probe
    from ember.cube.compiler.c import CCompiler

    n = 16 * 64

    def copy_on(client: ComputeClient) -> np.ndarray:
        x = tensor(client, np.arange(n))
        out = tensor(client, np.zeros(n))
        throughput_probe.launch(client, 1, 64, cube.lines(x, 16), cube.lines(out, 16), 1, 0)
        return read(client, out)

    first = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())  # renders, compiles, records the index
    np.testing.assert_array_equal(copy_on(first), np.arange(n))

    def no_render(self: CCompiler, k: Any) -> Any:
        raise AssertionError(f"rendered {k.name}")

    monkeypatch.setattr(CCompiler, "compile", no_render)
    second = ComputeClient("cpu", 0, CpuServer(0), MemoryPool())  # an empty pipeline table: a new process
    with tracing.capture() as spans:
        np.testing.assert_array_equal(copy_on(second), np.arange(n))
    (span,) = [s for s in spans if s.name == "compile"]
    assert span.fields["cached"] is True and span.fields["indexed"] is True
    assert second.server.compiles == 0 and second.server.store_loads == 1
    # a kernel defined outside ember is rendered (its helpers could have changed unseen)
    x = tensor(second, np.arange(N))
    with pytest.raises(AssertionError, match="rendered"):
        scaled.launch(second, 1, N, x, tensor(second, np.zeros(N)), 17)
