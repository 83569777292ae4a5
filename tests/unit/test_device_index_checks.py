"""Index values checked on the device (``backends/cube/indexing.py``, ``index_kernels.py``).

On the fused Cube devices the index ops read nothing back: their kernels wrap negative
values, never use a bad one as a position (a gather gives 0 there, a scatter skips it) and
report it in the backend's error flags, which the next read of any tensor of the device raises
as ``DeviceIndexError`` (an IndexError and a RuntimeError), once. Every case runs with fresh
random values against numpy, on the C runtime and on lavapipe where installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from devices import device_cases

import ember
from ember.errors import DeviceIndexError, IndexOutOfRangeError
from ember.tensor.core import _make


def _params(eager: bool) -> list:
    return [pytest.param(c.device, id=c.name, marks=[pytest.mark.skip(reason=f"{c.name}: {c.unavailable}")]
                         if c.unavailable else [])
            for c in device_cases() if not c.is_autodiff and not c.name.startswith("flex")
            and ("eager" in c.name.split(".")) == eager]


FUSED = _params(False)
EAGER = _params(True)
#: index_put goes through the backend directly: the Tensor API's ``x[idx] = v`` and
#: ``index_put`` compute the flat positions on the host (numpy raises there)
OPS = ["gather", "index_select", "index", "scatter_add", "index_put"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def queued(dev, a: np.ndarray) -> ember.Tensor:
    """``a`` as a tensor the stream computes (an index op reading it reads a queued value)."""
    return ember.tensor(a, device=dev) + 0


def _rows_ref(xn, i, good):
    """x[i] with the rows of the bad values 0."""
    return np.where(good[..., None], xn[np.where(good, i, 0)], 0)


def _case(op: str, dev, rng):
    """(the op on x (5, 6) and an index tensor, numpy's result for index values ``i`` of
    which only those where ``good`` count, the index shape, the indexed dim's size)."""
    src = rng.standard_normal((5, 3)).astype(np.float32)
    if op == "gather":
        def ref(xn, i, good):
            return np.where(good, np.take_along_axis(xn, np.where(good, i, 0), 1), 0)
        return (lambda x, t: x.gather(1, t)), ref, (5, 4), 6
    if op == "index_select":
        return (lambda x, t: x.index_select(0, t)), _rows_ref, (7,), 5
    if op == "index":
        return (lambda x, t: x[t]), _rows_ref, (3, 2), 5
    if op == "scatter_add":
        s = ember.tensor(src, device=dev)

        def ref(xn, i, good):
            out = xn.astype(np.float64)
            for r, c in zip(*np.nonzero(good)):
                out[r, i[r, c]] += src[r, c]
            return out
        return (lambda x, t: x.scatter_add(1, t, s)), ref, (5, 3), 6

    def ref_put(xn, i, good):
        out = xn.astype(np.float64)
        np.add.at(out, i[good], 1.5)
        return out

    def put(x, t):
        bk = dev.backend()
        v = bk.from_data(np.full((t.shape[0], 6), 1.5, np.float32), ember.float32)
        return _make(bk.index_put(x._p, (t._p,), v, True), bk, x.dtype)
    return put, ref_put, (4,), 5


@pytest.mark.parametrize("dev", FUSED)
@pytest.mark.parametrize("op", OPS)
def test_negative_indices_wrap_on_the_device(dev, op, rng):
    f, ref, shape, n = _case(op, dev, rng)
    xn = rng.standard_normal((5, 6)).astype(np.float32)
    idx = rng.integers(-n, n, shape)
    got = f(ember.tensor(xn, device=dev), queued(dev, idx)).numpy()
    np.testing.assert_allclose(got, ref(xn, idx % n, np.ones(shape, bool)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dev", FUSED)
@pytest.mark.parametrize("op", OPS)
def test_a_bad_index_raises_at_the_next_read_once_and_touches_nothing_else(dev, op, rng):
    """Huge values either side: the read raises naming the op, once; the valid positions hold
    their values, the bad ones 0 (gathers) or nothing written (scatters); a tensor uploaded
    before is unchanged (no write left the output)."""
    f, ref, shape, n = _case(op, dev, rng)
    xn = rng.standard_normal((5, 6)).astype(np.float32)
    guard_n = rng.standard_normal(256).astype(np.float32)
    guard = ember.tensor(guard_n, device=dev)
    idx = rng.integers(0, n, shape)
    good = np.ones(shape, bool)
    good.flat[rng.choice(idx.size, 2, replace=False)] = False
    wild = np.where(rng.random(shape) < 0.5, 10**9 + 7, -(10**9) - 7)
    y = f(ember.tensor(xn, device=dev), queued(dev, np.where(good, idx, wild)))
    msg = rf"^{op}: index -?\d+ is out of bounds for dimension [01] with size"
    with pytest.raises(DeviceIndexError, match=msg) as e:
        y.numpy()
    assert isinstance(e.value, IndexError) and isinstance(e.value, RuntimeError)
    np.testing.assert_allclose(y.numpy(), ref(xn, idx, good), rtol=1e-5, atol=1e-5)  # raised once
    np.testing.assert_array_equal(guard.numpy(), guard_n)


@pytest.mark.parametrize("dev", FUSED)
def test_the_error_reaches_the_next_read_of_any_tensor_and_sync(dev, rng):
    """The op's result is never read: another tensor's read raises, or ``sync``; two bad ops
    in one drain raise once (for the first), and the device is clean afterwards."""
    x = ember.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=dev)
    other = x * 2.0
    x.gather(1, queued(dev, np.array([[3]])))
    with pytest.raises(DeviceIndexError, match="^gather: index 3 is out of bounds for dimension 1 with size 3"):
        other.numpy()
    x[queued(dev, np.array([9]))]
    with pytest.raises(DeviceIndexError, match="^index: index 9"):
        ember.sync(dev)
    x.index_select(0, queued(dev, np.array([-5])))
    x[queued(dev, np.array([4]))]
    with pytest.raises(DeviceIndexError, match="^index_select: index -5"):
        (x + 1.0).sum().item()
    np.testing.assert_allclose(other.numpy(), x.numpy() * 2.0, rtol=1e-6)
    ember.sync(dev)


@pytest.mark.parametrize("dev", FUSED)
def test_replayed_drains_report_their_bad_indices(dev, rng):
    """A drain with a gather replays (its launches name the error flags as a fixed slot) and
    a bad index in a replayed drain still raises at the read."""
    from replay_helpers import fusion_of

    f = fusion_of(dev)
    x = ember.tensor(rng.standard_normal((6, 5)).astype(np.float32), device=dev)
    scale = float(rng.uniform(1.5, 2.5))
    for _ in range(4):
        idx = rng.integers(0, 5, (6, 2))
        got = (x * scale).gather(1, ember.tensor(idx, device=dev)).exp().numpy()
        np.testing.assert_allclose(got, np.exp(np.take_along_axis(x.numpy() * np.float32(scale), idx, 1)), rtol=1e-5)
    before = f.stats.replays
    with pytest.raises(DeviceIndexError, match="^gather: index 5"):
        (x * scale).gather(1, ember.tensor(np.full((6, 2), 5), device=dev)).exp().numpy()
    if f.capturer is not None:
        assert f.stats.replays > before


@pytest.mark.parametrize("dev", EAGER)
def test_eager_devices_raise_at_the_call_and_their_kernels_back_it_up(dev, rng):
    """An eager device checks on the host before the op (the error at the calling line, with
    the eager message); the backend's own kernels still report a bad value that reaches them
    directly, at the next read, also from an op replay (the third call on)."""
    x = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32), device=dev)
    with pytest.raises(IndexOutOfRangeError, match="out of bounds for gather along dim 1 of size 4"):
        x.gather(1, ember.tensor(np.array([[4]]), device=dev))
    bk = dev.backend()
    p = bk.from_data(np.arange(12, dtype=np.float32).reshape(3, 4), ember.float32)
    for _ in range(4):
        i = bk.from_data(np.array([[1, 4]]), ember.int64)
        out = bk.gather(p, 1, i)
        with pytest.raises(DeviceIndexError, match="^gather: index 4"):
            bk.into_data(out)
        assert np.asarray(bk.into_data(out)).tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize("dev", FUSED)
def test_a_host_read_inside_the_drain_leaves_the_error_to_the_users_read(dev, rng):
    """The C runtime sorts on the host inside the drain (it reads the keys there): that read
    does not take the pending error, so the sort's result is computed and the user's read
    raises it."""
    xn = rng.standard_normal((4, 6)).astype(np.float32)
    x = ember.tensor(xn, device=dev)
    x.gather(1, queued(dev, np.array([[6]])))
    order = (x * 1.0).argsort(1)
    with pytest.raises(DeviceIndexError, match="^gather: index 6"):
        order.numpy()
    np.testing.assert_array_equal(order.numpy(), np.argsort(xn, 1, kind="stable"))
