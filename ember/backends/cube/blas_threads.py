"""The calling thread's BLAS thread count for the vendor matmul (numpy's OpenBLAS or MKL).

numpy's BLAS splits every product above a tiny size (OpenBLAS: 2^18 multiply-adds) over all
cores, and its workers wait for work by spinning and yielding. On a machine whose cores are
shared (always, in training: data loader workers, other jobs) a worker that is descheduled
turns a product of a few hundred microseconds into a wait for a scheduler time slice: on the
dev box (2 cores, load 8) a 512² float32 product took 52 ms on two BLAS threads and 2.7 ms on
one (best of 20), and the 1024 x 64 x 256 product of the GPT step 12 ms against 0.36 ms. The
CPU kernels follow the same rule through ``cpu_loading.WORK_PER_THREAD``.

``serial_matmul(work)`` says whether a product of ``work`` multiply-adds runs on one thread;
``one_thread()`` / ``restore(token)`` set the count to 1 and back through the library's setter
that returns the previous count (``openblas_set_num_threads_local``, OpenBLAS >= 0.3.27;
``mkl_set_num_threads_local``). Despite its name OpenBLAS's setter changes the process-wide
count (measured: a count set on one thread is what another thread reads), so the setting is
counted: the first of overlapping calls (ember matmuls on several threads) saves the count and
the last one restores it, and numpy elsewhere in the process (Flex, user code) runs on one
thread only while an ember product does. A BLAS without such a setter is left alone.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

__all__ = ["SERIAL_MATMUL_WORK", "serial_matmul", "one_thread", "restore"]

#: products below this many multiply-adds run on one BLAS thread: 2^25 is ~0.4 ms on one core
#: of the dev box at numpy's ~90 GFLOP/s, where a second thread saves at most 0.2 ms on a
#: quiet machine and costs up to a time slice (ms) on a loaded one. The GPT-small step's
#: products (at most 1024 x 256 x 64 = 2^24) are below it; the 784-512-512 MLP's first two
#: layers (batch 256: 2^26.6, 2^26) are above it.
SERIAL_MATMUL_WORK = 1 << 25

#: the thread-local setters, each returning the calling thread's previous setting
_SETTERS = (("openblas", "openblas_set_num_threads_local"), ("mkl", "mkl_set_num_threads_local"))

_lock = threading.Lock()
_setter: list[Any] = []  # [] until looked up; then [fn] or [None]


def _find() -> Any:
    """The loaded BLAS's thread-local setter (found once, through the process's mapped files:
    numpy's wheels bundle their BLAS under a private name), or None."""
    with _lock:
        if _setter:
            return _setter[0]
        fn = None
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                paths = {ln.split()[-1] for ln in f if "/" in ln}
        except OSError:
            paths = set()
        for tag, name in _SETTERS:
            for p in sorted(x for x in paths if tag in x.rsplit("/", 1)[-1].lower()):
                try:
                    cand = getattr(ctypes.CDLL(p), name)
                except (OSError, AttributeError):
                    continue
                cand.restype = ctypes.c_int
                cand.argtypes = [ctypes.c_int]
                fn = cand
                break
            if fn is not None:
                break
        _setter.append(fn)
        return fn


def serial_matmul(work: int) -> bool:
    """Whether a product of ``work`` multiply-adds should run on one BLAS thread."""
    return work < SERIAL_MATMUL_WORK


#: overlapping ``one_thread`` calls and the count the first of them found (under ``_lock``)
_held = [0, 0]


def one_thread() -> bool | None:
    """Set the BLAS thread count to 1; returns what ``restore`` needs (None: the BLAS has no
    such setter, nothing changed)."""
    fn = _setter[0] if _setter else _find()
    if fn is None:
        return None
    with _lock:
        if _held[0] == 0:
            _held[1] = int(fn(1))
        _held[0] += 1
    return True


def restore(token: bool | None) -> None:
    """Undo ``one_thread`` (``token``: its result); the last of overlapping calls puts the
    saved count back."""
    if token is None:
        return
    with _lock:
        _held[0] -= 1
        if _held[0] == 0:
            _setter[0](_held[1])
