"""``ember.autocast``: which ops cast to what, against torch.autocast, state rules (nesting,
enabled=False, threads, decorator), the cast cache, and that ``import ember`` stays lazy."""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import torch

import ember
from ember.amp import autocast_mode as am

from .conftest import amp_dtype, autocast_type

_TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _t(a: np.ndarray, device: ember.Device, requires_grad: bool = False) -> ember.Tensor:
    return ember.tensor(a, device=device, requires_grad=requires_grad)


@pytest.fixture(autouse=True)
def _no_region_left_open():
    """Every test leaves autocast off everywhere (the cross-thread count back at zero)."""
    yield
    gate = sys.modules["ember.tensor"]._autocast  # (``ember.tensor`` is the creation function)
    assert gate.active == 0 and not am._local.on and am._local.nesting == 0 and not am._local.cache


def test_op_lists(amp_device, rng):
    kind, low = autocast_type(amp_device), amp_dtype(amp_device)
    a = _t(rng.standard_normal((3, 4), dtype=np.float32), amp_device)
    b = _t(rng.standard_normal((4, 5), dtype=np.float32), amp_device)
    a3 = _t(rng.standard_normal((2, 3, 4), dtype=np.float32), amp_device)
    b3 = _t(rng.standard_normal((2, 4, 2), dtype=np.float32), amp_device)
    v = _t(rng.standard_normal(4, dtype=np.float32), amp_device)
    with ember.autocast(kind):
        # lower-precision ops
        assert (a @ b).dtype is low
        assert a.matmul(b).dtype is low and a.mm(b).dtype is low and ember.matmul(a, b).dtype is low
        assert a3.bmm(b3).dtype is low and ember.bmm(a3, b3).dtype is low
        assert (v @ b).dtype is low and (v @ v).dtype is low  # torch.matmul of 1-D inputs too
        # dot is a "promote" op: full precision stays
        assert v.dot(v).dtype is ember.float32
        # float32 ops: a half input runs in float32 (softmax with dtype= respects it)
        h = (a @ b)
        for y in (h.softmax(-1), h.log_softmax(-1), ember.softmax(h, 1), ember.log_softmax(h, 1), h.logsumexp(-1)):
            assert y.dtype is ember.float32
        assert h.softmax(-1, dtype=low).dtype is low
        # ops on neither list keep their inputs' type; mixed types promote as usual
        assert (h * 2).dtype is low and h.sum().dtype is low and h.exp().dtype is low
        assert (h + a @ b.float()).dtype is low
        assert ember.cat([h, _t(np.zeros((3, 5), np.float32), amp_device)]).dtype is ember.float32
    # back to full precision outside
    assert (a @ b).dtype is ember.float32 and (a @ b).softmax(-1).dtype is ember.float32


def test_float64_and_integers_are_not_cast(rng):
    a = ember.tensor(rng.standard_normal((3, 3)))
    i = ember.tensor(rng.integers(-3, 3, (3, 3)))
    with ember.autocast("cpu"):
        assert (a @ a).dtype is ember.float64 and a.softmax(0).dtype is ember.float64
        assert (i @ i).dtype is ember.int64
        # float32 x float64: the float32 side is lowered, then promotion gives float64
        assert (a.float() @ a).dtype is ember.float64


def test_values_and_gradients_match_torch_autocast(amp_device, rng):
    """A two-layer network with a log-softmax loss under autocast, against torch.autocast on CPU with
    the same dtype: outputs within the low dtype's tolerance, float32 gradients on float32 leaves."""
    kind, low = autocast_type(amp_device), amp_dtype(amp_device)
    x = rng.standard_normal((6, 8), dtype=np.float32)
    w1 = rng.standard_normal((8, 16), dtype=np.float32) / 3
    b1 = rng.standard_normal(16, dtype=np.float32)
    w2 = rng.standard_normal((16, 5), dtype=np.float32) / 4
    tgt = rng.integers(0, 5, 6)

    def run(lib, leaves, region):
        X, W1, B1, W2 = leaves
        with region:
            h = (X @ W1 + B1).relu()
            logits = h @ W2
            logp = logits.log_softmax(-1)
            loss = -(logp[np.arange(6), tgt]).float().mean()
        return logits, logp, loss

    eleaves = [_t(x, amp_device)] + [_t(p, amp_device, True) for p in (w1, b1, w2)]
    tleaves = [torch.tensor(x)] + [torch.tensor(p, requires_grad=True) for p in (w1, b1, w2)]
    elog, elogp, eloss = run(ember, eleaves, ember.autocast(kind))
    tlog, tlogp, tloss = run(torch, tleaves, torch.autocast("cpu", dtype=_TORCH[low.name]))
    assert elog.dtype is low and tlog.dtype == _TORCH[low.name]
    # ember keeps log_softmax in float32 on every device type (torch's CPU autocast: bfloat16)
    assert elogp.dtype is ember.float32
    tol = 2e-2 if low is ember.bfloat16 else 3e-3
    np.testing.assert_allclose(elog.float().numpy(), tlog.float().detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(elogp.numpy(), tlogp.float().detach().numpy(), rtol=tol, atol=2 * tol)
    np.testing.assert_allclose(eloss.item(), tloss.item(), rtol=tol, atol=tol)
    eloss.backward()
    tloss.backward()
    for e, t in zip(eleaves[1:], tleaves[1:]):
        assert e.grad is not None and e.grad.dtype is ember.float32
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=4 * tol, atol=4 * tol)


def test_nesting_enabled_false_and_queries():
    a = ember.ones(2, 2)
    assert not ember.is_autocast_enabled() and not ember.is_autocast_enabled("cpu")
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16 and ember.get_autocast_dtype("cuda") is ember.float16
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu") and ember.is_autocast_enabled()
        assert not ember.is_autocast_enabled("cuda")
        assert (a @ a).dtype is ember.bfloat16
        with ember.autocast("cpu", dtype=ember.float16):
            assert (a @ a).dtype is ember.float16 and ember.get_autocast_dtype("cpu") is ember.float16
            with ember.autocast("cpu", enabled=False):
                assert not ember.is_autocast_enabled("cpu")
                assert (a @ a).dtype is ember.float32 and (a @ a).half().softmax(0).dtype is ember.float16
            assert (a @ a).dtype is ember.float16
        assert (a @ a).dtype is ember.bfloat16 and ember.get_autocast_dtype("cpu") is ember.bfloat16
        # a region of another device type leaves these tensors alone
        with ember.autocast("cuda"), ember.autocast("wgpu"):
            assert (a @ a).dtype is ember.bfloat16
        # one instance entered twice (a stack of saved states)
        region = ember.autocast("cpu", dtype=ember.float16)
        with region:
            with region:
                assert (a @ a).dtype is ember.float16
            assert (a @ a).dtype is ember.float16
        assert (a @ a).dtype is ember.bfloat16
    assert (a @ a).dtype is ember.float32 and not ember.is_autocast_enabled("cpu")
    with ember.autocast("cuda"):  # no CUDA tensors here: nothing is cast
        assert (a @ a).dtype is ember.float32


def test_state_is_restored_on_exceptions():
    with pytest.raises(ZeroDivisionError), ember.autocast("cpu"):
        1 / 0  # noqa: B018
    assert not ember.is_autocast_enabled("cpu") and (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.float32


def test_argument_checks():
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        ember.autocast("tpu")
    with pytest.raises(ValueError, match="of type `str`"):
        ember.autocast(ember.Device.flex())
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        region = ember.autocast("cpu", dtype=ember.float32)
    with region:
        assert not ember.is_autocast_enabled("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a supported dtype given as a name: no warning
        assert ember.autocast("cpu", dtype="float16").fast_dtype is ember.float16
    assert am.is_autocast_available("cuda") and not am.is_autocast_available("tpu")


def test_thread_locality():
    """A region in one thread casts nothing in another (which still sees the cross-thread count)."""
    entered, checked = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def inside():
        with ember.autocast("cpu"):
            entered.set()
            checked.wait(10)
            seen["inside"] = (ember.ones(2, 2) @ ember.ones(2, 2)).dtype

    def outside():
        entered.wait(10)
        seen["active"] = sys.modules["ember.tensor"]._autocast.active
        seen["outside"] = (ember.ones(2, 2) @ ember.ones(2, 2)).dtype
        seen["softmax"] = ember.ones(2, 2).half().softmax(0).dtype
        seen["enabled"] = ember.is_autocast_enabled("cpu")
        seen["dtype"] = ember.get_autocast_dtype("cpu")
        checked.set()

    ts = [threading.Thread(target=inside), threading.Thread(target=outside)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert seen == {"active": 1, "outside": ember.float32, "softmax": ember.float16, "enabled": False,
                    "dtype": ember.bfloat16, "inside": ember.bfloat16}


def test_decorator():
    @ember.autocast("cpu", dtype=ember.float16)
    def f(a, b):
        """doc"""
        return a @ b, ember.is_autocast_enabled("cpu")

    a = ember.ones(3, 3)
    assert f.__doc__ == "doc" and f.__name__ == "f"
    out, on = f(a, a)
    assert on and out.dtype is ember.float16 and (a @ a).dtype is ember.float32
    results = []
    ts = [threading.Thread(target=lambda: results.append(f(a, a)[0].dtype)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert results == [ember.float16] * 4


def test_cast_cache():
    w = ember.randn(4, 4, requires_grad=True)
    x = ember.randn(2, 4)
    with ember.autocast("cpu"):
        c1, c2 = am.lower(w)[0], am.lower(w)[0]
        assert c1 is c2 and c1.dtype is ember.bfloat16  # a weight used twice is cast once
        assert am.lower(x)[0] is not am.lower(x)[0]  # only leaves requiring grad are cached
        # several forward/backward iterations in one region: a cast freed by a backward is redone
        grads = []
        for _ in range(2):
            (x @ w).float().sum().backward()
            grads.append(w.grad.numpy().copy())
        np.testing.assert_array_equal(grads[1], 2 * grads[0])
        with ember.no_grad():
            w.sub_(w.grad)  # an in-place update: the next cast sees the new value
        np.testing.assert_array_equal(am.lower(w)[0].float().numpy(), w.to(ember.bfloat16).float().numpy())
        with ember.autocast("cpu", cache_enabled=False):
            assert not am.is_autocast_cache_enabled() and am.lower(w)[0] is not am.lower(w)[0]
        assert am.is_autocast_cache_enabled()
    assert not am._local.cache  # cleared when the outermost region exits


def test_helpers_pass_through():
    a, h = ember.ones(2, 2), ember.ones(2, 2).half()
    args = (a, None, 3, h)
    for f in (am.lower, am.fp32, am.promote):  # outside autocast: the very inputs
        out = f(*args)
        assert type(out) is tuple and len(out) == 4 and all(o is i for o, i in zip(out, args))
    with ember.autocast("cpu"):
        la, ln, l3, lh = am.lower(*args)
        assert la.dtype is ember.bfloat16 and ln is None and l3 == 3 and lh.dtype is ember.bfloat16
        fa, _, _, fh = am.fp32(*args)
        assert fa is a and fh.dtype is ember.float32
        pa, _, _, ph = am.promote(*args)
        assert pa is a and ph.dtype is ember.float32
        assert am.lower() == ()


def test_import_is_lazy():
    code = (
        "import sys, ember\n"
        "print([m for m in sys.modules if m.startswith('ember.amp')])\n"
        "a = ember.autocast\n"
        "print(a is ember.amp.autocast_mode.autocast is ember.amp.autocast, 'autocast' in ember.__all__,\n"
        "      ember.is_autocast_enabled is ember.amp.is_autocast_enabled, ember.amp.GradScaler.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "True True True GradScaler"]
