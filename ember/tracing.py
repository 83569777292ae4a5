"""Spans: named, timed regions with fields, nested per thread, collected across threads.

``with ember.tracing.capture() as spans:`` collects every span any thread closes while the
block runs. Instrumented code writes::

    if tracing.active:                      # the only cost when nothing captures
        with tracing.span("launch", kernel=name):
            ...

or uses ``tracing.span(...)`` unconditionally where a few hundred ns do not matter
(it returns a shared no-op object when nothing captures). The inline test is deliberate on the
data paths too: routing ``from_data`` / ``into_data`` through one helper call per layer made a
small Flex read half again as slow (one extra frame for each of the four layers it crosses).

Span names used across ember: ``from_data``, ``into_data``, ``drain``, ``fuse``, ``launch``
(field ``kernel``), ``compile`` (``kernel``, ``language``, ``cached``), ``autotune``
(``op``, ``key``), ``probe``, ``reserve``. Each layer opens its own span, so the parent chain
shows the layers a call crossed (field ``layer`` says which).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["SpanRecord", "capture", "span", "profile", "active", "current_parents"]

#: True while at least one capture is open (read directly by hot paths)
active = False

_lock = threading.Lock()
_collectors: list[list[SpanRecord]] = []
_local = threading.local()
_t0 = time.perf_counter_ns()


class SpanRecord:
    """One finished span: ``start`` in seconds since ember was imported, ``duration`` in
    seconds. (A plain class: ``dataclasses`` would add milliseconds to ``import ember``.)"""

    __slots__ = ("name", "thread", "parents", "fields", "start", "duration", "tid")

    def __init__(self, name: str, thread: str, parents: tuple[str, ...], fields: dict[str, Any] | None = None,
                 start: float = 0.0, duration: float = 0.0, tid: int = 0) -> None:
        self.name = name
        self.thread = thread
        self.parents = parents
        self.fields = {} if fields is None else fields
        self.start = start
        self.duration = duration
        self.tid = tid

    def __eq__(self, other: object) -> bool:
        if type(other) is not SpanRecord:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in SpanRecord.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        chain = " > ".join(self.parents + (self.name,))
        extra = " ".join(f"{k}={v}" for k, v in self.fields.items())
        return f"[{self.thread}] {chain} {extra} ({self.duration * 1e6:.1f} us)"


def _stack() -> list[str]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def current_parents() -> tuple[str, ...]:
    """The names of the spans open on this thread, outermost first."""
    return tuple(_stack())


class _Span:
    __slots__ = ("name", "fields", "t", "parents")

    def __init__(self, name: str, fields: dict[str, Any]) -> None:
        self.name = name
        self.fields = fields

    def __enter__(self) -> _Span:
        st = _stack()
        self.parents = tuple(st)
        st.append(self.name)
        self.t = time.perf_counter_ns()
        return self

    def record(self, **fields: Any) -> None:
        """Add fields known only inside the span (e.g. ``cached``)."""
        self.fields.update(fields)

    def __exit__(self, *exc: Any) -> None:
        end = time.perf_counter_ns()
        _stack().pop()
        th = threading.current_thread()
        rec = SpanRecord(self.name, th.name, self.parents, self.fields,
                         (self.t - _t0) / 1e9, (end - self.t) / 1e9, th.ident or 0)
        with _lock:
            for c in _collectors:
                c.append(rec)


class _NoSpan:
    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def record(self, **fields: Any) -> None:
        return None


_NOSPAN = _NoSpan()


def span(name: str, **fields: Any) -> Any:
    """A context manager recording one span (a no-op when nothing captures)."""
    if not active:
        return _NOSPAN
    return _Span(name, fields)


@contextmanager
def capture() -> Iterator[list[SpanRecord]]:
    """Collect the spans closed by any thread while the block runs, in closing order."""
    global active
    spans: list[SpanRecord] = []
    with _lock:
        _collectors.append(spans)
        active = True
    try:
        yield spans
    finally:
        with _lock:
            _collectors.remove(spans)
            active = bool(_collectors)


@contextmanager
def profile(path: str | os.PathLike[str] = "ember-trace.json") -> Iterator[list[SpanRecord]]:
    """Capture spans and write them as a Chrome trace (open it in Perfetto)."""
    with capture() as spans:
        yield spans
    events = []
    pid = os.getpid()
    for s in spans:
        events.append({
            "name": s.name, "ph": "X", "pid": pid, "tid": s.tid, "ts": s.start * 1e6,
            "dur": s.duration * 1e6, "cat": s.fields.get("layer", "ember"),
            "args": {k: str(v) for k, v in s.fields.items()} | {"thread": s.thread},
        })
    names = {s.tid: s.thread for s in spans}
    for tid, tname in names.items():
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": tname}})
    with open(path, "w") as f:
        import json

        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
