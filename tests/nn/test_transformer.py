"""Transformer layers against torch CPU with weights copied through the state dict: encoder and
decoder layers (post/pre norm, relu/gelu/callable activations, masks, batch_first), the stacks
and ``nn.Transformer``; train mode without dropout for gradients, eval mode for outputs; state
dicts both ways."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
from nn_reference import assert_close, copy_weights, is_reduced, perturb, same_repr, torch_state_to_numpy
from spatial_reference import check_module

import ember
import ember.nn as enn
import ember.nn.functional as F

D, H, FF = 8, 2, 16


def _kpm(n, s):
    m = np.zeros((n, s), dtype=bool)
    m[1, s - 2:] = True  # the second sequence is padded at the end
    return m


class _TorchWith(tnn.Module):
    """``layer`` called with fixed keyword arguments (masks) after the inputs."""

    def __init__(self, layer, kwargs):
        super().__init__()
        self.layer = layer
        self.kwargs = kwargs

    def forward(self, *xs):
        return self.layer(*xs, **self.kwargs)


class _EmberWith(enn.Module):
    """``layer`` called with fixed keyword arguments (masks) after the inputs."""

    def __init__(self, layer, kwargs):
        super().__init__()
        self.layer = layer
        self.kwargs = kwargs

    def forward(self, *xs):
        return self.layer(*xs, **self.kwargs)


# (id, layer kwargs, runs on the slow device)
ENCODER = [
    ("post_norm_relu", dict(), True),
    ("pre_norm_gelu_batch_first", dict(norm_first=True, activation="gelu", batch_first=True), False),
    ("callable_no_bias", dict(activation=F.silu, bias=False), False),
]


@pytest.mark.parametrize("case", ENCODER, ids=[c[0] for c in ENCODER])
def test_encoder_layer_matches_torch(case, autodiff_device, rng):
    name, kw, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    tkw = dict(kw)
    if kw.get("activation") is F.silu:
        tkw["activation"] = torch.nn.functional.silu
    tm = tnn.TransformerEncoderLayer(D, H, FF, dropout=0.0, **tkw)
    em = enn.TransformerEncoderLayer(D, H, FF, dropout=0.0, **kw)
    perturb(tm, rng)
    shape = (2, 5, D) if kw.get("batch_first") else (5, 2, D)
    kpm = _kpm(2, 5)
    mask = np.triu(np.full((5, 5), -np.inf, dtype=np.float32), 1)

    tkw = dict(src_mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm))
    ekw = dict(src_mask=ember.tensor(mask, device=autodiff_device),
               src_key_padding_mask=ember.tensor(kpm, device=autodiff_device))
    check_module(autodiff_device, rng, _EmberWith(em, ekw), _TorchWith(tm, tkw),
                 [rng.standard_normal(shape).astype(np.float32)], what=name)


@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True, batch_first=True)], ids=["post_norm", "pre_norm_bf"])
def test_decoder_layer_matches_torch(kw, autodiff_device, rng):
    if is_reduced(autodiff_device):
        pytest.skip("representative subset on the slow and unfused devices")
    tm = tnn.TransformerDecoderLayer(D, H, FF, dropout=0.0, **kw)
    em = enn.TransformerDecoderLayer(D, H, FF, dropout=0.0, **kw)
    perturb(tm, rng)
    bf = kw.get("batch_first", False)
    tgt = rng.standard_normal((2, 4, D) if bf else (4, 2, D)).astype(np.float32)
    mem = rng.standard_normal((2, 5, D) if bf else (5, 2, D)).astype(np.float32)
    tmask = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    mkpm = _kpm(2, 5)
    tkw = dict(tgt_mask=torch.tensor(tmask), memory_key_padding_mask=torch.tensor(mkpm), tgt_is_causal=True)
    ekw = dict(tgt_mask=ember.tensor(tmask, device=autodiff_device),
               memory_key_padding_mask=ember.tensor(mkpm, device=autodiff_device), tgt_is_causal=True)
    check_module(autodiff_device, rng, _EmberWith(em, ekw), _TorchWith(tm, tkw), [tgt, mem], what=f"decoder {kw}")


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_encoder_state_dict_both_ways(autodiff_device, rng):
    """A 2-layer TransformerEncoder in eval mode: torch -> ember and ember -> torch agree."""
    torch.manual_seed(0)
    tl = tnn.TransformerEncoderLayer(D, H, FF)
    te = tnn.TransformerEncoder(tl, 2, norm=tnn.LayerNorm(D)).eval()
    el = enn.TransformerEncoderLayer(D, H, FF)
    ee = enn.TransformerEncoder(el, 2, norm=enn.LayerNorm(D)).eval()
    assert same_repr(ee, te)
    # the deep copies start equal and are independent parameters
    p0, p1 = ee.layers[0].linear1.weight, ee.layers[1].linear1.weight
    assert p0 is not p1 and np.array_equal(p0.numpy(), p1.numpy())
    perturb(te, rng)
    assert list(ee.state_dict()) == list(te.state_dict())
    copy_weights(te, ee)
    ee.to(autodiff_device)
    x = rng.standard_normal((5, 2, D)).astype(np.float32)
    with torch.no_grad():
        want = te(torch.tensor(x))
    assert_close(ee(ember.tensor(x, device=autodiff_device)), want, what="torch -> ember")
    # ember -> torch: fresh random weights in ember, loaded into a fresh torch encoder
    ee2 = enn.TransformerEncoder(enn.TransformerEncoderLayer(D, H, FF), 2, norm=enn.LayerNorm(D)).eval()
    te2 = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(D, H, FF), 2, norm=tnn.LayerNorm(D)).eval()
    te2.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in ee2.state_dict().items()})
    ee2.to(autodiff_device)
    with torch.no_grad():
        want = te2(torch.tensor(x))
    assert_close(ee2(ember.tensor(x, device=autodiff_device)), want, what="ember -> torch")


def test_transformer_matches_torch(rng):
    tt = tnn.Transformer(D, H, 2, 1, FF, dropout=0.0).eval()
    et = enn.Transformer(D, H, 2, 1, FF, dropout=0.0).eval()
    assert list(et.state_dict()) == list(tt.state_dict())
    et.load_state_dict(torch_state_to_numpy(tt))
    src = rng.standard_normal((5, 2, D)).astype(np.float32)
    tgt = rng.standard_normal((4, 2, D)).astype(np.float32)
    tmask = enn.Transformer.generate_square_subsequent_mask(4)
    with torch.no_grad():
        want = tt(torch.tensor(src), torch.tensor(tgt), tgt_mask=tnn.Transformer.generate_square_subsequent_mask(4),
                  src_key_padding_mask=torch.tensor(_kpm(2, 5)), memory_key_padding_mask=torch.tensor(_kpm(2, 5)))
    got = et(ember.tensor(src), ember.tensor(tgt), tgt_mask=tmask, src_key_padding_mask=ember.tensor(_kpm(2, 5)),
             memory_key_padding_mask=ember.tensor(_kpm(2, 5)))
    assert_close(got, want)
    # xavier_uniform_ on every matrix: bounded by sqrt(6 / (fan_in + fan_out))
    w = et.encoder.layers[0].linear1.weight.numpy()
    assert np.abs(w).max() <= np.sqrt(6 / (D + FF))
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        et(ember.tensor(src), ember.tensor(tgt[:, :1]))


def test_dropout_in_train_mode():
    ember.manual_seed(0)
    layer = enn.TransformerEncoderLayer(D, H, FF, dropout=0.5)
    x = ember.randn(5, 2, D)
    layer.train()
    a, b = layer(x).numpy(), layer(x).numpy()
    assert not np.allclose(a, b)
    layer.eval()
    assert np.array_equal(layer(x).numpy(), layer(x).numpy())
    with pytest.raises(RuntimeError, match="relu/gelu"):
        enn.TransformerEncoderLayer(D, H, activation="tanh")
