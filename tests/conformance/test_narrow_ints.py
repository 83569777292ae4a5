"""int8 and int16 on every device against torch: two's complement wrapping of arithmetic at the
type's limits, casts into and out of the narrow types, promotion with every other dtype,
reductions and scans (int64 results), sort, creation, and the errors torch raises.

The op table (``optable.NARROW_SPECS``) covers the ops on small values; these tests put the
values at the edges of the range, where a device that computes narrow types in 32-bit registers
(WGSL) must wrap exactly where int8_t/int16_t do. Sizes 1, 7 and 67 and offset views reach
the packed WGSL storage's partial-word and whole-word paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.errors import UnsupportedDTypeError

from ._support import name_of

NARROW = ("int8", "int16")


def _pair(a: np.ndarray, device: ember.Device) -> tuple[ember.Tensor, torch.Tensor]:
    return ember.tensor(a, device=device), torch.from_numpy(a.copy())


def _same(got: ember.Tensor, want: torch.Tensor, what: str) -> None:
    assert name_of(got.dtype) == str(want.dtype).removeprefix("torch."), f"{what}: dtype {got.dtype} vs {want.dtype}"
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=what)


def _edges(d: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` values of ``d``: the limits and their neighbours first, then random ones."""
    info = np.iinfo(d)
    e = np.array([info.min, info.max, info.min + 1, info.max - 1, -1, 0, 1], np.int64)
    v = rng.integers(info.min, int(info.max) + 1, n)
    v[: min(n, len(e))] = e[: min(n, len(e))]
    return rng.permutation(v).astype(d)


@pytest.mark.parametrize("d", NARROW)
def test_arithmetic_wraps_as_torch(d: str, device: ember.Device, rng: np.random.Generator) -> None:
    for n in (1, 7, 67):
        a, ta = _pair(_edges(d, n, rng), device)
        b_np = _edges(d, n, rng)
        b_np[b_np == 0] = 3  # floor division and remainder by zero raise: tested below
        b, tb = _pair(b_np, device)
        cases = {
            "a + b": lambda x, y: x + y, "a - b": lambda x, y: x - y, "a * b": lambda x, y: x * y,
            "-a": lambda x, y: -x, "abs": lambda x, y: x.abs(), "a // b": lambda x, y: x // y,
            "a % b": lambda x, y: x % y, "a * 3 + 100": lambda x, y: x * 3 + 100, "a + 300": lambda x, y: x + 300,
            "~a": lambda x, y: ~x, "a ^ b": lambda x, y: x ^ y, "a << 3": lambda x, y: x << 3,
            "a >> 2": lambda x, y: x >> 2, "a < b": lambda x, y: x < y, "a == 300": lambda x, y: x == 300 - 256,
            "max(a, b)": lambda x, y: x.maximum(y), "clamp": lambda x, y: x.clamp(-100, 100),
            "offset view": lambda x, y: x[1:] * y[:-1] + x[1:], "strided view": lambda x, y: x[::2] - y[::2],
        }
        for what, f in cases.items():
            _same(f(a, b), f(ta, tb), f"{d}[{n}] {what}")


@pytest.mark.parametrize("d", NARROW)
def test_casts_as_torch(d: str, device: ember.Device, rng: np.random.Generator) -> None:
    # floats within int32's range truncate toward zero, then wrap (torch's CPU kernels; ember
    # defines it on every device, see docs/dtypes.md); the wider ints wrap; bool is 0/1
    f = np.concatenate([rng.uniform(-70000, 70000, 40), [0.7, -0.7, 127.9, -128.9, 255.5, 32767.5, -32769.2]])
    for src in ("float32", "float64", "int32", "int64", "uint8", "bool"):
        v = f.astype(src) if src.startswith("float") else (f > 0) if src == "bool" else f.astype(np.int64).astype(src)
        try:
            x, tx = _pair(v, device)
        except UnsupportedDTypeError:  # float64 on WGSL: the other sources still run
            continue
        _same(x.to(getattr(ember, d)), tx.to(getattr(torch, d)), f"{src} -> {d}")
    x, tx = _pair(_edges(d, 67, rng), device)
    for dst in ("float32", "int32", "int64", "uint8", "int8", "int16", "bool"):
        _same(x.to(getattr(ember, dst)), tx.to(getattr(torch, dst)), f"{d} -> {dst}")


@pytest.mark.parametrize("d", NARROW)
def test_promotion_with_every_dtype(d: str, device: ember.Device) -> None:
    a, ta = _pair(np.array([-100, 7, 100], d), device)
    for other in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32"):
        v = np.array([1, 0, 1]) if other == "bool" else np.array([3, 200, 1])
        b, tb = _pair(v.astype(other), device)
        _same(a + b, ta + tb, f"{d} + {other}")
        _same(b * a, tb * ta, f"{other} * {d}")


@pytest.mark.parametrize("d", NARROW)
def test_reductions_scans_and_sort(d: str, device: ember.Device, rng: np.random.Generator) -> None:
    v = _edges(d, 67, rng)
    x, tx = _pair(v, device)
    m, tm = _pair(v[:60].reshape(6, 10), device)
    small, tsmall = _pair(rng.integers(-3, 4, (6, 10)).astype(d), device)  # products stay within int32
    cases = {
        "sum": lambda t, t2, s: t.sum(), "sum(1)": lambda t, t2, s: t2.sum(1), "cumsum": lambda t, t2, s: t.cumsum(0),
        "prod(1)": lambda t, t2, s: s.prod(1), "cumprod(1)": lambda t, t2, s: s.cumprod(1),
        "max": lambda t, t2, s: t.max(), "amin(0)": lambda t, t2, s: t2.amin(0),
        "argmax(1)": lambda t, t2, s: t2.argmax(1), "argmin": lambda t, t2, s: t.argmin(),
        "sort": lambda t, t2, s: t.sort()[0], "sort desc(1)": lambda t, t2, s: t2.sort(1, descending=True)[0],
        "topk": lambda t, t2, s: t.topk(5)[0], "mean(float)": lambda t, t2, s: t2.float().mean(1),
    }
    for what, f in cases.items():
        _same(f(x, m, small), f(tx, tm, tsmall), f"{d} {what}")
    with pytest.raises(TypeError):  # torch raises for mean of an integer tensor
        x.mean()


@pytest.mark.parametrize("d", NARROW)
def test_creation_indexing_and_errors(d: str, device: ember.Device) -> None:
    e, t = getattr(ember, d), getattr(torch, d)
    _same(ember.zeros(3, dtype=e, device=device), torch.zeros(3, dtype=t), "zeros")
    _same(ember.ones(3, dtype=e, device=device), torch.ones(3, dtype=t), "ones")
    _same(ember.full((2,), -7, dtype=e, device=device), torch.full((2,), -7, dtype=t), "full")
    _same(ember.arange(-5, 120, 7, dtype=e, device=device), torch.arange(-5, 120, 7, dtype=t), "arange")
    r = ember.randint(-128, 128, (50,), dtype=e, device=device)
    assert r.dtype is e and -128 <= int(r.min()) and int(r.max()) < 128
    x = ember.tensor([5, -3, 9], dtype=e, device=device)
    with pytest.raises(OverflowError):  # torch: "value cannot be converted to type int8_t without overflow"
        ember.full((2,), 1 << 16, dtype=e, device=device)
    with pytest.raises(ZeroDivisionError):
        x // 0
    with pytest.raises(ZeroDivisionError):
        x % 0
    for idx_dtype in (ember.int8, ember.int16):  # torch: indices must be long, int, byte or bool
        i = ember.tensor([0, 2], dtype=idx_dtype, device=device)
        with pytest.raises(TypeError):
            x[i]
        with pytest.raises(TypeError):
            x.gather(0, i)
    _same(x[ember.tensor([2, 0], device=device)], torch.tensor([9, 5], dtype=t), "int64 index")
    y = x * 1
    y[ember.tensor([True, False, True], device=device)] = 100
    _same(y, torch.tensor([100, -3, 100], dtype=t), "masked setitem")
