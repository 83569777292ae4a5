"""The horizontal fuser (independent elementwise chains of different shapes in one launch) and
the Cube backend's one-launch ``cat``: launches, values against float64 numpy, in-place reuse,
the cases that must not share a launch, and the device's binding limit (wgpu)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import Device, tracing
from ember.cube.runtime.client import max_arrays

CPU = Device.cpu()


@pytest.fixture(autouse=True)
def _empty_stream() -> None:
    """Ops another test left queued on the shared device would join the first drain here."""
    CPU.sync()


def _wgpu(fusion: bool = True) -> Device:
    from devices import device_cases

    case = next((c for c in device_cases() if c.name == "wgpu.cpu"), None)
    if case is None or case.unavailable:
        pytest.skip("wgpu.cpu is not selected or not available")
    from ember.device import DeviceKind

    return Device.wgpu(DeviceKind.cpu(), fusion=fusion)


@pytest.fixture(params=["cpu", "wgpu"])
def fused(request: pytest.FixtureRequest) -> Device:
    dev = CPU if request.param == "cpu" else _wgpu()
    ember.sync(dev)  # nothing another test left queued joins the drains here
    return dev


def _t(a: np.ndarray, dev: Device) -> ember.Tensor:
    t = ember.tensor(a, device=dev)
    ember.sync(dev)
    return t


def _launches(spans: list) -> int:
    return sum(1 for s in spans if s.name == "launch")


SHAPES = [(64, 33), (33,), (5000,), (7,), (), (16, 16)]


def test_chains_of_several_shapes_are_one_launch(fused: Device, rng: np.random.Generator) -> None:
    a = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    xs = [_t(x, fused) for x in a]
    c = _t(np.float32(0.5), fused)  # a 0-d scale broadcast into every segment
    with tracing.capture() as spans, ember.inspect_fusion(fused) as rec:
        outs = [((x * 2.0 + 1.0).sin() * c).relu() for x in xs]
        got = [o.numpy() for o in outs]
    assert [b.fuser for b in rec.blocks] == ["horizontal"]
    # 6 segments of 3 arrays (input, 0-d scale, output): one launch, unless the device binds
    # fewer arrays a kernel (wgpu: the adapter's storage-buffer limit less one; 15 on llvmpipe's
    # GL: two launches, 31 on lavapipe's Vulkan: one)
    budget = max_arrays(ember.cube.launch._client_of(fused))
    per_launch = 6 if budget is None else max(1, budget // 3)
    assert _launches(spans) == -(-6 // per_launch)
    for x, g in zip(a, got):
        want = np.maximum(np.sin(x.astype(np.float64) * 2 + 1) * 0.5, 0)
        np.testing.assert_allclose(g, want, rtol=2e-6, atol=2e-6)


def test_dependent_chains_do_not_share_a_launch(rng: np.random.Generator) -> None:
    """The second chain reads the first's result: they cannot run at the same time."""
    a, b = rng.standard_normal((40, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    x, y = _t(a, CPU), _t(b, CPU)
    with ember.inspect_fusion(CPU) as rec:
        s = (x * 2.0).exp()
        t = (y + s[0]) * 3.0  # shape (3,), reads s
        got_s, got_t = s.numpy(), t.numpy()
    assert "horizontal" not in [blk.fuser for blk in rec.blocks]
    e = np.exp(a.astype(np.float64) * 2.0)
    np.testing.assert_allclose(got_s, e, rtol=2e-6)
    # y + s[0] may cancel: an absolute bound at the operands' scale
    np.testing.assert_allclose(got_t, (b + e[0]) * 3.0, rtol=2e-6, atol=3e-6 * float(np.abs(e[0]).max() + 1))


def test_a_segment_with_a_broadcast_row_runs_on_its_own(rng: np.random.Generator) -> None:
    a, r, b = (rng.standard_normal(s).astype(np.float32) for s in ((50, 20), (20,), (300,)))
    x, row, y = _t(a, CPU), _t(r, CPU), _t(b, CPU)
    with tracing.capture() as spans, ember.inspect_fusion(CPU) as rec:
        u = (x + row) * 2.0
        v = (y * 3.0).tanh()
        got_u, got_v = u.numpy(), v.numpy()
    assert [blk.fuser for blk in rec.blocks] == ["horizontal"]
    assert _launches(spans) == 2  # the row-broadcast segment is its own fused kernel
    np.testing.assert_allclose(got_u, (a + r) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(got_v, np.tanh(b.astype(np.float64) * 3), rtol=2e-6, atol=1e-7)


def test_inputs_lend_their_buffers_unless_two_segments_read_them(rng: np.random.Generator) -> None:
    a, b = rng.standard_normal(1 << 13).astype(np.float32), rng.standard_normal(1 << 12).astype(np.float32)
    x = _t(a, CPU) * 1.0
    y = _t(b, CPU) * 1.0
    ember.sync(CPU)
    px, py = x._p.value.ptr, y._p.value.ptr
    x = (x + 1.0) * 2.0  # the old x and y are dropped at their last use: their buffers are lent
    y = (y - 1.0) * 2.0
    x.numpy()
    assert x._p.value.ptr == px and y._p.value.ptr == py
    np.testing.assert_allclose(x.numpy(), (a + 1) * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), (b - 1) * 2, rtol=1e-6)


def test_an_input_read_by_two_segments_is_never_written(rng: np.random.Generator) -> None:
    """``s`` is dropped at its last use in the second segment, but the first segment (running at
    the same time) reads it too: neither output may take its buffer."""
    a = rng.standard_normal(1 << 14).astype(np.float32)
    b = rng.standard_normal(1 << 13).astype(np.float32)
    s, r = _t(a, CPU) * 1.0, _t(b, CPU)
    ember.sync(CPU)
    ps = s._p.value.ptr
    with ember.inspect_fusion(CPU) as rec:
        big = (s * 2.0 + 1.0).exp()  # shape (16384,)
        small = (r + 0.5) * 3.0  # shape (8192,), does not read s
        s2 = s - 1.0  # back to shape (16384,): a third segment, s's last use
        del s
        got = big.numpy(), small.numpy(), s2.numpy()
    assert [blk.fuser for blk in rec.blocks] == ["horizontal"]
    assert big._p.value.ptr != ps and s2._p.value.ptr != ps
    np.testing.assert_allclose(got[0], np.exp(a.astype(np.float64) * 2 + 1), rtol=2e-6)
    np.testing.assert_allclose(got[1], (b + 0.5) * 3, rtol=1e-6)
    np.testing.assert_allclose(got[2], a - 1, rtol=1e-6, atol=1e-7)


def test_sign_chains_keep_their_lines_and_values(rng: np.random.Generator) -> None:
    """Lion's update (a sign in the chain) over several shapes: one launch, exact values."""
    a = [rng.standard_normal(s).astype(np.float32) for s in ((300, 40), (40,))]
    a[0][:5, :5] = 0.0
    xs = [_t(x, CPU) for x in a]
    with tracing.capture() as spans:
        outs = [(x * 0.9 + 0.1).sign() * -1e-3 + x for x in xs]
        got = [o.numpy() for o in outs]
    assert _launches(spans) == 1
    for x, g in zip(a, got):
        want = np.sign(x * np.float32(0.9) + np.float32(0.1)) * np.float32(-1e-3) + x
        np.testing.assert_array_equal(g, want)


# --------------------------------------------------------------------------- cat in one launch
@pytest.fixture(params=["cpu", "wgpu"])
def eager(request: pytest.FixtureRequest) -> Device:
    return Device.cpu(fusion=False) if request.param == "cpu" else _wgpu(fusion=False)


@pytest.mark.parametrize("shapes,dim", [
    ([(3, 4), (2, 4), (5, 4)], 0), ([(3, 4), (3, 1), (3, 0), (3, 7)], 1), ([(7,), (100,), (1,)], 0),
    ([(2, 3, 4), (2, 5, 4)], 1), ([(2, 3, 4), (2, 3, 1)], 2),
])
def test_cat_is_one_launch(eager: Device, rng: np.random.Generator, shapes: list, dim: int) -> None:
    a = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ts = [ember.tensor(x, device=eager) for x in a]
    with tracing.capture() as spans:
        r = ember.cat(ts, dim)
        got = r.numpy()
    np.testing.assert_array_equal(got, np.concatenate(a, dim))
    assert _launches(spans) == 1


def test_cat_of_strided_views_and_many_pieces(eager: Device, rng: np.random.Generator) -> None:
    a = rng.standard_normal((6, 5)).astype(np.float32)
    t = ember.tensor(a, device=eager)
    r = ember.cat([t.T, t[::2].T, t[1:3].T, t[:1].T.expand(5, 3)], 1)
    np.testing.assert_array_equal(r.numpy(), np.concatenate([a.T, a[::2].T, a[1:3].T, np.repeat(a[:1].T, 3, 1)], 1))
    x = ember.tensor(np.arange(40, dtype=np.int32), device=eager)
    with tracing.capture() as spans:
        r = ember.cat([x[i:i + 1] for i in range(40)], 0)
        got = r.numpy()
    np.testing.assert_array_equal(got, np.arange(40))
    # 32 pieces per launch (14 on wgpu: 15 bindings, one the output)
    from ember.cube.launch import _client_of
    from ember.cube.runtime.client import max_arrays

    limit = max_arrays(_client_of(eager))
    per = 32 if limit is None else min(32, limit - 1)
    assert _launches(spans) == -(-40 // per)
