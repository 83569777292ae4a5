"""Launch capture: what a run of host code did on a device, as a program that can be run again.

While a ``Capture`` is open on a thread, the device hooks record that thread's work: every
buffer reserved through ``client.empty`` becomes an *allocation slot*, every ``@cube``
launch (``launch.plan._Plan.run``) a *step* (its plan, grid, packed info block, and per buffer
argument the slot and layout it read). Buffers the code found already alive (the inputs) are
*input slots*, matched by the caller. Anything else the code did on the device (an upload, a
read back, a sync, a hand-written kernel's raw launch, a launch that ran nothing because the
tuner was preparing) cannot be replayed from this record, so it marks the capture broken.

A *persistent* buffer (``persist``: a backend's own small buffer that lives as long as the
backend, such as the Cube backend's index-error flags) may be named by a launch too: it
becomes a *fixed slot*, bound to that same buffer at every replay, and a replay that names it
calls the callback ``persist`` was given (the backend learns that the buffer was written).

Hand-written kernels launch with raw arguments (addresses, tensor maps) that cannot be
rebound, so their launchers are captured one level up: ``call(fn, args)`` (the tuner runs
every candidate through it) records a *call step*, the function and its arguments with
tensors as slot views, and runs it with recording suspended; a replay calls the function
again on the new buffers. Such a function must depend on its arguments' layouts and values
only (a tuned candidate does), and what it allocates stays its own.

``Replay.run`` then performs the same launches on fresh buffers: the caller guarantees the
same inputs layout for layout and the same scalar values (it keys replays on them), so the
packed info blocks and grids are those of the capture. Buffers are reserved just before
their first step and dropped after their last, as the captured code did, so memory stays
at the captured peak. Two mechanisms above are built on it, the Fusion layer's drain replay
(through ``backends/cube/drain_capturer.py``) and the Cube backend's op replay
(``backends/cube/op_replay.py``): a tiny op's round trip then costs one key lookup and the
launches, not the planning. How the three relate: ``ember/backends/fusion/__init__.py``.
"""

from __future__ import annotations

import threading
from typing import Any

from ... import tracing
from .tensor import CubeTensor

_new = object.__new__

__all__ = ["Capture", "Replay", "active", "alloc", "broken", "call", "launched", "persist"]

#: captures open on any thread (the hooks' first, cheapest test; changed under ``_count_lock``,
#: since ``+=`` on a global is no atomic step and a lost update would hide a capture)
active = 0
_count_lock = threading.Lock()
_local = threading.local()
#: id(buffer) -> (buffer, callback) of the persistent buffers (``persist``)
_persistent: dict[int, tuple[Any, Any]] = {}


def persist(buf: Any, on_replay: Any) -> None:
    """Let captured launches name ``buf``, a buffer that outlives every replay (it is held
    here for the process): replays bind the same buffer and call ``on_replay()`` after they
    run. For a backend's own small state buffers, created outside any capture."""
    _persistent[id(buf)] = (buf, on_replay)


class Capture:
    """The record of one thread's device work; open with ``with Capture(inputs) as c:``."""

    __slots__ = ("inputs", "slot_of", "allocs", "steps", "failed", "inside", "_prev")

    def __init__(self, inputs: list[CubeTensor]) -> None:
        #: slot -> ("in", input index), ("new", nbytes) or ("fixed", id(buffer)) (``persist``);
        #: inputs take the first slots
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
        #: call steps running (their own work is not recorded)
        self.inside = 0

    def __enter__(self) -> Capture:
        global active
        self._prev = getattr(_local, "capture", None)
        _local.capture = self
        with _count_lock:
            active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        global active
        _local.capture = self._prev
        with _count_lock:
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
            key = id(t.buffer)
            if key not in _persistent or _persistent[key][0] is not t.buffer:
                return None
            slot = self.slot_of[key] = len(self.allocs)  # a fixed slot (``persist``)
            self.allocs.append(("fixed", key))
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
    """The capture recording this thread's work (None: none, or inside a call step)."""
    c = getattr(_local, "capture", None)
    return None if c is None or c.inside else c


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


def call(fn: Any, args: tuple[Any, ...], inline: bool = False) -> Any:
    """``fn(*args)``, recorded as a call step of the capture open on this thread (if any).
    Arguments: tensors, tuples of them, objects offering ``capture_tensors()`` and
    ``with_tensors(ts)`` (a bundle holding tensors), and values kept as they are (a
    backend, numbers, strings, dtypes, kernels); a tensor result becomes a slot.

    ``inline``: record what ``fn`` does on the device as the capture's own steps (its
    ``@cube`` launches and reservations), so a replay launches them directly instead of
    calling ``fn`` again (its Python: key, choice, info blocks); where ``fn`` did anything a
    replay cannot repeat (a raw launch, a sync, a read back), the record goes back to where it
    was and takes the call step instead. For functions whose launches depend on their
    arguments' layouts and values only (a tuned candidate's own kernels)."""
    c = _current()
    if c is None:
        return fn(*args)
    template = []
    for a in args:
        t = _template(c, a)
        if t is None:
            broken("a call on a buffer from outside the capture, or an argument it cannot keep")
            return fn(*args)
        template.append(t)
    if inline and not c.failed:
        n_steps, n_allocs = len(c.steps), len(c.allocs)
        out = fn(*args)
        if not c.failed and (out is None or c.view(out) is not None):
            return out
        # undo the inline record: the steps and slots it added, and the failure
        del c.steps[n_steps:]
        del c.allocs[n_allocs:]
        for k in [k for k, s in c.slot_of.items() if s >= n_allocs]:
            del c.slot_of[k]
        c.failed = ""
        c.steps.append([_CALL, fn, _result_view(c, out), tuple(template)])
        return out
    step = [_CALL, fn, None, tuple(template)]
    c.steps.append(step)
    c.inside += 1
    try:
        out = fn(*args)
    finally:
        c.inside -= 1
    if out is not None:
        if type(out) is not CubeTensor:
            broken("a call step with a result that is not a tensor")
            return out
        v = c.view(out)
        if v is None:  # reserved inside the call: a slot filled by the call's result
            c.slot_of[id(out.buffer)] = len(c.allocs)
            c.allocs.append(("ret", len(c.steps) - 1))
            v = c.view(out)
        step[2] = v
    return out


def _result_view(c: Capture, out: Any) -> Any:
    """The slot view of a call step's result (a ``ret`` slot of the step appended next, when
    the call reserved it); None for no result; marks the capture broken for a result that is
    not a tensor."""
    if out is None:
        return None
    if type(out) is not CubeTensor:
        broken("a call step with a result that is not a tensor")
        return None
    v = c.view(out)
    if v is None:  # reserved inside the call: a slot filled by the call's result
        c.slot_of[id(out.buffer)] = len(c.allocs)
        c.allocs.append(("ret", len(c.steps)))
        v = c.view(out)
    return v


def _template(c: Capture, a: Any) -> Any:
    """A call step's argument as recorded (None: a tensor from outside the capture, or an
    argument that might hold tensors the record would not see)."""
    if type(a) is CubeTensor:
        return c.view(a)
    if type(a) is tuple and a and all(type(t) is CubeTensor for t in a):
        views = tuple(c.view(t) for t in a)
        return None if None in views else _Views(views)
    if hasattr(a, "capture_tensors"):
        held = a.capture_tensors()
        views = tuple(c.view(t) for t in held)
        # the bundle is kept without its tensors: a replay must not hold the capture's buffers
        return None if None in views else _Bundle(a.with_tensors([None] * len(held)), views)
    return _Const(a) if _plain(a) else None


def _plain(a: Any) -> bool:
    """Whether ``a`` can be passed again as it is: a number, string, dtype or None, a tuple of
    such, or a device-side object that holds no tensor (a backend, a client, a kernel)."""
    if a is None or type(a) in (int, float, bool, str):
        return True
    if type(a) is tuple:
        return all(_plain(x) for x in a)
    from ...dtype import DType

    return isinstance(a, DType) or hasattr(a, "__cube_kernel__") or hasattr(a, "replayable") or (
        hasattr(a, "client") and hasattr(a, "_empty"))


def _tensor(client: Any, bufs: list[Any], v: tuple[Any, ...]) -> CubeTensor:
    """The tensor a slot view ``(slot, shape, strides, offset, dtype)`` names in a replay
    (made without the constructor call: every replay makes its results here)."""
    t = _new(CubeTensor)
    t.client = client
    t.buffer = bufs[v[0]]
    t.shape = v[1]
    t.strides = v[2]
    t.offset = v[3]
    t.dtype = v[4]
    return t


class _Const:
    """A call step's argument that holds no tensor: passed as it was."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self, client: Any, bufs: list[Any]) -> Any:
        return self.value


class _Views:
    """A tuple of tensors among a call step's arguments."""

    __slots__ = ("views",)

    def __init__(self, views: tuple[Any, ...]) -> None:
        self.views = views

    def get(self, client: Any, bufs: list[Any]) -> Any:
        return tuple(_tensor(client, bufs, v) for v in self.views)


class _Bundle:
    """An object holding tensors among a call step's arguments, rebuilt on the new ones."""

    __slots__ = ("obj", "views")

    def __init__(self, obj: Any, views: tuple[Any, ...]) -> None:
        self.obj = obj
        self.views = views

    def get(self, client: Any, bufs: list[Any]) -> Any:
        return self.obj.with_tensors([_tensor(client, bufs, v) for v in self.views])


#: the first field of a call step (a launch step has its plan there)
_CALL = object()


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


def _views_of(step: Any) -> list[Any]:
    """The slot views a captured step names (a call step: its arguments' and its result's)."""
    if step[0] is not _CALL:
        return list(step[3])
    out = []
    for a in step[3]:
        if type(a) is tuple:
            out.append(a)
        elif type(a) is _Views or type(a) is _Bundle:
            out.extend(a.views)
    if step[2] is not None:
        out.append(step[2])
    return out


class Replay:
    """A captured program: ``run(client, inputs)`` launches it again; returns the outputs."""

    __slots__ = ("n_slots", "new", "steps", "outputs", "n_inputs", "input_slots", "fixed", "on_run", "launches")

    def __init__(self, allocs: list[Any], steps: list[Any], outputs: list[Any], n_inputs: int) -> None:
        self.n_slots = len(allocs)
        self.n_inputs = n_inputs
        self.input_slots = tuple((s, a[1]) for s, a in enumerate(allocs) if a[0] == "in")
        #: fixed slots and their buffers, and the callbacks a run ends with (``persist``)
        self.fixed = tuple((s, _persistent[a[1]][0]) for s, a in enumerate(allocs) if a[0] == "fixed")
        self.on_run = tuple(_persistent[a[1]][1] for a in allocs if a[0] == "fixed")
        out_slots = {o[0] for o in outputs}
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        named_by: list[list[int]] = []
        for i, step in enumerate(steps):
            named = [v[0] for v in _views_of(step)]
            named_by.append(named)
            for s in named:
                first.setdefault(s, i)
                last[s] = i
        # per step: slots to reserve before it, slots to drop after it (never an input's or
        # an output's); a reserved buffer no step names is not reserved at all. A launch step
        # is its replayer (the plan's, bound to each buffer argument's slot and byte offset);
        # a call step keeps its function, its argument template and the slot of its result
        # (or None)
        steps_out = []
        for i, (head, count, info, views) in enumerate(steps):
            named = sorted(set(named_by[i]))
            reserve = tuple((s, allocs[s][1]) for s in named if allocs[s][0] == "new" and first[s] == i)
            drop = tuple(s for s in named if allocs[s][0] != "in" and last[s] == i and s not in out_slots)
            if head is _CALL:
                steps_out.append((None, count, views, None if info is None else info[0], reserve, drop))
                continue
            slots = tuple(v[0] for v in views)
            offsets = tuple(v[3] * v[4].itemsize for v in views)
            steps_out.append((head.replayer(count, info, slots, offsets), None, None, None, reserve, drop))
        self.steps = tuple(steps_out)
        # outputs no step wrote (an empty result): reserved at the end
        self.new = tuple((s, allocs[s][1]) for s in sorted(out_slots) if allocs[s][0] == "new" and s not in first)
        self.outputs = tuple(outputs)
        self.launches = len(steps)

    def run(self, client: Any, inputs: list[CubeTensor]) -> list[CubeTensor]:
        bufs: list[Any] = [None] * self.n_slots
        for s, k in self.input_slots:
            bufs[s] = inputs[k].buffer
        for s, b in self.fixed:
            bufs[s] = b
        # straight from the pool unless a capture must see the reservations (or a trace)
        empty = client.empty if active or tracing.active else client.pool._reserve
        for go, count, info, slots, reserve, drop in self.steps:
            for s, nbytes in reserve:
                bufs[s] = empty(nbytes)
            if go is not None:
                go(bufs)
            else:  # a call step: ``count`` is the function, ``info`` its argument template
                r = count(*[_tensor(client, bufs, a) if type(a) is tuple else a.get(client, bufs) for a in info])
                if slots is not None:
                    bufs[slots] = r.buffer
            for s in drop:
                bufs[s] = None
        for s, nbytes in self.new:
            bufs[s] = client.empty(nbytes)
        for f in self.on_run:
            f()
        return [_tensor(client, bufs, v) for v in self.outputs]
