"""Outputs written into donated input buffers, on every device.

A fused elementwise kernel with several outputs may write output k into the buffer of an input
that another output's expression still reads (the inputs are loaded before any store, per
unit). On wgpu every array parameter was its own WGSL binding, and naga's output (SPIR-V
without ``Aliased``, or GLSL) lets the driver assume distinct bindings never overlap, so
llvmpipe moved a load of an input past the store of the output that had taken its buffer:
AdamW's first step came back with one value everywhere and long queues of Lion steps went
wrong. Views of one buffer are now accessed through one binding
variable (``compiler/wgsl.py``); the C and CUDA targets drop ``restrict`` for them.

Also: a dropped input that is a broadcast (stride-0) view never lends its buffer.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import Device, cube


def _realised(a: np.ndarray, dev: Device) -> ember.Tensor:
    t = ember.tensor(a, device=dev)
    ember.sync(dev)
    return t


def test_outputs_written_into_each_others_inputs(device: Device, rng: np.random.Generator) -> None:
    """``m`` takes ``p``'s buffer and ``p`` takes ``m``'s, while ``p``'s new value still reads the
    old ``p`` (the handles are rebound, so both inputs are at their last use)."""
    a, b, c = (rng.standard_normal(37).astype(np.float32) for _ in range(3))
    p, g, m = (_realised(x, device) for x in (a, b, c))
    p = p * 0.5
    m = m + (g - m) * 0.1
    p = p + m * 2.0
    want_m = c + (b - c) * np.float32(0.1)
    np.testing.assert_allclose(m.numpy(), want_m, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(p.numpy(), a * np.float32(0.5) + want_m * np.float32(2.0), rtol=1e-6, atol=1e-7)


def test_adamw_first_step_over_fresh_zeros(autodiff_device: Device) -> None:
    """The reproduction from the optimizer tests: in-place updates under no_grad of a leaf and
    of a ``zeros()`` state tensor in one fused chain."""
    dev = autodiff_device
    a = np.arange(1, 5, dtype=np.float32)
    p = ember.tensor(a, device=dev, requires_grad=True)
    p.grad = ember.tensor(np.ones(4, np.float32), device=dev)
    m = ember.zeros(4, device=dev)
    ember.sync(dev)
    with ember.no_grad():
        g = p.grad
        p.copy_(p * 0.5)
        m.copy_(m + (g - m) * 0.1)
        p.copy_(p + m * 2.0)
    np.testing.assert_allclose(m.numpy(), np.full(4, 0.1, np.float32), rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), a * 0.5 + 0.2, rtol=1e-6)


def test_lion_steps_queued_until_the_queue_limit(autodiff_device: Device) -> None:
    """Thirty Lion steps queued without a read, drained by the queue limit (the reproduction
    from the optimizer tests): the live parameters and dropped temporaries of many steps meet
    in one drain, where outputs take each other's inputs' buffers."""
    dev = autodiff_device
    rng = np.random.default_rng(5)
    shapes = [(5, 4), (4,), (3, 2, 2)]
    ps = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ms = [np.zeros(s, np.float32) for s in shapes]
    ep = [ember.tensor(x, device=dev, requires_grad=True) for x in ps]
    opt = ember.optim.Lion(ep, lr=1e-3)
    f = np.float32
    for _ in range(30):
        gs = [(rng.standard_normal(s) * rng.choice([0.01, 1.0, 10.0])).astype(np.float32) for s in shapes]
        for p, g in zip(ep, gs):
            p.grad = ember.tensor(g, device=dev)
        opt.step()
        for i, g in enumerate(gs):  # the paper's update, in float32 as ember computes it
            ps[i] = ps[i] + np.sign(ms[i] * f(0.9) + g * f(1 - 0.9)) * f(-1e-3)
            ms[i] = ms[i] * f(0.99) + g * f(1 - 0.99)
    for p, want in zip(ep, ps):
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-6, atol=1e-7)
    for p, want in zip(ep, ms):
        np.testing.assert_allclose(opt.state[p]["exp_avg"].numpy(), want, rtol=1e-5, atol=1e-7)


def test_a_dropped_broadcast_view_never_lends_its_buffer(device: Device, rng: np.random.Generator) -> None:
    """``s.expand(...)`` is a stride-0 view of 1 element: written in place, every output element
    would land on one address. The source stays intact and the result is right."""
    a = rng.standard_normal((5, 8)).astype(np.float32)
    x = _realised(a, device)
    s = _realised(np.array([3.0], np.float32), device)
    v = s.expand(5, 8)
    y = (v + x) * 2.0
    z = y - v
    del v
    np.testing.assert_allclose(z.numpy(), (3.0 + a) * 2.0 - 3.0, rtol=1e-6)
    np.testing.assert_array_equal(s.numpy(), [3.0])


def test_a_chain_with_more_arrays_than_a_kernel_may_bind(device: Device, rng: np.random.Generator) -> None:
    """Sixteen inputs and several kept intermediates in one chain: more arrays than wgpu binds
    in one kernel (15 on lavapipe), so the fuser splits the block there (it used to fail to
    compile); the values are right everywhere."""
    xs = [rng.standard_normal(10).astype(np.float32) for _ in range(16)]
    ts = [_realised(x, device) for x in xs]
    acc, want = ts[0] * 1.0, xs[0].copy()
    kept, kept_want = [], []
    for k, (t, x) in enumerate(zip(ts[1:], xs[1:])):
        acc = acc + t * 0.5
        want = want + x * np.float32(0.5)
        if k % 3 == 0:
            kept.append(acc)
            kept_want.append(want.copy())
    np.testing.assert_allclose(acc.numpy(), want, rtol=1e-5, atol=1e-6)
    for t, w in zip(kept, kept_want):
        np.testing.assert_allclose(t.numpy(), w, rtol=1e-5, atol=1e-6)


@cube.kernel
def swap_into(a: cube.Array[cube.f32], b: cube.Array[cube.f32], x: cube.Array[cube.f32], y: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    if i < x.len():
        va = a[i]
        vb = b[i]
        x[i] = vb
        y[i] = va  # read before x[i] is stored, even where x is a's buffer


def test_wgsl_accesses_views_of_one_buffer_through_one_binding() -> None:
    """A kernel whose outputs sit on its inputs' buffers, crossed (``x`` on ``a``'s, ``y`` on
    ``b``'s): a swap. The WGSL reads and writes every view of one buffer through its first
    binding variable, so no driver may move ``a[i]``'s load past ``x[i]``'s store."""
    from devices import device_cases

    from ember.cube.launch import _client_of

    case = next((c for c in device_cases() if c.name == "wgpu.cpu"), None)
    if case is None or case.unavailable:
        pytest.skip("wgpu.cpu is not selected or not available")
    dev = Device.wgpu(ember.device.DeviceKind.cpu(), fusion=False)
    a0, b0 = np.arange(40, dtype=np.float32), -np.arange(40, dtype=np.float32) - 1
    a, b = ember.tensor(a0, device=dev), ember.tensor(b0, device=dev)
    swap_into.launch(dev, 1, 64, a, b, a, b)
    np.testing.assert_array_equal(a.numpy(), b0)
    np.testing.assert_array_equal(b.numpy(), a0)
    src = next(k.source.source for kid, k in _client_of(dev).server.pipelines.items() if "swap_into" in kid.kernel)
    body = src[src.index("@compute"):]
    assert "b_a[" in body and "b_b[" in body and "b_x[" not in body and "b_y[" not in body
