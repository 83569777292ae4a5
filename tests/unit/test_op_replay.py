"""Op replay (``backends.cube.op_replay``): from the third call of an op with one
argument signature, its launches run from a capture. Fresh data on every call, checked
against float64 numpy, so stale buffers, stale scalars or a wrong layout fail. Runs on the
CPU device and on CUDA where one starts."""

from __future__ import annotations

import numpy as np
import pytest
from replay_helpers import devices, rand

import ember
from ember import Device


@pytest.fixture(params=devices())
def dev(request: pytest.FixtureRequest) -> Device:
    return Device.cpu(fusion=False) if request.param == "cpu" else Device.cuda(fusion=False)


def test_ops_replay_with_fresh_values(dev: Device) -> None:
    rng = np.random.default_rng()
    for _ in range(5):
        x, y = rand(rng, 33), rand(rng, 33)
        a, b = ember.tensor(x, device=dev), ember.tensor(y, device=dev)
        xd, yd = x.astype(np.float64), y.astype(np.float64)
        np.testing.assert_allclose((a + b).numpy(), xd + yd, rtol=1e-6, atol=1e-6)
        assert (a * b).sum().item() == pytest.approx(float((xd * yd).sum()), rel=1e-4, abs=1e-4)
        np.testing.assert_allclose(a.exp().numpy(), np.exp(xd), rtol=1e-5)
        np.testing.assert_allclose(ember.where(a > b, a, b).numpy(), np.maximum(xd, yd), rtol=1e-6)


def test_scalar_values_and_types_key_the_replay(dev: Device) -> None:
    rng = np.random.default_rng()
    xi = rng.integers(-50, 50, 16)
    x = rand(rng, 16)
    ai, a = ember.tensor(xi, device=dev), ember.tensor(x, device=dev)
    for s in (2, 2, 2, 3, 3, 3, 2, 2):
        np.testing.assert_array_equal((ai * s).numpy(), xi * s)
        np.testing.assert_allclose((a * float(s)).numpy(), x.astype(np.float64) * s, rtol=1e-6)
    for s in (-0.0, -0.0, -0.0, 0.0, 0.0, 0.0, -0.0):
        z = (a.abs() * s).numpy()
        assert np.array_equal(np.signbit(z), np.signbit(np.abs(x) * np.float32(s)))


def test_layouts_and_shared_buffers_key_the_replay(dev: Device) -> None:
    rng = np.random.default_rng()
    for i in range(12):
        x, y = rand(rng, 8, 8), rand(rng, 8, 8)
        t, u = ember.tensor(x, device=dev), ember.tensor(y, device=dev)
        kind = i % 3
        if kind == 0:
            a, b, ar, br = t[:4], u[4:], x[:4], y[4:]
        elif kind == 1:
            a, b, ar, br = t[:4], t[4:], x[:4], x[4:]  # one buffer
        else:
            a, b, ar, br = t.T[:4], u[4:], x.T[:4], y[4:]  # strided
        np.testing.assert_allclose((a - b).numpy(), ar.astype(np.float64) - br, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a.sum(1).numpy(), ar.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_tuple_results_and_later_results_stay_intact(dev: Device) -> None:
    rng = np.random.default_rng()
    kept = []
    for _ in range(5):
        x = rand(rng, 6, 7)
        a = ember.tensor(x, device=dev)
        m = a.max(1)
        np.testing.assert_allclose(m.values.numpy(), x.max(1), rtol=0)
        np.testing.assert_array_equal(m.indices.numpy(), x.argmax(1))
        s = a.softmax(-1)
        kept.append((s, s.numpy().copy()))
    for s, v in kept:  # a replay writes into buffers of its own
        np.testing.assert_array_equal(s.numpy(), v)


def test_matmul_replays_per_precision(dev: Device) -> None:
    rng = np.random.default_rng()
    try:
        for prec in ("highest", "highest", "highest", "high", "high", "high", "highest"):
            ember.set_float32_matmul_precision(prec)
            x, w = rand(rng, 16, 32), rand(rng, 32, 8)
            got = (ember.tensor(x, device=dev) @ ember.tensor(w, device=dev)).numpy()
            tol = 1e-5 if prec == "highest" else 5e-3
            np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=tol, atol=tol * 10)
    finally:
        ember.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("fusion", [False, True])
def test_threads_capture_and_replay_side_by_side(dev: Device, fusion: bool) -> None:
    """Several threads run the same ops at once (captures and replays interleaved on one
    device): every result matches its own inputs."""
    import threading

    d = Device.cpu(fusion=fusion) if dev == Device.cpu(fusion=False) else Device.cuda(fusion=fusion)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(30):
                x, y = rand(rng, 24), rand(rng, 24)
                a, b = ember.tensor(x, device=d), ember.tensor(y, device=d)
                got = ((a * 2.0 + b).exp() * 0.5).numpy()
                np.testing.assert_allclose(got, np.exp(x.astype(np.float64) * 2 + y) * 0.5, rtol=1e-5)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
