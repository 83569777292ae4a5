"""Samplers, as ``torch.utils.data.sampler`` and ``torch.utils.data.distributed``.

Random samplers take ``generator=``: an ``ember.random.Generator``, an int seed (one Generator
made at construction, so successive epochs continue one stream), or None. Orders are
deterministic functions of ember's Philox stream, and differ from torch's for the same seed
(``_rng`` says why); with ``generator=None`` each epoch draws a fresh seed from the global
stream, so ``ember.manual_seed(s)`` makes a whole run of epochs reproducible (torch draws from its
default generator the same way).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from ... import random as R
from ...tensor import Tensor
from . import _rng

__all__ = [
    "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
    "BatchSampler", "DistributedSampler",
]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """As ``torch.utils.data.Sampler``: iterates over dataset keys (or batches of keys)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        # torch accepts and ignores data_source here (kept for subclasses that pass it)
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """As ``torch.utils.data.SequentialSampler``: ``0, 1, ..., len(data_source) - 1``."""

    data_source: Sized

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """As ``torch.utils.data.RandomSampler``: a shuffled order (or ``num_samples`` draws with
    replacement). Without replacement and ``num_samples > len``, whole permutations repeat and
    the last one is cut (torch's rule). ``generator``: see the module docstring."""

    data_source: Sized
    replacement: bool

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: _rng.GeneratorLike = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = _rng.as_generator(generator)
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        ns = self.num_samples
        if not isinstance(ns, int) or isinstance(ns, bool) or ns <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={ns}")

    @property
    def num_samples(self) -> int:
        """``len(data_source)`` unless given."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        # one stream per epoch: the given generator, or a fresh one seeded from the global stream
        g = self.generator if self.generator is not None else R.Generator(_rng.draw_seed())
        ns = self.num_samples
        if self.replacement:
            # drawn in chunks (as torch), so a huge num_samples never needs one huge array
            for start in range(0, ns, 4096):
                yield from _rng.randint(n, min(4096, ns - start), g).tolist()
            return
        for _ in range(ns // n):
            yield from _rng.randperm(n, g).tolist()
        if ns % n:
            yield from _rng.randperm(n, g)[: ns % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """As ``torch.utils.data.SubsetRandomSampler``: ``indices`` in a random order (a fresh
    permutation from ``generator`` every epoch; the global stream when None, as torch)."""

    indices: Sequence[int]

    def __init__(self, indices: Sequence[int], generator: _rng.GeneratorLike = None) -> None:
        self.indices = indices
        self.generator = _rng.as_generator(generator)

    def __iter__(self) -> Iterator[int]:
        for i in _rng.randperm(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


def _weights_array(weights: Any) -> np.ndarray:
    if isinstance(weights, Tensor):
        a = np.asarray(weights.numpy(), dtype=np.float64)
    else:
        a = np.asarray(weights, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(a.shape)}")
    return a


class WeightedRandomSampler(Sampler[int]):
    """As ``torch.utils.data.WeightedRandomSampler``: ``num_samples`` indices drawn with
    probabilities proportional to ``weights`` (``torch.multinomial``'s checks: weights finite,
    non-negative, positive sum; without replacement at most as many samples as non-zero
    weights).

    With replacement: inverse-CDF sampling of float64 uniforms. Without: the ``num_samples``
    largest keys ``u ** (1 / w)`` (exponential races, the same distribution as successive
    draws without replacement), in decreasing key order. ``weights`` is kept as a float64 numpy
    array (torch keeps a float64 tensor)."""

    weights: np.ndarray
    num_samples: int
    replacement: bool

    def __init__(self, weights: Sequence[float] | Tensor | np.ndarray, num_samples: int,
                 replacement: bool = True, generator: _rng.GeneratorLike = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        self.weights = _weights_array(weights)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = _rng.as_generator(generator)

    def _check(self) -> np.ndarray:
        w = self.weights
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0 or inf/nan)")
        if not w.sum() > 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not self.replacement and self.num_samples > int(np.count_nonzero(w)):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        return w

    def __iter__(self) -> Iterator[int]:
        w = self._check()
        u = _rng.uniform(self.num_samples if self.replacement else w.shape[0], self.generator)
        if self.replacement:
            cdf = np.cumsum(w)
            # side="right": u * total never lands on a zero-weight index (its cdf step is empty)
            idx = np.searchsorted(cdf, u * cdf[-1], side="right")
            np.minimum(idx, w.shape[0] - 1, out=idx)  # rounding of cdf[-1] at the very top
            yield from idx.tolist()
            return
        with np.errstate(divide="ignore"):
            # log key = log(u) / w: larger is earlier; zero weights get -inf and are never chosen
            keys = np.where(w > 0, np.log1p(-u) / np.where(w > 0, w, 1.0), -np.inf)
        order = np.argsort(-keys, kind="stable")[: self.num_samples]
        yield from order.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """As ``torch.utils.data.BatchSampler``: lists of ``batch_size`` keys from ``sampler`` (the
    last one shorter unless ``drop_last``)."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size


class DistributedSampler(Sampler[int]):
    """As ``torch.utils.data.distributed.DistributedSampler``: replica ``rank``'s share of the
    dataset, ``dataset[rank::num_replicas]`` of a (shuffled) order padded by repeating its start
    to a multiple of ``num_replicas`` (or cut to one with ``drop_last``).

    The epoch order is a permutation from an ``ember.random.Generator(seed + epoch)``, the same
    on every replica; call ``set_epoch`` each epoch. ember has no process group yet, so
    ``num_replicas`` and ``rank`` must be given (torch reads them from ``torch.distributed``)."""

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available: ember has no process group yet, "
                               "pass num_replicas= and rank=")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # the largest per-replica count that needs no padding
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = _rng.randperm(n, R.Generator(self.seed + self.epoch)).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        return iter(indices[self.rank: self.total_size: self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order ``__iter__`` gives (every replica must call it alike)."""
        self.epoch = epoch
