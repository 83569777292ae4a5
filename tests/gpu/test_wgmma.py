"""The Hopper tensor-core matmul (``cuda_wgmma``: wgmma + TMA, sm_90a) on a real GPU: every entry
against float64 numpy on fresh random inputs, outputs poisoned with NaN so an unwritten element
fails, ragged shapes (tile edges from TMA's zero fill), 8192², batches (one flattened launch and
the per-entry fallback). Skipped without a compute capability 9.0 device."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from .tensors import get, put


@pytest.fixture(scope="module")
def hopper(cuda_client):
    if cuda_client.server.arch != "sm_90":
        pytest.skip(f"wgmma needs compute capability 9.0 (this device: {cuda_client.server.arch})")
    return cuda_client


def randn(rng, shape, d) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(d.np)


def gelu(z: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * z * (1 + erf(z / np.sqrt(2)))


def check(got: np.ndarray, want: np.ndarray, out_np) -> None:
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} of {got.size} outputs unwritten (NaN)"
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    # f32 output: only the order of the f32 sums differs; 16-bit output: one rounding (2^-8 for bf16)
    assert rel < (1e-5 if out_np is np.float32 else 1e-2), rel


ENTRIES = [(out, bias) for out in ("float32", "same") for bias in (False, True) if not (bias and out == "float32")]


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
@pytest.mark.parametrize("out_kind,with_bias", ENTRIES)
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (200, 264, 72), (384, 1280, 1000), (8, 8, 8)])
def test_every_entry_matches_numpy(hopper, rng, name, out_kind, with_bias, m, n, k):
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma, supports

    d = ember.dtype.as_dtype(name)
    out_np = np.float32 if out_kind == "float32" else d.np
    a, b, bias = randn(rng, (m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
    ta, tb, tbias = put(hopper, a), put(hopper, b), put(hopper, bias)
    out = put(hopper, np.full((m, n), np.nan, out_np))
    assert supports(ta, tb, out, 90)
    matmul_wgmma(hopper, ta, tb, out, tbias if with_bias else None)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if with_bias:
        want = gelu(want + bias.astype(np.float64))
    check(get(hopper, out), want, out_np)


@pytest.mark.parametrize("name,out_kind,with_bias", [("bfloat16", "same", False), ("float16", "float32", False),
                                                     ("bfloat16", "same", True)])
def test_8192_square(hopper, rng, name, out_kind, with_bias):
    """Full size: every output written (NaN poison), 64 random rows against float64 numpy."""
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma

    d = ember.dtype.as_dtype(name)
    out_np = np.float32 if out_kind == "float32" else d.np
    s = 8192
    a, b, bias = randn(rng, (s, s), d), randn(rng, (s, s), d), randn(rng, s, d)
    ta, tb, tbias = put(hopper, a), put(hopper, b), put(hopper, bias)
    out = put(hopper, np.full((s, s), np.nan, out_np))
    matmul_wgmma(hopper, ta, tb, out, tbias if with_bias else None)
    got = get(hopper, out)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} outputs unwritten"
    rows = np.sort(rng.choice(s, 64, replace=False))
    want = a[rows].astype(np.float64) @ b.astype(np.float64)
    if with_bias:
        want = gelu(want + bias.astype(np.float64))
    check(got[rows], want, out_np)


def test_batches_one_launch_and_per_entry(hopper, rng):
    from ember.backends.cube.cuda_kernels.wgmma import _batch_step, candidate_launch, candidate_valid

    class _Backend:
        client = hopper

    d = ember.bfloat16
    m, k, n = 136, 96, 264
    # (3, m, k) @ (k, n) shared by the batch: one launch, B's batch step 0
    a = randn(rng, (3, m, k), d)
    b = randn(rng, (k, n), d)
    ta, tb = put(hopper, a), put(hopper, b)
    tb3 = tb.with_layout((3, k, n), (0, n, 1), 0)
    out = put(hopper, np.full((3, m, n), np.nan, d.np))
    assert candidate_valid(ta, tb3) and _batch_step((3,), (0,)) == 0
    candidate_launch(_Backend, ta, tb3, out)
    check(get(hopper, out), a.astype(np.float64) @ b.astype(np.float64), d.np)
    # (2, 1 -> 3, m, k): batch dims that do not flatten into one step: one launch per entry
    a = randn(rng, (2, 1, m, k), d)
    b = randn(rng, (2, 3, k, n), d)
    ta = put(hopper, a).with_layout((2, 3, m, k), (m * k, 0, k, 1), 0)
    tb = put(hopper, b)
    assert _batch_step((2, 3), ta.strides[:2]) is None
    out = put(hopper, np.full((2, 3, m, n), np.nan, np.float32))
    candidate_launch(_Backend, ta, tb, out)
    check(get(hopper, out), np.broadcast_to(a, (2, 3, m, k)).astype(np.float64) @ b.astype(np.float64), np.float32)


@pytest.mark.parametrize("staged", [False, True])
@pytest.mark.parametrize("bn", [256, 128])
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_both_tile_widths_both_grids(hopper, rng, bn, persistent, name, staged):
    """Each tile config the shape choice can pick, with one block per tile and with persistent
    blocks (several tiles per block: the ring's phases run on across tiles), then bias + GELU;
    ``staged``: the 16-bit outputs leave through the staged epilogue (drain warps)."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    d = ember.dtype.as_dtype(name)
    m, n, k, batch = 1160, 1800, 712, 2  # ragged; 160 (wide) or 300 (narrow) tiles: > 132 multiprocessors
    a, b, bias = randn(rng, (batch, m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
    ta, tb, tbias = put(hopper, a), put(hopper, b), put(hopper, bias)
    src, smem = W._CONFIGS[bn, staged]
    want = a.astype(np.float64) @ b.astype(np.float64)
    for out_np in (np.float32, d.np):
        out = put(hopper, np.full((batch, m, n), np.nan, out_np))
        out_name = ember.dtype.from_numpy_dtype(np.dtype(out_np)).name
        W._launch(hopper.server, (W._addr(ta), m * k), (W._addr(tb), 0), W._addr(out), 0, m, n, k, batch, name,
                  out_name, src, bn, smem, persistent)
        check(get(hopper, out), want, out_np)
    out = put(hopper, np.full((m, n), np.nan, d.np))
    W._launch(hopper.server, (W._addr(ta), 0), (W._addr(tb), 0), W._addr(out), W._addr(tbias), m, n, k, 1, name,
              name, src, bn, smem, persistent)
    check(get(hopper, out), gelu(want[0] + bias.astype(np.float64)), d.np)


def test_public_matmul_offers_wgmma_and_is_right(hopper, rng):
    """``a @ b`` in bf16 on ``Device.cuda()``: the autotuner's candidate list includes wgmma for
    the product (which candidate wins is the tuner's timing, not asserted), the result is right."""
    from ember import Device
    from ember.backends.cube.matmul import _wgmma_valid
    from ember.dlpack import _cube_primitive

    dev = Device.cuda(fusion=False)
    a = randn(rng, (2, 384, 520), ember.bfloat16)
    b = randn(rng, (520, 776), ember.bfloat16)
    ta, tb = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
    assert _wgmma_valid(dev.backend().inner, _cube_primitive(ta), _cube_primitive(tb), None)
    got = (ta @ tb).numpy()
    check(np.asarray(got), a.astype(np.float64) @ b.astype(np.float64), ember.bfloat16.np)


@pytest.mark.parametrize("staged", [False, True])
@pytest.mark.parametrize("persistent", [False, True])
def test_cluster_pairs_sharing_b(hopper, rng, persistent, staged):
    """Clusters of 2 CTAs (B multicast to both, stages released by the consumers of both):
    an odd number of block rows (the last pair's second tile lies wholly outside M), a batch,
    then bias + GELU."""
    from ember.backends.cube.cuda_kernels import wgmma as W

    d = ember.bfloat16
    m, n, k, batch = 1288, 1800, 712, 2
    a, b, bias = randn(rng, (batch, m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
    ta, tb, tbias = put(hopper, a), put(hopper, b), put(hopper, bias)
    stages = W.STAGES_STAGED if staged else W.STAGES
    src, smem = W.wgmma_source(W.BN, stages, cluster=2, staged=staged), W.smem_bytes(W.BN, stages, staged)
    want = a.astype(np.float64) @ b.astype(np.float64)
    out = put(hopper, np.full((batch, m, n), np.nan, np.float32))
    W._launch(hopper.server, (W._addr(ta), m * k), (W._addr(tb), 0), W._addr(out), 0, m, n, k, batch, "bfloat16",
              "float32", src, W.BN, smem, persistent, 2)
    check(get(hopper, out), want, np.float32)
    out = put(hopper, np.full((m, n), np.nan, d.np))
    W._launch(hopper.server, (W._addr(ta), 0), (W._addr(tb), 0), W._addr(out), W._addr(tbias), m, n, k, 1,
              "bfloat16", "bfloat16", src, W.BN, smem, persistent, 2)
    check(get(hopper, out), gelu(want[0] + bias.astype(np.float64)), d.np)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_gelu_of_matmul_plus_bias_through_the_fuser(hopper, rng, name):
    """``gelu(a @ w + b)`` on the fused ``Device.cuda()`` is right whichever epilogue candidate the
    tuner picks; the wgmma bias + GELU candidate itself is right when called directly (the tuner
    may prefer another), and falls back for a residual it cannot take."""
    from ember import Device
    from ember.backends.cube.fusers import matmul_epilogue as me

    d = ember.dtype.as_dtype(name)
    m, k, n = 520, 264, 776
    a, w, bias = randn(rng, (m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
    dev = Device.cuda()
    ta, tw, tb = (ember.tensor(x, device=dev) for x in (a, w, bias))
    want = gelu(a.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64))
    check(np.asarray((ta @ tw + tb).gelu().numpy()), want, d.np)

    pa, pw, pb = put(hopper, a), put(hopper, w), put(hopper, bias)
    prog = next(iter(me._BIAS_GELU))
    # the fuser's scalars carry the block's dtype (f32 constants beside bf16 lines do not mix)
    job = me._Job(prog, "test", (pb,), ((0.5**0.5, d), (1.0, d), (0.5, d)), d)
    backend = Device.cuda(fusion=False).backend().inner
    assert me._tensor_core_valid(backend, pa, pw, job)
    check(get(hopper, me._tensor_core(backend, pa, pw, job)), want, d.np)
    r = randn(rng, (m, n), d)
    job.extra = (put(hopper, r),)  # a full residual: the kernel's bias row cannot take it
    want_r = gelu(a.astype(np.float64) @ w.astype(np.float64) + r.astype(np.float64))
    check(get(hopper, me._tensor_core(backend, pa, pw, job)), want_r, d.np)


@pytest.mark.parametrize("fusion", [True, False])
def test_repeated_gelu_of_matmul_plus_bias_replays_right(hopper, rng, fusion):
    """The public ``gelu(a @ w + b)`` called again and again with fresh inputs of one shape:
    from the third call the drain (fused device) or the ops (eager) replay, the tensor-core
    launch as a call of the tuner's winner on the new tensors. Every result is checked."""
    from ember import Device
    from ember.backends.fusion import Fusion

    d = ember.bfloat16
    m, k, n = 520, 264, 776
    dev = Device.cuda(fusion=fusion)
    fus = dev.backend().inner if fusion else None
    before = fus.stats.replays if isinstance(fus, Fusion) else 0
    for _ in range(5):
        a, w, bias = randn(rng, (m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
        ta, tw, tb = (ember.tensor(x, device=dev) for x in (a, w, bias))
        want = gelu(a.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64))
        check(np.asarray((ta @ tw + tb).gelu().numpy()), want, d.np)
    if isinstance(fus, Fusion) and fus.replayable:
        assert fus.stats.replays - before >= 3


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_transposed_operands_reach_the_tensor_cores(hopper, rng, name):
    """``x @ w.T`` (a K-major B), ``a.T @ w.T`` (an M-major A too) and a batch against a
    shared ``w.T``: the wgmma candidate takes them (row-major copies) and the results are right."""
    from ember import Device
    from ember.backends.cube.matmul import _wgmma_valid
    from ember.dlpack import _cube_primitive

    d = ember.dtype.as_dtype(name)
    dev = Device.cuda(fusion=False)
    inner = dev.backend().inner
    m, k, n = 264, 520, 776
    x, w, at = randn(rng, (m, k), d), randn(rng, (n, k), d), randn(rng, (k, m), d)
    xb = randn(rng, (2, m, k), d)
    tx, tw, tat, txb = (ember.tensor(v, device=dev) for v in (x, w, at, xb))
    f64 = np.float64
    for lhs, rhs, want in (
        (tx, tw.t(), x.astype(f64) @ w.T.astype(f64)),
        (tat.t(), tw.t(), at.T.astype(f64) @ w.T.astype(f64)),
        (txb, tw.t(), xb.astype(f64) @ w.T.astype(f64)),
    ):
        pa, pb = _cube_primitive(lhs), _cube_primitive(rhs)
        if len(pa.shape) == len(pb.shape) + 1:
            pb = pb.with_layout((2,) + pb.shape, (0,) + pb.strides, pb.offset)
        assert _wgmma_valid(inner, pa, pb, None)
        check(np.asarray((lhs @ rhs).numpy()), want, d.np)


def test_device_gelu_within_2e4_of_erf_gelu(hopper):
    """``em_gelu1`` as the device runs it (rcp.approx, ex2.approx.ftz): relative error <= 2e-4
    against float64 erf-form GELU wherever |gelu| > 1e-3, on a dense grid of [-12, 12] and wide
    random values; +inf stays +inf and NaN stays NaN."""
    import ctypes

    from scipy.special import erf

    from ember.backends.cube.cuda_kernels import wgmma as W

    rng = np.random.default_rng()
    x = np.concatenate([np.linspace(-12, 12, 200_001), 4 * rng.standard_normal(200_000), [np.inf, np.nan, 0.0]])
    x = x.astype(np.float32)
    tx, ty = put(hopper, x), put(hopper, np.full_like(x, -7.0))
    src = "#define EM_GELU_CALL 0\n" + W._COMMON + r"""
extern "C" __global__ void em_gelu_test(const float *x, float *y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = em_gelu1(x[i]);
}
"""
    server = hopper.server
    fn = server.raw_function(src, "em_gelu_test", 0, W.WGMMA_ARCH)
    n = x.size
    server.launch_raw(fn, ((n + 255) // 256, 1, 1), (256, 1, 1),
                      [ctypes.c_uint64(W._addr(tx)), ctypes.c_uint64(W._addr(ty)), ctypes.c_int32(n)])
    y = get(hopper, ty).astype(np.float64)
    xd = x[:-3].astype(np.float64)
    want = 0.5 * xd * (1 + erf(xd / np.sqrt(2)))
    big = np.abs(want) > 1e-3
    rel = np.abs(y[:-3] - want)[big] / np.abs(want[big])
    assert rel.max() <= 2e-4, rel.max()
    assert np.abs(y[:-3] - want).max() < 1e-6
    assert y[-3] == np.inf and np.isnan(y[-2]) and y[-1] == 0.0


def test_f16_bias_gelu_overflow_stays_finite_below_and_inf_above(hopper, rng):
    """f16 products beyond the f16 range: below the lowest finite value they stage as -65504 and
    GELU gives -0 (not NaN from -inf); above the largest they round to +inf and GELU keeps +inf,
    as an unfused ``gelu(mm + bias)`` does. The rest of the tile is unaffected."""
    from ember.backends.cube.cuda_kernels.wgmma import matmul_wgmma

    d = ember.float16
    m, n, k = 256, 512, 64
    a, b, bias = randn(rng, (m, k), d), randn(rng, (k, n), d), randn(rng, n, d)
    a[0, :] = 200.0  # row 0: +-200 * 200 * 64 = +-2.56e6 beyond f16
    b[:, 0], b[:, 1] = 200.0, -200.0
    ta, tb, tbias = put(hopper, a), put(hopper, b), put(hopper, bias)
    out = put(hopper, np.full((m, n), np.nan, np.float16))
    matmul_wgmma(hopper, ta, tb, out, tbias)
    got = get(hopper, out).astype(np.float64)
    assert got[0, 0] == np.inf and got[0, 1] == 0.0 and np.signbit(got[0, 1])
    want = gelu(a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64))
    check(got[1:], want[1:], np.float16)
    check(got[0, 2:], want[0, 2:], np.float16)
