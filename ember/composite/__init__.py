"""Ops composed from the catalog's ops that torch has and the backends need no kernel for, by
family: ``elementwise``, ``shape``, ``indexing``, ``reductions``, ``products`` (matrix products).

Every function here takes torch's arguments, runs on every device (it only calls Tensor
methods) and differentiates through its composition. Importing the package attaches the ones
torch also has as Tensor methods (each module's ``TENSOR_METHODS``; a name the Tensor class
defines itself keeps its own method: ``Tensor.fix`` is ``trunc``); ``ember.functional`` exports
all of them as ``ember.<name>``.
"""

from __future__ import annotations

from ..tensor import Tensor
from . import elementwise, indexing, products, reductions, shape
from .elementwise import *  # noqa: F403
from .indexing import *  # noqa: F403
from .products import *  # noqa: F403
from .reductions import *  # noqa: F403
from .shape import *  # noqa: F403

_FAMILIES = (elementwise, shape, indexing, reductions, products)

__all__ = [name for mod in _FAMILIES for name in mod.__all__]


def _install() -> None:
    for mod in _FAMILIES:
        for name in mod.TENSOR_METHODS:
            if name in Tensor.__dict__:
                continue  # a method of the class's own (``Tensor.fix`` is ``trunc``)
            setattr(Tensor, name, getattr(mod, name))


_install()
