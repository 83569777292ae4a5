"""``nn.Module``: the base class of every layer, with torch.nn.Module's names and semantics.

One class over ~720 lines: torch keeps ``Module`` in one module too; its registration, traversal,
state-dict, hook and device-moving methods all read and write the same three dicts.

State lives in three dicts, as in torch: ``_parameters``, ``_buffers`` and ``_modules``.
``__setattr__`` routes Parameters, Buffers and Modules into them and ``__getattr__`` (only
called when ordinary lookup fails) reads them back. ``__call__`` goes straight to ``forward``
when no hook is registered, so a layer costs one extra Python call over its ops.

Differences from torch (values, not storages):

* ``to(device)`` / ``float()`` / ... keep every Parameter object (its identity, and its
  ``.grad`` moved along) by rebinding it to the moved value; buffers are replaced by new
  tensors, as torch does. A Parameter moved to a device without autodiff holds values only
  (``requires_grad`` reads False) until it moves to an autodiff device again.
* ``load_state_dict`` copies values into the existing Parameter and buffer objects
  (optimizers holding them keep working); it accepts numpy arrays as well as tensors. Shapes print as tuples.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ... import dtype as dt
from ...backends.autodiff.mode import no_grad
from ...device import Device
from ...tensor import Tensor
from ..parameter import Buffer, Parameter, _rebind

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """As torch's: what ``load_state_dict`` did not match."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """As torch.utils.hooks.RemovableHandle: ``remove()`` unregisters the hook (also on
    leaving a ``with`` block)."""

    _next_id = itertools.count()

    def __init__(self, *dicts: dict[int, Any]) -> None:
        self.id = next(RemovableHandle._next_id)
        self._dicts = dicts

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


#: ``Module.to("cpu")``'s target: each tensor's own host device (``Tensor.cpu``)
_HOST: Any = object()


def _parse_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Device | None, dt.DType | None]:
    """torch's ``Module.to`` signatures: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``,
    ``to(tensor)``, keywords ``device=``/``dtype=``/``non_blocking=`` (accepted, ignored)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, Device):
            device = a
        elif isinstance(a, str) and a.split(":")[0].split("+")[0] in ("flex", "cpu", "cuda", "wgpu", "vulkan",
                                                                       "opengl"):
            device = a
        elif isinstance(a, bool):
            continue  # non_blocking given positionally
        else:
            dtype = a
    if isinstance(device, str):
        # "cpu" means the host, as Tensor.to("cpu") / .cpu(): a tensor on a host device stays
        # there with its autodiff wrapping (so ``model.to("cpu")`` keeps training); other
        # strings name a device exactly
        device = _HOST if device.strip().lower() in ("cpu", "cpu:0") else Device.parse(device)
    d = None
    if dtype is not None:
        d = dt.as_dtype(dtype)
        if not d.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={d}")
    return device, d


class Module:
    """As torch.nn.Module: subclass it, create parameters and submodules in ``__init__``
    (after ``super().__init__()``), compute in ``forward``."""

    training: bool
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: dict[str, Module | None]
    _forward_hooks: dict[int, Callable[..., Any]]
    _forward_pre_hooks: dict[int, Callable[..., Any]]

    # a class-level default so a subclass that forgets super().__init__() fails with a clear error
    _version = 1
    call_super_init = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", {})
        sa(self, "_buffers", {})
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", {})
        sa(self, "_forward_hooks", {})
        sa(self, "_forward_hooks_with_kwargs", set())
        sa(self, "_forward_hooks_always_called", set())
        sa(self, "_forward_pre_hooks", {})
        sa(self, "_forward_pre_hooks_with_kwargs", set())

    # ------------------------------------------------------------------ calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # fast path: two dict truth tests, then forward
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        called: set[int] = set()
        try:
            out = self.forward(*args, **kwargs)
            for hid, hook in list(self._forward_hooks.items()):
                called.add(hid)
                if hid in self._forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, out)
                else:
                    res = hook(self, args, out)
                if res is not None:
                    out = res
        except Exception:
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_always_called and hid not in called:
                    try:
                        if hid in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001, S110 - the original error is the one to raise (torch)
                        pass
            raise
        return out

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """As torch: ``hook(module, args)`` (or ``hook(module, args, kwargs)`` with
        ``with_kwargs=True``) runs before ``forward``; a non-None result replaces the inputs."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._move_first(self._forward_pre_hooks, handle.id)
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """As torch: ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs=True``) runs after ``forward``; a non-None result replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        if prepend:
            self._move_first(self._forward_hooks, handle.id)
        return handle

    @staticmethod
    def _move_first(d: dict[int, Any], key: int) -> None:
        v = d.pop(key)
        rest = list(d.items())
        d.clear()
        d[key] = v
        d.update(rest)

    # ------------------------------------------------------------------ registration
    def __getattr__(self, name: str) -> Any:
        # only reached when ordinary lookup fails (state lives in the three dicts); kept lean
        # because every `self.weight` in a forward comes through here
        d = self.__dict__
        try:
            params = d["_parameters"]
        except KeyError:
            raise AttributeError(f"cannot access '{name}': {type(self).__name__}.__init__() did not call "
                                 "super().__init__()") from None
        if name in params:
            return params[name]
        bufs = d["_buffers"]
        if name in bufs:
            return bufs[name]
        mods = d["_modules"]
        if name in mods:
            return mods[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, "_buffers", "_modules")
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(ember.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, "_parameters", "_buffers")
            d.pop(name, None)
            d["_modules"][name] = value
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(ember.nn.Module or None expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer):
            if "_buffers" not in d:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._remove_from(name, d, "_parameters", "_modules")
            d.pop(name, None)
            self.register_buffer(name, value, value.persistent)
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(ember.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name: str, d: dict[str, Any], *stores: str) -> None:
        for s in stores:
            store = d.get(s)
            if store is not None:
                store.pop(name, None)
        if "_non_persistent_buffers_set" in d and "_buffers" in stores:
            d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def _check_name(self, name: Any, kind: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """As torch: add a parameter (or None) under ``name``."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(ember.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """As torch: add a buffer (state that is not a parameter, e.g. running statistics);
        ``persistent=False`` keeps it out of ``state_dict``."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(ember.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """As torch: add a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """As torch: the submodule at the dotted path ``target`` ("" is self)."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """As torch: the parameter at the dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    def get_buffer(self, target: str) -> Tensor:
        """As torch: the buffer at the dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        b = mod._buffers[name]
        assert b is not None
        return b

    # ------------------------------------------------------------------ traversal
    def _named_members(self, get: Callable[[Module], Any], prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        # identity sets: Tensor.__eq__ is elementwise, so membership must not compare values
        memo: set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + "." + k if module_prefix else k), v

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """As torch: every parameter (each once), in registration order."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """As torch: ``(dotted name, parameter)`` pairs."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """As torch: every buffer (each once)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """As torch: ``(dotted name, buffer)`` pairs."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator[Module]:
        """As torch: the direct submodules (each once)."""
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """As torch: ``(name, direct submodule)`` pairs."""
        memo: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator[Module]:
        """As torch: self and every submodule, depth first (each once)."""
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: set[Any] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """As torch: ``(dotted name, module)`` for self (name ``prefix``) and every submodule."""
        if memo is None:
            memo = set()
        if self in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ------------------------------------------------------------------ modes, grads
    def train(self, mode: bool = True) -> Module:
        """As torch: set training mode on self and every submodule."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            if m is not None:
                m.train(mode)
        return self

    def eval(self) -> Module:
        """As torch: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """As torch: set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As torch: drop (or zero) every parameter's ``.grad``."""
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                from ...creation import zeros_like

                p.grad = zeros_like(g)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """As torch: call ``fn`` on every submodule (children first), then on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ device and dtype
    def _apply_tensors(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """Replace every parameter's value (rebinding the Parameter object, its grad moved by
        the same ``fn``) and every buffer (a new tensor, as torch) by ``fn`` of it."""
        if recurse:
            for m in self.children():
                m._apply_tensors(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                g = p.grad
                new = fn(p.detach())
                if new._bk is not p._bk or new._dt is not p._dt:
                    _rebind(p, new)
                    if g is not None and p.requires_grad:
                        p.grad = fn(g)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """As torch: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``. ``"cpu"``
        means the host as ``Tensor.to("cpu")`` does (a host tensor stays on its device, autodiff
        kept); other strings are ``Device.parse``'d. Floating point state takes the dtype;
        Parameter objects keep their identity."""
        device, d = _parse_to(args, kwargs)

        def fn(t: Tensor) -> Tensor:
            if device is _HOST:
                t = t.cpu()
            elif device is not None and t.device != device:
                t = t.to(device)
            if d is not None and t._dt.is_floating_point and t._dt is not d:
                t = t.to(d)
            return t

        return self._apply_tensors(fn)

    def cpu(self) -> Module:
        """As torch: move to the host (``Tensor.cpu`` per tensor: host tensors stay where they are,
        GPU tensors go to the default host device), keeping autodiff so the module trains."""
        return self.to("cpu")

    def _cast(self, d: dt.DType) -> Module:
        return self._apply_tensors(lambda t: t.to(d) if t._dt.is_floating_point and t._dt is not d else t)

    def float(self) -> Module:
        """As torch: floating point state to float32."""
        return self._cast(dt.float32)

    def double(self) -> Module:
        """As torch: floating point state to float64."""
        return self._cast(dt.float64)

    def half(self) -> Module:
        """As torch: floating point state to float16."""
        return self._cast(dt.float16)

    def bfloat16(self) -> Module:
        """As torch: floating point state to bfloat16."""
        return self._cast(dt.bfloat16)

    def type(self, dst_type: Any) -> Module:
        """As torch: every parameter and buffer to ``dst_type``."""
        d = dt.as_dtype(dst_type)
        return self._apply_tensors(lambda t: t.to(d) if t._dt is not d else t)

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args: Any, destination: dict[str, Any] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Any]:
        """As torch: an OrderedDict of every parameter and persistent buffer, by dotted name
        (each module's parameters, then its buffers, then its children's); detached unless
        ``keep_vars``."""
        if args:  # torch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str],
                              assign: bool = False) -> None:
        """Load this module's own parameters and persistent buffers (torch's hook point; the
        arguments are torch's)."""
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        for name, cur in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            src = state_dict[key]
            if isinstance(src, np.ndarray | np.generic):
                src_shape = tuple(np.shape(src))
            elif isinstance(src, Tensor):
                src_shape = src.shape
            else:
                error_msgs.append(f'While copying the parameter named "{key}", expected ember.Tensor or numpy '
                                  f"array from checkpoint but received {type(src)}")
                continue
            if src_shape != cur.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {src_shape} from "
                                  f"checkpoint, the shape in current model is {cur.shape}.")
                continue
            try:
                self._load_one(name, cur, src, assign)
            except Exception as ex:  # noqa: BLE001 - reported like torch, with the cause
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{cur.shape} and whose dimensions in the checkpoint are {src_shape}, an "
                                  f"exception occurred : {ex.args}.")
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    parts = key[len(prefix):].split(".", 1)
                    if len(parts) > 1:
                        if parts[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif parts[0] not in local:
                        unexpected_keys.append(key)

    def _load_one(self, name: str, cur: Tensor, src: Any, assign: bool) -> None:
        from ...creation import from_numpy

        if not isinstance(src, Tensor):
            src = from_numpy(np.array(src, order="C"), device=cur.device)  # (ascontiguousarray makes 0-d 1-d)
        with no_grad():
            if assign:
                if isinstance(cur, Parameter):
                    new = src if isinstance(src, Parameter) else Parameter(src, cur._wants_grad)
                    if isinstance(src, Parameter):
                        new.requires_grad_(cur._wants_grad)
                    self._parameters[name] = new
                else:
                    self._buffers[name] = src.detach()
                return
            if src.device != cur.device:
                src = src.to(cur.device)
            src = src.detach()
            if src._dt is not cur._dt:
                src = src.to(cur._dt)
            if isinstance(cur, Parameter):
                # into the same object: its identity and .grad survive, optimizers keep it
                g = cur.grad
                _rebind(cur, src)
                if g is not None and cur.requires_grad:
                    cur.grad = g
            else:
                cur.copy_(src)  # buffers keep their identity too, as torch's copy_ into them

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """As torch: copy values from ``state_dict`` into the parameters and buffers; returns
        ``_IncompatibleKeys(missing_keys, unexpected_keys)``; with ``strict`` a missing or
        unexpected key raises RuntimeError (a shape mismatch always does)."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        state_dict = OrderedDict(state_dict)

        def load(module: Module, local_sd: Mapping[str, Any], prefix: str = "") -> None:
            module._load_from_state_dict(local_sd, prefix, {}, True, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    cp = prefix + name + "."
                    load(child, {k: v for k, v in local_sd.items() if k.startswith(cp)}, cp)

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ printing
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """As torch: the text inside this module's ``repr`` parentheses (override it)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"

    def __dir__(self) -> list[str]:
        keys = set(dir(type(self))) | set(self.__dict__)
        keys |= set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
