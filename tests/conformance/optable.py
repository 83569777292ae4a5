"""The op table: one spec per op (or per interesting form of an op), as data.

Each ``OpSpec`` says how to call the op on ember tensors (``fn``), what numpy computes for it
in float64 (``ref``; in the integer dtype itself for integer results, which must be exact),
how to generate inputs (``gen``: a list of cases, each a tuple of arrays; fresh random values
every run), the dtypes it applies to, the dtype of its result, and which inputs it is
differentiable in. ``test_ops.py`` checks every spec against its reference on every device
and dtype; ``test_grads.py`` checks the gradients of every differentiable spec by central
differences of the reference on every autodiff device.

Generated arrays: ``float64`` arrays are the op's *data* (converted to the dtype under test;
their values are already representable in it), ``int64`` arrays are indices and ``bool``
arrays are masks (both passed as they are).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import ember

from ._support import ALL, FLOATS, INTS, NARROW, NUMERIC, SIGNED, is_float, round_to

Shape = tuple[int, ...]
Case = tuple[np.ndarray, ...]


# --------------------------------------------------------------------------- sampling
class Sampler:
    """Draws op inputs for one dtype. ``mode`` is ``forward`` (edge values are mixed in)
    or ``grad`` (float64, smooth points only: kinks of the op are avoided)."""

    def __init__(self, rng: np.random.Generator, dtype: str, mode: str = "forward") -> None:
        self.rng = rng
        self.dtype = dtype
        self.mode = mode

    def x(self, shape: Shape, lo: float = -3.0, hi: float = 3.0, *, ints: tuple[int, int] = (-9, 9),
          edges: Sequence[float] = (), avoid: Sequence[float] = (), kinks: Sequence[float] = (),
          gap: float = 0.1, grid: float | None = None, distinct: bool = False) -> np.ndarray:
        """Data of ``shape``: uniform in [lo, hi] for floats (on a grid of step ``grid``
        when given, which makes ties likely), in ``ints`` for integer dtypes, 0/1 for bool.
        Values stay ``gap`` away from ``avoid`` (and from ``kinks`` in grad mode);
        ``edges`` replace random positions in forward mode; ``distinct`` values never tie."""
        rng, n = self.rng, int(np.prod(shape, dtype=np.int64))
        if self.dtype == "bool":
            return (rng.random(shape) < 0.5).astype(np.float64)
        if not is_float(self.dtype):
            lo_i, hi_i = ints
            if self.dtype == "uint8":
                lo_i = max(lo_i, 0)
            if distinct:
                pool = np.arange(lo_i, max(hi_i + 1, lo_i + n))
                return rng.permutation(pool)[:n].reshape(shape).astype(np.float64)
            v = rng.integers(lo_i, hi_i + 1, size=shape).astype(np.float64)
            for p in avoid:  # e.g. no zero divisors
                v[v == p] = p + 1 if p + 1 <= hi_i else p - 1
            return v
        if distinct:  # k/4 for distinct k: exact in every float dtype, never tied
            return ((rng.permutation(n) - n // 2) * 0.25).reshape(shape).astype(np.float64)
        bad = list(avoid) + (list(kinks) if self.mode == "grad" else [])

        def draw(size: Any) -> np.ndarray:
            if grid is not None and self.mode == "forward":
                return rng.integers(math.ceil(lo / grid), math.floor(hi / grid) + 1, size=size) * grid
            return rng.uniform(lo, hi, size=size)

        v = np.asarray(draw(shape), dtype=np.float64)
        for _ in range(100):
            near = np.zeros(v.shape, bool)
            for p in bad:
                near |= np.abs(v - p) < gap
            if not near.any():
                break
            v[near] = draw(int(near.sum()))
        v = round_to(v, self.dtype)
        if self.mode == "forward" and edges and n:
            k = min(len(edges), n)
            pos = rng.choice(n, size=k, replace=False)
            flat = v.reshape(-1)
            flat[pos] = round_to(np.asarray(rng.permutation(np.asarray(edges, np.float64))[:k]), self.dtype)
            v = flat.reshape(shape)
        return v

    def index(self, shape: Shape, high: int, low: int = 0) -> np.ndarray:
        """int64 indices in [low, high)."""
        return self.rng.integers(low, high, size=shape).astype(np.int64)

    def unique_index(self, n: int, high: int) -> np.ndarray:
        """``n`` distinct int64 indices in [0, high)."""
        return self.rng.permutation(high)[:n].astype(np.int64)

    def mask(self, shape: Shape) -> np.ndarray:
        return self.rng.random(shape) < 0.5


Gen = Callable[[Sampler], list[Case]]


# --------------------------------------------------------------------------- specs
def _same(d: str) -> str:
    return d


def float_out(d: str) -> str:
    """Result dtype of a float-only op or of float-scalar arithmetic: ints lift to float32."""
    return d if is_float(d) else "float32"


def int64_out(d: str) -> str:
    """sum/prod/cumsum: integer and bool inputs accumulate in int64 (PyTorch)."""
    return d if is_float(d) else "int64"


def bool_out(d: str) -> str:
    return "bool"


Mag = Callable[[tuple[np.ndarray, ...], np.ndarray], Any]


@dataclass(frozen=True)
class OpSpec:
    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    gen: Gen
    dtypes: tuple[str, ...] = FLOATS
    #: positions of the inputs the op is differentiable in (empty: not differentiable)
    grad: tuple[int, ...] = ()
    #: result dtype (one per output for ops that return several) given the input dtype
    out: Callable[[str], Any] = _same
    #: tolerance multiplier for floating results (composites round in several steps)
    tol: float = 1.0
    #: error scale per result element given (reference inputs, reference result); default |ref|
    mag: Mag | None = None

    def __repr__(self) -> str:
        return self.name


def linear_mag(ref: Callable[..., Any]) -> Mag:
    """Error scale of a sum-like op: the same op over absolute values."""
    return lambda ins, r: np.abs(ref(*[np.abs(a) if a.dtype.kind == "f" else a for a in ins]))


def input_mag(power: int = 1) -> Mag:
    """Error scale max|x|**power over the data inputs (for ops with cancellation)."""
    def mag(ins: tuple[np.ndarray, ...], r: np.ndarray) -> Any:
        m = max((float(np.max(np.abs(a))) for a in ins if a.dtype.kind == "f" and a.size), default=1.0)
        return np.maximum(np.abs(r), max(m, 1.0) ** power)
    return mag


UNARY_SHAPES: list[Shape] = [(), (7,), (3, 4), (2, 3, 4)]
BROADCAST_PAIRS: list[tuple[Shape, Shape]] = [
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3, 2)),
    ((4,), ()), ((1,), (2, 1, 3)),
]


def unary(shapes: Sequence[Shape] = UNARY_SHAPES, **kw: Any) -> Gen:
    return lambda s: [(s.x(sh, **kw),) for sh in shapes]


def binary(pairs: Sequence[tuple[Shape, Shape]] = BROADCAST_PAIRS, a: dict[str, Any] | None = None,
           b: dict[str, Any] | None = None) -> Gen:
    return lambda s: [(s.x(p, **(a or {})), s.x(q, **(b or {}))) for p, q in pairs]


def one(*make: Callable[[Sampler], np.ndarray]) -> Gen:
    """A single case whose inputs are drawn by ``make``."""
    return lambda s: [tuple(m(s) for m in make)]


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _logsumexp(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)  # all -inf (or an inf) slice: no shift
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    return x - _logsumexp(x, axis, True)


def _pad_ref(x: np.ndarray, pads: tuple[int, ...], value: float) -> np.ndarray:
    widths = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        widths[x.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    return np.pad(x, widths, constant_values=value)


def _gather_ref(x: np.ndarray, dim: int, idx: np.ndarray) -> np.ndarray:
    out = np.empty(idx.shape, x.dtype)
    for ix in np.ndindex(*idx.shape):
        src = list(ix)
        src[dim] = idx[ix]
        out[ix] = x[tuple(src)]
    return out


def _scatter_ref(x: np.ndarray, dim: int, idx: np.ndarray, src: np.ndarray, add: bool) -> np.ndarray:
    out = x.copy()
    for ix in np.ndindex(*idx.shape):
        dst = list(ix)
        dst[dim] = idx[ix]
        if add:
            out[tuple(dst)] += src[ix]
        else:
            out[tuple(dst)] = src[ix]
    return out


def _split_ref(x: np.ndarray, sizes: Sequence[int], axis: int) -> tuple[np.ndarray, ...]:
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _chunk_sizes(n: int, chunks: int) -> list[int]:
    step = -(-n // chunks)
    return [min(step, n - i) for i in range(0, n, step)]


def _setitem(key: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """fn/ref of ``y = x.clone(); y[key] = v`` (``v`` a tensor input)."""
    def fn(x: Any, v: Any) -> Any:
        y = x.clone()
        y[key] = v
        return y

    def ref(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        y = x.copy()
        y[key] = v
        return y

    return fn, ref


def _inplace(method: str, *args: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """fn of ``z = x.clone(); z.<method>(y?, *args); return z`` and whether it returned z."""
    def fn(x: Any, *ys: Any) -> Any:
        z = x.clone()
        r = getattr(z, method)(*ys, *args)
        assert r is z, f"{method} must return self"
        return z

    return fn, fn


# --------------------------------------------------------------------------- the table
SPECS: list[OpSpec] = []


def add(*specs: OpSpec) -> None:
    SPECS.extend(specs)


# -- unary elementwise --------------------------------------------------------------------
LIFTED = FLOATS + INTS  # float-only ops accept integers and return float32 (PyTorch)


def unop(name: str, fn: Callable[..., Any], ref: Callable[..., Any], *, dtypes: tuple[str, ...] = LIFTED,
         out: Callable[[str], Any] = float_out, grad: bool = True, tol: float = 1.0, **x: Any) -> OpSpec:
    return OpSpec(name, fn, ref, unary(**x), dtypes, (0,) if grad else (), out, tol)


BIG = 1e3
add(
    unop("neg", lambda x: -x, np.negative, dtypes=NUMERIC, out=_same,
         edges=(0.0, -BIG, BIG, np.inf, np.nan)),
    unop("neg.method", lambda x: x.neg(), np.negative, dtypes=NUMERIC, out=_same),
    unop("abs", lambda x: x.abs(), np.abs, dtypes=NUMERIC, out=_same, kinks=(0,),
         edges=(0.0, -BIG, BIG, -np.inf, np.nan)),
    unop("exp", lambda x: x.exp(), np.exp, ints=(-5, 5), edges=(0.0, -BIG, 20.0, BIG, -np.inf, np.inf)),
    unop("log", lambda x: x.log(), np.log, lo=0.05, hi=5.0, ints=(1, 9), edges=(0.0, 1.0, 1e-3, BIG, np.inf)),
    unop("log1p", lambda x: x.log1p(), np.log1p, lo=-0.9, hi=5.0, ints=(0, 9), edges=(0.0, -1.0, 1e-4, BIG)),
    unop("sqrt", lambda x: x.sqrt(), np.sqrt, lo=0.05, hi=9.0, ints=(0, 9), edges=(0.0, 1.0, BIG, np.inf)),
    unop("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), lo=0.2, hi=9.0, ints=(1, 9),
         edges=(0.0, 1.0, BIG, np.inf)),
    unop("sin", lambda x: x.sin(), np.sin, lo=-6.0, hi=6.0, edges=(0.0, 100.0, -100.0)),
    unop("cos", lambda x: x.cos(), np.cos, lo=-6.0, hi=6.0, edges=(0.0, 100.0, -100.0)),
    unop("tanh", lambda x: x.tanh(), np.tanh, edges=(0.0, -BIG, BIG, 20.0, np.nan)),
    unop("sigmoid", lambda x: x.sigmoid(), _sigmoid, lo=-8.0, hi=8.0, edges=(0.0, -BIG, BIG, -30.0, 30.0)),
    unop("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), dtypes=NUMERIC, out=_same, kinks=(0,),
         edges=(0.0, -BIG, BIG)),
    unop("gelu", lambda x: x.gelu(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), tol=3,
         lo=-5.0, hi=5.0, edges=(0.0, -30.0, 30.0)),
    unop("gelu.erf", lambda x: x.gelu(approximate="none"), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
         tol=3),
    unop("gelu.tanh", lambda x: x.gelu(approximate="tanh"), _gelu_tanh, tol=3, lo=-5.0, hi=5.0,
         edges=(0.0, -30.0, 30.0)),
    unop("silu", lambda x: x.silu(), lambda x: x * _sigmoid(x), tol=3, lo=-8.0, hi=8.0,
         edges=(0.0, -BIG, BIG)),
    unop("erf", lambda x: x.erf(), _erf, edges=(0.0, -5.0, 5.0, np.inf)),
    unop("clamp", lambda x: x.clamp(-1.0, 1.5), lambda x: np.clip(x, -1.0, 1.5), dtypes=FLOATS, out=_same,
         kinks=(-1.0, 1.5), edges=(-1.0, 1.5, -BIG, BIG)),
    unop("clamp.int", lambda x: x.clamp(-2, 4), lambda x: np.clip(x, -2, 4), dtypes=SIGNED, out=_same,
         kinks=(-2.0, 4.0)),
    unop("clamp.min", lambda x: x.clamp(min=0.5), lambda x: np.maximum(x, 0.5), dtypes=FLOATS, out=_same,
         kinks=(0.5,)),
    unop("clamp.max", lambda x: ember.clamp(x, max=-0.5), lambda x: np.minimum(x, -0.5), dtypes=FLOATS,
         out=_same, kinks=(-0.5,)),
    unop("isnan", lambda x: x.isnan(), np.isnan, dtypes=FLOATS + ("int32",), out=bool_out, grad=False,
         edges=(np.nan, np.inf, -np.inf, 0.0)),
    unop("isinf", lambda x: x.isinf(), np.isinf, dtypes=FLOATS + ("int32",), out=bool_out, grad=False,
         edges=(np.nan, np.inf, -np.inf, 0.0)),
    unop("logical_not", lambda x: x.logical_not(), np.logical_not, dtypes=ALL, out=bool_out, grad=False,
         grid=1.0, edges=(0.0, np.nan)),
)

# -- scalar arithmetic (scalars on either side) --------------------------------------------
NONZERO: dict[str, Any] = {"avoid": (0.0,), "gap": 0.3}
ScalarCase = tuple[str, Callable[..., Any], Callable[..., Any], tuple[str, ...], Any, dict[str, Any]]
SCALAR_CASES: list[ScalarCase] = [
    ("t+2", lambda x: x + 2, lambda x: x + 2, NUMERIC, _same, {}),
    ("2+t", lambda x: 2 + x, lambda x: 2 + x, NUMERIC, _same, {}),
    ("t+2.5", lambda x: x + 2.5, lambda x: x + 2.5, NUMERIC, float_out, {}),
    ("t-2", lambda x: x - 2, lambda x: x - 2, NUMERIC, _same, {}),
    ("2-t", lambda x: 2 - x, lambda x: 2 - x, NUMERIC, _same, {}),
    ("1.5-t", lambda x: 1.5 - x, lambda x: 1.5 - x, NUMERIC, float_out, {}),
    ("t*3", lambda x: x * 3, lambda x: x * 3, NUMERIC, _same, {}),
    ("-0.5*t", lambda x: -0.5 * x, lambda x: -0.5 * x, NUMERIC, float_out, {}),
    ("t/4", lambda x: x / 4, lambda x: x / 4, NUMERIC, float_out, {}),
    ("t/2.5", lambda x: x / 2.5, lambda x: x / 2.5, NUMERIC, float_out, {}),
    ("3/t", lambda x: 3 / x, lambda x: 3 / x, NUMERIC, float_out, NONZERO),
    ("t//2", lambda x: x // 2, lambda x: np.floor_divide(x, 2), NUMERIC, _same, {}),
    ("t//-1.5", lambda x: x // -1.5, lambda x: np.floor_divide(x, -1.5), NUMERIC, float_out, {}),
    ("7//t", lambda x: 7 // x, lambda x: np.floor_divide(7, x), NUMERIC, _same, NONZERO),
    ("t%3", lambda x: x % 3, lambda x: np.remainder(x, 3), NUMERIC, _same, {}),
    ("t%-2.5", lambda x: x % -2.5, lambda x: np.remainder(x, -2.5), NUMERIC, float_out, {}),
    ("7%t", lambda x: 7 % x, lambda x: np.remainder(7, x), NUMERIC, _same, NONZERO),
    ("t**2", lambda x: x**2, lambda x: x**2, NUMERIC, _same, {}),
    ("t**3", lambda x: x**3, lambda x: x**3, NUMERIC, _same, {"ints": (-5, 5)}),
    ("t**0.5", lambda x: x**0.5, lambda x: np.power(x, 0.5), NUMERIC, float_out,
     {"lo": 0.1, "hi": 5.0, "ints": (0, 9)}),
    ("t**-1.5", lambda x: x**-1.5, lambda x: np.power(x, -1.5), FLOATS, _same, {"lo": 0.2, "hi": 5.0}),
    ("2**t", lambda x: 2**x, lambda x: np.power(2, x), NUMERIC, _same, {"ints": (0, 6)}),
    ("2.5**t", lambda x: 2.5**x, lambda x: np.power(2.5, x), NUMERIC, float_out, {"ints": (-3, 5)}),
]
# gradients: floor division has none (PyTorch: "not implemented"); remainder has slope 1 in
# the dividend; a divisor tensor on the right is only checked in the tensor-tensor specs
for _name, _fn, _ref, _dtypes, _out, _kw in SCALAR_CASES:
    _kinks = {"t%3": (-3.0, 0.0, 3.0), "t%-2.5": (-2.5, 0.0, 2.5)}.get(_name, ())
    _g = () if "//" in _name or "%t" in _name else (0,)
    add(OpSpec(f"scalar[{_name}]", _fn, _ref, unary(UNARY_SHAPES, kinks=_kinks, **_kw), _dtypes, _g, _out))

# -- binary tensor-tensor (broadcasting) --------------------------------------------------
POW_A = {"lo": 0.3, "hi": 2.5, "ints": (-3, 3)}
POW_B = {"lo": -2.0, "hi": 2.0, "ints": (0, 3)}
add(
    OpSpec("add", lambda a, b: a + b, np.add, binary(), NUMERIC, (0, 1)),
    OpSpec("sub", lambda a, b: a - b, np.subtract, binary(), NUMERIC, (0, 1)),
    OpSpec("mul", lambda a, b: a * b, np.multiply, binary(), NUMERIC, (0, 1)),
    OpSpec("div", lambda a, b: a / b, np.divide, binary(b=NONZERO), NUMERIC, (0, 1), float_out),
    OpSpec("div.by_zero", lambda a, b: a / b, np.divide,
           lambda s: [(np.array([1.0, -1.0, 0.0, 2.0]), np.array([0.0, 0.0, 0.0, -0.0]))], FLOATS,
           (), float_out),
    OpSpec("floor_div", lambda a, b: a // b, np.floor_divide, binary(b=NONZERO), NUMERIC),
    OpSpec("remainder", lambda a, b: a % b, np.remainder, binary(b=NONZERO), NUMERIC, (0, 1)),
    OpSpec("pow", lambda a, b: a**b, np.power, binary(a=POW_A, b=POW_B), NUMERIC, (0, 1)),
    OpSpec("maximum", lambda a, b: ember.maximum(a, b), np.maximum,
           binary(a={"grid": 0.5}, b={"grid": 0.5}), NUMERIC, (0, 1)),
    OpSpec("minimum", lambda a, b: a.minimum(b), np.minimum,
           binary(a={"grid": 0.5}, b={"grid": 0.5}), NUMERIC, (0, 1)),
    OpSpec("maximum.nan", lambda a, b: ember.maximum(a, b), np.maximum,
           lambda s: [(np.array([np.nan, 1.0, np.nan]), np.array([1.0, np.nan, np.nan]))], FLOATS),
    # registry ops with kernels of their own (ember/ops/elementwise.py)
    OpSpec("atan2", lambda a, b: a.atan2(b), np.arctan2, binary(a=NONZERO), LIFTED, (0, 1), float_out),
    OpSpec("logaddexp", lambda a, b: ember.logaddexp(a, b), np.logaddexp, binary(), LIFTED, (0, 1), float_out,
           tol=2),
    OpSpec("logaddexp.inf", lambda a, b: a.logaddexp(b), np.logaddexp,
           lambda s: [(np.array([np.inf, -np.inf, np.inf, 1.0, np.nan]),
                       np.array([np.inf, -np.inf, 1.0, -np.inf, 0.0]))], FLOATS),
    OpSpec("hypot", lambda a, b: a.hypot(b), np.hypot, binary(a=NONZERO), FLOATS, (0, 1), tol=2),
    OpSpec("hypot.edges", lambda a, b: ember.hypot(a, b), np.hypot,
           lambda s: [(np.array([0.0, 3e38, np.inf, -4.0, 0.0]), np.array([0.0, 3e38, 1.0, 3.0, -2.0]))],
           ("float32",)),
    OpSpec("lerp", lambda a, b: ember.lerp(a, b, 0.3), lambda a, b: a + 0.3 * (b - a), binary(), FLOATS, (0, 1),
           tol=2),
    OpSpec("lerp.tensor_weight", lambda a, b, w: a.lerp(b, w), lambda a, b, w: a + w * (b - a),
           lambda s: [(s.x((3, 4)), s.x((4,)), s.x((3, 1), lo=-1.0, hi=2.0))], FLOATS, (0, 1, 2), tol=3),
)
_TIES = {"grid": 0.5, "ints": (-3, 3)}
for _name, _fn, _ref in [
    ("eq", lambda a, b: a == b, np.equal), ("ne", lambda a, b: a != b, np.not_equal),
    ("lt", lambda a, b: a < b, np.less), ("le", lambda a, b: a <= b, np.less_equal),
    ("gt", lambda a, b: a > b, np.greater), ("ge", lambda a, b: a >= b, np.greater_equal),
    ("eq.scalar", lambda a, b: a == 1, lambda a, b: a == 1), ("lt.scalar", lambda a, b: a < 0.5,
                                                              lambda a, b: a < 0.5),
    ("logical_and", lambda a, b: ember.logical_and(a, b), np.logical_and),
    ("logical_or", lambda a, b: a.logical_or(b), np.logical_or),
]:
    add(OpSpec(_name, _fn, _ref, binary(a=_TIES, b=_TIES), ALL, (), bool_out))
add(OpSpec("eq.nan", lambda a, b: a == b, np.equal,
           lambda s: [(np.array([np.nan, 1.0, np.inf]), np.array([np.nan, 1.0, np.inf]))], FLOATS, (),
           bool_out))

# -- where / masked_fill ------------------------------------------------------------------
add(
    OpSpec("where", lambda c, a, b: ember.where(c, a, b), np.where,
           lambda s: [(s.mask((3, 4)), s.x((3, 4)), s.x((3, 4))), (s.mask((3, 1)), s.x((3, 4)), s.x((4,))),
                      (s.mask((2, 1, 4)), s.x((3, 1)), s.x(()))], ALL, (1, 2)),
    OpSpec("where.scalar", lambda c, a: ember.where(c, a, 0.0), lambda c, a: np.where(c, a, 0.0),
           lambda s: [(s.mask((3, 4)), s.x((3, 4))), (s.mask((4,)), s.x((3, 1)))], FLOATS, (1,)),
    OpSpec("where.method", lambda c, a, b: a.where(c, b), np.where,
           lambda s: [(s.mask((3, 4)), s.x((3, 4)), s.x((4,)))], NUMERIC, (1, 2)),
    OpSpec("masked_fill", lambda x, m: x.masked_fill(m, -1.5), lambda x, m: np.where(m, -1.5, x),
           lambda s: [(s.x((3, 4)), s.mask((3, 4))), (s.x((2, 3, 4)), s.mask((4,)))], FLOATS, (0,)),
    OpSpec("masked_fill.int", lambda x, m: x.masked_fill(m, 3),
           lambda x, m: np.where(m, 3, x).astype(x.dtype),
           lambda s: [(s.x((3, 4)), s.mask((3, 1)))], ALL, (0,)),
)

# -- reductions -----------------------------------------------------------------------------
RED_SHAPE: Shape = (2, 3, 4)
RED_DIMS: list[tuple[Any, bool]] = [(None, False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True),
                                    ((-1, 0), False)]
INT_DIMS: list[tuple[Any, bool]] = [(None, False), (0, False), (1, True), (-1, False)]


def _red_fn(method: str, dim: Any, keepdim: bool, **kw: Any) -> Callable[..., Any]:
    if dim is None and not keepdim:
        return lambda x: getattr(x, method)(**kw)
    return lambda x: getattr(x, method)(dim=dim, keepdim=keepdim, **kw)


def _tag(dim: Any, keepdim: bool) -> str:
    return f"dim={dim}" + (",keepdim" if keepdim else "")


_PROD_X = {"lo": -1.4, "hi": 1.4, "avoid": (0.0,), "gap": 0.5, "ints": (-2, 2)}
for _dim, _keep in RED_DIMS:
    _t = _tag(_dim, _keep)
    _sum = lambda x, d=_dim, k=_keep: np.sum(x, axis=d, keepdims=k)  # noqa: E731
    _mean = lambda x, d=_dim, k=_keep: np.mean(x, axis=d, keepdims=k)  # noqa: E731
    _mag = linear_mag(_sum)
    add(
        OpSpec(f"sum[{_t}]", _red_fn("sum", _dim, _keep), _sum, unary([RED_SHAPE]), ALL, (0,), int64_out,
               mag=_mag),
        OpSpec(f"mean[{_t}]", _red_fn("mean", _dim, _keep), _mean, unary([RED_SHAPE]), FLOATS, (0,),
               mag=linear_mag(_mean)),
        OpSpec(f"prod[{_t}]", _red_fn("prod", _dim, _keep),
               lambda x, d=_dim, k=_keep: np.prod(x, axis=d, keepdims=k), unary([RED_SHAPE], **_PROD_X),
               NUMERIC, (0,), int64_out, tol=2),
        OpSpec(f"all[{_t}]", _red_fn("all", _dim, _keep),
               lambda x, d=_dim, k=_keep: np.all(x, axis=d, keepdims=k),
               lambda s: [(s.x(RED_SHAPE, grid=1.0, lo=-1, hi=4, ints=(0, 4)),),
                          (s.x(RED_SHAPE, lo=1, hi=2, ints=(1, 3)),)], ALL, (), bool_out),
        OpSpec(f"any[{_t}]", _red_fn("any", _dim, _keep),
               lambda x, d=_dim, k=_keep: np.any(x, axis=d, keepdims=k),
               lambda s: [(s.x(RED_SHAPE, grid=1.0, lo=0, hi=2, ints=(0, 1)),),
                          (s.x(RED_SHAPE, lo=0, hi=0, ints=(0, 0)),)], ALL, (), bool_out),
    )
    if _dim is not None:
        for _corr in (None, 0, 2):
            _kw = {} if _corr is None else {"correction": _corr}
            _c = 1 if _corr is None else _corr
            _name = _t + ("" if _corr is None else f",correction={_corr}")
            add(
                OpSpec(f"var[{_name}]", _red_fn("var", _dim, _keep, **_kw),
                       lambda x, d=_dim, k=_keep, c=_c: np.var(x, axis=d, keepdims=k, ddof=c),
                       unary([RED_SHAPE]), FLOATS, (0,), tol=3, mag=input_mag(2)),
                OpSpec(f"std[{_name}]", _red_fn("std", _dim, _keep, **_kw),
                       lambda x, d=_dim, k=_keep, c=_c: np.std(x, axis=d, keepdims=k, ddof=c),
                       unary([RED_SHAPE]), FLOATS, (0,), tol=3, mag=input_mag(1)),
            )
        add(OpSpec(f"logsumexp[{_t}]", lambda x, d=_dim, k=_keep: x.logsumexp(dim=d, keepdim=k),
                   lambda x, d=_dim, k=_keep: _logsumexp(x, d, k),
                   unary([RED_SHAPE], edges=(20.0, -20.0)), FLOATS, (0,), tol=3, mag=input_mag(1)))
add(
    OpSpec("var[all]", lambda x: x.var(), lambda x: np.var(x, ddof=1), unary([RED_SHAPE, (5,)]), FLOATS,
           (0,), tol=3, mag=input_mag(2)),
    OpSpec("std[all]", lambda x: x.std(), lambda x: np.std(x, ddof=1), unary([RED_SHAPE]), FLOATS, (0,),
           tol=3, mag=input_mag(1)),
    OpSpec("logsumexp.large", lambda x: x.logsumexp(dim=-1), lambda x: _logsumexp(x, -1, False),
           lambda s: [(np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf]]),)],
           ("float64", "float32"), (), tol=3),
    OpSpec("sum.0d", lambda x: x.sum(), np.sum, unary([()]), NUMERIC, (0,), int64_out),
    OpSpec("sum.dim0_of_1d", lambda x: x.sum(dim=0), lambda x: np.sum(x, axis=0), unary([(7,)]), NUMERIC,
           (0,), int64_out, mag=linear_mag(lambda x: np.sum(x, axis=0))),
)
for _dim, _keep in INT_DIMS:
    _t = _tag(_dim, _keep)
    for _m, _npm, _npa in [("max", np.max, np.argmax), ("min", np.min, np.argmin)]:
        if _dim is None:
            add(OpSpec(f"{_m}[all]", lambda x, m=_m: getattr(x, m)(), _npm, unary([RED_SHAPE, (5,)]),
                       NUMERIC + ("bool",), (0,), tol=0))
        else:
            add(OpSpec(f"{_m}[{_t}]",
                       lambda x, m=_m, d=_dim, k=_keep: (getattr(x, m)(dim=d, keepdim=k).values,
                                                          getattr(x, m)(dim=d, keepdim=k).indices),
                       lambda x, f=_npm, g=_npa, d=_dim, k=_keep: (f(x, axis=d, keepdims=k),
                                                                    g(x, axis=d, keepdims=k)),
                       unary([RED_SHAPE], distinct=True), NUMERIC, (0,), lambda d: (d, "int64"), tol=0))
    for _m, _npa in [("argmax", np.argmax), ("argmin", np.argmin)]:
        add(OpSpec(f"{_m}[{_t}]", _red_fn(_m, _dim, _keep),
                   lambda x, g=_npa, d=_dim, k=_keep: g(x, axis=d, keepdims=k),
                   unary([RED_SHAPE], distinct=True), NUMERIC, (), lambda d: "int64"))
for _dim in (0, 1, -1):
    add(
        OpSpec(f"softmax[dim={_dim}]", lambda x, d=_dim: x.softmax(d), lambda x, d=_dim: _softmax(x, d),
               unary([RED_SHAPE], edges=(30.0, -30.0)), FLOATS, (0,), tol=3),
        OpSpec(f"log_softmax[dim={_dim}]", lambda x, d=_dim: x.log_softmax(dim=d),
               lambda x, d=_dim: _log_softmax(x, d), unary([RED_SHAPE], edges=(30.0, -30.0)), FLOATS, (0,),
               tol=3, mag=input_mag(1)),
        OpSpec(f"cumprod[dim={_dim}]", lambda x, d=_dim: x.cumprod(d), lambda x, d=_dim: np.cumprod(x, axis=d),
               unary([RED_SHAPE], lo=-1.5, hi=1.5, ints=(-2, 2)), NUMERIC, (0,), int64_out, tol=3,
               mag=linear_mag(lambda x, d=_dim: np.cumprod(np.abs(x), axis=d))),
        OpSpec(f"cumsum[dim={_dim}]", lambda x, d=_dim: x.cumsum(d), lambda x, d=_dim: np.cumsum(x, axis=d),
               unary([RED_SHAPE]), NUMERIC, (0,), int64_out,
               mag=linear_mag(lambda x, d=_dim: np.cumsum(x, axis=d))),
    )
add(OpSpec("softmax.ember", lambda x: ember.softmax(x, dim=-1), lambda x: _softmax(x, -1),
           lambda s: [(s.x((3, 5)),), (np.array([[-np.inf, 0.0, 1.0], [1000.0, 1000.0, 0.0]]),)], FLOATS, (),
           tol=3))

# -- matmul -----------------------------------------------------------------------------
MATMUL_SHAPES: list[tuple[Shape, Shape]] = [
    ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (3, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
]
_MM_INTS = {"ints": (-4, 4)}
add(
    OpSpec("matmul", lambda a, b: a @ b, np.matmul, binary(MATMUL_SHAPES, _MM_INTS, _MM_INTS),
           FLOATS + ("int32", "int64"), (0, 1), mag=linear_mag(np.matmul)),
    OpSpec("matmul.method", lambda a, b: a.matmul(b), np.matmul, binary([((3, 4), (4, 2))]), FLOATS, (0, 1),
           mag=linear_mag(np.matmul)),
    OpSpec("matmul.function", lambda a, b: ember.matmul(a, b), np.matmul, binary([((2, 3, 4), (2, 4, 2))]),
           FLOATS, (0, 1), mag=linear_mag(np.matmul)),
)

# -- shape ops (views) ---------------------------------------------------------------------
X3 = (2, 3, 4)


def shape_op(name: str, fn: Callable[..., Any], ref: Callable[..., Any], shape: Shape = X3,
             dtypes: tuple[str, ...] = ALL) -> OpSpec:
    return OpSpec(name, fn, ref, unary([shape]), dtypes, (0,))


add(
    shape_op("reshape", lambda x: x.reshape(4, 6), lambda x: x.reshape(4, 6)),
    shape_op("reshape.tuple", lambda x: x.reshape((3, -1)), lambda x: x.reshape(3, -1)),
    shape_op("reshape.flat", lambda x: x.reshape(-1), lambda x: x.reshape(-1)),
    shape_op("reshape.0d", lambda x: x.reshape(()), lambda x: x.reshape(()), shape=(1, 1)),
    shape_op("reshape.of_permuted", lambda x: x.permute(2, 0, 1).reshape(4, 6),
             lambda x: x.transpose(2, 0, 1).reshape(4, 6)),
    shape_op("view", lambda x: x.view(6, 4), lambda x: x.reshape(6, 4)),
    shape_op("view.-1", lambda x: x.view(2, -1), lambda x: x.reshape(2, -1)),
    shape_op("permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
    shape_op("permute.tuple", lambda x: x.permute((1, 2, 0)), lambda x: x.transpose(1, 2, 0)),
    shape_op("permute.negative", lambda x: x.permute(-1, 0, -2), lambda x: x.transpose(2, 0, 1)),
    shape_op("transpose", lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2)),
    shape_op("transpose.negative", lambda x: x.transpose(-1, -2), lambda x: np.swapaxes(x, -1, -2)),
    shape_op("T", lambda x: x.T, lambda x: x.T, shape=(3, 4)),
    shape_op("mT", lambda x: x.mT, lambda x: np.swapaxes(x, -1, -2)),
    shape_op("expand", lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), shape=(3, 1)),
    shape_op("expand.-1", lambda x: x.expand(-1, 5), lambda x: np.broadcast_to(x, (3, 5)), shape=(3, 1)),
    shape_op("expand.then_add", lambda x: x.expand(3, 4) + 1, lambda x: np.broadcast_to(x, (3, 4)) + 1,
             shape=(1, 4), dtypes=NUMERIC),
    shape_op("squeeze", lambda x: x.squeeze(), lambda x: x.squeeze(), shape=(1, 3, 1, 4)),
    shape_op("squeeze.dim", lambda x: x.squeeze(0), lambda x: x.squeeze(0), shape=(1, 3, 1, 4)),
    shape_op("squeeze.negative", lambda x: x.squeeze(-2), lambda x: x.squeeze(-2), shape=(1, 3, 1, 4)),
    shape_op("squeeze.noop", lambda x: x.squeeze(1), lambda x: x, shape=(1, 3, 1, 4)),
    shape_op("unsqueeze", lambda x: x.unsqueeze(0), lambda x: x[None]),
    shape_op("unsqueeze.mid", lambda x: x.unsqueeze(1), lambda x: x[:, None]),
    shape_op("unsqueeze.negative", lambda x: x.unsqueeze(-1), lambda x: x[..., None]),
    shape_op("flatten", lambda x: x.flatten(), lambda x: x.reshape(-1)),
    shape_op("flatten.start", lambda x: x.flatten(1), lambda x: x.reshape(2, 12)),
    shape_op("flatten.range", lambda x: x.flatten(0, 1), lambda x: x.reshape(6, 4)),
    shape_op("flatten.0d", lambda x: x.flatten(), lambda x: x.reshape(1), shape=()),
    shape_op("contiguous", lambda x: x.transpose(0, 1).contiguous(), lambda x: np.swapaxes(x, 0, 1)),
    shape_op("contiguous.0d", lambda x: x.contiguous(), lambda x: x, shape=()),
    shape_op("clone", lambda x: x.clone(), lambda x: x),
    shape_op("flip", lambda x: x.flip(0), lambda x: np.flip(x, 0)),
    shape_op("roll", lambda x: x.roll(1, 2), lambda x: np.roll(x, 1, 2)),
    shape_op("roll.dims", lambda x: ember.roll(x, (-1, 5), (0, -1)), lambda x: np.roll(x, (-1, 5), (0, -1))),
    shape_op("roll.flat", lambda x: x.roll(7), lambda x: np.roll(x, 7)),
    shape_op("diagonal", lambda x: x.diagonal(), lambda x: np.diagonal(x)),
    shape_op("diagonal.offset", lambda x: ember.diagonal(x, 1, 2, 1), lambda x: np.diagonal(x, 1, 2, 1)),
    shape_op("diagonal.negative", lambda x: x.diagonal(-1, -1, 0), lambda x: np.diagonal(x, -1, -1, 0)),
    shape_op("flip.dims", lambda x: x.flip((0, 2)), lambda x: np.flip(x, (0, 2))),
    shape_op("flip.ember", lambda x: ember.flip(x, (-1,)), lambda x: np.flip(x, -1)),
    shape_op("repeat", lambda x: x.repeat(2, 1), lambda x: np.tile(x, (2, 1)), shape=(2, 3)),
    shape_op("repeat.new_dims", lambda x: x.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3)), shape=(2, 3)),
    shape_op("tril", lambda x: x.tril(), lambda x: np.tril(x), shape=(4, 5)),
    shape_op("tril.-1", lambda x: ember.tril(x, -1), lambda x: np.tril(x, -1), shape=(4, 5)),
    shape_op("triu", lambda x: x.triu(), lambda x: np.triu(x), shape=(4, 5)),
    shape_op("triu.2.batched", lambda x: x.triu(diagonal=2), lambda x: np.triu(x, 2), shape=(2, 4, 5)),
    shape_op("tril.1.batched", lambda x: ember.tril(x, diagonal=1), lambda x: np.tril(x, 1), shape=(2, 4, 5)),
)

# -- pad / cat / stack / split / chunk -----------------------------------------------------
for _pads, _val, _shape in [((1, 2), None, (3, 4)), ((1, 0, 2, 1), 2, (3, 4)), ((0, 1, 1, 0, 2, 0), 3, X3),
                            ((2, 2), 0, (5,))]:
    _fn = (lambda x, p=_pads: ember.pad(x, p)) if _val is None else \
        (lambda x, p=_pads, v=_val: ember.pad(x, p, value=v))
    add(OpSpec(f"pad{list(_pads)}" + ("" if _val is None else f",value={_val}"), _fn,
               lambda x, p=_pads, v=_val or 0: _pad_ref(x, p, v), unary([_shape]), NUMERIC, (0,)))
for _dim in (0, 1, -1):
    _sizes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    _sizes = [tuple(n + i if d == _dim % 3 else n for d, n in enumerate(sh)) for i, sh in enumerate(_sizes)]
    add(
        OpSpec(f"cat[dim={_dim}]", lambda a, b, c, d=_dim: ember.cat([a, b, c], dim=d),
               lambda a, b, c, d=_dim: np.concatenate([a, b, c], axis=d),
               lambda s, sz=_sizes: [tuple(s.x(q) for q in sz)], ALL, (0, 1, 2)),
        OpSpec(f"stack[dim={_dim}]", lambda a, b, d=_dim: ember.stack((a, b), dim=d),
               lambda a, b, d=_dim: np.stack([a, b], axis=d), binary([(X3, X3)]), ALL, (0, 1)),
    )
add(
    OpSpec("cat.single", lambda a: ember.cat([a]), lambda a: a, unary([(3, 2)]), ALL, (0,)),
    OpSpec("split[2,dim=1]", lambda x: x.split(2, dim=1), lambda x: _split_ref(x, [2, 2, 1], 1),
           unary([(3, 5)]), ALL, (0,)),
    OpSpec("split[sections]", lambda x: ember.split(x, [1, 3, 1], dim=1),
           lambda x: _split_ref(x, [1, 3, 1], 1),
           unary([(3, 5)]), ALL, (0,)),
    OpSpec("split[dim=0]", lambda x: x.split(4), lambda x: _split_ref(x, [4, 2], 0), unary([(6, 2)]), ALL,
           (0,)),
    OpSpec("chunk[3,dim=1]", lambda x: x.chunk(3, dim=1), lambda x: _split_ref(x, _chunk_sizes(5, 3), 1),
           unary([(3, 5)]), ALL, (0,)),
    OpSpec("chunk[4,dim=0]", lambda x: ember.chunk(x, 4), lambda x: _split_ref(x, _chunk_sizes(6, 4), 0),
           unary([(6, 2)]), ALL, (0,)),
)

# -- gather / scatter / index_select -------------------------------------------------------
add(
    OpSpec("gather[dim=0]", lambda x, i: x.gather(0, i), lambda x, i: _gather_ref(x, 0, i),
           lambda s: [(s.x((3, 4)), s.index((5, 4), 3)), (s.x((3, 4)), s.index((2, 3), 3))], ALL, (0,)),
    OpSpec("gather[dim=1]", lambda x, i: ember.gather(x, 1, i), lambda x, i: _gather_ref(x, 1, i),
           lambda s: [(s.x((3, 4)), s.index((3, 6), 4)), (s.x(X3), s.index((2, 2, 3), 3))], ALL, (0,)),
    OpSpec("gather[dim=-1]", lambda x, i: x.gather(-1, i), lambda x, i: _gather_ref(x, 2, i),
           lambda s: [(s.x(X3), s.index((2, 3, 2), 4))], ALL, (0,)),
    OpSpec("scatter[dim=0]", lambda x, i, v: x.scatter(0, i, v),
           lambda x, i, v: _scatter_ref(x, 0, i, v, False),
           lambda s: [(s.x((4, 5)), np.stack([s.unique_index(3, 4) for _ in range(5)], axis=1), s.x((3, 5)))],
           ALL, (0, 2)),
    OpSpec("scatter[dim=1]", lambda x, i, v: ember.scatter(x, 1, i, v),
           lambda x, i, v: _scatter_ref(x, 1, i, v, False),
           lambda s: [(s.x((3, 5)), np.stack([s.unique_index(2, 5) for _ in range(3)]), s.x((3, 2)))],
           ALL, (0, 2)),
    OpSpec("scatter_add[dim=0]", lambda x, i, v: x.scatter_add(0, i, v),
           lambda x, i, v: _scatter_ref(x, 0, i, v, True),
           lambda s: [(s.x((4, 5)), s.index((6, 5), 4), s.x((6, 5)))], NUMERIC, (0, 2)),
    OpSpec("scatter_add[dim=-1]", lambda x, i, v: ember.scatter_add(x, -1, i, v),
           lambda x, i, v: _scatter_ref(x, 1, i, v, True),
           lambda s: [(s.x((3, 4)), s.index((3, 7), 4), s.x((3, 7)))], NUMERIC, (0, 2)),
    OpSpec("index_select[dim=0]", lambda x, i: x.index_select(0, i), lambda x, i: np.take(x, i, axis=0),
           lambda s: [(s.x((4, 3)), s.index((6,), 4))], ALL, (0,)),
    OpSpec("index_select[dim=1]", lambda x, i: ember.index_select(x, 1, i),
           lambda x, i: np.take(x, i, axis=1),
           lambda s: [(s.x(X3), s.index((5,), 3))], ALL, (0,)),
)

# -- indexing -------------------------------------------------------------------------------
XI = (4, 5, 3)
for _key_name, _key in [
    ("1", 1), ("-1", -1), ("1:3", slice(1, 3)), ("::2", slice(None, None, 2)),
    ("::-1", slice(None, None, -1)),
    ("-1:0:-2", slice(-1, 0, -2)), (":,1", (slice(None), 1)), ("...,1", (Ellipsis, 1)), ("None", None),
    (":,None,1:", (slice(None), None, slice(1, None))), ("1,...,None", (1, Ellipsis, None)),
    ("2,-1,0", (2, -1, 0)), (":,::-2,1", (slice(None), slice(None, None, -2), 1)),
    ("10:", slice(10, None)), ("-100:2", slice(-100, 2)),
]:
    add(OpSpec(f"getitem[{_key_name}]", lambda x, k=_key: x[k], lambda x, k=_key: x[k], unary([XI]), ALL,
               (0,)))
add(
    OpSpec("getitem[idx]", lambda x, i: x[i], lambda x, i: x[i], lambda s: [(s.x(XI), s.index((6,), 4, -4))],
           ALL, (0,)),
    OpSpec("getitem[idx2d]", lambda x, i: x[i], lambda x, i: x[i], lambda s: [(s.x(XI), s.index((2, 3), 4))],
           ALL, (0,)),
    OpSpec("getitem[:,idx]", lambda x, i: x[:, i], lambda x, i: x[:, i],
           lambda s: [(s.x(XI), s.index((4,), 5, -5))], ALL, (0,)),
    OpSpec("getitem[1:,idx]", lambda x, i: x[1:, i], lambda x, i: x[1:, i],
           lambda s: [(s.x(XI), s.index((2,), 5))],
           ALL, (0,)),
    OpSpec("getitem[idx,idx]", lambda x, i, j: x[i, j], lambda x, i, j: x[i, j],
           lambda s: [(s.x(XI), s.index((3,), 4), s.index((2, 1), 5))], ALL, (0,)),
    OpSpec("getitem[mask]", lambda x, m: x[m], lambda x, m: x[m], lambda s: [(s.x(XI), s.mask(XI))], ALL,
           (0,)),
    OpSpec("getitem[rowmask]", lambda x, m: x[m], lambda x, m: x[m], lambda s: [(s.x(XI), s.mask((4,)))],
           ALL, (0,)),
)
for _key_name, _key, _vshape in [
    ("1", 1, (5, 3)), (":,1:3", (slice(None), slice(1, 3)), (4, 2, 3)), ("::2", slice(None, None, 2), (3,)),
    ("...,-1", (Ellipsis, -1), (4, 5)), ("::-1", slice(None, None, -1), (5, 1)), ("2,3,1", (2, 3, 1), ()),
]:
    _fn, _ref = _setitem(_key)
    add(OpSpec(f"setitem[{_key_name}]", _fn, _ref, lambda s, v=_vshape: [(s.x(XI), s.x(v))], ALL, (0, 1)))


def _setitem_idx(x: Any, i: Any, v: Any) -> Any:
    y = x.clone()
    y[i] = v
    return y


def _setitem_idx_ref(x: np.ndarray, i: np.ndarray, v: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[i] = v
    return y


def _setitem_scalar(x: Any, m: Any) -> Any:
    y = x.clone()
    y[m] = 2
    y[0, 0] = 1
    return y


def _setitem_scalar_ref(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[m] = 2
    y[0, 0] = 1
    return y


add(
    OpSpec("setitem[idx]", _setitem_idx, _setitem_idx_ref,
           lambda s: [(s.x(XI), s.unique_index(2, 4), s.x((2, 5, 3)))], ALL, (0, 2)),
    OpSpec("setitem[mask]=scalar", _setitem_scalar, _setitem_scalar_ref, lambda s: [(s.x(XI), s.mask(XI))],
           ALL, (0,)),
)

# -- in-place methods (on a clone, so gradients flow through them) --------------------------
_IP_PAIRS: list[tuple[Shape, Shape]] = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), ())]
for _m, _npf, _dts, _bkw in [("add_", np.add, NUMERIC, {}), ("sub_", np.subtract, NUMERIC, {}),
                             ("mul_", np.multiply, NUMERIC, {}), ("div_", np.divide, FLOATS, NONZERO)]:
    _fn, _ = _inplace(_m)
    add(OpSpec(f"inplace[{_m}]", _fn, _npf, binary(_IP_PAIRS, b=_bkw), _dts, (0, 1)))
add(
    OpSpec("inplace[add_(2)]", _inplace("add_", 2)[0], lambda x: x + 2, unary([(3, 4)]), NUMERIC, (0,)),
    OpSpec("inplace[mul_(-1.5)]", _inplace("mul_", -1.5)[0], lambda x: x * -1.5, unary([(3, 4)]), FLOATS,
           (0,)),
    OpSpec("inplace[copy_]", _inplace("copy_")[0], lambda x, y: np.broadcast_to(y, x.shape).copy(),
           binary(_IP_PAIRS), ALL, (0, 1)),
    OpSpec("inplace[zero_]", _inplace("zero_")[0], np.zeros_like, unary([(3, 4)]), ALL, (0,)),
    OpSpec("inplace[fill_(2)]", _inplace("fill_", 2)[0], lambda x: np.full_like(x, 2), unary([(3, 4)]), ALL,
           (0,)),
    OpSpec("inplace[fill_(-0.5)]", _inplace("fill_", -0.5)[0], lambda x: np.full_like(x, -0.5),
           unary([(3, 4)]), FLOATS, (0,)),
)

# -- casts within the float dtypes (differentiable) ----------------------------------------
add(
    OpSpec("to.float64", lambda x: x.to(ember.float64), lambda x: x.astype(np.float64), unary([(3, 4)]),
           FLOATS,
           (0,), lambda d: "float64"),
    OpSpec("double", lambda x: x.double(), lambda x: x.astype(np.float64), unary([(3, 4)]), FLOATS, (0,),
           lambda d: "float64"),
)

# -- empty tensors -------------------------------------------------------------------------
add(
    OpSpec("empty.exp", lambda x: x.exp(), np.exp, unary([(0,), (2, 0)]), FLOATS, (0,)),
    OpSpec("empty.add", lambda a, b: a + b, np.add, binary([((0, 3), (3,)), ((2, 0), (1, 1))]), NUMERIC,
           (0, 1)),
    OpSpec("empty.sum[dim=0]", lambda x: x.sum(dim=0), lambda x: np.sum(x, axis=0), unary([(0, 3)]), NUMERIC,
           (0,), int64_out),
    OpSpec("empty.sum[all]", lambda x: x.sum(), np.sum, unary([(0, 3)]), NUMERIC, (0,), int64_out),
    OpSpec("empty.prod[dim=1]", lambda x: x.prod(dim=1), lambda x: np.prod(x, axis=1), unary([(3, 0)]),
           FLOATS, (0,)),
    OpSpec("empty.mean[dim=0]", lambda x: x.mean(dim=0), lambda x: np.sum(x, axis=0) / 0.0, unary([(0, 2)]),
           FLOATS),
    OpSpec("empty.matmul[k=0]", lambda a, b: a @ b, np.matmul, binary([((2, 0), (0, 3))]), FLOATS, (0, 1)),
    OpSpec("empty.matmul[m=0]", lambda a, b: a @ b, np.matmul, binary([((0, 4), (4, 3))]), FLOATS, (0, 1)),
    OpSpec("empty.reshape", lambda x: x.reshape(3, 0, 2), lambda x: x.reshape(3, 0, 2), unary([(0, 6)]),
           ALL, (0,)),
    OpSpec("empty.cat", lambda a, b: ember.cat([a, b], dim=0), lambda a, b: np.concatenate([a, b]),
           binary([((0, 3), (2, 3))]), ALL, (0, 1)),
    OpSpec("empty.getitem", lambda x: x[2:2], lambda x: x[2:2], unary([(4, 3)]), ALL, (0,)),
    OpSpec("empty.softmax", lambda x: x.softmax(-1), lambda x: _softmax(x, -1), unary([(0, 4)]), FLOATS,
           (0,)),
)

# -- sorting ------------------------------------------------------------------------------
def _order(x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """torch's stable order along ``dim``: NaN above every number (last ascending, first
    descending), ties in input order."""
    key = np.asarray(x).astype(np.float64)
    nan = np.isnan(key)
    if descending:
        return np.lexsort((np.where(nan, 0.0, -key), ~nan), axis=dim)
    return np.lexsort((np.where(nan, 0.0, key), nan), axis=dim)


def _sorted(x: np.ndarray, dim: int, descending: bool, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    idx = _order(x, dim, descending)
    if k is not None:
        idx = np.take(idx, np.arange(k), axis=dim)
    return np.take_along_axis(np.asarray(x), idx, dim), idx


#: ties (a grid of 0.5) and NaN/inf mixed in; rows of several lengths, none a power of two
_SORT_GEN = {"grid": 0.5, "ints": (-4, 4), "edges": (np.nan, np.inf, -np.inf, np.nan)}
_SORT_SHAPES = [(5,), (3, 33), (2, 4, 7)]
for _dim, _desc in ((-1, False), (-1, True), (0, True)):
    _t = f"dim={_dim}{',desc' if _desc else ''}"
    add(
        OpSpec(f"sort[{_t}]", lambda x, d=_dim, o=_desc: tuple(x.sort(d, descending=o)),
               lambda x, d=_dim, o=_desc: _sorted(x, d, o), unary(_SORT_SHAPES, **_SORT_GEN), NUMERIC + ("bool",),
               (), lambda d: (d, "int64"), tol=0),
        OpSpec(f"argsort[{_t}]", lambda x, d=_dim, o=_desc: x.argsort(d, descending=o),
               lambda x, d=_dim, o=_desc: _order(x, d, o), unary(_SORT_SHAPES, **_SORT_GEN), NUMERIC + ("bool",),
               (), lambda d: "int64"),
    )
for _dim, _largest in ((-1, True), (-1, False), (0, True)):
    add(OpSpec(f"topk[k=3,dim={_dim},largest={_largest}]",
               lambda x, d=_dim, g=_largest: tuple(x.topk(3, d, largest=g)),
               lambda x, d=_dim, g=_largest: _sorted(x, d, g, 3), unary([(4, 9), (3, 4, 5)], **_SORT_GEN), NUMERIC,
               (), lambda d: (d, "int64"), tol=0))
def _cum_extreme(x: np.ndarray, dim: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch's cummax / cummin, element by element: a later element equal to the running
    extreme takes over (its index wins), and a NaN takes over whatever came before."""
    a = np.moveaxis(np.asarray(x), dim, -1)
    vals, idx = np.empty_like(a), np.zeros(a.shape, np.int64)
    for r in np.ndindex(*a.shape[:-1]):
        best, at = None, 0
        for k, v in enumerate(a[r]):
            if best is None or v != v or (best == best and (v >= best if largest else v <= best)):
                best, at = v, k
            vals[r + (k,)], idx[r + (k,)] = best, at
    return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)


def _mode(x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The most frequent value of each slice (the smallest on ties; NaNs one value above every
    number) and the index of its last occurrence."""
    a = np.moveaxis(np.asarray(x), dim, -1)
    vals, idx = np.empty(a.shape[:-1], a.dtype), np.zeros(a.shape[:-1], np.int64)
    for r in np.ndindex(*a.shape[:-1]):
        row = a[r]
        keys = [("nan",) if v != v else (v,) for v in row]
        best = min(set(keys), key=lambda k: (-keys.count(k), k == ("nan",), k[0] if k != ("nan",) else 0))
        idx[r] = max(k for k, key in enumerate(keys) if key == best)
        vals[r] = row[idx[r]]
    return vals, idx


def _quantile_ref(x: np.ndarray, q: Any, dim: int, interpolation: str, ignore_nan: bool = False) -> np.ndarray:
    """torch's quantile along ``dim`` in float64: rank q * (n - 1) of the sorted slice (n its
    count of numbers when ``ignore_nan``), rounded by ``interpolation``; NaN where the slice has
    one (an all-NaN slice for nanquantile)."""
    a = np.moveaxis(np.asarray(x, np.float64), dim, -1)
    qs = np.atleast_1d(np.asarray(q, np.float64))
    out = np.empty((len(qs),) + a.shape[:-1])
    for r in np.ndindex(*a.shape[:-1]):
        row = a[r]
        nums = np.sort(row[~np.isnan(row)])
        if (len(nums) < len(row) and not ignore_nan) or not len(nums):
            out[(slice(None),) + r] = np.nan
            continue
        for j, qv in enumerate(qs):
            rank = qv * (len(nums) - 1)
            lo, hi = math.floor(rank), math.ceil(rank)
            if interpolation == "lower":
                hi = lo
            elif interpolation == "higher":
                lo = hi
            elif interpolation == "nearest":
                lo = hi = int(np.round(rank))
            if interpolation not in ("linear", "midpoint"):  # no interpolation: inf stays inf
                out[(j,) + r] = nums[lo]
                continue
            w = 0.5 if interpolation == "midpoint" else rank - lo
            a0, a1 = nums[lo], nums[hi]  # torch's lerp: from the nearer end (inf - inf only between)
            out[(j,) + r] = a0 + w * (a1 - a0) if w < 0.5 else a1 - (a1 - a0) * (1 - w)
    return out if np.ndim(q) else out[0]


for _dim in (-1, 0):
    for _largest in (True, False):
        _n = "cummax" if _largest else "cummin"
        add(OpSpec(f"{_n}[dim={_dim}]", lambda x, d=_dim, g=_largest: tuple((x.cummax if g else x.cummin)(d)),
                   lambda x, d=_dim, g=_largest: _cum_extreme(x, d, g), unary(_SORT_SHAPES, **_SORT_GEN),
                   NUMERIC + ("bool",), (), lambda d: (d, "int64"), tol=0))
    add(OpSpec(f"mode[dim={_dim}]", lambda x, d=_dim: tuple(x.mode(d)), lambda x, d=_dim: _mode(x, d),
               unary([(5,), (3, 9), (2, 4, 6)], **_SORT_GEN), NUMERIC + ("bool",), (), lambda d: (d, "int64"), tol=0))
for _interp in ("linear", "lower", "higher", "midpoint", "nearest"):
    add(
        # q = 0.25 and 0.75: exact ranks in every float type; NaN and inf mixed in
        OpSpec(f"quantile[{_interp}]", lambda x, i=_interp: x.quantile([0.25, 0.5, 0.75], dim=-1, interpolation=i),
               lambda x, i=_interp: _quantile_ref(x, [0.25, 0.5, 0.75], -1, i), unary([(3, 9), (2, 3, 4)], **_SORT_GEN),
               ("float64", "float32"), (0,) if _interp == "linear" else ()),
        OpSpec(f"nanquantile[{_interp}]", lambda x, i=_interp: x.nanquantile(0.75, dim=0, keepdim=True, interpolation=i)
               .squeeze(0), lambda x, i=_interp: _quantile_ref(x, 0.75, 0, i, True),
               unary([(5, 3), (7,)], edges=(np.nan, np.nan, np.nan, 1.5)), ("float64", "float32"), ()),
    )
add(
    OpSpec("cummax.grad", lambda x: x.cummax(1).values, lambda x: _cum_extreme(x, 1, True)[0],
           unary([(3, 6)], distinct=True), FLOATS, (0,)),
    OpSpec("cummin.grad", lambda x: x.cummin(0).values, lambda x: _cum_extreme(x, 0, False)[0],
           unary([(5, 3)], distinct=True), FLOATS, (0,)),
    OpSpec("mode.grad", lambda x: x.mode(0).values, lambda x: _mode(x, 0)[0], unary([(5, 3)], distinct=True), FLOATS,
           (0,)),
    # rows of several blocks: the block scan of (value, index) pairs on parallel-units devices
    OpSpec("large.cummax[len=5000]", lambda x: tuple(x.cummax(-1)), lambda x: _cum_extreme(x, -1, True),
           unary([(2, 5000)], **_SORT_GEN), ("float32", "int32"), (), lambda d: (d, "int64"), tol=0),
    OpSpec("large.cummin[len=2500,dim=0]", lambda x: tuple(x.cummin(0)), lambda x: _cum_extreme(x, 0, False),
           unary([(2500, 2)], **_SORT_GEN), ("float32",), (), lambda d: (d, "int64"), tol=0),
)
add(
    # the values' gradient flows through gather (distinct values: no tie is a kink)
    OpSpec("sort.grad", lambda x: x.sort(-1, descending=True).values, lambda x: _sorted(x, -1, True)[0],
           unary([(3, 6)], distinct=True), FLOATS, (0,)),
    OpSpec("topk.grad", lambda x: x.topk(2, 0).values, lambda x: _sorted(x, 0, True, 2)[0],
           unary([(5, 3)], distinct=True), FLOATS, (0,)),
    # rows longer than one cube's shared memory (4096 float32 / 2048 float64 keys): the
    # chunked network with global merge stages
    OpSpec("large.sort[len=5000]", lambda x: tuple(x.sort(-1)), lambda x: _sorted(x, -1, False),
           unary([(2, 5000)], **_SORT_GEN), ("float32", "float64", "int32"), (), lambda d: (d, "int64"), tol=0),
    OpSpec("large.argsort[len=2100,desc]", lambda x: x.argsort(0, descending=True), lambda x: _order(x, 0, True),
           unary([(2100, 2)], **_SORT_GEN), ("float32", "float64", "int64"), (), lambda d: "int64"),
    OpSpec("large.topk[len=5000]", lambda x: tuple(x.topk(5)), lambda x: _sorted(x, -1, True, 5),
           unary([(1, 5000)], **_SORT_GEN), ("float32",), (), lambda d: (d, "int64"), tol=0),
    # long contiguous rows: the block scan on parallel-units devices (several blocks per row)
    OpSpec("large.cumsum[dim=1]", lambda x: x.cumsum(1), lambda x: np.cumsum(x, axis=1), unary([(3, 3000)]),
           NUMERIC, (), int64_out, mag=linear_mag(lambda x: np.cumsum(x, axis=1))),
    OpSpec("large.cumprod[dim=-1]", lambda x: x.cumprod(-1), lambda x: np.cumprod(x, axis=-1),
           unary([(2, 2500)], lo=0.98, hi=1.02), FLOATS, (), tol=3,
           mag=linear_mag(lambda x: np.cumprod(x, axis=-1))),
)


# -- larger tensors (several blocks / tiles on a kernel backend) ---------------------------
LARGE = (300, 37)
add(
    OpSpec("large.sum[all]", lambda x: x.sum(), np.sum, unary([LARGE]), NUMERIC, (), int64_out,
           mag=linear_mag(np.sum)),
    OpSpec("large.sum[dim=0]", lambda x: x.sum(dim=0), lambda x: np.sum(x, axis=0), unary([LARGE]), NUMERIC,
           (), int64_out, mag=linear_mag(lambda x: np.sum(x, axis=0))),
    OpSpec("large.mean[dim=1]", lambda x: x.mean(dim=1), lambda x: np.mean(x, axis=1), unary([LARGE]), FLOATS,
           mag=linear_mag(lambda x: np.mean(x, axis=1))),
    OpSpec("large.var[dim=0]", lambda x: x.var(dim=0), lambda x: np.var(x, axis=0, ddof=1), unary([LARGE]),
           FLOATS, tol=3, mag=input_mag(2)),
    OpSpec("large.amax[dim=0]", lambda x: x.amax(dim=0), lambda x: np.max(x, axis=0), unary([LARGE]),
           NUMERIC, tol=0),
    OpSpec("large.argmax[all]", lambda x: x.argmax(), np.argmax, unary([LARGE], distinct=True),
           ("float32", "float64", "int32", "int64"), (), lambda d: "int64"),
    OpSpec("large.argmin[dim=0]", lambda x: x.argmin(dim=0), lambda x: np.argmin(x, axis=0),
           unary([LARGE], distinct=True), ("float32", "float64", "int64"), (), lambda d: "int64"),
    OpSpec("large.cumsum[dim=0]", lambda x: x.cumsum(0), lambda x: np.cumsum(x, axis=0), unary([LARGE]),
           NUMERIC, (), int64_out, mag=linear_mag(lambda x: np.cumsum(x, axis=0))),
    OpSpec("large.softmax[dim=0]", lambda x: x.softmax(0), lambda x: _softmax(x, 0), unary([LARGE]), FLOATS,
           tol=3),
    OpSpec("large.logsumexp[dim=1]", lambda x: x.logsumexp(1), lambda x: _logsumexp(x, 1, False),
           unary([LARGE]), FLOATS, tol=3, mag=input_mag(1)),
    OpSpec("large.matmul", lambda a, b: a @ b, np.matmul,
           binary([((67, 130), (130, 45)), ((3, 33, 65), (65, 17)), ((129,), (129, 70))], _MM_INTS, _MM_INTS),
           FLOATS + ("int32",), (), mag=linear_mag(np.matmul)),
    OpSpec("large.add.broadcast", lambda a, b: a * b + a, lambda a, b: a * b + a,
           binary([((300, 37), (37,)), ((1, 300, 1), (5, 1, 37))]), NUMERIC, ()),
    OpSpec("large.transpose.contiguous", lambda x: x.T.contiguous() + 0, lambda x: x.T + 0, unary([LARGE]),
           NUMERIC, ()),
    OpSpec("large.getitem[::-3]", lambda x: x[::-3, 1::2], lambda x: x[::-3, 1::2], unary([LARGE]), ALL),
)

#: the specs that also run int8 and int16: one or two per kernel family whose integer code
#: depends on the element type (elementwise arithmetic with tensors and scalars, comparisons,
#: casts into float, reductions, scans, arg-reductions, sort, gather/scatter, copies, views)
NARROW_SPECS = frozenset({
    "neg", "abs", "exp", "scalar[t+2]", "scalar[t*3]", "scalar[t//2]", "scalar[7%t]", "add", "sub", "mul",
    "floor_div", "remainder", "maximum", "lt", "where", "sum[dim=None]", "prod[dim=1]", "max[dim=0]",
    "argmax[dim=-1]", "cumsum[dim=1]", "gather[dim=0]", "scatter_add[dim=0]", "getitem[idx]", "setitem[::2]",
    "cat[dim=0]", "sort[dim=-1]", "topk[k=3,dim=-1,largest=True]", "flip", "large.cumsum[dim=0]",
    "large.transpose.contiguous",
})
SPECS[:] = [dataclasses.replace(s, dtypes=s.dtypes + NARROW) if s.name in NARROW_SPECS else s for s in SPECS]

SPEC_BY_NAME: dict[str, OpSpec] = {}
for _s in SPECS:
    assert _s.name not in SPEC_BY_NAME, f"duplicate spec name {_s.name}"
    SPEC_BY_NAME[_s.name] = _s

GRAD_SPECS: list[OpSpec] = [s for s in SPECS if s.grad]
