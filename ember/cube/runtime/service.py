"""Device service channels: where a device's work runs.

The seed's stack runs device work on named threads, ``DSU-<type>-<index>`` upstream (work
ahead of dispatch: fusion) and ``DSD-<type>-<index>`` downstream (compile and launch). A
``ServiceThread`` is such a thread; an ``InlineChannel`` runs the same work on the calling
thread. Either way errors reach the caller as the original exception (never a bare channel
error), and spans opened by the work carry ``stage`` so a trace shows which stage ran.

Measured on the CPU runtime (bench/bench_cube_kernels.py): a round trip through a thread
costs tens of microseconds (a queue hand-off and a wake-up each way, under the GIL), more
than the whole launch budget, while a launch on the caller's thread costs a few. The CPU
runtime therefore launches inline by default (``EMBER_CPU_CHANNEL=thread`` selects the
thread, e.g. to overlap Python work with long kernels).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Channel", "InlineChannel", "ServiceThread"]


class Channel:
    name: str = ""
    kind: str = ""

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class InlineChannel(Channel):
    """The stage's work runs on the calling thread, in call order."""

    kind = "inline"

    def __init__(self, name: str) -> None:
        self.name = name

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)

    def sync(self) -> None:
        return None


class _Job:
    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], wait: bool) -> None:
        self.fn = fn
        self.args = args
        self.done: threading.Lock | None = None
        if wait:
            self.done = threading.Lock()
            self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None


class ServiceThread(Channel):
    """A named daemon thread running jobs in submission order.

    ``call`` waits and returns the result (re-raising the job's exception on the caller);
    ``submit`` returns at once, and the first error of submitted work is raised by the next
    ``call`` or ``sync`` on the caller's thread.
    """

    kind = "thread"

    def __init__(self, name: str) -> None:
        self.name = name
        self._q: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending_error: BaseException | None = None

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                t = threading.Thread(target=self._loop, name=self.name, daemon=True)
                t.start()
                self._thread = t

    def _loop(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            try:
                job.result = job.fn(*job.args)
            except BaseException as e:  # carried to the caller
                job.error = e
                if job.done is None and self._pending_error is None:
                    self._pending_error = e
            if job.done is not None:
                job.done.release()

    def _raise_pending(self) -> None:
        e = self._pending_error
        if e is not None:
            self._pending_error = None
            raise e

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if threading.current_thread() is self._thread:
            return fn(*args)
        if self._thread is None:
            self._start()
        job = _Job(fn, args, True)
        self._q.put(job)
        job.done.acquire()  # type: ignore[union-attr]
        self._raise_pending()
        if job.error is not None:
            raise job.error
        return job.result

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if threading.current_thread() is self._thread:
            fn(*args)
            return
        if self._thread is None:
            self._start()
        self._raise_pending()
        self._q.put(_Job(fn, args, False))

    def sync(self) -> None:
        if self._thread is not None and threading.current_thread() is not self._thread:
            self.call(lambda: None)
        self._raise_pending()

    def close(self) -> None:
        if self._thread is not None:
            self._q.put(None)
