"""The CUDA runtime's per-op fast paths without a GPU: the reused launch parameter block
(``BoundArgs``) and the one-copy small read. A fake driver stands in for libcuda: "device"
addresses are host addresses, a launch decodes the parameter block it is handed (what the
real driver copies during ``cuLaunchKernel``), a device-to-host copy is a memmove.

Every launch must carry its own buffers' element addresses and its own info words, whatever
the kernel launched before (other shapes, dtypes, strides, offsets, buffers)."""

from __future__ import annotations

import ctypes
import threading
import types

import numpy as np
import pytest

from ember import dtype as dt
from ember.cube.runtime import cuda, cuda_driver, cuda_server
from ember.cube.runtime.cuda import CudaClient, CudaError, CudaServer
from ember.cube.runtime.cuda_server import BoundArgs, CudaKernel


class _FastFake:
    """cuda_fastcall.FastDriver's calls over host memory; records each launch's decoded block."""

    def __init__(self, n_bufs: int, n_info: int) -> None:
        self.n_bufs, self.n_info = n_bufs, n_info
        self.launches: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, int, int]]] = []
        self.fail = 0
        self.syncs = 0

    def launch(self, fn, cx, cy, cz, bx, by, bz, smem, stream, params, extra):
        slots = (ctypes.c_void_p * (self.n_bufs + (1 if self.n_info else 0))).from_address(params)
        ptrs = tuple(ctypes.c_uint64.from_address(slots[i]).value for i in range(self.n_bufs))
        info = ()
        if self.n_info:
            info = tuple((ctypes.c_uint64 * self.n_info).from_address(slots[self.n_bufs]))
        self.launches.append((ptrs, info, (cx, cy, cz)))
        return self.fail

    def launch_p(self, fn, cx, cy, cz, bx, by, bz, smem, stream, params, extra):
        # the per-op entry: handles and the block as c_void_p objects, sizes as plain ints
        assert all(type(v) is int for v in (cx, cy, cz, bx, by, bz, smem))
        return self.launch(fn.value, cx, cy, cz, bx, by, bz, smem, stream.value, params.value, extra)

    def dtoh_async(self, dst, src, nbytes, stream):
        ctypes.memmove(dst, src, nbytes)
        return 0

    def stream_sync(self, stream):
        self.syncs += 1
        return 0


def _server(fake: _FastFake, monkeypatch) -> CudaServer:
    s = object.__new__(CudaServer)
    s.ctx, s._fast, s._stream_h, s.launches = object(), fake, 1, 0
    s._stream_p = ctypes.c_void_p(1)
    s.index, s._lock = 0, threading.RLock()
    s.init_fault_record()
    s.cu = types.SimpleNamespace(CUresult=int)
    current = types.SimpleNamespace(ctx=s.ctx)
    for mod in (cuda_driver, cuda_server, cuda):  # each binds the thread's context record
        monkeypatch.setattr(mod, "_current", current)
    monkeypatch.setattr(cuda_driver, "_err_text", lambda err: f"error {int(err)}")
    return s


def _kernel(has_info: bool) -> CudaKernel:
    return CudaKernel(None, "k", object(), None, None, (128, 1, 1), has_info, handle=1)


class _View:
    """What a launch reads of a CubeTensor: its buffer's address, offset and dtype."""

    def __init__(self, array: np.ndarray, offset: int, dtype: dt.DType) -> None:
        self.array = array  # keeps the memory alive
        self.buffer = types.SimpleNamespace(ptr=array.ctypes.data)
        self.offset, self.dtype = offset, dtype

    @property
    def expected(self) -> int:
        return self.array.ctypes.data + self.offset * self.dtype.itemsize


def _info(*words: int) -> ctypes.Array:
    return (ctypes.c_uint64 * len(words))(*words)


def test_each_launch_carries_its_own_buffers_and_info(monkeypatch):
    rng = np.random.default_rng()
    fake = _FastFake(3, 2)
    s = _server(fake, monkeypatch)
    k = _kernel(True)
    cases = []
    for dtype in (dt.float32, dt.float64, dt.uint8, dt.float16, dt.float32):
        views = [_View(np.empty(64, np.uint8), int(rng.integers(0, 8)), dtype) for _ in range(3)]
        words = tuple(int(x) for x in rng.integers(1, 1 << 40, 2))
        cases.append((views, words))
        s.launch(k, views, _info(*words), types.SimpleNamespace(x=int(rng.integers(1, 9)), y=1, z=1))
    assert isinstance(k.bound, BoundArgs), "the block was not kept on the kernel"
    assert len(fake.launches) == len(cases) and s.launches == len(cases)
    for (ptrs, info, _), (views, words) in zip(fake.launches, cases):
        assert ptrs == tuple(v.expected for v in views), "a launch saw another launch's buffers"
        assert info == words, "a launch saw another launch's info words"


def test_a_kernel_without_info_words_gets_only_buffers(monkeypatch):
    fake = _FastFake(2, 0)
    s = _server(fake, monkeypatch)
    k = _kernel(False)
    a, b = _View(np.empty(16, np.uint8), 1, dt.float32), _View(np.empty(16, np.uint8), 0, dt.float32)
    s.launch(k, [a, b], None, types.SimpleNamespace(x=2, y=3, z=1))
    s.launch(k, [b, a], None, types.SimpleNamespace(x=1, y=1, z=1))
    assert [x[0] for x in fake.launches] == [(a.expected, b.expected), (b.expected, a.expected)]
    assert [x[2] for x in fake.launches] == [(2, 3, 1), (1, 1, 1)]


def test_an_empty_grid_launches_nothing(monkeypatch):
    fake = _FastFake(1, 0)
    s = _server(fake, monkeypatch)
    s.launch(_kernel(False), [_View(np.empty(8, np.uint8), 0, dt.float32)], None, types.SimpleNamespace(x=0, y=1, z=1))
    assert not fake.launches and s.launches == 0


def test_a_busy_block_is_left_alone(monkeypatch):
    """Another thread filling the kernel's block: this launch builds its own and the shared
    block keeps the other thread's values."""
    fake = _FastFake(1, 1)
    s = _server(fake, monkeypatch)
    k = _kernel(True)
    first = _View(np.empty(8, np.uint8), 0, dt.float32)
    s.launch(k, [first], _info(7), types.SimpleNamespace(x=1, y=1, z=1))
    second = _View(np.empty(8, np.uint8), 1, dt.float32)
    assert k.bound.lock.acquire(False)
    try:
        s.launch(k, [second], _info(9), types.SimpleNamespace(x=1, y=1, z=1))
        assert k.bound.ptrs[0] == first.expected, "the busy block was overwritten"
    finally:
        k.bound.lock.release()
    assert fake.launches[1][:2] == ((second.expected,), (9,))


def test_a_failed_launch_raises_and_frees_the_block(monkeypatch):
    fake = _FastFake(1, 0)
    s = _server(fake, monkeypatch)
    k = _kernel(False)
    v = _View(np.empty(8, np.uint8), 0, dt.float32)
    fake.fail = 1  # CUDA_ERROR_INVALID_VALUE: not sticky (700 would lose the context)
    with pytest.raises(CudaError, match="error 1$"):
        s.launch(k, [v], None, types.SimpleNamespace(x=1, y=1, z=1))
    fake.fail = 0
    s.launch(k, [v], None, types.SimpleNamespace(x=1, y=1, z=1))
    assert s.launches == 1 and not k.bound.lock.locked()


def test_blocks_from_two_threads_do_not_mix(monkeypatch):
    fake = _FastFake(2, 1)
    s = _server(fake, monkeypatch)
    k = _kernel(True)
    lock = threading.Lock()
    record = fake.launch

    def launch(*args):
        with lock:  # the fake's list, not the block, is what needs the lock
            return record(*args)

    fake.launch = launch
    expected = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            views = [_View(np.empty(32, np.uint8), int(rng.integers(0, 4)), dt.float32) for _ in range(2)]
            word = int(rng.integers(1, 1 << 30))
            with lock:
                expected.append(((tuple(v.expected for v in views)), (word,)))
            s.launch(k, views, _info(word), types.SimpleNamespace(x=1, y=1, z=1))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sorted((p, i) for p, i, _ in fake.launches)
    assert len(got) == 800 and got == sorted(expected)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_a_replayer_launches_its_step_over_the_buffers_of_each_call(monkeypatch, n):
    """A captured launch made ready once (``CudaServer.replayer``, its slots and byte offsets
    bound; 1-3 buffers take the slot-by-slot closure, more the general one): each call launches
    over ``bufs[slot].ptr + offset`` of that call's buffers with the captured info words; a call
    while its block is busy (another thread) takes the shared path with the same arguments; a
    failed launch raises and leaves the block free."""
    fake = _FastFake(n, 1)
    s = _server(fake, monkeypatch)
    k = _kernel(True)
    count = types.SimpleNamespace(x=4, y=2, z=1)
    info = _info(77)
    rng = np.random.default_rng()
    slots = tuple(int(x) for x in rng.permutation(n + 1)[:n])
    offsets = tuple(int(x) for x in rng.integers(0, 16, n) * 4)
    go = s.replayer(k, info, count, slots, offsets)
    assert go is not None
    want = []
    for _ in range(5):
        arrays = [np.empty(64, np.uint8) for _ in range(n + 1)]
        bufs = [types.SimpleNamespace(ptr=a.ctypes.data) for a in arrays]
        go(bufs)
        want.append((tuple(bufs[sl].ptr + o for sl, o in zip(slots, offsets)), (77,), (4, 2, 1)))
    assert fake.launches == want and s.launches == 5
    if n != 3:
        return
    go = s.replayer(k, info, count, (2, 1, 0), (0, 4, 8))
    lock = go.block.lock
    arrays = [np.empty(64, np.uint8) for _ in range(3)]
    bufs = [types.SimpleNamespace(ptr=a.ctypes.data) for a in arrays]
    assert lock.acquire(False)
    try:
        go(bufs)
    finally:
        lock.release()
    assert fake.launches[-1] == ((bufs[2].ptr, bufs[1].ptr + 4, bufs[0].ptr + 8), (77,), (4, 2, 1))
    fake.fail = 1  # not sticky: the server stays usable
    with pytest.raises(CudaError, match="error 1$"):
        go(bufs)
    assert not lock.locked() and s.launches == 6
    empty = types.SimpleNamespace(x=0, y=1, z=1)
    assert s.replayer(k, info, empty, (0, 1, 2), (0, 0, 0)) is None, "an empty grid launches nothing"


def test_a_raw_launch_goes_through_the_fast_driver(monkeypatch):
    """Hand-written kernels (``launch_raw``): each launch hands the driver its own function's
    handle, its grid and block as plain ints (a numpy int among them converted), its shared
    memory size and a parameter block pointing at its own argument values."""
    fake = _FastFake(2, 0)
    s = _server(fake, monkeypatch)
    s._raw_handles = {}
    s.current = lambda: None

    class _Fn:  # a CUfunction: its int() is the driver pointer
        def __init__(self, h: int) -> None:
            self.h = h

        def __int__(self) -> int:
            return self.h

    handles, smems = [], []
    record = fake.launch_p

    def launch_p(fn, cx, cy, cz, bx, by, bz, smem, stream, params, extra):
        handles.append(fn.value)
        smems.append(smem)
        return record(fn, cx, cy, cz, bx, by, bz, smem, stream, params, extra)

    fake.launch_p = launch_p
    f1, f2 = _Fn(0x1234), _Fn(0x5678)
    s.launch_raw(f1, (np.int64(3), 2, 1), (128, 1, 1), [ctypes.c_uint64(11), ctypes.c_uint64(22)], 4096)
    s.launch_raw(f2, (1, 1, 1), (32, 1, 1), [ctypes.c_uint64(33), ctypes.c_uint64(44)])
    s.launch_raw(f1, (5, 1, 1), (128, 1, 1), [ctypes.c_uint64(55), ctypes.c_uint64(66)], 4096)
    assert handles == [0x1234, 0x5678, 0x1234] and smems == [4096, 0, 4096]
    assert [ln[0] for ln in fake.launches] == [(11, 22), (33, 44), (55, 66)]
    assert [ln[2] for ln in fake.launches] == [(3, 2, 1), (1, 1, 1), (5, 1, 1)]
    assert s.launches == 3


# ---------------------------------------------------------------------------------------- reads
def _client(fake: _FastFake, monkeypatch, staged: bool = False) -> CudaClient:
    """``staged``: small reads land in a (host) staging block first, as in pinned memory."""
    c = object.__new__(CudaClient)
    c.server = _server(fake, monkeypatch)
    c._stage_lock = threading.Lock()
    c._stage = 0
    c._stage_raw = None
    c._stage_scalars = {}
    if staged:
        c._stage_mem = np.full(cuda._STAGE_BYTES, 0xAB, np.uint8)  # poisoned: stale bytes would show
        c._stage = c._stage_mem.ctypes.data
        c._stage_raw = (ctypes.c_char * cuda._STAGE_BYTES).from_address(c._stage)
    return c


@pytest.mark.parametrize(
    "dtype,shape,strides,offset",
    [
        (np.float32, (), None, 0),
        (np.float32, (), (), 12),
        (np.float64, (1,), (8,), 16),
        (np.float32, (3, 5), (20, 4), 4),
        (np.int16, (4, 1, 3), (6, 999, 2), 2),  # a size-1 dim's stride plays no part
        (np.float32, (3, 4), (4, 12), 0),  # transposed
        (np.float32, (4,), (8,), 8),  # every other element
        (np.float32, (2, 3), (0, 4), 0),  # broadcast rows
        (np.uint8, (0, 3), (3, 1), 0),
    ],
)
@pytest.mark.parametrize("staged", [False, True])
def test_read_copies_the_view_in_c_order(monkeypatch, dtype, shape, strides, offset, staged):
    fake = _FastFake(0, 0)
    c = _client(fake, monkeypatch, staged)
    device = np.random.default_rng().integers(0, 255, 256, dtype=np.uint8)  # "device" memory
    buf = types.SimpleNamespace(ptr=device.ctypes.data)
    got = c.read(buf, dtype, shape, strides, offset)
    itemsize = np.dtype(dtype).itemsize
    want = _expected(device, dtype, shape, strides, offset)
    assert got.shape == shape and got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    # the result owns its memory: a later read does not change it
    snapshot = got.copy()
    device[:] = 0
    c.read(buf, dtype, shape, strides, offset)
    np.testing.assert_array_equal(got, snapshot)
    assert fake.syncs == (2 if got.size * itemsize else 0), "a read did not wait for the stream"


@pytest.mark.parametrize("staged", [False, True])
def test_read_scalar_reads_the_element_at_its_offset(monkeypatch, staged):
    """``Tensor.item``'s read: each dtype at several offsets, each value the one at that byte
    offset now (not one left in the staging block by an earlier read), after a stream wait."""
    import ml_dtypes

    fake = _FastFake(0, 0)
    c = _client(fake, monkeypatch, staged)
    rng = np.random.default_rng()
    device = rng.integers(0, 255, 1024, dtype=np.uint8)
    buf = types.SimpleNamespace(ptr=device.ctypes.data)
    syncs = 0
    for dtype in (np.float32, np.float64, np.int64, np.int32, np.int16, np.uint8, np.bool_, np.float16,
                  ml_dtypes.bfloat16):
        size = np.dtype(dtype).itemsize
        for offset in (0, size, 7 * size, 64 * size):
            device[:] = rng.integers(0, 2 if dtype is np.bool_ else 255, 1024, dtype=np.uint8)
            got = c.read_scalar(buf, np.dtype(dtype), offset)
            want = np.ndarray((), dtype, buffer=device, offset=offset).item()
            syncs += 1
            assert type(got) is type(want) and (got == want or (got != got and want != want)), (dtype, offset)
            assert fake.syncs == syncs, "a scalar read did not wait for the stream"


def _expected(device: np.ndarray, dtype, shape, strides, offset) -> np.ndarray:
    dtype = np.dtype(dtype)
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    base = device[offset:]
    return np.array(np.ndarray(shape, dtype, buffer=base, strides=strides) if base.size else np.empty(shape, dtype))


def test_is_c_order():
    f = cuda._is_c_order
    assert f((), (), 4) and f((3, 5), (20, 4), 4) and f((1, 5), (7, 4), 4) and f((0, 2), (1, 1), 4)
    assert not f((3, 5), (4, 12), 4) and not f((5,), (8,), 4) and not f((2, 3), (0, 4), 4)


# --------------------------------------------------------------- plans reused across layouts (CPU)
def test_aliases_name_the_first_view_of_each_buffer():
    from ember.cube.launch.args import _aliases

    b1, b2 = object(), object()
    v = [types.SimpleNamespace(buffer=b) for b in (b1, b2, b1, b2, object())]
    assert _aliases(v) == (0, 1, 0, 1, 4)
    assert _aliases(v[:2]) == (0, 1) and _aliases([v[0], v[0]]) == (0, 0)
    many = [types.SimpleNamespace(buffer=object()) for _ in range(40)]
    assert _aliases(many) == tuple(range(40))


def test_one_plan_serves_every_layout_and_aliasing_gets_its_own():
    """A kernel's plan is keyed by dtype, rank and aliasing; shapes and offsets travel in each
    launch's info words and buffer addresses. Launches over views of other lengths and
    offsets (and an aliased call) must each compute exactly their own elements."""
    from ember import Device, cube
    from ember.cube.launch import _client_of
    from ember.cube.runtime.tensor import CubeTensor

    @cube.kernel
    def axpy2(x: cube.Array[cube.Float], y: cube.Array[cube.Float]):
        i = cube.ABSOLUTE_POS
        if i < y.len():
            y[i] = y[i] + x[i] * 2.0

    client = _client_of(Device.cpu(fusion=False))
    rng = np.random.default_rng()
    for dtype, edt in ((np.float32, dt.float32), (np.float64, dt.float64), (np.float32, dt.float32)):
        hx, hy = rng.standard_normal(96).astype(dtype), rng.standard_normal(96).astype(dtype)
        bx, by = client.create(hx), client.create(hy)
        want = hy.copy()  # the elements outside each view keep their (random) values
        for n, xo, yo in ((16, 0, 40), (7, 3, 50), (33, 60, 10), (1, 95, 0)):
            x = CubeTensor(client, bx, (n,), (1,), xo, edt)
            y = CubeTensor(client, by, (n,), (1,), yo, edt)
            axpy2.launch(client, cube.CubeCount.covering(n, 32), 32, x, y)
            want[yo:yo + n] = want[yo:yo + n] + hx[xo:xo + n] * 2
        same = CubeTensor(client, by, (5,), (1,), 20, edt)
        axpy2.launch(client, 1, 32, same, same)  # aliased: y = 3 y
        want[20:25] *= 3
        client.sync()
        np.testing.assert_allclose(client.read(by, dtype, (96,)), want, rtol=1e-6 if dtype is np.float32 else 1e-12)
        np.testing.assert_array_equal(client.read(bx, dtype, (96,)), hx)
    keys = list(axpy2._plans)
    assert len(keys) == 4, "expected one plan per dtype, plus one per dtype for the aliased call"
    assert {k[-1] for k in keys} == {(0, 1), (0, 0)}


# ------------------------------------------------------ the fused reduction's layout cache (CPU)
def _fused_sum(d, x, y, ex, ey, op):
    """``op`` of x and y summed over the last axis on device ``d``; the output buffer comes from
    a pool block just filled with NaN (an element the kernel skips stays NaN)."""
    import ember

    rows = int(np.prod(np.broadcast_shapes(ex.shape, ey.shape)[:-1]))
    poison = ember.full((max(rows, 1),), float("nan"), dtype=ember.float32, device=d)
    poison.numpy()
    del poison
    r = (x * y).sum(-1) if op == "mul" else (x - y).abs().sum(-1)
    want = (ex.astype(np.float64) * ey) if op == "mul" else np.abs(ex.astype(np.float64) - ey)
    return r.numpy(), want.sum(-1)


def test_the_fused_reduction_relaunches_each_layout_with_its_own_geometry():
    """(x * y).sum(-1) through the reduce-prologue fuser over layouts that differ in shape,
    dtype, strides (transposed, broadcast), offset (sliced) and aliasing, each twice so the
    second call takes the cached launch: every result must match numpy, no NaN left."""
    import ember
    from ember.backends.cube.fusers import reduce as fr

    d = ember.Device.cpu(fusion=True)
    rng = np.random.default_rng()

    def t(a):
        return ember.tensor(a, device=d)

    before = len(fr._BOUND)
    base = rng.standard_normal((9, 70)).astype(np.float32)
    other = rng.standard_normal((9, 70)).astype(np.float32)
    b64 = rng.standard_normal((9, 70))
    cases = [
        ("contiguous", lambda: (t(base), t(other)), (base, other)),
        ("offset 1", lambda: (t(base)[:, 1:], t(other)[:, 1:]), (base[:, 1:], other[:, 1:])),
        ("offset 16", lambda: (t(base)[:, 16:], t(other)[:, 16:]), (base[:, 16:], other[:, 16:])),
        ("rows", lambda: (t(base)[2:7], t(other)[2:7]), (base[2:7], other[2:7])),
        ("transposed", lambda: (t(base[:, :9].copy()).T, t(other[:, :9].copy())), (base[:, :9].T, other[:, :9])),
        ("broadcast row", lambda: (t(base), t(other[0])), (base, other[0])),
        ("broadcast col", lambda: (t(base), t(other[:, :1])), (base, other[:, :1])),
        ("aliased", lambda: (lambda x: (x, x))(t(base)), (base, base)),
        ("float64", lambda: (t(b64), t(b64[::-1].copy())), (b64, b64[::-1])),
        ("long rows", lambda: (t(np.tile(base, (1, 8))), t(np.tile(other, (1, 8)))),
         (np.tile(base, (1, 8)), np.tile(other, (1, 8)))),
    ]
    for op in ("mul", "absdiff"):
        for rep in range(2):
            for name, make, (ex, ey) in cases:
                x, y = make()
                got, want = _fused_sum(d, x, y, ex, ey, op)
                assert not np.isnan(got).any(), f"{name} ({op}, call {rep}): elements left unwritten"
                tol = 1e-4 if got.dtype == np.float32 else 1e-10
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 70, err_msg=f"{name} ({op}, call {rep})")
    assert len(fr._BOUND) > before, "the fused reductions did not go through the layout cache"


def test_layout_keys_tell_layouts_apart():
    import types as _t

    from ember.backends.cube.fusers.reduce import _layout_key

    buf1, buf2 = object(), object()

    def v(shape, strides, offset, dtype=dt.float32, buf=buf1):
        return _t.SimpleNamespace(shape=shape, strides=strides, offset=offset, dtype=dtype, buffer=buf)

    client, prog, shape = object(), (("in", 0), ("out", 0, 0)), (4, 32)

    def key(*ins, scalars=(), s=shape):
        return _layout_key(client, prog, list(ins), scalars, s, "sum", dt.float32)

    a = v((4, 32), (32, 1), 0)
    b = v((4, 32), (32, 1), 0, buf=buf2)
    assert key(a, b) == key(v((4, 32), (32, 1), 16), v((4, 32), (32, 1), 0, buf=buf2))  # offset mod 16
    different = [
        key(v((4, 32), (32, 1), 1), b),  # offset
        key(v((4, 32), (1, 4), 0), b),  # strides
        key(v((4, 32), (32, 1), 0, dt.float64), b),  # dtype
        key(v((32,), (1,), 0), b),  # shape (broadcast)
        key(a, a),  # aliased
        key(a, b, scalars=((1.0, dt.float32),)),
        key(a, b, s=(2, 64)),
    ]
    assert len({key(a, b), *different}) == len(different) + 1


def test_resolve_gives_the_plan_a_launch_runs():
    """``CubeKernel.resolve``: the plan, bound arguments and views of a launch; running the plan
    with other views of the same key computes on those views."""
    from ember import Device, cube
    from ember.cube.launch import _client_of
    from ember.cube.runtime.tensor import CubeTensor

    @cube.kernel
    def twice(x: cube.Array[cube.f32], y: cube.Array[cube.f32]):
        i = cube.ABSOLUTE_POS
        if i < y.len():
            y[i] = x[i] * 2.0

    client = _client_of(Device.cpu(fusion=False))
    rng = np.random.default_rng()
    hx = rng.standard_normal(64).astype(np.float32)
    bx, by = client.create(hx), client.create(np.full(64, np.nan, np.float32))
    x = CubeTensor(client, bx, (10,), (1,), 0, dt.float32)
    y = CubeTensor(client, by, (10,), (1,), 0, dt.float32)
    plan, args, tensors = twice.resolve(client, 32, x, y)
    assert args == (x, y) and tensors == [x, y] and list(twice._plans.values()) == [plan]
    plan.run(cube.CubeCount(1), args, tensors)
    x2 = CubeTensor(client, bx, (20,), (1,), 30, dt.float32)
    y2 = CubeTensor(client, by, (20,), (1,), 40, dt.float32)
    plan.run(cube.CubeCount(1), (x2, y2), [x2, y2])
    client.sync()
    got = client.read(by, np.float32, (64,))
    np.testing.assert_array_equal(got[:10], hx[:10] * 2)
    np.testing.assert_array_equal(got[40:60], hx[30:50] * 2)
    assert np.isnan(got[10:40]).all() and np.isnan(got[60:]).all(), "the launch wrote outside its views"
