"""Drain replay: a plan that ran twice on the same input layouts and scalar values runs from a
record of its work the third time on (the three replay mechanisms and how they relate: the
package docstring, ``backends/fusion/__init__.py``).

A drain's work depends on its plan (the relative key), the values the key blanks (floats and
other objects, ``ir.relative_key``'s ``values``), the layouts of the realised tensors it reads
(``consts``: dtype, shape, strides, offset, and which of them share a buffer) and the float32
matmul precision (a tuner's choice among candidates). With all of these equal, the inner
backend would do the same work again; a replay (the inner backend's ``DrainCapturer``,
``hooks``) skips deriving it and repeats it directly, on fresh buffers for the results. The
first drain of a layout runs normally (it may compile and tune), the second runs recorded, the
rest replay.

A record of anything a replay cannot repeat (for the Cube backend: an upload, a read back, a
raw launch outside a tuned call, a tuner preparing) is remembered as never replayable for that
layout; tracing or an inspector listening turns replays off, so both see every block run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ... import precision

__all__ = ["DrainReplay", "ParamDrainReplay", "PendingParam", "SEEN", "NEVER", "replay_key", "param_key",
           "PER_PLAN", "param_replay"]

#: layouts kept per plan: a workload of ever new layouts or values starts afresh
PER_PLAN = 32
#: a layout seen once (the next drain with it is recorded) / one whose record failed
SEEN = "seen"
NEVER = "never"


class DrainReplay:
    """A recorded drain: the function that repeats it, and the block summary its stats report."""

    __slots__ = ("replay", "run", "outputs", "blocks", "fused", "unfused")

    def __init__(self, replay: Any, run: Callable[[list[Any]], list[Any]], outputs: tuple[tuple[int, int], ...],
                 blocks: list[tuple[str, list[str]]]) -> None:
        #: the recording's replay (``Recording.replay``); ``run`` is it bound to the inner backend
        self.replay = replay
        self.run = run
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


def replay_key(values: list[Any], consts: dict[int, Any], tensor_type: type) -> tuple[Any, ...] | None:
    """What besides the plan a drain's work depends on; None where no replay applies (an input
    that is not of the capturer's ``tensor_type``). A value may be unhashable: looking the key
    up raises TypeError then."""
    sig = []
    bufs: dict[int, int] = {}
    for t in consts.values():
        if type(t) is not tensor_type:
            return None
        sig.append((t.dtype, t.shape, t.strides, t.offset, bufs.setdefault(id(t.buffer), len(bufs))))
    return (tuple(values), tuple(sig), precision.get_float32_matmul_precision())


# --------------------------------------------------------------------------- parametric replays
# A training step's drain differs from the last one in a few float scalars only (Adam's bias
# corrections ``1 - beta ** t``, a scheduled learning rate): its exact replay key never repeats,
# so it would never replay. Two records of one plan and layout whose values differ show, to the
# capturer (``DrainCapturer.float_slots``), where those floats sit in the record. When every
# changed float has a slot, the second record replays with the slots rewritten from the drain's
# values (the values that did not change stay part of the key: a later change of one of them
# takes the ordinary path). Any other difference makes the layout ordinary.

#: the blank a float takes in a parametric key
_FLOAT = ("param-float",)


def param_key(values: list[Any], consts: dict[int, Any], tensor_type: type) -> tuple[Any, ...] | None:
    """``replay_key`` with every float blanked (None where no replay applies)."""
    blank = [_FLOAT if type(v) is float else v for v in values]
    k = replay_key(blank, consts, tensor_type)
    return None if k is None else ("param",) + k


class PendingParam:
    """The first record of a parametric layout: its steps and the values it ran with."""

    __slots__ = ("steps", "values")

    def __init__(self, steps: list[Any], values: list[Any]) -> None:
        self.steps = steps
        self.values = values


class ParamDrainReplay:
    """A drain replay whose record takes new float values at each run (``float_slots``)."""

    __slots__ = ("rep", "fixed", "groups", "slots", "lock")

    def __init__(self, rep: DrainReplay, fixed: tuple[tuple[int, Any], ...], slots: Any) -> None:
        self.rep = rep
        #: (value index, value) the record needs unchanged
        self.fixed = fixed
        #: value indices that must stay equal to one another (``FloatSlots.groups``)
        self.groups = slots.groups
        #: the capturer's ``FloatSlots``: rewrites the record for new values
        self.slots = slots
        self.lock = threading.Lock()  # two threads' streams of one backend share plans

    def matches(self, values: list[Any]) -> bool:
        """Whether a drain with ``values`` may run from this replay (its fixed values equal)."""
        for i, v in self.fixed:
            if values[i] != v or type(values[i]) is not type(v):
                return False
        for g in self.groups:
            v0 = values[g[0]]
            for i in g[1:]:
                if values[i] != v0:
                    return False
        return True

    def patch(self, values: list[Any]) -> bool:
        """Rewrite the record's float slots for ``values`` (False: a value it cannot hold);
        under ``lock``, with the run that follows."""
        return self.slots.patch(values)


def param_replay(capturer: Any, first: PendingParam, steps: list[Any], values: list[Any],
                 rep: DrainReplay) -> ParamDrainReplay | None:
    """The parametric replay of ``rep`` (recorded as ``steps`` with ``values``), or None where the
    differences from ``first`` are not all float slots."""
    va, vb = first.values, values
    if len(va) != len(vb):
        return None
    changed = [i for i in range(len(vb)) if type(vb[i]) is float and (type(va[i]) is not float or va[i] != vb[i])]
    if not changed:
        return None
    slots = capturer.float_slots(first.steps, steps, va, vb, changed)
    if slots is None:
        return None
    held = set(slots.filled) | {i for g in slots.groups for i in g}
    # every changed value must fill a slot (a changed value that moved no slot went elsewhere:
    # a kernel choice, a Python-side branch) and every other value stays as recorded
    if set(changed) - held:
        return None
    fixed = tuple((i, v) for i, v in enumerate(vb) if i not in held)
    return ParamDrainReplay(rep, fixed, slots)
