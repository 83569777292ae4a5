"""Typed exceptions. Every error is raised on the calling thread, by the call that caused it.

Each class also derives from the builtin a Python user would catch (``ValueError``,
``TypeError``, ``IndexError``, ...), so code written for PyTorch/numpy keeps working. Where
PyTorch raises ``RuntimeError`` for the same mistake (mismatched shapes, a dtype an op does not
take, tensors on two devices, an out-of-range gather index, an exhausted device), the class
derives from ``RuntimeError`` too, so ``except RuntimeError`` written for torch catches it.
"""

from __future__ import annotations

from typing import Any


class EmberError(Exception):
    """Base of every ember error."""


class ShapeError(EmberError, ValueError, RuntimeError):
    """Shapes that do not fit together (the message names both)."""


class DimError(ShapeError, IndexError):
    """A ``dim`` argument out of range for the tensor's rank."""


class DTypeError(EmberError, TypeError, RuntimeError):
    """An operation that is not defined for the given dtype(s)."""


class UnsupportedDTypeError(DTypeError):
    """A device that cannot hold tensors of a dtype at all (e.g. float64 on a WGSL device)."""


class DeviceMismatchError(EmberError, ValueError, RuntimeError):
    """Tensors of one operation live on different devices."""


class IndexOutOfRangeError(EmberError, IndexError, RuntimeError):
    """An index outside the bounds of the indexed dimension."""


class DeviceIndexError(IndexOutOfRangeError, RuntimeError):
    """An index value outside its dimension, found on the device by the kernel that read it and
    raised at the next read (``docs/evaluation.md``, "Index errors"). An ``IndexError`` (torch's
    type for indexing and ``index_select``) and a ``RuntimeError`` (torch's for ``gather`` and
    ``scatter``)."""


class AutodiffError(EmberError, RuntimeError):
    """Backward cannot run (no autodiff device, integer tensors, freed graph, ...)."""


class GradientShapeError(ShapeError, AutodiffError):
    """A gradient of the wrong shape (given to backward, or returned by a hook or a custom
    function's backward): a ShapeError, and a RuntimeError as torch raises there."""


class DeviceUnavailableError(EmberError, RuntimeError):
    """A device cannot be used here; the message lists what was found instead."""

    def __init__(self, message: str, adapters: list[str] | None = None) -> None:
        self.adapters = list(adapters or [])
        if self.adapters:
            message = message + "\nadapters found:\n" + "\n".join(f"  - {a}" for a in self.adapters)
        super().__init__(message)


def unavailable(device: object, why: str, adapters: list[str] | None = None) -> DeviceUnavailableError:
    """The error saying ``device`` cannot be used and why (raised on the calling thread)."""
    return DeviceUnavailableError(f"{device!r} is not available: {why}", adapters)


class CompilationError(EmberError, RuntimeError):
    """A kernel failed to compile; carries the source and the compiler's output."""

    def __init__(self, message: str, source: str = "", log: str = "") -> None:
        self.source = source
        self.log = log
        text = message
        if log:
            text += "\n--- compiler output ---\n" + log.strip()
        super().__init__(text)


class ZeroDivisionByIntegerError(EmberError, ZeroDivisionError, RuntimeError):
    """An integer ``//`` or ``%`` by zero (PyTorch raises ``RuntimeError: ZeroDivisionError`` on
    the CPU; catchable as either)."""


class IntegerPowerError(EmberError, ValueError, RuntimeError):
    """An integer tensor raised to a negative integer scalar power (PyTorch's RuntimeError)."""


class OutOfMemoryError(EmberError, MemoryError, RuntimeError):
    """A device allocation failed even after cached blocks were released (as
    ``torch.OutOfMemoryError``). ``requested``: the bytes asked for (the size class's capacity);
    ``allocated``: the bytes the pool held for live tensors at the failure; ``released``: the
    cached bytes given back before the retry (None where the raiser does not know). The device
    stays usable: nothing that was allocated before is lost."""

    def __init__(self, message: str, requested: int | None = None, allocated: int | None = None,
                 released: int | None = None, device: str = "") -> None:
        self.requested, self.allocated, self.released, self.device = requested, allocated, released, device
        super().__init__(message)


class DeviceFaultError(EmberError, RuntimeError):
    """A kernel faulted on the device (an illegal address, a trap, a device-side assert): a
    *sticky* error that leaves the device's context unusable until the process restarts
    (docs/gpu_faults.md). Launches are asynchronous, so the fault is reported by a later call
    (a sync or a read) and lies in one of the kernels launched since the last sync that
    succeeded: ``kernel`` is the last of them, ``recent`` the last few, oldest first, and
    ``since`` how many there were (None: not known). Every later call on the device raises this
    error again, at once.

    ``device``: e.g. ``cuda:0``; ``code``/``name``: the driver's error (700,
    ``CUDA_ERROR_ILLEGAL_ADDRESS``); ``call``: the call that reported it first."""

    def __init__(self, device: str, code: int, name: str, call: str, recent: list[str] | tuple[str, ...],
                 since: int | None = None, detail: str = "") -> None:
        self.device, self.code, self.name, self.call, self.detail = device, code, name, call, detail
        self.since = since
        self.recent = tuple(recent)
        self.kernel = self.recent[-1] if self.recent else None
        earlier = ", ".join(reversed(self.recent[:-1]))  # newest first
        if self.kernel is None:
            where = "(no kernel was launched since the last sync: an earlier fault, or another library's work)"
        elif since is None:
            where = f"in kernel {self.kernel}" + (f" (or one of the last launches: {earlier})" if earlier else "")
        elif since <= 1:
            where = f"in kernel {self.kernel} (the only kernel launched since the last sync)"
        elif since <= len(self.recent):
            where = (f"in kernel {self.kernel} (or one of the {since - 1} launched before it since the last sync, "
                     f"newest first: {earlier})")
        else:
            where = (f"in kernel {self.kernel} (or one of the {since - 1} launched before it since the last sync; "
                     f"the last of them, newest first: {earlier})")
        text = f"{device}: {name} {where}; reported by {call}"
        if detail:
            text += f" [{detail}]"
        text += (". The device's context is lost (a sticky error): every later call on this device raises this "
                 "error; restart the process to use the device again.")
        super().__init__(text)

    def __reduce__(self) -> Any:  # picklable with its fields (worker processes pass errors on)
        return (type(self), (self.device, self.code, self.name, self.call, self.recent, self.since, self.detail))


class KernelBoundsError(EmberError, IndexError):
    """Checked mode (``EMBER_CUBE_CHECKED=1``): a kernel read or wrote outside an array. Names the
    kernel, the array and the first bad index (in the array's lines of ``width`` elements); the
    access itself read 0 or was dropped."""

    def __init__(self, kernel: str, array: str, index: int, length: int, width: int = 1) -> None:
        self.kernel, self.array, self.index, self.length, self.width = kernel, array, index, length, width
        unit = f" (lines of {width} elements)" if width > 1 else ""
        super().__init__(
            f"kernel {kernel} accessed {array} at index {index}, outside its {length} elements{unit} "
            "(checked mode: the first bad access of the launch)"
        )


class CheckpointError(EmberError, RuntimeError):
    """A checkpoint file that ``ember.load`` cannot read: truncated, corrupt, or not written
    by ``ember.save`` / safetensors (RuntimeError, as ``torch.load`` raises for a bad file)."""


class CubeSyntaxError(EmberError, SyntaxError):
    """A ``@cube`` function uses Python the kernel language does not have (or mixes types).

    ``str(e)`` reads ``file:line: what`` followed by a ``hint:`` saying what to write instead;
    ``filename``, ``lineno`` and ``text`` are set as for a Python ``SyntaxError``, so the
    traceback shows the kernel line itself.
    """

    def __init__(
        self,
        what: str,
        filename: str = "<kernel>",
        lineno: int = 0,
        text: str = "",
        hint: str = "",
        col: int = 0,
    ) -> None:
        self.what = what
        self.hint = hint
        msg = f"{filename}:{lineno}: {what}"
        if hint:
            msg += f"\nhint: {hint}"
        super().__init__(msg, (filename, lineno, col + 1 if text else None, text))

    def __str__(self) -> str:  # SyntaxError's own __str__ appends "(file, line N)" again
        return self.msg
