"""Random op graphs: fused (``Device.cpu()``) == unfused (``Device.cpu(fusion=False)``) == flex.

A seeded generator builds a small graph (a few leaves, 2-10 ops) mixing elementwise unary,
binary and scalar ops with broadcasting, casts between float32/float64/int32/bool, comparisons
feeding ``where``, reductions over an axis (with and without ``keepdim``), matmul, views
(slice with steps, permute, reshape, expand), reads of intermediates in the middle of the
graph, several outputs, and dead or consumed intermediates whose Python handle is dropped
as soon as their last consumer is registered (so in-place paths and READ_WRITE statuses
fire). The same graph is evaluated on every device and on a numpy reference.

Tolerances are derived per node, not per test. The reference computes every op in float64
and rounds the result to the node's dtype, so for the correctly rounded IEEE ops (add, sub,
mul, div by a scalar, neg, abs, relu, max/min, where, casts, views; integer and bool ops) it
equals what any conforming backend must produce, bit for bit (double rounding through
float64 is harmless for + - * / on float32 operands). Nodes built only from such ops are
*exact*: every device must match the reference and each other exactly, which is what lets
comparisons and float->int/bool casts (discontinuous) take them as inputs. The other ops
(libm functions, summation order in reductions and matmul) carry an absolute error bound
propagated through the graph from a magnitude bound: each op adds a few units of its
dtype's rounding error times its output bound, and scales incoming error by its Lipschitz
constant (the rules are in ``_Builder``'s methods). Devices must be within that bound of the reference, and fused
within twice it of unfused: a fuser may legitimately change a reduction's accumulation order
or call a vectorised libm variant, but anything it gets wrong (a missed rounding to float32,
a broadcast stride, a stale in-place buffer) moves a value by a large multiple of the bound.

The autodiff variant builds float-only graphs on ``.autodiff()`` devices, backpropagates a
scalar loss (a fixed random weighting of every float output) and compares the leaves'
gradients with flex's at the tolerance of the least precise float dtype in the graph.

Running 1,000 graphs (issue 21). Nearly all of the time is compiling kernels into the
session's cold cache (tests run with a private cache root): a warm graph costs milliseconds, a
new kernel a C compile. So:

* graphs come from a seeded numpy generator (``make_graph(seed)``), not hypothesis: no
  shrinking machinery, no example database; CI runs seeds ``0..GRAPHS-1`` every time, and a
  failure prints the failing seeds and the command that runs only them
  (``EMBER_FUSION_GRAPH_SEED=...``); ``EMBER_FUSION_GRAPHS`` / ``EMBER_FUSION_GRAD_GRAPHS``
  change the counts and ``EMBER_FUSION_GRAPH_BASE`` the seeds, to explore more graphs locally;
* graphs come in families of ``FAMILY`` (4): one structure -- ops, dtypes, ranks, which dims are
  1, which nodes feed which -- drawn with other sizes, slice bounds, expand targets and values
  (``Draw``). Kernels are specialised for ops, dtypes and ranks but not sizes, so a family's
  fused programs compile once and its other graphs check the same programs over other shapes
  and values (broadcast strides, tails, offsets: where fusion bugs show);
* the families run on ``THREADS`` (2) threads, each with its own fusion stream, so one thread's
  C compile overlaps the other's work.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import ember
from ember import Device

#: graphs of each property in CI (graph i is ``make_graph(BASE_SEED + i)``: the same graphs on
#: every run); the environment variables change the counts, or the seeds (to explore others)
GRAPHS = int(os.environ.get("EMBER_FUSION_GRAPHS", "1000"))
GRAD_GRAPHS = int(os.environ.get("EMBER_FUSION_GRAD_GRAPHS", "40"))
BASE_SEED = int(os.environ.get("EMBER_FUSION_GRAPH_BASE", "0"))
#: only these seeds (comma-separated), for reproducing the failures a run reported
ONLY = os.environ.get("EMBER_FUSION_GRAPH_SEED", "")
#: a run stops after this many failing graphs (a systematic bug fails most of them)
MAX_FAILURES = 5
#: graphs per family: one structure (ops, dtypes, ranks, unit dims) with other sizes and values
FAMILY = int(os.environ.get("EMBER_FUSION_GRAPH_FAMILY", "4"))
#: threads the graphs run on (a compile of one overlaps the work of the other)
THREADS = int(os.environ.get("EMBER_FUSION_GRAPH_THREADS", "2"))

MAX_NUMEL = 600
#: magnitude limit for values: ops that could exceed it are not drawn (int32 and float32
#: stay far from overflow; float32 keeps ~3 significant digits after the bound's ulps)
MAX_BOUND = 1e4
#: unit roundoff of each float dtype
EPS = {"float32": 2.0**-24, "float64": 2.0**-53}
#: rounding units a libm call may be off on either side (glibc scalar and vector variants
#: are within 4 ulp; numpy's float64 result rounded to float32 within 1)
LIBM_ULPS = 8.0
FLOATS = ("float32", "float64")
SCALARS = (0.5, 2.0, -1.5, 3.0, 0.25, -1.0)
INT_SCALARS = (-2, -1, 2, 3)

NP_DTYPE = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "bool": np.bool_}


def _ember_dtype(name: str) -> Any:
    return ember.bool if name == "bool" else getattr(ember, name)


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


# --------------------------------------------------------------------------- graph data
@dataclass(frozen=True, slots=True)
class Node:
    """What the generator knows about a value: shape, dtype, |value| <= bound, and the
    absolute error bound against the reference (0.0: exact)."""

    shape: tuple[int, ...]
    dtype: str
    bound: float
    err: float = 0.0


@dataclass(frozen=True, slots=True)
class Step:
    op: str
    inputs: tuple[int, ...] = ()
    arg: Any = None

    def __repr__(self) -> str:
        ins = ", ".join(f"n{i}" for i in self.inputs)
        return f"{self.op}({ins}{', ' if ins and self.arg is not None else ''}" \
               f"{'' if self.arg is None else repr(self.arg)})"


@dataclass
class Graph:
    """``steps[i]`` produces node i; ``reads_after[i]`` are read (``numpy()``) right after
    step i is registered; ``outputs`` are read at the end, in that order."""

    steps: list[Step] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    reads_after: dict[int, list[int]] = field(default_factory=dict)
    outputs: list[int] = field(default_factory=list)
    value_seed: int = 0
    #: the seed ``make_graph`` built it from
    seed: int | None = None

    def __repr__(self) -> str:
        lines = ["Graph("]
        for i, (s, n) in enumerate(zip(self.steps, self.nodes)):
            read = f"   # then read {self.reads_after[i]}" if i in self.reads_after else ""
            err = "exact" if n.err == 0 else f"err<={n.err:.3g}"
            lines.append(f"  n{i} = {s!r}  -> {list(n.shape)} {n.dtype} |x|<={n.bound:.3g} {err}{read}")
        lines.append(f"  outputs={self.outputs}, value_seed={self.value_seed}, seed={self.seed})")
        return "\n".join(lines)

    def last_uses(self) -> dict[int, int]:
        """node -> the last step reading it (a node never read maps to its own step)."""
        last = {i: i for i in range(len(self.steps))}
        for i, s in enumerate(self.steps):
            for j in s.inputs:
                last[j] = max(last[j], i)
            for j in self.reads_after.get(i, ()):
                last[j] = max(last[j], i)
        return last


# --------------------------------------------------------------------------- ops
# Each op: (ember implementation, numpy reference on float64/int64/bool arrays).
Impl = Callable[..., Any]
UNARY_FLOAT: dict[str, tuple[Impl, Impl, float]] = {
    # name: (ember, numpy, Lipschitz constant); exp gets its own rule (bounded input)
    "sin": (lambda t: t.sin(), np.sin, 1.0),
    "cos": (lambda t: t.cos(), np.cos, 1.0),
    "tanh": (lambda t: t.tanh(), np.tanh, 1.0),
    "sigmoid": (lambda t: t.sigmoid(), lambda a: 1.0 / (1.0 + np.exp(-a)), 0.25),
    "erf": (lambda t: t.erf(), np.vectorize(math.erf, otypes=[np.float64]), 2 / math.sqrt(math.pi)),
}
EXACT_UNARY: dict[str, tuple[Impl, Impl]] = {
    "neg": (lambda t: -t, np.negative),
    "abs": (lambda t: t.abs(), np.abs),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
}
BINARY: dict[str, tuple[Impl, Impl]] = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "maximum": (lambda a, b: ember.maximum(a, b), np.maximum),
    "minimum": (lambda a, b: ember.minimum(a, b), np.minimum),
}
SCALAR: dict[str, tuple[Impl, Impl]] = {
    "mul_s": (lambda t, s: t * s, lambda a, s: a * s),
    "add_s": (lambda t, s: t + s, lambda a, s: a + s),
    "rsub_s": (lambda t, s: s - t, lambda a, s: s - a),
    "div_s": (lambda t, s: t / s, lambda a, s: a / s),
}
COMPARE: dict[str, tuple[Impl, Impl]] = {
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
}
LOGICAL: dict[str, tuple[Impl, Impl]] = {
    "and": (lambda a, b: a & b, np.logical_and),
    "or": (lambda a, b: a | b, np.logical_or),
    "xor": (lambda a, b: a ^ b, np.logical_xor),
}
REDUCE: dict[str, tuple[Impl, Impl]] = {
    "sum": (lambda t, d, k: t.sum() if d is None else t.sum(dim=d, keepdim=k),
            lambda a, d, k: np.sum(a, axis=d, keepdims=k if d is not None else False)),
    "mean": (lambda t, d, k: t.mean() if d is None else t.mean(dim=d, keepdim=k),
             lambda a, d, k: np.mean(a, axis=d, keepdims=k if d is not None else False)),
    "amax": (lambda t, d, k: t.amax() if d is None else t.amax(dim=d, keepdim=k),
             lambda a, d, k: np.max(a, axis=d, keepdims=k if d is not None else False)),
    "amin": (lambda t, d, k: t.amin() if d is None else t.amin(dim=d, keepdim=k),
             lambda a, d, k: np.min(a, axis=d, keepdims=k if d is not None else False)),
}


def _np_cast(a: np.ndarray, to: str) -> np.ndarray:
    if to == "bool":
        return a != 0
    if to == "int32":
        return np.trunc(a).astype(np.int64) if a.dtype.kind == "f" else a.astype(np.int64)
    return a.astype(np.float64)


def _np_slice(a: np.ndarray, arg: tuple[int, int, int, int]) -> np.ndarray:
    dim, start, stop, step = arg
    key = [slice(None)] * a.ndim
    key[dim] = slice(start, stop, step)
    return a[tuple(key)]


def _em_slice(t: Any, arg: tuple[int, int, int, int]) -> Any:
    dim, start, stop, step = arg
    key = [slice(None)] * t.ndim
    key[dim] = slice(start, stop, step)
    return t[tuple(key)]


def _apply_ember(step: Step, xs: list[Any], leaf: Callable[[int], Any]) -> Any:
    op, arg = step.op, step.arg
    if op == "leaf":
        return leaf(arg)
    if op in UNARY_FLOAT:
        return UNARY_FLOAT[op][0](*xs)
    if op == "exp":
        return xs[0].exp()
    if op in EXACT_UNARY:
        return EXACT_UNARY[op][0](*xs)
    if op == "not":
        return ~xs[0]
    if op in BINARY:
        return BINARY[op][0](*xs)
    if op in SCALAR:
        return SCALAR[op][0](xs[0], arg)
    if op in COMPARE:
        return COMPARE[op][0](*xs)
    if op == "gt_s":
        return xs[0] > arg
    if op in LOGICAL:
        return LOGICAL[op][0](*xs)
    if op == "where":
        return ember.where(*xs)
    if op == "cast":
        return xs[0].to(_ember_dtype(arg))
    if op in REDUCE:
        return REDUCE[op][0](xs[0], *arg)
    if op == "matmul":
        return xs[0] @ xs[1]
    if op == "mT":
        return xs[0].transpose(-1, -2)
    if op == "slice":
        return _em_slice(xs[0], arg)
    if op == "permute":
        return xs[0].permute(*arg)
    if op == "reshape":
        return xs[0].reshape(*arg)
    if op == "expand":
        return xs[0].expand(*arg)
    raise AssertionError(op)


def _apply_numpy(step: Step, xs: list[np.ndarray], leaf: Callable[[int], np.ndarray]) -> np.ndarray:
    op, arg = step.op, step.arg
    if op == "leaf":
        return leaf(arg)
    if op in UNARY_FLOAT:
        return UNARY_FLOAT[op][1](*xs)
    if op == "exp":
        return np.exp(xs[0])
    if op in EXACT_UNARY:
        return EXACT_UNARY[op][1](*xs)
    if op == "not":
        return ~xs[0]
    if op in BINARY:
        return BINARY[op][1](*xs)
    if op in SCALAR:
        return SCALAR[op][1](xs[0], arg)
    if op in COMPARE:
        return COMPARE[op][1](*xs)
    if op == "gt_s":
        return xs[0] > arg
    if op in LOGICAL:
        return LOGICAL[op][1](*xs)
    if op == "where":
        return np.where(*xs)
    if op == "cast":
        return _np_cast(xs[0], arg)
    if op in REDUCE:
        return REDUCE[op][1](xs[0], *arg)
    if op == "matmul":
        return xs[0] @ xs[1]
    if op == "mT":
        return np.swapaxes(xs[0], -1, -2)
    if op == "slice":
        return _np_slice(xs[0], arg)
    if op == "permute":
        return np.transpose(xs[0], arg)
    if op == "reshape":
        return xs[0].reshape(arg)
    if op == "expand":
        return np.broadcast_to(xs[0], arg)
    raise AssertionError(op)


def _round(a: np.ndarray, dtype: str) -> np.ndarray:
    """A reference value held as float64/int64/bool, rounded to what ``dtype`` can hold."""
    a = np.asarray(a)
    if dtype == "float32":
        return a.astype(np.float32).astype(np.float64)
    if dtype == "float64":
        return a.astype(np.float64)
    if dtype == "int32":
        return a.astype(np.int64)
    return a.astype(np.bool_)


# --------------------------------------------------------------------------- generation
class Draw:
    """The generator's random choices, from seeded numpy Generators: a graph is a function of
    its seed alone (``make_graph``), so a failing one is reproduced from the seed it prints.

    Two streams: ``structure`` (which ops, dtypes, ranks, which dims are 1, which nodes feed
    which) and ``sizes`` (the dims that are not 1, slice bounds, expand targets, values). The
    graphs of one *family* share the structure stream and differ in sizes and values, so their
    kernels -- specialised for ops, dtypes and ranks, not sizes -- compile once for the family."""

    def __init__(self, structure_seed: int, size_seed: int) -> None:
        self.rng = np.random.default_rng(structure_seed)
        self.sizes = np.random.default_rng(size_seed)

    def size(self, seq: Any) -> Any:
        """One of ``seq``, from the sizes stream."""
        return seq[int(self.sizes.integers(len(seq)))]

    def size_integer(self, lo: int, hi: int) -> int:
        """Uniform in ``[lo, hi]``, from the sizes stream."""
        return int(self.sizes.integers(lo, hi + 1))

    def integers(self, lo: int, hi: int) -> int:
        """Uniform in ``[lo, hi]`` (both included)."""
        return int(self.rng.integers(lo, hi + 1))

    def boolean(self) -> bool:
        return bool(self.rng.integers(2))

    def choice(self, seq: Any) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def maybe_integer(self, lo: int, hi: int) -> int | None:
        """None half of the time, else uniform in ``[lo, hi]``."""
        return None if self.boolean() else self.integers(lo, hi)

    def permutation(self, n: int) -> tuple[int, ...]:
        return tuple(int(i) for i in self.rng.permutation(n))

    def distinct(self, lo: int, hi: int, max_size: int) -> list[int]:
        """Up to ``max_size`` distinct integers of ``[lo, hi]``."""
        k = min(self.integers(0, max_size), hi - lo + 1)
        return [int(v) + lo for v in self.rng.choice(hi - lo + 1, size=k, replace=False)]


class _Builder:
    """Appends steps to a graph, computing each node's facts; every method keeps the graph
    valid (a choice that does not fit the current node falls back to one that does)."""

    def __init__(self, draw: Draw, autodiff: bool) -> None:
        self.draw = draw
        self.autodiff = autodiff
        self.g = Graph()

    # ---- helpers
    def add(self, step: Step, node: Node) -> int:
        assert _numel(node.shape) <= MAX_NUMEL
        self.g.steps.append(step)
        self.g.nodes.append(node)
        return len(self.g.nodes) - 1

    def node(self, i: int) -> Node:
        return self.g.nodes[i]

    def leaf(self, shape: tuple[int, ...], dtype: str) -> int:
        bound = {"bool": 1.0, "int32": 5.0}.get(dtype, 2.0)
        return self.add(Step("leaf", (), (shape, dtype)), Node(shape, dtype, bound))

    def new_shape(self) -> tuple[int, ...]:
        d = self.draw
        ndim = d.integers(1, 3)
        # a dim is 1 (broadcasts) one time in six, else a size; a shape too large shrinks its
        # largest dim (the rank and the unit dims are the structure's, whatever the sizes)
        dims = [1 if d.integers(0, 5) == 0 else d.size((2, 3, 4, 5, 8)) for _ in range(ndim)]
        while _numel(tuple(dims)) > MAX_NUMEL // 4:
            k = dims.index(max(dims))
            dims[k] = {8: 5, 5: 4, 4: 3, 3: 2}[dims[k]]
        return tuple(dims)

    def broadcast_partner_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``shape``: some dims set to 1, maybe fewer leading
        dims, maybe one new leading dim ((3,1,5) against (4,5) and the like)."""
        d = self.draw
        out = [1 if d.boolean() and d.boolean() else n for n in shape]
        drop = d.integers(0, len(out))
        out = out[drop:]
        if d.boolean() and _numel(shape) * 3 <= MAX_NUMEL and len(shape) < 4:
            out = [d.size_integer(2, 3)] + [1] * (len(shape) - len(out)) + out
        return tuple(out)

    def pick(self, pred: Callable[[Node], bool]) -> int | None:
        """An existing node satisfying ``pred`` (recent ones more likely), or None."""
        cands = [i for i, n in enumerate(self.g.nodes) if pred(n)]
        if not cands:
            return None
        return cands[-1] if self.draw.boolean() else self.draw.choice(cands)

    # ---- ops
    def cast(self, x: int, to: str) -> int:
        n = self.node(x)
        if n.dtype in FLOATS and to in ("int32", "bool") and n.err:
            # discontinuous casts take exact values only: cast a fresh leaf instead
            x = self.leaf(n.shape, n.dtype)
            n = self.node(x)
        if to == "bool":
            bound = 1.0
        elif to == "int32":
            bound = float(math.floor(n.bound)) if n.dtype in FLOATS else n.bound
        else:
            bound = n.bound
        err = n.err
        if err and to == "float32" and n.dtype == "float64":
            # both sides round to float32: the gap grows by at most one rounding of the bound
            err += 2 * EPS["float32"] * n.bound
        return self.add(Step("cast", (x,), to), Node(n.shape, to, bound, err))

    def unary(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        if n.dtype == "bool":
            return self.add(Step("not", (x,)), n)
        if n.dtype == "int32":
            op = d.choice(("neg", "abs"))
            return self.add(Step(op, (x,)), n)
        names = ("sin", "cos", "tanh", "sigmoid", "erf", "exp", "neg", "abs", "relu")
        op = d.choice(names)
        if op in EXACT_UNARY:
            return self.add(Step(op, (x,)), n)
        eps = EPS[n.dtype]
        if op == "exp":
            if n.bound > 4.0:
                op = "tanh"
            else:
                out = math.exp(n.bound)
                err = out * n.err * 1.01 + LIBM_ULPS * eps * out
                return self.add(Step("exp", (x,)), Node(n.shape, n.dtype, out, err))
        lip = UNARY_FLOAT[op][2]  # every one of these maps into [-1, 1]
        return self.add(Step(op, (x,)), Node(n.shape, n.dtype, 1.0, lip * n.err + LIBM_ULPS * eps))

    def scalar(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        if n.dtype == "bool":
            return self.add(Step("not", (x,)), n)
        op = d.choice(tuple(SCALAR) if n.dtype in FLOATS else ("mul_s", "add_s", "rsub_s"))
        s = d.choice(SCALARS if n.dtype in FLOATS else INT_SCALARS)
        a = abs(s)
        if op == "mul_s":
            bound, lip = n.bound * a, a
        elif op == "div_s":
            bound, lip = n.bound / a, 1.0 / a
        else:
            bound, lip = n.bound + a, 1.0
        if bound > MAX_BOUND:  # shrink instead of growing past the bound
            if n.dtype not in FLOATS:
                return self.add(Step("neg", (x,)), n)
            op, s, bound, lip = "div_s", 4.0, n.bound / 4.0, 0.25
        err = 0.0 if not n.err else lip * n.err + EPS[n.dtype] * bound
        return self.add(Step(op, (x,), s), Node(n.shape, n.dtype, bound, err))

    def partner(self, x: int, dtype: str) -> int:
        """A second operand for ``x``: an existing node of ``dtype`` that broadcasts with it,
        or a new leaf of a broadcast-compatible shape."""
        shape = self.node(x).shape

        def fits(m: Node) -> bool:
            b = _broadcast(m.shape, shape)
            return m.dtype == dtype and b is not None and _numel(b) <= MAX_NUMEL

        y = self.pick(fits) if self.draw.boolean() else None
        if y is None:
            y = self.leaf(self.broadcast_partner_shape(shape), dtype)
        return y

    def binary(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        if n.dtype == "bool":
            y = self.partner(x, "bool")
            op = d.choice(tuple(LOGICAL))
            shape = _broadcast(n.shape, self.node(y).shape)
            return self.add(Step(op, (x, y)), Node(shape, "bool", 1.0))
        y = self.partner(x, n.dtype)
        m = self.node(y)
        shape = _broadcast(n.shape, m.shape)
        op = d.choice(tuple(BINARY))
        if op == "mul" and n.bound * m.bound > MAX_BOUND:
            op = "maximum"
        if op in ("add", "sub") and n.bound + m.bound > MAX_BOUND:
            op = "minimum"
        if op == "mul":
            bound = n.bound * m.bound
            err = n.bound * m.err + m.bound * n.err + n.err * m.err
        elif op in ("add", "sub"):
            bound = n.bound + m.bound
            err = n.err + m.err
        else:
            bound = max(n.bound, m.bound)
            err = max(n.err, m.err)
        if err and n.dtype in FLOATS:
            err += EPS[n.dtype] * bound
        return self.add(Step(op, (x, y)), Node(shape, n.dtype, bound, err))

    def compare(self, x: int) -> int:
        """A bool node from an exact numeric one (against a node or a scalar)."""
        n = self.node(x)
        if n.dtype == "bool" or n.err:
            return self.unary(x) if n.dtype == "bool" else self.cast(x, "bool")
        if self.draw.boolean():
            s = self.draw.choice((0.0, 0.5, -1.0) if n.dtype in FLOATS else (0, 1, -2))
            return self.add(Step("gt_s", (x,), s), Node(n.shape, "bool", 1.0))
        y = self.partner(x, n.dtype)
        m = self.node(y)
        if m.err:  # a partner that is not exact: compare with a fresh leaf instead
            y = self.leaf(m.shape, n.dtype)
        shape = _broadcast(n.shape, self.node(y).shape)
        op = self.draw.choice(tuple(COMPARE))
        return self.add(Step(op, (x, y)), Node(shape, "bool", 1.0))

    def where(self, x: int) -> int:
        n = self.node(x)
        if n.dtype == "bool":
            cond, val = x, self.partner(x, self.draw.choice(("float32", "float64", "int32")))
        else:
            val = x
            cond = self.compare(x if not n.err else self.leaf(n.shape, self.draw.choice(("float32", "int32"))))
        v, c = self.node(val), self.node(cond)
        other = self.partner(val, v.dtype)
        cv = _broadcast(c.shape, v.shape)
        shape = None if cv is None else _broadcast(cv, self.node(other).shape)
        if shape is None or _numel(shape) > MAX_NUMEL:
            other = self.leaf(cv, v.dtype)
            shape = cv
        o = self.node(other)
        return self.add(Step("where", (cond, val, other)), Node(shape, v.dtype, max(v.bound, o.bound),
                                                                 max(v.err, o.err)))

    def convert(self, x: int) -> int:
        n = self.node(x)
        choices = [t for t in ("float32", "float64", "int32", "bool") if t != n.dtype]
        if self.autodiff:
            choices = [t for t in choices if t in FLOATS] or choices
        to = self.draw.choice(choices)
        if to == "int32" and n.bound > MAX_BOUND:
            to = "bool"
        return self.cast(x, to)

    def reduce(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        if n.dtype == "bool":
            x = self.cast(x, d.choice(("float32", "int32")))
            n = self.node(x)
        ops = ("sum", "mean", "amax", "amin") if n.dtype in FLOATS else ("amax", "amin")
        op = d.choice(ops)
        dim = d.maybe_integer(-len(n.shape), len(n.shape) - 1) if n.shape else None
        keep = d.boolean()
        if dim is None:
            shape: tuple[int, ...] = ()
            count = _numel(n.shape)
        else:
            k = dim % len(n.shape)
            count = n.shape[k]
            shape = tuple(1 if i == k else s for i, s in enumerate(n.shape)) if keep else \
                n.shape[:k] + n.shape[k + 1:]
        if op in ("amax", "amin"):
            return self.add(Step(op, (x,), (dim, keep)), Node(shape, n.dtype, n.bound, n.err))
        eps = EPS[n.dtype]
        bound = n.bound * count if op == "sum" else n.bound
        if bound > MAX_BOUND:
            op, bound = "mean", n.bound
        # recursive summation: each partial sum rounds, at most (count - 1) * eps * sum|x|
        sum_err = count * n.err + LIBM_ULPS * eps * count * count * n.bound
        err = sum_err if op == "sum" else sum_err / count + eps * n.bound
        return self.add(Step(op, (x,), (dim, keep)), Node(shape, n.dtype, bound, err))

    def matmul(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        if n.dtype not in FLOATS:
            x = self.cast(x, d.choice(FLOATS))
            n = self.node(x)
        if len(n.shape) < 2:
            new = (_numel(n.shape), 1) if d.boolean() else (1, _numel(n.shape))
            x = self.add(Step("reshape", (x,), new), Node(new, n.dtype, n.bound, n.err))
            n = self.node(x)
        *batch, _m, k = n.shape
        if d.boolean():
            y = self.add(Step("mT", (x,)), Node(tuple(batch) + (k, _m), n.dtype, n.bound, n.err))
        else:
            cols = 1 if d.integers(0, 4) == 0 else d.size((2, 3, 5, 8))
            y = self.leaf(tuple(batch[-1:] if batch and d.boolean() else ()) + (k, cols), n.dtype)
        m = self.node(y)
        shape = _broadcast(n.shape[:-2], m.shape[:-2]) + (n.shape[-2], m.shape[-1])
        bound = k * n.bound * m.bound
        if bound > MAX_BOUND or _numel(shape) > MAX_NUMEL:
            return self.unary(x)
        err = k * (n.bound * m.err + m.bound * n.err + n.err * m.err) + LIBM_ULPS * EPS[n.dtype] * k * bound
        out = self.add(Step("matmul", (x, y)), Node(shape, n.dtype, bound, err))
        # often an elementwise epilogue right away (bias, scale, activation), the shape a
        # matmul-epilogue fuser takes into the matmul's store
        for _ in range(d.integers(0, 2)):
            out = getattr(self, d.choice(("binary", "scalar", "unary")))(out)
        return out

    def view(self, x: int) -> int:
        n = self.node(x)
        d = self.draw
        kind = d.choice(("slice", "permute", "reshape", "expand"))
        shape = n.shape
        if not shape:
            kind = "reshape"
        if kind == "slice":
            dim = d.integers(0, len(shape) - 1)
            size = shape[dim]
            step = d.choice((1, 2, -1))
            start = d.size_integer(0, size - 1)
            if step > 0:
                stop = d.size_integer(start + 1, size)
            else:
                stop = (None if d.boolean() else d.size_integer(-1, start - 1)) if start > 0 else None
                if stop == -1:
                    stop = None
            length = len(range(*slice(start, stop, step).indices(size)))
            new = shape[:dim] + (length,) + shape[dim + 1:]
            return self.add(Step("slice", (x,), (dim, start, stop, step)), Node(new, n.dtype, n.bound, n.err))
        if kind == "permute":
            perm = d.permutation(len(shape))
            return self.add(Step("permute", (x,), perm), Node(tuple(shape[p] for p in perm), n.dtype, n.bound, n.err))
        if kind == "expand":
            target = tuple(d.size_integer(1, 3) if s == 1 else s for s in shape)
            if d.boolean():
                target = (d.size_integer(2, 3),) + target
            if _numel(target) > MAX_NUMEL:
                target = shape
            return self.add(Step("expand", (x,), target), Node(target, n.dtype, n.bound, n.err))
        # reshape: flatten, merge two neighbours, split a dim, or add a unit dim
        how = d.choice(("flatten", "merge", "split", "unit"))
        new = list(shape)
        if how == "flatten" or not new:
            new = [_numel(shape)]
        elif how == "merge" and len(new) >= 2:
            i = d.integers(0, len(new) - 2)
            new[i:i + 2] = [new[i] * new[i + 1]]
        elif how == "split" and any(s in (4, 6, 8) for s in new):
            i = next(j for j, s in enumerate(new) if s in (4, 6, 8))
            new[i:i + 1] = [2, new[i] // 2]
        else:
            i = d.integers(0, len(new))
            new.insert(i, 1)
        return self.add(Step("reshape", (x,), tuple(new)), Node(tuple(new), n.dtype, n.bound, n.err))


KINDS = ("unary", "unary", "scalar", "binary", "binary", "compare", "where", "convert", "reduce", "matmul",
         "view", "view")


def make_graph(seed: int, autodiff: bool = False) -> Graph:
    """The graph of ``seed``: a few leaves, then 2-10 ops on recent or earlier nodes, sometimes
    a mid-graph read; the last node and up to two others are the outputs. Seeds ``FAMILY * k``
    to ``FAMILY * k + FAMILY - 1`` make one family (``Draw``): one structure, other sizes and
    values."""
    d = Draw(seed // FAMILY, seed)
    b = _Builder(d, autodiff)
    leaf_dtypes = FLOATS if autodiff else ("float32", "float32", "float64", "int32", "bool")
    for _ in range(d.integers(1, 2)):
        b.leaf(b.new_shape(), d.choice(leaf_dtypes))
    for _ in range(d.integers(2, 10)):
        n = len(b.g.nodes)
        x = d.integers(max(0, n - 3), n - 1) if d.boolean() else d.integers(0, n - 1)
        kind = d.choice(KINDS)
        out = getattr(b, kind)(x)
        if d.integers(0, 9) == 0:  # read an intermediate mid-graph, then continue
            b.g.reads_after.setdefault(len(b.g.nodes) - 1, []).append(d.integers(0, out))
    last = len(b.g.nodes) - 1
    extra = d.distinct(0, last, 2)
    b.g.outputs = [last] + [i for i in extra if i != last and b.g.steps[i].op != "leaf"]
    b.g.value_seed = d.size_integer(0, 2**32 - 1)
    b.g.seed = seed
    return b.g


# --------------------------------------------------------------------------- evaluation
def _leaf_values(g: Graph) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(g.value_seed)
    out = {}
    for i, s in enumerate(g.steps):
        if s.op != "leaf":
            continue
        shape, dtype = s.arg
        if dtype == "bool":
            out[i] = rng.random(shape) < 0.5
        elif dtype == "int32":
            out[i] = rng.integers(-5, 6, size=shape).astype(np.int64)
        else:
            out[i] = _round(rng.uniform(-2.0, 2.0, size=shape), dtype)
    return out


def evaluate_reference(g: Graph) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(every node's reference value, the mid-graph reads) computed with numpy."""
    leaves = _leaf_values(g)
    vals: list[np.ndarray] = []
    for i, s in enumerate(g.steps):
        v = _apply_numpy(s, [vals[j] for j in s.inputs], lambda _a, i=i: leaves[i])
        vals.append(_round(v, g.nodes[i].dtype))
    return dict(enumerate(vals)), {}


def evaluate(g: Graph, device: Device, requires_grad: bool = False) -> tuple[dict[int, np.ndarray], list[Any]]:
    """Run ``g`` on ``device`` the way user code would: register op by op, read the mid-graph
    reads when they come, drop each handle right after its last use, then read the outputs.
    Returns (values read: output node -> array, mid-graph read k -> array under key -1 - k;
    the output tensors followed by the leaf tensors)."""
    leaves = _leaf_values(g)
    last = g.last_uses()
    keep = set(g.outputs)
    vals: list[Any] = []
    got: dict[int, np.ndarray] = {}
    leaf_tensors: list[Any] = []

    def make_leaf(i: int) -> Any:
        shape, dtype = g.steps[i].arg
        grad = requires_grad and dtype in FLOATS
        t = ember.tensor(leaves[i].astype(NP_DTYPE[dtype]), dtype=_ember_dtype(dtype), device=device,
                         requires_grad=grad)
        leaf_tensors.append(t)
        return t

    for i, s in enumerate(g.steps):
        vals.append(_apply_ember(s, [vals[j] for j in s.inputs], lambda _a, i=i: make_leaf(i)))
        for j in g.reads_after.get(i, ()):
            got[-1 - len(got)] = vals[j].numpy()  # mid-graph reads, keyed by negative order
        # drop every handle whose last use was this step (leaves stay alive in leaf_tensors)
        for j in range(i + 1):
            if last[j] == i and j not in keep:
                vals[j] = None
    for j in g.outputs:
        got[j] = vals[j].numpy()
    return got, [vals[j] for j in g.outputs] + leaf_tensors


def _mid_reads(g: Graph) -> list[int]:
    return [j for i in sorted(g.reads_after) for j in g.reads_after[i]]


def assert_node(got: np.ndarray, want: np.ndarray, node: Node, factor: float, what: str, g: Graph) -> None:
    assert got.shape == node.shape, f"{what}: shape {got.shape} != {node.shape}\n{g!r}"
    assert got.dtype == NP_DTYPE[node.dtype], f"{what}: dtype {got.dtype} != {node.dtype}\n{g!r}"
    if node.dtype in FLOATS:
        a, b = got.astype(np.float64), np.asarray(want, dtype=np.float64)
        if node.err == 0.0:
            bad = a != b
        else:
            bad = np.abs(a - b) > factor * node.err
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {bad.size} values differ; first at {idx}: {a[idx]!r} vs {b[idx]!r} "
                f"(allowed {'exact' if node.err == 0 else factor * node.err:})\n{g!r}")
    else:
        np.testing.assert_array_equal(got.astype(np.int64 if node.dtype == "int32" else np.bool_), want,
                                      err_msg=f"{what}\n{g!r}")


FUSED, UNFUSED, FLEX = (lambda: Device.cpu()), (lambda: Device.cpu(fusion=False)), Device.flex


@pytest.fixture(scope="module")
def devices() -> dict[str, Device]:
    devs = {"fused": FUSED(), "unfused": UNFUSED(), "flex": FLEX()}
    for name, d in devs.items():
        try:
            d.backend()
        except Exception as e:  # noqa: BLE001 - no C toolchain: the cpu device is not here
            pytest.skip(f"{name} device unavailable: {e}")
    assert ember.backend_name(devs["fused"]).startswith("dispatch<fusion<")
    return devs


def test_graph_generator_covers_the_op_mix() -> None:
    """The graphs the property runs really cover what it claims (a guard against a generator
    that silently stopped drawing some op kind)."""
    seen: set[str] = set()
    dtypes: set[str] = set()
    mids = 0
    for seed in _seeds(GRAPHS) if not ONLY else range(BASE_SEED, BASE_SEED + 1000):
        g = make_graph(seed)
        assert make_graph(seed) == g, "a graph is a function of its seed"
        seen.update(s.op for s in g.steps)
        dtypes.update(n.dtype for n in g.nodes)
        mids += bool(g.reads_after)
    for op in ("sin", "exp", "add", "mul", "mul_s", "where", "cast", "sum", "mean", "amax", "matmul", "slice",
               "permute", "reshape", "expand", "gt_s", "lt"):
        assert op in seen, f"the generator never drew {op}"
    assert dtypes == {"float32", "float64", "int32", "bool"}
    assert mids > 0


def test_graphs_reach_the_fusion_paths(devices: dict[str, Device], monkeypatch: pytest.MonkeyPatch) -> None:
    """On the fused device the generated graphs queue multi-op drains whose statuses mark
    last uses READ_WRITE (dropped handles), and reads happen mid-graph: the property below
    is exercising the lazy machinery, not just eager kernels."""
    from ember.backends.fusion import READ_WRITE, Fusion

    fb: Any = devices["fused"].backend()
    while not isinstance(fb, Fusion):
        fb = fb.inner
    queues: list[list[Any]] = []
    real = fb.search
    monkeypatch.setattr(fb, "search", lambda ops: queues.append(list(ops)) or real(ops))
    for seed in range(BASE_SEED, BASE_SEED + 25):
        evaluate(make_graph(seed), devices["fused"])
    assert max(len(q) for q in queues) >= 5
    assert sum(any(READ_WRITE in o.status for o in q) for q in queues) >= 3
    assert sum(1 for q in queues for o in q if o.op == "matmul") >= 1


def _seeds(count: int) -> list[int]:
    """The seeds of a run: ``EMBER_FUSION_GRAPH_SEED`` (comma-separated) alone when set, else
    ``count`` consecutive seeds from ``BASE_SEED``."""
    if ONLY:
        return [int(v, 0) for v in ONLY.split(",")]
    return list(range(BASE_SEED, BASE_SEED + count))


def run_graphs(seeds: list[int], check: Callable[[Graph], None], test: str, autodiff: bool = False) -> None:
    """``check(make_graph(seed))`` for every seed, the families spread over ``THREADS`` threads
    (each thread runs whole families, in seed order; streams are per thread, so the graphs of
    two threads never share a queue); a failure names each failing seed (up to
    ``MAX_FAILURES``, then the run stops) and the command that runs just those graphs."""
    failures: list[tuple[int, BaseException]] = []
    lock = threading.Lock()

    def work(mine: list[int]) -> None:
        for seed in mine:
            if len(failures) >= MAX_FAILURES:
                return
            try:
                check(make_graph(seed, autodiff))
            except Exception as e:  # noqa: BLE001 - reported with its seed below
                with lock:
                    failures.append((seed, e))

    families: dict[int, list[int]] = {}
    for seed in seeds:
        families.setdefault(seed // FAMILY, []).append(seed)
    shares: list[list[int]] = [[] for _ in range(max(1, min(THREADS, len(families))))]
    for k, fam in enumerate(families.values()):
        shares[k % len(shares)].extend(fam)
    if len(shares) == 1:
        work(shares[0])
    else:
        threads = [threading.Thread(target=work, args=(share,), name=f"graphs-{k}") for k, share in enumerate(shares)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if not failures:
        return
    failures.sort(key=lambda f: f[0])
    bad = ",".join(str(s) for s, _ in failures)
    more = " (the run stopped there)" if len(failures) >= MAX_FAILURES else ""
    lines = [f"{len(failures)} of {len(seeds)} graphs failed{more} (on {len(shares)} threads): seeds {bad}",
             f"reproduce: EMBER_FUSION_GRAPH_SEED={bad} EMBER_FUSION_GRAPH_FAMILY={FAMILY} "
             f"EMBER_FUSION_GRAPH_THREADS=1 python -m pytest '{os.path.relpath(__file__)}::{test}'"]
    for seed, e in failures[1:]:
        lines.append(f"  seed {seed}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    seed, first = failures[0]
    lines.append(f"first failure, seed {seed}: {type(first).__name__}: {first}")
    raise AssertionError("\n".join(lines)) from first


def check_fused_unfused_flex(g: Graph, devices: dict[str, Device]) -> None:
    """Every device within each node's bound of the reference, any two within twice it."""
    ref, _ = evaluate_reference(g)
    results = {name: evaluate(g, dev)[0] for name, dev in devices.items()}
    mids = _mid_reads(g)
    for name, got in results.items():
        for key, value in got.items():
            node_id = key if key >= 0 else mids[-1 - key]
            assert_node(value, ref[node_id], g.nodes[node_id], 1.0, f"{name} n{node_id} vs reference", g)
    # pairwise: each within the bound of the reference puts any two within twice it
    for a, b in (("fused", "unfused"), ("fused", "flex"), ("unfused", "flex")):
        for key, value in results[a].items():
            node_id = key if key >= 0 else mids[-1 - key]
            assert_node(value, results[b][key], g.nodes[node_id], 2.0, f"{a} vs {b} n{node_id}", g)


def test_random_graph_fused_equals_unfused_equals_flex(devices: dict[str, Device]) -> None:
    run_graphs(_seeds(GRAPHS), lambda g: check_fused_unfused_flex(g, devices),
               "test_random_graph_fused_equals_unfused_equals_flex")


# --------------------------------------------------------------------------- autodiff
#: gradients have no propagated bound here: compare with flex at the tolerance of the least
#: precise float dtype in the graph, scaled by the gradient's own magnitude (values stay
#: <= MAX_BOUND, graphs are <= 10 ops)
GRAD_TOL = {"float32": 2e-4, "float64": 1e-10}


def _loss_and_grads(g: Graph, device: Device) -> list[np.ndarray | None]:
    _, tensors = evaluate(g, device.autodiff(), requires_grad=True)
    outs, leaves = tensors[:len(g.outputs)], tensors[len(g.outputs):]
    rng = np.random.default_rng(g.value_seed ^ 0x5EED)
    loss = None
    for j, t in zip(g.outputs, outs):
        if g.nodes[j].dtype not in FLOATS or not t.requires_grad:
            continue
        w = ember.tensor(rng.uniform(-1, 1, size=t.shape), dtype=ember.float64, device=device.autodiff())
        term = (t.double() * w).sum()
        loss = term if loss is None else loss + term
    if loss is None:
        return []
    loss.backward()
    return [None if t.grad is None else t.grad.numpy() for t in leaves]


def check_gradients(g: Graph, devices: dict[str, Device]) -> None:
    grads = {name: _loss_and_grads(g, dev) for name, dev in devices.items()}
    # a float64 leaf whose gradient flows through a float32 node has float32 accuracy
    precision = "float32" if any(n.dtype == "float32" for n in g.nodes) else "float64"
    for name, ref in (("fused", "flex"), ("unfused", "flex"), ("fused", "unfused")):
        got, want = grads[name], grads[ref]
        what = f"{name} vs {ref}"
        assert len(got) == len(want), f"{what}: {len(got)} leaves vs {len(want)}\n{g!r}"
        for k, (a, b) in enumerate(zip(got, want)):
            assert (a is None) == (b is None), f"{what}: leaf {k} grad presence differs\n{g!r}"
            if a is None:
                continue
            assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: leaf {k} {a.shape}/{a.dtype}\n{g!r}"
            tol = GRAD_TOL[precision] * (1.0 + float(np.max(np.abs(b), initial=0.0)))
            err = float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0))
            assert err <= tol, f"{what}: grad of leaf {k} off by {err:.3g} (allowed {tol:.3g})\n{g!r}"


def test_random_graph_gradients_fused_equal_unfused_and_flex(devices: dict[str, Device]) -> None:
    run_graphs(_seeds(GRAD_GRAPHS), lambda g: check_gradients(g, devices),
               "test_random_graph_gradients_fused_equal_unfused_and_flex", autodiff=True)
