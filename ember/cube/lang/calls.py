"""Calls inside kernels: ``@cube.function`` inlining, intrinsics (math, casts, lines, memory,
plane ops, atomics), array methods, and what Python builtins mean in a kernel.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from .. import ir
from ..ir import ARRAY, LOCAL_ARRAY, SHARED, Const, Type, Var
from ..types import BOOL, Comptime, ComptimeSpec, Elem, ElemVar, bool_, f32, i32, u32
from . import intrinsics as K
from .errors import CubeSyntaxError
from .source import MISSING, FunctionSource
from .values import (
    MAX_INLINE_DEPTH,
    ArrayMethod,
    Frame,
    describe,
    is_array,
    is_rt,
    lit_kind,
)


class Calls:
    """Mixin of the expander: every call expression."""

    def e_Call(self, e: ast.Call) -> Any:
        fn = self.expr(e.func)
        args = self.elements(e.args)
        kwargs: dict[str, Any] = {}
        for k in e.keywords:
            v = self.expr(k.value)
            if k.arg is None:
                if not isinstance(v, dict):
                    raise self.error(k, "** of a value that is not a comptime dict")
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(fn, K.Intrinsic):
            return self.intrinsic(e, fn.name, args, kwargs)
        if isinstance(fn, ArrayMethod):
            return self.array_method(e, fn, args, kwargs)
        if getattr(fn, "__cube_function__", False):
            return self.inline(e, fn, args, kwargs)
        if getattr(fn, "__cube_kernel__", False):
            raise self.error(
                e, "a kernel called from a kernel", hint="make the shared code a @cube.function and call that"
            )
        if isinstance(fn, (Elem, ElemVar)):
            if len(args) != 1 or kwargs:
                raise self.error(e, f"{fn!r}(x) takes one value")
            return self.cast(e, args[0], self.resolve_elem(e, fn), bits=False)
        owner = getattr(fn, "__self__", None)
        if type(owner) is list or type(owner) is dict:
            return self.container_method(e, owner, fn, args, kwargs)
        rt = any(is_rt(a) or is_array(a) for a in list(args) + list(kwargs.values()))
        if fn in _PY_BUILTINS:
            return _PY_BUILTINS[fn](self, e, args, kwargs)
        if fn in K.MATH_MODULE and rt:
            return self.intrinsic(e, K.MATH_MODULE[fn], args, kwargs)
        if rt:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self.error(
                e,
                f"call of the Python function {name} with runtime values",
                hint="decorate it with @cube.function to inline it into kernels",
            )
        if not callable(fn):
            raise self.error(e, f"{describe(fn)} is not callable")
        try:
            return self.pyval(e, fn(*args, **kwargs))  # comptime evaluation
        except CubeSyntaxError:
            raise
        except Exception as x:
            raise self.error(e, f"comptime call failed: {type(x).__name__}: {x}") from None

    def container_method(self, e: ast.Call, owner: Any, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A method of a comptime list/dict (``vals.append(v)``): runs at expansion; the
        elements may be runtime values (snapshotted, so later assignments do not change them)."""
        kind = type(owner).__name__
        name = getattr(fn, "__name__", "?")
        if name in _KEYED[kind] and args and (is_rt(args[0]) or is_array(args[0])):
            raise self.error(
                e,
                f"{kind}.{name}() with a runtime {'key' if kind == 'dict' else 'index'}",
                hint="the container exists at expansion only: use comptime keys and indices",
            )
        if name in _MUTATORS[kind]:
            self.check_mutable(e, owner)
        args = [self.snapshot(e, a) for a in args]
        try:
            return self.pyval(e, fn(*args, **kwargs))
        except CubeSyntaxError:
            raise
        except Exception as x:
            raise self.error(e, f"{kind}.{name}() failed: {type(x).__name__}: {x}") from None

    def inline(self, e: ast.Call, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(self.frames) > MAX_INLINE_DEPTH:
            raise self.error(
                e,
                "@cube.function calls nest too deep (recursion?)",
                hint="kernels cannot recurse; write a loop",
            )
        src: FunctionSource = fn.__cube_source__()
        fdef = src.fdef
        a = fdef.args
        if a.vararg or a.kwarg:
            raise src.error(fdef, "*args/**kwargs in a @cube.function")
        names = [p.arg for p in a.posonlyargs + a.args]
        kwnames = [p.arg for p in a.kwonlyargs]
        defaults = list(src.fn.__defaults__ or ())
        env: dict[str, Any] = {}
        if len(args) > len(names):
            raise self.error(e, f"{fdef.name}() takes {len(names)} positional arguments, got {len(args)}")
        for n, v in zip(names, args):
            env[n] = self.snapshot(e, v)
        for k, v in kwargs.items():
            if k not in names and k not in kwnames:
                raise self.error(e, f"{fdef.name}() got an unexpected keyword argument {k!r}")
            if k in env:
                raise self.error(e, f"{fdef.name}() got multiple values for {k!r}")
            env[k] = self.snapshot(e, v)
        first_default = len(names) - len(defaults)
        for i, n in enumerate(names):
            if n not in env:
                if i >= first_default:
                    env[n] = self.pyval(e, defaults[i - first_default])
                else:
                    raise self.error(e, f"{fdef.name}() is missing argument {n!r}")
        for n in kwnames:
            if n not in env:
                d = (src.fn.__kwdefaults__ or {}).get(n, MISSING)
                if d is MISSING:
                    raise self.error(e, f"{fdef.name}() is missing keyword argument {n!r}")
                env[n] = self.pyval(e, d)
        anns = src.annotations()
        for n, ann in anns.items():
            if n in env and (isinstance(ann, ComptimeSpec) or ann is Comptime) and is_rt(env[n]):
                raise self.error(e, f"argument {n!r} of {fdef.name}() is comptime but got a runtime value")
            if n in env and isinstance(ann, Elem) and (lit_kind(env[n]) is not None or is_rt(env[n])):
                env[n] = self.coerce(e, env[n], Type(ann)) if lit_kind(env[n]) is not None else env[n]
        self._ids += 1
        fr = Frame(src, env, "function", label=self._ids, node=e)
        saved = self.block
        body: list[Any] = []
        self.block = body
        self.frames.append(fr)
        try:
            self.stmts(fdef.body)
        finally:
            self.frames.pop()
            self.block = saved
        if fr.exits:
            if any(map(ir.is_collective, body)):
                raise src.error(
                    fdef,
                    f"{fdef.name}() uses sync_cube/plane ops and returns from inside runtime control flow",
                    hint="return only at the end of the function",
                )
            if fr.result is not MISSING and fr.result is not None and fr.result_local is not None:
                saved = self.block
                self.block = body
                self.emit(ir.Assign(fr.result_local, self.assign_value(e, fr.result_local, fr.result)))
                self.block = saved
            self.emit(ir.Block(fr.label, body))
            return self.snapshot(e, fr.result_local) if fr.result_local is not None else None
        self.block.extend(body)
        return None if fr.result is MISSING else fr.result

    def array_method(self, e: ast.Call, m: ArrayMethod, args: list[Any], kwargs: dict[str, Any]) -> Any:
        arr = m.array
        if kwargs:
            raise self.error(e, f"{m.name}() takes no keyword arguments")
        if m.name in ("len", "buffer_len", "rank", "line_size"):
            if args:
                raise self.error(e, f"{m.name}() takes no arguments")
            if m.name == "rank":
                return arr.rank if arr.kind == ARRAY else 1
            if m.name == "line_size":
                return arr.type.width
            if arr.kind != ARRAY:
                return arr.size
            return self.op("len", Type(u32), arr)
        if len(args) != 1:
            raise self.error(e, f"{m.name}(d) takes the dimension")
        if arr.kind != ARRAY:
            if m.name == "shape" and args[0] == 0:
                return arr.size * arr.type.width
            if m.name == "stride" and args[0] == 0:
                return 1
            raise self.error(e, f"{m.name}({args[0]!r}) of a shared or local array")
        d = args[0]
        if lit_kind(d) == "int":
            if not 0 <= d < arr.rank:
                raise self.error(e, f"dimension {d} of an array of rank {arr.rank}")
            d = Const(d, Type(u32))
        else:
            d = self.index(e, d)
        return self.op(m.name, Type(u32), arr, d)

    def cast(self, node: ast.AST, v: Any, elem: Elem, bits: bool) -> Any:
        if lit_kind(v) is not None and not bits:
            k = elem.kind
            if k == BOOL:
                return Const(bool(v), Type(elem))
            if elem.is_float:
                return Const(float(v), Type(elem))
            iv = int(v)
            lo, hi = elem.limits()
            if not lo <= iv <= hi:
                raise self.error(node, f"{v!r} does not fit {elem.name}")
            return Const(iv, Type(elem))
        v = self.materialize(node, v)
        if bits:
            if v.type.elem.bits != elem.bits or v.type.elem.kind == BOOL or elem.kind == BOOL:
                raise self.error(node, f"bitcast from {v.type.elem.name} to {elem.name} (sizes differ)")
            return self.op("bitcast", Type(elem, v.type.width), v)
        if v.type.elem is elem:
            return v
        return self.op("cast", Type(elem, v.type.width), v)

    def intrinsic(self, e: ast.Call, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        h = getattr(self, "i_" + name, None)
        if h is not None:
            return h(e, args, kwargs)
        if kwargs:
            raise self.error(e, f"cube.{name}() takes no keyword arguments")
        if name in K.MATH_UNARY or name in K.MATH_PRED:
            (x,) = self.nargs(e, name, args, 1)
            if lit_kind(x) == "int":
                x = float(x)
            x = self.materialize(e, x)
            if not x.type.elem.is_float:
                raise self.error(
                    e,
                    f"cube.{name} of a {x.type} value",
                    hint=f"cast to a float type first: cube.{name}(cube.cast(x, cube.f32))",
                )
            if name in K.MATH_PRED:
                return self.op(name, Type(bool_, x.type.width), x)
            return self.op(name, x.type, x)
        if name in K.NUMERIC_UNARY:
            (x,) = self.nargs(e, name, args, 1)
            if lit_kind(x) is not None:
                return abs(x) if name == "abs" else (x > 0) - (x < 0)
            x = self.materialize(e, x)
            if x.type.elem.kind == BOOL:
                raise self.error(e, f"cube.{name} of a bool")
            return self.op(name, x.type, x)
        if name in K.MATH_BINARY:
            t, (a, b) = self.unify_all(e, self.nargs(e, name, args, 2), floats=True)
            if not t.elem.is_float:
                raise self.error(e, f"cube.{name} of {t} values", hint="cast to a float type first")
            return self.op(name, t, a, b)
        if name in K.NUMERIC_BINARY:
            return self.minmax(e, name, args)
        if name in K.PLANE:
            return self.plane(e, name, args)
        if name in K.ATOMIC:
            return self.atomic(e, name, args)
        raise self.error(e, f"cube.{name} is not implemented")

    def nargs(self, e: ast.AST, name: str, args: list[Any], n: int) -> list[Any]:
        if len(args) != n:
            raise self.error(e, f"cube.{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        return args

    def minmax(self, e: ast.AST, name: str, args: list[Any]) -> Any:
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            args = list(args[0])
        if len(args) < 2:
            raise self.error(e, f"{name}() needs at least two values")
        acc = args[0]
        for b in args[1:]:
            if not is_rt(acc) and not is_rt(b):
                acc = (min if name == "min" else max)(acc, b)
                continue
            t, a2, b2 = self.unify(e, acc, b)
            if t.elem.kind == BOOL:
                raise self.error(e, f"{name}() of bools", hint="use & / | for bools")
            acc = self.op(name, t, a2, b2)
        return acc

    def i_fma(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        t, (a, b, c) = self.unify_all(e, self.nargs(e, "fma", args, 3), floats=True)
        if not t.elem.is_float:
            raise self.error(e, f"cube.fma of {t} values", hint="cast to a float type first")
        return self.op("fma", t, a, b, c)

    def i_clamp(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        x, lo, hi = self.nargs(e, "clamp", args, 3)
        return self.minmax(e, "max", [self.minmax(e, "min", [x, hi]), lo])

    def i_select(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        c, a, b = self.nargs(e, "select", args, 3)
        if not is_rt(c):
            return a if c else b
        c = self.materialize(e, c)
        if c.type.elem.kind != BOOL:
            raise self.error(e, "the condition of cube.select must be a bool", hint="compare: x > 0")
        t, a, b = self.unify(e, a, b)
        if c.type.width not in (1, t.width) and t.width != 1:
            raise self.error(e, "cube.select with condition and values of different line widths")
        return self.op("select", Type(t.elem, max(t.width, c.type.width)), c, a, b)

    def i_cast(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, t = self.nargs(e, "cast", args, 2)
        return self.cast(e, v, self.resolve_elem(e, t), bits=False)

    def i_bitcast(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, t = self.nargs(e, "bitcast", args, 2)
        if lit_kind(v) is not None:
            v = self.materialize(e, v)
        return self.cast(e, v, self.resolve_elem(e, t), bits=True)

    def i_line(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        v, w = self.nargs(e, "line", args, 2)
        if is_rt(w) or w not in self.target.line_widths:
            raise self.error(e, f"line width must be a comptime value in {self.target.line_widths}")
        v = self.materialize(e, v)
        if v.type.width != 1:
            raise self.error(e, "cube.line(value, n) takes a scalar value")
        return v if w == 1 else self.op("line_fill", Type(v.type.elem, w), v)

    def _line_reduce(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        (v,) = self.nargs(e, name, args, 1)
        v = self.materialize(e, v)
        if v.type.width == 1:
            return v
        if v.type.elem.kind == BOOL:
            raise self.error(e, f"cube.{name} of a bool line")
        return self.op(name, v.type.scalar(), v)

    def i_line_sum(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_sum", args)

    def i_line_prod(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_prod", args)

    def i_line_max(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_max", args)

    def i_line_min(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        return self._line_reduce(e, "line_min", args)

    def i_sync_cube(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> None:
        self.nargs(e, "sync_cube", args, 0)
        self.emit(ir.Barrier())
        return None

    def i_occupancy(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> None:
        """``cube.occupancy(n)``: ask the target to fit ``n`` cubes per multiprocessor (CUDA:
        ``__launch_bounds__(units, n)``, which caps registers per unit); a hint, no semantics."""
        (n,) = self.nargs(e, "occupancy", args, 1)
        if is_rt(n) or lit_kind(n) != "int" or n < 1:
            raise self.error(e, "cube.occupancy() takes a comptime int >= 1")
        self.min_cubes = max(self.min_cubes, int(n))
        return None

    def _memory(self, e: ast.Call, name: str, kind: str, args: list[Any], kw: dict[str, Any]) -> Var:
        if len(args) == 3 and "line" not in kw:
            kw = {"line": args[2]}
            args = args[:2]
        elem, size = self.nargs(e, name, args, 2)
        line = kw.pop("line", 1)
        if kw:
            raise self.error(e, f"cube.{name}() got unexpected keywords {sorted(kw)}")
        elem = self.resolve_elem(e, elem)
        if is_rt(size) or lit_kind(size) != "int" or size <= 0:
            raise self.error(
                e,
                f"the size of cube.{name} must be a positive comptime int, got {describe(size)}",
                hint="sizes are known when the kernel is compiled: use cube.CUBE_DIM or a "
                "cube.Comptime parameter",
            )
        if is_rt(line) or line not in self.target.line_widths:
            raise self.error(e, f"line width must be a comptime value in {self.target.line_widths}")
        v = self.new_var(kind, Type(elem, line), name="sm" if kind == SHARED else "la", size=size)
        if kind == SHARED:
            total = (
                sum(s.size * s.type.width * s.type.elem.size for s in self.shared) + size * line * elem.size
            )
            if total > self.target.max_shared_bytes:
                raise self.error(
                    e, f"shared memory of {total} bytes exceeds the target's {self.target.max_shared_bytes}"
                )
            self.shared.append(v)
        else:
            self.local_arrays.append(v)
        return v

    def i_SharedMemory(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Var:
        return self._memory(e, "SharedMemory", SHARED, args, dict(kw))

    def i_LocalArray(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Var:
        return self._memory(e, "LocalArray", LOCAL_ARRAY, args, dict(kw))

    def i_range(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        raise self.error(e, "cube.range() outside a for statement", hint="for i in cube.range(n): ...")

    def i_elem_of(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Elem:
        (v,) = self.nargs(e, "elem_of", args, 1)
        if is_array(v):
            return v.type.elem
        return self.materialize(e, v).type.elem

    def i_width_of(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> int:
        """The comptime line width of a value or array (1 for scalars and literals)."""
        (v,) = self.nargs(e, "width_of", args, 1)
        if lit_kind(v) is not None:
            return 1
        if is_array(v):
            return v.type.width
        return self.materialize(e, v).type.width

    def i_comptime(self, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        (v,) = self.nargs(e, "comptime", args, 1)
        if is_rt(v) or is_array(v):
            raise self.error(e, "cube.comptime() of a runtime value")
        return v

    def plane(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        if name == "plane_elect":
            self.nargs(e, name, args, 0)
            return self.op(name, Type(bool_))
        nin = 2 if name in ("plane_broadcast", "plane_shuffle", "plane_shuffle_xor") else 1
        args = self.nargs(e, name, args, nin)
        v = self.materialize(e, args[0])
        k = v.type.elem.kind
        if name in ("plane_all", "plane_any"):
            if k != BOOL:
                raise self.error(e, f"cube.{name} of a {v.type} value", hint="pass a condition: x > 0")
        elif name not in ("plane_broadcast", "plane_shuffle", "plane_shuffle_xor") and k == BOOL:
            raise self.error(e, f"cube.{name} of bools", hint="use plane_any / plane_all")
        if nin == 2:
            lane = self.index(e, args[1])
            return self.op(name, v.type, v, lane)
        return self.op(name, v.type, v)

    def atomic(self, e: ast.Call, name: str, args: list[Any]) -> Any:
        arr, idx, v = self.nargs(e, name, args, 3)
        if not is_array(arr) or arr.kind == LOCAL_ARRAY:
            raise self.error(e, f"cube.{name} needs a global or shared array", hint=f"cube.{name}(out, i, v)")
        if arr.type.width != 1:
            raise self.error(e, f"cube.{name} on an array of lines")
        if arr.type.elem.kind == BOOL or arr.type.elem.bits < 32:
            raise self.error(e, f"cube.{name} on {arr.type.elem.name} (atomics need 32- or 64-bit elements)")
        v = self.coerce(e, v, arr.type) if not (is_rt(v) and v.type is not None) else v
        if v.type.elem is not arr.type.elem or v.type.width != 1:
            raise self.error(e, f"cube.{name} of a {v.type} value into an array of {arr.type}")
        return self.op(name, arr.type, arr, self.index(e, idx), v)


def _b_len(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if len(args) == 1 and is_array(args[0]):
        return x.array_method(e, ArrayMethod(args[0], "len"), [], {})
    if any(is_rt(a) for a in args):
        raise x.error(e, "len() of a runtime value")
    return len(*args)


def _b_minmax(name: str) -> Any:
    def h(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        if not any(is_rt(a) for a in args) and not (len(args) == 1 and any(is_rt(a) for a in args[0])):
            return (min if name == "min" else max)(*args, **kw)
        return x.minmax(e, name, args)

    return h


def _b_abs(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    return x.intrinsic(e, "abs", args, kw)


def _b_conv(elem: Elem) -> Any:
    def h(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
        if len(args) == 1 and not is_rt(args[0]):
            return {"f32": float, "i32": int, "bool_": bool}[elem.name](args[0])
        (v,) = x.nargs(e, elem.name, args, 1)
        return x.cast(e, v, elem, bits=False)

    return h


def _b_round(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if not any(is_rt(a) for a in args):
        return round(*args)
    return x.intrinsic(e, "round", args, kw)


def _b_pow(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    a, b = x.nargs(e, "pow", args, 2)
    return x.binary(e, "pow", a, b)


def _b_range(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> Any:
    if any(is_rt(a) for a in args):
        raise x.error(
            e,
            "range() with runtime bounds outside a for statement",
            hint="write the loop: for i in range(n): ...",
        )
    return range(*args)


def _b_print(x: Calls, e: ast.Call, args: list[Any], kw: dict[str, Any]) -> None:
    if any(is_rt(a) for a in args):
        raise x.error(e, "print() of a runtime value", hint="kernels have no output but arrays")
    print(*args, **kw)  # comptime: prints while the kernel expands
    return None


#: methods of comptime containers that change them, and those whose first argument is a key/index
_MUTATORS = {
    "list": frozenset({"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort", "__setitem__"}),
    "dict": frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__"}),
}
_KEYED = {
    "list": frozenset({"insert", "pop", "__getitem__", "__setitem__"}),
    "dict": frozenset({"get", "pop", "setdefault", "__getitem__", "__setitem__"}),
}

_PY_BUILTINS: dict[Any, Any] = {
    builtins.len: _b_len,
    builtins.min: _b_minmax("min"),
    builtins.max: _b_minmax("max"),
    builtins.abs: _b_abs,
    builtins.float: _b_conv(f32),
    builtins.int: _b_conv(i32),
    builtins.bool: _b_conv(bool_),
    builtins.round: _b_round,
    builtins.pow: _b_pow,
    builtins.range: _b_range,
    builtins.print: _b_print,
}
