"""Shared fixtures: devices (from ``tests/devices.py``) and a seeded random generator.

Fixtures parametrised over devices:

* ``device``: every selected device;
* ``autodiff_device``: the autodiff ones;
* ``plain_device``: the ones without autodiff;
* ``autodiff_none_device``: autodiff devices with ``checkpointing="none"``.

``rng`` is a numpy Generator seeded from a fresh random seed on every run (or from
``EMBER_TEST_SEED``); a failing test prints the seed and the command that reproduces it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import numpy as np
import pytest
from devices import device_params
from hypothesis import settings

# Property tests: moderate example counts so the suite stays fast; deadline off because the
# first call on a device may initialise its runtime. ``--hypothesis-profile=thorough`` for more.
settings.register_profile("ember", deadline=None, max_examples=50)
settings.register_profile("thorough", deadline=None, max_examples=400)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ember"))

_DEVICE_FIXTURES = {
    "device": "all",
    "autodiff_device": "autodiff",
    "plain_device": "plain",
    "autodiff_none_device": "autodiff_none",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for argname, which in _DEVICE_FIXTURES.items():
        if argname in metafunc.fixturenames:
            metafunc.parametrize(argname, device_params(which))


_SEED_KEY = pytest.StashKey[int]()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> Iterator[np.random.Generator]:
    env = os.environ.get("EMBER_TEST_SEED")
    seed = int(env) if env else secrets.randbits(32)
    request.node.stash[_SEED_KEY] = seed
    yield np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    seed = item.stash.get(_SEED_KEY, None)
    if rep.failed and seed is not None:
        rep.sections.append((
            "ember random seed",
            f"seed={seed}; reproduce with: EMBER_TEST_SEED={seed} python -m pytest '{item.nodeid}'",
        ))
