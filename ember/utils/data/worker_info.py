"""The current worker's ``WorkerInfo`` (None in the main process): state that the worker loop
sets and the collation reads, kept apart from both so neither imports the other."""

from __future__ import annotations

from typing import Any

__all__ = ["WorkerInfo", "get_worker_info"]

#: the WorkerInfo of this process when it is a DataLoader worker (None in the main process)
_worker_info: WorkerInfo | None = None


class WorkerInfo:
    """As torch's ``WorkerInfo``: ``id``, ``num_workers``, ``seed`` and ``dataset`` (this
    worker's copy) of the current worker process; read-only."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    __initialized = False

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key: str, val: Any) -> None:
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


def get_worker_info() -> WorkerInfo | None:
    """As ``torch.utils.data.get_worker_info``: this worker's ``WorkerInfo``, None in the main
    process (shard an ``IterableDataset`` with its ``id`` and ``num_workers``)."""
    return _worker_info
