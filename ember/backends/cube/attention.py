"""Fused attention on the Cube backend: the registry's ``sdpa`` and ``sdpa_backward`` as the
flash-attention kernels of ``attention_kernels.py`` (three launches per training step: forward,
dq, dk/dv), which never materialise the ``(..., L, S)`` scores.

Layouts: q, k, v, the output and its gradient are read in place through their strides (the q, k
and v of a packed ``qkv`` projection split and transposed into heads need no copy); only a last
dim that is not contiguous, or leading dims that do not flatten into one, are copied first. The
forward's result is laid out as ``(..., L, H, Ev)`` in memory and returned as the permuted view
``(..., H, L, Ev)``: the usual ``y.transpose(-3, -2).reshape(..., L, H * Ev)`` after attention
is then a view, not a copy. The gradients are contiguous views of ``sdpa_backward``'s packed
result.

What the kernels do not cover runs the registry's decomposition (matmul, softmax, matmul) on
this backend: float64 inputs, a head dim above ``MAX_HEAD_DIM``, an empty sequence, more than
65535 batch entries or heads, or a target that cannot hold the dtype's lines.
"""

from __future__ import annotations

import math

from ... import dtype as dt
from ...cube.launch import CubeCount, CubeDim, lines
from ...cube.runtime.client import max_arrays, max_line_bytes, shared_limit
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from ...ops import REGISTRY
from . import attention_kernels as ak

__all__ = ["AttentionOps", "MAX_HEAD_DIM"]

#: the widest q/k and v rows the kernels take: each unit holds a row of each (and an
#: accumulator row) in registers
MAX_HEAD_DIM = 128
_FLOATS = (dt.float32, dt.float16, dt.bfloat16)
#: query rows (forward, dq) or key rows (dk/dv) per cube: a GPU's block; on a target whose
#: units run serially (the C runtime) a small cube lets causal cubes skip more tiles
_ROWS_PARALLEL = 64
_ROWS_SERIAL = 16
_MAX_GRID = 65535


def _flat_lead(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    """(size, stride) of the dims ``shape`` flattened into one, or None where they do not
    (size-1 dims may have any stride; a single broadcast dim keeps its zero stride)."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 1, 0
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if outer != inner * n:
            return None
    return math.prod(shape), dims[-1][1]


class AttentionOps:
    """Mixin of ``CubeBackend``: the registry's ``attention`` family."""

    # ----------------------------------------------------------------- layouts
    def _attn4(self, t: CubeTensor) -> CubeTensor:
        """``t (..., n, d)`` as a rank-4 view ``(B, H, n, d)`` with a contiguous last dim: the
        leading dims but the last flatten into B (copied to a contiguous layout where they do
        not flatten in place)."""
        if t.shape[-1] != 1 and t.strides[-1] != 1:
            t = self.contiguous(t)
        lead, ls = t.shape[:-2], t.strides[:-2]
        if len(lead) == 2:
            return t
        if len(lead) < 2:
            pad = 2 - len(lead)
            return t.with_layout((1,) * pad + t.shape, (0,) * pad + t.strides, t.offset)
        flat = _flat_lead(lead[:-1], ls[:-1])
        if flat is None:
            t = self.contiguous(t)
            lead, ls = t.shape[:-2], t.strides[:-2]
            flat = _flat_lead(lead[:-1], ls[:-1])
            assert flat is not None  # a contiguous layout always flattens
        return t.with_layout((flat[0],) + t.shape[-3:], (flat[1],) + t.strides[-3:], t.offset)

    def _attn_width(self, dims: tuple[int, ...], views: tuple[CubeTensor, ...]) -> int:
        """The widest line (float32 lines in registers and shared memory, at most the runtime's
        widest access) dividing every row width, stride and offset of ``views``."""
        limit = max_line_bytes(self.client)
        for w in (16, 8, 4, 2, 1):
            if w * 4 > limit or any(d % w for d in dims):
                continue
            if all(t.offset % w == 0 and all(s % w == 0 for s in t.strides[:-1]) for t in views):
                return w
        return 1

    def _attn_fused(self, q: CubeTensor, k: CubeTensor, v: CubeTensor, arrays: int) -> bool:
        """Whether the kernels cover this call (else the decomposition runs)."""
        d = q.dtype
        if d not in _FLOATS or not self.supports(d):
            return False
        n_q, e = q.shape[-2:]
        n_k, ev = v.shape[-2:]
        if min(n_q, n_k, e, ev) == 0 or max(e, ev) > MAX_HEAD_DIM:
            return False
        lead = q.shape[:-2]
        if (lead and lead[-1] > _MAX_GRID) or math.prod(lead[:-1]) > _MAX_GRID:
            return False
        if max(q.numel, k.numel, v.numel) >= 1 << 31:
            return False
        limit = max_arrays(self.client)
        return limit is None or arrays <= limit

    def _attn_out(self, q: CubeTensor, ev: int) -> tuple[CubeTensor, CubeTensor]:
        """The forward's result (q's leading dims, L, Ev), laid out as (..., L, H, Ev), and its
        rank-4 view (B, H, L, Ev)."""
        lead, n_q = q.shape[:-2], q.shape[-2]
        h = lead[-1] if lead else 1
        b = math.prod(lead[:-1])
        buf = self._empty((b * n_q * h * ev,), q.dtype)
        row = h * ev  # one query position of every head
        outer = tuple(s * n_q * row for s in contiguous_strides(lead[:-1]))
        if lead:
            view = buf.with_layout(lead + (n_q, ev), outer + (ev, row, 1), 0)
        else:
            view = buf.with_layout((n_q, ev), (ev, 1), 0)
        return view, buf.with_layout((b, h, n_q, ev), (n_q * row, ev, row, 1), 0)

    def _attn_lanes(self, e: int, ev: int) -> int:
        """Keys (queries, in the dk/dv kernel) per tile: one float32 lane each in the score lines;
        the widest of 16, 8, 4 whose tiles fit the target's shared memory."""
        limit = shared_limit(self.client)
        for lanes in (16, 8, 4):
            if limit is None or (2 * e + 2 * ev + 2) * lanes * 4 + 256 <= limit:
                return lanes
        return 4

    # ----------------------------------------------------------------- ops
    def sdpa(self, q: CubeTensor, k: CubeTensor, v: CubeTensor, scale: float, causal: bool) -> CubeTensor:
        """The registry's ``sdpa``: one ``attn_fwd`` launch (or the decomposition, see the module)."""
        if not self._attn_fused(q, k, v, 4):
            return REGISTRY["sdpa"].compose(self, q, k, v, scale, causal)
        q4, k4, v4 = self._attn4(q), self._attn4(k), self._attn4(v)
        e, ev = q.shape[-1], v.shape[-1]
        out, o4 = self._attn_out(q, ev)
        w = self._attn_width((ev,), (v4, o4))
        b, h, n_q = q4.shape[:3]
        rows = _ROWS_SERIAL if self._units_serial else _ROWS_PARALLEL
        count = CubeCount(-(-n_q // rows), h, b)
        ak.attn_fwd.launch(self.client, count, CubeDim(rows), q4, k4, lines(v4, w), lines(o4, w), float(scale),
                           bool(causal), e, ev // w, rows, self._attn_lanes(e, ev), self._units_serial)
        return out

    def sdpa_backward(self, g: CubeTensor, q: CubeTensor, k: CubeTensor, v: CubeTensor, out: CubeTensor,
                      scale: float, causal: bool) -> CubeTensor:
        """The registry's ``sdpa_backward``: ``attn_bwd_dq`` (dq, and each row's log-sum-exp and
        D) then ``attn_bwd_dkv``, into one packed ``[dq | dk | dv]`` buffer."""
        if not self._attn_fused(q, k, v, 9) or g.dtype is not q.dtype or out.dtype is not q.dtype:
            return REGISTRY["sdpa_backward"].compose(self, g, q, k, v, out, scale, causal)
        q4, k4, v4 = self._attn4(q), self._attn4(k), self._attn4(v)
        g4, o4 = self._attn4(g), self._attn4(out)
        b, h, n_q, e = q4.shape
        n_k, ev = v4.shape[2:]
        nq, nk, nv = q.numel, k.numel, v.numel
        flat = self._empty((nq + nk + nv,), q.dtype)
        dq = flat.with_layout((b, h, n_q, e), contiguous_strides((b, h, n_q, e)), 0)
        dk = flat.with_layout((b, h, n_k, e), contiguous_strides((b, h, n_k, e)), nq)
        dv = flat.with_layout((b, h, n_k, ev), contiguous_strides((b, h, n_k, ev)), nq + nk)
        w = self._attn_width((e, ev), (q4, k4, g4, dq, dk, dv))
        lanes = self._attn_lanes(e, ev)
        stats = self._empty((b * h * n_q * 2,), dt.float32)
        serial = self._units_serial
        rows = _ROWS_SERIAL if serial else _ROWS_PARALLEL
        ak.attn_bwd_dq.launch(self.client, CubeCount(-(-n_q // rows), h, b), CubeDim(rows), q4, k4, lines(k4, w),
                              v4, o4, g4, lines(dq, w), stats, float(scale), bool(causal), e, ev, rows, lanes, serial)
        ak.attn_bwd_dkv.launch(self.client, CubeCount(-(-n_k // rows), h, b), CubeDim(rows), q4, lines(q4, w),
                               k4, v4, g4, lines(g4, w), stats, lines(dk, w), lines(dv, w), float(scale),
                               bool(causal), e, ev, rows, lanes, serial)
        return flat
