"""tf32 matmul without a GPU: the float32 precision switch (torch's names and semantics), the
autotune key field that keeps tf32 and IEEE decisions apart, the candidates' validity following
the switch, the checks-mode tolerance, NVRTC compiles of every tf32 entry (mma.sync for sm_80,
wgmma for sm_90a), and the wgmma host side (B's transpose into pooled scratch, float32 tensor
maps, batches) against a recording fake driver."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember import dtype as dt
from ember.backends.cube import matmul as mm
from ember.backends.cube.cuda_kernels import mma as M
from ember.backends.cube.cuda_kernels import wgmma as W
from ember.cube.runtime.tensor import CubeTensor, contiguous_strides


@pytest.fixture(autouse=True)
def restore_precision():
    before = ember.get_float32_matmul_precision()
    yield
    ember.set_float32_matmul_precision(before)


def nvrtc_or_skip():
    try:
        from ember.cube.runtime.cuda_nvrtc import nvrtc

        return nvrtc()
    except Exception as e:  # noqa: BLE001 - not installed here
        pytest.skip(f"NVRTC unavailable: {e}")


# --------------------------------------------------------------------------- the switch
def test_switch_values_default_and_errors():
    from ember.precision import tf32_allowed

    assert ember.get_float32_matmul_precision() == "highest" and not tf32_allowed()
    for p, tf32 in (("high", True), ("medium", True), ("highest", False)):
        ember.set_float32_matmul_precision(p)
        assert ember.get_float32_matmul_precision() == p and tf32_allowed() is tf32
    for bad in ("HIGH", "low", "", "tf32"):
        with pytest.raises(ValueError):
            ember.set_float32_matmul_precision(bad)
    assert ember.get_float32_matmul_precision() == "highest"  # a rejected value changes nothing
    assert "set_float32_matmul_precision" in ember.__all__ and "get_float32_matmul_precision" in ember.__all__


def test_import_ember_stays_light():
    import subprocess
    import sys

    code = "import sys, ember; print(any(m.startswith('ember.cube.runtime') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --------------------------------------------------------------------------- fakes
class _FakeCu:
    """Records cuTensorMapEncodeTiled calls; enums and wrappers as plain values."""

    def __init__(self):
        self.encodes = []
        self.CUtensorMapDataType = SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16="bf16",
                                                   CU_TENSOR_MAP_DATA_TYPE_FLOAT16="f16",
                                                   CU_TENSOR_MAP_DATA_TYPE_FLOAT32="f32")
        self.CUtensorMapInterleave = SimpleNamespace(CU_TENSOR_MAP_INTERLEAVE_NONE="none")
        self.CUtensorMapSwizzle = SimpleNamespace(CU_TENSOR_MAP_SWIZZLE_128B="128B")
        self.CUtensorMapL2promotion = SimpleNamespace(CU_TENSOR_MAP_L2_PROMOTION_L2_256B="256B")
        self.CUtensorMapFloatOOBfill = SimpleNamespace(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE="zero")
        self.cuuint64_t = self.cuuint32_t = int

    def cuTensorMapEncodeTiled(self, dtype, rank, addr, dims, strides, box, elem, inter, swz, l2, oob):  # noqa: N802
        self.encodes.append(dict(dtype=dtype, addr=addr, dims=dims, strides=strides, box=box))
        return 0, SimpleNamespace(opaque=[len(self.encodes)] * 16)


class _FakeServer:
    def __init__(self, arch="sm_90"):
        self.cu = _FakeCu()
        self.arch = arch
        self.index = 0
        self.info = SimpleNamespace(multiprocessors=132)
        self.compiler = SimpleNamespace(capabilities=SimpleNamespace(matrix_units=True))
        self.functions = []
        self.launches = []

    def raw_function(self, source, entry, smem=0, arch=None):
        self.functions.append((source, entry, smem, arch))
        return entry

    def launch_raw(self, fn, grid, block, args, smem):
        self.launches.append((fn, grid, block, args, smem))


class _Buf:
    def __init__(self, ptr, nbytes=0):
        self.ptr = ptr
        self.nbytes = nbytes


class _FakeClient:
    runtime = "cuda"
    name = "cuda"

    def __init__(self, arch="sm_90"):
        self.server = _FakeServer(arch)
        self.scratch = []

    def empty(self, nbytes):
        buf = _Buf(64 << 20 | len(self.scratch) << 24, nbytes)
        self.scratch.append(buf)
        return buf


def _tensor(client, shape, dtype=dt.float32, ptr=1 << 20, strides=None, offset=0):
    strides = contiguous_strides(shape) if strides is None else strides
    return CubeTensor(client, _Buf(ptr), shape, strides, offset, dtype)


@pytest.fixture
def fake():
    W._MAPS.clear()
    client = _FakeClient()
    yield client
    W._MAPS.clear()


# --------------------------------------------------------------------------- autotune key, validity, tolerance
def test_key_separates_tf32_from_ieee_and_keeps_field_order(fake):
    from ember.autotune import keys

    backend = SimpleNamespace(client=fake)
    lvl = keys.level()
    a, b = _tensor(fake, (256, 256)), _tensor(fake, (256, 256))
    ieee = mm.matmul_key(lvl, backend, a, b, None)
    ember.set_float32_matmul_precision("high")
    tf32 = mm.matmul_key(lvl, backend, a, b, None)
    ember.set_float32_matmul_precision("medium")
    assert mm.matmul_key(lvl, backend, a, b, None) == tf32 != ieee
    assert len(ieee) == len(mm._KEY_FIELDS) and ieee[-1] == "parallel"  # priorities read key[-1]
    assert dict(zip(mm._KEY_FIELDS, ieee))["precision"] == "ieee"
    assert dict(zip(mm._KEY_FIELDS, tf32))["precision"] == "tf32"
    assert "precision=tf32" in mm.MATMUL_TUNABLES.key_text(tf32)
    # other dtypes and runtimes compute the same whatever the switch: one key
    h = _tensor(fake, (256, 256), dt.bfloat16)
    assert mm.matmul_key(lvl, backend, h, h, None)[-2] == "-"
    cpu = SimpleNamespace(client=SimpleNamespace(runtime="cpu", name="cpu"))
    assert mm.matmul_key(lvl, cpu, a, b, None)[-2] == "-"
    # the fused matmul-epilogue tuner extends the same key
    from ember.backends.cube.fusers import matmul_epilogue as fe

    job = SimpleNamespace(digest="abc")
    key = fe._key(lvl, backend, a, b, job)
    assert key[:-1] == tf32 and len(key) == len(fe.EPILOGUE_TUNABLES.key_fields)


def test_bound_has_no_compute_term_under_tf32(fake):
    backend = SimpleNamespace(client=fake)
    a, b = _tensor(fake, (4096, 4096)), _tensor(fake, (4096, 4096))
    tp = SimpleNamespace(peak_for=lambda size: 50e12, bandwidth=4e12, launch_overhead=5e-6)
    ieee = mm.matmul_bound(None, tp, backend, a, b, None)
    ember.set_float32_matmul_precision("high")
    tf32 = mm.matmul_bound(None, tp, backend, a, b, None)
    assert ieee == pytest.approx(2 * 4096**3 / 50e12 + 5e-6) and tf32 == pytest.approx(3 * 4 * 4096**2 / 4e12 + 5e-6)


def test_candidates_follow_the_switch(fake):
    backend = SimpleNamespace(client=fake)
    by_name = {t.name: t for t in mm.MATMUL_TUNABLES.candidates}
    a, b = _tensor(fake, (256, 128)), _tensor(fake, (128, 256), ptr=2 << 20)
    out = _tensor(fake, (256, 256), ptr=3 << 20)
    for name in ("mma_sync", "wgmma"):
        assert not by_name[name].valid(backend, a, b, out)
    assert not M.candidate_valid(a, b) and not W.candidate_valid(a, b) and not W.supports(a, b, out, 90)
    assert not M.supports(a, b, out, 80)
    ember.set_float32_matmul_precision("high")
    for name in ("mma_sync", "wgmma"):
        assert by_name[name].valid(backend, a, b, out)
    assert W.supports(a, b, out, 90) and M.supports(a, b, out, 80)
    # mma.sync: tiles of 128 x 128 x 16; wgmma: K and N multiples of 8
    assert not M.candidate_valid(_tensor(fake, (256, 120)), _tensor(fake, (120, 256)))
    assert W.candidate_valid(_tensor(fake, (200, 120)), _tensor(fake, (120, 264)))
    assert not W.supports(a, b, _tensor(fake, (256, 256), dt.bfloat16), 90)  # float32 output only
    assert not M.supports(a, b, out, 75)
    fake.server.arch = "sm_80"
    assert M.candidate_valid(a, b) and not W.candidate_valid(a, b)
    # float64 never goes to the tensor cores
    d = _tensor(fake, (256, 128), dt.float64)
    assert not by_name["mma_sync"].valid(backend, d, d, d)


def test_checks_tolerance_allows_tf32_only_when_on():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((64, 64)).astype(np.float32)
    got = (ref * (1 + 1e-3 * rng.standard_normal(ref.shape))).astype(np.float32)
    assert mm._compare(ref, got) is not None
    ember.set_float32_matmul_precision("high")
    assert mm._compare(ref, got) is None
    assert mm._compare(ref, ref + 0.1 * np.abs(ref).max()) is not None  # still catches wrong results
    bad = ref.copy()
    bad[3, 5] = np.nan
    assert "NaN" in mm._compare(ref, bad)


# --------------------------------------------------------------------------- NVRTC
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_tf32_compiles(arch):
    nv = nvrtc_or_skip()
    cubin, log = nv.compile(M.MMA_TF32_SOURCE, "em_mma_tf32", arch)
    for entry in M.entries()["MMA_TF32_SOURCE"]:
        assert entry.encode() in cubin, entry
    assert "warning" not in log.lower(), log
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in M.MMA_TF32_SOURCE
    assert "cvt.rna.tf32.f32" in M.MMA_TF32_SOURCE


@pytest.mark.parametrize("bn,stages,cluster", [(W.BN, W.STAGES, 1), (128, 6, 1), (W.BN, W.STAGES, 2)])
def test_wgmma_tf32_compiles_for_sm_90a_without_warnings(bn, stages, cluster):
    nv = nvrtc_or_skip()
    src = W.wgmma_source(bn, stages, cluster=cluster, tf32=True)
    assert f"m64n{bn}k8.f32.tf32.tf32" in src and "k16" not in src.split("em_wgmma_n")[1].split("}")[0]
    cubin, log = nv.compile(src, "em_wgmma_tf32", W.WGMMA_ARCH)
    for entry in W.TF32_ENTRIES:
        assert entry.encode() in cubin, entry
    for entry in W.entries():  # the 16-bit entries live in the other sources
        assert entry.encode() not in cubin, entry
    assert "warning" not in log.lower(), log


def test_tf32_sources_match_the_16_bit_configs():
    for bn, (src, smem) in W._CONFIGS_TF32.items():
        assert f"#define EM_BN {bn}\n" in src and "#define EM_TF32 1\n" in src and "#define EM_ES 4\n" in src
        assert smem == W._CONFIGS[bn, False][1]  # the same ring: 128-byte rows, the same stage bytes
    assert "#define EM_TF32 0\n" in W.WGMMA_SOURCE and "m64n256k16.f32.bf16.bf16" in W.WGMMA_SOURCE
    with pytest.raises(ValueError):
        W.wgmma_source(tf32=True, staged=True)
    assert W.entry_name("float32", "float32") == M.entry_name("float32", "float32").replace("mma", "wgmma")
    assert W.entry_name("float32", "float32") == "em_wgmma_tf32_f32"


# --------------------------------------------------------------------------- host side (fake driver)
def test_wgmma_tf32_transposes_b_into_scratch_then_maps_float32(fake):
    ember.set_float32_matmul_precision("high")
    server = fake.server
    m, k, n = 300, 72, 520
    a, b = _tensor(fake, (m, k), ptr=1 << 20), _tensor(fake, (k, n), ptr=2 << 20)
    out = _tensor(fake, (m, n), ptr=3 << 20)
    W.matmul_wgmma(fake, a, b, out)
    bn, persistent = W._choose(m, n, 1, 132)
    src = W._CONFIGS_TF32[bn][0]
    (s0, e0, _, arch0), (s1, e1, smem1, arch1) = server.functions
    from ember.backends.cube.cuda_kernels.transpose import TRANSPOSE_SOURCE

    assert (s0, e0, arch0) == (TRANSPOSE_SOURCE, "em_transpose_b32", None)
    assert (s1, e1, arch1) == (src, W.TF32_ENTRIES[0], "sm_90a")
    (scratch,) = fake.scratch
    assert scratch.nbytes == 4 * n * k
    (tfn, tgrid, tblock, targs, _), (pfn, pgrid, _, pargs, psmem) = server.launches
    assert tfn == "em_transpose_b32" and tgrid == (-(-n // 64), -(-k // 64), 1) and tblock == (256, 1, 1)
    assert [x.value for x in targs] == [2 << 20, scratch.ptr, k, n, 0]
    assert pfn == "em_wgmma_tf32_f32" and psmem == smem1 == W._CONFIGS_TF32[bn][1]
    ea, eb = server.cu.encodes
    # A (k, m) and B^T (k, n): float32 rows, boxes of 32 floats (128 bytes) x 128 / 64 rows
    assert ea == dict(dtype="f32", addr=1 << 20, dims=[k, m, 1], strides=[4 * k, 4 * m * k], box=[32, W.BM, 1])
    assert eb == dict(dtype="f32", addr=scratch.ptr, dims=[k, n, 1], strides=[4 * k, 4 * n * k], box=[32, 64, 1])
    tiles = -(-m // W.BM) * -(-n // bn)
    assert pgrid == (min(tiles, 132) if persistent else tiles, 1, 1)
    assert [x.value for x in pargs[4:]] == [m, n, k, 1, 0, 0]
    with pytest.raises(ValueError):
        W.matmul_wgmma(fake, a, b, out, _tensor(fake, (n,)))


def test_wgmma_tf32_batches(fake):
    ember.set_float32_matmul_precision("high")
    server = fake.server
    backend = SimpleNamespace(client=fake)
    m, k, n = 128, 64, 256
    # B shared by the batch: one transpose of one matrix, product with B step 0
    a = _tensor(fake, (3, m, k), ptr=1 << 20)
    b = _tensor(fake, (3, k, n), ptr=2 << 20, strides=(0, n, 1))
    out = _tensor(fake, (3, m, n), ptr=3 << 20)
    W.candidate_launch(backend, a, b, out)
    (_, tgrid, _, _, _), (_, _, _, pargs, _) = server.launches
    assert tgrid[2] == 1 and fake.scratch[0].nbytes == 4 * n * k and [x.value for x in pargs[7:]] == [3, 1, 0]
    # B batched: one transpose launch over the batch (grid z), B^T entries n * k apart
    server.launches.clear()
    b = _tensor(fake, (3, k, n), ptr=2 << 20)
    W.candidate_launch(backend, a, b, out)
    (_, tgrid, _, targs, _), (_, _, _, pargs, _) = server.launches
    assert tgrid[2] == 3 and targs[4].value == k * n and fake.scratch[1].nbytes == 3 * 4 * n * k
    assert [x.value for x in pargs[7:]] == [3, 1, 1]
    assert server.cu.encodes[-1]["strides"] == [4 * k, 4 * n * k]


def test_mma_tf32_host_side(fake):
    ember.set_float32_matmul_precision("high")
    server = fake.server
    a, b = _tensor(fake, (256, 32), ptr=1 << 20), _tensor(fake, (32, 384), ptr=2 << 20)
    out = _tensor(fake, (256, 384), ptr=3 << 20)
    assert M.supports(a, b, out, 90)
    M.matmul_mma(fake, a, b, out)
    (src, entry, smem, arch), = server.functions
    assert src is M.MMA_TF32_SOURCE and entry == "em_mma_tf32_f32" and smem == M.SMEM_BYTES and arch is None
    (_, grid, block, args, _), = server.launches
    assert grid == (3, 2, 1) and block == (256, 1, 1) and [x.value for x in args[4:]] == [256, 384, 32]
    with pytest.raises(ValueError):
        M.matmul_mma(fake, a, b, out, _tensor(fake, (384,)))
