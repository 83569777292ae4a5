"""Typed errors (``ember.errors``), raised by the call that caused them, with messages a user
can act on; an op that raises leaves its operands as they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from devices import other_device

import ember
from ember.errors import (
    AutodiffError,
    DeviceMismatchError,
    DimError,
    DTypeError,
    EmberError,
    IndexOutOfRangeError,
    ShapeError,
)


def _spellings(shape: tuple[int, ...]) -> list[str]:
    inner = ", ".join(map(str, shape))
    return [f"({inner}{',' if len(shape) == 1 else ''})", f"[{inner}]", "x".join(map(str, shape)),
            f"({inner})"]


def names_shape(msg: str, shape: tuple[int, ...]) -> bool:
    return any(s in msg for s in _spellings(shape))


def t(shape: tuple[int, ...], device: ember.Device, dtype: Any = None) -> Any:
    return ember.ones(shape, device=device, dtype=dtype or ember.float32)


def idx(values: list[int], device: ember.Device) -> Any:
    return ember.tensor(values, dtype=ember.int64, device=device)


def _setitem(x: Any, key: Any, value: Any) -> None:
    x[key] = value


# (id, call that must raise, exception class, shapes the message must name)
SHAPE_ERRORS: list[tuple[str, Callable[[ember.Device], Any], list[tuple[int, ...]]]] = [
    ("add", lambda d: t((2, 3), d) + t((4, 5), d), [(2, 3), (4, 5)]),
    ("mul.3d", lambda d: t((2, 3, 4), d) * t((3, 3), d), [(2, 3, 4), (3, 3)]),
    ("maximum", lambda d: ember.maximum(t((2, 3), d), t((2,), d)), [(2, 3), (2,)]),
    ("matmul.inner", lambda d: t((2, 3), d) @ t((4, 5), d), [(2, 3), (4, 5)]),
    ("matmul.vec", lambda d: t((3,), d) @ t((4,), d), [(3,), (4,)]),
    ("matmul.batch", lambda d: t((2, 3, 4), d) @ t((3, 4, 5), d), [(2, 3, 4), (3, 4, 5)]),
    ("reshape", lambda d: t((2, 3), d).reshape(4, 2), [(2, 3), (4, 2)]),
    ("view", lambda d: t((2, 3), d).view(5, -1), [(2, 3)]),
    ("expand", lambda d: t((3, 2), d).expand(3, 4), [(3, 2), (3, 4)]),
    ("cat", lambda d: ember.cat([t((2, 3), d), t((2, 4), d)], dim=0), [(2, 3), (2, 4)]),
    ("stack", lambda d: ember.stack([t((2, 3), d), t((3, 2), d)]), [(2, 3), (3, 2)]),
    ("where", lambda d: ember.where(t((2, 3), d) > 0, t((4,), d), t((2, 3), d)), [(4,)]),
    ("masked_fill", lambda d: t((2, 3), d).masked_fill(t((4,), d) > 0, 0.0), [(2, 3), (4,)]),
    ("copy_", lambda d: t((2, 3), d).copy_(t((4,), d)), [(2, 3), (4,)]),
    ("add_.grows", lambda d: t((3, 1), d).add_(t((3, 4), d)), [(3, 1), (3, 4)]),
    ("setitem", lambda d: _setitem(t((4, 5), d), 1, t((3,), d)), [(5,), (3,)]),
    ("gather.rank", lambda d: t((3, 4), d).gather(1, idx([0, 1], d)), []),
    ("split.sections", lambda d: t((3, 5), d).split([2, 2], dim=1), []),
    ("tensor.ragged", lambda d: ember.tensor([[1.0, 2.0], [3.0]], device=d), []),
]


@pytest.mark.parametrize("call,shapes", [c[1:] for c in SHAPE_ERRORS], ids=[c[0] for c in SHAPE_ERRORS])
def test_shape_error(call: Callable[[ember.Device], Any], shapes: list[tuple[int, ...]],
                     device: ember.Device) -> None:
    with pytest.raises(ShapeError) as ei:
        call(device)
    assert isinstance(ei.value, ValueError)
    for s in shapes:
        assert names_shape(str(ei.value), s), f"message does not name shape {s}: {ei.value}"


DIM_ERRORS: list[tuple[str, Callable[[Any], Any], int]] = [
    ("sum", lambda x: x.sum(dim=3), 3),
    ("sum.negative", lambda x: x.sum(dim=-3), -3),
    ("sum.tuple", lambda x: x.sum(dim=(0, 5)), 5),
    ("mean", lambda x: x.mean(2), 2),
    ("max", lambda x: x.max(dim=2), 2),
    ("argmax", lambda x: x.argmax(dim=-3), -3),
    ("var", lambda x: x.var(dim=4), 4),
    ("logsumexp", lambda x: x.logsumexp(dim=2), 2),
    ("softmax", lambda x: x.softmax(2), 2),
    ("log_softmax", lambda x: x.log_softmax(-3), -3),
    ("cumsum", lambda x: x.cumsum(5), 5),
    ("transpose", lambda x: x.transpose(0, 2), 2),
    ("permute", lambda x: x.permute(0, 2), 2),
    ("unsqueeze", lambda x: x.unsqueeze(3), 3),
    ("squeeze", lambda x: x.squeeze(2), 2),
    ("flatten", lambda x: x.flatten(0, 5), 5),
    ("flip", lambda x: x.flip(2), 2),
    ("cat", lambda x: ember.cat([x, x], dim=2), 2),
    ("stack", lambda x: ember.stack([x, x], dim=4), 4),
    ("split", lambda x: x.split(1, dim=2), 2),
    ("chunk", lambda x: x.chunk(2, dim=-4), -4),
    ("index_select", lambda x: x.index_select(2, ember.tensor([0], device=x.device)), 2),
    ("gather", lambda x: x.gather(3, ember.zeros((2, 3), dtype=ember.int64, device=x.device)), 3),
]


@pytest.mark.parametrize("call,bad", [c[1:] for c in DIM_ERRORS], ids=[c[0] for c in DIM_ERRORS])
def test_dim_error(call: Callable[[Any], Any], bad: int, device: ember.Device) -> None:
    x = t((2, 3), device)
    with pytest.raises(DimError) as ei:
        call(x)
    assert isinstance(ei.value, ShapeError) and isinstance(ei.value, IndexError)
    assert str(bad) in str(ei.value), f"message does not name the bad dim {bad}: {ei.value}"


DTYPE_ERRORS: list[tuple[str, Callable[[ember.Device], Any]]] = [
    ("int.add_(float)", lambda d: t((3,), d, ember.int32).add_(2.5)),
    ("int.div_(int)", lambda d: t((3,), d, ember.int64).div_(2)),
    ("int.mul_(float tensor)", lambda d: t((3,), d, ember.int32).mul_(t((3,), d))),
    ("bool.add_(int)", lambda d: t((3,), d, ember.bool).add_(t((3,), d, ember.int32))),
    ("gather float index", lambda d: t((3, 4), d).gather(1, t((3, 2), d))),
    ("index_select float index", lambda d: t((3, 4), d).index_select(0, t((2,), d))),
    ("scatter_add float index", lambda d: t((3, 4), d).scatter_add(0, t((3, 4), d), t((3, 4), d))),
    ("masked_fill float mask", lambda d: t((3, 4), d).masked_fill(t((3, 4), d), 0.0)),
    ("where float condition", lambda d: ember.where(t((3,), d), t((3,), d), t((3,), d))),
    ("getitem float index", lambda d: t((3, 4), d)[t((2,), d)]),
    ("bool - bool", lambda d: t((3,), d, ember.bool) - t((3,), d, ember.bool)),
    ("-bool", lambda d: -t((3,), d, ember.bool)),
    ("from_numpy complex", lambda d: ember.from_numpy(np.zeros(3, np.complex64))),
    ("tensor complex", lambda d: ember.tensor(np.zeros(3, np.complex128), device=d)),
]


@pytest.mark.parametrize("call", [c[1] for c in DTYPE_ERRORS], ids=[c[0] for c in DTYPE_ERRORS])
def test_dtype_error(call: Callable[[ember.Device], Any], device: ember.Device) -> None:
    with pytest.raises(DTypeError) as ei:
        call(device)
    assert isinstance(ei.value, TypeError)


MISMATCH: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b),
    ("radd", lambda a, b: b + a),
    ("eq", lambda a, b: a == b),
    ("matmul", lambda a, b: a @ b.reshape(3, 1)),
    ("maximum", lambda a, b: ember.maximum(a, b)),
    ("cat", lambda a, b: ember.cat([a, b])),
    ("stack", lambda a, b: ember.stack([a, b])),
    ("where", lambda a, b: ember.where(a > 0, a, b)),
    ("add_", lambda a, b: a.add_(b)),
    ("masked_fill", lambda a, b: a.masked_fill(b > 0, 1.0)),
    ("gather", lambda a, b: a.gather(0, b.long())),
]


@pytest.mark.parametrize("call", [c[1] for c in MISMATCH], ids=[c[0] for c in MISMATCH])
def test_device_mismatch(call: Callable[[Any, Any], Any], device: ember.Device) -> None:
    a = ember.tensor([1.0, 2.0, 3.0], device=device)
    b = ember.tensor([1.0, 0.0, 2.0], device=other_device(device))
    before = a.tolist()
    with pytest.raises(DeviceMismatchError):
        call(a, b)
    assert a.tolist() == before and a.device == device


INDEX_ERRORS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("int", lambda x: x[4], "4"),
    ("negative", lambda x: x[-5], "-5"),
    ("second dim", lambda x: x[:, 5], "5"),
    ("tuple", lambda x: x[1, -6], "-6"),
    ("setitem", lambda x: _setitem(x, 7, 0.0), "7"),
    ("setitem tuple", lambda x: _setitem(x, (0, 5), 0.0), "5"),
]


@pytest.mark.parametrize("call,needle", [c[1:] for c in INDEX_ERRORS], ids=[c[0] for c in INDEX_ERRORS])
def test_index_out_of_range(call: Callable[[Any], Any], needle: str, device: ember.Device) -> None:
    x = ember.arange(20, device=device, dtype=ember.float32).reshape(4, 5)
    with pytest.raises(IndexOutOfRangeError) as ei:
        call(x)
    assert isinstance(ei.value, IndexError)
    assert needle in str(ei.value), f"message does not name the index {needle}: {ei.value}"
    assert x.tolist() == np.arange(20.0).reshape(4, 5).tolist()


# Tensor indices are only known once their values are read; the contract is an IndexError
# (IndexOutOfRangeError where the device can check), never a silently wrong result.
TENSOR_INDEX_ERRORS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("getitem", lambda x, i: x[i]),
    ("getitem second dim", lambda x, i: x[:, i * 2]),
    ("setitem", lambda x, i: _setitem(x, i, 0.0)),
    ("index_select", lambda x, i: x.index_select(0, i)),
    ("gather", lambda x, i: x.gather(0, i.reshape(1, 2))),
    ("scatter_add", lambda x, i: x.scatter_add(0, i.reshape(1, 2), x[:1, :2])),
]


@pytest.mark.parametrize("call", [c[1] for c in TENSOR_INDEX_ERRORS], ids=[c[0] for c in TENSOR_INDEX_ERRORS])
def test_tensor_index_out_of_range(call: Callable[[Any, Any], Any], device: ember.Device) -> None:
    x = ember.arange(20, device=device, dtype=ember.float32).reshape(4, 5)
    i = ember.tensor([0, 4], device=device)
    with pytest.raises(IndexError):
        r = call(x, i)
        if r is not None:
            r.numpy()
    assert x.tolist() == np.arange(20.0).reshape(4, 5).tolist()


def test_errors_are_ember_errors() -> None:
    for cls in (ShapeError, DimError, DTypeError, DeviceMismatchError, AutodiffError, IndexOutOfRangeError):
        assert issubclass(cls, EmberError)
    assert issubclass(DimError, ShapeError) and issubclass(DimError, IndexError)
    assert issubclass(ShapeError, ValueError) and issubclass(DTypeError, TypeError)
    assert issubclass(IndexOutOfRangeError, IndexError)


# torch raises RuntimeError for these mistakes: code written for torch catches ember's error too
_TORCH_RUNTIME_ERRORS: list[tuple[str, Callable[[Any], Any]]] = [
    ("matmul", lambda lib: lib.ones(3, 4) @ lib.ones(3, 4)),
    ("reshape", lambda lib: lib.ones(3, 4).reshape(5, 3)),
    ("cat", lambda lib: lib.cat([lib.ones(3, 4), lib.ones(2, 5)])),
    ("expand", lambda lib: lib.ones(3, 4).expand(2, 3, 5)),
    ("add broadcast", lambda lib: lib.ones(3, 4) + lib.ones(2, 4)),
    ("gather index", lambda lib: lib.ones(3, 4).gather(1, lib.tensor([[7]])).tolist()),
]


@pytest.mark.parametrize("name, call", _TORCH_RUNTIME_ERRORS, ids=[n for n, _ in _TORCH_RUNTIME_ERRORS])
def test_runtime_error_where_torch_raises_one(name: str, call: Callable[[Any], Any]) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError):
        call(ember)


def test_backward_needs_autodiff_device(plain_device: ember.Device) -> None:
    x = ember.tensor([1.0, 2.0], device=plain_device)
    with pytest.raises(AutodiffError) as ei:
        x.sum().backward()
    assert "autodiff()" in str(ei.value)


def test_requires_grad_needs_autodiff_device(plain_device: ember.Device) -> None:
    with pytest.raises(AutodiffError) as ei:
        ember.tensor([1.0, 2.0], device=plain_device, requires_grad=True)
    assert "autodiff()" in str(ei.value)
    x = ember.tensor([1.0, 2.0], device=plain_device)
    with pytest.raises(AutodiffError):
        x.requires_grad_()
    assert not x.requires_grad


# ----------------------------------------------------------------- nothing is half-applied
FAILED_MUTATIONS: list[tuple[str, Callable[[Any, ember.Device], Any], type[Exception]]] = [
    ("add_ shape", lambda a, d: a.add_(t((4,), d)), ShapeError),
    ("add_ grows", lambda a, d: a.add_(t((2, 3, 3), d)), ShapeError),
    ("copy_ shape", lambda a, d: a.copy_(t((2, 2), d)), ShapeError),
    ("setitem shape", lambda a, d: _setitem(a, 0, t((4,), d)), ShapeError),
    ("setitem index", lambda a, d: _setitem(a, (1, 9), 5.0), IndexOutOfRangeError),
    ("setitem tensor index", lambda a, d: _setitem(a, ember.tensor([0, 7], device=d), 5.0), IndexError),
    ("div_ device", lambda a, d: a.div_(t((2, 3), other_device(d))), DeviceMismatchError),
]


@pytest.mark.parametrize("call,exc", [c[1:] for c in FAILED_MUTATIONS], ids=[c[0] for c in FAILED_MUTATIONS])
def test_failed_inplace_leaves_tensor_unchanged(call: Callable[[Any, ember.Device], Any],
                                                exc: type[Exception], device: ember.Device) -> None:
    a = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    view = a[0]
    with pytest.raises(exc):
        call(a, device)
    assert a.shape == (2, 3) and a.dtype == ember.float32 and a.device == device
    assert a.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert view.tolist() == [1.0, 2.0, 3.0]
    assert (a + 1).tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]


def test_failed_inplace_cast_leaves_tensor_unchanged(device: ember.Device) -> None:
    a = ember.tensor([1, 2, 3], dtype=ember.int32, device=device)
    with pytest.raises(DTypeError):
        a.mul_(2.5)
    assert a.dtype == ember.int32 and a.tolist() == [1, 2, 3]
