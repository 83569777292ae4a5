"""GPU-only tests: every test here is skipped unless a CUDA device starts on this machine."""

from __future__ import annotations

import pytest


def _cuda_client():
    try:
        from ember.cube.runtime.client import get_client

        return get_client("cuda", (0,)), None
    except Exception as e:  # noqa: BLE001 - any failure means "no GPU here"
        return None, f"{type(e).__name__}: {e}".splitlines()[0]


@pytest.fixture(scope="session")
def cuda_client():
    client, why = _cuda_client()
    if client is None:
        pytest.skip(f"no CUDA device: {why}")
    return client
