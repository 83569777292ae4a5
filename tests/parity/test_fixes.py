"""Regression tests for the PyTorch-parity fixes of issue 18: each case compares ember with
torch (CPU) on every device (the ``device`` fixture), or checks the typed error where torch
raises."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

import ember
from ember import Device
from ember.errors import IntegerPowerError, OutOfMemoryError, ShapeError, ZeroDivisionByIntegerError


def _t(dev: Device, v, **kw) -> ember.Tensor:
    return ember.tensor(v, device=dev, **kw)


def _close(e: ember.Tensor, t: torch.Tensor, tol: float = 1e-5) -> None:
    a = np.asarray(e.numpy(), dtype=np.float64)
    b = t.detach().double().numpy()
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


# ----------------------------------------------------------------------------- wrong results
def test_constant_pad_nd(device, rng):
    # its argument ``pad`` once shadowed the pad function it calls ("'tuple' object is not callable")
    x = rng.standard_normal((2, 3)).astype(np.float32)
    _close(ember.constant_pad_nd(_t(device, x), (1, 2), 0.5),
           torch.constant_pad_nd(torch.tensor(x), (1, 2), 0.5))


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (2, 0, 3)])
def test_matrix_norm_of_empty_matrices(device, shape):
    # ord = 1 / 2 / inf: the largest of no column sums (singular values, row sums) is 0, as torch;
    # ord = -1 / -inf raise where torch does
    for o in (1, 2, math.inf):
        _close(ember.linalg.matrix_norm(ember.zeros(shape, device=device), o),
               torch.linalg.matrix_norm(torch.zeros(shape), o))
    with pytest.raises(ShapeError):
        ember.linalg.matrix_norm(ember.zeros((0, 3), device=device), -math.inf)


def test_var_std_positional_unbiased(device, rng):
    for shape in ((5,), (5, 5)):
        x = rng.standard_normal(shape).astype(np.float32)
        for unbiased in (True, False):
            _close(_t(device, x).var(unbiased), torch.tensor(x).var(unbiased))
            _close(_t(device, x).std(unbiased), torch.tensor(x).std(unbiased))


def test_norm_orders(device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    x[0, 1] = 0.0
    for p in (float("-inf"), float("inf"), 0, 1, 2, 3.5, "fro"):
        _close(ember.norm(_t(device, x), p), torch.norm(torch.tensor(x), p), 1e-4)
    _close(_t(device, x).norm(float("-inf"), dim=1), torch.tensor(x).norm(float("-inf"), dim=1))
    _close(_t(device, x).norm("nuc"), torch.tensor(x).norm("nuc"), 1e-4)


def test_nuclear_norm_gradient(autodiff_device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    e = _t(autodiff_device, x, requires_grad=True)
    e.norm("nuc").backward()
    t = torch.tensor(x, requires_grad=True)
    t.norm("nuc").backward()
    _close(e.grad, t.grad, 1e-4)


def test_masked_fill_tensor_value_gets_gradient(autodiff_device, rng):
    x = rng.standard_normal(6).astype(np.float32)
    m = np.array([True, False, True, True, False, False])
    v = _t(autodiff_device, 2.5, requires_grad=True)
    e = _t(autodiff_device, x, requires_grad=True)
    (e.masked_fill(_t(autodiff_device, m), v) * _t(autodiff_device, np.arange(6.0, dtype=np.float32))).sum().backward()
    tv = torch.tensor(2.5, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    (tx.masked_fill(torch.tensor(m), tv) * torch.arange(6.0)).sum().backward()
    _close(v.grad, tv.grad)
    _close(e.grad, tx.grad)


def test_masked_fill_mask_broadcasts_input(device):
    out = ember.ones(2, 3, device=device).masked_fill(ember.ones(4, 2, 3, dtype=ember.bool, device=device), 0.0)
    ref = torch.ones(2, 3).masked_fill(torch.ones(4, 2, 3, dtype=torch.bool), 0.0)
    _close(out, ref)
    with pytest.raises(ShapeError):  # in place cannot grow the tensor (torch raises too)
        ember.ones(2, 3, device=device).masked_fill_(ember.ones(4, 2, 3, dtype=ember.bool, device=device), 0.0)


def test_square_bool_and_sign(device):
    b = _t(device, [True, False])
    assert b.square().dtype == ember.int64
    assert b.square().tolist() == torch.tensor([True, False]).square().tolist()
    assert b.sign().tolist() == [True, False]
    s = _t(device, [float("nan"), -0.0, 0.0, 2.0, -3.0]).sign()
    assert s.tolist() == [0.0, 0.0, 0.0, 1.0, -1.0]
    assert _t(device, [-4, 0, 9]).sign().tolist() == [-1, 0, 1]


def test_integer_linspace_and_arange(device):
    for start, end, n in ((4.3, -3, 50), (-5.5, 7.9, 33), (3, -3, 8), (0, 10, 7)):
        for ed, td in ((ember.int64, torch.int64), (ember.int32, torch.int32)):
            got = ember.linspace(start, end, n, dtype=ed, device=device).tolist()
            assert got == torch.linspace(start, end, n, dtype=td).tolist(), (start, end, n)
    for args in ((0.0, -8.000001, -4.0), (0.5, 4.7, 1.5), (-0.5, 4.7, 1.5), (10, 0, -3)):
        got = ember.arange(*args, dtype=ember.int64, device=device).tolist()
        assert got == torch.arange(*args, dtype=torch.int64).tolist(), args


def test_log_softmax_with_infinities(device):
    inf = float("inf")
    for row in ([inf, 1.0], [-inf, 1.0], [-inf, -inf], [inf, inf], [float("nan"), 1.0], [1.0, 2.0, 3.0]):
        _close(_t(device, row).log_softmax(0), torch.tensor(row).log_softmax(0))
        _close(_t(device, row).softmax(0), torch.tensor(row).softmax(0))
        _close(_t(device, row).logsumexp(0), torch.tensor(row).logsumexp(0))


def test_integer_negative_power(device):
    with pytest.raises(IntegerPowerError, match="negative integer powers"):
        _t(device, [1, 2, 3]) ** -1
    with pytest.raises(RuntimeError):  # catchable as torch's RuntimeError
        _t(device, [1, 2, 3]).pow(-2)
    a, b = [1, 2, 3, -1, -1, 0], [-1, 1, 1, -3, -2, 2]
    assert (_t(device, a) ** _t(device, b)).tolist() == (torch.tensor(a) ** torch.tensor(b)).tolist()
    assert (2 ** _t(device, [-1, 1, 3])).tolist() == (2 ** torch.tensor([-1, 1, 3])).tolist()
    assert (_t(device, [2.0]) ** -1).tolist() == [0.5]


def test_integer_division_by_zero(device):
    x = _t(device, [5, -7, 3])
    for f in (lambda: x // 0, lambda: x % 0, lambda: x.remainder(0), lambda: x.div(0, rounding_mode="floor"),
              lambda: x.div(0, rounding_mode="trunc"), lambda: 5 // _t(device, [0, 1]),
              lambda: x // _t(device, [1, 0, 2]), lambda: x % _t(device, [1, 0, 2])):
        with pytest.raises(ZeroDivisionError):
            f()
    with pytest.raises(ZeroDivisionByIntegerError):
        x // 0
    assert (x // 2).tolist() == (torch.tensor([5, -7, 3]) // 2).tolist()
    assert (_t(device, [5.0]) // 0).tolist() == [math.inf]  # float division computes


# ----------------------------------------------------------------------------- torch computes
def test_zero_dim_reductions(device):
    s = _t(device, 3.0)
    ts = torch.tensor(3.0)
    for dim in (0, -1):
        v, i = s.max(dim)
        assert v.shape == () and v.item() == 3.0 and i.item() == 0
        v, i = s.min(dim, keepdim=True)
        assert v.shape == () and i.item() == 0
        for op in ("amax", "amin", "sum", "mean", "prod", "logsumexp", "all", "any"):
            got = getattr(s, op)(dim)
            ref = getattr(ts, op)(dim)
            assert got.shape == tuple(ref.shape), op
            assert float(got.item()) == float(ref.item()), op


def test_zero_dim_indexing(device):
    s = _t(device, 3.0)
    assert s.gather(0, _t(device, 0)).item() == 3.0
    assert s.scatter_add(0, _t(device, 0), _t(device, 2.0)).item() == 5.0
    assert s.nonzero().shape == (1, 0)
    assert _t(device, 0.0).nonzero().shape == (0, 0)
    g = _t(device, [[1.0, 2.0]]).gather(0, ember.zeros(0, 2, dtype=ember.int64, device=device))
    assert g.shape == (0, 2)


def test_empty_softmax_and_unbind(device):
    z = ember.zeros(0, 3, device=device)
    assert z.softmax(0).shape == (0, 3)
    assert z.log_softmax(1).shape == (0, 3)
    _close(z.logsumexp(0), torch.zeros(0, 3).logsumexp(0))
    parts = z.unbind(1)
    assert len(parts) == 3 and all(p.shape == (0,) for p in parts)


def test_empty_pad_gradient(autodiff_device):
    # the gradient of padding an empty tensor is an empty slice of the padded gradient
    x = ember.zeros(0, 3, 3, device=autodiff_device, requires_grad=True)
    ember.pad(x, (1, 1, 1, 1, 1, 1), value=1.0).sum().backward()
    assert x.grad.shape == (0, 3, 3) and x.grad.numpy().shape == (0, 3, 3)


def test_zero_dim_softmax_keeps_graph(autodiff_device):
    x = _t(autodiff_device, 1.5, requires_grad=True)
    y = x.softmax(0)
    assert y.requires_grad and y.item() == 1.0
    (y * 2).backward()
    assert x.grad.item() == 0.0
    assert _t(autodiff_device, 1.5).log_softmax(-1).item() == 0.0


def test_item_format_and_huge_empty(device):
    with pytest.raises(ShapeError):
        ember.zeros(0, device=device).item()
    assert format(_t(device, 2.5), ".2f") == "2.50"
    with pytest.raises(ShapeError, match="overflowed"):
        ember.empty((2**62,), device=device)
    with pytest.raises(OutOfMemoryError):
        ember.empty((2**50,), device=device)


def test_scatter_multiply(device):
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    idx = np.array([[0, 1, 0], [0, 0, 1]])
    src = np.array([[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]], np.float32)
    got = _t(device, x).scatter(0, _t(device, idx), _t(device, src), reduce="multiply")
    ref = torch.tensor(x).scatter(0, torch.tensor(idx), torch.tensor(src), reduce="multiply")
    _close(got, ref)


# ----------------------------------------------------------------------------- arguments
def test_to_positional_forms(device):
    x = _t(device, [1.0, 2.0])
    y = x.to(device, ember.int32, False, True)
    assert y.dtype == ember.int32 and y.device == device
    assert x.to(ember.int32, False).dtype == ember.int32
    assert x.to(_t(device, [1])).dtype == ember.int64
    c = x.to(device, copy=True)
    assert c is not x and c.tolist() == x.tolist()
    assert x.to(device) is x
    assert x.float(memory_format=None) is x and x.contiguous(memory_format=None).tolist() == [1.0, 2.0]
    assert x.clone(memory_format=None).tolist() == [1.0, 2.0]


def test_div_rounding_modes(device, rng):
    a = rng.integers(-20, 20, 12)
    b = rng.integers(1, 7, 12) * rng.choice([-1, 1], 12)
    for mode in (None, "trunc", "floor"):
        got = _t(device, a).div(_t(device, b), rounding_mode=mode)
        ref = torch.tensor(a).div(torch.tensor(b), rounding_mode=mode)
        assert got.dtype.name == str(ref.dtype).split(".")[1]
        _close(got, ref)
        _close(_t(device, a).div(3, rounding_mode=mode), torch.tensor(a).div(3, rounding_mode=mode))
        fa = a.astype(np.float32) / 3
        _close(_t(device, fa).div(_t(device, b.astype(np.float32)), rounding_mode=mode),
               torch.tensor(fa).div(torch.tensor(b.astype(np.float32)), rounding_mode=mode))
    with pytest.raises(ValueError):
        _t(device, a).div(2, rounding_mode="round")


def test_flip_round_alpha(device):
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3) / 7
    assert _t(device, x).flip(dims=(0, 1)).tolist() == torch.tensor(x).flip(dims=(0, 1)).tolist()
    assert _t(device, x).flip(1).tolist() == torch.tensor(x).flip(1).tolist()
    for d in (0, 2, -1):
        _close(_t(device, x * 100).round(decimals=d), torch.tensor(x * 100).round(decimals=d))
    _close(_t(device, x).add(_t(device, x), alpha=3), torch.tensor(x).add(torch.tensor(x), alpha=3))
    _close(ember.sub(_t(device, x), 1.0, alpha=2), torch.sub(torch.tensor(x), 1.0, alpha=2))


def test_bitwise_integer_ops(device, rng):
    a = rng.integers(-100, 100, 10)
    b = rng.integers(-100, 100, 10)
    # WGSL devices hold int64 in 32 bits: shift within that width there
    sh = rng.integers(0, 20 if device.type == "wgpu" else 70, 10)
    ea, eb, es = _t(device, a), _t(device, b), _t(device, sh)
    ta, tb, tsh = torch.tensor(a), torch.tensor(b), torch.tensor(sh)
    assert (ea & eb).tolist() == (ta & tb).tolist()
    assert (ea | eb).tolist() == (ta | tb).tolist()
    assert (ea ^ eb).tolist() == (ta ^ tb).tolist()
    assert (~ea).tolist() == (~ta).tolist()
    assert (ea & 12).tolist() == (ta & 12).tolist()
    assert (7 | ea).tolist() == (7 | ta).tolist()
    assert (ea << es).tolist() == (ta << tsh).tolist()
    assert (ea >> es).tolist() == (ta >> tsh).tolist()
    assert (ea >> 2).tolist() == (ta >> 2).tolist()
    u = rng.integers(0, 256, 8).astype(np.uint8)
    assert (~_t(device, u)).tolist() == (~torch.tensor(u)).tolist()
    assert (_t(device, u) >> 3).tolist() == (torch.tensor(u) >> 3).tolist()
    assert ember.bitwise_xor(_t(device, [True, False]), _t(device, [True, True])).tolist() == [False, True]
    assert (_t(device, [True, False]) & 1).tolist() == [1, 0]
    with pytest.raises(TypeError):
        _t(device, [1.0]) & 1


# ----------------------------------------------------------------------------- traps
def test_cpu_keeps_host_device_and_autodiff(device):
    x = _t(device, [1.0, 2.0])
    host = x.cpu()
    assert host.to("cpu").device == host.device
    assert host.device.is_autodiff == device.is_autodiff
    if device.inner().spec[0] in ("flex", "fusion") or device.inner().spec[1] == "cpu":
        assert host.device == device and x.to("cpu") is x
    if device.is_autodiff and host.device == device:  # a move carries values, not the graph
        y = _t(device, [1.0, 2.0], requires_grad=True)
        assert y.cpu() is y


def test_pickle_round_trip(device):
    for dtype in (ember.float32, ember.int64, ember.bool, ember.bfloat16):
        try:
            x = ember.tensor([[1, 0], [3, 4]], dtype=dtype, device=device)
        except ember.errors.UnsupportedDTypeError:
            continue
        y = pickle.loads(pickle.dumps(x))
        assert y.dtype == dtype and y.device == device and y.tolist() == x.tolist()
    if device.is_autodiff:
        z = pickle.loads(pickle.dumps(_t(device, [1.0], requires_grad=True)))
        assert z.requires_grad and z.is_leaf
