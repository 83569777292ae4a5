"""NVRTC: CUDA C++ source -> cubin for one exact architecture (no PTX JIT at load time).

Works without a GPU or a driver (the compile-only path uses it on any machine). Cubins persist
in the store under ``compile/cuda/<arch>/<fingerprint>``, keyed by sha256(source + NVRTC
version + arch + flags + ember version): a second process loads them and compiles nothing.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from ...environment.version import ember_version
from ...errors import CompilationError

__all__ = ["Nvrtc", "NvrtcUnavailable", "nvrtc"]

#: --fmad=false: a*b+c rounds twice, as numpy and the C target do (kernels ask for fusion with
#: cube.fma); -default-device: every function of the source is device code
FLAGS = ("-std=c++17", "--fmad=false", "-default-device", "-lineinfo")


class NvrtcUnavailable(RuntimeError):
    """cuda-bindings or the NVRTC library is not installed."""


class Nvrtc:
    def __init__(self) -> None:
        try:
            from cuda.bindings import nvrtc as _nvrtc
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise NvrtcUnavailable(
                f"the cuda runtime needs cuda-bindings and NVRTC: pip install 'ember[cuda]' ({e})"
            ) from None
        self._n = _nvrtc
        try:
            err, major, minor = _nvrtc.nvrtcVersion()
        except Exception as e:  # the bindings are there but libnvrtc is not
            raise NvrtcUnavailable(f"NVRTC could not be loaded: {e}; pip install nvidia-cuda-nvrtc") from None
        self._check(err, "nvrtcVersion")
        self.version = (int(major), int(minor))
        self.compiles = 0

    def _check(self, err: Any, what: str) -> None:
        if int(err) != 0:
            _, msg = self._n.nvrtcGetErrorString(err)
            raise CompilationError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")

    def fingerprint(self, arch: str) -> str:
        ident = f"nvrtc {self.version[0]}.{self.version[1]}|{arch}|{' '.join(FLAGS)}|{ember_version()}"
        return hashlib.sha256(ident.encode()).hexdigest()[:16]

    def artifact_key(self, source: str, arch: str) -> str:
        h = hashlib.sha256()
        for part in (source, f"{self.version}", arch, " ".join(FLAGS), ember_version()):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def compile(self, source: str, entry: str, arch: str) -> tuple[bytes, str]:
        """(cubin, compiler log) for ``arch`` (``sm_90``, ``sm_90a``, ...)."""
        n = self._n
        err, prog = n.nvrtcCreateProgram(source.encode(), f"{entry}.cu".encode(), 0, [], [])
        self._check(err, "nvrtcCreateProgram")
        try:
            opts = [f"--gpu-architecture={arch}".encode(), *(f.encode() for f in FLAGS)]
            (res,) = n.nvrtcCompileProgram(prog, len(opts), opts)
            err, size = n.nvrtcGetProgramLogSize(prog)
            log_buf = b" " * size
            n.nvrtcGetProgramLog(prog, log_buf)
            log = log_buf.rstrip(b"\0 ").decode(errors="replace")
            if int(res) != 0:
                raise CompilationError(f"NVRTC ({arch}) could not compile kernel {entry}", source, log)
            err, size = n.nvrtcGetCUBINSize(prog)
            self._check(err, "nvrtcGetCUBINSize")
            cubin = b" " * size
            (err,) = n.nvrtcGetCUBIN(prog, cubin)
            self._check(err, "nvrtcGetCUBIN")
            self.compiles += 1
            return cubin, log
        finally:
            n.nvrtcDestroyProgram(prog)


def stored_compile(
    nv: Nvrtc, source: str, entry: str, arch: str, meta: dict[str, Any] | None = None
) -> tuple[bytes, bool]:
    """(cubin, whether it came from the store): the store's cubin for this exact source, NVRTC
    version, arch and flags, else a fresh compile that is then stored (namespace and key as the
    cuda runtime's, so a compile-check run warms a GPU machine's cache with the same NVRTC)."""
    from ...environment import store

    st = store.compile_store()
    ns = f"compile/cuda/{arch}/{nv.fingerprint(arch)}"
    key = nv.artifact_key(source, arch)
    if st is not None:
        hit = st.read_artifact(ns, key)  # verified bytes (no reopen after the check)
        if hit is not None:
            return hit[0], True
    cubin, _ = nv.compile(source, entry, arch)
    if st is not None:
        st.put_artifact(ns, key, cubin, {"ext": "cubin", "entry": entry, "source": source, "arch": arch,
                                         "compiler": f"nvrtc {nv.version[0]}.{nv.version[1]}", **(meta or {})})
    return cubin, False


_instance: Nvrtc | None = None
_lock = threading.Lock()


def nvrtc() -> Nvrtc:
    """The process-wide NVRTC (raises NvrtcUnavailable when it cannot load)."""
    global _instance
    if _instance is None:
        with _lock:
            if _instance is None:
                _instance = Nvrtc()
    return _instance
