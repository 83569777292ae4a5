"""Matrix transposes on the CUDA runtime for the tensor-core matmuls' operands (hand-written CUDA
C++ like ``mma``): a transposed view (``x @ w.T``, the backward's ``g @ b.T``, ``a.T @ g``)
becomes a row-major copy at close to copy bandwidth.

``em_transpose_b{16,32}``: per batch entry, ``src`` (rows, cols) row-major (entries ``step``
elements apart) to ``dst`` (cols, rows) packed. 64 x 64 tiles through shared memory (rows padded
by 4 bytes: at most 2-way bank conflicts), 16-byte global loads along the source rows and
stores along the destination rows; ``rows`` and ``cols`` multiples of 16 bytes' worth of
elements, 16-byte aligned bases and steps (``supports``). The generic strided copy
(``gather_contiguous``, one element per unit) took 0.11 ms for a 4096² bf16 transpose on the
H200, 3x the bandwidth floor.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ....cube.runtime.tensor import batch_step as _batch_step

__all__ = ["PREPARED", "TRANSPOSE_SOURCE", "supports", "transpose"]

TRANSPOSE_SOURCE = r"""
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;

/* T: the element (16 or 32 bits); V: 8 (16-bit) or 4 (32-bit) elements in one 16-byte uint4 */
template <typename T, int V>
__device__ __forceinline__ void em_transpose(const T *__restrict__ src, T *__restrict__ dst, int rows, int cols,
                                             long long step) {
    __shared__ T tile[64][64 + 4 / sizeof(T)];
    const T *s = src + (size_t)blockIdx.z * (size_t)step;
    T *d = dst + (size_t)blockIdx.z * (size_t)rows * cols;
    const int c0 = blockIdx.x * 64, r0 = blockIdx.y * 64;
    constexpr int CH = 64 / V;  /* 16-byte chunks per tile row */
#pragma unroll
    for (int i = threadIdx.x; i < 64 * CH; i += 256) {
        const int r = i / CH, c = (i % CH) * V;
        union { uint4 v; T e[V]; } u;
        u.v = make_uint4(0u, 0u, 0u, 0u);
        if (r0 + r < rows && c0 + c < cols) u.v = *(const uint4 *)(s + (size_t)(r0 + r) * cols + c0 + c);
#pragma unroll
        for (int j = 0; j < V; ++j) tile[r][c + j] = u.e[j];
    }
    __syncthreads();
#pragma unroll
    for (int i = threadIdx.x; i < 64 * CH; i += 256) {
        const int c = i / CH, r = (i % CH) * V;  /* destination row c (a source column), elements r.. */
        union { uint4 v; T e[V]; } u;
#pragma unroll
        for (int j = 0; j < V; ++j) u.e[j] = tile[r + j][c];
        if (c0 + c < cols && r0 + r < rows) *(uint4 *)(d + (size_t)(c0 + c) * rows + r0 + r) = u.v;
    }
}

extern "C" __global__ void __launch_bounds__(256) em_transpose_b16(const uint16_t *src, uint16_t *dst, int rows,
                                                                   int cols, long long step) {
    em_transpose<uint16_t, 8>(src, dst, rows, cols, step);
}
extern "C" __global__ void __launch_bounds__(256) em_transpose_b32(const uint32_t *src, uint32_t *dst, int rows,
                                                                   int cols, long long step) {
    em_transpose<uint32_t, 4>(src, dst, rows, cols, step);
}
"""


def supports(t: Any) -> bool:
    """Whether ``t`` is a batch of exact transposes this kernel copies: matrices (r, c) stored
    as (c, r) row-major (strides (1, r)), batch dims flattening to one step, 2- or 4-byte
    elements, both dims whole 16-byte chunks, a 16-byte aligned start and step."""
    size = t.dtype.itemsize
    if size not in (2, 4) or len(t.shape) < 2:
        return False
    r, c = t.shape[-2:]
    per = 16 // size
    step = _batch_step(t.shape[:-2], t.strides[:-2])
    return (
        t.strides[-2:] == (1, r)
        and r % per == 0
        and c % per == 0
        and step is not None
        and step % per == 0
        and (t.buffer.ptr + t.offset * size) % 16 == 0
    )


#: measurement knob (``bench/cuda_host_step.py --ab``): False sends the hand-written matmul
#: launches (this transpose, ``wgmma``'s products and its operand checks in ``matmul``) down their
#: general paths, as before the prepared launches
PREPARED = [True]
#: (server, element size, rows, cols, entries, step) -> a prepared launch (``RawLauncher``) and
#: the ctypes values of its two addresses: the operands of a training step's matmuls are the same
#: shapes every step
_PREPARED: dict[tuple[Any, ...], Any] = {}
_PREPARED_MAX = 1024


def transpose(client: Any, t: Any, out: Any) -> None:
    """``out`` (contiguous, ``t``'s shape) = ``t``, a view ``supports`` accepts."""
    import math

    size = t.dtype.itemsize
    r, c = t.shape[-2:]
    entries = math.prod(t.shape[:-2])
    step = _batch_step(t.shape[:-2], t.strides[:-2]) or 0
    server = client.server
    if entries <= 65535 and PREPARED[0] and hasattr(server, "raw_launcher"):
        key = (server, size, r, c, entries, step)
        hit = _PREPARED.get(key)
        if hit is None:
            hit = _prepare(server, key)
        if hit is not None:
            lr, src_v, dst_v = hit
            if lr.lock.acquire(False):
                try:
                    src_v.value = t.buffer.ptr + t.offset * size
                    dst_v.value = out.buffer.ptr + out.offset * size
                    lr.run()
                finally:
                    lr.lock.release()
                return
    fn = server.raw_function(TRANSPOSE_SOURCE, f"em_transpose_b{8 * size}")
    src = t.buffer.ptr + t.offset * size
    dst = out.buffer.ptr + out.offset * size
    for z0 in range(0, entries, 65535):  # grid.z limit
        nz = min(65535, entries - z0)
        # the source is (c, r) row-major per entry: its rows are t's columns
        args = [ctypes.c_uint64(src + size * z0 * step), ctypes.c_uint64(dst + size * z0 * r * c),
                ctypes.c_int32(c), ctypes.c_int32(r), ctypes.c_int64(step)]
        server.launch_raw(fn, (-(-r // 64), -(-c // 64), nz), (256, 1, 1), args, 0)


def _prepare(server: Any, key: tuple[Any, ...]) -> Any:
    """The single launch of ``transpose`` for ``key`` prepared (None while the function is
    still compiling in the tuner's preparation)."""
    _, size, r, c, entries, step = key
    fn = server.raw_function(TRANSPOSE_SOURCE, f"em_transpose_b{8 * size}")
    src_v, dst_v = ctypes.c_uint64(0), ctypes.c_uint64(0)
    args = [src_v, dst_v, ctypes.c_int32(c), ctypes.c_int32(r), ctypes.c_int64(step)]
    lr = server.raw_launcher(fn, (-(-r // 64), -(-c // 64), entries), (256, 1, 1), args, 0)
    if lr is None:
        return None
    if len(_PREPARED) >= _PREPARED_MAX:
        _PREPARED.clear()
    hit = _PREPARED[key] = (lr, src_v, dst_v)
    return hit
