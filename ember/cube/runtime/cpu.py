"""The CPU runtime's server: C source -> shared object -> ctypes function, cached twice.

The kernel path, as in the seed: look the ``KernelId`` up in the in-process pipeline table;
on a miss expand the kernel to IR, render C, then either load the shared object the store
already holds for that exact source and toolchain, or run ``$CC`` and put the result in the
store. Artifacts live under namespace ``compile/cpu/<toolchain fingerprint>`` keyed by
sha256(source + compiler path + ``cc --version`` + flags + ember version); the store checks
each file's content hash before handing it out.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import tracing
from ...errors import CompilationError
from ..compiler.base import CompiledSource
from ..compiler.c import CCompiler
from ..ir import KernelIr
from ..kernel_id import KernelId
from .service import Channel, InlineChannel, ServiceThread

__all__ = ["CToolchain", "CpuServer", "CompiledKernel", "ToolchainError"]

# Ours first, the configured flags after them, so a user's flag wins (-ffp-contract=fast ...).
# -ffp-contract=off: a*b+c rounds twice, as numpy does (kernels ask for fusion with cube.fma);
# -fno-math-errno: lets GCC vectorise sqrt & co. without changing results.
_BASE_FLAGS = ["-std=gnu11", "-fno-math-errno", "-ffp-contract=off", "-fno-strict-aliasing"]
_NEEDED = ["-shared", "-fPIC"]


class ToolchainError(Exception):
    """No working C compiler (turned into DeviceUnavailableError by the backend)."""


def _ember_version() -> str:
    mod = sys.modules.get("ember")
    return str(getattr(mod, "__version__", "0"))


def _cpu_identity() -> str:
    """What -march=native depends on: the CPU model and its feature flags."""
    model = flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not model and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif not flags and line.startswith("flags"):
                    flags = line.split(":", 1)[1].strip()
                if model and flags:
                    break
    except OSError:
        pass
    return f"{platform.machine()}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


class CToolchain:
    """The system C compiler: command, flags, identity; compiles one source to a .so."""

    def __init__(self, cc: str | None = None, cflags: str | None = None) -> None:
        from ...environment import config

        cc = cc or config.get("cpu.cc") or os.environ.get("CC") or "cc"
        cflags = config.get("cpu.cflags") if cflags is None else cflags
        self.command = shlex.split(cc)
        user = shlex.split(cflags or "")
        self.flags = _BASE_FLAGS + user + [f for f in _NEEDED if f not in user]
        self.path = shutil.which(self.command[0]) if self.command else None
        self._version: str | None = None
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        #: libraries linked after the source; libmvec joins when ``ensure`` finds it working
        self.libs = ["-lm"]
        self.mvec = False

    # ---------------------------------------------------------------- identity
    def _probe_key(self) -> str:
        st = os.stat(self.path) if self.path else None
        stamp = f"{st.st_mtime_ns}|{st.st_size}" if st else "?"
        return f"{self.path}|{stamp}|{' '.join(self.command[1:])}|{' '.join(self.flags)}|{_cpu_identity()}"

    def ensure(self) -> None:
        """Check the compiler works (a canary with OpenMP), once per toolchain and machine;
        the answer and ``cc --version`` are remembered in the store."""
        with self._lock:
            if self._version is not None:
                return
            if not self.path:
                raise ToolchainError(
                    f"C compiler {self.command[0] if self.command else '?'!r} not found on "
                    "PATH; install gcc or clang, or set CC / EMBER_CPU_CC"
                )
            from ...environment import store

            key = self._probe_key()
            st = _store(store)
            known = st.get_json("compile/cpu/toolchains", key) if st is not None else None
            if known and known.get("ok") and "mvec" in known:
                self._version = known["version"]
                self._use_mvec(known["mvec"])
                return
            try:
                out = subprocess.run([*self.command, "--version"], capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise ToolchainError(f"{self.command[0]} --version failed: {e}") from None
            version = (out.stdout or out.stderr).strip()
            canary = (
                "#include <omp.h>\nint ember_canary(void) { int n = 0;\n"
                "#pragma omp parallel reduction(+:n)\n n += 1;\n return n > 0 ? 7 : 0; }\n"
            )
            try:
                so = self._build(canary, "ember_canary")
                with tempfile.TemporaryDirectory(prefix="ember-canary-") as d:
                    p = Path(d) / "canary.so"
                    p.write_bytes(so)
                    lib = ctypes.CDLL(str(p))
                    if lib.ember_canary() != 7:
                        raise ToolchainError("the canary kernel returned a wrong value")
            except CompilationError as e:
                raise ToolchainError(
                    f"{self.path} cannot build OpenMP shared objects with flags "
                    f"{' '.join(self.flags)}:\n{e.log.strip()[:2000]}"
                ) from None
            mvec = self._probe_mvec()
            self._version = version
            self._use_mvec(mvec)
            if st is not None:
                st.put_json("compile/cpu/toolchains", key, {"ok": True, "version": version, "mvec": mvec})

    def _probe_mvec(self) -> bool:
        """Whether glibc's libmvec links and computes: then transcendental lane loops call its
        vector variants (a kernel computing exp per lane runs one SIMD call per line)."""
        canary = (
            "typedef float v4 __attribute__((vector_size(16)));\nv4 _ZGVbN4v_expf(v4);\n"
            "void ember_mvec(float *x) { v4 v; __builtin_memcpy(&v, x, 16); v = _ZGVbN4v_expf(v);"
            " __builtin_memcpy(x, &v, 16); }\n"
        )
        try:
            so = self._build(canary, "ember_mvec", ["-DEM_MVEC", "-lmvec"])
            with tempfile.TemporaryDirectory(prefix="ember-canary-") as d:
                p = Path(d) / "mvec.so"
                p.write_bytes(so)
                lib = ctypes.CDLL(str(p))
                buf = (ctypes.c_float * 4)(*([1.0] * 4))
                lib.ember_mvec(buf)
                return all(abs(v - 2.718281828) < 1e-5 for v in buf)
        except (CompilationError, OSError):
            return False

    def _use_mvec(self, ok: bool) -> None:
        self.mvec = ok
        if ok and "-DEM_MVEC" not in self.flags:
            self.flags = [*self.flags, "-DEM_MVEC"]
            self.libs = ["-lmvec", *self.libs]

    @property
    def version(self) -> str:
        self.ensure()
        return self._version or ""

    def fingerprint(self) -> str:
        """Names the artifact namespace: compiler, version, flags, ember version, CPU."""
        if self._fingerprint is None:
            ident = "\n".join(
                [
                    str(self.path),
                    self.version,
                    " ".join(self.command[1:]),
                    " ".join(self.flags),
                    _ember_version(),
                    _cpu_identity(),
                ]
            )
            self._fingerprint = hashlib.sha256(ident.encode()).hexdigest()[:16]
        return self._fingerprint

    def artifact_key(self, source: str) -> str:
        h = hashlib.sha256()
        for part in (
            source,
            str(self.path),
            self.version,
            " ".join(self.command + self.flags),
            _ember_version(),
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    # ---------------------------------------------------------------- build
    def _build(self, source: str, entry: str, extra: list[str] | None = None) -> bytes:
        with tempfile.TemporaryDirectory(prefix="ember-cc-") as d:
            src = Path(d) / f"{entry}.c"
            out = Path(d) / f"{entry}.so"
            src.write_text(source)
            cmd = [*self.command, *self.flags, *(extra or ()), "-o", str(out), str(src), *self.libs]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise CompilationError(
                    f"running the C compiler for {entry} failed: {e}", source, str(e)
                ) from None
            if r.returncode != 0 or not out.exists():
                raise CompilationError(
                    f"C compilation of kernel {entry} failed ({shlex.join(cmd[:1])} exited {r.returncode})",
                    source,
                    (r.stderr or "") + (r.stdout or ""),
                )
            return out.read_bytes()

    def compile(self, source: str, entry: str) -> bytes:
        self.ensure()
        return self._build(source, entry)


def _store(store_mod: Any) -> Any:
    from ...environment import config

    try:
        if not config.get("compilation.cache"):
            return None
    except Exception:
        pass
    return store_mod.get_store()


@dataclass
class CompiledKernel:
    """A kernel ready to launch: the ctypes function and how to fill its arguments."""

    kernel_id: KernelId
    entry: str
    fn: Any
    source: CompiledSource
    lib: Any = None
    origin: str = ""
    compile_seconds: float = 0.0
    plans: dict[Any, Any] = field(default_factory=dict)


_tmp_dir: Path | None = None


def _private_dir() -> Path:
    """Where shared objects go when the store is off (removed at exit)."""
    global _tmp_dir
    if _tmp_dir is None:
        _tmp_dir = Path(tempfile.mkdtemp(prefix="ember-kernels-"))
        atexit.register(shutil.rmtree, str(_tmp_dir), True)
    return _tmp_dir


class CpuServer:
    """Compiles and runs kernels for one CPU device; owns the in-process pipeline table."""

    #: launches call the compiled C entry directly with ctypes arguments (launch.py)
    ctypes_abi = True

    def __init__(self, index: int = 0, channel: str | None = None, checked: bool | None = None) -> None:
        from ...environment import config

        self.index = index
        self.toolchain = CToolchain()
        if checked is None:  # EMBER_CUBE_CHECKED=1: bounds-checked kernels, for debugging
            checked = bool(config.get("cube.checked"))
        self.compiler = CCompiler(checked=checked)
        self.pipelines: dict[KernelId, CompiledKernel] = {}
        self._lock = threading.RLock()
        self.stage = f"DSD-cpu-{index}"
        channel = channel or config.get("cpu.channel")
        if channel not in ("inline", "thread"):
            raise ValueError(f"cpu.channel (EMBER_CPU_CHANNEL) must be inline or thread, got {channel!r}")
        self.downstream: Channel = (
            ServiceThread(self.stage) if channel == "thread" else InlineChannel(self.stage)
        )
        self._upstream: ServiceThread | None = None
        self.compiles = 0
        self.store_loads = 0

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
        return self.downstream.call(self._build, kid, make_ir)

    def _build(self, kid: KernelId, make_ir: Callable[[], KernelIr]) -> CompiledKernel:
        with self._lock:
            p = self.pipelines.get(kid)
            if p is not None:
                return p
            entry = kid.entry()
            t0 = time.perf_counter()
            with tracing.span(
                "compile", kernel=entry, language=self.compiler.language, stage=self.stage
            ) as sp:
                k = make_ir()
                src = self.compiler.compile(k)
                path, cached, origin = self._artifact(src, kid)
                sp.record(cached=cached)
                lib = ctypes.CDLL(str(path))
                fn = getattr(lib, entry)
                fn.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_void_p,
                    ctypes.c_uint32,
                    ctypes.c_uint32,
                    ctypes.c_uint32,
                ]
                fn.restype = None
            from ...environment import log

            if log.enabled("compilation"):
                log.compile_block(
                    f"{kid.kernel} -> {entry}", kid.text(), self.compiler.language, src.source, cached, origin
                )
            p = CompiledKernel(kid, entry, fn, src, lib, origin, time.perf_counter() - t0)
            self.pipelines[kid] = p
            return p

    def _artifact(self, src: CompiledSource, kid: KernelId) -> tuple[Path, bool, str]:
        from ...environment import store

        tc = self.toolchain
        tc.ensure()
        st = _store(store)
        if st is not None:
            ns = f"compile/cpu/{tc.fingerprint()}"
            key = tc.artifact_key(src.source)
            hit = st.get_artifact(ns, key)
            if hit is not None:
                self.store_loads += 1
                return hit[0], True, f"store {ns} ({hit[0].name})"
            so = tc.compile(src.source, src.entry)
            self.compiles += 1
            meta = {
                "ext": "so",
                "entry": src.entry,
                "kernel_id": kid.text(),
                "source": src.source,
                "compiler": tc.path,
                "flags": " ".join(tc.flags),
            }
            path = st.put_artifact(ns, key, so, meta)
            return path, False, f"{tc.path} {' '.join(tc.flags)}"
        so = tc.compile(src.source, src.entry)
        self.compiles += 1
        path = _private_dir() / f"{src.entry}-{hashlib.sha256(so).hexdigest()[:8]}.so"
        path.write_bytes(so)
        return path, False, f"{tc.path} {' '.join(tc.flags)}"

    # ---------------------------------------------------------------- execution
    def execute(self, fn: Any, bufs: Any, info: Any, cx: int, cy: int, cz: int, keep: Any) -> None:
        """Run a launch on the downstream stage (``keep`` holds its buffers alive until it ran)."""
        ch = self.downstream
        if ch.kind == "inline":
            fn(bufs, info, cx, cy, cz)
        else:
            ch.submit(fn, bufs, info, cx, cy, cz)
            ch.submit(_release, keep)

    def sync(self) -> None:
        self.downstream.sync()


def _release(keep: Any) -> None:
    """Runs after a launch on the service thread: drops the references that kept its buffers alive."""
    del keep
