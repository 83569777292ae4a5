"""Unsupported Python in a kernel raises CubeSyntaxError with the file, the line, and what to
write instead. Kernels are only expanded (no compiler, no device): ``k.ir(dim, *args)``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from ember import cube
from ember.cube import CubeSyntaxError

F32 = np.zeros(8, np.float32)
F64 = np.zeros(8, np.float64)
I32 = np.zeros(8, np.int32)


def line_of(fn: object, marker: str = "# <- here") -> int:
    lines, start = inspect.getsourcelines(getattr(fn, "fn", fn))
    for k, text in enumerate(lines):
        if marker in text:
            return start + k
    raise AssertionError("marker not found")


def plain_helper(v):
    return v * 2


@cube.kernel
def uses_try(x: cube.Array[cube.f32]):
    try:  # <- here
        x[0] = 1.0
    except Exception:
        pass


@cube.kernel
def uses_lambda(x: cube.Array[cube.f32]):
    f = lambda v: v  # <- here  # noqa: E731
    x[0] = f(1.0)


@cube.kernel
def mixes_types(x: cube.Array[cube.f32], y: cube.Array[cube.f64]):
    x[0] = x[0] + y[0]  # <- here


@cube.kernel
def int_true_division(x: cube.Array[cube.i32]):
    x[0] = x[0] / 2  # <- here


@cube.kernel
def undefined_name(x: cube.Array[cube.f32]):
    x[0] = not_defined_anywhere  # <- here  # noqa: F821


@cube.kernel
def iterates_array(x: cube.Array[cube.f32]):
    for v in x:  # <- here
        x[0] = v


@cube.kernel
def calls_python(x: cube.Array[cube.f32]):
    x[0] = plain_helper(x[1])  # <- here


@cube.kernel
def comprehension(x: cube.Array[cube.f32]):
    vals = [x[k] for k in range(3)]  # <- here
    x[0] = vals[0]


@cube.kernel
def float_literal_with_int(x: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    x[0] = cube.cast(i * 1.5, cube.f32)  # <- here


@cube.kernel
def break_in_unrolled(x: cube.Array[cube.f32]):
    for k in range(4):
        if x[k] > 0.0:
            break  # <- here


@cube.kernel
def runtime_shared_size(x: cube.Array[cube.f32]):
    sm = cube.SharedMemory(cube.f32, x.len())  # <- here
    sm[0] = 1.0


@cube.kernel
def defined_in_loop(x: cube.Array[cube.f32]):
    for k in range(x.len()):
        t = x[k] * 2.0
    x[0] = t  # <- here


@cube.kernel
def returns_value(x: cube.Array[cube.f32]):
    return x[0]  # <- here


@cube.kernel
def uses_with(x: cube.Array[cube.f32]):
    with open("f"):  # <- here
        pass


@cube.kernel
def line_widths(a: cube.Array[cube.Line[cube.f32]], b: cube.Array[cube.Line[cube.f32]]):
    a[0] = a[0] + b[0]  # <- here


CASES = [
    (uses_try, (F32,), "'Try' statements are not part of the kernel language", "exceptions"),
    (uses_lambda, (F32,), "'Lambda' expressions", "@cube.function"),
    (mixes_types, (F32, F64), "mixing f32 and f64", "cube.cast"),
    (int_true_division, (I32,), "'/' on i32", "//"),
    (undefined_name, (F32,), "name 'not_defined_anywhere' is not defined", ""),
    (iterates_array, (F32,), "iterating over an array", "range(x.len())"),
    (calls_python, (F32,), "call of the Python function plain_helper with runtime values", "@cube.function"),
    (comprehension, (F32,), "'ListComp' expressions", "for loop"),
    (float_literal_with_int, (F32,), "float literal 1.5 used with a u32 value", "cast"),
    (
        break_in_unrolled,
        (F32,),
        "'break' under a runtime condition inside a comptime-unrolled loop",
        "cube.range(n, unroll=False)",
    ),
    (
        runtime_shared_size,
        (F32,),
        "the size of cube.SharedMemory must be a positive comptime int",
        "Comptime",
    ),
    (defined_in_loop, (F32,), "'t' is set only inside a runtime loop", "assign t before the loop"),
    (returns_value, (F32,), "a kernel returns nothing", "output array"),
    (uses_with, (F32,), "'With' statements", "context managers"),
    (
        line_widths,
        (cube.lines(np.zeros(8, np.float32), 4), cube.lines(np.zeros(8, np.float32), 2)),
        "mixing lines of widths 4 and 2",
        "",
    ),
]


@pytest.mark.parametrize("kernel,args,what,hint", CASES, ids=[c[0].fn.__name__ for c in CASES])
def test_syntax_errors_name_file_line_and_fix(kernel, args, what, hint):
    with pytest.raises(CubeSyntaxError) as e:
        kernel.ir(32, *args)
    err = e.value
    assert err.filename == __file__
    assert err.lineno == line_of(kernel), str(err)
    assert what in str(err)
    assert hint in err.hint
    assert str(err).startswith(f"{__file__}:{err.lineno}: ")
    assert isinstance(err, SyntaxError)  # tracebacks show the kernel line itself


def test_unannotated_parameter_is_reported_at_definition_site():
    @cube.kernel
    def k(x):
        pass

    with pytest.raises(CubeSyntaxError, match="has no annotation") as e:
        k.ir(32, F32)
    assert "cube.Array[cube.f32]" in e.value.hint


def test_comptime_values_need_stable_reprs():
    @cube.kernel
    def k(x: cube.Array[cube.f32], c: cube.Comptime):
        x[0] = 1.0

    with pytest.raises(TypeError, match="stable repr"):
        k.kernel_id(32, F32, object())
