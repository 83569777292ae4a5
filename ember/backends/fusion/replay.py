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

import struct
from typing import Any

from ... import precision

__all__ = ["DrainReplay", "ParamReplay", "SEEN", "NEVER", "replay_key", "param_key", "capture_drain", "PER_PLAN",
           "param_replay"]

#: layouts kept per plan: a workload of ever new layouts or values starts afresh
PER_PLAN = 32
#: a layout seen once (the next drain with it is captured) / one whose capture failed
SEEN = "seen"
NEVER = "never"


class DrainReplay:
    """A captured drain: the launches, and the block summary its stats report."""

    __slots__ = ("replay", "outputs", "blocks", "fused", "unfused", "checks")

    def __init__(self, replay: Any, outputs: tuple[tuple[int, int], ...],
                 blocks: list[tuple[str, list[str]]], checks: tuple[Any, ...] = ()) -> None:
        self.replay = replay
        #: index checks of the drain's inputs a replay repeats first (``indices.check_inputs``)
        self.checks = checks
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


# --------------------------------------------------------------------------- parametric replays
# A training step's drain differs from the last one in a few float scalars only (Adam's bias
# corrections ``1 - beta ** t``, a scheduled learning rate): its exact replay key never repeats,
# so it would never replay. Two captures of one plan and layout whose values differ show which
# info words those floats fill: a word that differs between them and holds, in both, the f32 or
# f64 bits of one of the changed values is that value's slot. When every difference is
# explained so, the second capture replays with those words rewritten from the drain's values
# (the values that did not change stay part of the key: a later change of one of them takes the
# ordinary path). Any other difference (another kernel, grid, layout, a call step's argument,
# a word computed from a value) makes the layout ordinary. CPU launches only: their replays read
# the captured info blocks at each launch (``launch.plan._Plan.replay``), so rewriting them in place
# is all a replay needs.

#: the blank a float takes in a parametric key
_FLOAT = ("param-float",)
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_U64 = struct.Struct("<Q")


def param_key(values: list[Any], consts: dict[int, Any]) -> tuple[Any, ...] | None:
    """``replay_key`` with every float blanked (None where no replay applies)."""
    blank = [_FLOAT if type(v) is float else v for v in values]
    k = replay_key(blank, consts)
    return None if k is None else ("param",) + k


def _f32_bits(v: float) -> int | None:
    try:
        return _U32.unpack(_F32.pack(v))[0]
    except (OverflowError, struct.error):
        return None


def _f64_bits(v: float) -> int:
    return _U64.unpack(_F64.pack(v))[0]


class PendingParam:
    """The first capture of a parametric layout: its steps and the values it ran with."""

    __slots__ = ("steps", "values")

    def __init__(self, steps: list[Any], values: list[Any]) -> None:
        self.steps = steps
        self.values = values


class ParamReplay:
    """A capture that replays with some info words rewritten from the drain's float values."""

    __slots__ = ("rep", "fixed", "groups", "patches", "lock")

    def __init__(self, rep: DrainReplay, fixed: tuple[tuple[int, Any], ...], groups: tuple[tuple[int, ...], ...],
                 patches: tuple[tuple[Any, int, int, bool | None], ...]) -> None:
        import threading

        self.rep = rep
        #: (value index, value) the capture needs unchanged
        self.fixed = fixed
        #: value indices that were equal in both captures where one word matched several
        #: (the replay needs them equal still)
        self.groups = groups
        #: (info block, word index, value index, f64?) per rewritten word; a call step's
        #: constant as (its ``_Const``, element index or -1 for a bare float, value index, None)
        self.patches = patches
        self.lock = threading.Lock()  # two threads' streams of one backend share plans

    def matches(self, values: list[Any]) -> bool:
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
        """Rewrite the info words for ``values`` (False: a value f32 cannot hold)."""
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
    """The steps of a capture in a comparable form, None where one is a call step with a float
    argument (call steps get their arguments as they were, no info words to rewrite)."""
    from ...cube.runtime import capture as cap_mod

    out = []
    for st in steps:
        if st[0] is cap_mod._CALL:
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


def param_replay(first: PendingParam, steps: list[Any], values: list[Any], rep: DrainReplay) -> ParamReplay | None:
    """The parametric replay of ``rep`` (captured from ``steps`` with ``values``), or None where
    the differences from ``first`` are not all float slots."""
    a, b = _launch_infos(first.steps), _launch_infos(steps)
    va, vb = first.values, values
    if a is None or b is None or len(a) != len(b) or len(va) != len(vb):
        return None
    changed = [i for i in range(len(vb)) if type(vb[i]) is float and (type(va[i]) is not float or va[i] != vb[i])]
    if not changed:
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
    slots = {p[2] for p in patches} | {i for g in groups for i in g}
    # every changed value must fill a slot (a changed value that moved no word went elsewhere:
    # a kernel choice, a Python-side branch) and every other value stays as captured
    if set(changed) - slots:
        return None
    fixed = tuple((i, v) for i, v in enumerate(vb) if i not in slots)
    return ParamReplay(rep, fixed, tuple(sorted(groups)), tuple(patches))
