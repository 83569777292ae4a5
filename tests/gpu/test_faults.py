"""GPU faults (issue 21, item 9), run on the H200 through ``scripts/test-gpu``: an allocation past
the device's memory raises ``ember.errors.OutOfMemoryError`` from the Tensor API and leaves the
device usable; ``ember.empty_cache()`` gives the pool's cached blocks back."""

from __future__ import annotations

import pytest

import ember
from ember import Device
from ember.errors import OutOfMemoryError


@pytest.mark.parametrize("fusion", [True, False])
def test_out_of_memory_from_the_tensor_api_then_usable(cuda_client, fusion):
    dev = Device.cuda(fusion=fusion)
    total = cuda_client.info.total_memory
    keep = ember.ones(1 << 20, device=dev)  # a live tensor survives the failure
    with pytest.raises(OutOfMemoryError):
        ember.empty(total // 2, device=dev).numpy()  # float32: twice the device memory
    assert (keep * 2).sum().item() == 2 * (1 << 20)
    x = ember.rand(256, 256, device=dev)
    assert abs((x @ x).sum().item()) > 0


def test_empty_cache_releases_cuda_blocks(cuda_client):
    dev = Device.cuda(fusion=False)
    t = ember.zeros(1 << 24, device=dev)
    t.numpy()
    del t
    assert cuda_client.pool.cached_bytes >= 4 << 24
    assert ember.empty_cache() >= 4 << 24
    assert cuda_client.pool.cached_bytes == 0
