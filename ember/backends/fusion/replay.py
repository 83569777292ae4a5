"""Replayed drains: a plan that ran twice on the same input layouts and scalar values runs
from its capture the third time on.

A drain's launches depend on its plan (the relative key), the values the key blanks
(floats and other objects, ``ir.relative_key``'s ``values``), the layouts of the realised
tensors it reads (``consts``: dtype, shape, strides, offset, and which of them share a
buffer) and the float32 matmul precision (the tuner's choice among candidates). With all of
these equal, the inner backend would derive the same kernels, grids, info blocks and
allocations again; a replay (``cube.runtime.capture``) skips that derivation and launches
directly, on fresh buffers for the results. The first drain of a layout runs normally (it
may compile and tune), the second runs captured, the rest replay. Tuned candidates, the
hand-written kernels among them, replay as calls of the winner on the new tensors.

A capture that did anything a replay cannot repeat (an upload, a read back, a raw launch
outside a tuned call, a tuner preparing) is remembered as never replayable for that layout;
tracing or an inspector listening turns replays off, so both see every block run."""

from __future__ import annotations

from typing import Any

from ... import precision

__all__ = ["DrainReplay", "SEEN", "NEVER", "replay_key", "capture_drain", "PER_PLAN"]

#: layouts kept per plan: a workload of ever new layouts or values starts afresh
PER_PLAN = 32
#: a layout seen once (the next drain with it is captured) / one whose capture failed
SEEN = "seen"
NEVER = "never"


class DrainReplay:
    """A captured drain: the launches, and the block summary its stats report."""

    __slots__ = ("replay", "outputs", "blocks", "fused", "unfused")

    def __init__(self, replay: Any, outputs: tuple[tuple[int, int], ...],
                 blocks: list[tuple[str, list[str]]]) -> None:
        self.replay = replay
        #: (op index, output index) of each result the replay returns, in its order
        self.outputs = outputs
        self.blocks = tuple(blocks)
        self.fused = sum(1 for name, _ in blocks if name != "unfused")
        self.unfused = sum(len(names) for name, names in blocks if name == "unfused")

    def count(self, stats: Any) -> None:
        """A drain run from this replay, in the Fusion backend's counters."""
        stats.replays += 1
        stats.fused_blocks += self.fused
        stats.unfused_ops += self.unfused
        stats.last_blocks = self.blocks


def replay_key(values: list[Any], consts: dict[int, Any]) -> tuple[Any, ...] | None:
    """What besides the plan a drain's launches depend on; None where no replay applies (an
    input that is not a cube tensor). A value may be unhashable: looking the key up raises
    TypeError then."""
    from ...cube.runtime.tensor import CubeTensor  # a replayable drain's inner backend imported it

    sig = []
    bufs: dict[int, int] = {}
    for t in consts.values():
        if type(t) is not CubeTensor:
            return None
        sig.append((t.dtype, t.shape, t.strides, t.offset, bufs.setdefault(id(t.buffer), len(bufs))))
    return (tuple(values), tuple(sig), precision.get_float32_matmul_precision())


def capture_drain(consts: dict[int, Any]) -> Any:
    """The capture a drain runs under (its inputs: the realised tensors, in key order)."""
    from ...cube.runtime.capture import Capture

    return Capture(list(consts.values()))
