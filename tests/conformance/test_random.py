"""Random creation: ``manual_seed`` makes streams reproducible, every device yields the same
values for the same seed, shape and dtype (the counter-based generator is specified), and the
distributions are what they say."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from devices import reference_device

import ember

from ._support import FLOATS, edt, name_of, read

Draw = Callable[[ember.Device, Any], Any]

# (name, draw on a device with a dtype, dtypes)
DRAWS: list[tuple[str, Draw, tuple[str, ...]]] = [
    ("rand", lambda d, dt: ember.rand(3, 257, device=d, dtype=dt), FLOATS),
    ("rand.tuple", lambda d, dt: ember.rand((2, 5), device=d, dtype=dt), FLOATS),
    ("randn", lambda d, dt: ember.randn(4, 129, device=d, dtype=dt), FLOATS),
    ("randint", lambda d, dt: ember.randint(-5, 17, (7, 33), device=d, dtype=dt), ("int64", "int32")),
    ("randint.high", lambda d, dt: ember.randint(10, (100,), device=d, dtype=dt), ("int64", "uint8")),
    ("rand_like", lambda d, dt: ember.rand_like(ember.zeros(2, 3, device=d, dtype=dt)), FLOATS),
    ("randn_like", lambda d, dt: ember.randn_like(ember.zeros(5, device=d, dtype=dt)), FLOATS),
]
DRAW_CASES = [pytest.param(f, dt, id=f"{n}-{dt}") for n, f, dts in DRAWS for dt in dts]


@pytest.mark.parametrize("draw,dtype", DRAW_CASES)
def test_manual_seed_reproduces_stream(draw: Draw, dtype: str, device: ember.Device,
                                       rng: np.random.Generator) -> None:
    seed = int(rng.integers(0, 2**31))
    ember.manual_seed(seed)
    a, b = draw(device, edt(dtype)), draw(device, edt(dtype))
    ember.manual_seed(seed)
    a2, b2 = draw(device, edt(dtype)), draw(device, edt(dtype))
    assert name_of(a.dtype) == dtype and a.device == device
    np.testing.assert_array_equal(read(a), read(a2))
    np.testing.assert_array_equal(read(b), read(b2))
    assert not np.array_equal(read(a), read(b)), "two draws after one seed gave the same values"
    ember.manual_seed(seed + 1)
    assert not np.array_equal(read(draw(device, edt(dtype))), read(a)), "another seed gave the same values"


@pytest.mark.parametrize("draw,dtype", DRAW_CASES)
def test_same_values_on_every_device(draw: Draw, dtype: str, device: ember.Device,
                                     rng: np.random.Generator) -> None:
    seed = int(rng.integers(0, 2**31))
    ember.manual_seed(seed)
    ref = [read(draw(reference_device(), edt(dtype))) for _ in range(2)]
    ember.manual_seed(seed)
    got = [read(draw(device, edt(dtype))) for _ in range(2)]
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r, err_msg=f"{device} differs from the reference device")


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_in_unit_interval(dtype: str, device: ember.Device, rng: np.random.Generator) -> None:
    ember.manual_seed(int(rng.integers(0, 2**31)))
    x = read(ember.rand(20000, device=device, dtype=edt(dtype)))
    assert x.min() >= 0.0 and x.max() < 1.0, f"rand outside [0, 1): min {x.min()}, max {x.max()}"
    assert abs(x.mean() - 0.5) < 0.02 and abs(x.std() - np.sqrt(1 / 12)) < 0.02
    assert len(np.unique(x)) > min(1000, 0.1 * x.size) or dtype in ("float16", "bfloat16")


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_moments(dtype: str, device: ember.Device, rng: np.random.Generator) -> None:
    ember.manual_seed(int(rng.integers(0, 2**31)))
    x = read(ember.randn(20000, device=device, dtype=edt(dtype)))
    assert np.isfinite(x).all()
    assert abs(x.mean()) < 0.05 and abs(x.std() - 1.0) < 0.05
    assert 0.62 < np.mean(np.abs(x) < 1.0) < 0.74  # about 68% within one sigma
    assert abs(float(np.mean(x**3))) < 0.15  # symmetric


def test_randint_range_and_coverage(device: ember.Device, rng: np.random.Generator) -> None:
    ember.manual_seed(int(rng.integers(0, 2**31)))
    x = read(ember.randint(-3, 4, (5000,), device=device))
    assert x.dtype == np.int64
    assert x.min() >= -3 and x.max() <= 3
    assert set(np.unique(x).tolist()) == set(range(-3, 4))
    counts = np.bincount(x + 3)
    assert counts.min() > 5000 / 7 * 0.8


def test_random_shapes(device: ember.Device) -> None:
    assert ember.rand(2, 3, device=device).shape == (2, 3)
    assert ember.randn((4,), device=device).shape == (4,)
    assert ember.rand((), device=device).shape == ()
    assert ember.randint(0, 3, (2, 0), device=device).shape == (2, 0)
