"""Reductions of the Cube backend: sum, prod, max, min, all, any, mean over any set of dims;
argmax/argmin; cumsum, cumprod and the indices of cummax/cummin; softmax, log_softmax,
logsumexp as single kernels.

Layout (the kernels are in ``reduce_kernels.py``): the input is made contiguous, then the
reduced dims are brought to one of two shapes with as few copies as possible:

* the reduced dims (ignoring size-1 dims) form one consecutive block of the row-major
  layout: the view ``(outer, K, inner)`` needs no copy. ``inner == 1`` takes the **rows** path
  (reduced axis contiguous), ``inner > 1`` the **cols** path (reduced axis strided, each unit
  owning output columns and walking K: coalesced reads).
* otherwise (e.g. dims (0, 2) of a 3-d tensor): the kept dims are permuted to the front and
  the reduced ones to the back, one layout copy, then the rows path on ``(outer, K)``.
  A general strided path would save that copy but costs a div/mod unravel per element in
  the hot loop; a copy is one streaming pass and only this rarer case pays it.

Both paths split long reductions across cubes and fold the partials with a second launch of
the same kernel (blocked accumulation: accuracy like numpy's pairwise sum, and parallelism
when there are few output elements). Short rows (at most ``_UNIT_ROW_LINES`` lines; for
softmax/argmax at most ``_UNIT_ROW_LEN`` elements) get one unit per row instead of a cube.

Autotune (``REDUCE_ROWS_TUNABLES``): a rows-path first pass of at least ``_TUNE_MIN`` elements
whose rows could take either strategy (one unit per row, or cubes per row plus a fold) is
measured once per (op, dtypes, bucketed rows and row length) and the decision stored; the
static rules above decide the rest (small inputs, folds, the cols path).

argmax/argmin, softmax, log_softmax, logsumexp and cumsum index the (outer, K, inner) view
directly (one cube, or one unit, per (outer, inner) row), so any single dim needs no copy.

Kernels see ``units_serial`` (the runtime runs a cube's units one after another on one
thread: the CPU runtime) and pick the memory order that streams on such a target; a GPU
runtime gets the interleaved, coalesced order. Today that is read from the client's name;
it belongs in the compiler's ``Capabilities`` (noted for the kernel-language owners).

Dtypes: half types accumulate sum/prod/mean (and softmax family, cumsum) in float32 and round
once at the end; max/min stay in their own type (exact). ``all``/``any`` (any dtype) are
min/max over the input cast to bool, read as uint8 (a bool is one byte 0/1), as are max/min of
bool tensors.
"""

from __future__ import annotations

import math
from typing import Any

from ... import autotune
from ... import dtype as dt
from ...cube.launch import CubeCount, CubeDim, lines
from ...cube.runtime.client import max_line_bytes, shared_limit
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from ...ops import primitives
from . import argscan_kernels as ak
from . import reduce_kernels as rk

_HALF = (dt.float16, dt.bfloat16)
_SMALL, _BIG = CubeDim(32), CubeDim(256)  # one plane / eight planes: two cube sizes only
#: most lines one unit folds serially in the rows path (a cube then covers 16384 lines)
_SPAN_ROWS = 64
#: fewest rows of the reduced axis a cube walks in the cols path, and the cubes we aim for
_SPAN_COLS = 64
_TARGET_CUBES = 16
#: rows this short (in lines, for reductions; in elements, for softmax/arg) get one unit each:
#: cooperating units would mostly idle, and each cube costs a fold through shared memory
_UNIT_ROW_LINES = 8
#: most shared memory a staged softmax row may take (32 KiB rows keep 7 cubes resident on an
#: H200 SM of 228 KiB, and stay within CUDA's 48 KiB of static shared memory)
_STAGED_MAX_BYTES = 32 * 1024
_UNIT_ROW_LEN = 64
#: scans along a contiguous dim at least this long take the block scan on parallel-units targets
#: (``scan_rows``' unit per row reads rows k apart across a plane: uncoalesced), in blocks of
#: ``_BIG`` units x at most ``_SCAN_SPAN`` elements each (8 KiB of float32 shared memory)
_BLOCK_SCAN_MIN = 256
_SCAN_SPAN = 8
#: on a serial-units target (CPU): one unit per row from this many rows on, up to this length
_SERIAL_MIN_ROWS = 1024
_SERIAL_MAX_LEN = 1 << 14


def _line_width(n: int, itemsize: int, offset: int, limit: int = 64) -> int:
    """The widest line (at most ``limit`` bytes: the runtime's ``max_line_bytes``) dividing
    ``n`` and the offset."""
    for w in (16, 8, 4, 2):
        if w * itemsize <= limit and n % w == 0 and offset % w == 0:
            return w
    return 1


def _identity(op: str, d: dt.DType) -> Any:
    if op in ("sum", "mean"):
        return 0.0 if d.is_floating_point else 0
    if op == "prod":
        return 1.0 if d.is_floating_point else 1
    if d.is_floating_point:
        return -math.inf if op == "max" else math.inf
    if d is dt.uint8:
        return 0 if op == "max" else 255
    bits = 8 * d.itemsize - 1
    return -(1 << bits) if op == "max" else (1 << bits) - 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class ReduceOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty``, ``_launch_lines``,
    ``contiguous`` and the other core methods of ``backend.py``)."""

    # ----------------------------------------------------------------- catalog
    def sum(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(p, dims, keepdim, "sum")

    def prod(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(p, dims, keepdim, "prod")

    def max(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(p, dims, keepdim, "max")

    def min(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(p, dims, keepdim, "min")

    def mean(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(p, dims, keepdim, "mean")

    def all(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(self.cast(p, dt.bool_), dims, keepdim, "min")

    def any(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        return self._reduce(self.cast(p, dt.bool_), dims, keepdim, "max")

    def argmax(self, p: CubeTensor, dim: int, keepdim: bool) -> CubeTensor:
        return self._arg(p, dim, keepdim, True)

    def argmin(self, p: CubeTensor, dim: int, keepdim: bool) -> CubeTensor:
        return self._arg(p, dim, keepdim, False)

    def _scan(self, p: CubeTensor, dim: int, op: str) -> CubeTensor:
        d = p.dtype
        acc = dt.float32 if d in _HALF else d
        out = self._empty(p.shape, acc)
        if p.numel:
            x = self.contiguous(p)
            outer, k, inner = _split3(p.shape, dim, dim)
            self._scan_into(x, out, outer * inner, k, inner, op)
        return self.cast(out, d) if acc is not d else out

    def _scan_into(self, x: CubeTensor, out: CubeTensor, rows: int, k: int, inner: int, op: str) -> None:
        """out (contiguous, the accumulator type) = the scan of contiguous x viewed as
        (rows / inner, k, inner) along k. Long contiguous rows on a target whose units run in
        parallel take the block scan (coalesced, every cube busy); short rows, strided layouts
        and serial-units targets (the CPU, where a unit per row streams its row from cache)
        run ``scan_rows``, one unit per row."""
        if inner == 1 and k >= _BLOCK_SCAN_MIN and not self._units_serial:
            span = min(_SCAN_SPAN, 1 << max(0, (_cdiv(k, _BIG.units) - 1).bit_length()))
            block = _BIG.units * span
            blocks = _cdiv(k, block)
            totals = self._empty((rows * blocks,), out.dtype)
            rk.scan_blocks.launch(
                self.client, CubeCount.covering(rows * blocks, 1), _BIG, x, out, totals, k, blocks, span, op
            )
            if blocks > 1:
                scanned = self._empty((rows * blocks,), out.dtype)
                self._scan_into(totals, scanned, rows, blocks, 1, op)
                rk.scan_add.launch(
                    self.client, CubeCount.covering(rows * k, _BIG), _BIG, out, scanned, k, blocks, block, op
                )
            return
        rk.scan_rows.launch(self.client, CubeCount.covering(rows, _BIG), _BIG, x, out, rows, k, inner, op)

    def cumargmax(self, p: CubeTensor, dim: int) -> CubeTensor:
        return self._argscan(p, dim, True)

    def cumargmin(self, p: CubeTensor, dim: int) -> CubeTensor:
        return self._argscan(p, dim, False)

    def _argscan(self, p: CubeTensor, dim: int, largest: bool) -> CubeTensor:
        """The int64 index of the running max (``largest``) / min along ``dim``
        (``argscan_kernels.py``): the block scan for long contiguous rows on parallel-units
        targets (as ``_scan_into``), one unit per row otherwise."""
        out = self._empty(p.shape, dt.int64)
        if not p.numel:
            return out
        x = self.contiguous(p)
        if x.dtype in _HALF:
            x = self.cast(x, dt.float32)  # exact, same order
        elif x.dtype is dt.bool_:
            x = CubeTensor(x.client, x.buffer, x.shape, x.strides, x.offset, dt.uint8)
        outer, k, inner = _split3(p.shape, dim, dim)
        rows = outer * inner
        if inner == 1 and k >= _BLOCK_SCAN_MIN and not self._units_serial:
            span = min(_SCAN_SPAN, 1 << max(0, (_cdiv(k, _BIG.units) - 1).bit_length()))
            block = _BIG.units * span
            blocks = _cdiv(k, block)
            tot_v = self._empty((rows * blocks,), x.dtype)
            tot_i = self._empty((rows * blocks,), dt.int32)
            one = blocks == 1
            idx = self._empty((1,) if one else (rows * k,), dt.int32)
            ak.argscan_blocks.launch(self.client, CubeCount.covering(rows * blocks, 1), _BIG, x, idx, out, tot_v,
                                     tot_i, k, blocks, span, largest, one)
            if not one:
                ak.argscan_totals.launch(self.client, CubeCount.covering(rows, _BIG), _BIG, tot_v, tot_i, rows,
                                         blocks, largest)
                ak.argscan_add.launch(self.client, CubeCount.covering(rows * k, _BIG), _BIG, idx, out, x, tot_v,
                                      tot_i, k, blocks, block, largest)
            return out
        ak.argscan_rows.launch(self.client, CubeCount.covering(rows, _BIG), _BIG, x, out, rows, k, inner, largest)
        return out

    def softmax(self, p: CubeTensor, dim: int) -> CubeTensor:
        return self._softmax(p, dim, "softmax")

    def log_softmax(self, p: CubeTensor, dim: int) -> CubeTensor:
        return self._softmax(p, dim, "log_softmax")

    def logsumexp(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool) -> CubeTensor:
        d = p.dtype
        f = dt.float32 if d in _HALF else d
        out_shape = _out_shape(p.shape, dims, keepdim)
        x, outer, k, inner = self._grouped(p, dims)
        rows = outer * inner
        out = self._empty((rows,), f)
        if rows:
            if k == 0:
                return self.full(out_shape, -math.inf, d)
            self._launch_softmax(x, out, rows, k, inner, "logsumexp")
        out = self.cast(out, d) if f is not d else out
        return out.with_layout(out_shape, contiguous_strides(out_shape), out.offset)

    def _softmax_stage(self, x: CubeTensor, out: CubeTensor, k: int) -> tuple[int, int] | None:
        """(line width, shared lines) for ``softmax_staged``, or None: the row must fit the
        target's shared memory (capacity rounded up to a power of two, so few variants) and a
        cube's units must run in parallel (on the CPU the three passes stream the row from
        cache anyway). H200, rows of 8192 f32: the staged structure reaches 96% of copy
        bandwidth, three passes over global memory 64-68% (bench/gpu_softmax_variants.py)."""
        if self._units_serial:
            return None
        w = _line_width(k, max(x.dtype.itemsize, out.dtype.itemsize), x.offset, max_line_bytes(self.client))
        cap = 1 << max(0, (k // w - 1).bit_length())
        row = cap * w * out.dtype.itemsize
        limit = shared_limit(self.client)
        # + 64: the folds' own shared memory (a word per plane and one for the broadcast)
        if row > _STAGED_MAX_BYTES or row + 64 > (16384 if limit is None else limit):
            return None
        return w, cap

    # ----------------------------------------------------------------- helpers
    @property
    def _units_serial(self) -> bool:
        # the CPU runtime runs the units of a cube one after another on one thread
        return self.client.name == "cpu"

    def _unit_rows_serial(self, rows: int, length: int) -> bool:
        """Whether one unit per row beats one cube per row on a serial-units target: the
        units of a cube share one thread there, so cooperating only adds the fold, as long as
        there are rows enough for every thread (and rows short enough to stay accurate)."""
        return self._units_serial and rows >= _SERIAL_MIN_ROWS and length <= _SERIAL_MAX_LEN

    def _grouped(self, p: CubeTensor, dims: tuple[int, ...]) -> tuple[CubeTensor, int, int, int]:
        """A contiguous tensor holding p's values as (outer, K, inner) with the reduced dims
        in K (inner == 1 when a layout copy was needed to bring them together)."""
        x = self.contiguous(p)
        shape = p.shape
        red = set(dims)
        live = [i for i, n in enumerate(shape) if n != 1]
        live_red = [i for i in live if i in red]
        if not live_red:
            return x, math.prod(shape), 1, 1
        first, last = live_red[0], live_red[-1]
        between = [i for i in live if first <= i <= last]
        if between == live_red:  # one consecutive block: a view
            outer = math.prod(shape[i] for i in live if i < first)
            k = math.prod(shape[i] for i in live_red)
            inner = math.prod(shape[i] for i in live if i > last)
            return x, outer, k, inner
        kept = [i for i in range(len(shape)) if i not in red]
        order = tuple(kept + sorted(red))
        y = self.contiguous(self.permute(x, order))
        return y, math.prod(shape[i] for i in kept), math.prod(shape[i] for i in red), 1

    def _reduce(self, p: CubeTensor, dims: tuple[int, ...], keepdim: bool, op: str) -> CubeTensor:
        d = p.dtype
        if d is dt.bool_:  # a bool is one byte 0/1: reduce it as uint8 (max = or, min = and)
            p = _as(p, dt.uint8)
        acc = dt.float32 if (d in _HALF and op in ("sum", "prod", "mean")) else p.dtype
        out_shape = _out_shape(p.shape, dims, keepdim)
        x, outer, k, inner = self._grouped(p, dims)
        n_out = outer * inner
        if k == 0 or n_out == 0:
            # an empty reduction (max/min of empty is refused by the Tensor API); mean of
            # nothing is 0/0
            v = math.nan if op == "mean" else _identity(op, d if d is not dt.bool_ else dt.uint8)
            out = self.full(out_shape, v, p.dtype)
            return _as(out, d) if d is dt.bool_ else out
        if k == 1:  # every output element is one input element (copied: a value of its own)
            out = self.copy(x.with_layout((n_out,), (1,), x.offset))
            if acc is not p.dtype:  # half sum/prod/mean: the same values, acc only widened
                acc = p.dtype
        elif inner == 1:
            out = self._rows(x, outer, k, op, acc)
        else:
            out = self._cols(x, outer, k, inner, op, acc)
        if acc is not p.dtype:
            out = self.cast(out, p.dtype)
        if d is dt.bool_:
            out = _as(out, d)
        return out.with_layout(out_shape, contiguous_strides(out_shape), out.offset)

    def _rows(
        self, x: CubeTensor, rows: int, k: int, op: str, acc: dt.DType, div: int = 0
    ) -> CubeTensor:
        """(rows,) = op over the contiguous rows of x viewed as (rows, k); ``mean`` divides
        the sum by ``div`` (default k: partial passes keep the first pass's count)."""
        first_pass = not div
        div = div or k
        row_lines = k // _line_width(k, x.dtype.itemsize, x.offset, max_line_bytes(self.client))
        # rows long enough for cubes to help and short enough for one unit to stay accurate:
        # either strategy applies, and a large first pass is tuned (folds never are)
        if first_pass and _UNIT_ROW_LINES < row_lines <= _SERIAL_MAX_LEN and rows * k >= _TUNE_MIN:
            return autotune.execute(self.client, REDUCE_ROWS_TUNABLES, self, x, rows, k, op, acc)
        unit = row_lines <= _UNIT_ROW_LINES or self._unit_rows_serial(rows, row_lines)
        return self._rows_with(unit, x, rows, k, op, acc, div)

    def _rows_with(
        self, unit: bool, x: CubeTensor, rows: int, k: int, op: str, acc: dt.DType, div: int
    ) -> CubeTensor:
        """``_rows`` with the strategy given: one unit per row (``unit``) or cubes per row."""
        w = _line_width(k, x.dtype.itemsize, x.offset, max_line_bytes(self.client))
        row_lines = k // w
        first_op = "sum" if op == "mean" else op
        if unit:
            out = self._empty((rows,), acc)
            rk.reduce_rows.launch(
                self.client, CubeCount.covering(rows, _BIG), _BIG, lines(x, w), out,
                row_lines, 1, row_lines, _identity(first_op, acc),
                float(div) if acc.is_floating_point else 1, first_op, op == "mean",
                self._units_serial, True,
            )
            return out
        dim = _SMALL if row_lines <= _SMALL.units * 8 else _BIG
        span = max(1, min(_SPAN_ROWS, _cdiv(row_lines, dim.units)))
        splits = _cdiv(row_lines, dim.units * span)
        out = self._empty((rows * splits,), acc)
        final = splits == 1
        rk.reduce_rows.launch(
            self.client, CubeCount.covering(rows * splits, 1), dim, lines(x, w), out,
            row_lines, splits, span, _identity(first_op, acc), float(div) if acc.is_floating_point else 1,
            first_op, op == "mean" and final, self._units_serial, False,
        )
        if final:
            return out
        return self._rows(out, rows, splits, op, acc, div)  # fold the partials

    def _cols(
        self, x: CubeTensor, outer: int, k: int, inner: int, op: str, acc: dt.DType, div: int = 0
    ) -> CubeTensor:
        """(outer, inner) = op over axis 1 of x viewed as (outer, k, inner) (``div``: as in
        ``_rows``)."""
        div = div or k
        w = _line_width(inner, max(x.dtype.itemsize, acc.itemsize), x.offset, max_line_bytes(self.client))
        inner_lines = inner // w
        dim = _SMALL if inner_lines < 128 else _BIG
        col_blocks = _cdiv(inner_lines, dim.units)
        splits = max(1, min(_cdiv(k, _SPAN_COLS), _cdiv(_TARGET_CUBES, outer * col_blocks)))
        span = _cdiv(k, splits)
        splits = _cdiv(k, span)
        out = self._empty((outer * splits * inner,), acc)
        final = splits == 1
        first_op = "sum" if op == "mean" else op
        rk.reduce_cols.launch(
            self.client, CubeCount.covering(outer * splits * col_blocks, 1), dim, lines(x, w),
            lines(out, w), k, inner_lines, col_blocks, splits, span, _identity(first_op, acc),
            float(div) if acc.is_floating_point else 1, first_op, op == "mean" and final,
            self._units_serial,
        )
        if final:
            return out
        return self._cols(out, outer, splits, inner, op, acc, div)

    def _arg(self, p: CubeTensor, dim: int, keepdim: bool, largest: bool) -> CubeTensor:
        x = self.contiguous(p)
        if x.dtype is dt.bool_:
            x = _as(x, dt.uint8)
        outer, k, inner = _split3(p.shape, dim, dim)
        out_shape = _out_shape(p.shape, (dim,), keepdim)
        rows = outer * inner
        out = self._empty((rows,), dt.int64)
        if rows:
            unit_rows = k <= _UNIT_ROW_LEN or self._unit_rows_serial(rows, k)
            cd = _BIG if unit_rows or k > _SMALL.units * 16 else _SMALL
            count = CubeCount.covering(rows, cd if unit_rows else 1)
            rk.arg_rows.launch(
                self.client, count, cd, x, out, k, inner, _cdiv(k, cd.units), largest, unit_rows
            )
        return out.with_layout(out_shape, contiguous_strides(out_shape), 0)

    def _softmax(self, p: CubeTensor, dim: int, mode: str) -> CubeTensor:
        d = p.dtype
        f = dt.float32 if d in _HALF else d
        out = self._empty(p.shape, f)
        outer, k, inner = _split3(p.shape, dim, dim)
        rows = outer * inner
        if rows and k:
            self._launch_softmax(self.contiguous(p), out, rows, k, inner, mode)
        return self.cast(out, d) if f is not d else out

    def _launch_softmax(
        self, x: CubeTensor, out: CubeTensor, rows: int, k: int, inner: int, mode: str
    ) -> None:
        unit_rows = k <= _UNIT_ROW_LEN or self._unit_rows_serial(rows, k)
        cd = _BIG if unit_rows or k > _SMALL.units * 16 else _SMALL
        staged = None if unit_rows or inner != 1 or mode == "logsumexp" else self._softmax_stage(x, out, k)
        if staged is not None:
            w, cap = staged
            rk.softmax_staged.launch(
                self.client, CubeCount.covering(rows, 1), cd, lines(x, w), lines(out, w), k // w, cap, mode
            )
            return
        rk.softmax_rows.launch(
            self.client, CubeCount.covering(rows, cd if unit_rows else 1), cd, x, out, rows, k,
            inner, _cdiv(k, cd.units), mode, unit_rows, not self._units_serial,
        )


# ------------------------------------------------------------------------------ autotune
#: from this many input elements a contiguous-axis ("rows") reduction whose rows could go either
#: way is tuned ("reduce_rows": one unit per row vs cubes per row with a fold); below it, and on
#: the cols path, the static rules above decide
_TUNE_MIN = 1 << 16


def _rows_key(level: Any, bk: Any, x: CubeTensor, rows: int, k: int, op: str, acc: dt.DType) -> tuple:
    w = _line_width(k, x.dtype.itemsize, x.offset, max_line_bytes(bk.client))
    return (op, x.dtype.name, acc.name, level.anchor(rows), level.anchor(k // w), w)


def _rows_bound(key: tuple, tp: Any, bk: Any, x: CubeTensor, rows: int, k: int, *rest: Any) -> float:
    return rows * k * x.dtype.itemsize / tp.bandwidth + tp.launch_overhead


def _rows_strategy(unit: bool) -> Any:
    def run(bk: Any, x: CubeTensor, rows: int, k: int, op: str, acc: dt.DType) -> CubeTensor:
        return bk._rows_with(unit, x, rows, k, op, acc, k)

    return run


def _rows_snapshot(result: CubeTensor, bk: Any, *args: Any) -> Any:
    return bk._into_data(result)


def _rows_compare(ref: Any, got: Any) -> str | None:
    import numpy as np

    r, g = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    scale = max(float(np.nanmax(np.abs(r))) if r.size else 0.0, 1e-30)
    err = float(np.nanmax(np.abs(g - r))) / scale if r.size else 0.0
    return f"max error {err:.3g} (relative to max |ref|)" if err > 1e-3 else None


REDUCE_ROWS_TUNABLES = autotune.TunableSet(
    "reduce_rows",
    [
        autotune.Tunable("unit_per_row", _rows_strategy(True), priority=1),
        autotune.Tunable("cubes_per_row", _rows_strategy(False), priority=1),
    ],
    key=_rows_key,
    key_fields=("op", "dtype", "acc", "rows", "row_lines", "w"),
    bound=_rows_bound,
    snapshot=_rows_snapshot,
    compare=_rows_compare,
)


def _as(p: CubeTensor, d: dt.DType) -> CubeTensor:
    """The same bytes read as another dtype of the same size (bool <-> uint8)."""
    return CubeTensor(p.client, p.buffer, p.shape, p.strides, p.offset, d)


def _split3(shape: tuple[int, ...], first: int, last: int) -> tuple[int, int, int]:
    return (
        math.prod(shape[:first]),
        math.prod(shape[first : last + 1]),
        math.prod(shape[last + 1 :]),
    )


def _out_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _scan_method(op: str) -> Any:
    def method(self: ReduceOps, p: CubeTensor, dim: int) -> CubeTensor:
        return self._scan(p, dim, op)

    method.__name__ = method.__qualname__ = op
    return method


# every other scan op of the registry runs ``scan_rows`` with its name as the comptime op
for _op in primitives("scan"):
    if _op not in ReduceOps.__dict__:
        setattr(ReduceOps, _op, _scan_method(_op))
