"""The Cube backend's fusers: each looks at a queued op sequence and offers to run a block of it
as one ``@cube`` kernel (the interface: ``backends.fusion.hooks.Fuser``).

* ``elementwise``: a chain of elementwise ops, one kernel (``elementwise_kernel``);
* ``horizontal``: independent elementwise ops side by side, one launch;
* ``matmul_epilogue``: a matmul and the elementwise ops on its result (``matmul``);
* ``reduce_prologue``: the elementwise ops feeding a reduction, inside it (``reduce``);
* ``flat_cat``: flattening reshapes and the ``cat`` of their results, one launch.

The fusers read the Fusion layer's IR (``backends/fusion/ir.py``), the contract between the two
layers; nothing else of the Fusion layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["default_fusers"]


def default_fusers(backend: Any) -> list[Any]:
    """The fusers for a Cube backend (order matters only for equal scores)."""
    from .elementwise import ElementwiseFuser
    from .flat_cat import FlatCatFuser
    from .horizontal import HorizontalFuser
    from .matmul_epilogue import MatmulEpilogueFuser
    from .reduce_prologue import ReducePrologueFuser

    return [ElementwiseFuser(backend), MatmulEpilogueFuser(backend), ReducePrologueFuser(backend),
            HorizontalFuser(backend), FlatCatFuser(backend)]
