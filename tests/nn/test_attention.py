"""``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` against torch CPU: outputs,
attention weights, input and parameter gradients with bool/float/causal masks, key padding
masks, batch_first, kdim/vdim, bias_kv and zero attention, on every autodiff device (a
representative subset on the slow and unfused devices)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from nn_reference import assert_close, copy_weights, ember_input, is_reduced, perturb, torch_input
from spatial_reference import check_fn

import ember
import ember.nn as enn
import ember.nn.functional as F


def _bool_mask(rng, shape, full_row=False):
    m = rng.random(shape) > 0.4
    m[..., 0] = True  # every query keeps a key
    if full_row:
        m[..., 1, :] = False  # one query sees nothing: torch's safe softmax gives zeros
    return m


# (id, q/k/v shapes, kwargs builder (rng -> dict of numpy masks / flags), runs on the slow device)
SDPA = [
    ("plain", [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)], lambda rng: {}, True),
    ("causal_scale", [(2, 2, 5, 4), (2, 2, 3, 4), (2, 2, 3, 6)], lambda rng: dict(is_causal=True, scale=0.3), True),
    ("causal_square", [(1, 3, 4, 4), (1, 3, 4, 4), (1, 3, 4, 4)], lambda rng: dict(is_causal=True), False),
    ("bool_mask_full_row", [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)],
     lambda rng: dict(attn_mask=_bool_mask(rng, (3, 5), full_row=True)), False),
    ("bool_mask_batched", [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)],
     lambda rng: dict(attn_mask=_bool_mask(rng, (2, 1, 3, 5))), False),
    ("float_mask", [(2, 3, 4), (2, 5, 4), (2, 5, 4)],
     lambda rng: dict(attn_mask=rng.standard_normal((3, 5)).astype(np.float32)), False),
    ("gqa", [(2, 4, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)], lambda rng: dict(enable_gqa=True), False),
]


@pytest.mark.parametrize("case", SDPA, ids=[c[0] for c in SDPA])
def test_sdpa_matches_torch(case, autodiff_device, rng):
    name, shapes, build, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    kw = build(rng)
    ekw = {k: ember.tensor(v, device=autodiff_device) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    check_fn(autodiff_device, rng, lambda *a: F.scaled_dot_product_attention(*a, **ekw),
             lambda *a: TF.scaled_dot_product_attention(*a, **tkw), shapes, what=name)


def test_sdpa_errors_and_dropout():
    q = ember.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ember.ones(3, 3, dtype=ember.bool), is_causal=True)
    # dropout_p = 1 drops every weight
    assert float(F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).abs().sum()) == 0.0
    # dropout keeps the expectation: the mean over many seeds approaches the undropped output
    ember.manual_seed(0)
    full = F.scaled_dot_product_attention(q, q, q).numpy()
    mean = np.mean([F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy() for _ in range(200)], 0)
    assert np.abs(mean - full).max() < 0.25 * np.abs(full).max() + 0.1


def test_sdpa_dropout_drops_and_rescales_probabilities(rng):
    # value = identity: the output is the dropped attention matrix, each probability either
    # zeroed or scaled by 1 / (1 - p), as torch's dropout (whose mask the OpInfo harness cannot
    # reproduce: it compares the attention entries with dropout_p = 0)
    q = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    k = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    eye = np.broadcast_to(np.eye(6, dtype=np.float32), (2, 3, 6, 6))
    probs = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(eye)).numpy()
    ember.manual_seed(3)
    got = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(eye), dropout_p=0.25).numpy()
    kept = got != 0
    np.testing.assert_allclose(got[kept], probs[kept] / 0.75, rtol=1e-5)
    assert 0.5 < kept.mean() < 0.95  # 144 draws of keep-probability 0.75


# (id, MultiheadAttention kwargs, L, S, forward kwargs builder, runs on the slow device)
MHA = [
    ("self_weights", dict(), 4, 4, lambda rng: {}, True),
    ("cross_kpm_attn_mask", dict(), 3, 5,
     lambda rng: dict(key_padding_mask=~_bool_mask(rng, (2, 5)), attn_mask=~_bool_mask(rng, (3, 5))), False),
    ("no_weights_float_mask", dict(batch_first=True), 3, 5,
     lambda rng: dict(need_weights=False, attn_mask=rng.standard_normal((3, 5)).astype(np.float32)), True),
    ("per_head_weights_3d_mask", dict(bias=False), 3, 5,
     lambda rng: dict(average_attn_weights=False, attn_mask=~_bool_mask(rng, (2 * 2, 3, 5))), False),
    ("kdim_vdim", dict(kdim=3, vdim=5), 3, 4, lambda rng: dict(key_padding_mask=~_bool_mask(rng, (2, 4))), False),
    ("bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), 3, 4,
     lambda rng: dict(key_padding_mask=~_bool_mask(rng, (2, 4)), need_weights=False), False),
]


@pytest.mark.parametrize("case", MHA, ids=[c[0] for c in MHA])
def test_multihead_attention_matches_torch(case, autodiff_device, rng):
    name, mkw, q_len, k_len, build, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    e, n = 8, 2
    tm = tnn.MultiheadAttention(e, 2, **mkw)
    em = enn.MultiheadAttention(e, 2, **mkw)
    perturb(tm, rng)
    assert list(em.state_dict()) == list(tm.state_dict())
    copy_weights(tm, em)
    em.to(autodiff_device)
    bf = mkw.get("batch_first", False)

    def shape(length, dim):
        return (n, length, dim) if bf else (length, n, dim)

    fkw = build(rng)
    q = rng.standard_normal(shape(q_len, e)).astype(np.float32)
    if name.startswith("self"):
        eq, tq = ember_input(q, autodiff_device), torch_input(q)
        eins, tins = (eq, eq, eq), (tq, tq, tq)
    else:
        k = rng.standard_normal(shape(k_len, mkw.get("kdim", e))).astype(np.float32)
        v = rng.standard_normal(shape(k_len, mkw.get("vdim", e))).astype(np.float32)
        eins = tuple(ember_input(a, autodiff_device) for a in (q, k, v))
        tins = tuple(torch_input(a) for a in (q, k, v))
    ekw = {k: ember.tensor(v, device=autodiff_device) if isinstance(v, np.ndarray) else v for k, v in fkw.items()}
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in fkw.items()}
    eo, ew = em(*eins, **ekw)
    to, tw = tm(*tins, **tkw)
    assert_close(eo, to, what=f"{name} output")
    if tw is None:
        assert ew is None
    else:
        assert_close(ew, tw, what=f"{name} weights")
    g = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    to.backward(torch.from_numpy(g))
    eo.backward(ember.tensor(g, device=autodiff_device))
    seen = set()
    for i, (a, b) in enumerate(zip(eins, tins)):
        if id(a) not in seen:
            seen.add(id(a))
            assert_close(a.grad, b.grad, what=f"{name} grad of input {i}")
    tparams = dict(tm.named_parameters())
    for pname, p in em.named_parameters():
        assert_close(p.grad, tparams[pname].grad, what=f"{name} grad of {pname}")


def test_multihead_attention_unbatched_causal_hint(rng):
    tm = tnn.MultiheadAttention(8, 2)
    em = enn.MultiheadAttention(8, 2)
    copy_weights(tm, em)
    assert repr(em) == repr(tm)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    tmask = tnn.Transformer.generate_square_subsequent_mask(5)
    emask = enn.Transformer.generate_square_subsequent_mask(5)
    assert np.array_equal(emask.numpy(), tmask.numpy())  # -inf above the diagonal, 0 elsewhere
    ex, tx = ember.tensor(x), torch.tensor(x)
    for need in (True, False):
        eo, ew = em(ex, ex, ex, attn_mask=emask, is_causal=True, need_weights=need)
        to, tw = tm(tx, tx, tx, attn_mask=tmask, is_causal=True, need_weights=need)
        assert_close(eo, to, what=f"need_weights={need}")
        if need:
            assert_close(ew, tw)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        em(ex, ex, ex, is_causal=True)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        enn.MultiheadAttention(6, 4)


def test_multihead_attention_dropout_train_eval():
    ember.manual_seed(0)
    m = enn.MultiheadAttention(8, 2, dropout=0.5)
    x = ember.randn(4, 2, 8)
    m.eval()
    a = m(x, x, x)[0].numpy()
    b = m(x, x, x)[0].numpy()
    assert np.array_equal(a, b)  # no dropout in eval
    m.train()
    w = m(x, x, x)[1].numpy()
    assert (w == 0).any()  # dropped weights are returned after dropout, as torch
