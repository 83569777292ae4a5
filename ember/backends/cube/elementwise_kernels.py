"""The elementwise kernel family of the Cube backend: one unary, one binary and one ternary
kernel, each in a *lines* form (every operand contiguous and aligned: one unit per line of
N elements, SIMD on the CPU) and a *strided* form (one unit per output element, operands
indexed through their strides, so expanded views with stride 0 broadcast for free).

The op is a comptime string: ``unary_expr`` / ``binary_expr`` / ``ternary_expr`` pick the
expression at expansion time, so each (op, dtypes, width, rank) compiles to straight-line
code with no runtime dispatch. Everything is generic over the element type (``ElemVar``s
bound at launch), so the CUDA and wgpu runtimes reuse these kernels unchanged.

Conventions the Python side (``elementwise.py``) relies on:

* ``A`` is the element type of the data operands and of the scalar arguments ``s0``/``s1``;
  ``B`` is the output's (``A`` itself, or ``bool_`` for predicates and comparisons);
  ``C`` is the condition's (``bool_``) in the ternary kernels.
* Half types (f16/bf16) load as f32 (the targets' register type for them), so every
  expression computes in f32 and rounds once at the store -- as flex (numpy / ml_dtypes)
  computes a half op in f32 and rounds its result.
* ``out`` is a fresh contiguous buffer, or an input's own buffer when the backend decided
  in-place is safe: each unit reads its element(s) before writing the same position, so the
  aliasing is harmless; the launch records it in the KernelId (``inplace: Some(k)``).
* Ops whose expression needs a runtime loop (integer ``pow``) are launched with width 1, as is
  ``sign`` of uint8 (GCC 12's SLP vectoriser, at -O3, turns its per-lane loop over u8 lines
  into 0xFF lanes: a GCC bug, reproduced outside ember).
* Bools: the language refuses arithmetic and ordering on bools, and bool lines have no
  vector ``&&``/``||`` in C, so bool operands go through ``u8`` (0/1) where needed.
"""

from __future__ import annotations

from ... import cube
from ...cube import ABSOLUTE_POS, Array, Comptime, ElemVar, Line, Tensor, elem_of, function, kernel, u8, u32

A = ElemVar("A")
B = ElemVar("B")
C = ElemVar("C")

#: ops computed by ``unary_expr`` (the catalog's unary ops and predicates, plus clamp forms)
UNARY_EXPRS = (
    "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sigmoid", "relu", "erf", "floor", "ceil", "round", "trunc", "reciprocal",
    "logical_not", "isnan", "isinf", "isfinite", "clamp", "clamp_lo", "clamp_hi",
)
#: ops computed by ``binary_expr``
BINARY_EXPRS = (
    "add", "sub", "mul", "div", "floor_div", "remainder", "pow", "maximum", "minimum", "atan2",
    "logaddexp", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
)


# ----------------------------------------------------------------------------- expressions
@function
def _truth(x):
    """x != 0 as 0/1 in u8 (lines of u8 have vector & | ^; lines of bool do not)."""
    if elem_of(x).kind == "bool":
        return cube.cast(x, u8)
    return cube.cast(x != 0, u8)


@function
def _floor_div_float(a, b):
    """numpy's float floor division (npy_divmod): the quotient of a - mod(a, b), snapped to the
    nearest integer; signed zero as a / b; a / b itself when b == 0 (inf or nan)."""
    m = a % b  # Python-signed remainder (the sign of b), as numpy's
    d = (a - m) / b
    f = cube.floor(d)
    f = cube.select(d - f > 0.5, f + 1.0, f)
    q = a / b
    f = cube.select(d == 0.0, cube.copysign(0.0 * d, q), f)
    return cube.select(b == 0.0, q, f)


@function
def _int_pow(a, b):
    """a ** b in a's integer type with wrap-around (numpy), by squaring. A negative exponent
    (numpy raises) gives PyTorch's answer: 1 for a == 1, +-1 for a == -1, else 0."""
    r = A(1)
    base = a
    e = b
    while e > 0:
        if (e & 1) == 1:
            r = r * base
        base = base * base
        e = e >> 1
    if elem_of(a).kind == "int":
        if b < 0:
            odd = (b & 1) == 1
            r = cube.select(a == 1, A(1), cube.select(a == -1, cube.select(odd, A(-1), A(1)), A(0)))
    return r


@function
def unary_expr(x, s0, s1, op: Comptime[str]):
    """op(x); ``s0``/``s1`` are the clamp bounds (unused otherwise)."""
    k = elem_of(x).kind
    if op == "neg":
        return -x
    if op == "abs":
        if k == "bool" or k == "uint":
            return x
        return cube.abs(x)
    if op == "sign":
        if k == "bool":
            return x
        if k == "float":  # PyTorch: (x > 0) - (x < 0), so sign(nan) = sign(-0.0) = 0
            e = elem_of(x)
            return cube.select(x > 0.0, e(1), cube.select(x < 0.0, e(-1), e(0)))
        return cube.sign(x)
    if op == "relu":
        if k == "bool" or k == "uint":
            return x
        return cube.max(x, 0)  # NaN-propagating for floats (relu(nan) = nan, as numpy's maximum)
    if op == "floor" or op == "ceil" or op == "round" or op == "trunc":
        if k != "float":
            return x  # integers are their own floor/ceil/round/trunc
        if op == "floor":
            return cube.floor(x)
        if op == "ceil":
            return cube.ceil(x)
        if op == "round":
            return cube.round(x)  # half to even (C rint), as numpy's rint
        return cube.trunc(x)
    if op == "logical_not":
        return _truth(x) == 0
    if op == "isnan":
        if k == "float":
            return cube.isnan(x)
        return _truth(x) == 2  # integers are never nan (a false of the right width)
    if op == "isinf":
        if k == "float":
            return cube.isinf(x)
        return _truth(x) == 2
    if op == "isfinite":
        if k == "float":
            return cube.isfinite(x)
        return _truth(x) != 2
    if op == "clamp":
        return cube.min(cube.max(x, s0), s1)
    if op == "clamp_lo":
        return cube.max(x, s0)
    if op == "clamp_hi":
        return cube.min(x, s1)
    # float-only ops (the Tensor API lifts integers to float first)
    if op == "exp":
        return cube.exp(x)
    if op == "log":
        return cube.log(x)
    if op == "log1p":
        return cube.log1p(x)
    if op == "expm1":
        return cube.expm1(x)
    if op == "sqrt":
        return cube.sqrt(x)
    if op == "rsqrt":
        return cube.rsqrt(x)
    if op == "sin":
        return cube.sin(x)
    if op == "cos":
        return cube.cos(x)
    if op == "tan":
        return cube.tan(x)
    if op == "tanh":
        return cube.tanh(x)
    if op == "erf":
        return cube.erf(x)
    if op == "reciprocal":
        return 1.0 / x
    if op == "sigmoid":
        # stable for large |x|: exp of a non-positive argument never overflows, and the
        # negative side keeps relative accuracy (e / (1 + e) instead of 1 - 1 / (1 + e))
        e = cube.exp(-cube.abs(x))
        r = 1.0 / (1.0 + e)
        return cube.select(x >= 0.0, r, e * r)
    assert False, f"unknown unary elementwise op {op!r}"  # noqa: B011 - a comptime assert (expansion error), not a runtime check


@function
def binary_expr(a, b, op: Comptime[str]):
    """op(a, b) for operands of one element type (either may be a scalar)."""
    k = elem_of(a).kind
    if k == "bool":
        # bool arithmetic is logic (numpy): + and maximum are or, * and minimum are and
        if op == "add" or op == "maximum" or op == "logical_or":
            return (_truth(a) | _truth(b)) != 0
        if op == "mul" or op == "minimum" or op == "logical_and":
            return (_truth(a) & _truth(b)) != 0
        if op == "logical_xor" or op == "ne":
            return _truth(a) != _truth(b)
        if op == "eq":
            return _truth(a) == _truth(b)
        if op == "lt":
            return _truth(a) < _truth(b)
        if op == "le":
            return _truth(a) <= _truth(b)
        if op == "gt":
            return _truth(a) > _truth(b)
        if op == "ge":
            return _truth(a) >= _truth(b)
        assert False, f"elementwise op {op!r} is not defined for bools"  # noqa: B011 - a comptime assert (expansion error), not a runtime check
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if op == "floor_div":
        if k == "float":
            return _floor_div_float(a, b)
        return a // b  # Python signs; x // 0 == 0 (numpy)
    if op == "remainder":
        return a % b  # Python signs (the divisor's); x % 0 == 0 for ints, nan for floats
    if op == "pow":
        if k == "float":
            return cube.pow(a, b)
        return _int_pow(a, b)
    if op == "maximum":
        return cube.max(a, b)  # NaN-propagating for floats
    if op == "minimum":
        return cube.min(a, b)
    if op == "atan2":
        return cube.atan2(a, b)
    if op == "logaddexp":  # float only: max + log1p(exp(-|a - b|)); equal infinities stay themselves
        return cube.select(cube.isinf(a) & (a == b), a, cube.max(a, b) + cube.log1p(cube.exp(-cube.abs(a - b))))
    if op == "hypot":  # float only: scaled by the larger magnitude, so no square overflows
        big = cube.max(cube.abs(a), cube.abs(b))
        q = cube.min(cube.abs(a), cube.abs(b)) / big
        return cube.select(big == 0, big, cube.select(cube.isinf(big), big, big * cube.sqrt(q * q + 1)))
    if op == "bitwise_and":  # integers only (the Tensor API sends bools to the logical ops)
        return a & b
    if op == "bitwise_or":
        return a | b
    if op == "bitwise_xor":
        return a ^ b
    if op == "eq":
        return a == b
    if op == "ne":
        return a != b
    if op == "lt":
        return a < b
    if op == "le":
        return a <= b
    if op == "gt":
        return a > b
    if op == "ge":
        return a >= b
    if op == "logical_and":
        return (_truth(a) & _truth(b)) != 0
    if op == "logical_or":
        return (_truth(a) | _truth(b)) != 0
    if op == "logical_xor":
        return _truth(a) != _truth(b)
    assert False, f"unknown binary elementwise op {op!r}"  # noqa: B011 - a comptime assert (expansion error), not a runtime check


@function
def scalar_expr(x, s0, s1, op: Comptime[str]):
    """A unary-family op: ``unary_expr`` ops, ``s:<binary op>`` = op(x, s0) and
    ``r:<binary op>`` = op(s0, x)."""
    if op[:2] == "s:":
        return binary_expr(x, s0, op[2:])
    if op[:2] == "r:":
        return binary_expr(s0, x, op[2:])
    return unary_expr(x, s0, s1, op)


@function
def ternary_expr(c, a, b, s0, op: Comptime[str]):
    if op == "where":
        return cube.select(c, a, b)
    if op == "masked_fill":
        return cube.select(c, s0, a)
    assert False, f"unknown ternary elementwise op {op!r}"  # noqa: B011 - a comptime assert (expansion error), not a runtime check


@function
def strided_offset(t, i):
    """The element offset in view ``t`` of the i-th element in row-major order of ``shape``
    (the output's, which every operand has been expanded to). Rank is comptime: unrolled."""
    rem = i
    off = u32(0)
    for d in range(t.rank() - 1, -1, -1):
        n = t.shape(d)
        off += (rem % n) * t.stride(d)
        rem = rem // n
    return off


# ----------------------------------------------------------------------------- kernels
@kernel
def unary_lines(x: Array[Line[A]], out: Array[Line[B]], s0: A, s1: A, op: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = scalar_expr(x[i], s0, s1, op)


@kernel
def unary_strided(x: Tensor[A], out: Array[B], s0: A, s1: A, op: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = scalar_expr(x[strided_offset(x, i)], s0, s1, op)


@kernel
def binary_lines(a: Array[Line[A]], b: Array[Line[A]], out: Array[Line[B]], op: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = binary_expr(a[i], b[i], op)


@kernel
def binary_strided(a: Tensor[A], b: Tensor[A], out: Array[B], op: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = binary_expr(a[strided_offset(a, i)], b[strided_offset(b, i)], op)


@kernel
def ternary_lines(
    c: Array[Line[C]], a: Array[Line[A]], b: Array[Line[A]], out: Array[Line[A]], s0: A, op: Comptime[str]
):
    i = ABSOLUTE_POS
    if i < out.len():
        if op == "masked_fill":
            out[i] = ternary_expr(c[i], a[i], a[i], s0, op)
        else:
            out[i] = ternary_expr(c[i], a[i], b[i], s0, op)


@kernel
def ternary_strided(c: Tensor[C], a: Tensor[A], b: Tensor[A], out: Array[A], s0: A, op: Comptime[str]):
    i = ABSOLUTE_POS
    if i < out.len():
        va = a[strided_offset(a, i)]
        if op == "masked_fill":
            out[i] = ternary_expr(c[strided_offset(c, i)], va, va, s0, op)
        else:
            out[i] = ternary_expr(c[strided_offset(c, i)], va, b[strided_offset(b, i)], s0, op)


# Rows forms: strided operands whose innermost dim is contiguous (stride 1) in every operand,
# read in lines of ``w`` along it (a bias row broadcast over a matrix, a slice of whole rows).
# Line i covers elements i*w .. i*w+w-1 of the output's row-major order; ``strided_offset``
# of its first element is a multiple of ``w`` (the backend checks every stride but the last
# and every offset are), so dividing by ``w`` gives the operand's line index. One div/mod
# per dim per line, not per element.
@kernel
def unary_rows(x: Tensor[Line[A]], out: Array[Line[B]], s0: A, s1: A, op: Comptime[str], w: Comptime[int]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = scalar_expr(x[strided_offset(x, i * w) // w], s0, s1, op)


@kernel
def binary_rows(a: Tensor[Line[A]], b: Tensor[Line[A]], out: Array[Line[B]], op: Comptime[str], w: Comptime[int]):
    i = ABSOLUTE_POS
    if i < out.len():
        e = i * w
        out[i] = binary_expr(a[strided_offset(a, e) // w], b[strided_offset(b, e) // w], op)


@kernel
def ternary_rows(
    c: Tensor[Line[C]], a: Tensor[Line[A]], b: Tensor[Line[A]], out: Array[Line[A]], s0: A,
    op: Comptime[str], w: Comptime[int],
):
    i = ABSOLUTE_POS
    if i < out.len():
        e = i * w
        va = a[strided_offset(a, e) // w]
        if op == "masked_fill":
            out[i] = ternary_expr(c[strided_offset(c, e) // w], va, va, s0, op)
        else:
            out[i] = ternary_expr(c[strided_offset(c, e) // w], va, b[strided_offset(b, e) // w], s0, op)
