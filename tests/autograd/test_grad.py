"""``ember.autograd.grad`` and ``ember.autograd.backward`` against torch: values, the errors of
unused and untracked inputs, ``grad_outputs``, several outputs, ``.grad`` left alone, and
higher-order gradients (``create_graph=True``) through a small network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.errors import AutodiffError

from ._support import DEVICES, close, pair


def _mlp(lib, w1, b1, w2, x):
    h = (x @ w1 + b1).tanh()
    return ((h @ w2).exp() * h.sigmoid().sum(-1, keepdim=True)).sum()


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_matches_torch_and_leaves_grad_alone(dev, rng) -> None:
    shapes = [(5, 4), (4,), (4, 3), (6, 5)]
    ours, theirs = pair(rng, dev, shapes, requires_grad=True)
    ours[0].grad = ember.ones(5, 4, device=dev)  # poison: grad() must not touch it
    gs = ember.autograd.grad(_mlp(ember, *ours), ours[:3])
    tgs = torch.autograd.grad(_mlp(torch, *theirs), theirs[:3])
    assert isinstance(gs, tuple) and len(gs) == 3
    for g, tg in zip(gs, tgs):
        close(g, tg, rtol=1e-4)
        assert not g.requires_grad
    assert np.all(ours[0].grad.numpy() == 1.0) and ours[1].grad is None
    (gx,) = ember.autograd.grad(_mlp(ember, *ours), ours[3])  # a single tensor as inputs
    close(gx, torch.autograd.grad(_mlp(torch, *theirs), theirs[3])[0], rtol=1e-4)


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_of_non_leaf_inputs_and_grad_outputs(dev, rng) -> None:
    (x, go), (tx, tgo) = pair(rng, dev, [(3, 4), (3, 4)])
    x.requires_grad_(), tx.requires_grad_()
    res = {}
    for lib, p, g in ((ember, x, go), (torch, tx, tgo)):
        w = p.exp()
        y = w * p.sin()
        res[lib.__name__] = lib.autograd.grad(y, [w, p], grad_outputs=g)
    for e, t in zip(res["ember"], res["torch"]):
        close(e, t, rtol=1e-5)


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_of_several_outputs_sums_their_contributions(dev, rng) -> None:
    (x, g1), (tx, tg1) = pair(rng, dev, [(4,), (4,)])
    x.requires_grad_(), tx.requires_grad_()
    res = {}
    for lib, p, g in ((ember, x, g1), (torch, tx, tg1)):
        h = p.tanh()
        res[lib.__name__] = lib.autograd.grad([h * 2, (h * p).sum()], p, grad_outputs=[g, None])
    close(res["ember"][0], res["torch"][0])


def test_unused_and_untracked_inputs_raise_as_torch() -> None:
    for lib in (ember, torch):
        x = lib.ones(2, requires_grad=True)
        z = lib.ones(2, requires_grad=True)
        n = lib.ones(2)
        with pytest.raises(RuntimeError, match="at index 1 appears to not have been used in the graph"):
            lib.autograd.grad((x * 2).sum(), [x, z])
        with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
            lib.autograd.grad((x * 2).sum(), [n])
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            lib.autograd.grad((n * 2).sum(), [x])
        gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
        assert gz is None and gx.tolist() == [2.0, 2.0]
        gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], materialize_grads=True)
        assert gz.tolist() == [0.0, 0.0]
        with pytest.raises(ValueError, match="allow_unused"):
            lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=False, materialize_grads=True)
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            lib.autograd.grad(x * 2, [x])
    with pytest.raises(AutodiffError):
        ember.autograd.grad((ember.ones(2, requires_grad=True) * 2).sum(), [ember.ones(2)])


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_frees_the_graph_unless_retained(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(3,)], requires_grad=True)
    for lib, p in ((ember, x), (torch, tx)):
        y = (p.exp() * p).sum()
        lib.autograd.grad(y, p, retain_graph=True)
        lib.autograd.grad(y, p)
        with pytest.raises(RuntimeError, match="second time"):
            lib.autograd.grad(y, p)


@pytest.mark.parametrize("dev", DEVICES)
def test_hessian_vector_product_and_second_derivatives_match_torch(dev, rng) -> None:
    shapes = [(5, 4), (4,), (4, 3), (6, 5)]
    ours, theirs = pair(rng, dev, shapes, requires_grad=True)
    (v1, v2), (tv1, tv2) = pair(rng, dev, [(5, 4), (4,)])
    res = {}
    for lib, ps, vs in ((ember, ours, (v1, v2)), (torch, theirs, (tv1, tv2))):
        g1, g2 = lib.autograd.grad(_mlp(lib, *ps), ps[:2], create_graph=True)
        assert g1.requires_grad and g2.requires_grad
        dot = (g1 * vs[0]).sum() + (g2 * vs[1]).sum()
        hv = lib.autograd.grad(dot, ps[:3])  # H @ v, and the cross terms for w2
        # a third order: d/dx of sum(d^2 f/dx^2) for an elementwise f
        x = ps[3]
        (gx,) = lib.autograd.grad((x.sin() * x * x).sum(), x, create_graph=True)
        (ggx,) = lib.autograd.grad(gx.sum(), x, create_graph=True)
        (gggx,) = lib.autograd.grad(ggx.sum(), x)
        res[lib.__name__] = (*hv, gx, ggx, gggx)
    for e, t in zip(res["ember"], res["torch"]):
        close(e, t, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("dev", DEVICES)
def test_gradient_penalty_trains_through_a_double_backward(dev, rng) -> None:
    """The WGAN-GP pattern: a loss on the norm of an input gradient, backward into the weights."""
    (w, x), (tw, tx) = pair(rng, dev, [(4, 3), (5, 4)])
    w.requires_grad_(), tw.requires_grad_()
    x.requires_grad_(), tx.requires_grad_()
    for lib, W, X in ((ember, w, x), (torch, tw, tx)):
        out = (X @ W).tanh().sum()
        (gx,) = lib.autograd.grad(out, X, create_graph=True)
        penalty = ((gx * gx).sum(-1).sqrt() - 1).pow(2).mean()
        penalty.backward()
    close(w.grad, tw.grad, rtol=1e-4, atol=1e-6)
    close(x.grad, tx.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dev", DEVICES)
def test_autograd_backward_of_several_tensors(dev, rng) -> None:
    (x, z, g), (tx, tz, tg) = pair(rng, dev, [(3,), (3,), (3,)])
    for p in (x, z, tx, tz):
        p.requires_grad_()
    for lib, p, q, gg in ((ember, x, z, g), (torch, tx, tz, tg)):
        h = p * q
        lib.autograd.backward([h.exp(), (h * p).sum()], [gg, None])
    close(x.grad, tx.grad)
    close(z.grad, tz.grad)
    for lib, p, q in ((ember, x, z), (torch, tx, tz)):
        p.grad = None
        q.grad = None
        lib.autograd.backward((p * q).sum(), inputs=[q])
        assert p.grad is None
    close(z.grad, tz.grad)
