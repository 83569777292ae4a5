"""tf32 matmul on a real GPU: the mma.sync kernel (sm_80+) and the wgmma + TMA kernel (sm_90a,
with B's transpose) against float64 numpy on fresh random inputs, outputs poisoned with NaN,
ragged shapes, batches; then the public API under ``ember.set_float32_matmul_precision``.

Tolerances: tf32 keeps 10 mantissa bits of each operand. Against numpy on *tf32-rounded*
inputs only the f32 accumulation differs (tight); which rounding the tensor cores see is
per kernel (mma.sync rounds with ``cvt.rna``; wgmma reads the f32 bits, the hardware uses the
top 19), so the tight check takes the nearer of the two roundings and reports both. Against
the exact float32 product the error is the inputs' rounding (loose)."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from .tensors import get, put

TIGHT = 5e-5
LOOSE = 3e-3


@pytest.fixture(autouse=True)
def tf32_on():
    before = ember.get_float32_matmul_precision()
    ember.set_float32_matmul_precision("high")
    yield
    ember.set_float32_matmul_precision(before)


def _sm(client) -> int:
    from ember.cube.compiler.cuda import sm_number

    return sm_number(client.server.arch)


@pytest.fixture(scope="module")
def ampere(cuda_client):
    if _sm(cuda_client) < 80:
        pytest.skip(f"tf32 mma.sync needs sm_80+ (this device: {cuda_client.server.arch})")
    return cuda_client


@pytest.fixture(scope="module")
def hopper(cuda_client):
    if cuda_client.server.arch != "sm_90":
        pytest.skip(f"wgmma needs compute capability 9.0 (this device: {cuda_client.server.arch})")
    return cuda_client


def tf32_round(x: np.ndarray) -> np.ndarray:
    """Nearest, ties away from zero (``cvt.rna.tf32.f32``), as float64."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def tf32_trunc(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return (u & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    got = got.astype(np.float64)
    nan = np.isnan(got)
    assert not nan.any(), f"{int(nan.sum())} of {got.size} outputs unwritten (NaN), first at {np.argwhere(nan)[0]}"
    e_rna = rel(got, tf32_round(a) @ tf32_round(b))
    e_trunc = rel(got, tf32_trunc(a) @ tf32_trunc(b))
    e_exact = rel(got, a.astype(np.float64) @ b.astype(np.float64))
    assert min(e_rna, e_trunc) < TIGHT, (e_rna, e_trunc, e_exact)
    assert e_exact < LOOSE, (e_rna, e_trunc, e_exact)


def randn(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


# --------------------------------------------------------------------------- mma.sync
@pytest.mark.parametrize("m,n,k", [(128, 128, 16), (256, 384, 272), (512, 1024, 1024)])
def test_mma_tf32_matches_numpy(ampere, rng, m, n, k):
    from ember.backends.cube.cuda_kernels.mma import matmul_mma, supports

    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    ta, tb = put(ampere, a), put(ampere, b)
    out = put(ampere, np.full((m, n), np.nan, np.float32))
    assert supports(ta, tb, out, _sm(ampere))
    matmul_mma(ampere, ta, tb, out)
    check(get(ampere, out), a, b)


def test_mma_tf32_batch_candidate(ampere, rng):
    from ember.backends.cube.cuda_kernels.mma import candidate_launch, candidate_valid

    class _Backend:
        client = ampere

    m, k, n = 256, 64, 128
    a, b = randn(rng, (3, m, k)), randn(rng, (k, n))
    ta, tb = put(ampere, a), put(ampere, b)
    tb3 = tb.with_layout((3, k, n), (0, n, 1), 0)
    out = put(ampere, np.full((3, m, n), np.nan, np.float32))
    assert candidate_valid(ta, tb3)
    candidate_launch(_Backend, ta, tb3, out)
    got = get(ampere, out)
    for i in range(3):
        check(got[i], a[i], b)


# --------------------------------------------------------------------------- wgmma
@pytest.mark.parametrize("m,n,k", [(128, 256, 32), (200, 264, 72), (384, 1280, 1000), (8, 8, 8), (1160, 1800, 712)])
def test_wgmma_tf32_matches_numpy(hopper, rng, m, n, k):
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma, supports

    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    ta, tb = put(hopper, a), put(hopper, b)
    out = put(hopper, np.full((m, n), np.nan, np.float32))
    assert supports(ta, tb, out, 90)
    matmul_wgmma(hopper, ta, tb, out)
    check(get(hopper, out), a, b)


@pytest.mark.parametrize("bn", [256, 128])
@pytest.mark.parametrize("persistent", [False, True])
def test_wgmma_tf32_both_widths_both_grids_batched(hopper, rng, bn, persistent):
    """Each tile width with one block per tile and persistent blocks (the ring's phases run on
    across tiles); a batch of A with B batched (one transpose launch over the batch)."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    m, n, k, batch = 1160, 1800, 712, 2  # ragged; more tiles than multiprocessors
    a, b = randn(rng, (batch, m, k)), randn(rng, (batch, k, n))
    ta, tb = put(hopper, a), put(hopper, b)
    out = put(hopper, np.full((batch, m, n), np.nan, np.float32))
    W._launch_tf32(hopper, (W._addr(ta), m * k), (W._addr(tb), k * n), W._addr(out), m, n, k, batch, bn, persistent)
    got = get(hopper, out)
    for i in range(batch):
        check(got[i], a[i], b[i])


def test_wgmma_tf32_cluster_pairs(hopper, rng):
    """Clusters of 2 CTAs sharing B^T through TMA multicast (not the default config)."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    m, n, k = 1288, 1800, 712
    a, b = randn(rng, (m, k)), randn(rng, (k, n))
    ta, tb = put(hopper, a), put(hopper, b)
    out = put(hopper, np.full((m, n), np.nan, np.float32))
    src = W.wgmma_source(W.BN, W.STAGES, cluster=2, tf32=True)
    bt = W._transpose_b(hopper, (W._addr(tb), 0), k, n, 1)
    W._launch(hopper.server, (W._addr(ta), 0), (bt.ptr, 0), W._addr(out), 0, m, n, k, 1, "float32", "float32", src,
              W.BN, W.smem_bytes(), True, 2)
    check(get(hopper, out), a, b)


def test_wgmma_tf32_batches_shared_and_per_entry(hopper, rng):
    from ember.backends.cube.cuda_kernels.wgmma import _batch_step, candidate_launch, candidate_valid

    class _Backend:
        client = hopper

    m, k, n = 136, 96, 264
    a, b = randn(rng, (3, m, k)), randn(rng, (k, n))
    ta, tb = put(hopper, a), put(hopper, b)
    tb3 = tb.with_layout((3, k, n), (0, n, 1), 0)
    out = put(hopper, np.full((3, m, n), np.nan, np.float32))
    assert candidate_valid(ta, tb3)
    candidate_launch(_Backend, ta, tb3, out)
    got = get(hopper, out)
    for i in range(3):
        check(got[i], a[i], b)
    # batch dims that do not flatten: one transpose + product per entry
    a = randn(rng, (2, 1, m, k))
    b = randn(rng, (2, 3, k, n))
    ta = put(hopper, a).with_layout((2, 3, m, k), (m * k, 0, k, 1), 0)
    tb = put(hopper, b)
    assert _batch_step((2, 3), ta.strides[:2]) is None
    out = put(hopper, np.full((2, 3, m, n), np.nan, np.float32))
    candidate_launch(_Backend, ta, tb, out)
    got = get(hopper, out)
    for i in range(2):
        for j in range(3):
            check(got[i, j], a[i, 0], b[i, j])


def test_wgmma_tf32_8192_square(hopper, rng):
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma

    s = 8192
    a, b = randn(rng, (s, s)), randn(rng, (s, s))
    ta, tb = put(hopper, a), put(hopper, b)
    out = put(hopper, np.full((s, s), np.nan, np.float32))
    matmul_wgmma(hopper, ta, tb, out)
    got = get(hopper, out)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} outputs unwritten"
    rows = np.sort(rng.choice(s, 32, replace=False))
    check(got[rows], a[rows], b)


# --------------------------------------------------------------------------- public API
def _matmul_winners(precision: str) -> set[str]:
    from ember.autotune import tuner

    return {w.name for k, w in tuner._decisions.items() if k[1] == "matmul" and precision in k[4]}


def test_public_matmul_follows_the_switch(ampere, rng):
    from ember import Device

    dev = Device.cuda(fusion=False)
    a, b = randn(rng, (1024, 1024)), randn(rng, (1024, 1024))
    ta, tb = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
    got = np.asarray((ta @ tb).numpy())
    check(got, a, b)
    winners = _matmul_winners("tf32")
    assert winners and winners <= {"wgmma", "mma_sync"}, winners
    ember.set_float32_matmul_precision("highest")
    got = np.asarray((ta @ tb).numpy()).astype(np.float64)
    assert rel(got, a.astype(np.float64) @ b.astype(np.float64)) < 1e-5
    ieee = _matmul_winners("ieee")
    assert ieee and not ieee & {"wgmma", "mma_sync"}, ieee
