"""The random op family of ember/random_ops.py: one seed gives the same values on every device,
the distributions are what they say (moments within a few standard errors of a fixed sample,
supports), shapes and dtypes follow torch, errors are raised where torch raises, and the ops give
zero gradients as torch's do.

The statistical checks use fixed seeds, so they are deterministic; each threshold is about five
standard errors of the statistic, far from where a wrong formula (a wrong scale, an off-by-one
support, a biased race) lands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from devices import reference_device

import ember
import ember.random as R
from ember.errors import AutodiffError, DTypeError, ShapeError

N = 20000  # sample size of the statistical checks (flex: a few milliseconds each)


def read(t: ember.Tensor) -> np.ndarray:
    a = np.asarray(t.detach().numpy())
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def fl(*shape: int, device: Any = None, fill: float = 0.0, dtype: Any = None) -> ember.Tensor:
    return ember.full(shape, fill, dtype=dtype or ember.float32, device=device or reference_device())


def within(sample: np.ndarray, mean: float, var: float, k: float = 5.0) -> None:
    se = math.sqrt(var / sample.size)
    assert abs(float(sample.mean()) - mean) <= k * se, f"mean {sample.mean()} vs {mean} (se {se})"


def var_within(sample: np.ndarray, var: float, k: float = 5.0) -> None:
    # the sample variance's standard error for a distribution with a finite fourth moment is
    # about var * sqrt(2 / n) (normal), wider for heavy tails: callers pass a larger k for those
    se = var * math.sqrt(2.0 / sample.size)
    assert abs(float(sample.var()) - var) < k * se, f"variance {sample.var()} vs {var}"


# ------------------------------------------------------------------------------ every device
Draw = Callable[[ember.Device], ember.Tensor]

#: (name, draw on a device, bit-exact across devices?)
DRAWS: list[tuple[str, Draw, bool]] = [
    ("bernoulli.tensor", lambda d: ember.bernoulli(ember.linspace(0, 1, 37, device=d)), True),
    ("bernoulli.p", lambda d: fl(5, 7, device=d).bernoulli(0.3), True),
    ("bernoulli_.int", lambda d: ember.zeros(40, dtype=ember.int32, device=d).bernoulli_(0.6), True),
    ("bernoulli_.tensor", lambda d: fl(16, 4, device=d).bernoulli_(ember.tensor([0.1, 0.5, 0.9, 1.0], device=d)),
     True),
    ("uniform_", lambda d: fl(33, device=d).uniform_(-2.0, 3.0), True),
    ("normal_", lambda d: fl(4, 9, device=d).normal_(1.0, 3.0), True),
    ("random_", lambda d: fl(30, device=d).random_(), True),
    ("random_.range", lambda d: ember.zeros(30, dtype=ember.int32, device=d).random_(-4, 9), True),
    ("exponential_", lambda d: fl(31, device=d).exponential_(2.0), False),
    ("cauchy_", lambda d: fl(31, device=d).cauchy_(1.0, 2.0), False),
    ("log_normal_", lambda d: fl(31, device=d).log_normal_(0.5, 0.25), False),
    ("geometric_", lambda d: fl(31, device=d).geometric_(0.2), False),
    ("normal.tensors", lambda d: ember.normal(ember.linspace(-1, 1, 6, device=d).reshape(6, 1),
                                              ember.full((5,), 0.5, device=d)), False),
    ("normal.floats", lambda d: ember.normal(2.0, 0.5, (3, 5), device=d), True),
    ("multinomial", lambda d: ember.multinomial(ember.tensor([[1.0, 2.0, 0.0, 3.0]] * 8, device=d), 3), True),
    ("multinomial.replacement", lambda d: ember.tensor([0.2, 0.0, 0.8], device=d).multinomial(40, True), True),
    ("randperm", lambda d: ember.randperm(17, device=d), True),
    ("poisson", lambda d: ember.poisson(ember.tensor([0.0, 0.5, 3.0, 40.0], device=d)), True),
]


@pytest.mark.parametrize("draw,exact", [pytest.param(f, e, id=n) for n, f, e in DRAWS])
def test_one_seed_gives_the_same_values_on_every_device(draw: Draw, exact: bool, device: ember.Device,
                                                        rng: np.random.Generator) -> None:
    seed = int(rng.integers(0, 2**31))
    ember.manual_seed(seed)
    ref = [read(draw(reference_device())) for _ in range(2)]
    ember.manual_seed(seed)
    got = [read(draw(device)) for _ in range(2)]
    assert got[0].dtype == ref[0].dtype and got[0].shape == ref[0].shape
    for r, g in zip(ref, got):
        if exact:
            np.testing.assert_array_equal(g, r, err_msg=f"{device} differs from the reference device")
        else:  # a transcendental of bit-identical uniforms: the devices' log/tan/exp accuracy
            np.testing.assert_allclose(g, r, rtol=2e-5, atol=1e-6, err_msg=f"{device} differs")
    if ref[0].size > 8:  # every draw above has a coincidence probability below 1e-4
        assert not np.array_equal(ref[0], ref[1]), "two draws after one seed gave the same values"


def test_private_generator_is_reproducible_and_leaves_the_global_stream_alone() -> None:
    ember.manual_seed(5)
    state = R.get_rng_state()
    g = R.Generator(123)
    a = read(fl(50).uniform_(generator=g))
    b = read(ember.bernoulli(fl(50, fill=0.5), generator=g))
    p = read(ember.randperm(20, generator=g))
    assert R.get_rng_state() == state, "a private generator advanced the global stream"
    g.manual_seed(123)
    np.testing.assert_array_equal(read(fl(50).uniform_(generator=g)), a)
    np.testing.assert_array_equal(read(ember.bernoulli(fl(50, fill=0.5), generator=g)), b)
    np.testing.assert_array_equal(read(ember.randperm(20, generator=g)), p)
    np.testing.assert_array_equal(read(ember.rand(7, generator=R.Generator(9))),
                                  read(ember.rand(7, generator=R.Generator(9))))
    with pytest.raises(TypeError):
        ember.rand(3, generator=torch.Generator())
    with pytest.raises(TypeError):
        fl(3).normal_(generator=7)


def test_randperm_matches_the_data_samplers_order() -> None:
    from ember.utils.data import _rng

    np.testing.assert_array_equal(read(ember.randperm(40, generator=R.Generator(77))),
                                  _rng.randperm(40, R.Generator(77)))


# ------------------------------------------------------------------------------ distributions
def test_bernoulli_frequencies() -> None:
    ember.manual_seed(11)
    x = read(fl(N).bernoulli(0.3))
    assert set(np.unique(x).tolist()) <= {0.0, 1.0}
    within(x, 0.3, 0.21)
    p = np.array([0.0, 0.05, 0.5, 0.95, 1.0], np.float32)
    y = read(ember.bernoulli(ember.tensor(np.tile(p, (4000, 1)))))
    assert (y[:, 0] == 0).all() and (y[:, -1] == 1).all()
    for j in (1, 2, 3):
        within(y[:, j], float(p[j]), float(p[j] * (1 - p[j])))
    z = read(ember.zeros(N, dtype=ember.uint8).bernoulli_(ember.tensor([0.25])))
    assert z.dtype == np.uint8
    within(z.astype(np.float64), 0.25, 0.1875)


def test_continuous_fills_moments_and_supports() -> None:
    ember.manual_seed(12)
    u = read(fl(N).uniform_(-2.0, 5.0))
    assert u.min() >= -2.0 and u.max() < 5.0
    within(u, 1.5, 49 / 12)
    assert (read(fl(4).uniform_(3.0, 3.0)) == 3.0).all()
    z = read(fl(N, dtype=ember.float64).normal_(3.0, 2.0))
    within(z, 3.0, 4.0)
    var_within(z, 4.0)
    e = read(fl(N).exponential_(2.0))
    assert e.min() >= 0.0 and np.isfinite(e).all()
    within(e, 0.5, 0.25)
    var_within(e, 0.25, k=12.0)  # fourth moment 9x the normal's
    c = read(fl(N).cauchy_(1.0, 2.0))  # no moments: its quartiles are median -+ sigma
    within((np.abs(c - 1.0) < 2.0).astype(np.float64), 0.5, 0.25)
    within((c < 1.0).astype(np.float64), 0.5, 0.25)
    ln = read(fl(N).log_normal_(1.0, 0.5))
    assert ln.min() > 0.0
    within(np.log(ln), 1.0, 0.25)
    var_within(np.log(ln), 0.25)
    h = read(fl(N, dtype=ember.float16).exponential_())
    assert h.dtype == np.float16 and h.min() >= 0 and np.isfinite(h).all()
    within(h.astype(np.float64), 1.0, 1.0)


def test_geometric_counts_trials() -> None:
    ember.manual_seed(13)
    p = 0.25
    g = read(fl(N).geometric_(p))
    assert g.min() >= 1.0 and (g == np.round(g)).all()
    within(g, 1 / p, (1 - p) / p**2)
    within((g == 1).astype(np.float64), p, p * (1 - p))  # P(first trial succeeds) = p
    gi = read(ember.zeros(N, dtype=ember.int64).geometric_(0.5))
    assert gi.dtype == np.int64 and gi.min() >= 1
    within(gi.astype(np.float64), 2.0, 2.0)
    big = read(ember.zeros(8, dtype=ember.int32).geometric_(1e-12))  # counts beyond int32 clamp to its top
    assert (big > 2**30).all() and (big <= 2**31 - 1).all()


def test_random_covers_the_dtype_and_the_range() -> None:
    ember.manual_seed(14)
    f = read(fl(N).random_())
    assert f.min() >= 0 and f.max() <= 2**24 and (f == np.round(f)).all()
    within(f / 2**24, 0.5, 1 / 12)
    h = read(fl(N, dtype=ember.float16).random_())
    assert h.max() <= 2048 and h.min() >= 0
    b = read(ember.zeros(200, dtype=ember.bool).random_())
    assert b.dtype == np.bool_ and 0 < b.sum() < 200
    u8 = read(ember.zeros(N, dtype=ember.uint8).random_())
    assert set(np.unique(u8).tolist()) == set(range(256))
    r = read(ember.zeros(N, dtype=ember.int64).random_(3, 7))
    assert set(np.unique(r).tolist()) == {3, 4, 5, 6}
    counts = np.bincount(r - 3)
    assert np.abs(counts - N / 4).max() < 5 * math.sqrt(N * 0.25 * 0.75)
    assert set(np.unique(read(ember.zeros(500, dtype=ember.int32).random_(3))).tolist()) == {0, 1, 2}
    kw = read(ember.zeros(500, dtype=ember.int32).random_(**{"from": -2, "to": 0}))
    assert set(np.unique(kw).tolist()) == {-2, -1}
    top = read(ember.zeros(500, dtype=ember.int64).random_(2**62, None))
    assert top.min() >= 2**62


def test_multinomial_with_replacement_follows_the_weights() -> None:
    ember.manual_seed(15)
    w = np.array([1.0, 0.0, 2.0, 5.0, 0.0], np.float32)
    x = read(ember.multinomial(ember.tensor(w), N, replacement=True))
    assert x.dtype == np.int64 and x.shape == (N,)
    counts = np.bincount(x, minlength=5)
    assert counts[1] == 0 and counts[4] == 0
    for j, pj in enumerate(w / w.sum()):
        within((x == j).astype(np.float64), float(pj), float(pj * (1 - pj)))


def test_multinomial_without_replacement_is_sequential_sampling() -> None:
    ember.manual_seed(16)
    w = np.array([4.0, 1.0, 0.0, 3.0, 2.0], np.float32)
    rows = 5000
    x = read(ember.multinomial(ember.tensor(np.tile(w, (rows, 1))), 3))
    assert x.shape == (rows, 3)
    assert all(len(set(r)) == 3 for r in x.tolist()), "a row repeated a category"
    assert not (x == 2).any(), "a zero-weight category was drawn while positive ones remained"
    p = w / w.sum()
    for j in range(5):
        within((x[:, 0] == j).astype(np.float64), float(p[j]), float(p[j] * (1 - p[j])))
    # second draw given the first was category 0: in proportion to the remaining weights
    rest = x[x[:, 0] == 0, 1]
    q = np.array([0, 1, 0, 3, 2]) / 6
    for j in (1, 3, 4):
        within((rest == j).astype(np.float64), float(q[j]), float(q[j] * (1 - q[j])))
    full = read(ember.multinomial(ember.tensor([0.0, 5.0, 0.0]), 3))
    assert full[0] == 1 and sorted(full.tolist()) == [0, 1, 2]  # torch too draws zero weights last


def test_randperm_is_a_uniform_permutation() -> None:
    ember.manual_seed(17)
    for n in (0, 1, 5, 300):
        p = read(ember.randperm(n))
        assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(n))
    where0 = np.array([int(np.argmax(read(ember.randperm(4)) == 0)) for _ in range(2000)])
    for j in range(4):
        within((where0 == j).astype(np.float64), 0.25, 0.1875)
    assert read(ember.randperm(6, dtype=ember.float16)).dtype == np.float16
    assert sorted(read(ember.randperm(256, dtype=ember.uint8)).tolist()) == list(range(256))


def test_poisson_moments() -> None:
    ember.manual_seed(18)
    rates = np.array([0.0, 0.5, 4.0, 300.0, 1000.0])
    x = read(ember.poisson(ember.tensor(np.tile(rates, (4000, 1)), dtype=ember.float64)))
    assert x.dtype == np.float64 and (x == np.round(x)).all() and x.min() >= 0
    assert (x[:, 0] == 0).all()
    for j in range(1, 5):
        within(x[:, j], rates[j], rates[j])
        var_within(x[:, j], rates[j], k=6.0)


def test_normal_forms() -> None:
    ember.manual_seed(19)
    m = ember.tensor([[-1.0], [4.0]])
    x = read(ember.normal(m, ember.full((N // 2,), 0.5)))
    assert x.shape == (2, N // 2)
    within(x[0], -1.0, 0.25)
    within(x[1], 4.0, 0.25)
    var_within(x[1], 0.25)
    y = read(ember.normal(m.expand(2, N // 2), 2.0))
    within(y[1], 4.0, 4.0)
    z = read(ember.normal(3.0, ember.full((N,), 0.1)))
    within(z, 3.0, 0.01)
    f = ember.normal(0.0, 1.0, size=(N,), dtype=ember.float64)
    assert f.dtype == ember.float64
    within(read(f), 0.0, 1.0)
    assert read(ember.normal(1.5, 0.0, (3,))).tolist() == [1.5, 1.5, 1.5]


# ------------------------------------------------------------------------------ torch's shapes, dtypes, errors
SHAPES = [
    ("bernoulli", lambda m: m.bernoulli(m.zeros(2, 3, dtype=m.float64) + 0.5)),
    ("bernoulli.p", lambda m: m.bernoulli(m.zeros(4, dtype=m.float16), 0.2)),
    ("bernoulli_", lambda m: m.zeros(2, 3, dtype=m.int64).bernoulli_(m.zeros(3) + 0.5)),
    ("multinomial.1d", lambda m: m.multinomial(m.ones(5), 3)),
    ("multinomial.2d", lambda m: m.ones(2, 5).multinomial(7, True)),
    ("multinomial.empty", lambda m: m.multinomial(m.ones(0, 3), 2)),
    ("normal.tt", lambda m: m.normal(m.zeros(2, 1, dtype=m.float64), m.ones(3))),
    ("normal.tf", lambda m: m.normal(m.zeros(3, dtype=m.float16))),
    ("normal.ft", lambda m: m.normal(2.0, m.ones(2, 2))),
    ("normal.ff", lambda m: m.normal(0.0, 1.0, (2, 4))),
    ("randperm", lambda m: m.randperm(7)),
    ("randperm.dtype", lambda m: m.randperm(7, dtype=m.float32)),
    ("poisson", lambda m: m.poisson(m.ones(3, 2))),
    ("random_", lambda m: m.zeros(3, dtype=m.uint8).random_()),
    ("geometric_", lambda m: m.zeros(3, dtype=m.int32).geometric_(0.5)),
    ("uniform_", lambda m: m.zeros(3, dtype=m.float64).uniform_()),
]


@pytest.mark.parametrize("make", [pytest.param(f, id=n) for n, f in SHAPES])
def test_shapes_and_dtypes_match_torch(make: Callable[[Any], Any]) -> None:
    t, e = make(torch), make(ember)
    assert tuple(t.shape) == e.shape
    assert str(t.dtype).removeprefix("torch.") == str(e.dtype).removeprefix("ember.")


#: (name, call, ember's exception) for calls torch refuses
ERRORS = [
    ("bernoulli.int", lambda m: m.bernoulli(m.ones(3, dtype=m.int64)), DTypeError),
    ("bernoulli.range", lambda m: m.bernoulli(m.zeros(2) + 1.5), ValueError),
    ("bernoulli.nan", lambda m: m.bernoulli(m.zeros(2) * float("nan")), ValueError),
    ("bernoulli.p", lambda m: m.bernoulli(m.zeros(2), 1.5), ValueError),
    ("bernoulli_.shape", lambda m: m.zeros(3).bernoulli_(m.zeros(2, 3)), ShapeError),
    ("multinomial.dim", lambda m: m.multinomial(m.ones(2, 2, 2), 1), ShapeError),
    ("multinomial.0d", lambda m: m.multinomial(m.ones(()), 1), ShapeError),
    ("multinomial.zero_samples", lambda m: m.multinomial(m.ones(3), 0), ValueError),
    ("multinomial.too_many", lambda m: m.multinomial(m.ones(3), 4), ValueError),
    ("multinomial.negative", lambda m: m.multinomial(m.tensor([1.0, -1.0]), 1), ValueError),
    ("multinomial.inf", lambda m: m.multinomial(m.tensor([1.0, float("inf")]), 1), ValueError),
    ("multinomial.sum0", lambda m: m.multinomial(m.zeros(2, 3), 1, True), ValueError),
    ("multinomial.int", lambda m: m.multinomial(m.ones(3, dtype=m.int64), 1), DTypeError),
    ("normal.std_tensor", lambda m: m.normal(m.zeros(2), m.tensor([1.0, -1.0])), ValueError),
    ("normal.std", lambda m: m.normal(m.zeros(2), -1.0), ValueError),
    ("normal.no_size", lambda m: m.normal(0.0, 1.0), TypeError),
    ("normal.int_mean", lambda m: m.normal(m.zeros(2, dtype=m.int64), 1.0), DTypeError),
    ("normal.broadcast", lambda m: m.normal(m.zeros(2), m.ones(3)), ShapeError),
    ("normal_.std", lambda m: m.zeros(2).normal_(0.0, -1.0), ValueError),
    ("normal_.int", lambda m: m.zeros(2, dtype=m.int64).normal_(), DTypeError),
    ("uniform_.order", lambda m: m.zeros(2).uniform_(2.0, 1.0), ValueError),
    ("uniform_.int", lambda m: m.zeros(2, dtype=m.int64).uniform_(), DTypeError),
    ("exponential_.lambd", lambda m: m.zeros(2).exponential_(0.0), ValueError),
    ("exponential_.int", lambda m: m.zeros(2, dtype=m.int64).exponential_(), DTypeError),
    ("cauchy_.sigma", lambda m: m.zeros(2).cauchy_(0.0, 0.0), ValueError),
    ("log_normal_.std", lambda m: m.zeros(2).log_normal_(0.0, 0.0), ValueError),
    ("geometric_.p0", lambda m: m.zeros(2).geometric_(0.0), ValueError),
    ("geometric_.p1", lambda m: m.zeros(2).geometric_(1.0), ValueError),
    ("random_.order", lambda m: m.zeros(2).random_(2, 1), ValueError),
    ("random_.to", lambda m: m.zeros(2, dtype=m.uint8).random_(300), ValueError),
    ("random_.from", lambda m: m.zeros(2, dtype=m.uint8).random_(-1, 3), ValueError),
    ("random_.bool", lambda m: m.zeros(2, dtype=m.bool).random_(3), ValueError),
    ("randperm.negative", lambda m: m.randperm(-1), ValueError),
    ("randperm.bool", lambda m: m.randperm(3, dtype=m.bool), DTypeError),
    ("randperm.half", lambda m: m.randperm(3000, dtype=m.float16), ValueError),
    ("randperm.uint8", lambda m: m.randperm(300, dtype=m.uint8), ValueError),
]


@pytest.mark.parametrize("call,exc", [pytest.param(f, e, id=n) for n, f, e in ERRORS])
def test_errors_where_torch_raises(call: Callable[[Any], Any], exc: type[Exception]) -> None:
    with pytest.raises((RuntimeError, TypeError, ValueError, NotImplementedError)):
        call(torch)
    with pytest.raises(exc):
        call(ember)


# ------------------------------------------------------------------------------ gradients
def test_outputs_require_grad_with_zero_gradient(autodiff_device: ember.Device) -> None:
    p = ember.full((4,), 0.5, device=autodiff_device, requires_grad=True)
    b = ember.bernoulli(p)
    assert b.requires_grad  # as torch: BernoulliBackward with a zero gradient
    (b * 3.0).sum().backward()
    np.testing.assert_array_equal(read(p.grad), np.zeros(4, np.float32))
    m = ember.zeros(3, device=autodiff_device, requires_grad=True)
    s = ember.ones(3, device=autodiff_device, requires_grad=True)
    ember.normal(m, s).sum().backward()
    np.testing.assert_array_equal(read(m.grad), np.zeros(3, np.float32))
    np.testing.assert_array_equal(read(s.grad), np.zeros(3, np.float32))
    with ember.no_grad():
        assert not ember.bernoulli(p).requires_grad


def test_inplace_fills_follow_the_leaf_rules(autodiff_device: ember.Device) -> None:
    x = ember.zeros(5, device=autodiff_device, requires_grad=True)
    with pytest.raises(AutodiffError):
        x.uniform_()
    with ember.no_grad():
        x.normal_()
    assert x.is_leaf and x.requires_grad and np.isfinite(read(x)).all()
    y = x * 2.0  # a non-leaf: stays in the graph with a zero gradient, as torch's fills
    y.exponential_()
    assert y.requires_grad and (read(y) >= 0).all()
    y.sum().backward()
    np.testing.assert_array_equal(read(x.grad), np.zeros(5, np.float32))
    obj = ember.zeros(3, device=autodiff_device)
    assert obj.random_(5) is obj  # in-place: the same object, rebound
