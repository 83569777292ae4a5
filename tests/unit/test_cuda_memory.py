"""The CUDA runtime's caching pool (``cuda_memory``) without a device: its inline reservation
and recycling keep the shared pool's size classes, reuse and counters (``runtime/pool.py``)."""

from __future__ import annotations

import gc

import numpy as np

from ember.cube.runtime.cuda_memory import CudaBuffer, CudaMemoryPool
from ember.cube.runtime.pool import size_class


def _pool() -> tuple[CudaMemoryPool, list[int], list[int]]:
    made: list[int] = []
    freed: list[int] = []

    def alloc(cap: int) -> int:
        made.append(cap)
        return 0x1000_0000 * len(made)

    return CudaMemoryPool(alloc, freed.append, lambda: None), made, freed


def test_reservations_take_the_shared_size_classes():
    pool, made, _ = _pool()
    rng = np.random.default_rng()
    sizes = [0, 1, 63, 64, 65, 4095, 4096, 4097, 1 << 20, (1 << 20) + 1, 3 * (1 << 21) - 1]
    sizes += [int(x) for x in rng.integers(1, 1 << 30, 200)]
    for n in sizes:
        b = pool._reserve(n)
        assert type(b) is CudaBuffer and b.nbytes == n and b.capacity == size_class(n) and b.pool is pool
        assert b.owner is None
        del b
    assert pool.reservations == len(sizes)


def test_a_dead_buffer_is_reused_by_the_next_reservation_of_its_class():
    pool, made, freed = _pool()
    b = pool._reserve(3000)
    ptr, cap = b.ptr, b.capacity
    del b
    gc.collect()
    assert pool.cached_bytes == cap and pool._free[cap] == [ptr]
    c = pool._reserve(cap - 10)  # same class
    assert c.ptr == ptr and pool.reuses == 1 and pool.cached_bytes == 0 and len(made) == 1
    d = pool._reserve(cap + 1000)  # another class: a new block
    assert d.ptr != ptr and len(made) == 2
    del c, d
    assert pool.release_cached() == cap + size_class(cap + 1000) and sorted(freed) == sorted(
        [ptr, 0x2000_0000])
