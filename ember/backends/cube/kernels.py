"""The Cube backend's data kernels (fill, cast, layout copy), written in the kernel language.

Every kernel is generic over the element type (bound at launch from the buffers' dtypes),
so the CUDA and wgpu runtimes will reuse them unchanged.
"""

from __future__ import annotations

from ...cube import ABSOLUTE_POS, Array, ElemVar, Line, Numeric, T, Tensor, cast, kernel, u32

A = ElemVar("A")
B = ElemVar("B")


@kernel
def fill(out: Array[Line[T]], value: T):
    """out[:] = value (a scalar stored into a line broadcasts)."""
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = value


@kernel
def cast_lines(x: Array[Line[A]], out: Array[Line[B]]):
    """out = x converted element-wise (both contiguous, same number of lines)."""
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = cast(x[i], B)


@kernel
def gather_contiguous(src: Tensor[T], dst: Array[T]):
    """dst (row-major) = the elements of the strided view src, in row-major order.

    The unravel loop runs over src.rank(), a comptime value: it unrolls, one div/mod per dim.
    """
    i = ABSOLUTE_POS
    if i < dst.len():
        rem = i
        off = u32(0)
        for d in range(src.rank() - 1, -1, -1):
            n = src.shape(d)
            off += (rem % n) * src.stride(d)
            rem = rem // n
        dst[i] = src[off]


@kernel
def matmul_naive(a: Tensor[Numeric], b: Tensor[Numeric], out: Tensor[Numeric]):
    """out[..., i, j] = sum_k a[..., i, k] * b[..., k, j], one unit per output element.

    Batch dims broadcast through zero strides (the views arrive expanded); every index goes
    through the strides, so no input needs to be contiguous. The baseline candidate of the
    matmul family (tiled, register-blocked line kernels join it with autotune)."""
    idx = ABSOLUTE_POS
    if idx < out.len():
        r = out.rank()
        n = out.shape(r - 1)
        m = out.shape(r - 2)
        j = idx % n
        rest = idx // n
        i = rest % m
        rest = rest // m
        offa = i * a.stride(r - 2)
        offb = j * b.stride(r - 1)
        for d in range(r - 3, -1, -1):  # batch dims: comptime, unrolled
            s = out.shape(d)
            bi = rest % s
            rest = rest // s
            offa += bi * a.stride(d)
            offb += bi * b.stride(d)
        sa = a.stride(r - 1)
        sb = b.stride(r - 2)
        acc = Numeric(0)
        for t in range(a.shape(r - 1)):
            acc += a[offa + t * sa] * b[offb + t * sb]
        out[idx] = acc
