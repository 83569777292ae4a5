"""The matmul-epilogue fuser: a matmul followed by elementwise ops on its result (bias add,
activation, scale, cast) becomes one kernel that applies them where the product is written.

The block is the matmul and the longest run of following elementwise ops over the matmul's
output shape in which only the *last* result is observed (the kernel writes one tensor):
the product itself and the intermediate results must be dropped and unread after the block.
``matmul.run_matmul_epilogue`` runs it (the program is the elementwise encoding with
``("acc",)`` for the product); other inputs of the epilogue (a bias row, a residual) are
read through their strides, broadcast for free.

Whether fusing pays is a tuning decision (``EPILOGUE_TUNABLES``): the fused kernel is the
register-blocked candidate, so where another matmul candidate wins by more than the
epilogue's pass costs (BLAS on the CPU runtime for large f32 products), the tuned matmul
followed by one fused elementwise kernel runs instead. On CUDA, ``gelu(a @ b + bias)`` in
f16/bf16 has a third candidate: the Hopper tensor-core kernel with its own bias + GELU epilogue
(``cuda_wgmma``), recognised by the block's program. All are timed once per key.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .... import autotune
from ...fusion.ir import OperationIr
from ..matmul import _KEY_FIELDS, matmul_bound, matmul_key, matmul_trivial
from .elementwise import MAX_INPUTS, MAX_OPS, Builder, array_budget, fusable, observed

__all__ = ["MatmulEpilogueFuser"]


class MatmulEpilogueFuser:
    name = "matmul_epilogue"

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        mm = ops[i]
        if mm.op != "matmul":
            return None
        a, b = mm.inputs
        out = mm.outputs[0]
        if len(a.shape) != len(b.shape) or len(a.shape) < 2 or out.dtype.name == "bool":
            return None
        j = i + 1
        while j < len(ops) and j - i <= MAX_OPS and fusable(ops[j]) and ops[j].outputs[0].shape == out.shape:
            j += 1
        # the longest prefix whose only observed result is its last op's (its inputs, the two
        # operands and the output within the device's bindings)
        budget = array_budget(self.backend)
        limit = MAX_INPUTS if budget is None else min(MAX_INPUTS, budget - 3)
        while j > i + 1:
            if observed(ops, i, j) == [j - 1 - i] and self._inputs(ops, i, j) <= limit:
                break
            j -= 1
        if j <= i + 1:
            return None
        return j, float(j - i) + 0.5, self._prepare(ops[i:j])

    @staticmethod
    def _inputs(ops: list[OperationIr], i: int, j: int) -> int:
        produced = {o.outputs[0].id for o in ops[i:j]}
        return len({t.id for o in ops[i + 1:j] for t in o.inputs if t.id not in produced})

    @staticmethod
    def _prepare(block: list[OperationIr]) -> Any:
        b = Builder(block)
        b.regs[block[0].outputs[0].id] = b.emit(("acc",), block[0].outputs[0].dtype)
        for off in range(1, len(block)):
            b.op(off)
        b.prog.append(("out", 0, b.regs[block[-1].outputs[0].id]))
        prog = tuple(b.prog)
        # the program's part of the tuning key, computed once per plan (not per drain)
        digest = hashlib.sha1(repr(prog).encode()).hexdigest()[:10]
        return (prog, digest, b.ext, b.scalars)

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        prog, digest, ext, scal = data
        mm = ops[0]
        last = ops[-1].outputs[0]
        job = _Job(
            prog,
            digest,
            tuple(env[ops[off].inputs[pos].id] for off, pos in ext),
            tuple((ops[off].args[arg], d) for off, arg, d in scal),
            last.dtype,
        )
        env[last.id] = autotune.execute(inner.client, EPILOGUE_TUNABLES, inner, env[mm.inputs[0].id],
                                        env[mm.inputs[1].id], job)


class _Job:
    """The epilogue of one launch: program (and its digest), extra inputs, scalars, output dtype."""

    __slots__ = ("prog", "digest", "extra", "scalars", "dtype")

    def __init__(self, prog: tuple[Any, ...], digest: str, extra: tuple[Any, ...], scalars: tuple[Any, ...],
                 dtype: Any) -> None:
        self.prog = prog
        self.digest = digest
        self.extra = extra
        self.scalars = scalars
        self.dtype = dtype

    # a bundle of tensors to a capture's call step (``cube.runtime.capture.call``): a replay
    # rebuilds the job on the new drain's tensors
    def capture_tensors(self) -> tuple[Any, ...]:
        return self.extra

    def with_tensors(self, tensors: list[Any]) -> _Job:
        return _Job(self.prog, self.digest, tuple(tensors), self.scalars, self.dtype)


def _fused(backend: Any, a: Any, b: Any, job: _Job) -> Any:
    from .matmul import run_matmul_epilogue

    return run_matmul_epilogue(backend, a, b, job.prog, job.extra, job.scalars, job.dtype)


def _separate(backend: Any, a: Any, b: Any, job: _Job) -> Any:
    """The tuned matmul, then the epilogue as one fused elementwise kernel reading the product."""
    from .elementwise_kernel import run_fused

    c = backend.matmul(a, b)
    k = len(job.extra)
    prog = tuple(("in", k) if ins == ("acc",) else ins for ins in job.prog)
    return run_fused(backend, prog, [*job.extra, c], job.scalars, [(c.shape, job.dtype)])[0]


#: the program of ``gelu(a @ b + bias)`` (erf form, as ``functional.gelu`` decomposes it): the
#: product plus extra input 0, times 1/sqrt 2, erf, plus 1, times the sum and 0.5
_BIAS_GELU = {
    (("acc",), ("in", 0), ("binary", "add", x, y), ("scalar", 0), ("binary", "mul", 2, 3), ("unary", "erf", 4),
     ("scalar", 1), ("binary", "add", 5, 6), ("scalar", 2), ("binary", "mul", 2, 8), ("binary", "mul", 9, 7),
     ("out", 0, 10))
    for x, y in ((0, 1), (1, 0))
}


def _is_bias_gelu(job: _Job) -> bool:
    if job.prog not in _BIAS_GELU or len(job.extra) != 1 or len(job.extra[0].shape) != 1:
        return False  # a bias row (N,), not a residual
    consts = tuple(float(v) for v, _ in job.scalars)
    return abs(consts[0] - 0.5**0.5) < 1e-7 and consts[1:] == (1.0, 0.5)


def _tensor_core_valid(backend: Any, a: Any, b: Any, job: _Job) -> bool:
    """The Hopper tensor-core kernel's own bias + GELU epilogue (``cuda_wgmma``): CUDA, 16-bit
    operands and output, 2-d, the bias + GELU program (the launch checks the rest per call)."""
    from .... import dtype as dt

    return (
        getattr(backend.client, "runtime", None) == "cuda"
        and a.dtype in (dt.float16, dt.bfloat16)
        and b.dtype is a.dtype
        and job.dtype is a.dtype
        and len(a.shape) == len(b.shape) == 2
        and _is_bias_gelu(job)
    )


def _tensor_core(backend: Any, a: Any, b: Any, job: _Job) -> Any:
    """``gelu(a @ b + bias)`` in one wgmma launch (the staged epilogue applies GELU while the
    next tile's products run); shapes or layouts the kernel does not take (a decision covers a
    whole size bucket) run ``_separate``."""
    from ....cube.compiler.cuda import sm_number
    from ...cube.cuda_kernels import wgmma as cuda_wgmma

    (bias,) = job.extra
    m, n = a.shape[0], b.shape[1]
    out = backend._empty((m, n), job.dtype)
    server = backend.client.server
    ok = (
        sm_number(server.arch) == 90
        and bias.shape == (n,)
        and bias.strides == (1,)
        and bias.dtype is a.dtype
        and cuda_wgmma._addr(bias) % 4 == 0
        and cuda_wgmma.supports(a, b, out, 90)
    )
    if not ok:
        return _separate(backend, a, b, job)
    cuda_wgmma.matmul_wgmma(backend.client, a, b, out, bias)
    return out


def _key(level: Any, backend: Any, a: Any, b: Any, job: _Job) -> tuple[Any, ...]:
    return (*matmul_key(level, backend, a, b, None), job.digest)


EPILOGUE_TUNABLES = autotune.TunableSet(
    "matmul_epilogue",
    [
        autotune.Tunable("fused", _fused, 0, 1),
        autotune.Tunable("separate", _separate, 0, 0),
        autotune.Tunable("wgmma_bias_gelu", _tensor_core, 0, 2, valid=_tensor_core_valid),
    ],
    key=_key,
    key_fields=(*_KEY_FIELDS, "epilogue"),
    bound=lambda key, tp, backend, a, b, job: matmul_bound(key, tp, backend, a, b, None),
    quick="separate",  # while a new key's candidates compile: the product's quick choice + one small kernel
    # a product too small to time (``matmul_trivial``): the vendor product + the epilogue kernel
    trivial=lambda key, backend, a, b, job: "separate" if matmul_trivial(key, backend, a, b) else None,
)
