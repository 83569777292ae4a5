"""A launch plan: how one specialisation of a kernel is launched again and again.

Built once per launch key (``CubeKernel._plan``): the compiled kernel from the client's
pipeline table, the getters and ``struct`` format that pack its ``info`` words, and the line
checks its arrays need. ``_Plan.run`` is the per-launch hot path; ``replay`` / ``replayer``
serve captured launches (``runtime.capture``). Every server takes a launch the same way
(``runtime/contract.py``).
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
    """How to launch one specialisation: the compiled kernel and how to fill its arguments.
    Every server takes the launch the same way (``runtime/contract.py``)."""

    __slots__ = (
        "compiled",
        "entry",
        "server",
        "launch",
        "n_bufs",
        "n_info",
        "fmt",
        "getters",
        "widths",
        "check_lines",
        "info_type",
        "rereads_info",
    )

    def __init__(self, compiled: Any, server: Any, widths: list[int], getters: list[Any], fmt: str) -> None:
        self.compiled = compiled
        self.entry = compiled.entry
        self.server = server
        self.launch = server.launch  # bound once: the hot path pays no attribute lookup for it
        self.widths = widths
        self.n_bufs = len(widths)
        self.getters = getters
        self.n_info = len(getters)
        self.fmt = struct.Struct(fmt)
        self.check_lines = any(w > 1 for w in widths)
        self.info_type = ctypes.c_uint64 * max(self.n_info, 1)
        #: the server's replays read the captured info block at each launch, so a parametric
        #: replay may rewrite it in place (``backends/cube/drain_capturer.py``; the CPU server)
        self.rereads_info = bool(getattr(server, "replays_reread_info", False))

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
        if tracing.active:
            server = self.server
            if server.preparing_here():
                # preparing (the tuner's candidates, a new drain's kernels): this launch runs
                # nothing, so it opens no span (launch counts see what ran); its compile has one
                self.launch(self.compiled, tensors, info, count)
                return
            with tracing.span("launch", kernel=self.entry, stage=server.stage, channel=server.downstream.kind):
                self.launch(self.compiled, tensors, info, count)
            return
        self.launch(self.compiled, tensors, info, count)

    def _runs(self) -> bool:
        """Whether a launch now runs (not while the tuner prepares: compiles only)."""
        if getattr(self.compiled, "pending", False):
            return False
        return not self.server.preparing_here()

    def replayer(self, count: CubeCount, info: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None]:
        """A captured launch ready to run again: ``go(bufs)`` does what ``replay`` does with
        these slots and offsets; the server may prepare it once (``replayer``: its argument
        arrays and driver arguments)."""
        go = self.server.replayer(self.compiled, info, count, slots, offsets)
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
        keep = [bufs[s] for s in slots]
        self.server.launch_ptrs(self.compiled, [b.ptr + o for b, o in zip(keep, offsets)], info, count, keep)


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
