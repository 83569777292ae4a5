"""The @cube kernel language on the CPU runtime: every construct runs and matches numpy.

Outputs are poisoned (NaN or a sentinel) before each launch, so an element a kernel fails to
write is caught.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import Device, cube
from ember.cube import ir

DEV = Device.cpu(fusion=False)  # the cube backend itself: tests read its tensors' layout
SENT = -12345


def dev_tensor(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(np.ascontiguousarray(a), dtype=ember.dtype.from_numpy_dtype(a.dtype), device=DEV)


def poison(shape: tuple[int, ...] | int, dtype: object = np.float32) -> ember.Tensor:
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" else (SENT if dtype.kind == "i" else 0)
    return dev_tensor(np.full(shape, fill, dtype))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- the issue's example


def test_axpy_example_exactly_as_in_the_issue():
    @cube.kernel
    def axpy(x: cube.Array[cube.f32], y: cube.Array[cube.f32], a: cube.f32):
        i = cube.ABSOLUTE_POS
        if i < y.len():
            y[i] = a * x[i] + y[i]

    dev = Device.cpu()
    x = ember.rand(1000, device=dev)
    y = ember.rand(1000, device=dev)
    y0 = y.numpy().copy()
    axpy.launch(dev, cube.CubeCount(8), cube.CubeDim(128), x, y, 2.0)
    assert abs(y.numpy() - (2.0 * x.numpy() + y0)).max() < 1e-6
    assert ember.backend_name(dev) == "dispatch<fusion<cube<cpu>>>"


# --------------------------------------------------------------------------- arithmetic and types


@cube.kernel
def binops(
    a: cube.Array[cube.Numeric],
    b: cube.Array[cube.Numeric],
    out: cube.Array[cube.Numeric],
    op: cube.Comptime[str],
):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        x = a[i]
        y = b[i]
        if op == "add":
            out[i] = x + y
        elif op == "sub":
            out[i] = x - y
        elif op == "mul":
            out[i] = x * y
        elif op == "floordiv":
            out[i] = x // y
        elif op == "mod":
            out[i] = x % y
        elif op == "min":
            out[i] = min(x, y)
        elif op == "max":
            out[i] = cube.max(x, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "mod", "min", "max"])
def test_binary_ops_match_numpy(dtype, op):
    r = rng(1)
    n = 300
    if np.dtype(dtype).kind == "f":
        a = (r.standard_normal(n) * 10).astype(dtype)
        b = (r.standard_normal(n) * 3).astype(dtype)
        b[b == 0] = 1
    else:
        a = r.integers(-50, 50, n).astype(dtype)
        b = r.integers(-7, 7, n).astype(dtype)
        b[b == 0] = 3
    out = poison(n, dtype)
    binops.launch(
        DEV, cube.CubeCount.covering(n, 64), cube.CubeDim(64), dev_tensor(a), dev_tensor(b), out, op
    )
    ref = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "floordiv": np.floor_divide,
        "mod": np.remainder,
        "min": np.minimum,
        "max": np.maximum,
    }[op](a, b)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


@cube.kernel
def unary_math(x: cube.Array[cube.Float], out: cube.Array[cube.Float], fn: cube.Comptime[str]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        if fn == "neg":
            out[i] = -v
        elif fn == "abs":
            out[i] = abs(v)
        elif fn == "math_exp":
            out[i] = math.exp(v)
        elif fn == "pow2":
            out[i] = v**2
        elif fn == "powf":
            out[i] = cube.pow(cube.abs(v), 0.5)
        else:
            out[i] = getattr(cube, fn)(v)


@pytest.mark.parametrize(
    "fn",
    [
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tanh",
        "erf",
        "floor",
        "ceil",
        "round",
        "trunc",
        "sigmoid",
        "recip",
        "log1p",
        "expm1",
        "neg",
        "abs",
        "math_exp",
        "pow2",
        "powf",
        "sign",
    ],
)
def test_math_functions(fn):
    r = rng(2)
    x = (r.standard_normal(257) * 2).astype(np.float32)
    if fn in ("log", "sqrt", "rsqrt", "log1p"):
        x = np.abs(x) + 0.1
    if fn in ("round", "floor", "ceil", "trunc"):
        x[:4] = [0.5, 1.5, 2.5, -2.5]  # round half to even, as numpy
    out = poison(x.shape)
    unary_math.launch(DEV, cube.CubeCount(5), cube.CubeDim(64), dev_tensor(x), out, fn)
    erf = np.vectorize(math.erf)
    ref = {
        "exp": np.exp,
        "log": np.log,
        "sqrt": np.sqrt,
        "rsqrt": lambda v: 1 / np.sqrt(v),
        "sin": np.sin,
        "cos": np.cos,
        "tanh": np.tanh,
        "erf": lambda v: erf(v.astype(np.float64)),
        "floor": np.floor,
        "ceil": np.ceil,
        "round": np.round,
        "trunc": np.trunc,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "recip": lambda v: 1 / v,
        "log1p": np.log1p,
        "expm1": np.expm1,
        "neg": np.negative,
        "abs": np.abs,
        "math_exp": np.exp,
        "pow2": np.square,
        "powf": lambda v: np.abs(v) ** 0.5,
        "sign": np.sign,
    }[fn](x)
    np.testing.assert_allclose(out.numpy(), ref, rtol=2e-6, atol=1e-6)


@cube.kernel
def casts(
    x: cube.Array[cube.f32],
    i: cube.Array[cube.i32],
    b: cube.Array[cube.bool_],
    f: cube.Array[cube.f64],
    h: cube.Array[cube.f16],
):
    k = cube.ABSOLUTE_POS
    if k < x.len():
        v = x[k]
        i[k] = cube.cast(v, cube.i32)
        b[k] = v > 0.5
        f[k] = cube.f64(v) * 2.0
        h[k] = cube.cast(v, cube.f16)


def test_casts_and_bool_and_half_storage():
    x = (rng(3).standard_normal(100) * 10).astype(np.float32)
    i, b, f, h = (
        poison(100, np.int32),
        dev_tensor(np.zeros(100, bool)),
        poison(100, np.float64),
        dev_tensor(np.full(100, np.nan, np.float16)),
    )
    casts.launch(DEV, 1, 128, dev_tensor(x), i, b, f, h)
    np.testing.assert_array_equal(i.numpy(), x.astype(np.int32))
    np.testing.assert_array_equal(b.numpy(), x > 0.5)
    np.testing.assert_array_equal(f.numpy(), x.astype(np.float64) * 2.0)
    np.testing.assert_array_equal(h.numpy(), x.astype(np.float16))


@cube.kernel
def compare_select(x: cube.Array[cube.f32], out: cube.Array[cube.f32], lo: cube.f32):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        big = v > lo and v < 2.0
        out[i] = cube.select(big, v, -1.0) + (10.0 if 0.0 <= v < 0.25 else 0.0)


def test_comparisons_chains_select_and_conditional_expressions():
    x = np.linspace(-3, 3, 200, dtype=np.float32)
    out = poison(200)
    compare_select.launch(DEV, 4, 64, dev_tensor(x), out, 0.5)
    ref = np.where((x > 0.5) & (x < 2.0), x, -1.0) + np.where((x >= 0) & (x < 0.25), 10.0, 0.0)
    np.testing.assert_allclose(out.numpy(), ref.astype(np.float32))


@cube.kernel
def int_bits(x: cube.Array[cube.u32], out: cube.Array[cube.u32]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        out[i] = ((v << 3) ^ (v >> 2)) & 0xFFFF | ~v & 7


def test_bitwise_on_unsigned():
    x = rng(4).integers(0, 2**32 - 1, 100, dtype=np.uint64).astype(np.uint32)
    # uint32 buffers are not an ember dtype: launch through int32 views of the same bits
    out = poison(100, np.int32)

    @cube.kernel
    def via_i32(a: cube.Array[cube.i32], o: cube.Array[cube.i32]):
        i = cube.ABSOLUTE_POS
        if i < o.len():
            v = cube.bitcast(a[i], cube.u32)
            r = ((v << 3) ^ (v >> 2)) & 0xFFFF | ~v & 7
            o[i] = cube.bitcast(r, cube.i32)

    via_i32.launch(DEV, 1, 128, dev_tensor(x.view(np.int32)), out)
    v = x.astype(np.uint64)
    ref = (((v << 3) & 0xFFFFFFFF) ^ (v >> 2)) & 0xFFFF | (~v & 0xFFFFFFFF) & 7
    np.testing.assert_array_equal(out.numpy().view(np.uint32), ref.astype(np.uint32))


# --------------------------------------------------------------------------- control flow


@cube.kernel
def control(x: cube.Array[cube.i32], out: cube.Array[cube.i32], n: cube.u32):
    i = cube.ABSOLUTE_POS
    if i >= out.len():
        return
    v = x[i]
    acc = 0
    # runtime loop with continue / break
    for k in range(n):
        if k % 2 == 1:
            continue
        if acc > 40:
            break
        acc += v + cube.cast(k, cube.i32)
    # while loop with a loop-carried value
    m = v
    steps = 0
    while m > 1:
        m = m // 2
        steps += 1
    if v < 0:
        out[i] = -1
    elif v == 0:
        out[i] = 0
    else:
        out[i] = acc * 100 + steps


def test_if_elif_else_for_while_break_continue_return():
    x = np.arange(-3, 40, dtype=np.int32)
    out = poison(x.size, np.int32)  # 64 units: those past len() return early
    control.launch(DEV, 1, 64, dev_tensor(x), out, 9)
    ref = []
    for v in x:
        acc = 0
        for k in range(9):
            if k % 2 == 1:
                continue
            if acc > 40:
                break
            acc += v + k
        m, steps = v, 0
        while m > 1:
            m //= 2
            steps += 1
        ref.append(-1 if v < 0 else 0 if v == 0 else acc * 100 + steps)
    np.testing.assert_array_equal(out.numpy(), ref)


@cube.kernel
def unrolled(
    x: cube.Array[cube.f32], out: cube.Array[cube.f32], k: cube.Comptime[int], coeffs: cube.Comptime[tuple]
):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        acc = 0.0
        for j in range(k):  # comptime bound: unrolled
            acc += x[i] * (j + 1)
        for c in coeffs:  # comptime tuple: unrolled
            if c == 0:
                continue
            acc = acc * c
        out[i] = acc


def test_comptime_loops_unroll():
    ir_ = unrolled.ir(64, np.zeros(4, np.float32), np.zeros(4, np.float32), 4, (2.0, 0, 3.0))
    assert not any(isinstance(s, (ir.RangeLoop, ir.Loop)) for s in ir.walk(ir_.body))
    x = np.arange(10, dtype=np.float32)
    out = poison(10)
    unrolled.launch(DEV, 1, 64, dev_tensor(x), out, 4, (2.0, 0, 3.0))
    np.testing.assert_allclose(out.numpy(), x * 10 * 6)
    kid1 = unrolled.kernel_id(64, x, x, 4, (2.0, 0, 3.0))
    kid2 = unrolled.kernel_id(64, x, x, 5, (2.0, 0, 3.0))
    assert kid1.entry() != kid2.entry()


@cube.function
def clamp01(v):
    if v < 0.0:
        return 0.0 * v
    if v > 1.0:
        return 1.0 + 0.0 * v
    return v


@cube.function
def scale_add(a, b, s: cube.Comptime[float] = 2.0):
    return a * s + b, a - b


@cube.kernel
def uses_functions(x: cube.Array[cube.f32], out: cube.Array[cube.f32], out2: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        s, d = scale_add(x[i], 1.0)
        out[i] = clamp01(s)
        out2[i] = d


def test_cube_functions_inline_with_early_returns_and_tuples():
    x = np.linspace(-2, 2, 50, dtype=np.float32)
    out, out2 = poison(50), poison(50)
    uses_functions.launch(DEV, 1, 64, dev_tensor(x), out, out2)
    np.testing.assert_allclose(out.numpy(), np.clip(x * 2 + 1, 0, 1))
    np.testing.assert_allclose(out2.numpy(), x - 1)


# --------------------------------------------------------------------------- metadata, positions


@cube.kernel
def meta(t: cube.Tensor[cube.f32], out: cube.Array[cube.i32]):
    if cube.ABSOLUTE_POS == 0:
        out[0] = cube.cast(t.len(), cube.i32)
        out[1] = t.rank()
        for d in range(t.rank()):
            out[2 + d] = cube.cast(t.shape(d), cube.i32)
            out[5 + d] = cube.cast(t.stride(d), cube.i32)
        out[8] = cube.cast(t[1, 2, 0], cube.i32)  # multi-dimensional index through strides


def test_array_metadata_and_strided_views():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = dev_tensor(a).permute(2, 1, 0) if hasattr(ember.Tensor, "permute") else dev_tensor(a)
    out = poison(9, np.int32)
    meta.launch(DEV, 1, 32, t, out)
    p = t._p
    got = out.numpy()
    assert got[0] == 24 and got[1] == 3
    assert tuple(got[2:5]) == p.shape and tuple(got[5:8]) == p.strides
    assert got[8] == np.asarray(t.numpy())[1, 2, 0]


def test_position_builtins_in_3d():
    dx, dy, dz, cx, cy, cz = 4, 3, 2, 2, 3, 2
    n = dx * dy * dz * cx * cy * cz
    out = poison(n * 8, np.int32)

    @cube.kernel
    def positions_i32(o: cube.Array[cube.i32]):
        u = (
            cube.ABSOLUTE_POS_X
            + cube.ABSOLUTE_POS_Y * (cube.CUBE_DIM_X * cube.CUBE_COUNT_X)
            + cube.ABSOLUTE_POS_Z
            * (cube.CUBE_DIM_X * cube.CUBE_COUNT_X * cube.CUBE_DIM_Y * cube.CUBE_COUNT_Y)
        )
        base = u * 8
        vals = (
            cube.ABSOLUTE_POS,
            cube.UNIT_POS,
            cube.UNIT_POS_X + 100 * cube.UNIT_POS_Y + 10000 * cube.UNIT_POS_Z,
            cube.CUBE_POS,
            cube.CUBE_POS_X + 100 * cube.CUBE_POS_Y + 10000 * cube.CUBE_POS_Z,
            cube.CUBE_COUNT + 1000 * cube.CUBE_DIM,
            cube.UNIT_POS_PLANE + 1000 * cube.PLANE_POS,
            cube.PLANE_DIM,
        )
        for k in range(8):
            o[base + k] = cube.cast(vals[k], cube.i32)

    positions_i32.launch(DEV, cube.CubeCount(cx, cy, cz), cube.CubeDim(dx, dy, dz), out)
    got = out.numpy().reshape(-1, 8)
    seen = set()
    for z in range(cz):
        for y in range(cy):
            for x in range(cx):
                for uz in range(dz):
                    for uy in range(dy):
                        for ux in range(dx):
                            gx, gy, gz = x * dx + ux, y * dy + uy, z * dz + uz
                            row = got[gx + gy * dx * cx + gz * dx * cx * dy * cy]
                            cube_lin = x + y * cx + z * cx * cy
                            unit_lin = ux + uy * dx + uz * dx * dy
                            nu = dx * dy * dz
                            assert row[0] == cube_lin * nu + unit_lin
                            assert row[1] == unit_lin
                            assert row[2] == ux + 100 * uy + 10000 * uz
                            assert row[3] == cube_lin
                            assert row[4] == x + 100 * y + 10000 * z
                            assert row[5] == cx * cy * cz + 1000 * nu
                            assert row[6] == unit_lin % 32 + 1000 * (unit_lin // 32)
                            assert row[7] == 32
                            seen.add(int(row[0]))
    assert len(seen) == n


# --------------------------------------------------------------------------- lines


@cube.kernel
def line_ops(
    x: cube.Array[cube.Line[cube.Float]], out: cube.Array[cube.Line[cube.Float]], sums: cube.Array[cube.Float]
):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        w = v * 2.0 + cube.line(cube.Float(1.0), x.line_size())
        w = cube.select(v > 0.0, w, cube.exp(v))
        w[0] = cube.line_max(v)
        out[i] = w
        sums[i] = cube.line_sum(v)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lines_compile_to_vectors_and_match(width, dtype):
    n = 16 * 12
    x = rng(5).standard_normal(n).astype(dtype)
    out, sums = poison(n, dtype), poison(n // width, dtype)
    line_ops.launch(
        DEV,
        cube.CubeCount.covering(n // width, 64),
        64,
        cube.lines(dev_tensor(x), width),
        cube.lines(out, width),
        sums,
    )
    xr = x.reshape(-1, width)
    ref = np.where(xr > 0, xr * 2 + 1, np.exp(xr))
    ref[:, 0] = xr.max(axis=1)
    np.testing.assert_allclose(out.numpy().reshape(-1, width), ref, rtol=1e-6)
    np.testing.assert_allclose(sums.numpy(), xr.sum(axis=1), rtol=1e-5)
    if width > 1:
        src = line_ops.source(64, cube.lines(x, width), cube.lines(x, width), x[: n // width])
        assert f"vector_size({width * np.dtype(dtype).itemsize})" in src


def test_lines_reject_bad_layouts():
    x = dev_tensor(np.zeros(10, np.float32))
    with pytest.raises(ember.errors.ShapeError):
        line_ops.launch(DEV, 1, 64, cube.lines(x, 4), cube.lines(x, 4), x)


# --------------------------------------------------------------------------- cube cooperation


@cube.kernel
def block_sum(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    """Tree reduction in shared memory: a runtime while loop with a barrier inside."""
    sm = cube.SharedMemory(cube.f32, cube.CUBE_DIM)
    i = cube.ABSOLUTE_POS
    u = cube.UNIT_POS
    sm[u] = x[i] if i < x.len() else 0.0
    cube.sync_cube()
    stride = cube.CUBE_DIM // 2
    s = cube.u32(stride)
    while s > 0:
        if u < s:
            sm[u] = sm[u] + sm[u + s]
        cube.sync_cube()
        s = s // 2
    if u == 0:
        out[cube.CUBE_POS] = sm[0]


@pytest.mark.parametrize("units", [32, 64, 256])
def test_shared_memory_block_reduction_with_barriers(units):
    n = 1000
    x = rng(6).standard_normal(n).astype(np.float32)
    cubes = -(-n // units)
    out = poison(cubes)
    block_sum.launch(DEV, cubes, units, dev_tensor(x), out)
    ref = np.pad(x, (0, cubes * units - n)).reshape(cubes, units).sum(axis=1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    src = block_sum.source(units, x, x)
    assert "_pu[u]" in src  # values living across a barrier became per-unit arrays


@cube.kernel
def barrier_after_return(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    sm = cube.SharedMemory(cube.f32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    sm[u] = 1.0
    if u % 3 == 0:
        out[cube.ABSOLUTE_POS] = -1.0
        return
    v = x[cube.ABSOLUTE_POS] * 2.0
    cube.sync_cube()
    # the value v lives across the barrier; units that returned stay gone
    out[cube.ABSOLUTE_POS] = v + sm[(u + 1) % cube.CUBE_DIM]


def test_early_return_before_a_barrier():
    x = np.arange(64, dtype=np.float32)
    out = poison(64)
    barrier_after_return.launch(DEV, 2, 32, dev_tensor(x), out)
    u = np.arange(64) % 32
    np.testing.assert_allclose(out.numpy(), np.where(u % 3 == 0, -1.0, x * 2 + 1))


@cube.kernel
def masked_loop(x: cube.Array[cube.i32], out: cube.Array[cube.i32]):
    """A loop with a barrier whose trip count differs per unit (break / continue clear masks)."""
    sm = cube.SharedMemory(cube.i32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    acc = 0
    for k in range(x[u]):
        if k == 5:
            break
        if k % 2 == 1:
            continue
        sm[u] = k
        cube.sync_cube()
        acc += sm[u]
    out[u] = acc


def test_divergent_loops_with_barriers():
    x = np.array([0, 1, 2, 3, 7, 9, 4, 5] * 4, np.int32)
    out = poison(32, np.int32)
    masked_loop.launch(DEV, 1, 32, dev_tensor(x), out)
    ref = [sum(k for k in range(min(v, 5)) if k % 2 == 0) for v in x]
    np.testing.assert_array_equal(out.numpy(), ref)


@cube.kernel
def plane_kernel(x: cube.Array[cube.f32], out: cube.Array[cube.f32], which: cube.Comptime[str]):
    i = cube.ABSOLUTE_POS
    v = x[i]
    if which == "sum":
        r = cube.plane_sum(v)
    elif which == "max":
        r = cube.plane_max(v)
    elif which == "min":
        r = cube.plane_min(v)
    elif which == "broadcast":
        r = cube.plane_broadcast(v, 3)
    elif which == "shuffle_xor":
        r = cube.plane_shuffle_xor(v, 1)
    elif which == "inclusive":
        r = cube.plane_inclusive_sum(v)
    elif which == "exclusive":
        r = cube.plane_exclusive_sum(v)
    elif which == "all":
        r = cube.select(cube.plane_all(v > -10.0), 1.0, 0.0)
    elif which == "any":
        r = cube.select(cube.plane_any(v > 1.5), 1.0, 0.0)
    else:
        r = cube.select(cube.plane_elect(), 1.0, 0.0)
    out[i] = r


@pytest.mark.parametrize(
    "which",
    ["sum", "max", "min", "broadcast", "shuffle_xor", "inclusive", "exclusive", "all", "any", "elect"],
)
def test_plane_ops(which):
    units = 80  # two full planes of 32 and a partial one of 16
    x = rng(7).standard_normal(units * 2).astype(np.float32)
    out = poison(units * 2)
    plane_kernel.launch(DEV, 2, units, dev_tensor(x), out, which)
    got = out.numpy()
    for c in range(2):
        for p0 in range(0, units, 32):
            seg = x[c * units + p0 : c * units + min(p0 + 32, units)]
            g = got[c * units + p0 : c * units + p0 + len(seg)]
            ref = {
                "sum": np.full_like(seg, seg.sum()),
                "max": np.full_like(seg, seg.max()),
                "min": np.full_like(seg, seg.min()),
                "broadcast": np.full_like(seg, seg[3]),
                "shuffle_xor": seg[np.arange(len(seg)) ^ 1],
                "inclusive": np.cumsum(seg),
                "exclusive": np.cumsum(seg) - seg,
                "all": np.ones_like(seg),
                "any": np.full_like(seg, float((seg > 1.5).any())),
                "elect": (np.arange(len(seg)) == 0).astype(np.float32),
            }[which]
            np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-5)


@cube.kernel
def plane_divergent(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    """Plane ops under a condition: only the active units take part (subgroup semantics)."""
    u = cube.UNIT_POS
    r = -1.0
    if u % 2 == 0:
        r = cube.plane_sum(x[u])
    out[u] = r


def test_plane_op_under_divergent_condition():
    x = np.arange(64, dtype=np.float32)
    out = poison(64)
    plane_divergent.launch(DEV, 1, 64, dev_tensor(x), out)
    evens = [x[p0 : p0 + 32 : 2].sum() for p0 in (0, 32)]
    ref = np.array([evens[u // 32] if u % 2 == 0 else -1 for u in range(64)], np.float32)
    np.testing.assert_allclose(out.numpy(), ref)


@cube.kernel
def histogram(
    x: cube.Array[cube.i32],
    bins: cube.Array[cube.i32],
    total: cube.Array[cube.f32],
    top: cube.Array[cube.f32],
):
    i = cube.ABSOLUTE_POS
    if i < x.len():
        cube.atomic_add(bins, x[i], 1)
        cube.atomic_add(total, 0, 0.5)
        cube.atomic_max(top, 0, cube.cast(x[i], cube.f32))


def test_atomics_across_parallel_cubes():
    n = 200_000
    x = rng(8).integers(0, 16, n).astype(np.int32)
    bins = dev_tensor(np.zeros(16, np.int32))
    total = dev_tensor(np.zeros(1, np.float32))
    top = dev_tensor(np.full(1, -1.0, np.float32))
    histogram.launch(DEV, cube.CubeCount.covering(n, 256), 256, dev_tensor(x), bins, total, top)
    np.testing.assert_array_equal(bins.numpy(), np.bincount(x, minlength=16))
    assert total.numpy()[0] == n * 0.5
    assert top.numpy()[0] == 15


@cube.kernel
def local_array(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        regs = cube.LocalArray(cube.f32, 4)
        for k in range(4):
            regs[k] = x[i] * (k + 1)
        acc = cube.f32(0)
        for k in range(4):
            acc += regs[3 - k] * (k + 1)
        out[i] = acc


def test_local_arrays():
    x = np.arange(20, dtype=np.float32)
    out = poison(20)
    local_array.launch(DEV, 1, 32, dev_tensor(x), out)
    np.testing.assert_allclose(out.numpy(), x * (4 * 1 + 3 * 2 + 2 * 3 + 1 * 4))


def test_generic_kernel_specialises_per_dtype():
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        a = np.arange(10).astype(dtype)
        out = poison(10, dtype)
        binops.launch(DEV, 1, 16, dev_tensor(a), dev_tensor(a), out, "add")
        np.testing.assert_array_equal(out.numpy(), a + a)
    e32 = binops.kernel_id(
        16, np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32), "add"
    )
    e64 = binops.kernel_id(
        16, np.zeros(1, np.float64), np.zeros(1, np.float64), np.zeros(1, np.float64), "add"
    )
    assert e32.entry().startswith("binops_f32_n1_") and e64.entry().startswith("binops_f64_n1_")
    with pytest.raises(ember.errors.DTypeError):
        binops.launch(
            DEV,
            1,
            16,
            dev_tensor(np.zeros(2, np.float32)),
            dev_tensor(np.zeros(2, np.float64)),
            poison(2),
            "add",
        )


def test_in_place_aliasing_is_part_of_the_kernel_id():
    x = dev_tensor(np.arange(8, dtype=np.float32))
    y = dev_tensor(np.ones(8, dtype=np.float32))
    binops.launch(DEV, 1, 8, x, y, x, "add")  # out aliases a
    np.testing.assert_array_equal(x.numpy(), np.arange(8) + 1)
    a = np.zeros(8, np.float32)
    k1 = binops.kernel_id(8, a, np.zeros(8, np.float32), a, "add")
    k2 = binops.kernel_id(8, a, np.zeros(8, np.float32), np.zeros(8, np.float32), "add")
    assert k1 != k2 and "inplace: Some(0)" in k1.text()
    src = binops.source(8, a, np.zeros(8, np.float32), a, "add")
    decls = [ln.strip() for ln in src.splitlines() if "buffers[" in ln]
    assert any("*restrict b_b " in d for d in decls)
    assert any("*b_a " in d for d in decls) and any("*b_out " in d for d in decls)  # aliased: no restrict


# --------------------------------------------------------------------------- more constructs


@cube.kernel
def half_lines(
    x: cube.Array[cube.Line[cube.Float]],
    out: cube.Array[cube.Line[cube.Float]],
    mask: cube.Array[cube.Line[cube.bool_]],
):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        m = v > 0.0
        out[i] = cube.select(m, v * 2.0, v)
        mask[i] = m


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
@pytest.mark.parametrize("width", [1, 4, 8])
def test_half_precision_and_bool_lines(dtype, width):
    x = rng(9).standard_normal(64).astype(dtype.np)
    xt = ember.tensor(x, dtype=dtype, device=DEV)
    out = ember.full((64,), float("nan"), dtype=dtype, device=DEV)
    mask = dev_tensor(np.zeros(64, bool))
    half_lines.launch(
        DEV,
        cube.CubeCount.covering(64 // width, 16),
        16,
        cube.lines(xt, width),
        cube.lines(out, width),
        cube.lines(mask, width),
    )
    xf = x.astype(np.float32)
    np.testing.assert_array_equal(out.numpy(), np.where(xf > 0, xf * 2, xf).astype(dtype.np))
    np.testing.assert_array_equal(mask.numpy(), xf > 0)


@cube.kernel
def comptime_while_and_enumerate(out: cube.Array[cube.i32], factors: cube.Comptime[tuple]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        acc = cube.cast(i, cube.i32)
        s = 8
        while s > 1:  # comptime test: unrolled (s is a Python int)
            acc = acc + s
            s = s // 2
        for k, f in enumerate(factors):
            acc = acc * f + k
        n = 0
        for _ in cube.range(3, unroll=False):  # comptime bounds kept as a runtime loop
            n += 1
        out[i] = acc + n


def test_comptime_while_enumerate_and_explicit_runtime_range():
    out = poison(10, np.int32)
    comptime_while_and_enumerate.launch(DEV, 1, 16, out, (2, 3))
    i = np.arange(10)
    np.testing.assert_array_equal(out.numpy(), ((i + 8 + 4 + 2) * 2 + 0) * 3 + 1 + 3)
    k = comptime_while_and_enumerate.ir(16, np.zeros(10, np.int32), (2, 3))
    loops = [s for s in ir.walk(k.body) if isinstance(s, (ir.RangeLoop, ir.Loop))]
    assert len(loops) == 1 and isinstance(loops[0], ir.RangeLoop)


@cube.function
def cube_total(v, scratch):
    """A @cube.function with a barrier: every unit adds its value into shared memory."""
    if cube.UNIT_POS == 0:
        scratch[0] = 0
    cube.sync_cube()
    cube.atomic_add(scratch, 0, v)
    cube.sync_cube()
    return scratch[0]


@cube.kernel
def shared_atomics(x: cube.Array[cube.i32], out: cube.Array[cube.i32]):
    sm = cube.SharedMemory(cube.i32, 1)
    t = cube_total(x[cube.ABSOLUTE_POS], sm)
    out[cube.ABSOLUTE_POS] = t


def test_barriers_inside_inlined_functions_and_shared_atomics():
    x = np.arange(96, dtype=np.int32)
    out = poison(96, np.int32)
    shared_atomics.launch(DEV, 3, 32, dev_tensor(x), out)
    np.testing.assert_array_equal(out.numpy(), np.repeat(x.reshape(3, 32).sum(axis=1), 32))


def test_kernels_from_one_factory_with_different_captured_constants_are_distinct():
    def make(k):
        @cube.kernel
        def scaled(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
            i = cube.ABSOLUTE_POS
            if i < out.len():
                out[i] = x[i] * k

        return scaled

    x = dev_tensor(np.arange(4, dtype=np.float32))
    outs = []
    for k in (2.0, 3.0):
        out = poison(4)
        make(k).launch(DEV, 1, 4, x, out)
        outs.append(out.numpy())
    np.testing.assert_array_equal(outs[0], np.arange(4) * 2)
    np.testing.assert_array_equal(outs[1], np.arange(4) * 3)


@cube.kernel
def fma_and_binary_math(x: cube.Array[cube.f64], out: cube.Array[cube.f64]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        v = x[i]
        out[i] = cube.fma(v, 2, 1.5) + cube.atan2(v, 2) + cube.pow(2, v) + cube.clamp(v, -1, 1)


def test_fma_and_binary_math_with_literals_taking_the_value_type():
    x = np.linspace(-3, 3, 40)
    out = poison(40, np.float64)
    fma_and_binary_math.launch(DEV, 1, 64, dev_tensor(x), out)
    np.testing.assert_allclose(out.numpy(), x * 2 + 1.5 + np.arctan2(x, 2) + 2.0**x + np.clip(x, -1, 1))


@cube.kernel
def line_across_barrier(x: cube.Array[cube.Line[cube.f64]], out: cube.Array[cube.Line[cube.f64]]):
    i = cube.ABSOLUTE_POS
    v = x[i]  # a line living across the barrier, only stored afterwards
    m = v > 0.0
    cube.sync_cube()
    out[i] = cube.select(m, v, -v)


def test_line_values_live_across_barriers():
    x = rng(10).standard_normal(64)
    out = poison(64, np.float64)
    line_across_barrier.launch(DEV, 1, 16, cube.lines(dev_tensor(x), 4), cube.lines(out, 4))
    np.testing.assert_array_equal(out.numpy(), np.abs(x))


@cube.kernel
def tiled_matmul(
    a: cube.Tensor[cube.f32], b: cube.Tensor[cube.f32], c: cube.Tensor[cube.f32], tile: cube.Comptime[int]
):
    """The canonical GPU matmul: tiles staged in shared memory, two barriers per K step."""
    sa = cube.SharedMemory(cube.f32, tile * tile)
    sb = cube.SharedMemory(cube.f32, tile * tile)
    ty, tx = cube.UNIT_POS_Y, cube.UNIT_POS_X
    row = cube.CUBE_POS_Y * tile + ty
    col = cube.CUBE_POS_X * tile + tx
    m, k, n = a.shape(0), a.shape(1), b.shape(1)
    acc = cube.f32(0)
    for t0 in range(0, k, tile):  # runtime loop with barriers inside
        ac = t0 + tx
        sa[ty * tile + tx] = a[row, ac] if row < m and ac < k else 0.0
        br = t0 + ty
        sb[ty * tile + tx] = b[br, col] if br < k and col < n else 0.0
        cube.sync_cube()
        for kk in range(tile):  # comptime: unrolled
            acc += sa[ty * tile + kk] * sb[kk * tile + tx]
        cube.sync_cube()
    if row < m and col < n:
        c[row, col] = acc


@pytest.mark.parametrize("m,k,n,tile", [(37, 53, 29, 8), (16, 16, 16, 4), (5, 70, 3, 16)])
def test_tiled_shared_memory_matmul(m, k, n, tile):
    r = rng(11)
    a = r.standard_normal((m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    c = poison((m, n))
    count = cube.CubeCount(-(-n // tile), -(-m // tile))
    tiled_matmul.launch(DEV, count, cube.CubeDim(tile, tile), dev_tensor(a), dev_tensor(b), c, tile)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@cube.kernel
def block_scan(x: cube.Array[cube.i32], out: cube.Array[cube.i32]):
    """Hillis-Steele inclusive scan of each cube's values in shared memory."""
    sm = cube.SharedMemory(cube.i32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    i = cube.ABSOLUTE_POS
    sm[u] = x[i] if i < x.len() else 0
    cube.sync_cube()
    offset = 1
    while offset < cube.CUBE_DIM:  # comptime: unrolled, log2(CUBE_DIM) steps
        t = sm[u - offset] if u >= offset else 0
        cube.sync_cube()
        sm[u] += t
        cube.sync_cube()
        offset *= 2
    if i < out.len():
        out[i] = sm[u]


@pytest.mark.parametrize("units", [16, 64, 48])
def test_shared_memory_scan(units):
    x = rng(12).integers(-5, 9, 200).astype(np.int32)
    out = poison(200, np.int32)
    block_scan.launch(DEV, cube.CubeCount.covering(200, units), units, dev_tensor(x), out)
    ref = np.concatenate([np.cumsum(x[s : s + units]) for s in range(0, 200, units)])
    np.testing.assert_array_equal(out.numpy(), ref)
