"""Drain replay (``fusion.drain_replay`` over the Cube drain capturer): from the third drain of a
plan with one input layout and one set of scalar values, the launches run from a capture.
Every check compares against float64 numpy on fresh data per drain, so a replay that kept
stale buffers, stale scalars or a wrong layout fails. Runs on the CPU device, and on CUDA
where one starts (EMBER_TEST_REPLAY_CUDA=0 leaves it out)."""

from __future__ import annotations

import numpy as np
import pytest
from replay_helpers import devices, fusion_of, rand, replaying

import ember
from ember import Device
from ember.backends.fusion.drain_replay import NEVER, DrainReplay


@pytest.fixture(params=devices())
def dev(request: pytest.FixtureRequest) -> Device:
    return Device.cpu() if request.param == "cpu" else Device.cuda()


def test_round_trip_replays_with_fresh_values(dev: Device) -> None:
    f = replaying(dev)
    rng = np.random.default_rng()
    before = f.stats.replays
    for _ in range(6):
        x, y = rand(rng, 16), rand(rng, 16)
        a, b = ember.tensor(x, device=dev), ember.tensor(y, device=dev)
        got = (a + b).sum().item()
        assert got == pytest.approx(float((x.astype(np.float64) + y).sum()), rel=1e-5, abs=1e-5)
    assert f.stats.replays - before >= 3  # drains 3..6 at least (earlier tests may have warmed it)


def test_scalars_and_signed_zero_are_part_of_the_replay(dev: Device) -> None:
    rng = np.random.default_rng()
    x = rand(rng, 8)
    a = ember.tensor(x, device=dev)
    for s in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, -0.0, -0.0, 0.0, 0.0, -0.0):
        got = (a * s + 1.0).numpy()
        np.testing.assert_allclose(got, x.astype(np.float64) * s + 1.0, rtol=1e-6, atol=1e-6)
        zeros = (a.abs() * s).numpy()  # the sign of a zero product follows the scalar's
        assert np.array_equal(np.signbit(zeros), np.signbit(np.abs(x) * np.float32(s)))


def test_layouts_key_the_replay(dev: Device) -> None:
    """One op sequence on realised inputs of one shape but other strides or offsets (a
    transposed view, a slice at an offset, a contiguous tensor): each layout replays its own
    launches."""
    rng = np.random.default_rng()
    for _ in range(4):
        for kind in ("plain", "transposed", "slice"):
            x = rand(rng, 7, 6)
            t = ember.tensor(x, device=dev)
            if kind == "transposed":
                v, ref = t[:6].T, x[:6].T
            elif kind == "slice":
                v, ref = t[1:7], x[1:7]
            else:
                v, ref = t[:6], x[:6]
            v.numpy()  # realised: the view is the drain's input, its layout in the replay key
            got = (v.exp() * 2.0).sum(1).numpy()
            np.testing.assert_allclose(got, (np.exp(ref.astype(np.float64)) * 2).sum(1), rtol=1e-5)


def test_aliased_inputs_key_the_replay(dev: Device) -> None:
    """Two realised inputs on one buffer (halves of one tensor) or on two: the same key but
    for the buffer sharing."""
    rng = np.random.default_rng()
    for i in range(8):
        x, y = rand(rng, 64), rand(rng, 64)
        t, u = ember.tensor(x, device=dev), ember.tensor(y, device=dev)
        a, b = t[:32], (t[32:] if i % 2 else u[32:])
        a.numpy()
        b.numpy()
        br = x[32:] if i % 2 else y[32:]
        np.testing.assert_allclose((a * b - a).numpy(), x[:32].astype(np.float64) * br - x[:32], rtol=1e-5,
                                   atol=1e-6)


def test_in_place_last_uses_replay_into_the_new_buffers(dev: Device) -> None:
    """A dropped intermediate's buffer is written in place by the next op: a replay must write
    into this drain's buffer, never a captured one still held by an earlier result."""
    rng = np.random.default_rng()
    kept = []
    for _ in range(6):
        x = rand(rng, 64)
        a = ember.tensor(x, device=dev)
        y = ((a * 3.0).exp() + 1.0).sqrt()  # intermediates dropped: in-place candidates
        out = y.numpy()
        kept.append((y, out.copy()))
        np.testing.assert_allclose(out, np.sqrt(np.exp(x.astype(np.float64) * 3) + 1), rtol=1e-5)
    for y, out in kept:  # results of earlier replays are untouched by later ones
        np.testing.assert_array_equal(y.numpy(), out)


def test_several_outputs_and_views_as_results(dev: Device) -> None:
    rng = np.random.default_rng()
    for _ in range(5):
        x = rand(rng, 4, 8)
        a = ember.tensor(x, device=dev)
        s = a.sum(1, keepdim=True)
        r = a.reshape(8, 4)
        e = (a - s).exp()
        xd = x.astype(np.float64)
        np.testing.assert_allclose(e.numpy(), np.exp(xd - xd.sum(1, keepdims=True)), rtol=1e-5)
        np.testing.assert_allclose(s.numpy(), xd.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(r.numpy(), x.reshape(8, 4))


def test_dead_ops_are_not_run(dev: Device) -> None:
    f = fusion_of(dev)
    rng = np.random.default_rng()
    x = rand(rng, 16)
    a = ember.tensor(x, device=dev)
    a.exp()  # dropped at once: nothing will read it
    y = a + 1.0
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)
    assert [names for _, names in f.stats.last_blocks] == [["add_scalar"]] or all(
        "exp" not in names for _, names in f.stats.last_blocks)


def test_a_drain_with_an_upload_is_never_replayed(dev: Device) -> None:
    """Index ops whose indices hold negatives (wrapped by the kernel) and uploaded index
    tensors: the drain replays or runs normally, and stays correct every time."""
    f = replaying(dev)
    rng = np.random.default_rng()
    for _ in range(5):
        x = rand(rng, 10)
        idx = rng.integers(-10, 10, size=4)
        a = ember.tensor(x, device=dev)
        i = ember.tensor(idx, device=dev)
        got = (a * 2.0)[i].numpy()
        np.testing.assert_allclose(got, x[idx] * 2.0, rtol=1e-6)
    marks = [r for p in f.plans.values() if p.replays for r in p.replays.values()]
    assert NEVER in marks or any(type(r) is DrainReplay for r in marks)


def test_live_and_dropped_intermediates_replay_apart(dev: Device) -> None:
    """One op sequence, its intermediate kept on some drains and dropped on others: a dropped
    one may be overwritten in place by the next op, a kept one never (the dead handles are
    part of the fast replay's key)."""
    rng = np.random.default_rng()
    kept = []
    for i in range(12):
        x = rand(rng, 64)
        a = ember.tensor(x, device=dev)
        t = a * 3.0
        u = (t + 1.0).exp()
        if i % 3 == 0:
            out = u.numpy()
            kept.append((t, x.astype(np.float64) * 3))
        else:
            del t
            out = u.numpy()
        np.testing.assert_allclose(out, np.exp(x.astype(np.float64) * 3 + 1), rtol=1e-5)
    for t, ref in kept:
        np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6, atol=1e-6)


def test_inputs_queued_on_another_thread(dev: Device) -> None:
    """A tensor queued on another thread's stream is realised into this drain (an input of
    its signature like any realised tensor)."""
    import threading

    rng = np.random.default_rng()
    for _ in range(5):
        x, y = rand(rng, 16), rand(rng, 16)
        a = ember.tensor(x, device=dev)
        box = {}
        th = threading.Thread(target=lambda box=box, y=y: box.setdefault("t", ember.tensor(y, device=dev) * 2.0))
        th.start()
        th.join()
        got = (a + box["t"]).sum().item()
        assert got == pytest.approx(float(x.astype(np.float64).sum() + 2 * y.astype(np.float64).sum()),
                                    rel=1e-5, abs=1e-5)


def test_tuned_calls_replay_on_new_tensors(dev: Device) -> None:
    """Drains whose ops go through the tuner (a matmul with its epilogue, a long-row sum, a
    large elementwise op) replay the winner's call on the new drain's tensors: a result the
    call allocates (the sum's) becomes a slot of the replay."""
    f = replaying(dev)
    rng = np.random.default_rng()
    before = f.stats.replays
    for _ in range(5):
        x, w, b = rand(rng, 32, 48), rand(rng, 48, 16), rand(rng, 16)
        xt, wt, bt = (ember.tensor(v, device=dev) for v in (x, w, b))
        got = (xt @ wt + bt).relu().numpy()
        ref = np.maximum(x.astype(np.float64) @ w + b, 0)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        big = rand(rng, 64, 2048)
        bg = ember.tensor(big, device=dev)
        np.testing.assert_allclose(bg.sum(-1).numpy(), big.astype(np.float64).sum(-1), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose((bg * 2.0 - 1.0).numpy(), big.astype(np.float64) * 2 - 1, rtol=1e-6, atol=1e-6)
    assert f.stats.replays - before >= 6  # the three drains' replays from the third round on


def test_replays_hold_no_buffer_of_their_capture(dev: Device) -> None:
    """A capture's tensors (the drain's inputs, a fused matmul's bias) are not kept alive by
    the replay made from it: once their handles go, their memory returns to the pool."""
    import gc
    import weakref

    rng = np.random.default_rng()
    refs = []
    for _ in range(3):  # the second round is the one captured
        x, w, b = rand(rng, 16, 32), rand(rng, 32, 8), rand(rng, 8)
        xt, wt, bt = (ember.tensor(v, device=dev) for v in (x, w, b))
        out = (xt @ wt + bt).relu().numpy()
        np.testing.assert_allclose(out, np.maximum(x.astype(np.float64) @ w + b, 0), rtol=1e-4, atol=1e-4)
        refs.append([weakref.ref(t._p.value.buffer) for t in (xt, wt, bt)])
        del xt, wt, bt
    gc.collect()
    assert all(r() is None for round_refs in refs for r in round_refs)


def test_the_fusion_debug_log_names_plans_and_captures(capsys: pytest.CaptureFixture[str]) -> None:
    """The debug log's fusion category: each new plan with its blocks, each capture with its
    step count or the reason it cannot replay."""
    from ember.environment import config

    rng = np.random.default_rng()
    d = Device.cpu()
    with config.override({"debug.log": "stderr", "debug.log_categories": "fusion"}):
        scale = float(rng.uniform(1.5, 2.5))  # a value no earlier test drained with
        shift = float(rng.uniform(-4.0, -3.0))
        for _ in range(3):
            x = rand(rng, 13)
            a = ember.tensor(x, device=d)
            i = ember.tensor(rng.integers(0, 13, 3), device=d)
            (a * scale + shift).sum().item()
            (a * scale)[i].numpy()
        err = capsys.readouterr().err
    assert "drain [mul_scalar,add_scalar,sum] captured: 1 steps" in err
    # the index tensor is a realised input, checked by the index kernel on the device: the
    # error flags it reports in are a fixed slot of the capture (``capture.persist``)
    assert "drain [mul_scalar,index] captured: 2 steps" in err


def test_a_replayed_index_drain_checks_its_new_indices(rng: np.random.Generator) -> None:
    """A captured gather's replay checks the new index values (its kernel does, on the
    device): out of range raises at the read as the unreplayed drain does; negative ones
    wrap."""
    from ember.errors import IndexOutOfRangeError

    d = Device.cpu()
    f = replaying(d)
    scale = float(rng.uniform(1.5, 2.5))
    x = rand(rng, 4, 6)
    a = ember.tensor(x, device=d)
    before = f.stats.replays
    for _ in range(4):  # seen, captured, replayed
        idx = rng.integers(0, 6, (4, 2))
        got = (a * scale).gather(1, ember.tensor(idx, device=d)).numpy()
        np.testing.assert_allclose(got, np.take_along_axis(x * np.float32(scale), idx, 1), rtol=1e-6)
    assert f.stats.replays - before >= 2
    neg = -rng.integers(1, 7, (4, 2))
    got = (a * scale).gather(1, ember.tensor(neg, device=d)).numpy()
    np.testing.assert_allclose(got, np.take_along_axis(x * np.float32(scale), neg + 6, 1), rtol=1e-6)
    before = f.stats.replays
    with pytest.raises(IndexOutOfRangeError, match="gather: index 6 is out of bounds"):
        (a * scale).gather(1, ember.tensor(np.full((4, 2), 6), device=d)).numpy()
    assert f.stats.replays > before  # the replay's kernel reported it (no host check ran)
    got = (a * scale).gather(1, ember.tensor(idx, device=d)).numpy()  # raised once: clean again
    np.testing.assert_allclose(got, np.take_along_axis(x * np.float32(scale), idx, 1), rtol=1e-6)


def test_a_drain_whose_floats_change_replays_with_them(rng: np.random.Generator) -> None:
    """Adam's bias corrections change every step: the drain replays with the new values written
    into its captured launches (and a value that stayed fixed while capturing, here the
    multiplier, takes the ordinary path when it changes)."""
    d = Device.cpu()
    f = replaying(d)
    x = rand(rng, 64)
    a = ember.tensor(x, device=d)
    mul = float(rng.uniform(2.0, 3.0))
    before = f.stats.replays
    for t in range(1, 8):
        c = 1 - 0.9 ** t
        got = ((a / c) * mul + c).numpy()
        np.testing.assert_allclose(got, (x / np.float32(c)) * np.float32(mul) + np.float32(c), rtol=1e-6)
    assert f.stats.replays - before >= 3  # drains 4..7
    got = ((a / 0.5) * (mul + 1.0) + 0.5).numpy()
    np.testing.assert_allclose(got, (x / np.float32(0.5)) * np.float32(mul + 1.0) + np.float32(0.5), rtol=1e-6)


def test_changing_floats_replay_without_the_planning(rng: np.random.Generator,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a layout has its parametric replay, a drain whose signature differs from a replayed
    one in floats only (Adam's bias corrections, a scheduled learning rate) runs from it at once,
    with its floats patched in: no op records, no relative key (the fast path of ``drain``).
    Floats inside tuples (a clamp's bounds) and zeros (kept in the key with their sign) too."""
    from ember.backends.fusion import stream as stream_mod

    d = Device.cpu()
    f = replaying(d)
    x = rand(rng, 48)
    a = ember.tensor(x, device=d)

    def step(t: int) -> np.ndarray:
        c = 1 - 0.9 ** t
        return ((a / c) * 2.5 + c).clamp(-c * 40, c * 40).mul(0.0).add(a * c).numpy()

    def ref(t: int) -> np.ndarray:
        c = np.float32(1 - 0.9 ** t)
        y = np.clip((x / c) * np.float32(2.5) + c, np.float32(-(1 - 0.9 ** t) * 40), np.float32((1 - 0.9 ** t) * 40))
        return y * np.float32(0.0) + x * c

    for t in range(1, 6):
        np.testing.assert_allclose(step(t), ref(t), rtol=1e-6, atol=1e-6)
    calls = []
    real = stream_mod.operations
    monkeypatch.setattr(stream_mod, "operations", lambda records: calls.append(1) or real(records))
    before = f.stats.replays
    for t in range(6, 12):
        np.testing.assert_allclose(step(t), ref(t), rtol=1e-6, atol=1e-6)
    assert f.stats.replays - before == 6
    assert not calls  # every drain ran from the fast parametric path
    # a float the capture found fixed (the multiplier) changing: the ordinary path, still right
    got = (((a / 0.5) * 3.5 + 0.5).clamp(-20.0, 20.0).mul(0.0).add(a * 0.5)).numpy()
    np.testing.assert_allclose(got, np.clip(x / np.float32(0.5) * np.float32(3.5) + np.float32(0.5), -20, 20) * 0
                               + x * np.float32(0.5), rtol=1e-6, atol=1e-6)
    assert calls


def test_an_inline_call_records_its_launches(rng: np.random.Generator) -> None:
    """``capture.call(..., inline=True)`` (the tuner's own winners) records the launches the
    function made as the capture's steps, so the replay launches them on new buffers without
    calling it; a function that does what a replay cannot repeat (a sync, a vendor routine
    on the host) takes a call step instead, with the record as it was before the call."""
    from ember.cube.runtime import capture

    d = Device.cpu()
    cube = fusion_of(d).inner
    x = rand(rng, 40)
    t = cube.from_data(x, ember.float32)
    calls = []

    def own(u: object) -> object:
        calls.append(1)
        return cube.mul_scalar(cube.add(u, u), 3.0)

    with capture.Capture([t]) as c:
        out = capture.call(own, (t,), True)
    assert not c.failed and len(c.steps) == 2 and all(st[0] is not capture._CALL for st in c.steps)
    rep = c.replay([out])
    y = rand(rng, 40)
    (got,) = rep.run(cube.client, [cube.from_data(y, ember.float32)])
    np.testing.assert_allclose(cube.into_data(got), (y + y) * np.float32(3.0), rtol=1e-6)
    assert len(calls) == 1  # the replay launched, it did not call

    def syncing(u: object) -> object:
        calls.append(1)
        v = cube.add(u, u)
        capture.broken("a sync")
        return v

    with capture.Capture([t]) as c:
        out = capture.call(syncing, (t,), True)
    assert not c.failed and len(c.steps) == 1 and c.steps[0][0] is capture._CALL
    (got,) = c.replay([out]).run(cube.client, [cube.from_data(y, ember.float32)])
    np.testing.assert_allclose(cube.into_data(got), y + y, rtol=1e-6)
    assert len(calls) == 3
