"""Datasets, as ``torch.utils.data.dataset``: ``Dataset``, ``IterableDataset``, ``TensorDataset``,
``StackDataset``, ``ConcatDataset``, ``ChainDataset``, ``Subset`` and ``random_split``.

Differences from torch: ``TensorDataset`` also takes numpy arrays (samples are then numpy rows,
which ``default_collate`` turns into tensors); ``random_split``'s permutation comes from ember's
Philox stream (``_rng``), so the same seed splits differently from torch (deterministically).
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from ...tensor import Tensor
from . import _rng

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
    "Subset", "random_split",
]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class Dataset(Generic[T_co]):
    """As ``torch.utils.data.Dataset``: a map from keys (usually ``0 .. len - 1``) to samples.

    Subclasses define ``__getitem__`` and usually ``__len__`` (samplers and ``len(loader)`` need
    it); ``__getitems__(indices)`` (optional) fetches a whole batch, as torch's protocol."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """As ``torch.utils.data.IterableDataset``: a stream of samples (``__iter__``).

    With ``num_workers > 0`` every worker iterates its own copy: shard the stream in
    ``__iter__`` with ``get_worker_info()`` (``id``, ``num_workers``), or each sample comes
    ``num_workers`` times."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


def _first_dim(t: Any) -> int:
    shape = t.shape
    if not shape:
        raise ValueError("TensorDataset needs tensors of at least one dimension (samples are rows)")
    return int(shape[0])


class TensorDataset(Dataset[tuple[Any, ...]]):
    """As ``torch.utils.data.TensorDataset``: sample ``i`` is ``tuple(t[i] for t in tensors)``.

    The tensors are ember tensors or numpy arrays (an ember extension) with equal first dims.
    In ``DataLoader`` worker processes ember tensors travel as their numpy values, read once
    per loader iterator (not per sample)."""

    tensors: tuple[Any, ...]

    def __init__(self, *tensors: Tensor | np.ndarray) -> None:
        if not tensors:
            raise IndexError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, (Tensor, np.ndarray)):
                raise TypeError(f"TensorDataset takes ember tensors or numpy arrays, got {type(t).__name__}")
        n = _first_dim(tensors[0])
        if any(_first_dim(t) != n for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Any, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return _first_dim(self.tensors[0])


class StackDataset(Dataset[Any]):
    """As ``torch.utils.data.StackDataset``: sample ``i`` is ``tuple(d[i] for d in args)`` or
    ``{k: d[i] for k, d in kwargs.items()}``."""

    datasets: tuple[Any, ...] | dict[str, Any]

    def __init__(self, *args: Dataset[Any], **kwargs: Dataset[Any]) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])  # type: ignore[arg-type]
        if any(self._length != len(d) for d in parts):  # type: ignore[arg-type]
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list[Any]) -> list[Any]:
        """A batch of samples; parts with their own ``__getitems__`` fetch the batch at once."""
        def part(d: Any) -> list[Any]:
            getitems = getattr(d, "__getitems__", None)
            if callable(getitems):
                items = getitems(indices)
                if len(items) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                                     f"got {len(items)}")
                return list(items)
            return [d[i] for i in indices]

        if isinstance(self.datasets, dict):
            cols = {k: part(d) for k, d in self.datasets.items()}
            return [{k: cols[k][j] for k in cols} for j in range(len(indices))]
        tcols = [part(d) for d in self.datasets]
        return [tuple(c[j] for c in tcols) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """As ``torch.utils.data.ConcatDataset``: the datasets one after another."""

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        """Running totals of the lengths (``cumulative_sizes``)."""
        return list(itertools.accumulate(len(e) for e in sequence))

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[d - 1] if d > 0 else 0
        return self.datasets[d][idx - start]


class ChainDataset(IterableDataset[Any]):
    """As ``torch.utils.data.ChainDataset``: iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)  # type: ignore[arg-type]
        return total


class Subset(Dataset[T_co]):
    """As ``torch.utils.data.Subset``: ``dataset`` at ``indices``."""

    dataset: Dataset[T_co]
    indices: Sequence[int]

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            # the DataLoader fetches batches through __getitems__, which would bypass the override
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. When subclassing Subset "
                "and overriding __getitem__, you must also override __getitems__ to ensure DataLoader works "
                "correctly with your custom logic. A simple implementation:\n\n"
                "def __getitems__(self, indices):\n    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx: Any) -> T_co:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        """A batch: through the dataset's own ``__getitems__`` where it has one."""
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset[T], lengths: Sequence[int | float],
                 generator: _rng.GeneratorLike = None) -> list[Subset[T]]:
    """As ``torch.utils.data.random_split``: non-overlapping random subsets of the given lengths.

    Fractions summing to 1 become ``floor(frac * len(dataset))`` each, the remainder handed out
    one by one round-robin from the first split (torch's rule; an empty split warns).
    ``generator``: an ``ember.random.Generator``, an int seed, or None (torch's default is its
    default generator; here None draws from ember's global stream, ``ember.manual_seed``).
    The permutation differs from torch's for the same seed (ember's Philox stream)."""
    n = len(dataset)  # type: ignore[arg-type]
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(n * frac))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, length in enumerate(sizes):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _rng.randperm(n, _rng.as_generator(generator)).tolist()
    out = []
    for end, length in zip(itertools.accumulate(lengths), lengths):
        out.append(Subset(dataset, perm[end - length: end]))
    return out
