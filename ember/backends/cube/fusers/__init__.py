"""Fusers: each looks at a queued op sequence and offers to run a block of it as one kernel.

The interface the Fusion search uses (``Fusion.search``):

* ``name``: shown by the inspector and in ``fuse`` spans.
* ``claim(ops, i) -> (stop, score, data) | None``: can this fuser take ``ops[i:stop]`` as one
  block? ``score`` ranks competing claims at the same position (higher wins; roughly the
  number of memory round trips saved); ``data`` is whatever ``execute`` needs, prepared once
  per plan (plans are cached, so it must hold no tensor values, only their relative layout).
* ``execute(inner, ops, data, env)``: run the block; ``env`` maps tensor id -> inner
  primitive; it reads its inputs there and writes every output that a later op or a live
  handle may read.
"""

from __future__ import annotations

from typing import Any

__all__ = ["default_fusers"]


def default_fusers(backend: Any) -> list[Any]:
    """The fusers for a Cube backend (order matters only for equal scores)."""
    from .elementwise import ElementwiseFuser
    from .horizontal import HorizontalFuser
    from .matmul_epilogue import MatmulEpilogueFuser
    from .reduce_prologue import ReducePrologueFuser

    return [ElementwiseFuser(backend), MatmulEpilogueFuser(backend), ReducePrologueFuser(backend),
            HorizontalFuser(backend)]
