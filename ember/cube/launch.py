"""``@cube.kernel`` / ``@cube.function`` objects and the launch path.

A launch resolves its arguments (tensors -> buffer views, line widths, scalars, comptime
values) into a small key; the first launch with a key builds a *plan*: the KernelId, the
compiled kernel (through the client's pipeline table) and a packing recipe for the
``info`` words. Later launches with the same key pay a dict lookup, one ``struct.pack_into``
and one ctypes call.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import dtype as dt
from .. import tracing
from ..errors import DTypeError, ShapeError
from .kernel_id import ArgSig, KernelId, flat_args, stable_repr
from .runtime import capture
from .runtime.tensor import CubeTensor
from .types import ArraySpec, Elem, ElemVar, Scalar, bool_, elem_of_dtype, f32, i32

if TYPE_CHECKING:  # the expander and compilers load at the first expansion, not at import
    from .compiler.base import InfoSlot
    from .lang.expand import ParamSpec, Target
    from .lang.source import FunctionSource

__all__ = ["CubeKernel", "CubeFunction", "CubeCount", "CubeDim", "LineArg", "lines", "kernel", "function"]


class CubeDim:
    """Units per cube (a GPU's block size): ``CubeDim(256)``, ``CubeDim(16, 16)``."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int = 1, y: int = 1, z: int = 1) -> None:
        if min(x, y, z) < 1:
            raise ValueError(f"CubeDim sizes must be >= 1, got ({x}, {y}, {z})")
        self.x, self.y, self.z = int(x), int(y), int(z)

    @property
    def units(self) -> int:
        return self.x * self.y * self.z

    def __eq__(self, o: object) -> bool:
        return isinstance(o, CubeDim) and (o.x, o.y, o.z) == (self.x, self.y, self.z)

    def __hash__(self) -> int:
        return hash((self.x, self.y, self.z))

    def __repr__(self) -> str:
        return f"CubeDim({self.x}, {self.y}, {self.z})"


class CubeCount:
    """Cubes per launch (a GPU's grid): ``CubeCount(8)``, ``CubeCount.covering(n, dim)``."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int = 1, y: int = 1, z: int = 1) -> None:
        if min(x, y, z) < 0:
            raise ValueError(f"CubeCount sizes must be >= 0, got ({x}, {y}, {z})")
        self.x, self.y, self.z = int(x), int(y), int(z)

    @staticmethod
    def covering(units: int, dim: CubeDim | int, max_x: int = 65535) -> CubeCount:
        """Enough cubes for ``units`` units (x first, spilling into y past ``max_x``, as GPUs
        limit the x extent); kernels bound-check ``ABSOLUTE_POS``. Past ``max_x`` the rows of
        the grid are evened out, so fewer than y cubes are surplus: a full last row of x = max_x
        cubes could add up to max_x - 1 idle cubes (half the grid for 2 * max_x + 1 cubes; on
        an H200 that cost a 256M-element fused chain 9% of its time)."""
        per = dim.units if isinstance(dim, CubeDim) else int(dim)
        n = max(-(-units // per), 1)
        if n <= max_x:
            return CubeCount(n)
        y = -(-n // max_x)
        return CubeCount(-(-n // y), y)

    @property
    def cubes(self) -> int:
        return self.x * self.y * self.z

    def __repr__(self) -> str:
        return f"CubeCount({self.x}, {self.y}, {self.z})"


class LineArg:
    """A tensor passed to a ``cube.Array[cube.Line[E]]`` parameter in lines of ``width``."""

    __slots__ = ("tensor", "width")

    def __init__(self, tensor: Any, width: int) -> None:
        if width not in (1, 2, 4, 8, 16):
            raise ValueError(f"line width must be 1, 2, 4, 8 or 16, got {width}")
        self.tensor = tensor
        self.width = width


def lines(tensor: Any, width: int) -> LineArg:
    """Pass ``tensor`` to a kernel as lines of ``width`` elements (its last dim must be
    contiguous and divisible by ``width``)."""
    return LineArg(tensor, width)


class CubeFunction:
    """A ``@cube.function``: inlined into the kernels that call it."""

    __cube_function__ = True

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._src: FunctionSource | None = None
        functools.update_wrapper(self, fn)

    def __cube_source__(self) -> FunctionSource:
        if self._src is None:
            from .lang.source import FunctionSource

            self._src = FunctionSource(self.fn)
        return self._src

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"@cube.function {self.fn.__qualname__} runs inside kernels only; call it from a "
            "@cube.kernel (it is inlined there)"
        )


def function(fn: Any) -> CubeFunction:
    """Decorator: a helper inlined into the kernels that call it."""
    return CubeFunction(fn)


# --------------------------------------------------------------------------- argument resolution

_SLOT_FMT = {
    "f16": "f4x",
    "bf16": "f4x",
    "f32": "f4x",
    "f64": "d",
    "i8": "i4x",
    "i16": "i4x",
    "i32": "i4x",
    "i64": "q",
    "u8": "I4x",
    "u16": "I4x",
    "u32": "I4x",
    "u64": "Q",
    "bool_": "?7x",
}


def _scalar_converter(e: Elem, name: str) -> Any:
    if e.name == "f16":
        return lambda v: float(np.float16(v))
    if e.name == "bf16":
        import ml_dtypes

        return lambda v: float(ml_dtypes.bfloat16(v))
    if e.is_float:
        return float
    if e.kind == "bool":
        return bool
    lo, hi = e.limits()

    def conv(v: Any) -> int:
        if type(v) is float or isinstance(v, np.floating):
            raise DTypeError(f"argument {name!r} is {e.name} but got the float {v!r}")
        i = int(v)
        if not lo <= i <= hi:
            raise ValueError(f"argument {name!r}: {i} does not fit {e.name}")
        return i

    return conv


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


class _Plan:
    """How to launch one specialisation: the function and how to fill its arguments."""

    __slots__ = (
        "compiled",
        "fn",
        "entry",
        "server",
        "n_bufs",
        "n_info",
        "fmt",
        "getters",
        "widths",
        "check_lines",
        "generic",
        "buf_type",
        "info_type",
    )

    def __init__(self, compiled: Any, server: Any, widths: list[int], getters: list[Any], fmt: str) -> None:
        self.compiled = compiled
        self.fn = compiled.fn
        self.entry = compiled.entry
        self.server = server
        self.widths = widths
        self.n_bufs = len(widths)
        self.getters = getters
        self.n_info = len(getters)
        self.fmt = struct.Struct(fmt)
        self.check_lines = any(w > 1 for w in widths)
        self.buf_type = ctypes.c_void_p * max(self.n_bufs, 1)
        self.info_type = ctypes.c_uint64 * max(self.n_info, 1)
        # the CPU server calls the compiled C function with (buffers, info, cx, cy, cz);
        # every other server takes the launch whole: server.launch(compiled, tensors, info, count)
        self.generic = not getattr(server, "ctypes_abi", False)

    def run(self, count: CubeCount, args: tuple[Any, ...], tensors: list[CubeTensor]) -> None:
        if self.check_lines:
            for t, w in zip(tensors, self.widths):
                if w > 1:
                    _check_lines(t, w)
        info = None
        if self.n_info:
            info = self.info_type()
            self.fmt.pack_into(info, 0, *[g(args, tensors) for g in self.getters])
        if capture.active:
            capture.launched(self, count, info, tensors, self._runs())
        if self.generic:
            if tracing.active:
                with tracing.span(
                    "launch", kernel=self.entry, stage=self.server.stage, channel=self.server.downstream.kind
                ):
                    self.server.launch(self.compiled, tensors, info, count)
            else:
                self.server.launch(self.compiled, tensors, info, count)
            return
        bufs = self.buf_type(*[t.ptr for t in tensors])
        if tracing.active:
            with tracing.span(
                "launch", kernel=self.entry, stage=self.server.stage, channel=self.server.downstream.kind
            ) as sp:
                if self.server.preparing_here():  # the tuner is preparing: this launch runs nothing
                    sp.record(prepared=True)
                self.server.execute(self.fn, bufs, info, count.x, count.y, count.z, tensors)
        else:
            self.server.execute(self.fn, bufs, info, count.x, count.y, count.z, tensors)


    def _runs(self) -> bool:
        """Whether a launch now runs (not while the tuner prepares: compiles only)."""
        if getattr(self.compiled, "pending", False):
            return False
        here = getattr(self.server, "preparing_here", None)
        return not (here is not None and here())

    def replayer(self, count: CubeCount, info: Any, slots: tuple[int, ...],
                 offsets: tuple[int, ...]) -> Callable[[list[Any]], None]:
        """A captured launch ready to run again: ``go(bufs)`` does what ``replay`` does with
        these slots and offsets; a runtime may prepare it once (CUDA: its parameter block and
        driver arguments)."""
        make = getattr(self.server, "replayer", None) if self.generic else None
        go = make(self.compiled, info, count, slots, offsets) if make is not None else None
        if go is not None:
            return go  # type: ignore[no-any-return]

        def go_(bufs: list[Any]) -> None:
            self.replay(count, info, bufs, slots, offsets)

        return go_

    def replay(self, count: CubeCount, info: Any, bufs: list[Any], slots: tuple[int, ...],
               offsets: tuple[int, ...]) -> None:
        """A captured launch again (``runtime.capture``): its info block as packed then, its
        buffer arguments ``bufs[slot]`` now, each read from the captured byte offset (same
        layouts, so no line checks). Only runtimes whose clients are ``replayable`` (CPU,
        CUDA) get here."""
        if self.generic:
            self.server.launch_ptrs(self.compiled, [bufs[s].ptr + o for s, o in zip(slots, offsets)], info, count)
        else:
            args = [bufs[s] for s in slots]
            ptrs = [b.ptr + o for b, o in zip(args, offsets)]
            self.server.execute(self.fn, self.buf_type(*ptrs), info, count.x, count.y, count.z, args)


def _check_lines(t: CubeTensor, w: int) -> None:
    """Lines of ``w`` read ``w`` consecutive elements: a contiguous view needs its element
    count and offset divisible by ``w``; a strided one also its last dim contiguous and
    every other stride a multiple of ``w``."""
    if (
        t.offset % w == 0
        and t.numel % w == 0
        and (
            t.is_contiguous()
            or (
                t.shape
                and t.shape[-1] % w == 0
                and t.strides[-1] == 1
                and not any(s % w for s in t.strides[:-1])
            )
        )
    ):
        return
    raise ShapeError(
        f"a tensor of shape {t.shape}, strides {t.strides}, offset {t.offset} cannot be read "
        f"in lines of {w}: its element count and offset must be multiples of {w} and, unless "
        f"it is contiguous, its last dim contiguous and its other strides multiples of {w}"
    )


def _meta_getter(slot: InfoSlot, k: int, width: int) -> Any:
    if slot.kind == "len":

        def g(args: Any, ts: list[CubeTensor]) -> int:
            t = ts[k]
            n = 1
            for s in t.shape:
                n *= s
            return n // width

        return g
    if slot.kind == "extent":  # checked mode: lines from the view's start to its buffer's end

        def extent(args: Any, ts: list[CubeTensor]) -> int:
            t = ts[k]
            return max(0, t.buffer.nbytes // t.dtype.itemsize - t.offset) // width

        return extent
    d = slot.dim
    if slot.kind == "shape":
        return lambda args, ts: ts[k].shape[d]
    return lambda args, ts: ts[k].strides[d]


class CubeKernel:
    """A ``@cube.kernel``: launch it with ``k.launch(device, CubeCount(..), CubeDim(..), *args)``."""

    __cube_kernel__ = True

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.name = f"{fn.__module__}.{fn.__qualname__}".replace("<locals>.", "")
        self._src: FunctionSource | None = None
        self._params: list[ParamSpec] | None = None
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        functools.update_wrapper(self, fn)

    def __cube_source__(self) -> FunctionSource:
        if self._src is None:
            from .lang.source import FunctionSource

            self._src = FunctionSource(self.fn)
        return self._src

    @property
    def params(self) -> list[ParamSpec]:
        if self._params is None:
            from .lang.expand import kernel_params

            self._params = kernel_params(self.__cube_source__())
        return self._params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"launch the kernel with {self.fn.__name__}.launch(device, cube.CubeCount(...), "
            "cube.CubeDim(...), *args)"
        )

    # ---------------------------------------------------------------- launch
    def launch(
        self,
        device: Any,
        count: CubeCount | int | tuple[int, ...],
        dim: CubeDim | int | tuple[int, ...],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        """Run the kernel on every unit of ``count`` cubes of ``dim`` units; outputs are written
        into the argument tensors' buffers in place."""
        if type(count) is not CubeCount:
            count = CubeCount(*count) if isinstance(count, tuple) else CubeCount(count)
        plan, args, tensors = self.resolve(device, dim, *args, **kwargs)
        plan.run(count, args, tensors)

    def resolve(
        self, device: Any, dim: CubeDim | int | tuple[int, ...], *args: Any, **kwargs: Any
    ) -> tuple[_Plan, tuple[Any, ...], list[Any]]:
        """What a launch with these arguments runs: its plan (compiled on first use), the bound
        arguments and the buffer views in parameter order; ``plan.run(count, args, tensors)``
        launches. A caller may keep the plan for later launches whose arguments give the same
        key (dtypes, ranks, line widths, comptime values, scalar types, buffer aliasing) and
        pass their own arguments and views: the key is then not built again. A plan whose
        ``compiled.pending`` is set (the tuner is preparing) launches nothing and must not be kept."""
        client = _client_of(device)
        if type(dim) is not CubeDim:
            dim = CubeDim(*dim) if isinstance(dim, tuple) else CubeDim(dim)
        params = self._params or self.params
        if kwargs or len(args) != len(params):
            args = self._bind(args, kwargs)
        key: list[Any] = [id(client), dim.x, dim.y, dim.z]
        tensors: list[Any] = []
        for p, a in zip(params, args):
            kind = p.kind
            if kind == "array":
                if type(a) is CubeTensor:  # the common case, without the call
                    key.append((a.dtype, len(a.shape), 0))
                    tensors.append(a)
                    continue
                if type(a) is LineArg:
                    t = a.tensor
                    if type(t) is not CubeTensor:
                        t = _array_of(t, p.name, False)
                    key.append((t.dtype, len(t.shape), a.width))
                else:
                    t = _array_of(a, p.name, False)
                    key.append((t.dtype, len(t.shape), 0))
                tensors.append(t)
            elif kind == "comptime":
                ta = type(a)
                key.append(a if ta is str or ta is int or ta is bool or ta is tuple else _hashable(a))
            elif kind == "sequence":
                items = _sequence_items(a, p.name)
                if p.spec.arrays:
                    sig = []
                    for x in items:
                        if type(x) is LineArg:
                            t = x.tensor
                            if type(t) is not CubeTensor:
                                t = _array_of(t, p.name, False)
                            sig.append((t.dtype, len(t.shape), x.width))
                        else:
                            t = x if type(x) is CubeTensor else _array_of(x, p.name, False)
                            sig.append((t.dtype, len(t.shape), 0))
                        tensors.append(t)
                    key.append(tuple(sig))
                else:
                    key.append(tuple(x[1] if type(x) in (tuple, list) else type(x) for x in items))
            elif type(p.spec) is ElemVar:
                key.append(type(a))
        if len(tensors) > 1:
            key.append(_aliases(tensors))
        k = tuple(key)
        plan = self._plans.get(k)
        if plan is None:
            plan = self._plan(client, k, args, tensors, dim)
        return plan, args, tensors

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        params = self.params
        if len(args) > len(params):
            raise TypeError(f"{self.fn.__name__} takes {len(params)} arguments, got {len(args)}")
        out = list(args)
        for p in params[len(args) :]:
            if p.name in kwargs:
                out.append(kwargs.pop(p.name))
            elif p.default is not _missing():
                out.append(p.default)
            else:
                raise TypeError(f"{self.fn.__name__}() is missing argument {p.name!r}")
        if kwargs:
            raise TypeError(f"{self.fn.__name__}() got unexpected arguments {sorted(kwargs)}")
        return tuple(out)

    def describe(
        self, dim: CubeDim, args: tuple[Any, ...], target: Target
    ) -> tuple[list[ArgSig], dict[ElemVar, Elem]]:
        """The ArgSigs and element bindings of a launch's arguments."""
        params = self.params
        bindings: dict[ElemVar, Elem] = {}
        arrays: list[Any] = []
        array_sigs: dict[tuple[int, int], ArgSig] = {}
        # arrays bind element variables first (a sequence's per element, not shared with the
        # signature); scalars then read (or bind) them. ``arrays`` is in buffer order.
        for i, (p, a) in enumerate(zip(params, args)):
            if p.kind == "array":
                array_sigs[(i, -1)] = _array_sig(p.name, p.spec, a, bindings, target, arrays)
            elif p.kind == "sequence" and p.spec.arrays:
                for k, x in enumerate(_sequence_items(a, p.name)):
                    array_sigs[(i, k)] = _array_sig(f"{p.name}[{k}]", p.spec.item, x, {}, target, arrays)
        out: list[ArgSig] = []
        for i, (p, a) in enumerate(zip(params, args)):
            if p.kind == "array":
                out.append(array_sigs[(i, -1)])
            elif p.kind == "sequence":
                items = _sequence_items(a, p.name)
                if p.spec.arrays:
                    elems = tuple(array_sigs[(i, k)] for k in range(len(items)))
                else:
                    elems = tuple(
                        ArgSig("scalar", f"{p.name}[{k}]", _sequence_scalar_elem(p.spec.item, x, f"{p.name}[{k}]"))
                        for k, x in enumerate(items)
                    )
                out.append(ArgSig("sequence", p.name, value=elems))
            elif p.kind == "scalar":
                spec = p.spec
                if isinstance(spec, ElemVar):
                    e = bindings.get(spec)
                    if e is None:
                        e = _infer_scalar_elem(a)
                        if not spec.accepts(e):
                            raise DTypeError(f"argument {p.name!r}: {spec!r} cannot bind to {e!r}")
                        bindings[spec] = e
                else:
                    e = spec
                out.append(ArgSig("scalar", p.name, e))
            else:
                stable_repr(a)  # checks the value can be part of a KernelId
                out.append(ArgSig("comptime", p.name, value=_hashable(a)))
        return out, bindings

    def kernel_id(
        self, dim: CubeDim | int, *args: Any, target: Target | None = None, **kwargs: Any
    ) -> KernelId:
        """The KernelId of a launch with these arguments (numpy arrays may stand for tensors)."""
        dim = dim if isinstance(dim, CubeDim) else CubeDim(dim)
        target = target or _default_target()
        args = self._bind(args, kwargs)
        sigs, _ = self.describe(dim, args, target)
        return KernelId(
            self.name, self.__cube_source__().digest, (dim.x, dim.y, dim.z), tuple(sigs), target.name
        )

    def ir(self, dim: CubeDim | int, *args: Any, target: Target | None = None, **kwargs: Any) -> Any:
        """The kernel IR of a launch with these arguments (no compiler, no device)."""
        dim = dim if isinstance(dim, CubeDim) else CubeDim(dim)
        target = target or _default_target()
        args = self._bind(args, kwargs)
        sigs, bindings = self.describe(dim, args, target)
        kid = KernelId(
            self.name, self.__cube_source__().digest, (dim.x, dim.y, dim.z), tuple(sigs), target.name
        )
        from .lang.expand import expand_kernel

        return expand_kernel(
            self.__cube_source__(),
            self.params,
            sigs,
            target,
            (dim.x, dim.y, dim.z),
            bindings,
            self.name,
            kid.entry(),
        )

    def source(self, dim: CubeDim | int, *args: Any, **kwargs: Any) -> str:
        """The C source of a launch with these arguments (the compile-only path)."""
        from .compiler.c import CCompiler

        return CCompiler().compile(self.ir(dim, *args, **kwargs)).source

    def _plan(
        self, client: Any, key: tuple[Any, ...], args: tuple[Any, ...], tensors: list[Any], dim: CubeDim
    ) -> _Plan:
        server = client.server
        target = _target_of(server.compiler)
        sigs, bindings = self.describe(dim, args, target)
        src, params = self.__cube_source__(), self.params
        kid = KernelId(self.name, src.digest, (dim.x, dim.y, dim.z), tuple(sigs), target.name)
        entry = kid.entry()

        def make_ir() -> Any:
            from .lang.expand import expand_kernel

            return expand_kernel(src, params, sigs, target, (dim.x, dim.y, dim.z), bindings, self.name, entry)

        compiled = client.pipeline(kid, make_ir)
        # info slots name parameters by their flat position (sequences expanded)
        flat = flat_args(sigs)
        tensor_index: dict[int, int] = {}
        widths: list[int] = []
        for fi, (_, _, s) in enumerate(flat):
            if s.kind == "array":
                tensor_index[fi] = len(widths)
                widths.append(s.width)
        getters: list[Any] = []
        fmt = "<"
        for slot in compiled.source.info:
            if slot.kind == "scalar":
                i, j, s = flat[slot.param]
                conv = _scalar_converter(slot.elem, s.name)
                if j < 0:
                    getters.append(lambda args, ts, conv=conv, i=i: conv(args[i]))
                else:
                    getters.append(lambda args, ts, conv=conv, i=i, j=j: conv(_pair_value(args[i][j])))
                fmt += _SLOT_FMT[slot.elem.name]
            else:
                k = tensor_index[slot.param]
                getters.append(_meta_getter(slot, k, widths[k]))
                fmt += "Q"
        plan = _Plan(compiled, server, widths, getters, fmt)
        if not getattr(compiled, "pending", False):  # a pending kernel's plan launches nothing: not kept
            self._plans[key] = plan
        return plan


def kernel(fn: Any) -> CubeKernel:
    """Decorator: a kernel function expanded to IR by walking its AST (see ember.cube)."""
    return CubeKernel(fn)


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


_targets: dict[int, Target] = {}


def _target_of(compiler: Any) -> Target:
    t = _targets.get(id(compiler))
    if t is None:
        caps = compiler.capabilities
        from .lang.expand import Target

        t = _targets[id(compiler)] = Target(
            compiler.target_name, caps.plane_size, caps.line_widths, caps.max_shared_bytes
        )
    return t


def _default_target() -> Target:
    from .compiler.c import CCompiler

    return _target_of(_C_COMPILER.setdefault(0, CCompiler()))


_C_COMPILER: dict[int, Any] = {}
_clients: dict[Any, Any] = {}


def _client_of(device: Any) -> Any:
    """The ComputeClient behind a Device, a cube backend, or a client itself."""
    c = _clients.get(device)
    if c is not None:
        return c
    if hasattr(device, "server") and hasattr(device, "pool"):
        return device
    inner = getattr(device, "client", None)
    if inner is None and hasattr(device, "backend"):
        bk = top = device.backend()
        while not hasattr(bk, "client") and hasattr(bk, "inner"):  # through the decorators
            bk = bk.inner
        inner = getattr(bk, "client", None)
        if inner is None:
            raise TypeError(f"{device!r} does not run cube kernels (backend {top.name}); use Device.cpu()")
    if inner is None:
        raise TypeError(
            f"cannot launch on {device!r}: pass an ember Device, a cube backend or a ComputeClient"
        )
    try:
        _clients[device] = inner
    except TypeError:
        pass
    return inner


def _missing() -> Any:
    from .lang.source import MISSING

    return MISSING
