"""The multi-tensor ("foreach") step: one update over flat buffers per bucket of parameters.

A group's parameters that have a gradient are split into *buckets*: same device, same dtype,
same state (the state entries present and the step count). A bucket of several parameters
keeps flat 1-D buffers: the parameters' values concatenated (``flat_p``) and one per state
entry (``exp_avg``, ...). A step concatenates the gradients into one flat gradient (one ``cat``
launch on a Cube device), runs the optimizer's update over the flat buffers (one chain of
elementwise ops: one fused launch), and rebinds every parameter and every per-parameter state
tensor to a slice of the new flat buffers (views: no copy, no launch). Hyper-parameters, bias
corrections and step sizes enter as Python floats, which the Fusion layer's plans take as
runtime values: a new ``lr`` or step count compiles nothing.

Invariant: the per-parameter tensors (each parameter, ``state[p][name]``, ``state[p]["step"]``)
are always the truth, in torch's layout; the flat buffers are a cache whose views they are. A
bucket is reused only while every one of those tensors still holds the primitive the last step
gave it (an identity test per tensor). Anything else changing them (``load_state_dict`` of the
optimizer or the model, an in-place op on a parameter, a new parameter getting a gradient, a
parameter losing it) fails the test, and the step gathers the buckets afresh from the
per-parameter tensors (one ``cat`` per buffer), so the result is always torch's.

The step count lives in the bucket as a Python float; every parameter's ``state["step"]`` is
a host float32 0-d tensor (torch's layout) holding the one primitive made for that count
(values are immutable, so sharing it is safe; an in-place op on one rebinds only that one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..creation import tensor
from ..device import Device
from ..functional import cat
from ..tensor import Tensor, _make

__all__ = ["Bucket", "step_group"]

#: where ``state["step"]`` lives: the host, as torch keeps non-capturable steps on the CPU
STEP_DEVICE = Device.flex()

#: ``update(group, p, g, state, step) -> (new_p, new_state)``: the optimizer's formula on
#: tensors of any (equal) shape; ``state`` maps the present entries to their tensors (empty
#: on the first step) and ``step`` is the new count (None for optimizers without one)
Update = Callable[[dict[str, Any], Tensor, Tensor, dict[str, Tensor], "float | None"],
                  "tuple[Tensor, dict[str, Tensor]]"]


def step_tensor(value: float) -> Tensor:
    """A 0-d float32 step counter on the host (torch: ``torch.tensor(0.0)``)."""
    return tensor(float(value), device=STEP_DEVICE)


def _view(flat: Tensor, start: int, shape: tuple[int, ...], numel: int) -> Tensor:
    """``flat[start:start + numel].reshape(shape)`` through the catalog directly (a view on
    every device; the Tensor API's checks are known to pass here; a 1-D slice needs no reshape)."""
    bk = flat._bk
    v = bk.slice(flat._p, (slice(start, start + numel, 1),))
    return _make(v if len(shape) == 1 else bk.reshape(v, shape), bk, flat._dt)


class Bucket:
    """The flat buffers of parameters of one device, dtype and state (see the module docstring).

    A bucket of one parameter keeps that parameter's own tensors (no flattening at all)."""

    __slots__ = ("params", "shapes", "starts", "numels", "names", "step", "flat_p", "flat_state", "prims")

    def __init__(self, params: list[Tensor], names: tuple[str, ...], step: float | None) -> None:
        self.params = params
        self.shapes = [p.shape for p in params]
        self.numels = [p.numel() for p in params]
        starts = [0]
        for n in self.numels:
            starts.append(starts[-1] + n)
        self.starts = starts
        self.names = names
        self.step = step
        self.flat_p: Tensor | None = None
        self.flat_state: dict[str, Tensor] = {}
        #: per parameter, the primitives its tensors held after the last step: (p, step, *names)
        self.prims: list[tuple[Any, ...]] = []

    def valid(self, state: dict[Tensor, dict[str, Any]]) -> bool:
        """Every per-parameter tensor still holds what the last step gave it."""
        names = self.names
        for p, prims in zip(self.params, self.prims):
            if p._p is not prims[0]:
                return False
            s = state.get(p)
            if s is None or len(s) != len(names) + (prims[1] is not None):
                return False
            if prims[1] is not None and s["step"]._p is not prims[1]:
                return False
            for k, name in enumerate(names):
                t = s.get(name)
                if t is None or t._p is not prims[k + 2]:
                    return False
        return True

    def _flat(self, tensors: list[Tensor]) -> Tensor:
        if len(tensors) == 1:
            return tensors[0]
        return cat([t.reshape(-1) for t in tensors])

    def gather(self, state: dict[Tensor, dict[str, Any]]) -> None:
        """Build the flat buffers from the per-parameter tensors."""
        self.flat_p = self._flat(self.params)
        self.flat_state = {name: self._flat([state[p][name] for p in self.params]) for name in self.names}

    def run(self, group: dict[str, Any], update: Update, state: dict[Tensor, dict[str, Any]], counted: bool) -> None:
        """One step of the bucket: gradients gathered, the update, the views rebound."""
        params = self.params
        assert self.flat_p is not None
        g = self._flat([p.grad for p in params])  # type: ignore[misc]
        step = None
        if counted:
            self.step = (self.step or 0.0) + 1.0
            step = self.step
        new_p, new_state = update(group, self.flat_p, g, dict(self.flat_state), step)
        self.flat_p = new_p
        self.flat_state = new_state
        self.names = tuple(new_state)
        step_t = step_tensor(step) if counted else None
        step_p = None if step_t is None else step_t._p
        single = len(params) == 1
        prims = []
        for i, p in enumerate(params):
            s = state[p]
            if counted:
                st = s.get("step")
                if st is None or st._bk is not step_t._bk or st._dt is not step_t._dt:  # type: ignore[union-attr]
                    st = s["step"] = step_tensor(0.0)
                st._p = step_p
            if single:
                p._assign(new_p)
            else:
                p._assign(_view(new_p, self.starts[i], self.shapes[i], self.numels[i]))
            rec: list[Any] = [p._p, step_p]
            for name, flat in new_state.items():
                v = flat if single else _view(flat, self.starts[i], self.shapes[i], self.numels[i])
                t = s.get(name)
                if t is None:  # a new object around the value (never one the update was given)
                    s[name] = v = _make(v._p, v._bk, v._dt)
                else:
                    t._assign(v)
                    v = t
                rec.append(v._p)
            prims.append(tuple(rec))
        self.prims = prims


def _count(s: dict[str, Any]) -> float | None:
    t = s.get("step")
    if t is None:
        return None
    return float(t.item() if isinstance(t, Tensor) else t)


def step_group(opt: Any, group: dict[str, Any], update: Update, counted: bool, flat: bool) -> None:
    """One step of ``group``'s parameters that have a gradient (torch skips the others).

    ``counted``: the optimizer keeps ``state["step"]``; ``flat``: parameters of a bucket share
    flat buffers (False: every parameter is its own bucket, the per-tensor path)."""
    active = [p for p in group["params"] if p.grad is not None]
    if not active:
        return
    state = opt.state
    # one entry per group: (the ids of its active parameters, their buckets); an entry for
    # another set of parameters is replaced, not kept beside it
    cache: dict[int, tuple[tuple[int, ...], list[Bucket]]] = opt._buckets
    key = tuple(map(id, active))
    hit = cache.get(id(group))
    buckets = hit[1] if hit is not None and hit[0] == key else None
    if buckets is None or not all(b.valid(state) for b in buckets):
        if len(set(key)) != len(key):  # a parameter twice: torch updates it twice, in turn
            cache.pop(id(group), None)
            for p in active:  # each bucket made when its turn comes: it reads the state before
                b = _build([p], state, False)[0]
                b.gather(state)
                b.run(group, update, state, counted)
            return
        buckets = _build(active, state, flat)
        for b in buckets:
            b.gather(state)
        cache[id(group)] = (key, buckets)
    for b in buckets:
        b.run(group, update, state, counted)


def _build(active: list[Tensor], state: dict[Tensor, dict[str, Any]], flat: bool) -> list[Bucket]:
    """Buckets of ``active`` by (device, dtype, state entries, step count); every parameter
    its own bucket when ``flat`` is False."""
    if not flat:
        out = []
        for p in active:
            s = state[p]
            out.append(Bucket([p], tuple(k for k in s if k != "step"), _count(s)))
        return out
    groups: dict[tuple[Any, ...], list[Tensor]] = {}
    for p in active:
        s = state[p]
        names = tuple(k for k in s if k != "step")
        groups.setdefault((p.device, p.dtype, names, _count(s)), []).append(p)
    return [Bucket(ps, k[2], k[3]) for k, ps in groups.items()]
