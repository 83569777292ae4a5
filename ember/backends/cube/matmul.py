"""Matmul family of the Cube backend: candidates, their launchers and the static choice.

``MATMUL_CANDIDATES`` lists every kernel family as a ``MatmulCandidate`` (name, launcher,
validity predicate); the autotune issue benchmarks them. Until then ``choose`` picks one with
a static heuristic:

* ``naive`` for tiny products (``m * n * k <= 4096``): one launch, no packing buffers;
  launch overhead dominates there (``ember info``'s 2x2 matmul, the conformance shapes);
* ``blocked`` otherwise: the register-blocked, vectorised kernel (8 x 3W tiles, W = 16 f32
  lanes; floats accumulate with ``cube.fma``: one rounding, one vector FMA per line).

``blocked_muladd`` is the same kernel accumulating floats with a vector multiply and a vector
add (two roundings). It exists because the fma form's speed depends on the C compiler: the C
target emits a line fma as a per-lane ``fma()`` loop that the auto-vectoriser must turn into
vector FMAs. gcc 12 on the project's machine (AMD EPYC, AVX-512) does: the inner loop is 24
``vfmadd231ps zmm`` + 3 loads + 8 broadcasts, no spills. gcc 13 tuned for an AVX-512 Xeon
prefers 256-bit vectors and splits the 16-lane loop badly (measured, 8 x 2W tiles, 1024², 2 cores:
39 GFLOP/s with fma vs 122 with mul+add; with ``-mprefer-vector-width=512`` 156 vs 107).
The mul+add form uses native vector operators, full width on every compiler. The autotune
issue picks per machine; until then the static choice follows the project's machine.

``tiled`` (shared memory) is never chosen on the CPU: its barriers cost per-unit spills
there. It is the portable GPU-shaped candidate the autotuner may still pick on a runtime
where shared memory is fast.

Autotune (``MATMUL_TUNABLES``, ``ember.autotune``): ``MatmulOps.matmul`` runs the tuner's
winner per (device, key); the key anchors batch/m/n/k to the level's buckets and adds the
dtype, both operands' layouts and the problem class. Group 0 holds naive (tiny and medium
products only: 1.85 s at 1024²), blocked, blocked_muladd and the vendor candidate ``numpy``
(numpy/BLAS on the host buffers of the CPU runtime, f32/f64). ``tiled`` is in group 0 where
a cube's units run in parallel (GPU runtimes) and in group 1 on the CPU: the fallback that
runs only when no group-0 candidate produced a result (it is 20x slower than blocked there).
``choose`` (the static heuristic) stays for callers that must not tune.

``gpu<bm>x<bn>x<bk>_<tm>x<tn>[_sb][_at]`` (``GPU_TILES``, kernel in ``matmul_gpu_kernels.py``):
block tiles staged in shared memory, an 8 x 8 (or 4 x 4) register block of line accumulators
per unit, 16-byte global and shared accesses, double buffering (``_sb``: single), A row-major
(``_at``: k-major) in shared memory. Float dtypes, group 0 with the
highest priority where a cube's units run in parallel (timed first on GPUs); priority -1 on the
CPU (never timed there: the barrier phase model runs it correctly but slowly; tests force it
through ``launch_gpu``). ``bench/gpu_matmul_f32.py`` times every tile variant on CUDA and
Vulkan against torch.

Every launcher writes into ``out``, a contiguous (batch..., m, n) tensor, and takes ``a`` and
``b`` already expanded to the output's batch dims (zero strides, no copies). Launchers never
read ``out``, so tests can poison it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ... import autotune, tracing
from ... import dtype as dt
from ...autotune.keys import layout_class, problem_class
from ...cube.launch import CubeCount, CubeDim, lines
from ...cube.runtime.client import shared_limit
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from ...precision import tensor_core_types, tf32_allowed
from . import blas_threads, kernels
from .cuda_kernels import transpose as cuda_transpose
from .matmul_gpu_kernels import matmul_gpu
from .matmul_kernels import MR_MAX, matmul_blocked, matmul_tiled, pack_panels

__all__ = [
    "MatmulOps",
    "MatmulCandidate",
    "MATMUL_CANDIDATES",
    "MATMUL_TUNABLES",
    "choose",
    "BLOCKED_MR",
    "TILE",
    "GpuTiles",
    "GPU_TILES",
    "launch_gpu",
    "matmul_trivial",
    "TRIVIAL_WORK",
]

_DIM = CubeDim(256)
_PACK_DIM = CubeDim(64)
#: cube-level tile of ``matmul_tiled`` (TILE x TILE units per cube)
TILE = 16
#: rows of the register-blocked microkernel
BLOCKED_MR = 8
#: lines of W lanes per tile row (3 x 16 f32 lanes: 8 x 48 tiles, 24 accumulators of the 32
#: AVX-512 registers, three B lines and one broadcast A value beside them)
BLOCKED_NL = 3
#: products up to this many multiply-adds run the naive kernel (a single launch)
NAIVE_MAX_WORK = 4096


@dataclass(frozen=True)
class MatmulCandidate:
    """One kernel family: ``launch(backend, a, b, out)`` and ``valid(a, b)``."""

    name: str
    launch: Callable[[Any, CubeTensor, CubeTensor, CubeTensor], None]
    valid: Callable[[CubeTensor, CubeTensor], bool]


def _dims(a: CubeTensor, b: CubeTensor) -> tuple[int, int, int, int]:
    """(batch, m, k, n) of a launch (operands already expanded to a common batch)."""
    return math.prod(a.shape[:-2]), a.shape[-2], a.shape[-1], b.shape[-1]


def _launch_naive(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    n = math.prod(out.shape)
    if n:
        kernels.matmul_naive.launch(backend.client, CubeCount.covering(n, _DIM), _DIM, a, b, out)


def _launch_tiled(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    batch, m, _, n = _dims(a, b)
    if batch and m and n:
        count = CubeCount(-(-n // TILE), -(-m // TILE), batch)
        matmul_tiled.launch(backend.client, count, CubeDim(TILE, TILE), a, b, out, TILE)


def blocked_line_width(dtype: dt.DType) -> int:
    """Lines of 64 bytes of *register* type (half types compute in f32), at most 16 lanes."""
    reg = 4 if dtype in (dt.float16, dt.bfloat16) else dtype.itemsize
    return min(16, 64 // reg)


def _pack(backend: Any, src: CubeTensor, width: int, rows: bool, batch_shape: tuple[int, ...]) -> CubeTensor:
    """Packed panels of ``src`` (its own, un-broadcast batch dims), returned as a view
    (batch_shape..., panels, k * width) with zero strides where ``src`` was broadcast."""
    r, c = src.shape[-2:]
    p_len, k = (r, c) if rows else (c, r)
    panels = -(-p_len // width)
    own = tuple(1 if st == 0 else s for s, st in zip(src.shape[:-2], src.strides[:-2]))
    # the un-broadcast operand: stride-0 batch dims collapse to one entry
    src = src.with_layout(own + src.shape[-2:], src.strides, src.offset)
    shape = own + (panels, k * width)
    packed = backend._empty(shape, src.dtype)
    units = math.prod(shape) // width  # one unit per (batch, panel, k): width elements
    pack_panels.launch(backend.client, CubeCount.covering(units, _PACK_DIM), _PACK_DIM, src, packed, width, rows)
    strides = tuple(0 if o == 1 and s != 1 else st for o, s, st in zip(own, batch_shape, packed.strides))
    return packed.with_layout(tuple(batch_shape) + shape[-2:], strides + packed.strides[-2:], 0)


def _blocked(mr: int, nl: int, fma: bool) -> Callable[[Any, CubeTensor, CubeTensor, CubeTensor], None]:
    """The register-blocked launcher with tiles of ``mr`` rows x ``nl`` lines (2 lines where
    ``n`` fits in two: less padding for narrow outputs); ``fma``: float dtypes
    accumulate with ``cube.fma`` (one rounding; the C target turns a line fma into a per-lane
    loop the C compiler must vectorise) instead of a multiply and an add (native vector
    operators on every C compiler, two roundings). Integers always multiply-add, exactly."""
    assert 1 <= mr <= MR_MAX and nl in (2, 3)

    def launch(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
        batch, m, k, n = _dims(a, b)
        if not (batch and m and n):
            return
        if k == 0:  # nothing to pack: the sum over an empty axis
            backend._launch_lines(kernels.fill, math.prod(out.shape), out, extra=(_zero(out.dtype),))
            return
        w = blocked_line_width(a.dtype)
        lanes = nl if n > 2 * w else 2
        bshape = a.shape[:-2]
        pa = _pack(backend, a, mr, True, bshape)
        pb = _pack(backend, b, lanes * w, False, bshape)
        count = CubeCount(-(-m // mr), -(-n // (lanes * w)), batch)
        use_fma = fma and a.dtype.is_floating_point
        matmul_blocked.launch(backend.client, count, CubeDim(1), pa, lines(pb, w), out, mr, lanes, use_fma)

    return launch


@dataclass(frozen=True)
class GpuTiles:
    """Comptime shape of ``matmul_gpu``: a ``bm x bn`` block per cube, k steps of ``bk``, a
    ``tm x tn`` register block per unit (``tn`` a multiple of 4: lines of 4), ``db``: double
    buffering, ``at``: A staged k-major (transposed in registers; ``tm`` a multiple of 4).
    Units per cube: ``(bn // tn) * (bm // tm)``."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    db: bool = True
    at: bool = False
    #: cubes per multiprocessor the CUDA compiler must fit (caps registers per unit)
    occ: int = 1

    @property
    def units(self) -> int:
        return (self.bn // self.tn) * (self.bm // self.tm)

    @property
    def name(self) -> str:
        return (
            f"gpu{self.bm}x{self.bn}x{self.bk}_{self.tm}x{self.tn}"
            + ("" if self.db else "_sb")
            + ("_at" if self.at else "")
            + (f"_o{self.occ}" if self.occ > 1 else "")
        )

    def shared_bytes(self, itemsize: int) -> int:
        return (2 if self.db else 1) * (self.bm + self.bn) * self.bk * itemsize


def _lines_of_4(t: CubeTensor) -> int:
    """4 when every row of ``t`` starts a line of 4 along its last axis (contiguous last axis,
    a length, offset and other strides that are multiples of 4), else 1 (scalar loads)."""
    ok = (
        t.shape[-1] % 4 == 0
        and t.offset % 4 == 0
        and (t.strides[-1] == 1 or t.shape[-1] <= 1)
        and not any(st % 4 for st in t.strides[:-1])
    )
    return 4 if ok and t.numel % 4 == 0 else 1


def _gpu_register_bytes(dtype: dt.DType) -> int:
    # shared lines hold registers: half types as f32 on every target that computes them in f32
    return max(4, dtype.itemsize)


def launch_gpu(tiles: GpuTiles, backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    """``matmul_gpu`` with ``tiles``; global accesses in lines of 4 wherever the layouts allow.
    Tiles whose shared memory exceeds the target's (f64 on the 32 KiB f32 tiles) run with
    halved k steps, then single-buffered, so every candidate computes every dtype (the tuner's
    validity check keeps such a candidate from being timed)."""
    batch, m, _, n = _dims(a, b)
    if not (batch and m and n):
        return
    limit = shared_limit(backend.client)
    size = _gpu_register_bytes(a.dtype)
    while limit is not None and tiles.shared_bytes(size) > limit and (tiles.bk > 4 or tiles.db):
        tiles = replace(tiles, bk=tiles.bk // 2) if tiles.bk > 4 else replace(tiles, db=False)
    count = CubeCount(-(-n // tiles.bn), -(-m // tiles.bm), batch)
    use_fma = a.dtype.is_floating_point
    matmul_gpu.launch(
        backend.client,
        count,
        CubeDim(tiles.units),
        lines(a, _lines_of_4(a)),
        lines(b, _lines_of_4(b)),
        lines(out, _lines_of_4(out)),
        tiles.bm,
        tiles.bn,
        tiles.bk,
        tiles.tm,
        tiles.tn,
        use_fma,
        tiles.db,
        tiles.at,
        tiles.occ,
    )


def _gpu(tiles: GpuTiles) -> Callable[[Any, CubeTensor, CubeTensor, CubeTensor], None]:
    def launch(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
        launch_gpu(tiles, backend, a, b, out)

    return launch


#: the GPU-shaped candidates (``matmul_gpu_kernels``), 256 units each. 8 x 8 outputs per unit
#: on 128 x 128 blocks: double-buffered with k steps of 16 (32 KiB of shared memory; the sm_90
#: main loop is 83% FFMA by instruction count, 181 registers: one cube per SM); single-buffered
#: with k steps of 32 and A k-major (32 KiB, 86% FFMA, 121 registers: two cubes per SM hide
#: each other's barriers); double-buffered with k steps of 8 (16 KiB: fits WGSL's minimum
#: limit). 4 x 4 per unit on 64 x 64 blocks for products with few 128-blocks per SM.
#: ``bench/gpu_matmul_f32.py`` ranks these and more variants on CUDA and Vulkan (results under
#: bench/results/). The first forces two cubes per SM on CUDA (``occ=2``: 128 registers, no
#: spills): double buffering and a second cube hiding the barriers; elsewhere it is the k-major
#: double-buffered tile.
GPU_TILES = (
    GpuTiles(128, 128, 16, 8, 8, at=True, occ=2),
    GpuTiles(128, 128, 16, 8, 8),
    GpuTiles(128, 128, 32, 8, 8, db=False, at=True),
    GpuTiles(128, 128, 8, 8, 8),
    GpuTiles(64, 64, 8, 4, 4),
)


def _zero(dtype: dt.DType) -> Any:
    return False if dtype is dt.bool_ else (0.0 if dtype.is_floating_point else 0)


def _numeric(a: CubeTensor, b: CubeTensor) -> bool:
    return a.dtype is not dt.bool_


MATMUL_CANDIDATES: list[MatmulCandidate] = [
    MatmulCandidate("naive", _launch_naive, _numeric),
    MatmulCandidate("tiled", _launch_tiled, _numeric),
    MatmulCandidate("blocked", _blocked(BLOCKED_MR, BLOCKED_NL, True), _numeric),
    MatmulCandidate("blocked_muladd", _blocked(BLOCKED_MR, BLOCKED_NL, False), _numeric),
    *(MatmulCandidate(t.name, _gpu(t), _numeric) for t in GPU_TILES),
]
_BY_NAME = {c.name: c for c in MATMUL_CANDIDATES}


def choose(a: CubeTensor, b: CubeTensor) -> MatmulCandidate:
    """The static heuristic (see the module docstring)."""
    _, m, k, n = _dims(a, b)
    return _BY_NAME["naive" if m * n * k <= NAIVE_MAX_WORK else "blocked"]


# ------------------------------------------------------------------------------ autotune


def _host_view(t: CubeTensor) -> np.ndarray:
    """numpy view of a tensor in host memory (CPU runtime buffers)."""
    size = t.dtype.itemsize
    return t.buffer.view(t.dtype.np, t.shape, tuple(s * size for s in t.strides), t.offset * size)


def _launch_numpy(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    """The vendor candidate: numpy (OpenBLAS/MKL) on the CPU runtime's host buffers. It opens
    a ``launch`` span like a kernel (field ``vendor``), so launch counts see it."""
    if backend.client.server.preparing_here():
        return  # launches run nothing now (``preparing``): nor does the vendor routine
    backend.client.sync()  # earlier launches may still be queued on the service thread
    av, bv, ov = _host_view(a), _host_view(b), _host_view(out)
    # a small product on one BLAS thread (``blas_threads``: its workers stall on shared cores)
    one = blas_threads.one_thread() if blas_threads.serial_matmul(math.prod(out.shape) * a.shape[-1]) else None
    try:
        if tracing.active:
            with tracing.span("launch", kernel="vendor:numpy.matmul", vendor=True):
                np.matmul(av, bv, out=ov)
        else:
            np.matmul(av, bv, out=ov)
    finally:
        blas_threads.restore(one)


def _vendor_valid(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> bool:
    return getattr(backend.client, "runtime", None) == "cpu" and a.dtype in (dt.float32, dt.float64)


def _own_valid(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> bool:
    return a.dtype is not dt.bool_


def _tensor_core_dtype(a: CubeTensor) -> bool:
    """f16/bf16 always; float32 (as tf32) only under precision "high" / "medium"."""
    return a.dtype.name in tensor_core_types()


def _mma_valid(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> bool:
    if getattr(backend.client, "runtime", None) != "cuda" or not _tensor_core_dtype(a):
        return False
    from .cuda_kernels import mma as cuda_mma

    return cuda_mma.candidate_valid(a, b)


def _launch_mma(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    """Tensor cores (mma.sync, f16/bf16, tiles of 128): a decision is shared by a whole size
    bucket, so a shape of the bucket the tiles do not divide runs the tiled kernel instead."""
    from .cuda_kernels import mma as cuda_mma

    if cuda_mma.candidate_valid(a, b):
        cuda_mma.candidate_launch(backend, a, b, out)
    else:
        _launch_tiled(backend, a, b, out)


def _as_row_major(backend: Any, t: CubeTensor, copy: bool) -> CubeTensor:
    """``t`` as the tensor-core kernels take an operand: row-major matrices with batch steps of
    16 bytes. Another layout (a transposed view: ``x @ w.T``, the backward's ``g @ b.T`` and
    ``a.T @ g``) becomes a contiguous copy: one pass over the operand, against kernels without
    tensor cores. ``copy`` False: a stand-in with the copy's layout, for validity checks."""
    cols = t.shape[-1]
    if t.strides[-2:] == (cols, 1) and all(st % 8 == 0 for st in t.strides[:-2]):
        return t
    # batch dims broadcast by a zero stride stay broadcast: only the operand's own matrices are copied
    own = tuple(1 if st == 0 else n for n, st in zip(t.shape[:-2], t.strides[:-2])) + t.shape[-2:]
    if copy:
        c = _row_major_copy(backend, t.with_layout(own, t.strides, t.offset))
    else:
        c = CubeTensor(t.client, t.buffer, own, contiguous_strides(own), 0, t.dtype)
    return c.with_layout(t.shape, tuple(0 if o != n else st for o, n, st in zip(own, t.shape, c.strides)), c.offset)


def _row_major_copy(backend: Any, t: CubeTensor) -> CubeTensor:
    """A contiguous copy of ``t``: exact transposes on CUDA by the tiled transpose kernel
    (``cuda_transpose``: near copy bandwidth), anything else by the generic strided copy."""
    if getattr(backend.client, "runtime", None) == "cuda":
        if cuda_transpose.supports(t):
            out = backend._empty(t.shape, t.dtype)
            cuda_transpose.transpose(backend.client, t, out)
            return out
    return backend.contiguous(t)


def _wgmma_valid(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> bool:
    if getattr(backend.client, "runtime", None) != "cuda" or not _tensor_core_dtype(a):
        return False
    from .cuda_kernels import wgmma as cuda_wgmma

    return cuda_wgmma.candidate_valid(_as_row_major(backend, a, False), _as_row_major(backend, b, False))


#: (client, dtypes, a's and b's shapes and strides, their buffers' and offsets' residues mod 16)
#: -> (valid, copy a, copy b, the wgmma module): ``_launch_wgmma``'s operand checks, made once per
#: layout (a drain replay's call step launches the same layouts every training step)
_WGMMA_LAYOUTS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_WGMMA_LAYOUTS_MAX = 4096
_PREPARED_LAUNCHES = cuda_transpose.PREPARED


def _launch_wgmma(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    """Hopper tensor cores (wgmma fed by TMA, any M, K and N multiples of 8; other operand
    layouts copied row-major first): a decision is shared by a whole size bucket, so a shape
    of the bucket the kernel does not take runs the tiled kernel instead."""
    if not _PREPARED_LAUNCHES[0]:  # the measurement knob (``cuda_kernels.transpose.PREPARED``)
        from .cuda_kernels import wgmma as cuda_wgmma

        if cuda_wgmma.candidate_valid(_as_row_major(backend, a, False), _as_row_major(backend, b, False)):
            cuda_wgmma.candidate_launch(backend, _as_row_major(backend, a, True), _as_row_major(backend, b, True), out)
        else:
            _launch_tiled(backend, a, b, out)
        return
    sa, sb = a.dtype.itemsize, b.dtype.itemsize
    key = (backend.client, a.dtype, b.dtype, a.shape, a.strides, b.shape, b.strides, a.buffer.ptr & 15,
           (a.offset * sa) & 15, b.buffer.ptr & 15, (b.offset * sb) & 15)
    hit = _WGMMA_LAYOUTS.get(key)
    if hit is None:
        from .cuda_kernels import wgmma as cuda_wgmma

        # an operand the kernel reads transposed (``TRANSPOSED``) is taken as it is, any other
        # layout than row-major is copied row-major first
        a_mn, b_k = cuda_wgmma.transposed_layouts(a, b)
        ra = a if a_mn else _as_row_major(backend, a, False)
        rb = b if b_k else _as_row_major(backend, b, False)
        hit = (cuda_wgmma.candidate_valid(ra, rb, a_mn, b_k), ra is not a, rb is not b, cuda_wgmma, a_mn, b_k)
        if len(_WGMMA_LAYOUTS) >= _WGMMA_LAYOUTS_MAX:
            _WGMMA_LAYOUTS.clear()
        _WGMMA_LAYOUTS[key] = hit
    valid, copy_a, copy_b, cuda_wgmma, a_mn, b_k = hit
    if valid:
        cuda_wgmma.candidate_launch(backend, _as_row_major(backend, a, True) if copy_a else a,
                                    _as_row_major(backend, b, True) if copy_b else b, out, a_mn, b_k)
    else:
        _launch_tiled(backend, a, b, out)


def _precision(backend: Any, a: CubeTensor) -> str:
    """The key's precision field: float32 on CUDA is "tf32" under precision "high" / "medium"
    (tensor-core candidates join) and "ieee" otherwise, so neither reuses the other's decision;
    "-" for other dtypes and runtimes (they compute the same whatever the switch says)."""
    if a.dtype is not dt.float32 or getattr(backend.client, "runtime", None) != "cuda":
        return "-"
    return "tf32" if tf32_allowed() else "ieee"


def matmul_key(level: Any, backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> tuple[Any, ...]:
    """(dtype, batch, m, n, k anchored; layouts of a and b; problem class; float32 precision
    (``_precision``); whether the runtime runs a cube's units serially: the CPU, where
    shared-memory tiles do not pay). The last field stays last: priorities read ``key[-1]``."""
    batch, m, k, n = _dims(a, b)
    anchor = level.anchor
    return (
        a.dtype.name,
        anchor(batch),
        anchor(m),
        anchor(n),
        anchor(k),
        layout_class(a.shape, a.strides),
        layout_class(b.shape, b.strides),
        problem_class(m, n, k),
        _precision(backend, a),
        "serial" if backend.client.name == "cpu" else "parallel",
    )


_KEY_FIELDS = ("dtype", "batch", "m", "n", "k", "a", "b", "class", "precision", "units")
#: products up to this many multiply-adds (anchored) still time the naive and tiled kernels
#: (256³: naive ~12 ms on the project's machine, 1024³: 1.85 s)
MEDIUM_WORK = 1 << 24


def _work(key: tuple[Any, ...]) -> int:
    return key[1] * key[2] * key[3] * key[4]


#: products up to this many multiply-adds (anchored) take the vendor candidate without timing
#: (``matmul_trivial``): 2^18 is 0.5 MFLOP, a few microseconds at the dev box's peak (2 cores,
#: AVX-512), the scale of one launch and of the timing noise; the digits MLP's 32 x 64 x 128
#: products and their gradients are such products
TRIVIAL_WORK = 1 << 18


def matmul_trivial(key: tuple[Any, ...], backend: Any, a: CubeTensor, b: CubeTensor, out: Any = None) -> str | None:
    """``"numpy"`` for a product of at most ``TRIVIAL_WORK`` multiply-adds where the vendor
    candidate runs (CPU runtime, f32/f64): its time is the launch cost whichever kernel runs, so
    timing candidates would only measure noise and compile kernels nobody needs; None
    otherwise (the key tunes)."""
    if _work(key) > TRIVIAL_WORK or not _vendor_valid(backend, a, b, out):
        return None
    return "numpy"


def _prio_naive(key: tuple[Any, ...]) -> int:
    w = _work(key)
    return 2 if w <= NAIVE_MAX_WORK else (0 if w <= MEDIUM_WORK else -1)


def _prio_blocked(key: tuple[Any, ...]) -> int:
    # tiny products: two packing launches around a 1-tile product never pay off
    return -1 if _work(key) <= NAIVE_MAX_WORK else 1


def _prio_gpu(key: tuple[Any, ...]) -> int:
    # first where units run in parallel; never on the CPU, nor for tiny products (naive's
    # single small kernel wins those, and the block kernels would only add compiles)
    return -1 if key[-1] == "serial" or _work(key) <= NAIVE_MAX_WORK else 2


def _gpu_valid(tiles: GpuTiles) -> Callable[[Any, CubeTensor, CubeTensor, CubeTensor], bool]:
    """Float dtypes, where the target's shared memory holds the tiles (WGSL adapters may offer
    only 16 KiB)."""

    def valid(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> bool:
        if not a.dtype.is_floating_point:
            return False
        limit = shared_limit(backend.client)
        return limit is None or tiles.shared_bytes(_gpu_register_bytes(a.dtype)) <= limit

    return valid


def matmul_bound(key: tuple[Any, ...], tp: Any, backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> float:
    """Roofline lower bound of this product (actual dims): compute or memory, plus one launch."""
    batch, m, k, n = _dims(a, b)
    size = a.dtype.itemsize
    flops = 2.0 * batch * m * n * k
    moved = float(size) * batch * (m * k + k * n + m * n)
    if getattr(backend.client, "runtime", None) == "cuda" and _tensor_core_dtype(a):
        # the probes measure FFMA: tensor cores (f16/bf16, and tf32 when allowed) run 8-15x
        # faster, so only the memory term bounds them (a compute term would read as a wrong
        # probe: the probes would re-run at every tuning and no search would end early)
        return moved / tp.bandwidth + tp.launch_overhead
    return max(flops / tp.peak_for(size), moved / tp.bandwidth) + tp.launch_overhead


def _snapshot(result: Any, backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> np.ndarray:
    return backend._into_data(out)


def _poison(backend: Any, a: CubeTensor, b: CubeTensor, out: CubeTensor) -> None:
    fill = np.full(out.shape, np.nan if out.dtype.is_floating_point else 0x5A, dtype=out.dtype.np)
    backend.client.write(out.buffer, fill, out.offset * out.dtype.itemsize)


def _compare(ref: np.ndarray, got: np.ndarray) -> str | None:
    """A mismatch description, or None: exact for integers; floats relative to the largest
    reference magnitude (sums of k products round differently per candidate)."""
    if ref.shape != got.shape:
        return f"shape {got.shape} != {ref.shape}"
    if ref.dtype.kind in "iub":
        bad = np.count_nonzero(ref != got)
        return f"{bad} of {ref.size} elements differ" if bad else None
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    if np.isnan(g).any() and not np.isnan(r).any():
        return f"{int(np.isnan(g).sum())} elements are NaN (unwritten?)"
    tol = {2: 2e-2, 4: 1e-4, 8: 1e-10}.get(ref.dtype.itemsize, 1e-4)
    if ref.dtype.itemsize == 4 and tf32_allowed():
        # tf32 operands keep 10 mantissa bits (truncated by wgmma: 2^-10 relative per product)
        tol = 4e-3
    scale = max(float(np.nanmax(np.abs(r))) if r.size else 0.0, 1e-30)
    err = float(np.nanmax(np.abs(g - r))) / scale if r.size else 0.0
    return f"max error {err:.3g} (relative to max |ref|) > {tol:g}" if err > tol else None


def _tunable(c: MatmulCandidate, group: Any, priority: Any) -> autotune.Tunable:
    return autotune.Tunable(
        c.name, lambda backend, a, b, out: c.launch(backend, a, b, out), group, priority, valid=_own_valid
    )


def _sgemm_tunables() -> list[autotune.Tunable]:
    """The hand-written CUDA SGEMM tiles (``cuda_sgemm``: IEEE float32 on CUDA cores, sm_80+,
    not under tf32), priority of the GPU tiles; the module holds no driver state to import."""
    from .cuda_kernels import sgemm as cuda_sgemm

    return cuda_sgemm.tunables(lambda backend, a, b, out: launch_gpu(GPU_TILES[0], backend, a, b, out), _prio_gpu)


MATMUL_TUNABLES = autotune.TunableSet(
    "matmul",
    [
        _tunable(MATMUL_CANDIDATES[0], 0, _prio_naive),
        _tunable(MATMUL_CANDIDATES[2], 0, _prio_blocked),
        _tunable(MATMUL_CANDIDATES[3], 0, _prio_blocked),
        autotune.Tunable("numpy", _launch_numpy, 0, 0, valid=_vendor_valid, vendor=True),
        # tiled: a contender where a cube's units run in parallel (GPUs), the fallback on the CPU
        _tunable(MATMUL_CANDIDATES[1], lambda key: 1 if key[-1] == "serial" else 0, 0),
        # tensor cores on CUDA (sm_80+), f16/bf16 only. The hand-written kernels are prepared
        # first, then the GPU tiles: their NVRTC compiles are the longest, so they overlap the
        # calling thread's expansion of the @cube candidates
        autotune.Tunable("mma_sync", _launch_mma, 0, 1, valid=_mma_valid, prepare_order=-2),
        # Hopper tensor cores (wgmma + TMA, sm_90a kernels on compute capability 9.0), tried first
        autotune.Tunable("wgmma", _launch_wgmma, 0, 2, valid=_wgmma_valid, prepare_order=-2),
        # shared-memory block tiles with register blocks of lines (floats): first where a cube's
        # units run in parallel; never timed on the CPU (barriers cost per-unit spills there)
        *(
            autotune.Tunable(t.name, _gpu(t), 0, _prio_gpu, valid=_gpu_valid(t), prepare_order=-1)
            for t in GPU_TILES
        ),
        # float32 on CUDA cores, hand-written (closer to cuBLAS than the best GPU tile on the
        # H200; figures under bench/results/)
        *_sgemm_tunables(),
    ],
    key=matmul_key,
    key_fields=_KEY_FIELDS,
    bound=matmul_bound,
    snapshot=_snapshot,
    compare=_compare,
    poison=_poison,
    trivial=matmul_trivial,
)


class MatmulOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty``, ``_launch_lines``,
    ``contiguous`` and the other core methods of ``backend.py``)."""

    def matmul(self, a: CubeTensor, b: CubeTensor) -> CubeTensor:
        """Batched, batch dims broadcast (as expanded views: no copies)."""
        if a.dtype is dt.bool_:
            # logical: any(a & b) over k == (int sum of products) != 0; the casts copy the
            # operands un-broadcast (before expand), the candidates have no bool kernels
            c = self.matmul(self.cast(a, dt.int32), self.cast(b, dt.int32))
            return self.cast(c, dt.bool_)
        a, b, out = self._matmul_operands(a, b)
        if out.numel:
            autotune.execute(self.client, MATMUL_TUNABLES, self, a, b, out)
        return out

    def _matmul_operands(self, a: CubeTensor, b: CubeTensor) -> tuple[CubeTensor, CubeTensor, CubeTensor]:
        """``a`` and ``b`` expanded to the common batch, and a fresh contiguous output."""
        batch = tuple(max(x, y) if min(x, y) else 0 for x, y in zip(a.shape[:-2], b.shape[:-2]))
        a = self.expand(a, batch + a.shape[-2:])
        b = self.expand(b, batch + b.shape[-2:])
        shape = batch + (a.shape[-2], b.shape[-1])
        out = self._empty(shape, a.dtype)
        assert out.strides == contiguous_strides(shape)
        return a, b, out
