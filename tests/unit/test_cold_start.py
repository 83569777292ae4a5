"""Cold start and decisions that survive a loaded machine: trivial keys (decided without timing),
provisional decisions (tuned under load or with noisy samples: tuned again by the next quiet
process), and the fusion queue's content-defined cut points (a loop's drains repeat)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from replay_helpers import fusion_of

import ember
from ember import Device, autotune, tracing
from ember.autotune import decisions, keys
from ember.backends.fusion import stream as stream_module
from ember.environment import config, store

ROOT = Path(__file__).resolve().parents[2]
#: simulated device time (the toy candidates add their cost)
CLOCK = [0.0]


@pytest.fixture(autouse=True)
def private_store(tmp_path, monkeypatch):
    monkeypatch.setattr(decisions, "_quiet", [])
    monkeypatch.setattr(decisions, "load_average", lambda: 0.25)
    with config.override({"cache.root": str(tmp_path / "cache"), "autotune.defer": False}):
        store.close_store()
        autotune.forget()
        yield tmp_path / "cache"
        autotune.forget()
        store.close_store()


class FakeClient:
    runtime = "fake"
    name = "fake"
    device_id = "fake-adapter-0/cold<none>"
    index = 0
    throughput_id = "fake-adapter-mem0"

    def sync(self) -> None:
        pass

    def profile(self, fn: Any) -> tuple[Any, float]:
        t0 = CLOCK[0]
        r = fn()
        return r, CLOCK[0] - t0


def worker(name: str, *seconds: float):
    """A toy candidate costing ``seconds`` (cycled: unequal repeats make noisy samples)."""
    state = [0]

    def fn(n: int, calls: list[str]) -> None:
        calls.append(name)
        CLOCK[0] += seconds[state[0] % len(seconds)]
        state[0] += 1

    return fn


def toy_set(name: str, cands: list[autotune.Tunable], trivial: Any = None) -> autotune.TunableSet:
    return autotune.TunableSet(name, cands, key=lambda level, n, calls: (level.anchor(n),), key_fields=("n",),
                               trivial=trivial)


def stored(tset: autotune.TunableSet, n: int) -> dict[str, Any] | None:
    key = tset.key(keys.level(), n, None)
    ns = decisions.namespace(FakeClient.device_id, tset.name)
    return store.get_store().get_json(ns, decisions.entry_key(tset, keys.level().name, key))


# ------------------------------------------------------------------------------ trivial keys


def test_a_trivial_key_takes_its_candidate_untimed_and_unstored():
    c = FakeClient()
    ts = toy_set("cold_trivial", [autotune.Tunable("own", worker("own", 1e-4)),
                                  autotune.Tunable("lib", worker("lib", 5e-4), vendor=True)],
                 trivial=lambda key, n, calls: "lib" if key[0] <= 8 else None)
    calls: list[str] = []
    with tracing.capture() as spans:
        autotune.execute(c, ts, 4, calls)
        autotune.execute(c, ts, 4, calls)
    assert calls == ["lib", "lib"] and stored(ts, 4) is None
    assert [s.fields["origin"] for s in spans if s.name == "autotune"] == ["trivial", "memory"]
    assert autotune.choose(c, ts, 4, None).name == "lib"
    calls.clear()
    autotune.execute(c, ts, 100, calls)  # not trivial: tuned (the own candidate is 5x faster)
    assert set(calls) == {"own", "lib"} and stored(ts, 100)["winner"] == "own"
    # checks mode compares every candidate, trivial keys included
    autotune.forget()
    calls.clear()
    with config.override({"autotune.checks": True}):
        autotune.execute(c, ts, 4, calls)
    assert set(calls) == {"own", "lib"}


def test_small_float_matmuls_are_trivial_on_the_cpu():
    from ember.backends.cube.matmul import TRIVIAL_WORK

    dev = Device.cpu(fusion=False)
    rng = np.random.default_rng(5)
    cases = [((32, 64), (64, 128), np.float32, "trivial"), ((128, 32), (32, 64), np.float64, "trivial"),
             ((8, 4), (4, 8), np.int32, "tuned")]
    for (sa, sb, dtype, origin) in cases:
        a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
        with tracing.capture() as spans:
            got = (ember.tensor(a, device=dev) @ ember.tensor(b, device=dev)).numpy()
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
        (span,) = [s for s in spans if s.name == "autotune"]
        assert span.fields["origin"] == origin, (sa, sb, dtype)
        if origin == "trivial":
            assert span.fields["winner"] == "numpy"
            assert not [s for s in spans if s.name in ("compile", "probe")]
    assert 32 * 64 * 128 <= TRIVIAL_WORK < 64 * 64 * 128


# ------------------------------------------------------------------------------ provisional decisions


def test_a_decision_tuned_under_load_is_provisional_and_retuned_when_quiet(monkeypatch):
    c = FakeClient()
    ts = toy_set("cold_load", [autotune.Tunable("a", worker("a", 1e-4)), autotune.Tunable("b", worker("b", 3e-4))])
    monkeypatch.setattr(decisions, "load_average", lambda: 7.5)
    autotune.execute(c, ts, 4, [])
    d = stored(ts, 4)
    assert d["provisional"] is True and d["load"] == 7.5 and d["cores"] == decisions.usable_cores()
    # the next process starts on a loaded machine: the provisional decision is reused
    autotune.forget()
    monkeypatch.setattr(decisions, "_quiet", [])
    calls: list[str] = []
    autotune.execute(c, ts, 4, calls)
    assert calls == ["a"] and decisions.quiet() is False
    # a process starting on a quiet machine tunes the key again, and the new record is trusted
    autotune.forget()
    monkeypatch.setattr(decisions, "_quiet", [])
    monkeypatch.setattr(decisions, "load_average", lambda: 0.5)
    calls.clear()
    autotune.execute(c, ts, 4, calls)
    assert set(calls) == {"a", "b"}
    d = stored(ts, 4)
    assert d["provisional"] is False and d["load"] == 0.5
    # within that process the decision stays: the load rising later changes nothing
    monkeypatch.setattr(decisions, "load_average", lambda: 9.0)
    autotune.forget()
    calls.clear()
    autotune.execute(c, ts, 4, calls)
    assert calls == ["a"]


def test_noisy_samples_make_a_decision_provisional():
    c = FakeClient()
    # b's repeats disagree by 3x (a busy core stalling some calls): the spread marks the decision
    ts = toy_set("cold_noise", [autotune.Tunable("a", worker("a", 9e-4)),
                                autotune.Tunable("b", worker("b", 1e-4, 3e-4, 1e-4, 3e-4))])
    autotune.execute(c, ts, 4, [])
    d = stored(ts, 4)
    assert d["winner"] == "b" and d["spread"] >= 2.5 and d["provisional"] is True
    steady = toy_set("cold_steady", [autotune.Tunable("a", worker("a", 9e-4)),
                                     autotune.Tunable("b", worker("b", 1e-4))])
    autotune.execute(c, steady, 4, [])
    assert stored(steady, 4)["provisional"] is False and stored(steady, 4)["spread"] == 1.0


def test_records_without_a_load_are_provisional_and_the_switch_turns_retuning_off():
    c = FakeClient()
    ts = toy_set("cold_old", [autotune.Tunable("a", worker("a", 1e-4)), autotune.Tunable("b", worker("b", 3e-4))])
    autotune.execute(c, ts, 4, [])
    key = ts.key(keys.level(), 4, None)
    ns = decisions.namespace(FakeClient.device_id, ts.name)
    old = {k: v for k, v in stored(ts, 4).items() if k not in ("load", "cores", "spread", "provisional")}
    old["winner"] = "b"  # an earlier session's choice, measured who knows how
    store.get_store().put_json(ns, decisions.entry_key(ts, keys.level().name, key), old)
    assert decisions.provisional(old)
    with config.override({"autotune.retune_provisional": False}):
        autotune.forget()
        calls: list[str] = []
        autotune.execute(c, ts, 4, calls)
        assert calls == ["b"]  # reused as it is
    autotune.forget()
    calls = []
    autotune.execute(c, ts, 4, calls)  # quiet process: tuned again
    assert set(calls) == {"a", "b"} and stored(ts, 4)["winner"] == "a"


def test_quiet_is_judged_once_per_process(monkeypatch):
    loads = iter([0.1, 50.0])
    monkeypatch.setattr(decisions, "load_average", lambda: next(loads))
    assert decisions.quiet() is True and decisions.quiet() is True


# ------------------------------------------------------------------------------ queue cut points


def test_a_loop_longer_than_the_queue_is_cut_at_repeating_points():
    dev = Device.lazy_flex()
    f = fusion_of(dev)
    saved = f.queue_limit, f.cut_from, f.cut_window
    # a 7-op step against a 40-op limit: cut at the limit, the drains would start at 7 offsets
    f.queue_limit, f.cut_from, f.cut_window = 40, 20, stream_module.cut_window(40)
    lengths: list[int] = []
    orig = stream_module.Stream.drain

    def drain(self: Any) -> None:
        if self.ops:
            lengths.append(len(self.ops))
        orig(self)

    try:
        stream_module.Stream.drain = drain  # type: ignore[method-assign]
        x = ember.zeros(4, device=dev)
        x.numpy()
        searches = f.stats.searches
        ref = np.zeros(4)
        for _ in range(120):
            x = ((x * 0.5 + 1.0).sin() * 0.25 + 0.5).cos() * 2.0
            ref = np.cos(np.sin(ref * 0.5 + 1.0) * 0.25 + 0.5) * 2.0
        out = x.numpy()
    finally:
        stream_module.Stream.drain = orig  # type: ignore[method-assign]
        f.queue_limit, f.cut_from, f.cut_window = saved
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    assert all(n <= 40 for n in lengths) and len(lengths) > 10
    assert f.stats.searches - searches <= 4  # the first drain, the read's, and at most a two-phase cycle
    assert len(set(lengths[1:-1])) <= 2


def test_cut_codes_are_the_same_in_every_process():
    ops = [("add", (4,)), ("matmul", (32, 128)), ("relu", (2, 3, 5))]
    here = [stream_module._op_code(op, shape) for op, shape in ops]
    code = ("import json; from ember.backends.fusion import stream as s; "
            f"print(json.dumps([s._op_code(o, tuple(sh)) for o, sh in {json.dumps(ops)}]))")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == here


# ------------------------------------------------------------------------------ drain preparation


def test_a_new_plan_compiles_its_kernels_together_before_it_runs(private_store, monkeypatch):
    # programs no other test builds (a random chain of unary ops), so their kernels are new here;
    # earlier tests on this thread's stream may have paused preparing (plans that compiled nothing)
    from ember.backends.fusion import stream as fusion_stream

    monkeypatch.setattr(fusion_stream, "_PREPARE_IDLE", 1 << 30)
    rng = np.random.default_rng()
    names = ["sin", "cos", "tanh", "exp", "abs", "neg", "sigmoid"]
    chains = [list(rng.choice(names, 7)) for _ in range(3)]
    dev = Device.cpu()
    xs = [rng.random((4 + i, 8)).astype(np.float32) for i in range(3)]
    ts = [ember.tensor(x, device=dev) for x in xs]
    ember.sync(dev)
    w = ember.tensor(rng.standard_normal((8, 8)).astype(np.float32), device=dev)
    with tracing.capture() as spans:
        outs = []
        for t, chain in zip(ts, chains):
            for op in chain:
                t = getattr(t, op)()
            outs.append(t @ w)  # a trivial product: decided at once, also while preparing
        got = [o.numpy() for o in outs]
    for x, chain, g in zip(xs, chains, got):
        ref = x.astype(np.float64)
        for op in chain:
            ref = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "neg": np.negative}.get(op, getattr(np, op, None))(ref)
        np.testing.assert_allclose(g, ref @ w.numpy(), rtol=1e-4, atol=1e-5)
    compiled = [s for s in spans if s.name == "compile" and not s.fields.get("cached")]
    fused = [s for s in compiled if "fused" in s.fields["kernel"]]
    assert len(fused) >= 3 and all(s.fields.get("deferred") for s in fused)
    # each prepared compile started before the first launch that ran
    first_run = min(s.start for s in spans if s.name == "launch")  # prepared launches open none
    assert all(s.start < first_run for s in fused)


def test_a_new_key_inside_a_prepared_drain_tunes_in_the_real_run(private_store):
    rng = np.random.default_rng()
    dev = Device.cpu()
    a = rng.standard_normal((96, 160)).astype(np.float32)
    b = rng.standard_normal((160, 136)).astype(np.float32)
    ta, tb = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
    ember.sync(dev)
    with tracing.capture() as spans:
        got = ((ta * 2.0).tanh() @ tb + 1.0).numpy()
    np.testing.assert_allclose(got, np.tanh(a * 2.0).astype(np.float64) @ b + 1.0, rtol=1e-4, atol=1e-4)
    assert [s for s in spans if s.name == "autotune" and s.fields.get("origin") == "tuned"]
    # timed with launches that ran (a preparation's launches run nothing: microseconds)
    timed = [c["median_s"] for _, _, d in decisions.all_decisions() for c in d["candidates"] if "median_s" in c]
    assert timed and min(timed) > 2e-5, timed
