"""Untracked values on an autodiff device (issue 18): they are the inner backend's primitives,
unwrapped, and an op on them is the inner op itself.

Backend level (over a spy of Flex): no wrapper, the inner op receives the very arguments,
composites run the inner backend's own implementation. Tensor level, on every autodiff
device: the semantics around the fast path as PyTorch has them (leaves made by
``requires_grad_``, in-place updates of leaves, tracked and untracked operands mixed,
``no_grad``/``enable_grad`` nesting and threads, ``detach``, ``.grad`` objects), gradients
checked against torch.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch

import ember
from ember import Device
from ember import dtype as dt
from ember.backends.autodiff import ADTensor, Autodiff, no_grad
from ember.backends.flex import FlexBackend
from ember.errors import AutodiffError


class _Spy(FlexBackend):
    """Flex recording the arguments of every op it runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        for name in ("add", "mul", "reshape", "sum", "where", "masked_fill", "cat", "mean", "gelu", "index_put"):
            setattr(self, name, self._spy(name, getattr(FlexBackend, name)))

    def _spy(self, name: str, fn: Any) -> Any:
        def op(*args: Any) -> Any:
            self.calls.append((name, args))
            return fn(*args) if isinstance(FlexBackend.__dict__.get(name), staticmethod) else fn(self, *args)

        return op


def _prim(B: Autodiff, x: Any) -> Any:
    return B.from_data(np.asarray(x, dtype=np.float64), dt.float64)


# ------------------------------------------------------------------------------ backend level
def test_untracked_ops_pass_the_inner_primitives_through() -> None:
    spy = _Spy()
    B = Autodiff(spy)
    a, b = _prim(B, [[1.0, 2.0], [3.0, 4.0]]), _prim(B, [[0.5, 0.5], [1.0, 2.0]])
    assert type(a) is np.ndarray  # creation gives the inner primitive itself
    mask = B.gt(a, b)
    outs = [B.add(a, b), B.mul(a, b), B.reshape(a, (4,)), B.sum(a, (0,), False), B.where(mask, a, b),
            B.cat([a, b], 0), B.index_put(a, (B.from_data(np.array([1]), dt.int64),), b[:1], False)]
    for o in outs:
        assert type(o) is not ADTensor and not B.is_tracked(o) and B.is_leaf(o)
    # the inner op saw the caller's very objects: nothing was unwrapped or copied
    for name, args in spy.calls:
        if name in ("add", "mul"):
            assert args[0] is a and args[1] is b, name
        if name == "cat":
            assert args[0][0] is a and args[0][1] is b
        if name == "where":
            assert args[0] is mask and args[1] is a and args[2] is b


def test_untracked_composites_run_the_inner_implementation() -> None:
    spy = _Spy()
    B = Autodiff(spy)
    a = _prim(B, [[1.0, -2.0], [3.0, 0.5]])
    spy.calls.clear()
    B.mean(a, (0, 1), False)
    B.gelu(a)
    # the inner backend's own methods (Flex decomposes gelu on itself: its mul calls follow)
    assert [n for n, _ in spy.calls][:2] == ["mean", "gelu"]
    # tracked: the decomposition over Autodiff records its primitives (no "mean" kernel call)
    spy.calls.clear()
    w = B.require_grad(a)
    y = B.mean(w, (0, 1), False)
    assert B.is_tracked(y) and "mean" not in [n for n, _ in spy.calls]
    B.backward(y, None, False)
    np.testing.assert_allclose(B.into_data(B.grad(w)), np.full((2, 2), 0.25))
    with no_grad():  # a tracked input under no_grad: the inner op again, an untracked result
        spy.calls.clear()
        z = B.mean(w, (0, 1), False)
    assert not B.is_tracked(z) and [n for n, _ in spy.calls] == ["mean"]


def test_three_argument_ops_test_and_unwrap_every_position() -> None:
    """``where`` and ``masked_fill`` (the unrolled three-argument path): untracked operands pass
    through as they are, a tracked one at any position is unwrapped for the inner op, under
    ``no_grad`` too, and recorded with grad mode on (gradients as torch's)."""
    spy = _Spy()
    B = Autodiff(spy)
    rng = np.random.default_rng()
    an, bn = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    a, b = _prim(B, an), _prim(B, bn)
    mask = B.gt(a, b)
    spy.calls.clear()
    B.masked_fill(a, mask, 2.5)
    B.where(mask, a, b)
    assert spy.calls[0][1] == (a, mask, 2.5) and spy.calls[1][1][1] is a and spy.calls[1][1][2] is b
    for pos in (1, 2):
        wa, wb = B.require_grad(a), B.require_grad(b)
        args = (mask, wa, b) if pos == 1 else (mask, a, wb)
        with no_grad():
            spy.calls.clear()
            z = B.where(*args)
            assert not B.is_tracked(z) and spy.calls[0][1][pos] is (a if pos == 1 else b)
        y = B.where(*args)
        assert B.is_tracked(y)
        B.backward(B.sum(y, (0, 1), False), None, False)
        tm = torch.tensor(np.asarray(B.into_data(mask)))
        want = (tm if pos == 1 else ~tm).double().numpy()
        np.testing.assert_array_equal(B.into_data(B.grad(wa if pos == 1 else wb)), want)
    w = B.require_grad(a)
    with no_grad():
        spy.calls.clear()
        assert not B.is_tracked(B.masked_fill(w, mask, 0.0)) and spy.calls[0][1][0] is a
    y = B.masked_fill(w, mask, 0.0)
    B.backward(B.sum(y, (0, 1), False), None, False)
    np.testing.assert_array_equal(B.into_data(B.grad(w)), (~np.asarray(B.into_data(mask))).astype(np.float64))


def test_tracked_values_are_wrapped_and_detach_unwraps() -> None:
    B = Autodiff(FlexBackend())
    a = _prim(B, [1.0, 2.0])
    w = B.require_grad(a)
    assert type(w) is ADTensor and w.inner is a and B.is_leaf(w) and B.is_tracked(w)
    assert B.require_grad(w) is w
    assert B.detach(w) is a and B.detach(a) is a
    y = B.mul(w, a)
    assert type(y) is ADTensor and not B.is_leaf(y)
    assert B.grad(a) is None and B.grad_tensor(a, lambda g: g) is None and B.retained_bytes(a) == 0
    with pytest.raises(AutodiffError, match="does not require grad"):
        B.backward(a, None, False)


# ------------------------------------------------------------------------------ tensor level
def _pair(rng: np.random.Generator, device: Device, *shape: int) -> tuple[ember.Tensor, torch.Tensor]:
    x = rng.standard_normal(shape).astype(np.float32)
    return ember.tensor(x, device=device), torch.tensor(x)


def _close(a: ember.Tensor | None, b: torch.Tensor | None) -> None:
    assert a is not None and b is not None
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_mixed_tracked_and_untracked_operands_match_torch(autodiff_device: Device,
                                                          rng: np.random.Generator) -> None:
    w, tw = _pair(rng, autodiff_device, 3, 4)
    c, tc = _pair(rng, autodiff_device, 3, 4)
    v, tv = _pair(rng, autodiff_device, 2, 4)
    w.requires_grad_()
    tw.requires_grad_()
    assert not c.requires_grad and c.is_leaf and c.grad is None

    rows = (ember.tensor([0, 4], device=autodiff_device), torch.tensor([0, 4]))

    def f(w: Any, c: Any, v: Any, lib: Any) -> Any:
        mask = c > 0
        y = c * w + (c - w) / 2.0                 # untracked on either side of a binary op
        y = lib.where(mask, y, c)                 # untracked branch
        y = lib.cat([c, y, c])                     # untracked members of a tensor list
        y = y.index_put((rows[lib is torch],), v)  # untracked values written into a tracked tensor
        return (y.softmax(-1) * c.repeat(3, 1)).sum() + (c @ w.t()).mean()

    out, tout = f(w, c, v, ember), f(tw, tc, tv, torch)
    assert out.requires_grad and not out.is_leaf
    out.backward()
    tout.backward()
    _close(out, tout)
    _close(w.grad, tw.grad)
    assert c.grad is None and not c.requires_grad


def test_leaves_made_from_untracked_tensors_take_in_place_updates(autodiff_device: Device,
                                                                   rng: np.random.Generator) -> None:
    w, tw = _pair(rng, autodiff_device, 4)
    y = w * 2.0
    assert not y.requires_grad and y.is_leaf  # an untracked result is a leaf, as in torch
    w.requires_grad_()
    tw.requires_grad_()
    (w * w).sum().backward()
    (tw * tw).sum().backward()
    g = w.grad
    with ember.no_grad(), torch.no_grad():
        w.add_(g, alpha=-0.1)
        tw.add_(tw.grad, alpha=-0.1)
        w[1] = 5.0
        tw[1] = 5.0
    assert w.is_leaf and w.requires_grad and w.grad is g  # the leaf keeps its identity and .grad
    _close(w, tw)
    with pytest.raises(AutodiffError, match="leaf"):
        w.add_(1.0)  # grad mode on: torch refuses in-place ops on a leaf that requires grad
    (w * w).sum().backward()
    (tw * tw).sum().backward()
    assert w.grad is g  # accumulated into the same object
    _close(w.grad, tw.grad)
    d = w.detach()
    assert not d.requires_grad and d.is_leaf and d.grad is None
    _close(d, tw)
    w.requires_grad_(False)
    assert not w.requires_grad and w.grad is None


def test_grad_mode_nesting_is_per_thread(autodiff_device: Device) -> None:
    w = ember.ones(3, device=autodiff_device, requires_grad=True)
    seen: dict[str, bool] = {}

    def other() -> None:
        seen["other enabled"] = ember.is_grad_enabled()
        seen["other tracked"] = (w * 2.0).requires_grad

    with ember.no_grad():
        assert not (w * 2.0).requires_grad and not ember.is_grad_enabled()
        t = threading.Thread(target=other)
        t.start()
        t.join()
        with ember.enable_grad():
            assert (w * 2.0).requires_grad
            with ember.no_grad():
                assert not (w + w).requires_grad
            assert (w + w).requires_grad
        assert not (w @ w).requires_grad
    assert seen == {"other enabled": True, "other tracked": True}
    assert (w * 2.0).requires_grad and ember.is_grad_enabled()


def test_untracked_results_equal_the_plain_device() -> None:
    """Untracked composites run the inner backend's implementation: the same values as on
    the plain device, bit for bit."""
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    plain, auto = ember.tensor(x, device=Device.flex()), ember.tensor(x, device=Device.flex().autodiff())
    for f in (lambda t: t.mean(1), lambda t: t.var(0), lambda t: ember.nn.functional.gelu(t),
              lambda t: ember.nn.functional.silu(t), lambda t: t.square(), lambda t: t.softmax(0)):
        np.testing.assert_array_equal(f(auto).numpy(), f(plain).numpy())
