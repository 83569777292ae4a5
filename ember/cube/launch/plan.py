"""A launch plan: how one specialisation of a kernel is launched again and again.

Built once per launch key (``CubeKernel._plan``): the compiled kernel from the client's
pipeline table, the getters and ``struct`` format that pack its ``info`` words, and the line
checks its arrays need. ``_Plan.run`` is the per-launch hot path; ``replay`` / ``replayer``
serve captured launches (``runtime.capture``).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import tracing
from ...errors import DTypeError, ShapeError
from ..runtime import capture
from ..runtime.tensor import CubeTensor
from ..types import Elem
from .dims import CubeCount

if TYPE_CHECKING:
    from ..compiler.base import InfoSlot


_SLOT_FMT = {
    "f16": "f4x",
    "bf16": "f4x",
    "f32": "f4x",
    "f64": "d",
    "i8": "i4x",
    "i16": "i4x",
    "i32": "i4x",
    "i64": "q",
    "u8": "I4x",
    "u16": "I4x",
    "u32": "I4x",
    "u64": "Q",
    "bool_": "?7x",
}


def _scalar_converter(e: Elem, name: str) -> Any:
    if e.name == "f16":
        return lambda v: float(np.float16(v))
    if e.name == "bf16":
        import ml_dtypes

        return lambda v: float(ml_dtypes.bfloat16(v))
    if e.is_float:
        return float
    if e.kind == "bool":
        return bool
    lo, hi = e.limits()

    def conv(v: Any) -> int:
        if type(v) is float or isinstance(v, np.floating):
            raise DTypeError(f"argument {name!r} is {e.name} but got the float {v!r}")
        i = int(v)
        if not lo <= i <= hi:
            raise ValueError(f"argument {name!r}: {i} does not fit {e.name}")
        return i

    return conv


class _Plan:
    """How to launch one specialisation: the function and how to fill its arguments."""

    __slots__ = (
        "compiled",
        "fn",
        "entry",
        "server",
        "n_bufs",
        "n_info",
        "fmt",
        "getters",
        "widths",
        "check_lines",
        "generic",
        "buf_type",
        "info_type",
    )

    def __init__(self, compiled: Any, server: Any, widths: list[int], getters: list[Any], fmt: str) -> None:
        self.compiled = compiled
        self.fn = compiled.fn
        self.entry = compiled.entry
        self.server = server
        self.widths = widths
        self.n_bufs = len(widths)
        self.getters = getters
        self.n_info = len(getters)
        self.fmt = struct.Struct(fmt)
        self.check_lines = any(w > 1 for w in widths)
        self.buf_type = ctypes.c_void_p * max(self.n_bufs, 1)
        self.info_type = ctypes.c_uint64 * max(self.n_info, 1)
        # the CPU server calls the compiled C function with (buffers, info, cx, cy, cz);
        # every other server takes the launch whole: server.launch(compiled, tensors, info, count)
        self.generic = not getattr(server, "ctypes_abi", False)

    def run(self, count: CubeCount, args: tuple[Any, ...], tensors: list[CubeTensor]) -> None:
        if self.check_lines:
            for t, w in zip(tensors, self.widths):
                if w > 1:
                    _check_lines(t, w)
        info = None
        if self.n_info:
            info = self.info_type()
            self.fmt.pack_into(info, 0, *[g(args, tensors) for g in self.getters])
        if capture.active:
            capture.launched(self, count, info, tensors, self._runs())
        if self.generic:
            if tracing.active:
                with tracing.span(
                    "launch", kernel=self.entry, stage=self.server.stage, channel=self.server.downstream.kind
                ):
                    self.server.launch(self.compiled, tensors, info, count)
            else:
                self.server.launch(self.compiled, tensors, info, count)
            return
        bufs = self.buf_type(*[t.ptr for t in tensors])
        if tracing.active:
            with tracing.span(
                "launch", kernel=self.entry, stage=self.server.stage, channel=self.server.downstream.kind
            ) as sp:
                if self.server.preparing_here():  # the tuner is preparing: this launch runs nothing
                    sp.record(prepared=True)
                self.server.execute(self.fn, bufs, info, count.x, count.y, count.z, tensors)
        else:
            self.server.execute(self.fn, bufs, info, count.x, count.y, count.z, tensors)


    def _runs(self) -> bool:
        """Whether a launch now runs (not while the tuner prepares: compiles only)."""
        if getattr(self.compiled, "pending", False):
            return False
        here = getattr(self.server, "preparing_here", None)
        return not (here is not None and here())

    def replayer(self, count: CubeCount, info: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None]:
        """A captured launch ready to run again: ``go(bufs)`` does what ``replay`` does with
        these slots and offsets; a runtime may prepare it once (CUDA: its parameter block and
        driver arguments)."""
        make = getattr(self.server, "replayer", None) if self.generic else None
        go = make(self.compiled, info, count, slots, offsets) if make is not None else None
        if go is not None:
            return go  # type: ignore[no-any-return]

        def go_(bufs: list[Any]) -> None:
            self.replay(count, info, bufs, slots, offsets)

        return go_

    def replay(self, count: CubeCount, info: Any, bufs: list[Any], slots: tuple[int, ...],
               offsets: tuple[int, ...]) -> None:
        """A captured launch again (``runtime.capture``): its info block as packed then, its
        buffer arguments ``bufs[slot]`` now, each read from the captured byte offset (same
        layouts, so no line checks). Only runtimes whose clients are ``replayable`` (CPU,
        CUDA) get here."""
        if self.generic:
            self.server.launch_ptrs(self.compiled, [bufs[s].ptr + o for s, o in zip(slots, offsets)], info, count)
        else:
            args = [bufs[s] for s in slots]
            ptrs = [b.ptr + o for b, o in zip(args, offsets)]
            self.server.execute(self.fn, self.buf_type(*ptrs), info, count.x, count.y, count.z, args)


def _check_lines(t: CubeTensor, w: int) -> None:
    """Lines of ``w`` read ``w`` consecutive elements: a contiguous view needs its element
    count and offset divisible by ``w``; a strided one also its last dim contiguous and
    every other stride a multiple of ``w``."""
    if (
        t.offset % w == 0
        and t.numel % w == 0
        and (
            t.is_contiguous()
            or (
                t.shape
                and t.shape[-1] % w == 0
                and t.strides[-1] == 1
                and not any(s % w for s in t.strides[:-1])
            )
        )
    ):
        return
    raise ShapeError(
        f"a tensor of shape {t.shape}, strides {t.strides}, offset {t.offset} cannot be read "
        f"in lines of {w}: its element count and offset must be multiples of {w} and, unless "
        f"it is contiguous, its last dim contiguous and its other strides multiples of {w}"
    )


def _meta_getter(slot: InfoSlot, k: int, width: int) -> Any:
    if slot.kind == "len":

        def g(args: Any, ts: list[CubeTensor]) -> int:
            t = ts[k]
            n = 1
            for s in t.shape:
                n *= s
            return n // width

        return g
    if slot.kind == "extent":  # checked mode: lines from the view's start to its buffer's end

        def extent(args: Any, ts: list[CubeTensor]) -> int:
            t = ts[k]
            return max(0, t.buffer.nbytes // t.dtype.itemsize - t.offset) // width

        return extent
    d = slot.dim
    if slot.kind == "shape":
        return lambda args, ts: ts[k].shape[d]
    return lambda args, ts: ts[k].strides[d]
