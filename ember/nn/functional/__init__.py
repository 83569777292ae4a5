"""ember.nn.functional: the stateless forms of the layers and losses, with torch's names and
keyword arguments (``import ember.nn.functional as F``)."""

from __future__ import annotations

from ._activation import *  # noqa: F403
from ._activation import __all__ as _activation
from ._attention import *  # noqa: F403
from ._attention import __all__ as _attention
from ._conv import *  # noqa: F403
from ._conv import __all__ as _conv
from ._dropout import *  # noqa: F403
from ._dropout import __all__ as _dropout
from ._interpolate import *  # noqa: F403
from ._interpolate import __all__ as _interpolate
from ._linear import *  # noqa: F403
from ._linear import __all__ as _linear
from ._loss import *  # noqa: F403
from ._loss import __all__ as _loss
from ._misc import *  # noqa: F403
from ._misc import __all__ as _misc
from ._norm import *  # noqa: F403
from ._norm import __all__ as _norm
from ._padding import *  # noqa: F403
from ._padding import __all__ as _padding
from ._pool import *  # noqa: F403
from ._pool import __all__ as _pool
from ._sparse import *  # noqa: F403
from ._sparse import __all__ as _sparse

__all__ = [*_activation, *_attention, *_conv, *_dropout, *_interpolate, *_linear, *_loss, *_misc, *_norm,
           *_padding, *_pool, *_sparse]
