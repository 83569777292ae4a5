"""Property tests on devices that cannot hold some dtypes: examples of such a dtype are
rejected in ``make`` (``assume``); a test left with nothing it can run is skipped."""

from __future__ import annotations

from typing import Any

import pytest

from ember.errors import UnsupportedDTypeError


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and isinstance(exc[1], UnsupportedDTypeError):
        outcome.force_exception(pytest.skip.Exception(f"device cannot hold a dtype: {exc[1]}", _use_item_location=True))
