"""``nn.Parameter`` and ``nn.Buffer``: Tensor subclasses that mark module state (as torch.nn).

A Parameter is a leaf Tensor that a Module registers as a parameter when assigned as an
attribute. Operations on a Parameter return plain Tensors (every op builds its result with
``ember.tensor._make``, which makes a ``Tensor``), as torch's do.

Difference from torch: a Parameter on a device without autodiff (``Device.cpu()``, plain
``Device.flex()``) holds values only and reads ``requires_grad`` False there; it remembers
that it *wants* gradients, so ``module.to(dev.autodiff())`` tracks it again.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor

__all__ = ["Parameter", "Buffer"]


def _as_tensor(data: Any) -> Tensor:
    if data is None:
        from ..creation import empty

        return empty(0)
    if not isinstance(data, Tensor):
        raise TypeError(f"Parameter/Buffer data must be a Tensor, got {type(data).__name__}")
    return data


class Parameter(Tensor):
    """As torch.nn.Parameter: a leaf tensor that ``Module.__setattr__`` registers as a parameter.

    ``Parameter(data=None, requires_grad=True)``; ``data`` is detached (the Parameter shares its
    values, which are immutable, so nothing is copied)."""

    # _wants_grad: the requires_grad the user asked for; it differs from requires_grad only on
    # devices without autodiff, where nothing can be tracked
    __slots__ = ("_wants_grad",)

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        t = _as_tensor(data)
        self = object.__new__(cls)
        bk = t._bk
        self._bk = bk
        self._dt = t._dt
        self._p = bk.detach(t._p)
        self._wants_grad = False
        self.requires_grad_(requires_grad)
        return self

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)

    def requires_grad_(self, requires_grad: bool = True) -> Parameter:
        """As torch.Tensor.requires_grad_; on a device without autodiff the wish is recorded
        (and honoured once the parameter moves to an autodiff device)."""
        requires_grad = bool(requires_grad)
        self._wants_grad = requires_grad
        if self._bk.device.is_autodiff or not requires_grad:
            Tensor.requires_grad_(self, requires_grad)
        elif not self._dt.is_floating_point:
            Tensor.requires_grad_(self, True)  # raises torch's error for integer data
        return self

    @property
    def requires_grad(self) -> bool:  # type: ignore[override]
        """Whether gradients are recorded for this parameter (as torch)."""
        return self._bk.is_tracked(self._p)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        """Whether gradients are recorded for this parameter (as torch)."""
        self.requires_grad_(value)

    data = Tensor.data  # the getter's alias writes in-place updates back (``Tensor.data``)

    @data.setter
    def data(self, value: Tensor) -> None:
        """Rebind the parameter to ``value``'s data (as torch's ``param.data = t``)."""
        _rebind(self, value)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __reduce_ex__(self, protocol: Any) -> Any:
        from ..creation import from_numpy

        return (_rebuild_parameter, (from_numpy, self.numpy().copy(), self.device, self._wants_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter:
        p = Parameter(self.detach().clone(), self._wants_grad)
        memo[id(self)] = p
        return p


def _rebuild_parameter(from_numpy: Any, array: Any, device: Any, requires_grad: bool) -> Parameter:
    return Parameter(from_numpy(array, device=device), requires_grad)


def _rebind(param: Tensor, value: Tensor) -> None:
    """Point ``param`` (a Parameter, keeping its identity) at ``value``'s data, detached,
    with its requires_grad wish re-applied on the new device. Its ``.grad`` is dropped when
    the device, dtype or shape changes (callers move the grad themselves)."""
    wants = getattr(param, "_wants_grad", param.requires_grad)
    bk = value._bk
    param._bk = bk
    param._dt = value._dt
    param._p = bk.detach(value._p)
    if wants and bk.device.is_autodiff and value._dt.is_floating_point:
        param._p = bk.require_grad(param._p)


class Buffer(Tensor):
    """As torch.nn.Buffer (torch 2.x): marks a tensor as a buffer; assigning one as a module
    attribute registers it (``persistent=False`` keeps it out of ``state_dict``)."""

    __slots__ = ("persistent",)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Buffer:
        t = _as_tensor(data)
        self = object.__new__(cls)
        bk = t._bk
        # detached, keeping requires_grad (as torch's ``data.detach().requires_grad_(...)``)
        self._p = bk.require_grad(bk.detach(t._p)) if t.requires_grad else bk.detach(t._p)
        self._bk = bk
        self._dt = t._dt
        self.persistent = persistent
        return self

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True) -> None:
        pass
