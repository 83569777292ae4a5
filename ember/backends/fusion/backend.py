"""Fusion: a decorator that registers ops lazily and runs them, fused, when read.

Every op of the catalog becomes "compute the output's shape and dtype, append an
``OperationIr`` to the calling thread's stream, return a lazy ``FusionTensor``": nothing
touches the device until a read (``into_data``), ``sync``, the queue limit, or a result
crossing into another thread's stream drains the stream (``stream.Stream.drain``).
Data uploads (``from_data``) and random fills are eager, as the seed's uploads are.

Elementwise composites (gelu, silu, ...) decompose into primitives here (the fusers see
them); reduction composites (softmax, logsumexp, mean, var) stay one op each, so the inner
backend's dedicated kernel runs them.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ... import dtype as dt
from ... import tracing
from ..base import Backend
from .hooks import DrainCapturer, Fuser
from .ir import OperationIr, TensorIr
from .shapes import RULES
from .signature import REF_PARTS, const_part, ref_part, sig_part
from .stream import Block, FusionStats, Plan, Stream, cut_here, cut_window

__all__ = ["Fusion", "FusionTensor"]

_ids = itertools.count(1)
_new = object.__new__
_N_REFS = len(REF_PARTS)
#: a bool argument's signature part (``signature.sig_part``'s encoding)
_BOOL_PARTS = {False: ("b", False), True: ("b", True)}


#: layout ops (``_view_op``)
_VIEWS = frozenset({"permute", "expand", "slice", "reshape"})


def _is_view(op: str, value: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``op`` on a realised inner ``value`` makes a view, not a copy: permute and expand
    always do; a slice with positive steps; a reshape of a C-contiguous value (one that says
    so through ``is_contiguous()``, or a numpy array's flags)."""
    if op == "slice":
        return all(s.step is None or s.step > 0 for s in args[1])
    if op == "reshape":
        contiguous = getattr(value, "is_contiguous", None)
        if contiguous is not None:
            return bool(contiguous())
        flags = getattr(value, "flags", None)
        return flags is not None and bool(flags.c_contiguous)
    return True


class FusionTensor:
    """A lazy handle: shape and dtype now, ``value`` (the inner primitive) after a drain."""

    __slots__ = ("id", "shape", "dtype", "stream", "value", "error", "ir", "__weakref__")

    def __init__(self, id: int, shape: tuple[int, ...], dtype: dt.DType, stream: Stream | None,
                 value: Any = None) -> None:
        self.id = id
        self.shape = shape
        self.dtype = dtype
        self.stream = stream
        self.value = value
        #: its IR (id, shape, dtype: immutable, so every op reading it shares one); made when
        #: an op first reads it (``input_ir``): most realised tensors are never queued
        self.ir: TensorIr | None = None
        #: the exception of a failed drain that should have produced this value
        self.error: BaseException | None = None

    def input_ir(self) -> TensorIr:
        """Its IR, made on first use."""
        t = self.ir
        if t is None:
            t = self.ir = TensorIr(self.id, self.shape, self.dtype)
        return t

    def __repr__(self) -> str:
        state = "realised" if self.value is not None else "queued"
        return f"FusionTensor(t{self.id}, {list(self.shape)}, {self.dtype.name}, {state})"


class Fusion(Backend):
    """The lazy decorator over ``inner``: ``fusers`` (``hooks.Fuser``) take blocks of each
    drain; ``capturer`` (``hooks.DrainCapturer``), when given, lets repeated drains replay
    (``drain_replay``); ``stage`` names the layer in spans; ``queue_limit`` drains a stream
    that long at the latest, from half of it at a step-stable point (``stream.cut_here``; default:
    the ``fusion.queue_limit`` setting)."""

    eager = False

    def __init__(self, inner: Backend, fusers: Sequence[Fuser] = (), capturer: DrainCapturer | None = None,
                 stage: str = "DSU-0-0", queue_limit: int | None = None) -> None:
        self.inner = inner
        self.name = f"fusion<{inner.name}>"
        self.checks_indices = inner.checks_indices
        self.fusers = list(fusers)
        self.capturer = capturer
        self.stage = stage
        from ...environment import config

        if queue_limit is None:
            queue_limit = int(config.get("fusion.queue_limit"))
        self.queue_limit = queue_limit
        self.cut_from = max(1, queue_limit // 2)
        self.cut_window = cut_window(queue_limit)
        #: drains of a plan run from a replay from the third on (``drain_replay``)
        self.replayable = capturer is not None
        #: relative op sequence -> plan (searched once per distinct sequence)
        self.plans: dict[Any, Plan] = {}
        #: (stream signature, dead handles) -> (drain replay, relative index of each result)
        self.fast_replays: dict[Any, Any] = {}
        self.stats = FusionStats()
        #: inspectors listening to drains (``inspect.inspect_fusion``)
        self.recorders: list[Any] = []
        self._local = threading.local()
        #: every thread's stream, weakly (a dead thread's stream goes with its thread-local);
        #: ``sync`` snapshots it, so it is swapped whole, never mutated (a WeakSet's iteration
        #: costs microseconds per idle ``sync``)
        self._streams: tuple[weakref.ref[Stream], ...] = ()
        self._streams_lock = threading.Lock()
        for op, rule in RULES.items():
            method = self._view_op(op, rule) if op in _VIEWS else self._lazy_op(op, rule)
            method.__name__ = method.__qualname__ = op
            setattr(self, op, method)

    # ------------------------------------------------------------------ streams
    def stream(self) -> Stream:
        """The calling thread's stream on this backend."""
        s = getattr(self._local, "stream", None)
        if s is None:
            s = self._local.stream = Stream(self, threading.current_thread().name)
            with self._streams_lock:
                self._streams = (*(r for r in self._streams if r() is not None), weakref.ref(s))
        return s

    def _ir(self, a: Any, stream: Stream) -> Any:
        """The IR of a tuple or list of tensors among an op's arguments (realised ones become
        the stream's constants)."""
        out = []
        for x in a:
            if type(x) is not FusionTensor:
                out.append(x)
                continue
            if x.value is not None or x.stream is not stream:
                # realised, or queued on another thread (``_register`` realised it first)
                stream.consts[x.id] = self.realise(x)
                if x.id not in stream.handles:
                    stream.handles[x.id] = weakref.ref(x)
            out.append(x.ir or x.input_ir())
        return type(a)(out)

    def _register(self, op: str, args: tuple[Any, ...], shape: tuple[int, ...], dtype: dt.DType) -> FusionTensor:
        stream = getattr(self._local, "stream", None) or self.stream()
        for a in args:
            # inputs queued on another thread's stream are realised before this stream's lock is
            # taken: realising drains that stream under its own lock, and two threads that each
            # held their own while draining the other's would deadlock
            if type(a) is FusionTensor:
                if a.value is None and a.stream is not stream:
                    self.realise(a)
            elif (type(a) is tuple or type(a) is list) and a and type(a[0]) is FusionTensor:
                for x in a:
                    if x.value is None and x.stream is not stream:
                        self.realise(x)
        # under the stream's lock: a drain from another thread (reading a tensor queued here)
        # takes the queue whole, never half of this op's records
        # (acquire/release: a ``with`` block costs twice as much, on every op)
        stream.lock.acquire()
        try:
            ir = []
            sig = stream.sig
            if sig is not None:
                sig.append(op)
            # the common argument kinds are encoded inline (``signature``'s parts, without the calls)
            for a in args:
                ta = type(a)
                if ta is FusionTensor:
                    ir.append(a.ir or a.input_ir())
                    if a.value is None and a.stream is stream:
                        # queued on this stream (a chain's usual input)
                        if sig is not None:
                            r = stream.rel[a.id]
                            sig.append(REF_PARTS[r] if r < _N_REFS else ref_part(r))
                        continue
                    # realised (one queued on another thread was realised above)
                    r = stream.rel.get(a.id)
                    if r is not None:  # read before in this queue: its value and handle are in
                        if sig is not None:
                            sig.append(REF_PARTS[r] if r < _N_REFS else ref_part(r))
                        continue
                    v = a.value
                    if v is None:
                        v = self.realise(a)
                    stream.consts[a.id] = v
                    if a.id not in stream.handles:
                        stream.handles[a.id] = weakref.ref(a)
                    if sig is not None:
                        const_part(a.id, v, stream, sig)
                elif ta is int or a is None:  # a dim, a size, an absent argument
                    ir.append(a)
                    if sig is not None:
                        sig.append(a)
                elif ta is bool:  # keepdim and other flags
                    ir.append(a)
                    if sig is not None:
                        sig.append(_BOOL_PARTS[a])
                else:
                    if (ta is tuple or ta is list) and a and type(a[0]) is FusionTensor:
                        ir.append(self._ir(a, stream))
                    else:
                        ir.append(a)
                    if sig is not None:
                        sig_part(a, stream, sig)
            # the handle and its IR made inline: two constructor calls fewer on every op
            i = next(_ids)
            t = _new(TensorIr)
            t.id = i
            t.shape = shape
            t.dtype = dtype
            out = _new(FusionTensor)
            out.id = i
            out.shape = shape
            out.dtype = dtype
            out.stream = stream
            out.value = None
            out.error = None
            out.ir = t
            # the op's record; the drain makes its OperationIr only when it has no fast replay
            stream.ops.append((op, tuple(ir), t))
            stream.handles[i] = weakref.ref(out)
            if sig is not None:
                stream.rel[i] = len(stream.order)
                stream.order.append(i)
            n = len(stream.ops)
            if n >= self.cut_from and (n >= self.queue_limit or cut_here(stream.ops, self.cut_window)):
                stream.drain()  # the limit, or a step-stable point past half of it (``stream.cut_here``)
            return out
        finally:
            stream.lock.release()

    def _lazy_op(self, op: str, rule: Callable[..., Any]) -> Callable[..., FusionTensor]:
        register = self._register

        def method(*args: Any) -> FusionTensor:
            shape, dtype = rule(*args)
            return register(op, args, shape, dtype)

        return method

    def _view_op(self, op: str, rule: Callable[..., Any]) -> Callable[..., FusionTensor]:
        """A layout op: of a realised tensor, taken at once on the inner backend when it is a view
        there (nothing to compute, so nothing to fuse: queued, it would cost a registration and
        a block of its own at the drain); otherwise queued like any op."""
        register = self._register
        inner = self.inner

        def method(*args: Any) -> FusionTensor:
            p = args[0]
            if type(p) is FusionTensor:
                v = p.value
                if v is not None and _is_view(op, v, args):
                    # the inner op checks the arguments and gives the shape (no rule: a layout
                    # op keeps the dtype)
                    out = getattr(inner, op)(v, *args[1:])
                    return FusionTensor(next(_ids), tuple(out.shape), p.dtype, None, out)
            shape, dtype = rule(*args)
            return register(op, args, shape, dtype)

        return method

    def is_ready(self, p: FusionTensor) -> bool:
        return p.value is not None and self.inner.is_ready(p.value)

    def realise(self, p: FusionTensor) -> Any:
        """The inner primitive of ``p``, draining its stream if it is still queued."""
        if p.value is None and p.stream is not None:
            p.stream.drain()
        if p.value is None:
            from ...errors import EmberError

            raise EmberError(f"the value of {p!r} was never computed: the queued work that produces it "
                             f"failed ({type(p.error).__name__}: {p.error})") from p.error
        return p.value

    # ------------------------------------------------------------------ plans
    def search(self, ops: list[OperationIr]) -> Plan:
        """Split ``ops`` into blocks: at each position the fuser claiming the best-scoring
        block wins; ops no fuser wants run unfused (consecutive ones share a block)."""
        blocks: list[Block] = []
        i, n = 0, len(ops)
        while i < n:
            best = None
            for f in self.fusers:
                claim = f.claim(ops, i)
                if claim is not None and (best is None or claim[1] > best[1][1]):
                    best = (f, claim)
            if best is not None:
                f, (stop, _score, data) = best
                blocks.append(Block(i, stop, f, data))
                i = stop
                continue
            if blocks and blocks[-1].fuser is None and blocks[-1].stop == i:
                blocks[-1].stop = i + 1
            else:
                blocks.append(Block(i, i + 1))
            i += 1
        return Plan(blocks)

    # ------------------------------------------------------------------ data
    def dtype(self, p: FusionTensor) -> dt.DType:
        return p.dtype

    def from_data(self, array: Any, dtype: dt.DType) -> FusionTensor:
        if tracing.active:
            with tracing.span("from_data", layer="fusion"):
                value = self.inner.from_data(array, dtype)
        else:
            value = self.inner.from_data(array, dtype)
        return FusionTensor(next(_ids), tuple(value.shape), dtype, None, value)

    def _read(self, p: FusionTensor) -> Any:
        """``realise`` for a read by the user (``into_data``, ``item``): reading a result this
        thread's queue computed drains the whole queue, also when an earlier drain realised it
        (an uploaded tensor, such as an index the Tensor API checks, drains nothing). A training loop's
        ``loss.item()`` then ends its step's queue, so the next step's drains (queue limit
        splits included) start at the same op and repeat the same plans and replays; otherwise
        the optimiser's ops queued after a loss realised by the queue limit would shift every
        later split by a step's worth of ops (a new plan search at every drain, no replay)."""
        s = p.stream
        if s is not None and s.ops and s is getattr(self._local, "stream", None):
            s.drain()
        return self.realise(p)

    def into_data(self, p: FusionTensor) -> Any:
        if tracing.active:
            with tracing.span("into_data", layer="fusion"):
                return self.inner.into_data(self._read(p))
        return self.inner.into_data(self._read(p))

    def item(self, p: FusionTensor) -> Any:
        return self.inner.item(self._read(p))  # untraced: see Dispatch.item

    def full(self, shape: tuple[int, ...], value: Any, dtype: dt.DType) -> FusionTensor:
        return self._register("full", (tuple(shape), value, dtype), tuple(shape), dtype)

    def random(self, dist: str, shape: tuple[int, ...], dtype: dt.DType, seed: int, offset: int,
               a: float, b: float) -> FusionTensor:
        # a data source, like from_data: filled now, not queued. Its values depend on the seed
        # and offset only (counter-based), never on queued work, and a queued fill would run
        # as a kernel of its own at the next drain anyway (nothing fuses into a random fill)
        value = self.inner.random(dist, tuple(shape), dtype, seed, offset, a, b)
        return FusionTensor(next(_ids), tuple(shape), dtype, None, value)

    def sync(self) -> None:
        for ref in self._streams:
            s = ref()
            if s is not None:
                s.drain()
        self.inner.sync()
