"""Custom ops (``ember.autograd.Function``) against the same ``torch.autograd.Function``:
``save_for_backward``, ``needs_input_grad``, non-tensor arguments, several outputs,
``mark_non_differentiable``, ``set_materialize_grads``, the ``setup_context`` form, the errors
of a wrong backward, ``grad_fn`` and double backward through a custom op."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

from ._support import DEVICES, close, pair


def _make_scaled_exp_mul(lib):
    """``x * exp(y) * k`` with a hand-written backward (k: a Python float)."""

    class ScaledExpMul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            e = y.exp()
            ctx.save_for_backward(x, e)
            ctx.k = k
            ctx.seen_needs = ctx.needs_input_grad
            return x * e * k

        @staticmethod
        def backward(ctx, g):
            x, e = ctx.saved_tensors
            gx = g * e * ctx.k if ctx.needs_input_grad[0] else None
            gy = g * x * e * ctx.k if ctx.needs_input_grad[1] else None
            return gx, gy, None

    return ScaledExpMul


def _make_split(lib):
    """Two outputs (sin x, cos x) and an integer output marked non-differentiable."""

    class SinCos(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            idx = (x > 0).to(lib.int64)
            ctx.mark_non_differentiable(idx)
            return x.sin(), x.cos(), idx

        @staticmethod
        def backward(ctx, gs, gc, gi):
            (x,) = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()

    return SinCos


@pytest.mark.parametrize("dev", DEVICES)
def test_custom_function_values_and_gradients_match_torch(dev, rng) -> None:
    (x, y), (tx, ty) = pair(rng, dev, [(3, 4), (4,)], requires_grad=True)
    E, T = _make_scaled_exp_mul(ember), _make_scaled_exp_mul(torch)
    out, tout = E.apply(x, y, 1.5), T.apply(tx, ty, 1.5)
    close(out, tout)
    assert out.requires_grad and out.grad_fn.name() == tout.grad_fn.name() == "ScaledExpMulBackward"
    (out.tanh() * 2).sum().backward()
    (tout.tanh() * 2).sum().backward()
    close(x.grad, tx.grad, rtol=1e-4)
    close(y.grad, ty.grad, rtol=1e-4)  # y broadcast: the engine sums the (3, 4) gradient down


@pytest.mark.parametrize("dev", DEVICES)
def test_needs_input_grad_and_untracked_calls(dev, rng) -> None:
    (x, y), _ = pair(rng, dev, [(3,), (3,)])
    x.requires_grad_()
    E = _make_scaled_exp_mul(ember)
    ctx_needs = []

    class Probe(E):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx_needs.append(ctx.needs_input_grad)
            return E.forward(ctx, x, y, k)

    out = Probe.apply(x, y, 2.0)
    out.sum().backward()
    assert ctx_needs[-1] == (True, False, False) and y.grad is None
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.exp(y.numpy()), rtol=1e-5)
    with ember.no_grad():
        assert not Probe.apply(x, y, 2.0).requires_grad
    assert ctx_needs[-1] == (False, False, False)
    assert not Probe.apply(x.detach(), y, 2.0).requires_grad


@pytest.mark.parametrize("dev", DEVICES)
def test_several_outputs_and_non_differentiable_ones(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(5,)], requires_grad=True)
    s, c, i = _make_split(ember).apply(x)
    ts, tc, ti = _make_split(torch).apply(tx)
    assert not i.requires_grad and not ti.requires_grad
    assert s.grad_fn is c.grad_fn and s.grad_fn.name() == ts.grad_fn.name() == "SinCosBackward"
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    (s * 3 + c * c).sum().backward()
    (ts * 3 + tc * tc).sum().backward()
    close(x.grad, tx.grad, rtol=1e-5)
    x.grad = None
    tx.grad = None
    _make_split(ember).apply(x)[0].sum().backward()  # one output unused: backward gets zeros for it
    _make_split(torch).apply(tx)[0].sum().backward()
    close(x.grad, tx.grad, rtol=1e-5)


def test_set_materialize_grads_false_passes_none() -> None:
    seen = {}
    for lib in (ember, torch):
        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2, lib=lib):
                seen[lib.__name__] = g2
                return g1 * 2

        x = lib.ones(2, requires_grad=True)
        Two.apply(x)[0].sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
    assert seen == {"ember": None, "torch": None}


def test_setup_context_form() -> None:
    grads = {}
    for lib in (ember, torch):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x ** 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                (x,) = inputs
                ctx.save_for_backward(x)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x * x

        x = lib.tensor([1.0, -2.0, 0.5], requires_grad=True)
        Cube.apply(x).sum().backward()
        grads[lib.__name__] = x.grad.tolist()
    assert grads["ember"] == grads["torch"]


def test_wrong_backwards_raise_as_torch() -> None:
    for lib in (ember, torch):
        class TooFew(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g

        class BadShape(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g, lib=lib):
                return lib.ones(5)

        class GradForNumber(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, g

        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
            TooFew.apply(x, lib.ones(3, requires_grad=True)).sum().backward()
        with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
            BadShape.apply(x).sum().backward()
        with pytest.raises(RuntimeError, match="returned a gradient different than None at position 2"):
            GradForNumber.apply(x, 2.0).sum().backward()


def test_an_input_returned_as_is_is_not_changed() -> None:
    class Identity(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 10

    x = ember.ones(2, requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and not y.is_leaf
    y.sum().backward()
    assert x.grad.tolist() == [10.0, 10.0]


@pytest.mark.parametrize("dev", DEVICES)
def test_double_backward_through_a_custom_function(dev, rng) -> None:
    (x, y), (tx, ty) = pair(rng, dev, [(4,), (4,)], requires_grad=True)
    res = {}
    for lib, p, q in ((ember, x, y), (torch, tx, ty)):
        F = _make_scaled_exp_mul(lib)
        # gq = g * x * e * k records through the saved input x (e was made under no_grad in
        # forward, so it is a constant in both libraries)
        (gp, gq) = lib.autograd.grad(F.apply(p, q, 0.5).sum(), [p, q], create_graph=True)
        res[lib.__name__] = lib.autograd.grad((gp * gq).sum(), [p])
    for e, t in zip(res["ember"], res["torch"]):
        close(e, t, rtol=1e-4)


def test_once_differentiable_runs_backward_without_recording() -> None:
    from ember.autograd.function import once_differentiable

    class Sq(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ember.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [2.0, 4.0] and not g.requires_grad
