"""Grad mode: whether ops on tracked tensors record backward steps, per thread.

``with no_grad():`` (re-exported as ``ember.no_grad``) turns recording off for the calling
thread only, as in PyTorch; other threads keep theirs. Both context managers also work as
decorators. The flag is read only on the tracked path (an op with at least one tracked
input), so untracked ops never pay for the thread-local lookup.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["no_grad", "enable_grad", "is_grad_enabled"]

F = TypeVar("F", bound=Callable[..., Any])


class _Mode(threading.local):
    #: class attribute: the default every new thread starts with
    enabled: bool = True


mode = _Mode()


def is_grad_enabled() -> bool:
    """As ``torch.is_grad_enabled``: whether this thread records ops for autodiff (``no_grad`` off)."""
    return mode.enabled


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
