"""Datasets, samplers and the ``DataLoader``, as ``torch.utils.data`` (docs/data.md).

ember differences, in short: random orders come from ember's Philox stream (``generator=`` an
``ember.random.Generator`` or an int seed; deterministic, not torch's order), workers start by
forkserver (spawn where there is none) and exchange numpy with the main process, and
``DataLoader(device=...)`` moves batches to a device.
"""

from __future__ import annotations

from ._worker import WorkerInfo, get_worker_info
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
    "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
    "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate",
    "default_convert", "get_worker_info", "random_split",
]
