"""The Tensor class itself: its three slots, attributes, the autograd surface and read-out.

A Tensor is three slots: ``_p`` (its backend primitive), ``_bk`` (its device's Dispatch
backend) and ``_dt`` (its dtype). The API validates and normalises every call (shapes,
dims, dtype promotion, devices) *before* handing it to the backend, so errors surface on
the calling line on every device, lazy ones included, and backends may assume valid input.

This module is the bottom of the Tensor API: it imports no other Tensor API module. The
op methods live in the sibling modules (``arithmetic``, ``elementwise``, ``reductions``,
``shape``, ``conversions``, ``indexing``) as method tables that ``install_methods`` copies onto
``Tensor``, so every method stays a plain function in the class dict (one lookup per call).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _shape as S
from .. import dtype as dt
from .. import tracing
from ..backends.autodiff.mode import is_grad_enabled, no_grad, watch_inference
from ..backends.autodiff.mode import mode as _mode
from ..device import Device
from ..errors import AutodiffError, DeviceMismatchError, DTypeError, ShapeError

__all__ = ["Tensor", "InferenceTensor", "get_default_device", "set_default_device", "install_methods"]

#: allocates every result (``_make``, and the modules that inline it): ``object.__new__``, or
#: ``_new_marking`` while some thread is in inference mode (``watch_inference``)
_new = object.__new__
_SCALARS = (int, float, bool)
#: how tensors print (``ember.set_printoptions``, as torch's): numpy's array2string arguments
PRINT_OPTIONS: dict[str, Any] = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 75,
                                 "suppress_small": False}
_DEFAULT_FLOAT = dt.float32


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

#: the device of tensors created without ``device=`` (``Device.default()`` until set)
_default_device: Device | None = None


def get_default_device() -> Device:
    """As ``torch.get_default_device``: ``EMBER_DEVICE`` or ``Device.flex().autodiff()`` unless
    ``set_default_device`` chose another."""
    global _default_device
    if _default_device is None:
        _default_device = Device.default()
    return _default_device


def set_default_device(device: Device | str | None) -> None:
    """As ``torch.set_default_device``: a ``Device`` or its string (``"cpu"``, ``"cuda:0"``,
    ``"flex+autodiff"``); None restores ``Device.default()``."""
    global _default_device
    _default_device = Device.parse(device) if isinstance(device, str) else device


def _make(p: Any, bk: Any, d: dt.DType) -> Tensor:
    t = _new(Tensor)
    t._p = p
    t._bk = bk
    t._dt = d
    return t


def _from_array(array: np.ndarray, d: dt.DType, device: Device) -> Tensor:
    """A tensor of ``array``'s values on ``device``; ``array`` already has ``d``'s numpy type
    (the backend copies it: a tensor never aliases the caller's array)."""
    bk = device.backend()
    if tracing.active:
        with tracing.span("from_data", layer="tensor"):
            p = bk.from_data(array, d)
    else:
        p = bk.from_data(array, d)
    return _make(p, bk, d)


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


#: names a method table carries as a class that are not methods
_CLASS_ATTRS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                          "__hash__", "__firstlineno__", "__static_attributes__", "__annotations__"})


def install_methods(table: type) -> None:
    """Copy the methods of ``table`` (a class used as a namespace, never instantiated) onto
    ``Tensor``. A name Tensor already has is an error: each method has one home. Functions defined
    in the table or generated by a factory get ``Tensor.<name>`` as their qualified name and the
    class's module as theirs (reprs, the API reference)."""
    for name, value in vars(table).items():
        if name in _CLASS_ATTRS:
            continue
        if name in Tensor.__dict__:
            raise TypeError(f"Tensor.{name} is defined twice ({table.__qualname__} and Tensor)")
        fn = value.fget if isinstance(value, property) else value
        qualname = getattr(fn, "__qualname__", "")
        if callable(fn) and (qualname.startswith(table.__qualname__ + ".") or "<locals>" in qualname):
            fn.__qualname__ = f"Tensor.{fn.__name__}"
            fn.__module__ = Tensor.__module__  # where ``Tensor.<name>`` is found (the API reference)
        setattr(Tensor, name, value)


class Tensor:
    """As ``torch.Tensor``: an n-dimensional array on a device, with PyTorch's methods.

    Create tensors with ``ember.tensor``, ``ember.zeros``, ``ember.from_numpy``, ... (the
    constructor raises). Tensors are values: an in-place method rebinds the tensor to its
    result, and a view taken before keeps the values it had."""

    __slots__ = ("_p", "_bk", "_dt")
    __array_priority__ = 1000  # numpy defers ``ndarray + Tensor`` to Tensor.__radd__

    _p: Any
    _bk: Any
    _dt: dt.DType
    #: made inside ``inference_mode()`` (True on :class:`InferenceTensor`)
    _inference = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create tensors with ember.tensor(data), ember.zeros(...), ember.from_numpy(...)")

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple[int, ...]:
        """As ``torch.Tensor.shape``: the sizes as a tuple of ints (torch gives a ``torch.Size``, a tuple too)."""
        return tuple(self._p.shape)

    def size(self, dim: int | None = None) -> Any:
        """As ``torch.Tensor.size``: the shape, or the size of dim ``dim``."""
        if dim is None:
            return self.shape
        return self.shape[S.norm_dim(dim, self.ndim)]

    @property
    def dtype(self) -> dt.DType:
        """As ``torch.Tensor.dtype``: an ``ember.DType`` (``ember.float32``, ...)."""
        return self._dt

    @property
    def device(self) -> Device:
        """As ``torch.Tensor.device``: the ``ember.Device`` the tensor lives on."""
        return self._bk.device

    @property
    def ndim(self) -> int:
        """As ``torch.Tensor.ndim``: the number of dims."""
        return len(self._p.shape)

    def dim(self) -> int:
        """As ``torch.Tensor.dim``: the number of dims."""
        return len(self._p.shape)

    def numel(self) -> int:
        """As ``torch.numel``: the number of elements."""
        return S.numel(self._p.shape)

    @property
    def is_floating_point(self) -> _Flag:
        """Whether the dtype is a floating point type: a bool that can also be called, so
        torch's ``x.is_floating_point()`` and ember's ``x.is_floating_point`` both work."""
        return _TRUE if self._dt.is_floating_point else _FALSE

    @property
    def is_cuda(self) -> bool:
        """As ``torch.Tensor.is_cuda``: whether the tensor lives on a CUDA device."""
        return self._bk.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """As ``torch.Tensor.is_cpu``: whether the tensor lives on a host device (Flex or the Cube CPU device)."""
        return self._bk.device.type in ("flex", "cpu")

    @property
    def data(self) -> Tensor:
        """As ``torch.Tensor.data``: the values, detached. In-place ops on the result also
        write into this tensor (``w.data.normal_(0, 0.02)``, ``p.data.clamp_(-1, 1)`` update
        ``w`` and ``p``, as in torch), outside the autodiff graph; other ops give new tensors."""
        alias = _new(_DataAlias)
        alias._p = self._bk.detach(self._p)
        alias._bk = self._bk
        alias._dt = self._dt
        alias._owner = self
        return alias

    @data.setter
    def data(self, value: Tensor) -> None:
        """As torch's ``x.data = t``: this tensor takes ``t``'s values (shape, dtype and device
        too), keeping its own ``requires_grad``, outside the autodiff graph."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        _set_data(self, value)

    # ------------------------------------------------------------------ autodiff
    @property
    def requires_grad(self) -> bool:
        """As ``torch.Tensor.requires_grad``: whether autodiff records ops on this tensor (settable on leaves)."""
        return self._bk.is_tracked(self._p)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """As ``torch.Tensor.requires_grad_``: start (or, on a leaf, stop) recording gradients; floating
        point tensors only. Needs an autodiff device (``Device.flex().autodiff()``, the default)."""
        if requires_grad:
            if self._inference and not _mode.inference:
                raise AutodiffError("Setting requires_grad=True on inference tensor outside InferenceMode is not "
                                    "allowed.")
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
        """As ``torch.Tensor.is_leaf``: not the result of a recorded op."""
        return self._bk.is_leaf(self._p)

    @property
    def grad(self) -> Tensor | None:
        """As torch's ``.grad``: one Tensor object per leaf, returned on every access until it
        is replaced (set, or None); in-place ops on it change the stored gradient and backward
        accumulates into it."""
        bk = self._bk
        d = self._dt
        g = bk.grad_tensor(self._p, lambda g: _make(g, bk, d))
        if g is None and not bk.is_leaf(self._p) and not self.retains_grad:
            self._warn_nonleaf_grad()
        return g

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

    def detach(self) -> Tensor:
        """As ``torch.Tensor.detach``: the same values, outside the autodiff graph."""
        return _make(self._bk.detach(self._p), self._bk, self._dt)

    def detach_(self) -> Tensor:
        """As ``torch.Tensor.detach_``: this tensor taken out of the autodiff graph."""
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
        """``np.asarray(t)``: the values (read-only unless ``copy``)."""
        a = self.numpy()
        if dtype is not None:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """A DLPack capsule of the values: zero copy on CUDA devices (``ember.dlpack``)."""
        from .dlpack import to_dlpack  # (ctypes structures, built on first use)

        return to_dlpack(self, stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        """As ``torch.Tensor.__dlpack_device__``: ``(kDLCPU, 0)`` or ``(kDLCUDA, index)``."""
        from .dlpack import dlpack_device

        return dlpack_device(self)

    def tolist(self) -> Any:
        """As ``torch.Tensor.tolist``: the values as nested Python lists (a scalar for a 0-d tensor)."""
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
        o = PRINT_OPTIONS
        body = np.array2string(a, separator=", ", prefix="tensor(", threshold=o["threshold"],
                               precision=o["precision"], suppress_small=o["suppress_small"],
                               edgeitems=o["edgeitems"], max_line_width=o["linewidth"])
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
        """``array``'s values (its own dtype) as a tensor on this tensor's device."""
        a = np.asarray(array)
        return _from_array(a, dt.from_numpy_dtype(a.dtype), self._bk.device)

    def _full_like_shape(self, shape: tuple[int, ...], value: Any, d: dt.DType) -> Tensor:
        """A tensor of ``shape`` filled with ``value`` (already a Python scalar of ``d``) on this device."""
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
        if self._inference and not _mode.inference:
            raise AutodiffError("Inplace update to inference tensor outside InferenceMode is not allowed. You can "
                                "make a clone to get a normal tensor before doing inplace update.")
        p = result._p if result._dt is self._dt else bk.cast(result._p, self._dt)
        if bk.is_tracked(self._p) and bk.is_leaf(self._p):
            if is_grad_enabled():
                raise AutodiffError("a leaf tensor that requires grad is used in an in-place operation; "
                                    "wrap the update in `with ember.no_grad():`")
            p = bk.replace_value(self._p, p)
        self._p = p
        return self


class _Flag(int):
    """A bool that can also be called (``Tensor.is_floating_point``): ``if x.is_floating_point``
    and torch's ``x.is_floating_point()`` both read it."""

    __slots__ = ()

    def __call__(self) -> bool:
        return bool(self)

    def __repr__(self) -> str:
        return repr(bool(self))

    __str__ = __repr__


_TRUE, _FALSE = _Flag(1), _Flag(0)


class _DataAlias(Tensor):
    """What ``Tensor.data`` returns: a detached tensor whose in-place updates (every in-place
    method goes through ``_assign``) are also written into the tensor it was read from, under
    ``no_grad`` (a leaf keeps its identity and ``.grad``, as an optimizer step does)."""

    __slots__ = ("_owner",)

    def _assign(self, result: Tensor) -> Tensor:
        Tensor._assign(self, result)
        owner = self._owner
        with no_grad():
            if owner.shape == self.shape:
                owner._assign(self)
            else:  # a shape-changing in-place op (``data.resize_``-like): rebind outright
                _set_data(owner, self)
        return self


def _set_data(t: Tensor, value: Tensor) -> None:
    """``t.data = value``: ``t`` rebound to ``value``'s data, detached, keeping whether it
    records gradients (a leaf of the same shape, dtype and device keeps its node and ``.grad``)."""
    bk = t._bk
    tracked = bk.is_tracked(t._p)
    if value._bk is bk and value.shape == t.shape and value._dt is t._dt and tracked and bk.is_leaf(t._p):
        t._p = bk.replace_value(t._p, bk.detach(value._p))
        return
    nbk = value._bk
    p = nbk.detach(value._p)
    if tracked and nbk.device.is_autodiff and value._dt.is_floating_point:
        p = nbk.require_grad(p)
    t._bk, t._dt, t._p = nbk, value._dt, p


class InferenceTensor(Tensor):
    """A tensor made inside ``inference_mode()`` (``is_inference()`` is True): the same slots,
    so ``_make`` turns a result into one by setting its class. It refuses ``requires_grad_()``
    and in-place updates outside inference mode, as torch's inference tensors do."""

    __slots__ = ()
    _inference = True


def _new_marking(cls: type) -> Any:
    """``object.__new__`` that makes the calling thread's results inference tensors while it is
    in inference mode (installed as ``_new`` only while some thread is)."""
    return object.__new__(InferenceTensor if cls is Tensor and _mode.inference else cls)


def _watch(on: bool) -> None:
    global _new
    _new = _new_marking if on else object.__new__


watch_inference(_watch)


def _unpickle(array: np.ndarray, dtype_name: str, spec: tuple[Any, ...], requires_grad: bool) -> Tensor:
    """Rebuild a pickled tensor (``Tensor.__reduce__``)."""
    from ..backends import dispatch  # (the Dispatch layer, below this one: loaded with the first device)

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
