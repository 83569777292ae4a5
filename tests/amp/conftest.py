"""Fixtures of the mixed-precision tests.

``amp_device`` runs a test on the autodiff devices that stand for each autocast device type
(Flex and Cube CPU for ``"cpu"``, wgpu, CUDA), among those ``EMBER_TEST_DEVICES`` selects;
``amp_dtype(device)`` is the dtype the test autocasts to there. A device that cannot hold that
dtype is skipped up front. ``scaler_device`` is the same list for the GradScaler tests (which
need no half dtype).

Any case meeting ``UnsupportedDTypeError`` is turned into a skip (as in the conformance suite);
every other error fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from devices import device_cases

import ember
from ember.amp.autocast_mode import device_type_of
from ember.errors import UnsupportedDTypeError

#: one autodiff device per backend family: the other variants (eager, lazy, balanced
#: checkpointing) run the same casts through the same layers
AMP_DEVICES = ("flex.autodiff", "cpu.autodiff", "wgpu.cpu.autodiff", "cuda.autodiff")


def _params() -> list[Any]:
    out = []
    for c in device_cases():
        if c.name not in AMP_DEVICES:
            continue
        marks = [pytest.mark.skip(reason=f"device {c.name} unavailable: {c.unavailable}")] if c.unavailable else []
        out.append(pytest.param(c.device, id=c.name, marks=marks))
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name in ("amp_device", "scaler_device"):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, _params())


def autocast_type(device: ember.Device) -> str:
    """The autocast device type of tensors on ``device``."""
    return device_type_of(ember.zeros(1, device=device))


def amp_dtype(device: ember.Device) -> ember.DType:
    """The dtype the tests autocast to on ``device`` (the device type's default)."""
    return ember.get_autocast_dtype(autocast_type(device))


def holds(device: ember.Device, d: ember.DType) -> bool:
    bk = device.backend()
    while bk is not None:
        f = getattr(bk, "supports", None)
        if f is not None:
            return bool(f(d))
        bk = getattr(bk, "inner", None)
    return True


@pytest.fixture(autouse=True)
def _skip_devices_without_the_dtype(request: pytest.FixtureRequest) -> None:
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    device = params.get("amp_device")
    if device is not None and not holds(device, amp_dtype(device)):
        pytest.skip(f"{device!r} cannot hold {amp_dtype(device)} tensors")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and isinstance(exc[1], UnsupportedDTypeError):
        outcome.force_exception(pytest.skip.Exception(f"device cannot hold a dtype: {exc[1]}", _use_item_location=True))
