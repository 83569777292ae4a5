"""``@cube.kernel`` / ``@cube.function`` objects: binding arguments, describing a launch
(KernelId, IR, source) and finding or building its plan.

A launch resolves its arguments (tensors -> buffer views, line widths, scalars, comptime
values) into a small key; the first launch with a key builds a *plan* (``plan.py``): the
KernelId, the compiled kernel (through the client's pipeline table) and a packing recipe for
the ``info`` words. Later launches with the same key pay a dict lookup, one
``struct.pack_into`` and one server call.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ...errors import DTypeError
from ..kernel_id import ArgSig, KernelId, flat_args, stable_repr
from ..runtime.tensor import CubeTensor
from ..types import Elem, ElemVar
from .args import (
    _aliases,
    _array_of,
    _array_sig,
    _hashable,
    _infer_scalar_elem,
    _pair_value,
    _sequence_items,
    _sequence_scalar_elem,
)
from .dims import CubeCount, CubeDim, LineArg
from .plan import _SLOT_FMT, _meta_getter, _Plan, _scalar_converter

if TYPE_CHECKING:  # the expander and compilers load at the first expansion, not at import
    from ..lang.expand import ParamSpec, Target
    from ..lang.source import FunctionSource

__all__ = ["CubeKernel", "CubeFunction", "kernel", "function"]


class CubeFunction:
    """A ``@cube.function``: inlined into the kernels that call it."""

    __cube_function__ = True

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._src: FunctionSource | None = None
        functools.update_wrapper(self, fn)

    def __cube_source__(self) -> FunctionSource:
        if self._src is None:
            from ..lang.source import FunctionSource

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
            from ..lang.source import FunctionSource

            self._src = FunctionSource(self.fn)
        return self._src

    @property
    def params(self) -> list[ParamSpec]:
        if self._params is None:
            from ..lang.expand import kernel_params

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
        from ..lang.expand import expand_kernel

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
        from ..compiler.c import CCompiler

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
            from ..lang.expand import expand_kernel

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


_targets: dict[int, Target] = {}


def _target_of(compiler: Any) -> Target:
    t = _targets.get(id(compiler))
    if t is None:
        caps = compiler.capabilities
        from ..lang.expand import Target

        t = _targets[id(compiler)] = Target(
            compiler.target_name, caps.plane_size, caps.line_widths, caps.max_shared_bytes
        )
    return t


def _default_target() -> Target:
    from ..compiler.c import CCompiler

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
    from ..lang.source import MISSING

    return MISSING
