"""The operand transposes of the tensor-core matmuls (``cuda_transpose``) on a real GPU: 16- and
32-bit elements, ragged shapes (not whole 64 x 64 tiles), batches, outputs poisoned."""

from __future__ import annotations

import numpy as np
import pytest

from .tensors import get, put


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("shape", [(64, 64), (200, 72), (8, 520), (3, 136, 24)])
def test_transposed_views_copy_row_major(cuda_client, rng, dtype, shape):
    from ember.backends.cube.cuda_kernels import transpose as cuda_transpose
    from ember.cube.runtime.tensor import contiguous_strides

    stored = rng.standard_normal(shape[:-2] + (shape[-1], shape[-2])).astype(dtype)  # (…, c, r)
    src = put(cuda_client, stored)
    n = len(shape)
    strides = src.strides[:-2] + (1, shape[-2])
    view = src.with_layout(shape, strides, 0)  # (…, r, c): the transpose of each stored matrix
    assert cuda_transpose.supports(view)
    out = put(cuda_client, np.full(shape, np.nan, dtype))
    assert out.strides == contiguous_strides(shape)
    cuda_transpose.transpose(cuda_client, view, out)
    np.testing.assert_array_equal(get(cuda_client, out), np.swapaxes(stored, n - 2, n - 1))


def test_supports_refuses_what_it_cannot_copy(cuda_client, rng):
    from ember.backends.cube.cuda_kernels import transpose as cuda_transpose

    t = put(cuda_client, rng.standard_normal((24, 20)).astype(np.float16))
    assert not cuda_transpose.supports(t)  # not a transpose
    assert not cuda_transpose.supports(t.with_layout((20, 24), (1, 20), 0))  # 20 halves: not whole chunks
    assert cuda_transpose.supports(put(cuda_client, np.zeros((24, 16), np.float16)).with_layout((16, 24), (1, 16), 0))
    b = put(cuda_client, rng.standard_normal((24, 16)).astype(np.int64))
    assert not cuda_transpose.supports(b.with_layout((16, 24), (1, 16), 0))  # 8-byte elements
