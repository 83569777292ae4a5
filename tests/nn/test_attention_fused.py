"""The fused ``sdpa`` op (``F.scaled_dot_product_attention`` without a mask tensor or dropout)
against torch CPU: outputs and q/k/v gradients, causal and not, L != S, lengths off the kernels'
block and tile sizes, other ranks, broadcast batch dims, q/k/v read as views of one packed
``qkv`` tensor, on every autodiff device (Flex runs the op's decomposition, the Cube devices the
flash-attention kernels); that the Cube devices run the kernels (not the decomposition), that
the kernels write every element of their results (poisoned buffers), and the fallbacks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from nn_reference import assert_close, ember_input, is_reduced, is_slow, torch_input
from spatial_reference import check_fn

import ember
import ember.nn.functional as F
from ember import dtype as dt
from ember.ops import REGISTRY

# (id, q/k/v shapes, causal, runs on the slow and unfused devices)
CASES = [
    # 70 rows: two GPU blocks (64) and five CPU blocks (16) of queries, a partial key tile
    ("causal_blocks", [(2, 3, 70, 16), (2, 3, 70, 16), (2, 3, 70, 16)], True, False),
    ("cross_lengths", [(2, 2, 37, 8), (2, 2, 19, 8), (2, 2, 19, 12)], False, False),
    # top-left causal alignment: fewer queries than keys, and more (rows past S see every key)
    ("causal_short_queries", [(1, 2, 5, 8), (1, 2, 23, 8), (1, 2, 23, 8)], True, True),
    ("causal_long_queries", [(1, 2, 21, 4), (1, 2, 6, 4), (1, 2, 6, 4)], True, False),
    ("plain_tiny", [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)], False, True),
    ("rank3", [(3, 9, 8), (3, 11, 8), (3, 11, 8)], True, False),
    ("rank2", [(6, 4), (9, 4), (9, 2)], False, False),
    ("rank5", [(2, 2, 3, 6, 8), (2, 2, 3, 6, 8), (2, 2, 3, 6, 8)], True, False),
    ("odd_head_dim", [(1, 2, 17, 5), (1, 2, 17, 5), (1, 2, 17, 3)], True, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fused_matches_torch(case, autodiff_device, rng):
    name, shapes, causal, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    check_fn(autodiff_device, rng, lambda *a: F.scaled_dot_product_attention(*a, is_causal=causal, scale=0.3),
             lambda *a: TF.scaled_dot_product_attention(*a, is_causal=causal, scale=0.3), shapes, what=name)


def test_broadcast_batch_dims(autodiff_device, rng):
    """k and v shared by every head (batch dims broadcast): their gradients sum over the heads."""
    if is_slow(autodiff_device):
        pytest.skip("the broadcast is a layout case the fast devices cover")
    check_fn(autodiff_device, rng, lambda *a: F.scaled_dot_product_attention(*a, is_causal=True),
             lambda *a: TF.scaled_dot_product_attention(*a, is_causal=True),
             [(2, 3, 10, 8), (2, 1, 10, 8), (1, 1, 10, 8)], what="broadcast")


def _gpt_attention(lib, qkv, heads, causal=True):
    """A GPT block's attention: q, k, v split and transposed from one (B, T, 3C) projection."""
    b, t, c3 = qkv.shape
    c = c3 // 3
    q, k, v = qkv.split(c, dim=2)
    q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
    fn = F.scaled_dot_product_attention if lib is ember else TF.scaled_dot_product_attention
    return fn(q, k, v, is_causal=causal).transpose(1, 2).reshape(b, t, c)


def test_packed_qkv_views(autodiff_device, rng):
    """q, k and v as strided views of one tensor (read in place by the kernels); the gradient
    reaches the packed tensor."""
    t = 9 if is_slow(autodiff_device) else 40
    x = rng.standard_normal((2, t, 3 * 16)).astype(np.float32)
    ex, tx = ember_input(x, autodiff_device), torch_input(x)
    ey, ty = _gpt_attention(ember, ex, 2), _gpt_attention(torch, tx, 2)
    assert_close(ey, ty, what="output")
    g = rng.standard_normal(ty.shape).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    ey.backward(ember.tensor(g, device=autodiff_device))
    assert_close(ex.grad, tx.grad, what="grad of qkv")


def _cube(device):
    """The Cube backend under a device's stack (None for Flex)."""
    b = device.backend()
    while hasattr(b, "inner"):
        b = b.inner
    return b if hasattr(b, "client") else None


def test_cube_devices_run_the_kernels(autodiff_device, rng, monkeypatch):
    """On a Cube device neither the forward nor the backward falls back to the decomposition."""
    if _cube(autodiff_device) is None:
        pytest.skip("Flex runs the decomposition")

    def refuse(*a):
        raise AssertionError("the decomposition ran on a Cube device")

    for op in ("sdpa", "sdpa_backward"):
        monkeypatch.setattr(REGISTRY[op], "compose", refuse)
    shapes = [(1, 2, 19, 8), (1, 2, 21, 8), (1, 2, 21, 8)]
    check_fn(autodiff_device, rng, lambda *a: F.scaled_dot_product_attention(*a, is_causal=True),
             lambda *a: TF.scaled_dot_product_attention(*a, is_causal=True), shapes, what="kernels")


def test_result_layout_makes_the_head_merge_a_view():
    """The forward's result is laid out (B, L, H, Ev): transposing heads and positions back, as
    a GPT block does before its projection, needs no copy."""
    dev = ember.Device.cpu(fusion=False)
    q = ember.randn(2, 3, 10, 8, device=dev)
    y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    bk = _cube(dev)
    assert bk.permute(y._p, (0, 2, 1, 3)).is_contiguous()


@pytest.mark.parametrize("causal", [False, True])
def test_kernels_write_every_element(plain_device, rng, monkeypatch, causal):
    """Every buffer the Cube backend allocates is filled with NaN first: the kernels' results
    (output, gradients, the backward's statistics) must overwrite all of it."""
    bk = _cube(plain_device)
    if bk is None:
        pytest.skip("Flex allocates no buffers")
    if not bk.supports(dt.float32) or is_reduced(plain_device) and causal:
        pytest.skip("one case on the slow and unfused devices")
    empty = bk._empty

    def poisoned(shape, dtype):
        t = empty(shape, dtype)
        if dtype.is_floating_point and math.prod(shape):
            bk.client.write(t.buffer, np.full(math.prod(shape), np.nan, dtype.np))
        return t

    shapes = [(2, 2, 19, 8), (2, 2, 23, 8), (2, 2, 23, 4)]
    qkv = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    g = rng.standard_normal((2, 2, 19, 4)).astype(np.float32)
    ps = [bk.from_data(x, dt.float32) for x in qkv]
    gp = bk.from_data(g, dt.float32)
    monkeypatch.setattr(bk, "_empty", poisoned)
    out = bk.sdpa(*ps, 0.4, causal)
    flat = bk.sdpa_backward(gp, *ps, out, 0.4, causal)
    got_out, got_flat = np.asarray(bk.into_data(out)), np.asarray(bk.into_data(flat))
    monkeypatch.setattr(bk, "_empty", empty)
    tx = [torch.tensor(x, requires_grad=True) for x in qkv]
    ty = TF.scaled_dot_product_attention(*tx, is_causal=causal, scale=0.4)
    ty.backward(torch.tensor(g))
    assert_close(torch.from_numpy(got_out.copy()), ty, what="output")
    want = torch.cat([t.grad.ravel() for t in tx])
    assert_close(torch.from_numpy(got_flat.copy()), want, what="packed gradients")


def test_fallbacks_match_torch(rng):
    """What the kernels do not take runs the decomposition on the Cube device: float64, a head
    dim over 128, and promoted mixed dtypes (the composition in the Tensor API)."""
    dev = ember.Device.cpu().autodiff()
    for shapes, dtype in (([(1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 3)], ember.float64),
                          ([(1, 1, 4, 130), (1, 1, 6, 130), (1, 1, 6, 2)], ember.float32)):
        xs = [rng.standard_normal(s) for s in shapes]
        ex = [ember_input(x, dev, dtype=dtype) for x in xs]
        tx = [torch_input(x, dtype={ember.float64: torch.float64, ember.float32: torch.float32}[dtype]) for x in xs]
        ey = F.scaled_dot_product_attention(*ex, is_causal=True)
        ty = TF.scaled_dot_product_attention(*tx, is_causal=True)
        assert ey.dtype is dtype
        assert_close(ey, ty, dtype=dtype, what=f"{dtype} output")
        g = rng.standard_normal(ty.shape)
        ty.backward(torch.from_numpy(g).to(ty.dtype))
        ey.backward(ember.tensor(g, device=dev, dtype=dtype))
        for i, (a, b) in enumerate(zip(ex, tx)):
            assert_close(a.grad, b.grad, dtype=dtype, what=f"{dtype} grad {i}")


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_half_inputs_accumulate_in_float32(autodiff_device, rng, dtype):
    """Half q/k/v: the result and gradients in the half type, within its rounding of torch's
    float32 attention of the same (rounded) inputs."""
    if is_slow(autodiff_device) or is_reduced(autodiff_device):
        pytest.skip("the half kernels are the float32 ones with other loads and stores")
    tdt = {ember.float16: torch.float16, ember.bfloat16: torch.bfloat16}[dtype]
    xs = [torch.from_numpy(rng.standard_normal((2, 2, 20, 8)).astype(np.float32)).to(tdt).float() for _ in range(3)]
    tx = [x.clone().requires_grad_(True) for x in xs]
    ex = [ember.tensor(x.numpy(), device=autodiff_device, dtype=dtype, requires_grad=True) for x in xs]
    ty = TF.scaled_dot_product_attention(*tx, is_causal=True)
    ey = F.scaled_dot_product_attention(*ex, is_causal=True)
    assert ey.dtype is dtype
    assert_close(ey, ty, dtype=dtype, what="output")
    g = torch.from_numpy(rng.standard_normal((2, 2, 20, 8)).astype(np.float32)).to(tdt).float()
    ty.backward(g)
    ey.backward(ember.tensor(g.numpy(), device=autodiff_device, dtype=dtype))
    for i, (a, b) in enumerate(zip(ex, tx)):
        assert a.grad.dtype is dtype
        assert_close(a.grad, b.grad, dtype=dtype, what=f"grad {i}")
