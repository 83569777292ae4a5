"""The fusers of the Cube backend: which blocks they claim, what they write, in-place reuse,
plan reuse, and results against float64 numpy (fresh random inputs every run)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import erf

import ember
from ember import Device
from ember.backends.fusion.inspect import fusion_backend

DEV = Device.cpu()


@pytest.fixture(autouse=True)
def _empty_stream() -> None:
    """Ops another test left queued on the shared device would join the first drain here."""
    DEV.sync()


@pytest.fixture
def rng() -> np.random.Generator:
    seed = np.random.SeedSequence().entropy
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def _t(a: np.ndarray) -> ember.Tensor:
    t = ember.tensor(a, device=DEV)
    t.numpy()  # realised: the tests below queue only what they are about
    return t


def _launches(spans: list) -> list:
    return [s for s in spans if s.name == "launch"]


def test_an_elementwise_chain_is_one_kernel_writing_only_what_is_observed(rng: np.random.Generator) -> None:
    a = rng.standard_normal((64, 33)).astype(np.float32)
    b = rng.standard_normal(33).astype(np.float32)  # broadcast along rows
    x, bias = _t(a), _t(b)
    with ember.tracing.capture() as spans, ember.inspect_fusion(DEV) as rec:
        y = (x * 2.0 + bias).sin()
        z = (y * y - 0.25).relu() + x
        del y  # dropped before the read: not an output of the kernel
        out = z.numpy()
    assert [b.fuser for b in rec.blocks] == ["elementwise"]
    assert len(_launches(spans)) == 1
    ref = np.sin(a.astype(np.float64) * 2 + b)
    ref = np.maximum(ref * ref - 0.25, 0) + a
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6)


def test_a_live_intermediate_is_written_too(rng: np.random.Generator) -> None:
    a = rng.standard_normal(5000).astype(np.float32)
    x = _t(a)
    with ember.inspect_fusion(DEV) as rec:
        y = x.exp() * 3.0
        z = y - x
        zo, yo = z.numpy(), y.numpy()
    assert rec.blocks[0].fuser == "elementwise" and len(rec.drains) == 1
    np.testing.assert_allclose(yo, np.exp(a.astype(np.float64)) * 3, rtol=1e-5)
    np.testing.assert_allclose(zo, np.exp(a.astype(np.float64)) * 3 - a, rtol=1e-5, atol=1e-5)


def test_a_dropped_input_at_its_last_use_lends_its_buffer(rng: np.random.Generator) -> None:
    a = rng.standard_normal(1 << 14).astype(np.float32)
    x = (_t(a) * 1.0)  # queued: its handle is the only reference to its future value
    x.numpy()
    ptr = x._p.value.ptr
    y = (x + 1.0) * 2.0
    del x
    out = y.numpy()
    assert y._p.value.ptr == ptr  # the output was written into x's buffer
    np.testing.assert_allclose(out, (a.astype(np.float64) + 1) * 2, rtol=1e-6)


def test_a_kept_input_is_never_overwritten(rng: np.random.Generator) -> None:
    a = rng.standard_normal(1 << 14).astype(np.float32)
    x = _t(a)
    v = x.reshape(128, 128)  # another view of the same buffer
    y = (x + 1.0) * 2.0
    y.numpy()
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(v.numpy().reshape(-1), a)


def test_identical_drains_reuse_the_plan_and_the_kernel(rng: np.random.Generator) -> None:
    fb = fusion_backend(DEV)
    x = _t(rng.standard_normal(1000).astype(np.float32))
    (x * 3.0 + 1.0).tanh().numpy()
    compiles = fb.inner.client.server.compiles + fb.inner.client.server.store_loads
    with ember.inspect_fusion(DEV) as rec, ember.tracing.capture() as spans:
        for s in (0.5, 1.5, 2.5):  # scalar values are arguments, not part of the plan
            out = (x * s + 1.0).tanh().numpy()
    assert rec.searches == 0 and rec.plan_hits == 3
    assert not [s for s in spans if s.name == "compile" and not s.fields.get("cached", False)]
    assert fb.inner.client.server.compiles + fb.inner.client.server.store_loads == compiles
    np.testing.assert_allclose(out, np.tanh(x.numpy().astype(np.float64) * 2.5 + 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_bias_gelu_is_one_block(rng: np.random.Generator, dtype: type) -> None:
    a = rng.standard_normal((48, 40)).astype(dtype)
    w = rng.standard_normal((40, 72)).astype(dtype)
    b = rng.standard_normal(72).astype(dtype)
    ta, tw, tb = _t(a), _t(w), _t(b)
    with ember.inspect_fusion(DEV) as rec:
        out = (ta @ tw + tb).gelu().numpy()
    assert [blk.fuser for blk in rec.blocks] == ["matmul_epilogue"]
    z = a.astype(np.float64) @ w + b
    ref = 0.5 * z * (1 + erf(z / math.sqrt(2)))
    tol = 1e-4 if dtype is np.float32 else 1e-10
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def _epilogue_jobs(monkeypatch: pytest.MonkeyPatch) -> list:
    """The epilogue jobs the tuner's candidates see (every drained matmul-epilogue block)."""
    from ember.backends.cube.fusers import matmul_epilogue as me

    jobs: list = []
    for c in me.EPILOGUE_TUNABLES.candidates:
        fn = c.fn
        monkeypatch.setattr(c, "fn", lambda bk, a, b, job, fn=fn: (jobs.append(job), fn(bk, a, b, job))[1])
    return jobs


@pytest.mark.parametrize("form", ["gelu(a@w+b)", "gelu(b+a@w)", "relu(a@w+b)", "gelu(a@w+b)*2", "gelu(a@w+r)"])
def test_the_tensor_core_candidate_recognises_bias_gelu_only(rng: np.random.Generator, monkeypatch, form) -> None:
    """The CUDA wgmma bias + GELU candidate is offered for exactly ``gelu(a @ w + bias)`` (either
    operand order); other epilogues (another activation, a scale after, a full residual) are
    not recognised. On the CPU its validity check refuses the runtime."""
    from ember.backends.cube.fusers import matmul_epilogue as me

    jobs = _epilogue_jobs(monkeypatch)
    a = rng.standard_normal((24, 16)).astype(np.float32)
    w = rng.standard_normal((16, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    r = rng.standard_normal((24, 40)).astype(np.float32)
    ta, tw, tb, tr = _t(a), _t(w), _t(b), _t(r)
    out = {  # the product is never held: it must be unobserved for the block to form
        "gelu(a@w+b)": lambda: (ta @ tw + tb).gelu(),
        "gelu(b+a@w)": lambda: (tb + ta @ tw).gelu(),
        "relu(a@w+b)": lambda: (ta @ tw + tb).relu(),
        "gelu(a@w+b)*2": lambda: (ta @ tw + tb).gelu() * 2.0,
        "gelu(a@w+r)": lambda: (ta @ tw + tr).gelu(),
    }[form]()
    out.numpy()
    assert jobs
    assert {me._is_bias_gelu(j) for j in jobs} == {form in ("gelu(a@w+b)", "gelu(b+a@w)")}
    assert not me._tensor_core_valid(fusion_backend(DEV).inner, None, None, jobs[0])  # not a CUDA runtime


def test_matmul_whose_product_is_kept_is_not_fused_with_its_epilogue(rng: np.random.Generator) -> None:
    a, w = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 24)).astype(np.float32)
    ta, tw = _t(a), _t(w)
    with ember.inspect_fusion(DEV) as rec:
        p = ta @ tw
        r = p.relu()
        ro, po = r.numpy(), p.numpy()
    assert "matmul_epilogue" not in [blk.fuser for blk in rec.blocks]
    np.testing.assert_allclose(po, a.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ro, np.maximum(a.astype(np.float64) @ w, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_a_prologue_fuses_into_a_last_axis_reduction(rng: np.random.Generator, op: str) -> None:
    a = rng.standard_normal((37, 129)).astype(np.float32)
    m = rng.standard_normal((37, 1)).astype(np.float32)
    x, tm = _t(a), _t(m)
    with ember.inspect_fusion(DEV) as rec:
        e = ((x - tm) * 0.1).exp()
        r = getattr(e, op)(dim=-1, keepdim=True) if op in ("sum", "prod") else getattr(e, "amax" if op == "max"
                                                                                        else "amin")(-1, True)
        del e
        out = r.numpy()
    assert rec.blocks[-1].fuser == "reduce_prologue", rec
    v = np.exp((a.astype(np.float64) - m) * 0.1)
    ref = {"sum": v.sum(-1, keepdims=True), "max": v.max(-1, keepdims=True), "min": v.min(-1, keepdims=True),
           "prod": v.prod(-1, keepdims=True)}[op]
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_a_queued_out_of_range_index_raises_on_the_read() -> None:
    x = ember.arange(20, device=DEV, dtype=ember.float32).reshape(4, 5)
    i = ember.tensor([0, 3], device=DEV) * 2  # queued: not checked by the Tensor API
    with pytest.raises(IndexError) as ei:
        x.index_select(0, i).numpy()
    assert "out of bounds" in str(ei.value)
    j = ember.tensor([0, 1], device=DEV) - 2  # negatives wrap once, as in Python
    np.testing.assert_array_equal(x.index_select(0, j).numpy(), np.arange(20.0).reshape(4, 5)[[2, 3]])


def test_fusion_off_gives_the_same_values(rng: np.random.Generator) -> None:
    a = rng.standard_normal((33, 65)).astype(np.float32)
    outs = []
    for dev in (DEV, Device.cpu(fusion=False)):
        x = ember.tensor(a, device=dev)
        outs.append(((x * 1.5 - 0.25).abs().sqrt() * x).sum(-1).numpy())
    assert ember.backend_name(Device.cpu(fusion=False)) == "dispatch<cube<cpu>>"
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,bshape", [((256, 96), (96,)), ((160, 128), (160, 1)), ((16, 8, 64), (8, 64))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_row_and_column_broadcasts_run_in_lines(rng: np.random.Generator, shape: tuple, bshape: tuple,
                                                dtype: type) -> None:
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(bshape).astype(dtype)
    x, tb = _t(a), _t(b)
    with ember.tracing.capture() as spans:
        out = (((x + tb) * 0.5).relu() - tb).numpy()
    kernels = [s.fields.get("kernel") for s in _launches(spans)]
    assert len(kernels) == 1 and kernels[0].startswith("fused_rows"), kernels
    # the unfused ops round to the dtype after each op; so does the reference
    r = ((a + b).astype(dtype) * dtype(0.5)).astype(dtype)
    ref = (np.maximum(r, 0) - b).astype(dtype)
    np.testing.assert_array_equal(out, ref)


def test_a_few_long_rows_are_split_into_chunks(rng: np.random.Generator) -> None:
    """The fused reduction runs a unit or a cube per row: a large 1-d sum is split into chunks
    (fused) whose partials the unfused reduction combines, so the prologue's result is never
    written."""
    from ember.backends.cube.fusers.reduce_prologue import _split

    a = rng.standard_normal(1 << 18).astype(np.float32)
    x = _t(a)
    with ember.inspect_fusion(DEV) as rec:
        out = (x * x + 1.0).sum().numpy()
    assert rec.blocks[-1].fuser == "reduce_prologue", rec
    np.testing.assert_allclose(out, (a.astype(np.float64) ** 2 + 1).sum(), rtol=1e-5)
    assert _split(1, 1 << 18) == 256 and _split(1, 1 << 28) == 4096 and _split(300, 1 << 20) == 1
    assert _split(1, 3**11) == 0 and _split(2, 1000) == 1  # no power-of-two factor; small input


def test_a_long_row_without_a_power_of_two_factor_is_not_claimed(rng: np.random.Generator) -> None:
    a = rng.standard_normal(3**11).astype(np.float32)
    x = _t(a)
    with ember.inspect_fusion(DEV) as rec:
        out = (x * 0.5).sum().numpy()
    assert "reduce_prologue" not in [b.fuser for b in rec.blocks], rec
    # the terms of a normal sample cancel: a float32 sum's error scales with the sum of the
    # magnitudes, not with the (small) total (measured over 300 seeds: at most 2.3e-9 of it)
    terms = a.astype(np.float64) * 0.5
    np.testing.assert_allclose(out, terms.sum(), rtol=1e-5, atol=1e-7 * np.abs(terms).sum())


@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
def test_split_rows_with_strided_and_broadcast_inputs(rng: np.random.Generator, op: str) -> None:
    """Split chunks read every input through its strides: a transposed operand, a per-row
    column and a per-column row broadcast."""
    base = rng.standard_normal((1 << 15, 8)).astype(np.float32)
    m = rng.standard_normal((8, 1)).astype(np.float32)
    v = rng.standard_normal(1 << 15).astype(np.float32)
    xt, tm, tv = _t(base).t(), _t(m), _t(v)
    with ember.inspect_fusion(DEV) as rec:
        e = ((xt - tm) * tv * 0.25).tanh()
        r = getattr(e, op)(-1)
        del e
        out = r.numpy()
    assert rec.blocks[-1].fuser == "reduce_prologue", rec
    w = np.tanh((base.T.astype(np.float64) - m) * v * 0.25)
    ref = {"sum": w.sum(-1), "amax": w.max(-1), "amin": w.min(-1)}[op]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_split_rows_accumulate_wide_and_return_the_reduction_dtype(rng: np.random.Generator, dtype: type) -> None:
    a = (rng.standard_normal(1 << 17) * (0.05 if dtype is np.float16 else 4)).astype(dtype)  # f16: sum < 65504
    x = _t(a)
    with ember.inspect_fusion(DEV) as rec:
        out = (x * x).sum().numpy()
    assert rec.blocks[-1].fuser == "reduce_prologue", rec
    want = (a.astype(np.float64) ** 2).sum() if dtype is np.float16 else (a.astype(np.int64) ** 2).sum()
    assert out.dtype == (np.float16 if dtype is np.float16 else np.int64)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3 if dtype is np.float16 else 0)
