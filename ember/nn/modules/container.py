"""Containers (as torch.nn): ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``. Children are registered under their index ("0", "1", ...) or key, so
state-dict names equal torch's."""

from __future__ import annotations

import itertools
import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module, _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _index(idx: Any, n: int, what: str) -> int:
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range")
    return i + n if i < 0 else i


class Sequential(Module):
    """As torch.nn.Sequential: ``Sequential(m0, m1, ...)`` or ``Sequential(OrderedDict(...))``;
    ``forward`` feeds each module's output to the next."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input: Any) -> Any:
        """Each module in order."""
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        i = _index(idx, len(self._modules), "Sequential")
        return list(self._modules.values())[i]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self._modules), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx: Any) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index(idx, len(keys), "Sequential")]]
        # torch renumbers so indices stay contiguous
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        out = Sequential()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module: Module) -> Sequential:
        """As torch: add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """As torch: insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """As torch: append every module of ``sequential``."""
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key: int) -> Module:
        """As torch: remove and return the module at ``key``."""
        v = self[key]
        del self[key]
        return v


class ModuleList(Module):
    """As torch.nn.ModuleList: a list of registered submodules (no forward)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self._modules), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self._modules), "ModuleList")), module)

    def __delitem__(self, idx: Any) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                del self._modules[str(k)]
        else:
            del self._modules[str(_index(idx, len(self._modules), "ModuleList"))]
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        out = ModuleList()
        for m in itertools.chain(self, other):
            out.append(m)
        return out

    def append(self, module: Module) -> ModuleList:
        """As torch: add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """As torch: append each of ``modules``."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """As torch: insert ``module`` before ``index``."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key: int) -> Module:
        """As torch: remove and return the module at ``key``."""
        v = self[key]
        del self[key]
        return v

    def __repr__(self) -> str:
        # torch's compact form: runs of equal reprs print once as "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        groups: list[list[Any]] = []
        for i, r in enumerate(reprs):
            if groups and groups[-1][2] == r:
                groups[-1][1] = i
            else:
                groups.append([i, i, r])
        lines = []
        for a, b, r in groups:
            body = _addindent(r, 2)
            if a == b:
                lines.append(f"({a}): {body}")
            else:
                lines.append(f"({a}-{b}): {b - a + 1} x {body}")
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Containers have no forward (torch's ModuleList neither); raises."""
        raise NotImplementedError("ModuleList has no forward; iterate over it")


class ModuleDict(Module):
    """As torch.nn.ModuleDict: an ordered dict of registered submodules."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[return-value]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """As torch: remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """As torch: remove and return ``key``'s module."""
        v = self[key]
        del self[key]
        return v

    def keys(self) -> Any:
        """As dict.keys."""
        return self._modules.keys()

    def items(self) -> Any:
        """As dict.items."""
        return self._modules.items()

    def values(self) -> Any:
        """As dict.values."""
        return self._modules.values()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """As torch: add ``modules`` (a mapping or an iterable of pairs)."""
        if isinstance(modules, Mapping):
            for k, m in modules.items():
                self[k] = m
        else:
            for j, kv in enumerate(modules):
                if len(kv) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} has length {len(kv)}; 2 is required")
                self[kv[0]] = kv[1]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Containers have no forward (torch's ModuleDict neither); raises."""
        raise NotImplementedError("ModuleDict has no forward; index it")


def _as_parameter(value: Any) -> Any:
    # torch wraps plain tensors assigned into a ParameterList/Dict as Parameters
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _param_repr(p: Any) -> str:
    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p.shape)
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"{kind} containing: [ember.{p.dtype.name} of size {size}]"
    return f"Object of type: {type(p).__name__}"


class ParameterList(Module):
    """As torch.nn.ParameterList: a list of registered parameters (tensors are wrapped)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return getattr(self, str(_index(idx, self._size, "ParameterList")))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, str(_index(idx, self._size, "ParameterList")), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(self._size))

    def __iadd__(self, parameters: Iterable[Any]) -> ParameterList:
        return self.extend(parameters)

    def append(self, value: Any) -> ParameterList:
        """As torch: add ``value`` at the end."""
        i = self._size
        self._size += 1
        setattr(self, str(i), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """As torch: append each of ``values``."""
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        """torch's ParameterList text inside the repr parentheses."""
        # torch's lines carry two leading spaces (visible when there is only one)
        return "\n".join(f"  ({i}): {_param_repr(p)}" for i, p in enumerate(self))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Containers have no forward (torch's ParameterList neither); raises."""
        raise NotImplementedError("ParameterList has no forward")


class ParameterDict(Module):
    """As torch.nn.ParameterDict: an ordered dict of registered parameters."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self) -> Any:
        """As dict.keys."""
        return self._keys.keys()

    def items(self) -> Iterator[tuple[str, Any]]:
        """As dict.items."""
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterator[Any]:
        """As dict.values."""
        return (self[k] for k in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        """As dict.get."""
        return self[key] if key in self else default

    def pop(self, key: str) -> Any:
        """As dict.pop."""
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        """As dict.clear."""
        for k in list(self._keys):
            del self[k]

    def update(self, parameters: Any) -> None:
        """As torch: add a mapping (a plain one in sorted key order, as torch) or an iterable of
        ``(key, parameter)`` pairs."""
        if isinstance(parameters, OrderedDict | ParameterDict):
            items = parameters.items()
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self) -> str:
        """torch's ParameterDict text inside the repr parentheses."""
        return "\n".join(f"  ({k}): {_param_repr(v)}" for k, v in self.items())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Containers have no forward (torch's ParameterDict neither); raises."""
        raise NotImplementedError("ParameterDict has no forward")
