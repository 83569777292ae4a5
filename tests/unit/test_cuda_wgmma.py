"""The Hopper tensor-core matmul (``cuda_wgmma``) without a GPU: NVRTC compiles every entry for
sm_90a with no ptxas warning (a serialised wgmma or an ignored setmaxnreg would warn), the tile
configs fit in shared memory, and the host side (tensor-map arguments and cache, launch shape,
batch flattening, operand checks, the autotune candidate) against a recording fake driver."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
from ptxas_log import ptxas_log

from ember import dtype as dt
from ember.backends.cube.cuda_kernels import wgmma as W
from ember.cube.runtime.tensor import CubeTensor, contiguous_strides


def nvrtc_or_skip():
    try:
        from ember.cube.runtime.cuda_nvrtc import nvrtc

        return nvrtc()
    except Exception as e:  # noqa: BLE001 - not installed here
        pytest.skip(f"NVRTC unavailable: {e}")


@pytest.mark.parametrize(
    "bn,stages,cluster,staged",
    [(W.BN, W.STAGES, 1, False), (128, 6, 1, False), (W.BN, W.STAGES, 2, False), (W.BN, W.STAGES_STAGED, 1, True),
     (128, W.STAGES_NARROW_STAGED, 1, True), (W.BN, W.STAGES_STAGED, 2, True)],
)
def test_every_entry_compiles_for_sm_90a_without_warnings(bn, stages, cluster, staged):
    nv = nvrtc_or_skip()
    cubin, log = nv.compile(W.wgmma_source(bn, stages, cluster=cluster, staged=staged), "em_wgmma", W.WGMMA_ARCH)
    for entry in W.entries():
        assert entry.encode() in cubin, entry
    assert "warning" not in log.lower(), log


def test_plain_sm_90_rejects_wgmma():
    """Why the kernels are compiled for sm_90a whatever the device's own target."""
    from ember.errors import CompilationError

    nv = nvrtc_or_skip()
    with pytest.raises(CompilationError):
        nv.compile(W.WGMMA_SOURCE, "em_wgmma", "sm_90")


def test_entry_names_follow_cuda_mma():
    assert W.entry_name("bfloat16", "bfloat16", True) == "em_wgmma_bf16_bf16_bias_gelu"
    assert W.entry_name("float16", "float32") == "em_wgmma_f16_f32"
    assert len(set(W.entries())) == 6


def test_tile_configs_fit_shared_memory():
    limit = 227 * 1024  # opt-in dynamic shared memory of a compute capability 9.0 block
    assert W.smem_bytes() <= limit
    assert W.smem_bytes(128, 6) <= limit
    with pytest.raises(ValueError):
        W.wgmma_source(192, 4)
    with pytest.raises(ValueError):  # the staged tile takes a stage's room
        W.wgmma_source(256, 4, staged=True)



def _ptxas_report(source: str) -> str:
    """NVRTC's log with ptxas's resource report (registers, stack, spills) for sm_90a."""
    res, log = ptxas_log(source, W.WGMMA_ARCH, "em_wgmma.cu")
    assert res == 0, log
    return log


@pytest.mark.parametrize("bn,stages", [(W.BN, W.STAGES_STAGED), (W.BN_NARROW, W.STAGES_NARROW_STAGED)])
@pytest.mark.parametrize("a_mn,b_k", [(False, False), (True, False), (False, True)])
def test_staged_entries_spill_nothing(bn, stages, a_mn, b_k):
    """The drain warps keep their bias chunk and 8 GELU values in flight within the producer
    warpgroup's register budget (EM_PREGS): with 40 registers ptxas spilled a value to local
    memory, reloaded per tile. The operand-layout variants change only loads and descriptors."""
    nvrtc_or_skip()
    log = _ptxas_report(W.wgmma_source(bn, stages, staged=True, a_mn=a_mn, b_k=b_k))
    spills = [line for line in log.splitlines() if "spill" in line]
    assert len(spills) == len(W.entries()), log
    assert all(" 0 bytes spill stores, 0 bytes spill loads" in line for line in spills), log


@pytest.mark.parametrize("knobs", [{"BIAS_DRAIN": 0}, {"X_GELU": 0}, {"X_GELU": 2}, {"X_BIAS": 0}, {"GELU_OLD": 1},
                                   {"PREGS": 40}, {"PROBE": 1 << 40}])
def test_measurement_knobs_compile_and_default_to_the_library_kernel(knobs):
    """bench/gpu_epilogue.py's variants build; the knobs are macros the library source only defaults."""
    nv = nvrtc_or_skip()
    src = W.wgmma_source(W.BN, W.STAGES_STAGED, staged=True, knobs=knobs)
    name, value = next(iter(knobs.items()))
    assert f"#define EM_{name} {value}\n" in src
    assert W.wgmma_source(W.BN, W.STAGES_STAGED, staged=True, knobs={}) == W._CONFIGS[W.BN, True][0]
    cubin, log = nv.compile(src, "em_wgmma", W.WGMMA_ARCH)
    for entry in W.entries():
        assert entry.encode() in cubin, entry
    assert "warning" not in log.lower(), log


# --------------------------------------------------------------------------- fake driver
class _FakeCu:
    """Records cuTensorMapEncodeTiled calls; enums and wrappers as plain values."""

    def __init__(self):
        self.encodes = []
        enum = SimpleNamespace
        self.CUtensorMapDataType = enum(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16="bf16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16="f16")
        self.CUtensorMapInterleave = enum(CU_TENSOR_MAP_INTERLEAVE_NONE="none")
        self.CUtensorMapSwizzle = enum(CU_TENSOR_MAP_SWIZZLE_128B="128B")
        self.CUtensorMapL2promotion = enum(CU_TENSOR_MAP_L2_PROMOTION_L2_256B="256B")
        self.CUtensorMapFloatOOBfill = enum(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE="zero")
        self.cuuint64_t = self.cuuint32_t = int

    def cuTensorMapEncodeTiled(self, dtype, rank, addr, dims, strides, box, elem, inter, swz, l2, oob):  # noqa: N802
        self.encodes.append(dict(dtype=dtype, rank=rank, addr=addr, dims=dims, strides=strides, box=box, swizzle=swz,
                                 oob=oob))
        return 0, SimpleNamespace(opaque=[len(self.encodes)] * 16)


class _FakeServer:
    def __init__(self, arch="sm_90", index=0):
        self.cu = _FakeCu()
        self.arch = arch
        self.index = index
        self.info = SimpleNamespace(multiprocessors=132)
        self.functions = []
        self.launches = []

    def raw_function(self, source, entry, smem=0, arch=None):
        self.functions.append((entry, smem, arch))
        return entry

    def launch_raw(self, fn, grid, block, args, smem):
        self.launches.append((fn, grid, block, args, smem))


class _Buf:
    def __init__(self, ptr):
        self.ptr = ptr


def _tensor(client, shape, dtype=dt.bfloat16, ptr=1 << 20, strides=None, offset=0):
    strides = contiguous_strides(shape) if strides is None else strides
    return CubeTensor(client, _Buf(ptr), shape, strides, offset, dtype)


@pytest.fixture
def fake():
    W._MAPS.clear()
    server = _FakeServer()
    client = SimpleNamespace(runtime="cuda", server=server)
    yield client, server
    W._MAPS.clear()


def test_launch_encodes_swizzled_maps_and_covers_every_tile(fake):
    client, server = fake
    m, k, n = 300, 72, 520
    a = _tensor(client, (m, k), ptr=1 << 20)
    b = _tensor(client, (k, n), ptr=2 << 20)
    out = _tensor(client, (m, n), dt.float32, ptr=3 << 20)
    assert W.supports(a, b, out, 90)
    W.matmul_wgmma(client, a, b, out)
    bn, persistent = W._choose(m, n, 1, 132)
    (entry, smem, arch), = server.functions
    assert (entry, smem, arch) == ("em_wgmma_bf16_f32", W._CONFIGS[bn, False][1], "sm_90a")
    ea, eb = server.cu.encodes
    # A: (k, m) with 128 x 64 boxes; B: (n, k) with 64 x 64 boxes; 16-bit rows, 128-byte swizzle
    assert ea["dims"] == [k, m, 1] and ea["box"] == [64, W.BM, 1] and ea["strides"][0] == 2 * k
    assert eb["dims"] == [n, k, 1] and eb["box"] == [64, W.BK, 1] and eb["strides"][0] == 2 * n
    assert ea["swizzle"] == eb["swizzle"] == "128B" and ea["oob"] == "zero" and ea["dtype"] == "bf16"
    assert all(s % 16 == 0 for e in (ea, eb) for s in e["strides"])
    (fn, grid, block, args, smem2), = server.launches
    tiles = -(-m // W.BM) * -(-n // bn)
    assert grid == (min(tiles, 132) if persistent else tiles, 1, 1) and block == (W.THREADS, 1, 1) and smem2 == smem
    assert len(args) == 10 and ctypes.sizeof(args[0]) == 128 and ctypes.sizeof(args[1]) == 128
    assert [x.value for x in args[4:]] == [m, n, k, 1, 0, 0]
    # a repeated product re-encodes nothing
    W.matmul_wgmma(client, a, b, out)
    assert len(server.cu.encodes) == 2 and server.launches[1][3][0] is args[0]


def test_persistent_grid_is_capped_at_the_multiprocessors(fake):
    client, server = fake
    a = _tensor(client, (4096, 512), ptr=1 << 20)
    b = _tensor(client, (512, 4096), ptr=2 << 20)
    out = _tensor(client, (4096, 4096), ptr=3 << 20)
    W._launch(server, (W._addr(a), 0), (W._addr(b), 0), W._addr(out), 0, 4096, 4096, 512, 1, "bfloat16", "bfloat16",
              persistent=True)
    W._launch(server, (W._addr(a), 0), (W._addr(b), 0), W._addr(out), 0, 4096, 4096, 512, 1, "bfloat16", "bfloat16",
              persistent=False)
    assert [lz[1][0] for lz in server.launches] == [132, 32 * 4096 // W.BN]


def test_cluster_grids_cover_pairs_of_block_rows(fake):
    client, server = fake
    m, n, k = 1288, 1800, 712  # 11 block rows: 6 pairs, 8 column tiles of 256
    src = W.wgmma_source(cluster=2)
    for persistent in (False, True):
        W._launch(server, (1 << 20, m * k), (2 << 20, 0), 3 << 20, 0, m, n, k, 2, "bfloat16", "float32", src, W.BN,
                  W.smem_bytes(), persistent, 2)
    assert [lz[1][0] for lz in server.launches] == [2 * 6 * 8 * 2, 2 * (132 // 2)]
    with pytest.raises(ValueError):
        W.wgmma_source(cluster=3)


def test_bias_gelu_entry_and_f16_maps(fake):
    client, server = fake
    a = _tensor(client, (128, 64), dt.float16, ptr=1 << 20)
    b = _tensor(client, (64, 256), dt.float16, ptr=2 << 20)
    out = _tensor(client, (128, 256), dt.float16, ptr=3 << 20)
    bias = _tensor(client, (256,), dt.float16, ptr=4 << 20)
    W.matmul_wgmma(client, a, b, out, bias)
    assert server.functions[0][0] == "em_wgmma_f16_f16_bias_gelu"
    assert server.launches[0][3][3].value == 4 << 20
    assert {e["dtype"] for e in server.cu.encodes} == {"f16"}


def test_tile_choice_counts_whole_waves():
    # 3072²: 288 wide tiles = 3 waves of 132 (2.2 used) vs 576 narrow = 5 waves: narrow
    assert W._choose(3072, 3072, 1, 132) == (W.BN_NARROW, True)
    # 4096²: 512 wide tiles = 4 waves vs 1024 narrow = 8: wide, persistent (few waves)
    assert W._choose(4096, 4096, 1, 132) == (W.BN, True)
    # 8192²: 2048 wide tiles = 16 waves: one block per tile
    assert W._choose(8192, 8192, 1, 132) == (W.BN, False)
    assert W._choose(8192, 8192, 1, 132)[0] == W._choose(1024, 8192, 8, 132)[0]
    for (bn, staged), (src, smem) in W._CONFIGS.items():
        assert f"#define EM_BN {bn}\n" in src and f"#define EM_STAGED {int(staged)}\n" in src
        assert smem == W.smem_bytes(bn, int(src.split("#define EM_STAGES ")[1].split()[0]), staged) <= W.SMEM_LIMIT


def test_batch_step_flattens_uniform_batches_only():
    assert W._batch_step((), ()) == 0
    assert W._batch_step((4,), (0,)) == 0
    assert W._batch_step((2, 3), (3 * 100, 100)) == 100
    assert W._batch_step((2, 1, 3), (300, 7, 100)) == 100  # size-1 dims step anywhere
    assert W._batch_step((2, 3), (100, 0)) is None
    assert W._batch_step((2, 3), (0, 0)) == 0


def test_candidate_launch_one_launch_for_a_shared_operand(fake):
    client, server = fake
    backend = SimpleNamespace(client=client)
    m, k, n = 128, 64, 256
    a = _tensor(client, (3, m, k), ptr=1 << 20)
    b = _tensor(client, (3, k, n), ptr=2 << 20, strides=(0, n, 1))
    out = _tensor(client, (3, m, n), ptr=3 << 20)
    assert W.candidate_valid(a, b)
    W.candidate_launch(backend, a, b, out)
    (_, grid, _, args, _), = server.launches
    assert grid == (3 * 2, 1, 1) and [x.value for x in args[7:]] == [3, 1, 0]  # 3 x (1 x 2) tiles of 128
    ea, eb = server.cu.encodes
    assert ea["dims"] == [k, m, 3] and ea["strides"] == [2 * k, 2 * m * k]
    assert eb["dims"] == [n, k, 1]


def test_candidate_launch_per_entry_when_batches_do_not_flatten(fake):
    client, server = fake
    backend = SimpleNamespace(client=client)
    m, k, n = 128, 64, 256
    a = _tensor(client, (2, 3, m, k), ptr=1 << 20, strides=(m * k, 0, k, 1))
    b = _tensor(client, (2, 3, k, n), ptr=2 << 20)
    out = _tensor(client, (2, 3, m, n), dt.float32, ptr=3 << 20)
    W.candidate_launch(backend, a, b, out)
    assert len(server.launches) == 6
    outs = [lz[3][2].value for lz in server.launches]
    assert outs == [(3 << 20) + 4 * m * n * i for i in range(6)]
    a_addrs = sorted({e["addr"] for e in server.cu.encodes if e["box"][1] == W.BM})
    assert a_addrs == [1 << 20, (1 << 20) + 2 * m * k]  # a is broadcast over the inner batch dim


def test_operand_checks(fake):
    client, server = fake
    a = _tensor(client, (128, 64))
    b = _tensor(client, (64, 256))
    assert W.candidate_valid(a, b)
    assert not W.candidate_valid(_tensor(client, (128, 60)), _tensor(client, (60, 256)))  # 120-byte rows
    assert not W.candidate_valid(a, _tensor(client, (64, 250)))
    assert not W.candidate_valid(_tensor(client, (128, 64), dt.float32), _tensor(client, (64, 256), dt.float32))
    assert not W.candidate_valid(_tensor(client, (128, 64), offset=3), b)  # 6-byte misaligned base
    assert not W.candidate_valid(a, _tensor(client, (64, 256), strides=(1, 64)))  # column-major
    server.arch = "sm_80"
    assert not W.candidate_valid(a, b)
    out = _tensor(client, (128, 256))
    assert not W.supports(a, b, out, 80) and W.supports(a, b, out, 90)


def test_matmul_tunable_is_tried_first_and_cuda_only():
    from ember.backends.cube.matmul import MATMUL_TUNABLES

    t = next(t for t in MATMUL_TUNABLES.candidates if t.name == "wgmma")
    assert t.group == 0 and t.priority == 2
    cpu = SimpleNamespace(client=SimpleNamespace(runtime="cpu"))
    a = _tensor(SimpleNamespace(runtime="cpu"), (128, 64))
    assert not t.valid(cpu, a, a, a)


def test_transposed_operands_are_copied_row_major_keeping_broadcast_batches():
    """``x @ w.T`` and the backward's transposed operands reach the tensor cores as row-major
    copies; a batch dim broadcast by a zero stride stays broadcast (its one matrix is copied),
    and a row-major operand is taken as it is."""
    from ember import Device
    from ember.backends.cube.matmul import _as_row_major

    bk = Device.cpu(fusion=False).backend().inner
    rng = np.random.default_rng()
    w = rng.standard_normal((24, 16)).astype(np.float32)
    tw = bk.from_data(w, dt.float32)
    for view, want in (
        (tw.with_layout((16, 24), (1, 16), 0), w.T),
        (tw.with_layout((3, 16, 24), (0, 1, 16), 0), np.broadcast_to(w.T, (3, 16, 24))),
    ):
        stand_in = _as_row_major(bk, view, False)
        copy = _as_row_major(bk, view, True)
        assert stand_in.strides == copy.strides and copy.strides[-2:] == (24, 1)
        if len(view.shape) == 3:
            assert copy.strides[0] == 0  # the broadcast batch stays a zero stride
        np.testing.assert_array_equal(np.asarray(bk.into_data(copy)), want)
    a = bk.from_data(rng.standard_normal((2, 8, 16)).astype(np.float32), dt.float32)
    assert _as_row_major(bk, a, True) is a


# --------------------------------------------------------------------------- prepared launches
_WGMMA_ARG_SIZES = (128, 128, 8, 8, 4, 4, 4, 4, 4, 4)
_TRANSPOSE_ARG_SIZES = (8, 8, 4, 4, 8)


class _LaunchingServer(_FakeServer):
    """A ``_FakeServer`` whose prepared launches run through the runtime's own ``RawLauncher``:
    its ``cuLaunchKernel`` (the cuda-bindings route, no ctypes driver) records the bytes each
    parameter slot points at when the launch is made, as ``launch_raw`` records its arguments'."""

    def __init__(self):
        from collections import deque

        from ember.cube.runtime.cuda_driver import _current

        super().__init__()
        self._raw_names, self._fast, self.stream, self.ctx = {}, None, "stream", object()
        self.recent, self.prepared_runs = deque(maxlen=8), 0
        self.records, self.launches = [], 0  # the runtime's launch counter is an int
        _current.ctx = self.ctx
        self.cu.cuLaunchKernel = self._record

    def current(self):
        from ember.cube.runtime.cuda_driver import _current

        _current.ctx = self.ctx

    def launch_raw(self, fn, grid, block, args, smem):
        self.records.append((fn, grid, block, args, smem))

    def raw_launcher(self, fn, grid, block, args, smem=0):
        from ember.cube.runtime.cuda_server import CudaServer

        return CudaServer.raw_launcher(self, fn, grid, block, args, smem)

    def _record(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params_addr, extra):  # noqa: N802
        sizes = _WGMMA_ARG_SIZES if str(fn).startswith("em_wgmma") else _TRANSPOSE_ARG_SIZES
        slots = (ctypes.c_void_p * len(sizes)).from_address(params_addr)
        self.records.append((fn, (gx, gy, gz), (bx, by, bz), [ctypes.string_at(p, n) for p, n in zip(slots, sizes)],
                             smem))
        self.prepared_runs += 1
        return (0,)


def _as_bytes(launches):
    """``launch_raw`` records (fn, grid, block, ctypes args, smem): the args as their bytes."""
    return [(fn, tuple(grid), tuple(block), [bytes(a) if not isinstance(a, bytes) else a for a in args], smem)
            for fn, grid, block, args, smem in launches]


@pytest.mark.parametrize("m,k,n,batch,sb,dtype,out_dtype,bias", [
    (300, 72, 520, 1, 0, dt.bfloat16, dt.float32, False),
    (512, 768, 2304, 1, 0, dt.bfloat16, dt.bfloat16, False),
    (128, 64, 256, 3, 0, dt.float16, dt.float16, False),
    (256, 128, 384, 2, 1, dt.bfloat16, dt.bfloat16, False),
    (512, 768, 3072, 1, 0, dt.bfloat16, dt.bfloat16, True),
])
def test_prepared_launch_hands_the_driver_the_general_paths_parameters(m, k, n, batch, sb, dtype, out_dtype, bias):
    """A product launched through its prepared ``RawLauncher`` gives the driver the function,
    grid, block, shared memory and parameter bytes (tensor maps included) that the general path
    gives it, at every address the operands move to; the second launch of a configuration
    reuses its launcher and the cached maps."""
    from ember.backends.cube.cuda_kernels import transpose as T

    general, prepared = _FakeServer(), _LaunchingServer()
    bstep = k * n if sb else 0
    # three launches of one configuration over different operand and output addresses
    addrs = [((1 << 20) + i * (1 << 24), (2 << 20) + i * (1 << 24), (3 << 20) + i * (1 << 24)) for i in (0, 1, 0)]
    got = {}
    for server, knob in ((general, False), (prepared, True)):
        W._MAPS.clear()
        W._PREPARED.clear()
        T.PREPARED[0] = knob
        try:
            for pa, pb, po in addrs:
                W._launch(server, (pa, m * k if batch > 1 else 0), (pb, bstep), po, (4 << 20) if bias else 0, m, n, k,
                          batch, dtype.name, out_dtype.name)
        finally:
            T.PREPARED[0] = True
        got[knob] = (_as_bytes(getattr(server, "records", server.launches)), [e["addr"] for e in server.cu.encodes])
    assert prepared.prepared_runs == prepared.launches == 3 and len(W._PREPARED) == 1
    assert got[True] == got[False]
    # the maps' words differ per address (the fake encoder numbers them): the slots moved with them
    assert len({bytes(lz[3][0]) for lz in got[True][0]}) == 2
    W._PREPARED.clear()


def test_prepared_launch_falls_back_while_another_thread_holds_it():
    server = _LaunchingServer()
    W._MAPS.clear()
    W._PREPARED.clear()
    W._launch(server, (1 << 20, 0), (2 << 20, 0), 3 << 20, 0, 256, 256, 64, 1, "bfloat16", "bfloat16")
    (p,) = W._PREPARED.values()
    with p.launcher.lock:
        W._launch(server, (5 << 20, 0), (6 << 20, 0), 7 << 20, 0, 256, 256, 64, 1, "bfloat16", "bfloat16")
    assert server.prepared_runs == 1 and len(server.records) == 2
    (fn1, grid1, block1, args1, smem1), (fn2, grid2, block2, args2, smem2) = _as_bytes(server.records)
    assert (fn1, grid1, block1, smem1) == (fn2, grid2, block2, smem2)
    assert args2[2] == (7 << 20).to_bytes(8, "little")  # the general path launched with its own arguments
    W._PREPARED.clear()


def test_prepared_transpose_matches_the_general_path():
    from ember.backends.cube.cuda_kernels import transpose as T

    got = {}
    for knob in (False, True):
        server = _LaunchingServer()
        client = SimpleNamespace(runtime="cuda", server=server)
        T._PREPARED.clear()
        T.PREPARED[0] = knob
        try:
            for ptr in (1 << 20, 5 << 20):
                t = _tensor(client, (3, 64, 96), ptr=ptr, strides=(64 * 96, 1, 64))
                out = _tensor(client, (3, 64, 96), ptr=ptr + (1 << 22))
                assert T.supports(t)
                T.transpose(client, t, out)
        finally:
            T.PREPARED[0] = True
        got[knob] = _as_bytes(server.records)
        assert server.prepared_runs == (2 if knob else 0)
    assert got[True] == got[False] and got[True][0][3] != got[True][1][3]
    T._PREPARED.clear()


def test_wgmma_operand_checks_are_made_once_per_layout():
    """``_launch_wgmma`` (the matmul candidate) checks a layout once: the same layout at another
    address launches without the checks, a misaligned address is a layout of its own."""
    from ember.backends.cube import matmul as M

    class Client:  # hashable, as the runtime's clients are (the layout cache keys on the client)
        runtime = "cuda"

    server = _LaunchingServer()
    client = Client()
    client.server = server
    backend = SimpleNamespace(client=client)
    M._WGMMA_LAYOUTS.clear()
    calls = []
    real = W.candidate_valid
    W.candidate_valid = lambda *args: calls.append(1) or real(*args)
    try:
        for ptr in (1 << 20, 9 << 20):
            a = _tensor(client, (128, 64), ptr=ptr)
            b = _tensor(client, (64, 256), ptr=ptr + (1 << 21))
            out = _tensor(client, (128, 256), ptr=ptr + (1 << 22))
            M._launch_wgmma(backend, a, b, out)
        assert len(calls) == 1 and len(server.records) == 2
        a = _tensor(client, (128, 64), ptr=(1 << 20) + 8)  # 8 bytes off: TMA refuses it, the tiled kernel runs
        assert not W.candidate_valid(a, b)
        assert len(M._WGMMA_LAYOUTS) == 1
    finally:
        W.candidate_valid = real
        M._WGMMA_LAYOUTS.clear()
        W._PREPARED.clear()


# --------------------------------------------------------------------------- transposed operands
@pytest.mark.parametrize("a_mn,b_k", [(False, True), (True, False), (True, True)])
def test_transposed_layout_variants_compile_for_sm_90a_without_warnings(a_mn, b_k):
    """The operand-layout variants (``wgmma_source(a_mn=, b_k=)``): every entry, suffixed, for the
    wide staged config a training step's bf16 products take; the row-major source is unchanged."""
    nv = nvrtc_or_skip()
    src, smem = W.layout_config(W.BN, True, a_mn, b_k)
    assert f"#define EM_A_MN {int(a_mn)}\n" in src and f"#define EM_B_K {int(b_k)}\n" in src
    assert smem == W._CONFIGS[W.BN, True][1] and W.layout_config(W.BN, True, False, False) == W._CONFIGS[W.BN, True]
    cubin, log = nv.compile(src, "em_wgmma", W.WGMMA_ARCH)
    for entry in W.entries(a_mn, b_k):
        assert entry.encode() in cubin and entry.endswith(W.layout_suffix(a_mn, b_k)), entry
    assert "warning" not in log.lower(), log
    with pytest.raises(ValueError):
        W.wgmma_source(tf32=True, b_k=True)


def test_layout_suffixes_and_wgmma_instruction_bits():
    assert [W.layout_suffix(*f) for f in ((0, 0), (1, 0), (0, 1), (1, 1))] == ["", "_at", "_bt", "_atbt"]
    assert W.entry_name("bfloat16", "bfloat16", True, b_k=True) == "em_wgmma_bf16_bf16_bias_gelu_bt"
    # imm-trans-a, imm-trans-b: the default reads B N-major (its bit set), b_k K-major (cleared)
    assert W._wgmma_fn(256, "bf16").count("p, 1, 1, 0, 1;") == 1
    assert W._wgmma_fn(256, "bf16", a_mn=True, b_k=True).count("p, 1, 1, 1, 0;") == 1


class _HashClient:
    runtime = "cuda"


@pytest.mark.parametrize("transposed", [False, True])
def test_transposed_operands_are_read_in_place_or_copied(transposed):
    """``x @ w.T`` (B K-major) and ``x.T @ g`` (A M-major): with ``TRANSPOSED`` one wgmma launch of
    the suffixed entry, B's map over w as stored ((k, n): K-major boxes of 64 rows) or A's over
    x as stored ((m, k): 64-column boxes of BK rows); without it a transpose copy first."""
    from ember.backends.cube import matmul as M

    server = _LaunchingServer()
    client = _HashClient()
    client.server = server
    backend = SimpleNamespace(client=client, _empty=lambda shape, dtype: _tensor(client, shape, dtype, ptr=9 << 20))
    m, k, n = 256, 192, 384
    x = _tensor(client, (m, k), ptr=1 << 20)
    w = _tensor(client, (n, k), ptr=2 << 20)
    g = _tensor(client, (m, n), ptr=3 << 20)
    cases = [
        (x, w.with_layout((k, n), (1, k), 0), (m, n), "_bt",
         lambda e: e["dims"] == [k, n, 1] and e["box"] == [64, 64, 1]),
        (x.with_layout((k, m), (1, k), 0), g, (k, n), "_at",
         lambda e: e["dims"] == [k, m, 1] and e["box"] == [64, W.BK, 1]),
    ]
    was = W.TRANSPOSED[0]
    W.TRANSPOSED[0] = transposed
    try:
        for a, b, oshape, suffix, want_map in cases:
            M._WGMMA_LAYOUTS.clear()
            W._MAPS.clear()
            server.records.clear()
            server.cu.encodes.clear()
            out = _tensor(client, oshape, ptr=4 << 20)
            M._launch_wgmma(backend, a, b, out)
            names = [r[0] for r in server.records]
            if transposed:
                assert names == ["em_wgmma_bf16_bf16" + suffix]
                assert any(want_map(e) and e["addr"] in (1 << 20, 2 << 20) for e in server.cu.encodes)
            else:
                assert names == ["em_transpose_b16", "em_wgmma_bf16_bf16"]
    finally:
        W.TRANSPOSED[0] = was
        M._WGMMA_LAYOUTS.clear()
        W._PREPARED.clear()
        W._MAPS.clear()


def test_transposed_layouts_need_16_bit_types_and_whole_16_byte_rows():
    client = _HashClient()
    client.server = _FakeServer()
    was = W.TRANSPOSED[0]
    W.TRANSPOSED[0] = True
    try:
        aT = _tensor(client, (64, 128), strides=(1, 64))  # (m, k) = (64, 128) stored (128, 64)
        bT = _tensor(client, (128, 256), strides=(1, 128))
        assert W.transposed_layouts(aT, bT) == (True, True) and W.candidate_valid(aT, bT, True, True)
        assert not W.candidate_valid(aT, bT)  # read as row-major they are not
        odd = _tensor(client, (60, 128), strides=(1, 60))  # rows of A^T: 120 bytes
        assert W.transposed_layouts(odd, bT)[0] is False
        f32 = _tensor(client, (64, 128), dt.float32, strides=(1, 64))
        assert W.transposed_layouts(f32, bT) == (False, False)
        W.TRANSPOSED[0] = False
        assert W.transposed_layouts(aT, bT) == (False, False)
    finally:
        W.TRANSPOSED[0] = was
