"""The user-facing Tensor: PyTorch names and semantics over the op catalog.

The package is the bottom of the Tensor API; its modules import down this order, never up:

- ``core``: the ``Tensor`` class (three slots, attributes, autograd surface, read-out,
  pickling), ``_make`` and the default device;
- ``factories``: the generated binary, unary and in-place op methods;
- ``graph``: the autograd surface (``backward``, ``register_hook``, ``retain_grad``, ``grad_fn``)
  and the engine entry ``ember.autograd`` shares;
- ``elementwise``, ``arithmetic``, ``reductions``, ``shape``, ``conversions``, ``indexing``:
  method tables by family (``where``, ``cat``, ``stack``, ``pad`` are functions of theirs);
- ``dlpack``: the DLPack ABI and export (``Tensor.__dlpack__`` imports it on first use).

Importing the package copies every method table onto ``Tensor`` (``install_methods``), so a
method is a plain function in the class dict: the per-call cost of a method defined in the
class body. Modules above (``ember.creation``, ``ember.composite``) add their own methods the
same way (``new_zeros``, ``acos``, ...).

Semantics differ from PyTorch in one documented way: tensors are values. In-place methods
(``add_``, ``x[i] = v``) rebind the tensor to the result; a view taken earlier keeps the
values it had (as with JAX's ``.at[].set``), and ``.numpy()`` returns a read-only array.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .arithmetic import ArithmeticMethods
from .conversions import ConversionMethods
from .core import (
    _SCALARS,
    Tensor,
    _autocast,
    _check_device,
    _flat,
    _float_of,
    _from_array,
    _make,
    _new,
    _pyscalar,
    _raw,
    _scalar_for,
    _unpickle,
    get_default_device,
    install_methods,
    set_default_device,
)
from .elementwise import ElementwiseMethods, where
from .graph import GraphMethods
from .indexing import IndexingMethods
from .reductions import MinMax, ReductionMethods
from .shape import ShapeMethods, broadcast_tensors, cat, concat, concatenate, pad, stack

__all__ = ["Tensor", "where", "cat", "concat", "concatenate", "stack", "pad", "broadcast_tensors",
           "get_default_device", "set_default_device", "install_methods", "MinMax"]

# the private names other modules and tests import from ``ember.tensor`` (``_unpickle`` is
# also the name old pickles refer to)
_PRIVATE_EXPORTS = (_SCALARS, _autocast, _check_device, _flat, _float_of, _from_array, _make, _new, _pyscalar,
                    _raw, _scalar_for, _unpickle)

for _table in (ArithmeticMethods, ElementwiseMethods, ReductionMethods, ShapeMethods, ConversionMethods,
               IndexingMethods, GraphMethods):
    install_methods(_table)
del _table

if TYPE_CHECKING:
    # what static tools see: the class with its method tables as bases, so go-to-definition on
    # ``Tensor.matmul`` lands on the method's one definition (at run time the tables are copied
    # onto the class instead, which keeps every method a plain entry of the class dict)
    from .core import Tensor as _CoreTensor

    class Tensor(_CoreTensor, ArithmeticMethods, ElementwiseMethods, ReductionMethods,  # type: ignore[no-redef]
                 ShapeMethods, ConversionMethods, IndexingMethods, GraphMethods):
        """As ``torch.Tensor``."""


def _install_registry_methods() -> None:
    """Tensor methods the op registry (``ember.ops``) derives: each entry's ``front``, and the
    float binary ops without a scalar form (tensor or scalar operand, ints lifted to float)."""
    from .. import ops
    from .factories import _FLOATONLY, _binary

    for name, op in ops.REGISTRY.items():
        if hasattr(Tensor, name):
            continue
        if op.front is not None:
            setattr(Tensor, name, op.front)
        elif op.family == "binary" and op.float_only and not op.scalar_form:
            setattr(Tensor, name, _binary(name, _FLOATONLY, rop=f"{name}_scalar_unsupported",
                                         doc=f"As ``torch.{name}`` (float operands; ints become float).")[0])


_install_registry_methods()
