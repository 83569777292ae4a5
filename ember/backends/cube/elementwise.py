"""Elementwise ops of the Cube backend: every unary, predicate, binary, scalar, clamp, where
and masked_fill op of the catalog through one kernel family (``elementwise_kernels.py``).

Launch plan of one op (``_launch``):

1. the output shape is the broadcast of the operands'; the output is a fresh contiguous
   buffer -- or an input's buffer, when that input may be *donated* (below);
2. **lines path**: when every operand already has the output's shape and is contiguous, the
   kernel reads lines of N elements (N from ``_line_width``: the widest line of at most 64
   bytes dividing the element count and every offset). Under ``_SMALL`` elements N is 1 and
   the tensors are passed as they are (no LineArg objects): such launches are bound by their
   overhead, and one variant per (op, dtypes) whatever the size keeps the number of compiled
   kernels down (the conformance suite's many small shapes share it);
3. otherwise operands are expanded to the output's rank (broadcast dims get stride 0), then
   dims are *coalesced* (size-1 dims dropped, neighbours merged where every operand's strides
   allow), so most broadcasts become rank 1-2 views; if that leaves every operand contiguous
   the lines path runs after all;
4. **rows path** (``_row_width``, from ``_SMALL`` elements): every operand contiguous along
   the innermost dim and the inner size, the other strides and the offsets multiples of a
   line width of at least 4: lines along the rows, the strided index computed once per line
   (a bias row broadcast over a matrix, a column slice);
5. **strided path** for the rest: one unit per element, every operand indexed through its
   strides (a transpose, a column broadcast, a step slice); small launches pad the rank to
   ``_SMALL_RANK`` so ranks 1-3 share one compiled kernel.

Kernel count: the conformance suite's elementwise specs (1252 tests on cpu and cpu.autodiff)
compile about 460 distinct kernels, i.e. (op, dtypes) pairs times a few layouts.

In-place output (the seed's ``inplace: Some(0)``): an input's buffer is reused for the output
when nothing else can observe it. The test (``_donatable``) is deliberately conservative:

* the input has the output's dtype and shape, is contiguous with offset 0;
* at the op method's entry the only reference to ``p`` is the method's own parameter (the
  count is checked one call deeper, in ``_donatable``: 3 = the method's parameter, the
  helper's parameter, getrefcount's argument), i.e. the caller passed a temporary -- a result
  used directly as an argument, as in the composites ``gelu``/``silu``/``softmax`` and in
  autodiff's backward rules. A Tensor holding it, a caller's local variable, an autodiff node
  that saved it, a pending launch on a service thread (its ``keep`` list), an argument tuple
  of a C-level caller -- each is one more reference, so the test fails safe;
* the buffer's only reference is that CubeTensor's slot and it has no weak references: no
  other view (reshape, slice, expand) shares the memory;
* CPython 3.11-3.13 only, where every reference on the value stack is counted (3.14 may
  borrow stack references, so a low count would not prove anything there).

The Tensor API keeps its operands in Tensor objects, so ops called on Tensors never donate
(Fusion's read-write tensor status is the mechanism that will reach them). ``_ew_unary``,
``_ew_binary`` and ``_ew_ternary`` with ``inplace=k`` are the explicit internal API: they
write into operand k's buffer (k indexes the operands in kernel order; ``c, a, b`` for the
ternary) whenever its dtype and layout match the output, without any reference test -- for
callers that know they own the operand.
"""

from __future__ import annotations

import math
import sys
import weakref
from typing import Any

from ... import autotune
from ... import dtype as dt
from ...cube.launch import CubeCount, CubeDim, lines
from ...cube.runtime.client import max_line_bytes
from ...cube.runtime.tensor import CubeTensor, contiguous_strides
from ..base import (
    BINARY_OPS,
    COMPARE_OPS,
    LOGICAL_OPS,
    PREDICATE_OPS,
    REVERSED_SCALAR_OPS,
    SCALAR_OPS,
    UNARY_OPS,
)
from . import elementwise_kernels as K

__all__ = ["ElementwiseOps"]

_DIM = CubeDim(256)
#: below this many elements the lines path uses width 1 (launch-bound; fewer kernel variants)
_SMALL = 4096
#: small strided launches are padded to this rank (one kernel variant for ranks 1..3)
_SMALL_RANK = 3
#: whether reference counts prove exclusivity on this interpreter (see the module docstring)
_REFCOUNT_SAFE = (3, 11) <= sys.version_info[:2] < (3, 14)
#: ops whose expression has a runtime loop for integers: always width 1 there (as is uint8
#: ``sign``: GCC 12's SLP vectoriser miscompiles its per-lane loop over u8 lines into 0xFF)
_LOOPING = frozenset({"pow", "s:pow", "r:pow"})
_getrefcount = sys.getrefcount
_ONE_CUBE = CubeCount(1)
_UNIT = (1,)


def _count(units: int) -> CubeCount:
    return _ONE_CUBE if units <= _DIM.x else CubeCount.covering(units, _DIM)


def _plain(ins: list[CubeTensor], shape: tuple[int, ...]) -> bool:
    """Every operand has the output's shape and is contiguous (the lines path as is)."""
    for t in ins:
        if t.shape != shape or not t.is_contiguous():
            return False
    return True


def _pad_rank(views: list[CubeTensor]) -> list[CubeTensor]:
    """``views`` with leading size-1 dims up to ``_SMALL_RANK``: small strided launches of any
    lower rank share one compiled kernel (rank is part of the KernelId); a size-1 dim costs
    one div/mod per element, which small launches do not notice."""
    k = _SMALL_RANK - len(views[0].shape)
    return [v.with_layout((1,) * k + v.shape, (0,) * k + v.strides, v.offset) for v in views]


def _narrow(op: str, out_dtype: dt.DType) -> bool:
    """Ops launched with width 1 whatever the layout (``_LOOPING``)."""
    return (op in _LOOPING and not out_dtype.is_floating_point) or (op == "sign" and out_dtype is dt.uint8)


def _row_width(n: int, views: list[CubeTensor], out_dtype: dt.DType) -> int:
    """The line width of the rows path for coalesced ``views`` (1: not applicable): every
    operand contiguous along the innermost dim, and the inner size, every other stride and
    every offset multiples of the width."""
    inner = views[0].shape[-1]
    w = 16
    limit = max_line_bytes(views[0].client)
    while w * out_dtype.itemsize > limit:
        w //= 2
    for v in views:
        if v.strides[-1] != 1:
            return 1
        while w > 1 and (w * v.dtype.itemsize > limit or inner % w or v.offset % w
                         or any(s % w for s in v.strides[:-1])):
            w //= 2
    return w if w >= 4 else 1


# ------------------------------------------------------------------------------ autotune
#: from this many elements the lines path's width is tuned ("elementwise_width"): the widest
#: line, half of it or a quarter (on the CPU: 512-, 256- or 128-bit vectors); below it the
#: launch is overhead-bound and the widest line is taken without measuring
_TUNE_MIN = 1 << 16


def _ew_key(level: Any, client: Any, kernel: Any, views: Any, lout: CubeTensor, scalars: Any, op: str, w: int) -> tuple:
    return (op, views[0].dtype.name, lout.dtype.name, len(views), level.anchor(lout.shape[0]), w)


def _ew_width(div: int) -> Any:
    def launch(client: Any, kernel: Any, views: Any, lout: CubeTensor, scalars: Any, op: str, w: int) -> None:
        v = w // div
        ins = [lines(x, v) for x in views]
        kernel.launch(client, _count(lout.shape[0] // v), _DIM, *ins, lines(lout, v), *scalars, op)

    return launch


def _ew_bound(key: tuple, tp: Any, client: Any, kernel: Any, views: Any, lout: CubeTensor, *rest: Any) -> float:
    """Memory-bound: every operand read once, the output written once."""
    n = lout.shape[0]
    moved = n * (lout.dtype.itemsize + sum(v.dtype.itemsize for v in views))
    return moved / tp.bandwidth + tp.launch_overhead


EW_WIDTH_TUNABLES = autotune.TunableSet(
    "elementwise_width",
    [
        autotune.Tunable("widest", _ew_width(1), priority=2),
        autotune.Tunable("half", _ew_width(2), priority=lambda key: 1 if key[-1] >= 4 else -1),
        autotune.Tunable("quarter", _ew_width(4), priority=lambda key: 0 if key[-1] >= 8 else -1),
    ],
    key=_ew_key,
    key_fields=("op", "dtype", "out", "inputs", "n", "w"),
    bound=_ew_bound,
)


def _zero(d: dt.DType) -> Any:
    """A placeholder scalar argument of dtype ``d`` (for kernels whose op ignores it)."""
    if d is dt.bool_:
        return False
    return 0.0 if d.is_floating_point else 0


def _line_width(n: int, ts: tuple[CubeTensor, ...]) -> int:
    """The widest line (<= the runtime's ``max_line_bytes``, default 64 bytes; power of two
    <= 16) dividing ``n`` and every offset."""
    if n < _SMALL:
        return 1
    w = 16
    limit = max_line_bytes(ts[0].client)
    for t in ts:
        while w > 1 and (w * t.dtype.itemsize > limit or n % w or t.offset % w):
            w //= 2
    return w


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    r = max(len(s) for s in shapes)
    out = [1] * r
    for s in shapes:
        for i, n in enumerate(s, r - len(s)):
            if n != 1:
                out[i] = n
    return tuple(out)


def _coalesce(shape: tuple[int, ...], ts: list[CubeTensor]) -> list[CubeTensor]:
    """Views of ``ts`` (each broadcastable to ``shape``) with the same element order over
    ``shape``, in as few dims as possible: size-1 dims dropped, neighbours merged where
    every operand's stride of the outer dim is the inner dim's stride times its size."""
    r = len(shape)
    full = []  # each operand's strides over ``shape`` (0 along broadcast dims)
    for t in ts:
        k = r - len(t.shape)
        full.append([0 if (i < k or t.shape[i - k] != n) else t.strides[i - k] for i, n in enumerate(shape)])
    sizes: list[int] = []
    kept: list[list[int]] = [[] for _ in ts]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if sizes and all(st[-1] == s[i] * n for s, st in zip(full, kept)):
            sizes[-1] *= n  # outer dim and dim i walk memory as one dim with i's stride
            for s, st in zip(full, kept):
                st[-1] = s[i]
            continue
        sizes.append(n)
        for s, st in zip(full, kept):
            st.append(s[i])
    if not sizes:
        return [t.with_layout((1,), (1,), t.offset) for t in ts]
    out_shape = tuple(sizes)
    return [t.with_layout(out_shape, tuple(st), t.offset) for t, st in zip(ts, kept)]


class ElementwiseOps:
    """Mixin of ``CubeBackend`` (``self`` has ``client``, ``_empty`` and the core methods of
    ``backend.py``)."""

    client: Any

    # ----------------------------------------------------------------- launch plan
    def _ew_out(self, shape: tuple[int, ...], dtype: dt.DType, donor: CubeTensor | None) -> CubeTensor:
        if donor is not None:
            return donor.with_layout(shape, contiguous_strides(shape), 0)
        return self._empty(shape, dtype)  # type: ignore[attr-defined]

    def _launch(
        self,
        lines_kernel: Any,
        strided_kernel: Any,
        rows_kernel: Any,
        ins: list[CubeTensor],
        out_dtype: dt.DType,
        scalars: tuple[Any, ...],
        op: str,
        donor: int | None,
    ) -> CubeTensor:
        shape = ins[0].shape
        for t in ins[1:]:
            if t.shape != shape:
                shape = _broadcast([t.shape for t in ins])
                break
        n = math.prod(shape)
        d = None
        if donor is not None:
            d = ins[donor]
            if not (d.dtype is out_dtype and d.shape == shape and d.offset == 0 and d.is_contiguous()):
                d = None
        out = self._ew_out(shape, out_dtype, d)
        if n == 0:
            return out
        client = self.client
        flat = (n,)
        if _plain(ins, shape):
            # rank-1 views: the rank is part of the KernelId, and the lines kernels do not
            # care, so every shape of n elements shares one compiled kernel
            views = ins if len(shape) == 1 else [t.with_layout(flat, _UNIT, t.offset) for t in ins]
        else:
            views = _coalesce(shape, ins)
            if len(views[0].shape) != 1 or any(v.strides[0] != 1 for v in views):
                w = _row_width(n, views, out_dtype) if n >= _SMALL and not _narrow(op, out_dtype) else 1
                if w > 1:
                    rows_kernel.launch(
                        client, _count(n // w), _DIM, *[lines(v, w) for v in views],
                        lines(out.with_layout(flat, _UNIT, 0), w), *scalars, op, w,
                    )
                    return out
                if n < _SMALL and len(views[0].shape) < _SMALL_RANK:
                    views = _pad_rank(views)
                strided_kernel.launch(
                    client, _count(n), _DIM, *views, out.with_layout(flat, _UNIT, 0), *scalars, op
                )
                return out
        lout = out if len(shape) == 1 else out.with_layout(flat, _UNIT, 0)
        if n < _SMALL or _narrow(op, out_dtype):
            # width 1: plain tensors (a lines parameter passed a tensor reads lines of 1),
            # which spares the LineArg objects and their checks on the launch-bound path
            lines_kernel.launch(client, _count(n), _DIM, *views, lout, *scalars, op)
            return out
        w = _line_width(n, (*views, lout))
        if n >= _TUNE_MIN and d is None and w >= 4:  # a donated output must not be written twice
            # a tuple, not a list: a drain capture keeps a call's tensor tuples as views (a list it
            # cannot, and the drain would never replay)
            autotune.execute(client, EW_WIDTH_TUNABLES, client, lines_kernel, tuple(views), lout, scalars, op, w)
            return out
        lines_kernel.launch(
            client, _count(n // w), _DIM, *[lines(v, w) for v in views], lines(lout, w), *scalars, op
        )
        return out

    def _ew_unary(
        self, op: str, p: CubeTensor, out_dtype: dt.DType, s0: Any = None, s1: Any = None,
        inplace: int | None = None,
    ) -> CubeTensor:
        """``op(p)`` (or a scalar op ``s:<op>`` / ``r:<op>`` with ``s0``) into a new tensor, or
        into ``p``'s buffer when ``inplace == 0`` and its layout allows."""
        z = _zero(p.dtype)
        return self._launch(
            K.unary_lines, K.unary_strided, K.unary_rows, [p], out_dtype,
            (z if s0 is None else s0, z if s1 is None else s1), op, inplace,
        )

    def _ew_binary(
        self, op: str, a: CubeTensor, b: CubeTensor, out_dtype: dt.DType, inplace: int | None = None
    ) -> CubeTensor:
        return self._launch(K.binary_lines, K.binary_strided, K.binary_rows, [a, b], out_dtype, (), op, inplace)

    def _ew_ternary(
        self, op: str, c: CubeTensor, a: CubeTensor, b: CubeTensor, s0: Any = None,
        inplace: int | None = None,
    ) -> CubeTensor:
        s = _zero(a.dtype) if s0 is None else s0
        return self._launch(K.ternary_lines, K.ternary_strided, K.ternary_rows, [c, a, b], a.dtype, (s,), op, inplace)

    # ----------------------------------------------------------------- catalog ops
    def where(self, cond: CubeTensor, a: CubeTensor, b: CubeTensor) -> CubeTensor:
        donor = _donor2(a, b)  # before a and b sit on the value stack as call arguments
        return self._ew_ternary("where", cond, a, b, None, None if donor is None else donor + 1)

    def masked_fill(self, p: CubeTensor, mask: CubeTensor, value: Any) -> CubeTensor:
        donor = 1 if _donatable(p) else None
        return self._ew_ternary("masked_fill", mask, p, p, value, donor)

    def clamp(self, p: CubeTensor, lo: Any, hi: Any) -> CubeTensor:
        donor = 0 if _donatable(p) else None
        if lo is None and hi is None:
            return p
        op = "clamp" if lo is not None and hi is not None else ("clamp_lo" if hi is None else "clamp_hi")
        return self._ew_unary(op, p, p.dtype, lo, hi, donor)


def _exclusive(buf: Any) -> bool:
    """No other view and no weak reference shares ``buf``: its only reference is the one
    CubeTensor's slot (the count adds this parameter and getrefcount's argument)."""
    return _getrefcount(buf) == 3 and weakref.getweakrefcount(buf) == 0


def _donatable(p: CubeTensor) -> bool:
    """Called first thing in an op method with its parameter: ``p`` is a temporary nobody
    else can observe. The count is 3 for a temporary: the op method's parameter, this
    function's parameter and getrefcount's argument (see the module docstring; checked by
    tests/unit/test_cube_elementwise.py)."""
    return _REFCOUNT_SAFE and _getrefcount(p) == 3 and _exclusive(p.buffer)


def _donor2(a: CubeTensor, b: CubeTensor) -> int | None:
    """The operand of a binary op method that may be donated (``_donatable``'s test; ``a is b``
    counts twice, so an op of a tensor with itself never donates)."""
    if not _REFCOUNT_SAFE:
        return None
    if _getrefcount(a) == 3 and _exclusive(a.buffer):
        return 0
    if _getrefcount(b) == 3 and _exclusive(b.buffer):
        return 1
    return None


# ----------------------------------------------------------------------------- method tables
_BOOL_OUT = frozenset(PREDICATE_OPS + COMPARE_OPS + LOGICAL_OPS)


def _unary_method(op: str) -> Any:
    boolean = op in _BOOL_OUT

    def method(self: ElementwiseOps, p: CubeTensor) -> CubeTensor:
        donor = 0 if not boolean and _donatable(p) else None
        return self._ew_unary(op, p, dt.bool_ if boolean else p.dtype, None, None, donor)

    method.__name__ = op
    return method


def _binary_method(op: str) -> Any:
    boolean = op in _BOOL_OUT

    def method(self: ElementwiseOps, a: CubeTensor, b: CubeTensor) -> CubeTensor:
        donor = None if boolean else _donor2(a, b)
        return self._ew_binary(op, a, b, dt.bool_ if boolean else a.dtype, donor)

    method.__name__ = op
    return method


def _scalar_method(op: str, reverse: bool) -> Any:
    boolean = op in _BOOL_OUT
    kop = ("r:" if reverse else "s:") + op

    def method(self: ElementwiseOps, p: CubeTensor, s: Any) -> CubeTensor:
        donor = 0 if not boolean and _donatable(p) else None
        return self._ew_unary(kop, p, dt.bool_ if boolean else p.dtype, s, None, donor)

    method.__name__ = ("r" if reverse else "") + op + "_scalar"
    return method


for _op in UNARY_OPS + PREDICATE_OPS:
    setattr(ElementwiseOps, _op, _unary_method(_op))
for _op in BINARY_OPS:
    setattr(ElementwiseOps, _op, _binary_method(_op))
for _op in SCALAR_OPS:
    setattr(ElementwiseOps, f"{_op}_scalar", _scalar_method(_op, False))
for _op in REVERSED_SCALAR_OPS:
    setattr(ElementwiseOps, f"r{_op}_scalar", _scalar_method(_op, True))
