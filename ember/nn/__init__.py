"""ember.nn: modules, layers, losses and initialisation with PyTorch's names and semantics.

A model written against ``torch.nn`` ports by changing the import; see docs/nn.md for what
exists and every difference from PyTorch.
"""

from __future__ import annotations

from . import functional, init, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter

__all__ = ["Parameter", "Buffer", "functional", "init", "utils", *_modules_all]
