"""The fused elementwise kernel (``fusers/elementwise_kernel.py``) on the CPU runtime.

Each program runs fused and, op by op, through the unfused Cube kernels: the two must agree
bit for bit (same expressions, same rounding points). A float64 numpy interpreter of the
same program checks both with per-dtype tolerances. Fresh outputs are poisoned (NaN or a
sentinel) so unwritten elements are caught; lines, strided and broadcast layouts and
in-place outputs are covered.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember import Device, cube
from ember import dtype as dt
from ember.backends.cube.fusers.elementwise_kernel import check_program, run_fused

DEV = Device.cpu(fusion=False)


def _backend():
    bk = DEV.backend()
    while not hasattr(bk, "_empty"):
        bk = bk.inner
    return bk


BK = _backend()
POISON = {"f": np.nan, "i": -12345, "u": 0xAB, "b": True}


class Poisoned:
    """The backend as ``run_fused`` sees it, but fresh outputs come filled with poison."""

    def __init__(self, bk):
        self.bk = bk
        self.client = bk.client

    def _empty(self, shape, dtype):
        return self.bk.from_data(np.full(shape, POISON[dtype.np.kind], dtype.np), dtype)

    def __getattr__(self, name):
        return getattr(self.bk, name)


PBK = Poisoned(BK)
TOL = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2), "float32": (2e-5, 1e-5), "float64": (1e-12, 1e-12)}


def ct(a: np.ndarray):
    return BK.from_data(np.ascontiguousarray(a), dt.from_numpy_dtype(a.dtype))


def read(t) -> np.ndarray:
    return np.asarray(BK.into_data(t))


def rand(rng: np.random.Generator, shape, name: str, positive: bool = False) -> np.ndarray:
    d = dt.as_dtype(name)
    if d is dt.bool_:
        return rng.random(shape) < 0.5
    if not d.is_floating_point:
        lo = 1 if positive else (0 if d is dt.uint8 else -40)
        return rng.integers(lo, 40, shape).astype(d.np)
    x = rng.standard_normal(shape) * 2
    return (np.abs(x) + 0.1 if positive else x).astype(d.np)


# --------------------------------------------------------------------------- references

_NP_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "floor": np.floor,
    "round": np.rint,
    "reciprocal": lambda x: 1 / x,
    "logical_not": np.logical_not,
    "isnan": np.isnan,
}
_NP_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "floor_div": np.floor_divide,
    "remainder": np.remainder,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "pow": np.power,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan"}


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def numpy_reference(prog, ins, scalars, out_dtypes):
    """Every register in its dtype; float ops computed in float64 and rounded to it."""
    regs = []
    outs = {}
    for step in prog:
        tag = step[0]
        if tag == "in":
            regs.append(ins[step[1]])
        elif tag in ("scalar", "const"):
            v, d = scalars[step[1]] if tag == "scalar" else (step[1], step[2])
            regs.append(np.asarray(v).astype(dt.as_dtype(d).np if isinstance(d, str) else d.np))
        elif tag == "unary":
            x = regs[step[2]]
            r = _NP_UNARY[step[1]](_wide(x))
            regs.append(r if step[1] in _BOOL_OUT else r.astype(x.dtype))
        elif tag == "binary":
            a, b = regs[step[2]], regs[step[3]]
            if a.dtype == np.bool_ and step[1] in ("add", "maximum"):
                r = np.logical_or(a, b)
            elif a.dtype == np.bool_ and step[1] in ("mul", "minimum"):
                r = np.logical_and(a, b)
            else:
                with np.errstate(all="ignore"):
                    r = _NP_BINARY[step[1]](_wide(a), _wide(b))
            regs.append(r if step[1] in _BOOL_OUT else r.astype(a.dtype))
        elif tag == "where":
            regs.append(np.where(regs[step[1]], regs[step[2]], regs[step[3]]))
        elif tag == "cast":
            regs.append(regs[step[1]].astype(dt.as_dtype(step[2]).np))
        else:
            outs[step[1]] = regs[step[2]]
    return [outs[k] for k in range(len(out_dtypes))]


def unfused_reference(prog, ins, scalars):
    """The program op by op through the Cube backend's own (unfused) kernels."""
    regs: list = []
    outs = {}
    for step in prog:
        tag = step[0]
        if tag == "in":
            regs.append(ins[step[1]])
        elif tag == "scalar":
            regs.append(("s", scalars[step[1]][0]))
        elif tag == "const":
            regs.append(("s", step[1]))
        elif tag == "unary":
            regs.append(getattr(BK, step[1])(regs[step[2]]))
        elif tag == "binary":
            a, b = regs[step[2]], regs[step[3]]
            if type(b) is tuple:
                regs.append(getattr(BK, step[1] + "_scalar")(a, b[1]))
            elif type(a) is tuple:
                regs.append(getattr(BK, "r" + step[1] + "_scalar")(b, a[1]))
            else:
                regs.append(getattr(BK, step[1])(a, b))
        elif tag == "where":
            c, a, b = (regs[r] for r in step[1:])
            regs.append(BK.masked_fill(b, c, a[1]) if type(a) is tuple else BK.where(c, a, b))
        elif tag == "cast":
            regs.append(BK.cast(regs[step[1]], dt.as_dtype(step[2])))
        else:
            outs[step[1]] = regs[step[2]]
    return [read(outs[k]) for k in range(len(outs))]


#: ops computed by a libm call: the C target uses glibc's vector variants (<= 4 ulp) for lines
#: of some widths and scalar libm otherwise, and the unfused path tunes its line width, so
#: fused and unfused agree to a few ulp there and bit for bit everywhere else
LIBM = {"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "erf", "sigmoid"}


def close_to_unfused(got: np.ndarray, want: np.ndarray) -> None:
    """Agreement to a few ulp of the result's dtype (relative, and absolute near zero)."""
    eps = float(np.finfo(got.dtype).eps)
    scale = float(np.nanmax(np.abs(want.astype(np.float64)))) if want.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=8 * eps, atol=8 * eps * scale)


def check(prog, arrays, scalars, out_dtypes, shape=None, views=None, inplace=None):
    """Run fused; compare with the unfused kernels (exact) and numpy (tolerance)."""
    check_program(prog, len(arrays), len(scalars), len(out_dtypes))
    shape = shape or np.broadcast_shapes(*(a.shape for a in arrays))
    ins = views if views is not None else [ct(a) for a in arrays]
    specs = [(shape, dt.as_dtype(d)) for d in out_dtypes]
    got = [read(t) for t in run_fused(PBK, prog, ins, scalars, specs, inplace)]
    ref_ins = [ct(a) for a in arrays]
    want = unfused_reference(prog, ref_ins, scalars)
    approx = numpy_reference(prog, arrays, scalars, out_dtypes)
    exact = not any(step[0] == "unary" and step[1] in LIBM for step in prog)
    for g, w, a, d in zip(got, want, approx, out_dtypes):
        assert g.dtype == dt.as_dtype(d).np and g.shape == tuple(shape)
        if exact or g.dtype.kind != "f":
            np.testing.assert_array_equal(g, np.broadcast_to(w, shape))
        else:
            close_to_unfused(g, np.broadcast_to(w, shape))
        if g.dtype.kind == "f":
            rtol, atol = TOL[dt.as_dtype(d).name]
            np.testing.assert_allclose(g.astype(np.float64), np.broadcast_to(a, shape), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, np.broadcast_to(a, shape))
    return got


# --------------------------------------------------------------------------- programs over dtypes

GELU = (
    ("in", 0),
    ("scalar", 0),
    ("binary", "mul", 0, 1),
    ("unary", "erf", 2),
    ("scalar", 1),
    ("binary", "add", 3, 4),
    ("binary", "mul", 0, 5),
    ("scalar", 2),
    ("binary", "mul", 6, 7),
    ("out", 0, 8),
)


@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
@pytest.mark.parametrize("n", [37, 5000, 65536])
def test_gelu_chain(name, n):
    rng = np.random.default_rng()
    d = dt.as_dtype(name)
    x = rand(rng, n, name)
    check(GELU, [x], [(0.7071067811865476, d), (1.0, d), (0.5, d)], [name])


@pytest.mark.parametrize("name", ["float32", "float16", "float64"])
def test_two_outputs_and_half_rounding_between_ops(name):
    rng = np.random.default_rng()
    d = dt.as_dtype(name)
    n = 4099
    prog = (
        ("in", 0),
        ("in", 1),
        ("binary", "add", 0, 1),
        ("unary", "exp", 2),
        ("scalar", 0),
        ("binary", "mul", 3, 4),
        ("unary", "sigmoid", 5),
        ("out", 0, 6),
        ("binary", "gt", 2, 4),
        ("out", 1, 7),
        ("cast", 5, "float32"),
        ("out", 2, 8),
    )
    a, b = rand(rng, n, name) / 2, rand(rng, n, name) / 2
    check(prog, [a, b], [(0.3, d)], [name, "bool", "float32"])


def test_int32_program():
    rng = np.random.default_rng()
    n = 1000
    prog = (
        ("in", 0),
        ("in", 1),
        ("binary", "mul", 0, 1),
        ("scalar", 0),
        ("binary", "floor_div", 2, 3),
        ("binary", "remainder", 4, 1),
        ("binary", "maximum", 5, 0),
        ("unary", "abs", 6),
        ("unary", "neg", 7),
        ("out", 0, 8),
        ("binary", "le", 8, 0),
        ("out", 1, 9),
    )
    a, b = rand(rng, n, "int32"), rand(rng, n, "int32", positive=True)
    check(prog, [a, b], [(-3, dt.int32)], ["int32", "bool"])


def test_bool_program_with_where_and_casts():
    rng = np.random.default_rng()
    n = 8192
    prog = (
        ("in", 0),  # bool
        ("in", 1),  # bool
        ("binary", "logical_xor", 0, 1),
        ("binary", "add", 0, 1),  # or
        ("unary", "logical_not", 3),
        ("in", 2),  # f32
        ("in", 3),  # u8
        ("cast", 6, "float32"),
        ("where", 2, 5, 7),
        ("out", 0, 8),
        ("cast", 2, "int32"),
        ("out", 1, 9),
        ("binary", "mul", 0, 1),  # and
        ("out", 2, 10),
    )
    arrays = [rand(rng, n, "bool"), rand(rng, n, "bool"), rand(rng, n, "float32"), rand(rng, n, "uint8")]
    check(prog, arrays, [], ["float32", "int32", "bool"])


def test_bool_results_are_stored_as_0_or_1():
    # the unfused unary_lines kernel stores logical_not of bool lines (width 16) as 0/0xFF
    # bytes on this toolchain (its C source is correct: a lane-wise u8 compare; a GCC
    # vectoriser issue); the fused kernel must store 0/1 whatever surrounds it
    rng = np.random.default_rng()
    n = 8192
    prog = (("in", 0), ("unary", "logical_not", 0), ("out", 0, 1), ("cast", 1, "int32"), ("out", 1, 2))
    outs = run_fused(PBK, prog, [ct(rand(rng, n, "bool"))], [], [((n,), dt.bool_), ((n,), dt.int32)])
    assert set(np.unique(read(outs[0]).view(np.uint8))) <= {0, 1}
    assert set(np.unique(read(outs[1]))) <= {0, 1}


def test_masked_fill_form_and_const():
    rng = np.random.default_rng()
    n = 300
    prog = (
        ("in", 0),
        ("in", 1),
        ("scalar", 0),
        ("where", 1, 2, 0),  # masked_fill(x, mask, s)
        ("const", 2.0, "float32"),
        ("binary", "mul", 3, 4),
        ("scalar", 1),  # a runtime exponent, as the unfused pow_scalar (a literal 2 may fold to x * x)
        ("binary", "pow", 5, 6),
        ("out", 0, 7),
    )
    scalars = [(-1.5, dt.float32), (3.0, dt.float32)]
    check(prog, [rand(rng, n, "float32"), rand(rng, n, "bool")], scalars, ["float32"])


@pytest.mark.parametrize(
    "src,dst",
    [
        ("float32", "float16"),
        ("float16", "float32"),
        ("float32", "int32"),
        ("int32", "float64"),
        ("float64", "bool"),
        ("int32", "uint8"),
    ],
)
def test_casts_match_the_cast_kernel(src, dst):
    rng = np.random.default_rng()
    n = 4100
    x = rand(rng, n, src)
    if src == "int32" and dst == "uint8":
        x = np.abs(x)
    prog = (("in", 0), ("unary", "abs", 0) if src != "int32" else ("in", 0), ("cast", 1, dst), ("out", 0, 2))
    check(prog, [x], [], [dst])


# --------------------------------------------------------------------------- layouts


def test_broadcast_row_column_and_scalar_tensor_take_the_strided_form():
    rng = np.random.default_rng()
    rows, cols = 33, 65
    full = rand(rng, (rows, cols), "float32")
    row = rand(rng, (cols,), "float32")
    col = rand(rng, (rows, 1), "float32")
    scal = rand(rng, (), "float32")
    prog = (
        ("in", 0),
        ("in", 1),
        ("binary", "add", 0, 1),
        ("in", 2),
        ("binary", "mul", 2, 3),
        ("in", 3),
        ("binary", "sub", 4, 5),
        ("unary", "tanh", 6),
        ("out", 0, 7),
    )
    check(prog, [full, row, col, scal], [], ["float32"], shape=(rows, cols))


def test_transposed_and_expanded_views():
    rng = np.random.default_rng()
    n = 70
    a = rand(rng, (n, n), "float16")
    b = rand(rng, (n,), "float16")
    ta, tb = ct(a), ct(b)
    views = [ta.with_layout((n, n), (1, n), 0), tb.with_layout((n, n), (0, 1), 0)]
    prog = (("in", 0), ("in", 1), ("binary", "sub", 0, 1), ("unary", "abs", 2), ("out", 0, 3))
    got = run_fused(PBK, prog, views, [], [((n, n), dt.float16)])
    want = np.abs((a.T.astype(np.float32) - b.astype(np.float32)[None, :]).astype(np.float16))
    np.testing.assert_array_equal(read(got[0]), want)


def test_program_of_scalars_and_constants_only():
    prog = (("scalar", 0), ("const", 3, "int64"), ("binary", "mul", 0, 1), ("out", 0, 2))
    got = run_fused(PBK, prog, [], [(7, dt.int64)], [((5, 3), dt.int64)])
    np.testing.assert_array_equal(read(got[0]), np.full((5, 3), 21))


def test_in_place_output_reuses_the_input_buffer():
    rng = np.random.default_rng()
    n = 8192
    a, b = rand(rng, n, "float32"), rand(rng, n, "float32")
    ta, tb = ct(a), ct(b)
    # the output is written after every load, so reusing an input read later in the program is safe
    prog = (("in", 1), ("unary", "exp", 0), ("out", 0, 1), ("in", 0), ("binary", "add", 1, 2), ("out", 1, 3))
    outs = run_fused(PBK, prog, [ta, tb], [], [((n,), dt.float32), ((n,), dt.float32)], {0: 0, 1: 1})
    assert outs[0].buffer is ta.buffer and outs[1].buffer is tb.buffer
    e = np.exp(b.astype(np.float64))
    np.testing.assert_allclose(read(outs[0]), e, rtol=2e-6)
    np.testing.assert_allclose(read(outs[1]), e + a, rtol=2e-6, atol=2e-6 * e.max())


def test_in_place_is_refused_when_the_donor_does_not_fit():
    rng = np.random.default_rng()
    n = 64
    a = rand(rng, n, "float32")
    ta = ct(a)
    view = ta.with_layout((n,), (1,), 0)
    prog = (("in", 0), ("in", 1), ("binary", "add", 0, 1), ("out", 0, 2))
    outs = run_fused(PBK, prog, [ta, view], [], [((n,), dt.float32)], {0: 0})  # another view shares it
    assert outs[0].buffer is not ta.buffer
    np.testing.assert_array_equal(read(outs[0]), a + a)
    half = ct(a).with_layout((n // 2,), (1,), n // 2)  # not at offset 0
    outs = run_fused(PBK, prog, [half, ct(a[: n // 2])], [], [((n // 2,), dt.float32)], {0: 0})
    assert outs[0].buffer is not half.buffer
    np.testing.assert_array_equal(read(outs[0]), a[n // 2 :] + a[: n // 2])


def test_same_program_reuses_the_compiled_kernel():
    rng = np.random.default_rng()
    pipes = cube.client(DEV).server.pipelines

    def fused() -> int:
        return sum(1 for kid in list(pipes) if ".fused_" in kid.kernel)

    # Programs no other test runs: the pipeline cache is process-wide, so a program another test
    # already compiled would not add a kernel here.
    prog = (("in", 0), ("unary", "sqrt", 0), ("unary", "sqrt", 1), ("unary", "sqrt", 2), ("out", 0, 3))
    run_fused(PBK, prog, [ct(np.abs(rand(rng, 100, "float32")))], [], [((100,), dt.float32)])
    before = fused()
    check(prog, [np.abs(rand(rng, 100, "float32"))], [], ["float32"])
    assert fused() == before
    check(prog, [np.abs(rand(rng, 100, "float64"))], [], ["float64"])
    assert fused() == before + 1
    other = (("in", 0), ("unary", "sqrt", 0), ("unary", "exp", 1), ("unary", "sqrt", 2), ("out", 0, 3))
    check(other, [np.abs(rand(rng, 100, "float32"))], [], ["float32"])  # another program: another kernel
    assert fused() == before + 2


# --------------------------------------------------------------------------- errors


def test_program_errors():
    with pytest.raises(ValueError, match="register 3"):
        check_program((("in", 0), ("unary", "exp", 3), ("out", 0, 1)), 1, 0, 1)
    with pytest.raises(ValueError, match="inputs"):
        check_program((("in", 2), ("out", 0, 0)), 1, 0, 1)
    with pytest.raises(ValueError, match="writes outputs"):
        check_program((("in", 0),), 1, 0, 1)
    with pytest.raises(cube.CubeSyntaxError, match="output 0 is cube.f64"):
        run_fused(PBK, (("in", 0), ("out", 0, 0)), [ct(np.zeros(4, np.float32))], [], [((4,), dt.float64)])
    with pytest.raises(cube.CubeSyntaxError, match="mixing"):
        x, y = ct(np.zeros(4, np.float32)), ct(np.zeros(4, np.int32))
        run_fused(PBK, (("in", 0), ("in", 1), ("binary", "add", 0, 1), ("out", 0, 2)), [x, y], [], [((4,), dt.float32)])


# --------------------------------------------------------------------------- matmul epilogue

from ember.backends.cube.fusers.matmul import run_matmul_epilogue  # noqa: E402
from ember.backends.cube.matmul import BLOCKED_MR, BLOCKED_NL, NAIVE_MAX_WORK, _blocked  # noqa: E402

BIAS_RELU = (("acc",), ("in", 0), ("binary", "add", 0, 1), ("unary", "relu", 2), ("out", 0, 3))


def unfused_matmul(a, b):
    """The ``blocked`` candidate, launched directly (the unfused product the kernel matches)."""
    aa, bb, out = BK._matmul_operands(a, b)
    if math.prod(aa.shape[:-2]) * aa.shape[-2] * aa.shape[-1] * bb.shape[-1] <= NAIVE_MAX_WORK:
        return BK.matmul(a, b)
    _blocked(BLOCKED_MR, BLOCKED_NL, True)(BK, aa, bb, out)
    return out


def check_epilogue(a, b, prog, extra, scalars, out_dtype, rtol):
    ta, tb = ct(a), ct(b)
    got = read(run_matmul_epilogue(PBK, ta, tb, prog, [ct(x) for x in extra], scalars, dt.as_dtype(out_dtype)))
    mm = unfused_matmul(ta, tb)
    prog2 = tuple(("in", len(extra)) if s[0] == "acc" else s for s in prog)
    want = unfused_reference(prog2, [ct(x) for x in extra] + [mm], scalars)[0]
    if any(s[0] == "unary" and s[1] in LIBM for s in prog):
        close_to_unfused(got, np.broadcast_to(want, got.shape))
    else:
        np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    approx = numpy_reference(prog2, [*extra, exact.astype(a.dtype) if a.dtype.kind != "f" else exact], scalars, [0])[0]
    scale = max(np.abs(exact).max(), 1.0)
    np.testing.assert_allclose(got.astype(np.float64), approx, rtol=rtol, atol=rtol * scale)
    return got


@pytest.mark.parametrize("name,rtol", [("float32", 1e-5), ("float64", 1e-12), ("float16", 1e-2), ("int32", 0)])
@pytest.mark.parametrize("m,k,n", [(67, 50, 131), (40, 33, 96), (3, 4, 5)])
def test_matmul_bias_relu(name, rtol, m, k, n):
    rng = np.random.default_rng()
    a, b = rand(rng, (m, k), name), rand(rng, (k, n), name)
    if name == "int32":
        a, b = a % 7 - 3, b % 7 - 3
    if name == "float16":
        a, b = a / 4, b / 4
    check_epilogue(a, b, BIAS_RELU, [rand(rng, (n,), name)], [], name, rtol)


def test_matmul_residual_scale_and_cast_with_batch_broadcast():
    rng = np.random.default_rng()
    a = rand(rng, (3, 40, 20), "float32")
    b = rand(rng, (1, 20, 64), "float32")  # broadcast over the batch (operands of equal rank, as the API passes them)
    res = rand(rng, (3, 40, 64), "float32")
    col = rand(rng, (40, 1), "float32")
    prog = (
        ("acc",),
        ("scalar", 0),
        ("binary", "mul", 0, 1),
        ("in", 0),
        ("binary", "add", 2, 3),
        ("in", 1),
        ("binary", "sub", 4, 5),
        ("unary", "tanh", 6),
        ("cast", 7, "float16"),
        ("out", 0, 8),
    )
    got = check_epilogue(a, b, prog, [res, col], [(0.5, dt.float32)], "float16", 1e-2)
    assert got.dtype == np.float16 and got.shape == (3, 40, 64)


def test_matmul_epilogue_in_lines_and_gathered_agree():
    # n a multiple of the line width: the bias is read in lines; a transposed residual is gathered
    rng = np.random.default_rng()
    a, b = rand(rng, (50, 30), "float32"), rand(rng, (30, 96), "float32")
    bias, res_t = rand(rng, (96,), "float32"), rand(rng, (96, 50), "float32")
    ta, tb, tbias, tres = ct(a), ct(b), ct(bias), ct(res_t)
    res_view = tres.with_layout((50, 96), (1, 50), 0)
    prog = (("acc",), ("in", 0), ("binary", "add", 0, 1), ("in", 1), ("binary", "add", 2, 3), ("out", 0, 4))
    got = read(run_matmul_epilogue(PBK, ta, tb, prog, [tbias, res_view]))
    mm = unfused_matmul(ta, tb)
    want = read(BK.add(BK.add(mm, tbias), res_view))
    np.testing.assert_array_equal(got, want)


def test_matmul_epilogue_errors():
    for size in (16, 32):  # the fallback (a tiny product) and the fused kernel
        x = ct(np.zeros((size, size), np.float32))
        with pytest.raises(cube.CubeSyntaxError, match="is cube.f16"):
            run_matmul_epilogue(PBK, x, x, (("acc",), ("out", 0, 0)), [], [], dt.float16)
    with pytest.raises(ValueError, match="does not broadcast"):
        run_matmul_epilogue(PBK, x, x, BIAS_RELU, [ct(np.zeros(5, np.float32))])


# --------------------------------------------------------------------------- reduction prologue

from ember.backends.cube.fusers.reduce import run_fused_reduce  # noqa: E402

_NP_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def check_reduce(prog, arrays, scalars, shape, op, acc, out=None, views=None, rtol=1e-5):
    ins = views if views is not None else [ct(a) for a in arrays]
    got = read(run_fused_reduce(PBK, prog, ins, scalars, shape, op, dt.as_dtype(acc), out and dt.as_dtype(out)))
    value = numpy_reference(prog, [np.broadcast_to(a, shape) for a in arrays], scalars, [0])[0]
    want = _NP_REDUCE[op](np.broadcast_to(value, shape).astype(np.float64), axis=-1)
    assert got.shape == tuple(shape[:-1]) and got.dtype == dt.as_dtype(out or acc).np
    libm = any(step[0] == "unary" and step[1] in LIBM for step in prog)
    if (op in ("max", "min") and not libm) or not dt.as_dtype(acc).is_floating_point:
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    elif op in ("max", "min"):
        np.testing.assert_allclose(got, want, rtol=8 * float(np.finfo(got.dtype).eps))
    else:
        scale = np.abs(np.broadcast_to(value, shape).astype(np.float64)).sum(axis=-1) + 1e-30
        np.testing.assert_array_less(np.abs(got.astype(np.float64) - want), rtol * scale + 1e-30)
    # the unfused path: the elementwise ops, then the backend's own reduction
    if views is None and op != "prod":
        val = unfused_reference(prog, [ct(np.ascontiguousarray(np.broadcast_to(a, shape))) for a in arrays], scalars)
        ref = read(getattr(BK, op)(ct(val[0]), (len(shape) - 1,), False))
        np.testing.assert_allclose(
            got.astype(np.float64),
            ref.astype(np.float64),
            rtol=max(rtol, 1e-6) * 10,
            atol=rtol * float(np.abs(ref.astype(np.float64)).max() + 1),
        )
    return got


DOT = (("in", 0), ("in", 1), ("binary", "mul", 0, 1), ("out", 0, 2))
SUM_EXP = (("in", 0), ("in", 1), ("binary", "sub", 0, 1), ("unary", "exp", 2), ("out", 0, 3))


@pytest.mark.parametrize("rows,k", [(5, 1000), (300, 64), (7, 3), (2, 70000), (33, 131)])
def test_reduce_dot_rows(rows, k):
    rng = np.random.default_rng()
    check_reduce(
        DOT, [rand(rng, (rows, k), "float32"), rand(rng, (rows, k), "float32")], [], (rows, k), "sum", "float32"
    )


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_reduce_ops_with_a_row_constant_input(op):
    rng = np.random.default_rng()
    rows, k = 40, 48
    x = rand(rng, (rows, k), "float64") / 4
    m = x.max(axis=1, keepdims=True)  # broadcast along K: read once per row
    check_reduce(SUM_EXP, [x, m], [], (rows, k), op, "float64", rtol=1e-12)


def test_reduce_half_values_accumulate_in_f32():
    rng = np.random.default_rng()
    rows, k = 6, 4096
    x = rand(rng, (rows, k), "float16")
    prog = (("in", 0), ("scalar", 0), ("binary", "mul", 0, 1), ("unary", "abs", 2), ("out", 0, 3))
    check_reduce(prog, [x], [(0.5, dt.float16)], (rows, k), "sum", "float32", "float16", rtol=1e-3)


def test_reduce_ints_and_bool_casts_exactly():
    rng = np.random.default_rng()
    rows, k = 20, 500
    x, y = rand(rng, (rows, k), "int32"), rand(rng, (rows, k), "int32")
    prog = (("in", 0), ("in", 1), ("binary", "gt", 0, 1), ("cast", 2, "int32"), ("binary", "mul", 0, 3), ("out", 0, 4))
    check_reduce(prog, [x, y], [], (rows, k), "sum", "int32")
    check_reduce(prog, [x, y], [], (rows, k), "max", "int32")


def test_reduce_strided_and_broadcast_views():
    rng = np.random.default_rng()
    b, r, k = 3, 5, 40
    xt = rand(rng, (b, k, r), "float32")  # read transposed: stride r along K
    bias = rand(rng, (k,), "float32")  # broadcast over (b, r)
    tx = ct(xt)
    views = [tx.with_layout((b, r, k), (k * r, 1, r), 0), ct(bias)]
    got = check_reduce(
        (("in", 0), ("in", 1), ("binary", "add", 0, 1), ("out", 0, 2)),
        [np.swapaxes(xt, 1, 2), bias],
        [],
        (b, r, k),
        "sum",
        "float32",
        views=views,
    )
    assert got.shape == (b, r)


def test_reduce_errors():
    x = ct(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="sum, prod, max or min"):
        run_fused_reduce(PBK, DOT, [x, x], [], (2, 3), "mean", dt.float32)
