"""The preparing state servers share (CPU and CUDA): one thread at a time may be inside
``preparing()``; while it is, the server hands that thread pending kernels whose compiles run
on a pool, and their launches run nothing. The tuner runs its candidates once like this, then
``wait_prepared()``, so their compiles overlap instead of running one after another.

Launch plans are not kept for pending kernels (``pending`` on the compiled kernel); the values
a prepared candidate computes are garbage, so a candidate whose launches depend on values
computed by its earlier kernels must not be prepared."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Preparing"]


class Preparing:
    """Mixin: needs ``self._lock`` (a lock) and ``self._preparer`` (None at start)."""

    _preparer: int | None
    _lock: threading.RLock

    @contextmanager
    def preparing(self) -> Iterator[None]:
        """Launches *from this thread* run nothing while the block runs, and kernels not yet
        compiled are rendered here and compiled on the pool (other threads are unaffected)."""
        me = threading.get_ident()
        if self._preparer == me:
            yield
            return
        with self._lock:
            if self._preparer is not None:
                raise RuntimeError("another thread is preparing kernels on this device")
            self._preparer = me
        try:
            yield
        finally:
            self._preparer = None

    def preparing_here(self) -> bool:
        """Whether the calling thread is inside ``preparing()`` (its launches run nothing)."""
        return self._preparer is not None and self._preparer == threading.get_ident()
