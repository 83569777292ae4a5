"""Tensor creation: ``tensor``, ``zeros``, ``arange``, ``rand``, ... (PyTorch signatures).

Every function takes ``dtype=``, ``device=`` and ``requires_grad=``. Without ``device`` the
default device is used (``ember.set_default_device`` / ``EMBER_DEVICE``; Flex otherwise).
Data is always copied: a tensor never aliases the caller's numpy array.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _shape as S
from . import dtype as dt
from .device import Device
from .tensor import (
    Tensor,
    _from_array,
    _make,
    _raw,
    _scalar_for,
    get_default_device,
    install_methods,
    set_default_device,
)

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace",
    "eye", "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like",
    "rand_like", "randn_like", "randint_like", "manual_seed", "get_default_device",
    "set_default_device", "initial_seed", "logspace", "scalar_tensor", "tril_indices", "triu_indices",
    "seed", "get_rng_state", "set_rng_state", "is_tensor", "is_floating_point", "Size",
]


def _device(device: Any) -> Device:
    if device is None:
        return get_default_device()
    if isinstance(device, str):
        # "cpu" is the host, as in ``Tensor.to("cpu")`` and ``ember.device("cpu")``: a script's
        # ``torch.zeros(n, device="cpu")`` must meet the tensors its model makes on the default device
        if device.strip().lower() in ("cpu", "cpu:0"):
            return _host_device()
        return Device.parse(device)
    if not isinstance(device, Device):
        raise TypeError(f"device must be an ember.Device, got {device!r}")
    return device


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_() if requires_grad else t


def _upload(array: np.ndarray, d: dt.DType, device: Any, requires_grad: bool) -> Tensor:
    return _finish(_from_array(array, d, _device(device)), requires_grad)


def _infer_dtype(a: np.ndarray) -> dt.DType:
    k = a.dtype.kind
    if k == "f":
        return dt.get_default_dtype()
    if k in "iu":
        return dt.int64
    if k == "b":
        return dt.bool_
    if k == "V" or a.dtype == dt.bfloat16.np:
        return dt.from_numpy_dtype(a.dtype)
    from .errors import DTypeError

    raise DTypeError(f"cannot make a tensor from data of numpy dtype {a.dtype}")


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.tensor``: a new tensor holding a copy of ``data`` (nested lists, scalars, numpy
    arrays, tensors). Python floats become the default float dtype, ints int64, bools bool; numpy
    arrays keep their dtype."""
    if isinstance(data, Tensor):
        t = data.detach().to(_device(device) if device is not None else data.device)
        if dtype is not None:
            t = t.to(dtype)
        return _finish(t.clone(), requires_grad)
    if isinstance(data, np.ndarray):
        a = data
        d = dt.as_dtype(dtype) if dtype is not None else dt.from_numpy_dtype(a.dtype)
    else:
        try:
            a = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            from .errors import ShapeError

            raise ShapeError(f"tensor(): the data is not rectangular ({e})") from None
        if a.dtype == object:
            from .errors import ShapeError

            raise ShapeError("tensor(): the data is not a rectangular array of numbers")
        d = dt.as_dtype(dtype) if dtype is not None else _infer_dtype(a)
    if a.dtype != d.np:
        with np.errstate(all="ignore"):
            a = a.astype(d.np)
    return _upload(a, d, device, requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """As ``torch.as_tensor``: ``data`` itself when it is a tensor of that dtype and device, else a
    copy (``tensor``: ember never shares a numpy array's memory)."""
    if isinstance(data, Tensor) and dtype is None and (device is None or _device(device) == data.device):
        return data
    return tensor(data, dtype, device)


def from_numpy(array: np.ndarray, device: Any = None) -> Tensor:
    """As ``torch.from_numpy``: a tensor with ``array``'s dtype and values, copied (tensors are
    values: later writes to the array do not show); ``device=`` is an ember extra."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy array, got {type(array).__name__}")
    return _upload(array, dt.from_numpy_dtype(array.dtype), device, False)


def full(size: Sequence[int], fill_value: Any, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """As ``torch.full``: a tensor of ``size`` filled with ``fill_value`` (its dtype inferred from
    the value unless given)."""
    shape = S.sizes_arg((size,)) if not isinstance(size, int | np.integer) else (size,)
    if isinstance(fill_value, np.generic):
        fill_value = fill_value.item()
    d = dt.as_dtype(dtype) if dtype is not None else dt.result_type(fill_value)
    dev = _device(device)
    _check_size(shape, d, dev)
    bk = dev.backend()
    v = _scalar_for(d, fill_value)
    return _finish(_make(bk.full(shape, v, d), bk, d), requires_grad)


def _check_size(shape: tuple[int, ...], d: dt.DType, device: Device) -> None:
    """Raise at creation, on every device (a lazy one would only fail at the first read), for
    a tensor whose storage cannot exist: a byte count past int64 (torch: "Storage size
    calculation overflowed") is a ShapeError; on a host device (flex, cpu) one past this
    machine's memory is OutOfMemoryError, on a GPU one past 256 TiB (below that the device's
    allocator decides, with the driver's error and its pool's figures)."""
    n = 1
    for s in shape:
        n *= s
    nbytes = n * d.itemsize
    if nbytes <= 1 << 30:
        return
    if nbytes >= 1 << 63:
        from .errors import ShapeError

        raise ShapeError(f"storage size calculation overflowed with sizes={list(shape)} ({d})")
    spec = device.spec
    while spec[0] in ("autodiff", "fusion"):  # decorators: the device they wrap holds the data
        spec = spec[1]
    if spec[0] == "cube" and spec[1] != "cpu":
        # a GPU's allocator judges its own memory (it raises OutOfMemoryError with the driver's
        # error and the pool's figures); only sizes past any device's memory fail here
        if nbytes > 1 << 48:
            from .errors import OutOfMemoryError

            raise OutOfMemoryError(f"cannot allocate {nbytes} bytes for a tensor of shape {tuple(shape)} ({d}) "
                                   f"on {device}: more than any device holds", requested=nbytes, device=str(device))
        return
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if nbytes > total:
        from .errors import OutOfMemoryError

        raise OutOfMemoryError(f"cannot allocate {nbytes} bytes for a tensor of shape {tuple(shape)} ({d}): this "
                               f"machine has {total} bytes of memory", requested=nbytes, device=str(device))


def _filled(value: float, size: tuple[Any, ...], dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    shape = S.sizes_arg(size)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    dev = _device(device)
    _check_size(shape, d, dev)
    bk = dev.backend()
    v = _scalar_for(d, value)
    return _finish(_make(bk.full(shape, v, d), bk, d), requires_grad)


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.zeros``: ``zeros(2, 3)`` or ``zeros((2, 3))``, the default float dtype unless given."""
    return _filled(0, size, dtype, device, requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.ones``: ``ones(2, 3)`` or ``ones((2, 3))``, the default float dtype unless given."""
    return _filled(1, size, dtype, device, requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.empty``, but filled with zeros (ember never hands out uninitialised memory)."""
    return _filled(0, size, dtype, device, requires_grad)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """As ``torch.arange``. For an integer ``dtype`` the bounds and step are truncated to
    integers first, as torch does (``arange(0., -8.000001, -4., dtype=int64)`` is [0, -4])."""
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor | np.generic) else v for v in (start, end, step))
    if step == 0:
        raise ValueError("arange step must be non-zero")
    all_int = all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in (start, end, step))
    d = dt.as_dtype(dtype) if dtype is not None else (dt.int64 if all_int else dt.get_default_dtype())
    if d.category != dt.FLOAT and not all_int:
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise ValueError("arange step must be non-zero (after truncation to an integer dtype)")
        all_int = True
    if (end - start) and (end - start > 0) != (step > 0):
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    n = max(0, math.ceil((end - start) / step)) if not all_int else max(0, -((start - end) // step))
    if all_int:
        a = start + np.arange(n, dtype=np.int64) * step
    else:
        a = float(start) + np.arange(n, dtype=np.float64) * float(step)
    return _upload(a.astype(d.np), d, device, requires_grad)


def linspace(start: float, end: float, steps: int, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """As ``torch.linspace``: the first half counts up from ``start``, the second half down
    from ``end`` (so both ends are exact); for an integer ``dtype`` the ends are truncated to
    integers first and the values computed in float64 then truncated, as torch does."""
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    steps = int(steps)
    if steps < 0:
        raise ValueError(f"number of steps must be non-negative, got {steps}")
    start, end = (v.item() if isinstance(v, Tensor | np.generic) else v for v in (start, end))
    if d.category != dt.FLOAT:
        start, end = int(start), int(end)
    # torch computes in the dtype (float32 for the half types, float64 for integers)
    ct = np.float64 if d.category != dt.FLOAT or d is dt.float64 else np.float32
    a = np.empty(steps, ct)
    if steps == 1:
        a[:] = start
    elif steps > 1:
        s0, s1 = ct(start), ct(end)
        step = (s1 - s0) / ct(steps - 1)
        half = steps // 2
        i = np.arange(steps, dtype=ct)
        a[:half] = s0 + i[:half] * step
        a[half:] = s1 - (ct(steps - 1) - i[half:]) * step
    with np.errstate(all="ignore"):
        return _upload(a.astype(d.np), d, device, requires_grad)


def logspace(start: float, end: float, steps: int, base: float = 10.0, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """As ``torch.logspace``: base ** linspace(start, end, steps) (computed in float64)."""
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    start, end = (v.item() if isinstance(v, Tensor | np.generic) else v for v in (start, end))
    e = linspace(start, end, steps, dtype=dt.float64, device=Device.flex()).numpy()
    with np.errstate(all="ignore"):
        return _upload(np.power(float(base), e).astype(d.np), d, device, requires_grad)


def scalar_tensor(s: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.scalar_tensor``: a 0-d tensor (the default float dtype unless given)."""
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    return tensor(s, dtype=d, device=device, requires_grad=requires_grad)


def _tri_indices(row: int, col: int, offset: int, lower: bool, dtype: Any, device: Any) -> Tensor:
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    r, c = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
    return _upload(np.stack([r, c]).astype(d.np).reshape(2, -1), d, device, False)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """As ``torch.tril_indices``."""
    return _tri_indices(row, col, offset, True, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """As ``torch.triu_indices``."""
    return _tri_indices(row, col, offset, False, dtype, device)


def eye(n: int, m: int | None = None, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """As ``torch.eye``: an ``n`` x ``m`` identity matrix (``m`` defaults to ``n``)."""
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    return _upload(np.eye(n, m, dtype=d.np), d, device, requires_grad)


# --------------------------------------------------------------------------- random
def manual_seed(seed: int) -> Any:
    """As ``torch.manual_seed``: seed the global Philox generator, shared by every device (one seed
    gives the same values on every device, ``docs/random.md``); returns it, as torch does."""
    from . import random as R

    return R.manual_seed(int(seed))


def initial_seed() -> int:
    """As ``torch.initial_seed``: the seed of the global generator."""
    from . import random as R

    return R.initial_seed()


def seed() -> int:
    """As ``torch.seed``: reseed the global generator non-deterministically; returns the seed."""
    from . import random as R

    return R.seed()


def get_rng_state() -> tuple[int, int]:
    """As ``torch.get_rng_state``: the global generator's state, for ``set_rng_state`` (a
    ``(seed, offset)`` pair, where torch returns a byte tensor)."""
    from . import random as R

    return R.get_rng_state()


def set_rng_state(new_state: Any) -> None:
    """As ``torch.set_rng_state``: resume the global stream at a state from ``get_rng_state``."""
    from . import random as R

    R.set_rng_state(new_state)


@functools.cache
def torch_generator_class() -> type:
    """``ember.Generator``, as ``torch.Generator(device="cpu")``: an ``ember.random.Generator``
    (a private Philox stream for ``generator=`` arguments) built on first use, so ``import ember``
    does not load ``ember.random``."""
    R = _rng()

    class Generator(R.Generator):
        """As ``torch.Generator(device="cpu")``: a private Philox stream for ``generator=`` arguments.

        One generator serves every device (the stream is the same everywhere), so ``device`` is
        checked and kept (``.device``) but changes nothing. Unseeded, it starts from a fresh seed
        (torch: a fixed default seed); call ``manual_seed`` for reproducible draws."""

        __slots__ = ("_device",)

        def __init__(self, device: Any = "cpu") -> None:
            super().__init__()
            self._device = _as_device(device)

        @property
        def device(self) -> Device:
            """The device named at construction (every device draws the same stream)."""
            return self._device

    Generator.__module__ = "ember"
    return Generator


def is_tensor(obj: Any) -> bool:
    """As ``torch.is_tensor``: whether ``obj`` is an ``ember.Tensor`` (a Parameter is one)."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    """As ``torch.is_floating_point``: whether ``input``'s dtype is a floating point type."""
    return bool(input.dtype.is_floating_point)


class Size(tuple):
    """As ``torch.Size``: a tuple of sizes (``Tensor.shape`` is a plain tuple, equal to it)."""

    __slots__ = ()

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"ember.Size({list(self)})"


# --------------------------------------------------------------------------- torch.device
def _host_device() -> Device:
    """What ``ember.device("cpu")`` names: the default device when it is a host device (Flex or
    the Cube CPU device, with its autodiff wrapping), else Flex with autodiff."""
    d = get_default_device()
    inner = d.inner()
    if inner.spec[0] in ("flex", "fusion") or (inner.spec[0] == "cube" and inner.spec[1] == "cpu"):
        return d
    return Device.flex().autodiff()


def _as_device(type: Any, index: int | None = None) -> Device:  # noqa: A002 (torch's argument name)
    """``ember.device(type, index=None)``, as ``torch.device``: see ``_DeviceModule.__call__``."""
    if isinstance(type, Device):
        if index is not None:
            raise TypeError("device(Device, index): a Device names its index already")
        return type
    if isinstance(type, int) and not isinstance(type, bool):  # torch.device(0) is cuda:0
        type, index = "cuda", type
    if not isinstance(type, str):
        raise TypeError(f"device() expects a string, an int or a Device, got {type!r}")
    text = type.strip().lower()
    name, _, idx = text.partition(":")
    if idx and index is not None:
        raise RuntimeError(f"type (string) must not include an index because index was passed explicitly: {type}")
    if name == "cpu":
        return _host_device()
    if name == "cuda":
        return Device.cuda(int(idx or index or 0)).autodiff()
    return Device.parse(text if index is None else f"{text}:{index}")


class _DeviceModule(types.ModuleType):
    """The class of the ``ember.device`` module: callable as ``torch.device`` is, and usable in
    ``isinstance(x, ember.device)``, while ``ember.device.Device`` and friends stay reachable."""

    def __call__(self, type: Any, index: int | None = None) -> Device:  # noqa: A002
        """As ``torch.device(type, index=None)``: ``"cpu"`` (and ``"cpu:0"``) names the host as
        ``Tensor.to("cpu")`` does (the default device when it is a host device, else Flex, with
        autodiff); ``"cuda"``, ``"cuda:1"``, ``("cuda", 1)`` or ``1`` name ``Device.cuda(i).autodiff()``
        (torch's tensors on every device record gradients); other strings go to ``Device.parse``;
        a ``Device`` is returned as is."""
        return _as_device(type, index)

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, Device)


# the class lives here, but the module's name is its own: ``ember.device.__module__`` (read from
# the class) must not point here, or tools that follow a member's ``__module__`` (the API
# reference's inspector) take the module for an alias of this one
_DeviceModule.__module__ = Device.__module__
sys.modules[Device.__module__].__class__ = _DeviceModule


#: ``ember.random``, imported on first use (it imports ml_dtypes: tens of milliseconds of
#: ``import ember``); a module global, not an import statement per call (a microsecond each)
_R: Any = None


def _rng() -> Any:
    """The ``ember.random`` module (imported on the first random op)."""
    global _R
    R = _R
    if R is None:
        from . import random as R

        _R = R
    return R


def _stream(generator: Any) -> Any:
    """The ``ember.random.Generator`` a random op draws from: ``generator``, or the global one when None."""
    R = _rng()
    if generator is None:
        return R.default_generator
    if isinstance(generator, R.Generator):
        return generator
    raise TypeError(f"generator must be an ember.random.Generator or None, got {type(generator).__name__}")


def _random(dist: str, shape: tuple[int, ...], d: dt.DType, device: Any, a: float, b: float,
            requires_grad: bool, generator: Any = None) -> Tensor:
    R = _rng()
    g = _stream(generator)
    bk = _device(device).backend()
    seed, offset = g.next_offset(R.blocks_used(dist, S.numel(shape), d))
    return _finish(_make(bk.random(dist, shape, d, seed, offset, a, b), bk, d), requires_grad)


def _float_dtype(dtype: Any) -> dt.DType:
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        from .errors import DTypeError

        raise DTypeError(f"rand/randn produce floating point values, got dtype={d}")
    return d


def rand(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """As ``torch.rand``: uniform on [0, 1), from the Philox stream (the same values on every device);
    ``generator``: an ``ember.random.Generator`` (None: the global one)."""
    return _random("uniform", S.sizes_arg(size), _float_dtype(dtype), device, 0.0, 1.0, requires_grad, generator)


def randn(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """As ``torch.randn``: standard normal, from the Philox stream (the same values on every device);
    ``generator``: an ``ember.random.Generator`` (None: the global one)."""
    return _random("normal", S.sizes_arg(size), _float_dtype(dtype), device, 0.0, 1.0, requires_grad, generator)


def randint(low: int, high: int | None = None, size: Sequence[int] = (), *, generator: Any = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.randint``: integers uniform on [low, high) (``randint(high, size)`` means low = 0),
    from the Philox stream; ``generator``: an ``ember.random.Generator`` (None: the global one)."""
    if high is None:
        low, high = 0, low
    elif not isinstance(high, int | np.integer) and size == ():
        low, high, size = 0, low, high  # randint(high, size), as PyTorch allows
    if not high > low:
        raise ValueError(f"randint needs low < high, got [{low}, {high})")
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    shape = S.sizes_arg((size,)) if not isinstance(size, int | np.integer) else (size,)
    return _random("randint", shape, d, device, int(low), int(high), requires_grad, generator)


# --------------------------------------------------------------------------- *_like
def _like(t: Tensor, dtype: Any, device: Any) -> tuple[tuple[int, ...], Any, Any]:
    return t.shape, dtype if dtype is not None else t.dtype, device if device is not None else t.device


def zeros_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.zeros_like``: ``zeros`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return zeros(shape, dtype=d, device=dev, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.ones_like``: ``ones`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return ones(shape, dtype=d, device=dev, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.empty_like``: zeros (as ``empty``) with the shape of ``t`` and, unless given, its
    dtype and device."""
    return zeros_like(t, dtype, device, requires_grad)


def full_like(t: Tensor, fill_value: Any, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """As ``torch.full_like``: ``full`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return full(shape, fill_value, dtype=d, device=dev, requires_grad=requires_grad)


def rand_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.rand_like``: ``rand`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return rand(shape, dtype=d, device=dev, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """As ``torch.randn_like``: ``randn`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return randn(shape, dtype=d, device=dev, requires_grad=requires_grad)


def randint_like(t: Tensor, low: int, high: int | None = None, dtype: Any = None,
                 device: Any = None) -> Tensor:
    """As ``torch.randint_like``: ``randint`` with the shape of ``t`` and, unless given, its dtype and device."""
    shape, d, dev = _like(t, dtype, device)
    return randint(low, high, shape, dtype=d, device=dev)


# --------------------------------------------------------------------------- Tensor.new_*
class NewMethods:
    """``Tensor.new_*`` (a method table: ``install_methods`` copies it onto Tensor; they live here,
    above the Tensor class, because they are creation functions)."""

    __slots__ = ()

    def new_full(self, size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """As ``torch.Tensor.new_full``: this tensor's dtype and device unless given."""
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
        return tensor(data, dtype=dtype if dtype is not None else self._dt,
                      device=device if device is not None else self.device, requires_grad=requires_grad)


install_methods(NewMethods)
