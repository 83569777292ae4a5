"""The Cube backend's drain capturer: the Fusion layer's drain replay over launch capture.

Fusion replays a drain that repeats (``backends/fusion/drain_replay.py``; the three replay
mechanisms and how they relate: ``backends/fusion/__init__.py``). What it needs from the
backend beneath it (``fusion.hooks.DrainCapturer``) is, here, the runtime's launch capture
(``cube.runtime.capture``): a ``Capture`` records the drain's launches and reservations, its
``Replay`` launches them again on fresh buffers, and two captures of one layout are compared
word by word to find the info words that hold the drain's float scalars (parametric replays).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

from ...cube.runtime import capture as launch_capture
from ...cube.runtime.tensor import CubeTensor

__all__ = ["CubeDrainCapturer", "drain_capturer"]


def drain_capturer(backend: Any) -> CubeDrainCapturer | None:
    """The capturer of ``backend``'s drains, or None where they are not replayed (a runtime
    whose launches cannot be captured, or ``cube.replay`` off)."""
    if not getattr(backend.client, "replayable", False):
        return None
    from ...environment import config

    return CubeDrainCapturer(backend.client) if config.get("cube.replay") else None


class CubeDrainCapturer:
    """``fusion.hooks.DrainCapturer`` over a cube runtime client's launch capture."""

    #: a drain's inputs as a replay takes them (layout: dtype, shape, strides, offset; storage:
    #: buffer)
    tensor_type = CubeTensor

    def __init__(self, client: Any) -> None:
        self.client = client

    def capture(self, inputs: list[Any]) -> launch_capture.Capture:
        """A launch capture of the drain's work on ``inputs``."""
        return launch_capture.Capture(inputs)

    def bind(self, replay: launch_capture.Replay) -> Callable[[list[Any]], list[Any]]:
        """The replay on this client: new inputs -> outputs."""
        return functools.partial(replay.run, self.client)

    def float_slots(self, first: list[Any], second: list[Any], first_values: list[Any],
                    values: list[Any], changed: list[int]) -> InfoWordSlots | None:
        """The info words (and call steps' constants) of ``second`` that hold changed floats."""
        return _float_slots(first, second, first_values, values, changed)

    def prepare(self, run: Callable[[], None]) -> bool:
        """Run a new plan once (``run``) with launches that run nothing, so the compiles of all
        the kernels it needs start together on the runtime's pool (``preparing_now``: the CPU
        runtime's) instead of one after another as the drain reaches them; the drain then runs
        for real and waits for each kernel as it launches it. A tuned op whose key has no
        decision yet stops its own part of the preparation (``autotune.no_tuning``), and nothing
        is prepared while a launch capture is open (it would record the runs of nothing).
        Returns whether compiles were started (a kernel not yet compiled nor stored)."""
        server = getattr(self.client, "server", None)
        prep = getattr(server, "preparing_now", None)
        if prep is None or launch_capture.active:
            return False
        from ... import autotune

        try:
            # the device lock: a key tuning on another thread prepares its candidates (one
            # preparer at a time) and times them (nothing may launch beside them)
            with autotune.device_lock(self.client), prep(), autotune.no_tuning():
                run()
        except RuntimeError:  # another thread is preparing kernels on this device: compile as they come
            return False
        return bool(server.compiling())


# --------------------------------------------------------------------------- float slots
# Two captures of one plan and layout whose values differ show which info words those floats
# fill: a word that differs between them and holds, in both, the f32 or f64 bits of one of the
# changed values is that value's slot. Any other difference (another kernel, grid, layout, a
# call step's argument, a word computed from a value) means no slots. CPU launches only: their
# replays read the captured info blocks at each launch (``launch._Plan.replay``), so rewriting
# them in place is all a replay needs.

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_U64 = struct.Struct("<Q")


def _f32_bits(v: float) -> int | None:
    try:
        return _U32.unpack(_F32.pack(v))[0]
    except (OverflowError, struct.error):
        return None


def _f64_bits(v: float) -> int:
    return _U64.unpack(_F64.pack(v))[0]


class InfoWordSlots:
    """The words of a capture that hold float values, rewritten before each replay."""

    __slots__ = ("filled", "groups", "patches")

    def __init__(self, groups: tuple[tuple[int, ...], ...],
                 patches: tuple[tuple[Any, int, int, bool | None], ...]) -> None:
        #: (info block, word index, value index, f64?) per rewritten word; a call step's
        #: constant as (its ``_Const``, element index or -1 for a bare float, value index, None)
        self.patches = patches
        self.groups = groups
        self.filled = frozenset(p[2] for p in patches)

    def patch(self, values: list[Any]) -> bool:
        """Rewrite the words for ``values`` (False: a value f32 cannot hold)."""
        for info, w, vi, wide in self.patches:
            if wide is None:  # a call step's constant (``capture._Const``): the value itself
                v = values[vi]
                if w < 0:
                    info.value = v
                else:
                    t = info.value
                    info.value = t[:w] + (v,) + t[w + 1:]
            elif wide:
                info[w] = _f64_bits(values[vi])
            else:
                b = _f32_bits(values[vi])
                if b is None:
                    return False
                info[w] = b
        return True


def _launch_infos(steps: list[Any]) -> list[Any] | None:
    """The steps of a capture in a comparable form, None where a launch's runtime does not
    read its info block at replay (nothing to rewrite)."""
    out = []
    for st in steps:
        if st[0] is launch_capture._CALL:
            out.append(("call", st[1], st[2], tuple(_call_arg(a) for a in st[3])))
        else:
            plan, count, info, views = st
            if not getattr(plan, "rereads_info", False):  # a runtime whose replays do not read the info block
                return None
            out.append(("launch", plan, (count.x, count.y, count.z), views, info))
    return out


def _call_arg(a: Any) -> Any:
    if hasattr(a, "views"):
        return ("views", a.views)
    if hasattr(a, "value"):
        return ("const", a)
    return ("view", a)


def _const_patches(ca: Any, cb: Any, changed: list[int], va: list[Any], vb: list[Any]) -> list[Any] | None:
    """Patches for a call step's constant that differs between the captures: a float, or a
    tuple holding floats, whose differing elements are each one changed value (None: not so)."""
    a, b = ca.value, cb.value
    scalar = type(a) is float and type(b) is float
    if scalar:
        a, b = (a,), (b,)
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b):
        return None
    out = []
    for k, (x, y) in enumerate(zip(a, b)):
        if x == y and type(x) is type(y):
            continue
        if type(x) is not float or type(y) is not float:
            return None
        hits = [i for i in changed if va[i] == x and vb[i] == y]
        if not hits:
            return None
        out.append((cb, -1 if scalar else k, hits))
    return out


def _float_slots(first: list[Any], second: list[Any], va: list[Any], vb: list[Any],
                 changed: list[int]) -> InfoWordSlots | None:
    a, b = _launch_infos(first), _launch_infos(second)
    if a is None or b is None or len(a) != len(b):
        return None
    ch32 = [(i, _f32_bits(va[i]), _f32_bits(vb[i])) for i in changed]
    ch64 = [(i, _f64_bits(va[i]), _f64_bits(vb[i])) for i in changed]
    patches: list[tuple[Any, int, int, bool | None]] = []
    groups: set[tuple[int, ...]] = set()
    for sa, sb in zip(a, b):
        if sa[0] != sb[0] or sa[1] is not sb[1]:
            return None
        if sa[0] == "call":
            if sa[2] != sb[2] or len(sa[3]) != len(sb[3]):
                return None
            for xa, xb in zip(sa[3], sb[3]):
                if xa[0] != xb[0]:
                    return None
                if xa[0] != "const":
                    if xa[1] != xb[1]:
                        return None
                    continue
                ca, cb = xa[1], xb[1]
                if ca.value == cb.value and type(ca.value) is type(cb.value):
                    continue
                cp = _const_patches(ca, cb, changed, va, vb)
                if cp is None:
                    return None
                for const, k, hits in cp:
                    if len(hits) > 1:
                        groups.add(tuple(hits))
                    patches.append((const, k, hits[0], None))
            continue
        if sa[2] != sb[2] or sa[3] != sb[3]:
            return None
        ia, ib = sa[4], sb[4]
        if ia is None or ib is None:
            if ia is not ib:
                return None
            continue
        if len(ia) != len(ib):
            return None
        for w in range(len(ib)):
            wa, wb = ia[w], ib[w]
            if wa == wb:
                continue
            hits = [i for i, x, y in ch32 if x == wa and y == wb]
            wide = False
            if not hits:
                hits = [i for i, x, y in ch64 if x == wa and y == wb]
                wide = True
            if not hits:
                return None  # a word that is not one changed float as it was passed
            if len(hits) > 1:
                groups.add(tuple(hits))
            patches.append((ib, w, hits[0], wide))
    if not patches:
        return None
    return InfoWordSlots(tuple(sorted(groups)), tuple(patches))
