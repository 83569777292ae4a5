"""GPU faults on the fake CUDA driver (``bench/fake_cuda``), in CI without a GPU (issue 21,
item 9): out of memory raises ``OutOfMemoryError`` after the pool released its cached blocks and
retried once, and leaves the device usable; an illegal address reported at a sync raises a
``DeviceFaultError`` naming the last kernel launched, and every later call on the device raises
the same error at once, without a crash, while the other devices keep working.

The fake injects the faults at the driver's level (``FakeDriver.memory_limit``, ``fail_allocs``,
``inject_fault``), so everything above it -- the Tensor API, fusion drains, the pool, the CUDA
client's error paths -- runs as on a GPU. Kernels never run on the fake: "usable" is checked with
what needs no kernel (uploads read back exactly) and with launches and reads that succeed.
``tests/gpu/test_faults.py`` checks the same on a real GPU.

Each scenario runs in a subprocess: the fake replaces the driver for the whole process, and a
lost context is lost for good."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is not installed")
if shutil.which(os.environ.get("CC", "gcc")) is None:
    pytest.skip("no C compiler for the fake libcuda", allow_module_level=True)

_PRELUDE = r"""
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
from fake_cuda import driver as fake_driver
import numpy as np
import ember
from ember.errors import OutOfMemoryError, DeviceFaultError
from ember.cube.runtime.client import get_client

fake = fake_driver.install(sys.argv[2])
rng = np.random.default_rng()
out = {}

def caught(fn):
    # what fn raised: its type's names and its fields, or None
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return {"types": [c.__name__ for c in type(e).__mro__], "text": str(e),
                "fields": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(e).items()
                           if isinstance(v, (int, str, tuple, type(None)))}}
    return None
"""

_OOM = _PRELUDE + r"""
MiB = 1 << 20
for label, dev in (("eager", ember.Device.cuda(fusion=False)), ("fused", ember.Device.cuda())):
    pool = get_client("cuda", (0,)).pool
    ember.empty_cache()
    fake.memory_limit = fake.device_bytes + 64 * MiB
    r = {}
    # 40 MiB used and dropped: the pool keeps the block cached
    t = ember.zeros(10 * MiB, device=dev)
    t.numpy()
    del t
    r["cached_before"] = pool.cached_bytes
    # 32 MiB of another size class: does not fit beside the cached block; the pool releases
    # it and retries, and the allocation succeeds without an error
    allocs0, frees0 = fake.calls.get("cuMemAlloc", 0), fake.calls.get("cuMemFree", 0)
    keep = ember.tensor(np.arange(8 * MiB, dtype=np.float32), device=dev)
    r["retry_error"] = caught(lambda: keep.numpy())
    r["retry_allocs"] = fake.calls.get("cuMemAlloc", 0) - allocs0
    r["retry_frees"] = fake.calls.get("cuMemFree", 0) - frees0
    r["cached_after_retry"] = pool.cached_bytes
    # 40 MiB more beside the live 32 MiB: out of memory even after the release
    r["oom"] = caught(lambda: ember.zeros(10 * MiB, device=dev).numpy())
    r["allocated_after"] = pool.allocated_bytes
    # the device is usable: the live tensor reads back, new uploads and launches work
    back = keep.numpy()
    r["keep_intact"] = bool((back == np.arange(8 * MiB, dtype=np.float32)).all())
    x = rng.standard_normal(64).astype(np.float32)
    tx = ember.tensor(x, device=dev)
    r["upload_intact"] = tx.numpy().tolist() == x.tolist()
    launches0 = fake.counts()["launches"]
    r["op_error"] = caught(lambda: (tx + tx).sum().item())
    r["op_launched"] = fake.counts()["launches"] - launches0
    # a driver refusal that a release cures (one failed call), and one it does not (two)
    fake.memory_limit = fake_driver.TOTAL_MEMORY
    del keep
    r["cached_before_one_failure"] = pool.cached_bytes
    fake.fail_allocs(1)
    r["one_failure"] = caught(lambda: ember.ones(3 * MiB, device=dev).numpy())
    r["cached_after_one_failure"] = pool.cached_bytes  # the new 12 MiB block only (its tensor died)
    fake.fail_allocs(2)
    r["two_failures"] = caught(lambda: ember.ones(5 * MiB, device=dev).numpy())
    r["after_two_failures"] = caught(lambda: ember.ones(5 * MiB, device=dev).numpy())
    out[label] = r
out["gaps"] = sorted(set(fake.gaps))
print(json.dumps(out))
"""

_ILLEGAL_ADDRESS = _PRELUDE + r"""
fused, eager = ember.Device.cuda(), ember.Device.cuda(fusion=False)
server = get_client("cuda", (0,)).server
x = rng.standard_normal(16).astype(np.float32)
a, b = ember.tensor(x, device=fused), ember.tensor(x, device=fused)
e = ember.tensor(x, device=eager)


def step():
    # three launches before the read syncs: two eager ones (``launch_ptrs``), then the fused
    # block's replayed launch (the replay closure) as the read drains it
    u = (a * b).sum()
    v = e * 2.0
    w = v + e
    return u.item(), w


for _ in range(4):  # plan, capture, then replays: the fused launch below is a replayed one
    step()
    (a + b).numpy()
fake.inject_fault(700)  # "a kernel wrote out of bounds": the next wait reports it
launches0 = fake.counts()["launches"]
r = {}
r["fault"] = caught(step)
r["launched"] = fake.recent_launches(fake.counts()["launches"] - launches0)
r["sticky"] = fake.sticky
compiles0 = server.compiles
launches0 = fake.counts()["launches"]
later = {
    "read": lambda: a.numpy(),
    "item": lambda: a[3].item(),
    "replayed_op": lambda: (a + b).numpy(),
    "eager_op": lambda: (e * 2.0).numpy(),
    "new_kernel": lambda: (a.exp() * 3.0 - b).numpy(),
    "upload": lambda: ember.tensor(x, device=fused).numpy(),
    "alloc": lambda: ember.zeros(1 << 22, device=eager).numpy(),
    "sync": lambda: ember.sync(fused),
    "memory": lambda: ember.empty_cache(),
}
r["later"] = {k: caught(fn) for k, fn in later.items()}
r["later_compiles"] = server.compiles - compiles0
r["later_launches"] = fake.counts()["launches"] - launches0
# the other devices are untouched
r["flex"] = ember.tensor([1.0, 2.0, 3.0]).sum().item()
r["cpu"] = (ember.tensor([1.0, 2.0], device=ember.Device.cpu()) * 2).tolist()
# a host copy read before the fault stays good
out.update(r)
out["gaps"] = sorted(set(fake.gaps))
print(json.dumps(out))
"""


def _run(script: str, tmp: Path) -> dict:
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("EMBER_TEST_DEVICES", None)
    r = subprocess.run([sys.executable, "-c", script, str(ROOT / "bench"), str(tmp)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, f"the process failed (rc {r.returncode}):\n{r.stderr[-4000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fake-cuda-faults")  # one store: the second scenario compiles less


@pytest.fixture(scope="module")
def oom(shared: Path) -> dict:
    return _run(_OOM, shared)


@pytest.fixture(scope="module")
def illegal(shared: Path) -> dict:
    return _run(_ILLEGAL_ADDRESS, shared)


MiB = 1 << 20


@pytest.mark.parametrize("mode", ["eager", "fused"])
def test_an_allocation_that_fits_after_releasing_the_cache_succeeds(oom: dict, mode: str) -> None:
    r = oom[mode]
    assert r["cached_before"] >= 40 * MiB, "the dropped tensor's block stays cached"
    assert r["retry_error"] is None
    assert r["retry_allocs"] == 2, "one refused cuMemAlloc, then the retry"
    assert r["retry_frees"] >= 1, "the cached block went back to the driver between the two"
    assert r["cached_after_retry"] == 0


@pytest.mark.parametrize("mode", ["eager", "fused"])
def test_out_of_memory_raises_a_typed_error_with_the_sizes(oom: dict, mode: str) -> None:
    r = oom[mode]
    err = r["oom"]
    assert err is not None and "OutOfMemoryError" in err["types"] and "MemoryError" in err["types"]
    f = err["fields"]
    assert f["requested"] >= 40 * MiB
    assert f["allocated"] >= 32 * MiB, "what the pool holds for live tensors"
    assert f["released"] == 0, "nothing was cached any more"
    assert f["device"] == "cuda device"
    assert str(f["requested"]) in err["text"] and str(f["allocated"]) in err["text"]
    assert "CUDA_ERROR_OUT_OF_MEMORY" in err["text"]


@pytest.mark.parametrize("mode", ["eager", "fused"])
def test_the_device_is_usable_after_out_of_memory(oom: dict, mode: str) -> None:
    r = oom[mode]
    assert r["keep_intact"] and r["upload_intact"]
    assert r["op_error"] is None and r["op_launched"] >= 1
    assert r["one_failure"] is None, "a refusal the release cures is retried and succeeds"
    assert r["cached_before_one_failure"] >= 32 * MiB
    assert r["cached_after_one_failure"] == 12 * MiB, "the cached blocks went back before the retry"
    err = r["two_failures"]
    assert err is not None and "OutOfMemoryError" in err["types"]
    assert r["after_two_failures"] is None, "out of memory is not sticky"


def test_oom_hits_no_gap_of_the_fake_driver(oom: dict) -> None:
    assert oom["gaps"] == []


def test_an_illegal_address_names_the_last_kernel_launched(illegal: dict) -> None:
    err = illegal["fault"]
    assert err is not None, "the read after the fault must raise"
    assert {"DeviceFaultError", "CudaFaultError", "CudaError", "RuntimeError"} <= set(err["types"])
    f = err["fields"]
    assert illegal["launched"], "the op launched a kernel before its read synced"
    last = illegal["launched"][-1]
    assert f["kernel"] == last and f["code"] == 700 and f["name"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert f"in kernel {last}" in err["text"]
    assert f["device"] == "cuda:0" and f["call"].startswith("cuStreamSynchronize")
    # the fault lies in one of the launches since the last sync: all of them are listed
    assert len(illegal["launched"]) == 3 and f["since"] == 3
    assert f["recent"] == illegal["launched"], "oldest first, as launched"
    assert f["kernel"].startswith("fused_"), "the fused block's replayed launch came last"
    earlier = ", ".join(reversed(illegal["launched"][:-1]))
    assert f"or one of the 2 launched before it since the last sync, newest first: {earlier})" in err["text"]
    assert illegal["sticky"] == 700


def test_every_later_call_raises_the_same_error_at_once(illegal: dict) -> None:
    first = illegal["fault"]["fields"]
    for what, err in illegal["later"].items():
        if what == "memory":  # empty_cache skips a lost device's pool: it never raises
            assert err is None
            continue
        assert err is not None, f"{what} after the fault did not raise"
        assert "DeviceFaultError" in err["types"], (what, err["text"])
        f = err["fields"]
        assert (f["kernel"], f["code"], f["call"], f["recent"]) == (
            first["kernel"], first["code"], first["call"], first["recent"]), what
        assert "raised again by" in err["text"]
    assert illegal["later_compiles"] == 0, "a lost device compiles nothing"
    assert illegal["later_launches"] == 0, "nothing more reaches the device"


def test_other_devices_keep_working_after_a_cuda_fault(illegal: dict) -> None:
    assert illegal["flex"] == 6.0
    assert illegal["cpu"] == [2.0, 4.0]
    assert illegal["gaps"] == []
