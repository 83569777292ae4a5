"""DataLoader in the main process (num_workers=0) and default_collate, against torch.utils.data."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import ember
from ember import Device
from ember.utils import data as eud

Point = collections.namedtuple("Point", ["x", "y"])

_DT = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.int32: "int32",
       torch.bool: "bool", torch.uint8: "uint8", torch.float16: "float16"}


def _same(ours, ref):
    """``ours`` (ember) has the structure, container types, shapes, dtypes and values of ``ref`` (torch)."""
    if isinstance(ref, torch.Tensor):
        assert isinstance(ours, ember.Tensor), type(ours)
        assert ours.dtype.name == _DT[ref.dtype] and tuple(ours.shape) == tuple(ref.shape)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
        return
    assert type(ours) is type(ref), (type(ours), type(ref))
    if isinstance(ref, dict):
        assert list(ours) == list(ref)
        for k in ref:
            _same(ours[k], ref[k])
    elif isinstance(ref, (list, tuple)):
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):
            _same(a, b)
    else:
        assert ours == ref


class Mixed:
    """Map-style samples of every type default_collate knows."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"f": i * 0.5, "i": i, "b": i % 2 == 0, "s": f"s{i}", "np": np.full((2, 2), i, np.float32),
                "npi": np.arange(3, dtype=np.int32) + i, "sc": np.float32(i), "t": (i, [float(i), True]),
                "p": Point(np.float64(i), b"x")}


def _torch_mixed(n):
    ds = Mixed(n)

    class T(tud.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return ds[i]
    return T()


@pytest.mark.parametrize("batch_size,drop_last", [(4, False), (4, True), (1, False), (None, False)])
def test_collate_structure_matches_torch(batch_size, drop_last):
    ours = list(eud.DataLoader(Mixed(10), batch_size=batch_size, drop_last=drop_last))
    ref = list(tud.DataLoader(_torch_mixed(10), batch_size=batch_size, drop_last=drop_last))
    assert len(ours) == len(ref) == len(eud.DataLoader(Mixed(10), batch_size=batch_size, drop_last=drop_last))
    for a, b in zip(ours, ref):
        _same(a, b)


def test_default_collate_and_convert_rules():
    cases = [[1.5, 2.0], [1, 2], [True, False], [1, True], [np.float32(1), np.float32(2)], [np.int32(3)],
             [np.bool_(True)], [(1, "a"), (2, "b")], [[1, 2], [3, 4]], [{"a": 1}, {"a": 2}],
             [np.zeros((2, 3), np.float16), np.ones((2, 3), np.float16)], ["x", "y"], [b"x"]]
    for batch in cases:
        _same(eud.default_collate(batch), tud.default_collate(batch))
    t = [ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])]
    _same(eud.default_collate(t), tud.default_collate([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]))
    for sample in ([np.arange(3), 1, "a"], (np.float64(2.5), np.zeros(2, np.uint8)), {"k": np.ones(2)},
                   Point(np.arange(2), 3), np.array(["a", "b"])):
        ref = tud.default_convert(sample)
        got = eud.default_convert(sample)
        if isinstance(ref, np.ndarray):
            assert isinstance(got, np.ndarray)
        else:
            _same(got, ref)
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        eud.default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        eud.default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        eud.default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        eud.default_collate([np.zeros(2), np.zeros(3)])


def test_tensor_dataset_batches_match_torch(rng):
    x = rng.standard_normal((11, 2, 3)).astype(np.float32)
    y = rng.integers(0, 9, 11)
    for dev in (None, Device.cpu()):
        ds = eud.TensorDataset(ember.from_numpy(x, device=dev), ember.from_numpy(y, device=dev))
        ref = list(tud.DataLoader(tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=4))
        for sub in (ds, eud.Subset(ds, list(range(11)))):  # the fast path and its Subset form
            ours = list(eud.DataLoader(sub, batch_size=4))
            for a, b in zip(ours, ref):
                _same(a, b)
                assert a[0].device == (dev or ember.get_default_device())
    # numpy arrays: the batches are on the default device; a user collate_fn sees the rows
    ours = list(eud.DataLoader(eud.TensorDataset(x, y), batch_size=4, collate_fn=lambda b: [r[1] for r in b]))
    assert ours[0] == list(y[:4])


def _epoch_ids(loader):
    return np.concatenate([b[1].numpy() for b in loader]).tolist()


def test_shuffle_determinism_and_coverage():
    ds = eud.TensorDataset(np.zeros((23, 1), np.float32), np.arange(23))
    for drop in (False, True):
        a = eud.DataLoader(ds, batch_size=5, shuffle=True, drop_last=drop, generator=1)
        b = eud.DataLoader(ds, batch_size=5, shuffle=True, drop_last=drop, generator=1)
        c = eud.DataLoader(ds, batch_size=5, shuffle=True, drop_last=drop, generator=2)
        ea1, ea2 = _epoch_ids(a), _epoch_ids(a)
        assert ea1 == _epoch_ids(b) and ea2 == _epoch_ids(b)  # epoch after epoch
        assert ea1 != _epoch_ids(c) and ea1 != ea2
        if drop:
            assert len(ea1) == 20 and len(set(ea1)) == 20
        else:
            assert sorted(ea1) == list(range(23))
    ember.manual_seed(5)
    g1 = [_epoch_ids(eud.DataLoader(ds, batch_size=5, shuffle=True)) for _ in range(2)]
    ember.manual_seed(5)
    assert g1 == [_epoch_ids(eud.DataLoader(ds, batch_size=5, shuffle=True)) for _ in range(2)]


def test_device_moves_batches():
    ds = eud.TensorDataset(np.arange(6, dtype=np.float32).reshape(3, 2), np.arange(3))
    dev = Device.flex()
    for collate in (None, lambda b: {"x": ember.stack([r[0] for r in b]) if isinstance(b[0][0], ember.Tensor)
                                     else ember.tensor(np.stack([r[0] for r in b]))}):
        for batch in eud.DataLoader(ds, batch_size=2, device=dev, collate_fn=collate):
            for t in (batch if isinstance(batch, list) else batch.values()):
                assert t.device == dev
    assert next(iter(eud.DataLoader(Mixed(2), batch_size=2, device="flex")))["f"].device == dev
    ember_ds = eud.TensorDataset(ember.from_numpy(np.ones((3, 2), np.float32), device=Device.cpu()))
    b = next(iter(eud.DataLoader(ember_ds, batch_size=3, device=dev)))[0]
    assert b.device == dev and b.numpy().sum() == 6


class Recording(eud.Dataset):
    def __init__(self, n):
        self.n, self.log = n, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.log.append(i)
        return i


def test_pin_memory_prepares_next_batch():
    ds = Recording(6)
    it = iter(eud.DataLoader(ds, batch_size=2, pin_memory=True))
    first = next(it)
    assert first.tolist() == [0, 1] and ds.log == [0, 1, 2, 3]  # batch 2 is ready before batch 1 is used
    assert [b.tolist() for b in it] == [[2, 3], [4, 5]]
    ds2 = Recording(6)
    next(iter(eud.DataLoader(ds2, batch_size=2)))
    assert ds2.log == [0, 1]


class Stream(eud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset_and_no_auto_collation():
    assert [b.tolist() for b in eud.DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in eud.DataLoader(Stream(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    assert len(eud.DataLoader(Stream(7), batch_size=3)) == 3
    assert list(eud.DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]  # default_convert keeps ints
    got = list(eud.DataLoader(eud.TensorDataset(np.arange(3)), batch_size=None))
    ref = list(tud.DataLoader(tud.TensorDataset(torch.arange(3)), batch_size=None))
    for a, b in zip(got, ref):
        _same(a, b)
    bs = eud.BatchSampler(eud.SequentialSampler(range(5)), 2, False)
    assert [b.tolist() for b in eud.DataLoader(list(range(5)), batch_sampler=bs)] == [[0, 1], [2, 3], [4]]


def test_argument_errors_match_torch():
    ds = list(range(4))
    bad = [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(persistent_workers=True),
           dict(sampler=[0, 1], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
           dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None, drop_last=True)]
    for kw in bad:
        with pytest.raises(ValueError) as e_ref:
            tud.DataLoader(ds, **kw)
        with pytest.raises(ValueError) as e:
            eud.DataLoader(ds, **kw)
        assert str(e.value) == str(e_ref.value)
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        eud.DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler"):
        eud.DataLoader(Stream(3), sampler=[0])
    with pytest.raises(ValueError, match="multiprocessing_context can only be used"):
        eud.DataLoader(ds, multiprocessing_context="spawn")
    with pytest.raises(ValueError, match="valid start method"):
        eud.DataLoader(ds, num_workers=1, multiprocessing_context="nope")
    dl = eud.DataLoader(ds, batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set"):
        dl.batch_size = 3
    dl.num_workers = 0  # not a frozen attribute (as torch)


def test_errors_in_main_process_propagate_unchanged():
    class Bad(eud.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            raise KeyError(i)

    with pytest.raises(KeyError):
        next(iter(eud.DataLoader(Bad(), batch_size=2)))
