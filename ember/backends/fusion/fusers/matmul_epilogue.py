"""The matmul-epilogue fuser: a matmul followed by elementwise ops on its result (bias add,
activation, scale, cast) becomes one kernel that applies them where the product is written.

The block is the matmul and the longest run of following elementwise ops over the matmul's
output shape in which only the *last* result is observed (the kernel writes one tensor):
the product itself and the intermediate results must be dropped and unread after the block.
``matmul.run_matmul_epilogue`` runs it (the program is the elementwise encoding with
``("acc",)`` for the product); other inputs of the epilogue (a bias row, a residual) are
read through their strides, broadcast for free.
"""

from __future__ import annotations

from typing import Any

from ..ir import OperationIr
from .elementwise import MAX_INPUTS, MAX_OPS, Builder, fusable, observed

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
        # the longest prefix whose only observed result is its last op's
        while j > i + 1:
            if observed(ops, i, j) == [j - 1 - i] and self._inputs(ops, i, j) <= MAX_INPUTS:
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
        return (tuple(b.prog), b.ext, b.scalars)

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        from .matmul import run_matmul_epilogue

        prog, ext, scal = data
        mm = ops[0]
        extra = tuple(env[ops[off].inputs[pos].id] for off, pos in ext)
        scalars = tuple((ops[off].args[arg], d) for off, arg, d in scal)
        last = ops[-1].outputs[0]
        env[last.id] = run_matmul_epilogue(
            inner, env[mm.inputs[0].id], env[mm.inputs[1].id], prog, extra, scalars, last.dtype
        )
