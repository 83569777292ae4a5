"""Grad mode and inference mode: whether ops on tracked tensors record backward steps, per thread.

``with no_grad():`` (re-exported as ``ember.no_grad``) turns recording off for the calling
thread only, as in PyTorch; other threads keep theirs. ``set_grad_enabled(mode)`` sets it as a
plain call that sticks, or for a block or a function (context manager, decorator), as torch's.
Every one of them also works as a decorator. The flag is read only on the tracked path (an op
with at least one tracked input), so untracked ops never pay for the thread-local lookup.

``inference_mode()`` is ``no_grad`` that also marks the tensors made inside as inference
tensors (``Tensor.is_inference()``). ``gate.inference`` counts the threads inside inference
mode; when the first enters and when the last leaves, the callbacks given to
``watch_inference`` run, so the Tensor API swaps the function that allocates its results for
one that marks them (reading the calling thread's flag) only while some thread needs it: an
op pays nothing for inference mode while no thread is in it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "inference_mode",
           "is_inference_mode_enabled", "gate", "watch_inference"]

F = TypeVar("F", bound=Callable[..., Any])


class _Mode(threading.local):
    #: class attributes: the defaults every new thread starts with
    enabled: bool = True
    inference: bool = False


mode = _Mode()
_tls = mode  # (the same object, for methods whose parameter is named ``mode`` as torch's)


class _Gate:
    """``inference``: how many inference regions are open over all threads (see the module doc)."""

    __slots__ = ("inference",)

    def __init__(self) -> None:
        self.inference = 0


gate = _Gate()
_gate_lock = threading.Lock()
#: run with True when the first thread enters inference mode, with False when the last leaves
_watchers: list[Callable[[bool], None]] = []


def watch_inference(fn: Callable[[bool], None]) -> None:
    """Call ``fn(True)`` whenever inference mode becomes active in some thread and ``fn(False)``
    when no thread is in it any more (and ``fn(True)`` at once if some thread is in it now)."""
    with _gate_lock:
        _watchers.append(fn)
        if gate.inference:
            fn(True)


def is_grad_enabled() -> bool:
    """As ``torch.is_grad_enabled``: whether this thread records ops for autodiff (``no_grad`` off)."""
    return mode.enabled


def is_inference_mode_enabled() -> bool:
    """As ``torch.is_inference_mode_enabled``: whether this thread is inside ``inference_mode()``."""
    return mode.inference


class _GradMode:
    """Sets the calling thread's grad mode on entry and restores the previous one on exit."""

    _enabled: bool

    def __init__(self) -> None:
        # a stack, so one instance may be entered again while already entered
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(mode.enabled)
        mode.enabled = self._enabled

    def __exit__(self, *exc: Any) -> None:
        mode.enabled = self._prev.pop()

    def __call__(self, fn: F) -> F:
        kind = type(self)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with kind():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):  # noqa: N801  (PyTorch's name)
    """Ops inside record no backward steps: their results are untracked."""

    _enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Turn recording back on inside a ``no_grad`` block."""

    _enabled = True


class set_grad_enabled:  # noqa: N801
    """As ``torch.set_grad_enabled(mode)``: sets this thread's grad mode at once, so a plain call
    sticks; as a context manager the mode from before the call comes back on exit; as a
    decorator (``@set_grad_enabled(False)``) the call leaves the mode as it was and the function
    runs with ``mode`` each time."""

    def __init__(self, mode: bool) -> None:
        self.prev = _tls.enabled
        self.mode = bool(mode)
        _tls.enabled = self.mode

    def __enter__(self) -> None:
        mode.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        mode.enabled = self.prev

    def __call__(self, fn: F) -> F:
        mode.enabled = self.prev  # decorating does not change the mode (torch's order)
        want = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(want):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def clone(self) -> set_grad_enabled:
        """A new instance of the same mode (as torch's; it sets the mode, as construction does)."""
        return set_grad_enabled(self.mode)

    def __repr__(self) -> str:
        return f"ember.set_grad_enabled(mode={self.mode})"


class inference_mode:  # noqa: N801
    """As ``torch.inference_mode(mode=True)``: inside, grad mode is off and the tensors made are
    inference tensors (``is_inference()``); ``inference_mode(False)`` inside turns both back
    (grad mode on), as torch's. A context manager and a decorator, with or without the call
    (``@inference_mode`` and ``@inference_mode()``)."""

    def __new__(cls, mode: Any = True) -> Any:
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # ``@inference_mode`` on a function

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self._prev: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        self._prev.append((mode.enabled, mode.inference))
        _set_inference(self.mode)
        mode.enabled = not self.mode

    def __exit__(self, *exc: Any) -> None:
        enabled, inference = self._prev.pop()
        _set_inference(inference)
        mode.enabled = enabled

    def __call__(self, fn: F) -> F:
        want = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(want):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def clone(self) -> inference_mode:
        """A new instance of the same mode."""
        return inference_mode(self.mode)


def _set_inference(on: bool) -> None:
    """Set this thread's inference flag, keeping ``gate.inference`` the count of threads' open
    regions (a lock: entering and leaving only)."""
    if on is mode.inference:
        return
    with _gate_lock:
        before = gate.inference
        gate.inference += 1 if on else -1
        if (before == 0) != (gate.inference == 0):
            for fn in _watchers:
                fn(gate.inference > 0)
    mode.inference = on
