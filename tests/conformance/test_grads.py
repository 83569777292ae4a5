"""Gradients of every differentiable op of the table, on every autodiff device: ``backward()``
against central finite differences of the float64 numpy reference (eps 1e-6).

The loss is ``sum_k (out_k * w_k).sum()`` with fresh random weights ``w_k``, so every element
of every output gets a different upstream gradient; inputs that broadcast must receive
gradients reduced back to their own shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember

from ._support import central_difference, describe, name_of, read, round_to
from .optable import GRAD_SPECS, OpSpec, Sampler
from .test_ops import as_tuple, to_tensor

GRAD_CASES = [pytest.param(spec, id=spec.name) for spec in GRAD_SPECS]


def _float_outputs(refs: tuple[Any, ...]) -> list[int]:
    return [k for k, r in enumerate(refs) if np.asarray(r).dtype.kind == "f"]


def grads_of(spec: OpSpec, case: tuple[np.ndarray, ...], weights: list[np.ndarray], device: ember.Device,
             what: str, dtype: str = "float64") -> list[Any]:
    """The gradients ``backward()`` leaves on the differentiable inputs (None if missing)."""
    ts = [to_tensor(a, dtype, device, requires_grad=i in spec.grad) for i, a in enumerate(case)]
    outs = as_tuple(spec.fn(*ts))
    with np.errstate(all="ignore"):
        keep = _float_outputs(as_tuple(spec.ref(*case)))
    loss = None
    for k, w in zip(keep, weights):
        term = (outs[k] * ember.tensor(w, dtype=getattr(ember, dtype), device=device)).sum()
        loss = term if loss is None else loss + term
    assert loss is not None, f"{what}: no floating output"
    if not loss.requires_grad:
        # the result depends on no input that requires grad (``clone().zero_()``): PyTorch
        # would still backpropagate zeros; the callers accept None only where that is exact
        return [None for _ in spec.grad]
    loss.backward()
    return [ts[p].grad for p in spec.grad]


@pytest.mark.parametrize("spec", GRAD_CASES)
def test_gradient_matches_finite_differences(spec: OpSpec, autodiff_device: ember.Device,
                                             rng: np.random.Generator) -> None:
    for ci, case in enumerate(spec.gen(Sampler(rng, "float64", "grad"))):
        what = f"d {spec.name} case {ci} ({describe(case)})"
        with np.errstate(all="ignore"):
            refs = as_tuple(spec.ref(*case))
        keep = _float_outputs(refs)
        weights = [rng.standard_normal(np.shape(refs[k])) for k in keep]

        def loss_ref(inputs: list[np.ndarray], weights: list[np.ndarray] = weights,
                     keep: list[int] = keep) -> float:
            with np.errstate(all="ignore"):
                r = as_tuple(spec.ref(*inputs))
            return float(sum(np.sum(w * np.asarray(r[k], np.float64)) for k, w in zip(keep, weights)))

        grads = grads_of(spec, case, weights, autodiff_device, what)
        for p, g in zip(spec.grad, grads):
            fd = central_difference(loss_ref, list(case), p)
            if g is None and not fd.any():
                # an input the result no longer depends on (``clone().copy_(y)``, ``zero_``):
                # PyTorch leaves zeros there, ember may leave None (tensors are values)
                continue
            assert g is not None, f"{what}: input {p} has no .grad after backward()"
            assert tuple(g.shape) == case[p].shape, f"{what}: grad {p} shape {g.shape} != {case[p].shape}"
            assert name_of(g.dtype) == "float64", f"{what}: grad {p} dtype {g.dtype}"
            scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
            np.testing.assert_allclose(read(g), fd, rtol=1e-5, atol=1e-6 * scale,
                                       err_msg=f"{what}: gradient of input {p}")


@pytest.mark.parametrize("spec", GRAD_CASES)
def test_balanced_checkpointing_gives_same_gradients(spec: OpSpec, autodiff_none_device: ember.Device,
                                                     rng: np.random.Generator) -> None:
    balanced = autodiff_none_device.inner().autodiff(checkpointing="balanced")
    for ci, case in enumerate(spec.gen(Sampler(rng, "float64", "grad"))):
        what = f"d {spec.name} case {ci} ({describe(case)})"
        with np.errstate(all="ignore"):
            refs = as_tuple(spec.ref(*case))
        weights = [rng.standard_normal(np.shape(refs[k])) for k in _float_outputs(refs)]
        g_none = grads_of(spec, case, weights, autodiff_none_device, what)
        g_bal = grads_of(spec, case, weights, balanced, what + " (balanced)")
        for p, a, b in zip(spec.grad, g_none, g_bal):
            assert (a is None) == (b is None), f"{what}: grad of input {p} is None on one device only"
            if a is None:
                continue
            np.testing.assert_allclose(read(b), read(a), rtol=1e-12, atol=1e-14,
                                       err_msg=f"{what}: balanced vs none, input {p}")


@pytest.mark.parametrize("spec", GRAD_CASES)
def test_float32_gradients_match_float64(spec: OpSpec, autodiff_device: ember.Device,
                                         rng: np.random.Generator) -> None:
    """Backward in float32 gives float32 gradients close to the float64 ones (same inputs)."""
    for ci, case in enumerate(spec.gen(Sampler(rng, "float32", "grad"))):
        what = f"d {spec.name} case {ci} ({describe(case)}) in float32"
        with np.errstate(all="ignore"):
            refs = as_tuple(spec.ref(*case))
        weights = [round_to(rng.standard_normal(np.shape(refs[k])), "float32") for k in _float_outputs(refs)]
        g64 = grads_of(spec, case, weights, autodiff_device, what)
        g32 = grads_of(spec, case, weights, autodiff_device, what, "float32")
        for p, a, b in zip(spec.grad, g64, g32):
            assert (a is None) == (b is None), f"{what}: grad of input {p} is None in one dtype only"
            if a is None:
                continue
            assert name_of(b.dtype) == "float32", f"{what}: grad {p} dtype {b.dtype}"
            ref = read(a)
            scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
            np.testing.assert_allclose(read(b), ref, rtol=1e-4, atol=1e-5 * scale,
                                       err_msg=f"{what}: gradient of input {p}")
