"""IEEE float32 matmul on CUDA cores (FFMA, no tf32) for the CUDA runtime: a hand-written SGEMM.

A hand-written CUDA C++ kernel (like ``mma``), compiled by NVRTC for the device's own
architecture. It is the float32 candidate under the default precision "highest", beside the
portable ``@cube`` kernel ``matmul_gpu`` (``GPU_TILES``), which it differs from in what the
kernel language cannot say yet: a 2-D warp layout, fragments of the next k step loaded while
the products of this one run, dynamic shared memory beyond 48 KiB, and a launch-bounds
occupancy per tile.

One block of ``(bm / tm) * (bn / tn)`` threads computes a ``bm x bn`` block of ``out``; each
thread a ``tm x tn`` register block made of ``tm / 4`` x ``tn / 4`` sub-blocks of 4 x 4 spaced
``bm / (tm / 4)`` rows and ``bn / (tn / 4)`` columns apart (so every shared read is one 16-byte
line and a warp's reads are contiguous). A warp is 4 (m) x 8 (n) threads (``ln``): per k step its B
reads are 8 consecutive lines (128 bytes, one shared wavefront) and its A reads 4 lines
(broadcasts); warps tile the block ``(bm / tm) / 4`` x ``(bn / tn) / 8``.

Shared memory (dynamic, two buffers): A k-major (``bk`` rows of ``bm + 4`` floats: a global
line of 4 k values of one row is stored as 4 scalars down the column; the padding makes the
two k lines a warp stores land in different banks), B row-major (``bk`` rows of ``bn``). Each
k tile: global lines of the next tile are loaded into registers at its start (B, with ``cpb``,
copied straight into the other buffer by ``cp.async`` instead), the fragments (A and B lines)
of k step ``kk + 1`` are read from shared memory while the FMAs of ``kk`` run, and before the
last k step the registers are stored to the other buffer (``cpb``: the copies awaited), one
barrier, and the first fragments of the next tile read: one ``__syncthreads`` per k tile.
Products accumulate in k order with ``fmaf`` (one rounding per product, as ``matmul_gpu``'s
``use_fma``). Measured on an H200 (``SGEMM_TILES``): 0.92x torch at 4096², 0.94x at 8192².

Contract (``supports``): float32 row-major contiguous matrices (batch entries at any stride:
grid z, flattened when the batch dims of each operand collapse to one stride), M, N multiples
of the block, K of ``bk``, 16-byte aligned starts. Other shapes run ``matmul_gpu`` instead
(``candidate_launch``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ....cube.runtime.tensor import batch_step as _batch_stride

__all__ = [
    "SgemmTiles",
    "SGEMM_TILES",
    "SGEMM_SWEEP",
    "sgemm_source",
    "supports",
    "matmul_sgemm",
    "candidate_valid",
    "candidate_launch",
    "tunables",
]

#: a matmul launch as the Cube backend's candidates take it: ``launch(backend, a, b, out)``
Launch = Callable[[Any, Any, Any, Any], None]


@dataclass(frozen=True)
class SgemmTiles:
    """Block ``bm x bn``, k tile ``bk``, ``tm x tn`` outputs per thread, ``occ`` blocks per
    SM the compiler must fit (``__launch_bounds__(threads, occ)``: at most 65536 / (threads *
    occ) registers per thread), ``ln`` threads of a warp along n (``32 / ln`` along m), ``cpb``:
    B tiles copied to shared memory by ``cp.async`` instead of through registers, ``gr`` > 1:
    blocks scheduled in groups of ``gr`` block rows (L2 reuse)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    occ: int = 1
    ln: int = 8
    cpb: bool = False
    gr: int = 1

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def name(self) -> str:
        return (
            f"sgemm{self.bm}x{self.bn}x{self.bk}_{self.tm}x{self.tn}_o{self.occ}"
            + ("" if self.ln == 8 else f"_w{32 // self.ln}x{self.ln}")
            + ("_cpb" if self.cpb else "")
            + (f"_g{self.gr}" if self.gr > 1 else "")
        )

    @property
    def entry(self) -> str:
        return f"em_{self.name}"

    @property
    def smem_bytes(self) -> int:
        """Two buffers of the padded k-major A tile and the B tile."""
        return 2 * self.bk * ((self.bm + 4) + self.bn) * 4

    def check(self) -> None:
        """Raise ValueError unless the kernel's layout rules hold for this shape."""
        ty, tx = self.bm // self.tm, self.bn // self.tn
        ok = (
            self.tm % 4 == 0
            and self.tn % 4 == 0
            and self.bm % self.tm == 0
            and self.bn % self.tn == 0
            and self.ln in (2, 4, 8, 16)
            and self.gr >= 1
            and ty % (32 // self.ln) == 0  # a warp is 32 / ln threads along m ...
            and tx % self.ln == 0  # ... by ln along n
            and self.bk % 4 == 0
            and (self.bm * self.bk // 4) % self.threads == 0  # every thread stages whole lines
            and (self.bk * self.bn // 4) % self.threads == 0
            and self.threads <= 1024
            and self.smem_bytes <= 227 * 1024
        )
        if not ok:
            raise ValueError(f"cuda_kernels.sgemm: tile shape {self} breaks the kernel's layout rules")


#: the candidates registered for tuning, measured on an H200 at 4096² / 8192² against torch
#: without tf32: 256 x 128 blocks of 256 threads with
#: 16 x 8 each, k tiles of 16, B by cp.async, one block per SM (233 registers, 49.7 KiB of shared
#: memory): 46.5 / 47.5 TFLOP/s = 0.92x / 0.94x torch; 128 x 128 blocks of 128 threads with
#: 16 x 8 each, two per SM (233 registers): 45.2 / 46.2 TFLOP/s = 0.89x / 0.91x, and twice the
#: blocks of the first for products with few blocks per SM.
SGEMM_TILES: tuple[SgemmTiles, ...] = (
    SgemmTiles(256, 128, 16, 16, 8, occ=1, cpb=True),
    SgemmTiles(128, 128, 8, 16, 8, occ=2),
)

#: the shapes ``bench/gpu_matmul_f32.py`` times: two blocks of 128 x 128 per SM (k tiles of 8 or
#: 16, B through registers or cp.async, three warp layouts, grouped block order; 256 threads of
#: 8 x 8 or 128 threads of 8 x 16 / 16 x 8), four blocks of 128 x 64 / 64 x 128 (128 threads of
#: 8 x 8), one block of 128 x 256 / 256 x 128
_T = SgemmTiles
SGEMM_SWEEP: tuple[SgemmTiles, ...] = (
    _T(128, 128, 8, 8, 8, occ=2),
    _T(128, 128, 8, 8, 8, occ=2, cpb=True),
    _T(128, 128, 8, 8, 8, occ=2, ln=4, cpb=True),
    _T(128, 128, 16, 8, 8, occ=2, cpb=True),
    _T(128, 128, 8, 8, 8, occ=2, ln=4),
    _T(128, 128, 8, 8, 8, occ=2, ln=16),
    _T(128, 128, 8, 8, 8, occ=1),
    _T(128, 128, 8, 8, 8, occ=2, gr=8),
    _T(128, 128, 8, 8, 16, occ=2),
    _T(128, 128, 8, 16, 8, occ=2),
    _T(128, 128, 16, 8, 16, occ=2, cpb=True),
    _T(128, 64, 8, 8, 8, occ=4),
    _T(64, 128, 8, 8, 8, occ=4, cpb=True),
    _T(128, 256, 8, 8, 16, occ=1),
    _T(128, 256, 8, 8, 16, occ=1, cpb=True),
    _T(128, 256, 16, 8, 16, occ=1, cpb=True),
    _T(256, 128, 8, 16, 8, occ=1),
    _T(256, 128, 16, 16, 8, occ=1, cpb=True),
)

#: the device helpers the kernel calls (the host emulation in the unit tests supplies its own)
_PRELUDE = r"""
typedef unsigned int uint32_t;

static __device__ __forceinline__ void em_cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src));
}
static __device__ __forceinline__ void em_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void em_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
"""

_KERNEL = r"""
/* LN: threads of a warp along n (32 / LN along m); CPB: B tiles copied global -> shared by
   cp.async (no registers, no stores) instead of through registers; GR > 1: blocks run in groups
   of GR block rows, column by column inside a group (the blocks in flight share more rows of A
   and columns of B in L2) */
template <int BM, int BN, int BK, int TM, int TN, int LN, int CPB, int GR>
__device__ __forceinline__ void em_sgemm_body(const float *__restrict__ A, const float *__restrict__ B,
                                              float *__restrict__ C, int M, int N, int K,
                                              long long sab, long long sbb) {
    constexpr int TX = BN / TN, TY = BM / TM, NT = TX * TY;
    constexpr int LM = 32 / LN, WX = TX / LN;  /* warps along n */
    constexpr int GM = TM / 4, GN = TN / 4;    /* 4 x 4 sub-blocks per thread */
    constexpr int SPM = BM / GM, SPN = BN / GN;  /* their spacing in rows / columns */
    constexpr int LDA = BM + 4;                /* k-major A rows, padded (bank spread of the stores) */
    constexpr int A_TILE = BK * LDA, B_TILE = BK * BN;
    constexpr int KL = BK / 4, NL = BN / 4;    /* lines per row of the A / B tile */
    constexpr int A_LD = BM * KL / NT, B_LD = BK * NL / NT;  /* lines each thread stages */
    extern __shared__ __align__(16) float em_sg[];
    float *As = em_sg, *Bs = em_sg + 2 * A_TILE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tmi = (warp / WX) * LM + lane / LN, tni = (warp % WX) * LN + lane % LN;
    int bx = blockIdx.x, by = blockIdx.y;
    if (GR > 1) {  /* a bijection of the (x, y) grid */
        const int gx = gridDim.x, id = by * gx + bx, per = GR * gx, first = (id / per) * GR;
        const int rows = min((int)gridDim.y - first, GR);
        by = first + (id % per) % rows;
        bx = (id % per) / rows;
    }
    A += blockIdx.z * sab + (size_t)by * BM * K;
    B += blockIdx.z * sbb + (size_t)bx * BN;
    C += (size_t)blockIdx.z * M * N + (size_t)by * BM * N + (size_t)bx * BN;

    /* this thread's staged lines: A line idx = row * KL + c, B line idx = row * NL + c; A and B
       step to the next k tile (32-bit offsets: fewer registers than a pointer per line) */
    int oa[A_LD], ob[B_LD];
#pragma unroll
    for (int s = 0; s < A_LD; ++s) {
        const int idx = tid + s * NT;
        oa[s] = (idx / KL) * K + (idx % KL) * 4;
    }
#pragma unroll
    for (int s = 0; s < B_LD; ++s) {
        const int idx = tid + s * NT;
        ob[s] = (idx / NL) * N + (idx % NL) * 4;
    }
    const size_t b_step = (size_t)BK * N;
    float4 ra[A_LD], rb[CPB ? 1 : B_LD];
    /* the next tile: A (and B without CPB) into registers; with CPB, B straight into shared
       buffer buf, which no thread reads before the barrier that follows (the previous reads
       of buf ended before the last barrier) */
    auto gload = [&](int buf) {
#pragma unroll
        for (int s = 0; s < A_LD; ++s) ra[s] = __ldg((const float4 *)(A + oa[s]));
#pragma unroll
        for (int s = 0; s < B_LD; ++s) {
            if (CPB) {
                const int idx = tid + s * NT;
                em_cp_async16(Bs + buf * B_TILE + (idx / NL) * BN + (idx % NL) * 4, B + ob[s]);
            } else {
                rb[CPB ? 0 : s] = __ldg((const float4 *)(B + ob[s]));
            }
        }
        if (CPB) em_cp_async_commit();
        A += BK;
        B += b_step;
    };
    auto sstore = [&](int buf) {
        float *as = As + buf * A_TILE, *bs = Bs + buf * B_TILE;
#pragma unroll
        for (int s = 0; s < A_LD; ++s) {
            const int idx = tid + s * NT, row = idx / KL, kc = (idx % KL) * 4;
            as[(kc + 0) * LDA + row] = ra[s].x;
            as[(kc + 1) * LDA + row] = ra[s].y;
            as[(kc + 2) * LDA + row] = ra[s].z;
            as[(kc + 3) * LDA + row] = ra[s].w;
        }
        if (CPB) {
            em_cp_async_wait_all();  /* this thread's copies; the barrier shares them */
        } else {
#pragma unroll
            for (int s = 0; s < B_LD; ++s) {
                const int idx = tid + s * NT;
                *(float4 *)(bs + (idx / NL) * BN + (idx % NL) * 4) = rb[CPB ? 0 : s];
            }
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    float4 fa[2][GM], fb[2][GN];
    auto fload = [&](int f, int buf, int k) {
        const float *as = As + buf * A_TILE + k * LDA + tmi * 4;
        const float *bs = Bs + buf * B_TILE + k * BN + tni * 4;
#pragma unroll
        for (int g = 0; g < GM; ++g) fa[f][g] = *(const float4 *)(as + g * SPM);
#pragma unroll
        for (int g = 0; g < GN; ++g) fb[f][g] = *(const float4 *)(bs + g * SPN);
    };

    gload(0);
    sstore(0);
    __syncthreads();
    fload(0, 0, 0);
    const int KT = K / BK;
    for (int kt = 0; kt < KT; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < KT;  /* uniform across the block */
        if (more) gload(cur ^ 1);
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk == BK - 1) {
                /* the other buffer was last read before the previous tile's barrier */
                if (more) {
                    sstore(cur ^ 1);
                    __syncthreads();
                    fload((kk + 1) & 1, cur ^ 1, 0);
                }
            } else {
                fload((kk + 1) & 1, cur, kk + 1);
            }
            const int f = kk & 1;
#pragma unroll
            for (int gm = 0; gm < GM; ++gm) {
                const float av[4] = {fa[f][gm].x, fa[f][gm].y, fa[f][gm].z, fa[f][gm].w};
#pragma unroll
                for (int gn = 0; gn < GN; ++gn) {
                    const float bv[4] = {fb[f][gn].x, fb[f][gn].y, fb[f][gn].z, fb[f][gn].w};
#pragma unroll
                    for (int r = 0; r < 4; ++r)
#pragma unroll
                        for (int c = 0; c < 4; ++c)
                            acc[gm * 4 + r][gn * 4 + c] = fmaf(av[r], bv[c], acc[gm * 4 + r][gn * 4 + c]);
                }
            }
        }
    }

#pragma unroll
    for (int gm = 0; gm < GM; ++gm)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            float *row = C + (size_t)(gm * SPM + tmi * 4 + r) * N + tni * 4;
#pragma unroll
            for (int gn = 0; gn < GN; ++gn) {
                const float *v = acc[gm * 4 + r] + gn * 4;
                *(float4 *)(row + gn * SPN) = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
}
"""

_ENTRY = r"""
extern "C" __global__ void __launch_bounds__({threads}, {occ}) {entry}(
        const float *A, const float *B, float *C, int M, int N, int K, long long sab, long long sbb) {{
    em_sgemm_body<{bm}, {bn}, {bk}, {tm}, {tn}, {ln}, {cpb}, {gr}>(A, B, C, M, N, K, sab, sbb);
}}
"""


def sgemm_source(tiles: tuple[SgemmTiles, ...] | SgemmTiles, prelude: str = _PRELUDE) -> str:
    """CUDA C++ with one entry (``SgemmTiles.entry``) per tile shape; ``prelude`` defines the
    device helpers (``em_cp_async16`` and its commit / wait)."""
    if isinstance(tiles, SgemmTiles):
        tiles = (tiles,)
    parts = [prelude, _KERNEL]
    for t in tiles:
        t.check()
        parts.append(
            _ENTRY.format(threads=t.threads, occ=t.occ, entry=t.entry, bm=t.bm, bn=t.bn, bk=t.bk, tm=t.tm, tn=t.tn,
                          ln=t.ln, cpb=int(t.cpb), gr=t.gr)
        )
    return "".join(parts)


#: one source per registered tile (a source's store key covers all its entries)
_SOURCES: dict[SgemmTiles, str] = {}


def _source(tiles: SgemmTiles) -> str:
    src = _SOURCES.get(tiles)
    if src is None:
        src = _SOURCES[tiles] = sgemm_source(tiles)
    return src


def supports(a: Any, b: Any, out: Any, tiles: SgemmTiles) -> bool:
    """Whether the kernel takes these CubeTensors as they are: float32, matrices row-major
    contiguous, blocks dividing (m, n) and ``bk`` dividing k, 16-byte aligned starts, the batch
    dims of each operand one stride (out contiguous)."""
    if a.dtype.name != "float32" or b.dtype is not a.dtype or out.dtype is not a.dtype:
        return False
    if len(a.shape) < 2 or len(a.shape) != len(b.shape) or len(out.shape) != len(a.shape):
        return False
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2 or out.shape[-2:] != (m, n) or m % tiles.bm or n % tiles.bn or k % tiles.bk or k == 0:
        return False
    if a.strides[-2:] != (k, 1) or b.strides[-2:] != (n, 1) or not out.is_contiguous():
        return False
    if any(t.offset % 4 for t in (a, b, out)):
        return False
    batch = a.shape[:-2]
    if math.prod(batch) > 65535:
        return False
    sa, sb = _batch_stride(batch, a.strides[:-2]), _batch_stride(batch, b.strides[:-2])
    return sa is not None and sb is not None and sa % 4 == 0 and sb % 4 == 0


def matmul_sgemm(client: Any, a: Any, b: Any, out: Any, tiles: SgemmTiles = SGEMM_TILES[0]) -> None:
    """``out[...] = a[...] @ b[...]`` for operands ``supports`` accepts (one launch, batch on grid z)."""
    server = client.server
    fn = server.raw_function(_source(tiles), tiles.entry, tiles.smem_bytes)
    (m, k), n = a.shape[-2:], b.shape[-1]
    batch = a.shape[:-2]
    sa = _batch_stride(batch, a.strides[:-2]) or 0
    sb = _batch_stride(batch, b.strides[:-2]) or 0
    args = [ctypes.c_uint64(t.buffer.ptr + t.offset * 4) for t in (a, b, out)]
    args += [ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k), ctypes.c_int64(sa), ctypes.c_int64(sb)]
    grid = (n // tiles.bn, m // tiles.bm, math.prod(batch))
    server.launch_raw(fn, grid, (tiles.threads, 1, 1), args, tiles.smem_bytes)


# --------------------------------------------------------------------------- matmul candidate
def candidate_valid(backend: Any, a: Any, b: Any, out: Any) -> bool:
    """For the tuner: float32 on a CUDA client of compute capability 8.0+ (``cp.async``; any
    shape: ``candidate_launch`` falls back to ``matmul_gpu`` where ``supports`` refuses, since a
    decision covers a whole size bucket); not under tf32 precision (the tensor-core candidates
    own float32 then)."""
    from ....cube.compiler.cuda import sm_number
    from ....precision import tf32_allowed

    client = backend.client
    if getattr(client, "runtime", None) != "cuda" or a.dtype.name != "float32":
        return False
    return sm_number(str(getattr(client.server, "arch", ""))) >= 80 and not tf32_allowed()


def candidate_launch(backend: Any, a: Any, b: Any, out: Any, tiles: SgemmTiles, fallback: Launch) -> None:
    """``out = a @ b`` (operands expanded to out's batch dims): the SGEMM where it takes the
    operands, else ``fallback(backend, a, b, out)`` (the Cube backend's portable matmul: a
    decision covers a whole size bucket, so the candidate must take every shape)."""
    if supports(a, b, out, tiles):
        matmul_sgemm(backend.client, a, b, out, tiles)
        return
    fallback(backend, a, b, out)


def tunables(fallback: Launch, priority: Callable[[tuple[Any, ...]], int]) -> list[Any]:
    """The autotune entries of ``SGEMM_TILES`` for the Cube backend's matmul set: group 0,
    ``priority`` (the backend passes its GPU tiles' rule), shapes the kernel refuses run
    ``fallback``. The caller owns the choice; this module only describes its kernel."""
    from .... import autotune

    def make(t: SgemmTiles) -> Any:
        def launch(backend: Any, a: Any, b: Any, out: Any) -> None:
            candidate_launch(backend, a, b, out, t, fallback)

        # prepared first: no expansion, and the longest compiles (``matmul.MATMUL_TUNABLES``)
        return autotune.Tunable(t.name, launch, 0, priority, valid=candidate_valid, prepare_order=-2)

    return [make(t) for t in SGEMM_TILES]
