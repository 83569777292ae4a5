"""The tuner: picks one candidate of a tunable set per (device, key) and remembers it.

One idea over ~780 lines: the decision of a key. The decision tables, the entry points that
consult them and the measurement that fills them share the per-device locks and the preparing
state; the keys, stored decisions, probes and progress bar are siblings (keys.py, decisions.py,
probes.py, progress.py).

A backend describes an op as a ``TunableSet`` (candidates that all compute the same outputs)
and calls ``execute(client, tset, *args)`` where it would launch a kernel. The first call for
a key measures candidates (or loads the decision another process stored); later calls cost a
key computation and one dict lookup before the winner runs.

A key too small to be worth timing is not tuned: a set's ``trivial(key, *args)`` names the
candidate such a key takes at once (the matmul's: the vendor routine when the product's work is
below the launch-cost scale). The rule is a function of the key alone, so the choice never
depends on the machine's load, costs no compile, and is the same in every process; it is kept
in memory like a decision but not stored (nothing was measured).

How a key is tuned (``_tune``):

* Groups run in order; a later group runs only if no candidate of the earlier ones produced a
  valid result. Inside a group candidates go by priority (a function of the key; negative skips
  the candidate for that key, e.g. the naive matmul on large products).
* Preparing (runtimes with ``client.preparing``, the CPU's): before anything is timed, every
  candidate of the first group that will run is called once with launches that run nothing,
  so the compiles of all of them (and of the probes' kernel) start together on a pool, one
  per core; the tuner waits for them all, so nothing compiles while it times. A set whose
  candidates launch depending on values their earlier kernels computed opts out
  (``TunableSet(prepare=False)``); a tuned op called inside a prepared candidate runs its known
  winner the same way, and stops the preparation of that candidate when its key is new.
* Each candidate gets a warm-up call (compiles; an exception skips the candidate, logged),
  then one timed call through ``client.profile`` (device timing where the runtime has it).
  Calls far below a millisecond are repeated inside one profile, so launch noise averages out.
* Roofline: with a ``bound`` (seconds the problem needs at the device's peak compute / memory
  bandwidth / launch overhead, from the probes), an *own* candidate within the level's threshold
  of it ends the search: later own candidates are not tried. Vendor candidates (numpy/BLAS on
  the CPU runtime) are always timed: they compile nothing and are the yardstick of the report.
* Adaptive sampling: round-robin over the survivors up to the level's sample count; after each
  round a candidate whose fastest sample is slower than ``eliminate`` x the best median drops
  out; a candidate whose first two samples are both 4x the best so far never enters the rounds.
* The winner is the fastest median; a vendor candidate within 10% of it wins (the margin an own
  kernel must have: the same speed within the noise, and nothing to generate, compile or load
  when a later process starts).
* Trust: the record keeps the load average and the spread of the deciding samples; one tuned
  on a loaded machine or with noisy samples is *provisional* and tunes again in the next process
  that starts on a quiet machine (``decisions.py``), never within a process.
* The device is used exclusively: one lock per device id is held while a key tunes (probes
  included), and while any key tunes, tuned ops of other threads wait for that lock before they
  launch, so nothing that goes through the tuner runs beside a timed candidate. (Kernels that
  bypass the tuner are not held back: that would cost every launch a lock.)
* Deferred tuning (``autotune.defer``, off by default: a key's results change when it switches
  from the quick candidate to the tuned one, so a run resumed in a new process would no longer
  reproduce an uninterrupted run bit for bit) where the runtime compiles in the
  background (``client.compiling``: the CPU's): a new key with no stored decision starts the
  compiles of its candidates (``_prepare`` without waiting) and, while they run, launches the
  set's *quick* candidate (``TunableSet(quick=...)``; by default a vendor routine, which
  compiles nothing, else the highest priority): the first uses never wait for benchmark
  compiles. The key tunes at its first call that finds nothing compiling and no capture open
  (a capture would record the timed candidates); keys whose kernels are all in the store tune
  at once. A quick choice is never stored. A capture that recorded the quick candidate replays
  it (a correct result, perhaps not the fastest) until the process ends.
* ``checks`` mode (``autotune.checks``): every candidate of every group with priority >= 0 runs,
  nothing ends early, stored decisions are not reused, and each output is compared with the
  reference (the vendor candidate, else the first candidate that ran); a mismatch disqualifies
  the candidate and warns (``AutotuneCheckWarning``).

Decisions persist as JSON under ``autotune/<ember version>/<device id>/<set name>`` (see
``decisions.py``), keyed by the key's text; a stored decision whose tunable-set checksum differs
from the running set's (a candidate added, removed or regrouped) is ignored and the key retunes.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .. import tracing
from ..errors import DeviceFaultError
from . import keys

__all__ = [
    "Tunable",
    "TunableSet",
    "execute",
    "choose",
    "forget",
    "no_tuning",
    "AutotuneError",
    "AutotuneCheckWarning",
]

#: a call below this is repeated inside one profile (seconds of device time per sample)
_TARGET_SAMPLE_S = 5e-4
_MAX_REPS = 64
#: a candidate whose first two samples are this many times the best so far drops out at once
_HOPELESS = 4.0
#: an own candidate must beat the vendor candidate by this factor to win: a smaller lead is
#: within the repeat-to-repeat noise of a shared machine, and the vendor routine costs later
#: processes no kernel load (and never a wrong choice crowned by one lucky sample)
_VENDOR_TIE = 1.10
#: a candidate this much faster than the roofline bound proves the probes wrong (measured on a
#: busy device): the bound stops ending searches and the probes re-run at the next tuning
_IMPLAUSIBLE = 1.25


class AutotuneError(RuntimeError):
    """No candidate of a tunable set produced a valid result for a key."""


class AutotuneCheckWarning(UserWarning):
    """``checks`` mode found a candidate whose output differs from the reference."""


class Tunable:
    """One candidate: ``fn(*args)`` computes the set's outputs (writing the output tensors given
    in ``args``; it never reads them). ``priority``: an int or ``fn(key) -> int`` (higher first,
    negative: skipped for that key); ``valid``: ``fn(*args) -> bool`` (False: cannot run these
    args); ``vendor``: a library routine rather than an own kernel (reported separately);
    ``group``: an int or ``fn(key) -> int`` (a candidate may be a fallback on one kind of device
    and a contender on another); ``prepare_order``: lower is prepared first (``_prepare``: the
    kernels whose compiles take longest should start first, while the calling thread is still
    expanding and rendering the others')."""

    __slots__ = ("name", "fn", "group", "priority", "valid", "vendor", "prepare_order")

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        group: int | Callable[[tuple[Any, ...]], int] = 0,
        priority: int | Callable[[tuple[Any, ...]], int] = 0,
        valid: Callable[..., bool] | None = None,
        vendor: bool = False,
        prepare_order: int = 0,
    ) -> None:
        self.name = name
        self.fn = fn
        self.group = group
        self.priority = priority
        self.valid = valid
        self.vendor = vendor
        self.prepare_order = prepare_order

    def group_for(self, key: tuple[Any, ...]) -> int:
        g = self.group
        return g(key) if callable(g) else g

    def priority_for(self, key: tuple[Any, ...]) -> int:
        p = self.priority
        return p(key) if callable(p) else p

    def __repr__(self) -> str:
        return f"Tunable({self.name!r}, group={self.group}{', vendor' if self.vendor else ''})"


class TunableSet:
    """Candidates computing the same thing, and how to key, bound and check them.

    ``key(level, *args) -> tuple`` (hashable, cheap; anchor dimensions with ``level.anchor``);
    ``key_fields``: a name per key element (the persisted key reads ``m=1024,n=1024,...``);
    ``bound(key, throughput, *args) -> seconds | None``: the roofline lower bound;
    ``snapshot(result, *args) -> object``: a copy of the outputs (checks mode; ``result`` is what
    the candidate returned), ``compare(ref, got) ->
    str | None``: a mismatch description; ``poison(*args)``: fill outputs with garbage before a
    checked candidate runs, so unwritten elements are caught. ``version`` goes into the
    checksum: bump it when a candidate's meaning changes without its name changing.
    ``prepare``: whether the candidates may be called once with launches that run nothing so
    their compiles start together (see the module docstring). ``quick``: the candidate's name
    (or ``fn(key) -> name``) that runs while a deferred key's candidates compile (None: a valid
    vendor candidate, else the highest priority one). ``trivial(key, *args) -> name | None``: the
    candidate a problem too small to be worth timing takes at once (see the module docstring)."""

    __slots__ = (
        "name",
        "candidates",
        "key",
        "key_fields",
        "bound",
        "snapshot",
        "compare",
        "poison",
        "version",
        "prepare",
        "quick",
        "trivial",
        "_checksum",
        "_by_name",
    )

    def __init__(
        self,
        name: str,
        candidates: Sequence[Tunable],
        key: Callable[..., tuple[Any, ...]],
        key_fields: Sequence[str],
        bound: Callable[..., float | None] | None = None,
        snapshot: Callable[..., Any] | None = None,
        compare: Callable[[Any, Any], str | None] | None = None,
        poison: Callable[..., None] | None = None,
        version: str = "1",
        prepare: bool = True,
        quick: str | Callable[[tuple[Any, ...]], str] | None = None,
        trivial: Callable[..., str | None] | None = None,
    ) -> None:
        self.name = name
        self.candidates = list(candidates)
        self.key = key
        self.key_fields = tuple(key_fields)
        self.bound = bound
        self.snapshot = snapshot
        self.compare = compare
        self.poison = poison
        self.version = version
        self.prepare = prepare
        self.quick = quick
        self.trivial = trivial
        self._checksum: str | None = None
        self._by_name: dict[str, Tunable] | None = None

    def add(self, candidate: Tunable) -> None:
        """Register a candidate (changes the checksum: stored decisions of this set retune)."""
        self.candidates.append(candidate)
        self._checksum = None
        self._by_name = None
        forget(self)

    def remove(self, name: str) -> None:
        self.candidates = [c for c in self.candidates if c.name != name]
        self._checksum = None
        self._by_name = None
        forget(self)

    @property
    def checksum(self) -> str:
        """sha256 over the set's name, version and every candidate's name, group and kind."""
        c = self._checksum
        if c is None:
            parts = [self.name, self.version] + [
                f"{t.name}:{'f' if callable(t.group) else t.group}:{int(t.vendor)}" for t in self.candidates
            ]
            c = self._checksum = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
        return c

    def by_name(self, name: str) -> Tunable | None:
        m = self._by_name
        if m is None:
            m = self._by_name = {t.name: t for t in self.candidates}
        return m.get(name)

    def key_text(self, key: tuple[Any, ...]) -> str:
        return ",".join(f"{n}={v}" for n, v in zip(self.key_fields, key))

    def __repr__(self) -> str:
        return f"TunableSet({self.name!r}, {[t.name for t in self.candidates]})"


# ------------------------------------------------------------------------------ decisions in memory

#: (device id, set name, checksum, level name, key) -> winner
_decisions: dict[tuple[Any, ...], Tunable] = {}
#: client -> device id (clients live as long as the process)
_device_ids: dict[Any, str] = {}
_locks: dict[str, threading.RLock] = {}
#: keys being tuned right now, any device (a one-element list: read without a lock on the hot path)
_tuning = [0]
_locks_guard = threading.Lock()
#: ``on`` while this thread prepares candidates (their launches run nothing: nothing may be tuned)
_preparing = threading.local()
#: deferred keys (same keys as ``_decisions``) -> the quick candidate they run until they tune
_deferred: dict[tuple[Any, ...], Tunable] = {}


class _NotPrepared(Exception):
    """A prepared candidate reached a tuned op whose key has no decision yet: its preparation
    ends there (the rest of its kernels compile when it warms up)."""


def _device_id(client: Any) -> str:
    d = _device_ids.get(client)
    if d is None:
        d = _device_ids[client] = keys.device_id(client)
    return d


def device_lock(client: Any) -> threading.RLock:
    """The lock held while anything times this device (tuning, probes)."""
    dev = _device_id(client)
    lk = _locks.get(dev)
    if lk is None:
        with _locks_guard:
            lk = _locks.setdefault(dev, threading.RLock())
    return lk


def forget(tset: TunableSet | None = None) -> None:
    """Drop in-memory decisions (of one set, or all); the store is untouched."""
    if tset is None:
        _decisions.clear()
        _deferred.clear()
        return
    for table in (_decisions, _deferred):
        for k in [k for k in table if k[1] == tset.name]:
            table.pop(k, None)


# ------------------------------------------------------------------------------ entry points


def execute(client: Any, tset: TunableSet, *args: Any) -> Any:
    """Run the winning candidate of ``tset`` for ``args`` (tuning first when the key is new)."""
    lvl = keys.level()
    key = tset.key(lvl, *args)
    mk = (_device_id(client), tset.name, tset.checksum, lvl.name, key)
    w = _decisions.get(mk)
    if w is not None:
        if _tuning[0]:  # someone is timing candidates: wait, so this launch does not disturb them
            with device_lock(client):
                return _run_cached(tset, key, w, args)
        return _run_cached(tset, key, w, args)
    if tset.trivial is not None:
        w = _trivial(tset, key, mk, args)
        if w is not None:
            return _run_cached(tset, key, w, args, "trivial")
    q = _deferred.get(mk)
    if q is not None:
        if getattr(_preparing, "on", False) or not _may_tune_now(client):
            # still compiling (or preparing, or capturing): the quick candidate, as a decision runs
            return _run_cached(tset, key, q, args, "deferred")
        _deferred.pop(mk, None)
    elif getattr(_preparing, "on", False):
        raise _NotPrepared(tset.name)
    with device_lock(client), tracing.span("autotune", op=tset.name, key=tset.key_text(key)) as sp:
        w, origin, result = _decide(client, tset, lvl, key, mk, args, defer=q is None)
        sp.record(cached=origin not in ("tuned", "deferred"), origin=origin, winner=w.name)
        if origin == "deferred":
            return result
        return w.fn(*args)


def _trivial(tset: TunableSet, key: tuple[Any, ...], mk: tuple[Any, ...], args: tuple[Any, ...]) -> Tunable | None:
    """The set's trivial choice for a new key (None: the key is decided as usual), remembered
    for the process like a decision (not stored: the rule, not a measurement, decides it, so a
    changed rule takes effect at once). ``checks`` mode times every candidate instead."""
    from ..environment import config

    if config.get("autotune.checks"):
        return None
    name = tset.trivial(key, *args)
    if name is None:
        return None
    w = tset.by_name(name)
    if w is None or (w.valid is not None and not w.valid(*args)):
        return None
    _decisions[mk] = w
    return w


@contextmanager
def no_tuning() -> Iterator[None]:
    """While open on this thread, a tuned op whose key has no decision raises instead of tuning
    (the way the tuner's own preparation stops); known and trivial keys run their winner. For
    callers whose launches run nothing (``Fusion``'s drain preparation), where a timing would be
    meaningless."""
    was = getattr(_preparing, "on", False)
    _preparing.on = True
    try:
        yield
    finally:
        _preparing.on = was


def _may_tune_now(client: Any) -> bool:
    """A deferred key tunes when nothing compiles (its candidates are ready, and no compile
    disturbs the timing) and no capture is open (it would record the timed candidates)."""
    cap = sys.modules.get(_CAPTURE)
    if cap is not None and cap.active:
        return False
    return not client.compiling()


_CAPTURE = "ember.cube.runtime.capture"


def _run_cached(
    tset: TunableSet, key: tuple[Any, ...], w: Tunable, args: tuple[Any, ...], origin: str = "memory"
) -> Any:
    if tracing.active:
        with tracing.span("autotune", op=tset.name, key=tset.key_text(key), cached=True, origin=origin, winner=w.name):
            return w.fn(*args)
    return _call(w, args)


def _call(w: Tunable, args: tuple[Any, ...]) -> Any:
    """``w.fn(*args)``, through the capture open on this thread if any."""
    cap = sys.modules.get(_CAPTURE)  # not imported: nothing captures
    if cap is not None and cap.active:
        # a capture replays the winner's call (hand-written kernels launch raw, a vendor routine
        # computes on the host); an own candidate's launches are recorded as they are where they
        # can be (``capture.call``'s ``inline``), so a replay skips its Python
        return cap.call(w.fn, args, not w.vendor)
    return w.fn(*args)


def choose(client: Any, tset: TunableSet, *args: Any) -> Tunable:
    """The winning candidate for ``args`` (tuning with ``args`` when the key is new; tuning runs
    candidates, so outputs in ``args`` are overwritten)."""
    lvl = keys.level()
    key = tset.key(lvl, *args)
    mk = (_device_id(client), tset.name, tset.checksum, lvl.name, key)
    w = _decisions.get(mk)
    if w is None and tset.trivial is not None:
        w = _trivial(tset, key, mk, args)
    if w is None:
        if getattr(_preparing, "on", False):
            raise _NotPrepared(tset.name)
        _deferred.pop(mk, None)  # asked for the winner: tuned now, waiting for the compiles
        w = _decide(client, tset, lvl, key, mk, args)[0]
    return w


def _decide(
    client: Any,
    tset: TunableSet,
    lvl: keys.Level,
    key: tuple[Any, ...],
    mk: tuple[Any, ...],
    args: tuple[Any, ...],
    defer: bool = False,
) -> tuple[Tunable, str, Any]:
    """The winner for ``mk``, where it came from (``memory``, ``store``, ``tuned``, or
    ``deferred``: ``defer`` allowed a quick candidate while the others compile, see the module
    docstring) and, for ``deferred`` only, what the quick candidate returned (it ran here)."""
    from ..environment import config
    from . import decisions

    checks = bool(config.get("autotune.checks"))
    use_store = not checks and not config.get("autotune.disable_cache")
    dev = mk[0]
    with device_lock(client):
        w = _decisions.get(mk)
        if w is not None:
            return w, "memory", None
        if use_store:
            w = decisions.load(dev, tset, lvl, key, args)
            if w is not None:
                _decisions[mk] = w
                return w, "store", None
        if defer and not checks and tset.prepare and config.get("autotune.defer"):
            q = _deferrable(client, tset, key, args)
            if q is not None:
                # the quick candidate first: its kernels compile here, at this thread's priority,
                # not on the pool behind the others' (candidates share kernels: pack_panels)
                result = _call(q, args)
                _prepare(client, tset, key, args, None, wait=False, skip=q)
                if not _may_tune_now(client):
                    _deferred[mk] = q
                    return q, "deferred", result
        _tuning[0] += 1
        try:
            record = _tune(client, tset, lvl, key, args, checks)
        finally:
            _tuning[0] -= 1
        w = tset.by_name(record["winner"])
        assert w is not None
        decisions.save(dev, tset, key, record)
        _decisions[mk] = w
        return w, "tuned", None


def _deferrable(client: Any, tset: TunableSet, key: tuple[Any, ...], args: tuple[Any, ...]) -> Tunable | None:
    """The quick candidate of a new key (None: the key tunes now): the runtime must compile in
    the background (``client.compiling``) and the candidate be valid for ``args``."""
    if getattr(client, "compiling", None) is None or getattr(client, "preparing", None) is None:
        return None
    try:
        if tset.quick is not None:
            q = tset.by_name(tset.quick(key) if callable(tset.quick) else tset.quick)
            return q if q is not None and (q.valid is None or q.valid(*args)) else None
        usable = [t for t in tset.candidates if (t.valid is None or t.valid(*args)) and t.priority_for(key) >= 0]
        if not usable:
            return None
        first = min(t.group_for(key) for t in usable)
        usable = [t for t in usable if t.group_for(key) == first]
        vendors = [t for t in usable if t.vendor]
        return vendors[0] if vendors else max(usable, key=lambda t: t.priority_for(key))
    except Exception:  # a candidate's checks failing here: the tuning reports what is wrong
        return None


# ------------------------------------------------------------------------------ tuning


class _Result:
    __slots__ = ("t", "samples", "error", "skipped", "reps", "bound_ratio", "alive")

    def __init__(self, t: Tunable) -> None:
        self.t = t
        self.samples: list[float] = []
        self.error: str | None = None
        self.skipped: str | None = None
        self.reps = 1
        self.bound_ratio: float | None = None
        self.alive = False

    @property
    def median(self) -> float:
        return _median(self.samples) if self.samples else math.inf

    def as_json(self, group: int, priority: int | None) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.t.name, "group": group, "priority": priority}
        if self.t.vendor:
            d["vendor"] = True
        if self.samples:
            d["median_s"] = self.median
            d["min_s"] = min(self.samples)
            d["samples"] = len(self.samples)
            d["reps"] = self.reps
        if self.bound_ratio is not None:
            d["bound_ratio"] = round(self.bound_ratio, 4)
        if self.error:
            d["error"] = self.error
        if self.skipped:
            d["skipped"] = self.skipped
        return d


def _median(xs: list[float]) -> float:
    """statistics.median without importing statistics (fractions, decimal: ~2 ms of start)."""
    s = sorted(xs)
    h = len(s) // 2
    return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2


def _timed(client: Any, fn: Callable[..., Any], args: tuple[Any, ...], reps: int) -> float:
    if reps == 1:
        return float(client.profile(lambda: fn(*args))[1])

    def run() -> None:
        for _ in range(reps):
            fn(*args)

    return float(client.profile(run)[1]) / reps


def _tune(
    client: Any, tset: TunableSet, lvl: keys.Level, key: tuple[Any, ...], args: tuple[Any, ...], checks: bool
) -> dict[str, Any]:
    from ..environment import log
    from .decisions import load_average
    from .progress import Progress

    t_start = time.perf_counter()
    load_start = load_average()
    key_text = tset.key_text(key)
    logging_on = log.enabled("autotune")
    lg = log.logger("autotune") if logging_on else None
    threshold = None if checks else lvl.threshold
    # made before preparing, so a bar appears after the compiles when those took over DELAY_S
    progress = Progress(f"autotune {tset.name} {key_text}", len(tset.candidates))
    if not checks and tset.prepare:
        _prepare(client, tset, key, args, lg)
    bound = None
    if tset.bound is not None:
        from .probes import throughput

        bound = tset.bound(key, throughput(client), *args)

    results: list[_Result] = []
    priorities: dict[str, int | None] = {}
    reference: Any = None
    bound_suspect = False
    ended_by: str | None = None
    winner: _Result | None = None
    group_of = {t.name: t.group_for(key) for t in tset.candidates}
    try:
        for g in sorted(set(group_of.values())):
            # own candidates by priority, then vendors (always timed: see the module docstring)
            members = []
            for t in tset.candidates:
                if group_of[t.name] != g:
                    continue
                r = _Result(t)
                results.append(r)
                if t.valid is not None and not t.valid(*args):
                    r.skipped = "invalid"
                    priorities[t.name] = None
                    continue
                p = priorities[t.name] = t.priority_for(key)
                if p < 0:
                    r.skipped = "priority"
                    continue
                members.append((t.vendor, -p, len(members), r))
            # checks: the vendor runs first, its output is the reference the others must match
            members.sort(key=lambda m: ((not m[0]) if checks else m[0], m[1], m[2]))
            best = math.inf
            for _, _, _, r in members:
                t = r.t
                if ended_by is not None and not t.vendor:
                    r.skipped = "roofline"
                    continue
                progress.step(t.name)
                try:
                    if checks and tset.poison is not None:
                        tset.poison(*args)
                    result = t.fn(*args)  # warm-up: compiles or loads the kernels
                    client.sync()
                    if checks and tset.snapshot is not None:
                        got = tset.snapshot(result, *args)
                        if reference is None:
                            reference = got
                        elif tset.compare is not None:
                            bad = tset.compare(reference, got)
                            if bad:
                                raise _CheckFailed(bad)
                    first = _timed(client, t.fn, args, 1)
                except _CheckFailed as e:
                    r.error = f"checks: {e}"
                    warnings.warn(
                        f"autotune checks: candidate {t.name!r} of {tset.name} ({key_text}) differs from the "
                        f"reference: {e}",
                        AutotuneCheckWarning,
                        stacklevel=4,
                    )
                    if lg:
                        lg.warning("%s %s: candidate %s fails the checks: %s", tset.name, key_text, t.name, e)
                    continue
                except DeviceFaultError:  # the device is lost (docs/gpu_faults.md): no candidate can run
                    raise
                except Exception as e:  # a candidate that cannot compile or run is skipped, not fatal
                    r.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    if lg:
                        lg.warning("%s %s: candidate %s skipped: %s", tset.name, key_text, t.name, r.error)
                    continue
                r.reps = max(1, min(_MAX_REPS, int(_TARGET_SAMPLE_S / max(first, 1e-9))))
                if r.reps == 1:
                    r.samples.append(first)
                else:
                    r.samples.append(_timed(client, t.fn, args, r.reps))
                s = r.samples[0]
                if bound:
                    r.bound_ratio = bound / s
                    if r.bound_ratio > _IMPLAUSIBLE and not bound_suspect:
                        bound_suspect = True
                        threshold = None
                        from .probes import invalidate

                        invalidate(client)
                        if lg:
                            lg.warning(
                                "%s %s: %s ran at %.2f x the roofline bound: the throughput probes were low "
                                "(busy device?); no roofline ending, probes re-run at the next tuning",
                                tset.name,
                                key_text,
                                t.name,
                                r.bound_ratio,
                            )
                if not checks and s > _HOPELESS * best:
                    # one more sample first: a busy machine can stall any single call
                    r.samples.append(_timed(client, t.fn, args, r.reps))
                if not checks and min(r.samples) > _HOPELESS * best:
                    r.skipped = "eliminated"
                else:
                    r.alive = True
                    best = min(best, s)
                if (
                    threshold is not None
                    and r.bound_ratio is not None
                    and not t.vendor
                    and r.bound_ratio >= threshold
                    and ended_by is None
                ):
                    ended_by = t.name
                    if lg:
                        lg.debug(
                            "%s %s: %s is close enough to peak throughput (%.2f of the bound >= %.2f): search ends",
                            tset.name,
                            key_text,
                            t.name,
                            r.bound_ratio,
                            threshold,
                        )
            # the budget bounds the sampling rounds, not the compiles of the warm-ups before them
            _rounds(client, tset, [r for r in results if r.alive], lvl, args, time.perf_counter(), checks, progress)
            valid = [r for r in results if r.samples and not r.error]
            if valid:
                winner = min(valid, key=lambda r: r.median)
                vendors = [r for r in valid if r.t.vendor]
                if vendors and not winner.t.vendor:
                    v = min(vendors, key=lambda r: r.median)
                    if v.median <= _VENDOR_TIE * winner.median:
                        winner = v  # a tie: same speed, nothing to compile or load in later processes
                break
    finally:
        progress.close()

    if winner is None:
        detail = "; ".join(f"{r.t.name}: {r.error or r.skipped}" for r in results)
        raise AutotuneError(f"no candidate of {tset.name} ran for {key_text} ({detail})")
    own = [r for r in results if r.samples and not r.error and not r.t.vendor]
    own_best = min(own, key=lambda r: r.median) if own else None
    tuned_s = time.perf_counter() - t_start
    trust = _trust(results, winner, load_start)
    record = {
        "op": tset.name,
        "key": key_text,
        "level": lvl.name,
        "checks": checks,
        "checksum": tset.checksum,
        "winner": winner.t.name,
        "own_best": own_best.t.name if own_best else None,
        "bound": bound,
        "limit": None if checks else lvl.threshold,
        "bound_suspect": bound_suspect,
        "ended_by": ended_by,
        "tuned_s": tuned_s,
        **trust,
        "time": time.time(),
        "candidates": [r.as_json(group_of[r.t.name], priorities.get(r.t.name)) for r in results],
    }
    if lg:
        for r in results:
            if r.samples:
                lg.debug(
                    "%s %s: %s%s median %.4g s (min %.4g s, %d samples x %d calls)%s",
                    tset.name,
                    key_text,
                    r.t.name,
                    " (vendor)" if r.t.vendor else "",
                    r.median,
                    min(r.samples),
                    len(r.samples),
                    r.reps,
                    f", {r.bound_ratio:.2f} of the bound" if r.bound_ratio is not None else "",
                )
            else:
                lg.debug("%s %s: %s not timed (%s)", tset.name, key_text, r.t.name, r.error or r.skipped)
        lg.debug(
            "%s %s: bound %s, limit %s; winner %s, own best %s (tuned in %.0f ms)",
            tset.name,
            key_text,
            f"{bound:.4g} s" if bound else "-",
            threshold if threshold is not None else "-",
            winner.t.name,
            own_best.t.name if own_best else "-",
            tuned_s * 1e3,
        )
    return record


def _trust(results: list[_Result], winner: _Result, load_start: float | None) -> dict[str, Any]:
    """How far a decision can be trusted (``decisions``: provisional decisions): the load
    average while it tuned (the larger of its start and end), the usable cores, and the
    spread (slowest over fastest sample) of the deciding candidates: the winner and the best
    timed vendor candidate."""
    from .decisions import NOISY_SPREAD, load_average, usable_cores

    loads = [x for x in (load_start, load_average()) if x is not None]
    load = round(max(loads), 2) if loads else None
    cores = usable_cores()
    deciding = [winner]
    vendors = [r for r in results if r.t.vendor and r.samples and not r.error]
    if vendors:
        deciding.append(min(vendors, key=lambda r: r.median))
    spreads = [max(r.samples) / min(r.samples) for r in deciding if len(r.samples) >= 2 and min(r.samples) > 0]
    spread = round(max(spreads), 3) if spreads else None
    busy = load is not None and load > cores
    noisy = spread is not None and spread > NOISY_SPREAD
    return {"load": load, "cores": cores, "spread": spread, "provisional": busy or noisy}


class _CheckFailed(Exception):
    pass


def _prepare(
    client: Any,
    tset: TunableSet,
    key: tuple[Any, ...],
    args: tuple[Any, ...],
    lg: Any,
    wait: bool = True,
    skip: Tunable | None = None,
) -> None:
    """Start the compiles of the own candidates of the first group that will run (and of the
    probes' kernel when the probes will run) together, and wait for them unless not ``wait``
    (module docstring); ``skip``: a candidate that already ran (its kernels are compiled)."""
    preparing = getattr(client, "preparing", None)
    if preparing is None:
        return
    runnable: list[tuple[int, Tunable]] = []
    for t in tset.candidates:
        try:
            if (t.valid is None or t.valid(*args)) and t.priority_for(key) >= 0:
                runnable.append((t.group_for(key), t))
        except Exception:  # the tuning loop reports what is wrong with the candidate
            continue
    if not runnable:
        return
    first = min(g for g, _ in runnable)
    own = [t for g, t in runnable if g == first and not t.vendor and t is not skip]  # vendors compile nothing
    own.sort(key=lambda t: t.prepare_order)
    t0 = time.perf_counter()
    if wait:
        # the caller waits for these compiles: at its own priority where the runtime has the
        # choice (the CPU's background pool is niced, and a loaded machine starves it)
        preparing = getattr(getattr(client, "server", None), "preparing_now", None) or preparing
    with preparing():
        _preparing.on = True
        try:
            if tset.bound is not None:
                from .probes import prepare as prepare_probes

                prepare_probes(client)
            for t in own:
                try:
                    t.fn(*args)
                except _NotPrepared:
                    pass
                except Exception as e:  # its warm-up raises it again, and the candidate is skipped there
                    if lg:
                        lg.debug("%s: preparing %s failed: %s: %s", tset.name, t.name, type(e).__name__, e)
        finally:
            _preparing.on = False
    if not wait:
        return
    client.wait_prepared()
    if lg:
        lg.debug(
            "%s %s: prepared %s in %.0f ms",
            tset.name,
            tset.key_text(key),
            ", ".join(t.name for t in own),
            (time.perf_counter() - t0) * 1e3,
        )


def _rounds(
    client: Any,
    tset: TunableSet,
    alive: list[_Result],
    lvl: keys.Level,
    args: tuple[Any, ...],
    t_start: float,
    checks: bool,
    progress: Any,
) -> None:
    """Round-robin samples over ``alive`` with early elimination (see the module docstring)."""
    for _ in range(1, lvl.samples):
        if len(alive) <= 1 and not checks:
            return  # one survivor: more samples would not change the decision
        if time.perf_counter() - t_start > lvl.budget_s:
            return
        progress.step(None)
        for r in alive:
            r.samples.append(_timed(client, r.t.fn, args, r.reps))
        if len(alive[0].samples) >= 2 and not checks:
            best = min(r.median for r in alive)
            keep = [r for r in alive if min(r.samples) <= lvl.eliminate * best]
            for r in alive:
                if r not in keep:
                    r.skipped = "eliminated"
            alive = keep
