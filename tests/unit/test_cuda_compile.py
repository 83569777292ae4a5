"""The CUDA target without a GPU: rendering (the kernel ABI, warp collectives, 16-byte lines,
half types) and NVRTC compilation of a representative subset of the library's kernels (the
compile-only path, ``ember compile-check``). NVRTC tests skip where cuda-bindings or NVRTC
are not installed (``pip install 'ember[cuda]'``)."""

from __future__ import annotations

import numpy as np
import pytest

from ember import cube
from ember import dtype as dt
from ember.cube.compiler.cuda import CudaCompiler
from ember.cube.launch.cube_kernel import _target_of

F32 = np.zeros(64, np.float32)
CUDA = CudaCompiler("sm_90")
TARGET = _target_of(CUDA)


def nvrtc_or_skip():
    try:
        from ember.cube.runtime.cuda_nvrtc import nvrtc

        return nvrtc()
    except Exception as e:  # noqa: BLE001 - not installed here
        pytest.skip(f"NVRTC unavailable: {e}")


@cube.kernel
def axpy(x: cube.Array[cube.f32], y: cube.Array[cube.f32], a: cube.f32):
    i = cube.ABSOLUTE_POS
    if i < y.len():
        y[i] = a * x[i] + y[i]


@cube.kernel
def plane_and_shared(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    sm = cube.SharedMemory(cube.f32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    v = x[cube.ABSOLUTE_POS]
    sm[u] = v
    cube.sync_cube()
    out[cube.ABSOLUTE_POS] = cube.plane_sum(v) + sm[(u + 1) % cube.CUBE_DIM] + cube.plane_shuffle_xor(v, 1)


@cube.kernel
def half_lines(x: cube.Array[cube.Line[cube.bf16]], out: cube.Array[cube.Line[cube.bf16]]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * 2.0


def render(kernel, dim, *args):
    return CUDA.compile(kernel.ir(dim, *args, target=TARGET))


def test_abi_pointers_then_info_words_by_value():
    src = render(axpy, 128, F32, F32.copy(), 2.0)
    assert 'extern "C" __global__ void __launch_bounds__(128)' in src.source
    assert "const float * __restrict__ b_x, float * __restrict__ b_y, const em_info<2> info" in src.source
    assert "const float s_a = em_slot_f32(info[0]);" in src.source
    assert [s.kind for s in src.info] == ["scalar", "len"]


def test_barrier_is_syncthreads_and_plane_ops_are_warp_shuffles():
    text = render(plane_and_shared, 64, F32, F32.copy()).source
    body = text[text.index('extern "C"') :]
    assert "__syncthreads();" in body
    assert "__shared__ __align__(16) float" in body
    assert "em_plane_fold<em_op_add, float>" in body and "em_plane_read(" in body
    assert "const uint32_t em_mask_ = 0xffffffffu;" in body
    partial = render(plane_and_shared, 48, F32, F32.copy()).source  # a partial last warp
    assert "em_mask_ = em_n_ == 32 ? 0xffffffffu" in partial


def test_lines_are_aligned_vectors_and_half_types_convert_in_registers():
    h = np.zeros(64, np.float32).astype(dt.bfloat16.np)
    text = render(half_lines, 32, cube.lines(h, 8), cube.lines(h.copy(), 8)).source
    assert "em_load_bf16<8>(" in text and "em_store_bf16<8>(" in text
    assert "alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) em_vec" in text


def test_nvrtc_compiles_the_hand_written_kernels_to_sm90_cubins():
    nv = nvrtc_or_skip()
    for kernel, dim, args in (
        (axpy, 128, (F32, F32.copy(), 2.0)),
        (plane_and_shared, 48, (F32, F32.copy())),
        (half_lines, 32, (cube.lines(np.zeros(64, dt.bfloat16.np), 8),) * 2),
    ):
        src = render(kernel, dim, *args)
        cubin, _ = nv.compile(src.source, src.entry, "sm_90")
        assert cubin[:4] == b"\x7fELF"


def test_compile_check_subset_covers_every_family_and_compiles():
    """A representative subset of ``ember compile-check cuda --arch sm_90`` (the full run
    renders and compiles ~1400 kernels in minutes): every op form of every family is rendered
    for f32, f16, i64 and bool (a construct the target cannot render fails here), and an evenly
    spaced sample of 40 distinct kernels is compiled by NVRTC."""
    nvrtc_or_skip()
    from ember.compile_check import FAMILIES, run_check

    rep = run_check("cuda", "sm_90", [dt.float32, dt.float16, dt.int64, dt.bool_], FAMILIES, jobs=2, limit=40)
    assert rep.failures == [], rep.failures[:3]
    # the sample, plus the hand-written kernels: mma.sync (f16/bf16 and tf32), the SGEMM tiles,
    # and every wgmma tile config compiled for sm_90a
    from ember.backends.cube.cuda_kernels.sgemm import SGEMM_TILES
    from ember.backends.cube.cuda_kernels.wgmma import _CONFIGS, _CONFIGS_TF32, layout_configs

    # mma, mma tf32, transposes; every wgmma config, its operand-layout variants and tf32's
    hand_written = 3 + len(SGEMM_TILES) + len(_CONFIGS) + len(layout_configs()) + len(_CONFIGS_TF32)
    assert rep.ops > 1000 and rep.compiled == rep.kernels == 40 + hand_written


def test_the_cli_command_reports_and_exits_zero():
    nvrtc_or_skip()
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-m", "ember", "compile-check", "cuda", "--arch", "sm_90", "--dtypes", "float32",
         "--families", "random"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compile-check cuda --arch sm_90:" in r.stdout and "0 failed" in r.stdout


def test_dlpack_capsules_release_their_tensor_once():
    """The host half of the DLPack path (``ember.dlpack``): a capsule nobody consumed frees its
    tensor when it dies; a consumed one when the consumer calls the deleter. CPU devices export
    through numpy and import with a copy."""
    import ctypes
    import gc

    import ember
    from ember import dlpack as D

    def capsule(a: np.ndarray):
        shape = (ctypes.c_int64 * 1)(a.size)
        m = D._DLManagedTensor()
        m.dl_tensor.data = a.ctypes.data
        m.dl_tensor.device = D._DLDevice(D.KDL_CPU, 0)
        m.dl_tensor.ndim = 1
        m.dl_tensor.dtype = D._DLDataType(2, 32, 1)
        m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        m.deleter = D._delete_exported
        addr = ctypes.addressof(m)
        D._exported[addr] = (m, shape, a)
        return D._api.PyCapsule_New(addr, D._NAME, ctypes.cast(D._capsule_destructor, ctypes.c_void_p))

    a = np.arange(4, dtype=np.float32)
    before = len(D._exported)
    c = capsule(a)
    del c
    gc.collect()
    assert len(D._exported) == before  # unconsumed: released by the capsule's destructor

    class Producer:
        def __init__(self) -> None:
            self.cap = capsule(a)

        def __dlpack__(self, stream=None):
            return self.cap

        def __dlpack_device__(self):
            return (D.KDL_CPU, 0)

    got = np.from_dlpack(Producer())  # numpy consumes it and calls the deleter when done
    np.testing.assert_array_equal(got, a)
    del got
    gc.collect()
    assert len(D._exported) == before
    t = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=ember.Device.cpu())
    assert t.__dlpack_device__() == (D.KDL_CPU, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), [[1.0, 2.0], [3.0, 4.0]])
    assert ember.from_dlpack(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]


def test_the_kernel_id_index_gives_back_what_a_launch_needs(tmp_path, monkeypatch):
    """Warm processes find a kernel's cubin by its KernelId, without expanding or rendering it."""
    nv = nvrtc_or_skip()
    from ember.cube.runtime.cuda_index import CubinIndex
    from ember.cube.runtime.cuda_nvrtc import stored_compile
    from ember.environment.store import Store

    st = Store(tmp_path / "ember.db")
    kid = axpy.kernel_id(128, F32, F32.copy(), 2.0, target=TARGET)
    src = render(axpy, 128, F32, F32.copy(), 2.0)
    ns = f"compile/cuda/sm_90/{nv.fingerprint('sm_90')}"
    from ember.environment import store as store_module

    monkeypatch.setattr(store_module, "compile_store", lambda: st)
    cubin, hit = stored_compile(nv, src.source, src.entry, "sm_90")
    assert not hit and stored_compile(nv, src.source, src.entry, "sm_90")[1]
    index = CubinIndex(st, ns)
    assert index.lookup(kid) is None
    index.record(kid, src, nv.artifact_key(src.source, "sm_90"))
    got = CubinIndex(st, ns).lookup(kid)
    assert got is not None
    cubin2, src2 = got
    assert cubin2 == cubin and src2.entry == src.entry and src2.buffers == src.buffers
    assert [(s.kind, s.param, s.dim, s.elem) for s in src2.info] == [(s.kind, s.param, s.dim, s.elem) for s in src.info]
    assert src2.source == src.source


class _FakeDriver:
    """The driver calls CudaServer makes after a compile, answering success (no GPU here)."""

    def cuModuleLoadData(self, cubin):  # noqa: N802 - the driver's name
        assert cubin[:4] == b"\x7fELF", "not a cubin"
        return (0, object())

    def cuModuleGetFunction(self, module, name):  # noqa: N802
        return (0, object())

    def cuLaunchKernel(self, *args):  # noqa: N802
        _FakeDriver.launches += 1
        return (0,)

    launches = 0


def _fake_server():
    """A CudaServer without a device: real compiler, NVRTC and store, fake driver calls."""
    import threading

    from ember.cube.runtime.cuda import CudaServer
    from ember.cube.runtime.cuda_nvrtc import nvrtc

    s = object.__new__(CudaServer)
    s.cu, s.arch, s.compiler, s.nvrtc = _FakeDriver(), "sm_90", CudaCompiler("sm_90"), nvrtc()
    s.ctx = object()
    s.pipelines, s._lock, s.stage = {}, threading.RLock(), "DSD-cuda-test"
    s.compiles = s.store_loads = s.launches = 0
    s._cubin_index, s._raw, s._raw_modules = None, {}, {}
    s._preparer, s._prepared, s._pool, s._fast, s.stream = None, {}, None, None, object()
    from ember.cube.runtime.service import InlineChannel

    s.downstream = InlineChannel(s.stage)
    s.init_fault_record()
    return s


def test_preparing_compiles_on_the_pool_once_and_launches_nothing(monkeypatch):
    """The tuner's preparing on the CUDA runtime: kernels asked for while preparing are handed
    out pending (launches run nothing) and compiled on the pool, all at once; the real launch
    afterwards loads that compile (each kernel rendered once, NVRTC run once) and launches."""
    nvrtc_or_skip()
    from ember.backends.cube.backend import CubeBackend
    from ember.compile_check import CompileOnlyClient
    from ember.cube.runtime import cuda, cuda_driver, cuda_server

    current = type("T", (), {"ctx": None})()
    for mod in (cuda_driver, cuda_server, cuda):  # each binds the thread's context record
        monkeypatch.setattr(mod, "_current", current)
    client = CompileOnlyClient("cuda", CUDA, "sm_90")
    server = client.server = _fake_server()
    monkeypatch.setattr(server, "current", lambda: None)
    renders = []
    render = server.compiler.compile
    monkeypatch.setattr(server.compiler, "compile", lambda ir: (renders.append(ir), render(ir))[1])
    bk = CubeBackend(client)
    x = bk.from_data(np.arange(4096, dtype=np.float32), dt.float32)
    y = bk.from_data(np.ones(4096, np.float32), dt.float32)
    before = _FakeDriver.launches
    with server.preparing():
        assert server.preparing_here()
        bk.add(x, y)
        bk.mul(x, y)
    assert _FakeDriver.launches == before, "a prepared launch ran"
    assert len(server._prepared) == 2 and not server.pipelines
    server.wait_prepared()
    assert server.compiles == 2
    bk.add(x, y)
    bk.mul(x, y)
    assert _FakeDriver.launches == before + 2
    assert server.compiles == 2 and len(renders) == 2, "a kernel was rendered or compiled twice"
    assert len(server.pipelines) == 2 and not server._prepared
    assert not any(k.pending for k in server.pipelines.values())


def test_preparing_compiles_hand_written_sources_on_the_pool(monkeypatch):
    """Hand-written sources (``raw_function``: wgmma, mma.sync, sgemm) asked for while preparing
    start one NVRTC compile per source on the pool and hand out a stand-in whose launches run
    nothing; after ``wait_prepared`` the real call loads the stored cubin without compiling."""
    nvrtc_or_skip()
    from ember.backends.cube.cuda_kernels.mma import MMA_SOURCE, entry_name
    from ember.cube.runtime import cuda, cuda_driver, cuda_server

    current = type("T", (), {"ctx": None})()
    for mod in (cuda_driver, cuda_server, cuda):  # each binds the thread's context record
        monkeypatch.setattr(mod, "_current", current)
    server = _fake_server()
    monkeypatch.setattr(server, "current", lambda: None)
    source = MMA_SOURCE + f"\n// {np.random.default_rng().integers(1 << 62)}\n"  # never stored before
    before = _FakeDriver.launches
    with server.preparing():
        fns = [server.raw_function(source, entry_name(t, t)) for t in ("bfloat16", "float16")]
        assert all(fn is cuda_server.PENDING_RAW for fn in fns)
        server.launch_raw(fns[0], (1, 1, 1), (32, 1, 1), [])
    assert _FakeDriver.launches == before, "a prepared launch ran"
    assert len(server._prepared) == 1, "one compile per source"
    server.wait_prepared()
    assert server.compiles == 1
    fn = server.raw_function(source, entry_name("bfloat16", "bfloat16"))
    assert fn is not cuda_server.PENDING_RAW and server.compiles == 1 and not server._prepared
    server.launch_raw(fn, (1, 1, 1), (32, 1, 1), [])
    assert _FakeDriver.launches == before + 1


def test_fast_driver_binds_the_hot_calls_or_steps_aside():
    """cuda_fastcall: the copies and the sync get C signatures (so ctypes passes 64-bit handles
    and sizes intact), the launch none (its caller passes pointer objects); a machine without
    libcuda gets None, and the server then keeps every call on cuda-bindings."""
    import ctypes
    import types

    from ember.cube.runtime import cuda_fastcall

    names = ("cuMemcpyDtoHAsync_v2", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize")

    class Lib(types.SimpleNamespace):  # like ctypes.CDLL: lib[name] is a new function object
        def __getitem__(self, name: str) -> types.SimpleNamespace:
            return types.SimpleNamespace()

    lib = Lib(**{n: types.SimpleNamespace() for n in names})
    fd = cuda_fastcall.FastDriver(lib)
    assert not hasattr(fd.launch_p, "argtypes")  # lib[name]: a fresh function object, ctypes' defaults
    assert fd.dtoh_async.argtypes[1] is ctypes.c_uint64 and fd.dtoh_async.argtypes[2] is ctypes.c_size_t
    assert all(f.restype is ctypes.c_int for f in (fd.launch_p, fd.dtoh_async, fd.htod_async, fd.stream_sync))
    try:
        ctypes.CDLL("libcuda.so.1")
        has_driver = True
    except OSError:
        has_driver = False
    assert (cuda_fastcall.fast_driver() is not None) == has_driver


def test_driver_errors_are_named_from_raw_codes_and_unknown_ones_are_reported():
    """The ctypes hot calls return raw CUresult codes: the error text names a known one the way
    the bindings' enum does, and an unknown one (a newer driver's) by number, never with a
    ValueError raised over the CudaError being built."""
    pytest.importorskip("cuda.bindings.driver")
    from ember.cube.runtime import cuda_driver as cuda

    cu = cuda._driver()
    known = int(cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
    assert cuda._err_text(known) == cuda._err_text(cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS)
    assert "987654" in cuda._err_text(987654)
    with pytest.raises(cuda.CudaError, match="cuStreamSynchronize failed: CUresult 987654"):
        cuda._ok((987654,), "cuStreamSynchronize")
