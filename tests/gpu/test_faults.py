"""GPU faults (issue 21, item 9), run on the H200 through ``scripts/test-gpu``.

* Out of memory: an allocation past the device's memory raises ``ember.errors.OutOfMemoryError``
  (with the size asked for and what the pool holds) from the Tensor API and leaves the device
  usable; an allocation that fits only once the pool's cached blocks are given back succeeds
  (the pool releases them and retries); ``ember.empty_cache()`` gives the cached blocks back.
* An illegal address in a kernel (a ``@cube`` kernel writing 4 GiB past its array) loses the
  context: the sync after it raises ``DeviceFaultError`` naming the kernel, every later call on
  the device raises the same error at once, and the CPU devices keep working. In a subprocess:
  the context stays lost for the rest of the process.

``tests/unit/test_fake_cuda_faults.py`` checks the same paths on the fake driver, in CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ember
from ember import Device
from ember.errors import OutOfMemoryError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fusion", [True, False])
def test_out_of_memory_from_the_tensor_api_then_usable(cuda_client, fusion):
    dev = Device.cuda(fusion=fusion)
    total = cuda_client.info.total_memory
    keep = ember.ones(1 << 20, device=dev)  # a live tensor survives the failure
    keep.sum().item()
    with pytest.raises(OutOfMemoryError) as info:
        ember.empty(total // 2, device=dev).numpy()  # float32: twice the device memory
    err = info.value
    assert err.requested >= 2 * total and err.allocated >= 4 << 20
    assert str(err.requested) in str(err) and "CUDA_ERROR_OUT_OF_MEMORY" in str(err)
    assert (keep * 2).sum().item() == 2 * (1 << 20)
    x = ember.rand(256, 256, device=dev)
    assert abs((x @ x).sum().item()) > 0


def test_an_allocation_that_fits_after_releasing_the_cache_succeeds(cuda_client):
    """A cached block of about half the device, then a request of a larger size class: the
    two do not fit together, so the second fits only once the cached block is given back, which
    the pool does before its one retry -- no error reaches the caller."""
    from ember.cube.runtime.pool import size_class

    dev = Device.cuda(fusion=False)
    pool = cuda_client.pool
    ember.empty_cache()
    total = cuda_client.info.total_memory
    n = int(total * 0.45) // 4
    first, second = size_class(4 * n), size_class(4 * (n + n // 8))
    assert first < second < 0.7 * total < first + second  # (the pool's classes are 25% apart)
    t = ember.empty(n, device=dev)
    t[0].item()
    del t
    assert pool.cached_bytes >= 4 * n
    u = ember.empty(n + n // 8, device=dev)  # another size class: the cached block does not serve it
    u[0].item()
    assert pool.cached_bytes == 0, "the cached block went back to the driver before the retry"
    del u
    ember.empty_cache()
    assert (ember.ones(16, device=dev) * 3).sum().item() == 48


def test_empty_cache_releases_cuda_blocks(cuda_client):
    dev = Device.cuda(fusion=False)
    t = ember.zeros(1 << 24, device=dev)
    t.numpy()
    del t
    assert cuda_client.pool.cached_bytes >= 4 << 24
    assert ember.empty_cache() >= 4 << 24
    assert cuda_client.pool.cached_bytes == 0


_ILLEGAL_ADDRESS = textwrap.dedent(
    """
    import json
    import numpy as np
    import ember
    from ember import Device, cube
    from ember.cube.runtime.client import get_client
    from ember.cube.runtime.tensor import CubeTensor, contiguous_strides
    from ember.errors import DeviceFaultError

    @cube.kernel
    def scribble_far(out: cube.Array[cube.f32]):
        i = cube.ABSOLUTE_POS
        out[i + 1073741824] = 1.0  # 4 GiB past a 1 KiB array: nothing is mapped there

    client = get_client("cuda", (0,))
    dev = Device.cuda(fusion=False)
    before = ember.tensor(np.arange(8, dtype=np.float32), device=dev)
    host_copy = before.numpy()
    zeros = np.zeros(256, np.float32)  # a 1 KiB array, below the Tensor API
    out = CubeTensor(client, client.create(zeros), zeros.shape, contiguous_strides(zeros.shape), 0, ember.float32)
    r = {}

    def caught(fn):
        try:
            fn()
        except DeviceFaultError as e:
            return {"type": type(e).__name__, "kernel": e.kernel, "code": e.code, "name": e.name,
                    "call": e.call, "text": str(e)}
        except BaseException as e:  # noqa: BLE001
            return {"type": type(e).__name__, "text": str(e)[:500]}
        return None

    def fault():
        scribble_far.launch(client, cube.CubeCount(1), cube.CubeDim(32), out)
        client.sync()

    r["fault"] = caught(fault)
    r["later"] = {
        "read": caught(lambda: before.numpy()),
        "op": caught(lambda: (before * 2).numpy()),
        "fused_op": caught(lambda: ember.ones(4, device=Device.cuda()).sum().item()),
        "alloc": caught(lambda: ember.zeros(1 << 20, device=dev).numpy()),
        "sync": caught(lambda: ember.sync(dev)),
    }
    r["empty_cache"] = caught(lambda: ember.empty_cache())
    r["host_copy"] = host_copy.tolist()
    r["cpu"] = (ember.tensor([1.0, 2.0], device=Device.cpu()) * 2).tolist()
    print(json.dumps(r))
    """
)


def test_an_illegal_address_names_the_kernel_and_loses_only_the_device(cuda_client, tmp_path):
    script = tmp_path / "scribble.py"  # a file: ``@cube.kernel`` reads its function's source
    script.write_text(_ILLEGAL_ADDRESS)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, f"the process crashed (rc {p.returncode}):\n{p.stderr[-4000:]}"
    r = json.loads(p.stdout.strip().splitlines()[-1])
    f = r["fault"]
    assert f is not None and f["type"] == "CudaFaultError", f
    assert f["kernel"].startswith("scribble_far_f32_"), f
    assert f"in kernel {f['kernel']}" in f["text"]
    # an illegal address, an address in no space (717: what an H200 reports for this write),
    # or on some drivers "launch failed"
    assert f["code"] in (700, 717, 719), f
    for what, later in r["later"].items():
        assert later is not None and later["type"] == "CudaFaultError", (what, later)
        assert (later["kernel"], later["code"], later["call"]) == (f["kernel"], f["code"], f["call"]), what
    assert r["empty_cache"] is None, "empty_cache skips a lost device"
    assert r["host_copy"] == list(range(8))
    assert r["cpu"] == [2.0, 4.0]
