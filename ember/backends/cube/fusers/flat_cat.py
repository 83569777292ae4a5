"""The flatten-cat fuser: ``cat([t.reshape(-1) for t in ts])`` as one launch, for any layouts.

Flattening a tensor whose layout is not contiguous (a transposed weight gradient, a strided
view) copies it (``reshape`` gathers it into a fresh buffer), so concatenating the flattened
tensors costs a launch per such tensor before the ``cat``. This fuser claims a run of
``reshape`` ops to one dimension followed by the ``cat`` (along dim 0) that reads their
results, and runs it as ONE launch of ``flat_pieces``: each piece is read through its own
shape and strides and written to its row-major positions in the flat output, each on its own
range of cubes (as ``cat_pieces``; a device binding fewer arrays per kernel gets several
launches). An optimizer step's gradient gather and ``clip_grad_norm_``'s concatenation are this
pattern. A ``reshape`` whose result something else reads is left out of the claim (it runs
as an op and the ``cat`` takes its result).

The claim is relative (positions in the block), as plans are replayed with new tensor ids.
"""

from __future__ import annotations

import math
from typing import Any

from ....cube import CUBE_DIM, CUBE_POS, UNIT_POS, Comptime, Scalar, Sequence, T, Tensor, kernel, u32
from ....cube.launch import CubeCount, CubeDim
from ...fusion.ir import OperationIr
from ..index_kernels import piece_table
from .elementwise import observed

__all__ = ["FlatCatFuser", "flat_pieces"]

_DIM = CubeDim(256)
#: elements per unit (one unravel of the piece's shape per chunk, as the copy kernels)
_CHUNK = 8
#: the most pieces one launch copies (the kernel inlines a copy per piece)
_PIECES = 32


@kernel
def flat_pieces(ins: Sequence[Tensor[T]], out: Tensor[T], meta: Sequence[Scalar], k: Comptime[int]):
    """Piece p (any view, rank >= 1) is copied in row-major order into the 1-D ``out`` from
    position ``at_p``. ``meta`` holds four u32 per piece, (first cube, at, rows, chunks), then
    the end cube: piece p runs on cubes [first_p, first_{p+1}), one unit per ``k`` elements of
    a row (``rows`` = its elements / its last dim, ``chunks`` = ceil(last dim / k))."""
    c = CUBE_POS
    for p in range(len(ins)):
        src = ins[p]
        if c >= meta[4 * p] and c < meta[4 * p + 4]:
            u = (c - meta[4 * p]) * CUBE_DIM + UNIT_POS
            chunks = meta[4 * p + 3]
            row = u // chunks
            if row < meta[4 * p + 2]:
                r = src.rank()
                nl = src.shape(r - 1)
                c0 = (u % chunks) * k
                rem = row
                so = u32(0)
                for d in range(r - 2, -1, -1):
                    n = src.shape(d)
                    so += (rem % n) * src.stride(d)
                    rem = rem // n
                do = meta[4 * p + 1] + row * nl
                sl = src.stride(r - 1)
                for t in range(k):
                    cl = c0 + t
                    if cl < nl:
                        out[do + cl] = src[so + cl * sl]


class FlatCatFuser:
    """Claims ``reshape``s to 1-D followed by the ``cat`` of their results; one launch."""

    name = "flat_cat"

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        j = i
        while j < len(ops) and ops[j].op == "reshape" and len(ops[j].outputs[0].shape) == 1:
            j += 1
        if j == i or j >= len(ops):
            return None
        c = ops[j]
        if c.op != "cat" or c.args[1] != 0 or len(c.outputs[0].shape) != 1:
            return None
        # every reshape of the run is read by the cat only (its result is never materialised)
        ids = {t.id for t in c.inputs}
        if any(o.outputs[0].id not in ids for o in ops[i:j]) or any(k < j - i for k in observed(ops, i, j + 1)):
            return None
        pos = {o.outputs[0].id: k for k, o in enumerate(ops[i:j])}
        # per cat input: ("r", k) the source of the k-th reshape, ("e", None) the input itself
        srcs = tuple(("r", pos[t.id]) if t.id in pos else ("e", None) for t in c.args[0])
        return j + 1, float(j + 1 - i) + 0.5, srcs

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        c = ops[-1]
        pieces = []
        at = 0
        for t, (kind, k) in zip(c.args[0], data):
            src = env[ops[k].inputs[0].id] if kind == "r" else env[t.id]
            n = math.prod(src.shape)
            if n:
                if not src.shape:
                    src = src.with_layout((1,), (1,), src.offset)
                pieces.append((src, at))
            at += n
        out = inner._empty((at,), c.outputs[0].dtype)
        if pieces:
            from ....cube.runtime.client import max_arrays

            limit = max_arrays(inner.client)
            per = _PIECES if limit is None else max(1, min(_PIECES, limit - 1))
            for s in range(0, len(pieces), per):
                _launch(inner, pieces[s:s + per], out)
        env[c.outputs[0].id] = out


def _launch(backend: Any, pieces: list[tuple[Any, int]], out: Any) -> None:
    meta, cubes = piece_table(pieces, _CHUNK, _DIM.x)
    flat_pieces.launch(backend.client, CubeCount(cubes), _DIM, tuple(t for t, _ in pieces), out, meta, _CHUNK)
