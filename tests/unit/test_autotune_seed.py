"""The seed's autotune behaviours across processes (``004``: first call probes + candidates,
second process one launch), each process a subprocess on a shared temporary cache root.

The seed's 2x2 matmul on ``Device.cpu(fusion=False)`` (the fusion decorator's matmul fuser may
take a matmul into its own kernel; here the Cube backend's tuner is what is observed). Spans are
counted: ``launch`` (kernel name; the vendor candidate opens one too), ``probe``, ``compile``
(``cached``), ``autotune`` (``cached``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
import numpy as np
import ember
from ember import Device, tracing

dev = Device.cpu(fusion=False)
out = {}
for label, n in [(s.split(":")[0], int(s.split(":")[1])) for s in sys.argv[1:]]:
    a = ember.tensor(np.arange(n * n, dtype=np.float32).reshape(n, n) + 1, device=dev)
    b = ember.tensor(np.arange(n * n, dtype=np.float32).reshape(n, n) + 5, device=dev)
    with tracing.capture() as spans:
        c = (a @ b).numpy()
    an, bn = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    launches = [s.fields["kernel"] for s in spans if s.name == "launch"]
    probe_kernels = [k for k in launches if "throughput_probe" in k]
    tune = [s.fields for s in spans if s.name == "autotune"]
    out[label] = {
        "ok": bool(np.allclose(c, an @ bn, rtol=1e-4)),
        "result": c.ravel().tolist() if n == 2 else None,
        "launches": [k for k in launches if "throughput_probe" not in k],
        "probe_launches": len(probe_kernels),
        "probes": sorted(s.fields["probe"] for s in spans if s.name == "probe"),
        "compiled": [s.fields["kernel"] for s in spans if s.name == "compile" and not s.fields.get("cached")],
        "autotune": [{k: str(v) for k, v in f.items()} for f in tune],
    }
from ember.autotune import decisions
out["suspect"] = any(d.get("bound_suspect") for _, _, d in decisions.all_decisions())
print("RESULT" + json.dumps(out))
"""


def run(cache: Path, *shapes: str) -> dict:
    # tuning at the first call (deferred tuning: test_autotune_defer.py)
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), EMBER_AUTOTUNE_DEFER="0",
               EMBER_AUTOTUNE_RETUNE_PROVISIONAL="0")  # the second process reuses whatever the load
    for k in ("EMBER_DEBUG_LOG", "EMBER_AUTOTUNE_LEVEL", "EMBER_AUTOTUNE_CHECKS", "EMBER_AUTOTUNE_DISABLE_CACHE"):
        env.pop(k, None)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, *shapes], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_first_process_tunes_second_launches_once(cache: Path):
    # 72 anchors to 128: a product worth tuning (a 2x2 one is trivial: the test below)
    p1 = run(cache, "first:72")["first"]
    assert p1["ok"]
    # several candidates were launched (warm-ups, samples, then the winner once more)
    assert len(set(p1["launches"])) >= 2 and len(p1["launches"]) > 3
    # the probes ran once, in this first call
    assert p1["probes"] == ["bandwidth", "compute", "launch_overhead"] and p1["probe_launches"] > 3
    assert p1["autotune"][0]["cached"] == "False" and p1["autotune"][0]["op"] == "matmul"

    p2 = run(cache, "first:72")["first"]
    assert p2["ok"]
    # the stored winner's launches only (packing + product for the blocked kernels, else one)
    assert len(p2["launches"]) <= 3 and len(set(p2["launches"])) == len(p2["launches"]), p2["launches"]
    assert p2["probes"] == [] and p2["probe_launches"] == 0  # no probe
    assert p2["compiled"] == []  # nothing compiled (kernels load from the store)
    assert p2["autotune"][0]["cached"] == "True" and p2["autotune"][0]["origin"] == "store"


def test_trivial_product_is_decided_without_timing(cache: Path):
    # the seed's 2x2 matmul: below the launch-cost scale, the vendor candidate at once in every
    # process (no probe, no candidate compiled, nothing stored)
    for _ in range(2):
        p = run(cache, "first:2")["first"]
        assert p["ok"] and p["result"] == [19.0, 22.0, 43.0, 50.0]
        assert p["launches"] == ["vendor:numpy.matmul"]
        assert p["probes"] == [] and p["compiled"] == []
        assert p["autotune"][0]["origin"] == "trivial" and p["autotune"][0]["winner"] == "numpy"


def test_same_bucket_reuses_another_bucket_tunes(cache: Path):
    r = run(cache, "a:100", "b:120", "c:300", "d:260")
    assert all(x["ok"] for k, x in r.items() if k != "suspect")
    assert r["a"]["autotune"][0]["cached"] == "False"
    # 120 anchors to 128 like 100: one decision, the winner's launches only
    assert r["b"]["autotune"][0]["cached"] == "True" and r["b"]["autotune"][0]["origin"] == "memory"
    assert r["b"]["autotune"][0]["key"] == r["a"]["autotune"][0]["key"]
    assert len(r["b"]["launches"]) <= 3 and len(set(r["b"]["launches"])) == len(r["b"]["launches"])
    # 300 -> 512: another bucket, tuned; 260 -> 512 again reuses it
    assert r["c"]["autotune"][0]["cached"] == "False" and "m=512" in r["c"]["autotune"][0]["key"]
    assert r["d"]["autotune"][0]["cached"] == "True"
    # the probes ran for the first tuning only (unless a kernel beat their bound by far: then
    # they were measured on a busy machine and the next tuning re-measures them)
    assert r["a"]["probes"] and (not r["c"]["probes"] or r["suspect"])
