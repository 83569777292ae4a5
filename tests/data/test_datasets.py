"""ember.utils.data datasets against torch.utils.data (structure, lengths, errors)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember
from ember.utils import data as eud


def test_tensor_dataset_ember_and_numpy(rng):
    x = rng.standard_normal((6, 3)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    for xs in (ember.from_numpy(x), x):
        ds = eud.TensorDataset(xs, ember.from_numpy(y))
        assert len(ds) == 6
        s = ds[4]
        assert isinstance(s, tuple) and len(s) == 2
        np.testing.assert_array_equal(np.asarray(s[0]), x[4])
        assert s[1].item() == y[4]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        eud.TensorDataset(ember.from_numpy(x), ember.from_numpy(y[:5]))
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y[:5]))
    with pytest.raises(TypeError):
        eud.TensorDataset([1, 2, 3])


def test_subset_concat_stack_chain():
    base = list(range(10))
    sub = eud.Subset(base, [3, 1, 4])
    assert [sub[i] for i in range(3)] == [3, 1, 4] and len(sub) == 3
    assert sub.__getitems__([2, 0]) == [4, 3]
    arr = np.arange(10)
    assert eud.Subset(arr, [3, 1, 4])[[0, 1]].tolist() == tud.Subset(arr, [3, 1, 4])[[0, 1]].tolist()

    a, b = eud.TensorDataset(np.arange(3)), eud.TensorDataset(np.arange(10, 15))
    cat = a + b
    tcat = tud.ConcatDataset([tud.TensorDataset(torch.arange(3)), tud.TensorDataset(torch.arange(10, 15))])
    assert isinstance(cat, eud.ConcatDataset) and len(cat) == len(tcat) == 8
    assert cat.cumulative_sizes == tcat.cumulative_sizes == [3, 8]
    for i in range(-8, 8):
        assert int(cat[i][0]) == int(tcat[i][0])
    with pytest.raises(ValueError, match="absolute value of index"):
        cat[-9]
    with pytest.raises(AssertionError):
        eud.ConcatDataset([])

    st = eud.StackDataset(base, [v * 10 for v in base])
    assert st[2] == (2, 20) and len(st) == 10
    assert st.__getitems__([1, 2]) == [(1, 10), (2, 20)]
    sd = eud.StackDataset(a=base, b=sub.dataset)
    assert sd[5] == {"a": 5, "b": 5}
    assert sd.__getitems__([0, 9]) == [{"a": 0, "b": 0}, {"a": 9, "b": 9}]
    with pytest.raises(ValueError, match="Size mismatch"):
        eud.StackDataset(base, [1])
    with pytest.raises(ValueError):
        eud.StackDataset(base, b=base)

    class It(eud.IterableDataset):
        def __init__(self, r):
            self.r = r

        def __iter__(self):
            return iter(self.r)

        def __len__(self):
            return len(self.r)

    chain = It(range(3)) + It(range(5, 7))
    assert isinstance(chain, eud.ChainDataset)
    assert list(chain) == [0, 1, 2, 5, 6] and len(chain) == 5
    with pytest.raises(AssertionError):
        eud.ConcatDataset([It(range(2))])


def test_subset_override_needs_getitems():
    class Bad(eud.Subset):
        def __getitem__(self, i):
            return 0

    with pytest.raises(NotImplementedError, match="__getitems__"):
        Bad([1, 2], [0])


@pytest.mark.parametrize("n", [10, 11, 97])
def test_random_split_lengths_match_torch(n):
    for fracs in ([0.3, 0.3, 0.4], [0.5, 0.5], [0.1, 0.2, 0.7], [1 / 3, 1 / 3, 1 / 3]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = eud.random_split(range(n), fracs, generator=0)
            ref = tud.random_split(range(n), fracs, generator=torch.Generator().manual_seed(0))
        assert [len(s) for s in ours] == [len(s) for s in ref]
        got = sorted(i for s in ours for i in (s[j] for j in range(len(s))))
        assert got == list(range(n))  # a partition


def test_random_split_ints_determinism_and_errors():
    parts = eud.random_split(range(20), [5, 15], generator=ember.random.Generator(3))
    again = eud.random_split(range(20), [5, 15], generator=3)
    other = eud.random_split(range(20), [5, 15], generator=4)
    assert [list(p.indices) for p in parts] == [list(p.indices) for p in again]
    assert [list(p.indices) for p in parts] != [list(p.indices) for p in other]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(20))
    ember.manual_seed(7)
    g1 = [list(p.indices) for p in eud.random_split(range(20), [10, 10])]
    ember.manual_seed(7)
    assert g1 == [list(p.indices) for p in eud.random_split(range(20), [10, 10])]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        eud.random_split(range(20), [5, 5])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        eud.random_split(range(2), [0.9, 0.1])
    with pytest.raises(ValueError, match="Fraction at index 0"):
        eud.random_split(range(10), [-0.5, 1.5])
