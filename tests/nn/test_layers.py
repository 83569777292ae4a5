"""Every layer and functional op of ember.nn against torch CPU: identical weights (copied
through the state dict), outputs, input gradients and parameter gradients, in train and eval
mode, on every autodiff device (a representative subset on the slow WGSL device)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from nn_reference import assert_close, copy_weights, ember_input, is_reduced, is_slow, perturb, same_repr, torch_input

import ember
import ember.nn as enn
import ember.nn.functional as F
from ember import Device

# (id, constructor taking the nn namespace, input shapes, runs on the slow device)
LAYERS = [
    ("linear", lambda nn: nn.Linear(5, 3), [(4, 5)], True),
    ("linear_nobias_3d", lambda nn: nn.Linear(5, 3, bias=False), [(2, 3, 5)], False),
    ("bilinear", lambda nn: nn.Bilinear(4, 3, 2), [(5, 4), (5, 3)], False),
    ("identity", lambda nn: nn.Identity(7), [(3, 4)], False),
    ("flatten", lambda nn: nn.Flatten(), [(2, 3, 4)], False),
    ("unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [(4, 6)], False),
    ("relu", lambda nn: nn.ReLU(), [(3, 7)], False),
    ("relu6", lambda nn: nn.ReLU6(), [(3, 7)], False),
    ("gelu", lambda nn: nn.GELU(), [(3, 7)], True),
    ("gelu_tanh", lambda nn: nn.GELU("tanh"), [(3, 7)], False),
    ("silu", lambda nn: nn.SiLU(), [(3, 7)], False),
    ("tanh", lambda nn: nn.Tanh(), [(3, 7)], False),
    ("sigmoid", lambda nn: nn.Sigmoid(), [(3, 7)], False),
    ("softmax", lambda nn: nn.Softmax(dim=1), [(3, 7)], True),
    ("log_softmax", lambda nn: nn.LogSoftmax(dim=-1), [(2, 3, 5)], False),
    ("softmin", lambda nn: nn.Softmin(dim=0), [(3, 7)], False),
    ("leaky_relu", lambda nn: nn.LeakyReLU(0.2), [(3, 7)], False),
    ("elu", lambda nn: nn.ELU(0.7), [(3, 7)], False),
    ("selu", lambda nn: nn.SELU(), [(3, 7)], False),
    ("celu", lambda nn: nn.CELU(1.3), [(3, 7)], False),
    ("softplus", lambda nn: nn.Softplus(), [(3, 7)], False),
    ("softplus_beta", lambda nn: nn.Softplus(beta=2.0, threshold=1.0), [(3, 7)], False),
    ("softsign", lambda nn: nn.Softsign(), [(3, 7)], False),
    ("mish", lambda nn: nn.Mish(), [(3, 7)], False),
    ("hardtanh", lambda nn: nn.Hardtanh(-0.5, 0.7), [(3, 7)], False),
    ("hardsigmoid", lambda nn: nn.Hardsigmoid(), [(3, 7)], False),
    ("hardswish", lambda nn: nn.Hardswish(), [(3, 7)], False),
    ("prelu", lambda nn: nn.PReLU(), [(3, 7)], False),
    ("prelu_channels", lambda nn: nn.PReLU(4), [(2, 4, 3)], False),
    ("threshold", lambda nn: nn.Threshold(0.1, 20.0), [(3, 7)], False),
    ("glu", lambda nn: nn.GLU(), [(3, 8)], False),
    ("tanhshrink", lambda nn: nn.Tanhshrink(), [(3, 7)], False),
    ("logsigmoid", lambda nn: nn.LogSigmoid(), [(3, 7)], False),
    ("softshrink", lambda nn: nn.Softshrink(0.3), [(3, 7)], False),
    ("hardshrink", lambda nn: nn.Hardshrink(0.3), [(3, 7)], False),
    ("layer_norm", lambda nn: nn.LayerNorm(6), [(4, 6)], True),
    ("layer_norm_2d", lambda nn: nn.LayerNorm((3, 6)), [(2, 3, 6)], False),
    ("layer_norm_noaffine", lambda nn: nn.LayerNorm(6, elementwise_affine=False), [(4, 6)], False),
    ("layer_norm_nobias", lambda nn: nn.LayerNorm(6, bias=False), [(4, 6)], False),
    ("rms_norm", lambda nn: nn.RMSNorm(6), [(4, 6)], False),
    ("rms_norm_eps", lambda nn: nn.RMSNorm([2, 6], eps=1e-3), [(3, 2, 6)], False),
    ("group_norm", lambda nn: nn.GroupNorm(2, 4), [(3, 4, 5)], False),
    ("batch_norm1d", lambda nn: nn.BatchNorm1d(4), [(6, 4)], True),
    ("batch_norm1d_3d", lambda nn: nn.BatchNorm1d(4), [(3, 4, 5)], False),
    ("batch_norm2d", lambda nn: nn.BatchNorm2d(3), [(2, 3, 4, 4)], False),
    ("batch_norm_noaffine", lambda nn: nn.BatchNorm1d(4, affine=False, momentum=None), [(6, 4)], False),
    ("batch_norm_nostats", lambda nn: nn.BatchNorm1d(4, track_running_stats=False), [(6, 4)], False),
    ("instance_norm1d", lambda nn: nn.InstanceNorm1d(4, affine=True), [(2, 4, 6)], False),
    ("instance_norm2d_stats", lambda nn: nn.InstanceNorm2d(3, track_running_stats=True), [(2, 3, 4, 4)], False),
    ("dropout_eval_only", lambda nn: nn.Dropout(0.0), [(3, 7)], False),
    ("sequential", lambda nn: nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)),
     [(4, 5)], True),
]


def _run(module, inputs, grad_out):
    out = module(*inputs)
    out.backward(grad_out)
    return out


@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_torch(case, autodiff_device, rng):
    name, ctor, shapes, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on this device")
    torch.manual_seed(0)
    tm = ctor(tnn)
    em = ctor(enn).to(autodiff_device)
    perturb(tm, rng)
    assert list(em.state_dict()) == list(tm.state_dict())
    copy_weights(tm, em)
    # eval differs from train only for the norms with statistics and dropout
    modes = ("train", "eval") if "norm" in name or "dropout" in name or name == "sequential" else ("train",)
    for mode in modes:
        tm.train(mode == "train")
        em.train(mode == "train")
        xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        txs = [torch_input(x) for x in xs]
        exs = [ember_input(x, autodiff_device) for x in xs]
        ty = tm(*txs)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(g))
        ey = _run(em, exs, ember.tensor(g, device=autodiff_device))
        assert_close(ey, ty, what=f"{name} {mode} output")
        for i, (ex, tx) in enumerate(zip(exs, txs)):
            assert_close(ex.grad, tx.grad, what=f"{name} {mode} grad of input {i}")
        tparams = dict(tm.named_parameters())
        for pname, p in em.named_parameters():
            assert_close(p.grad, tparams[pname].grad, what=f"{name} {mode} grad of {pname}")
        for bname, b in tm.named_buffers():
            assert_close(em.get_buffer(bname), b, what=f"{name} {mode} buffer {bname}")
        tm.zero_grad()
        em.zero_grad()


def test_batchnorm_running_stats_over_steps(autodiff_device, rng):
    for momentum in (0.1, None):
        tm = tnn.BatchNorm2d(3, momentum=momentum)
        em = enn.BatchNorm2d(3, momentum=momentum).to(autodiff_device)
        for _ in range(4):
            x = (rng.standard_normal((4, 3, 2, 2)) * 2 + 1).astype(np.float32)
            tm(torch.from_numpy(x))
            em(ember.tensor(x, device=autodiff_device))
        assert int(em.num_batches_tracked.item()) == 4
        for k in ("running_mean", "running_var"):
            assert_close(getattr(em, k), getattr(tm, k), what=f"{k} momentum={momentum}")
        # eval mode uses the running statistics
        tm.eval()
        em.eval()
        x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
        assert_close(em(ember.tensor(x, device=autodiff_device)), tm(torch.from_numpy(x)))


def test_batch_norm_errors():
    bn = enn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(ember.randn(1, 3))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        bn(ember.randn(2, 3, 4, 5))
    with pytest.raises(RuntimeError, match="running_mean and running_var"):
        F.batch_norm(ember.randn(4, 3), None, None, training=False)


def test_norms_of_an_empty_batch(rng):
    # as torch: an empty result, the running statistics unchanged (group_norm's reshape to
    # (0, groups, -1) was ambiguous; batch_norm refused "1 value per channel" for 0 values)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    rm, rv = ember.zeros(4), ember.ones(4)
    y = F.batch_norm(ember.zeros(0, 4, 3), rm, rv, ember.tensor(w), ember.tensor(b), training=True)
    assert tuple(y.shape) == (0, 4, 3)
    np.testing.assert_array_equal(rm.numpy(), np.zeros(4))
    np.testing.assert_array_equal(rv.numpy(), np.ones(4))
    for training in (True, False):  # torch takes an empty 1-D input (and no other 1-D one)
        assert tuple(F.batch_norm(ember.zeros(0), ember.zeros(0), ember.ones(0), training=training).shape) == (0,)
    with pytest.raises(ValueError, match="2D or higher"):
        F.batch_norm(ember.zeros(3), ember.zeros(3), ember.ones(3))
    for shape in ((0, 4), (0, 4, 3)):
        x = ember.zeros(shape, requires_grad=True)
        y = F.group_norm(x, 2, ember.tensor(w), ember.tensor(b))
        assert tuple(y.shape) == shape
        y.sum().backward()
        assert tuple(x.grad.shape) == shape


def test_embedding_matches_torch(autodiff_device, rng):
    tm = tnn.Embedding(10, 4, padding_idx=2)
    em = enn.Embedding(10, 4, padding_idx=2).to(autodiff_device)
    assert np.all(em.weight.numpy()[2] == 0)
    copy_weights(tm, em)
    idx = rng.integers(0, 10, (3, 5))
    idx[0, 0] = 2
    ty = tm(torch.from_numpy(idx))
    ey = em(ember.tensor(idx, device=autodiff_device))
    g = rng.standard_normal(ty.shape).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    ey.backward(ember.tensor(g, device=autodiff_device))
    assert_close(ey, ty)
    assert_close(em.weight.grad, tm.weight.grad)
    assert np.all(em.weight.grad.numpy()[2] == 0)


def test_embedding_options_match_torch(rng):
    w = rng.standard_normal((8, 3)).astype(np.float32) * 3
    idx = np.array([[1, 2, 1, 5], [5, 5, 0, 1]])
    # scale_grad_by_freq
    tm = tnn.Embedding.from_pretrained(torch.from_numpy(w), freeze=False, scale_grad_by_freq=True, padding_idx=0)
    em = enn.Embedding.from_pretrained(ember.tensor(w), freeze=False, scale_grad_by_freq=True, padding_idx=0)
    tm(torch.from_numpy(idx)).pow(2).sum().backward()
    (em(ember.tensor(idx)) ** 2).sum().backward()
    assert_close(em.weight.grad, tm.weight.grad)
    # max_norm renormalises the looked-up rows in place
    tm = tnn.Embedding.from_pretrained(torch.from_numpy(w), max_norm=1.0)
    em = enn.Embedding.from_pretrained(ember.tensor(w), max_norm=1.0)
    assert_close(em(ember.tensor(idx)), tm(torch.from_numpy(idx)))
    assert_close(em.weight, tm.weight)
    assert not em.weight.requires_grad
    assert repr(em) == repr(tm)


def test_embedding_bag_matches_torch(rng):
    w = rng.standard_normal((8, 3)).astype(np.float32)
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 7])
    offsets = np.array([0, 3, 3, 6])
    for mode in ("sum", "mean", "max"):
        tm = tnn.EmbeddingBag.from_pretrained(torch.from_numpy(w), freeze=False, mode=mode)
        em = enn.EmbeddingBag.from_pretrained(ember.tensor(w), freeze=False, mode=mode)
        ty = tm(torch.from_numpy(flat), torch.from_numpy(offsets))
        ey = em(ember.tensor(flat), ember.tensor(offsets))
        assert_close(ey, ty, what=mode)
        ty.sum().backward()
        ey.sum().backward()
        assert_close(em.weight.grad, tm.weight.grad, what=mode)
    two_d = rng.integers(0, 8, (3, 4))
    assert_close(em(ember.tensor(two_d)), tm(torch.from_numpy(two_d)))


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16], ids=["bf16", "f16"])
def test_low_precision_layers_on_flex(dtype, rng):
    dev = Device.flex().autodiff()
    tdt = {ember.bfloat16: torch.bfloat16, ember.float16: torch.float16}[dtype]
    for ctor in (lambda nn: nn.Linear(6, 4), lambda nn: nn.LayerNorm(6), lambda nn: nn.GELU(),
                 lambda nn: nn.Softmax(-1), lambda nn: nn.RMSNorm(6)):
        tm = ctor(tnn)
        perturb(tm, rng)
        em = ctor(enn).to(dev)
        copy_weights(tm, em)
        tm.to(tdt)
        em.to(dtype)
        x = rng.standard_normal((3, 6)).astype(np.float32)
        ty = tm(torch_input(x, dtype=tdt))
        ey = em(ember_input(x, dev, dtype=dtype))
        assert ey.dtype is dtype
        assert_close(ey, ty, dtype=dtype, what=repr(tm))
        ty.float().sum().backward()
        ey.float().sum().backward()
        for (n, p), tp in zip(em.named_parameters(), tm.parameters()):
            assert_close(p.grad, tp.grad, dtype=dtype, what=f"{tm} {n}", scale=max(1.0, float(tp.grad.abs().max())))


# --------------------------------------------------------------------------- functional forms
FUNCS = [
    ("relu", lambda f, x: f.relu(x)),
    ("gelu", lambda f, x: f.gelu(x, approximate="tanh")),
    ("softmax_dtype", lambda f, x: f.softmax(x, dim=0, dtype=torch.float64 if f is TF else ember.float64)),
    ("log_softmax", lambda f, x: f.log_softmax(x, -1)),
    ("softmin", lambda f, x: f.softmin(x, dim=1)),
    ("elu", lambda f, x: f.elu(x, alpha=0.5)),
    ("softplus", lambda f, x: f.softplus(x, beta=3.0, threshold=2.0)),
    ("hardtanh", lambda f, x: f.hardtanh(x, -0.3, 0.4)),
    ("glu_dim0", lambda f, x: f.glu(x, dim=0)),
    ("normalize", lambda f, x: f.normalize(x, dim=1)),
    ("normalize_p1", lambda f, x: f.normalize(x, p=1.0, dim=0)),
    ("cosine_similarity", lambda f, x: f.cosine_similarity(x, x.flip(0) * 2.0 - 1.0, dim=1)),
    ("pairwise_distance", lambda f, x: f.pairwise_distance(x, x.flip(1))),
    ("pairwise_distance_p1", lambda f, x: f.pairwise_distance(x, x * 0.5, p=1.0, keepdim=True)),
    # p <= 0: the norm itself is clamped to eps (clamping the sum before the root would need eps ** p)
    ("normalize_p_neg1", lambda f, x: f.normalize(x, p=-1.0, dim=1)),
    ("normalize_p0_neg_inf", lambda f, x: f.normalize(x, p=0.0, dim=1) + f.normalize(x, p=-float("inf"), dim=0)),
    ("pairwise_distance_p_neg1", lambda f, x: f.pairwise_distance(x, x.flip(1), p=-1.0)),
    ("dropout_eval", lambda f, x: f.dropout(x, 0.4, training=False)),
    ("layer_norm", lambda f, x: f.layer_norm(x, (6,), eps=1e-3)),
    ("rms_norm", lambda f, x: f.rms_norm(x, [6])),
    ("group_norm", lambda f, x: f.group_norm(x.reshape(2, 6, 2), 3)),
    ("linear", lambda f, x: f.linear(x, x[:2], x[0, :2])),
]


@pytest.mark.parametrize("case", FUNCS, ids=[c[0] for c in FUNCS])
def test_functional_matches_torch(case, autodiff_device, rng):
    name, fn = case
    if is_reduced(autodiff_device) and name not in ("gelu", "layer_norm", "normalize"):
        pytest.skip("representative subset on this device")
    x = rng.standard_normal((4, 6)).astype(np.float32)
    if name == "softmax_dtype" and is_slow(autodiff_device):
        pytest.skip("no float64 on WGSL")
    tx = torch_input(x)
    ex = ember_input(x, autodiff_device)
    ty = fn(TF, tx)
    ey = fn(F, ex)
    assert_close(ey, ty, what=name)
    g = rng.standard_normal(ty.shape).astype(np.float32)
    ty.backward(torch.from_numpy(g).to(ty.dtype))
    ey.backward(ember.tensor(g, device=autodiff_device).to(ey.dtype))
    assert_close(ex.grad, tx.grad, what=f"{name} grad")


def test_prelu_single_weight_keeps_input_shape(rng):
    # one weight of shape (1,) scales a 0-d input into a 0-d result, as torch
    for shape, wshape in (((), (1,)), ((), ()), ((5,), ()), ((2, 3), (1,))):
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(wshape).astype(np.float32)
        got, want = F.prelu(ember.tensor(x), ember.tensor(w)), TF.prelu(torch.tensor(x), torch.tensor(w))
        assert tuple(got.shape) == tuple(want.shape)
        assert_close(got, want)
    with pytest.raises(RuntimeError, match="scalar or 1D"):
        F.prelu(ember.ones(2, 3), ember.ones(1, 1))


def test_one_hot(rng):
    t = rng.integers(0, 5, (3, 4))
    got = F.one_hot(ember.tensor(t))
    want = TF.one_hot(torch.from_numpy(t))
    assert got.dtype is ember.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(F.one_hot(ember.tensor(t), 7).numpy(), TF.one_hot(torch.from_numpy(t), 7).numpy())
    with pytest.raises(RuntimeError):
        F.one_hot(ember.tensor([1, 5]), 3)


def test_softmax_implicit_dim_warns():
    x = ember.randn(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmax(x)
    np.testing.assert_allclose(y.numpy().sum(1), 1.0, rtol=1e-6)


def test_activation_reprs_equal_torch():
    ctors = [c[1] for c in LAYERS if c[0] not in ("sequential",)]
    ctors += [lambda nn: nn.ReLU(inplace=True), lambda nn: nn.LeakyReLU(0.1, inplace=True),
              lambda nn: nn.Dropout(0.2), lambda nn: nn.Dropout2d(), lambda nn: nn.AlphaDropout(0.1),
              lambda nn: nn.Embedding(5, 2, padding_idx=1), lambda nn: nn.Embedding(5, 2, max_norm=1.0),
              lambda nn: nn.EmbeddingBag(5, 2, mode="sum"), lambda nn: nn.InstanceNorm1d(3)]
    for ctor in ctors:
        e, t = ctor(enn), ctor(tnn)
        assert same_repr(e, t), (repr(e), repr(t))


# --------------------------------------------------------------------------- dropout
@pytest.mark.parametrize("p", [0.25, 0.7])
def test_dropout_statistics(p):
    ember.manual_seed(1234)
    x = ember.ones(200, 100, requires_grad=True)
    y = F.dropout(x, p)
    a = y.numpy()
    frac = float(np.mean(a == 0))
    assert abs(frac - p) < 0.02
    np.testing.assert_allclose(a[a != 0], 1.0 / (1.0 - p), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (a != 0) / (1.0 - p), rtol=1e-6)


def test_dropout_modes_and_edges():
    x = ember.randn(5, 6)
    d = enn.Dropout(0.5)
    d.eval()
    assert d(x) is x
    assert np.all(F.dropout(x, 1.0).numpy() == 0)
    assert F.dropout(x, 0.0) is x
    with pytest.raises(ValueError):
        enn.Dropout(1.5)
    c = F.dropout2d(ember.ones(4, 8, 3, 3), 0.5).numpy()
    per_channel = c.reshape(4, 8, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    ember.manual_seed(0)
    a = F.alpha_dropout(ember.randn(20000), 0.2, training=True).numpy()
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1.0) < 0.05


def test_dropout_mask_same_on_every_device(device):
    ember.manual_seed(77)
    ref = F.dropout(ember.ones(6, 50, device=Device.flex()), 0.3).numpy()
    ember.manual_seed(77)
    got = F.dropout(ember.ones(6, 50, device=device), 0.3).numpy()
    np.testing.assert_array_equal(got, ref)
