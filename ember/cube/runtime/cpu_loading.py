"""Loading compiled CPU kernels and the OpenMP runtime they link.

A verified shared object is written to a fresh private file and ``dlopen``-ed from there
(docs/security.md); the first load binds the OpenMP runtime, whose idle workers sleep; each
launch then sets the calling thread's OpenMP thread count from the work it touches.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["load_shared_object", "WORK_PER_THREAD"]

_tmp_dir: tuple[Path, int] | None = None
_load_count = 0
_load_lock = threading.Lock()


def _private_dir() -> Path:
    """This process's private 0700 directory of loaded shared objects (removed at exit; a
    killed process's is removed by ``store.clean_stale`` of a later one)."""
    global _tmp_dir
    if _tmp_dir is None or _tmp_dir[1] != os.getpid():
        from ...environment.store import temp_name

        pid = os.getpid()
        d = Path(tempfile.mkdtemp(prefix=temp_name("load")))

        def cleanup() -> None:
            if os.getpid() == pid:  # a forked child must not remove its parent's directory
                shutil.rmtree(d, ignore_errors=True)

        atexit.register(cleanup)
        _tmp_dir = (d, pid)
    return _tmp_dir[0]


def load_shared_object(data: bytes, entry: str) -> tuple[Any, Path]:
    """``dlopen`` the shared object ``data``: written to a new 0600 file (``O_EXCL``, a name never
    used before in this process, so the loader never returns an older library of that name) in
    the private directory, then loaded from there. Returns (library, file)."""
    global _load_count
    with _load_lock:
        _load_count += 1
        n = _load_count
    path = _private_dir() / f"{entry}-{n}.so"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return _load_library(path), path


# ---------------------------------------------------------------- threads per launch
#: estimated work (bytes touched x the kernel's weight) that one more thread must have before a
#: launch uses it: ~1 MiB of streaming is ~100 us on one core, against a parallel region's
#: fork/join of ~5-30 us with sleeping workers, and a stall of a scheduler time slice (ms) when a
#: worker is descheduled on a shared machine (cores are always shared in training: data loader
#: workers, other jobs). Below it a launch runs on the calling thread alone.
WORK_PER_THREAD = 1 << 20


def _work_weight(kernel: str) -> int:
    """Work per byte touched, relative to a streaming kernel: a matmul reads each element many
    times (its flops grow with the inner dimension), so its bytes undercount its work."""
    return 16 if "matmul" in kernel else 1


class _OpenMP:
    """The OpenMP runtime the kernels link (found through the first kernel library: ``dlsym``
    searches its dependencies, so gcc's libgomp and clang's libomp alike), and the thread
    count of the calling thread (OpenMP keeps it per thread).

    ``shared``: the runtime was in the process before ember's first kernel load (torch links
    its own libgomp, soname ``libgomp.so.1``; the loader then binds ember's kernels to that
    copy). Its users change the calling thread's count behind ember's back (every torch op
    sets it back to ``torch.get_num_threads()``), so ember then sets the count at every launch
    rather than only when it differs from the one it set last: a stale cached 1 made every
    small launch after a torch op fork a team, and on a loaded machine wait a scheduler time
    slice for its descheduled worker at the closing barrier (issue 20)."""

    def __init__(self) -> None:
        self.set: Any = None  # omp_set_num_threads, once a kernel library is loaded
        self.get: Any = None  # omp_get_max_threads
        self.max = 1  # the threads the environment allows (OMP_NUM_THREADS, affinity)
        self.local = threading.local()
        self.lock = threading.Lock()
        #: None until the first load looks; then whether the runtime was already loaded
        self.shared: bool | None = None

    def bind(self, lib: Any) -> None:
        if self.set is not None:
            return
        with self.lock:
            if self.set is not None:
                return
            try:
                get, setn = lib.omp_get_max_threads, lib.omp_set_num_threads
            except AttributeError:  # a toolchain without OpenMP: nothing to choose
                return
            get.restype = ctypes.c_int
            setn.restype = None
            self.max = max(1, int(get()))
            if self.max > 1:
                self.get = get
                self.set = setn

    def threads_for(self, fn: Any, keep: Any) -> int:
        """Set the calling thread's OpenMP thread count for a launch of ``fn`` on ``keep``
        (CubeTensors, or the Buffers of a replay): one thread per WORK_PER_THREAD of work, at
        most ``max``. The kernels' parallel regions fork only when more than one is allowed
        (``omp_get_max_threads() > 1`` in their ``if`` clause), so a small launch forks none.
        Returns what ``use`` returns: the count to put back after the launch, or 0."""
        work = 0
        for t in keep:
            b = getattr(t, "buffer", t)
            work += b.nbytes
        return self.use(self.count(work * getattr(fn, "em_weight", 1)))

    def count(self, work: int) -> int:
        """Threads for ``work`` (bytes x weight): one per WORK_PER_THREAD, 1 to ``max``."""
        n = work // WORK_PER_THREAD
        return 1 if n < 1 else (self.max if n >= self.max else n)

    def use(self, n: int) -> int:
        """Make ``n`` the calling thread's OpenMP thread count. Returns the count to put back
        with ``set`` once the launch returned, 0 when there is none: in a shared runtime the
        count is also its other user's (torch's ``parallel_for`` reads it for its own teams), so
        a launch changes it only for its own duration and puts the other's count back."""
        if self.shared:  # others set this thread's count too: the cached value may be stale
            prev = self.get()
            if prev == n:
                return 0
            self.set(n)
            return prev
        loc = self.local
        if getattr(loc, "n", 0) != n:
            self.set(n)
            loc.n = n
        return 0


_openmp = _OpenMP()


#: file names of OpenMP runtimes (gcc, LLVM, Intel)
_RUNTIMES = ("libgomp", "libomp", "libiomp")


def _runtime_loaded() -> bool:
    """Whether an OpenMP runtime is mapped into this process (read before ember's first kernel
    load: one that is there already belongs to another library, e.g. torch). True where the
    process's maps cannot be read: then the count is set at every launch, which is always
    correct (a few hundred ns per launch)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return True
    return any(r in maps for r in _RUNTIMES)


def _load_library(path: Path) -> Any:
    """``ctypes.CDLL`` of a kernel library; the first load also loads the OpenMP runtime, which
    reads its environment then: unless the user chose a wait policy, its idle workers sleep
    (``OMP_WAIT_POLICY=passive``) instead of spinning, so a worker waiting for the next launch
    takes no core from the Python thread, a data loader or another process (spinning workers on
    a shared machine turn a tiny launch into a wait for a scheduler time slice).
    The variable is set only around the load, so libraries loaded later (torch's own OpenMP)
    see the user's environment."""
    if _openmp.shared is None:
        _openmp.shared = _runtime_loaded()
    keys = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
    if _openmp.set is not None or any(k in os.environ for k in keys):
        return ctypes.CDLL(str(path))
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        return ctypes.CDLL(str(path))
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)
