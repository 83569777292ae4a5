"""The Fusion decorator's lazy machinery, checked over the reference backend (flex.lazy):
registration, drains, plan cache, last-use statuses, threads, failures."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from replay_helpers import fusion_of

import ember
from ember import Device, tracing
from ember.backends.fusion import READ_ONLY, READ_WRITE
from ember.backends.fusion import stream as stream_module


@pytest.fixture
def dev() -> Device:
    d = Device.lazy_flex()
    d.sync()
    return d


def test_ops_only_register_until_a_read(dev: Device) -> None:
    x = ember.randn(64, device=dev)
    f = fusion_of(dev)
    before = len(f.stream().ops)
    with tracing.capture() as spans:
        y = (x * 2.0 + 1.0).sin() * (-x * x).exp()
        queued = len(f.stream().ops) - before
        n_spans = len(spans)
        out = y.numpy()
    assert queued == 7 and n_spans == 0  # nothing ran, nothing traced, until the read
    work = [s for s in spans if s.name != "into_data"]  # the read's own spans enclose the drain
    assert min(work, key=lambda s: s.start).name == "drain"
    assert "search" in [s.name for s in spans]
    xv = x.numpy().astype(np.float64)
    np.testing.assert_allclose(out, np.sin(xv * 2 + 1) * np.exp(-xv * xv), rtol=1e-5, atol=1e-6)
    assert not f.stream().ops


def test_identical_steps_search_once(dev: Device) -> None:
    f = fusion_of(dev)
    w = ember.randn(8, 4, device=dev)
    w.numpy()
    searches = f.stats.searches
    hits = f.stats.plan_hits
    for step in range(100):
        x = ember.full((2, 8), float(step), device=dev)
        y = (x @ w).relu().sum()
        y.item()
    assert f.stats.searches - searches == 1
    assert f.stats.plan_hits - hits == 99


def test_last_use_is_read_write_only_for_dropped_tensors(dev: Device, monkeypatch) -> None:
    made: list[list] = []  # the IR the drain makes of its records (it marks their statuses)

    def operations(records):
        made.append(real(records))
        return made[-1]

    real = stream_module.operations
    monkeypatch.setattr(stream_module, "operations", operations)
    x = ember.randn(16, device=dev)
    x.numpy()
    y = x * 2.0
    z = y + 1.0  # y still alive: read-only
    w = z * 3.0
    del z  # dropped before the drain: w's read of z is its last use
    w.numpy()
    (ops,) = made
    status = {o.op: o.status for o in ops}
    assert status["add_scalar"] == (READ_ONLY,)
    assert status["mul_scalar"] in ((READ_ONLY,), (READ_WRITE,))
    assert ops[-1].status == (READ_WRITE,)
    assert y.numpy().shape == (16,)


def test_each_thread_has_its_own_stream_and_shared_tensors_stay_correct(dev: Device) -> None:
    base = ember.arange(10, device=dev, dtype=ember.float32) * 1.0  # queued on this thread
    results: dict[str, list[float]] = {}

    def work(name: str, k: float) -> None:
        t = base * k + 1.0  # reads a tensor queued on another thread's stream
        results[name] = t.tolist()

    threads = [threading.Thread(target=work, args=(f"t{i}", float(i)), name=f"worker-{i}") for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(4):
        assert results[f"t{i}"] == [j * i + 1.0 for j in range(10)]


def test_queue_limit_drains(dev: Device) -> None:
    f = fusion_of(dev)
    limit = f.queue_limit
    x = ember.zeros(4, device=dev)
    drains = f.stats.drains
    for _ in range(limit + 5):
        x = x + 1.0
    assert f.stats.drains - drains >= 1
    assert len(f.stream().ops) < limit
    assert x.tolist() == [float(limit + 5)] * 4


def test_a_failing_block_is_named_and_other_results_survive(dev: Device) -> None:
    x = ember.arange(20, device=dev, dtype=ember.float32).reshape(4, 5)
    bad = ember.tensor([0, 9], device=dev) * 1  # queued: the range check cannot look at it
    r = x.gather(0, bad.reshape(1, 2))
    with pytest.raises(IndexError) as ei:
        r.numpy()
    assert any("queued block" in n and "gather" in n for n in getattr(ei.value, "__notes__", []))
    assert x.tolist() == np.arange(20.0).reshape(4, 5).tolist()
    with pytest.raises(ember.errors.EmberError, match="never computed"):
        r.numpy()


def test_backward_ops_are_registered_lazily_too() -> None:
    dev = Device.lazy_flex().autodiff()
    a = ember.randn(3, 4, device=dev, requires_grad=True)
    a.numpy()
    f = fusion_of(dev)
    loss = (a * a).sum()
    loss.backward()
    assert len(f.stream().ops) > 0  # the backward pass queued its ops
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy(), rtol=1e-6)


def test_names_and_repr() -> None:
    assert ember.backend_name(Device.lazy_flex()) == "dispatch<fusion<flex>>"
    assert ember.backend_name(Device.lazy_flex().autodiff()) == "dispatch<autodiff<fusion<flex>>>"
    assert repr(Device.lazy_flex()) == "Device<Fusion(Flex(Cpu))>"


@pytest.mark.parametrize("where", ["cpu", "lazy_flex"])
def test_structural_ints_are_part_of_the_plan_key(where: str) -> None:
    """Reductions over different dims of a square tensor have one output shape: a plan
    cached for one must not serve the other (dims and keepdim are structure, not values)."""
    d = Device.cpu() if where == "cpu" else Device.lazy_flex()
    rng = np.random.default_rng()
    x = rng.standard_normal((5, 5)).astype(np.float32)
    a = ember.tensor(x, device=d)
    ref = np.exp(x.astype(np.float64))
    for dim in (1, 0, -1, 0, 1):
        got = a.exp().sum(dim).numpy()
        np.testing.assert_allclose(got, ref.sum(dim), rtol=1e-5)
    for keepdim in (False, True, False):
        got = a.exp().sum(1, keepdim=keepdim).numpy()
        assert got.shape == ((5, 1) if keepdim else (5,))
        np.testing.assert_allclose(got, ref.sum(1, keepdims=keepdim), rtol=1e-5)
    for scale in (2.0, -3.0):  # float scalars stay runtime values of one plan
        terms = x.astype(np.float64) * scale
        # the terms cancel: float32 rounding is bounded by their magnitudes, not by the total
        np.testing.assert_allclose((a * scale).sum(1).numpy(), terms.sum(1), rtol=1e-5,
                                   atol=1e-6 * np.abs(terms).sum(1).max())


@pytest.mark.parametrize("where", ["cpu", "lazy_flex"])
def test_reads_from_another_thread_while_the_owner_registers(where: str) -> None:
    """One thread keeps registering ops on its stream while another reads its queued results
    (each read drains the owner's stream from the other thread): every value is right and
    nothing raises."""
    d = Device.cpu() if where == "cpu" else Device.lazy_flex()
    base = np.arange(64, dtype=np.float32) / 64
    a = ember.tensor(base, device=d)
    made: list[tuple[int, ember.Tensor]] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def owner() -> None:
        try:
            for i in range(1500):
                y = (a * float(i % 7) + 1.0).exp().log()  # stays queued until someone reads it
                made.append((i, y))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            done.set()

    def reader() -> None:
        try:
            k = 0
            while not done.is_set() or k < len(made):
                if k < len(made):
                    i, y = made[k]
                    np.testing.assert_allclose(y.numpy(), base * (i % 7) + 1.0, rtol=1e-4, atol=1e-4)
                    k += 5
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=owner), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("where", ["cpu", "lazy_flex"])
def test_views_of_realised_tensors_are_taken_at_once(where: str) -> None:
    """permute, expand, positive-step slices and reshapes of contiguous values of a realised
    tensor are views on the inner backend: taken at registration (no queued op, no drain), with
    the values numpy gives. A copying layout op (a negative step, a reshape of a transposed
    value on the cube backend) and a view of a queued tensor stay queued."""
    dev = Device.cpu() if where == "cpu" else Device.lazy_flex()
    f = fusion_of(dev)
    rng = np.random.default_rng()
    x = rng.standard_normal((6, 8)).astype(np.float32)
    w = ember.tensor(x, device=dev)
    w.numpy()  # realised
    queued = len(f.stream().ops)
    drains = f.stats.drains
    at_once = {
        "permute": (w.T, x.T),
        "slice": (w[1:5, ::2], x[1:5, ::2]),
        "expand": (w[None].expand(3, 6, 8), np.broadcast_to(x[None], (3, 6, 8))),
        "index": (w[2], x[2]),
        "reshape": (w.reshape(4, 12), x.reshape(4, 12)),
    }
    assert len(f.stream().ops) == queued, "a view of a realised tensor was queued"
    for name, (got, want) in at_once.items():
        assert got._p.value is not None, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    assert f.stats.drains == drains, "a view of a realised tensor drained"
    lazy = {
        "view of a queued tensor": ((w + 1.0).T, (x + 1.0).T),
        "reshape of a transposed value": (w.T.reshape(48), x.T.reshape(48)),
    }
    if where == "cpu":  # numpy takes negative steps as views: a queued copy on the cube backend only
        lazy["negative step"] = (w[::-1], x[::-1])
    for name, (got, _) in lazy.items():
        assert got._p.value is None, name  # (before any read: a read drains them all)
    for name, (got, want) in lazy.items():
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, err_msg=name)


def test_a_view_keeps_its_buffer_from_a_later_in_place_write() -> None:
    """A view taken at once shares the realised tensor's buffer. When that tensor's handle is
    gone, a queued op reading it last must not write its result into the shared buffer (the
    cube backend donates a buffer only when nothing else holds it)."""
    dev = Device.cpu()
    rng = np.random.default_rng()
    x = rng.standard_normal(4096).astype(np.float32)
    w = ember.tensor(x, device=dev)
    w.numpy()
    v = w[0:4000]  # (w[0:4096] would be w itself)
    assert v._p is not w._p and v._p.value is not None
    y = (w * 2.0).exp()
    del w
    np.testing.assert_allclose(y.numpy(), np.exp(x.astype(np.float64) * 2), rtol=1e-5)
    np.testing.assert_array_equal(v.numpy(), x[:4000])
