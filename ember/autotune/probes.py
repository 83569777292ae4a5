"""Throughput probes: peak compute, memory bandwidth and launch overhead of a device.

Measured once per device (``throughput_id``: runtime, adapter, memory) and kept in the store
under ``throughput/<ember version>/<id>``, so a second process runs no probe. The seed's stack
launches ~18,000 probe kernels (4.2 s before its first 2x2 matmul); here one kernel language
function with a runtime ``mode`` covers the three probes (one compile, loaded from the store
in later processes), each probe a few launches, about 0.1-0.2 s in all on a 2-core CPU.

The probes are ordinary ``@cube`` kernels launched through the client and timed with
``client.profile``, so every runtime that compiles the kernel language gets them; a runtime
with matrix units may add ``peak_matrix_flops`` by defining ``client.probe_matrix_flops()``.
The numbers are *bounds for the roofline*, not benchmarks: what matters is that a real kernel
cannot beat them by much (a bound that is too low would end searches too early, so each probe
keeps its best sample).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from .. import tracing
from ..cube import ABSOLUTE_POS, Array, Line, fma, kernel, line, u32
from ..cube import f32 as F32

__all__ = ["Throughput", "throughput", "probe", "prepare", "invalidate", "PROBE_VERSION"]

#: bump when the probe kernels or their arithmetic change (stored results become stale)
PROBE_VERSION = "probe-v1"

#: f32 lanes per line of the probes (64 bytes: one AVX-512 register, 16 threads of a warp's quarter)
_W = 16
#: independent accumulator lines per unit in the compute probe (enough to hide FMA latency)
_ACC = 8
#: cube size of the probe launches
_DIM = 64


@dataclass(frozen=True, slots=True)
class Throughput:
    """What one device sustains: ``peak_flops`` (f32 FLOP/s, an FMA counted as 2),
    ``bandwidth`` (bytes/s, read + write), ``launch_overhead`` (s per launch);
    ``peak_matrix_flops`` where the runtime reports matrix units, else None."""

    peak_flops: float
    bandwidth: float
    launch_overhead: float
    peak_matrix_flops: float | None = None
    probe_s: float = 0.0  # wall time the probes took when they ran

    def peak_for(self, itemsize: int) -> float:
        """Peak for an element size: lanes scale with 4 bytes / itemsize (f64: half, f16: same
        as f32 since half types compute in f32 registers on the CPU)."""
        return self.peak_flops * min(1.0, 4.0 / max(itemsize, 1))


@kernel
def throughput_probe(x: Array[Line[F32]], out: Array[Line[F32]], mode: u32, iters: u32):
    """mode 0: nothing (launch overhead); 1: out = x (bandwidth); 2: ``iters`` rounds of 8
    independent line FMAs per unit, summed into out (compute)."""
    i = ABSOLUTE_POS
    if mode == 0:
        return
    if mode == 1:
        if i < out.len():
            out[i] = x[i]
        return
    if i < out.len():
        v = x[i]
        a0 = v + F32(0.5)
        a1 = v + F32(1.0)
        a2 = v + F32(2.0)
        a3 = v + F32(3.0)
        a4 = v + F32(4.0)
        a5 = v + F32(5.0)
        a6 = v + F32(6.0)
        a7 = v + F32(7.0)
        # broadcast constants: derived from v, gcc 12 scalarises one of the lane loops
        m = line(F32(0.999), 16)
        c = line(F32(0.001), 16)
        for _t in range(iters):
            a0 = fma(a0, m, c)
            a1 = fma(a1, m, c)
            a2 = fma(a2, m, c)
            a3 = fma(a3, m, c)
            a4 = fma(a4, m, c)
            a5 = fma(a5, m, c)
            a6 = fma(a6, m, c)
            a7 = fma(a7, m, c)
        out[i] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7


_lock = threading.Lock()
_memory: dict[str, Throughput] = {}


def _namespace(tid: str) -> str:
    from ..environment.store import namespace
    from ..environment.version import ember_version

    return namespace("throughput", ember_version(), tid)


def throughput(client: Any) -> Throughput:
    """The device's throughput: from this process, the store, or measured now (and stored)."""
    from .keys import throughput_id

    tid = throughput_id(client)
    t = _memory.get(tid)
    if t is not None:
        return t
    with _lock:
        t = _memory.get(tid)
        if t is not None:
            return t
        t = _load(tid)
        if t is None:
            t = probe(client)
            _save(tid, t)
        _memory[tid] = t
        return t


def prepare(client: Any) -> None:
    """Where the probes will run (no result in this process or the store), launch the probe
    kernel once so that it compiles together with the candidates the tuner prepares (called
    inside ``client.preparing()``: the launch runs nothing)."""
    from .keys import throughput_id

    tid = throughput_id(client)
    with _lock:
        if tid in _memory:
            return
        t = _load(tid)
        if t is not None:
            _memory[tid] = t
            return
    from .. import dtype as dt
    from ..cube import CubeCount, CubeDim, lines
    from ..cube.runtime.tensor import CubeTensor, contiguous_strides

    n = _W * _DIM
    x, out = (
        CubeTensor(client, client.empty(n * 4), (n,), contiguous_strides((n,)), 0, dt.float32) for _ in range(2)
    )
    throughput_probe.launch(client, CubeCount(1), CubeDim(_DIM), lines(x, _W), lines(out, _W), 0, 0)


def invalidate(client: Any) -> None:
    """Forget the device's probe results (here and in the store): a kernel ran clearly faster
    than their bound, so they were measured on a busy device; the next tuning re-measures."""
    from ..environment.store import get_store
    from .keys import throughput_id

    tid = throughput_id(client)
    with _lock:
        _memory.pop(tid, None)
        get_store().delete(_namespace(tid), PROBE_VERSION)


def _load(tid: str) -> Throughput | None:
    from ..environment.store import get_store

    try:
        v = get_store().get_json(_namespace(tid), PROBE_VERSION)
        return Throughput(**v) if isinstance(v, dict) else None
    except (TypeError, ValueError):
        return None


def _save(tid: str, t: Throughput) -> None:
    from ..environment.store import get_store

    get_store().put_json(_namespace(tid), PROBE_VERSION, asdict(t))


def _best(client: Any, fn: Any, reps: int) -> float:
    """Fastest of ``reps`` timed calls of ``fn`` (client.profile: device timing)."""
    best = float("inf")
    for _ in range(reps):
        best = min(best, client.profile(fn)[1])
    return best


def probe(client: Any) -> Throughput:
    """Measure the three probes now (``probe`` spans, one per probe)."""
    from .. import dtype as dt
    from ..cube import CubeCount, CubeDim, lines
    from ..cube.runtime.tensor import CubeTensor, contiguous_strides

    t_start = time.perf_counter()
    dim = CubeDim(_DIM)

    def tensor(n: int) -> CubeTensor:
        return CubeTensor(client, client.empty(n * 4), (n,), contiguous_strides((n,)), 0, dt.float32)

    def launch(x: CubeTensor, out: CubeTensor, mode: int, iters: int, cubes: int) -> None:
        throughput_probe.launch(client, CubeCount(cubes), dim, lines(x, _W), lines(out, _W), mode, iters)

    # launch overhead: the fastest of a few rounds of back-to-back empty launches
    # (distinct buffers everywhere: an aliased pair would be another kernel variant, in place)
    small, small_out = tensor(_W * _DIM), tensor(_W * _DIM)
    with tracing.span("probe", probe="launch_overhead"):
        launch(small, small_out, 0, 0, 1)  # compiles (or loads) the probe kernel
        n = 64
        per_launch = _best(client, lambda: [launch(small, small_out, 0, 0, 1) for _ in range(n)], 3) / n

    # bandwidth: copy 2 x 32 MiB (beyond the last-level cache of most machines)
    elems = 8 << 20
    src = tensor(elems)
    dst = tensor(elems)
    cubes = elems // _W // _DIM
    with tracing.span("probe", probe="bandwidth"):
        launch(src, dst, 1, 0, cubes)  # first touch of the pages
        bw = 2 * elems * 4 / _best(client, lambda: launch(src, dst, 1, 0, cubes), 3)
    src = dst = None  # 64 MiB back to the pool

    # compute: enough units for every core (and a GPU's SMs), enough rounds to dwarf the launch
    units = 64 * _DIM
    buf = tensor(units * _W)
    out = tensor(units * _W)
    import numpy as np

    # defined inputs: a recycled buffer may hold denormals, which slow FMAs down by far
    client.write(buf.buffer, np.ones(units * _W, np.float32))
    with tracing.span("probe", probe="compute"):
        iters = 256
        launch(buf, out, 2, iters, units // _DIM)
        while True:  # grow until one launch takes ~2 ms, so launch cost vanishes
            s = client.profile(lambda n=iters: launch(buf, out, 2, n, units // _DIM))[1]
            if s >= 1.5e-3 or iters >= 1 << 22:
                break
            iters *= max(2, min(16, int(2e-3 / max(s, 1e-7))))
        # best of several: a busy machine only ever makes a sample slower
        flops = 2.0 * _ACC * _W * units * iters
        peak = flops / min(s, _best(client, lambda: launch(buf, out, 2, iters, units // _DIM), 5))

    matrix = None
    mp = getattr(client, "probe_matrix_flops", None)
    if callable(mp):
        with tracing.span("probe", probe="matrix"):
            matrix = float(mp())
    t = Throughput(peak, bw, per_launch, matrix, time.perf_counter() - t_start)
    from ..environment import log

    if log.enabled("autotune"):
        log.logger("autotune").debug(
            "throughput probes (%.0f ms): peak %.1f GFLOP/s, bandwidth %.1f GB/s, launch %.2f us%s",
            t.probe_s * 1e3,
            peak / 1e9,
            bw / 1e9,
            per_launch * 1e6,
            f", matrix {matrix / 1e9:.1f} GFLOP/s" if matrix else "",
        )
    return t
