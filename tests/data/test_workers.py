"""DataLoader worker processes: order, coverage, seeding, sharding, failures, shutdown.

Worker start-up is the expensive part (the forkserver starts once per test process, then each
loader's workers fork from it), so the tests are few and the datasets tiny. Every test runs
under an alarm: a hang fails the test instead of the CI run.
"""

from __future__ import annotations

import os
import signal
import time

import loader_helpers as H
import numpy as np
import pytest

import ember
from ember import Device
from ember.utils import data as eud


@pytest.fixture(autouse=True)
def alarm():
    def fire(signum, frame):
        raise TimeoutError("the DataLoader test hung")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(90)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _ids(batches):
    return [int(v) for b in batches for v in b["i"].numpy()]


def test_order_coverage_and_persistent_workers():
    ds = H.Indexed(23)
    ref = eud.DataLoader(ds, batch_size=5, shuffle=True, generator=4)
    dl = eud.DataLoader(ds, batch_size=5, shuffle=True, generator=4, num_workers=2, persistent_workers=True)
    got = list(dl)  # batches in sampler order: those of the main-process loader
    want = list(ref)
    assert _ids(got) == _ids(want) and sorted(_ids(got)) == list(range(23))
    for a, b in zip(got, want):
        assert a["x"].dtype == b["x"].dtype == ember.float32 and a["x"].shape == b["x"].shape
        np.testing.assert_array_equal(a["x"].numpy(), b["x"].numpy())
    # a second epoch on the same two processes (persistent workers draw no new base seed, as
    # torch's, so the order is not the one of a new main-process iterator: only coverage)
    again = list(dl)
    assert sorted(_ids(again)) == list(range(23)) and _ids(again) != _ids(got)
    pids = [{int(p) for b in e for p in b["pid"].numpy()} for e in (got, again)]
    assert len(pids[0]) == 2 and pids[0] == pids[1] and os.getpid() not in pids[0]
    # drop_last, not persistent, another seed: a different order, each kept sample once
    dl2 = eud.DataLoader(ds, batch_size=5, shuffle=True, generator=5, num_workers=2, drop_last=True)
    ids2 = _ids(dl2)
    assert len(ids2) == 20 and len(set(ids2)) == 20 and ids2 != _ids(list(ref))[:20]
    assert ids2 == _ids(eud.DataLoader(ds, batch_size=5, shuffle=True, generator=5, drop_last=True))


def test_iterable_dataset_sharding_and_out_of_order():
    got = list(eud.DataLoader(H.Stream(23), batch_size=4, num_workers=2))
    values = [int(v) for b in got for v in b[0].numpy()]
    workers = {int(w) for b in got for w in b[1].numpy()}
    assert sorted(values) == list(range(23)) and workers == {0, 1}
    # each worker batches its own shard: 12 + 11 values in batches of 4 -> 3 + 3 batches
    assert len(got) == 6
    un = list(eud.DataLoader(H.Pids(10), batch_size=2, num_workers=2, in_order=False))
    assert sorted(int(v) for b in un for v in b[0].numpy()) == list(range(10))


def test_worker_error_names_worker_and_index():
    # through a Subset (random_split's output), which torch fetches with __getitems__
    dl = eud.DataLoader(eud.Subset(H.Indexed(12, fail_at=7), list(range(12))), batch_size=4, num_workers=2)
    with pytest.raises(ValueError) as e:
        list(dl)
    msg = str(e.value)
    assert "Caught ValueError in DataLoader worker process 1 while fetching sample index 7" in msg
    assert "batch of sample indices [4, 5, 6, 7]" in msg
    assert "Original Traceback (most recent call last)" in msg and "sample 7 is broken" in msg


def test_killed_worker_is_detected():
    dl = eud.DataLoader(H.Pids(60, delay=0.05), batch_size=2, num_workers=2)
    it = iter(dl)
    pid = int(next(it)[1][0])
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid {pid}\) is killed by signal"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 10


def test_seeds_and_worker_init_fn():
    def run(seed):
        dl = eud.DataLoader(H.Seeds(), batch_size=None, num_workers=2, worker_init_fn=H.record_init,
                            generator=seed)
        return [tuple(v.item() if isinstance(v, ember.Tensor) else v for v in s) for s in dl]

    a, b, c = run(9), run(9), run(10)
    assert a == b and a != c
    by_worker = {s[0]: s for s in a}
    assert set(by_worker) == {0, 1}
    assert by_worker[1][1] == by_worker[0][1] + 1  # seed = base_seed + worker id
    assert by_worker[0][2:5] != by_worker[1][2:5]  # numpy, random and ember streams differ per worker
    assert all(s[5] == 1 for s in a)  # worker_init_fn ran once in each worker


def test_cpu_device_tensors_with_workers():
    cpu = Device.cpu()
    x = ember.arange(24, dtype=ember.float32, device=cpu).reshape(12, 2) * 2  # starts the cpu runtime here
    x.sum().item()
    ds = eud.TensorDataset(x, ember.arange(12, device=cpu))
    got = list(eud.DataLoader(ds, batch_size=5, num_workers=2, device=cpu))
    assert [b[0].device for b in got] == [cpu] * 3
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in got]), np.arange(24).reshape(12, 2) * 2)
    pinned = list(eud.DataLoader(ds, batch_size=5, num_workers=1, device=cpu, pin_memory=True))
    assert [b[1].numpy().tolist() for b in pinned] == [b[1].numpy().tolist() for b in got]
    # without device= the batches are on ember's default device (a worker's batch is numpy)
    b = next(iter(eud.DataLoader(ds, batch_size=5, num_workers=1)))
    assert b[1].device == ember.get_default_device() and b[1].dtype == ember.int64
    # a user collate_fn runs ember ops in the worker (on Flex) and its tensors come back
    xs, ids = next(iter(eud.DataLoader(ds, batch_size=3, num_workers=1, collate_fn=H.tuple_collate)))
    np.testing.assert_array_equal(xs.numpy(), np.arange(6).reshape(3, 2) * 4)
    assert ids == [0, 1, 2]


def test_timeout_and_shutdown_on_break():
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
        next(iter(eud.DataLoader(H.Pids(4, delay=1.0), batch_size=1, num_workers=1, timeout=0.3)))
    it = iter(eud.DataLoader(H.Pids(100), batch_size=2, num_workers=2))
    pids = {int(next(it)[1][0]), int(next(it)[1][0])}
    procs = list(it._workers)
    assert {p.pid for p in procs} == pids
    del it  # as a loop break drops the iterator
    deadline = time.monotonic() + 10
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in procs)


def test_unpicklable_collate_needs_fork():
    ds = H.Pids(4)
    with pytest.raises(Exception, match="receive the dataset, collate_fn and worker_init_fn pickled"):
        iter(eud.DataLoader(ds, batch_size=2, num_workers=1, collate_fn=lambda b: len(b),
                            multiprocessing_context="forkserver"))
    got = list(eud.DataLoader(ds, batch_size=2, num_workers=1, collate_fn=lambda b: len(b),
                              multiprocessing_context="fork"))
    assert got == [2, 2]


def test_default_start_method_is_fork_until_a_runtime_starts(monkeypatch):
    from ember.utils.data import dataloader as dl

    monkeypatch.setattr(dl, "_fork_is_safe", lambda: True)
    assert dl._default_context().get_start_method() == "fork"
    # a lambda collate needs no pickling then, as under torch
    assert list(eud.DataLoader(H.Pids(4), batch_size=2, num_workers=1, collate_fn=lambda b: len(b))) == [2, 2]
    monkeypatch.setattr(dl, "_fork_is_safe", lambda: False)
    assert dl._default_context().get_start_method() == "forkserver"


def test_fork_is_unsafe_once_a_non_flex_stack_exists(monkeypatch):
    from ember.backends import dispatch
    from ember.utils.data import dataloader as dl

    monkeypatch.setattr(dispatch, "_stacks", {ember.Device.flex().autodiff(): None})
    monkeypatch.setattr(dl.threading, "active_count", lambda: 1)
    assert dl._fork_is_safe()
    monkeypatch.setattr(dispatch, "_stacks", {ember.Device.flex(): None, ember.Device.cpu().autodiff(): None})
    assert not dl._fork_is_safe()
    monkeypatch.setattr(dispatch, "_stacks", {})
    monkeypatch.setattr(dl.threading, "active_count", lambda: 2)
    assert not dl._fork_is_safe()
