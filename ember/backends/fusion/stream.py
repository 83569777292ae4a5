"""Streams: the per-thread queues of registered ops, and the drain that runs them.

Registration appends an ``OperationIr`` to the calling thread's stream and returns. A drain
(a read, ``sync``, the queue limit, or another stream needing a result) takes the queue,
marks each input's last use, looks the *relative* op sequence up in the plan cache (a
search runs only on a miss), then executes the plan block by block: a block a fuser took
runs as one fused kernel, every other op through the inner backend's own method.

Values live in an environment keyed by tensor id only while a drain runs; afterwards each
result goes to its handle if the handle is still alive (a weak reference), so a dropped
intermediate is never kept, and its buffer is free for an in-place write.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ... import tracing
from ...precision import _precision
from .drain_replay import (
    NEVER,
    PER_PLAN,
    SEEN,
    DrainReplay,
    ParamDrainReplay,
    PendingParam,
    param_key,
    param_replay,
    replay_key,
)
from .indices import INDEX_OPS, checked_args
from .ir import READ_WRITE, OperationIr, TensorIr, relative_key

__all__ = ["Stream", "Plan", "Block", "FusionStats", "cut_here", "cut_window"]

#: plans kept per Fusion backend (ints in the key, such as a loop's ``x + i``, make new ones)
_PLANS_MAX = 4096
#: fast replays kept per Fusion backend (signature + dead handles -> drain replay)
_FAST_MAX = 4096
_FLOAT_TYPE = float
#: new plans prepared in a row without a compile, after which preparing pauses
_PREPARE_IDLE = 4
#: while paused, every this many-th new plan is prepared (a workload reaching new kernels)
_PREPARE_RETRY = 32


class Block:
    """Consecutive ops of a plan, run by one fuser (``fuser`` None: op by op, unfused)."""

    __slots__ = ("start", "stop", "fuser", "data")

    def __init__(self, start: int, stop: int, fuser: Any = None, data: Any = None) -> None:
        self.start = start
        self.stop = stop
        self.fuser = fuser
        self.data = data  # what the fuser prepared at search time (e.g. its compiled kernel)

    def __repr__(self) -> str:
        name = getattr(self.fuser, "name", "unfused")
        return f"Block({self.start}:{self.stop} {name})"


class Plan:
    __slots__ = ("blocks", "keep", "replays")

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks
        #: indices of the ops the blocks index (None: all; the others are dead)
        self.keep: tuple[int, ...] | None = None
        #: replay key -> SEEN / NEVER / DrainReplay / the parametric states (``drain_replay``);
        #: None: the inner backend has no drain capturer
        self.replays: dict[Any, Any] | None = None


class FusionStats:
    """Counters for tests and the inspector (per Fusion backend)."""

    __slots__ = ("drains", "searches", "plan_hits", "replays", "fused_blocks", "unfused_ops", "last_blocks")

    def __init__(self) -> None:
        self.drains = 0
        #: drains run from a replay (``drain_replay``)
        self.replays = 0
        self.searches = 0
        self.plan_hits = 0
        self.fused_blocks = 0
        self.unfused_ops = 0
        #: (fuser name or "unfused", [op names]) of the last drain, in execution order
        self.last_blocks: Sequence[tuple[str, list[str]]] = []


# ------------------------------------------------------------------ where a long queue is cut
#
# A queue that reaches ``queue_limit`` ops must drain, but cutting it at exactly that length
# cuts a training loop at a different offset of its step every time (a 92-op step against a
# 256-op limit: 23 offsets), and each new offset splits a fused block into two new kernels.
# So from half the limit on, a queue drains at the first op that is a *content-defined
# boundary*: an op whose code (a hash of its name and output shape, the same in every process)
# is no larger than the codes of the ``cut_window`` ops before it. Whether an op is a boundary
# depends only on the ops around it, so a repeating op sequence is cut at the same places
# every repetition (some op of each window-long stretch is a boundary: the one with the
# smallest code), and the drains of a loop repeat after the first few. The limit stays the
# hard bound. The cut points are a function of the op sequence alone, never of timing.

#: codes are 16 bits; an op with a code at or above this cannot be a boundary (a cheap first
#: test: the smallest of ``cut_window`` 16-bit codes lies below it nearly always)
_CUT_BELOW = 1 << 13
_OP_CODES: dict[str, int] = {}


def cut_window(limit: int) -> int:
    """Ops before a boundary whose codes it must not exceed (a quarter of the queue's minimum
    length at a cut, so each cut has several candidate boundaries after that length)."""
    return max(2, limit // 8)


def _op_code(op: str, shape: tuple[int, ...]) -> int:
    c = _OP_CODES.get(op)
    if c is None:
        import zlib

        c = _OP_CODES[op] = zlib.crc32(op.encode())
    # a tuple of ints hashes the same in every process (str hashes are salted: not used)
    return (((c ^ hash(shape)) * 0x9E3779B1) >> 16) & 0xFFFF


def cut_here(records: list[tuple[str, tuple[Any, ...], TensorIr]], window: int) -> bool:
    """Whether the queue ``records`` drains after its last op (it holds at least half the
    limit): the last op is a content-defined boundary (see the comment above)."""
    rec = records[-1]
    code = _op_code(rec[0], rec[2].shape)
    if code >= _CUT_BELOW:
        return False
    for op, _, t in records[-window:-1]:
        if _op_code(op, t.shape) < code:
            return False
    return True


def _map_args(a: Any, env: dict[int, Any]) -> Any:
    if type(a) is TensorIr:
        return env[a.id]
    if (type(a) is tuple or type(a) is list) and a and type(a[0]) is TensorIr:
        return type(a)(env[t.id] for t in a)
    return a


class Stream:
    """One thread's queue on one Fusion backend."""

    def __init__(self, owner: Any, thread_name: str) -> None:
        self.owner = owner
        self.thread_name = thread_name
        #: the queued ops' records ``(op, args, output)`` (``operations`` makes their IR)
        self.ops: list[tuple[str, tuple[Any, ...], TensorIr]] = []
        #: values of realised tensors the queued ops read (kept until the drain)
        self.consts: dict[int, Any] = {}
        #: handles of queued results, to receive their value after the drain
        self.handles: dict[int, weakref.ref[Any]] = {}
        self.lock = threading.RLock()
        #: the queue's signature (``signature``; None: not kept, or not encodable)
        self.sig: list[Any] | None = [] if owner.replayable else None
        #: the primitive type a drain replay takes as input (``DrainCapturer.tensor_type``;
        #: None: no replays): realised inputs of another type leave the signature out
        self.tensor_type = None if owner.capturer is None else owner.capturer.tensor_type
        #: the values the signature blanks (``signature.sig_part``): ``relative_key``'s values
        self.fvals: list[Any] = []
        #: tensor id -> relative index (order of first appearance), and the reverse
        self.rel: dict[int, int] = {}
        self.order: list[int] = []
        #: id(buffer) -> relative index of the first realised input on it
        self.bufs: dict[int, int] = {}
        #: new plans prepared in a row that compiled nothing (``_maybe_prepare``)
        self.prepare_idle = 0

    def drain(self) -> None:
        # always under the lock, even to find the queue empty: a drain on another thread may
        # have taken the queue and still be computing the value the caller wants
        lock = self.lock
        lock.acquire()
        try:
            if not self.ops:
                return
            records, self.ops = self.ops, []
            consts, self.consts = self.consts, {}
            handles, self.handles = self.handles, {}
            owner = self.owner
            sig = self.sig
            rel, self.rel = self.rel, {}
            order, self.order = self.order, []
            fvals, self.fvals = self.fvals, []
            self.bufs = {}
            self.sig = [] if owner.replayable else None
            if tracing.active:
                with tracing.span("drain", layer="fusion", ops=len(records), stage=owner.stage, channel="inline"):
                    self._run(records, consts, handles)
                return
            fkey = pfkey = None
            if sig is not None and not owner.recorders and len(order) >= len(records):
                dead = _dead(rel, handles)
                if dead is not None:
                    # the signature and the dead handles: the fast replays' keys (``signature``),
                    # the exact one with the blanked floats' values, the parametric one without
                    pfkey = (tuple(sig), dead, _precision[0])  # ``get_float32_matmul_precision()``
                    fkey = (pfkey, tuple(fvals))
                    fast_replays = owner.fast_replays
                    fast = fast_replays.get(fkey)
                    if fast is not None and self._replay_fast(fast, consts, handles, order):
                        return
                    if fvals:
                        fast = fast_replays.get(pfkey)
                        if fast is not None and self._replay_fast_param(fast, fvals, consts, handles, order):
                            return
            self._run(records, consts, handles, fkey, rel, pfkey)
        finally:
            lock.release()

    def _replay_fast(self, fast: tuple[Any, tuple[int, ...]], consts: dict[int, Any], handles: dict[int, Any],
                     order: list[int]) -> bool:
        """Run a drain from its fast replay."""
        rep, out_rels = fast
        owner = self.owner
        stats = owner.stats
        try:
            inputs = list(consts.values())
            stats.drains += 1
            stats.plan_hits += 1
            rep.count(stats)
            outs = rep.run(inputs)
        except BaseException as e:
            _deliver(handles, consts, e)
            raise
        # the replay returns every result a live handle wants (its record kept exactly those)
        for r, v in zip(out_rels, outs):
            ref = handles[order[r]]
            h = ref()
            if h is not None:
                h.value = v
        return True

    def _replay_fast_param(self, fast: tuple[Any, tuple[int, ...]], fvals: list[Any], consts: dict[int, Any],
                           handles: dict[int, Any], order: list[int]) -> bool:
        """Run a drain from the parametric replay of its layout (``ParamDrainReplay``) with its
        floats patched in, as ``_param_replay`` would after computing the keys (False: the
        floats want the ordinary path)."""
        pe, out_rels = fast
        if not pe.matches(fvals):
            return False
        owner = self.owner
        rep = pe.rep
        try:
            inputs = list(consts.values())
            with pe.lock:
                if not pe.patch(fvals):
                    return False
                outs = rep.run(inputs)
        except BaseException as e:
            _deliver(handles, consts, e)
            raise
        stats = owner.stats
        stats.drains += 1
        stats.plan_hits += 1
        rep.count(stats)
        for r, v in zip(out_rels, outs):
            h = handles[order[r]]()
            if h is not None:
                h.value = v
        return True

    def _run(self, records: list[tuple[str, tuple[Any, ...], TensorIr]], consts: dict[int, Any],
             handles: dict[int, Any], fkey: Any = None, rel: dict[int, int] | None = None,
             pfkey: Any = None) -> None:
        ops = operations(records)
        owner = self.owner
        stats = owner.stats
        stats.drains += 1
        _mark_last_uses(ops, handles)
        values: list[Any] = []
        key = relative_key(ops, values)
        plan = owner.plans.get(key)
        recorders = owner.recorders
        new = plan is None
        if plan is None:
            stats.searches += 1
            plan = self._search(ops)
            if len(owner.plans) >= _PLANS_MAX:  # a workload of ever new sequences: start afresh
                owner.plans.clear()
            owner.plans[key] = plan
            for r in recorders:
                r.searches += 1
        else:
            stats.plan_hits += 1
            for r in recorders:
                r.plan_hits += 1
        if plan.keep is not None:
            ops = [ops[i] for i in plan.keep]
        if new and owner.capturer is not None and not recorders:
            self._maybe_prepare(plan, ops, consts, stats.searches)
        env = consts
        failure: BaseException | None = None
        try:
            replays = plan.replays
            if replays is None or recorders or tracing.active:
                self._execute(plan, ops, env)
            else:
                rep = self._execute_or_replay(plan, ops, env, values, replays)
                if rep is not None and fkey is not None and rel is not None:
                    fast = self.owner.fast_replays
                    if len(fast) >= _FAST_MAX:
                        fast.clear()
                    if type(rep) is ParamDrainReplay:  # ran from the parametric replay of its layout
                        fast[pfkey] = (rep, tuple(rel[ops[i].outputs[j].id] for i, j in rep.rep.outputs))
                    else:
                        fast[fkey] = (rep, tuple(rel[ops[i].outputs[j].id] for i, j in rep.outputs))
        except BaseException as e:
            failure = e
            raise
        finally:
            if recorders:
                from .inspect import BlockRecord

                drained = [BlockRecord(f, tuple(names)) for f, names in stats.last_blocks]
                for r in recorders:
                    r.drains.append(drained)
            _deliver(handles, env, failure)

    def _maybe_prepare(self, plan: Plan, ops: list[OperationIr], consts: dict[int, Any], searches: int) -> None:
        """Prepare a new plan's kernels (``DrainCapturer.prepare``) unless the last
        ``_PREPARE_IDLE`` preparations compiled nothing (a warm process whose plans keep being
        new, e.g. ints in the ops' arguments: the extra pass would only cost); every
        ``_PREPARE_RETRY``-th new plan is prepared anyway. Preparing changes no result."""
        prepare = getattr(self.owner.capturer, "prepare", None)
        if prepare is None or (self.prepare_idle >= _PREPARE_IDLE and searches % _PREPARE_RETRY):
            return
        compiled = prepare(lambda: self._prepare_run(plan, ops, consts))
        self.prepare_idle = 0 if compiled else self.prepare_idle + 1

    def _prepare_run(self, plan: Plan, ops: list[OperationIr], consts: dict[int, Any]) -> None:
        """The plan run once for its kernels' compiles (``DrainCapturer.prepare``: launches run
        nothing): on a copy of the inputs, with throwaway stats; failures are left to the real
        run, which raises them where they belong."""
        env = dict(consts)
        stats = FusionStats()
        ran: list[tuple[str, list[str]]] = []
        failure: list[Exception] = []
        missing: set[int] = set()
        inner = self.owner.inner
        for block in plan.blocks:
            self._run_block(block, ops[block.start:block.stop], inner, env, stats, ran, failure, missing)

    def _search(self, ops: list[OperationIr]) -> Plan:
        """The plan of a new sequence: its dead ops (no live result, nothing later reads
        them) left out, the rest split into blocks by the fusers."""
        owner = self.owner
        keep = _needed(ops)
        live_ops = ops if keep is None else [ops[i] for i in keep]
        if tracing.active:
            with tracing.span("search", layer="fusion", ops=len(ops)):
                plan = owner.search(live_ops)
        else:
            plan = owner.search(live_ops)
        plan.keep = keep
        plan.replays = {} if owner.replayable else None
        from ...environment import log

        if log.enabled("fusion"):
            names = [getattr(b.fuser, "name", "unfused") + "[" + ",".join(o.op for o in live_ops[b.start:b.stop]) + "]"
                     for b in plan.blocks]
            log.logger("fusion").debug("plan for %d ops (%d dead): %s", len(ops), len(ops) - len(live_ops),
                                       " ".join(names))
        return plan

    def _execute(self, plan: Plan, ops: list[OperationIr], env: dict[int, Any],
                 rec: Any = None) -> list[tuple[str, list[str]]]:
        """Run the plan block by block; returns the blocks run (also the stats' ``last_blocks``:
        this drain's own list, which a drain on another thread may replace meanwhile). ``rec``:
        the recording the drain runs under (``hooks.Recording``), for the index checks."""
        inner = self.owner.inner
        stats = self.owner.stats
        stats.last_blocks = ran = []
        # A failed op fails only what depends on it (docs/evaluation.md): the ops after it still
        # run unless one of their inputs is a result that was never computed (an unfused block
        # goes op by op; a fused block fails whole, and runs op by op when it reads a missing
        # result: it may group independent ops). The first failure is raised once
        # every independent op has run.
        failure: list[Exception] = []
        missing: set[int] = set()  # ids of results of failed or skipped ops
        for block in plan.blocks:
            self._run_block(block, ops[block.start:block.stop], inner, env, stats, ran, failure, missing, rec)
        if failure:
            raise failure[0]
        return ran

    def _execute_or_replay(self, plan: Plan, ops: list[OperationIr], env: dict[int, Any], values: list[Any],
                           replays: dict[Any, Any]) -> DrainReplay | ParamDrainReplay | None:
        """Run the plan: from its replay where this layout has one (``drain_replay``), else
        normally, recorded on the layout's second drain. Returns the replay it ran from or
        made, or the parametric replay it ran from (None: none)."""
        capturer = self.owner.capturer
        rkey = replay_key(values, env, capturer.tensor_type)
        if rkey is None:
            self._execute(plan, ops, env)
            return None
        try:
            rep = replays.get(rkey)
        except TypeError:  # an unhashable value among the arguments
            self._execute(plan, ops, env)
            return None
        if type(rep) is DrainReplay:
            outs = rep.run(list(env.values()))
            for (i, j), v in zip(rep.outputs, outs):
                env[ops[i].outputs[j].id] = v
            rep.count(self.owner.stats)
            return rep
        floats = rep is None and _FLOAT_TYPE in map(type, values)
        pkey = param_key(values, env, capturer.tensor_type) if floats else None
        if pkey is not None:
            done = self._param_replay(plan, ops, env, values, replays, pkey)
            if done:
                return done if type(done) is ParamDrainReplay else None
        if rep is None:
            if len(replays) >= PER_PLAN:
                replays.clear()
            replays[rkey] = SEEN
            self._execute(plan, ops, env)
            return None
        if rep is NEVER:
            self._execute(plan, ops, env)
            return None
        cap = capturer.capture(list(env.values()))
        with cap:
            ran = self._execute(plan, ops, env, cap)
        where = tuple((i, j) for i, o in enumerate(ops) for j, live in enumerate(o.live) if live)
        r = cap.replay([env[ops[i].outputs[j].id] for i, j in where])
        from ...environment import log

        if log.enabled("fusion"):
            names = ",".join(o.op for o in ops)
            if r is None:
                log.logger("fusion").debug("drain [%s] not replayable: %s", names, cap.failed)
            else:
                log.logger("fusion").debug("drain [%s] captured: %d steps", names, r.launches)
        if r is None:
            replays[rkey] = NEVER
            return None
        rep = replays[rkey] = DrainReplay(r, capturer.bind(r), where, ran)
        return rep

    def _param_replay(self, plan: Plan, ops: list[OperationIr], env: dict[int, Any], values: list[Any],
                      replays: dict[Any, Any], pkey: Any) -> bool | ParamDrainReplay:
        """A drain whose exact layout and values are new: run it from the parametric replay of
        its layout (``ParamDrainReplay``: returned), or record it towards one (True). False:
        it did not run here."""
        try:
            pe = replays.get(pkey)
        except TypeError:  # an unhashable value among the arguments
            return False
        if type(pe) is ParamDrainReplay:
            if not pe.matches(values):
                return False
            rep = pe.rep
            inputs = list(env.values())
            with pe.lock:
                if not pe.patch(values):
                    return False
                outs = rep.run(inputs)
            for (i, j), v in zip(rep.outputs, outs):
                env[ops[i].outputs[j].id] = v
            rep.count(self.owner.stats)
            return pe
        if pe is NEVER:
            return False
        if pe is None:  # the first drain of this layout: seen, run as usual
            if len(replays) >= PER_PLAN:
                replays.clear()
            replays[pkey] = SEEN
            return False
        # the second and third: recorded, and compared
        capturer = self.owner.capturer
        cap = capturer.capture(list(env.values()))
        with cap:
            ran = self._execute(plan, ops, env, cap)
        if cap.failed:
            replays[pkey] = NEVER
            return True
        if type(pe) is not PendingParam:
            replays[pkey] = PendingParam(list(cap.steps), list(values))
            return True
        where = tuple((i, j) for i, o in enumerate(ops) for j, live in enumerate(o.live) if live)
        r = cap.replay([env[ops[i].outputs[j].id] for i, j in where])
        pr = None if r is None else param_replay(capturer, pe, list(cap.steps), values,
                                                   DrainReplay(r, capturer.bind(r), where, ran))
        replays[pkey] = NEVER if pr is None else pr
        from ...environment import log

        if log.enabled("fusion"):
            names = ",".join(o.op for o in ops)
            log.logger("fusion").debug("drain [%s] %s", names, "not parametric" if pr is None else
                                       f"recorded with {len(pr.slots.filled)} float slots")
        return True

    @staticmethod
    def _run_block(block: Block, block_ops: list[OperationIr], inner: Any, env: dict[int, Any],
                   stats: FusionStats, ran: list[tuple[str, list[str]]], failure: list[Exception],
                   missing: set[int], rec: Any = None) -> None:
        """Run one block; an op whose inputs include a ``missing`` result is skipped (a fused
        block that reads one runs op by op), an op or fused block that raises joins ``missing``
        and its exception ``failure``."""
        def depends(group: list[OperationIr]) -> bool:
            return bool(missing) and any(t.id in missing for o in group for t in o.inputs)

        def failed(group: list[OperationIr], e: Exception | None) -> None:
            for o in group:
                for t in o.outputs:
                    missing.add(t.id)
                    env.pop(t.id, None)  # a fused block may have written some of its results
            if e is not None:
                names = ", ".join(o.op for o in block_ops)
                e.add_note(f"ember: raised while executing the queued block [{names}] of a fusion stream")
                failure.append(e)

        if block.fuser is not None and depends(block_ops):
            # a fused block may group independent ops (the horizontal fuser joins unrelated
            # elementwise ops into one launch): one that reads a missing result runs op by op
            # instead, so its ops that do not depend on the failure still get their values
            block = Block(block.start, block.stop)
        if block.fuser is not None:
            stats.fused_blocks += 1
            try:
                if tracing.active:
                    with tracing.span("fuse", layer="fusion", fuser=block.fuser.name, ops=len(block_ops)):
                        block.fuser.execute(inner, block_ops, block.data, env)
                else:
                    block.fuser.execute(inner, block_ops, block.data, env)
            except Exception as e:
                return failed(block_ops, e)
        else:
            stats.unfused_ops += len(block_ops)
            for o in block_ops:
                if depends([o]):
                    failed([o], None)
                    continue
                try:
                    args = tuple(_map_args(a, env) for a in o.args)
                    if o.op in INDEX_OPS and not inner.checks_indices:
                        # an inner backend whose kernels check the values (and report a bad
                        # one at its next read) needs no host copy of them
                        args = checked_args(inner, o.op, args, rec)
                    env[o.outputs[0].id] = getattr(inner, o.op)(*args)
                except Exception as e:
                    failed([o], e)
        ran.append((getattr(block.fuser, "name", "unfused"), [o.op for o in block_ops]))


def operations(records: list[tuple[str, tuple[Any, ...], TensorIr]]) -> list[OperationIr]:
    """The IR of queued records: each op's inputs are the tensors among its arguments, in
    order (a tuple of tensors contributes its elements)."""
    ops = []
    for op, args, out in records:
        inputs = []
        for a in args:
            ta = type(a)
            if ta is TensorIr:
                inputs.append(a)
            elif (ta is tuple or ta is list) and a and type(a[0]) is TensorIr:
                inputs.extend(x for x in a if type(x) is TensorIr)
        ops.append(OperationIr(op, args, tuple(inputs), (out,)))
    return ops


def _mark_last_uses(ops: list[OperationIr], handles: dict[int, Any]) -> None:
    """READ_WRITE for an input read for the last time in the queue whose handle is gone;
    ``live`` for an output whose handle still exists. Every queued result and every realised
    input has a weak reference in ``handles``: a dead one is a dropped handle."""
    seen_later: set[int] = set()
    for o in reversed(ops):
        ins = o.inputs
        status = []
        for t in ins:
            tid = t.id
            last = False
            if tid not in seen_later:
                ref = handles.get(tid)
                last = ref is not None and ref() is None
            # an input read twice by this op is not free for writing either
            if last and len(ins) > 1 and sum(1 for u in ins if u.id == tid) > 1:
                last = False
            status.append(READ_WRITE if last else 0)
        o.status = tuple(status)
        for t in ins:
            seen_later.add(t.id)
        live = []
        for t in o.outputs:
            ref = handles.get(t.id)
            live.append(ref is not None and ref() is not None)
        o.live = tuple(live)


def _dead(rel: dict[int, int], handles: dict[int, Any]) -> tuple[int, ...] | None:
    """Relative indices of the queue's tensors whose handles are gone (None: one without a
    handle, a state the signature does not describe; the drain takes the ordinary path)."""
    dead = []
    for tid, r in rel.items():
        ref = handles.get(tid)
        if ref is None:
            return None
        if ref() is None:
            dead.append(r)
    return tuple(dead)


def _needed(ops: list[OperationIr]) -> tuple[int, ...] | None:
    """Indices of the ops whose results are wanted: a live output, or an input of a wanted
    op later on (None: all of them). An index op stays whatever happens to its result: its
    index check may raise (or report a bad value at the next read), as it would eagerly."""
    wanted: set[int] = set()
    keep = []
    for i in range(len(ops) - 1, -1, -1):
        o = ops[i]
        if True in o.live or o.op in INDEX_OPS or any(t.id in wanted for t in o.outputs):
            keep.append(i)
            for t in o.inputs:
                wanted.add(t.id)
    if len(keep) == len(ops):
        return None
    return tuple(reversed(keep))


def _deliver(handles: dict[int, Any], env: dict[int, Any], failure: BaseException | None) -> None:
    """Results to their live handles. Results computed before a failure still reach theirs;
    the others remember the failure, so reading them raises instead of returning garbage."""
    for tid, ref in handles.items():
        h = ref()
        if h is None:
            continue
        if tid in env:
            h.value = env[tid]
        elif failure is not None:
            h.stream = None
            h.error = failure
