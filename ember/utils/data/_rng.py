"""Random draws of the data utilities, from ember's Philox streams (``ember.random``).

torch draws sampler permutations with ``torch.randperm(n, generator=g)``; ember has no
``randperm``, so the permutation here is the stable argsort of ``n`` int64 Philox keys (ties have
probability about ``n**2 / 2**65``: they keep index order, so the result is a function of the
stream alone). Everything is a pure function of ``(seed, offset)``: the same on every machine and
numpy version (numpy's own ``Generator`` methods do not promise that), and different from
torch's order for the same seed (a different generator).

A ``generator`` argument is an ``ember.random.Generator`` (what ``ember.random.Generator(seed)``
or ``ember.random.manual_seed`` returns), an int seed (turned into a Generator once, where the
object that holds it is made, so successive epochs continue one stream), or None: the global
stream that ``ember.manual_seed`` seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtype as dt
from ... import random as R

__all__ = ["GeneratorLike", "as_generator", "draw_seed", "randperm", "randint", "uniform"]

GeneratorLike = Any  # ember.random.Generator | int | None (Any: the union is documented above)

_MASK63 = (1 << 63) - 1


def as_generator(generator: Any) -> R.Generator | None:
    """``generator`` as an ``ember.random.Generator`` (an int seeds a new one), or None."""
    if generator is None or isinstance(generator, R.Generator):
        return generator
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        return R.Generator(int(generator))
    raise TypeError(f"generator must be an ember.random.Generator, an int seed or None, got "
                    f"{type(generator).__name__}")


def _stream(generator: R.Generator | None) -> R.Generator:
    return R.default_generator if generator is None else generator


def draw_seed(generator: R.Generator | None = None) -> int:
    """A seed in [0, 2**63) drawn from ``generator`` (the global stream when None): one block,
    as torch draws ``torch.empty((), dtype=torch.int64).random_()`` from its default generator."""
    seed, offset = _stream(generator).next_offset(1)
    w = R.philox_words(seed, offset, 1)
    return ((int(w[1]) << 32) | int(w[0])) & _MASK63


def randperm(n: int, generator: R.Generator | None = None) -> np.ndarray:
    """A permutation of ``range(n)`` (int64) from ``generator`` (the global stream when None)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"randperm needs n >= 0, got {n}")
    seed, offset = _stream(generator).next_offset(R.blocks_used("randint", n, dt.int64))
    keys = R.philox_values("randint", (n,), dt.int64, seed, offset, -(2**63), 2**63)
    return np.argsort(keys, kind="stable")


def randint(high: int, size: int, generator: R.Generator | None = None) -> np.ndarray:
    """``size`` int64 values uniform on [0, high)."""
    seed, offset = _stream(generator).next_offset(R.blocks_used("randint", size, dt.int64))
    return R.philox_values("randint", (size,), dt.int64, seed, offset, 0, int(high))


def uniform(size: int, generator: R.Generator | None = None) -> np.ndarray:
    """``size`` float64 values uniform on [0, 1)."""
    seed, offset = _stream(generator).next_offset(R.blocks_used("uniform", size, dt.float64))
    return R.philox_values("uniform", (size,), dt.float64, seed, offset, 0.0, 1.0)
