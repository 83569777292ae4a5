"""Typed exceptions. Every error is raised on the calling thread, by the call that caused it.

Each class also derives from the builtin a Python user would catch (``ValueError``,
``TypeError``, ``IndexError``, ...), so code written for PyTorch/numpy keeps working.
"""

from __future__ import annotations


class EmberError(Exception):
    """Base of every ember error."""


class ShapeError(EmberError, ValueError):
    """Shapes that do not fit together (the message names both)."""


class DimError(ShapeError, IndexError):
    """A ``dim`` argument out of range for the tensor's rank."""


class DTypeError(EmberError, TypeError):
    """An operation that is not defined for the given dtype(s)."""


class UnsupportedDTypeError(DTypeError):
    """A device that cannot hold tensors of a dtype at all (e.g. float64 on a WGSL device)."""


class DeviceMismatchError(EmberError, ValueError):
    """Tensors of one operation live on different devices."""


class IndexOutOfRangeError(EmberError, IndexError):
    """An index outside the bounds of the indexed dimension."""


class AutodiffError(EmberError, RuntimeError):
    """Backward cannot run (no autodiff device, integer tensors, freed graph, ...)."""


class DeviceUnavailableError(EmberError, RuntimeError):
    """A device cannot be used here; the message lists what was found instead."""

    def __init__(self, message: str, adapters: list[str] | None = None) -> None:
        self.adapters = list(adapters or [])
        if self.adapters:
            message = message + "\nadapters found:\n" + "\n".join(f"  - {a}" for a in self.adapters)
        super().__init__(message)


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


class OutOfMemoryError(EmberError, MemoryError):
    """A device allocation failed even after cached blocks were released."""


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


def __getattr__(name: str) -> type:
    # the kernel language's error lives with the language; re-exported here lazily so that
    # importing ember.errors does not import the compiler
    if name == "CubeSyntaxError":
        from .cube.lang.errors import CubeSyntaxError

        return CubeSyntaxError
    raise AttributeError(f"module 'ember.errors' has no attribute {name!r}")
