"""Thread counts of CPU launches: the OpenMP count when the runtime is shared with another
library (torch's libgomp), and the BLAS count of the vendor matmul (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends.cube import blas_threads
from ember.backends.cube import matmul as mm
from ember.cube.runtime import cpu_loading


class _Buf:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def _fn() -> None:
    pass


def _omp(shared: bool) -> tuple[cpu_loading._OpenMP, list[int]]:
    omp = cpu_loading._OpenMP()
    calls: list[int] = []
    omp.set = calls.append
    omp.max = 2
    omp.shared = shared
    return omp, calls


def test_own_runtime_sets_the_count_only_when_it_changes():
    omp, calls = _omp(shared=False)
    small, large = [_Buf(1024)], [_Buf(4 * cpu_loading.WORK_PER_THREAD)]
    for keep in (small, small, large, large, small):
        omp.threads_for(_fn, keep)
    assert calls == [1, 2, 1]


def test_shared_runtime_sets_the_count_at_every_launch_and_hands_the_old_one_back():
    # another library (torch) sets the thread's count between ember's launches: a cached value
    # would be stale, and a small launch would fork the other library's team; the count is the
    # other library's too, so each launch returns the count to put back after it
    omp, calls = _omp(shared=True)
    current = [2]  # the other library's count
    omp.get = lambda: current[0]
    small, large = [_Buf(1024)], [_Buf(4 * cpu_loading.WORK_PER_THREAD)]
    back = [omp.threads_for(_fn, keep) for keep in (small, small, large, small)]
    assert calls == [1, 1, 1]  # the large launch runs on the other's 2: nothing to set
    assert back == [2, 2, 0, 2]


_TORCH_FIRST = r"""
import torch
torch.set_num_threads(2)
import numpy as np
import ember
d = ember.Device.cpu()
x = ember.tensor(np.ones(8, np.float32), device=d)
for _ in range(3):
    (x * 2 + 1).sum().item()  # tiny launches: ember runs them on one thread
# the count torch's parallel regions will use (torch.get_num_threads() answers from its own cache)
import ctypes
gomp = next(line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line)
print(ctypes.CDLL(gomp).omp_get_max_threads())
"""


def test_ember_launches_leave_torchs_thread_count_alone(tmp_path):
    # torch imported first: ember's kernels bind to torch's libgomp, whose count torch reads for
    # its own parallel regions; ember's one-thread launches must not leave torch on one thread
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: every count is 1")
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "2"}
    r = subprocess.run([sys.executable, "-c", _TORCH_FIRST], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "2"


def test_runtime_detection_reads_the_process_maps(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n")
    real_open = open

    def fake_open(path, *a, **k):
        return real_open(maps if path == "/proc/self/maps" else path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    assert cpu_loading._runtime_loaded() is False
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /x/site-packages/torch/lib/libgomp.so.1\n")
    assert cpu_loading._runtime_loaded() is True


def test_the_first_load_records_whether_the_runtime_was_there():
    dev = ember.Device.cpu(fusion=False)
    x = ember.arange(10, dtype=ember.float32, device=dev)
    assert (x + 1).numpy()[3] == 4.0
    assert cpu_loading._openmp.shared in (True, False)


def test_serial_threshold():
    assert blas_threads.serial_matmul(1024 * 256 * 64)  # the GPT-small step's largest product
    assert not blas_threads.serial_matmul(256 * 784 * 512)


def test_one_thread_sets_one_and_restores_the_count():
    tok = blas_threads.one_thread()
    if tok is None:
        pytest.skip("this numpy's BLAS has no thread count setter")
    fn = blas_threads._setter[0]
    saved = blas_threads._held[1]
    try:
        assert fn(1) == 1  # the setting one_thread made (the setter returns the previous one)
    finally:
        blas_threads.restore(tok)
    assert fn(saved) == saved  # restored


def test_overlapping_calls_restore_once_the_first_count(monkeypatch):
    # the setter is process-wide: a second caller must not save the first one's 1 and put it back
    calls: list[int] = []
    state = [4]

    def setter(v: int) -> int:
        calls.append(v)
        prev, state[0] = state[0], v
        return prev

    monkeypatch.setattr(blas_threads, "_setter", [setter])
    monkeypatch.setattr(blas_threads, "_held", [0, 0])
    t1 = blas_threads.one_thread()
    t2 = blas_threads.one_thread()
    blas_threads.restore(t1)
    assert state[0] == 1
    blas_threads.restore(t2)
    assert state[0] == 4 and calls == [1, 4]


@pytest.mark.parametrize("m,k,n", [(32, 64, 128), (256, 96, 80), (512, 512, 160)])
def test_vendor_matmul_sets_one_thread_below_the_threshold(monkeypatch, m, k, n):
    calls: list[int] = []

    def setter(v: int) -> int:
        calls.append(v)
        return 7  # the "previous" setting, which restore must put back

    monkeypatch.setattr(blas_threads, "_setter", [setter])
    monkeypatch.setattr(blas_threads, "_held", [0, 0])
    dev = ember.Device.cpu(fusion=False)
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ta, tb = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
    bk = dev.backend()
    while not hasattr(bk, "client"):
        bk = bk.inner
    pa, pb, out = bk._matmul_operands(ta._p, tb._p)
    out.buffer.view(np.float32, out.shape, tuple(4 * s for s in out.strides), 0)[...] = np.nan  # poison
    mm._launch_numpy(bk, pa, pb, out)
    got = out.buffer.view(np.float32, out.shape, tuple(4 * s for s in out.strides), 0).copy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert calls == ([1, 7] if m * n * k < blas_threads.SERIAL_MATMUL_WORK else [])
