"""``CubeTensor``: a view of a device buffer (the Cube backend's primitive).

buffer + shape + strides (in elements, non-negative) + offset (elements from the buffer's
start) + dtype. Views (reshape of contiguous data, permute, expand, slice with positive
steps) are new CubeTensors on the same buffer; the buffer returns to the pool when the last
view goes.
"""

from __future__ import annotations

from typing import Any

from ... import dtype as dt
from .memory import Buffer

__all__ = ["CubeTensor", "contiguous_strides", "batch_step"]


def batch_step(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """The one element step through batch dims ``shape`` flattened in order (the hand-written
    kernels' grid z), or None where they do not flatten; 0 for no batch or one broadcast by
    zero strides. Size-1 dims may have any stride."""
    dims = [(n, st) for n, st in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    step = expect = dims[-1][1]
    for n, st in reversed(dims):
        if st != expect:
            return None
        expect = st * n
    return step


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out = [0] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= max(shape[i], 1)
    return tuple(out)


class CubeTensor:
    __slots__ = ("client", "buffer", "shape", "strides", "offset", "dtype")

    def __init__(
        self,
        client: Any,
        buffer: Buffer,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        dtype: dt.DType,
    ) -> None:
        self.client = client
        self.buffer = buffer
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ptr(self) -> int:
        """Address of the first element of the view."""
        return self.buffer.ptr + self.offset * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        """C order without gaps (size-1 dimensions may have any stride)."""
        acc = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != acc:
                return False
            acc *= n
        return True

    def with_layout(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> CubeTensor:
        return CubeTensor(self.client, self.buffer, shape, strides, offset, self.dtype)

    def __repr__(self) -> str:
        return (
            f"CubeTensor(shape={self.shape}, strides={self.strides}, offset={self.offset}, "
            f"dtype={self.dtype.name}, buffer=0x{self.buffer.ptr:x})"
        )
