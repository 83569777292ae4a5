"""The wgpu runtime and the WGSL compiler where they differ from the CPU target: pipeline table,
plane operations at the measured subgroup size, packed u8/bool storage, lines of 8 and 16 lanes
as arrays, views at element offsets, float atomics, early exits across loops without ``goto``,
launch batching, host transfers at unaligned offsets, typed dtype errors, device timing.

Outputs are poisoned before each launch so unwritten elements are caught."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import Device, cube, tracing
from ember.device import DeviceKind
from ember.errors import UnsupportedDTypeError

pytest.importorskip("wgpu")

from ember.cube.launch import _client_of  # noqa: E402
from ember.cube.runtime import wgpu_adapters as adapters  # noqa: E402

pytestmark = pytest.mark.skipif(
    not any(a.kind == "Cpu" and a.api == "Vulkan" for a in adapters.enumerate_adapters()),
    reason="no CPU Vulkan adapter (apt install mesa-vulkan-drivers)",
)

DEV = Device.wgpu(DeviceKind.cpu(), fusion=False)


def dev(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(np.ascontiguousarray(a), dtype=ember.dtype.from_numpy_dtype(a.dtype), device=DEV)


def poison(n: int, dtype: object = np.float32) -> ember.Tensor:
    d = np.dtype(dtype)
    fill = np.nan if d.kind == "f" else (-777 if d.kind == "i" else (0xAB if d == np.uint8 else True))
    return dev(np.full(n, fill, d))


@cube.kernel
def scale(x: cube.Array[cube.Float], out: cube.Array[cube.Float], k: cube.Comptime[int]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * k


def test_pipeline_table_compiles_once_and_entry_names_the_kernel():
    x = dev(np.arange(10, dtype=np.float32))
    out = poison(10)
    with tracing.capture() as spans:
        for _ in range(3):
            scale.launch(DEV, 1, 32, x, out, 5)
    compiles = [s for s in spans if s.name == "compile"]
    assert len(compiles) <= 1 and all(s.fields["language"] == "wgsl" for s in compiles)
    assert len([s for s in spans if s.name == "launch"]) == 3
    np.testing.assert_array_equal(out.numpy(), np.arange(10) * 5)


@cube.kernel
def plane_all_ops(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    i = cube.ABSOLUTE_POS
    v = x[i]
    base = i * 9
    out[base + 0] = cube.plane_sum(v)
    out[base + 1] = cube.plane_max(v)
    out[base + 2] = cube.plane_min(v)
    out[base + 3] = cube.plane_broadcast(v, 0)
    out[base + 4] = cube.plane_inclusive_sum(v)
    out[base + 5] = cube.plane_exclusive_sum(v)
    out[base + 6] = cube.select(cube.plane_elect(), 1.0, 0.0)
    out[base + 7] = cube.select(cube.plane_any(v > 1.0), 1.0, 0.0)
    out[base + 8] = cube.cast(cube.PLANE_DIM * 1000 + cube.UNIT_POS_PLANE, cube.f32)


def test_plane_ops_at_the_measured_plane_size():
    P = _client_of(DEV).server.compiler.capabilities.plane_size
    units = 64
    x = np.random.default_rng(3).standard_normal(units * 2).astype(np.float32)
    out = poison(units * 2 * 9)
    plane_all_ops.launch(DEV, 2, units, dev(x), out)
    got = out.numpy().reshape(-1, 9)
    for p0 in range(0, units * 2, P):
        seg = x[p0 : p0 + P].astype(np.float64)
        g = got[p0 : p0 + P]
        np.testing.assert_allclose(g[:, 0], seg.sum(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(g[:, 1], seg.max())
        np.testing.assert_array_equal(g[:, 2], seg.min())
        np.testing.assert_array_equal(g[:, 3], seg[0])
        np.testing.assert_allclose(g[:, 4], np.cumsum(seg), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g[:, 5], np.cumsum(seg) - seg, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(g[:, 6], np.arange(len(seg)) == 0)
        np.testing.assert_array_equal(g[:, 7], float((seg > 1.0).any()))
        np.testing.assert_array_equal(g[:, 8], P * 1000 + np.arange(len(seg)))


@cube.kernel
def copy_lines(x: cube.Array[cube.Line[cube.T]], out: cube.Array[cube.Line[cube.T]]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i]


@cube.kernel
def u8_index_bytes(out: cube.Array[cube.u8]):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = cube.cast(i * 7 + 3, cube.u8)  # wraps mod 256, as uint8


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.float32, np.int32])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_lines_of_every_width_and_packed_bytes_round_trip(dtype, width):
    n = 16 * 37
    rng = np.random.default_rng(width)
    x = (rng.integers(0, 256, n) if dtype != np.bool_ else rng.integers(0, 2, n)).astype(dtype)
    out = poison(n, dtype)
    count = cube.CubeCount.covering(n // width, 64)
    copy_lines.launch(DEV, count, 64, cube.lines(dev(x), width), cube.lines(out, width))
    np.testing.assert_array_equal(out.numpy(), x)


def test_adjacent_units_store_adjacent_bytes_without_losing_any():
    n = 4099  # not a multiple of 4: the last word is partly outside the tensor
    out = poison(n, np.uint8)
    u8_index_bytes.launch(DEV, cube.CubeCount.covering(n, 256), 256, out)
    np.testing.assert_array_equal(out.numpy(), ((np.arange(n) * 7 + 3) % 256).astype(np.uint8))


def test_views_at_element_offsets():
    base = np.arange(40, dtype=np.float32)
    t = dev(base)
    view = t[3:23]  # offset 3: not a multiple of any binding alignment
    out = poison(20)
    scale.launch(DEV, 1, 32, view, out, 2)
    np.testing.assert_array_equal(out.numpy(), base[3:23] * 2)
    b = dev(np.arange(40, dtype=np.uint8))[5:30]
    o = poison(25, np.uint8)
    copy_lines.launch(DEV, 1, 32, cube.lines(b, 1), cube.lines(o, 1))
    np.testing.assert_array_equal(o.numpy(), np.arange(5, 30, dtype=np.uint8))


@cube.kernel
def float_histogram(x: cube.Array[cube.f32], bins: cube.Array[cube.f32], counts: cube.Array[cube.i32]):
    i = cube.ABSOLUTE_POS
    if i < x.len():
        b = cube.cast(i % 3, cube.u32)
        cube.atomic_add(bins, b, x[i])
        cube.atomic_add(counts, b, 1)
        cube.atomic_max(bins, 3, x[i])


def test_float_atomics_under_contention():
    n = 5000
    x = np.random.default_rng(1).integers(-8, 9, n).astype(np.float32)  # sums exact in f32
    bins = dev(np.zeros(4, np.float32))
    counts = dev(np.zeros(3, np.int32))
    float_histogram.launch(DEV, cube.CubeCount.covering(n, 128), 128, dev(x), bins, counts)
    got = bins.numpy()
    np.testing.assert_array_equal(got[:3], [x[k::3].sum() for k in range(3)])
    assert got[3] == max(x.max(), 0.0)
    np.testing.assert_array_equal(counts.numpy(), [len(x[k::3]) for k in range(3)])


@cube.function
def first_index_above(x, start, stop, limit):
    for j in range(start, stop):
        if x[j] < 0.0:
            continue
        if x[j] > limit:
            return cube.cast(j, cube.i32)
    return -1


@cube.kernel
def find_rows(x: cube.Array[cube.f32], out: cube.Array[cube.i32], width: cube.u32):
    r = cube.ABSOLUTE_POS
    if r < out.len():
        total = 0
        for k in cube.range(3, unroll=False):  # the inlined function's early return sits inside two loops
            found = first_index_above(x, r * width, r * width + width, cube.cast(k, cube.f32))
            if found < 0:
                break
            total += found - cube.cast(r * width, cube.i32) + 1
        out[r] = total


def test_early_exit_of_an_inlined_function_across_loops():
    rows, width = 50, 9
    x = np.random.default_rng(2).uniform(-1, 3, (rows, width)).astype(np.float32)
    out = poison(rows, np.int32)
    find_rows.launch(DEV, 1, 64, dev(x.reshape(-1)), out, width)
    want = []
    for row in x:
        total = 0
        for k in range(3):
            idx = next((j for j, v in enumerate(row) if v >= 0 and v > k), -1)
            if idx < 0:
                break
            total += idx + 1
        want.append(total)
    np.testing.assert_array_equal(out.numpy(), want)


def test_many_launches_between_syncs_keep_their_own_info_words():
    x = dev(np.arange(7, dtype=np.float32))
    outs = [poison(7) for _ in range(300)]  # more launches than one submission batch
    for k, o in enumerate(outs):
        scale.launch(DEV, 1, 32, x, o, k)
    for k in (0, 1, 127, 128, 129, 299):
        np.testing.assert_array_equal(outs[k].numpy(), np.arange(7) * k)


def test_host_writes_and_reads_at_unaligned_offsets():
    c = _client_of(DEV)
    buf = c.create(np.arange(11, dtype=np.uint8))
    c.write(buf, np.array([200, 201, 202], np.uint8), byte_offset=3)
    np.testing.assert_array_equal(c.read(buf, np.uint8, (11,)), [0, 1, 2, 200, 201, 202, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(c.read(buf, np.uint8, (3,), (2,), 5), [202, 7, 9])


def test_dtypes_the_device_cannot_hold_raise_typed_errors():
    backend = DEV.backend().inner
    assert backend.supports(ember.float32) and backend.supports(ember.bool) and backend.supports(ember.uint8)
    assert not backend.supports(ember.float64)
    with pytest.raises(UnsupportedDTypeError, match="float64"):
        ember.tensor([1.0, 2.0], dtype=ember.float64, device=DEV).numpy()
    with pytest.raises(UnsupportedDTypeError, match="float64"):
        ember.zeros(3, dtype=ember.float64, device=DEV).numpy()


def test_profile_uses_device_timestamps_where_offered():
    c = _client_of(DEV)
    x = dev(np.arange(1 << 16, dtype=np.float32))
    out = poison(1 << 16)
    r, seconds = c.profile(lambda: scale.launch(DEV, cube.CubeCount.covering(1 << 16, 256), 256, x, out, 3) or 7)
    assert r == 7 and 0 < seconds < 10
    assert c.timing in ("device", "host")
    np.testing.assert_array_equal(out.numpy()[:5], np.arange(5) * 3)


def test_a_buffer_beyond_the_largest_binding_raises_a_typed_error():
    from ember.errors import OutOfMemoryError

    c = _client_of(DEV)
    limit = c.server.max_binding
    if limit > 1 << 28:
        pytest.skip(f"the largest binding here is {limit} bytes: too large to test cheaply")
    n = limit // 4 + 64
    with pytest.raises(OutOfMemoryError, match="largest storage binding"):
        ember.zeros(n, device=DEV).numpy()  # the fill kernel binds it
    x = ember.tensor(np.ones(n, np.float32), device=DEV)  # an upload binds nothing
    with pytest.raises(OutOfMemoryError, match="largest storage binding"):
        scale.launch(DEV, cube.CubeCount.covering(n, 256), 256, x, x, 2)


@pytest.mark.parametrize("shape", [(5, 256), (3, 1000), (4, 4096), (2, 3, 1001)])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_staged_in_shared_memory_matches_flex(monkeypatch, shape, fn):
    """Rows that fit a cube's shared memory are read once (softmax_staged): same values as Flex,
    NaN exactly where Flex has NaN (infinities, a NaN entry, an all -inf row), every element
    written (the output buffer is poisoned first)."""
    from ember.backends.cube import reduce_kernels as rk
    from ember.backends.cube.backend import CubeBackend

    launches = []
    staged = rk.softmax_staged.launch
    monkeypatch.setattr(rk.softmax_staged, "launch", lambda *a, **k: (launches.append(1), staged(*a, **k)))
    empty = CubeBackend._empty

    def poisoned(self, shape_, dtype):  # type: ignore[no-untyped-def]
        out = empty(self, shape_, dtype)
        if dtype.is_floating_point and out.numel:
            self.client.write(out.buffer, np.full(out.numel, np.nan, dtype.np))
        return out

    monkeypatch.setattr(CubeBackend, "_empty", poisoned)
    x = (np.random.default_rng().standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    if flat.shape[0] >= 3:
        flat[0, :3] = [-np.inf, np.inf, np.nan]
        flat[1, :] = -np.inf
        flat[2, 7] = np.inf
    ref = getattr(ember.tensor(x, device=Device.flex()), fn)(-1).numpy()
    got = getattr(dev(x), fn)(-1).numpy()
    assert launches, "the staged kernel did not run"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    # log_softmax is x minus the row's logsumexp: float32 rounds that at about eps * |x|, more
    # than rtol allows where the result is near zero (a row's dominant x)
    atol = 1e-6 * max(1.0, float(np.abs(x[np.isfinite(x)]).max())) if fn == "log_softmax" else 1e-6
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=atol)
