"""The ember version every persisted artefact and decision is keyed by (compiled kernels,
autotune decisions, throughput probes): a new version never reads an older one's entries."""

from __future__ import annotations

import sys

__all__ = ["ember_version"]


def ember_version() -> str:
    """``ember.__version__`` ("0" while ``ember`` itself is still importing), read from
    ``sys.modules``: asking for it never imports the package."""
    mod = sys.modules.get("ember")
    return str(getattr(mod, "__version__", "0"))
