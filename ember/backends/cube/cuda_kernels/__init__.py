"""Hand-written CUDA C++ kernels of the Cube backend: what the ``@cube`` kernel language cannot
say yet (tensor-core ``mma.sync`` and ``wgmma`` + TMA, a register-blocked SGEMM, 16-byte tiled
transposes).

Each module holds one kernel's source, the host code that checks its operands and computes its
grid, and its matmul-candidate predicates; the Cube backend (``matmul.py``, the epilogue fuser)
decides when they run. Below them the CUDA runtime offers only generic plumbing, the same for
every hand-written source: ``server.raw_function(source, entry, dynamic_smem, arch)`` compiles
through NVRTC with the artefact cache and loads the function; ``server.launch_raw(fn, grid,
block, args, smem)`` launches it on the device's stream. A launcher that repeats one
configuration (every training step replays the same products) prepares it once where the server
offers ``raw_launcher`` (the CUDA runtime's ``RawLauncher``: the parameter block built once, its
values rewritten per launch) and keeps the general path for servers without it.

- ``mma``: ``mma.sync`` (sm_80+) f16/bf16 and tf32, optional bias + GELU epilogue
- ``wgmma``: Hopper ``wgmma`` fed by TMA (sm_90a), f16/bf16 and tf32
- ``sgemm``: IEEE float32 on CUDA cores (sm_80+)
- ``transpose``: the tensor-core operands' row-major copies
"""
