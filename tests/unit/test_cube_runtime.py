"""The CPU runtime: pipeline cache, persistent artifacts, service stages, errors, memory.

The seed behaviours: a second launch in a process compiles nothing; a second process
compiles nothing (every ``compile`` span ``cached=True``, the debug log says the artifact came
from the store); a new comptime value compiles a new kernel with a new entry hash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import Device, cube, tracing
from ember.errors import CompilationError, DeviceUnavailableError

REPO = Path(__file__).resolve().parents[2]
DEV = Device.cpu(fusion=False)


def dev_tensor(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(np.ascontiguousarray(a), dtype=ember.dtype.from_numpy_dtype(a.dtype), device=DEV)


def run_py(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env or {})
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or REPO,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout


@cube.kernel
def scale(x: cube.Array[cube.Float], out: cube.Array[cube.Float], k: cube.Comptime[int]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * k


def compile_spans(spans: list) -> list:
    return [s for s in spans if s.name == "compile"]


def test_second_launch_in_a_process_does_not_compile():
    x = dev_tensor(np.arange(10, dtype=np.float32))
    out = dev_tensor(np.zeros(10, np.float32))
    with tracing.capture() as spans:
        scale.launch(DEV, 1, 32, x, out, 3)
        first = len(compile_spans(spans))
        scale.launch(DEV, 1, 32, x, out, 3)
        scale.launch(DEV, 1, 32, x, out, 3)
    assert len(compile_spans(spans)) == first <= 1
    launches = [s for s in spans if s.name == "launch"]
    assert len(launches) == 3 and all(s.fields["kernel"].startswith("scale_f32_n1_") for s in launches)
    np.testing.assert_array_equal(out.numpy(), np.arange(10) * 3)


def test_changing_a_comptime_argument_compiles_a_new_kernel():
    x = dev_tensor(np.arange(10, dtype=np.float64))
    out = dev_tensor(np.zeros(10, np.float64))
    with tracing.capture() as spans:
        scale.launch(DEV, 1, 32, x, out, 101)
        scale.launch(DEV, 1, 32, x, out, 102)
    names = [s.fields["kernel"] for s in compile_spans(spans)]
    assert len(names) == 2 and names[0] != names[1]
    assert names[0][:-8] == names[1][:-8] == "scale_f64_n1_"  # same kernel, different hash
    for s in compile_spans(spans):
        assert s.fields["language"] == "c" and isinstance(s.fields["cached"], bool)


KERNEL_MODULE = """
from ember import cube

@cube.kernel
def kbinop(a: cube.Array[cube.Line[cube.Float]], b: cube.Array[cube.Line[cube.Float]],
           out: cube.Array[cube.Line[cube.Float]], op: cube.Comptime[str]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        if op == "add":
            out[i] = a[i] + b[i]
        else:
            out[i] = a[i] * b[i]
"""


def test_kernel_id_and_entry_names_are_stable_across_processes(tmp_path):
    (tmp_path / "kmod_stable.py").write_text(KERNEL_MODULE)
    code = f"""
        import sys, numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        from kmod_stable import kbinop
        from ember import cube
        a = np.zeros(8, np.float32)
        print(kbinop.kernel_id(32, cube.lines(a, 4), cube.lines(np.zeros(8, np.float32), 4), cube.lines(a, 4),
                               "add").entry())
    """
    outs = {run_py(code, {"PYTHONHASHSEED": str(seed)}).strip() for seed in (1, 2, 3)}
    assert len(outs) == 1
    entry = outs.pop()
    assert entry.startswith("kbinop_f32_n4_") and len(entry.rsplit("_", 1)[1]) == 8


PROCESS = """
import json, sys, numpy as np
sys.path.insert(0, {path!r})
import ember
from ember import Device, cube, tracing
from kmod_store import kbinop

dev = Device.cpu(fusion=False)
a = ember.tensor(np.arange(64, dtype=np.float32), device=dev)
b = ember.tensor(np.ones(64, dtype=np.float32), device=dev)
out = ember.zeros(64, device=dev)
with tracing.capture() as spans:
    for op in ("add", "mul"):
        kbinop.launch(dev, 1, 16, cube.lines(a, 4), cube.lines(b, 4), cube.lines(out, 4), op)
    z = ember.zeros(5, dtype=ember.int64, device=dev).numpy()
assert (out.numpy() == np.arange(64)).all()
print(json.dumps([[s.fields["kernel"], s.fields["cached"], s.thread] for s in spans if s.name == "compile"]))
"""


def test_a_second_process_compiles_nothing(tmp_path):
    (tmp_path / "kmod_store.py").write_text(KERNEL_MODULE)
    env = {"EMBER_CACHE_DIR": str(tmp_path / "cache")}
    code = PROCESS.format(path=str(tmp_path))
    first = json.loads(run_py(code, env | {"EMBER_DEBUG_LOG": str(tmp_path / "log1.txt")}))
    second = json.loads(run_py(code, env | {"EMBER_DEBUG_LOG": str(tmp_path / "log2.txt")}))
    assert len(first) == 3 and not any(c for _, c, _ in first)
    assert [k for k, _, _ in second] == [k for k, _, _ in first]  # same entry names in both processes
    assert all(c for _, c, _ in second)
    log1, log2 = (tmp_path / "log1.txt").read_text(), (tmp_path / "log2.txt").read_text()
    n = log1.count("[START_KERNEL_COMPILATION]")  # 3 above + the fill kernel of ember.zeros
    assert n == log1.count("compiled by:") == 4
    assert log2.count("[START_KERNEL_COMPILATION]") == log2.count("loaded from store") == 4
    assert "compiled by:" not in log2
    assert "KernelId {" in log1 and "void kbinop_f32_n4_" in log1  # name, KernelId and full source
    # the artifacts sit in the store under compile/cpu/<fingerprint>
    listing = run_py(
        "from ember.environment import store\nprint([ns for ns, n in store.get_store().namespaces()])", env
    )
    assert "compile/cpu/" in listing


def test_service_thread_channel_runs_on_dsd_thread_and_errors_reach_the_caller(monkeypatch):
    from ember.cube.compiler.c import CCompiler
    from ember.cube.runtime.client import ComputeClient
    from ember.cube.runtime.cpu import CpuServer
    from ember.cube.runtime.memory import MemoryPool
    from ember.cube.runtime.tensor import CubeTensor, contiguous_strides

    server = CpuServer(0, channel="thread")
    client = ComputeClient("cpu", 0, server, MemoryPool())
    a = np.arange(16, dtype=np.float32)
    x = CubeTensor(client, client.create(a), a.shape, contiguous_strides(a.shape), 0, ember.float32)
    out = CubeTensor(client, client.create(np.zeros(16, np.float32)), a.shape, (1,), 0, ember.float32)
    with tracing.capture() as spans:
        scale.launch(client, 1, 16, x, out, 5)
        client.sync()
    np.testing.assert_array_equal(client.read(out.buffer, np.float32, (16,)), a * 5)
    launch = [s for s in spans if s.name == "launch"][0]
    assert launch.fields["stage"] == "DSD-cpu-0" and launch.fields["channel"] == "thread"
    assert {s.thread for s in spans if s.name == "compile"} <= {"DSD-cpu-0"}

    broken = CCompiler.compile

    def bad(self, k):
        src = broken(self, k)
        src.source = src.source.replace("void ", "void syntax error here ", 1)
        return src

    monkeypatch.setattr(CCompiler, "compile", bad)
    with pytest.raises(CompilationError) as e:
        scale.launch(client, 1, 16, x, out, 77)  # a new kernel: compiled on DSD-cpu-0, raised here
    assert "syntax error here" in e.value.source and "error" in e.value.log
    server.downstream.close()


def test_compile_error_on_the_inline_channel(monkeypatch):
    from ember.cube.compiler.c import CCompiler

    broken = CCompiler.compile

    def bad(self, k):
        src = broken(self, k)
        src.source += "\nthis is not C;\n"
        return src

    monkeypatch.setattr(CCompiler, "compile", bad)
    x = dev_tensor(np.zeros(4, np.float32))
    with pytest.raises(CompilationError) as e:
        scale.launch(DEV, 1, 4, x, x, 12345)
    assert "this is not C" in e.value.source
    assert "compiler output" in str(e.value)


def test_inline_channel_spans_name_the_stage():
    x = dev_tensor(np.zeros(4, np.float32))
    with tracing.capture() as spans:
        scale.launch(DEV, 1, 4, x, x, 2)
    launch = [s for s in spans if s.name == "launch"][0]
    assert launch.fields["stage"] == "DSD-cpu-0" and launch.fields["channel"] == "inline"


def test_memory_pool_reuses_buffers_and_traces_reservations():
    bk = DEV.backend().inner
    pool = bk.client.pool
    with tracing.capture() as spans:
        t = ember.zeros(1000, device=DEV)
        ptr = t._p.buffer.ptr
        del t
        t2 = ember.zeros(1000, device=DEV)
    assert t2._p.buffer.ptr == ptr and t2._p.buffer.ptr % 64 == 0
    reserves = [s for s in spans if s.name == "reserve"]
    assert reserves and all(s.fields["bytes"] == 4000 for s in reserves)
    assert pool.usage()["reuses"] >= 1


def test_backend_data_ops_match_numpy():
    bk = DEV.backend().inner
    for dt, v in (
        (ember.float32, 1.5),
        (ember.float64, -2.25),
        (ember.int32, 7),
        (ember.int64, -3),
        (ember.uint8, 200),
        (ember.bool, True),
        (ember.float16, 0.1),
        (ember.bfloat16, 0.1),
    ):
        p = bk.full((3, 7), v, dt)
        np.testing.assert_array_equal(bk.into_data(p), np.full((3, 7), v, dtype=dt.np))
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    p = bk.from_data(a, ember.float32)
    np.testing.assert_array_equal(bk.into_data(bk.permute(p, (2, 0, 1))), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(
        bk.into_data(bk.reshape(bk.permute(p, (2, 0, 1)), (4, 6))), a.transpose(2, 0, 1).reshape(4, 6)
    )
    sl = (slice(0, 2, 1), slice(1, 3, 1), slice(0, 4, 2))
    np.testing.assert_array_equal(bk.into_data(bk.contiguous(bk.slice(p, sl))), a[0:2, 1:3, 0:4:2])
    np.testing.assert_array_equal(
        bk.into_data(bk.expand(bk.from_data(a[:, :1], ember.float32), (2, 3, 4))),
        np.broadcast_to(a[:, :1], (2, 3, 4)),
    )
    for dt in (ember.int32, ember.float64, ember.float16, ember.bool, ember.int64):
        np.testing.assert_array_equal(bk.into_data(bk.cast(p, dt)), a.astype(dt.np))
    r = ember.rand(5, 6, device=DEV)
    assert r.numpy().shape == (5, 6) and (r.numpy() >= 0).all()
    from ember.random import philox_values

    np.testing.assert_array_equal(
        bk.into_data(bk.random("normal", (9,), ember.float32, 3, 0, 0.0, 1.0)),
        philox_values("normal", (9,), ember.float32, 3, 0, 0.0, 1.0),
    )
    with tracing.capture() as spans:
        bk.into_data(bk.from_data(a, ember.float32))
    assert [(s.name, s.fields.get("layer")) for s in spans if s.name in ("from_data", "into_data")] == [
        ("from_data", "cube"),
        ("into_data", "cube"),
    ]


def test_other_runtimes_and_missing_compilers_are_typed_errors(tmp_path):
    with pytest.raises(DeviceUnavailableError, match="cuda"):
        Device.cuda().init()
    out = run_py(
        """
        from ember import Device
        from ember.errors import DeviceUnavailableError
        try:
            Device.cpu(fusion=False).init()
        except DeviceUnavailableError as e:
            print("unavailable:", e)
    """,
        {"EMBER_CPU_CC": "/nonexistent/cc", "EMBER_CACHE_DIR": str(tmp_path)},
    )
    assert "unavailable:" in out and "C compiler" in out


def test_cache_switch_off_still_compiles_and_loads(tmp_path):
    (tmp_path / "kmod_nocache.py").write_text(
        textwrap.dedent("""
        from ember import cube
        @cube.kernel
        def k(x: cube.Array[cube.f32]):
            i = cube.ABSOLUTE_POS
            if i < x.len():
                x[i] = x[i] + 1.0
    """)
    )
    out = run_py(
        f"""
        import sys, numpy as np, ember
        sys.path.insert(0, {str(tmp_path)!r})
        from ember import Device, tracing
        from kmod_nocache import k
        dev = Device.cpu(fusion=False)
        t = ember.zeros(8, device=dev)
        with tracing.capture() as spans:
            k.launch(dev, 1, 8, t)
        print(t.numpy().tolist(), [s.fields["cached"] for s in spans if s.name == "compile"])
    """,
        {"EMBER_CACHE_DIR": str(tmp_path / "cache"), "EMBER_COMPILATION_CACHE": "false"},
    )
    assert out.strip() == "[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0] [False]"
    assert not list((tmp_path / "cache").rglob("*.so"))


@cube.kernel
def out_of_bounds(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS  # no bounds test on purpose: units past the end read and write
    out[i] = x[i + 2] + 1.0


def test_checked_mode_raises_on_the_first_access_outside_a_buffer():
    from ember.cube.runtime.client import ComputeClient
    from ember.cube.runtime.cpu import CpuServer
    from ember.cube.runtime.memory import MemoryPool
    from ember.cube.runtime.tensor import CubeTensor
    from ember.errors import KernelBoundsError

    server = CpuServer(0, checked=True)
    client = ComputeClient("cpu", 0, server, MemoryPool())
    x = np.arange(6, dtype=np.float32)
    xt = CubeTensor(client, client.create(x), (6,), (1,), 0, ember.float32)
    big = client.create(np.full(16, -7.0, np.float32))
    out = CubeTensor(client, big, (6,), (1,), 0, ember.float32)  # a 6-element view of 16 elements
    with pytest.raises(KernelBoundsError) as info:
        out_of_bounds.launch(client, 1, 16, xt, out)
    e = info.value
    assert "out_of_bounds" in e.kernel and e.array.startswith("x (argument 0)")
    assert e.index >= 6 and e.length == 6 and isinstance(e, IndexError)
    got = client.read(big, np.float32, (16,))
    # in range of its buffer, a write past the view is allowed (a strided window writes there)
    np.testing.assert_array_equal(got[:4], [3, 4, 5, 6])
    np.testing.assert_array_equal(got[4:14], 1.0)  # x[6..] read as 0, + 1
    kid = out_of_bounds.kernel_id(16, x, x)
    assert kid.target == "c"
    assert "c+checked" in server.pipelines.popitem()[0].text()


def test_zero_dim_and_empty_tensors():
    bk = DEV.backend().inner
    s = bk.from_data(np.float32(2.5), ember.float32)
    assert s.shape == () and bk.into_data(s).shape == () and float(bk.into_data(s)) == 2.5
    assert bk.into_data(bk.full((), 3, ember.int64)).tolist() == 3
    e = bk.full((0, 4), 1.0, ember.float32)
    assert bk.into_data(e).shape == (0, 4)
    assert bk.into_data(bk.reshape(bk.cast(e, ember.int32), (4, 0))).shape == (4, 0)
    t = ember.tensor(7.0, device=DEV)
    assert t.numpy().shape == () and t.item() == 7.0


def test_kernels_run_on_autodiff_device_tensors_and_flex_is_refused():
    dev = Device.cpu(fusion=False).autodiff()
    x = ember.tensor(np.arange(6, dtype=np.float32), device=dev)
    out = ember.zeros(6, device=dev)
    scale.launch(dev, 1, 8, x, out, 4)
    np.testing.assert_array_equal(out.numpy(), np.arange(6) * 4)
    with pytest.raises(TypeError, match="does not run cube kernels"):
        scale.launch(Device.flex(), 1, 8, x, out, 4)


def test_threads_compile_and_launch_concurrently():
    import threading

    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            x = dev_tensor(np.arange(300, dtype=np.float32))
            for _ in range(20):
                out = ember.zeros(300, device=DEV)
                scale.launch(DEV, cube.CubeCount.covering(300, 64), 64, x, out, 1000 + k % 3)
                np.testing.assert_array_equal(out.numpy(), np.arange(300) * (1000 + k % 3))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize(
    "sa,sb", [((2, 2), (2, 2)), ((3, 5, 7), (1, 7, 4)), ((2, 1, 4, 3), (1, 5, 3, 6)), ((4, 0), (0, 3))]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_naive_batched_matmul(sa, sb, dtype):
    bk = DEV.backend().inner
    r = np.random.default_rng(1)
    a = (r.standard_normal(sa) * 4).astype(dtype)
    b = (r.standard_normal(sb) * 4).astype(dtype)
    got = bk.into_data(
        bk.matmul(
            bk.from_data(a, ember.dtype.from_numpy_dtype(a.dtype)),
            bk.from_data(b, ember.dtype.from_numpy_dtype(b.dtype)),
        )
    )
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_the_seed_matmul_on_the_cpu_device():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=DEV)
    b = ember.tensor([[5.0, 6.0], [7.0, 8.0]], device=DEV)
    assert a.matmul(b).numpy().ravel().tolist() == [19.0, 22.0, 43.0, 50.0]


@cube.kernel
def count_visits(out: cube.Array[cube.i32]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        cube.atomic_add(out, i, 1)


@pytest.mark.parametrize("units", [1, 7, 64, 65, 6 * 64 + 1, 2 * 7 * 64 + 64, 50 * 64 - 3])
def test_covering_spills_into_y_with_few_surplus_cubes_and_reaches_every_unit(units):
    """Past max_x cubes the grid's rows are evened out (at most y - 1 surplus cubes, never a
    near-empty last row of max_x), x stays within max_x, and a kernel indexing by ABSOLUTE_POS
    visits every element exactly once."""
    count = cube.CubeCount.covering(units, 64, max_x=7)
    need = -(-units // 64)
    assert count.x <= 7 and count.cubes >= need and count.cubes - need < count.y
    out = dev_tensor(np.zeros(units, np.int32))
    count_visits.launch(DEV, count, 64, out)
    np.testing.assert_array_equal(out.numpy(), np.ones(units, np.int32))
