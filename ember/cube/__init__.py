"""``ember.cube``: write kernels in Python, run them on the device's cores (or GPU).

    from ember import cube

    @cube.kernel
    def axpy(x: cube.Array[cube.f32], y: cube.Array[cube.f32], a: cube.f32):
        i = cube.ABSOLUTE_POS
        if i < y.len():
            y[i] = a * x[i] + y[i]

    axpy.launch(dev, cube.CubeCount(8), cube.CubeDim(128), x, y, 2.0)   # writes y in place

The kernel language (a ``@cube.kernel`` body is expanded to kernel IR by walking its AST;
nothing runs as Python at launch):

* **Parameters**: ``cube.Array[E]`` (a buffer view: ``x[i]``, ``x.len()``, ``x.shape(d)``,
  ``x.stride(d)``, ``x.rank()``; ``x[i, j]`` indexes through the strides),
  ``cube.Array[cube.Line[E]]`` (lines of N elements, N chosen at launch with
  ``cube.lines(t, N)``; ``x.len()`` counts lines), a scalar type ``E``,
  ``cube.Comptime[T]`` (a Python value that specialises the kernel), or a sequence:
  ``cube.Sequence[cube.Array[...]]`` (a tuple/list of tensors at launch, each its own buffer,
  dtype, line width and rank; an ``ElemVar`` in the element annotation binds per element, read
  it with ``cube.elem_of(xs[k])``) or ``cube.Sequence[cube.Scalar]`` (``(value, dtype)`` pairs;
  ``cube.Sequence[cube.f32]`` takes plain values). In the kernel a sequence is a comptime
  tuple: ``len(xs)``, ``xs[k]`` with a comptime ``k``, ``for x in xs:`` (unrolled). Its length
  and element types are part of the KernelId.
* **Types**: ``cube.f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool_``; generic
  ``cube.Float``, ``cube.Int``, ``cube.UInt``, ``cube.Numeric``, ``cube.T`` or your own
  ``cube.ElemVar("E", "float")``, bound at launch from the argument dtypes. Python literals
  take the type of the other operand; different runtime types never mix implicitly
  (``cube.cast(x, cube.f32)``, ``cube.f32(x)``, ``cube.bitcast``). ``acc: cube.f32 = 0``
  declares a typed variable; a variable set from a literal takes the type of its first use.
  Positions and metadata are ``u32``.
* **Comptime containers**: tuples, lists and dicts exist at expansion and may hold runtime
  values (registers): ``vals = []``, ``vals.append(v)``, ``vals[k]``, ``vals[k] = v`` with comptime
  ``k`` (a runtime index is an error: use ``cube.LocalArray``). A list may change only under the
  runtime ``if``/loop it was created in, and one holding values computed inside a runtime
  ``if`` branch has no value after the ``if``.
* **Statements**: assignment (also to ``x[i]`` and to a lane ``v[k]``), augmented assignment,
  ``if``/``elif``/``else``, ``for i in range(...)`` (unrolled when the bounds are comptime;
  ``cube.range(n, unroll=False)`` keeps a loop), ``for`` over comptime tuples (unrolled),
  ``while``, ``break``, ``continue``, early ``return``, ``assert`` on comptime values.
* **Expressions**: arithmetic (``/`` for floats, ``//`` and ``%`` with Python's signs),
  comparisons (chains too), ``and``/``or``/``not`` (short-circuit), ``x if c else y``,
  bit operators, ``**`` (comptime small int exponents unroll), calls of
  ``@cube.function``s (inlined), math: ``cube.exp log sqrt rsqrt sin cos tanh erf floor
  ceil round trunc sigmoid abs sign min max pow atan2 fma clamp select isnan ...`` (also
  ``math.*``, ``abs``, ``min``, ``max``). Calls of other Python functions on comptime values
  run at expansion (comptime evaluation).
* **Positions**: ``ABSOLUTE_POS``, ``UNIT_POS``, ``CUBE_POS``, ``CUBE_COUNT`` (with ``_X/_Y/_Z``),
  ``UNIT_POS_PLANE``, ``PLANE_POS``; comptime ``CUBE_DIM`` (``_X/_Y/_Z``) and ``PLANE_DIM``.
* **Lines**: ``cube.line(v, n)`` broadcasts, ``v[k]`` reads a lane, ``cube.line_sum/max/min/prod``,
  ``cube.width_of(v)`` is the comptime width of a value (``cube.elem_of(v)`` its element type).
* **Cube cooperation**: ``cube.SharedMemory(E, n, line=1)``, ``cube.LocalArray(E, n)``,
  ``cube.sync_cube()``, atomics (``cube.atomic_add(arr, i, v)`` and ``_sub _max _min
  _exchange``, returning the old value), plane ops (``plane_sum prod max min all any
  broadcast shuffle shuffle_xor elect inclusive_sum exclusive_sum``). ``sync_cube`` and plane
  ops must be reached by every unit of the cube (or of the plane), as on a GPU.
* **Hints**: ``cube.occupancy(n)`` (comptime ``n``) asks the target to fit ``n`` cubes per
  multiprocessor (CUDA: ``__launch_bounds__(units, n)``, a register cap); no effect on results.

Anything else raises ``CubeSyntaxError`` naming the file, line and what to write instead.
Importing this module is cheap: compilers and runtimes start at the first launch.
"""

from __future__ import annotations

from .kernel_id import KernelId
from .lang.errors import CubeSyntaxError
from .lang.intrinsics import BUILTINS as _BUILTINS
from .lang.intrinsics import INTRINSICS as _INTRINSICS
from .launch import CubeCount, CubeDim, CubeFunction, CubeKernel, LineArg, function, kernel, lines
from .types import (
    Array,
    Comptime,
    Elem,
    ElemVar,
    Float,
    Int,
    Line,
    Numeric,
    Scalar,
    Sequence,
    T,
    Tensor,
    UInt,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)

globals().update(_BUILTINS)
globals().update(_INTRINSICS)

__all__ = [
    "kernel",
    "function",
    "CubeKernel",
    "CubeFunction",
    "CubeCount",
    "CubeDim",
    "LineArg",
    "lines",
    "KernelId",
    "CubeSyntaxError",
    "Array",
    "Tensor",
    "Line",
    "Comptime",
    "Sequence",
    "Scalar",
    "Elem",
    "ElemVar",
    "Float",
    "Int",
    "UInt",
    "Numeric",
    "T",
    "f16",
    "bf16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "bool_",
    *_BUILTINS,
    *_INTRINSICS,
]


def client(device: object = None) -> object:
    """The ComputeClient of a cube device (default: the CPU runtime)."""
    from .launch import _client_of
    from .runtime.client import get_client

    return get_client("cpu", 0) if device is None else _client_of(device)
