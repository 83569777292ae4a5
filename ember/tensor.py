"""The user-facing Tensor: PyTorch names and semantics over the op catalog.

A Tensor is three slots: ``_p`` (its backend primitive), ``_bk`` (its device's Dispatch
backend) and ``_dt`` (its dtype). The API validates and normalises every call (shapes,
dims, dtype promotion, devices) *before* handing it to the backend, so errors surface on
the calling line on every device, lazy ones included, and backends may assume valid input.

Semantics differ from PyTorch in one documented way: tensors are values. In-place methods
(``add_``, ``x[i] = v``) rebind the tensor to the result; a view taken earlier keeps the
values it had (as with JAX's ``.at[].set``), and ``.numpy()`` returns a read-only array.
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _shape as S
from . import dtype as dt
from . import ops as _ops
from . import tracing
from .device import Device
from .errors import (
    AutodiffError,
    DeviceMismatchError,
    DTypeError,
    IntegerPowerError,
    ShapeError,
    ZeroDivisionByIntegerError,
)

__all__ = ["Tensor"]

_new = object.__new__
_SCALARS = (int, float, bool)
_DEFAULT_FLOAT = dt.float32

MinMax = namedtuple("MinMax", ["values", "indices"])

#: ``ember.indexing``, imported on first use (it imports this module; an import statement in
#: ``__getitem__`` would cost a microsecond per call)
_indexing: Any = None


class _AutocastGate:
    """Mixed precision's hook into the ops (``ember.amp.autocast_mode`` fills in the functions).

    ``active`` counts the enabled autocast regions of all threads: outside autocast an op pays
    one attribute read. Only when it is non-zero does an op ask ``lower``/``fp32`` (which look
    up the calling thread's state) for its inputs. Kept here so that ``import ember`` does not
    import ``ember.amp``."""

    __slots__ = ("active", "lower", "fp32", "suspend")

    def __init__(self) -> None:
        self.active = 0
        self.lower: Any = None
        self.fp32: Any = None
        self.suspend: Any = None


_autocast = _AutocastGate()


def _index_module() -> Any:
    global _indexing
    from . import indexing

    _indexing = indexing
    return indexing


def _make(p: Any, bk: Any, d: dt.DType) -> Tensor:
    t = _new(Tensor)
    t._p = p
    t._bk = bk
    t._dt = d
    return t


def _pyscalar(s: Any) -> Any:
    """Python scalar from a numpy scalar (numpy scalars are "strong" in numpy's promotion)."""
    if isinstance(s, np.generic):
        return s.item()
    return s


_scalar_for = dt.python_scalar


def _check_device(a: Tensor, b: Tensor) -> None:
    if a._bk is not b._bk:
        raise DeviceMismatchError(
            f"expected all tensors on one device, got {a._bk.device!r} and {b._bk.device!r}; "
            "move one with .to(device)"
        )


def _float_of(d: dt.DType) -> dt.DType:
    return d if d.category == dt.FLOAT else dt.get_default_dtype()


# --------------------------------------------------------------------------- op factories
# Each binary op is generated from its catalog name and a dtype rule, so the operator
# methods, the named methods and the ``ember.<op>`` functions share one implementation.

_ARITH, _TRUEDIV, _COMPARE, _LOGICAL, _FLOATONLY = range(5)


def _binary(op: str, rule: int, rop: str | None = None) -> Any:
    scalar_op = f"{op}_scalar"
    rscalar_op = f"r{op}_scalar" if rop is None else rop

    def forward(a: Tensor, b: Any) -> Tensor:
        if isinstance(b, Tensor):
            bk = a._bk
            pa, pb = a._p, b._p
            d = a._dt
            if b._bk is bk and b._dt is d and rule == _ARITH and d is not dt.bool_:
                if pa.shape != pb.shape:
                    S.broadcast(pa.shape, pb.shape)
                t = _new(Tensor)  # ``_make`` inline: this is every tensor-tensor op's path
                t._p = getattr(bk, op)(pa, pb)
                t._bk = bk
                t._dt = d
                return t
            return _tensor_tensor(op, rule, a, b)
        if isinstance(b, _SCALARS) or isinstance(b, np.generic):
            return _tensor_scalar(op, scalar_op, rule, a, _pyscalar(b), False)
        if isinstance(b, np.ndarray):
            return forward(a, a._from_like(b))
        return NotImplemented

    def reverse(a: Tensor, b: Any) -> Tensor:
        if isinstance(b, Tensor):  # a direct call, ``t.__radd__(u)`` / ``t.rsub(u)``: u op t
            return forward(b, a)
        if isinstance(b, _SCALARS) or isinstance(b, np.generic):
            return _tensor_scalar(op, rscalar_op, rule, a, _pyscalar(b), True)
        if isinstance(b, np.ndarray):
            return forward(a._from_like(b), a)
        return NotImplemented

    forward.__name__ = op
    if op in ("floor_div", "remainder"):
        return _checked_divisor(forward, reverse)
    if op == "pow":
        return _checked_power(forward, reverse)
    return forward, reverse


def _int_result(a: Tensor, b: Any) -> bool:
    """Whether ``a op b`` computes in an integer (or bool) dtype."""
    if isinstance(b, Tensor):
        return dt.result_type(a, b).category != dt.FLOAT
    if isinstance(b, _SCALARS) or isinstance(b, np.generic):
        return dt.scalar_result(a._dt, a.ndim, _pyscalar(b)).category != dt.FLOAT
    return False


def _raise_if_zero(divisor: Any, bk: Any) -> None:
    """PyTorch (CPU) raises for an integer division by zero. A Python scalar is checked
    always; a tensor divisor when its values can be read without draining a lazy stream
    (``Backend.is_ready``, as index ranges are): a queued divisor is not read, and a zero in
    it gives 0 (the kernels' answer, as on CUDA, where PyTorch does not check either)."""
    if isinstance(divisor, Tensor):
        if divisor.numel() == 0 or not (bk.eager or bk.is_ready(divisor._p)):
            return
        if not np.all(np.asarray(divisor.numpy())):
            raise ZeroDivisionByIntegerError("ZeroDivisionError: integer division or modulo by zero")
    elif not divisor:
        raise ZeroDivisionByIntegerError("ZeroDivisionError: integer division or modulo by zero")


def _checked_divisor(forward: Any, reverse: Any) -> Any:
    def f(a: Tensor, b: Any) -> Tensor:
        if _int_result(a, b):
            _raise_if_zero(b, a._bk)
        return forward(a, b)

    def r(a: Tensor, b: Any) -> Tensor:
        if _int_result(a, b):
            _raise_if_zero(a, a._bk)
        return reverse(a, b)

    f.__name__ = forward.__name__
    return f, r


def _checked_power(forward: Any, reverse: Any) -> Any:
    def f(a: Tensor, b: Any) -> Tensor:
        if (isinstance(b, int | np.integer) and not isinstance(b, bool | np.bool_) and b < 0
                and a._dt.category != dt.FLOAT):
            raise IntegerPowerError("Integers to negative integer powers are not allowed.")
        return forward(a, b)

    f.__name__ = forward.__name__
    return f, reverse


def _tensor_tensor(op: str, rule: int, a: Tensor, b: Tensor) -> Tensor:
    _check_device(a, b)
    if op == "sub" and a._dt is dt.bool_ and b._dt is dt.bool_:
        raise DTypeError("subtraction of two bool tensors is not supported; use logical_xor or ^")
    bk = a._bk
    pa, pb = a._p, b._p
    if pa.shape != pb.shape:
        S.broadcast(pa.shape, pb.shape)
    if rule == _LOGICAL:
        ca = cb = dt.bool_
        out = dt.bool_
    else:
        ca = a._dt if a._dt is b._dt else dt.result_type(a, b)
        if rule == _TRUEDIV or rule == _FLOATONLY:
            ca = _float_of(ca)
        cb = ca
        out = dt.bool_ if rule == _COMPARE else ca
    if a._dt is not ca:
        pa = bk.cast(pa, ca)
    if b._dt is not cb:
        pb = bk.cast(pb, cb)
    return _make(getattr(bk, op)(pa, pb), bk, out)


#: float binary ops of the registry without an ``<op>_scalar`` form (atan2, logaddexp, ...)
_NO_SCALAR_FORM = frozenset(_ops.names("binary", where=lambda o: not o.scalar_form))

_SWAPPED_COMPARE = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _tensor_scalar(op: str, scalar_op: str, rule: int, a: Tensor, s: Any, reverse: bool) -> Tensor:
    bk = a._bk
    p = a._p
    if rule == _LOGICAL or op in _NO_SCALAR_FORM:  # no scalar form in the catalog: a 0-d tensor
        d0 = dt.bool_ if rule == _LOGICAL else _float_of(dt.scalar_result(a._dt, len(p.shape), s))
        other = a._full_like_shape((), _scalar_for(d0, s), d0)
        return _tensor_tensor(op, rule, other, a) if reverse else _tensor_tensor(op, rule, a, other)
    d = dt.scalar_result(a._dt, len(p.shape), s)
    if rule == _TRUEDIV or rule == _FLOATONLY:
        d = _float_of(d)
    if a._dt is not d:
        p = bk.cast(p, d)
    s = _scalar_for(d, s)
    if rule == _COMPARE:
        name = f"{_SWAPPED_COMPARE[op]}_scalar" if reverse else scalar_op
        return _make(getattr(bk, name)(p, s), bk, dt.bool_)
    if reverse and op in ("add", "mul", "maximum", "minimum"):
        scalar_op = f"{op}_scalar"
    return _make(getattr(bk, scalar_op)(p, s), bk, d)


def _unary(op: str, float_only: bool) -> Any:
    def f(self: Tensor) -> Tensor:
        bk = self._bk
        d = self._dt
        p = self._p
        if float_only and d.category != dt.FLOAT:
            d = dt.get_default_dtype()
            p = bk.cast(p, d)
        return _make(getattr(bk, op)(p), bk, d)

    f.__name__ = op
    return f


def _predicate(op: str) -> Any:
    def f(self: Tensor) -> Tensor:
        return _make(getattr(self._bk, op)(self._p), self._bk, dt.bool_)

    f.__name__ = op
    return f


def _inplace(name: str) -> Any:
    def f(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self._assign(getattr(self, name)(*args, **kwargs))

    f.__name__ = name + "_"
    return f


class Tensor:
    """An n-dimensional array on a device, with PyTorch's API."""

    __slots__ = ("_p", "_bk", "_dt")
    __array_priority__ = 1000  # numpy defers ``ndarray + Tensor`` to Tensor.__radd__

    _p: Any
    _bk: Any
    _dt: dt.DType

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create tensors with ember.tensor(data), ember.zeros(...), ember.from_numpy(...)")

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._p.shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        return self.shape[S.norm_dim(dim, self.ndim)]

    @property
    def dtype(self) -> dt.DType:
        return self._dt

    @property
    def device(self) -> Device:
        return self._bk.device

    @property
    def ndim(self) -> int:
        return len(self._p.shape)

    def dim(self) -> int:
        return len(self._p.shape)

    def numel(self) -> int:
        return S.numel(self._p.shape)

    @property
    def is_floating_point(self) -> bool:
        return self._dt.is_floating_point

    # ------------------------------------------------------------------ autodiff
    @property
    def requires_grad(self) -> bool:
        return self._bk.is_tracked(self._p)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad:
            if not self._dt.is_floating_point:
                raise AutodiffError(f"only floating point tensors can require gradients, got {self._dt}")
            if not self._bk.is_tracked(self._p):
                self._p = self._bk.require_grad(self._p)
        elif self._bk.is_tracked(self._p):
            if not self._bk.is_leaf(self._p):
                raise AutodiffError("requires_grad_(False) is only allowed on leaf tensors; use .detach()")
            self._p = self._bk.detach(self._p)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._bk.is_leaf(self._p)

    @property
    def grad(self) -> Tensor | None:
        """As torch's ``.grad``: one Tensor object per leaf, returned on every access until it
        is replaced (set, or None); in-place ops on it change the stored gradient and backward
        accumulates into it."""
        bk = self._bk
        d = self._dt
        return bk.grad_tensor(self._p, lambda g: _make(g, bk, d))

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("grad must be a Tensor or None")
            _check_device(self, value)
            if value.shape != self.shape:
                raise ShapeError(f"grad of shape {value.shape} does not match the tensor's shape {self.shape}")
            if value._dt is not self._dt:
                raise DTypeError(f"assigned grad has dtype {value._dt}, but the tensor's dtype is {self._dt}")
        # the object itself becomes the gradient (``p.grad is value`` afterwards, as in torch)
        self._bk.set_grad_tensor(self._p, value)

    def backward(self, gradient: Tensor | None = None, retain_graph: bool = False) -> None:
        if not self._dt.is_floating_point:
            raise AutodiffError(f"backward() through a {self._dt} tensor: only floating point tensors "
                                "carry gradients")
        g = None
        if gradient is not None:
            if not isinstance(gradient, Tensor):
                gradient = self._from_like(np.asarray(gradient))
            _check_device(self, gradient)
            if gradient.shape != self.shape:
                raise ShapeError(f"gradient of shape {gradient.shape} does not match the output's "
                                 f"shape {self.shape}")
            g = gradient.to(self._dt)._p
        elif self.numel() != 1:
            raise AutodiffError(f"grad can be implicitly created only for scalar outputs (this output has "
                                f"shape {self.shape}); pass gradient=")
        self._bk.backward(self._p, g, retain_graph)

    def detach(self) -> Tensor:
        return _make(self._bk.detach(self._p), self._bk, self._dt)

    def detach_(self) -> Tensor:
        self._p = self._bk.detach(self._p)
        return self

    def retained_bytes(self) -> int:
        """Bytes the autodiff graph behind this tensor keeps alive for backward."""
        return self._bk.retained_bytes(self._p)

    # ------------------------------------------------------------------ read-out
    def numpy(self) -> np.ndarray:
        """The values as a read-only numpy array (drains pending work on lazy devices)."""
        if tracing.active:
            with tracing.span("into_data", layer="tensor"):
                a = self._bk.into_data(self._p)
        else:
            a = self._bk.into_data(self._p)
        # numpy returns scalars for 0-d results: Flex primitives may be np.generic
        a = a.view() if type(a) is np.ndarray else np.asarray(a)
        a.flags.writeable = False
        return a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        if dtype is not None:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule of the values: zero copy on CUDA devices (``ember.dlpack``)."""
        from .dlpack import to_dlpack

        return to_dlpack(self, stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        from .dlpack import dlpack_device

        return dlpack_device(self)

    def tolist(self) -> Any:
        a = self.numpy()
        if self._dt is dt.bfloat16 or self._dt is dt.float16:
            a = a.astype(np.float32)
        return a.tolist()

    def item(self) -> Any:
        """As ``torch.Tensor.item``: the one element as a Python scalar (ShapeError otherwise)."""
        if self._p.shape and self.numel() != 1:  # a 0-d tensor has one element
            raise ShapeError(f"a tensor with {self.numel()} elements cannot be converted to a Python scalar")
        if tracing.active:
            v = np.asarray(self.numpy()).item()
        else:  # one element: read as a scalar (no array, no read-only view)
            v = self._bk.item(self._p)
        if self._dt.is_floating_point:
            return float(v)
        return v

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dt.category != dt.INT or self.numel() != 1:
            raise TypeError("only integer tensors of one element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(f"the truth value of a tensor with {self.numel()} elements is ambiguous; "
                             "use .any() or .all()")
        return bool(self.item())

    def __len__(self) -> int:
        if not self._p.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._p.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if not self._p.shape:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._p.shape[0]):
            yield self[i]

    __hash__ = object.__hash__

    def __format__(self, spec: str) -> str:
        """``format(t, '.2f')`` formats a 0-d tensor's value (as torch); other tensors and an
        empty spec format as ``str``."""
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __reduce__(self) -> Any:
        """Tensors pickle through their values: (numpy array, dtype name, device spec,
        requires_grad); unpickling restores them on the same device when it is available
        here, else on the default device (bfloat16 travels as its uint16 bits)."""
        a = np.ascontiguousarray(self.numpy())
        if self._dt is dt.bfloat16:
            a = a.view(np.uint16)
        return (_unpickle, (np.array(a), self._dt.name, self._bk.device.spec, bool(self.requires_grad)))

    def __repr__(self) -> str:
        a = np.asarray(self.numpy())
        if self._dt is dt.bfloat16 or self._dt is dt.float16:
            a = a.astype(np.float32)
        body = np.array2string(a, separator=", ", prefix="tensor(", threshold=1000,
                               precision=4, suppress_small=False)
        extras = []
        if self._dt not in (dt.float32, dt.int64, dt.bool_):
            extras.append(f"dtype={self._dt!r}")
        if self._bk.device.inner().spec != ("flex",):
            extras.append(f"device={self._bk.device!r}")
        if self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    __str__ = __repr__

    # ------------------------------------------------------------------ helpers
    def _from_like(self, array: np.ndarray) -> Tensor:
        from .creation import from_numpy

        return from_numpy(np.asarray(array), device=self._bk.device)

    def _full_like_shape(self, shape: tuple[int, ...], value: Any, d: dt.DType) -> Tensor:
        return _make(self._bk.full(shape, value, d), self._bk, d)

    def _assign(self, result: Tensor) -> Tensor:
        """Rebind self to ``result`` (the in-place protocol), keeping dtype and shape."""
        bk = self._bk
        if result._bk is not bk:
            raise DeviceMismatchError(f"in-place result on {result.device!r}, tensor on {self.device!r}")
        if result.shape != self.shape:
            raise ShapeError(f"in-place result of shape {result.shape} does not fit the tensor's "
                             f"shape {self.shape}")
        if result._dt is not self._dt and result._dt.category > self._dt.category:
            raise DTypeError(f"result type {result._dt} of an in-place operation can't be cast to the "
                             f"tensor's dtype {self._dt}")
        p = result._p if result._dt is self._dt else bk.cast(result._p, self._dt)
        if bk.is_tracked(self._p) and bk.is_leaf(self._p):
            from .backends.autodiff import is_grad_enabled

            if is_grad_enabled():
                raise AutodiffError("a leaf tensor that requires grad is used in an in-place operation; "
                                    "wrap the update in `with ember.no_grad():`")
            p = bk.replace_value(self._p, p)
        self._p = p
        return self

    # ------------------------------------------------------------------ casting, devices
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """As ``torch.Tensor.to``: ``to(dtype, non_blocking=False, copy=False)``,
        ``to(device, dtype=None, non_blocking=False, copy=False)``, ``to(other, non_blocking,
        copy)``; ``memory_format=`` is accepted and ignored (layouts are not observable).

        The string ``"cpu"`` (as ``.cpu()``) means the host: a tensor already on a host device
        (Flex, the Cube CPU device) stays there; one on a GPU device moves to the default device
        when that is a host device, else to Flex, keeping its autodiff wrapping. Every other
        string or a ``Device`` names the target exactly (``"cpu"`` in creation functions is
        ``Device.cpu()``). A move across devices carries values, not gradient flow."""
        target_dev = kwargs.pop("device", None)
        target_dt = kwargs.pop("dtype", None)
        non_blocking = kwargs.pop("non_blocking", False)
        copy = bool(kwargs.pop("copy", False))
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        flags: list[bool] = []
        for a in args:
            if isinstance(a, bool):  # before dtypes: positional non_blocking / copy
                flags.append(a)
            elif isinstance(a, Device):
                target_dev = a
            elif isinstance(a, Tensor):
                target_dev, target_dt = a.device, a.dtype
            elif isinstance(a, str) and a.split(":")[0].split("+")[0] in ("flex", "cpu", "cuda", "wgpu", "vulkan",
                                                                          "opengl"):
                target_dev = a
            elif a is None:
                continue
            else:
                target_dt = a
        if len(flags) > 2:
            raise TypeError("to() takes at most two bool arguments (non_blocking, copy)")
        if len(flags) == 2:
            non_blocking, copy = flags
        elif len(flags) == 1:
            non_blocking = flags[0]
        del non_blocking  # every transfer completes before the call returns (values)
        if isinstance(target_dev, str):
            target_dev = self._host_device() if target_dev.strip().lower() in ("cpu", "cpu:0") \
                else Device.parse(target_dev)
        t = self
        if target_dev is not None and target_dev != self._bk.device:
            src = self.numpy()
            bk = target_dev.backend()
            t = _make(bk.from_data(src, self._dt), bk, self._dt)
            copy = False
        if target_dt is not None:
            d = dt.as_dtype(target_dt)
            if d is not t._dt:
                t = _make(t._bk.cast(t._p, d), t._bk, d)
                copy = False
        return t.clone() if copy else t

    def new_full(self, size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_full``: this tensor's dtype and device unless given."""
        from .creation import full

        return full(tuple(size), fill_value, dtype=dtype if dtype is not None else self._dt,
                    device=device if device is not None else self.device, requires_grad=requires_grad)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_zeros``."""
        return self.new_full(_raw(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_ones``."""
        return self.new_full(_raw(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_empty`` (zeros, as ``ember.empty``)."""
        return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_tensor``."""
        from .creation import tensor

        return tensor(data, dtype=dtype if dtype is not None else self._dt,
                      device=device if device is not None else self.device, requires_grad=requires_grad)

    def _host_device(self) -> Device:
        """Where ``.cpu()`` / ``.to("cpu")`` go (see ``to``)."""
        dev = self._bk.device
        inner = dev.inner()
        if inner.spec[0] in ("flex", "fusion") or (inner.spec[0] == "cube" and inner.spec[1] == "cpu"):
            return dev
        from .creation import get_default_device

        host = get_default_device().inner()
        if not (host.spec[0] in ("flex", "fusion") or (host.spec[0] == "cube" and host.spec[1] == "cpu")):
            host = Device.flex()
        return host.autodiff() if dev.is_autodiff else host

    def cpu(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.cpu``: the tensor on the host (``to("cpu")``: a host tensor is
        returned as is, a GPU one moves to the default host device keeping autodiff)."""
        return self.to(self._host_device())

    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.cuda``: the tensor on ``Device.cuda(device)`` (index or device),
        keeping its autodiff wrapping."""
        if isinstance(device, Device):
            target = device
        else:
            if isinstance(device, str):
                device = int(device.partition(":")[2] or 0)
            target = Device.cuda(0 if device is None else int(device))
            if self._bk.device.is_autodiff:
                target = target.autodiff()
        return self.to(target)

    def type(self, d: Any) -> Tensor:
        return self.to(d)

    def float(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.float`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float32)

    def double(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.double`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float64)

    def half(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.half`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.float16)

    def bfloat16(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.bfloat16`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.bfloat16)

    def int(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.int`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.int32)

    def long(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.long`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.int64)

    def bool(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.bool`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.bool_)

    def byte(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.byte`` (``memory_format`` accepted and ignored)."""
        return self.to(dt.uint8)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.contiguous``; ``memory_format`` is accepted and ignored."""
        return _make(self._bk.contiguous(self._p), self._bk, self._dt)

    def clone(self, *, memory_format: Any = None) -> Tensor:
        """As ``torch.Tensor.clone``; ``memory_format`` is accepted and ignored."""
        return _make(self._bk.copy(self._p), self._bk, self._dt)

    def _op(self, name: str, *args: Any, dtype: dt.DType | None = None) -> Tensor:
        """The registry op ``name`` of this tensor and ``args`` (Tensor arguments, which must
        share this tensor's device, are passed as their primitives), as a tensor of ``dtype``
        (default: this tensor's). How the registry's fronts (``ember.ops``) call their op."""
        bk = self._bk
        call = []
        for a in args:
            if isinstance(a, Tensor):
                _check_device(self, a)
                call.append(a._p)
            else:
                call.append(a)
        return _make(getattr(bk, name)(self._p, *call), bk, self._dt if dtype is None else dtype)

    # ------------------------------------------------------------------ arithmetic
    _add, radd = _binary("add", _ARITH)
    _sub, _rsub = _binary("sub", _ARITH)
    mul, rmul = _binary("mul", _ARITH)
    _div, rdiv = _binary("div", _TRUEDIV)
    floor_divide, rfloor_divide = _binary("floor_div", _ARITH)
    remainder, rremainder = _binary("remainder", _ARITH)
    pow, rpow = _binary("pow", _ARITH)
    maximum, _rmaximum = _binary("maximum", _ARITH)
    minimum, _rminimum = _binary("minimum", _ARITH)
    atan2, _ratan2 = _binary("atan2", _FLOATONLY, rop="atan2_scalar_unsupported")
    eq, _req = _binary("eq", _COMPARE)
    ne, _rne = _binary("ne", _COMPARE)
    lt, _rlt = _binary("lt", _COMPARE)
    le, _rle = _binary("le", _COMPARE)
    gt, _rgt = _binary("gt", _COMPARE)
    ge, _rge = _binary("ge", _COMPARE)
    logical_and, _rland = _binary("logical_and", _LOGICAL)
    logical_or, _rlor = _binary("logical_or", _LOGICAL)
    logical_xor, _rlxor = _binary("logical_xor", _LOGICAL)

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.add``: ``self + alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._add(other)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.sub``: ``self - alpha * other``."""
        if alpha != 1:
            other = other * alpha
        return self._sub(other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """As ``torch.div``: true division, or ``rounding_mode='trunc'`` / ``'floor'``."""
        if rounding_mode is None:
            return self._div(other)
        if rounding_mode == "floor":
            return self.floor_divide(other)
        if rounding_mode != "trunc":
            raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                             f"{rounding_mode!r}")
        if not _int_result(self, other):
            return self._div(other).trunc()
        q = self.floor_divide(other)  # raises for a zero divisor
        # floor and trunc differ where the division is inexact and the signs differ
        r = self.remainder(other)
        fix = r.ne(0).logical_and((self < 0).logical_xor(other < 0 if isinstance(other, Tensor)
                                                         else self._full_like_shape((), other < 0, dt.bool_)))
        return q + fix.to(q._dt)

    true_divide = divide = _div
    multiply = mul
    subtract = sub
    greater, less, greater_equal, less_equal = gt, lt, ge, le

    __add__, __radd__ = _add, radd
    __sub__, __rsub__ = _sub, _rsub

    def rsub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """As ``torch.rsub``: ``other - alpha * self``."""
        return (self if alpha == 1 else self * alpha)._rsub(other)
    __mul__, __rmul__ = mul, rmul
    __truediv__, __rtruediv__ = _div, rdiv
    __rdiv__ = rdiv
    __floordiv__, __rfloordiv__ = floor_divide, rfloor_divide
    __mod__, __rmod__ = remainder, rremainder
    __pow__, __rpow__ = pow, rpow
    __eq__ = eq  # type: ignore[assignment]
    __ne__ = ne  # type: ignore[assignment]
    __lt__, __le__, __gt__, __ge__ = lt, le, gt, ge

    # bitwise ops: integers and bools (bools take the logical ops); floats raise, as torch
    def _bitwise_operands(self, other: Any, what: str) -> tuple[Tensor, Tensor] | None:
        if isinstance(other, np.ndarray):
            other = self._from_like(other)
        if isinstance(other, Tensor):
            _check_device(self, other)
            d = dt.result_type(self, other)
        elif isinstance(other, _SCALARS) or isinstance(other, np.generic):
            other = _pyscalar(other)
            d = dt.scalar_result(self._dt, self.ndim, other)
            other = self._full_like_shape((), _scalar_for(d, other), d)
        else:
            return None
        if d.category == dt.FLOAT:
            raise DTypeError(f"{what} is only defined for integer and bool tensors, got {d}")
        a = self if self._dt is d else self.to(d)
        b = other if other._dt is d else other.to(d)
        return a, b

    def _bitwise(self, other: Any, op: str, logical: str) -> Tensor:
        ab = self._bitwise_operands(other, op)
        if ab is None:
            return NotImplemented
        a, b = ab
        if a._dt is dt.bool_:
            return getattr(a, logical)(b)
        return _tensor_tensor(op, _ARITH, a, b)

    def bitwise_and(self, other: Any) -> Tensor:
        """As ``torch.bitwise_and`` (integer and bool tensors)."""
        return self._bitwise(other, "bitwise_and", "logical_and")

    def bitwise_or(self, other: Any) -> Tensor:
        """As ``torch.bitwise_or``."""
        return self._bitwise(other, "bitwise_or", "logical_or")

    def bitwise_xor(self, other: Any) -> Tensor:
        """As ``torch.bitwise_xor``."""
        return self._bitwise(other, "bitwise_xor", "logical_xor")

    def bitwise_not(self) -> Tensor:
        """As ``torch.bitwise_not``: ``~x`` (logical not for bools; -x - 1 for signed, max - x
        for unsigned integers, which is the complement of every bit)."""
        if self._dt is dt.bool_:
            return self.logical_not()
        if self._dt.category == dt.FLOAT:
            raise DTypeError(f"bitwise_not is only defined for integer and bool tensors, got {self._dt}")
        if self._dt is dt.uint8:
            return self._rsub(255)
        return _make(self._bk.sub_scalar(self._bk.neg(self._p), 1), self._bk, self._dt)

    def _shift(self, other: Any, left: bool) -> Tensor:
        what = "bitwise_left_shift" if left else "bitwise_right_shift"
        ab = self._bitwise_operands(other, what)
        if ab is None:
            return NotImplemented
        a, b = ab
        if a._dt is dt.bool_:
            a, b = a.long(), b.long()
        d = a._dt
        bits = 8 * d.itemsize
        signed = d is not dt.uint8
        two = a._full_like_shape((), 2, d)
        # shifts compose from exact integer arithmetic: a << b = a * 2**b (wrapping, like the
        # hardware shift) and a >> b = floor(a / 2**b) (arithmetic for signed types); amounts
        # past the width give 0 (or -1 for a negative a >> b), as PyTorch's CPU kernels do
        top = bits - 2 if signed and not left else bits - 1
        bc = b.clamp(0, top)
        p2 = _tensor_tensor("pow", _ARITH, two, bc)
        zero = a._full_like_shape((), 0, d)
        from .functional import where

        if left:
            return where(b.ge(bits), zero, _tensor_tensor("mul", _ARITH, a, p2))
        q = _tensor_tensor("floor_div", _ARITH, a, p2)
        if not signed:
            return where(b.ge(bits), zero, q)
        sat = where(a.lt(0), a._full_like_shape((), -1, d), zero)
        return where(b.gt(top), sat, q)

    def bitwise_left_shift(self, other: Any) -> Tensor:
        """As ``torch.bitwise_left_shift`` (``<<``)."""
        return self._shift(other, True)

    def bitwise_right_shift(self, other: Any) -> Tensor:
        """As ``torch.bitwise_right_shift`` (``>>``; arithmetic for signed types)."""
        return self._shift(other, False)

    __and__ = __rand__ = bitwise_and
    __or__ = __ror__ = bitwise_or
    __xor__ = __rxor__ = bitwise_xor
    __invert__ = bitwise_not
    __lshift__ = bitwise_left_shift
    __rshift__ = bitwise_right_shift

    def __rlshift__(self, other: Any) -> Tensor:
        ab = self._bitwise_operands(other, "bitwise_left_shift")
        return NotImplemented if ab is None else ab[1]._shift(ab[0], True)

    def __rrshift__(self, other: Any) -> Tensor:
        ab = self._bitwise_operands(other, "bitwise_right_shift")
        return NotImplemented if ab is None else ab[1]._shift(ab[0], False)

    # ------------------------------------------------------------------ unary math
    neg = _unary("neg", False)
    abs = _unary("abs", False)
    sign = _unary("sign", False)
    exp = _unary("exp", True)
    log = _unary("log", True)
    log1p = _unary("log1p", True)
    expm1 = _unary("expm1", True)
    sqrt = _unary("sqrt", True)
    rsqrt = _unary("rsqrt", True)
    sin = _unary("sin", True)
    cos = _unary("cos", True)
    tan = _unary("tan", True)
    tanh = _unary("tanh", True)
    sigmoid = _unary("sigmoid", True)
    erf = _unary("erf", True)
    reciprocal = _unary("reciprocal", True)
    relu = _unary("relu", False)
    silu = _unary("silu", True)
    def square(self) -> Tensor:
        """As ``torch.square`` (a bool tensor squares as int64, as torch)."""
        t = self.long() if self._dt is dt.bool_ else self
        return _make(t._bk.square(t._p), t._bk, t._dt)

    logical_not = _predicate("logical_not")
    isnan = _predicate("isnan")
    isinf = _predicate("isinf")
    isfinite = _predicate("isfinite")

    def _rounding(op: str) -> Any:  # type: ignore[misc]
        def f(self: Tensor) -> Tensor:
            if self._dt.category != dt.FLOAT:
                return self
            return _make(getattr(self._bk, op)(self._p), self._bk, self._dt)

        f.__name__ = op
        return f

    floor = _rounding("floor")
    ceil = _rounding("ceil")
    _round = _rounding("round")
    trunc = _rounding("trunc")
    fix = trunc
    del _rounding

    def round(self, decimals: int = 0) -> Tensor:
        """As ``torch.round``: half to even; ``decimals`` rounds at 10**-decimals as torch does
        (``round(x * 10**d) / 10**d``, or ``round(x / 10**-d) * 10**-d`` for negative d)."""
        if not decimals:
            return self._round()
        if self._dt.category != dt.FLOAT:
            raise DTypeError(f"round with decimals is not defined for {self._dt} tensors")
        ten = 10.0 ** builtins.abs(int(decimals))
        if decimals > 0:
            return (self * ten)._round() / ten
        return (self / ten)._round() * ten

    def __neg__(self) -> Tensor:
        if self._dt is dt.bool_:
            raise DTypeError("negation of a bool tensor is not supported; use ~ or logical_not()")
        return _make(self._bk.neg(self._p), self._bk, self._dt)

    __abs__ = abs

    def __pos__(self) -> Tensor:
        return self

    negative = __neg__
    absolute = abs

    def gelu(self, approximate: str = "none") -> Tensor:
        t = self if self._dt.is_floating_point else self.float()
        if approximate == "none":
            return _make(t._bk.gelu(t._p), t._bk, t._dt)
        if approximate == "tanh":
            return _make(t._bk.gelu_tanh(t._p), t._bk, t._dt)
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        if min is None and max is None:
            raise ValueError("clamp needs at least one of min and max")
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            t = self
            if min is not None:
                t = t.maximum(min) if isinstance(min, Tensor) else t.clamp(min=min)
            if max is not None:
                t = t.minimum(max) if isinstance(max, Tensor) else t.clamp(max=max)
            return t
        lo, hi = _pyscalar(min), _pyscalar(max)
        d = self._dt
        for s in (lo, hi):
            if s is not None:
                d = dt.promote_types(d, dt.scalar_result(self._dt, self.ndim, s))
        p = self._p if d is self._dt else self._bk.cast(self._p, d)
        lo = None if lo is None else _scalar_for(d, lo)
        hi = None if hi is None else _scalar_for(d, hi)
        return _make(self._bk.clamp(p, lo, hi), self._bk, d)

    clip = clamp

    def where(self, condition: Tensor, other: Any) -> Tensor:
        from .functional import where

        return where(condition, self, other)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        """As ``torch.masked_fill``: ``value`` (a scalar or a 0-d tensor, converted to the
        tensor's dtype; a tensor value gets the gradient of the filled positions) where
        ``mask``; the result has the broadcast shape of the tensor and the mask."""
        if not isinstance(mask, Tensor) or mask._dt is not dt.bool_:
            raise DTypeError("masked_fill expects a bool mask tensor")
        _check_device(self, mask)
        shape = S.broadcast(mask.shape, self.shape)
        t = self if shape == self.shape else self.expand(shape)
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor "
                                 f"with {value.ndim} dimension(s)")
            _check_device(self, value)
            if value.requires_grad and self._dt.is_floating_point:
                from .functional import where

                return where(mask, value.to(self._dt), t)
            value = value.item()
        value = _pyscalar(value)
        # like PyTorch, the value is converted to the tensor's dtype
        return _make(t._bk.masked_fill(t._p, mask._p, _scalar_for(t._dt, value)), t._bk, t._dt)

    # ------------------------------------------------------------------ in-place
    add_ = _inplace("add")
    sub_ = _inplace("sub")
    mul_ = _inplace("mul")
    div_ = _inplace("div")
    pow_ = _inplace("pow")
    clamp_ = _inplace("clamp")
    masked_fill_ = _inplace("masked_fill")
    relu_ = _inplace("relu")
    neg_ = _inplace("neg")
    exp_ = _inplace("exp")

    def copy_(self, src: Any) -> Tensor:
        if not isinstance(src, Tensor):
            src = self._from_like(np.asarray(src))
        if src._bk is not self._bk:
            src = src.to(self._bk.device)
        return self._assign(src.to(self._dt).expand(self.shape))

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def fill_(self, value: Any) -> Tensor:
        if isinstance(value, Tensor):
            value = value.item()
        v = _scalar_for(self._dt, _pyscalar(value))
        if self._bk.is_tracked(self._p) and not self._bk.is_leaf(self._p):
            # stay in the graph with a zero gradient, as PyTorch's fill_ does
            every = self._full_like_shape((), True, dt.bool_)
            return self._assign(self.masked_fill(every, v))
        return self._assign(self._full_like_shape(self.shape, v, self._dt))

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

    # ------------------------------------------------------------------ reductions
    def _reduce(self, op: str, dim: Any, keepdim: bool, d: dt.DType | None = None) -> Tensor:
        p, bk = self._p, self._bk
        dims = S.norm_dims(dim, len(p.shape))
        d = d or self._dt
        if d is not self._dt:
            p = bk.cast(p, d)
        if not dims:  # 0-d tensor: reducing nothing
            return _make(p, bk, d)
        t = _new(Tensor)
        t._p = getattr(bk, op)(p, dims, keepdim)
        t._bk = bk
        t._dt = d
        return t

    def sum(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        return self._reduce("sum", dim, keepdim, d)

    def prod(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        return self._reduce("prod", dim, keepdim, d)

    def mean(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        d = dt.as_dtype(dtype) if dtype is not None else self._dt
        if d.category != dt.FLOAT:
            raise DTypeError(f"mean() needs a floating point input, got {self._dt}; pass dtype= or "
                             "call .float() first")
        if self.numel() == 0:
            return self._reduce("sum", dim, keepdim, d) / 0.0
        return self._reduce("mean", dim, keepdim, d)

    def _nonempty(self, what: str, dims: tuple[int, ...]) -> None:
        for dd in dims:
            if self._p.shape[dd] == 0:
                raise ShapeError(f"{what}() of an empty dimension (shape {self.shape}, dim {dd})")
        if self.numel() == 0 and not dims:
            raise ShapeError(f"{what}() of an empty tensor")

    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        self._nonempty("amax", S.norm_dims(dim, self.ndim))
        return self._reduce("max", dim, keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        self._nonempty("amin", S.norm_dims(dim, self.ndim))
        return self._reduce("min", dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, Tensor):
            return self.maximum(dim)
        if dim is None:
            return self.amax()
        return MinMax(self.amax(dim, keepdim), self.argmax(dim, keepdim))

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, Tensor):
            return self.minimum(dim)
        if dim is None:
            return self.amin()
        return MinMax(self.amin(dim, keepdim), self.argmin(dim, keepdim))

    def _argreduce(self, op: str, dim: Any, keepdim: bool) -> Tensor:
        bk = self._bk
        if dim is None:
            self._nonempty(op, ())
            flat = bk.reshape(self._p, (self.numel(),))
            out = getattr(bk, op)(flat, 0, False)
            if keepdim:
                out = bk.reshape(out, (1,) * self.ndim)
            return _make(out, bk, dt.int64)
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return _make(bk.full((), 0, dt.int64), bk, dt.int64)
        self._nonempty(op, (d,))
        return _make(getattr(bk, op)(self._p, d, keepdim), bk, dt.int64)

    def argmax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return self._argreduce("argmax", dim, keepdim)

    def argmin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return self._argreduce("argmin", dim, keepdim)

    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return self.bool()
        return _make(self._bk.all(self._p, dims, keepdim), self._bk, dt.bool_)

    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return self.bool()
        return _make(self._bk.any(self._p, dims, keepdim), self._bk, dt.bool_)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """As ``torch.var``, both overloads: ``var(dim, unbiased, keepdim, *, correction)`` and
        ``var(unbiased)`` (a bool first argument is ``unbiased``, not a dim)."""
        if isinstance(dim, bool | np.bool_):
            dim, unbiased = None, bool(dim)
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        t = self if self._dt.is_floating_point else self.float()
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return t * 0.0 / max(1 - correction, 0) if correction else t * 0.0
        return _make(t._bk.var(t._p, dims, float(correction), keepdim), t._bk, t._dt)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """As ``torch.std`` (both overloads, as ``var``)."""
        return self.var(dim, unbiased, keepdim, correction=correction).sqrt()

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        src = _autocast.fp32(self)[0] if _autocast.active else self  # an autocast float32 op
        t = src if src._dt.is_floating_point else src.float()
        dims = S.norm_dims(dim, self.ndim)
        if not dims:
            return t
        return _make(t._bk.logsumexp(t._p, dims, keepdim), t._bk, t._dt)

    def softmax(self, dim: int, dtype: Any = None) -> Tensor:
        # an autocast float32 op, unless dtype= is given (torch's rule)
        src = _autocast.fp32(self)[0] if _autocast.active and dtype is None else self
        t = src.to(dtype) if dtype is not None else (src if src._dt.is_floating_point else src.float())
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t.reshape(1).softmax(0).reshape(())
        return _make(t._bk.softmax(t._p, d), t._bk, t._dt)

    def log_softmax(self, dim: int, dtype: Any = None) -> Tensor:
        # an autocast float32 op, unless dtype= is given (torch's rule)
        src = _autocast.fp32(self)[0] if _autocast.active and dtype is None else self
        t = src.to(dtype) if dtype is not None else (src if src._dt.is_floating_point else src.float())
        d = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t.reshape(1).log_softmax(0).reshape(())
        return _make(t._bk.log_softmax(t._p, d), t._bk, t._dt)

    def cumsum(self, dim: int, dtype: Any = None) -> Tensor:
        d = dt.as_dtype(dtype) if dtype is not None else (
            dt.int64 if self._dt.category != dt.FLOAT else self._dt)
        t = self.to(d)
        k = S.norm_dim(dim, self.ndim)
        if self.ndim == 0:
            return t
        return _make(t._bk.cumsum(t._p, k), t._bk, d)

    # ------------------------------------------------------------------ matmul
    def matmul(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            if isinstance(other, np.ndarray):
                other = self._from_like(other)
            else:
                raise TypeError(f"matmul expects a Tensor, got {type(other).__name__}")
        _check_device(self, other)
        # an autocast lower-precision op (matmul, mm, bmm, @); outside autocast: one attribute read
        a, b = self, other
        if _autocast.active:
            a, b = _autocast.lower(a, b)
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul needs tensors of at least one dimension, got shapes {a.shape} and {b.shape}")
        d = a._dt if a._dt is b._dt else dt.result_type(a, b)
        if a._dt is not d:
            a = a.to(d)
        if b._dt is not d:
            b = b.to(d)
        sa, sb = a.shape, b.shape
        squeeze = []
        if len(sa) == 1:
            a = a.reshape(1, sa[0])
            squeeze.append(-2)
        if len(sb) == 1:
            b = b.reshape(sb[0], 1)
            squeeze.append(-1)
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(f"matmul shapes {sa} and {sb} do not fit: inner dimensions {a.shape[-1]} "
                             f"and {b.shape[-2]} differ")
        try:
            batch = S.broadcast(a.shape[:-2], b.shape[:-2])
        except ShapeError:
            raise ShapeError(f"matmul batch dimensions of shapes {sa} and {sb} cannot be broadcast "
                             "together") from None
        nd = len(batch) + 2
        if a.ndim < nd:
            a = a.reshape((1,) * (nd - a.ndim) + a.shape)
        if b.ndim < nd:
            b = b.reshape((1,) * (nd - b.ndim) + b.shape)
        out = _make(a._bk.matmul(a._p, b._p), a._bk, d)
        if squeeze:
            shape = list(out.shape)
            for ax in sorted(squeeze):
                del shape[ax]
            out = out.reshape(tuple(shape))
        return out

    __matmul__ = matmul

    def __rmatmul__(self, other: Any) -> Tensor:
        if isinstance(other, Tensor):  # a direct call: other @ self
            return other.matmul(self)
        if isinstance(other, np.ndarray):
            return self._from_like(other).matmul(self)
        return NotImplemented

    def mm(self, other: Tensor) -> Tensor:
        if self.ndim != 2 or other.ndim != 2:
            raise ShapeError(f"mm expects 2-D tensors, got shapes {self.shape} and {other.shape}")
        return self.matmul(other)

    def bmm(self, other: Tensor) -> Tensor:
        if self.ndim != 3 or other.ndim != 3:
            raise ShapeError(f"bmm expects 3-D tensors, got shapes {self.shape} and {other.shape}")
        return self.matmul(other)

    def dot(self, other: Tensor) -> Tensor:
        if self.ndim != 1 or other.ndim != 1:
            raise ShapeError(f"dot expects 1-D tensors, got shapes {self.shape} and {other.shape}")
        if _autocast.active:  # dot is an autocast "promote" op (torch), not a lower-precision one
            with _autocast.suspend(self):
                return self.matmul(other)
        return self.matmul(other)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: Any) -> Tensor:
        new = S.infer_reshape(self.shape, _raw(shape))
        if new == self.shape:
            return self
        return _make(self._bk.reshape(self._p, new), self._bk, self._dt)

    view = reshape

    def view_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s = S.norm_dim(start_dim, self.ndim)
        e = S.norm_dim(end_dim, self.ndim)
        if s > e:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        shape = self.shape
        return self.reshape(shape[:s] + (S.numel(shape[s:e + 1]),) + shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        d = S.norm_dim(dim, self.ndim)
        shape = self.shape
        inner = S.infer_reshape((shape[d],), sizes)
        return self.reshape(shape[:d] + inner + shape[d + 1:])

    def permute(self, *dims: Any) -> Tensor:
        dims = _flat(dims)
        if len(dims) != self.ndim:
            raise ShapeError(f"permute needs {self.ndim} dims for shape {self.shape}, got {dims}")
        axes = tuple(S.norm_dim(d, self.ndim) for d in dims)
        if len(set(axes)) != len(axes):
            raise ShapeError(f"permute dims {dims} repeat a dimension")
        if axes == tuple(range(self.ndim)):
            return self
        return _make(self._bk.permute(self._p, axes), self._bk, self._dt)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        if self.ndim == 0:
            return self
        a, b = S.norm_dim(dim0, self.ndim), S.norm_dim(dim1, self.ndim)
        axes = list(range(self.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self.permute(axes)

    swapaxes = transpose

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor of at most 2 dimensions, got shape {self.shape}")
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def T(self) -> Tensor:
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f".mT needs at least 2 dimensions, got shape {self.shape}")
        return self.transpose(-2, -1)

    def expand(self, *sizes: Any) -> Tensor:
        sizes = _flat(sizes)
        shape = self.shape
        if len(sizes) < len(shape):
            raise ShapeError(f"expand to {tuple(sizes)} has fewer dimensions than the tensor's shape {shape}")
        lead = len(sizes) - len(shape)
        out = []
        for i, s in enumerate(sizes):
            s = int(s)
            if i < lead:
                if s < 0:
                    raise ShapeError(f"expand: -1 is not allowed for the new leading dimension {i}")
                out.append(s)
                continue
            cur = shape[i - lead]
            if s == -1 or s == cur:
                out.append(cur)
            elif cur == 1 and s >= 0:
                out.append(s)
            else:
                raise ShapeError(f"cannot expand shape {shape} to {tuple(sizes)}")
        new = tuple(out)
        if new == shape:
            return self
        p = self._p
        if lead:
            p = self._bk.reshape(p, (1,) * lead + shape)
        return _make(self._bk.expand(p, new), self._bk, self._dt)

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        return self.expand(tuple(shape))

    def squeeze(self, dim: Any = None) -> Tensor:
        shape = self.shape
        if dim is None:
            return self.reshape(tuple(s for s in shape if s != 1))
        dims = S.norm_dims(dim, self.ndim) if self.ndim else ()
        return self.reshape(tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1)))

    def unsqueeze(self, dim: int) -> Tensor:
        d = S.norm_dim(dim, self.ndim + 1)
        shape = self.shape
        return _make(self._bk.reshape(self._p, shape[:d] + (1,) + shape[d:]), self._bk, self._dt)

    def flip(self, *dims: Any, **kwargs: Any) -> Tensor:
        """As ``torch.flip``: ``flip(dims)``, ``flip(*dims)`` or ``flip(dims=...)``."""
        if "dims" in kwargs:
            if dims:
                raise TypeError("flip() got dims both positionally and as a keyword")
            dims = (kwargs.pop("dims"),)
        if kwargs:
            raise TypeError(f"flip() got unexpected keyword arguments {sorted(kwargs)}")
        if len(dims) == 1 and isinstance(dims[0], int | np.integer):
            dims = (int(dims[0]),)
        dims = _flat(dims)
        nd = S.norm_dims(dims, self.ndim)
        if not nd:
            return self
        return _make(self._bk.flip(self._p, nd), self._bk, self._dt)

    def repeat(self, *sizes: Any) -> Tensor:
        sizes = _flat(sizes)
        reps = tuple(int(s) for s in sizes)
        if len(reps) < self.ndim:
            raise ShapeError(f"repeat needs at least {self.ndim} sizes for shape {self.shape}, got {reps}")
        t = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        shape = t.shape
        # (r0, n0, r1, n1, ...) broadcast then merged: tiles each dim like numpy.tile
        inter = []
        for n in shape:
            inter += [1, n]
        t = t.reshape(tuple(inter))
        big = []
        for r, n in zip(reps, shape):
            big += [r, n]
        t = t.expand(tuple(big))
        return t.reshape(tuple(r * n for r, n in zip(reps, shape)))

    def tile(self, *sizes: Any) -> Tensor:
        sizes = _flat(sizes)
        sizes = (1,) * builtins.max(0, self.ndim - len(sizes)) + tuple(sizes)
        return self.repeat(sizes)

    def split(self, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, int | np.integer):
            step = split_size_or_sections
            if step <= 0:
                raise ValueError(f"split size must be positive, got {step}")
            sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
        else:
            sizes = [int(s) for s in split_size_or_sections]
            if builtins.sum(sizes) != n:
                raise ShapeError(f"split sizes {sizes} do not add up to {n} (dim {d} of shape {self.shape})")
        out = []
        start = 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if chunks <= 0:
            raise ValueError(f"chunks must be positive, got {chunks}")
        step = -(-n // chunks) if n else 1
        return self.split(step, d)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        d = S.norm_dim(dim, self.ndim)
        return tuple(self.select(d, i) for i in range(self.shape[d]))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        d = S.norm_dim(dim, self.ndim)
        n = self.shape[d]
        if start < 0:
            start += n
        if not (0 <= start <= n and 0 <= length and start + length <= n):
            from .errors import IndexOutOfRangeError

            raise IndexOutOfRangeError(f"narrow({dim}, {start}, {length}) is out of range for size {n}")
        sl = tuple(slice(start, start + length, 1) if i == d else slice(0, s, 1)
                   for i, s in enumerate(self.shape))
        return _make(self._bk.slice(self._p, sl), self._bk, self._dt)

    def select(self, dim: int, index: int) -> Tensor:
        d = S.norm_dim(dim, self.ndim)
        key = (slice(None),) * d + (index,)
        return self[key]

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Tensor:
        return (_indexing or _index_module()).getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        (_indexing or _index_module()).setitem(self, key, value)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        return (_indexing or _index_module()).gather(self, dim, index)

    def scatter(self, dim: int, index: Tensor, src: Any, reduce: str | None = None) -> Tensor:
        return (_indexing or _index_module()).scatter(self, dim, index, src, reduce)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        return (_indexing or _index_module()).scatter(self, dim, index, src, "add")

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        return (_indexing or _index_module()).index_select(self, dim, index)

    def tril(self, diagonal: int = 0) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"tril needs at least 2 dimensions, got shape {self.shape}")
        return _make(self._bk.tril(self._p, int(diagonal)), self._bk, self._dt)

    def triu(self, diagonal: int = 0) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"triu needs at least 2 dimensions, got shape {self.shape}")
        return _make(self._bk.triu(self._p, int(diagonal)), self._bk, self._dt)

    scatter_ = _inplace("scatter")
    scatter_add_ = _inplace("scatter_add")
    tril_ = _inplace("tril")
    triu_ = _inplace("triu")

    # ------------------------------------------------------------------ misc
    def nonzero(self, as_tuple: bool = False) -> Any:
        """As ``torch.nonzero`` (reads the values: the result's shape depends on them)."""
        if self.ndim == 0:
            n = int(bool(np.asarray(self.numpy())))
            if as_tuple:
                return (self._from_like(np.zeros(n, np.int64)),)
            return self._from_like(np.zeros((n, 0), np.int64))
        idx = np.nonzero(np.asarray(self.numpy()))
        if as_tuple:
            return tuple(self._from_like(i.astype(np.int64)) for i in idx)
        return self._from_like(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((0, 0), np.int64))

    def allclose(self, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        return bool(np.allclose(self.numpy().astype(np.float64), np.asarray(other.numpy()).astype(np.float64),
                                rtol=rtol, atol=atol))

    def equal(self, other: Tensor) -> bool:
        return self.shape == other.shape and bool(np.array_equal(self.numpy(), other.numpy()))

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """As ``torch.norm``: vector p-norms (``p`` any float, ``inf``, ``-inf``, 0: the count of
        non-zeros) over ``dim`` (every dim when None), ``'fro'`` (the 2-norm of the elements)
        and ``'nuc'`` (the sum of the singular values of the matrices over the last two dims or
        ``dim``'s pair: the SVD runs on the host, the result is ``sum(x * (U @ Vh))``, whose
        gradient ``U @ Vh`` is the nuclear norm's)."""
        t = self
        if dtype is not None:
            t = t.to(dtype)
        elif not t._dt.is_floating_point:
            raise DTypeError(f"norm needs a floating point input, got {t._dt}; pass dtype=")
        if p is None:
            p = "fro"
        if p == "nuc":
            return t._nuclear_norm(dim, keepdim)
        if p == "fro":
            if dim is not None and not isinstance(dim, int | np.integer) and len(tuple(dim)) > 2:
                raise ShapeError(f"the Frobenius norm takes at most 2 dims, got {dim}")
            p = 2
        p = builtins.float(p)
        a = t.abs()
        if p == 2:
            return (t * t).sum(dim, keepdim).sqrt()
        if p == 1:
            return a.sum(dim, keepdim)
        if p == math.inf:
            return a.amax(dim, keepdim) if a.numel() else a.sum(dim, keepdim)
        if p == -math.inf:
            return a.amin(dim, keepdim)
        if p == 0:
            # the count of non-zeros, kept in the graph with a zero gradient (as torch)
            zero = t.masked_fill(t._full_like_shape((), True, dt.bool_), 0.0)
            return (t.ne(0).to(t._dt) + zero).sum(dim, keepdim)
        return (a ** p).sum(dim, keepdim) ** (1.0 / p)

    def _nuclear_norm(self, dim: Any, keepdim: bool) -> Tensor:
        if dim is None:
            if self.ndim != 2:
                raise ShapeError(f"the nuclear norm of a {self.ndim}-D tensor needs dim= (two dims)")
            dim = (0, 1)
        dims = tuple(S.norm_dim(d, self.ndim) for d in dim)
        if len(dims) != 2 or dims[0] == dims[1]:
            raise ShapeError(f"the nuclear norm needs two distinct dims, got {dim}")
        rest = [i for i in range(self.ndim) if i not in dims]
        x = self.permute(rest + list(dims))
        a = np.asarray(x.detach().numpy(), dtype=np.float64)
        if a.size:
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            uv = (u @ vh).astype(x._dt.np if x._dt is not dt.bfloat16 else np.float32)
        else:
            uv = np.zeros(a.shape, np.float32)
        w = x._from_like(uv).to(x._dt)
        out = (x * w).sum((-2, -1))
        if keepdim:
            for d in sorted(dims):
                out = out.unsqueeze(d)
        return out


def _unpickle(array: np.ndarray, dtype_name: str, spec: tuple[Any, ...], requires_grad: bool) -> Tensor:
    """Rebuild a pickled tensor (``Tensor.__reduce__``)."""
    from .backends import dispatch
    from .creation import get_default_device

    d = dt.as_dtype(dtype_name)
    if d is dt.bfloat16:
        array = array.view(d.np)
    dev = Device(spec)
    if not dispatch.available(dev):
        dev = get_default_device()
    bk = dev.backend()
    t = _make(bk.from_data(np.ascontiguousarray(array, dtype=d.np), d), bk, d)
    return t.requires_grad_() if requires_grad and bk.name.startswith("dispatch<autodiff") else t


def _flat(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the sizes/dims (2, 3), as in PyTorch."""
    if len(args) == 1 and not isinstance(args[0], int | np.integer):
        return tuple(args[0])
    return args


def _raw(shape: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(int(s) for s in _flat(shape))


def _install_registry_methods() -> None:
    """Tensor methods the registry derives: each entry's ``front``, and the float binary ops
    without a scalar form (tensor or scalar operand, ints lifted to float) that the class does
    not spell out."""
    for name, op in _ops.REGISTRY.items():
        if name in Tensor.__dict__:
            continue
        if op.front is not None:
            setattr(Tensor, name, op.front)
        elif op.family == "binary" and op.float_only and not op.scalar_form:
            setattr(Tensor, name, _binary(name, _FLOATONLY, rop=f"{name}_scalar_unsupported")[0])


_install_registry_methods()
