"""The system C compiler as the CPU runtime uses it: command and flags from the configuration,
an identity (path, ``--version``, flags, ember version, CPU) that names the artifact namespace,
a canary that checks OpenMP (and libmvec) once per toolchain and machine, and the compile of
one source to a shared object."""

from __future__ import annotations

import ctypes
import os
import platform
import shlex
import shutil
import tempfile
import threading
import zlib
from pathlib import Path
from typing import Any

from ...environment.version import ember_version
from ...errors import CompilationError
from .cpu_loading import _load_library

__all__ = ["CToolchain", "ToolchainError"]

# Ours first, the configured flags after them, so a user's flag wins (-ffp-contract=fast ...).
# -ffp-contract=off: a*b+c rounds twice, as numpy does (kernels ask for fusion with cube.fma);
# -fno-math-errno: lets GCC vectorise sqrt & co. without changing results.
_BASE_FLAGS = ["-std=gnu11", "-fno-math-errno", "-ffp-contract=off", "-fno-strict-aliasing"]
_NEEDED = ["-shared", "-fPIC"]


class ToolchainError(Exception):
    """No working C compiler (turned into DeviceUnavailableError by the backend)."""


def _cpu_identity() -> str:
    """What -march=native depends on: the CPU model and a digest of its feature flags."""
    import hashlib

    machine, model, flags = _cpu_fields()
    return f"{machine}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def _cpu_fields() -> tuple[str, str, str]:
    """(machine, CPU model, feature flags) from /proc/cpuinfo (empty where unreadable)."""
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
    return platform.machine(), model, flags


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
        # the CPU flags' crc32, not _cpu_identity()'s sha256: a warm start then loads no hashlib
        machine, model, cpu_flags = _cpu_fields()
        cpu = f"{machine}|{model}|{zlib.crc32(cpu_flags.encode()):08x}"
        return f"{self.path}|{stamp}|{' '.join(self.command[1:])}|{' '.join(self.flags)}|{cpu}"

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
            st = store.compile_store()
            known = st.get_json("compile/cpu/toolchains", key) if st is not None else None
            if (
                isinstance(known, dict)
                and known.get("ok") is True
                and isinstance(known.get("version"), str)
                and isinstance(known.get("mvec"), bool)
            ):
                self._version = known["version"]
                self._use_mvec(known["mvec"])
                return
            import subprocess

            try:
                out = subprocess.run([*self.command, "--version"], capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise ToolchainError(f"{self.command[0]} --version failed: {e}") from None
            version = (out.stdout or out.stderr).strip()
            mvec = self._canary()
            self._version = version
            self._use_mvec(mvec)
            if st is not None:
                st.put_json("compile/cpu/toolchains", key, {"ok": True, "version": version, "mvec": mvec})

    def _canary(self) -> bool:
        """Build and run the canary: OpenMP must work (else ToolchainError); returns whether
        glibc's libmvec links and computes (then transcendental lane loops call its vector
        variants: a kernel computing exp per lane runs one SIMD call per line). One compile
        checks both on a cold start; only where it fails is OpenMP checked alone."""
        omp = (
            "#include <omp.h>\nint ember_canary(void) { int n = 0;\n"
            "#pragma omp parallel reduction(+:n)\n n += 1;\n return n > 0 ? 7 : 0; }\n"
        )
        mvec = (
            "typedef float v4 __attribute__((vector_size(16)));\nv4 _ZGVbN4v_expf(v4);\n"
            "void ember_mvec(float *x) { v4 v; __builtin_memcpy(&v, x, 16); v = _ZGVbN4v_expf(v);"
            " __builtin_memcpy(x, &v, 16); }\n"
        )
        from ...environment.store import temp_name

        with tempfile.TemporaryDirectory(prefix=temp_name("canary")) as d:
            try:
                lib = self._load_canary(omp + mvec, ["-DEM_MVEC", "-lmvec"], Path(d) / "both.so")
                buf = (ctypes.c_float * 4)(*([1.0] * 4))
                lib.ember_mvec(buf)
                return all(abs(v - 2.718281828) < 1e-5 for v in buf)
            except (CompilationError, OSError):
                pass
            try:
                self._load_canary(omp, [], Path(d) / "omp.so")
            except CompilationError as e:
                raise ToolchainError(
                    f"{self.path} cannot build OpenMP shared objects with flags "
                    f"{' '.join(self.flags)}:\n{e.log.strip()[:2000]}"
                ) from None
            return False

    def _load_canary(self, source: str, extra: list[str], path: Path) -> Any:
        path.write_bytes(self._build(source, "ember_canary", extra))
        lib = _load_library(path)
        if lib.ember_canary() != 7:
            raise ToolchainError("the canary kernel returned a wrong value")
        return lib

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
            import hashlib

            ident = "\n".join(
                [
                    str(self.path),
                    self.version,
                    " ".join(self.command[1:]),
                    " ".join(self.flags),
                    ember_version(),
                    _cpu_identity(),
                ]
            )
            self._fingerprint = hashlib.sha256(ident.encode()).hexdigest()[:16]
        return self._fingerprint

    def artifact_key(self, source: str) -> str:
        import hashlib

        h = hashlib.sha256()
        for part in (
            source,
            str(self.path),
            self.version,
            " ".join(self.command + self.flags),
            ember_version(),
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    # ---------------------------------------------------------------- build
    def _build(self, source: str, entry: str, extra: list[str] | None = None) -> bytes:
        import subprocess

        from ...environment.store import temp_name

        with tempfile.TemporaryDirectory(prefix=temp_name("cc")) as d:
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
