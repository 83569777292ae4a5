"""ember.autotune: keys and buckets, groups and priorities, failures, roofline end, elimination,
checksums, shared device ids, checks mode, the vendor candidate, the decision table.

Toy tunable sets run on a fake client (host timing of Python callables); the matmul tests run
on the CPU runtime. Every test gets a private store (cache root under tmp_path) and an empty
in-memory decision table.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import ember
from ember import Device, autotune, tracing
from ember.autotune import decisions, keys, probes
from ember.autotune.progress import Progress
from ember.environment import commands, config, log, store
from ember.errors import CompilationError


@pytest.fixture(autouse=True)
def private_store(tmp_path):
    # tuning at the first call (deferred tuning has its own tests: test_autotune_defer.py)
    # a stored decision is reused whatever the load it was tuned at (provisional decisions have
    # their own tests: test_cold_start.py)
    with config.override({"cache.root": str(tmp_path / "cache"), "autotune.defer": False,
                          "autotune.retune_provisional": False}):
        store.close_store()
        autotune.forget()
        yield tmp_path / "cache"
        autotune.forget()
        store.close_store()
    log.configure()


#: simulated device time: toy candidates add their cost, FakeClient.profile reports the sum
CLOCK = [0.0]


class FakeClient:
    """Deterministic timing (the toy candidates' declared costs); ``device_id`` as a runtime
    would define it."""

    runtime = "fake"
    name = "fake"

    def __init__(self, device_id: str = "fake-adapter-0/fake<none>", index: int = 0) -> None:
        self.device_id = device_id
        self.index = index
        self.throughput_id = "fake-adapter-mem0"

    def sync(self) -> None:
        pass

    def profile(self, fn: Any) -> tuple[Any, float]:
        t0 = CLOCK[0]
        r = fn()
        return r, CLOCK[0] - t0


def toy_set(cands: list[autotune.Tunable], bound: Any = None, name: str = "toy") -> autotune.TunableSet:
    return autotune.TunableSet(
        name,
        cands,
        key=lambda level, n, calls: (level.anchor(n),),
        key_fields=("n",),
        bound=bound,
    )


def worker(name: str, seconds: float):
    def fn(n: int, calls: list[str]) -> None:
        calls.append(name)
        CLOCK[0] += seconds

    return fn


def stored(tset: autotune.TunableSet, client: Any, n: int) -> dict[str, Any]:
    key = tset.key(keys.level(), n, None)
    ns = decisions.namespace(autotune.device_id(client), tset.name)
    return store.get_store().get_json(ns, decisions.entry_key(tset, keys.level().name, key))


# ------------------------------------------------------------------------------ keys


def test_anchor_buckets_per_level():
    assert [keys.anchor(x, 2.0) for x in (0, 1, 2, 3, 100, 128, 129, 1000)] == [0, 1, 2, 4, 128, 128, 256, 1024]
    assert [keys.anchor(x, 4.0) for x in (3, 5, 100, 1000)] == [4, 16, 256, 1024]
    assert keys.anchor(1000, None) == 1000
    assert keys.LEVELS["full"].anchor(1000) == 1000
    # finer buckets at extensive: 100 and 120 are apart there, together at balanced
    ext = keys.LEVELS["extensive"]
    assert ext.anchor(100) != ext.anchor(130)
    assert keys.LEVELS["balanced"].anchor(100) == keys.LEVELS["balanced"].anchor(120)


def test_level_follows_config():
    with config.override({"autotune.level": "minimal"}):
        assert keys.level().name == "minimal" and keys.level().threshold == 0.6
    with config.override({"autotune.level": "full"}):
        assert keys.level().threshold is None and keys.level().base is None
    assert keys.level().name == "balanced"


def test_layout_and_problem_classes():
    assert keys.layout_class((4, 3), (3, 1)) == "row"
    assert keys.layout_class((4, 3), (1, 4)) == "col"
    assert keys.layout_class((4, 3), (6, 2)) == "strided"
    assert keys.problem_class(1, 1, 9) == "inner"
    assert keys.problem_class(5, 1, 9) == "matvec"
    assert keys.problem_class(1, 5, 9) == "vecmat"
    assert keys.problem_class(5, 5, 9) == "general"


def test_compiler_identity():
    assert (
        keys.compiler_identity(
            "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc."
        )
        == "gcc-12.2"
    )
    assert keys.compiler_identity("Ubuntu clang version 17.0.6\nTarget: x86_64") == "clang-17.0"


def test_cpu_device_id_names_model_and_compiler():
    from ember.cube.runtime.client import get_client

    did = autotune.device_id(get_client("cpu", 0))
    assert did.startswith("cpu-") and "/cpu<c:" in did and did.endswith(">")
    assert autotune.device_id(FakeClient("mine")) == "mine"


# ------------------------------------------------------------------------------ the tuner


def test_fastest_wins_and_decision_is_reused():
    c = FakeClient()
    ts = toy_set([autotune.Tunable("slow", worker("slow", 2e-3)), autotune.Tunable("fast", worker("fast", 2e-4))])
    calls: list[str] = []
    autotune.execute(c, ts, 100, calls)
    assert set(calls) == {"slow", "fast"} and calls[-1] == "fast"
    calls.clear()
    autotune.execute(c, ts, 120, calls)  # same bucket (128)
    assert calls == ["fast"]
    calls.clear()
    autotune.execute(c, ts, 300, calls)  # another bucket: tunes
    assert set(calls) == {"slow", "fast"}
    d = stored(ts, c, 100)
    assert d["winner"] == "fast" and d["key"] == "n=128" and d["checksum"] == ts.checksum
    names = {x["name"]: x for x in d["candidates"]}
    assert names["fast"]["median_s"] < names["slow"]["median_s"]


def test_vendor_wins_a_tie():
    c = FakeClient()
    ts = toy_set(
        [autotune.Tunable("own", worker("own", 1.00e-3)), autotune.Tunable("lib", worker("lib", 1.02e-3), vendor=True)]
    )
    autotune.execute(c, ts, 4, [])
    d = stored(ts, c, 4)
    assert d["winner"] == "lib" and d["own_best"] == "own"
    ts1 = toy_set(
        [autotune.Tunable("own", worker("own", 1.00e-3)), autotune.Tunable("lib", worker("lib", 1.08e-3), vendor=True)],
        name="toy1",
    )
    autotune.execute(c, ts1, 4, [])
    assert stored(ts1, c, 4)["winner"] == "lib"  # 8% is within the margin an own kernel must beat
    ts2 = toy_set(
        [autotune.Tunable("own", worker("own", 1.00e-3)), autotune.Tunable("lib", worker("lib", 1.20e-3), vendor=True)],
        name="toy2",
    )
    autotune.execute(c, ts2, 4, [])
    assert stored(ts2, c, 4)["winner"] == "own"


def test_negative_priority_skips_and_later_group_only_when_needed():
    c = FakeClient()
    calls: list[str] = []
    ts = toy_set(
        [
            autotune.Tunable("a", worker("a", 1e-4), group=0, priority=lambda key: -1 if key[0] > 64 else 0),
            autotune.Tunable("b", worker("b", 1e-4), group=0),
            autotune.Tunable("fallback", worker("fallback", 1e-5), group=1),
        ]
    )
    autotune.execute(c, ts, 100, calls)
    assert "a" not in calls and "fallback" not in calls and calls[-1] == "b"
    calls.clear()
    autotune.execute(c, ts, 10, calls)
    assert "a" in calls and "fallback" not in calls

    def broken(n: int, calls: list[str]) -> None:
        raise RuntimeError("no kernel for you")

    ts2 = toy_set(
        [autotune.Tunable("broken", broken, group=0), autotune.Tunable("fallback", worker("fallback", 1e-5), group=1)],
        name="toy2",
    )
    calls.clear()
    autotune.execute(c, ts2, 10, calls)
    assert calls[-1] == "fallback"
    d = stored(ts2, c, 10)
    assert d["winner"] == "fallback"
    assert "RuntimeError: no kernel for you" in {x["name"]: x for x in d["candidates"]}["broken"]["error"]


def test_group_may_depend_on_the_key():
    """A fallback on one kind of device, a contender on another (matmul's tiled: CPU vs GPU)."""
    c = FakeClient()
    ts = toy_set(
        [
            autotune.Tunable("main", worker("main", 1e-4)),
            autotune.Tunable("tiles", worker("tiles", 1e-5), group=lambda key: 1 if key[0] <= 64 else 0),
        ]
    )
    calls: list[str] = []
    autotune.execute(c, ts, 64, calls)
    assert "tiles" not in calls
    calls.clear()
    autotune.execute(c, ts, 100, calls)
    assert calls[-1] == "tiles"
    assert {x["name"]: x["group"] for x in stored(ts, c, 100)["candidates"]} == {"main": 0, "tiles": 0}


def test_candidate_that_fails_to_compile_is_skipped_and_logged(capsys):
    def bad_compile(n: int, calls: list[str]) -> None:
        raise CompilationError("C compilation of kernel k_bad failed (cc exited 1)", "int x = ;", "error: expected")

    c = FakeClient()
    ts = toy_set([autotune.Tunable("bad", bad_compile), autotune.Tunable("good", worker("good", 1e-5))])
    with config.override({"debug.log": "stderr", "debug.log_categories": "autotune"}):
        calls: list[str] = []
        autotune.execute(c, ts, 8, calls)
        err = capsys.readouterr().err
    assert calls[-1] == "good"
    assert "candidate bad skipped: CompilationError: C compilation of kernel k_bad failed" in err
    assert "winner good" in err
    d = stored(ts, c, 8)
    assert d["candidates"][0]["error"].startswith("CompilationError")


def test_nothing_valid_raises():
    def broken(n: int, calls: list[str]) -> None:
        raise ValueError("nope")

    ts = toy_set([autotune.Tunable("x", broken)])
    with pytest.raises(autotune.AutotuneError, match="x: ValueError: nope"):
        autotune.execute(FakeClient(), ts, 4, [])


def test_roofline_ends_the_search_but_vendor_is_timed():
    c = FakeClient()
    calls: list[str] = []
    ts = toy_set(
        [
            autotune.Tunable("first", worker("first", 1e-3), priority=2),
            autotune.Tunable("second", worker("second", 1e-4), priority=1),
            autotune.Tunable("lib", worker("lib", 1e-3), vendor=True),
        ],
        bound=lambda key, tp, n, calls: 0.9e-3,  # "first" reaches 0.9 of it: >= 0.8 ends the search
    )
    probes._memory[c.throughput_id] = probes.Throughput(1e9, 1e9, 1e-6)
    autotune.execute(c, ts, 4, calls)
    assert "second" not in calls and "lib" in calls
    d = stored(ts, c, 4)
    by = {x["name"]: x for x in d["candidates"]}
    assert by["second"]["skipped"] == "roofline" and d["ended_by"] == "first"
    assert d["bound"] == pytest.approx(0.9e-3) and d["limit"] == 0.8
    # at full level nothing ends early
    with config.override({"autotune.level": "full"}):
        calls.clear()
        autotune.execute(c, ts, 4, calls)
    assert "second" in calls


def test_a_candidate_beating_the_bound_discredits_the_probes():
    c = FakeClient()
    calls: list[str] = []
    ts = toy_set(
        [
            autotune.Tunable("first", worker("first", 1e-3), priority=2),
            autotune.Tunable("second", worker("second", 5e-4)),
        ],
        bound=lambda key, tp, n, calls: 5e-3,  # 5x faster than "peak": the probes were measured on a busy device
    )
    probes._memory[c.throughput_id] = probes.Throughput(1e9, 1e9, 1e-6)
    autotune.execute(c, ts, 4, calls)
    assert "second" in calls and calls[-1] == "second"  # no roofline ending
    assert c.throughput_id not in probes._memory  # re-measured at the next tuning
    d = stored(ts, c, 4)
    assert d["bound_suspect"] is True and d["ended_by"] is None


def test_hopeless_candidate_is_eliminated_early():
    c = FakeClient()
    calls: list[str] = []
    ts = toy_set(
        [autotune.Tunable("fast", worker("fast", 2e-4), priority=1), autotune.Tunable("slow", worker("slow", 8e-3))]
    )
    autotune.execute(c, ts, 4, calls)
    assert calls.count("slow") == 3  # warm-up and two samples (one to confirm), then out
    assert calls.count("fast") > 2
    assert {x["name"]: x for x in stored(ts, c, 4)["candidates"]}["slow"]["skipped"] == "eliminated"


def test_checksum_detects_a_changed_tunable_set():
    c = FakeClient()
    ts = toy_set([autotune.Tunable("a", worker("a", 1e-4))])
    calls: list[str] = []
    autotune.execute(c, ts, 4, calls)
    old = ts.checksum
    autotune.forget()  # a new process: only the store remembers
    calls.clear()
    autotune.execute(c, ts, 4, calls)
    assert calls == ["a"]  # from the store: no tuning
    ts.add(autotune.Tunable("b", worker("b", 1e-5)))
    assert ts.checksum != old
    calls.clear()
    autotune.execute(c, ts, 4, calls)
    assert "b" in calls and calls[-1] == "b"  # the stored decision was ignored: retuned
    assert stored(ts, c, 4)["checksum"] == ts.checksum


def test_two_spellings_of_one_device_share_decisions():
    """The seed's 动脑筋: Device::metal and Device::wgpu on one GPU tune twice; here the id names
    the adapter, so the second spelling (another index) reuses the decision, in a new process too."""
    ts = toy_set([autotune.Tunable("a", worker("a", 1e-4)), autotune.Tunable("b", worker("b", 3e-4))])
    calls: list[str] = []
    autotune.execute(FakeClient("gpu-uuid-1/rt<x>", index=16384), ts, 4, calls)
    autotune.forget()
    calls.clear()
    autotune.execute(FakeClient("gpu-uuid-1/rt<x>", index=0), ts, 4, calls)
    assert calls == ["a"]
    calls.clear()
    autotune.execute(FakeClient("gpu-uuid-2/rt<x>"), ts, 4, calls)  # another adapter tunes
    assert set(calls) == {"a", "b"}


def test_tuning_holds_the_device_exclusively():
    """Two threads tuning at once (one key, and another key of the same device): candidates
    never run concurrently, and the shared key is tuned once."""
    import threading
    import time

    active = [0, 0]  # now, most seen
    calls: list[str] = []

    def cand(name: str):
        def fn(n: int, _calls: Any) -> None:
            active[0] += 1
            active[1] = max(active[1], active[0])
            time.sleep(2e-3)  # real time, so the other thread gets to run
            CLOCK[0] += 1e-3 if name == "a" else 2e-3
            calls.append(name)
            active[0] -= 1

        return fn

    ts = toy_set([autotune.Tunable("a", cand("a")), autotune.Tunable("b", cand("b"))])
    c = FakeClient()
    threads = [threading.Thread(target=autotune.execute, args=(c, ts, n, None)) for n in (4, 4, 100, 4)]
    with tracing.capture() as spans:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert active[1] == 1
    # key 4 tuned once (the other threads found the decision), key 128 once
    tuned = sorted(s.fields["key"] for s in spans if s.name == "autotune" and not s.fields["cached"])
    assert tuned == ["n=128", "n=4"]


def test_disable_cache_ignores_stored_decisions():
    c = FakeClient()
    ts = toy_set([autotune.Tunable("a", worker("a", 1e-4)), autotune.Tunable("b", worker("b", 3e-4))])
    autotune.execute(c, ts, 4, [])
    autotune.forget()
    calls: list[str] = []
    with config.override({"autotune.disable_cache": True}):
        autotune.execute(c, ts, 4, calls)
    assert "b" in calls


def test_autotune_spans():
    c = FakeClient()
    ts = toy_set([autotune.Tunable("a", worker("a", 1e-5))])
    with tracing.capture() as spans:
        autotune.execute(c, ts, 4, [])
        autotune.execute(c, ts, 4, [])
    tuned = [s for s in spans if s.name == "autotune"]
    assert [s.fields["cached"] for s in tuned] == [False, True]
    assert tuned[0].fields["op"] == "toy" and tuned[0].fields["key"] == "n=4"


def test_progress_bar_never_in_pipes():
    p = Progress("t", 3)
    p.t0 -= 10  # "took long"
    p.step("a")
    assert p._bar is None  # pytest's stderr is not a terminal
    p.close()


# ------------------------------------------------------------------------------ the CPU runtime

CPU = Device.cpu(fusion=False)


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_probes_measure_once_and_store(private_store):
    from ember.cube.runtime.client import get_client

    client = get_client("cpu", 0)
    probes._memory.clear()
    with tracing.capture() as spans:
        t = probes.throughput(client)
        again = probes.throughput(client)
    assert again is t
    assert sorted(s.fields["probe"] for s in spans if s.name == "probe") == ["bandwidth", "compute", "launch_overhead"]
    assert t.peak_flops > 1e8 and t.bandwidth > 1e8 and 0 < t.launch_overhead < 1e-2
    probes._memory.clear()
    with tracing.capture() as spans:
        loaded = probes.throughput(client)
    assert not [s for s in spans if s.name == "probe"] and loaded == t  # from the store
    ns = f"throughput/{ember.__version__}/{autotune.throughput_id(client)}"
    assert store.get_store().get_json(ns, probes.PROBE_VERSION)["peak_flops"] == t.peak_flops


def test_matmul_vendor_candidate_and_report(private_store, capsys):
    an, bn = _rand((96, 80), 1), _rand((80, 72), 2)
    c = (ember.tensor(an, device=CPU) @ ember.tensor(bn, device=CPU)).numpy()
    np.testing.assert_allclose(c, an.astype(np.float64) @ bn, rtol=1e-4, atol=1e-4)
    ((ns, key, d),) = [x for x in decisions.all_decisions() if x[2]["op"] == "matmul"]
    assert "m=128,n=128,k=128" in key and "dtype=float32" in key
    by = {x["name"]: x for x in d["candidates"]}
    assert by["numpy"].get("vendor") is True and "median_s" in by["numpy"]
    assert d["own_best"] in ("naive", "blocked", "blocked_muladd") and "vendor" not in by[d["own_best"]]
    assert d["winner"] in by and d["bound"] > 0
    assert commands.cache_main(["show", "autotune"]) == 0
    out = capsys.readouterr().out
    assert "candidate" in out and "median" in out and "bound" in out and "winner" in out
    star = [line for line in out.splitlines() if line.rstrip().endswith(" *") or " * " in line]
    assert len(star) == 1 and d["winner"] in star[0] and "level=balanced,dtype=float32" in out
    assert "numpy (vendor)" in out
    if d["winner"] == "numpy":
        assert f"{d['own_best']} (own best)" in out


def test_integer_matmul_tunes_without_vendor():
    an = np.random.default_rng(3).integers(-5, 6, (40, 30)).astype(np.int32)
    bn = np.random.default_rng(4).integers(-5, 6, (30, 20)).astype(np.int32)
    c = (ember.tensor(an, device=CPU) @ ember.tensor(bn, device=CPU)).numpy()
    np.testing.assert_array_equal(c, an @ bn)
    d = [x[2] for x in decisions.all_decisions() if "dtype=int32" in x[1]][0]
    assert {x["name"]: x for x in d["candidates"]}["numpy"]["skipped"] == "invalid"


def test_checks_mode_catches_a_wrong_candidate():
    from ember.backends.cube import matmul as mm

    def wrong(backend: Any, a: Any, b: Any, out: Any) -> None:
        mm.MATMUL_CANDIDATES[0].launch(backend, a, b, out)  # the right product ...
        backend.client.sync()
        v = mm._host_view(out)
        v[0, 0] += 1.0  # ... but one element off

    mm.MATMUL_TUNABLES.add(autotune.Tunable("wrong", wrong, 0, 9))
    try:
        an, bn = _rand((24, 16), 5), _rand((16, 8), 6)
        with config.override({"autotune.checks": True}), pytest.warns(autotune.AutotuneCheckWarning, match="wrong"):
            c = (ember.tensor(an, device=CPU) @ ember.tensor(bn, device=CPU)).numpy()
        np.testing.assert_allclose(c, an.astype(np.float64) @ bn, rtol=1e-4, atol=1e-4)
        d = [x[2] for x in decisions.all_decisions() if x[2]["op"] == "matmul"][0]
        by = {x["name"]: x for x in d["candidates"]}
        assert by["wrong"]["error"].startswith("checks: max error") and d["winner"] != "wrong"
        assert d["checks"] is True
        # every valid candidate with priority >= 0 ran (nothing ended early) and passed
        # (an invalid one, e.g. tensor cores on the CPU, has priority None)
        assert all(
            "median_s" in x for n, x in by.items()
            if n != "wrong" and (x.get("priority") if x.get("priority") is not None else -1) >= 0 and x["group"] == 0
        )
    finally:
        mm.MATMUL_TUNABLES.remove("wrong")


def test_checks_mode_poisons_outputs_so_unwritten_elements_fail():
    from ember.backends.cube import matmul as mm

    def lazy(backend: Any, a: Any, b: Any, out: Any) -> None:
        pass  # writes nothing: the poison stays

    mm.MATMUL_TUNABLES.add(autotune.Tunable("lazy", lazy, 0, 9))
    try:
        an, bn = _rand((8, 8), 7), _rand((8, 8), 8)
        with config.override({"autotune.checks": True}), pytest.warns(autotune.AutotuneCheckWarning, match="lazy"):
            (ember.tensor(an, device=CPU) @ ember.tensor(bn, device=CPU)).numpy()
    finally:
        mm.MATMUL_TUNABLES.remove("lazy")


def test_decision_json_is_explainable():
    # int32: no vendor candidate, so even a tiny product is tuned (float ones are trivial)
    an, bn = (_rand((4, 4), s).round().astype(np.int32) for s in (9, 10))
    (ember.tensor(an, device=CPU) @ ember.tensor(bn, device=CPU)).numpy()
    d = [x[2] for x in decisions.all_decisions() if x[2]["op"] == "matmul"][0]
    json.dumps(d)  # plain JSON
    for field in ("winner", "own_best", "bound", "limit", "checksum", "level", "candidates", "device", "tuned_s"):
        assert field in d


def test_elementwise_width_is_tuned_for_large_tensors():
    n = 1 << 16
    x, y = _rand((n,), 11), _rand((n,), 12)
    tx, ty = ember.tensor(x, device=CPU), ember.tensor(y, device=CPU)
    with tracing.capture() as spans:
        got = (tx + ty).numpy()
        again = (tx + ty).numpy()
    np.testing.assert_array_equal(got, x + y)
    np.testing.assert_array_equal(again, x + y)
    tuned = [s.fields for s in spans if s.name == "autotune"]
    assert [f["cached"] for f in tuned] == [False, True] and tuned[0]["op"] == "elementwise_width"
    d = [x[2] for x in decisions.all_decisions() if x[2]["op"] == "elementwise_width"][0]
    assert {c["name"] for c in d["candidates"]} == {"widest", "half", "quarter"}
    assert "op=add,dtype=float32" in d["key"] and d["bound"] > 0
    small = (ember.tensor(x[:1000], device=CPU) * 2.0).numpy()  # small: the static width, no tuning
    np.testing.assert_array_equal(small, x[:1000] * 2.0)
    assert len([x for x in decisions.all_decisions() if x[2]["op"] == "elementwise_width"]) == 1


@pytest.mark.parametrize("op", ["sum", "mean", "amax"])
def test_reduce_rows_strategy_is_tuned_for_large_inputs(op):
    x = _rand((64, 2048), 13)
    got = getattr(ember, op)(ember.tensor(x, device=CPU), dim=1).numpy()
    ref = getattr(np, {"amax": "max"}.get(op, op))(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    d = [x[2] for x in decisions.all_decisions() if x[2]["op"] == "reduce_rows"][0]
    assert {c["name"] for c in d["candidates"]} == {"unit_per_row", "cubes_per_row"}
    assert d["winner"] in ("unit_per_row", "cubes_per_row") and f"op={op if op != 'amax' else 'max'}" in d["key"]


def test_reduce_rows_checks_mode_compares_strategies():
    x = _rand((32, 4096), 14)
    with config.override({"autotune.checks": True}):
        got = ember.sum(ember.tensor(x, device=CPU), dim=1).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    d = [x[2] for x in decisions.all_decisions() if x[2]["op"] == "reduce_rows"][0]
    assert d["checks"] is True and all("median_s" in c and "error" not in c for c in d["candidates"])
