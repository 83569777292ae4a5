"""Launch capture: what a run of host code did on a device, as a program that can be run again.

While a ``Capture`` is open on a thread, the device hooks record that thread's work: every
buffer reserved through ``client.empty`` becomes an *allocation slot*, every ``@cube``
launch (``launch._Plan.run``) a *step* (its plan, grid, packed info block, and per buffer
argument the slot and layout it read). Buffers the code found already alive (the inputs) are
*input slots*, matched by the caller. Anything else the code did on the device (an upload, a
read back, a sync, a hand-written kernel's raw launch, a launch that ran nothing because the
tuner was preparing) cannot be replayed from this record, so it marks the capture broken.

``Replay.run`` then performs the same launches on fresh buffers: the caller guarantees the
same inputs layout for layout and the same scalar values (it keys replays on them), so the
packed info blocks and grids are those of the capture. Buffers are reserved just before
their first step and dropped after their last, as the captured code did, so memory stays
at the captured peak. The Fusion layer replays small drains with it (``fusion.replay``):
a tiny op's round trip then costs one key lookup and the launches, not the planning.
"""

from __future__ import annotations

import threading
from typing import Any

from .tensor import CubeTensor

__all__ = ["Capture", "Replay", "active", "alloc", "broken", "launched"]

#: captures open on any thread (the hooks' first, cheapest test)
active = 0
_local = threading.local()


class Capture:
    """The record of one thread's device work; open with ``with Capture(inputs) as c:``."""

    __slots__ = ("inputs", "slot_of", "allocs", "steps", "failed", "_prev")

    def __init__(self, inputs: list[CubeTensor]) -> None:
        #: slot -> ("in", input index) or ("new", nbytes); inputs take the first slots
        self.allocs: list[Any] = []
        #: id(buffer) -> slot, for buffers the captured code may name in a launch
        self.slot_of: dict[int, int] = {}
        self.inputs = inputs
        for k, t in enumerate(inputs):
            if id(t.buffer) not in self.slot_of:
                self.slot_of[id(t.buffer)] = len(self.allocs)
                self.allocs.append(("in", k))
        #: (plan, count, info, ((slot, shape, strides, offset, dtype), ...)) per launch
        self.steps: list[tuple[Any, ...]] = []
        #: why the record cannot be replayed ("" while it can)
        self.failed = ""

    def __enter__(self) -> Capture:
        global active
        self._prev = getattr(_local, "capture", None)
        _local.capture = self
        active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        global active
        _local.capture = self._prev
        active -= 1
        if exc[0] is not None and not self.failed:
            self.failed = f"raised {exc[0].__name__}"

    def view(self, t: Any) -> tuple[Any, ...] | None:
        """The slot and layout of a tensor the captured code holds (None: a buffer it neither
        reserved nor received as an input)."""
        if type(t) is not CubeTensor:
            return None
        slot = self.slot_of.get(id(t.buffer))
        if slot is None:
            return None
        return (slot, t.shape, t.strides, t.offset, t.dtype)

    def replay(self, outputs: list[Any]) -> Replay | None:
        """The replay of what was captured, producing views like ``outputs`` (None when the
        capture failed or an output is not a view of a captured buffer)."""
        if self.failed:
            return None
        outs = []
        for t in outputs:
            v = self.view(t)
            if v is None:
                self.failed = "an output outside the captured buffers"
                return None
            outs.append(v)
        return Replay(self.allocs, self.steps, outs, len(self.inputs))


def _current() -> Capture | None:
    return getattr(_local, "capture", None)


def alloc(buf: Any, nbytes: int) -> None:
    """Hook: ``client.empty`` reserved ``buf`` (called only while ``active``)."""
    c = _current()
    if c is not None:
        c.slot_of[id(buf)] = len(c.allocs)
        c.allocs.append(("new", nbytes))


def broken(what: str) -> None:
    """Hook: device work a replay would not repeat (called only while ``active``)."""
    c = _current()
    if c is not None and not c.failed:
        c.failed = what


def launched(plan: Any, count: Any, info: Any, tensors: list[Any], ran: bool) -> None:
    """Hook: ``plan`` launched over ``tensors`` (``ran`` False: the launch ran nothing)."""
    c = _current()
    if c is None:
        return
    if not ran:
        broken("a launch that ran nothing (preparing)")
        return
    views = []
    for t in tensors:
        v = c.view(t)
        if v is None:
            broken("a launch on a buffer from outside the capture")
            return
        views.append(v)
    c.steps.append((plan, count, info, tuple(views)))


class Replay:
    """A captured program: ``run(client, inputs)`` launches it again; returns the outputs."""

    __slots__ = ("n_slots", "new", "steps", "outputs", "n_inputs", "input_slots", "launches")

    def __init__(self, allocs: list[Any], steps: list[Any], outputs: list[Any], n_inputs: int) -> None:
        self.n_slots = len(allocs)
        self.n_inputs = n_inputs
        self.input_slots = tuple((s, a[1]) for s, a in enumerate(allocs) if a[0] == "in")
        out_slots = {o[0] for o in outputs}
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, (_plan, _count, _info, views) in enumerate(steps):
            for v in views:
                first.setdefault(v[0], i)
                last[v[0]] = i
        # per step: slots to reserve before it, slots to drop after it (never an input's or
        # an output's), and per buffer argument its slot and byte offset; a reserved buffer
        # no step names is not reserved at all
        steps_out = []
        for i, (plan, count, info, views) in enumerate(steps):
            named = sorted({v[0] for v in views})
            reserve = tuple((s, allocs[s][1]) for s in named if allocs[s][0] == "new" and first[s] == i)
            drop = tuple(s for s in named if allocs[s][0] == "new" and last[s] == i and s not in out_slots)
            slots = tuple(v[0] for v in views)
            offsets = tuple(v[3] * v[4].itemsize for v in views)
            steps_out.append((plan, count, info, slots, offsets, reserve, drop))
        self.steps = tuple(steps_out)
        # outputs no step wrote (an empty result): reserved at the end
        self.new = tuple((s, allocs[s][1]) for s in sorted(out_slots) if allocs[s][0] == "new" and s not in first)
        self.outputs = tuple(outputs)
        self.launches = len(steps)

    def run(self, client: Any, inputs: list[CubeTensor]) -> list[CubeTensor]:
        bufs: list[Any] = [None] * self.n_slots
        for s, k in self.input_slots:
            bufs[s] = inputs[k].buffer
        empty = client.empty
        for plan, count, info, slots, offsets, reserve, drop in self.steps:
            for s, nbytes in reserve:
                bufs[s] = empty(nbytes)
            plan.replay(count, info, [bufs[s] for s in slots], offsets)
            for s in drop:
                bufs[s] = None
        for s, nbytes in self.new:
            bufs[s] = empty(nbytes)
        return [CubeTensor(client, bufs[s], shape, strides, offset, dtype)
                for s, shape, strides, offset, dtype in self.outputs]
