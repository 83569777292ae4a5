"""Grad mode and inference mode against torch: ``set_grad_enabled`` as a call, a context
manager and a decorator; ``inference_mode`` (tensors made inside are inference tensors, which
refuse ``requires_grad_`` and in-place updates outside); both per thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import ember
from ember.errors import AutodiffError

from ._support import DEVICES, pair


@pytest.fixture(autouse=True)
def _restore_modes():
    yield
    torch.set_grad_enabled(True)
    ember.set_grad_enabled(True)


def test_set_grad_enabled_as_a_call_sticks() -> None:
    for lib in (torch, ember):
        lib.set_grad_enabled(False)
        assert lib.is_grad_enabled() is False
        lib.set_grad_enabled(True)
        assert lib.is_grad_enabled() is True


def test_set_grad_enabled_as_a_context_manager_restores_the_mode_from_before_the_call() -> None:
    seen = {}
    for lib in (torch, ember):
        with lib.no_grad():
            with lib.set_grad_enabled(True):
                inner = lib.is_grad_enabled()
            after = lib.is_grad_enabled()
        t = lib.set_grad_enabled(False)  # construction sets the mode at once
        made = lib.is_grad_enabled()
        with t:
            within = lib.is_grad_enabled()
        seen[lib.__name__] = (inner, after, made, within, lib.is_grad_enabled())
    assert seen["ember"] == seen["torch"] == (True, False, False, False, True)


def test_set_grad_enabled_as_a_decorator() -> None:
    seen = {}
    for lib in (torch, ember):
        @lib.set_grad_enabled(False)
        def off(lib=lib) -> bool:
            return lib.is_grad_enabled()

        decorated = lib.is_grad_enabled()  # decorating leaves the mode alone
        seen[lib.__name__] = (decorated, off(), lib.is_grad_enabled())
    assert seen["ember"] == seen["torch"] == (True, False, True)


@pytest.mark.parametrize("dev", DEVICES)
def test_set_grad_enabled_stops_recording(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(3, 4)], requires_grad=True)
    with ember.set_grad_enabled(False):
        y = (x * 2).exp()
    with torch.set_grad_enabled(False):
        ty = (tx * 2).exp()
    assert y.requires_grad is ty.requires_grad is False
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-6)
    ember.set_grad_enabled(False)
    assert not (x * 3).requires_grad
    ember.set_grad_enabled(True)
    assert (x * 3).requires_grad


def test_autograd_namespace_aliases() -> None:
    assert ember.autograd.no_grad is ember.no_grad
    assert ember.autograd.enable_grad is ember.enable_grad
    assert ember.autograd.set_grad_enabled is ember.set_grad_enabled
    assert ember.autograd.inference_mode is ember.inference_mode


def test_inference_mode_flags_match_torch() -> None:
    seen = {}
    for lib in (torch, ember):
        rows = []
        with lib.inference_mode():
            rows.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.inference_mode(False):
                rows.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
                rows.append(lib.ones(2).is_inference())
            rows.append(lib.ones(2).is_inference())
        rows.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled(), lib.ones(2).is_inference()))

        @lib.inference_mode
        def bare(lib=lib) -> bool:
            return lib.is_inference_mode_enabled()

        @lib.inference_mode()
        def called(lib=lib) -> bool:
            return lib.is_inference_mode_enabled()

        rows.append((bare(), called(), lib.is_inference_mode_enabled()))
        seen[lib.__name__] = rows
    assert seen["ember"] == seen["torch"]


@pytest.mark.parametrize("dev", DEVICES)
def test_tensors_made_in_inference_mode_are_inference_tensors(dev, rng) -> None:
    (w, x), (tw, tx) = pair(rng, dev, [(4, 4), (4,)], requires_grad=True)
    with ember.inference_mode():
        made = [x + 1, x * w, (x @ w).sum(), ember.zeros(3, device=dev), x.sum(0), x.exp(), w[0], x.detach()]
    with torch.inference_mode():
        tmade = [tx + 1, tx * tw, (tx @ tw).sum(), torch.zeros(3), tx.sum(0), tx.exp(), tw[0] + 0, tx.detach() + 0]
    for e, t in zip(made, tmade):
        assert e.is_inference() and t.is_inference()
        assert not e.requires_grad and not t.requires_grad
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5)
    assert not x.is_inference() and not (x + 1).is_inference()
    a = made[0]
    for lib_a in (a, tmade[0]):
        with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
            lib_a.requires_grad_()
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            lib_a.add_(1)
    with pytest.raises(AutodiffError):
        a.requires_grad_()
    b = a + 1  # a functional op outside inference mode gives a normal tensor, as torch's
    assert not b.is_inference()
    with ember.inference_mode():
        a.add_(1)  # in-place inside inference mode is allowed
    np.testing.assert_allclose(a.numpy(), tx.detach().numpy() + 2, rtol=1e-6)


def test_inference_mode_is_per_thread() -> None:
    seen = []
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:
        with ember.inference_mode():
            entered.set()
            release.wait(10)
            seen.append(ember.ones(2).is_inference())

    th = threading.Thread(target=worker)
    th.start()
    entered.wait(10)
    try:
        here = ember.ones(2)
        assert not here.is_inference() and not ember.is_inference_mode_enabled() and ember.is_grad_enabled()
    finally:
        release.set()
        th.join()
    assert seen == [True]


def test_set_grad_enabled_is_per_thread() -> None:
    seen = []
    ember.set_grad_enabled(False)
    try:
        th = threading.Thread(target=lambda: seen.append(ember.is_grad_enabled()))
        th.start()
        th.join()
    finally:
        ember.set_grad_enabled(True)
    assert seen == [True]


def test_results_are_allocated_by_object_new_again_once_no_thread_is_in_inference_mode() -> None:
    """The cost invariant: outside inference mode an op allocates its result exactly as before
    (no check), the marking allocator is installed only while some thread needs it."""
    from ember.tensor import core, factories, reductions

    modules = (core, factories, reductions)
    assert all(m._new is object.__new__ for m in modules)
    with ember.inference_mode():
        assert all(m._new is core._new_marking for m in modules)
        with ember.inference_mode(False):
            assert all(m._new is object.__new__ for m in modules)
            assert not ember.ones(2).is_inference()
        assert (ember.ones(2) + 1).is_inference() and ember.ones(2).sum().is_inference()
    assert all(m._new is object.__new__ for m in modules)


def test_set_grad_enabled_takes_mode_by_keyword() -> None:
    for lib in (torch, ember):
        with lib.set_grad_enabled(mode=False):
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()
