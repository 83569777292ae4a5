"""The graph surface of a Tensor against torch: ``grad_fn`` (names, ``next_functions``, node
hooks), ``register_hook`` on leaves and non-leaves (replacement, removal, order against
accumulation), ``retain_grad`` / ``retains_grad``, and ``backward``'s arguments
(``gradient``, ``retain_graph``, ``inputs``, ``create_graph``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember
from ember import Device
from ember.errors import AutodiffError

from ._support import DEVICES, close, pair


def _spy(store: dict, key: str):
    """A hook that records a copy of the gradient it sees (and returns None: no replacement)."""
    def hook(g):
        store[key] = g * 1

    return hook


def _net(lib, w, b, x):
    """A small graph with a fan-out (h is used twice) and a broadcast (b)."""
    h = (x @ w + b).tanh()
    return h, (h * h.exp()).sum() + h.mean()


# ------------------------------------------------------------------------------ grad_fn
@pytest.mark.parametrize("dev", DEVICES)
def test_grad_fn_is_none_for_leaves_and_untracked_tensors(dev, rng) -> None:
    (x,), _ = pair(rng, dev, [(3,)], requires_grad=True)
    assert x.grad_fn is None and ember.ones(2, device=dev).grad_fn is None
    with ember.no_grad():
        assert (x * 2).grad_fn is None
    assert (x * 2).detach().grad_fn is None


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_fn_names_and_next_functions_follow_torch(dev, rng) -> None:
    (x, c), (tx, tc) = pair(rng, dev, [(3,), (3,)])
    x.requires_grad_()
    tx.requires_grad_()
    y, ty = x * c, tx * tc
    assert y.grad_fn.name() == ty.grad_fn.name() == "MulBackward0"
    assert y.grad_fn is y.grad_fn  # one object per node, as torch's
    nf, tnf = y.grad_fn.next_functions, ty.grad_fn.next_functions
    assert [(f is None, i) for f, i in nf] == [(f is None, i) for f, i in tnf] == [(False, 0), (True, 0)]
    assert nf[0][0].name() == tnf[0][0].name() == "torch::autograd::AccumulateGrad"
    for e, t in [((x + 1), (tx + 1)), (x.sum(), tx.sum()), (x.exp(), tx.exp()), ((x * 3), (tx * 3))]:
        assert e.grad_fn.name() == t.grad_fn.name()
    z, tz = (y * 2).sum(), (ty * 2).sum()
    chain = [z.grad_fn.name(), z.grad_fn.next_functions[0][0].name(),
             z.grad_fn.next_functions[0][0].next_functions[0][0].name()]
    tchain = [tz.grad_fn.name(), tz.grad_fn.next_functions[0][0].name(),
              tz.grad_fn.next_functions[0][0].next_functions[0][0].name()]
    assert chain == tchain == ["SumBackward0", "MulBackward0", "MulBackward0"]


@pytest.mark.parametrize("dev", DEVICES)
def test_grad_fn_hooks_see_and_replace_the_node_gradients(dev, rng) -> None:
    (a, b), (ta, tb) = pair(rng, dev, [(4,), (4,)], requires_grad=True)
    results = {}
    for lib, p, q in (("ember", a, b), ("torch", ta, tb)):
        seen: dict = {}
        y = p * q
        spy = _spy(seen, "go")
        y.grad_fn.register_prehook(lambda go, spy=spy: spy(go[0]))
        y.grad_fn.register_hook(lambda gi, go: (gi[0] * 3, gi[1]))
        (y * 2).sum().backward()
        results[lib] = (seen["go"], p.grad, q.grad)
    for e, t in zip(results["ember"], results["torch"]):
        close(e, t)


# ------------------------------------------------------------------------------ tensor hooks
@pytest.mark.parametrize("dev", DEVICES)
def test_hooks_on_leaves_and_non_leaves_match_torch(dev, rng) -> None:
    (w, b, x), (tw, tb, tx) = pair(rng, dev, [(5, 4), (4,), (3, 5)])
    w.requires_grad_(), b.requires_grad_()
    tw.requires_grad_(), tb.requires_grad_()
    out = {}
    for lib, W, B, X in (("ember", w, b, x), ("torch", tw, tb, tx)):
        seen = {}
        h, loss = _net(lib, W, B, X)
        h.register_hook(_spy(seen, "h"))
        h.register_hook(lambda g: g * 2)  # replaces h's gradient: everything behind h doubles
        h.register_hook(_spy(seen, "h2"))  # sees the replacement
        W.register_hook(_spy(seen, "w"))
        B.register_hook(lambda g: g + 1)
        loss.backward()
        out[lib] = (seen["h"], seen["h2"], seen["w"], W.grad, B.grad)
    for e, t in zip(out["ember"], out["torch"]):
        close(e, t, rtol=1e-4)


@pytest.mark.parametrize("dev", DEVICES)
def test_a_leaf_hook_runs_before_accumulation(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(3,)], requires_grad=True)
    for p in (x, tx):
        p.grad = p.detach() * 0 + 5  # poison: the hook must see the new gradient, not the sum
        seen = []
        p.register_hook(lambda g, p=p, seen=seen: seen.append((g * 1, p.grad * 1)))
        (p * 2).sum().backward()
        assert seen and np.allclose(np.asarray(seen[0][0].tolist()), 2.0)
        assert np.allclose(np.asarray(seen[0][1].tolist()), 5.0)
        assert np.allclose(np.asarray(p.grad.tolist()), 7.0)


@pytest.mark.parametrize("dev", DEVICES)
def test_removed_hooks_do_not_run(dev, rng) -> None:
    (x,), _ = pair(rng, dev, [(3,)], requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    y = x * 2
    hy = y.register_hook(lambda g: g * 100)
    handle.remove()
    hy.remove()
    handle.remove()  # twice is harmless
    y.sum().backward()
    assert calls == [] and np.allclose(x.grad.numpy(), 2.0)
    with x.register_hook(lambda g: g * 0):
        pass  # the handle as a context manager removes on exit
    (x * 1).sum().backward()
    assert np.allclose(x.grad.numpy(), 3.0)


def test_register_hook_errors_match_torch() -> None:
    for t in (ember.ones(2), torch.ones(2)):
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
            t.register_hook(lambda g: g)
    x = ember.ones(2, requires_grad=True)
    x.register_hook(lambda g: ember.ones(3))
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).sum().backward()


# ------------------------------------------------------------------------------ retain_grad
@pytest.mark.parametrize("dev", DEVICES)
def test_retain_grad_keeps_a_non_leaf_gradient_after_its_hooks(dev, rng) -> None:
    (w, b, x), (tw, tb, tx) = pair(rng, dev, [(5, 4), (4,), (3, 5)])
    w.requires_grad_(), b.requires_grad_()
    tw.requires_grad_(), tb.requires_grad_()
    out = {}
    for lib, W, B, X in (("ember", w, b, x), ("torch", tw, tb, tx)):
        h, loss = _net(lib, W, B, X)
        assert not h.retains_grad and not W.retains_grad
        h.retain_grad()
        h.register_hook(lambda g: g * 10)
        W.retain_grad()  # a no-op on a leaf
        assert h.retains_grad and not W.retains_grad
        loss.backward(retain_graph=True)
        first = h.grad * 1
        loss.backward()  # a retained gradient accumulates, as a leaf's
        out[lib] = (first, h.grad, W.grad)
    for e, t in zip(out["ember"], out["torch"]):
        close(e, t, rtol=1e-4)


def test_non_leaf_grad_is_none_with_a_warning_as_torch() -> None:
    for lib in (ember, torch):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.sum().backward()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert y.grad is None
        assert [type(i.message) for i in w] == [UserWarning]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert x.grad is not None and lib.ones(2).grad is None  # no warning for these
    for t in (ember.ones(2), torch.ones(2)):
        with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
            t.retain_grad()


# ------------------------------------------------------------------------------ backward arguments
@pytest.mark.parametrize("dev", DEVICES)
def test_second_backward_without_retain_graph_raises_as_torch(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(3,)], requires_grad=True)
    for p in (x, tx):
        y = (p * p).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
    z = (x.exp() * x).sum()
    z.backward(retain_graph=False)
    with pytest.raises(AutodiffError):  # (a RuntimeError, as torch's)
        z.backward()


@pytest.mark.parametrize("dev", DEVICES)
def test_retain_graph_allows_a_second_backward_that_accumulates(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(3,)], requires_grad=True)
    for p in (x, tx):
        y = (p.exp() * p).sum()
        y.backward(retain_graph=True)
        y.backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("dev", DEVICES)
def test_backward_gradient_argument(dev, rng) -> None:
    (x, g), (tx, tg) = pair(rng, dev, [(2, 3), (2, 3)])
    x.requires_grad_(), tx.requires_grad_()
    (x.sin() * 3).backward(g)
    (tx.sin() * 3).backward(tg)
    close(x.grad, tx.grad)
    for p in (x, tx):
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            (p * 2).backward()
    for e in (ember.errors.ShapeError, RuntimeError):  # a GradientShapeError is both
        with pytest.raises(e, match="Mismatch in shape"):
            (x * 2).backward(ember.ones(3, device=dev))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (tx * 2).backward(torch.ones(3))


@pytest.mark.parametrize("dev", DEVICES)
def test_backward_inputs_limits_which_tensors_get_a_grad(dev, rng) -> None:
    (x, z), (tx, tz) = pair(rng, dev, [(3,), (3,)], requires_grad=True)
    res = {}
    for lib, p, q in (("ember", x, z), ("torch", tx, tz)):
        (p * q).sum().backward(inputs=[p])
        assert q.grad is None
        w = p * 3
        (w * q).sum().backward(inputs=w)  # a non-leaf input gets its .grad; the leaves nothing
        res[lib] = (p.grad, w.grad)
        with pytest.raises(RuntimeError, match="cannot be empty"):
            (p * 2).sum().backward(inputs=[])
    for e, t in zip(res["ember"], res["torch"]):
        close(e, t)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("dev", DEVICES)
def test_backward_create_graph_gives_differentiable_grads(dev, rng) -> None:
    (x,), (tx,) = pair(rng, dev, [(4,)], requires_grad=True)
    for p in (x, tx):
        (p.tanh() * p).sum().backward(create_graph=True)
        assert p.grad.requires_grad
        g = p.grad
        p.grad = None
        (g * g).sum().backward()
    close(x.grad, tx.grad, rtol=1e-4)


def test_create_graph_under_balanced_checkpointing_raises_a_typed_error(rng) -> None:
    dev = Device.flex().autodiff(checkpointing="balanced")
    x = ember.tensor(rng.standard_normal(3).astype(np.float32), device=dev, requires_grad=True)
    with pytest.raises(AutodiffError, match="balanced"):
        ember.autograd.grad((x.exp() * x).sum(), x, create_graph=True)
    (g,) = ember.autograd.grad((x.exp() * x).sum(), x)  # a plain one works there
    tx = torch.tensor(x.numpy(), requires_grad=True)
    close(g, torch.autograd.grad((tx.exp() * tx).sum(), tx)[0])


def test_backward_on_a_device_without_autodiff_names_the_fix() -> None:
    x = ember.ones(2, device=Device.flex())
    with pytest.raises(AutodiffError, match="autodiff"):
        x.sum().backward()


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_a_plain_backward_after_a_create_graph_one_accumulates() -> None:
    for lib in (ember, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward(create_graph=True)
        (x * 3).sum().backward()
        assert x.grad.tolist() == [5.0, 7.0]
