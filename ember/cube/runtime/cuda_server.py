"""The CUDA runtime's server: compiles, caches and launches the kernels of one device.

The pipeline table ``KernelId -> CUfunction``: a miss renders CUDA C++ (``compiler.cuda``) and
loads the cubin the store holds for that exact source, NVRTC version, architecture and flags,
or compiles it with NVRTC and stores it (``compile/cuda/<arch>/<fingerprint>``): a second
process compiles nothing. No PTX is JIT-compiled by the driver. Hand-written sources
(``backends/cube/cuda_kernels``) take the same path through ``raw_function`` / ``launch_raw``.

Launches run inline on the calling thread (a ``cuLaunchKernel`` costs a few microseconds; a
hand-off to a service thread would cost more); they are asynchronous on the device, and
``sync()`` waits for them. The context is made current lazily on every thread that touches
the device (fusion drains may run on another thread).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import tracing
from ...errors import DeviceUnavailableError
from ..compiler.base import CompiledSource
from ..compiler.cuda import CudaCompiler
from ..kernel_id import KernelId
from . import capture
from .cuda_driver import (
    RECENT_LAUNCHES,
    CudaFaultError,
    _ctx_key,
    _current,
    _device_info,
    _driver,
    _init,
    _ok,
    _raise,
    _servers,
    devices,
)
from .cuda_fastcall import fast_driver, handle
from .cuda_index import CubinIndex
from .cuda_nvrtc import nvrtc
from .preparing import Preparing
from .service import InlineChannel

__all__ = ["BoundArgs", "CudaKernel", "CudaServer", "PENDING_RAW", "RawLauncher"]


#: what ``raw_function`` returns while preparing: the compile runs on the pool, launches run nothing
PENDING_RAW = object()


@dataclass
class CudaKernel:
    """A kernel ready to launch (``fn``: its CUfunction)."""

    kernel_id: KernelId
    entry: str
    fn: Any
    source: CompiledSource
    module: Any
    block: tuple[int, int, int]
    has_info: bool
    origin: str = ""
    compile_seconds: float = 0.0
    #: the CUfunction's driver pointer, for the ctypes launch (0: launch through cuda-bindings)
    handle: int = 0
    #: handed out while preparing, compiled on the pool: no function yet, launches run nothing
    pending: bool = False
    #: the parameter arrays of its launches, built once and refilled per launch (``BoundArgs``)
    bound: Any = None
    #: ``handle`` as a ctypes pointer object (made at the first fast launch)
    handle_p: Any = None


class BoundArgs:
    """The ``cuLaunchKernel`` parameter block of one kernel, built once and reused: slot i of
    ``params`` points at ``ptrs[i]`` (buffer i's element address, rewritten per launch), the
    last slot, when the kernel has info words, at the launch's info array.

    The driver copies the parameters during ``cuLaunchKernel``, so the block is free again when
    the call returns; ``lock`` keeps two threads from filling it at once (the loser of a race
    builds throwaway arrays instead of waiting)."""

    __slots__ = ("n", "ptrs", "params", "params_addr", "params_p", "lock")

    def __init__(self, n: int, has_info: bool) -> None:
        self.n = n
        self.ptrs = (ctypes.c_uint64 * max(n, 1))()
        base = ctypes.addressof(self.ptrs)
        self.params = (ctypes.c_void_p * max(n + has_info, 1))(*[base + 8 * i for i in range(n)])
        self.params_addr = ctypes.addressof(self.params)
        self.params_p = ctypes.c_void_p(self.params_addr)
        self.lock = threading.Lock()


class RawLauncher:
    """One hand-written kernel's launch prepared once (``CudaServer.raw_launcher``): function,
    grid, block, dynamic shared memory and a parameter block whose slot i points at ``args[i]``.
    A caller launching the same configuration again and again (a matmul's call step, replayed
    every training step) rewrites the values those ctypes objects hold, or points a slot of
    ``params`` at another object (a cached tensor map: ``params[i] = ctypes.addressof(obj)``),
    then calls ``run()``: no ctypes objects made, no argument conversion, one driver call.

    The block is shared: a caller holds ``lock`` (``acquire(False)``) from its first rewrite
    to the end of ``run``, and the loser of a race launches through ``launch_raw`` with its own
    arguments (the driver copies the parameters during the call, so the block is free again
    when ``run`` returns)."""

    __slots__ = ("server", "fn", "name", "gx", "gy", "gz", "bx", "by", "bz", "smem", "args", "params", "pp", "hp",
                 "lock")

    def __init__(self, server: CudaServer, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: list[Any], smem: int) -> None:
        self.server, self.fn, self.smem = server, fn, int(smem)
        self.name = server._raw_names.get(id(fn), "a hand-written kernel")
        # ints as ctypes takes them without argtypes (``FastDriver``)
        self.gx, self.gy, self.gz = (int(g) for g in grid)
        self.bx, self.by, self.bz = (int(b) for b in block)
        self.args = list(args)
        self.params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
        self.pp = ctypes.c_void_p(ctypes.addressof(self.params))
        self.hp = ctypes.c_void_p(handle(fn)) if server._fast is not None else None
        self.lock = threading.Lock()

    def run(self) -> None:
        """Launch with the block as it stands (``launch_raw``'s checks and bookkeeping)."""
        s = self.server
        if capture.active:
            capture.broken("a raw launch")  # its arguments hold addresses: nothing to rebind
        if getattr(_current, "ctx", None) is not s.ctx:
            s.current()
        hp = self.hp
        if hp is not None:
            err = s._fast.launch_p(hp, self.gx, self.gy, self.gz, self.bx, self.by, self.bz, self.smem, s._stream_p,
                                   self.pp, None)
        else:
            (err,) = s.cu.cuLaunchKernel(self.fn, self.gx, self.gy, self.gz, self.bx, self.by, self.bz, self.smem,
                                         s.stream, ctypes.addressof(self.params), 0)
        if int(err) != 0:
            _raise(err, f"cuLaunchKernel({self.name}, grid=({self.gx}, {self.gy}, {self.gz}), "
                        f"block=({self.bx}, {self.by}, {self.bz}))", s)
        s.launches += 1
        s.recent.append(self.name)


class CudaServer(Preparing):
    """Compiles, caches and launches kernels of one device, on its stream."""

    def __init__(self, index: int) -> None:
        cu = _init()
        count = int(_ok(cu.cuDeviceGetCount(), "cuDeviceGetCount"))
        if not 0 <= index < count:
            found = [f"cuda:{d.index} {d.describe()}" for d in devices()]
            raise DeviceUnavailableError(
                f"no CUDA device {index}: this machine has {count}", found
            )
        self.cu = cu
        self.index = index
        self.info = _device_info(cu, index)
        self.arch = self.info.arch
        self.dev = _ok(cu.cuDeviceGet(index), "cuDeviceGet")
        self.ctx = _ok(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.current()
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.stream = _ok(cu.cuStreamCreate(flags), "cuStreamCreate")
        # the per-op driver calls go through ctypes when libcuda allows (cuda_fastcall)
        self._fast = None if os.environ.get("EMBER_CUDA_FASTCALL", "1") == "0" else fast_driver()
        self._stream_h = handle(self.stream) if self._fast is not None else 0
        self._stream_p = ctypes.c_void_p(self._stream_h)
        self.compiler = CudaCompiler(self.arch)
        self.nvrtc = nvrtc()
        self.pipelines: dict[KernelId, CudaKernel] = {}
        self._lock = threading.RLock()
        self.stage = f"DSD-cuda-{index}"
        self.downstream = InlineChannel(self.stage)
        self.compiles = 0
        self.store_loads = 0
        self.launches = 0
        self._events: list[Any] = []
        self._cubin_index: CubinIndex | None = None
        self._raw: dict[tuple[int, str, str | None], Any] = {}
        #: id of a raw CUfunction -> (it, its handle as a ctypes pointer) (``launch_raw``)
        self._raw_handles: dict[int, Any] = {}
        self._raw_modules: dict[int, Any] = {}
        #: ident of the thread inside ``preparing()``, else None
        self._preparer: int | None = None
        #: compiles started while preparing, by KernelId: (source, future of the compile)
        self._prepared: dict[KernelId, tuple[CompiledSource, Any]] = {}
        self._pool: Any = None
        self.init_fault_record()
        _servers[_ctx_key(self.ctx)] = self

    # ---------------------------------------------------------------- faults
    def init_fault_record(self) -> None:
        """The state that names a faulting kernel (also set up by tests that build a server
        without a driver)."""
        #: entries of the last launches, oldest first (a fault's message names them); appended
        #: after each successful launch: a deque append, the only per-launch cost of the record
        self.recent: deque[str] = deque(maxlen=RECENT_LAUNCHES)
        #: hand-written kernels' entries by id of their CUfunction (``raw_function``)
        self._raw_names: dict[int, str] = {}
        #: the sticky error that lost this device's context (None: healthy); once set, every
        #: call on the device raises it again before touching the driver where it can
        self.fault: CudaFaultError | None = None
        #: ``launches`` when a sync last succeeded: a fault lies in the launches after it
        self.synced = 0

    def lost(self, err: Any, what: str) -> CudaFaultError:
        """Mark the device lost by sticky error ``err``, reported by driver call ``what``; the
        error to raise (the first fault wins when threads race to report it)."""
        code = int(err)
        try:
            name = _driver().CUresult(code).name
        except ValueError:
            name = f"CUresult {code}"
        since = self.launches - self.synced
        recent = list(self.recent)[-since:] if since > 0 else []
        fault = CudaFaultError(f"cuda:{self.index}", code, name, what, recent, since)
        with self._lock:
            if self.fault is None:
                self.fault = fault
                return fault
        return self.fault_again(what)

    def fault_again(self, what: str) -> CudaFaultError:
        """The device's fault, raised anew by a later call ``what`` (same type, kernel and
        message; its own traceback)."""
        f = self.fault
        assert f is not None
        return CudaFaultError(f.device, f.code, f.name, f.call, f.recent, f.since, f"raised again by {what}")

    def check(self, what: str) -> None:
        """Raise the device's fault when its context was lost (the cold paths call this before
        work that would only fail at the driver: compiles, allocations)."""
        if self.fault is not None:
            raise self.fault_again(what)

    def current(self) -> None:
        """Make the device's context current on this thread (a driver call only when the
        thread's current context is another device's, or none yet)."""
        if getattr(_current, "ctx", None) is self.ctx:
            return
        _ok(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        _current.ctx = self.ctx

    # ---------------------------------------------------------------- preparing
    def wait_prepared(self) -> None:
        """Wait for the compiles started while preparing (a failed one is compiled again, and
        its error raised, by the launch that needs the kernel, on that launch's thread)."""
        from concurrent.futures import wait

        with self._lock:
            futures = [f for _, f in self._prepared.values()]
        wait(futures)

    def _prepare(self, kid: KernelId, make_ir: Callable[[], Any]) -> CudaKernel:
        with self._lock:
            job = self._prepared.get(kid)
        if job is None:
            if self._index().lookup(kid) is not None:  # stored: loading it is quick
                with self._lock:
                    p = self.pipelines.get(kid)
                    if p is None:
                        p = self.pipelines[kid] = self._build(kid, make_ir)
                return p
            entry = kid.entry()
            with tracing.span("compile", kernel=entry, language=self.compiler.language, stage=self.stage,
                              deferred=True):
                src = self.compiler.compile(make_ir())
            job = (src, self._nvrtc_pool().submit(self._prepared_cubin, src, kid))
            with self._lock:
                job = self._prepared.setdefault(kid, job)
        src = job[0]
        return CudaKernel(kid, src.entry, None, src, None, tuple(kid.cube_dim), bool(src.info), "pending", pending=True)

    def _prepared_cubin(self, src: CompiledSource, kid: KernelId) -> tuple[bytes, bool, str]:
        """A prepared kernel's cubin (on the pool), indexed by its KernelId: the tuner prepares
        candidates it may never launch, and a later process that prepares them again (a new
        tuning key) then loads them without expanding and rendering each one."""
        out = self._cubin(src, kid)
        self._index().record(kid, src, self.nvrtc.artifact_key(src.source, self.arch))
        return out

    def _nvrtc_pool(self) -> Any:
        pool = self._pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._lock:
                pool = self._pool
                if pool is None:
                    workers = min(8, os.cpu_count() or 1)
                    pool = self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{self.stage}-nvrtc")
        return pool

    def _prepare_raw(self, source: str, entry: str, arch: str | None) -> Any:
        """While preparing: the hand-written source's compile starts on the NVRTC pool (stored
        like every cubin, so the launch after ``wait_prepared`` loads it); the returned
        stand-in launches nothing (``launch_raw``)."""
        key = ("raw", hash(source), arch)  # one compile per source, whichever entry asked
        with self._lock:
            if key not in self._prepared:
                src = CompiledSource(entry, source, "cuda", [], [])
                self._prepared[key] = (src, self._nvrtc_pool().submit(self._cubin, src, None, arch))
        return PENDING_RAW

    # ---------------------------------------------------------------- pipelines
    def pipeline(self, kid: KernelId, make_ir: Callable[[], Any]) -> CudaKernel:
        p = self.pipelines.get(kid)
        if p is not None:
            return p
        if self._preparer is not None and self._preparer == threading.get_ident():
            return self._prepare(kid, make_ir)
        with self._lock:
            p = self.pipelines.get(kid)
            if p is None:
                p = self.pipelines[kid] = self._build(kid, make_ir)
            return p

    def _build(self, kid: KernelId, make_ir: Callable[[], Any]) -> CudaKernel:
        entry = kid.entry()
        self.check(f"loading kernel {entry}")  # a lost context loads nothing: no compile for it
        t0 = time.perf_counter()
        with tracing.span("compile", kernel=entry, language=self.compiler.language, stage=self.stage) as sp:
            index = self._index()
            done = None
            job = self._prepared.pop(kid, None)  # compiled (and indexed) on the pool while preparing
            if job is not None:
                try:
                    done = (job[0], *job[1].result())
                except Exception:  # noqa: BLE001 - compiled again below: the error is raised here
                    done = None
            hit = index.lookup(kid) if done is None else None
            if done is not None:
                src, cubin, cached, origin = done
            elif hit is not None:  # a warm process: no expansion, no rendering
                cubin, src = hit
                cached, origin = True, f"store index {index.ns}"
                self.store_loads += 1
            else:
                src = self.compiler.compile(make_ir())
                cubin, cached, origin = self._cubin(src, kid)
                index.record(kid, src, self.nvrtc.artifact_key(src.source, self.arch))
            sp.record(cached=cached)
            self.current()
            module = _ok(self.cu.cuModuleLoadData(cubin), f"cuModuleLoadData({entry})")
            fn = _ok(self.cu.cuModuleGetFunction(module, entry.encode()), f"cuModuleGetFunction({entry})")
        from ...environment import log

        if log.enabled("compilation"):
            log.compile_block(
                f"{kid.kernel} -> {entry}", kid.text(), self.compiler.language, src.source, cached, origin
            )
        return CudaKernel(
            kid, entry, fn, src, module, tuple(kid.cube_dim), bool(src.info), origin, time.perf_counter() - t0,
            handle(fn) if self._fast is not None else 0,
        )

    def _index(self) -> CubinIndex:
        idx = self._cubin_index
        if idx is None:
            from ...environment import store

            ns = f"compile/cuda/{self.arch}/{self.nvrtc.fingerprint(self.arch)}"
            idx = self._cubin_index = CubinIndex(store.compile_store(), ns)
        return idx

    def _cubin(self, src: CompiledSource, kid: KernelId | None, arch: str | None = None) -> tuple[bytes, bool, str]:
        """``arch``: a target other than the device's own (``sm_90a`` for wgmma); default the device's."""
        from ...environment import store

        nv = self.nvrtc
        arch = arch or self.arch
        st = store.compile_store()
        ns = f"compile/cuda/{arch}/{nv.fingerprint(arch)}"
        key = nv.artifact_key(src.source, arch)
        if st is not None:
            hit = st.read_artifact(ns, key)  # verified bytes: what is loaded is what was checked
            if hit is not None:
                self.store_loads += 1
                return hit[0], True, f"store {ns} ({hit[2].name})"
        cubin, log_text = nv.compile(src.source, src.entry, arch)
        self.compiles += 1
        if st is not None:
            meta = {
                "ext": "cubin",
                "entry": src.entry,
                "kernel_id": kid.text() if kid is not None else src.entry,
                "source": src.source,
                "compiler": f"nvrtc {nv.version[0]}.{nv.version[1]}",
                "arch": arch,
            }
            st.put_artifact(ns, key, cubin, meta)
        return cubin, False, f"nvrtc {nv.version[0]}.{nv.version[1]} --gpu-architecture={arch}"

    def raw_function(self, source: str, entry: str, dynamic_smem: int = 0, arch: str | None = None) -> Any:
        """A CUfunction of hand-written CUDA C++ (``backends/cube/cuda_kernels``), compiled and
        stored like every cubin (the store key covers the whole source), cached in-process by
        (source, entry, arch); ``arch`` (e.g. ``sm_90a`` for wgmma) replaces the device's own
        target."""
        key = (hash(source), entry, arch)
        fn = self._raw.get(key)
        if fn is not None:
            return fn
        if self._preparer is not None and self._preparer == threading.get_ident():
            return self._prepare_raw(source, entry, arch)
        self.check(f"loading kernel {entry}")
        with self._lock:
            self._prepared.pop(("raw", hash(source), arch), None)  # compiled and stored by the pool, if prepared
            fn = self._raw.get(key)
            if fn is None:
                src = CompiledSource(entry, source, "cuda", [], [])
                with tracing.span("compile", kernel=entry, language="cuda", stage=self.stage) as sp:
                    cubin, cached, _ = self._cubin(src, None, arch)
                    sp.record(cached=cached)
                    self.current()
                    mod = self._raw_modules.get(hash(cubin))
                    if mod is None:
                        mod = self._raw_modules[hash(cubin)] = _ok(self.cu.cuModuleLoadData(cubin), "cuModuleLoadData")
                    fn = _ok(self.cu.cuModuleGetFunction(mod, entry.encode()), f"cuModuleGetFunction({entry})")
                    if dynamic_smem > 48 * 1024:  # beyond 48 KiB a kernel must ask for it
                        attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                        _ok(self.cu.cuFuncSetAttribute(fn, attr, dynamic_smem), "cuFuncSetAttribute")
                self._raw_names[id(fn)] = entry  # the entry holds fn: its id stays its own
                self._raw[key] = fn
        return fn

    def launch_raw(
        self, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: list[Any], smem: int = 0
    ) -> None:
        """Launch a CUfunction with ctypes values as its parameters, in order (``PENDING_RAW``,
        a function still compiling while preparing: nothing)."""
        if capture.active:
            capture.broken("a raw launch")  # its arguments hold addresses: nothing to rebind
        if fn is PENDING_RAW:
            return
        if getattr(_current, "ctx", None) is not self.ctx:
            self.current()
        params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
        fast = self._fast
        if fast is not None:
            held = self._raw_handles.get(id(fn))
            if held is None or held[0] is not fn:  # the entry holds fn: its id stays its own
                held = self._raw_handles[id(fn)] = (fn, ctypes.c_void_p(handle(fn)),
                                                    self._raw_names.get(id(fn), "a hand-written kernel"))
            hp = held[1]
            (gx, gy, gz), (bx, by, bz) = grid, block
            pp = ctypes.c_void_p(ctypes.addressof(params))
            # ints as ctypes takes them without argtypes (a numpy int would be refused)
            code = fast.launch_p(hp, int(gx), int(gy), int(gz), int(bx), int(by), int(bz), int(smem), self._stream_p,
                                 pp, None)
            err = code  # the raw CUresult: ``_err_text`` names it
            name = held[2]
        else:
            (err,) = self.cu.cuLaunchKernel(fn, *grid, *block, smem, self.stream, ctypes.addressof(params), 0)
            name = self._raw_names.get(id(fn), "a hand-written kernel")
        if int(err) != 0:
            _raise(err, f"cuLaunchKernel({name}, grid={grid}, block={block})", self)
        self.launches += 1
        self.recent.append(name)

    def raw_launcher(self, fn: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: list[Any],
                     smem: int = 0) -> RawLauncher | None:
        """``launch_raw(fn, grid, block, args, smem)`` prepared to run again (``RawLauncher``);
        None for a function still compiling while preparing (``PENDING_RAW``: nothing to keep)."""
        if fn is PENDING_RAW:
            return None
        return RawLauncher(self, fn, grid, block, args, smem)

    # ---------------------------------------------------------------- execution
    def launch(self, kernel: CudaKernel, tensors: list[Any], info: Any, count: Any) -> None:
        self.launch_ptrs(kernel, [t.buffer.ptr + t.offset * t.dtype.itemsize for t in tensors], info, count)

    def launch_ptrs(self, kernel: CudaKernel, ptrs: list[int], info: Any, count: Any, keep: Any = ()) -> None:
        """``launch`` with the buffers' element addresses given (a replayed launch; ``keep``
        plays no part: the pool recycles buffers in stream order)."""
        cx, cy, cz = count.x, count.y, count.z
        if not (cx and cy and cz) or kernel.pending:
            return
        if getattr(_current, "ctx", None) is not self.ctx:
            self.current()
        n = len(ptrs)
        b = kernel.bound
        if b is None or b.n != n:
            b = kernel.bound = BoundArgs(n, kernel.has_info)
        if b.lock.acquire(False):
            try:
                b.ptrs[:n] = ptrs
                if kernel.has_info:
                    b.params[n] = ctypes.addressof(info)
                err = self._launch_params(kernel, cx, cy, cz, b)
            finally:
                b.lock.release()
        else:  # another thread is filling the block: a private one (the driver copies it during the call)
            own = BoundArgs(n, kernel.has_info)
            own.ptrs[:n] = ptrs
            if kernel.has_info:
                own.params[n] = ctypes.addressof(info)
            err = self._launch_params(kernel, cx, cy, cz, own)
        if int(err) != 0:
            _launch_failed(self, kernel, cx, cy, cz, err)
        self.launches += 1
        self.recent.append(kernel.entry)

    def replayer(self, kernel: CudaKernel, info: Any, count: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None] | None:
        """One captured launch of ``kernel`` (``info``, ``count``) prepared to run again: ``go(bufs)``
        launches it over ``bufs[slot].ptr + offset`` per buffer argument, with its own parameter
        block and driver arguments made once (None: not on the ctypes path; ``launch_ptrs``
        serves then)."""
        cx, cy, cz = count.x, count.y, count.z
        if self._fast is None or not kernel.handle or kernel.pending or not (cx and cy and cz):
            return None
        n = len(slots)
        pairs = tuple(zip(slots, offsets))
        b = BoundArgs(n, kernel.has_info)
        if kernel.has_info:
            b.params[n] = ctypes.addressof(info)  # the closure holds info, so the address stays good
        launch, hp, sp, pp = self._fast.launch_p, ctypes.c_void_p(kernel.handle), self._stream_p, b.params_p
        bx, by, bz = kernel.block
        ctx, lock = self.ctx, b.lock
        note, entry = self.recent.append, kernel.entry

        def go(bufs: list[Any]) -> None:
            if getattr(_current, "ctx", None) is not ctx:
                self.current()
            ptrs = [bufs[s].ptr + o for s, o in pairs]
            if not lock.acquire(False):  # another thread is replaying this very launch
                self.launch_ptrs(kernel, ptrs, info, count)
                return
            try:
                b.ptrs[:n] = ptrs
                err = launch(hp, cx, cy, cz, bx, by, bz, 0, sp, pp, None)
            finally:
                lock.release()
            if err:
                _launch_failed(self, kernel, cx, cy, cz, err)
            self.launches += 1
            note(entry)

        if 1 <= n <= 3:
            # the usual launch (an elementwise or reduce kernel: 1-3 buffers) with its slots
            # written one by one: no list of addresses, no slice assignment (0.5 of 2.1 us on
            # the dev box)
            P = b.ptrs
            (s0, o0), (s1, o1), (s2, o2) = (pairs + ((0, 0), (0, 0)))[:3]

            def go_small(bufs: list[Any]) -> None:
                if getattr(_current, "ctx", None) is not ctx:
                    self.current()
                if not lock.acquire(False):  # another thread is replaying this very launch
                    self.launch_ptrs(kernel, [bufs[s].ptr + o for s, o in pairs], info, count)
                    return
                try:
                    P[0] = bufs[s0].ptr + o0
                    if n > 1:
                        P[1] = bufs[s1].ptr + o1
                        if n > 2:
                            P[2] = bufs[s2].ptr + o2
                    err = launch(hp, cx, cy, cz, bx, by, bz, 0, sp, pp, None)
                finally:
                    lock.release()
                if err:
                    _launch_failed(self, kernel, cx, cy, cz, err)
                self.launches += 1
                note(entry)

            go = go_small
        go.block = b  # type: ignore[attr-defined]  # (its parameter block, for tests)
        return go

    def _launch_params(self, k: CudaKernel, cx: int, cy: int, cz: int, b: BoundArgs) -> Any:
        """cuLaunchKernel of ``k`` with the parameter block ``b``; the CUresult (its raw code on the
        ctypes path; 0 is success either way)."""
        bx, by, bz = k.block
        if k.handle:
            hp = k.handle_p
            if hp is None:
                hp = k.handle_p = ctypes.c_void_p(k.handle)
            return self._fast.launch_p(hp, cx, cy, cz, bx, by, bz, 0, self._stream_p, b.params_p, None)
        (err,) = self.cu.cuLaunchKernel(k.fn, cx, cy, cz, bx, by, bz, 0, self.stream, b.params_addr, 0)
        return err

    def sync(self) -> None:
        self.current()
        if self._fast is not None:
            err = self._fast.stream_sync(self._stream_h)
            if err:
                _raise(err, "cuStreamSynchronize", self)
            self.synced = self.launches
            return
        (err,) = self.cu.cuStreamSynchronize(self.stream)
        if int(err):
            _raise(err, "cuStreamSynchronize", self)
        self.synced = self.launches

    def event(self) -> Any:
        try:
            return self._events.pop()
        except IndexError:
            self.current()
            return _ok(self.cu.cuEventCreate(self.cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")


def _launch_failed(s: CudaServer, k: CudaKernel, cx: int, cy: int, cz: int, err: Any) -> None:
    _raise(err, f"cuLaunchKernel({k.entry}, grid=({cx}, {cy}, {cz}), block={k.block})", s)
