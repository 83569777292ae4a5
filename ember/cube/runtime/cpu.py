"""The CPU runtime's server: C source -> shared object -> ctypes function, cached twice.

The kernel path, as in the seed: look the ``KernelId`` up in the in-process pipeline table;
on a miss expand the kernel to IR, render C, then either load the shared object the store
already holds for that exact source and toolchain, or run ``$CC`` and put the result in the
store. Artifacts live under namespace ``compile/cpu/<toolchain fingerprint>`` keyed by
sha256(source + compiler path + ``cc --version`` + flags + ember version); the store checks
each file's content hash (and the row's MAC) before handing it out.

Loading (docs/security.md): the bytes the store verified are written to a fresh 0600 file
(``O_EXCL``) in this process's private 0700 directory and that file is ``dlopen``-ed, so what
is loaded is exactly what was checked, whatever happens to the cache file meanwhile.

A warm process skips the expansion and rendering of ember's own kernels (tens of milliseconds
each): ``cpu_index`` maps their KernelId to the artifact.

Prepared compiles (a new drain's kernels, a key's candidates) queue for the compile pool; a pool
thread takes its share of the queue and, when that is more than one kernel, compiles them as one
bundle (``cpu_bundle``: one translation unit, one ``cc``, one ``dlopen``), which costs about
half the compiler time of one run per kernel. The artifacts stay findable per kernel.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import tracing
from .cpu_loading import _openmp, _work_weight, load_shared_object
from .cpu_toolchain import CToolchain, ToolchainError
from .preparing import Preparing
from .service import Channel, InlineChannel, ServiceThread

# A warm start loads stored kernels and needs none of these at import: the C compiler (and the
# IR it imports: ~8 ms of dataclass definitions), subprocess and hashlib load at first use.
if TYPE_CHECKING:
    from ..compiler.base import CompiledSource
    from ..compiler.c import CCompiler
    from ..ir import KernelIr
    from ..kernel_id import KernelId

__all__ = ["CToolchain", "CpuServer", "CompiledKernel", "ToolchainError"]

class CompiledKernel:
    """A kernel ready to launch: the ctypes function and how to fill its arguments.

    ``pending``: a kernel handed out while preparing (see ``CpuServer.preparing``): its source
    is rendered (so a launch plan can be built) but the C compiler still runs; ``fn`` does
    nothing, and launch plans built on it are not kept."""

    __slots__ = ("kernel_id", "entry", "fn", "source", "lib", "origin", "compile_seconds", "plans", "pending",
                 "buf_type")

    def __init__(
        self,
        kernel_id: KernelId,
        entry: str,
        fn: Any,
        source: CompiledSource,
        lib: Any = None,
        origin: str = "",
        compile_seconds: float = 0.0,
        pending: bool = False,
    ) -> None:
        self.kernel_id = kernel_id
        self.entry = entry
        self.fn = fn
        self.source = source
        self.lib = lib
        self.origin = origin
        self.compile_seconds = compile_seconds
        self.plans: dict[Any, Any] = {}
        self.pending = pending
        #: the ``void **`` array type of its launches' buffers (a kernel's array parameters are
        #: fixed, so one type serves every launch; made at the first)
        self.buf_type: Any = None

    def __repr__(self) -> str:
        return f"CompiledKernel({self.entry}{', pending' if self.pending else ''})"


def _nothing(*args: Any) -> None:
    """The launch function of a pending kernel (preparing runs nothing)."""


class _Bundle:
    """A bundle's shared object as this process loaded it (from bytes verified then)."""

    __slots__ = ("lib", "entries", "path")

    def __init__(self, lib: Any, entries: frozenset[str], path: Path) -> None:
        self.lib = lib
        self.entries = entries
        self.path = path


class _Job:
    """One compile in flight: waiters block on ``done``; ``result`` or ``error`` when set."""

    __slots__ = ("kid", "src", "t0", "fields", "done", "result", "error", "indexed")

    def __init__(self, kid: KernelId, src: CompiledSource, t0: float, fields: dict[str, Any]) -> None:
        self.kid = kid
        self.src = src
        self.t0 = t0
        self.fields = fields  # the compile span's fields (the pool thread adds the compiler's time)
        self.done = threading.Event()
        self.result: CompiledKernel | None = None
        self.error: BaseException | None = None
        self.indexed = False  # the kernel came through the KernelId index (nothing to record)

    def wait(self) -> CompiledKernel:
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class CpuServer(Preparing):
    """Compiles and runs kernels for one CPU device; owns the in-process pipeline table.

    Compiles run outside the table lock, so threads compile different kernels at once; a
    kernel requested while its compile is in flight waits for that compile (one ``cc`` per
    KernelId). ``preparing()`` lets the tuner start the compiles of all its candidates on a
    pool of threads (one ``cc`` per core) before it times the first one."""

    #: a replayed launch passes its captured info block to the C entry as it is then, so a
    #: parametric replay may rewrite the block in place (``launch.plan._Plan.rereads_info``)
    replays_reread_info = True

    def __init__(self, index: int = 0, channel: str | None = None, checked: bool | None = None) -> None:
        from ...environment import config

        self.index = index
        self.toolchain = CToolchain()
        if checked is None:  # EMBER_CUBE_CHECKED=1: bounds-checked kernels, for debugging
            checked = bool(config.get("cube.checked"))
        self._checked = checked
        self._compiler: CCompiler | None = None
        self.pipelines: dict[KernelId, CompiledKernel] = {}
        #: compiles in flight by KernelId (guarded by ``_lock``, like ``pipelines`` writes)
        self._jobs: dict[KernelId, _Job] = {}
        self._lock = threading.RLock()
        #: kernels are expanded and rendered one at a time (Python work: the GIL serialises it anyway)
        self._render_lock = threading.Lock()
        self._pool: tuple[Any, int] | None = None  # (ThreadPoolExecutor, pid that made it)
        self._urgent_pool: tuple[Any, int] | None = None  # the same, at the caller's priority
        #: ``preparing_now`` is open: prepared compiles go to the pool at the caller's priority
        self._urgent = False
        self._pid = os.getpid()
        #: ident of the thread inside ``preparing()`` (its launches run nothing), else None
        self._preparer: int | None = None
        self.stage = f"DSD-cpu-{index}"
        channel = channel or config.get("cpu.channel")
        if channel not in ("inline", "thread"):
            raise ValueError(f"cpu.channel (EMBER_CPU_CHANNEL) must be inline or thread, got {channel!r}")
        self.downstream: Channel = (
            ServiceThread(self.stage) if channel == "thread" else InlineChannel(self.stage)
        )
        self._upstream: ServiceThread | None = None
        #: prepared jobs waiting for a pool thread, by urgency (guarded by ``_lock``)
        self._queues: dict[bool, list[_Job]] = {False: [], True: []}
        #: several queued kernels compile as one bundle (never in checked mode: its per-object
        #: out-of-range record is one per kernel)
        self._bundling = bool(config.get("cpu.bundle")) and not checked
        #: bundles loaded in this process, by bundle key
        self._bundles: dict[str, _Bundle] = {}
        #: kernels compiled (one per kernel, bundled or not) and C compiler runs that made them
        self.compiles = 0
        self.cc_runs = 0
        self.store_loads = 0

    @property
    def compiler(self) -> CCompiler:
        """The C compiler (created at the first kernel this process renders)."""
        c = self._compiler
        if c is None:
            from ..compiler.c import CCompiler

            with self._lock:
                c = self._compiler
                if c is None:
                    c = self._compiler = CCompiler(checked=self._checked)
        return c

    @property
    def upstream(self) -> ServiceThread:
        """``DSU-cpu-<i>``: work ahead of dispatch (fusion drains run here)."""
        if self._upstream is None:
            self._upstream = ServiceThread(f"DSU-cpu-{self.index}")
        return self._upstream

    def pipeline(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> CompiledKernel:
        p = self.pipelines.get(kid)
        if p is not None:
            return p
        if self._preparer is not None and self._preparer == threading.get_ident():
            return self._prepare(kid, make_ir)
        return self.downstream.call(self._build, kid, make_ir)

    # ---------------------------------------------------------------- preparing
    def wait_prepared(self) -> None:
        """Wait until every compile in flight has finished (its errors stay for the launch
        that needs the kernel: it raises them on its own thread)."""
        while True:
            with self._lock:
                jobs = list(self._jobs.values())
            if not jobs:
                return
            for j in jobs:
                j.done.wait()

    def compiling(self) -> bool:
        """Whether any compile is in flight (a read of the table's size: no lock, no wait)."""
        return bool(self._jobs)

    @contextmanager
    def preparing_now(self) -> Iterator[None]:
        """``preparing()`` for kernels the caller waits for next (a new drain's, through the
        drain capturer; the candidates of a key the tuner is about to time): their compiles
        run at the caller's priority. Those of ``preparing()`` alone run niced: background
        work (a deferred key's candidates) behind the kernels of the moment, which a loaded
        machine would otherwise starve the caller of."""
        with self.preparing():
            self._urgent = True
            try:
                yield
            finally:
                self._urgent = False

    def _compile_pool(self, urgent: bool = False) -> Any:
        """The compile threads, one per core; ``urgent``: the pool at the caller's priority, else
        the niced one (each made again after ``fork``: a child inherits a pool, not its threads)."""
        pool = self._urgent_pool if urgent else self._pool
        if pool is None or pool[1] != os.getpid():
            with self._lock:
                pool = self._urgent_pool if urgent else self._pool
                if pool is None or pool[1] != os.getpid():
                    from concurrent.futures import ThreadPoolExecutor

                    pool = (
                        ThreadPoolExecutor(
                            _compile_workers(),
                            thread_name_prefix=f"{self.stage}-cc" + ("u" if urgent else ""),
                            initializer=None if urgent else _background,
                        ),
                        os.getpid(),
                    )
                    if urgent:
                        self._urgent_pool = pool
                    else:
                        self._pool = pool
        return pool[0]

    def _prepare(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> CompiledKernel:
        """Render ``kid`` here; load it from the store at once, or start its compile on the pool
        and hand out a pending kernel (its rendered source is what a launch plan needs)."""
        job, owner = self._claim(kid, make_ir, deferred=True)
        if job.result is not None:  # loaded from the store (or compiled by another thread meanwhile)
            return job.result
        if owner:
            urgent = bool(self._urgent)
            with self._lock:
                self._queues[urgent].append(job)
            self._compile_pool(urgent).submit(self._run_queued, urgent)
        return CompiledKernel(kid, job.src.entry, _nothing, job.src, pending=True)

    def _run_queued(self, urgent: bool) -> None:
        """A pool thread's turn: compile its share of the queue (the oldest jobs, about an equal
        part for each pool thread, so the kernels needed first are ready first and no core
        idles while another compiles everything); nothing when the queue is empty (one turn is
        submitted per job, and a turn may take several)."""
        from . import cpu_bundle

        with self._lock:
            queue = self._queues[urgent]
            if not queue:
                return
            n = 1
            if self._bundling:
                n = min(len(queue), cpu_bundle.MAX_MEMBERS, -(-len(queue) // _compile_workers()))
            batch = queue[:n]
            del queue[:n]
        if len(batch) == 1:
            self._finish(batch[0])
            return
        try:
            self._finish_bundle(batch)
        except BaseException as e:  # noqa: BLE001 - a job left unfinished would block its waiters forever
            for j in batch:
                if not j.done.is_set():
                    self._failed(j, e)

    # ---------------------------------------------------------------- building
    def _build(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> CompiledKernel:
        return self._claim(kid, make_ir, deferred=False)[0].wait()

    def _claim(self, kid: KernelId, make_ir: Callable[[], KernelIr], deferred: bool) -> tuple[_Job, bool]:
        """The job that makes ``kid`` ready: one in flight (False: another thread owns it), or a
        new one (True) whose source is rendered and then loaded from the store or, unless
        ``deferred``, compiled here. The ``compile`` span opens on the requesting thread: for a
        deferred compile it covers the rendering and the store lookup, and the pool thread
        adds the compiler's seconds as ``cc_s``."""
        if self._pid != os.getpid():  # a forked child: the parent's compiles in flight never finish here
            with self._lock:
                self._jobs.clear()
                self._queues = {False: [], True: []}
                self._preparer = None
                self._pid = os.getpid()
        with self._lock:
            p = self.pipelines.get(kid)
            if p is not None:
                return _done_job(p), False
            job = self._jobs.get(kid)
        if job is not None:
            return job, False
        entry = kid.entry()
        t0 = time.perf_counter()
        fields: dict[str, Any] = {"kernel": entry, "language": self.compiler.language, "stage": self.stage}
        if deferred:
            fields["deferred"] = True
        with tracing.span("compile", **fields) as sp:
            found = self._indexed(kid)
            if found is not None:
                sp.record(cached=True, indexed=True)
                job = _Job(kid, found[1], t0, fields)
                job.indexed = True
                self._ready(job, found[0], True, f"store {found[2]} ({found[3].name}, by KernelId)", found[4])
                return job, True
            with self._render_lock:
                with self._lock:  # rendered by another thread while this one waited for the render lock
                    p = self.pipelines.get(kid)
                    job = self._jobs.get(kid)
                if p is not None:
                    return _done_job(p), False
                if job is not None:
                    return job, False
                src = self.compiler.compile(make_ir())
                job = _Job(kid, src, t0, getattr(sp, "fields", None) or fields)
                with self._lock:
                    self._jobs[kid] = job
            try:
                hit = self._stored(src)
                sp.record(cached=hit is not None)
                if hit is not None:
                    self._ready(job, hit[0], True, f"store {hit[1]} ({hit[2].name})", hit[3])
                elif not deferred:
                    self._finish(job)
            except BaseException as e:
                self._failed(job, e)
                raise
        return job, True

    def _finish(self, job: _Job) -> None:
        """Run the C compiler for ``job`` (any thread: the pool's, or the requesting one)."""
        try:
            t = time.perf_counter()
            so = self._compile(job.src, job.kid)
            job.fields["cc_s"] = round(time.perf_counter() - t, 4)
            tc = self.toolchain
            self._ready(job, so, False, f"{tc.path} {' '.join(tc.flags)}")
        except BaseException as e:
            self._failed(job, e)

    def _finish_bundle(self, jobs: list[_Job]) -> None:
        """Compile ``jobs`` as one bundle; where the bundle cannot be made (a source of another
        shape, a compile error), each compiles alone, so an error reaches its own kernel."""
        from . import cpu_bundle

        so = None
        t = time.perf_counter()
        try:
            merged = cpu_bundle.merge([j.src for j in jobs])
            if merged is not None:
                so = self.toolchain.compile(merged, f"bundle_{jobs[0].src.entry}")
        except Exception:  # noqa: BLE001 - the members compile alone and raise their own errors
            so = None
        if so is None:
            for j in jobs:
                self._finish(j)
            return
        cc_s = round(time.perf_counter() - t, 4)
        try:
            tc = self.toolchain
            keys = [tc.artifact_key(j.src.source) for j in jobs]
            key = cpu_bundle.bundle_key(keys)
            with self._lock:
                self.compiles += len(jobs)
                self.cc_runs += 1
            at = self._artifacts()
            if at is not None:
                meta = {"compiler": tc.path, "flags": " ".join(tc.flags)}
                cpu_bundle.record(at[0], at[1], key, keys, [j.src for j in jobs],
                                  [j.kid.text() for j in jobs], so, meta)
            bundle = self._load_bundle(key, so, [j.src.entry for j in jobs])
        except BaseException as e:
            for j in jobs:
                self._failed(j, e)
            return
        origin = f"{tc.path} {' '.join(tc.flags)} (bundle of {len(jobs)})"
        for j in jobs:
            j.fields["cc_s"] = cc_s
            j.fields["bundle"] = len(jobs)
            try:
                self._ready(j, None, False, origin, bundle)
            except BaseException as e:
                self._failed(j, e)

    def _load_bundle(self, key: str, so: bytes | None, entries: Any, path: Path | None = None) -> _Bundle:
        """The loaded bundle ``key``: this process's, or ``so`` (verified bytes) loaded now."""
        with self._lock:
            b = self._bundles.get(key)
        if b is not None:
            return b
        if so is None:  # a member row said this process had loaded it: it has (bundles stay)
            raise RuntimeError(f"bundle {key} is not loaded")
        lib, loaded_at = load_shared_object(so, "bundle")
        with self._lock:
            b = self._bundles.setdefault(key, _Bundle(lib, frozenset(entries), path or loaded_at))
        return b

    def _ready(self, job: _Job, so: bytes | None, cached: bool, origin: str, bundle: _Bundle | None = None) -> None:
        entry = job.src.entry
        lib = bundle.lib if bundle is not None else load_shared_object(so, entry)[0]
        fn = getattr(lib, entry)
        # no argtypes: a launch passes ctypes arrays (buffers, info) and plain ints, which ctypes
        # converts by their own types faster than through argtypes; ``_run_kernel`` converts
        # anything else
        fn.restype = None
        if self._checked:
            fn = _checked_entry(fn, lib, job.kid.kernel, entry)
        # what ``execute`` multiplies a launch's bytes by to estimate its work (``_threads_for``)
        fn.em_weight = _work_weight(job.kid.kernel)
        _openmp.bind(lib)
        from ...environment import log

        if log.enabled("compilation"):
            kid = job.kid
            log.compile_block(
                f"{kid.kernel} -> {entry}", kid.text(), self.compiler.language, job.src.source, cached, origin
            )
        p = CompiledKernel(job.kid, entry, fn, job.src, lib, origin, time.perf_counter() - job.t0)
        if not job.indexed:
            self._index(job.kid, job.src)
        with self._lock:
            self.pipelines[job.kid] = p
            self._jobs.pop(job.kid, None)
        job.result = p
        job.done.set()

    # ---------------------------------------------------------------- KernelId index
    def _artifacts(self) -> tuple[Any, str] | None:
        """(store, artifact namespace), or None when compiled kernels are not kept."""
        from ...environment import store

        st = store.compile_store()
        if st is None:
            return None
        tc = self.toolchain
        tc.ensure()
        return st, f"compile/cpu/{tc.fingerprint()}"

    def _indexed(self, kid: KernelId) -> tuple[bytes | None, CompiledSource, str, Path, _Bundle | None] | None:
        """(verified shared object, rendering facts, artifact namespace, its cache file, its loaded
        bundle or None) of an ember kernel found by its KernelId alone (``cpu_index``); None where
        it must be rendered."""
        if not kid.kernel.startswith("ember."):
            return None
        at = self._artifacts()
        if at is None:
            return None
        from . import cpu_index

        hit = cpu_index.lookup(at[0], at[1], kid, self.compiler.language, self._bundles)
        if hit is None:
            return None
        bundle = None
        if hit[3] is not None:
            bundle = self._load_bundle(hit[3], hit[0], hit[4].get("entries") or (), hit[2])
        with self._lock:
            self.store_loads += 1
        return hit[0], hit[1], at[1], hit[2], bundle

    def _index(self, kid: KernelId, src: CompiledSource) -> None:
        if not kid.kernel.startswith("ember."):
            return
        at = self._artifacts()
        if at is not None:
            from . import cpu_index

            cpu_index.record(at[0], at[1], kid, src, self.toolchain.artifact_key(src.source))

    def _failed(self, job: _Job, e: BaseException) -> None:
        with self._lock:
            self._jobs.pop(job.kid, None)  # a later request compiles again (and fails again)
        job.error = e
        job.done.set()

    def _stored(self, src: CompiledSource) -> tuple[bytes | None, str, Path, _Bundle | None] | None:
        """The store's verified shared object for this exact source and toolchain (its bytes,
        namespace, cache file and, for a kernel compiled in a bundle, the loaded bundle)."""
        from ...environment import store

        tc = self.toolchain
        tc.ensure()
        st = store.compile_store()
        if st is None:
            return None
        ns = f"compile/cpu/{tc.fingerprint()}"
        from . import cpu_bundle

        hit = cpu_bundle.read(st, ns, tc.artifact_key(src.source), self._bundles)
        if hit is None or (hit[3] is not None and hit[1].get("entry") != src.entry):
            return None
        bundle = None
        if hit[3] is not None:
            bundle = self._load_bundle(hit[3], hit[0], hit[1].get("entries") or (), hit[2])
        with self._lock:
            self.store_loads += 1
        return hit[0], ns, hit[2], bundle

    def _compile(self, src: CompiledSource, kid: KernelId) -> bytes:
        """Run ``$CC`` on ``src``; the shared object is kept in the store when it is on."""
        from ...environment import store

        tc = self.toolchain
        so = tc.compile(src.source, src.entry)
        with self._lock:
            self.compiles += 1
            self.cc_runs += 1
        st = store.compile_store()
        if st is not None:
            meta = {
                "ext": "so",
                "entry": src.entry,
                "kernel_id": kid.text(),
                "source": src.source,
                "compiler": tc.path,
                "flags": " ".join(tc.flags),
            }
            st.put_artifact(f"compile/cpu/{tc.fingerprint()}", tc.artifact_key(src.source), so, meta)
        return so

    # ---------------------------------------------------------------- execution (runtime/contract.py)
    def launch(self, kernel: CompiledKernel, tensors: list[Any], info: Any, count: Any) -> None:
        """One launch of ``kernel`` over ``tensors`` (CubeTensors in parameter order), with its packed
        ``info`` words, on ``count`` cubes: the C entry ``void f(void **bufs, uint64_t *info,
        uint32_t cx, cy, cz)`` called on the downstream stage. The per-launch hot path: the
        body of ``_execute`` is written out here rather than called (one Python frame less)."""
        if self._preparer is not None and self._preparer == threading.get_ident():
            return  # preparing: launches run nothing (their inputs may be unwritten)
        bt = kernel.buf_type
        if bt is None:
            bt = _buf_type(kernel, len(tensors))
        bufs = bt(*[t.ptr for t in tensors])
        fn = kernel.fn
        ch = self.downstream
        if ch.kind == "inline":
            omp = _openmp
            prev = omp.threads_for(fn, tensors) if omp.set is not None else 0
            try:
                fn(bufs, info, count.x, count.y, count.z)
            except ctypes.ArgumentError:  # counts that are not plain ints (numpy integers)
                _run_kernel(fn, bufs, info, count.x, count.y, count.z)
            finally:
                if prev:
                    omp.set(prev)
        else:
            ch.submit(_run_threaded, fn, bufs, info, count.x, count.y, count.z, tensors)
            ch.submit(_release, tensors)

    def launch_ptrs(self, kernel: CompiledKernel, ptrs: list[int], info: Any, count: Any, keep: Any = ()) -> None:
        """``launch`` with the buffers' element addresses given (a replayed launch); ``keep``:
        the buffers (their sizes choose the thread count; held until the launch ran)."""
        bufs = (kernel.buf_type or _buf_type(kernel, len(ptrs)))(*ptrs)
        self._execute(kernel.fn, bufs, info, count.x, count.y, count.z, keep)

    def replayer(self, kernel: CompiledKernel, info: Any, count: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None] | None:
        """One captured launch of ``kernel`` prepared to run again: ``go(bufs)`` calls its C entry over
        ``bufs[slot].ptr + offset`` per buffer argument, the entry, array type and counts bound
        once (None for a pending kernel: it never replays)."""
        if kernel.pending:
            return None
        fn, cx, cy, cz = kernel.fn, count.x, count.y, count.z
        array = kernel.buf_type or _buf_type(kernel, len(slots))
        pairs = tuple(zip(slots, offsets))
        omp = _openmp
        if self.downstream.kind != "inline" or omp.set is None:
            execute = self._execute

            def go(bufs: list[Any]) -> None:
                keep = [bufs[s] for s in slots]
                execute(fn, array(*[bufs[s].ptr + o for s, o in pairs]), info, cx, cy, cz, keep)

            return go
        # inline (the usual stage): ``_execute``'s body written out, its thread count computed at
        # the first run (a replay's buffers have the sizes of the captured ones, so its work
        # estimate is the same every time), no list of the buffers to keep (the call returns
        # after the kernel ran). The per-launch Python cost of a replayed drain is this function.
        weight = getattr(fn, "em_weight", 1)
        threads = [0]
        server = self

        def go_inline(bufs: list[Any]) -> None:
            if server._preparer is not None and server._preparer == threading.get_ident():
                return  # preparing: launches run nothing (their inputs may be unwritten)
            n = threads[0]
            if not n:
                n = threads[0] = omp.count(sum([bufs[s].nbytes for s in slots]) * weight)
            prev = omp.use(n)
            ptrs = array(*[bufs[s].ptr + o for s, o in pairs])
            try:
                fn(ptrs, info, cx, cy, cz)
            except ctypes.ArgumentError:  # counts that are not plain ints (numpy integers)
                _run_kernel(fn, ptrs, info, cx, cy, cz)
            finally:
                if prev:
                    omp.set(prev)

        return go_inline

    def _execute(self, fn: Any, bufs: Any, info: Any, cx: int, cy: int, cz: int, keep: Any) -> None:
        """Run a launch on the downstream stage (``keep`` holds its buffers alive until it ran)."""
        if self._preparer is not None and self._preparer == threading.get_ident():
            return  # preparing: launches run nothing (their inputs may be unwritten)
        ch = self.downstream
        omp = _openmp
        if ch.kind == "inline":
            prev = omp.threads_for(fn, keep) if omp.set is not None else 0
            try:
                fn(bufs, info, cx, cy, cz)
            except ctypes.ArgumentError:  # counts that are not plain ints (numpy integers)
                _run_kernel(fn, bufs, info, cx, cy, cz)
            finally:
                if prev:
                    omp.set(prev)
        else:
            ch.submit(_run_threaded, fn, bufs, info, cx, cy, cz, keep)
            ch.submit(_release, keep)

    def sync(self) -> None:
        self.downstream.sync()


def _buf_type(kernel: CompiledKernel, n: int) -> Any:
    """``kernel``'s buffer array type, made now: ``n`` pointers (at least one slot: ctypes
    refuses an empty array type)."""
    bt = kernel.buf_type = ctypes.c_void_p * max(n, 1)
    return bt


def _checked_entry(fn: Any, lib: Any, kernel: str, entry: str) -> Callable[..., None]:
    """A checked kernel's launch: run it, then raise ``KernelBoundsError`` if it touched memory out
    of range (its shared object records the first such access: ``em_oob_state``)."""
    get_state = lib.em_oob_state
    get_state.restype = ctypes.POINTER(ctypes.c_uint64)
    get_state.argtypes = []
    state = get_state()
    name_of = lib.em_oob_array
    name_of.restype = ctypes.c_char_p
    name_of.argtypes = [ctypes.c_uint64]

    def launch(*args: Any) -> None:
        fn(*args)
        if state[0]:
            a, i, n, w = int(state[1]), int(state[2]), int(state[3]), int(state[4])
            state[0] = 0
            from ...errors import KernelBoundsError

            if i >= 1 << 63:
                i -= 1 << 64  # a negative index, as the kernel computed it
            raise KernelBoundsError(f"{kernel} ({entry})", (name_of(a) or b"?").decode(), i, n, w)

    return launch


def _done_job(p: CompiledKernel) -> _Job:
    job = _Job(p.kernel_id, p.source, 0.0, {})
    job.result = p
    job.done.set()
    return job


def _background() -> None:
    """A compile pool thread runs at a lower priority (Linux: per thread, inherited by the
    compilers it starts): the pool compiles tuning candidates, often while the calling thread
    compiles and runs the kernels it needs now (``autotune``'s deferred keys), which come first."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):  # no per-thread priorities here: the pool runs as it is
        pass


def _compile_workers() -> int:
    """Compiles at once: one per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _run_kernel(fn: Any, bufs: Any, info: Any, cx: Any, cy: Any, cz: Any) -> None:
    """A compiled kernel's entry (``void f(void **bufs, uint64_t *info, uint32_t cx, cy, cz)``)
    called with its counts as C uint32s."""
    u32 = ctypes.c_uint32
    fn(bufs, info, u32(int(cx)), u32(int(cy)), u32(int(cz)))


def _run_threaded(fn: Any, bufs: Any, info: Any, cx: Any, cy: Any, cz: Any, keep: Any) -> None:
    """A launch on the service thread: its thread count set there (OpenMP's is per thread)."""
    prev = _openmp.threads_for(fn, keep) if _openmp.set is not None else 0
    try:
        _run_kernel(fn, bufs, info, cx, cy, cz)
    finally:
        if prev:
            _openmp.set(prev)


def _release(keep: Any) -> None:
    """Runs after a launch on the service thread: drops the references that kept its buffers alive."""
    del keep
