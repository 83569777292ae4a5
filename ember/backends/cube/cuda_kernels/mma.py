"""Tensor-core matmul for the CUDA runtime: ``mma.sync`` (sm_80+) on f16/bf16, f32 accumulate.

A hand-written CUDA C++ kernel (not a ``@cube`` kernel: the kernel language has no
matrix-unit intrinsic yet), compiled by NVRTC for the device's architecture and persisted like
every other cubin. Tiles: 128 x 128 x 32 per block of 8 warps (each warp 64 x 32: 4 x 4
``m16n8k16`` products per k-step), operands staged through shared memory with ``cp.async``
(``STAGES`` = 4 deep in dynamic shared memory, rows padded by 16 bytes so ``ldmatrix`` is
conflict-free), fragments loaded with
``ldmatrix`` (``.trans`` for the row-major B). Optional fused epilogue: ``+ bias[n]`` then GELU
(erf form), applied to the f32 accumulators before the single rounding to the output type.

Contract: row-major contiguous ``a`` (M, K) and ``b`` (K, N), ``out`` (M, N) of f32 or the
input type; M and N multiples of 128, K a multiple of 32 (``supports``).

tf32 (``MMA_TF32_SOURCE``, entry ``em_mma_tf32_f32``): float32 operands while
``ember.set_float32_matmul_precision`` allows tf32 ("high" / "medium"; ``supports`` and
``candidate_valid`` refuse float32 under "highest"). ``m16n8k8`` products on operands rounded
with ``cvt.rna``; 128 x 128 x 16 tiles, the same warps and ring; fragments from plain 32-bit
shared loads (``ldmatrix`` cannot transpose 32-bit elements), rows padded so they are
conflict-free; K a multiple of 16, no epilogue. On an H200 it reaches about 0.4x of wgmma's
tf32 rate (wgmma wins there).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ....precision import tensor_core_types as _in_types

__all__ = ["MMA_SOURCE", "MMA_TF32_SOURCE", "HALF_HELPERS", "supports", "matmul_mma", "entry_name", "entries"]

#: what every hand-written CUDA source here starts with: the integer types NVRTC lacks without
#: headers, the shared-window address of a pointer, and f16/bf16 <-> f32 conversions
HALF_HELPERS = r"""
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

__device__ __forceinline__ uint32_t em_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ float em_bf16_f32(uint16_t h) { return __uint_as_float(((uint32_t)h) << 16); }
__device__ __forceinline__ float em_f16_f32(uint16_t h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ uint16_t em_f32_bf16(float f) {
    uint16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ uint16_t em_f32_f16(float f) {
    uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
"""

BM, BN, BK = 128, 128, 32
STAGES = 4
#: dynamic shared memory of a block: STAGES tiles of A (128 x 40 halves) and of B (32 x 136)
SMEM_BYTES = STAGES * (128 * 40 + 32 * 136) * 2

MMA_SOURCE = HALF_HELPERS + r"""
#define LDA 40   /* BK + 8 halves: rows 80 bytes apart, 16-byte aligned, no ldmatrix conflicts */
#define LDB 136  /* BN + 8 halves */

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(em_smem(dst)), "l"(src));
}

#define STAGES 4
#define A_TILE (128 * LDA)
#define B_TILE (32 * LDB)
extern __shared__ __align__(128) uint16_t em_tiles[];

template <int BF16, int OUT, int EPI>
__device__ __forceinline__ void mma_kernel(const uint16_t *__restrict__ A, const uint16_t *__restrict__ B,
                                           void *__restrict__ C, const void *__restrict__ bias,
                                           int M, int N, int K) {
    uint16_t *As = em_tiles;                      /* STAGES tiles of A, then STAGES tiles of B */
    uint16_t *Bs = em_tiles + STAGES * A_TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;   /* 2 x 4 warps, 64 x 32 each */
    const int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    auto load = [&](int stage, int k0) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {   /* A: 128 rows x 4 chunks of 8 halves */
            const int id = tid + c * 256, row = id >> 2, col = (id & 3) * 8;
            cp_async16(&As[stage * A_TILE + row * LDA + col], A + (size_t)(bm + row) * K + k0 + col);
        }
#pragma unroll
        for (int c = 0; c < 2; ++c) {   /* B: 32 rows x 16 chunks of 8 halves */
            const int id = tid + c * 256, row = id >> 4, col = (id & 15) * 8;
            cp_async16(&Bs[stage * B_TILE + row * LDB + col], B + (size_t)(k0 + row) * N + bn + col);
        }
    };

    /* STAGES - 1 tiles in flight; one commit group per tile slot (empty groups keep the count) */
    const int KT = K / 32;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load(s, s * 32);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = 0; kt < KT; ++kt) {
        const int st = kt % STAGES;
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();  /* tile kt landed for every thread; every warp is done with tile kt - 1 */
        {
            const int nk = kt + STAGES - 1;  /* refill the slot tile kt - 1 used */
            if (nk < KT) load(nk % STAGES, nk * 32);
            asm volatile("cp.async.commit_group;\n" ::);
        }
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            uint32_t af[4][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint16_t *p = &As[st * A_TILE + (wm + i * 16 + (lane & 15)) * LDA + kk + (lane >> 4) * 8];
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(af[i][0]), "=r"(af[i][1]), "=r"(af[i][2]), "=r"(af[i][3])
                             : "r"(em_smem(p)));
            }
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                const uint16_t *p = &Bs[st * B_TILE + (kk + (lane & 15)) * LDB + wn + j * 8 + (lane >> 4) * 8];
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(bf[j][0]), "=r"(bf[j][1]), "=r"(bf[j + 1][0]), "=r"(bf[j + 1][1])
                             : "r"(em_smem(p)));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (BF16)
                        asm volatile(
                            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                            : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                              "r"(bf[j][1]));
                    else
                        asm volatile(
                            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                            : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                              "r"(bf[j][1]));
                }
        }
    }
    /* epilogue: c0,c1 at (row g, cols 2t, 2t+1); c2,c3 at row g + 8 */
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm + wm + i * 16 + g + h * 8, col = bn + wn + j * 8 + t4 * 2;
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (EPI) {
                    const uint16_t *bb = (const uint16_t *)bias;
                    const float b0 = BF16 ? em_bf16_f32(bb[col]) : em_f16_f32(bb[col]);
                    const float b1 = BF16 ? em_bf16_f32(bb[col + 1]) : em_f16_f32(bb[col + 1]);
                    v0 += b0; v1 += b1;
                    v0 = 0.5f * v0 * (1.f + erff(v0 * 0.70710678118654752f));
                    v1 = 0.5f * v1 * (1.f + erff(v1 * 0.70710678118654752f));
                }
                const size_t o = (size_t)row * N + col;
                if (OUT == 0) {
                    *(float2 *)((float *)C + o) = make_float2(v0, v1);
                } else {
                    const uint32_t lo = BF16 ? em_f32_bf16(v0) : em_f32_f16(v0);
                    const uint32_t hi = BF16 ? em_f32_bf16(v1) : em_f32_f16(v1);
                    *(uint32_t *)((uint16_t *)C + o) = lo | (hi << 16);
                }
            }
}

#define EM_MMA(NAME, BF16, OUT, EPI)                                                                 \
    extern "C" __global__ void __launch_bounds__(256, 2) NAME(const uint16_t *A, const uint16_t *B,   \
                                                          void *C, const void *bias, int M, int N,  \
                                                          int K) {                                  \
        mma_kernel<BF16, OUT, EPI>(A, B, C, bias, M, N, K);                                         \
    }
EM_MMA(em_mma_bf16_f32, 1, 0, 0)
EM_MMA(em_mma_bf16_bf16, 1, 1, 0)
EM_MMA(em_mma_bf16_bf16_bias_gelu, 1, 1, 1)
EM_MMA(em_mma_f16_f32, 0, 0, 0)
EM_MMA(em_mma_f16_f16, 0, 1, 0)
EM_MMA(em_mma_f16_f16_bias_gelu, 0, 1, 1)
"""


#: tf32 (float32 operands): tiles of 128 x 128 x 16 (a k-step of 16 floats is the 64 bytes the
#: 16-bit kernel's k-step of 32 is), the same 8 warps of 64 x 32 (4 x 4 ``m16n8k8`` per k8) and
#: the same 4-stage ``cp.async`` ring; the stage happens to hold exactly as many bytes.
BK_TF32 = 16

MMA_TF32_SOURCE = HALF_HELPERS + r"""
/* A rows of 16 + 4 floats: the fragment loads (rows g = 0..7, columns t = 0..3) hit banks
   20g + t mod 32, all distinct; B rows of 128 + 8 floats: (rows t, columns g) hit 8t + g.
   Both 16-byte aligned for cp.async. ldmatrix has no 32-bit transpose, so B fragments come
   from plain 32-bit shared loads (A's too: one load per register, no shuffle). */
#define LDA 20
#define LDB 136
#define STAGES 4
#define A_TILE (128 * LDA)
#define B_TILE (16 * LDB)
extern __shared__ __align__(128) float em_tiles32[];

__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(em_smem(dst)), "l"(src));
}
/* round to nearest (ties away) to a 10-bit mantissa: what the tensor core would otherwise truncate */
__device__ __forceinline__ uint32_t em_tf32(float f) {
    uint32_t r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f)); return r;
}

extern "C" __global__ void __launch_bounds__(256, 2) em_mma_tf32_f32(const float *__restrict__ A,
                                                                     const float *__restrict__ B,
                                                                     float *__restrict__ C, const void *bias,
                                                                     int M, int N, int K) {
    float *As = em_tiles32;                      /* STAGES tiles of A, then STAGES tiles of B */
    float *Bs = em_tiles32 + STAGES * A_TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;   /* 2 x 4 warps, 64 x 32 each */
    const int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    auto load = [&](int stage, int k0) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {   /* A: 128 rows x 4 chunks of 4 floats */
            const int id = tid + c * 256, row = id >> 2, col = (id & 3) * 4;
            cp_async16(&As[stage * A_TILE + row * LDA + col], A + (size_t)(bm + row) * K + k0 + col);
        }
#pragma unroll
        for (int c = 0; c < 2; ++c) {   /* B: 16 rows x 32 chunks of 4 floats */
            const int id = tid + c * 256, row = id >> 5, col = (id & 31) * 4;
            cp_async16(&Bs[stage * B_TILE + row * LDB + col], B + (size_t)(k0 + row) * N + bn + col);
        }
    };

    const int KT = K / 16;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) load(s, s * 16);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = 0; kt < KT; ++kt) {
        const int st = kt % STAGES;
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();  /* tile kt landed for every thread; every warp is done with tile kt - 1 */
        {
            const int nk = kt + STAGES - 1;
            if (nk < KT) load(nk % STAGES, nk * 16);
            asm volatile("cp.async.commit_group;\n" ::);
        }
        const float *as = As + st * A_TILE, *bs = Bs + st * B_TILE;
#pragma unroll
        for (int kk = 0; kk < 16; kk += 8) {
            uint32_t af[4][4], bf[4][2];
            /* m16n8k8 tf32 fragments: a0 (g, t) a1 (g + 8, t) a2 (g, t + 4) a3 (g + 8, t + 4);
               b0 (k t, n g) b1 (k t + 4, n g) */
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float *p = as + (wm + i * 16 + g) * LDA + kk + t4;
                af[i][0] = em_tf32(p[0]);
                af[i][1] = em_tf32(p[8 * LDA]);
                af[i][2] = em_tf32(p[4]);
                af[i][3] = em_tf32(p[8 * LDA + 4]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float *p = bs + (kk + t4) * LDB + wn + j * 8 + g;
                bf[j][0] = em_tf32(p[0]);
                bf[j][1] = em_tf32(p[4 * LDB]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    asm volatile(
                        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                        : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                        : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                          "r"(bf[j][1]));
        }
    }
    /* c0, c1 at (row g, cols 2t, 2t + 1); c2, c3 at row g + 8 */
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = bm + wm + i * 16 + g + h * 8, col = bn + wn + j * 8 + t4 * 2;
                *(float2 *)(C + (size_t)row * N + col) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
}
"""


def entry_name(in_dtype: str, out_dtype: str, bias_gelu: bool = False) -> str:
    short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}
    head = "tf32" if in_dtype == "float32" else short[in_dtype]  # float32 operands run as tf32
    return f"em_mma_{head}_{short[out_dtype]}" + ("_bias_gelu" if bias_gelu else "")


def entries() -> dict[str, list[str]]:
    """Every kernel entry, per source (``MMA_SOURCE``, ``MMA_TF32_SOURCE``)."""
    half = [entry_name(t, o, e) for t in ("bfloat16", "float16") for o, e in (("float32", 0), (t, 0), (t, 1))]
    return {"MMA_SOURCE": half, "MMA_TF32_SOURCE": [entry_name("float32", "float32")]}


def supports(a: Any, b: Any, out: Any, arch_sm: int) -> bool:
    """Whether the kernel takes these CubeTensors as they are (shapes, layouts, dtypes, arch)."""
    if arch_sm < 80 or len(a.shape) != 2 or len(b.shape) != 2:
        return False
    if a.dtype.name not in _in_types() or b.dtype is not a.dtype:
        return False
    if out.dtype.name not in ("float32", a.dtype.name):
        return False
    (m, k), (k2, n) = a.shape, b.shape
    return (
        k == k2
        and m % BM == 0
        and n % BN == 0
        and k % (BK_TF32 if a.dtype.name == "float32" else BK) == 0
        and a.is_contiguous()
        and b.is_contiguous()
        and out.is_contiguous()
        and all(t.offset * t.dtype.itemsize % 16 == 0 for t in (a, b, out))
    )


def matmul_mma(client: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out = a @ b`` (``gelu(a @ b + bias)`` with ``bias`` of shape (N,)) on the tensor cores."""
    server = client.server
    if a.dtype.name == "float32" and bias is not None:
        raise ValueError("cuda_kernels.mma: the tf32 kernel has no bias + GELU epilogue")
    source = MMA_TF32_SOURCE if a.dtype.name == "float32" else MMA_SOURCE
    fn = server.raw_function(source, entry_name(a.dtype.name, out.dtype.name, bias is not None), SMEM_BYTES)
    (m, k), n = a.shape, b.shape[1]
    ptr = [ctypes.c_uint64(t.buffer.ptr + t.offset * t.dtype.itemsize) for t in (a, b, out)]
    ptr.append(ctypes.c_uint64(0 if bias is None else bias.buffer.ptr + bias.offset * bias.dtype.itemsize))
    ints = [ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k)]
    server.launch_raw(fn, (n // BN, m // BM, 1), (256, 1, 1), [*ptr, *ints], SMEM_BYTES)


# --------------------------------------------------------------------------- matmul candidate
def candidate_valid(a: Any, b: Any) -> bool:
    """For the Cube backend's candidate list: a CUDA client with matrix units and operands the
    kernel takes as they are (each batch entry a contiguous matrix)."""
    client = a.client
    if getattr(client, "runtime", "") != "cuda" or not client.server.compiler.capabilities.matrix_units:
        return False
    if a.dtype.name not in _in_types() or b.dtype is not a.dtype:
        return False
    (m, k), n = a.shape[-2:], b.shape[-1]
    if m % BM or n % BN or k % (BK_TF32 if a.dtype.name == "float32" else BK):
        return False
    # the two matrix dims of each operand contiguous (batch dims may have any stride, even 0)
    return a.strides[-2:] == (k, 1) and b.strides[-2:] == (n, 1)


def candidate_launch(backend: Any, a: Any, b: Any, out: Any) -> None:
    """``out[..., :, :] = a[...] @ b[...]`` for operands already expanded to out's batch dims."""
    import itertools

    from ....cube.runtime.tensor import CubeTensor

    batch = out.shape[:-2]
    (m, k), n = a.shape[-2:], b.shape[-1]
    from ....cube.compiler.cuda import sm_number

    sm = sm_number(backend.client.server.arch)
    for idx in itertools.product(*(range(s) for s in batch)):
        views = []
        for t, rows, cols in ((a, m, k), (b, k, n), (out, m, n)):
            off = t.offset + sum(i * s for i, s in zip(idx, t.strides[: len(batch)]))
            views.append(CubeTensor(t.client, t.buffer, (rows, cols), (cols, 1), off, t.dtype))
        if not supports(*views, sm):
            raise ValueError("cuda_kernels.mma: operands not supported (see candidate_valid)")
        matmul_mma(backend.client, *views)

