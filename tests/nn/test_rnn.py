"""RNN, LSTM and GRU (and their cells) against torch CPU with weights copied through the state
dict: outputs, final states, input and parameter gradients for multi-layer, bidirectional,
batch_first, bias-free, projected (LSTM proj_size) and unbatched inputs with initial states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
from nn_reference import assert_close, copy_weights, ember_input, is_reduced, torch_input

import ember
import ember.nn as enn

# (id, class name, kwargs, runs on the slow device)
CASES = [
    ("lstm", "LSTM", dict(), True),
    ("lstm_bidir_2layer_batch_first", "LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), False),
    ("lstm_proj", "LSTM", dict(proj_size=2, num_layers=2, bidirectional=True), False),
    ("gru", "GRU", dict(), True),
    ("gru_bidir_2layer_nobias", "GRU", dict(num_layers=2, bidirectional=True, bias=False), False),
    ("rnn_relu_batch_first", "RNN", dict(nonlinearity="relu", batch_first=True, num_layers=2), False),
]


def _state_shape(kw, n, size):
    dirs = 2 if kw.get("bidirectional") else 1
    return (dirs * kw.get("num_layers", 1),) + ((n,) if n else ()) + (size,)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_recurrent_matches_torch(case, autodiff_device, rng):
    name, cls, kw, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    hidden, n, steps = 4, 2, 4
    tm = getattr(tnn, cls)(3, hidden, **kw)
    em = getattr(enn, cls)(3, hidden, **kw)
    assert repr(em) == repr(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    copy_weights(tm, em)
    em.to(autodiff_device)
    hsize = kw.get("proj_size") or hidden
    x = rng.standard_normal((n, steps, 3) if kw.get("batch_first") else (steps, n, 3)).astype(np.float32)
    h0 = rng.standard_normal(_state_shape(kw, n, hsize)).astype(np.float32)
    c0 = rng.standard_normal(_state_shape(kw, n, hidden)).astype(np.float32)
    ex, tx = ember_input(x, autodiff_device), torch_input(x)
    eh0, th0 = ember_input(h0, autodiff_device), torch_input(h0)
    if cls == "LSTM":
        ec0, tc0 = ember_input(c0, autodiff_device), torch_input(c0)
        eo, (eh, ec) = em(ex, (eh0, ec0))
        to, (th, tc) = tm(tx, (th0, tc0))
        assert_close(ec, tc, what=f"{name} c_n")
    else:
        eo, eh = em(ex, eh0)
        to, th = tm(tx, th0)
    assert_close(eo, to, what=f"{name} output")
    assert_close(eh, th, what=f"{name} h_n")
    go = rng.standard_normal(tuple(to.shape)).astype(np.float32)
    gh = rng.standard_normal(tuple(th.shape)).astype(np.float32)
    tloss = (to * torch.from_numpy(go)).sum() + (th * torch.from_numpy(gh)).sum()
    eloss = (eo * ember.tensor(go, device=autodiff_device)).sum() + \
        (eh * ember.tensor(gh, device=autodiff_device)).sum()
    if cls == "LSTM":
        tloss = tloss + tc.sum()
        eloss = eloss + ec.sum()
    tloss.backward()
    eloss.backward()
    assert_close(ex.grad, tx.grad, what=f"{name} grad of input")
    assert_close(eh0.grad, th0.grad, what=f"{name} grad of h_0")
    if cls == "LSTM":
        assert_close(ec0.grad, tc0.grad, what=f"{name} grad of c_0")
    tparams = dict(tm.named_parameters())
    for pname, p in em.named_parameters():
        assert_close(p.grad, tparams[pname].grad, what=f"{name} grad of {pname}")


def test_unbatched_default_state(rng):
    for cls in ("LSTM", "GRU", "RNN"):
        tm = getattr(tnn, cls)(3, 4, num_layers=2)
        em = getattr(enn, cls)(3, 4, num_layers=2)
        copy_weights(tm, em)
        x = rng.standard_normal((5, 3)).astype(np.float32)
        eo, eh = em(ember.tensor(x))
        to, th = tm(torch.tensor(x))
        assert_close(eo, to, what=cls)
        if cls == "LSTM":
            assert_close(eh[0], th[0])
            assert_close(eh[1], th[1])
        else:
            assert_close(eh, th)


@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_torch(cls, autodiff_device, rng):
    if is_reduced(autodiff_device) and cls != "GRUCell":
        pytest.skip("representative subset on the slow and unfused devices")
    tm = getattr(tnn, cls)(3, 4)
    em = getattr(enn, cls)(3, 4)
    assert repr(em) == repr(tm)
    copy_weights(tm, em)
    em.to(autodiff_device)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    ex, tx = ember_input(x, autodiff_device), torch_input(x)
    eo, to = em(ex), tm(tx)
    # a second step from the first step's state
    eo, to = em(ex, eo), tm(tx, to)
    if cls == "LSTMCell":
        eout, tout = eo[0] + eo[1] * 2, to[0] + to[1] * 2
    else:
        eout, tout = eo, to
    assert_close(eout, tout, what=cls)
    tout.sum().backward()
    eout.sum().backward()
    assert_close(ex.grad, tx.grad, what=f"{cls} grad of input")
    tparams = dict(tm.named_parameters())
    for pname, p in em.named_parameters():
        assert_close(p.grad, tparams[pname].grad, what=f"{cls} grad of {pname}")
    # unbatched
    assert_close(em(ember.tensor(x[0], device=autodiff_device))[0], tm(torch.tensor(x[0]))[0])


def test_init_dropout_and_errors():
    ember.manual_seed(0)
    m = enn.LSTM(3, 16, num_layers=2, dropout=0.5)
    for p in m.parameters():
        assert np.abs(p.numpy()).max() <= 0.25  # U(+-1/sqrt(hidden_size))
    x = ember.randn(4, 2, 3)
    m.train()
    assert not np.allclose(m(x)[0].numpy(), m(x)[0].numpy())  # dropout between the layers
    m.eval()
    assert np.array_equal(m(x)[0].numpy(), m(x)[0].numpy())
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        enn.GRU(3, 4, dropout=0.2)
    with pytest.raises(RuntimeError, match="input_size"):
        enn.GRU(3, 4)(ember.randn(4, 2, 5))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        enn.GRU(3, 4)(ember.randn(4, 2, 3), ember.randn(1, 3, 4))
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        enn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        enn.RNN(3, 4, nonlinearity="gelu")
