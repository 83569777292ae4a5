"""Regression tests for what the user-trial scripts found missing or different from torch:
``ember.device``/``cuda``/``Generator``/``backends`` flags, ``Tensor.data`` write-back, the
in-place variants, ``CyclicLR``, Adadelta/NAdam/RAdam, packed sequences in the recurrent layers,
checkpoints through file objects and ``map_location``, and the small top-level utilities.
Each compares with torch on fresh random inputs where torch has the behaviour."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import ember
from ember import Device, nn, optim
from ember.nn.utils import rnn as ernn
from ember.optim import lr_scheduler as ES

TS = torch.optim.lr_scheduler


def _np(t: object) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.numpy())  # type: ignore[attr-defined]


# ------------------------------------------------------------------ devices
def test_device_cpu_is_the_host_default_and_cuda_records_gradients() -> None:
    assert ember.device("cpu") == ember.get_default_device()
    assert ember.device("cpu:0") == ember.get_default_device()
    assert ember.device("cuda:1") == Device.cuda(1).autodiff()
    assert ember.device("cuda", 2) == Device.cuda(2).autodiff()
    assert ember.device(0) == Device.cuda(0).autodiff()
    d = Device.flex()
    assert ember.device(d) is d
    assert isinstance(ember.device("cpu"), ember.device) and not isinstance("cpu", ember.device)
    assert ember.device.Device is Device and ember.device.WgpuOptions is not None  # still the module
    with pytest.raises(RuntimeError):
        ember.device("cuda:0", 1)


def test_device_cpu_under_a_gpu_default_is_flex() -> None:
    before = ember.get_default_device()
    try:
        ember.set_default_device(Device.cuda(0).autodiff())  # not built: only named
        assert ember.device("cpu") == Device.flex().autodiff()
    finally:
        ember.set_default_device(before)


def test_creation_device_cpu_meets_default_tensors() -> None:
    x = ember.randn(3)
    y = ember.zeros(3, device="cpu")
    assert y.device == x.device
    t = ember.tensor([1.0, 2.0], device="cpu", requires_grad=True)
    (t * x[:2]).sum().backward()
    np.testing.assert_allclose(_np(t.grad), _np(x[:2]))
    assert Device.parse("cpu") == Device.cpu()  # the explicit spelling keeps its meaning


def test_cuda_namespace_without_a_gpu() -> None:
    if ember.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    assert ember.cuda.device_count() == 0
    ember.manual_seed(5)
    a = ember.rand(3)
    ember.manual_seed(5)
    ember.cuda.manual_seed_all(9)  # ignored without CUDA, as torch: the stream is not reseeded
    np.testing.assert_array_equal(_np(a), _np(ember.rand(3)))
    with pytest.raises(RuntimeError):
        ember.cuda.get_device_name()


def test_backends_flags() -> None:
    ember.backends.cudnn.benchmark = True
    ember.backends.cudnn.deterministic = True
    assert ember.backends.cudnn.benchmark and not ember.backends.cudnn.is_available()
    assert not ember.backends.mps.is_available()
    before = ember.get_float32_matmul_precision()
    try:
        ember.backends.cuda.matmul.allow_tf32 = True
        assert ember.get_float32_matmul_precision() == "high" and ember.backends.cuda.matmul.allow_tf32
        ember.backends.cuda.matmul.allow_tf32 = False
        assert ember.get_float32_matmul_precision() == "highest"
    finally:
        ember.set_float32_matmul_precision(before)


def test_autocast_takes_flex_as_cpu() -> None:
    x = ember.randn(4, 3)
    w = nn.Linear(3, 2)
    with ember.autocast(device_type=ember.device("cpu").type):
        assert w(x).dtype == ember.bfloat16
    assert ember.amp.is_autocast_available("flex")


# ------------------------------------------------------------------ random
def test_generator_takes_torch_arguments() -> None:
    g = ember.Generator(device="cpu")
    assert isinstance(g, ember.random.Generator) and g.device == ember.device("cpu")
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    a = ember.randn(4, generator=g)
    g.manual_seed(3)
    np.testing.assert_array_equal(_np(a), _np(ember.randn(4, generator=g)))
    assert ember.manual_seed(11) is ember.random.default_generator
    assert ember.initial_seed() == 11
    state = ember.get_rng_state()
    b = ember.rand(2)
    ember.set_rng_state(state)
    np.testing.assert_array_equal(_np(b), _np(ember.rand(2)))


# ------------------------------------------------------------------ Tensor.data
def test_data_in_place_updates_write_back_like_torch(rng: np.random.Generator) -> None:
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    em = nn.Linear(4, 3)
    tm = torch.nn.Linear(4, 3)
    em.load_state_dict({"weight": w0, "bias": np.zeros(3, np.float32)})
    tm.load_state_dict({"weight": torch.from_numpy(w0), "bias": torch.zeros(3)})
    for m, lib in ((em, ember), (tm, torch)):
        m(lib.ones(2, 4)).sum().backward()
        m.weight.data.mul_(0.5).add_(1.0)
        m.weight.data.clamp_(max=1.2)
        m.weight.data[0, 0] = 7.0
        m.bias.data.fill_(0.25)
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-6)
    np.testing.assert_allclose(_np(em.bias), _np(tm.bias))
    assert em.weight.is_leaf and em.weight.requires_grad and em.weight.grad is not None
    assert not em.weight.data.requires_grad and not isinstance(em.weight.data, nn.Parameter)
    # another op on .data is a new tensor, and nothing is recorded
    y = em.weight.data * 2
    assert not y.requires_grad
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-6)


def test_data_setter_and_plain_tensors(rng: np.random.Generator) -> None:
    x = ember.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    new = ember.ones(3)
    x.data = new
    assert x.requires_grad and x.is_leaf
    np.testing.assert_array_equal(_np(x), np.ones(3))
    (x * 3).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), np.full(3, 3.0))
    p = nn.Parameter(ember.zeros(2))
    p.data = ember.ones(5)
    assert p.shape == (5,) and p.requires_grad
    z = ember.zeros(2)
    z.data.add_(2)
    np.testing.assert_array_equal(_np(z), [2.0, 2.0])


def test_init_through_data_like_dcgan() -> None:
    ember.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3)
    conv.weight.data.normal_(0.0, 0.02)
    conv.bias.data.zero_()
    assert 0.01 < conv.weight.std().item() < 0.03 and conv.bias.abs().sum().item() == 0


def test_is_floating_point_is_callable_and_a_bool() -> None:
    f, i = ember.zeros(1), ember.zeros(1, dtype=ember.int64)
    assert f.is_floating_point() is True and i.is_floating_point() is False
    assert f.is_floating_point and not i.is_floating_point
    assert repr(f.is_floating_point) == "True"
    assert ember.is_floating_point(f) is True and ember.is_floating_point(i) is False


# ------------------------------------------------------------------ in-place variants
@pytest.mark.parametrize("name,args", [
    ("sigmoid_", ()), ("sqrt_", ()), ("floor_", ()), ("tanh_", ()), ("reciprocal_", ()), ("square_", ()),
    ("clamp_min_", (0.1,)), ("lerp_", ("other", 0.3)), ("addcmul_", ("other", "other")), ("eq_", ("other",)),
    ("gt_", (0.5,)), ("log1p_", ()), ("round_", ()),
])
def test_inplace_variants_match_torch(name: str, args: tuple, rng: np.random.Generator) -> None:
    a = rng.random((3, 4)).astype(np.float32) + 0.05
    o = rng.random((3, 4)).astype(np.float32)
    e, t = ember.from_numpy(a), torch.from_numpy(a.copy())
    ea = [ember.from_numpy(o) if v == "other" else v for v in args]
    ta = [torch.from_numpy(o.copy()) if v == "other" else v for v in args]
    r = getattr(e, name)(*ea)
    getattr(t, name)(*ta)
    assert r is e and e.dtype == ember.float32
    np.testing.assert_allclose(_np(e), _np(t), rtol=1e-6, atol=1e-7)


def test_layout_inplace_variants(rng: np.random.Generator) -> None:
    a = rng.random((2, 3)).astype(np.float32)
    e, t = ember.from_numpy(a), torch.from_numpy(a.copy())
    for name, args in (("unsqueeze_", (0,)), ("squeeze_", ()), ("t_", ()), ("transpose_", (0, 1))):
        getattr(e, name)(*args)
        getattr(t, name)(*args)
        np.testing.assert_array_equal(_np(e), _np(t))
    leaf = ember.zeros(2, 2, requires_grad=True)
    with pytest.raises(ember.errors.AutodiffError):
        leaf.t_()
    with pytest.raises(ember.errors.AutodiffError):
        leaf.sigmoid_()


def test_tensor_attributes() -> None:
    x = ember.zeros(2, 3, dtype=ember.float16)
    assert not x.is_cuda and x.is_cpu and x.get_device() == -1
    assert x.element_size() == 2 and x.itemsize == 2 and x.nbytes == 12 and x.nelement() == 6
    assert x.ndimension() == 2 and x.is_contiguous() and not x.is_complex() and x.is_signed()
    assert x.type_as(ember.zeros(1, dtype=ember.int64)).dtype == ember.int64
    assert not ember.zeros(1, dtype=ember.uint8).is_signed()


# ------------------------------------------------------------------ optim
def _run_pair(eo, to, ep, tp, rng: np.random.Generator, steps: int = 15) -> None:
    for _ in range(steps):
        x = rng.standard_normal((5, 3)).astype(np.float32)
        for P, O, M in ((tp, to, torch), (ep, eo, ember)):
            O.zero_grad()
            ((M.from_numpy(x) @ P[0] + P[1]).tanh() ** 2).sum().backward()
            O.step()


def _params(rng: np.random.Generator) -> tuple[list, list]:
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    b0 = rng.standard_normal(4).astype(np.float32)
    return ([ember.nn.Parameter(ember.from_numpy(w0)), ember.nn.Parameter(ember.from_numpy(b0))],
            [torch.nn.Parameter(torch.from_numpy(w0.copy())), torch.nn.Parameter(torch.from_numpy(b0.copy()))])


@pytest.mark.parametrize("name,kw", [
    ("Adadelta", {}), ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}), ("NAdam", {"lr": 0.01, "weight_decay": 0.05, "momentum_decay": 0.01}),
    ("NAdam", {"weight_decay": 0.01, "decoupled_weight_decay": True}),
    ("RAdam", {}), ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "betas": (0.8, 0.9)}),
])
def test_new_optimizers_match_torch(name: str, kw: dict, rng: np.random.Generator) -> None:
    ep, tp = _params(rng)
    eo, to = getattr(optim, name)(ep, **kw), getattr(torch.optim, name)(tp, **kw)
    _run_pair(eo, to, ep, tp, rng)
    for a, b in zip(ep, tp):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    keys = {k for k in to.state_dict()["state"][0] if k != "mu_product"}
    assert set(eo.state_dict()["state"][0]) == keys


def test_nadam_resumes_from_a_state_dict(rng: np.random.Generator) -> None:
    ep, tp = _params(rng)
    eo, to = optim.NAdam(ep, lr=0.01), torch.optim.NAdam(tp, lr=0.01)
    _run_pair(eo, to, ep, tp, rng, steps=5)
    eo2 = optim.NAdam(ep, lr=0.01)
    eo2.load_state_dict(eo.state_dict())
    _run_pair(eo2, to, ep, tp, rng, steps=5)
    for a, b in zip(ep, tp):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw,kind", [
    ({"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}, "sgd"),
    ({"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2, "step_size_down": 5, "mode": "triangular2"}, "sgd"),
    ({"base_lr": [0.01, 0.02], "max_lr": 0.1, "step_size_up": 4, "mode": "exp_range", "gamma": 0.9}, "sgd"),
    ({"base_lr": 0.001, "max_lr": 0.01, "step_size_up": 3, "scale_fn": lambda x: 0.5 ** x,
      "scale_mode": "iterations"}, "adam"),
    ({"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, "cycle_momentum": False}, "adam"),
])
def test_cyclic_lr_matches_torch(kw: dict, kind: str) -> None:
    def opt(lib: object, params: list) -> object:
        groups = [{"params": [p]} for p in params]
        if kind == "adam":
            return lib.optim.Adam(groups, lr=0.1)  # type: ignore[attr-defined]
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)  # type: ignore[attr-defined]

    eo = opt(ember, [ember.tensor([1.0], requires_grad=True) for _ in range(2)])
    to = opt(torch, [torch.tensor([1.0], requires_grad=True) for _ in range(2)])
    es, ts = ES.CyclicLR(eo, **kw), TS.CyclicLR(to, **kw)
    key = "betas" if kind == "adam" else "momentum"
    for step in range(20):
        for o in (eo, to):
            o.step()
        es.step()
        ts.step()
        for ge, gt in zip(eo.param_groups, to.param_groups):
            assert ge["lr"] == pytest.approx(gt["lr"], rel=1e-12), step
            assert ge[key] == pytest.approx(gt[key], rel=1e-12), step
        if step == 9 and "scale_fn" not in kw:  # resume from the state dict half way
            sd = es.state_dict()
            es = ES.CyclicLR(eo, **kw)
            es.load_state_dict(sd)
    assert es.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    assert "_scale_fn_custom" not in es.state_dict()


# ------------------------------------------------------------------ packed sequences
def _lengths(rng: np.random.Generator, n: int, t: int) -> list[int]:
    lens = rng.integers(1, t + 1, size=n).tolist()
    lens[0] = t
    return lens


def test_pack_and_pad_match_torch(rng: np.random.Generator) -> None:
    n, t = 5, 6
    x = rng.standard_normal((t, n, 3)).astype(np.float32)
    lens = _lengths(rng, n, t)
    ep = ernn.pack_padded_sequence(ember.from_numpy(x), lens, enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x), torch.tensor(lens), enforce_sorted=False)
    np.testing.assert_array_equal(_np(ep.data), _np(tp.data))
    np.testing.assert_array_equal(_np(ep.batch_sizes), _np(tp.batch_sizes))
    np.testing.assert_array_equal(_np(ep.sorted_indices), _np(tp.sorted_indices))
    np.testing.assert_array_equal(_np(ep.unsorted_indices), _np(tp.unsorted_indices))
    for bf in (False, True):
        eo, el = ernn.pad_packed_sequence(ep, batch_first=bf, padding_value=-1.0, total_length=t + 1)
        to, tl = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=bf, padding_value=-1.0, total_length=t + 1)
        np.testing.assert_array_equal(_np(eo), _np(to))
        np.testing.assert_array_equal(_np(el), _np(tl))
    seqs = [rng.standard_normal((k, 2)).astype(np.float32) for k in (3, 1, 4)]
    for side in ("right", "left"):
        e = ernn.pad_sequence([ember.from_numpy(s) for s in seqs], batch_first=True, padding_value=9.0,
                              padding_side=side)
        tt = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(s) for s in seqs], batch_first=True,
                                             padding_value=9.0, padding_side=side)
        np.testing.assert_array_equal(_np(e), _np(tt))
    back = ernn.unpack_sequence(ernn.pack_sequence([ember.from_numpy(s) for s in seqs], enforce_sorted=False))
    for a, s in zip(back, seqs):
        np.testing.assert_array_equal(_np(a), s)
    with pytest.raises(RuntimeError):
        ernn.pack_padded_sequence(ember.from_numpy(x), sorted(lens), enforce_sorted=True)


@pytest.mark.parametrize("cls,kw", [
    ("LSTM", {"num_layers": 2, "bidirectional": True}), ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("RNN", {"batch_first": True}), ("LSTM", {"batch_first": True, "proj_size": 2}),
])
def test_recurrent_layers_take_packed_sequences(cls: str, kw: dict, rng: np.random.Generator) -> None:
    n, t, hin, h = 4, 5, 3, 4
    tm = getattr(torch.nn, cls)(hin, h, **kw)
    em = getattr(nn, cls)(hin, h, **kw)
    em.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    bf = kw.get("batch_first", False)
    shape = (n, t, hin) if bf else (t, n, hin)
    x = rng.standard_normal(shape).astype(np.float32)
    lens = _lengths(rng, n, t)
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    eout, ehid = em(ernn.pack_padded_sequence(ex, lens, batch_first=bf, enforce_sorted=False))
    tout, thid = tm(torch.nn.utils.rnn.pack_padded_sequence(tx, torch.tensor(lens), batch_first=bf,
                                                           enforce_sorted=False))
    assert isinstance(eout, ernn.PackedSequence)
    np.testing.assert_allclose(_np(eout.data), _np(tout.data), rtol=1e-5, atol=1e-6)
    ehs = ehid if isinstance(ehid, tuple) else (ehid,)
    ths = thid if isinstance(thid, tuple) else (thid,)
    for a, b in zip(ehs, ths):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    (eout.data.sum() + sum(a.sum() for a in ehs)).backward()
    (tout.data.sum() + sum(b.sum() for b in ths)).backward()
    np.testing.assert_allclose(_np(ex.grad), _np(tx.grad), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(em.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=1e-4, atol=1e-5, err_msg=name)


# ------------------------------------------------------------------ checkpoints
def test_save_load_file_objects_and_map_location(tmp_path: object) -> None:
    buf = io.BytesIO()
    ember.save({"w": ember.arange(4.0), "step": 3}, buf)
    buf.seek(0)
    got = ember.load(buf, map_location="cpu", weights_only=True)
    assert got["step"] == 3 and got["w"].device == ember.device("cpu")
    np.testing.assert_array_equal(_np(got["w"]), np.arange(4.0))
    buf.seek(0)
    assert ember.load(buf, map_location=Device.flex())["w"].device == Device.flex()
    buf.seek(0)
    assert ember.load(buf, map_location={"cuda:0": "cpu"})["w"].device == ember.device("cpu")
    buf.seek(0)
    assert ember.load(buf, map_location=lambda storage, loc: storage)["w"].device == ember.get_default_device()
    buf.seek(0)
    with pytest.raises(ValueError):
        ember.load(buf, map_location={"cuda:0": "cpu", "cuda:1": "flex"})


# ------------------------------------------------------------------ top-level utilities
def test_finfo_iinfo_match_torch() -> None:
    for d, td in ((ember.float32, torch.float32), (ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16),
                  (ember.float64, torch.float64)):
        e, t = ember.finfo(d), torch.finfo(td)
        assert (e.eps, e.max, e.min, e.tiny, e.bits, e.resolution) == (t.eps, t.max, t.min, t.tiny, t.bits,
                                                                       t.resolution)
    for d, td in ((ember.int32, torch.int32), (ember.int64, torch.int64), (ember.uint8, torch.uint8),
                  (ember.int8, torch.int8)):
        e, t = ember.iinfo(d), torch.iinfo(td)
        assert (e.max, e.min, e.bits) == (t.max, t.min, t.bits)
    assert ember.finfo().eps == torch.finfo().eps
    with pytest.raises(TypeError):
        ember.finfo(ember.int32)


def test_printoptions_threads_legacy_constructors() -> None:
    x = ember.tensor([1.123456, 2.0])
    try:
        ember.set_printoptions(precision=2)
        assert "1.12" in repr(x) and "1.1235" not in repr(x)
    finally:
        ember.set_printoptions(profile="default")
    assert "1.1235" in repr(x)
    before = ember.get_num_threads()
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1
    ember.set_num_threads(before)
    assert ember.FloatTensor([1, 2]).dtype == ember.float32 and ember.LongTensor([1.0]).dtype == ember.int64
    assert ember.FloatTensor(2, 3).shape == (2, 3) and ember.is_tensor(x) and not ember.is_tensor([1])
    assert ember.Size([2, 3]) == (2, 3) and ember.Size([2, 3]).numel() == 6


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_matches_torch(p: float, rng: np.random.Generator) -> None:
    a = rng.standard_normal((2, 4, 3)).astype(np.float32)
    b = rng.standard_normal((1, 5, 3)).astype(np.float32)
    b[0, 0] = a[0, 0]  # one zero distance: its gradient is 0, not NaN
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    e, t = ember.cdist(ea, eb, p=p), torch.cdist(ta, tb, p=p)
    np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=1e-5)
    if p != 0.0:
        w = rng.standard_normal(t.shape).astype(np.float32)
        (e * ember.from_numpy(w)).sum().backward()
        (t * torch.from_numpy(w)).sum().backward()
        np.testing.assert_allclose(_np(ea.grad), _np(ta.grad), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(_np(eb.grad), _np(tb.grad), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError):
        ember.cdist(ember.zeros(3), ember.zeros(2, 3))


def test_distance_modules_and_type_names(rng: np.random.Generator) -> None:
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    for em, tm in ((nn.PairwiseDistance(p=1.5, keepdim=True), torch.nn.PairwiseDistance(p=1.5, keepdim=True)),
                   (nn.CosineSimilarity(dim=0), torch.nn.CosineSimilarity(dim=0))):
        assert repr(em) == repr(tm)
        np.testing.assert_allclose(_np(em(ember.from_numpy(a), ember.from_numpy(b))),
                                   _np(tm(torch.from_numpy(a), torch.from_numpy(b))), rtol=1e-5, atol=1e-6)
    for d, td in ((ember.float32, torch.float32), (ember.int64, torch.int64), (ember.bool, torch.bool)):
        assert ember.zeros(1, dtype=d).type() == torch.zeros(1, dtype=td).type()
    assert ember.zeros(1).type(ember.float64).dtype == ember.float64


def test_gumbel_softmax_samples_the_softmax_and_passes_gradients_straight_through() -> None:
    logits = ember.tensor([[0.0, 1.0, 2.0]])
    ember.manual_seed(0)
    hard = nn.functional.gumbel_softmax(logits.expand(20000, 3), hard=True)
    assert set(np.unique(_np(hard)).tolist()) == {0.0, 1.0} and (_np(hard).sum(1) == 1).all()
    np.testing.assert_allclose(_np(hard.mean(0)), _np(logits.softmax(-1))[0], atol=0.02)
    w = ember.tensor([[1.0, -2.0, 0.5]])
    grads = []
    for h in (True, False):
        x = ember.tensor([[0.3, -0.1, 0.8]], requires_grad=True)
        ember.manual_seed(3)
        soft_or_hard = nn.functional.gumbel_softmax(x, tau=0.7, hard=h)
        (soft_or_hard * w).sum().backward()
        grads.append(_np(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)  # the hard sample's gradient is the soft one's


def test_legacy_import_paths() -> None:
    from ember.cuda.amp import GradScaler, autocast

    from ember.optim.lr_scheduler import _LRScheduler

    assert _LRScheduler is ES.LRScheduler
    with autocast():  # CUDA autocast: host tensors keep float32, as torch on the CPU
        assert nn.Linear(2, 2)(ember.ones(1, 2)).dtype == ember.float32
    scaler = GradScaler(init_scale=8.0)
    p = nn.Parameter(ember.ones(2))
    opt = optim.SGD([p], lr=0.1)
    scaler.scale((p * 2).sum()).backward()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(_np(p), [0.8, 0.8], rtol=1e-6)  # unscaled before the step
