"""The compile-only path: render every kernel the library generates for a GPU target and compile
it, on any machine (no GPU, no driver).

``ember compile-check cuda --arch sm_90`` drives the Cube backend through the whole op catalog
(every op family x dtype, several layouts so each line width and the strided forms appear, all
matmul candidates, the random distributions) on a *compile-only client*: a device whose memory
is host memory and whose launches do nothing, while its pipeline table renders each new kernel
with the target's compiler and compiles it (NVRTC to a cubin for ``--arch``). Kernels are
deduplicated by KernelId exactly as on a real device, so the set checked is the set a device
would compile. Ops whose host logic needs real data (none today, at worst a few) are counted
as ``skipped``, never as passing; compilation errors are failures with the compiler's log.

``ember compile-check c --checked`` does the same for the CPU runtime's C target in checked
mode (``EMBER_CUBE_CHECKED=1``: every array access bounds-tested): each distinct kernel goes
through the C compiler's full semantic analysis (``-fsyntax-only``, the configured compiler and
flags), so a built-in kernel that checked mode cannot compile fails the check, not a user's run.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtype as dt
from . import ops
from .errors import CompilationError

__all__ = ["CompileOnlyClient", "CheckReport", "run_check", "main"]


@dataclass
class _Rendered:
    """What a launch needs from a pipeline (launches on the compile-only client do nothing)."""

    kernel_id: Any
    entry: str
    source: Any
    fn: Any = None
    #: a target other than the check's (``sm_90a`` for the wgmma kernels)
    arch: str | None = None


class _Server:
    """Renders and records kernels; compiles them later (in parallel) or at once."""

    def __init__(self, compiler: Any, arch: str) -> None:
        from .cube.runtime.service import InlineChannel

        self.compiler = compiler
        self.arch = arch
        self.stage = "DSD-check-0"
        self.downstream = InlineChannel(self.stage)
        self.pipelines: dict[Any, _Rendered] = {}
        self.render_errors: list[tuple[str, str]] = []

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> _Rendered:
        p = self.pipelines.get(kid)
        if p is None:
            try:
                src = self.compiler.compile(make_ir())
            except Exception as e:  # a construct the target cannot render: a failure of the check
                self.render_errors.append((kid.entry(), f"{type(e).__name__}: {e}"))
                raise
            p = self.pipelines[kid] = _Rendered(kid, src.entry, src)
        return p

    def launch(self, compiled: Any, tensors: Any, info: Any, count: Any) -> None:
        return None

    def sync(self) -> None:
        return None


class CompileOnlyClient:
    """The client contract over host memory, with a server that only renders kernels."""

    def __init__(self, runtime: str, compiler: Any, arch: str) -> None:
        from .cube.runtime.memory import MemoryPool

        self.runtime = runtime
        self.index = 0
        self.server = _Server(compiler, arch)
        self.pool = MemoryPool()
        self.device_id = f"compile-only/{runtime}<{arch}>"
        if runtime == "cuda":  # line widths as the runtime's client chooses them
            from .cube.runtime.cuda import CudaClient

            self.max_line_bytes = CudaClient.max_line_bytes

    @property
    def name(self) -> str:
        return self.runtime

    def empty(self, nbytes: int) -> Any:
        return self.pool.reserve(nbytes)

    def create(self, array: np.ndarray) -> Any:
        buf = self.pool.reserve(array.nbytes)
        if array.nbytes:
            np.copyto(buf.view(array.dtype, array.shape), array, casting="no")
        return buf

    def write(self, buf: Any, array: np.ndarray, byte_offset: int = 0) -> None:
        if array.nbytes:
            np.copyto(buf.view(array.dtype, array.shape, None, byte_offset), array, casting="no")

    def read(self, buf: Any, dtype: Any, shape: Any, strides: Any = None, byte_offset: int = 0) -> np.ndarray:
        return np.array(buf.view(dtype, shape, strides, byte_offset), copy=True, order="C")

    def read_scalar(self, buf: Any, dtype: Any, byte_offset: int = 0) -> Any:
        # the backend reads its index-error flags after a read: kernels never run here, so the
        # flags hold what was written (zeros)
        return self.read(buf, dtype, (), (), byte_offset)[()]

    def pipeline(self, kid: Any, make_ir: Callable[[], Any]) -> Any:
        return self.server.pipeline(kid, make_ir)

    def sync(self) -> None:
        return None

    def profile(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        # nothing runs: a tuner sees every candidate take the same (nonzero) time
        return fn(), 1e-6


# --------------------------------------------------------------------------- the op sweep
#: binary ops the Tensor API runs in a float dtype only (true division, and the registry's
#: float-only binary ops: atan2, logaddexp, hypot, ...)
_FLOAT_BINARY = frozenset({"div"} | set(ops.names("binary", where=lambda op: op.float_only)))
_SHAPES = ((256,), (8, 32), (3, 5, 7))  # lines of 16 / 8 / strided-odd layouts


def _data(shape: tuple[int, ...], d: dt.DType, rng: np.random.Generator) -> np.ndarray:
    if d is dt.bool_:
        return rng.random(shape) < 0.5
    if d.is_floating_point:
        return rng.uniform(0.5, 2.0, shape).astype(d.np)
    return rng.integers(1, 5, shape).astype(d.np)


def _scalar(d: dt.DType) -> Any:
    return True if d is dt.bool_ else (1.5 if d.is_floating_point else 2)


def _sweep(bk: Any, dtypes: Iterable[dt.DType], families: set[str]) -> Iterable[tuple[str, Callable[..., Any], tuple]]:
    """(label, function, arguments) for every op form of the selected families; run in order."""
    from .backends import base

    rng = np.random.default_rng(0)
    for d in dtypes:
        num = d is not dt.bool_
        fl = d.is_floating_point
        s = _scalar(d)
        ts = [bk.from_data(_data(sh, d, rng), d) for sh in _SHAPES]
        t2 = ts[1]
        perm = bk.permute(ts[2], (2, 0, 1))
        if "elementwise" in families:
            for t in (*ts, perm):
                tag = f"{d.name}/{t.shape}"
                for op in base.UNARY_OPS:
                    if num and (fl or op not in base.FLOAT_UNARY):
                        yield f"{op}/{tag}", getattr(bk, op), (t,)
                for op in base.PREDICATE_OPS:
                    yield f"{op}/{tag}", getattr(bk, op), (t,)
                for op in base.ARITH_OPS + base.COMPARE_OPS:
                    if num and (fl or op not in _FLOAT_BINARY):
                        yield f"{op}/{tag}", getattr(bk, op), (t, t)
                if num and not fl:  # bitwise ops: integers only
                    for op in base.BITWISE_OPS:
                        yield f"{op}/{tag}", getattr(bk, op), (t, t)
                if not num:
                    for op in base.LOGICAL_OPS:
                        yield f"{op}/{tag}", getattr(bk, op), (t, t)
                if num:
                    for op in base.SCALAR_OPS:
                        if fl or op not in _FLOAT_BINARY:
                            yield f"{op}_scalar/{tag}", getattr(bk, f"{op}_scalar"), (t, s)
                    for op in base.REVERSED_SCALAR_OPS:
                        if fl or op not in _FLOAT_BINARY:
                            yield f"r{op}_scalar/{tag}", getattr(bk, f"r{op}_scalar"), (t, s)
                    yield f"clamp/{tag}", bk.clamp, (t, s, None)
                    yield f"clamp2/{tag}", bk.clamp, (t, s, 3 * s)
            mask = bk.from_data(rng.random(t2.shape) < 0.5, dt.bool_)
            yield f"where/{d.name}", bk.where, (mask, t2, t2)
            yield f"masked_fill/{d.name}", bk.masked_fill, (t2, mask, s)
            if num:
                row = bk.expand(bk.slice(t2, (slice(0, 1), slice(None))), (8, 32))
                yield f"broadcast/{d.name}", bk.add, (row, t2)
            for o in dt.ALL:
                yield f"cast/{d.name}->{o.name}", bk.cast, (t2, o)
                yield f"cast-strided/{d.name}->{o.name}", bk.cast, (perm, o)
        if "layout" in families:
            yield f"contiguous/{d.name}", bk.contiguous, (perm,)
            yield f"flip/{d.name}", bk.flip, (t2, (1,))
            yield f"slice/{d.name}", bk.contiguous, (bk.slice(t2, (slice(1, 7, 2), slice(None))),)
            yield f"cat/{d.name}", bk.cat, ([t2, t2], 1)
            yield f"pad/{d.name}", bk.pad, (t2, ((1, 1), (2, 0)), s)
            yield f"tril/{d.name}", bk.tril, (t2, 0)
            yield f"triu/{d.name}", bk.triu, (t2, 1)
            yield f"full/{d.name}", bk.full, ((5, 9), s, d)
        if "index" in families:
            idx = bk.from_data(rng.integers(0, 8, (4, 32)).astype(np.int64), dt.int64)
            idx1 = bk.from_data(np.array([0, 3, 1], np.int64), dt.int64)
            src = bk.from_data(_data((4, 32), d, rng), d)
            vals = bk.from_data(_data((3, 32), d, rng), d)
            sv = bk.from_data(_data((2, 32), d, rng), d)
            yield f"gather/{d.name}", bk.gather, (t2, 0, idx)
            yield f"scatter/{d.name}", bk.scatter, (t2, 0, idx, src)
            yield f"index_select/{d.name}", bk.index_select, (t2, 0, idx1)
            yield f"index/{d.name}", bk.index, (t2, (idx1,))
            yield f"index_put/{d.name}", bk.index_put, (t2, (idx1,), vals, False)
            yield f"slice_assign/{d.name}", bk.slice_assign, (t2, (slice(0, 2), slice(None)), sv)
            if num:
                yield f"scatter_add/{d.name}", bk.scatter_add, (t2, 0, idx, src)
                yield f"index_put_acc/{d.name}", bk.index_put, (t2, (idx1,), vals, True)
        if "reduce" in families:
            big = bk.from_data(_data((4, 4096), d, rng), d)
            for t, dims in ((t2, (1,)), (t2, (0,)), (ts[2], (1,)), (ts[2], (0, 2)), (big, (1,)), (big, (0, 1))):
                tag = f"{d.name}/{t.shape}{dims}"
                for op in base.REDUCE_OPS:
                    if num or op in ("all", "any"):
                        yield f"{op}/{tag}", getattr(bk, op), (t, dims, False)
                if num:
                    for op in base.ARG_REDUCE_OPS:
                        yield f"{op}/{tag}", getattr(bk, op), (t, dims[0], False)
                    for op in ops.primitives("scan"):
                        yield f"{op}/{tag}", getattr(bk, op), (t, dims[0])
                if fl:
                    yield f"softmax/{tag}", bk.softmax, (t, dims[0])
                    yield f"log_softmax/{tag}", bk.log_softmax, (t, dims[0])
                    yield f"logsumexp/{tag}", bk.logsumexp, (t, dims, False)
                    yield f"mean/{tag}", bk.mean, (t, dims, False)
                    yield f"var/{tag}", bk.var, (t, dims, 1.0, False)
            # every dtype sorts (bool as uint8): rows within one cube's shared memory, and rows
            # long enough for the global stages
            long = bk.from_data(_data((2, 20000), d, rng), d)
            for t, dim in ((t2, 1), (t2, 0), (ts[2], 1), (long, 1)):
                for op in ops.primitives("sort"):
                    for desc in (False, True):
                        yield f"{op}/{d.name}/{t.shape}[{dim}]{'desc' if desc else ''}", getattr(bk, op), \
                            (t, dim, desc, True)
        if "matmul" in families and num:
            from .backends.cube.matmul import MATMUL_CANDIDATES

            a = bk.from_data(_data((2, 64, 48), d, rng), d)
            b = bk.from_data(_data((2, 48, 80), d, rng), d)
            yield f"matmul/{d.name}", bk.matmul, (a, b)
            for cand in MATMUL_CANDIDATES:
                yield f"matmul[{cand.name}]/{d.name}", _run_candidate, (bk, cand, a, b)
        if "attention" in families and d in (dt.float32, dt.float16, dt.bfloat16):
            # the fused attention kernels: forward, dq, dk/dv; causal and not, rows in lines of
            # 4 and (an odd head dim) of 1
            for e in (64, 5):
                q = bk.from_data(_data((2, 3, 70, e), d, rng), d)
                kv = bk.from_data(_data((2, 3, 40, e), d, rng), d)
                for causal in (False, True):
                    tag = f"{d.name}/e{e}{'/causal' if causal else ''}"
                    yield f"sdpa/{tag}", bk.sdpa, (q, kv, kv, 0.125, causal)
                    o = bk.from_data(_data((2, 3, 70, e), d, rng), d)
                    yield f"sdpa_backward/{tag}", bk.sdpa_backward, (o, q, kv, kv, o, 0.125, causal)
        if "random" in families:
            if fl:
                for dist in ("uniform", "normal"):
                    yield f"random-{dist}/{d.name}", bk.random, (dist, (1000,), d, 7, 0, 0.0, 1.0)
            if num:
                yield f"random-randint/{d.name}", bk.random, ("randint", (1000,), d, 7, 0, 0, 5)


def _fusion_sweep(bk: Any, dtypes: Iterable[dt.DType]) -> Iterable[tuple[str, Callable[..., Any], tuple]]:
    """Fused kernels: op chains on the Fusion decorator over the compile-only backend (the
    fusers build their kernels at drain time; ``into_data`` drains)."""
    from .backends.cube.fusers import default_fusers
    from .backends.fusion import Fusion

    fz = Fusion(bk, fusers=default_fusers(bk), stage="DSU-check-0")
    rng = np.random.default_rng(1)
    for d in dtypes:
        if d is dt.bool_:
            continue
        x = fz.from_data(_data((64, 256), d, rng), d)
        y = fz.from_data(_data((64, 256), d, rng), d)
        row = fz.from_data(_data((1, 256), d, rng), d)
        yield f"fused-chain/{d.name}", _fused_chain, (fz, x, y, row, d)
        if d is dt.float32:  # long enough for the lines form's several lines per unit
            big = fz.from_data(np.zeros(1 << 18, np.float32), d)
            yield f"fused-chain-long/{d.name}", _fused_chain_long, (fz, big)
        if d.is_floating_point:
            w = fz.from_data(_data((256, 128), d, rng), d)
            bias = fz.from_data(_data((1, 128), d, rng), d)
            yield f"fused-matmul-epilogue/{d.name}", _fused_matmul, (fz, x, w, bias)


def _fused_chain(fz: Any, x: Any, y: Any, row: Any, d: dt.DType) -> None:
    z = fz.mul(fz.add(x, y), fz.expand(row, x.shape))
    if d.is_floating_point:
        z = fz.sqrt(fz.abs(fz.sub_scalar(fz.exp(z), 1.0)))
    fz.into_data(fz.maximum(z, x))
    fz.into_data(fz.sum(fz.mul(x, y), (1,), False))


def _fused_chain_long(fz: Any, x: Any) -> None:
    fz.into_data(fz.sqrt(fz.abs(fz.mul(fz.sigmoid(fz.add_scalar(x, 1.0)), x))))


def _fused_matmul(fz: Any, x: Any, w: Any, bias: Any) -> None:
    h = fz.add(fz.matmul(x, w), fz.expand(bias, (x.shape[0], w.shape[1])))
    fz.into_data(fz.relu(h))


def _run_candidate(bk: Any, cand: Any, a: Any, b: Any) -> None:
    a2, b2, out = bk._matmul_operands(a, b)
    cand.launch(bk, a2, b2, out)


FAMILIES = ("elementwise", "layout", "index", "reduce", "matmul", "attention", "random", "fusion")


@dataclass
class CheckReport:
    target: str
    arch: str
    kernels: int = 0
    compiled: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    ops: int = 0
    render_seconds: float = 0.0
    compile_seconds: float = 0.0
    cubin_bytes: int = 0
    from_store: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures and self.kernels > 0

    def summary(self) -> str:
        return (
            f"compile-check {self.target} --arch {self.arch}: {self.ops} op forms, {self.kernels} kernels, "
            f"{self.compiled} compiled ({self.from_store} from the store), {len(self.failures)} failed, "
            f"{len(self.skipped)} op forms skipped; render {self.render_seconds:.1f} s, "
            f"compile {self.compile_seconds:.1f} s, {self.cubin_bytes / 1e6:.1f} MB of cubins"
        )


def run_check(
    target: str = "cuda",
    arch: str = "sm_90",
    dtypes: Iterable[dt.DType] | None = None,
    families: Iterable[str] | None = None,
    jobs: int = 2,
    limit: int | None = None,
    keep_sources: dict[str, str] | None = None,
    fresh: bool = False,
    checked: bool = False,
) -> CheckReport:
    """Render the selected op families for ``target`` (``cuda``, or ``c``: the CPU runtime's C)
    and compile every distinct kernel (a cubin the store already holds for the exact source and
    NVRTC is taken from it unless ``fresh``; new cubins are stored, as the cuda runtime would).
    ``checked``: the C target in checked mode (bounds-tested accesses)."""
    if target not in ("cuda", "c"):
        raise ValueError(f"compile-check knows the cuda and c targets, got {target!r}")
    from .backends.cube.backend import CubeBackend

    if target == "c":
        return _run_c(dtypes, families, jobs, limit, keep_sources, checked)
    from .cube.compiler.cuda import CudaCompiler
    from .cube.runtime.cuda_nvrtc import nvrtc, stored_compile

    compiler = CudaCompiler(arch)
    nv = nvrtc()
    client = CompileOnlyClient(target, compiler, arch)
    bk = CubeBackend(client)
    rep = CheckReport(target, arch)
    fams = set(families or FAMILIES)
    t0 = time.perf_counter()
    sweep = _sweep(bk, dtypes or dt.ALL, fams)
    if "fusion" in fams:
        sweep = itertools.chain(sweep, _fusion_sweep(bk, dtypes or dt.ALL))
    _render_sweep(client, sweep, rep)
    rep.render_seconds = time.perf_counter() - t0
    pipes = list(client.server.pipelines.values())
    if limit is not None and len(pipes) > limit:
        # an evenly spaced sample: every family and dtype of the sweep order keeps a share
        step = len(pipes) / max(limit, 1)
        pipes = [pipes[int(i * step)] for i in range(limit)]
    rep.kernels = len(pipes)

    if "matmul" in fams and compiler.capabilities.matrix_units:
        # the hand-written tensor-core kernels (mma.sync) of the cuda runtime
        from .backends.cube.cuda_kernels.mma import MMA_SOURCE
        from .cube.compiler.base import CompiledSource

        pipes.append(_Rendered(None, "em_mma", CompiledSource("em_mma", MMA_SOURCE, "cuda", [], [])))
        rep.kernels += 1
        # float32 operands as tf32 (precision "high" / "medium")
        from .backends.cube.cuda_kernels.mma import MMA_TF32_SOURCE

        pipes.append(_Rendered(None, "em_mma_tf32", CompiledSource("em_mma_tf32", MMA_TF32_SOURCE, "cuda", [], [])))
        rep.kernels += 1
        # the operand transposes of the tensor-core matmuls
        from .backends.cube.cuda_kernels.transpose import TRANSPOSE_SOURCE

        pipes.append(_Rendered(None, "em_transpose", CompiledSource("em_transpose", TRANSPOSE_SOURCE, "cuda", [], [])))
        rep.kernels += 1
        # IEEE float32 on CUDA cores: every hand-written SGEMM tile the tuner times
        from .backends.cube.cuda_kernels.sgemm import SGEMM_TILES, _source

        for t in SGEMM_TILES:
            pipes.append(_Rendered(None, t.entry, CompiledSource(t.entry, _source(t), "cuda", [], [])))
            rep.kernels += 1
        if arch in ("sm_90", "sm_90a"):
            # wgmma + TMA (Hopper): the sm_90a target whatever the check's arch spelling
            from .backends.cube.cuda_kernels.wgmma import _CONFIGS, WGMMA_ARCH

            # every tile config the launcher can pick: widths, with and without the staged epilogue
            for (bn, staged), (text, _) in _CONFIGS.items():
                name = f"em_wgmma_n{bn}" + ("_staged" if staged else "")
                pipes.append(_Rendered(None, name, CompiledSource(name, text, "cuda", [], []), arch=WGMMA_ARCH))
                rep.kernels += 1
            from .backends.cube.cuda_kernels.wgmma import layout_configs, layout_suffix

            # the operand-layout variants (transposed operands read in place)
            for (bn, staged, a_mn, b_k), (text, _) in layout_configs().items():
                name = f"em_wgmma_n{bn}" + ("_staged" if staged else "") + layout_suffix(a_mn, b_k)
                pipes.append(_Rendered(None, name, CompiledSource(name, text, "cuda", [], []), arch=WGMMA_ARCH))
                rep.kernels += 1
            from .backends.cube.cuda_kernels.wgmma import _CONFIGS_TF32

            for bn, (text, _) in _CONFIGS_TF32.items():
                name = f"em_wgmma_tf32_n{bn}"
                pipes.append(_Rendered(None, name, CompiledSource(name, text, "cuda", [], []), arch=WGMMA_ARCH))
                rep.kernels += 1

    def build(p: _Rendered) -> tuple[_Rendered, int, str | None]:
        try:
            target = p.arch or arch
            if fresh:
                cubin, _ = nv.compile(p.source.source, p.entry, target)
            else:
                cubin, hit = stored_compile(nv, p.source.source, p.entry, target)
                if hit:
                    rep.from_store += 1
            return p, len(cubin), None
        except CompilationError as e:
            return p, 0, e.log or str(e)

    t1 = time.perf_counter()
    with ThreadPoolExecutor(max(1, jobs)) as ex:
        for p, size, err in ex.map(build, pipes):
            if keep_sources is not None:
                keep_sources[p.entry] = p.source.source
            if err is None:
                rep.compiled += 1
                rep.cubin_bytes += size
            else:
                rep.failures.append((p.entry, err))
    rep.compile_seconds = time.perf_counter() - t1
    return rep


def _render_sweep(client: CompileOnlyClient, sweep: Iterable[tuple[str, Callable[..., Any], tuple]],
                  rep: CheckReport) -> None:
    for label, fn, args in sweep:
        rep.ops += 1
        n_err = len(client.server.render_errors)
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - recorded; render errors are failures
            if len(client.server.render_errors) > n_err:
                entry, msg = client.server.render_errors[-1]
                rep.failures.append((f"{label} ({entry})", msg))
            else:
                rep.skipped.append((label, f"{type(e).__name__}: {e}".splitlines()[0]))


def _run_c(
    dtypes: Iterable[dt.DType] | None,
    families: Iterable[str] | None,
    jobs: int,
    limit: int | None,
    keep_sources: dict[str, str] | None,
    checked: bool,
) -> CheckReport:
    """The C target: render the sweep with the CPU runtime's C compiler and run the system C
    compiler's semantic analysis on every distinct kernel (``-fsyntax-only``: type errors,
    undeclared names, bad conditionals; no code generation, so a few hundred kernels take
    seconds)."""
    import os
    import subprocess
    import tempfile

    from .backends.cube.backend import CubeBackend
    from .cube.compiler.c import CCompiler
    from .cube.runtime.cpu import CToolchain

    tc = CToolchain()
    tc.ensure()
    arch = "checked" if checked else "plain"
    client = CompileOnlyClient("cpu", CCompiler(checked=checked), arch)
    bk = CubeBackend(client)
    rep = CheckReport("c", arch)
    fams = set(families or FAMILIES)
    t0 = time.perf_counter()
    sweep = _sweep(bk, dtypes or dt.ALL, fams)
    if "fusion" in fams:
        sweep = itertools.chain(sweep, _fusion_sweep(bk, dtypes or dt.ALL))
    _render_sweep(client, sweep, rep)
    rep.render_seconds = time.perf_counter() - t0
    pipes = list(client.server.pipelines.values())
    if limit is not None and len(pipes) > limit:
        step = len(pipes) / max(limit, 1)
        pipes = [pipes[int(i * step)] for i in range(limit)]
    rep.kernels = len(pipes)
    flags = [f for f in tc.flags if f not in ("-shared", "-fPIC")]

    def build(p: _Rendered, d: str) -> tuple[_Rendered, str | None]:
        src = os.path.join(d, f"{p.entry}.c")
        with open(src, "w") as f:
            f.write(p.source.source)
        try:
            r = subprocess.run([*tc.command, *flags, "-fsyntax-only", src], capture_output=True, text=True,
                               timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            return p, str(e)
        return p, None if r.returncode == 0 else (r.stderr or r.stdout or f"exit {r.returncode}")

    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ember-check-") as d, ThreadPoolExecutor(max(1, jobs)) as ex:
        for p, err in ex.map(lambda p: build(p, d), pipes):
            if keep_sources is not None:
                keep_sources[p.entry] = p.source.source
            if err is None:
                rep.compiled += 1
            else:
                rep.failures.append((p.entry, err))
    rep.compile_seconds = time.perf_counter() - t1
    return rep


def main(argv: list[str] | None = None) -> int:
    import argparse
    import os

    p = argparse.ArgumentParser(prog="ember compile-check", description=__doc__.splitlines()[0])
    p.add_argument("target", choices=["cuda", "c"])
    p.add_argument("--checked", action="store_true", help="c target: checked mode (bounds-tested accesses)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--dtypes", default="", help="comma-separated dtype names (default: all)")
    p.add_argument("--families", default="", help=f"comma-separated, of {','.join(FAMILIES)} (default: all)")
    p.add_argument("--jobs", type=int, default=max(1, min(8, os.cpu_count() or 1)))
    p.add_argument("--sources", default="", help="write every rendered kernel to this folder")
    p.add_argument("-v", "--verbose", action="store_true", help="list skipped op forms")
    p.add_argument("--fresh", action="store_true", help="compile every kernel, even those the store holds")
    a = p.parse_args(argv)
    dtypes = [dt.as_dtype(n) for n in a.dtypes.split(",") if n] if a.dtypes else None
    fams = [f for f in a.families.split(",") if f] or None
    keep: dict[str, str] | None = {} if a.sources else None
    rep = run_check(a.target, a.arch, dtypes, fams, a.jobs, keep_sources=keep, fresh=a.fresh, checked=a.checked)
    if keep is not None:
        os.makedirs(a.sources, exist_ok=True)
        for entry, src in keep.items():
            with open(os.path.join(a.sources, f"{entry}.cu"), "w") as f:
                f.write(src)  # .cu names for both targets: the folder is for reading
    for name, log in rep.failures:
        print(f"FAILED {name}\n    " + "\n    ".join(log.strip().splitlines()[:12]))
    if a.verbose:
        for name, why in rep.skipped:
            print(f"skipped {name}: {why}")
    print(rep.summary())
    return 0 if rep.ok else 1
