"""The layer classes of ``ember.nn``, one module file per family (as ``torch.nn.modules``)."""

from __future__ import annotations

from .activation import *  # noqa: F403
from .activation import __all__ as _activation
from .container import *  # noqa: F403
from .container import __all__ as _container
from .conv import *  # noqa: F403
from .conv import __all__ as _conv
from .distance import *  # noqa: F403
from .distance import __all__ as _distance
from .dropout import *  # noqa: F403
from .dropout import __all__ as _dropout
from .linear import *  # noqa: F403
from .linear import __all__ as _linear
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .module import Module
from .normalization import *  # noqa: F403
from .normalization import __all__ as _normalization
from .padding import *  # noqa: F403
from .padding import __all__ as _padding
from .pooling import *  # noqa: F403
from .pooling import __all__ as _pooling
from .rnn import *  # noqa: F403
from .rnn import __all__ as _rnn
from .sparse import *  # noqa: F403
from .sparse import __all__ as _sparse
from .transformer import *  # noqa: F403
from .transformer import __all__ as _transformer

__all__ = ["Module", *_activation, *_container, *_conv, *_distance, *_dropout, *_linear, *_loss, *_normalization,
           *_padding, *_pooling, *_rnn, *_sparse, *_transformer]
