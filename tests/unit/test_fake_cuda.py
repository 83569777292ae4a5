"""The CUDA runtime's host path on a fake driver (``bench/fake_cuda``): everything above the
driver -- fusion, replays, the CUDA client's launches, staged reads and pool -- runs as on a
GPU, on machines without one. Kernels never run there, so the checks are the driver calls each
op makes (the per-op budget of issue 7: a fused tiny round trip launches once) and data that
needs no kernel: uploads read back whole, and elements read through views at offsets.

Runs in a subprocess: the fake replaces the driver for the whole process, and nothing else in
the test session may see a "CUDA device" there."""

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

_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from fake_cuda import driver as fake_driver
import numpy as np
import ember

fake = fake_driver.install(sys.argv[2])
rng = np.random.default_rng()
x = rng.standard_normal(16).astype(np.float32)
y = rng.standard_normal((3, 5)).astype(np.float32)
out = {}
for name, d in (("fused", ember.Device.cuda()), ("eager", ember.Device.cuda(fusion=False))):
    a = ember.tensor(x, device=d)
    b = ember.tensor(x, device=d)
    m = ember.tensor(y, device=d)
    calls = {
        "round_trip": lambda: (a + b).sum().item(),
        "add_numpy": lambda: (a + b).numpy(),
        "element": lambda: a[3].item(),
    }
    got = {}
    for op, fn in calls.items():
        for _ in range(4):  # plan, capture, then replays
            fn()
        c0 = fake.counts()
        fn()
        c1 = fake.counts()
        got[op] = {k: c1[k] - c0[k] for k in ("launches", "htod", "dtoh", "syncs")}
    out[name] = {
        "calls": got,
        "upload": a.numpy().tolist(),
        "elements": [a[i].item() for i in (0, 7, 15)],
        "matrix": [m[i, j].item() for i, j in ((0, 0), (1, 4), (2, 2))],
        "row": m[2].numpy().tolist(),
    }
out["gaps"] = sorted(fake.gaps)
out["x"] = x.tolist()
out["y"] = y.tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("fake-cuda")
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("EMBER_TEST_DEVICES", None)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(ROOT / "bench"), str(tmp)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_fake_driver_serves_every_call(report: dict) -> None:
    assert report["gaps"] == []


@pytest.mark.parametrize("mode", ["fused", "eager"])
def test_uploads_and_elements_read_back_without_kernels(report: dict, mode: str) -> None:
    got, x, y = report[mode], report["x"], report["y"]
    assert got["upload"] == x
    assert got["elements"] == [x[0], x[7], x[15]]
    assert got["matrix"] == [y[0][0], y[1][4], y[2][2]]
    assert got["row"] == y[2]


def test_a_fused_round_trip_launches_once_and_syncs_once(report: dict) -> None:
    calls = report["fused"]["calls"]
    assert calls["round_trip"] == {"launches": 1, "htod": 0, "dtoh": 1, "syncs": 1}
    assert calls["add_numpy"] == {"launches": 1, "htod": 0, "dtoh": 1, "syncs": 1}
    assert calls["element"] == {"launches": 0, "htod": 0, "dtoh": 1, "syncs": 1}, "a view launches nothing"


def test_eager_ops_launch_once_each(report: dict) -> None:
    calls = report["eager"]["calls"]
    assert calls["round_trip"] == {"launches": 2, "htod": 0, "dtoh": 1, "syncs": 1}
    assert calls["add_numpy"] == {"launches": 1, "htod": 0, "dtoh": 1, "syncs": 1}
    assert calls["element"] == {"launches": 0, "htod": 0, "dtoh": 1, "syncs": 1}


_TUNE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from fake_cuda import driver as fake_driver
import numpy as np
import ember
from ember.cube.compiler import cuda as cuda_compiler
from ember.cube.runtime.client import get_client

fake_driver.install(sys.argv[2])
renders = []
real = cuda_compiler.CudaCompiler.compile
cuda_compiler.CudaCompiler.compile = lambda self, k: renders.append(1) or real(self, k)
d = ember.Device.cuda(fusion=False)
a = ember.tensor(np.ones((256, 256), np.float32), device=d)
(a @ a).numpy()
s = get_client("cuda", (0,)).server
print(json.dumps({"compiles": s.compiles, "renders": len(renders)}))
"""


def test_a_later_process_tuning_again_loads_every_candidate_without_rendering(tmp_path: Path) -> None:
    """The tuner prepares candidates it may never launch; each one's cubin is indexed by its
    KernelId when its compile finishes, so a new process that tunes again (here: stored
    decisions ignored) neither compiles nor expands and renders a kernel."""
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    runs = []
    for extra in ({}, {"EMBER_AUTOTUNE_DISABLE_CACHE": "1"}):
        r = subprocess.run([sys.executable, "-c", _TUNE, str(ROOT / "bench"), str(tmp_path)], capture_output=True,
                           text=True, env={**env, **extra}, timeout=900)
        assert r.returncode == 0, r.stderr[-4000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, again = runs
    assert first["compiles"] > 3 and first["renders"] > 3, "the first process compiles the candidates"
    assert again == {"compiles": 0, "renders": 0}


_LOSS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from fake_cuda import driver as fake_driver
import numpy as np
import ember
import ember.nn.functional as F

fake = fake_driver.install(sys.argv[2])
d = ember.Device.cuda().autodiff()
rng = np.random.default_rng()
emb = ember.nn.Embedding(11, 8, device=d)
ids = ember.tensor(rng.integers(0, 11, (4, 6)), device=d)
target = ember.tensor(rng.integers(0, 8, 24), device=d)
got = []
for _ in range(4):
    c0 = fake.counts()
    loss = F.cross_entropy(emb(ids).reshape(24, 8), target)
    loss.backward()
    c1 = fake.counts()
    loss.item()
    got.append({k: c1[k] - c0[k] for k in ("dtoh", "syncs")})
print(json.dumps(got))
"""


def test_a_loss_over_uploaded_targets_reads_nothing_back(tmp_path: Path) -> None:
    """cross_entropy over uploaded int64 targets (and the embedding's gather) neither reads the
    targets nor the indices back before the user's own read: on a GPU such a read waits for
    every queued kernel, the previous step's included (the step serialises host and device)."""
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("EMBER_TEST_DEVICES", None)
    r = subprocess.run([sys.executable, "-c", _LOSS, str(ROOT / "bench"), str(tmp_path)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    for step in json.loads(r.stdout.strip().splitlines()[-1]):
        assert step == {"dtoh": 0, "syncs": 0}
