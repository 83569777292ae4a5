"""The elementwise fuser: a run of elementwise ops over one output shape becomes one kernel.

A block is a maximal run of consecutive queued ops that are elementwise (unary, predicate,
binary, scalar, cast, where, clamp, masked_fill) and produce the same shape. Their inputs
from outside the block may have any shape that broadcasts to it (a bias row, a scalar
tensor). The block is compiled into a *program* (``elementwise_kernel``'s encoding): a
tuple of instructions over numbered registers, a comptime argument of one ``@cube``
kernel, so each distinct program compiles once and is reused by every later drain.

Only what is observed is written: an op's result is an output of the kernel when a live
Python handle holds it or an op after the block reads it. An input read for the last time
(READ_WRITE status) with an output's shape and dtype lends its buffer to that output when,
at run time, nothing else shares the buffer.

Everything the search prepares is *relative* (op offsets in the block, argument positions),
never a tensor id, because a cached plan is replayed on later drains with new ids.
"""

from __future__ import annotations

import math
from typing import Any

from ... import base
from ...base import (
    ARITH_OPS,
    BITWISE_OPS,
    COMPARE_OPS,
    LOGICAL_OPS,
    PREDICATE_OPS,
    REVERSED_SCALAR_OPS,
    SCALAR_OPS,
    UNARY_OPS,
)
from ...fusion.ir import READ_WRITE, OperationIr, TensorIr
from ..elementwise import _REFCOUNT_SAFE, _exclusive

__all__ = ["ElementwiseFuser", "fusable", "Builder", "observed", "donor_candidates", "array_budget", "run_stop"]

#: the most ops one fused kernel takes (compile time and register pressure grow with it)
MAX_OPS = 64
#: the most distinct external inputs of one fused kernel
MAX_INPUTS = 16

# op name -> (instruction kind, kernel op name)
_KINDS: dict[str, tuple[str, str]] = {
    **{op: ("unary", op) for op in UNARY_OPS + PREDICATE_OPS},
    **{op: ("binary", op) for op in ARITH_OPS + BITWISE_OPS + COMPARE_OPS + LOGICAL_OPS},
    **{f"{op}_scalar": ("scalar", op) for op in SCALAR_OPS},
    **{f"r{op}_scalar": ("rscalar", op) for op in REVERSED_SCALAR_OPS},
    "cast": ("cast", "cast"),
    "where": ("where", "where"),
    "clamp": ("clamp", "clamp"),
    "masked_fill": ("masked_fill", "masked_fill"),
}
assert set(_KINDS) <= set(base.CATALOG), "the elementwise fuser names an op outside the catalog"


def array_budget(backend: Any) -> int | None:
    """The most array parameters (inputs and outputs together) one fused kernel may take on
    ``backend``'s device (None: only ``MAX_INPUTS`` bounds it). wgpu binds every array as a
    storage buffer, at most 15 of them per kernel on lavapipe (``client.max_arrays``)."""
    from ....cube.runtime.client import max_arrays

    return max_arrays(getattr(backend, "client", None))


def fusable(o: OperationIr) -> bool:
    kind = _KINDS.get(o.op)
    if kind is None:
        return False
    d = o.outputs[0].dtype
    if kind[1] == "pow" and not d.is_floating_point:
        return False  # integer pow loops at run time: the unfused kernel runs it at width 1
    if kind[1] == "sign" and d.name == "uint8":
        return False  # see elementwise_kernels: GCC's u8 lane bug
    return True


class Builder:
    """Translates a block into a program; everything recorded is relative to the block."""

    __slots__ = ("ops", "prog", "nreg", "regs", "ext", "ext_ids", "scalars", "dtypes")

    def __init__(self, ops: list[OperationIr]) -> None:
        self.ops = ops
        self.prog: list[tuple[Any, ...]] = []
        self.nreg = 0
        self.regs: dict[int, int] = {}  # tensor id -> register
        self.ext: list[tuple[int, int]] = []  # external input k -> (op offset, input position)
        self.ext_ids: dict[int, int] = {}
        self.scalars: list[tuple[int, int, Any]] = []  # scalar k -> (op offset, arg position, dtype)
        self.dtypes: list[Any] = []  # register -> dtype

    def emit(self, ins: tuple[Any, ...], dtype: Any) -> int:
        self.prog.append(ins)
        self.dtypes.append(dtype)
        self.nreg += 1
        return self.nreg - 1

    def tensor(self, off: int, pos: int) -> int:
        t = self.ops[off].inputs[pos]
        r = self.regs.get(t.id)
        if r is not None:
            return r
        k = self.ext_ids.get(t.id)
        if k is None:
            k = self.ext_ids[t.id] = len(self.ext)
            self.ext.append((off, pos))
        r = self.regs[t.id] = self.emit(("in", k), t.dtype)
        return r

    def scalar(self, off: int, arg: int, dtype: Any) -> int:
        self.scalars.append((off, arg, dtype))
        return self.emit(("scalar", len(self.scalars) - 1), dtype)

    def op(self, off: int) -> None:
        o = self.ops[off]
        kind, name = _KINDS[o.op]
        out: TensorIr = o.outputs[0]
        if kind == "unary":
            r = self.emit(("unary", name, self.tensor(off, 0)), out.dtype)
        elif kind == "binary":
            r = self.emit(("binary", name, self.tensor(off, 0), self.tensor(off, 1)), out.dtype)
        elif kind == "scalar":
            a = self.tensor(off, 0)
            r = self.emit(("binary", name, a, self.scalar(off, 1, o.inputs[0].dtype)), out.dtype)
        elif kind == "rscalar":
            a = self.tensor(off, 0)
            r = self.emit(("binary", name, self.scalar(off, 1, o.inputs[0].dtype), a), out.dtype)
        elif kind == "cast":
            r = self.emit(("cast", self.tensor(off, 0), out.dtype.name), out.dtype)
        elif kind == "where":
            c, a, b = self.tensor(off, 0), self.tensor(off, 1), self.tensor(off, 2)
            r = self.emit(("where", c, a, b), out.dtype)
        elif kind == "clamp":
            # clamp(x, lo, hi) is min(max(x, lo), hi) in the unfused kernel too
            r = self.tensor(off, 0)
            d = o.inputs[0].dtype
            if o.args[1] is not None:
                r = self.emit(("binary", "maximum", r, self.scalar(off, 1, d)), out.dtype)
            if o.args[2] is not None:
                r = self.emit(("binary", "minimum", r, self.scalar(off, 2, d)), out.dtype)
        else:  # masked_fill(p, mask, value) = where(mask, value, p)
            p, m = self.tensor(off, 0), self.tensor(off, 1)
            r = self.emit(("where", m, self.scalar(off, 2, o.inputs[0].dtype), p), out.dtype)
        self.regs[out.id] = r


class ElementwiseFuser:
    """Claims runs of elementwise ops; runs each as one ``fused_elementwise`` launch."""

    name = "elementwise"

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        j = run_stop(ops, i)
        if j is None:
            return None
        budget = array_budget(self.backend)
        if budget is not None:  # inputs and written results together within the device's bindings
            while j - i >= 2 and _external(ops, i, j) + len(observed(ops, i, j)) > budget:
                j -= 1
        if j - i < 2:
            return None  # one op: the unfused kernel is the same kernel
        return j, float(j - i), self._prepare(ops, i, j)

    def _prepare(self, ops: list[OperationIr], i: int, j: int) -> Any:
        block = ops[i:j]
        b = Builder(block)
        for off in range(len(block)):
            b.op(off)
        outs = observed(ops, i, j)  # op offsets whose result is written
        for k, off in enumerate(outs):
            b.prog.append(("out", k, b.regs[block[off].outputs[0].id]))
        # donors: external inputs at their last use with an output's shape and dtype
        donors: list[int | None] = []
        taken: set[int] = set()
        for off in outs:
            donor = donor_candidates(block, b.ext, block[off].outputs[0], taken)
            if donor is not None:
                taken.add(donor)
            donors.append(donor)
        return _Data(tuple(b.prog), b.ext, b.scalars, outs, donors, block[0].outputs[0].shape)

    def execute(self, inner: Any, ops: list[OperationIr], data: _Data, env: dict[int, Any]) -> None:
        self.run(inner, ops, data, env, data.inputs(ops, env), data.scalar_values(ops))

    @staticmethod
    def run(inner: Any, ops: list[OperationIr], data: _Data, env: dict[int, Any], ins: list[Any],
            scalars: list[tuple[Any, Any]]) -> None:
        """``execute`` with the block's inputs and scalars already read (``_Data.inputs``,
        ``_Data.scalar_values``)."""
        from .elementwise_kernel import run_fused

        out_specs = [(data.shape, ops[off].outputs[0].dtype) for off in data.outs]
        inplace = {}
        for k, donor in enumerate(data.donors):
            if donor is not None and exclusive(ins[donor]):
                inplace[k] = donor
        results = run_fused(inner, data.prog, ins, scalars, out_specs, inplace or None)
        for off, r in zip(data.outs, results):
            env[ops[off].outputs[0].id] = r


class _Data:
    """A claimed block, relative to its first op: the program, where its external inputs and
    scalars come from, which results it writes and which input each may reuse."""

    __slots__ = ("prog", "ext", "scalars", "outs", "donors", "shape")

    def __init__(self, prog: tuple[Any, ...], ext: list[tuple[int, int]], scalars: list[tuple[int, int, Any]],
                 outs: list[int], donors: list[int | None], shape: tuple[int, ...]) -> None:
        self.prog = prog
        self.ext = ext
        self.scalars = scalars
        self.outs = outs
        self.donors = donors
        self.shape = shape

    def inputs(self, ops: list[OperationIr], env: dict[int, Any]) -> list[Any]:
        """The block's external inputs in program order (``ops``: the block's ops this drain)."""
        return [env[ops[off].inputs[pos].id] for off, pos in self.ext]

    def scalar_values(self, ops: list[OperationIr]) -> list[tuple[Any, Any]]:
        """The block's scalars this drain, in program order, with the dtype each is read as."""
        return [(ops[off].args[arg], d) for off, arg, d in self.scalars]


def run_stop(ops: list[OperationIr], i: int) -> int | None:
    """The end of the elementwise run starting at ``ops[i]``: consecutive fusable ops of one
    (non-empty) output shape, at most ``MAX_OPS`` of them reading at most ``MAX_INPUTS``
    tensors from outside the run (None: ``ops[i]`` starts none). The device's array budget is
    the caller's to apply."""
    first = ops[i]
    if not fusable(first):
        return None
    shape = first.outputs[0].shape
    if math.prod(shape) == 0:
        return None
    inputs: set[int] = set()
    produced: set[int] = set()
    j = i
    while j < len(ops) and j - i < MAX_OPS:
        o = ops[j]
        if not fusable(o) or o.outputs[0].shape != shape:
            break
        new = {t.id for t in o.inputs if t.id not in produced} - inputs
        if len(inputs) + len(new) > MAX_INPUTS:
            break
        inputs |= new
        produced.add(o.outputs[0].id)
        j += 1
    return j


def _external(ops: list[OperationIr], i: int, j: int) -> int:
    """How many distinct tensors ``ops[i:j]`` read that they do not produce."""
    produced = {o.outputs[0].id for o in ops[i:j]}
    return len({t.id for o in ops[i:j] for t in o.inputs if t.id not in produced})


def observed(ops: list[OperationIr], i: int, j: int) -> list[int]:
    """Offsets (from ``i``) of the ops of ``ops[i:j]`` whose result is observed: a live
    handle holds it, or an op after the block reads it."""
    later = {t.id for o in ops[j:] for t in o.inputs}
    return [off for off, o in enumerate(ops[i:j]) if o.live[0] or o.outputs[0].id in later]


def donor_candidates(block: list[OperationIr], ext: list[tuple[int, int]], out: TensorIr,
                     taken: set[int]) -> int | None:
    """An external input (index into ``ext``) at its last use with ``out``'s shape and dtype."""
    for k, (eo, pos) in enumerate(ext):
        u = block[eo].inputs[pos]
        if k not in taken and u.shape == out.shape and u.dtype is out.dtype and _last_use_in(block, u.id):
            return k
    return None


def _last_use_in(block: list[OperationIr], tid: int) -> bool:
    """The input ``tid`` is marked READ_WRITE at its last read in the block."""
    for o in reversed(block):
        for t, s in zip(o.inputs, o.status):
            if t.id == tid:
                return s == READ_WRITE
    return False


def exclusive(t: Any) -> bool:
    """At run time: no other view and no weak reference shares ``t``'s buffer (the Cube
    backend's own donation test; ``run_fused`` checks dtype, shape and layout)."""
    return _REFCOUNT_SAFE and _exclusive(t.buffer)
