"""Utilities outside the tensor core, as ``torch.utils``: ``ember.utils.data`` (datasets, samplers,
``DataLoader``). Subpackages load on first use, so ``import ember.utils`` costs nothing."""

from __future__ import annotations

from typing import Any

__all__ = ["data"]


def __getattr__(name: str) -> Any:
    if name == "data":
        import importlib

        mod = importlib.import_module(".data", __name__)
        globals()["data"] = mod
        return mod
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")
