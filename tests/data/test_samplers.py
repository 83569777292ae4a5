"""ember.utils.data samplers: torch's deterministic outputs, and properties of the random ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch.utils.data as tud

import ember
from ember.utils import data as eud


def test_sequential_and_batch_sampler_match_torch():
    for n in (0, 1, 7, 10):
        assert list(eud.SequentialSampler(range(n))) == list(tud.SequentialSampler(range(n)))
        for bs in (1, 3, 5):
            for drop in (False, True):
                ours = eud.BatchSampler(eud.SequentialSampler(range(n)), bs, drop)
                ref = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, drop)
                assert list(ours) == list(ref) and len(ours) == len(ref)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="batch_size should be a positive integer"):
            eud.BatchSampler(range(3), bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean"):
        eud.BatchSampler(range(3), 2, 1)


def test_random_sampler_permutation_and_determinism():
    n = 50
    a = list(eud.RandomSampler(range(n), generator=5))
    assert sorted(a) == list(range(n)) and a != list(range(n))
    s = eud.RandomSampler(range(n), generator=ember.random.Generator(5))
    e1, e2 = list(s), list(s)
    assert e1 == a and e2 != e1 and sorted(e2) == list(range(n))  # one stream, successive epochs
    assert list(eud.RandomSampler(range(n), generator=6)) != a
    # no generator: each epoch seeds from the global stream, so ember.manual_seed replays the run
    ember.manual_seed(11)
    run1 = [list(eud.RandomSampler(range(n))) for _ in range(2)]
    ember.manual_seed(11)
    run2 = [list(eud.RandomSampler(range(n))) for _ in range(2)]
    assert run1 == run2 and run1[0] != run1[1]


def test_random_sampler_num_samples_and_replacement():
    s = eud.RandomSampler(range(4), num_samples=10, generator=0)
    got = list(s)
    assert len(s) == len(got) == 10
    assert all(got.count(i) >= 2 for i in range(4))  # two whole permutations, then a cut one
    assert sorted(got[:4]) == sorted(got[4:8]) == [0, 1, 2, 3]
    r = list(eud.RandomSampler(range(3), replacement=True, num_samples=5000, generator=1))
    assert len(r) == 5000 and set(r) == {0, 1, 2}
    assert all(abs(r.count(i) / 5000 - 1 / 3) < 0.04 for i in range(3))
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        eud.RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        eud.RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        eud.RandomSampler([], num_samples=None)
    with pytest.raises(TypeError, match="generator must be"):
        eud.RandomSampler(range(3), generator="seed")


def test_subset_random_sampler():
    idx = [10, 20, 30, 40, 50]
    got = list(eud.SubsetRandomSampler(idx, generator=3))
    assert sorted(got) == idx and len(eud.SubsetRandomSampler(idx)) == 5
    assert got == list(eud.SubsetRandomSampler(idx, generator=3))


def test_weighted_random_sampler_distribution():
    w = [0.1, 0.0, 0.6, 0.3]
    n = 20000
    got = np.array(list(eud.WeightedRandomSampler(w, n, generator=0)))
    freq = np.bincount(got, minlength=4) / n
    assert freq[1] == 0
    # binomial standard deviation at n=20000 is <= 0.0035: 5 sigma
    np.testing.assert_allclose(freq, w, atol=0.018)
    assert list(eud.WeightedRandomSampler(w, 50, generator=0)) == got[:50].tolist()  # same stream start
    # without replacement: distinct, never a zero weight, heavy ones first more often
    firsts = []
    for seed in range(300):
        draw = list(eud.WeightedRandomSampler(ember.tensor(w), 3, replacement=False, generator=seed))
        assert len(set(draw)) == 3 and 1 not in draw
        firsts.append(draw[0])
    f = np.bincount(firsts, minlength=4) / 300
    np.testing.assert_allclose(f, w, atol=0.1)
    with pytest.raises(RuntimeError, match="without replacement"):
        list(eud.WeightedRandomSampler(w, 4, replacement=False))
    with pytest.raises(RuntimeError, match="invalid multinomial"):
        list(eud.WeightedRandomSampler([1.0, -1.0], 2))
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        eud.WeightedRandomSampler(w, 0)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        eud.WeightedRandomSampler(w, 2, replacement=0)
    with pytest.raises(ValueError, match="1d sequence"):
        eud.WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="1d sequence"):
        tud.WeightedRandomSampler([[1.0, 2.0]], 2)


@pytest.mark.parametrize("n", [10, 11, 3])
def test_distributed_sampler_matches_torch_unshuffled(n):
    for replicas in (1, 2, 4):
        for drop in (False, True):
            for rank in range(replicas):
                ours = eud.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
                ref = tud.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
                assert list(ours) == list(ref) and len(ours) == len(ref)


def test_distributed_sampler_shuffled():
    n, replicas = 23, 3
    parts = [list(eud.DistributedSampler(range(n), replicas, r, seed=4)) for r in range(replicas)]
    flat = [i for p in parts for i in p]
    assert len(flat) == 24 and set(flat) == set(range(n))  # one index padded
    s = eud.DistributedSampler(range(n), replicas, 0, seed=4)
    e0 = list(s)
    s.set_epoch(1)
    assert list(s) != e0 and e0 == parts[0]
    with pytest.raises(ValueError, match="Invalid rank 3"):
        eud.DistributedSampler(range(n), 3, 3)
    with pytest.raises(RuntimeError, match="distributed"):
        eud.DistributedSampler(range(n))
    with pytest.raises(ValueError, match="Invalid rank 3"):
        tud.DistributedSampler(range(n), 3, 3)
