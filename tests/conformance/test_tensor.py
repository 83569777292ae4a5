"""Creation, attributes, read-out, casting, moving between devices, value semantics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from devices import device_cases

import ember

from ._support import ALL, FLOATS, NP, edt, name_of, read, round_to

# --------------------------------------------------------------------------- creation values
# (id, create on a device, expected values as numpy)
CREATION: list[tuple[str, Callable[[ember.Device], Any], np.ndarray]] = [
    ("tensor.nested", lambda d: ember.tensor([[1.5, 2.0], [3.0, -4.25]], device=d),
     np.array([[1.5, 2.0], [3.0, -4.25]], np.float32)),
    ("tensor.scalar", lambda d: ember.tensor(3.5, device=d), np.array(3.5, np.float32)),
    ("tensor.int", lambda d: ember.tensor([[1, 2, 3]], device=d), np.array([[1, 2, 3]], np.int64)),
    ("tensor.bool", lambda d: ember.tensor([True, False], device=d), np.array([True, False])),
    ("tensor.empty", lambda d: ember.tensor([], device=d), np.zeros((0,), np.float32)),
    ("tensor.numpy", lambda d: ember.tensor(np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2], device=d),
     np.array([[0, 2], [3, 5]], np.int32)),
    ("tensor.of_tensors", lambda d: ember.tensor(ember.tensor([1.0, 2.0], device=d), device=d),
     np.array([1.0, 2.0], np.float32)),
    ("tensor.dtype", lambda d: ember.tensor([1.7, -2.2], dtype=ember.float64, device=d),
     np.array([1.7, -2.2])),
    ("zeros", lambda d: ember.zeros(2, 3, device=d), np.zeros((2, 3), np.float32)),
    ("zeros.tuple", lambda d: ember.zeros((2, 3), dtype=ember.int32, device=d), np.zeros((2, 3), np.int32)),
    ("zeros.0d", lambda d: ember.zeros((), device=d), np.zeros((), np.float32)),
    ("zeros.empty", lambda d: ember.zeros(0, 3, device=d), np.zeros((0, 3), np.float32)),
    ("ones", lambda d: ember.ones(4, device=d, dtype=ember.uint8), np.ones(4, np.uint8)),
    ("ones.bool", lambda d: ember.ones((2,), device=d, dtype=ember.bool), np.ones(2, bool)),
    ("full", lambda d: ember.full((2, 2), -1.5, device=d), np.full((2, 2), -1.5, np.float32)),
    ("full.dtype", lambda d: ember.full((3,), 7, dtype=ember.float16, device=d), np.full(3, 7, np.float16)),
    ("arange", lambda d: ember.arange(5, device=d), np.arange(5)),
    ("arange.start_step", lambda d: ember.arange(1, 10, 3, device=d), np.arange(1, 10, 3)),
    ("arange.negative", lambda d: ember.arange(5, 0, -2, device=d), np.arange(5, 0, -2)),
    ("arange.float", lambda d: ember.arange(0.0, 1.0, 0.25, device=d), np.arange(0.0, 1.0, 0.25, np.float32)),
    ("arange.dtype", lambda d: ember.arange(4, dtype=ember.float64, device=d), np.arange(4.0)),
    ("linspace", lambda d: ember.linspace(-1, 1, 5, device=d), np.linspace(-1, 1, 5, dtype=np.float32)),
    ("linspace.one", lambda d: ember.linspace(2, 3, 1, device=d), np.array([2.0], np.float32)),
    ("linspace.f64", lambda d: ember.linspace(0, 1, 7, dtype=ember.float64, device=d), np.linspace(0, 1, 7)),
    ("eye", lambda d: ember.eye(3, device=d), np.eye(3, dtype=np.float32)),
    ("eye.rect", lambda d: ember.eye(2, 4, device=d, dtype=ember.int64), np.eye(2, 4, dtype=np.int64)),
    ("zeros_like", lambda d: ember.zeros_like(ember.ones((2, 3), dtype=ember.int32, device=d)),
     np.zeros((2, 3), np.int32)),
    ("ones_like", lambda d: ember.ones_like(ember.zeros((2,), device=d), dtype=ember.float64), np.ones(2)),
    ("full_like", lambda d: ember.full_like(ember.zeros((2,), dtype=ember.int64, device=d), 9),
     np.full(2, 9, np.int64)),
]


@pytest.mark.parametrize("make,expected", [c[1:] for c in CREATION], ids=[c[0] for c in CREATION])
def test_creation(make: Callable[[ember.Device], Any], expected: np.ndarray, device: ember.Device) -> None:
    t = make(device)
    assert isinstance(t, ember.Tensor)
    assert t.device == device
    assert t.shape == expected.shape and isinstance(t.shape, tuple)
    assert t.dtype is getattr(ember, "bool" if expected.dtype == bool else expected.dtype.name)
    got = t.numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ALL)
def test_from_numpy_roundtrip(dtype: str, rng: np.random.Generator) -> None:
    values = rng.uniform(-50, 50, (3, 4))
    if dtype in FLOATS:
        values = round_to(values, dtype)
        t = ember.from_numpy(ember.tensor(values, dtype=edt(dtype)).numpy())
    else:
        arr = (np.abs(values) if dtype == "uint8" else values).astype(NP[dtype])
        t = ember.from_numpy(arr)
        values = arr
    assert name_of(t.dtype) == dtype and t.shape == (3, 4)
    np.testing.assert_array_equal(read(t), np.asarray(values).astype(read(t).dtype))


def test_from_numpy_strided_and_independent() -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = ember.from_numpy(a[::2, ::-1])
    assert t.tolist() == [[3.0, 2.0, 1.0, 0.0], [11.0, 10.0, 9.0, 8.0]]
    assert t.dtype == ember.float64


# --------------------------------------------------------------------------- attributes
def test_attributes(device: ember.Device) -> None:
    t = ember.zeros(2, 3, 4, device=device)
    assert t.shape == (2, 3, 4) and type(t.shape) is tuple
    assert t.ndim == 3 and t.numel() == 24 and t.dtype is ember.float32 and t.device == device
    assert t.requires_grad is False and t.grad is None
    s = ember.tensor(5, device=device)
    assert s.shape == () and s.ndim == 0 and s.numel() == 1


def test_readout(device: ember.Device) -> None:
    t = ember.tensor([[1.5, -2.0], [0.25, 8.0]], device=device)
    a = t.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), a.astype(np.float64))
    assert t.tolist() == [[1.5, -2.0], [0.25, 8.0]]
    assert type(t.tolist()[0][0]) is float
    i = ember.tensor([[1, 2]], device=device)
    assert i.tolist() == [[1, 2]] and type(i.tolist()[0][0]) is int
    b = ember.tensor([True, False], device=device)
    assert b.tolist() == [True, False] and type(b.tolist()[0]) is bool
    assert t[1, 1].item() == 8.0 and type(t[1, 1].item()) is float
    assert i[0, 1].item() == 2 and type(i[0, 1].item()) is int
    assert ember.tensor([7.5], device=device).item() == 7.5
    assert ember.tensor(3.0, device=device).tolist() == 3.0


def test_repr_shows_values(device: ember.Device) -> None:
    r = repr(ember.tensor([1.5, 2.25, -3.0], device=device))
    assert "1.5" in r and "2.25" in r and "-3" in r
    assert "7" in repr(ember.tensor([7, 8], dtype=ember.int32, device=device))
    assert "True" in repr(ember.tensor([True, False], device=device))


# --------------------------------------------------------------------------- casting
CAST_SRC: dict[str, list[float]] = {
    "float": [0.0, 1.0, 2.5, -3.75, 100.0, -0.5, 0.9999],
    "int": [0, 1, 2, -3, 100, 7],
    "bool": [True, False, True],
}


def _source(dtype: str, dst: str) -> list[Any]:
    src = CAST_SRC["bool" if dtype == "bool" else "float" if dtype in FLOATS else "int"]
    if dtype == "uint8" or dst == "uint8":
        src = [abs(v) for v in src]  # negative to uint8 is undefined (as in PyTorch)
    return src


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_cast(src: str, dst: str, device: ember.Device) -> None:
    values = _source(src, dst)
    t = ember.tensor(values, dtype=edt(src), device=device)
    r = t.to(edt(dst))
    assert name_of(r.dtype) == dst and r.shape == t.shape and r.device == device
    sv = read(t)
    if dst in FLOATS:
        expected = round_to(sv.astype(np.float64), dst)
    elif dst == "bool":
        expected = sv != 0
    else:
        expected = np.trunc(sv.astype(np.float64)).astype(NP[dst])  # toward zero
    np.testing.assert_array_equal(read(r), expected)
    assert name_of(t.dtype) == src and read(t).tolist() == sv.tolist()  # the source is unchanged


CAST_METHODS: list[tuple[str, str]] = [("float", "float32"), ("double", "float64"), ("half", "float16"),
                                       ("bfloat16", "bfloat16"), ("int", "int32"), ("long", "int64"),
                                       ("bool", "bool")]


@pytest.mark.parametrize("method,dtype", CAST_METHODS)
def test_cast_methods(method: str, dtype: str, device: ember.Device) -> None:
    t = ember.tensor([0.0, 1.0, 2.5, -3.0], device=device)
    r = getattr(t, method)()
    assert name_of(r.dtype) == dtype
    np.testing.assert_array_equal(read(r), read(t.to(edt(dtype))))


def test_to_same_dtype_keeps_values(device: ember.Device) -> None:
    t = ember.tensor([1.0, 2.0], device=device)
    assert t.to(ember.float32).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("target", [pytest.param(c.device, id=c.name) for c in device_cases()])
def test_to_device(target: ember.Device, device: ember.Device) -> None:
    if next(c for c in device_cases() if c.device == target).unavailable:
        pytest.skip(f"{target} unavailable")
    for dtype in ALL:
        t = ember.tensor([[0, 1, 2], [3, 4, 5]], dtype=edt(dtype), device=device)
        m = t.to(target)
        assert m.device == target and m.dtype == t.dtype and m.shape == t.shape
        np.testing.assert_array_equal(read(m), read(t))
        assert t.device == device


def test_contiguous_clone_detach(device: ember.Device) -> None:
    t = ember.arange(6, device=device, dtype=ember.float32).reshape(2, 3).T
    for r in (t.contiguous(), t.clone(), t.detach()):
        assert r.shape == (3, 2) and r.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
        assert r.device == device and r.dtype == ember.float32


# --------------------------------------------------------------------------- value semantics
def test_inplace_returns_self_and_updates(device: ember.Device) -> None:
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    b = ember.tensor([10.0, 20.0], device=device)
    assert a.add_(b) is a and a.tolist() == [[11.0, 22.0], [13.0, 24.0]]
    assert a.sub_(1) is a and a.tolist() == [[10.0, 21.0], [12.0, 23.0]]
    assert a.mul_(b) is a and a.tolist() == [[100.0, 420.0], [120.0, 460.0]]
    assert a.div_(10) is a and a.tolist() == [[10.0, 42.0], [12.0, 46.0]]
    assert a.copy_(b) is a and a.tolist() == [[10.0, 20.0], [10.0, 20.0]]
    assert a.fill_(2.5) is a and a.tolist() == [[2.5, 2.5], [2.5, 2.5]]
    assert a.zero_() is a and a.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert a.dtype == ember.float32 and a.shape == (2, 2)


def test_copy_casts_source(device: ember.Device) -> None:
    a = ember.zeros(3, dtype=ember.int32, device=device)
    a.copy_(ember.tensor([1.7, -2.7, 3.0], device=device))
    assert a.dtype == ember.int32 and a.tolist() == [1, -2, 3]


def test_setitem_casts_value(device: ember.Device) -> None:
    a = ember.zeros(3, dtype=ember.int64, device=device)
    a[1] = 5
    a[ember.tensor([True, False, True], device=device)] = ember.tensor(2, device=device)
    assert a.dtype == ember.int64 and a.tolist() == [2, 5, 2]


def test_views_are_values(device: ember.Device) -> None:
    """Documented difference from PyTorch: a view taken earlier keeps its values."""
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    row, col, tr, alias = a[0], a[:, 1], a.T, a
    arr = a.numpy()
    a.add_(10)
    a[1, 1] = -1.0
    assert alias is a and alias.tolist() == [[11.0, 12.0], [13.0, -1.0]]
    assert row.tolist() == [1.0, 2.0] and col.tolist() == [2.0, 4.0]
    assert tr.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert arr.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    row.mul_(0)
    assert a.tolist() == [[11.0, 12.0], [13.0, -1.0]]


def test_tensor_copies_its_data(device: ember.Device) -> None:
    src = np.array([1.0, 2.0])
    t = ember.tensor(src, device=device)
    src[0] = 99.0
    assert t.tolist() == [1.0, 2.0]


# --------------------------------------------------------------------------- integer-like args
# numpy integers (e.g. from array shapes or np.argmax) work wherever a Python int does (PyTorch).
I = np.int64
NUMPY_INT_ARGS: list[tuple[str, Callable[[Any], Any], tuple[int, ...]]] = [
    ("reshape", lambda t: t.reshape(I(3), 2), (3, 2)),
    ("permute", lambda t: t.permute(I(1), I(0)), (3, 2)),
    ("permute.1d", lambda t: t[0].permute(I(0)), (3,)),
    ("transpose", lambda t: t.transpose(I(0), I(1)), (3, 2)),
    ("sum.dim", lambda t: t.sum(dim=I(1)), (2,)),
    ("mean.dim", lambda t: t.mean(I(0)), (3,)),
    ("softmax.dim", lambda t: t.softmax(I(1)), (2, 3)),
    ("unsqueeze", lambda t: t.unsqueeze(I(0)), (1, 2, 3)),
    ("getitem", lambda t: t[I(1)], (3,)),
    ("getitem.slice", lambda t: t[:, I(1):I(3)], (2, 2)),
    ("zeros", lambda t: ember.zeros(I(2), I(3), device=t.device), (2, 3)),
    ("ones.tuple", lambda t: ember.ones((I(4),), device=t.device), (4,)),
    ("ones.single", lambda t: ember.ones(I(4), device=t.device), (4,)),
    ("arange", lambda t: ember.arange(I(5), device=t.device), (5,)),
    ("expand", lambda t: t[:1].expand(I(4), 3), (4, 3)),
    ("repeat", lambda t: t.repeat(I(2), 1), (4, 3)),
    ("split", lambda t: t.split(I(2), dim=1)[0], (2, 2)),
]


@pytest.mark.parametrize("call,shape", [c[1:] for c in NUMPY_INT_ARGS], ids=[c[0] for c in NUMPY_INT_ARGS])
def test_numpy_integer_arguments(call: Callable[[Any], Any], shape: tuple[int, ...],
                                 device: ember.Device) -> None:
    t = ember.arange(6, dtype=ember.float32, device=device).reshape(2, 3)
    r = call(t)
    assert r.shape == shape and all(type(n) is int for n in r.shape)
