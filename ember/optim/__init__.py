"""Optimizers and learning-rate schedulers, as ``torch.optim`` (docs/optim.md).

``Optimizer`` (the base), ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adamax``,
``Adadelta``, ``NAdam``, ``RAdam`` follow torch's single-tensor formulas and op order; ``Lion`` is
not in torch (the paper's update). ``ember.optim.lr_scheduler`` has torch's schedulers.
"""

from __future__ import annotations

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .lion import Lion
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "Lion", "Adadelta", "NAdam", "RAdam",
           "lr_scheduler"]
