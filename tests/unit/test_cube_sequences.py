"""``cube.Sequence`` parameters and comptime containers of runtime values, on the CPU runtime.

A sequence is a tuple of arrays (each its own buffer, dtype, line width and rank) or of
scalars (``(value, dtype)`` pairs); in the kernel it is a comptime tuple. Outputs are
poisoned before each launch so unwritten elements are caught; values are checked against
numpy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import Device, cube
from ember.cube.launch.args import _array_of

DEV = Device.cpu(fusion=False)
SENT = -12345


def dev_tensor(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(np.ascontiguousarray(a), dtype=ember.dtype.from_numpy_dtype(a.dtype), device=DEV)


def poison(shape: tuple[int, ...] | int, dtype: object = np.float32) -> ember.Tensor:
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" else (SENT if dtype.kind == "i" else 0)
    return dev_tensor(np.full(shape, fill, dtype))


def rand(rng: np.random.Generator, n: int | tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, n).astype(dtype)
    return (rng.standard_normal(n) * 4).astype(dtype)


def compiled_count() -> int:
    return len(cube.client(DEV).server.pipelines)


def view(t: ember.Tensor, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> object:
    """A strided view (stride 0 broadcasts) of ``t``'s buffer."""
    return _array_of(t, "t").with_layout(shape, strides, offset)


# --------------------------------------------------------------------------- arrays of mixed dtypes

S = cube.ElemVar("S")


@cube.kernel
def sum_as_f64(xs: cube.Sequence[cube.Array[S]], out: cube.Array[cube.f64], ss: cube.Sequence[cube.Scalar]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        acc = cube.f64(0)
        for x in xs:
            acc += cube.cast(x[i], cube.f64)
        for s in ss:
            acc += cube.cast(s, cube.f64)
        out[i] = acc


@pytest.mark.parametrize(
    "dtypes", [("float32",), ("float32", "int32", "bool", "float16"), ("float64", "int64", "uint8")]
)
def test_each_element_binds_its_own_dtype(dtypes):
    rng = np.random.default_rng(1)
    n = 301
    arrays = [rand(rng, n, d) for d in dtypes]
    out = poison(n, np.float64)
    before = compiled_count()
    sum_as_f64.launch(DEV, cube.CubeCount.covering(n, 64), 64, tuple(dev_tensor(a) for a in arrays), out, ())
    want = sum(a.astype(np.float64) for a in arrays)
    np.testing.assert_array_equal(out.numpy(), want)
    assert compiled_count() == before + 1


def test_scalars_of_several_types():
    rng = np.random.default_rng(2)
    n = 100
    a = rand(rng, n, "float32")
    scalars = (
        (2.5, ember.float32),
        (-7, ember.int32),
        (True, ember.dtype.bool_),
        (0.1, ember.float16),
        (1e-3, cube.f64),
        (200, cube.u8),
        (-(2**40), ember.int64),
    )
    out = poison(n, np.float64)
    sum_as_f64.launch(DEV, cube.CubeCount.covering(n, 64), 64, [dev_tensor(a)], out, scalars)
    want = a.astype(np.float64) + 2.5 - 7 + 1 + float(np.float16(0.1)) + 1e-3 + 200 - 2**40
    np.testing.assert_array_equal(out.numpy(), want)


def test_same_arity_and_dtypes_reuse_the_kernel_and_new_ones_compile():
    rng = np.random.default_rng(3)
    n = 64
    grid = (cube.CubeCount.covering(n, 32), 32)

    def run(dtypes, scalar_types):
        xs = tuple(dev_tensor(rand(rng, n, d)) for d in dtypes)
        ss = tuple((1, t) for t in scalar_types)
        out = poison(n, np.float64)
        sum_as_f64.launch(DEV, *grid, xs, out, ss)
        want = sum(x.numpy().astype(np.float64) for x in xs) + len(ss)
        np.testing.assert_array_equal(out.numpy(), want)

    run(("float32", "int32"), (ember.int32,))
    c0 = compiled_count()
    run(("float32", "int32"), (ember.int32,))  # same signature: no new kernel
    assert compiled_count() == c0
    run(("int32", "float32"), (ember.int32,))  # order of dtypes matters
    assert compiled_count() == c0 + 1
    run(("float32", "int32", "int32"), (ember.int32,))  # arity
    assert compiled_count() == c0 + 2
    run(("float32", "int32"), (ember.float32,))  # scalar dtype
    assert compiled_count() == c0 + 3
    run(("float32", "int32"), (ember.int32, ember.int32))  # scalar arity
    assert compiled_count() == c0 + 4


def test_kernel_id_names_every_element():
    a = np.zeros(4, np.float32)
    b = np.zeros((2, 2), np.int32)
    o = np.zeros(4, np.float64)
    kid = sum_as_f64.kernel_id(32, (a, b), o, ((1.0, cube.f32), (2, cube.i64)))
    text = kid.text()
    assert "xs: Sequence[xs[0]: Array<f32> { rank: 1 }; xs[1]: Array<i32> { rank: 2 }]" in text
    assert "ss: Sequence[ss[0]: f32; ss[1]: i64]" in text
    assert kid != sum_as_f64.kernel_id(32, (a,), o, ((1.0, cube.f32), (2, cube.i64)))


# --------------------------------------------------------------------------- metadata, strides, broadcast


@cube.kernel
def add_2d(xs: cube.Sequence[cube.Array[cube.Float]], out: cube.Array[cube.f32]):
    """out[r, c] = sum_k xs[k][r, c] (cast to f32); every operand through its own strides."""
    i = cube.ABSOLUTE_POS
    rows = out.shape(0)
    cols = out.shape(1)
    if i < rows * cols:
        r = i // cols
        c = i % cols
        acc = cube.f32(0)
        for k in range(len(xs)):
            assert xs[k].rank() == 2
            acc += cube.cast(xs[k][r, c], cube.f32)
        out[r, c] = acc


def test_broadcast_operands_through_stride_zero():
    rng = np.random.default_rng(4)
    rows, cols = 7, 9
    full = rand(rng, (rows, cols), "float32")
    row = rand(rng, cols, "float16")
    col = rand(rng, rows, "float64")
    t_full, t_row, t_col = dev_tensor(full), dev_tensor(row), dev_tensor(col)
    xs = (
        t_full,
        view(t_row, (rows, cols), (0, 1)),  # a row broadcast down
        view(t_col, (rows, cols), (1, 0)),  # a column broadcast across
        view(t_full, (rows, cols), (cols, 1)),
    )
    out = poison((rows, cols))
    add_2d.launch(DEV, cube.CubeCount.covering(rows * cols, 32), 32, xs, out)
    want = full.astype(np.float64) * 2 + row.astype(np.float64)[None, :] + col[:, None]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-5)


def test_transposed_element():
    rng = np.random.default_rng(5)
    n = 6
    a = rand(rng, (n, n), "float32")
    t = dev_tensor(a)
    out = poison((n, n))
    add_2d.launch(DEV, 2, 32, (t, view(t, (n, n), (1, n))), out)
    np.testing.assert_allclose(out.numpy(), a.astype(np.float64) + a.T, rtol=1e-6, atol=1e-6)


@cube.kernel
def metadata(xs: cube.Sequence[cube.Array[cube.T]], out: cube.Array[cube.i64]):
    if cube.ABSOLUTE_POS == 0:
        j = 0
        for x in xs:
            out[j] = cube.cast(x.len(), cube.i64)
            out[j + 1] = cube.cast(x.shape(x.rank() - 1), cube.i64)
            out[j + 2] = cube.cast(x.stride(0), cube.i64)
            j += 3


def test_metadata_per_element():
    a = dev_tensor(np.zeros((3, 5), np.float32))
    b = dev_tensor(np.zeros(11, np.int32))
    out = poison(9, np.int64)
    metadata.launch(DEV, 1, 1, (a, view(a, (5, 3), (1, 5)), b), out)
    np.testing.assert_array_equal(out.numpy(), [15, 5, 5, 15, 3, 1, 11, 11, 1])


# --------------------------------------------------------------------------- lines


@cube.kernel
def scale_lines(
    xs: cube.Sequence[cube.Array[cube.Line[cube.Float]]],
    outs: cube.Sequence[cube.Array[cube.Line[cube.Float]]],
    ss: cube.Sequence[cube.Scalar],
):
    i = cube.ABSOLUTE_POS
    for k in range(len(xs)):
        x = xs[k]
        o = outs[k]
        if i < o.len():
            o[i] = x[i] * cube.cast(ss[k], cube.elem_of(x))


def test_lines_per_element_width_and_dtype():
    rng = np.random.default_rng(6)
    n = 64
    a, b, c = rand(rng, n, "float32"), rand(rng, n, "float16"), rand(rng, n, "float64")
    ins = (cube.lines(dev_tensor(a), 4), cube.lines(dev_tensor(b), 8), cube.lines(dev_tensor(c), 2))
    outs = (poison(n, np.float32), poison(n, np.float16), poison(n, np.float64))
    out_lines = (cube.lines(outs[0], 4), cube.lines(outs[1], 8), cube.lines(outs[2], 2))
    ss = ((2.0, ember.float32), (0.5, ember.float16), (-3.0, ember.float64))
    scale_lines.launch(DEV, 1, 32, ins, out_lines, ss)
    np.testing.assert_array_equal(outs[0].numpy(), a * np.float32(2))
    np.testing.assert_array_equal(outs[1].numpy(), (b.astype(np.float32) * 0.5).astype(np.float16))
    np.testing.assert_array_equal(outs[2].numpy(), c * -3.0)
    kid = scale_lines.kernel_id(32, ins, out_lines, ss).text()
    assert "Line<f16, 8>" in kid and "Line<f32, 4>" in kid and "Line<f64, 2>" in kid


def test_in_place_element_is_seen_as_an_alias():
    rng = np.random.default_rng(7)
    n = 32
    a = rand(rng, n, "float32")
    t = dev_tensor(a)
    ins, outs = (cube.lines(t, 4),), (cube.lines(t, 4),)
    kid = scale_lines.kernel_id(32, ins, outs, ((3.0, ember.float32),))
    assert "inplace: Some(0)" in kid.text()
    other = scale_lines.kernel_id(32, ins, (cube.lines(poison(n), 4),), ((3.0, ember.float32),))
    assert kid != other
    scale_lines.launch(DEV, 1, 32, ins, outs, ((3.0, ember.float32),))
    np.testing.assert_array_equal(t.numpy(), a * np.float32(3))


# --------------------------------------------------------------------------- scalar sequences of a fixed type


@cube.kernel
def poly(x: cube.Array[cube.f64], out: cube.Array[cube.f64], coef: cube.Sequence[cube.f64]):
    """Horner: coef[0] + x*(coef[1] + x*(...))."""
    i = cube.ABSOLUTE_POS
    if i < out.len():
        acc = cube.f64(0)
        for k in range(len(coef) - 1, -1, -1):
            acc = acc * x[i] + coef[k]
        out[i] = acc


def test_fixed_type_scalar_sequence_takes_plain_values():
    rng = np.random.default_rng(8)
    n = 50
    a = rand(rng, n, "float64")
    out = poison(n, np.float64)
    poly.launch(DEV, 1, 64, dev_tensor(a), out, (1.0, -2, 0.5))
    np.testing.assert_allclose(out.numpy(), 1.0 - 2 * a + 0.5 * a * a, rtol=1e-12)
    out = poison(n, np.float64)
    poly.launch(DEV, 1, 64, dev_tensor(a), out, ())  # empty: the constant 0
    np.testing.assert_array_equal(out.numpy(), np.zeros(n))


# --------------------------------------------------------------------------- comptime programs into registers


@cube.kernel
def interpret(ins: cube.Sequence[cube.Array[cube.T]], out: cube.Array[cube.f32], prog: cube.Comptime[tuple]):
    """A tiny register machine: each instruction appends one register (all f32)."""
    i = cube.ABSOLUTE_POS
    if i < out.len():
        regs = []
        for ins_ in prog:
            op = ins_[0]
            if op == "in":
                regs.append(cube.cast(ins[ins_[1]][i], cube.f32))
            elif op == "const":
                regs.append(cube.f32(ins_[1]))
            elif op == "add":
                regs.append(regs[ins_[1]] + regs[ins_[2]])
            elif op == "mul":
                regs.append(regs[ins_[1]] * regs[ins_[2]])
            elif op == "exp":
                regs.append(cube.exp(regs[ins_[1]]))
            elif op == "set":  # overwrite a register in place
                regs[ins_[1]] = regs[ins_[2]]
        acc = {}
        acc["last"] = regs[len(regs) - 1]
        acc["last"] += cube.f32(0)
        out[i] = acc["last"]


def test_comptime_list_of_registers():
    rng = np.random.default_rng(9)
    n = 40
    a, b = rand(rng, n, "float32") / 8, rand(rng, n, "int32")
    prog = (
        ("in", 0),
        ("in", 1),
        ("const", 0.5),
        ("mul", 0, 2),
        ("exp", 3),
        ("add", 4, 1),
        ("set", 0, 5),
        ("add", 0, 0),
    )
    out = poison(n)
    interpret.launch(DEV, 1, 64, (dev_tensor(a), dev_tensor(b)), out, prog)
    r = np.exp(a * np.float32(0.5)) + b.astype(np.float32)
    np.testing.assert_allclose(out.numpy(), r + r, rtol=1e-6)


def test_runtime_values_in_tuples_and_list_literals():
    @cube.kernel
    def k(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
        i = cube.ABSOLUTE_POS
        if i < out.len():
            v = x[i]
            pair = (v, v * 2.0)
            lst = [pair[1], v + 1.0]
            lst.extend([v])
            a, b, c = lst
            out[i] = a + b + c + pair[0]

    rng = np.random.default_rng(10)
    a = rand(rng, 33, "float32")
    out = poison(33)
    k.launch(DEV, 1, 64, dev_tensor(a), out)
    np.testing.assert_allclose(out.numpy(), a * 2 + (a + 1) + a + a, rtol=1e-6)


# --------------------------------------------------------------------------- errors


def _expect_error(kernel, *args, match):
    with pytest.raises(cube.CubeSyntaxError, match=match):
        kernel.ir(32, *args)


def test_runtime_index_into_a_sequence_is_refused():
    @cube.kernel
    def k(xs: cube.Sequence[cube.Array[cube.f32]], out: cube.Array[cube.f32], j: cube.u32):
        out[0] = xs[j][0]

    a = np.zeros(4, np.float32)
    with pytest.raises(cube.CubeSyntaxError, match="runtime index") as e:
        k.ir(32, (a, a), a.copy(), 1)
    assert "unrolled loop" in str(e.value)


def test_runtime_index_into_a_list_of_registers_is_refused():
    @cube.kernel
    def k(x: cube.Array[cube.f32], j: cube.u32):
        vals = [x[0], x[1]]
        x[2] = vals[j]

    with pytest.raises(cube.CubeSyntaxError, match="runtime index") as e:
        k.ir(32, np.zeros(4, np.float32), 1)
    assert "LocalArray" in str(e.value)

    @cube.kernel
    def k2(x: cube.Array[cube.f32], j: cube.u32):
        vals = [x[0], x[1]]
        vals[j] = x[2]

    with pytest.raises(cube.CubeSyntaxError, match="runtime index"):
        k2.ir(32, np.zeros(4, np.float32), 1)


def test_appending_under_a_runtime_condition_is_refused():
    @cube.kernel
    def k(x: cube.Array[cube.f32]):
        vals = [x[0]]
        if x[1] > 0.0:
            vals.append(x[1])
        x[2] = vals[0]

    with pytest.raises(cube.CubeSyntaxError, match="runtime if/loop it was not created in"):
        k.ir(32, np.zeros(4, np.float32))

    @cube.kernel
    def k2(x: cube.Array[cube.f32]):
        vals = [x[0]]
        for j in cube.range(x.len(), unroll=False):
            vals.extend([x[j]])
        x[2] = vals[0]

    with pytest.raises(cube.CubeSyntaxError, match="runtime if/loop it was not created in"):
        k2.ir(32, np.zeros(4, np.float32))


@cube.kernel
def running(x: cube.Array[cube.f32], out: cube.Array[cube.f32], n: cube.Comptime[int]):
    """Registers in a comptime list carried through a runtime loop and set under a runtime if:
    acc[k] = sum of x[j] with j % n == k; top[0] = max."""
    if cube.ABSOLUTE_POS == 0:
        acc = []
        for _ in range(n):
            acc.append(cube.f32(0))
        top = [x[0], 0]
        for j in cube.range(x.len(), unroll=False):
            for kk in range(n):  # a name not bound before the runtime loop: stays comptime
                if j % n == kk:
                    acc[kk] += x[j]
            if x[j] > top[0]:
                top[0] = x[j]
                top[1] = j
        for k in range(n):
            out[k] = acc[k]
        out[n] = top[0]
        out[n + 1] = cube.cast(top[1], cube.f32)


def test_lists_of_registers_through_runtime_loops_and_ifs():
    rng = np.random.default_rng(11)
    a = rand(rng, 50, "float32")
    out = poison(5)
    running.launch(DEV, 1, 1, dev_tensor(a), out, 3)
    want = [a[k::3].astype(np.float64).sum() for k in range(3)] + [a.max(), float(np.argmax(a))]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)


def test_a_list_built_inside_a_runtime_if_does_not_escape_it():
    @cube.kernel
    def k(x: cube.Array[cube.f32]):
        if x[1] > 0.0:
            vals = [x[0] + 1.0]
        x[2] = vals[0]

    with pytest.raises(cube.CubeSyntaxError, match="inside a branch of a runtime if"):
        k.ir(32, np.zeros(4, np.float32))


def test_launch_argument_errors():
    a = dev_tensor(np.zeros(8, np.float32))
    out = poison(8, np.float64)
    with pytest.raises(TypeError, match="pass a tuple or list"):
        sum_as_f64.launch(DEV, 1, 32, a, out, ())
    with pytest.raises(TypeError, match=r"\(value, dtype\) pairs"):
        sum_as_f64.launch(DEV, 1, 32, (a,), out, (1.0,))
    with pytest.raises(TypeError, match="not an ember dtype"):
        sum_as_f64.launch(DEV, 1, 32, (a,), out, ((1.0, "float32"),))
    with pytest.raises(ember.errors.DTypeError, match=r"xs\[0\]"):
        add_2d.launch(DEV, 1, 32, (dev_tensor(np.zeros((2, 4), np.int32)),), poison((2, 4)))
    with pytest.raises(ember.errors.DTypeError, match=r"coef\[1\]"):
        poly.launch(DEV, 1, 32, dev_tensor(np.zeros(8)), poison(8, np.float64), (1.0, (2, ember.float32)))


def test_sequence_annotation_errors():
    with pytest.raises(TypeError, match="cube.Sequence takes"):
        cube.Sequence[3]
