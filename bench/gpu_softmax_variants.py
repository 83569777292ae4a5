"""Which kernel structure reaches the softmax goal (>= 85% of copy bandwidth over rows of
(32768, 8192) f32) on the H200: hand-written CUDA variants timed next to ember's own kernel.

    python bench/gpu_softmax_variants.py

  rows3      what ember's softmax_rows does on a GPU: one block of 256 per row, three passes
             over the row in global memory (max; sum of exp; write), element loads
  rows3_u4   the same with four independent loads in flight per thread and step
  smem       the row staged once in shared memory with 16-byte loads (32 KiB per block);
             max, sum and the write read shared memory: one HBM read, one write
  regs       the row held in registers (32 values per thread, 16-byte loads): one read, one write
  ember      Device.cuda(fusion=False).softmax(1)
Every variant is checked against torch.softmax; times are event medians of back-to-back
launches (steady state).
"""

from __future__ import annotations

import ctypes
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
from ember.cube.runtime.client import get_client  # noqa: E402

ROWS, COLS = 32768, 8192
SRC = r"""
#define T 256
#define INFINITY __int_as_float(0x7f800000)
__device__ __forceinline__ float block_max(float v, float *sh) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = sh[0];
    for (int i = 1; i < T / 32; ++i) r = fmaxf(r, sh[i]);
    return r;
}
__device__ __forceinline__ float block_sum(float v, float *sh) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < T / 32; ++i) r += sh[i];
    return r;
}
#define KERNEL extern "C" __global__ void __launch_bounds__(T)
KERNEL rows3(const float *__restrict__ x, float *__restrict__ y, int n) {
    __shared__ float sh[32];
    const float *r = x + (size_t)blockIdx.x * n; float *o = y + (size_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += T) m = fmaxf(m, r[j]);
    m = block_max(m, sh);
    float s = 0.f;
    for (int j = threadIdx.x; j < n; j += T) s += expf(r[j] - m);
    s = block_sum(s, sh);
    float inv = 1.f / s;
    for (int j = threadIdx.x; j < n; j += T) o[j] = expf(r[j] - m) * inv;
}
KERNEL rows3_u4(const float *__restrict__ x, float *__restrict__ y, int n) {
    __shared__ float sh[32];
    const float *r = x + (size_t)blockIdx.x * n; float *o = y + (size_t)blockIdx.x * n;
    float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    for (int j = threadIdx.x; j < n; j += 4 * T) {
        m0 = fmaxf(m0, r[j]); m1 = fmaxf(m1, r[j + T]); m2 = fmaxf(m2, r[j + 2 * T]); m3 = fmaxf(m3, r[j + 3 * T]);
    }
    float m = block_max(fmaxf(fmaxf(m0, m1), fmaxf(m2, m3)), sh);
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    for (int j = threadIdx.x; j < n; j += 4 * T) {
        s0 += expf(r[j] - m); s1 += expf(r[j + T] - m); s2 += expf(r[j + 2 * T] - m); s3 += expf(r[j + 3 * T] - m);
    }
    float inv = 1.f / block_sum((s0 + s1) + (s2 + s3), sh);
    for (int j = threadIdx.x; j < n; j += 4 * T) {
        float a = r[j], b = r[j + T], c = r[j + 2 * T], d = r[j + 3 * T];
        o[j] = expf(a - m) * inv; o[j + T] = expf(b - m) * inv; o[j + 2 * T] = expf(c - m) * inv;
        o[j + 3 * T] = expf(d - m) * inv;
    }
}
KERNEL smem(const float *__restrict__ x, float *__restrict__ y, int n) {
    extern __shared__ float4 row[];
    __shared__ float sh[32];
    const float4 *r = (const float4 *)(x + (size_t)blockIdx.x * n); float4 *o = (float4 *)(y + (size_t)blockIdx.x * n);
    const int n4 = n / 4;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n4; j += T) {
        float4 v = r[j]; row[j] = v; m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    m = block_max(m, sh);
    float s = 0.f;
    for (int j = threadIdx.x; j < n4; j += T) {
        float4 v = row[j]; s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
    }
    float inv = 1.f / block_sum(s, sh);
    for (int j = threadIdx.x; j < n4; j += T) {
        float4 v = row[j];
        o[j] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
}
KERNEL regs(const float *__restrict__ x, float *__restrict__ y, int n) {  /* n == 8192 */
    __shared__ float sh[32];
    const float4 *r = (const float4 *)(x + (size_t)blockIdx.x * n); float4 *o = (float4 *)(y + (size_t)blockIdx.x * n);
    float4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = r[threadIdx.x + i * T];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    m = block_max(m, sh);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        v[i].x = expf(v[i].x - m); v[i].y = expf(v[i].y - m); v[i].z = expf(v[i].z - m); v[i].w = expf(v[i].w - m);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    float inv = 1.f / block_sum(s, sh);
#pragma unroll
    for (int i = 0; i < 8; ++i)
        o[threadIdx.x + i * T] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
}
"""


def main() -> int:
    import torch

    client = get_client("cuda", (0,))
    s = client.server
    xt = torch.randn(ROWS, COLS, device="cuda") * 3
    yt = torch.empty_like(xt)
    ref = torch.softmax(xt, 1)
    torch.cuda.synchronize()  # torch's stream is not ember's
    args = [ctypes.c_uint64(xt.data_ptr()), ctypes.c_uint64(yt.data_ptr()), ctypes.c_int32(COLS)]
    rows = []

    def timed(fn) -> float:
        fn()
        client.sync()
        out = []
        for _ in range(10):
            fn()
            out.append(client.profile(lambda: [fn() for _ in range(5)])[1] / 5)
        return statistics.median(out)

    for name, smem_bytes in (("rows3", 0), ("rows3_u4", 0), ("smem", COLS * 4), ("regs", 0)):
        try:
            fn = s.raw_function(SRC, name, smem_bytes)
            yt.fill_(float("nan"))
            torch.cuda.synchronize()
            t = timed(lambda fn=fn, sb=smem_bytes: s.launch_raw(fn, (ROWS, 1, 1), (256, 1, 1), args, sb))
            client.sync()
            rows.append((name, t, float((yt - ref).abs().max())))
        except Exception as e:  # noqa: BLE001
            rows.append((name, None, f"{type(e).__name__}: {e}"[:100]))
    try:
        dev = ember.Device.cuda(fusion=False)
        x = ember.from_dlpack(xt) + 0
        t = timed(lambda: x.softmax(1))
        rows.append(("ember", t, float((torch.from_dlpack(x.softmax(1)) - ref).abs().max())))
        del dev
    except Exception as e:  # noqa: BLE001
        rows.append(("ember", None, f"{type(e).__name__}: {e}"[:100]))
    # the floor: torch's clone of the same bytes, on torch's stream with torch's events
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        a.record()
        for _ in range(5):
            xt.clone()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 5e3)
    copy = statistics.median(ts)
    print(f"copy (32768 x 8192 f32 clone): {copy * 1e3:.3f} ms")
    print(f"{'variant':10} {'ms':>8} {'% of copy bw':>13}  max abs err vs torch")
    for name, t, err in rows:
        if t is None:
            print(f"{name:10} {'-':>8} {'-':>13}  {err}")
        else:
            print(f"{name:10} {t * 1e3:8.3f} {copy / t:13.0%}  {err:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
