"""Every loss against torch CPU: each reduction, weights, ignore_index, label_smoothing,
probability targets, pos_weight; values and input gradients on every autodiff device (a
subset on the slow WGSL device), the module forms on the default device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from nn_reference import assert_close, is_flex, is_reduced

import ember
import ember.nn as enn
import ember.nn.functional as F

pytestmark = pytest.mark.filterwarnings("ignore:reduction. .mean. divides")

REDUCTIONS = ["mean", "sum", "none"]


def _data(rng):
    """Inputs shared by the cases: (name -> numpy array)."""
    n, c = 5, 4
    tgt = rng.integers(0, c, (n,))
    tgt[1] = 2  # keep ignore_index=2 away from an all-ignored batch
    tgt[0] = 0
    return {
        "logits": rng.standard_normal((n, c)).astype(np.float32) * 2,
        "logits_nd": rng.standard_normal((2, c, 3, 2)).astype(np.float32),
        "target": tgt,
        "target_nd": rng.integers(0, c, (2, 3, 2)),
        "probs": rng.dirichlet(np.ones(c), n).astype(np.float32),
        "weight": rng.uniform(0.2, 2.0, c).astype(np.float32),
        "x": rng.standard_normal((n, c)).astype(np.float32),
        "y": rng.standard_normal((n, c)).astype(np.float32),
        "p": rng.uniform(0.02, 0.98, (n, c)).astype(np.float32),
        "bin": (rng.uniform(size=(n, c)) > 0.5).astype(np.float32),
        "ew": rng.uniform(0.1, 1.0, (n, c)).astype(np.float32),
        "posw": rng.uniform(0.5, 3.0, c).astype(np.float32),
        "sign": np.where(rng.uniform(size=n) > 0.5, 1.0, -1.0).astype(np.float32),
        "signs_nc": np.where(rng.uniform(size=(n, c)) > 0.5, 1.0, -1.0).astype(np.float32),
        "a": rng.standard_normal(n).astype(np.float32),
        "b": rng.standard_normal(n).astype(np.float32),
        "logp_t": np.log(rng.dirichlet(np.ones(c), n)).astype(np.float32),
        "counts": rng.poisson(2.0, (n, c)).astype(np.float32),
        "var": rng.uniform(0.1, 2.0, (n, c)).astype(np.float32),
        "nc2": rng.standard_normal((n, c)).astype(np.float32),
    }


# (id, function of (functional namespace, inputs dict, reduction), grad inputs, on the slow device)
CASES = [
    ("ce", lambda f, d, r: f.cross_entropy(d["logits"], d["target"], reduction=r), ["logits"], True),
    ("ce_weight", lambda f, d, r: f.cross_entropy(d["logits"], d["target"], weight=d["weight"], reduction=r),
     ["logits"], False),
    ("ce_ignore", lambda f, d, r: f.cross_entropy(d["logits"], d["target"], ignore_index=2, reduction=r),
     ["logits"], False),
    ("ce_weight_ignore_smooth", lambda f, d, r: f.cross_entropy(d["logits"], d["target"], weight=d["weight"],
                                                                ignore_index=2, label_smoothing=0.2, reduction=r),
     ["logits"], True),
    ("ce_smooth", lambda f, d, r: f.cross_entropy(d["logits"], d["target"], label_smoothing=0.1, reduction=r),
     ["logits"], False),
    ("ce_nd", lambda f, d, r: f.cross_entropy(d["logits_nd"], d["target_nd"], weight=d["weight"], reduction=r),
     ["logits_nd"], False),
    ("ce_probs", lambda f, d, r: f.cross_entropy(d["logits"], d["probs"], reduction=r), ["logits", "probs"], False),
    ("ce_probs_weight_smooth", lambda f, d, r: f.cross_entropy(d["logits"], d["probs"], weight=d["weight"],
                                                               label_smoothing=0.3, reduction=r), ["logits"], False),
    ("ce_unbatched", lambda f, d, r: f.cross_entropy(d["logits"][0], d["target"][0], reduction=r), ["logits"],
     False),
    ("nll", lambda f, d, r: f.nll_loss(d["logits"].log_softmax(1), d["target"], weight=d["weight"],
                                       ignore_index=1, reduction=r), ["logits"], False),
    ("mse", lambda f, d, r: f.mse_loss(d["x"], d["y"], reduction=r), ["x", "y"], True),
    ("mse_weight", lambda f, d, r: f.mse_loss(d["x"], d["y"], reduction=r, weight=d["ew"]), ["x"], False),
    ("l1", lambda f, d, r: f.l1_loss(d["x"], d["y"], reduction=r), ["x", "y"], False),
    ("smooth_l1", lambda f, d, r: f.smooth_l1_loss(d["x"], d["y"], reduction=r, beta=0.5), ["x", "y"], False),
    ("smooth_l1_beta0", lambda f, d, r: f.smooth_l1_loss(d["x"], d["y"], reduction=r, beta=0.0), ["x"], False),
    ("huber", lambda f, d, r: f.huber_loss(d["x"], d["y"], reduction=r, delta=0.7), ["x", "y"], False),
    ("bce", lambda f, d, r: f.binary_cross_entropy(d["p"], d["bin"], reduction=r), ["p"], False),
    ("bce_weight_soft", lambda f, d, r: f.binary_cross_entropy(d["p"], d["p"].flip(0), weight=d["ew"], reduction=r),
     ["p"], False),
    ("bce_logits", lambda f, d, r: f.binary_cross_entropy_with_logits(d["x"] * 8.0, d["bin"], reduction=r), ["x"],
     True),
    ("bce_logits_pos_weight", lambda f, d, r: f.binary_cross_entropy_with_logits(
        d["x"], d["p"], weight=d["ew"], pos_weight=d["posw"], reduction=r), ["x", "p"], False),
    ("kl_div", lambda f, d, r: f.kl_div(d["logits"].log_softmax(1), d["probs"], reduction=r), ["logits", "probs"],
     False),
    ("kl_div_log_target", lambda f, d, r: f.kl_div(d["logits"].log_softmax(1), d["logp_t"], reduction=r,
                                                   log_target=True), ["logits", "logp_t"], False),
    ("cosine_embedding", lambda f, d, r: f.cosine_embedding_loss(d["x"], d["y"], d["sign"], margin=0.2, reduction=r),
     ["x", "y"], False),
    ("margin_ranking", lambda f, d, r: f.margin_ranking_loss(d["a"], d["b"], d["sign"], margin=0.3, reduction=r),
     ["a", "b"], False),
    ("soft_margin", lambda f, d, r: f.soft_margin_loss(d["x"], d["signs_nc"], reduction=r), ["x"], False),
    ("poisson", lambda f, d, r: f.poisson_nll_loss(d["x"], d["counts"], reduction=r), ["x"], False),
    ("poisson_full_nolog", lambda f, d, r: f.poisson_nll_loss(d["p"], d["counts"], log_input=False, full=True,
                                                              reduction=r), ["p"], False),
    ("gaussian_nll", lambda f, d, r: f.gaussian_nll_loss(d["x"], d["y"], d["var"], full=True, reduction=r),
     ["x", "var"], False),
    ("hinge_embedding", lambda f, d, r: f.hinge_embedding_loss(d["x"], d["signs_nc"], margin=0.5, reduction=r),
     ["x"], False),
    ("triplet", lambda f, d, r: f.triplet_margin_loss(d["x"], d["y"], d["nc2"], margin=0.5, swap=True, reduction=r),
     ["x", "y", "nc2"], False),
    ("multilabel_soft_margin", lambda f, d, r: f.multilabel_soft_margin_loss(d["x"], d["bin"], weight=d["weight"],
                                                                             reduction=r), ["x"], False),
    ("multi_margin", lambda f, d, r: f.multi_margin_loss(d["x"], d["target"], p=2, margin=0.8, weight=d["weight"],
                                                         reduction=r), ["x"], False),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_loss_matches_torch(case, reduction, autodiff_device, rng):
    name, fn, grads, on_slow = case
    if not is_flex(autodiff_device) and reduction != "mean":
        pytest.skip("every reduction runs on the flex devices (the reductions are shared code)")
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on this device")
    raw = _data(rng)
    td = {k: torch.tensor(v, requires_grad=k in grads) for k, v in raw.items()}
    ed = {k: ember.tensor(v, device=autodiff_device, requires_grad=k in grads) for k, v in raw.items()}
    tl = fn(TF, td, reduction)
    el = fn(F, ed, reduction)
    assert_close(el, tl, what=f"{name} {reduction}")
    g = rng.standard_normal(tuple(tl.shape)).astype(np.float32)
    tl.backward(torch.from_numpy(g))
    el.backward(ember.tensor(g, device=autodiff_device))
    for k in grads:
        assert_close(ed[k].grad, td[k].grad, what=f"{name} {reduction} grad of {k}")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss_single_sample_shapes(reduction, rng):
    # a 0-d input is one sample of one class; a 1-D one is one sample whose result has the
    # target's shape under reduction="none", as torch
    for x, t in (((), 0), ((5,), 2), ((5,), [3])):
        xv = rng.standard_normal(x).astype(np.float32)
        ex, tx = ember.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
        el = F.multi_margin_loss(ex, ember.tensor(t), margin=2.0, reduction=reduction)
        tl = TF.multi_margin_loss(tx, torch.tensor(t), margin=2.0, reduction=reduction)
        assert tuple(el.shape) == tuple(tl.shape)
        assert_close(el, tl)
        el.sum().backward()
        tl.sum().backward()
        assert_close(ex.grad, tx.grad)


def test_cross_entropy_all_ignored_is_nan():
    x = ember.randn(3, 4)
    t = ember.tensor([-100, -100, -100])
    assert np.isnan(F.cross_entropy(x, t).item())
    assert F.cross_entropy(x, t, reduction="sum").item() == 0.0
    assert np.isnan(TF.cross_entropy(torch.randn(3, 4), torch.tensor([-100] * 3)).item())


def test_kl_div_batchmean_and_legacy_reduction(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    p = rng.dirichlet(np.ones(3), 4).astype(np.float32)
    want = TF.kl_div(torch.tensor(a).log_softmax(1), torch.tensor(p), reduction="batchmean")
    got = F.kl_div(ember.tensor(a).log_softmax(1), ember.tensor(p), reduction="batchmean")
    assert_close(got, want)
    with pytest.warns(UserWarning, match="size_average and reduce"):
        s = F.mse_loss(ember.tensor(a), ember.tensor(a * 2), size_average=False)
    assert_close(s, TF.mse_loss(torch.tensor(a), torch.tensor(a * 2), reduction="sum"))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(ember.tensor(a), ember.tensor(a), reduction="avg")


def test_loss_errors():
    x = ember.randn(3, 4)
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, ember.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="Expected target size"):
        F.cross_entropy(x, ember.rand(3, 5))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, ember.rand(3))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), label_smoothing=1.5)


def test_bce_clamps_log_like_torch():
    p = np.array([0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 1.0], np.float32)
    got = F.binary_cross_entropy(ember.tensor(p), ember.tensor(t), reduction="none")
    want = TF.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none")
    assert_close(got, want)
    # large logits stay finite in the logits form
    z = ember.tensor([80.0, -80.0], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(z, ember.tensor([0.0, 1.0]))
    loss.backward()
    assert np.isfinite(loss.item()) and np.all(np.isfinite(z.grad.numpy()))


MODULES = [
    lambda nn, w: nn.CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.1),
    lambda nn, w: nn.NLLLoss(weight=w, reduction="sum"),
    lambda nn, w: nn.MultiMarginLoss(weight=w),
    lambda nn, w: nn.MultiLabelSoftMarginLoss(weight=w),
]


@pytest.mark.parametrize("ctor", MODULES)
def test_weighted_loss_modules(ctor, rng):
    w = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    tm, em = ctor(tnn, torch.tensor(w)), ctor(enn, ember.tensor(w))
    assert repr(em) == repr(tm)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    if isinstance(tm, tnn.MultiLabelSoftMarginLoss):
        t = (rng.uniform(size=(5, 4)) > 0.5).astype(np.float32)
    else:
        t = rng.integers(0, 4, 5)
    ein = x if not isinstance(tm, tnn.NLLLoss) else np.log(rng.dirichlet(np.ones(4), 5)).astype(np.float32)
    assert_close(em(ember.tensor(ein), ember.tensor(t)), tm(torch.tensor(ein), torch.tensor(t)))


def test_unweighted_loss_modules(rng):
    x, y = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    s = np.where(rng.uniform(size=(3, 4)) > 0.5, 1.0, -1.0).astype(np.float32)
    pairs = [
        (lambda nn: nn.MSELoss(), (x, y)), (lambda nn: nn.L1Loss(reduction="sum"), (x, y)),
        (lambda nn: nn.SmoothL1Loss(beta=0.3), (x, y)), (lambda nn: nn.HuberLoss(delta=0.4), (x, y)),
        (lambda nn: nn.BCELoss(), (1 / (1 + np.exp(-x)), (y > 0).astype(np.float32))),
        (lambda nn: nn.BCEWithLogitsLoss(pos_weight=ember.ones(4) * 2 if nn is enn else torch.ones(4) * 2),
         (x, (y > 0).astype(np.float32))),
        (lambda nn: nn.KLDivLoss(reduction="batchmean", log_target=True), (x, y)),
        (lambda nn: nn.SoftMarginLoss(), (x, s)), (lambda nn: nn.HingeEmbeddingLoss(), (x, s)),
        (lambda nn: nn.PoissonNLLLoss(), (x, np.abs(y))),
        (lambda nn: nn.MarginRankingLoss(0.1), (x[0], y[0], s[0])),
        (lambda nn: nn.CosineEmbeddingLoss(0.1), (x, y, s[:, 0])),
        (lambda nn: nn.TripletMarginLoss(), (x, y, s)),
        (lambda nn: nn.GaussianNLLLoss(), (x, y, np.abs(s))),
    ]
    for ctor, args in pairs:
        tm, em = ctor(tnn), ctor(enn)
        assert repr(em) == repr(tm)
        assert_close(em(*[ember.tensor(a) for a in args]), tm(*[torch.tensor(a) for a in args]), what=repr(tm))
