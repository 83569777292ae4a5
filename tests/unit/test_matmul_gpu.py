"""The GPU-shaped matmul kernel (``matmul_gpu_kernels.matmul_gpu``) on every target we can run
or compile here: the C target (the barrier phase model runs its cubes correctly), WGSL on
lavapipe (skipped without a CPU Vulkan adapter), CUDA C through NVRTC (compile only; skipped
without NVRTC).

Every launch writes into an output poisoned with NaN (sentinels for ints), so an unwritten
element fails; values are checked against numpy in float64 on fresh random inputs. Shapes
cover whole tiles, ragged edges in m, n and k, line-width-1 paths (k or n not a multiple of
4, transposed and offset views), broadcast batches, k = 0, and f16 where the target has it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember import Device
from ember.backends.cube import matmul as mm
from ember.backends.cube.matmul import GPU_TILES, GpuTiles, launch_gpu

CPU = Device.cpu(fusion=False)

#: the registered candidates, plus single buffering, k-major A and a deeper k step
VARIANTS = [
    *GPU_TILES,
    GpuTiles(128, 128, 8, 8, 8, db=True, at=True),
    GpuTiles(64, 64, 8, 4, 4, db=False, at=True),
    GpuTiles(64, 32, 16, 8, 4, db=True, at=False),
    GpuTiles(32, 64, 16, 4, 8, db=False, at=False),
]
IDS = [t.name for t in VARIANTS]


def inner_backend(dev: Device) -> Any:
    bk = dev.backend()
    while not hasattr(bk, "client") and hasattr(bk, "inner"):
        bk = bk.inner
    return bk


def rand(shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-5, 6, shape).astype(dtype)


def launch(bk: Any, tiles: GpuTiles, a: Any, b: Any) -> np.ndarray:
    """``a @ b`` (device tensors or views) through ``tiles`` into a poisoned output."""
    A, B, out = bk._matmul_operands(a, b)
    if out.numel:
        fill = np.nan if out.dtype.is_floating_point else -12345
        out = bk.full(out.shape, fill, out.dtype)
    launch_gpu(tiles, bk, A, B, out)
    return np.asarray(bk.into_data(out))


def check(got: np.ndarray, ref: np.ndarray, dtype: Any, k: int) -> None:
    assert got.shape == ref.shape
    if not dtype.is_floating_point:
        np.testing.assert_array_equal(got, ref.astype(got.dtype))
        return
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} unwritten (poisoned) elements"
    if dtype is ember.float16:
        # f32 accumulation, one rounding to f16 at the store
        ref = ref.astype(np.float32).astype(np.float16).astype(np.float64)
        np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3 * np.sqrt(max(k, 1)))
        return
    eps = 1e-15 if dtype is ember.float64 else 1.2e-7
    np.testing.assert_allclose(got, ref, rtol=16 * eps, atol=eps * np.sqrt(max(k, 1)) * 32)


def product(bk: Any, tiles: GpuTiles, sa: tuple[int, ...], sb: tuple[int, ...], dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rand(sa, dtype.np, rng), rand(sb, dtype.np, rng)
    got = launch(bk, tiles, bk.from_data(a, dtype), bk.from_data(b, dtype))
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    check(got, ref if dtype.is_floating_point else np.matmul(a, b), dtype, sa[-1])


# --------------------------------------------------------------------------- C target

CPU_SHAPES = [
    ((128, 16), (16, 128)),  # whole 128-blocks, two k steps of 8: the unchecked path only
    ((256, 24), (24, 64)),  # several blocks, three k steps
    ((129, 65), (65, 17)),  # ragged m, n, k (k and n not multiples of 4: scalar loads)
    ((33, 12), (12, 36)),  # lines of 4, a k tail inside one step
    ((1, 7), (7, 1)),
    ((5, 4), (4, 8)),
    ((3, 0), (0, 4)),  # k = 0: zeros
]


@pytest.mark.parametrize("tiles", VARIANTS, ids=IDS)
@pytest.mark.parametrize("sa,sb", CPU_SHAPES)
def test_cpu_shapes_f32(tiles, sa, sb):
    product(inner_backend(CPU), tiles, sa, sb, ember.float32, hash((sa, sb)) % 1000)


@pytest.mark.parametrize("tiles", VARIANTS[:3], ids=IDS[:3])
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float64, ember.int32], ids=lambda d: d.name)
def test_cpu_dtypes_with_broadcast_batch(tiles, dtype):
    """Batch (2, 1) x (1, 3) broadcast through zero strides; ints exact (multiply-add)."""
    bk = inner_backend(CPU)
    rng = np.random.default_rng(21)
    sa, sb = (2, 1, 37, 20), (1, 3, 20, 44)
    a, b = rand(sa, dtype.np, rng), rand(sb, dtype.np, rng)
    got = launch(bk, tiles, bk.from_data(a, dtype), bk.from_data(b, dtype))
    if dtype is ember.bfloat16:  # f32 accumulation, one rounding to bf16 at the store
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32).astype(dtype.np)
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-2, atol=0.05)
        return
    ref = np.matmul(a, b) if dtype is ember.int32 else np.matmul(a.astype(np.float64), b.astype(np.float64))
    check(got, ref, dtype, sa[-1])


@pytest.mark.parametrize("tiles", VARIANTS, ids=IDS)
def test_cpu_transposed_offset_and_expanded_views(tiles):
    """a.mT, b.mT (scalar loads through the strides), a sliced view at an odd offset, and an
    expanded operand shared by every batch entry."""
    bk = inner_backend(CPU)
    rng = np.random.default_rng(22)
    m, k, n = 70, 36, 52
    at, bt = rand((2, k, m), np.float32, rng), rand((2, n, k), np.float32, rng)
    a_, b_ = np.swapaxes(at, -1, -2), np.swapaxes(bt, -1, -2)
    va = bk.permute(bk.from_data(at, ember.float32), (0, 2, 1))
    vb = bk.permute(bk.from_data(bt, ember.float32), (0, 2, 1))
    for x, y in ((va, bk.from_data(np.ascontiguousarray(b_), ember.float32)), (va, vb)):
        check(launch(bk, tiles, x, y), np.matmul(a_.astype(np.float64), b_), ember.float32, k)
    big = rand((1, 80, 60), np.float32, rng)
    vs = bk.slice(bk.from_data(big, ember.float32), (slice(None), slice(3, 75, 2), slice(5, 45)))
    b1 = rand((1, 40, 24), np.float32, rng)
    ve = bk.expand(bk.from_data(b1, ember.float32), (3, 40, 24))
    ref = np.matmul(big[:, 3:75:2, 5:45].astype(np.float64), np.broadcast_to(b1, (3, 40, 24)))
    check(launch(bk, tiles, bk.expand(vs, (3, 36, 40)), ve), ref, ember.float32, 40)


def test_line_widths_follow_the_layouts():
    bk = inner_backend(CPU)
    x = bk.from_data(np.zeros((2, 8, 12), np.float32), ember.float32)
    assert mm._lines_of_4(x) == 4
    assert mm._lines_of_4(bk.permute(x, (0, 2, 1))) == 1  # last axis strided
    assert mm._lines_of_4(bk.from_data(np.zeros((8, 13), np.float32), ember.float32)) == 1
    assert mm._lines_of_4(bk.slice(x, (slice(None), slice(None), slice(1, 9)))) == 1  # offset 1
    assert mm._lines_of_4(bk.slice(x, (slice(None), slice(None), slice(4, 12)))) == 4


# --------------------------------------------------------------------------- tuner registration


def test_tunables_gpu_candidates_only_where_units_run_in_parallel():
    names = [t.name for t in mm.MATMUL_TUNABLES.candidates]
    for t in GPU_TILES:
        assert t.name in names and t.name in [c.name for c in mm.MATMUL_CANDIDATES]
    gpu = [t for t in mm.MATMUL_TUNABLES.candidates if t.name.startswith("gpu")]
    serial = ("float32", 1024, 1024, 1024, 1024, "contiguous", "contiguous", "large", "serial")
    parallel = serial[:-1] + ("parallel",)
    tiny = ("float32", 1, 2, 2, 2, "contiguous", "contiguous", "small", "parallel")
    for t in gpu:
        assert t.priority_for(serial) < 0 and t.priority_for(tiny) < 0
        assert t.priority_for(parallel) > max(
            c.priority_for(parallel) for c in mm.MATMUL_TUNABLES.candidates if c.name == "tiled"
        )
    bk = inner_backend(CPU)
    f = bk.from_data(np.zeros((4, 4), np.float32), ember.float32)
    i = bk.from_data(np.zeros((4, 4), np.int32), ember.int32)
    assert all(t.valid(bk, f, f, f) and not t.valid(bk, i, i, i) for t in gpu)


def test_tiles_that_overflow_the_targets_shared_memory_are_not_candidates():
    """A WGSL adapter with 16 KiB of workgroup memory: the 32 KiB tiles are invalid there."""
    from types import SimpleNamespace

    from ember.cube.compiler.wgsl import WgslCompiler

    bk = inner_backend(CPU)
    f = bk.from_data(np.zeros((4, 4), np.float32), ember.float32)
    server = SimpleNamespace(compiler=WgslCompiler(max_shared_bytes=16384))
    small = SimpleNamespace(client=SimpleNamespace(server=server))
    by_name = {t.name: t for t in mm.MATMUL_TUNABLES.candidates}
    for t in GPU_TILES:
        assert by_name[t.name].valid(small, f, f, f) == (t.shared_bytes(4) <= 16384)
    assert not by_name[GpuTiles(128, 128, 16, 8, 8).name].valid(small, f, f, f)


def test_cpu_tuner_never_times_the_gpu_candidates():
    from ember import autotune

    bk = inner_backend(CPU)
    a = bk.from_data(np.ones((64, 64), np.float32), ember.float32)
    A, B, out = bk._matmul_operands(a, a)
    choice = autotune.choose(bk.client, mm.MATMUL_TUNABLES, bk, A, B, out)
    assert not choice.name.startswith("gpu")


# --------------------------------------------------------------------------- WGSL on lavapipe


def _lavapipe() -> Device:
    pytest.importorskip("wgpu")
    from ember.cube.runtime import wgpu_adapters as adapters
    from ember.device import DeviceKind

    if not any(a.kind == "Cpu" and a.api == "Vulkan" for a in adapters.enumerate_adapters()):
        pytest.skip("no CPU Vulkan adapter (apt install mesa-vulkan-drivers)")
    return Device.wgpu(DeviceKind.cpu(), fusion=False)


WGPU_SHAPES = [((128, 16), (16, 128)), ((129, 65), (65, 17)), ((2, 33, 12), (1, 12, 36)), ((3, 0), (0, 4))]


@pytest.mark.parametrize("tiles", VARIANTS[:4], ids=IDS[:4])
@pytest.mark.parametrize("sa,sb", WGPU_SHAPES)
def test_wgpu_lavapipe_f32(tiles, sa, sb):
    bk = inner_backend(_lavapipe())
    limit = bk.client.server.compiler.capabilities.max_shared_bytes
    if tiles.shared_bytes(4) > limit:
        pytest.skip(f"{tiles.name} needs {tiles.shared_bytes(4)} bytes of workgroup memory, the adapter has {limit}")
    product(bk, tiles, sa, sb, ember.float32, 30)


def test_wgpu_lavapipe_f16_where_the_device_has_it():
    from ember.errors import UnsupportedDTypeError

    bk = inner_backend(_lavapipe())
    try:
        product(bk, GPU_TILES[0], (40, 24), (24, 36), ember.float16, 31)
    except UnsupportedDTypeError as e:
        pytest.skip(f"no f16 on this adapter: {e}")


def test_wgsl_source_has_no_f64_and_vector_shared_lines():
    from ember.cube.compiler.wgsl import WgslCompiler

    src = _render(WgslCompiler(max_shared_bytes=16384), GpuTiles(128, 128, 8, 8, 8))
    assert "f64" not in src
    assert "var<workgroup>" in src and "array<vec4<f32>" in src
    assert src.count("workgroupBarrier()") >= 2


# --------------------------------------------------------------------------- CUDA C (NVRTC, compile only)


def _render(compiler: Any, tiles: GpuTiles, dtype: Any = ember.float32) -> str:
    from ember.backends.cube.backend import CubeBackend
    from ember.compile_check import CompileOnlyClient

    client = CompileOnlyClient(compiler.language, compiler, "check")
    bk = CubeBackend(client)
    a = bk.from_data(np.ones((256, 256), dtype.np), dtype)
    launch_gpu(tiles, bk, *bk._matmul_operands(a, a))
    (p,) = client.server.pipelines.values()
    return p.source.source


@pytest.mark.parametrize("tiles", VARIANTS, ids=IDS)
def test_cuda_sources_compile_with_nvrtc(tiles):
    try:
        from ember.cube.runtime.cuda_nvrtc import nvrtc

        nv = nvrtc()
    except Exception as e:  # noqa: BLE001 - any reason NVRTC cannot load
        pytest.skip(f"NVRTC unavailable: {e}")
    from ember.cube.compiler.cuda import CudaCompiler

    src = _render(CudaCompiler("sm_90"), tiles)
    bounds = f"{tiles.units}, {tiles.occ}" if tiles.occ > 1 else f"{tiles.units}"
    assert f"__launch_bounds__({bounds})" in src
    assert "em_vec<float, 4>" in src and "__syncthreads()" in src
    entry = src.split("-> ")[1].split(" ")[0]
    cubin, _ = nv.compile(src, entry, "sm_90")
    assert len(cubin) > 1000


def test_tiles_shrink_to_the_targets_shared_memory():
    """f64 on the 32 KiB f32 tiles (64 KiB in f64) renders with k steps of 8 under CUDA's 48 KiB."""
    from ember.cube.compiler.cuda import CudaCompiler

    src = _render(CudaCompiler("sm_90"), GpuTiles(128, 128, 16, 8, 8), ember.float64)
    shared = [ln for ln in src.splitlines() if "__shared__" in ln]
    assert shared and all("double" in ln for ln in shared)
    sizes = [int(ln.split("[")[1].split("]")[0]) for ln in shared]
    assert sum(sizes) * 8 <= 48 * 1024 and sum(sizes) == 2 * (128 + 128) * 8


def test_occupancy_hint_caps_registers_on_cuda_only():
    """``GpuTiles.occ`` reaches the CUDA source as ``__launch_bounds__(units, occ)``; other
    targets render the same kernel without it (a hint, no semantics)."""
    from ember.cube.compiler.cuda import CudaCompiler

    src = _render(CudaCompiler("sm_90"), GpuTiles(128, 128, 16, 8, 8, occ=2))
    assert "__launch_bounds__(256, 2)" in src
    assert "__launch_bounds__(256)" in _render(CudaCompiler("sm_90"), GpuTiles(128, 128, 16, 8, 8))
    assert GpuTiles(128, 128, 16, 8, 8, occ=2).name == "gpu128x128x16_8x8_o2"


def test_occupancy_needs_a_comptime_int():
    from ember import cube
    from ember.cube.lang.errors import CubeSyntaxError

    @cube.kernel
    def k(x: cube.Tensor[cube.f32], n: cube.u32):
        cube.occupancy(n)
        x[cube.ABSOLUTE_POS] = 1.0

    from ember.compile_check import CompileOnlyClient
    from ember.cube.compiler.cuda import CudaCompiler

    client = CompileOnlyClient("cuda", CudaCompiler("sm_90"), "check")
    from ember.backends.cube.backend import CubeBackend

    bk = CubeBackend(client)
    x = bk.from_data(np.zeros(4, np.float32), ember.float32)
    with pytest.raises(CubeSyntaxError, match="occupancy"):
        k.launch(client, cube.CubeCount(1), cube.CubeDim(4), x, 4)
