"""Datasets and callbacks the worker tests send to DataLoader workers.

They live in a module of their own, importable from the workers (pytest puts tests/data on
sys.path and the workers inherit it), that imports only numpy and ember: a worker that
unpickles them imports this module, not pytest and the test files.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np

import ember
from ember.utils.data import Dataset, IterableDataset, get_worker_info


class Indexed(Dataset):
    """Sample ``i`` is ``{"i": i, "x": float32 row of i's, "pid": worker pid}``."""

    def __init__(self, n: int, fail_at: int | None = None, delay: float = 0.0) -> None:
        self.n, self.fail_at, self.delay = n, fail_at, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        if self.delay:
            time.sleep(self.delay)
        if i == self.fail_at:
            raise ValueError(f"sample {i} is broken")
        return {"i": i, "x": np.full(3, i, np.float32), "pid": os.getpid()}


class Seeds(Dataset):
    """Sample ``i``: the worker's id and seed and one draw from each seeded generator, as
    numbers the main process compares (numpy's, Python's and ember's global streams)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> tuple:
        info = get_worker_info()
        return (info.id, info.seed, float(np.random.rand()), random.random(), float(ember.rand(1).item()),
                INIT_CALLS.get(info.id, 0))


#: worker id -> times ``record_init`` ran in this process
INIT_CALLS: dict[int, int] = {}


def record_init(worker_id: int) -> None:
    """A worker_init_fn that leaves a trace the dataset reports."""
    INIT_CALLS[worker_id] = INIT_CALLS.get(worker_id, 0) + 1


class Stream(IterableDataset):
    """``range(n)``, sharded across workers by ``get_worker_info`` (interleaved), with the
    worker id of each sample."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for v in range(start, self.n, step):
            yield v, -1 if info is None else info.id


def pid_of(_: int) -> int:
    return os.getpid()


class Pids(Dataset):
    """Sample ``i`` is ``(i, pid)``; sleeps ``delay`` seconds first."""

    def __init__(self, n: int, delay: float = 0.0) -> None:
        self.n, self.delay = n, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        if self.delay:
            time.sleep(self.delay)
        return i, os.getpid()


def tuple_collate(batch: list) -> tuple:
    """A user collate_fn that runs ember ops in the worker (Flex there)."""
    xs = ember.stack([ember.from_numpy(np.asarray(b[0], np.float32)) for b in batch])
    return xs * 2, [int(b[1]) for b in batch]
