"""Hopper tensor-core matmul for the CUDA runtime: ``wgmma`` fed by bulk tensor copies (TMA), sm_90a.

One kernel over ~900 lines: its source generator (every variant is a parameter of one template),
the tile choice and the host launch (tensor maps, grid) change together whenever the kernel does.

A hand-written CUDA C++ kernel (like ``mma``), compiled by NVRTC for ``sm_90a`` (the
``a`` target is what accepts ``wgmma`` and ``setmaxnreg``; the cubin runs on any compute
capability 9.0 device) and persisted in the store under ``compile/cuda/sm_90a/...``.

Design (a tile is 128 x BN outputs, BN = 256 or 128; K in steps of BK = 64):

* **Warp specialisation.** 3 warpgroups of 128 threads. Warpgroup 0 is the producer: it gives
  registers back (``setmaxnreg.dec`` to 56) and one thread issues, per k-step, one TMA copy of
  the 128 x 64 slice of A and BN / 64 copies of 64 x 64 slices of B into a ring of ``STAGES``
  shared-memory stages. Warpgroups 1 and 2 are the consumers (``setmaxnreg.inc`` to 224): each
  owns 64 rows of the tile and accumulates 64 x BN in f32 registers with
  ``wgmma.mma_async.m64n{BN}k16`` (4 per k-step).
* **Ring protocol.** Per stage a *full* mbarrier (1 arrival: the producer's ``expect_tx`` of the
  stage's bytes; the copies complete the transaction count) and an *empty* mbarrier (2
  arrivals: one thread of each consumer warpgroup, once the wgmma group that read the stage has
  retired). The i-th use of the ring (counted across all k-steps of all the block's tiles) takes
  stage ``i % STAGES`` in round ``r = i // STAGES``: full waits on phase parity ``r & 1``, the
  producer's empty wait on ``(r - 1) & 1``. Consumers keep one wgmma group in flight
  (``wait_group 1``) and release the stage of the previous k-step; the last stage of a tile
  after ``wait_group 0``.
* **Shared layouts.** Both operands land 128-byte swizzled (TMA ``SWIZZLE_128B``, every tile
  1024-byte aligned). A is K-major: rows of 64 elements = 128 bytes, 8-row atoms 1024 bytes apart
  (descriptor SBO = 1024), the k16 step advances the start address by 32 bytes. B is row-major
  (K, N), i.e. N-major for wgmma (``imm-trans-b = 1``, 16-bit types only): each 64-column
  chunk is BK rows of 128 bytes; SBO = 1024 (next 8 k-rows), LBO = BK * 128 (next 64-column
  chunk); the k16 step advances by 16 rows = 2048 bytes.
* **Tiles and grid.** Tiles are numbered batch-major; inside a batch entry in groups of
  ``GROUP_M`` block rows (column-major inside a group), so the tiles resident together share
  panels of A and B in L2. A block takes tiles ``blockIdx.x, + gridDim.x, ...``: one block per
  tile, or one block per multiprocessor (persistent: the producer fills the ring with the next
  tile's operands while the consumers store the last one's). ``_choose`` picks per shape: the
  wide tile unless its partial last wave wastes more than the narrow tile's lower rate
  (``WIDE_SPEEDUP``), persistent blocks up to ``PERSISTENT_WAVES`` waves.
* **Epilogue.** From the accumulators (wgmma's D fragment: warp w of a consumer owns rows
  16w..16w+15; register 4j + 2h + e is row g + 8h, column 8j + 2t + e for lane 4g + t), with an
  optional ``+ bias[n]`` then GELU (erf form, ``em_gelu1``), stores guarded by M and N.
  f32 outputs are stored straight from the registers (``em_store``). 16-bit outputs go through
  the *staged epilogue* (default, persistent blocks): the consumers write ``acc`` rounded to the
  output type into a padded tile in shared memory and go on with the next tile at once (the
  same work as for the plain product); warps 1-3 of the producer warpgroup add the bias, apply
  GELU and store whole rows with 16-byte accesses, overlapped with the next tile's main loop; on
  a block's last tile the consumers drain with them. GELU sees ``round(acc) + bias`` in f32, as
  an unfused ``gelu(mm + bias)`` sees the rounded product.
  Measured (H200, clock stamps per block, bf16 4096²,
  4 tiles per block of ~45 us each): bias + GELU cost 1.07x the matmul alone while the consumers
  loaded the bias between tiles (2.4 us per tile with the tensor cores idle) and the drain warps
  spent 30 of every 45 us on ``erf``-form GELU; with the bias in the drain, the GELU at 14
  instructions (``em_gelu1``) and 56 producer registers (40 spilled the drain's bias), 1.02x:
  what is left is the block's last tile (3.7 us of bias + GELU + stores by 352 threads after the
  last main loop, against 1.9 us without GELU: consistent with the sub-partitions' issue and
  special-function rates) and ~0.5 us per tile of main loop slowed by the drain beside it
  (the card is power-capped: 1.4-1.98 GHz under this load).

Edges come from TMA: loads outside the tensor are zero-filled, so M, N and K need not be
multiples of the tile; the copy engine needs 16-byte global strides, hence K and N multiples of
8. Batches: 3-d tensor maps (cols, rows, batch); an operand shared by the batch has step 0.

tf32 (float32 operands while ``ember.set_float32_matmul_precision`` allows it; ``wgmma_source(tf32=
True)``, ``_CONFIGS_TF32``): wgmma reads 32-bit operands K-major only (no transpose bit), so
``_launch_tf32`` first transposes B into a pooled scratch (N, K) buffer (``transpose``, 64 x
64 shared tiles) and TMA loads B^T exactly like A. BK = 32 floats keeps 128-byte swizzled rows,
the stage bytes and the 32-byte k-steps (``m64n{BN}k8``); f32 output, no epilogue. The tensor
cores truncate the f32 bits to tf32 (as cuBLAS's kernels do).

Contract (``supports``): row-major contiguous ``a`` (M, K), ``b`` (K, N), ``out`` (M, N) of f32
or the input type, bf16 or f16 inputs, K and N multiples of 8, 16-byte aligned base addresses, a
compute capability 9.0 device. Tensor maps are cached per (device, pointer, shape, strides).
"""
from __future__ import annotations

import ctypes
import itertools
import math
import os
from typing import Any

from ....cube.runtime.tensor import batch_step as _batch_step
from ....precision import tensor_core_types as _in_types
from .mma import HALF_HELPERS
from .transpose import PREPARED

__all__ = [
    "WGMMA_SOURCE",
    "WGMMA_SOURCE_NARROW",
    "WGMMA_ARCH",
    "wgmma_source",
    "smem_bytes",
    "entry_name",
    "entries",
    "supports",
    "matmul_wgmma",
    "candidate_valid",
    "candidate_launch",
]

#: the target that accepts wgmma / setmaxnreg (sm_90 plain rejects them)
WGMMA_ARCH = "sm_90a"
BM, BK = 128, 64
#: the wide tile (4 stages of 48 KiB) and the narrow one (6 stages of 32 KiB): ``_choose`` picks per shape
BN, STAGES = 256, 4
BN_NARROW, STAGES_NARROW = 128, 6
GROUP_M = 16
#: dynamic shared memory a block of compute capability 9.0 may have
SMEM_LIMIT = 227 * 1024
THREADS = 384
#: a 128 x 256 tile does 1.11-1.2x the work of a 128 x 128 tile per unit of time (H200, 4096-8192²)
WIDE_SPEEDUP = 1.15
#: persistent blocks (one per multiprocessor walking the tiles) up to this many waves of tiles;
#: one block per tile beyond (measured: persistent as fast or faster at 3072-6144², 5-7% slower at
#: 8192² = 16 waves, in two calls)
PERSISTENT_WAVES = 10


def smem_bytes(bn: int = BN, stages: int = STAGES, staged: bool = False) -> int:
    """Dynamic shared memory of a block: the ring, its 2 x stages mbarriers, 1 KiB of slack so
    the ring can start on a 1024-byte boundary (the swizzle atoms' alignment); ``staged``: the
    staged epilogue's padded 128-row tile of 16-bit values and its two mbarriers."""
    extra = BM * (bn * 2 + 16) + 16 if staged else 0
    return 1024 + stages * (BM * BK * 2 + BK * bn * 2) + 2 * stages * 8 + extra


_SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def layout_suffix(a_mn: bool = False, b_k: bool = False) -> str:
    """The entry suffix of an operand-layout variant (``wgmma_source(a_mn=, b_k=)``): "" for
    row-major A and B, ``_at`` (A transposed), ``_bt`` (B transposed), ``_atbt``."""
    return "_" + ("at" if a_mn else "") + ("bt" if b_k else "") if a_mn or b_k else ""


def entry_name(in_dtype: str, out_dtype: str, bias_gelu: bool = False, a_mn: bool = False, b_k: bool = False) -> str:
    head = "tf32" if in_dtype == "float32" else _SHORT[in_dtype]  # float32 operands run as tf32
    return f"em_wgmma_{head}_{_SHORT[out_dtype]}" + ("_bias_gelu" if bias_gelu else "") + layout_suffix(a_mn, b_k)


#: the entries of a tf32 source (``wgmma_source(tf32=True)``; B's transpose is ``transpose``'s)
TF32_ENTRIES = ("em_wgmma_tf32_f32",)


def entries(a_mn: bool = False, b_k: bool = False) -> list[str]:
    """Every kernel entry of ``WGMMA_SOURCE`` (of the operand-layout variant ``a_mn``, ``b_k``)."""
    out = []
    for t in ("bfloat16", "float16"):
        out += [entry_name(t, "float32", False, a_mn, b_k), entry_name(t, t, False, a_mn, b_k),
                entry_name(t, t, True, a_mn, b_k)]
    return out


def _wgmma_fn(n: int, kind: str, a_mn: bool = False, b_k: bool = False) -> str:
    """``em_wgmma_n{n}_{kind}(d, desc_a, desc_b)``: d += A(64x16, K-major) @ B(16xn, N-major);
    ``a_mn``: A M-major (the transpose bit of A), ``b_k``: B K-major (B's bit cleared);
    tf32: A(64x8) @ B(8xn), both K-major (32-bit types have no transpose bits)."""
    regs = n // 2
    dlist = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    k, tail = (8, "") if kind == "tf32" else (16, f", {int(a_mn)}, {int(not b_k)}")
    return (
        f"__device__ __forceinline__ void em_wgmma_n{n}_{kind}(float (&d)[{regs}], uint64_t da, uint64_t db) {{\n"
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'                 "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{kind}.{kind} {{{dlist}}}, "\n'
        f'                 "%{regs}, %{regs + 1}, p, 1, 1{tail};\\n}}\\n"\n'
        f'                 : {outs}\n'
        f'                 : "l"(da), "l"(db), "r"(1));\n'
        "}\n"
    )


_COMMON = HALF_HELPERS + r"""
/* a CUtensorMap: 128 opaque bytes, 64-byte aligned (passed by value as a __grid_constant__) */
struct __align__(64) em_tmap { uint64_t w[16]; };

__device__ __forceinline__ void em_bar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void em_bar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void em_bar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void em_bar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
/* one 3-d box of the tensor map into shared memory, completing on the mbarrier's tx count */
__device__ __forceinline__ void em_tma_3d(uint32_t dst, const em_tmap *map, uint32_t bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
/* the same box written to the same offset of every CTA in ``mask`` (each one's mbarrier at ``bar``'s offset) */
__device__ __forceinline__ void em_tma_3d_multicast(uint32_t dst, const em_tmap *map, uint32_t bar, int c0, int c1,
                                                    int c2, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(mask) : "memory");
}
__device__ __forceinline__ uint32_t em_cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void em_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* arrive on the mbarrier at ``bar``'s offset in CTA ``cta`` of the cluster */
__device__ __forceinline__ void em_bar_arrive_cta(uint32_t bar, uint32_t cta) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar), "r"(cta) : "memory");
}
/* wgmma shared-memory descriptor, 128-byte swizzle (mode 1 in bits 62-63) */
__device__ __forceinline__ uint64_t em_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32)
           | (1ull << 62);
}
template <int R> __device__ __forceinline__ void em_fence_acc(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
/* GELU, erf form: x * Phi(x) with Phi(x) = 1 - erfc(z) / 2 (x >= 0) or erfc(z) / 2, z = |x| / sqrt 2,
   and erfc(z) = t * poly5(t) * exp(-z^2), t = 1 / (1 + p z) (Abramowitz & Stegun 7.1.26, |error| <=
   1.5e-7 in erf; the coefficients below are halved). 1 / sqrt 2 is folded into p' = p / sqrt 2 and
   exp(-z^2) = 2^(x * (x * -log2(e) / 2)) goes straight to ex2.approx.ftz (__expf adds a denormal
   fix-up of 3 instructions): 14 instructions, 2 of them special-function ops, against erff's ~40
   (the epilogue's cost). Relative error <= 1.7e-4 where |gelu| > 1e-3 (below half an ulp of f16),
   no cancellation in the negative tail (unlike 0.5 x (1 + erff(...))); gelu(+inf) = +inf. */
#ifndef EM_GELU_OLD
#define EM_GELU_OLD 0  /* measurement knob: the earlier form */
#endif
__device__ __forceinline__ float em_gelu1(float x) {
#if EM_GELU_OLD  /* the form measured before 2026-11-29 20:00 (bench/results/epilogue_2026-11-29_h200.md) */
    const float z = fabsf(x) * 0.70710678118654752f;
    float t;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.3275911f, z, 1.f)));
    const float p = t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 0.5307027145f, -0.7265760135f), 0.7107068705f),
                                     -0.142248368f), 0.127414796f);
    const float h = p * __expf(-z * z);
#else
    float t, e;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.23164189f, fabsf(x), 1.f)));  /* p / sqrt 2 */
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * (x * -0.72134752044448170f)));  /* -log2(e) / 2 */
    const float p = t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 0.5307027145f, -0.7265760135f), 0.7107068705f),
                                     -0.142248368f), 0.127414796f);
    const float h = p * e;
#endif
    return x * (x >= 0.f ? 1.f - h : h);
}
/* a pair; EM_GELU_CALL: a real call instead of 64 inlined copies (measured slower with erff) */
#if EM_GELU_CALL
__device__ __noinline__
#else
__device__ __forceinline__
#endif
float2 em_gelu2(float2 v) {
    return make_float2(em_gelu1(v.x), em_gelu1(v.y));
}

/* the epilogue of one consumer warpgroup: 64 x n accumulators at rows r0.., columns c0.. */
template <int BF16, int OUT, int EPI, int R>
__device__ __forceinline__ void em_store(const float (&acc)[R], void *C, const void *bias, int M, int N,
                                         int r0, int c0, int tid) {
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int row0 = r0 + warp * 16 + g;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        const int col = c0 + j * 8 + t4 * 2;   /* N is even: col < N covers col + 1 */
        if (col < N) {
            float b0 = 0.f, b1 = 0.f;
            if (EPI) {
                const uint16_t *bb = (const uint16_t *)bias;
                b0 = BF16 ? em_bf16_f32(bb[col]) : em_f16_f32(bb[col]);
                b1 = BF16 ? em_bf16_f32(bb[col + 1]) : em_f16_f32(bb[col + 1]);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + h * 8;
                if (row < M) {
                    float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
                    if (EPI) {
                        const float2 g = em_gelu2(make_float2(v0 + b0, v1 + b1));
                        v0 = g.x; v1 = g.y;
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
        }
    }
}
"""

_KERNEL = r"""
#define EM_BM 128
#define EM_BK (128 / EM_ES)                       /* a 128-byte swizzled row: 64 halves or 32 floats */
#define EM_A_BYTES (EM_BM * EM_BK * EM_ES)        /* 128 rows x 128 bytes */
#define EM_B_BYTES (EM_BK * EM_BN * EM_ES)        /* BN / 64 chunks of 64 rows x 128 bytes */
#define EM_STAGE_BYTES (EM_A_BYTES + EM_B_BYTES)
#define EM_ACC (EM_BN / 2)
#define EM_SROW (EM_BN * 2 + 16)                  /* bytes per staged row (see em_stage_tile) */
#define EM_STAGED_BYTES (EM_STAGED ? EM_BM * EM_SROW : 0)
/* a block's last tile is drained by the drain warps and the consumers: EM_DRAIN_ALL threads (producer
   warp 0 joining them measured no faster, 4.3 against 3.7 us: consistent with a drain bound by the
   issue and special-function rates per SM sub-partition rather than by threads) */
#define EM_DRAIN_ALL (96 + 256)

/* measurement knobs (``wgmma_source(knobs=...)``, bench/gpu_epilogue.py --variants); the defaults
   are the library's kernel */
#ifndef EM_BIAS_DRAIN
#define EM_BIAS_DRAIN 1    /* the drain threads add the bias (0: the consumers, before rounding) */
#endif
#ifndef EM_X_GELU
#define EM_X_GELU 1        /* 0: identity instead of GELU, 2: GELU twice (what the GELU work costs) */
#endif
#ifndef EM_X_BIAS
#define EM_X_BIAS 1        /* 0: no bias added (what the bias costs) */
#endif
#ifndef EM_PREGS
#define EM_PREGS 56        /* registers of the producer warpgroup (40: the drain's bias spills a value) */
#endif
/* the consumers get the rest of the 384 x 168 the block starts with, in steps of 8 */
#define EM_CREGS (((384 * 168 - 128 * EM_PREGS) / 256) & ~7)
#ifndef EM_PROBE
#define EM_PROBE 0         /* an address: per block 64 clock64 / globaltimer stamps (em_probe) */
#endif
#if EM_PROBE
__device__ __forceinline__ void em_probe(int slot, bool global_time = false) {
    uint64_t v;
    if (global_time) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    else asm volatile("mov.u64 %0, %%clock64;" : "=l"(v));
    ((volatile uint64_t *)(EM_PROBE))[blockIdx.x * 64 + slot] = v;
}
#define EM_PROBE_AT(slot, global_time) em_probe((slot), (global_time))
#else
#define EM_PROBE_AT(slot, global_time)
#endif

extern __shared__ __align__(1024) unsigned char em_wg_smem[];

/* The staged epilogue (EM_STAGED, 16-bit outputs). A consumer warpgroup writes its 64 x n
   accumulators rounded to the output type into a row-padded tile in shared memory (rows EM_SROW
   bytes apart: the +16 bytes put the 8 rows x 4 columns of a fragment store on 32 distinct
   banks), then goes on with the next tile's main loop; warps 1-3 of the producer warpgroup add
   the bias, apply GELU and store whole rows with 16-byte accesses. So the consumers do the same
   work as for the plain product (no bias loads between their tiles: those would stall the tensor
   cores), and GELU sees round(acc) + bias in f32, as an unfused ``gelu(mm + bias)`` sees the
   rounded product (less one rounding of the sum). f16: products below the lowest finite value
   stage as that value, so GELU gives -0 (an infinite one would give NaN); above the largest,
   +inf, and GELU +inf. EM_BIAS_DRAIN 0 (a measurement knob): the consumers add the bias before
   rounding, as measured before 2026-11-29 20:00. */
template <int BF16, int EPI, int R>
__device__ __forceinline__ void em_stage_tile(const float (&acc)[R], unsigned char *sbuf, const void *bias, int N,
                                              int n0, int r0, int tid) {
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        const int cl = j * 8 + t4 * 2, col = n0 + cl;
        float b0 = 0.f, b1 = 0.f;
        if (EPI && !EM_BIAS_DRAIN && EM_X_BIAS && col < N) {
            const uint32_t bb = *(const uint32_t *)((const uint16_t *)bias + col);  /* col even: aligned pair */
            b0 = BF16 ? em_bf16_f32((uint16_t)(bb & 0xFFFFu)) : em_f16_f32((uint16_t)(bb & 0xFFFFu));
            b1 = BF16 ? em_bf16_f32((uint16_t)(bb >> 16)) : em_f16_f32((uint16_t)(bb >> 16));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v0 = acc[4 * j + 2 * h] + b0, v1 = acc[4 * j + 2 * h + 1] + b1;
            if (EPI && !BF16) { v0 = fmaxf(v0, -65504.f); v1 = fmaxf(v1, -65504.f); }
            const uint32_t lo = BF16 ? em_f32_bf16(v0) : em_f32_f16(v0);
            const uint32_t hi = BF16 ? em_f32_bf16(v1) : em_f32_f16(v1);
            *(uint32_t *)(sbuf + (r0 + warp * 16 + g + h * 8) * EM_SROW + cl * 2) = lo | (hi << 16);
        }
    }
}

/* the 8 bias values of the column chunk a drain thread stores (zeros without a bias or outside N);
   loaded before the thread waits for its tile, so the load's latency is hidden */
template <int BF16, int EPI>
__device__ __forceinline__ void em_bias_chunk(float (&bv)[8], const void *bias, int N, int col) {
#pragma unroll
    for (int i = 0; i < 8; ++i) bv[i] = 0.f;
    if (EPI && EM_BIAS_DRAIN && EM_X_BIAS && col < N) {
        const uint32_t *bb = (const uint32_t *)((const uint16_t *)bias + col);  /* col % 8 == 0: aligned pairs */
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = bb[i];
            bv[2 * i] = BF16 ? em_bf16_f32((uint16_t)(w & 0xFFFFu)) : em_f16_f32((uint16_t)(w & 0xFFFFu));
            bv[2 * i + 1] = BF16 ? em_bf16_f32((uint16_t)(w >> 16)) : em_f16_f32((uint16_t)(w >> 16));
        }
    }
}

/* the column chunk (8 outputs = 16 bytes) that drain thread ``t`` stores; every drain team size
   is a multiple of EM_BN / 8, so a thread keeps its chunk for the whole tile (one bias load) */
#define EM_CHUNK(t) ((t) % (EM_BN / 8))

__device__ __forceinline__ float em_gelu_x(float x) {
#if EM_X_GELU == 0  /* measurement knob: identity */
    return x;
#elif EM_X_GELU == 2  /* measurement knob: twice the GELU work */
    return em_gelu1(em_gelu1(x));
#else
    return em_gelu1(x);
#endif
}

/* one staged tile (rows m0.., columns n0..) out to C: 16-byte chunks, ``nt`` threads from ``t``
   (nt a multiple of EM_BN / 8), ``bv`` the bias of the thread's chunk (em_bias_chunk) */
template <int BF16, int EPI>
__device__ __forceinline__ void em_drain_tile(const unsigned char *sbuf, uint16_t *C, const float (&bv)[8], int M,
                                              int N, int m0, int n0, int t, int nt) {
    constexpr int per_row = EM_BN / 8;
    const int q = EM_CHUNK(t), col = n0 + q * 8;
    if (col >= N) return;  /* N is a multiple of 8: a chunk is wholly in or out */
    const int rows = min(EM_BM, M - m0);
#pragma unroll 1
    for (int r = t / per_row; r < rows; r += nt / per_row) {
        uint4 v = *(const uint4 *)(sbuf + r * EM_SROW + q * 16);
        if (EPI) {
            uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint16_t l = (uint16_t)(w[i] & 0xFFFFu), u = (uint16_t)(w[i] >> 16);
                const float x0 = (BF16 ? em_bf16_f32(l) : em_f16_f32(l)) + bv[2 * i];
                const float x1 = (BF16 ? em_bf16_f32(u) : em_f16_f32(u)) + bv[2 * i + 1];
                const float2 gv = make_float2(em_gelu_x(x0), em_gelu_x(x1));
                const uint32_t lo = BF16 ? em_f32_bf16(gv.x) : em_f32_f16(gv.x);
                const uint32_t hi = BF16 ? em_f32_bf16(gv.y) : em_f32_f16(gv.y);
                w[i] = lo | (hi << 16);
            }
            v = make_uint4(w[0], w[1], w[2], w[3]);
        }
        *(uint4 *)(C + (size_t)(m0 + r) * N + col) = v;
    }
}

/* the descriptors of k-step kk (32 bytes of K) of a consumer's A slice and of B. K-major (A;
   B^T for tf32 and EM_B_K): 128-byte rows of K, 8-row atoms 1024 bytes apart, the step 32 bytes
   along the row. MN-major (B as stored, (K, N); A^T for EM_A_MN, (K, M)): 64-column chunks of
   BK rows of 128 bytes (LBO: the next chunk), 8 k-rows 1024 bytes apart, the step 16 rows. */
#if EM_A_MN
#define EM_DESC_A(a, kk) em_desc((a) + (kk) * 2048, EM_BK * 128, 1024)
#else
#define EM_DESC_A(a, kk) em_desc((a) + (kk) * 32, 16, 1024)
#endif
#if EM_TF32 || EM_B_K
#define EM_DESC_B(b, kk) em_desc((b) + (kk) * 32, 16, 1024)
#else
#define EM_DESC_B(b, kk) em_desc((b) + (kk) * 2048, EM_BK * 128, 1024)
#endif

template <int BF16>
__device__ __forceinline__ void em_mma_step(float (&acc)[EM_ACC], uint64_t da, uint64_t db) {
#if EM_TF32
    EM_WGMMA_TF32(acc, da, db);
#else
    if (BF16) EM_WGMMA_BF16(acc, da, db); else EM_WGMMA_F16(acc, da, db);
#endif
}

/* EM_CL CTAs per cluster (1 or 2). With 2, the CTAs of a cluster take vertically adjacent tiles
   (same columns): each loads its own A and half of the B slice, multicast to both, so B crosses
   from L2 once per pair; a stage is free again when the consumers of both CTAs released it. */
__device__ __forceinline__ void em_release(uint32_t bar) {
#if EM_CL == 1
    em_bar_arrive(bar);
#else
    em_bar_arrive_cta(bar, 0);
    em_bar_arrive_cta(bar, 1);
#endif
}

template <int BF16, int OUT, int EPI>
__device__ __forceinline__ void em_wgmma_kernel(const em_tmap &tA, const em_tmap &tB, void *C, const void *bias,
                                                int M, int N, int K, int batch, int a_bstep, int b_bstep) {
    constexpr bool STAGED = EM_STAGED && OUT != 0;  /* 16-bit outputs only (see em_stage_tile) */
    const uint32_t raw = em_smem(em_wg_smem);
    const uint32_t ring = (raw + 1023u) & ~1023u;          /* swizzle atoms need 1024-byte alignment */
    /* the staged tile (EM_STAGED) follows the ring; full[s] at full + 8s, empty[s] after, then
       the staged tile's barriers: sfull (256 consumer arrivals), sempty (96 drain arrivals) */
    const uint32_t full = ring + EM_STAGES * EM_STAGE_BYTES + EM_STAGED_BYTES;
    const uint32_t empty = full + EM_STAGES * 8;
    const uint32_t sfull = empty + EM_STAGES * 8, sempty = sfull + 8;
    unsigned char *const sbuf = em_wg_smem + (ring - raw) + EM_STAGES * EM_STAGE_BYTES;
    const int wg = threadIdx.x >> 7, tid = threadIdx.x & 127;
#if EM_CL == 1
    const int rank = 0;
#else
    const int rank = (int)em_cluster_rank();
#endif

    /* tiles (of clusters): batch-major; inside a batch entry groups of GROUP_M block rows,
       column-major inside a group. A block (cluster) takes tiles c, c + clusters, ... (one tile
       per block, or persistent blocks); the ring's stage / phase count runs on across tiles. */
    const int nbm = (M + EM_BM - 1) / EM_BM, nbn = (N + EM_BN - 1) / EM_BN;
    const int nbc = (nbm + EM_CL - 1) / EM_CL, group = EM_GROUP_M / EM_CL;
    const int per_batch = nbc * nbn, per_group = group * nbn, total = per_batch * batch;
    const int cid = blockIdx.x / EM_CL, clusters = gridDim.x / EM_CL;
    const int KT = (K + EM_BK - 1) / EM_BK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < EM_STAGES; ++s) {
            em_bar_init(full + 8 * s, 1);
            em_bar_init(empty + 8 * s, 2 * EM_CL);
        }
        if (STAGED) {
            em_bar_init(sfull, 256);
            em_bar_init(sempty, 96);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if EM_CL == 1
    __syncthreads();
#else
    em_cluster_sync();  /* both CTAs' barriers exist before either multicasts or arrives remotely */
#endif
    if (threadIdx.x == 0) { EM_PROBE_AT(0, false); EM_PROBE_AT(1, true); }

    if (wg == 0) {  /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(EM_PREGS));
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tA) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tB) : "memory");
            int it = 0;
            for (int tile = cid; tile < total; tile += clusters) {
                const int z = tile / per_batch, id = tile - z * per_batch;
                const int first = (id / per_group) * group, rows = min(nbc - first, group);
                const int m0 = ((first + (id % per_group) % rows) * EM_CL + rank) * EM_BM;
                const int n0 = ((id % per_group) / rows) * EM_BN;
                const int za = z * a_bstep, zb = z * b_bstep;
                for (int kt = 0; kt < KT; ++kt, ++it) {
                    const int s = it % EM_STAGES;
                    if (it >= EM_STAGES) em_bar_wait(empty + 8 * s, ((it / EM_STAGES) - 1) & 1);
                    const uint32_t st = ring + s * EM_STAGE_BYTES;
                    em_bar_expect_tx(full + 8 * s, EM_STAGE_BYTES);  /* with the bytes the other CTA multicasts */
#if EM_A_MN  /* A^T (K, M): two boxes of BK rows of K x 64 columns of M, one per consumer warpgroup */
                    em_tma_3d(st, &tA, full + 8 * s, m0, kt * EM_BK, za);
                    em_tma_3d(st + 8192, &tA, full + 8 * s, m0 + 64, kt * EM_BK, za);
#else
                    em_tma_3d(st, &tA, full + 8 * s, kt * EM_BK, m0, za);
#endif
#pragma unroll
                    for (int c = 0; c < EM_BN / 64 / EM_CL; ++c) {
                        const int ch = rank * (EM_BN / 64 / EM_CL) + c;
                        const uint32_t dst = st + EM_A_BYTES + ch * 8192;  /* 64 rows x 128 bytes */
#if EM_TF32 || EM_B_K  /* B^T (N, K): 64 rows of N, BK columns of K, K-major like A */
                        const int bc0 = kt * EM_BK, bc1 = n0 + ch * 64;
#else        /* B (K, N): BK rows of K, 64 columns of N */
                        const int bc0 = n0 + ch * 64, bc1 = kt * EM_BK;
#endif
#if EM_CL == 1
                        em_tma_3d(dst, &tB, full + 8 * s, bc0, bc1, zb);
#else
                        em_tma_3d_multicast(dst, &tB, full + 8 * s, bc0, bc1, zb, 0x3);
#endif
                    }
                }
            }
        }
        else if (STAGED && tid >= 32) {  /* warps 1-3: bias, GELU, stores of staged tiles in the consumers' order */
            int lt = 0;
            for (int tile = cid; tile < total; tile += clusters, ++lt) {
                const int z = tile / per_batch, id = tile - z * per_batch;
                const int first = (id / per_group) * group, rows = min(nbc - first, group);
                const int m0 = ((first + (id % per_group) % rows) * EM_CL + rank) * EM_BM;
                const int n0 = ((id % per_group) / rows) * EM_BN;
                /* the block's last tile: the consumers, done, drain with them (EM_DRAIN_ALL threads) */
                const bool last = tile + clusters >= total;
                const int t = tid - 32;
                float bv[8];
                em_bias_chunk<BF16, EPI>(bv, bias, N, n0 + EM_CHUNK(t) * 8);
                em_bar_wait(sfull, lt & 1);
                em_drain_tile<BF16, EPI>(sbuf, (uint16_t *)C + (size_t)z * M * N, bv, M, N, m0, n0, t,
                                         last ? EM_DRAIN_ALL : 96);
                if (tid == 32 && lt < 16) EM_PROBE_AT(34 + lt, false);
                if (!last) em_bar_arrive(sempty);
            }
        }
    } else {  /* consumers: warpgroup 1 rows 0..63 of the tile, warpgroup 2 rows 64..127 */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(EM_CREGS));
        const int cw = wg - 1;
        int it = 0, lt = 0;
        for (int tile = cid; tile < total; tile += clusters, ++lt) {
            const int z = tile / per_batch, id = tile - z * per_batch;
            const int first = (id / per_group) * group, rows = min(nbc - first, group);
            const int m0 = ((first + (id % per_group) % rows) * EM_CL + rank) * EM_BM;
            const int n0 = ((id % per_group) / rows) * EM_BN;
            float acc[EM_ACC];
#pragma unroll
            for (int i = 0; i < EM_ACC; ++i) acc[i] = 0.f;
            for (int kt = 0; kt < KT; ++kt, ++it) {
                const int s = it % EM_STAGES;
                em_bar_wait(full + 8 * s, (it / EM_STAGES) & 1);
                const uint32_t a = ring + s * EM_STAGE_BYTES + cw * 64 * 128;
                const uint32_t b = ring + s * EM_STAGE_BYTES + EM_A_BYTES;
                em_fence_acc(acc);
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                /* 4 steps of 32 bytes of K (k16 halves or k8 floats) */
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
                    em_mma_step<BF16>(acc, EM_DESC_A(a, kk), EM_DESC_B(b, kk));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                em_fence_acc(acc);
                /* the group of the previous step has retired: its stage goes back to the producer(s) */
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0 && tid == 0) em_release(empty + 8 * ((it - 1) % EM_STAGES));
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            em_fence_acc(acc);
            if (KT > 0 && tid == 0) em_release(empty + 8 * ((it - 1) % EM_STAGES));
            if (cw == 0 && tid == 0 && lt < 16) EM_PROBE_AT(2 + 2 * lt, false);
            if (STAGED) {
                /* no next tile: help drain this one (else a tail of GELU), as drain thread t */
                const bool last = tile + clusters >= total;
                const int t = 96 + cw * 128 + tid;
                float bv[8];
                em_bias_chunk<BF16, EPI>(bv, bias, last ? N : 0, n0 + EM_CHUNK(t) * 8);
                if (lt > 0) em_bar_wait(sempty, (lt - 1) & 1);  /* the drain warps are done with the last tile */
                em_stage_tile<BF16, EPI>(acc, sbuf, bias, N, n0, cw * 64, tid);
                em_bar_arrive(sfull);
                if (cw == 0 && tid == 0 && lt < 16) EM_PROBE_AT(3 + 2 * lt, false);
                if (last) {
                    em_bar_wait(sfull, lt & 1);
                    em_drain_tile<BF16, EPI>(sbuf, (uint16_t *)C + (size_t)z * M * N, bv, M, N, m0, n0, t,
                                             EM_DRAIN_ALL);
                    if (cw == 0 && tid == 0) { EM_PROBE_AT(50, false); EM_PROBE_AT(51, true); }
                }
            } else {
                char *Cz = (char *)C + (size_t)z * M * N * (OUT == 0 ? 4 : 2);
                em_store<BF16, OUT, EPI>(acc, Cz, bias, M, N, m0 + cw * 64, n0, tid);
            }
        }
    }
#if EM_CL == 2
    em_cluster_sync();  /* no CTA leaves while the other may still arrive on its barriers */
#endif
}

#if EM_CL == 1
#define EM_CLUSTER_DIMS
#else
#define EM_CLUSTER_DIMS __cluster_dims__(EM_CL, 1, 1)
#endif
/* entries of an operand-layout variant carry its suffix (EM_SUFFIX: empty, _at, _bt or _atbt) */
#define EM_PASTE2(a, b) a##b
#define EM_PASTE(a, b) EM_PASTE2(a, b)
#define EM_WGMMA(NAME, BF16, OUT, EPI)                                                                    \
    extern "C" __global__ void __launch_bounds__(384, 1) EM_CLUSTER_DIMS                                  \
        EM_PASTE(NAME, EM_SUFFIX)(const __grid_constant__ em_tmap tA, const __grid_constant__ em_tmap tB, \
                                  void *C, const void *bias, int M, int N, int K, int batch, int a_bstep,   \
                                  int b_bstep) {                                                          \
        em_wgmma_kernel<BF16, OUT, EPI>(tA, tB, C, bias, M, N, K, batch, a_bstep, b_bstep);               \
    }
#if EM_TF32
EM_WGMMA(em_wgmma_tf32_f32, 0, 0, 0)
#else
EM_WGMMA(em_wgmma_bf16_f32, 1, 0, 0)
EM_WGMMA(em_wgmma_bf16_bf16, 1, 1, 0)
EM_WGMMA(em_wgmma_bf16_bf16_bias_gelu, 1, 1, 1)
EM_WGMMA(em_wgmma_f16_f32, 0, 0, 0)
EM_WGMMA(em_wgmma_f16_f16, 0, 1, 0)
EM_WGMMA(em_wgmma_f16_f16_bias_gelu, 0, 1, 1)
#endif
"""


def wgmma_source(bn: int = BN, stages: int = STAGES, group_m: int = GROUP_M, gelu_call: bool = False,
                 cluster: int = 1, staged: bool = False, tf32: bool = False,
                 knobs: dict[str, int] | None = None, a_mn: bool = False, b_k: bool = False) -> str:
    """The kernel source for tiles of 128 x ``bn`` (128 or 256) and a ring of ``stages``;
    ``gelu_call``: the bias + GELU epilogue calls its GELU instead of inlining it (a quarter of
    the code, but slower: 0.231-0.236 ms against 0.209-0.223 inlined, bf16 4096²); ``cluster``
    2: pairs of CTAs share B through TMA multicast (the grid must then be even; not the default:
    no gain beyond the run-to-run spread at 4096-8192²);
    ``staged``: 16-bit outputs leave through the staged epilogue (``em_stage_tile``: warps of the
    producer warpgroup apply GELU and store while the consumers run the next tile); ``tf32``: the
    float32 source instead (entry ``em_wgmma_tf32_f32``; B is transposed first by ``transpose``):
    BK = 32 floats, the same 128-byte rows, stage bytes and k-steps of 32 bytes; B is read as B^T
    (N, K), K-major like A. ``knobs``: measurement variants of the staged epilogue, ``EM_<name>``
    macros (``BIAS_DRAIN``, ``PREGS``, ``X_GELU``, ``X_BIAS``, ``PROBE``, ``GELU_OLD``: see the
    kernel source), for bench/gpu_epilogue.py. Operand layouts (16-bit types; ``layout_suffix``
    names the entries): ``a_mn``: A passed as A^T (K, M) row-major, i.e. M-major (``x.T @ g``,
    a weight gradient), loaded as two 64-column boxes per k-step and read with A's transpose
    bit; ``b_k``: B passed as B^T (N, K) row-major, i.e. K-major (``x @ w.T``), loaded and
    described as the tf32 source reads B^T, with B's transpose bit cleared. Neither changes the
    stage bytes, the ring or the epilogue."""
    if tf32 and (a_mn or b_k):
        raise ValueError("wgmma tiles: 32-bit operands have no transpose bits (tf32 reads B^T after a transpose)")
    if tf32 and staged:
        raise ValueError("wgmma tiles: the staged epilogue is for 16-bit outputs; tf32 writes float32")
    if smem_bytes(bn, stages, staged) > SMEM_LIMIT:
        raise ValueError(f"wgmma tiles: {smem_bytes(bn, stages, staged)} bytes of shared memory > {SMEM_LIMIT}")
    if bn not in (128, 256) or not 2 <= stages <= 8 or cluster not in (1, 2) or group_m % cluster:
        raise ValueError(f"wgmma tiles: bn in (128, 256), 2 <= stages <= 8, cluster 1 or 2 (got {bn}, {stages}, "
                         f"{cluster})")
    head = f"#define EM_BN {bn}\n#define EM_STAGES {stages}\n#define EM_GROUP_M {group_m}\n"
    head += f"#define EM_GELU_CALL {int(gelu_call)}\n#define EM_CL {cluster}\n#define EM_STAGED {int(staged)}\n"
    head += f"#define EM_TF32 {int(tf32)}\n#define EM_ES {4 if tf32 else 2}\n"
    head += f"#define EM_A_MN {int(a_mn)}\n#define EM_B_K {int(b_k)}\n#define EM_SUFFIX {layout_suffix(a_mn, b_k)}\n"
    head += "".join(f"#define EM_{k} {int(v)}\n" for k, v in (knobs or {}).items())
    if tf32:
        fns = _wgmma_fn(bn, "tf32")
        macros = f"#define EM_WGMMA_TF32 em_wgmma_n{bn}_tf32\n"
    else:
        fns = _wgmma_fn(bn, "bf16", a_mn, b_k) + _wgmma_fn(bn, "f16", a_mn, b_k)
        macros = f"#define EM_WGMMA_BF16 em_wgmma_n{bn}_bf16\n#define EM_WGMMA_F16 em_wgmma_n{bn}_f16\n"
    return head + _COMMON + fns + macros + _KERNEL


WGMMA_SOURCE = wgmma_source()
WGMMA_SOURCE_NARROW = wgmma_source(BN_NARROW, STAGES_NARROW)
#: the staged epilogue's tile takes a stage's room: 3 wide stages, 5 narrow ones
STAGES_STAGED, STAGES_NARROW_STAGED = 3, 5
WGMMA_SOURCE_STAGED = wgmma_source(BN, STAGES_STAGED, staged=True)
WGMMA_SOURCE_NARROW_STAGED = wgmma_source(BN_NARROW, STAGES_NARROW_STAGED, staged=True)
#: (tile width, staged epilogue) -> (source, dynamic shared memory)
_CONFIGS = {
    (BN, False): (WGMMA_SOURCE, smem_bytes(BN, STAGES)),
    (BN_NARROW, False): (WGMMA_SOURCE_NARROW, smem_bytes(BN_NARROW, STAGES_NARROW)),
    (BN, True): (WGMMA_SOURCE_STAGED, smem_bytes(BN, STAGES_STAGED, True)),
    (BN_NARROW, True): (WGMMA_SOURCE_NARROW_STAGED, smem_bytes(BN_NARROW, STAGES_NARROW_STAGED, True)),
}
#: float32 operands as tf32 (precision "high" / "medium"): the same tiles, rings and stage bytes
WGMMA_SOURCE_TF32 = wgmma_source(tf32=True)
WGMMA_SOURCE_TF32_NARROW = wgmma_source(BN_NARROW, STAGES_NARROW, tf32=True)
#: tile width -> (tf32 source, dynamic shared memory)
_CONFIGS_TF32 = {
    BN: (WGMMA_SOURCE_TF32, smem_bytes(BN, STAGES)),
    BN_NARROW: (WGMMA_SOURCE_TF32_NARROW, smem_bytes(BN_NARROW, STAGES_NARROW)),
}


#: operands read in their transposed layouts (``x @ w.T``'s B, ``x.T @ g``'s A) instead of copied
#: row-major first. On by default since bench/gpu_wgmma_layouts.py checked every variant on an H200
#: (2026-12-02: 114 products bit for bit equal to the row-major kernel, 5-10% faster than copy +
#: row-major); EMBER_WGMMA_TRANSPOSED=0 turns it off
TRANSPOSED = [os.environ.get("EMBER_WGMMA_TRANSPOSED", "1") == "1"]
_LAYOUT_CONFIGS: dict[tuple[int, bool, bool, bool], tuple[str, int]] = {}


def layout_config(bn: int, staged: bool, a_mn: bool, b_k: bool) -> tuple[str, int]:
    """(source, dynamic shared memory) of a tile config in an operand layout (``_CONFIGS``'s for
    row-major A and B; the variants rendered once, on first use)."""
    if not (a_mn or b_k):
        return _CONFIGS[bn, staged]
    key = (bn, staged, a_mn, b_k)
    hit = _LAYOUT_CONFIGS.get(key)
    if hit is None:
        stages = {(BN, False): STAGES, (BN_NARROW, False): STAGES_NARROW, (BN, True): STAGES_STAGED,
                  (BN_NARROW, True): STAGES_NARROW_STAGED}[bn, staged]
        hit = _LAYOUT_CONFIGS[key] = (wgmma_source(bn, stages, staged=staged, a_mn=a_mn, b_k=b_k),
                                      smem_bytes(bn, stages, staged))
    return hit


def layout_configs() -> dict[tuple[int, bool, bool, bool], tuple[str, int]]:
    """Every operand-layout variant of every tile config (for ``ember compile-check``)."""
    return {(bn, st, am, bk): layout_config(bn, st, am, bk) for bn, st in _CONFIGS
            for am, bk in ((True, False), (False, True), (True, True))}


def _choose(m: int, n: int, batch: int, sms: int) -> tuple[int, bool]:
    """(tile width, persistent) for a launch: the width whose whole waves of tiles take least
    time (a partial last wave costs a whole one), then persistent blocks for few waves."""
    def waves(bn: int) -> int:
        return -(-(-(-m // BM) * -(-n // bn) * batch) // sms)

    wide = waves(BN) * (BN / BN_NARROW) / WIDE_SPEEDUP <= waves(BN_NARROW)
    bn = BN if wide else BN_NARROW
    return bn, waves(bn) <= PERSISTENT_WAVES


# --------------------------------------------------------------------------- host side
def supports(a: Any, b: Any, out: Any, arch_sm: int) -> bool:
    """Whether the kernel takes these 2-d CubeTensors as they are (shapes, layouts, dtypes, arch)."""
    if arch_sm != 90 or len(a.shape) != 2 or len(b.shape) != 2 or len(out.shape) != 2:
        return False
    if a.dtype.name not in _in_types() or b.dtype is not a.dtype:
        return False
    if out.dtype.name not in ("float32", a.dtype.name):
        return False
    (m, k), (k2, n) = a.shape, b.shape
    return (
        k == k2
        and m > 0
        and k > 0
        and k % 8 == 0
        and n > 0
        and n % 8 == 0
        and out.shape == (m, n)
        and a.is_contiguous()
        and b.is_contiguous()
        and out.is_contiguous()
        and all(_addr(t) % 16 == 0 for t in (a, b, out))
    )


def _addr(t: Any) -> int:
    return t.buffer.ptr + t.offset * t.dtype.itemsize


#: (device index, dtype, address, cols, rows, batch, batch stride, box rows) -> 128 bytes
_MAPS: dict[tuple[Any, ...], Any] = {}
_MAPS_MAX = 1024


def _tensor_map(server: Any, dtype: str, addr: int, cols: int, rows: int, batch: int, bstride: int,
                box_rows: int) -> Any:
    """A 3-d tensor map over (cols, rows, batch) elements (row stride ``cols``, batch stride
    ``bstride`` elements), boxes of one 128-byte row (64 16-bit elements or 32 floats) x
    ``box_rows`` x 1, 128-byte swizzle, zero fill outside."""
    key = (server.index, dtype, addr, cols, rows, batch, bstride, box_rows)
    hit = _MAPS.get(key)
    if hit is not None:
        return hit
    cu = server.cu
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    kind = cu.CUtensorMapDataType
    dtype_enum = kind.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if dtype == "bfloat16" else kind.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    size = 2
    if dtype == "float32":
        dtype_enum, size = kind.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4
    if batch == 1:
        bstride = rows * cols  # never stepped; the encoder still wants a valid stride
    res = cu.cuTensorMapEncodeTiled(
        dtype_enum,
        3,
        addr,
        [u64(cols), u64(rows), u64(batch)],
        [u64(cols * size), u64(bstride * size)],
        [u32(128 // size), u32(box_rows), u32(1)],
        [u32(1), u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if int(res[0]) != 0:
        from ....cube.runtime.cuda_driver import driver_error

        raise driver_error(res[0], f"cuTensorMapEncodeTiled(dims=({cols}, {rows}, {batch}), batch stride {bstride})")
    words = (ctypes.c_uint64 * 16)(*(int(w) for w in res[1].opaque))
    if len(_MAPS) >= _MAPS_MAX:
        _MAPS.clear()
    _MAPS[key] = words
    return words


def _launch(server: Any, a: tuple[int, int], b: tuple[int, int], out: int, bias: int, m: int, n: int, k: int,
            batch: int, in_dtype: str, out_dtype: str, source: str | None = None, bn: int | None = None,
            smem: int | None = None, persistent: bool | None = None, cluster: int = 1,
            staged: bool | None = None, a_mn: bool = False, b_k: bool = False) -> None:
    """One launch over ``batch`` products: ``a`` / ``b`` are (address, batch stride in elements),
    stride 0 for an operand shared by the whole batch; ``out`` contiguous (batch, m, n). The tile
    config and grid come from ``_choose`` unless given (``source`` with its ``bn`` and ``smem``;
    ``persistent``: one block per multiprocessor walking the tiles, else one block per tile;
    ``cluster``: the CTAs per cluster the source was generated for; ``staged``: the staged
    epilogue, by default for 16-bit outputs, whose overlap needs persistent blocks: measured on
    the H200, bf16 4096² 0.178 ms staged against 0.192 plain, 8192² 1.589 against 1.637). float32
    (tf32): ``b`` is B^T, (batch, n, k) row-major (``_launch_tf32`` transposes). ``a_mn``: ``a``
    holds A^T, (batch, k, m) row-major; ``b_k``: ``b`` holds B^T, (batch, n, k) row-major (16-bit
    types, default configs: ``layout_config``)."""
    if source is None and bn is None and persistent is None and cluster == 1 and staged is None \
            and in_dtype != "float32" and PREPARED[0] and hasattr(server, "raw_launcher"):
        key = (server, m, n, k, batch, a[1], b[1], in_dtype, out_dtype, bool(bias), a_mn, b_k)
        p = _PREPARED.get(key)
        if p is None:
            p = _prepare(server, key)
        if p is not None and p.launch(a[0], b[0], out, bias):
            return
    sms = server.info.multiprocessors
    if source is None and in_dtype == "float32":
        bn_auto, persistent_auto = _choose(m, n, batch, sms)
        bn = bn or bn_auto
        source, smem = _CONFIGS_TF32[bn]
        persistent = persistent_auto if persistent is None else persistent
    if source is None:
        bn_auto, persistent_auto = _choose(m, n, batch, sms)
        bn = bn or bn_auto
        staged = out_dtype != "float32" if staged is None else staged
        source, smem = layout_config(bn, staged, a_mn, b_k)
        persistent = (persistent_auto or staged) if persistent is None else persistent
    fn = server.raw_function(source, entry_name(in_dtype, out_dtype, bool(bias), a_mn, b_k), smem, WGMMA_ARCH)
    (pa, sa), (pb, sb) = a, b
    if a_mn:  # A^T (k, m): boxes of BK rows of K x 64 columns of M
        ta = _tensor_map(server, in_dtype, pa, m, k, batch if sa else 1, sa, BK)
    else:
        ta = _tensor_map(server, in_dtype, pa, k, m, batch if sa else 1, sa, BM)
    if in_dtype == "float32" or b_k:  # B^T (n, k): K-major boxes of 64 rows, like A's
        tb = _tensor_map(server, in_dtype, pb, k, n, batch if sb else 1, sb, 64)
    else:
        tb = _tensor_map(server, in_dtype, pb, n, k, batch if sb else 1, sb, BK)
    args = [
        ta,
        tb,
        ctypes.c_uint64(out),
        ctypes.c_uint64(bias),
        ctypes.c_int32(m),
        ctypes.c_int32(n),
        ctypes.c_int32(k),
        ctypes.c_int32(batch),
        ctypes.c_int32(1 if sa else 0),
        ctypes.c_int32(1 if sb else 0),
    ]
    block_rows = -(-m // BM)
    units = -(-block_rows // cluster) * -(-n // bn) * batch  # tiles of clusters
    if persistent:
        units = min(units, sms // cluster)
    server.launch_raw(fn, (units * cluster, 1, 1), (THREADS, 1, 1), args, smem)


#: ``_launch``'s (server, m, n, k, batch, a's and b's batch steps, dtypes, bias) -> its
#: ``_Prepared`` launch (a training step launches the same few dozen products every step)
_PREPARED: dict[tuple[Any, ...], Any] = {}
_PREPARED_MAX = 4096


class _Prepared:
    """One product configuration's launch made once: the tile choice, the function and a
    ``RawLauncher`` whose block holds the sizes; per launch only the two tensor maps (cached
    per address, ``_tensor_map``) and the output and bias addresses change."""

    __slots__ = ("server", "dtype", "m", "n", "k", "ba", "bb", "sa", "sb", "launcher", "out_v", "bias_v", "amap",
                 "bmap")

    def __init__(self, server: Any, key: tuple[Any, ...], launcher: Any) -> None:
        _, m, n, k, batch, self.sa, self.sb, self.dtype, _, _, a_mn, b_k = key
        self.m, self.n, self.k = m, n, k
        # (cols, rows, box rows) of each operand's tensor map, as ``_launch`` encodes them
        self.amap = (m, k, BK) if a_mn else (k, m, BM)
        self.bmap = (k, n, 64) if b_k else (n, k, BK)
        self.server = server
        self.ba, self.bb = (batch if self.sa else 1), (batch if self.sb else 1)
        self.launcher = launcher
        self.out_v, self.bias_v = launcher.args[2], launcher.args[3]

    def launch(self, pa: int, pb: int, out: int, bias: int) -> bool:
        """Launch over these addresses (False: another thread holds the block; launch the
        general way)."""
        lr = self.launcher
        lock = lr.lock
        if not lock.acquire(False):
            return False
        try:
            server, dtype = self.server, self.dtype
            ac, ar, abox = self.amap
            bc, br, bbox = self.bmap
            ta = _tensor_map(server, dtype, pa, ac, ar, self.ba, self.sa, abox)
            tb = _tensor_map(server, dtype, pb, bc, br, self.bb, self.sb, bbox)
            params = lr.params
            params[0] = ctypes.addressof(ta)
            params[1] = ctypes.addressof(tb)
            self.out_v.value = out
            self.bias_v.value = bias
            lr.run()
        finally:
            lock.release()
        return True


def _prepare(server: Any, key: tuple[Any, ...]) -> _Prepared | None:
    """``_launch``'s default configuration for ``key``, prepared (None while the function is
    still compiling in the tuner's preparation: nothing to keep)."""
    _, m, n, k, batch, sa, sb, in_dtype, out_dtype, has_bias, a_mn, b_k = key
    bn, persistent = _choose(m, n, batch, server.info.multiprocessors)
    staged = out_dtype != "float32"
    source, smem = layout_config(bn, staged, a_mn, b_k)
    fn = server.raw_function(source, entry_name(in_dtype, out_dtype, has_bias, a_mn, b_k), smem, WGMMA_ARCH)
    units = -(-m // BM) * -(-n // bn) * batch
    if persistent or staged:
        units = min(units, server.info.multiprocessors)
    # the maps' slots start at a placeholder: ``_Prepared.launch`` points them at each launch's maps
    args = [(ctypes.c_uint64 * 16)(), (ctypes.c_uint64 * 16)(), ctypes.c_uint64(0), ctypes.c_uint64(0),
            ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k), ctypes.c_int32(batch),
            ctypes.c_int32(1 if sa else 0), ctypes.c_int32(1 if sb else 0)]
    launcher = server.raw_launcher(fn, (units, 1, 1), (THREADS, 1, 1), args, smem)
    if launcher is None:
        return None
    if len(_PREPARED) >= _PREPARED_MAX:
        _PREPARED.clear()
    p = _PREPARED[key] = _Prepared(server, key, launcher)
    return p


def _transpose_b(client: Any, b: tuple[int, int], k: int, n: int, batch: int) -> Any:
    """B (k, n) of each batch entry (``b``: address, step; step 0: one matrix) transposed into a
    pooled scratch buffer of (entries, n, k) floats; returned so it lives until the product is
    queued (the pool recycles it in stream order after that)."""
    server = client.server
    (pb, sb), entries = b, (batch if b[1] else 1)
    scratch = client.empty(4 * entries * n * k)
    from .transpose import TRANSPOSE_SOURCE

    fn = server.raw_function(TRANSPOSE_SOURCE, "em_transpose_b32")
    for z0 in range(0, entries, 65535):  # grid.z limit
        nz = min(65535, entries - z0)
        args = [ctypes.c_uint64(pb + 4 * z0 * sb), ctypes.c_uint64(scratch.ptr + 4 * z0 * n * k), ctypes.c_int32(k),
                ctypes.c_int32(n), ctypes.c_int64(sb)]
        server.launch_raw(fn, (-(-n // 64), -(-k // 64), nz), (256, 1, 1), args, 0)
    return scratch


def _launch_tf32(client: Any, a: tuple[int, int], b: tuple[int, int], out: int, m: int, n: int, k: int,
                 batch: int, bn: int | None = None, persistent: bool | None = None) -> None:
    """float32 operands on the tf32 tensor cores: B (K, N) row-major is N-major, which wgmma reads
    for 16-bit types only, so B^T goes to a scratch buffer first (one transpose launch), then
    the product reads it with TMA exactly like A."""
    sms = client.server.info.multiprocessors
    bn_auto, persistent_auto = _choose(m, n, batch, sms)
    bn = bn or bn_auto
    source, smem = _CONFIGS_TF32[bn]
    bt = _transpose_b(client, b, k, n, batch)
    _launch(client.server, a, (bt.ptr, n * k if b[1] else 0), out, 0, m, n, k, batch, "float32", "float32", source,
            bn, smem, persistent_auto if persistent is None else persistent)
    del bt


def matmul_wgmma(client: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out = a @ b`` (``gelu(a @ b + bias)`` with ``bias`` of shape (N,), out of the input type;
    float32 operands: tf32, no bias)."""
    (m, k), n = a.shape, b.shape[1]
    if a.dtype.name == "float32":
        if bias is not None:
            raise ValueError("cuda_kernels.wgmma: the tf32 kernel has no bias + GELU epilogue")
        _launch_tf32(client, (_addr(a), 0), (_addr(b), 0), _addr(out), m, n, k, 1)
        return
    bias_addr = 0 if bias is None else _addr(bias)
    _launch(client.server, (_addr(a), 0), (_addr(b), 0), _addr(out), bias_addr, m, n, k, 1, a.dtype.name,
            out.dtype.name)


# --------------------------------------------------------------------------- matmul candidate
def transposed_layouts(a: Any, b: Any) -> tuple[bool, bool]:
    """(a_mn, b_k): which operands the kernel reads in their transposed layout, where
    ``TRANSPOSED`` allows it: a 16-bit ``a`` whose matrices are transposes of row-major (k, m)
    ones with m a multiple of 8 (``x.T @ g``), a 16-bit ``b`` whose matrices are transposes of
    row-major (n, k) ones (``x @ w.T``)."""
    if not TRANSPOSED[0] or a.dtype.name not in ("bfloat16", "float16") or len(a.shape) < 2 or len(b.shape) < 2:
        return False, False
    m, k = a.shape[-2:]
    return (a.strides[-2:] == (1, m) and m > 1 and m % 8 == 0 and k > 1,
            b.strides[-2:] == (1, k) and k > 1 and b.shape[-1] > 1)


def candidate_valid(a: Any, b: Any, a_mn: bool = False, b_k: bool = False) -> bool:
    """For the Cube backend's candidate list: a CUDA client of compute capability 9.0 and
    operands the kernel takes as they are (each batch entry a row-major matrix, 16-byte strides;
    ``a_mn`` / ``b_k``: that operand's matrices transposes of row-major ones instead,
    ``transposed_layouts``)."""
    client = a.client
    from ....cube.compiler.cuda import sm_number

    if getattr(client, "runtime", "") != "cuda" or sm_number(client.server.arch) != 90:
        return False
    if a.dtype.name not in _in_types() or b.dtype is not a.dtype:
        return False
    (m, k), n = a.shape[-2:], b.shape[-1]
    if not (m and k and n) or k % 8 or n % 8:
        return False
    if a.strides[-2:] != ((1, m) if a_mn else (k, 1)) or b.strides[-2:] != ((1, k) if b_k else (n, 1)):
        return False
    if a_mn and m % 8:
        return False
    return all(s % 8 == 0 for s in (*a.strides[:-2], *b.strides[:-2])) and all(
        _addr(t) % 16 == 0 for t in (a, b)
    )


#: (a's and b's shapes and strides, out's shape) -> (a's and b's batch steps, entries), or () where
#: the batch dims do not flatten (``candidate_launch``)
_FLAT: dict[tuple[Any, ...], tuple[int, ...]] = {}


def candidate_launch(backend: Any, a: Any, b: Any, out: Any, a_mn: bool = False, b_k: bool = False) -> None:
    """``out[..., :, :] = a[...] @ b[...]`` for operands already expanded to out's batch dims: one
    launch where both operands' batch dims flatten, else one launch per batch entry (``a_mn`` /
    ``b_k``: that operand read in its transposed layout, ``transposed_layouts``)."""
    key = (a.shape, a.strides, b.shape, b.strides, out.shape)
    flat = _FLAT.get(key)
    if flat is None:
        batch = out.shape[:-2]
        sa = _batch_step(batch, a.strides[:-2])
        sb = _batch_step(batch, b.strides[:-2])
        flat = (sa, sb, math.prod(batch)) if sa is not None and sb is not None else ()
        if len(_FLAT) >= _PREPARED_MAX:
            _FLAT.clear()
        _FLAT[key] = flat
    if flat and a.dtype.name != "float32":  # the common case: one launch, its layout part known
        sa, sb, nb = flat
        size = a.dtype.itemsize
        _launch(backend.client.server, (a.buffer.ptr + a.offset * size, sa), (b.buffer.ptr + b.offset * size, sb),
                out.buffer.ptr + out.offset * out.dtype.itemsize, 0, a.shape[-2], b.shape[-1], a.shape[-1], nb,
                a.dtype.name, out.dtype.name, a_mn=a_mn, b_k=b_k)
        return
    batch = out.shape[:-2]
    (m, k), n = a.shape[-2:], b.shape[-1]
    server = backend.client.server
    size = a.dtype.itemsize
    osize = out.dtype.itemsize
    nb = math.prod(batch)
    sa = _batch_step(batch, a.strides[:-2])
    sb = _batch_step(batch, b.strides[:-2])
    tf32 = a.dtype.name == "float32"
    if sa is not None and sb is not None:
        if tf32:
            _launch_tf32(backend.client, (_addr(a), sa), (_addr(b), sb), _addr(out), m, n, k, nb)
            return
        _launch(server, (_addr(a), sa), (_addr(b), sb), _addr(out), 0, m, n, k, nb, a.dtype.name, out.dtype.name,
                a_mn=a_mn, b_k=b_k)
        return
    for idx in itertools.product(*(range(s) for s in batch)):
        pa = _addr(a) + size * sum(i * s for i, s in zip(idx, a.strides))
        pb = _addr(b) + size * sum(i * s for i, s in zip(idx, b.strides))
        po = _addr(out) + osize * sum(i * s for i, s in zip(idx, out.strides))
        if tf32:
            _launch_tf32(backend.client, (pa, 0), (pb, 0), po, m, n, k, 1)
        else:
            _launch(server, (pa, 0), (pb, 0), po, 0, m, n, k, 1, a.dtype.name, out.dtype.name, a_mn=a_mn, b_k=b_k)
