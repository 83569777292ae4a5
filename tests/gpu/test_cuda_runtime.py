"""The CUDA runtime on a real GPU: copies, launches, plane ops, atomics, shared memory, the pool,
out-of-memory recovery, events, persisted cubins, DLPack. Skipped without a CUDA device."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import Device, cube
from ember.errors import OutOfMemoryError

from .tensors import get, put

REPO = Path(__file__).resolve().parents[2]
DEV = Device.cuda(fusion=False)


@cube.kernel
def axpy(x: cube.Array[cube.f32], y: cube.Array[cube.f32], a: cube.f32):
    i = cube.ABSOLUTE_POS
    if i < y.len():
        y[i] = a * x[i] + y[i]


@cube.kernel
def plane_all_ops(x: cube.Array[cube.f32], out: cube.Array[cube.f32], lane: cube.u32):
    i = cube.ABSOLUTE_POS
    v = x[i]
    out[i * 8 + 0] = cube.plane_sum(v)
    out[i * 8 + 1] = cube.plane_max(v)
    out[i * 8 + 2] = cube.plane_min(v)
    out[i * 8 + 3] = cube.plane_broadcast(v, lane)
    out[i * 8 + 4] = cube.plane_shuffle_xor(v, 1)
    out[i * 8 + 5] = cube.plane_inclusive_sum(v)
    out[i * 8 + 6] = cube.plane_exclusive_sum(v)
    out[i * 8 + 7] = cube.plane_prod(v)


@cube.kernel
def shared_rotate(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    sm = cube.SharedMemory(cube.f32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    sm[u] = x[cube.ABSOLUTE_POS]
    cube.sync_cube()
    out[cube.ABSOLUTE_POS] = sm[(u + 1) % cube.CUBE_DIM]


@cube.kernel
def histogram(x: cube.Array[cube.i32], bins: cube.Array[cube.i32], fsum: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    if i < x.len():
        cube.atomic_add(bins, x[i], 1)
        cube.atomic_add(fsum, 0, 0.5)


@cube.kernel
def scale_lines(x: cube.Array[cube.Line[cube.f16]], out: cube.Array[cube.Line[cube.f16]]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * 2.0


def test_copies_roundtrip_every_dtype_and_strided_reads(cuda_client, rng):
    for d in ember.dtype.ALL:
        a = (rng.random((5, 7)) * 10).astype(d.np)
        t = put(cuda_client, a)
        np.testing.assert_array_equal(get(cuda_client, t), a)
        tt = t.with_layout((7, 5), (1, 7), 0)  # a transposed view
        np.testing.assert_array_equal(get(cuda_client, tt), a.T)
    t = put(cuda_client, np.arange(12, dtype=np.float32))
    e = t.with_layout((3, 4), (0, 1), 2)  # stride-0 rows from an offset
    np.testing.assert_array_equal(get(cuda_client, e), np.tile(np.arange(2, 6, dtype=np.float32), (3, 1)))


def test_axpy_launch_and_pool_reuse(cuda_client, rng):
    n = 100_003
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    tx, ty = put(cuda_client, x), put(cuda_client, y)
    axpy.launch(cuda_client, cube.CubeCount.covering(n, 256), cube.CubeDim(256), tx, ty, 2.0)
    np.testing.assert_allclose(get(cuda_client, ty), 2.0 * x + y, rtol=1e-6)
    before = cuda_client.pool.usage()["device_allocs"]
    del tx
    tz = put(cuda_client, x)  # the same size class: the freed block comes back
    assert cuda_client.pool.usage()["device_allocs"] == before
    del tz


def test_plane_ops_match_numpy_per_warp(cuda_client, rng):
    for units in (64, 48):  # full warps, and a partial last warp
        x = rng.integers(1, 4, units).astype(np.float32)
        out = put(cuda_client, np.full(units * 8, np.nan, np.float32))
        plane_all_ops.launch(cuda_client, cube.CubeCount(1), cube.CubeDim(units), put(cuda_client, x), out, 3)
        r = get(cuda_client, out).reshape(units, 8)
        for w0 in range(0, units, 32):
            w = x[w0 : w0 + 32]
            n = len(w)
            sl = slice(w0, w0 + n)
            np.testing.assert_allclose(r[sl, 0], w.sum())
            np.testing.assert_allclose(r[sl, 1], w.max())
            np.testing.assert_allclose(r[sl, 2], w.min())
            np.testing.assert_allclose(r[sl, 3], w[3])
            np.testing.assert_allclose(r[sl, 4], [w[j ^ 1] if (j ^ 1) < n else w[j] for j in range(n)])
            np.testing.assert_allclose(r[sl, 5], np.cumsum(w))
            np.testing.assert_allclose(r[sl, 6], np.cumsum(w) - w)
            np.testing.assert_allclose(r[sl, 7], np.prod(w.astype(np.float64)), rtol=1e-6)


def test_shared_memory_and_barrier(cuda_client, rng):
    x = rng.random(512, dtype=np.float32)
    out = put(cuda_client, np.full(512, np.nan, np.float32))
    shared_rotate.launch(cuda_client, cube.CubeCount(2), cube.CubeDim(256), put(cuda_client, x), out)
    np.testing.assert_array_equal(get(cuda_client, out), np.roll(x.reshape(2, 256), -1, axis=1).ravel())


def test_atomics(cuda_client, rng):
    x = rng.integers(0, 10, 10_000).astype(np.int32)
    bins = put(cuda_client, np.zeros(10, np.int32))
    fsum = put(cuda_client, np.zeros(1, np.float32))
    count = cube.CubeCount.covering(x.size, 256)
    histogram.launch(cuda_client, count, cube.CubeDim(256), put(cuda_client, x), bins, fsum)
    np.testing.assert_array_equal(get(cuda_client, bins), np.bincount(x, minlength=10))
    assert get(cuda_client, fsum)[0] == 5000.0


def test_half_lines_are_16_byte_vectors(cuda_client, rng):
    x = rng.random(4096).astype(np.float16)
    out = put(cuda_client, np.zeros(4096, np.float16))
    scale_lines.launch(cuda_client, cube.CubeCount(2), cube.CubeDim(256), cube.lines(put(cuda_client, x), 8),
                       cube.lines(out, 8))
    np.testing.assert_array_equal(get(cuda_client, out), (x.astype(np.float32) * 2).astype(np.float16))
    src = scale_lines.ir(256, cube.lines(x, 8), cube.lines(x.copy(), 8))
    from ember.cube.compiler.cuda import CudaCompiler

    text = CudaCompiler("sm_90").compile(src).source
    assert "em_load_f16<8>" in text and "em_store_f16<8>" in text


def test_out_of_memory_raises_and_device_stays_usable(cuda_client):
    free_total = cuda_client.info.total_memory
    with pytest.raises(OutOfMemoryError):
        cuda_client.empty(free_total * 2)
    a = ember.tensor([1.0, 2.0, 3.0], device=DEV)
    assert (a * 2).tolist() == [2.0, 4.0, 6.0]


def test_profile_uses_device_events(cuda_client, rng):
    n = 1 << 22
    tx, ty = put(cuda_client, rng.random(n, dtype=np.float32)), put(cuda_client, rng.random(n, dtype=np.float32))
    _, secs = cuda_client.profile(
        lambda: axpy.launch(cuda_client, cube.CubeCount.covering(n, 256), cube.CubeDim(256), tx, ty, 1.0)
    )
    assert 0 < secs < 1.0


def test_tensor_api_on_cuda(cuda_client, rng):
    for dev in (Device.cuda(), Device.cuda(fusion=False)):
        a = rng.random((64, 48), dtype=np.float32)
        b = rng.random((48, 80), dtype=np.float32)
        ta, tb = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
        np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((ta.exp() * 2 + 1).sum(1).numpy(), (np.exp(a) * 2 + 1).sum(1), rtol=1e-4)
        assert ember.backend_name(dev) in ("dispatch<fusion<cube<cuda>>>", "dispatch<cube<cuda>>")


def test_a_second_process_loads_cubins_from_the_store(cuda_client, tmp_path):
    code = textwrap.dedent(
        """
        import ember
        from ember import Device
        from ember.cube.runtime.client import get_client
        a = ember.tensor([1.0, 2.0, 3.0], device=Device.cuda(fusion=False))
        print(((a * 3 + 1).exp()).sum().item())
        s = get_client("cuda", (0,)).server
        print("COMPILES", s.compiles, "LOADS", s.store_loads)
        """
    )
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    (first,), (second,) = (re.findall(r"COMPILES\D*(\d+)\D*LOADS\D*(\d+)", r.stdout) for r in runs)
    assert int(first[0]) > 0
    assert int(second[0]) == 0 and int(second[1]) == int(first[0])


def test_dlpack_with_torch_is_zero_copy(cuda_client):
    # in a fresh process: importing torch inside a pytest worker that already loaded ember and
    # the CUDA driver has failed in torch's own schema parser (torch 2.11), unrelated to DLPack
    code = textwrap.dedent(
        """
        import numpy as np, torch, ember
        from ember import Device
        if not torch.cuda.is_available():
            print("SKIP"); raise SystemExit
        dev = Device.cuda(fusion=False)
        a = np.random.rand(4, 5).astype(np.float32)
        t = ember.tensor(a, device=dev)
        tt = torch.from_dlpack(t)
        assert tt.device.type == "cuda"
        np.testing.assert_array_equal(tt.cpu().numpy(), a)
        back = ember.from_dlpack(tt * 2)
        np.testing.assert_array_equal(back.numpy(), a * 2)
        src = torch.arange(6, dtype=torch.float32, device="cuda")
        view = ember.from_dlpack(src)
        src.add_(1)  # zero copy: the ember tensor sees the producer's memory
        torch.cuda.synchronize()
        np.testing.assert_array_equal(view.numpy(), np.arange(1, 7, dtype=np.float32))
        np.testing.assert_array_equal((view * 2).numpy(), 2 * np.arange(1, 7, dtype=np.float32))
        del view, back, tt, t
        import gc; gc.collect()
        print("OK")
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if "SKIP" in r.stdout:
        pytest.skip("torch without CUDA")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_tensor_core_matmul_matches_numpy(cuda_client, rng, name):
    from ember.backends.cube.cuda_kernels.mma import matmul_mma, supports

    d = ember.dtype.as_dtype(name)
    m, k, n = 256, 96, 384
    a = rng.standard_normal((m, k)).astype(d.np)
    b = rng.standard_normal((k, n)).astype(d.np)
    bias = rng.standard_normal(n).astype(d.np)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ta, tb, tbias = put(cuda_client, a), put(cuda_client, b), put(cuda_client, bias)
    for out_np, with_bias in ((np.float32, False), (d.np, False), (d.np, True)):
        out = put(cuda_client, np.full((m, n), np.nan, out_np))
        assert supports(ta, tb, out, 90)
        matmul_mma(cuda_client, ta, tb, out, tbias if with_bias else None)
        got = get(cuda_client, out).astype(np.float64)
        want = ref
        if with_bias:
            from scipy.special import erf

            z = ref + bias.astype(np.float64)
            want = 0.5 * z * (1 + erf(z / np.sqrt(2)))
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert rel < (1e-5 if out_np is np.float32 else 1e-2), (out_np, with_bias, rel)


def test_tensor_core_candidate_takes_batched_operands(cuda_client, rng):
    from ember.backends.cube.cuda_kernels.mma import candidate_launch, candidate_valid

    bk = DEV.backend().inner
    a = rng.standard_normal((2, 128, 64)).astype(ember.bfloat16.np)
    b = rng.standard_normal((64, 128)).astype(ember.bfloat16.np)
    ta, tb = put(cuda_client, a), put(cuda_client, b)
    tb = tb.with_layout((2, 64, 128), (0, 128, 1), 0)  # broadcast over the batch: stride 0
    out = put(cuda_client, np.full((2, 128, 128), np.nan, ember.bfloat16.np))
    assert candidate_valid(ta, tb)
    candidate_launch(bk, ta, tb, out)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = get(cuda_client, out).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-2
