"""ember.dtype against torch: promotion of every pair of dtypes (tensors with dimensions, 0-d
tensors, Python scalars), the names and aliases, the scalar conversions of arithmetic (wrapping)
and of fills (raising), the numpy, pickle and dlpack round trips of every dtype."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
import torch

import ember
from ember import dtype as dt

#: every ember dtype beside its torch counterpart
PAIRS = [(d, getattr(torch, d.name)) for d in dt.ALL]


def _torch_of(d: dt.DType) -> torch.dtype:
    return getattr(torch, d.name)


def test_every_dtype_has_torchs_properties() -> None:
    assert [d.name for d in dt.ALL] == ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                        "float32", "float64"]
    for d, t in PAIRS:
        assert d.itemsize == t.itemsize, d
        assert d.is_floating_point == t.is_floating_point, d
        assert d.is_signed == t.is_signed, d
        assert getattr(ember, "bool" if d is dt.bool_ else d.name) is d


def test_promote_types_every_pair_as_torch() -> None:
    for (a, ta), (b, tb) in itertools.product(PAIRS, PAIRS):
        assert ember.promote_types(a, b) is dt.as_dtype(str(torch.promote_types(ta, tb)).removeprefix("torch.")), (a, b)


def _zeros(d: dt.DType, ndim: int) -> tuple[ember.Tensor, torch.Tensor]:
    shape = (2,) * ndim
    return ember.zeros(shape, dtype=d, device=ember.Device.flex()), torch.zeros(shape, dtype=_torch_of(d))


@pytest.mark.parametrize(("ndim_a", "ndim_b"), [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_result_type_tensor_pairs_as_torch(ndim_a: int, ndim_b: int) -> None:
    for a, b in itertools.product(dt.ALL, dt.ALL):
        ea, ta = _zeros(a, ndim_a)
        eb, tb = _zeros(b, ndim_b)
        want = str(torch.result_type(ta, tb)).removeprefix("torch.")
        assert ember.result_type(ea, eb) is dt.as_dtype(want), (a, ndim_a, b, ndim_b)


@pytest.mark.parametrize("scalar", [True, 2, -300, 2.5])
def test_result_type_with_python_scalars_as_torch(scalar: object) -> None:
    for a in dt.ALL:
        for ndim in (0, 1):
            ea, ta = _zeros(a, ndim)
            want = str(torch.result_type(ta, scalar)).removeprefix("torch.")
            assert ember.result_type(ea, scalar) is dt.as_dtype(want), (a, ndim, scalar)
            assert ember.result_type(scalar, ea) is dt.as_dtype(want), (scalar, a, ndim)


def test_names_and_aliases() -> None:
    assert ember.short is ember.int16 and ember.int is ember.int32 and ember.long is ember.int64
    assert not hasattr(ember, "char")  # torch has Tensor.char() but no torch.char dtype
    assert not hasattr(torch, "char")
    for name, d in [("int8", dt.int8), ("i8", dt.int8), ("int16", dt.int16), ("short", dt.int16), ("i16", dt.int16)]:
        assert dt.as_dtype(name) is d
    assert dt.as_dtype(np.int8) is dt.int8 and dt.as_dtype(np.dtype("int16")) is dt.int16
    assert repr(ember.int8) == "ember.int8"
    x = ember.tensor([1.7, -2.9, 300.0])
    assert x.char().dtype is ember.int8 and x.short().dtype is ember.int16
    assert x.char().tolist() == torch.tensor([1.7, -2.9, 300.0]).char().tolist()
    assert x.short().tolist() == [1, -2, 300]


def test_scalar_of_arithmetic_wraps_as_torch() -> None:
    for d in dt.INTS:
        lo, hi = dt.INT_LIMITS[d]
        for s in (0, hi, lo, hi + 1, lo - 1, 300, -300, 70000, -(2**40), 2**63 - 1, -(2**63), 2**64):
            try:
                want = torch.tensor([0], dtype=_torch_of(d)).add(s).item()
            except OverflowError:  # beyond 64 bits (int64's lo - 1, 2**64): torch refuses the scalar
                with pytest.raises(OverflowError):
                    dt.wrapped_scalar(d, s)
                continue
            assert dt.wrapped_scalar(d, s) == want, (d, s)
    x = ember.tensor([1, 100], dtype=ember.int8)
    tx = torch.tensor([1, 100], dtype=torch.int8)
    for f in (lambda a: a + 300, lambda a: a * -200, lambda a: a & 300, lambda a: a < 300, lambda a: 300 - a):
        assert f(x).tolist() == f(tx).tolist()


def test_fill_values_out_of_range_raise_as_torch() -> None:
    for d in (ember.int8, ember.int16, ember.uint8):
        hi = dt.INT_LIMITS[d][1]
        assert ember.full((2,), hi, dtype=d).tolist() == [hi, hi]
        with pytest.raises(RuntimeError):
            torch.full((2,), hi + 1, dtype=_torch_of(d))
        with pytest.raises(OverflowError, match="without overflow"):
            ember.full((2,), hi + 1, dtype=d)
        with pytest.raises(OverflowError):
            ember.zeros(2, dtype=d).masked_fill(ember.tensor([True, False]), hi + 1)


@pytest.mark.parametrize("d", dt.INTS + (dt.bool_,), ids=lambda d: d.name)
def test_numpy_pickle_and_dlpack_round_trips(d: dt.DType) -> None:
    lo, hi = dt.INT_LIMITS.get(d, (0, 1))
    a = np.array([lo, hi, 0, 1], dtype=d.np)
    x = ember.from_numpy(a)
    assert x.dtype is d and x.numpy().dtype == a.dtype
    np.testing.assert_array_equal(x.numpy(), a)
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is d and y.tolist() == a.tolist()
    assert pickle.loads(pickle.dumps(d)) is d
    t = torch.from_dlpack(x)
    assert t.dtype == _torch_of(d) and t.tolist() == a.tolist()
    back = ember.from_dlpack(torch.from_numpy(a.copy()))
    assert back.dtype is d and back.tolist() == a.tolist()
    assert str(x) == str(torch.from_numpy(a)).replace("torch.", "ember.")
