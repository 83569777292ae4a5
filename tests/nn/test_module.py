"""nn.Module, Parameter, Buffer and the containers: registration, traversal, state dicts
(torch's key names, strict loading errors), device/dtype moves keeping parameter identity,
hooks, modes, repr equal to torch's."""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn as tnn
from nn_reference import assert_close, copy_weights, same_repr, torch_state_to_numpy

import ember
import ember.nn as enn
from ember import Device


class Net:
    """The same architecture written against either namespace."""

    @staticmethod
    def build(nn):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.norm = nn.BatchNorm1d(4)
                self.register_buffer("scale", torch.ones(1) if nn is tnn else ember.ones(1))
                self.register_buffer("cache", torch.zeros(2) if nn is tnn else ember.zeros(2), persistent=False)

            def forward(self, x):
                return self.norm(self.fc(x)) * self.scale

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(6, 4)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Sequential(nn.ReLU(), nn.Linear(4, 3))})
                self.seq = nn.Sequential(OrderedDict([("l1", nn.Linear(4, 4)), ("act", nn.GELU()),
                                                      ("ln", nn.LayerNorm(4))]))
                self.extra = nn.Parameter(torch.zeros(3) if nn is tnn else ember.zeros(3))
                self.plist = nn.ParameterList([nn.Parameter(torch.ones(2) if nn is tnn else ember.ones(2))])
                self.pdict = nn.ParameterDict({"w": nn.Parameter(torch.ones(1) if nn is tnn else ember.ones(1))})

            def forward(self, idx):
                h = self.embed(idx)
                for b in self.blocks:
                    h = b(h)
                h = self.seq(h)
                return self.heads["a"](h).sum() + self.heads["b"](h).sum() + self.extra.sum()

        return Model()


def test_state_dict_names_and_order_equal_torch():
    tm, em = Net.build(tnn), Net.build(enn)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in em.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in em.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in em.named_children()] == [n for n, _ in tm.named_children()]
    assert "blocks.0.cache" not in em.state_dict()
    for k, v in em.state_dict().items():
        assert not v.requires_grad, k
        assert type(v) is ember.Tensor
    assert isinstance(em.state_dict(keep_vars=True)["extra"], enn.Parameter)
    assert list(em.state_dict(prefix="m.")) == ["m." + k for k in tm.state_dict()]


def test_weights_roundtrip_and_forward_equal_torch(rng):
    tm, em = Net.build(tnn), Net.build(enn)
    copy_weights(tm, em)
    idx = rng.integers(0, 6, (5,))
    ty = tm(torch.from_numpy(idx))
    ey = em(ember.tensor(idx))
    assert_close(ey, ty)
    ty.backward()
    ey.backward()
    tgrads = {n: p.grad for n, p in tm.named_parameters()}
    for n, p in em.named_parameters():
        if tgrads[n] is None:  # plist / pdict take no part in forward
            assert p.grad is None, n
        else:
            assert_close(p.grad, tgrads[n], what=n)
    # ember -> torch direction
    tm2 = Net.build(tnn)
    tm2.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in em.state_dict().items()})
    for k, v in tm2.state_dict().items():
        assert_close(em.state_dict()[k], v, what=k)


def test_load_state_dict_keeps_parameter_objects_and_grads():
    m = enn.Linear(3, 2)
    w = m.weight
    m(ember.randn(4, 3)).sum().backward()
    g = w.grad.numpy().copy()
    new = {"weight": np.full((2, 3), 0.5, np.float32), "bias": ember.tensor([1.0, 2.0])}
    res = m.load_state_dict(new)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert m.weight is w and w.is_leaf and w.requires_grad
    np.testing.assert_array_equal(w.numpy(), 0.5)
    np.testing.assert_array_equal(w.grad.numpy(), g)
    np.testing.assert_array_equal(m.bias.numpy(), [1.0, 2.0])
    bn = enn.BatchNorm1d(2)
    rm = bn.running_mean
    bn.load_state_dict({**{k: v.numpy() for k, v in bn.state_dict().items()}, "running_mean": np.ones(2)})
    assert bn.running_mean is rm and rm.numpy().tolist() == [1.0, 1.0] and rm.dtype is ember.float32
    # float64 sources are cast to the parameter's dtype
    m.load_state_dict({"weight": np.ones((2, 3)), "bias": np.zeros(2)})
    assert m.weight.dtype is ember.float32


def test_load_state_dict_strict_errors_match_torch():
    tm, em = tnn.Linear(2, 3), enn.Linear(2, 3)
    bad = {"weight": np.zeros((3, 3), np.float32), "foo": np.zeros(1, np.float32)}
    with pytest.raises(RuntimeError) as te:
        tm.load_state_dict({k: torch.from_numpy(v) for k, v in bad.items()})
    with pytest.raises(RuntimeError) as ee:
        em.load_state_dict(bad)
    want = str(te.value).replace("torch.Size([3, 3])", "(3, 3)").replace("torch.Size([3, 2])", "(3, 2)")
    assert str(ee.value) == want
    res = em.load_state_dict({"weight": np.zeros((3, 2), np.float32), "foo": np.zeros(1)}, strict=False)
    tres = tm.load_state_dict({"weight": torch.zeros(3, 2), "foo": torch.zeros(1)}, strict=False)
    assert (res.missing_keys, res.unexpected_keys) == (tres.missing_keys, tres.unexpected_keys)
    # a size mismatch raises even when not strict
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        em.load_state_dict({"weight": np.zeros((1, 1), np.float32)}, strict=False)
    with pytest.raises(RuntimeError, match="expected ember.Tensor"):
        em.load_state_dict({"weight": [[1.0]], "bias": np.zeros(3, np.float32)})


def test_load_state_dict_nested_unexpected_and_assign():
    em = enn.Sequential(enn.Linear(2, 2), enn.Sequential(enn.Linear(2, 1)))
    sd = {k: v.numpy() for k, v in em.state_dict().items()}
    sd["1.0.extra"] = np.zeros(1, np.float32)
    sd["2.weight"] = np.zeros(1, np.float32)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "2.weight", "1.0.extra"'):
        em.load_state_dict(sd)
    w = ember.ones(1, 2)
    old = em[1][0].weight
    em.load_state_dict({"1.0.weight": w, "1.0.bias": ember.zeros(1)}, strict=False, assign=True)
    assert em[1][0].weight is not old and isinstance(em[1][0].weight, enn.Parameter)
    assert em[1][0].weight.requires_grad


def test_to_keeps_parameter_identity(autodiff_device):
    m = enn.Sequential(enn.Linear(3, 4), enn.BatchNorm1d(4))
    params = list(m.parameters())
    m(ember.randn(5, 3)).sum().backward()
    grads = [p.grad.numpy().copy() for p in params]
    vals = [p.numpy().copy() for p in params]
    out = m.to(autodiff_device)
    assert out is m
    for p, g, v in zip(m.parameters(), grads, vals):
        assert p.device == autodiff_device and p.requires_grad and p.is_leaf
        np.testing.assert_array_equal(p.numpy(), v)
        np.testing.assert_array_equal(p.grad.numpy(), g)
        assert p.grad.device == autodiff_device
    assert all(a is b for a, b in zip(m.parameters(), params))
    assert m[1].running_mean.device == autodiff_device
    assert m[1].num_batches_tracked.dtype is ember.int64
    m(ember.randn(5, 3, device=autodiff_device)).sum().backward()
    assert params[0].grad is not None


def test_dtype_casts_keep_identity_and_skip_integer_buffers():
    m = enn.Sequential(enn.Linear(3, 4), enn.BatchNorm1d(4))
    w = m[0].weight
    m.double()
    assert m[0].weight is w and w.dtype is ember.float64 and w.requires_grad
    assert m[1].running_var.dtype is ember.float64
    assert m[1].num_batches_tracked.dtype is ember.int64
    m.half()
    assert w.dtype is ember.float16
    m.bfloat16()
    assert w.dtype is ember.bfloat16
    m.to(torch_dtype_free := ember.float32)
    assert w.dtype is torch_dtype_free
    m.to(Device.flex().autodiff(), ember.float64)
    assert w.dtype is ember.float64
    m.type(ember.float32)
    assert w.dtype is ember.float32 and m[1].num_batches_tracked.dtype is ember.float32
    with pytest.raises(TypeError, match="floating point"):
        m.to(ember.int32)


def test_to_plain_device_and_back_and_strings():
    m = enn.Linear(2, 2)
    w = m.weight
    m.to(Device.cpu())  # the fused Cube CPU device without autodiff: values only
    assert m.weight is w and w.device == Device.cpu() and not w.requires_grad
    y = m(ember.randn(3, 2, device=Device.cpu()))
    assert y.shape == (3, 2)
    m.to("flex+autodiff")  # tracked again on an autodiff device
    assert w.requires_grad and w.device == Device.flex().autodiff()
    m.to("cpu")  # the host: a host tensor stays where it is, autodiff kept
    assert w.requires_grad and w.device == Device.flex().autodiff()
    m.to(Device.flex())
    m.cpu()
    assert w.device == Device.flex() and not w.requires_grad
    t = ember.zeros(1, device=Device.cpu().autodiff(), dtype=ember.float64)
    m.to(t)
    assert w.device == Device.cpu().autodiff() and w.dtype is ember.float64 and w.requires_grad


def test_layer_factory_kwargs():
    dev = Device.cpu().autodiff()
    m = enn.Linear(3, 2, device=dev, dtype=ember.float64)
    assert m.weight.device == dev and m.weight.dtype is ember.float64 and m.weight.requires_grad
    ln = enn.LayerNorm(3, device="flex", dtype="float16")
    assert ln.weight.device == Device.flex() and ln.weight.dtype is ember.float16 and not ln.weight.requires_grad
    assert enn.Linear(2, 2).weight.device == ember.get_default_device()


def test_parameter_semantics():
    p = enn.Parameter(ember.ones(2, 3))
    assert isinstance(p, ember.Tensor) and p.is_leaf and p.requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    tp = tnn.Parameter(torch.ones(2, 3))
    assert repr(p).replace(", device=Device<Autodiff { device: Flex(Cpu), checkpointing: None }>", "") == repr(tp)
    q = p * 2
    assert type(q) is ember.Tensor and not q.is_leaf
    assert type(p.detach()) is ember.Tensor and not p.detach().requires_grad
    assert not enn.Parameter(ember.ones(2), requires_grad=False).requires_grad
    assert enn.Parameter().shape == (0,)
    with pytest.raises(TypeError):
        enn.Parameter([1.0, 2.0])
    with pytest.raises(ember.errors.AutodiffError):
        enn.Parameter(ember.tensor([1, 2]))
    # a plain tensor (not a Parameter) that writes its in-place updates back into p, as torch's .data
    assert isinstance(p.data, ember.Tensor) and not isinstance(p.data, enn.Parameter) and not p.data.requires_grad
    c = copy.deepcopy(p)
    assert isinstance(c, enn.Parameter) and c is not p and c.requires_grad
    np.testing.assert_array_equal(c.numpy(), p.numpy())
    with ember.no_grad():
        p.mul_(3.0)
    assert p.is_leaf and p.requires_grad


def test_buffer_marker_and_buffers():
    m = enn.Module()
    m.a = enn.Buffer(ember.ones(2))
    m.b = enn.Buffer(ember.zeros(1), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["a", "b"]
    assert list(m.state_dict()) == ["a"]
    m.a = ember.full((2,), 3.0)  # plain tensors replace a registered buffer
    np.testing.assert_array_equal(m.a.numpy(), 3.0)
    with pytest.raises(TypeError):
        m.a = 5
    m.a = None
    assert list(m.state_dict()) == []
    with pytest.raises(KeyError):
        m.register_buffer("x.y", ember.ones(1))
    with pytest.raises(TypeError):
        m.register_buffer("z", np.ones(1))


def test_setattr_routing_and_errors():
    m = enn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight'"):
        m.weight = ember.ones(2, 2)
    m.bias = None
    assert m.bias is None and "bias" not in m.state_dict()
    m.bias = enn.Parameter(ember.zeros(2))
    assert list(m.state_dict()) == ["weight", "bias"]
    s = enn.Sequential(enn.ReLU())
    with pytest.raises(TypeError, match="child module"):
        s[0] = 3  # setattr on a module name
    m.sub = enn.ReLU()
    assert "sub" in dict(m.named_children())
    m.sub = enn.Parameter(ember.ones(1))  # a Parameter replaces the module of the same name
    assert "sub" not in m._modules and "sub" in m._parameters
    del m.sub
    assert "sub" not in m._parameters
    m.plain = 3
    del m.plain
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope  # noqa: B018
    assert {"weight", "bias", "forward", "in_features"} <= set(dir(m))

    class Bad(enn.Module):
        def __init__(self):
            self.w = enn.Parameter(ember.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        enn.Module()(1)


def test_shared_parameters_deduplicated():
    lin = enn.Linear(2, 2)
    m = enn.Sequential(lin, enn.ReLU(), lin)
    tl = tnn.Linear(2, 2)
    tm = tnn.Sequential(tl, tnn.ReLU(), tl)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert len(list(m.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in m.named_modules()] == [n for n, _ in tm.named_modules()]
    assert list(m.state_dict()) == list(tm.state_dict())
    assert len(list(m.parameters(recurse=False))) == 0


def test_modes_grads_apply_and_lookup():
    m = enn.Sequential(enn.Linear(2, 3), enn.Dropout(0.5), enn.Sequential(enn.BatchNorm1d(3)))
    assert m.training and all(x.training for x in m.modules())
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    with pytest.raises(ValueError):
        m.train("yes")
    m(ember.randn(4, 2)).sum().backward()
    assert m[0].weight.grad is not None
    m.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(m[0].weight.grad.numpy(), 0)
    m.zero_grad()
    assert m[0].weight.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "Dropout", "BatchNorm1d", "Sequential", "Sequential"]
    assert m.get_submodule("2.0") is m[2][0]
    assert m.get_parameter("2.0.weight") is m[2][0].weight
    assert m.get_buffer("2.0.running_mean") is m[2][0].running_mean
    with pytest.raises(AttributeError):
        m.get_submodule("5")
    with pytest.raises(AttributeError):
        m.get_parameter("2.0.running_mean")


def test_forward_hooks():
    m = enn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0.0,))
    h2 = m.register_forward_hook(lambda mod, args, out: out + 1.0)
    h3 = m.register_forward_hook(lambda mod, args, out: calls.append("first"), prepend=True)
    x = ember.randn(3, 2)
    y = m(x)
    np.testing.assert_allclose(y.numpy(), (m.bias + 1.0).detach().numpy()[None].repeat(3, 0), rtol=1e-6)
    assert calls == ["first"]
    h1.remove()
    h2.remove()
    h3.remove()
    h1.remove()  # a second remove does nothing
    np.testing.assert_allclose(m(x).numpy(), (x @ m.weight.T + m.bias).numpy(), rtol=1e-6)
    assert not m._forward_hooks and not m._forward_pre_hooks

    def pre_kw(mod, args, kwargs):
        return (args[0] * 2.0,), kwargs

    def post_kw(mod, args, kwargs, out):
        calls.append(sorted(kwargs))

    with m.register_forward_pre_hook(pre_kw, with_kwargs=True), m.register_forward_hook(post_kw, with_kwargs=True):
        np.testing.assert_allclose(m(input=x).numpy(), m.forward(x * 1.0).numpy() * 0 + m(x).numpy(), rtol=1e-6) \
            if False else m(x)
    assert calls[-1] == []
    assert not m._forward_hooks

    class Boom(enn.Module):
        def forward(self, x):
            raise ValueError("boom")

    b = Boom()
    b.register_forward_hook(lambda mod, args, out: calls.append(("always", out)), always_call=True)
    with pytest.raises(ValueError):
        b(1)
    assert calls[-1] == ("always", None)


def test_repr_equals_torch():
    def build(nn):
        return nn.Sequential(
            nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Dropout(0.1),
            nn.ModuleList([nn.Linear(8, 8) for _ in range(3)] + [nn.GELU()]),
            nn.ModuleDict({"bn": nn.BatchNorm1d(8), "emb": nn.Embedding(10, 8, padding_idx=0)}),
            nn.Sequential(nn.Softmax(dim=-1), nn.Flatten(), nn.Identity()),
            nn.Linear(8, 2, bias=False), nn.GroupNorm(2, 8), nn.RMSNorm(8), nn.PReLU(),
            nn.CrossEntropyLoss(), nn.MSELoss())
    assert same_repr(build(enn), build(tnn))
    assert repr(enn.ModuleList()) == repr(tnn.ModuleList())
    assert repr(enn.Sequential()) == repr(tnn.Sequential())
    pl_e = enn.ParameterList([enn.Parameter(ember.ones(2, 3))])
    assert repr(pl_e) == "ParameterList(  (0): Parameter containing: [ember.float32 of size 2x3])"
    two = repr(enn.ParameterList([ember.ones(2, 3), ember.zeros(1)]))
    assert two == repr(tnn.ParameterList([torch.ones(2, 3), torch.zeros(1)])).replace("torch.", "ember.")


def test_sequential_container_ops():
    a, b, c = enn.Linear(2, 2), enn.ReLU(), enn.Linear(2, 1)
    s = enn.Sequential(a, b)
    assert len(s) == 2 and s[0] is a and s[-1] is b and list(s) == [a, b]
    s.append(c)
    assert s[2] is c
    sl = s[1:]
    assert isinstance(sl, enn.Sequential) and list(sl) == [b, c] and list(dict(sl.named_children())) == ["1", "2"]
    s.insert(0, enn.Identity())
    assert [type(m).__name__ for m in s] == ["Identity", "Linear", "ReLU", "Linear"]
    assert list(s._modules) == ["0", "1", "2", "3"]
    del s[0]
    assert s[0] is a and list(s._modules) == ["0", "1", "2"]
    s.extend([enn.Tanh()])
    assert len(s) == 4
    s2 = s + enn.Sequential(enn.Sigmoid())
    assert len(s2) == 5
    with pytest.raises(IndexError):
        s[10]
    y = s(ember.randn(3, 2))
    assert y.shape == (3, 1)
    s[3] = enn.Sigmoid()
    assert isinstance(s[3], enn.Sigmoid)
    assert s.pop(3).__class__ is enn.Sigmoid and len(s) == 3
    od = enn.Sequential(OrderedDict([("x", enn.ReLU()), ("y", enn.Tanh())]))
    assert od.x is od[0] and list(od.state_dict()) == []


def test_modulelist_moduledict_parameterlist_parameterdict():
    ml = enn.ModuleList([enn.Linear(1, 1)])
    ml.append(enn.ReLU())
    ml += [enn.Tanh()]
    ml.insert(1, enn.Sigmoid())
    assert [type(m).__name__ for m in ml] == ["Linear", "Sigmoid", "ReLU", "Tanh"]
    assert len(ml[1:3]) == 2 and ml[-1].__class__ is enn.Tanh
    del ml[1]
    assert list(ml._modules) == ["0", "1", "2"]
    assert list(ml.state_dict()) == ["0.weight", "0.bias"]
    md = enn.ModuleDict([("a", enn.Linear(1, 2))])
    md["b"] = enn.ReLU()
    md.update({"c": enn.Tanh()})
    assert list(md.keys()) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert md.pop("b").__class__ is enn.ReLU and list(md) == ["a", "c"]
    pl = enn.ParameterList([ember.ones(2), enn.Parameter(ember.zeros(1))])
    assert all(isinstance(p, enn.Parameter) for p in pl) and len(pl) == 2
    pl.append(ember.ones(3))
    tpl = tnn.ParameterList([torch.ones(2), torch.zeros(1), torch.ones(3)])
    assert list(pl.state_dict()) == list(tpl.state_dict())
    pd = enn.ParameterDict({"w": ember.ones(2), "v": enn.Parameter(ember.zeros(1))})
    tpd = tnn.ParameterDict({"w": torch.ones(2), "v": torch.zeros(1)})
    assert list(pd.state_dict()) == list(tpd.state_dict()) == ["v", "w"]  # a plain dict is sorted
    pd["u"] = ember.ones(1)
    assert list(pd.keys()) == ["v", "w", "u"]
    assert isinstance(pd["w"], enn.Parameter) and pd.get("nope") is None
    del pd["w"]
    assert list(pd) == ["v", "u"]


def test_loss_weight_buffers_in_state_dict():
    w = np.array([1.0, 2.0, 0.5], np.float32)
    em = enn.CrossEntropyLoss(weight=ember.tensor(w))
    tm = tnn.CrossEntropyLoss(weight=torch.from_numpy(w))
    assert list(em.state_dict()) == list(tm.state_dict())
    eb = enn.BCEWithLogitsLoss(pos_weight=ember.ones(3))
    tb = tnn.BCEWithLogitsLoss(pos_weight=torch.ones(3))
    assert list(eb.state_dict()) == list(tb.state_dict())
    em.load_state_dict(torch_state_to_numpy(tm))


def test_to_cpu_string_keeps_training_on_the_host():
    """``model.to("cpu")`` (the commonest line of a ported script) means the host, as
    ``Tensor.to("cpu")``: parameters stay on their host device with autodiff, so the model trains."""
    m = enn.Linear(3, 2)
    w = m.weight
    m.to("cpu")
    assert m.weight is w and m.weight.requires_grad and m.weight.device.is_autodiff
    m(ember.randn(4, 3)).sum().backward()
    assert m.weight.grad.shape == (2, 3)
    dev = ember.Device.cpu().autodiff()
    assert enn.Linear(3, 2).to(dev).cpu().weight.device == dev
