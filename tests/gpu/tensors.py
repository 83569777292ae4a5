"""Host arrays to and from CubeTensors on a client, below the Tensor API (for kernel tests)."""

from __future__ import annotations

import numpy as np

import ember
from ember.cube.runtime.tensor import CubeTensor, contiguous_strides


def put(client, a: np.ndarray) -> CubeTensor:
    a = np.ascontiguousarray(a)
    d = ember.dtype.from_numpy_dtype(a.dtype)
    return CubeTensor(client, client.create(a), a.shape, contiguous_strides(a.shape), 0, d)


def get(client, t: CubeTensor) -> np.ndarray:
    size = t.dtype.itemsize
    return client.read(t.buffer, t.dtype.np, t.shape, tuple(s * size for s in t.strides), t.offset * size)
