"""The dtype-skip hook: a case whose dtype the device cannot hold at all is skipped, not failed.

A device says what it holds through its Cube backend's ``supports(dtype)`` (a WGSL device has
no 64-bit types, for one). Cases parametrised by ``dtype`` are skipped up front; any other
case that meets ``UnsupportedDTypeError`` (an int64 index tensor on such a device) is turned
into a skip naming the dtype. Every other error still fails the case.
"""

from __future__ import annotations

from typing import Any

import pytest

import ember
from ember.errors import UnsupportedDTypeError


def device_holds(device: Any, dtype_name: str) -> bool:
    """Whether ``device`` can hold tensors of the ember dtype called ``dtype_name``."""
    d = getattr(ember, dtype_name, None)
    if d is None or not isinstance(device, ember.Device):
        return True
    bk = device.backend()
    while bk is not None:
        f = getattr(bk, "supports", None)
        if f is not None:
            return bool(f(d))
        bk = getattr(bk, "inner", None)
    return True


@pytest.fixture(autouse=True)
def _skip_dtypes_the_device_cannot_hold(request: pytest.FixtureRequest) -> None:
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    device, dtype = params.get("device"), params.get("dtype")
    if isinstance(dtype, str) and device is not None and not device_holds(device, dtype):
        pytest.skip(f"{device!r} cannot hold {dtype} tensors")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and isinstance(exc[1], UnsupportedDTypeError):
        outcome.force_exception(pytest.skip.Exception(f"device cannot hold a dtype: {exc[1]}", _use_item_location=True))
