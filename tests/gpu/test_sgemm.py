"""The hand-written float32 SGEMM (``cuda_sgemm``) on a real GPU: every tile shape of the sweep
against float64 numpy on fresh random inputs, outputs poisoned with NaN so an unwritten element
fails; batches at a stride and broadcast; the candidate's fallback to ``matmul_gpu`` on shapes
the blocks do not divide. Skipped without a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backends.cube.cuda_kernels import sgemm as S
from ember.cube.runtime.tensor import CubeTensor

from .tensors import get, put

ALL_TILES = tuple(dict.fromkeys(S.SGEMM_TILES + S.SGEMM_SWEEP))


def check(got: np.ndarray, want: np.ndarray) -> None:
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} of {got.size} outputs unwritten (NaN)"
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert rel < 1e-5, rel  # float32 sums in another order than float64's


def randn(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("tiles", ALL_TILES, ids=lambda t: t.name)
def test_every_tile_matches_numpy(cuda_client, rng, tiles):
    m, n, k = 2 * tiles.bm, 3 * tiles.bn, 40 * tiles.bk
    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    ta, tb = put(cuda_client, a), put(cuda_client, b)
    out = put(cuda_client, np.full((m, n), np.nan, np.float32))
    assert S.supports(ta, tb, out, tiles)
    S.matmul_sgemm(cuda_client, ta, tb, out, tiles)
    check(get(cuda_client, out), a.astype(np.float64) @ b.astype(np.float64))


def test_batched_and_broadcast(cuda_client, rng):
    tiles = S.SGEMM_TILES[0]
    batch, m, n, k = 3, tiles.bm, 3 * tiles.bn, 5 * tiles.bk
    a, b = randn(rng, (batch, m, k)), randn(rng, (k, n))
    ta, tb = put(cuda_client, a), put(cuda_client, b)
    tb = CubeTensor(cuda_client, tb.buffer, (batch, k, n), (0, n, 1), 0, tb.dtype)  # broadcast B
    out = put(cuda_client, np.full((batch, m, n), np.nan, np.float32))
    assert S.supports(ta, tb, out, tiles)
    S.matmul_sgemm(cuda_client, ta, tb, out, tiles)
    check(get(cuda_client, out), a.astype(np.float64) @ b.astype(np.float64))


def test_4096(cuda_client, rng):
    tiles = S.SGEMM_TILES[0]
    a, b = randn(rng, (4096, 4096)), randn(rng, (4096, 4096))
    ta, tb = put(cuda_client, a), put(cuda_client, b)
    out = put(cuda_client, np.full((4096, 4096), np.nan, np.float32))
    S.matmul_sgemm(cuda_client, ta, tb, out, tiles)
    got = get(cuda_client, out)
    rows = rng.choice(4096, 64, replace=False)  # a sample of rows: the f64 product of all is slow
    check(got[rows], a[rows].astype(np.float64) @ b.astype(np.float64))


def test_candidate_falls_back_on_ragged_shapes(cuda_client, rng):
    from types import SimpleNamespace

    m, n, k = 200, 136, 60  # no block divides these
    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    ta, tb = put(cuda_client, a), put(cuda_client, b)
    out = put(cuda_client, np.full((m, n), np.nan, np.float32))
    assert not S.supports(ta, tb, out, S.SGEMM_TILES[0])
    from ember.backends.cube import matmul as MM

    MM._sgemm_tunables()[0].fn(SimpleNamespace(client=cuda_client), ta, tb, out)
    check(get(cuda_client, out), a.astype(np.float64) @ b.astype(np.float64))
