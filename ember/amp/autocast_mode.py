"""``ember.autocast``: regions where ops run in an op-specific precision (as ``torch.autocast``).

Inside ``with ember.autocast("cpu"):`` the lower-precision ops (matmul and its family, linear,
convolutions, attention) cast their floating inputs to the region's dtype (``bfloat16`` by
default on ``"cpu"``, ``float16`` on ``"cuda"`` and ``"wgpu"``), and the float32 ops (softmax,
log_softmax, logsumexp, the norms and the losses) cast half inputs up to ``float32``. float64
inputs and non-floating inputs are never cast (torch's eligibility rule). Every other op runs in
the types its inputs have. The casts are ordinary differentiable ops: gradients flow back to the
float32 leaves in float32.

State is per thread (torch's is too): a region entered in one thread does not affect another.
The ops see it through ``ember.tensor._autocast``: ``active`` counts the enabled regions of all
threads, so outside autocast an op pays one attribute read; only when it is non-zero does an op
call ``lower``/``fp32`` here, which read the calling thread's state.

Device types: a tensor's device maps to ``"cpu"`` (Flex and the Cube CPU devices, with or
without Autodiff/Fusion), ``"cuda"`` (Cube CUDA) or ``"wgpu"`` (Cube wgpu). An op casts only
when autocast is enabled for its inputs' device type, as in torch.

Deliberate differences from torch (docs/amp.md): one set of op lists for every device type
(torch's CUDA lists, so softmax/log_softmax/layer_norm run in float32 on ``"cpu"`` too, where
torch's CPU autocast keeps them in bfloat16); among the Tensor methods only the matmul family,
softmax, log_softmax and logsumexp are autocast (elementwise math and sum keep their input
type, as on torch's CPU).
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .. import dtype as dt
from ..tensor import Tensor, _autocast, _make

__all__ = [
    "autocast", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available", "is_autocast_cache_enabled",
    "lower", "fp32", "promote", "device_type_of",
]

F = TypeVar("F", bound=Callable[..., Any])

#: the device types autocast knows, with their default lower-precision dtype (torch's: bfloat16
#: on CPU, float16 on CUDA; wgpu is a GPU whose shaders have f16 but no bf16)
_DEFAULT_DTYPE: dict[str, dt.DType] = {"cpu": dt.bfloat16, "cuda": dt.float16, "wgpu": dt.float16}
_SUPPORTED_DTYPES = (dt.bfloat16, dt.float16)
#: the dtypes a cast may change: float64 and non-floating inputs are not eligible (torch's rule)
_ELIGIBLE = (dt.float16, dt.bfloat16, dt.float32)
_HALF = (dt.float16, dt.bfloat16)

# one lock for the cross-thread ``_autocast.active`` counter (entering and leaving only)
_count_lock = threading.Lock()


class _ThreadState(threading.local):
    """The calling thread's autocast state; class attributes are a new thread's defaults."""

    #: device type -> the dtype of its enabled region; a type absent here is not autocast
    on: dict[str, dt.DType]
    #: device type -> dtype the next region uses when none is given (set_autocast_dtype in torch)
    dtypes: dict[str, dt.DType]
    cache_enabled: bool = True
    #: how many autocast regions (enabled or not) this thread is inside; the cast cache is
    #: cleared when the outermost one exits, as torch does
    nesting: int = 0
    #: id(a float32 leaf tensor requiring grad) -> (its primitive then, its cast tensor). A hit
    #: needs the same primitive: an in-place update gives the leaf a new one (and replaces the
    #: entry), and a new tensor reusing a dead one's id has another primitive unless it holds
    #: the same value, for which the cast is right too.
    cache: dict[int, tuple[Any, Tensor]]

    def __init__(self) -> None:
        self.on = {}
        self.dtypes = dict(_DEFAULT_DTYPE)
        self.cache = {}


_local = _ThreadState()

#: backend object -> its device type (computed once per backend; backends live as long as devices)
_TYPE_OF_BACKEND: dict[Any, str] = {}


def device_type_of(t: Tensor) -> str:
    """The autocast device type of a tensor: ``"cpu"``, ``"cuda"`` or ``"wgpu"``."""
    bk = t._bk
    kind = _TYPE_OF_BACKEND.get(bk)
    if kind is None:
        spec = bk.device.spec
        while spec[0] in ("autodiff", "fusion"):  # decorators wrap the backend that runs the op
            spec = spec[1]
        kind = "cpu" if spec[0] == "flex" else spec[1]
        _TYPE_OF_BACKEND[bk] = kind
    return kind


def _check_device_type(device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type == "flex":  # ``Device.flex().type`` (what ``ember.device("cpu").type`` reads): the host
        return "cpu"
    if device_type not in _DEFAULT_DTYPE:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return device_type


def is_autocast_available(device_type: str) -> bool:
    """As ``torch.amp.is_autocast_available``: whether autocast knows this device type (``"flex"``
    is ``"cpu"``)."""
    return device_type in _DEFAULT_DTYPE or device_type == "flex"


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """As ``torch.is_autocast_enabled``, for the calling thread. ``None`` (torch: CUDA) means the
    device type of ember's default device (``"cpu"`` unless ``EMBER_DEVICE`` says otherwise)."""
    if device_type is None:
        from ..creation import get_default_device

        device_type = _type_of_device(get_default_device())
    return _check_device_type(device_type) in _local.on


def get_autocast_dtype(device_type: str) -> dt.DType:
    """As ``torch.get_autocast_dtype``: the dtype autocast uses on ``device_type`` in this thread
    (the default one, ``bfloat16`` for ``"cpu"`` and ``float16`` for ``"cuda"``/``"wgpu"``, when no
    region set one)."""
    return _local.dtypes[_check_device_type(device_type)]


def is_autocast_cache_enabled() -> bool:
    """As ``torch.is_autocast_cache_enabled``: whether casts of float32 leaves requiring grad are
    cached inside the current autocast region of this thread (so a weight used twice is cast once)."""
    return _local.cache_enabled


def _type_of_device(device: Any) -> str:
    spec = device.spec
    while spec[0] in ("autodiff", "fusion"):
        spec = spec[1]
    return "cpu" if spec[0] == "flex" else spec[1]


class autocast:  # noqa: N801  (torch's name)
    """As ``torch.autocast``: a context manager (and decorator) for a mixed-precision region.

    ``device_type``: ``"cpu"`` (Flex and Cube CPU tensors), ``"cuda"`` or ``"wgpu"``. ``dtype``:
    ``bfloat16`` or ``float16`` (default: ``get_autocast_dtype(device_type)``); another dtype warns
    and disables the region, as torch does. ``enabled=False`` inside a region turns autocast off
    for that device type. ``cache_enabled`` (default: the current setting, initially True)
    caches the casts of float32 leaves that require grad until the outermost region exits.

    Differences from torch: the region never checks that a CUDA device exists (a ``"cuda"`` region
    on a machine without one simply affects no tensors); used as a decorator, each call enters
    a fresh region with the same arguments, so a decorated function is safe to call from
    several threads at once.
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _check_device_type(device_type)
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dt.as_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and self.fast_dtype not in _SUPPORTED_DTYPES:
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype is not supported. Disabling "
                          f"autocast.\n{device_type.upper()} Autocast only supports dtypes of ember.bfloat16, "
                          "ember.float16 currently.", stacklevel=2)
            enabled = False
        self._enabled = enabled
        # a stack, so one instance may be entered again while already entered (in one thread)
        self._saved: list[tuple[dt.DType | None, dt.DType, bool]] = []

    def __enter__(self) -> autocast:
        st = _local
        kind = self.device
        prev = st.on.get(kind)
        self._saved.append((prev, st.dtypes[kind], st.cache_enabled))
        st.dtypes[kind] = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        st.nesting += 1
        if self._enabled:
            st.on[kind] = self.fast_dtype
        else:
            st.on.pop(kind, None)
        _count(int(self._enabled) - int(prev is not None))
        return self

    def __exit__(self, *exc: Any) -> None:
        st = _local
        kind = self.device
        prev, prev_dtype, prev_cache = self._saved.pop()
        now = kind in st.on
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()
        if prev is None:
            st.on.pop(kind, None)
        else:
            st.on[kind] = prev
        st.dtypes[kind] = prev_dtype
        st.cache_enabled = prev_cache
        _count(int(prev is not None) - int(now))

    def __call__(self, fn: F) -> F:
        args = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with autocast(*args):
                return fn(*a, **kw)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled})"


def _count(delta: int) -> None:
    """Adjust the number of enabled regions over all threads (what the ops' one check reads)."""
    if delta:
        with _count_lock:
            _autocast.active += delta


def _cast(t: Any, to: dt.DType, cache: bool) -> Any:
    """``t`` cast to ``to`` when it is an eligible tensor (floating, not float64, not already ``to``)."""
    if not isinstance(t, Tensor) or t._dt is to or t._dt not in _ELIGIBLE:
        return t
    p, bk = t._p, t._bk
    if cache and t._dt is dt.float32 and bk.is_tracked(p) and bk.is_leaf(p):
        from ..backends.autodiff.mode import mode

        if mode.enabled:  # a cast recorded for backward is worth reusing; an untracked one is not
            st = _local
            hit = st.cache.get(id(t))
            if hit is not None and hit[0] is p and hit[1]._dt is to and not _freed(hit[1]._p):
                return hit[1]
            out = _make(bk.cast(p, to), bk, to)
            st.cache[id(t)] = (p, out)
            return out
    return _make(bk.cast(p, to), bk, to)


def _freed(p: Any) -> bool:
    """Whether a cached cast's graph node was freed by a backward (ember's autodiff frees every
    node it walks, even one that saved nothing, unless ``retain_graph``): then it is cast again,
    so a region running several forward/backward iterations reuses the cache safely."""
    node = getattr(p, "node", None)
    return node is not None and node.saved is None


def _target(tensors: tuple[Any, ...]) -> dt.DType | None:
    """The calling thread's autocast dtype for the device type of the first tensor (None: off)."""
    on = _local.on
    if not on:
        return None
    for t in tensors:
        if isinstance(t, Tensor):
            return on.get(device_type_of(t))
    return None


def lower(*tensors: Any) -> tuple[Any, ...]:
    """The inputs of a lower-precision op (matmul, linear, conv, attention): floating tensors
    other than float64 cast to the autocast dtype when autocast is enabled for their device
    type in this thread; otherwise (and for non-tensors, float64 and integer tensors) unchanged.
    Always returns a tuple, one entry per argument (``x, w, b = lower(x, w, b)``)."""
    to = _target(tensors)
    if to is None:
        return tensors
    cache = _local.cache_enabled
    return tuple(_cast(t, to, cache) for t in tensors)


def fp32(*tensors: Any) -> tuple[Any, ...]:
    """The inputs of a float32 op (softmax, norms, losses): float16/bfloat16 tensors cast to
    float32 when autocast is enabled for their device type in this thread; otherwise unchanged.
    Ops taking an explicit ``dtype=`` should not call it (torch's rule: the dtype wins)."""
    if _target(tensors) is None:
        return tensors
    return tuple(_make(t._bk.cast(t._p, dt.float32), t._bk, dt.float32)
                 if isinstance(t, Tensor) and t._dt in _HALF else t for t in tensors)


def promote(*tensors: Any) -> tuple[Any, ...]:
    """The inputs of a promote op (torch: cat, stack, addcmul, dot, ...): under autocast, floating
    tensors cast to the widest floating type among them. ember's own type promotion already does
    this for its ops; this is for composite ops that combine inputs without promoting."""
    if _target(tensors) is None:
        return tensors
    floats = [t._dt for t in tensors if isinstance(t, Tensor) and t._dt.is_floating_point]
    if not floats:
        return tensors
    widest = floats[0]
    for d in floats[1:]:
        widest = dt.promote_types(widest, d)
    return tuple(_make(t._bk.cast(t._p, widest), t._bk, widest)
                 if isinstance(t, Tensor) and t._dt.is_floating_point and t._dt is not widest else t
                 for t in tensors)


@contextmanager
def _suspend(t: Tensor) -> Iterator[None]:
    """Autocast off for ``t``'s device type in this thread for the duration (a "promote" op made
    of lower-precision ones, e.g. ``Tensor.dot`` through ``matmul``). The cross-thread count is
    left as it is: a suspended region is still entered, and the ops' check only gates the lookup."""
    on = _local.on
    kind = device_type_of(t)
    prev = on.pop(kind, None)
    try:
        yield
    finally:
        if prev is not None:
            on[kind] = prev


# the ops reach this module only through the gate in ember.tensor
_autocast.lower = lower
_autocast.fp32 = fp32
_autocast.suspend = _suspend
