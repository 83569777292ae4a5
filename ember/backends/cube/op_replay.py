"""Op replay: a Cube backend op called again with the same argument layouts and values runs
from a launch capture of its first repeat (``cube.runtime.capture``; the three replay
mechanisms and how they relate: ``backends/fusion/__init__.py``).

An op's launches depend on its name, its tensors' layouts (dtype, shape, strides, offset,
which of them share a buffer), its other arguments' values, and the float32 matmul
precision; with these equal the op would derive the same kernels, grids and info blocks
again. The first call of a signature runs normally (it may compile or tune), the second
runs captured, later ones replay: a tiny op then costs a key and its launches, not the
backend's derivation (what the Fusion layer's drain replay does for a whole drain).

Views (reshape, permute, expand, slice) launch nothing and are left alone, as are the data
ops. While a capture is open (a Fusion drain being recorded) or tracing is on, ops run
normally, so the outer capture and the debug log see every launch.
"""

from __future__ import annotations

import math
from typing import Any

from ... import dtype as dt
from ... import precision, tracing
from ...cube.runtime import capture
from ...cube.runtime.capture import Capture, Replay
from ...cube.runtime.tensor import CubeTensor
from ...ops import names

__all__ = ["wrappers", "REPLAYED"]

#: catalog ops that launch kernels and return new tensors: the registry's entries flagged
#: ``replay`` (an op whose result depends on host work besides its launches is not) and the data
#: ops ``full`` and ``replace_value``
REPLAYED = frozenset(names(where=lambda op: op.replay)) | {"full", "replace_value"}
#: signatures kept per op (a workload of ever new shapes starts afresh)
PER_OP = 256
_SEEN = "seen"
_NEVER = "never"


def _signature(args: tuple[Any, ...], tensors: list[CubeTensor]) -> tuple[Any, ...] | None:
    """The key of a call (None: an argument of a kind not keyed), its tensors appended to
    ``tensors`` in order."""
    sig = []
    for a in args:
        ta = type(a)
        if ta is CubeTensor:
            buf = a.buffer
            alias = len(tensors)
            for k, t in enumerate(tensors):
                if t.buffer is buf:
                    alias = k
                    break
            tensors.append(a)
            sig.append((a.dtype, a.shape, a.strides, a.offset, alias))
        elif ta is int or ta is str or a is None:
            sig.append(a)
        elif ta is float:
            # tagged: 2.0 and 2 hash alike; -0.0 apart from 0.0 (they differ in products)
            sig.append(("f", a) if a else ("f", a, math.copysign(1.0, a)))
        elif ta is bool:
            sig.append(("b", a))
        elif ta is tuple or ta is list:
            inner = _signature(a, tensors)
            if inner is None:
                return None
            sig.append(("(", inner))
        elif isinstance(a, dt.DType):
            sig.append(a)
        else:
            return None
    return tuple(sig)


def _outputs(out: Any) -> list[Any] | None:
    if type(out) is CubeTensor:
        return [out]
    if type(out) is tuple and all(type(t) is CubeTensor for t in out):
        return list(out)
    return None


def _replayed(op: str, method: Any, client: Any) -> Any:
    entries: dict[tuple[Any, ...], Any] = {}
    is_matmul = op == "matmul"

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs or capture.active or tracing.active:
            return method(*args, **kwargs)
        tensors: list[CubeTensor] = []
        key = _signature(args, tensors)
        if key is None:
            return method(*args)
        if is_matmul:
            key = (key, precision.get_float32_matmul_precision())
        rep = entries.get(key)
        if type(rep) is tuple:
            outs = rep[0].run(client, tensors)
            return outs[0] if rep[1] else tuple(outs)
        if rep is None:
            if len(entries) >= PER_OP:
                entries.clear()
            entries[key] = _SEEN
            return method(*args)
        if rep is _NEVER:
            return method(*args)
        cap = Capture(tensors)
        with cap:
            out = method(*args)
        outs = _outputs(out)
        r: Replay | None = None if outs is None else cap.replay(outs)
        entries[key] = _NEVER if r is None or not r.launches else (r, type(out) is CubeTensor)
        return out

    call.__name__ = call.__qualname__ = op
    call.__doc__ = method.__doc__
    return call


def wrappers(backend: Any) -> dict[str, Any]:
    """Replaying wrappers of ``backend``'s ops, for the layers above it to bind (Dispatch,
    Autodiff): the backend's own methods stay as they are, so its internal calls (composites,
    autodiff's backward rules) still donate temporaries. A wrapper holds its arguments, so a
    call through it never donates, and no capture ever holds an in-place write that a later
    call's references would forbid."""
    client = backend.client
    out = {}
    for op in REPLAYED:
        method = getattr(backend, op, None)
        if method is not None:
            out[op] = _replayed(op, method, client)
    return out

