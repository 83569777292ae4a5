"""Argument resolution: the buffer view behind each argument, the ArgSig of an array, the
element types of scalars and sequences, and the aliasing of buffers within one launch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import dtype as dt
from ...errors import DTypeError, ShapeError
from ..kernel_id import ArgSig
from ..runtime.tensor import CubeTensor
from ..types import ArraySpec, Elem, ElemVar, Scalar, bool_, elem_of_dtype, f32, i32
from .dims import LineArg

if TYPE_CHECKING:
    from ..lang.expand import Target


def _array_of(a: Any, name: str, numpy_ok: bool = True) -> Any:
    """The buffer view behind an argument: CubeTensor, ember Tensor, or (compile-only) numpy.

    Decorators' primitives (autodiff's) wrap the inner backend's in ``.inner``: a kernel sees
    the cube buffer underneath (a kernel writing into it bypasses the autodiff graph). A
    Fusion handle (``.stream``/``.value``) first runs its stream's queued work, so the kernel
    neither reads a stale buffer nor overwrites one that queued ops of that stream still read."""
    if type(a) is CubeTensor:
        return a
    p = getattr(a, "_p", None)
    if p is not None:
        while type(p) is not CubeTensor:
            if hasattr(p, "inner"):
                p = p.inner
            elif hasattr(p, "stream") and hasattr(p, "value"):
                if p.stream is not None:
                    p.stream.drain()
                if p.value is None:
                    raise TypeError(f"argument {name!r}: the queued work producing it failed ({p.error!r})")
                p = p.value
            else:
                break
        if type(p) is CubeTensor:
            return p
        raise TypeError(
            f"argument {name!r} lives on a device whose tensors are not cube buffers "
            f"({type(p).__name__}); create it on Device.cpu()"
        )
    if numpy_ok and isinstance(a, np.ndarray):
        return a
    raise TypeError(
        f"argument {name!r} must be a tensor on a cube device, got {type(a).__name__}"
        + (
            " (numpy arrays only describe arguments for kernel_id()/source()/ir())"
            if isinstance(a, np.ndarray)
            else ""
        )
    )


def _dtype_of(t: Any) -> dt.DType:
    d = t.dtype
    return d if type(d) is dt.DType else dt.from_numpy_dtype(d)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _array_sig(
    name: str, spec: ArraySpec, a: Any, bindings: dict[ElemVar, Elem], target: Target, arrays: list[Any]
) -> ArgSig:
    """The ArgSig of one array argument (binding ``spec``'s ElemVar in ``bindings``); appends
    its buffer view to ``arrays`` and names the earlier one on the same buffer, if any."""
    width = a.width if type(a) is LineArg else 0
    t = _array_of(a.tensor if type(a) is LineArg else a, name)
    e = elem_of_dtype(_dtype_of(t))
    if isinstance(spec.elem, ElemVar):
        if not spec.elem.accepts(e):
            raise DTypeError(
                f"argument {name!r} has dtype {e.dtype.name}, but {spec.elem!r} accepts "
                f"{'/'.join(sorted(spec.elem.kinds))} types only"
            )
        prev = bindings.setdefault(spec.elem, e)
        if prev is not e:
            raise DTypeError(
                f"argument {name!r} is {e.dtype.name} but an earlier argument bound "
                f"{spec.elem!r} to {prev.dtype.name}"
            )
    elif spec.elem is not e:
        raise DTypeError(f"argument {name!r} is {_dtype_of(t).name}, the kernel declares {spec!r}")
    if spec.lines:
        w = spec.width or width or 1
        if spec.width and width and width != spec.width:
            raise ShapeError(f"argument {name!r} is declared in lines of {spec.width}, passed in lines of {width}")
    else:
        if width > 1:
            raise ShapeError(
                f"argument {name!r} is cube.Array[{spec.elem!r}] (not lines) but was "
                f"passed with cube.lines(..., {width})"
            )
        w = 1
    if w not in target.line_widths:
        raise ShapeError(f"line width {w} is not supported by the {target.name} target")
    alias = None
    for j, o in enumerate(arrays):
        if _same_buffer(o, t):
            alias = j
            break
    arrays.append(t)
    return ArgSig("array", name, e, w, len(t.shape), alias)


def _sequence_items(a: Any, name: str) -> tuple[Any, ...] | list[Any]:
    if type(a) is tuple or type(a) is list:
        return a
    raise TypeError(f"argument {name!r} is a cube.Sequence: pass a tuple or list, got {type(a).__name__}")


def _pair_value(x: Any) -> Any:
    return x[0] if type(x) is tuple or type(x) is list else x


def _infer_scalar_elem(a: Any) -> Elem:
    if isinstance(a, (bool, np.bool_)):
        return bool_
    return i32 if isinstance(a, (int, np.integer)) else f32


def _sequence_scalar_elem(item: Any, x: Any, name: str) -> Elem:
    """The element type of one scalar of a ``cube.Sequence[cube.Scalar | E]`` argument: a
    ``(value, dtype)`` pair names it (dtype an ember DType or a cube Elem)."""
    if type(x) is tuple or type(x) is list:
        if len(x) != 2:
            raise TypeError(f"argument {name!r}: sequence scalars are (value, dtype) pairs, got {x!r}")
        d = x[1]
        if isinstance(d, Elem):
            e = d
        else:
            try:
                e = elem_of_dtype(d)
            except (KeyError, TypeError):
                raise TypeError(f"argument {name!r}: {d!r} is not an ember dtype or cube element type") from None
        if isinstance(item, Elem) and e is not item:
            raise DTypeError(f"argument {name!r} is {e.name}, the kernel declares {item!r}")
        if isinstance(item, ElemVar) and not item.accepts(e):
            raise DTypeError(f"argument {name!r}: {item!r} cannot bind to {e!r}")
        return e
    if item is Scalar:
        raise TypeError(
            f"argument {name!r} belongs to a cube.Sequence[cube.Scalar]: pass (value, dtype) pairs, "
            f"e.g. (2.0, ember.float32), got {x!r}"
        )
    if isinstance(item, Elem):
        return item
    e = _infer_scalar_elem(x)
    if not item.accepts(e):
        raise DTypeError(f"argument {name!r}: {item!r} cannot bind to {e!r}")
    return e


def _same_buffer(a: Any, b: Any) -> bool:
    if type(a) is CubeTensor and type(b) is CubeTensor:
        return a.buffer is b.buffer
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a is b or bool(np.shares_memory(a, b))
    return False


def _aliases(tensors: list[Any]) -> tuple[int, ...]:
    """Per tensor, the index of the first tensor on the same buffer (its own when none)."""
    bufs = [getattr(t, "buffer", t) for t in tensors]
    n = len(bufs)
    if len({id(b) for b in bufs}) == n:  # no two share a buffer: the usual launch
        try:
            return _DISTINCT[n]
        except IndexError:
            return tuple(range(n))
    out = []
    for i, buf in enumerate(bufs):
        j = i
        for k in range(i):
            if bufs[k] is buf:
                j = k
                break
        out.append(j)
    return tuple(out)


_DISTINCT = [tuple(range(n)) for n in range(32)]
