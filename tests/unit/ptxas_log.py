"""What the no-spill tests share: NVRTC's log with ptxas's resource report (registers, stack,
spills) for a CUDA source, compiled with the runtime's flags (no GPU needed)."""

from __future__ import annotations


def ptxas_log(source: str, arch: str, name: str = "kernel.cu") -> tuple[int, str]:
    """(NVRTC's result code, its log) of ``source`` compiled for ``arch`` with ``-v`` to ptxas."""
    from cuda.bindings import nvrtc as n

    from ember.cube.runtime.cuda_nvrtc import FLAGS

    err, prog = n.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(f.encode() for f in FLAGS), b"--ptxas-options=-v"]
        (res,) = n.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = n.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        n.nvrtcGetProgramLog(prog, log)
        return int(res), log.rstrip(b"\0 ").decode(errors="replace")
    finally:
        n.nvrtcDestroyProgram(prog)
