"""``F.pad`` (all four modes, negative pads) and ``F.interpolate`` (every mode, sizes and scale
factors, align_corners) against torch CPU: outputs and input gradients on every autodiff device
(a representative subset on the slow and unfused devices); the padding and Upsample modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from nn_reference import assert_close, is_reduced
from spatial_reference import check_fn

import ember
import ember.nn as enn
import ember.nn.functional as F

# (id, input shape, pad, mode, runs on the slow device)
PADS = [
    ("reflect_2d", (2, 3, 5, 4), (1, 2, 2, 1), "reflect", True),
    ("reflect_crop", (2, 3, 5, 4), (-1, 2, 1, -2), "reflect", False),
    ("reflect_1d_unbatched", (3, 5), (2, 4), "reflect", False),
    ("replicate_2d", (2, 3, 5, 4), (3, 3, 0, 2), "replicate", True),
    ("replicate_3d", (1, 2, 3, 4, 3), (1, 1, 2, 0, 1, 2), "replicate", False),
    ("circular_2d", (2, 3, 5, 4), (1, 2, 2, 1), "circular", True),
    ("circular_crop", (2, 3, 5, 4), (-1, 2, 3, -2), "circular", False),
    ("circular_full_wrap", (2, 3, 4), (4, 4), "circular", False),
    ("constant_value_crop", (2, 3, 5, 4), (1, 2, -1, 0, 1, 1), "constant", False),
]


@pytest.mark.parametrize("case", PADS, ids=[c[0] for c in PADS])
def test_pad_matches_torch(case, autodiff_device, rng):
    name, shape, pad, mode, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    kwargs = {"pad": pad, "mode": mode}
    if mode == "constant":
        kwargs["value"] = 1.5
    check_fn(autodiff_device, rng, F.pad, TF.pad, [shape], kwargs, what=name)


def test_pad_of_an_empty_batch_backward(autodiff_device, rng):
    # the input's gradient is an empty window (offset past the end) of the padded gradient's
    # empty buffer: reading it back raised on the Cube devices
    x = ember.tensor(np.zeros((0, 3, 3, 3), np.float32), device=autodiff_device, requires_grad=True)
    y = F.pad(x, (1, 1, 1, 1, 1, 1), "constant", 1.0)
    assert tuple(y.shape) == (0, 5, 5, 5)
    (y * ember.tensor(np.zeros((0, 5, 5, 5), np.float32), device=autodiff_device)).sum().backward()
    assert x.grad.numpy().shape == (0, 3, 3, 3)


def test_pad_errors():
    x = ember.randn(1, 3, 4)
    with pytest.raises(RuntimeError, match="less than the corresponding input dimension"):
        F.pad(x, (4, 1), mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(x, (5, 1), mode="circular")
    with pytest.raises(NotImplementedError, match="not supported for 4D input"):
        F.pad(ember.randn(1, 2, 3, 4), (1, 1), mode="reflect")
    with pytest.raises(ValueError, match="doesn't take in value"):
        F.pad(x, (1, 1), mode="reflect", value=2.0)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode"):
        F.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1, 1, 1))


# (id, input shape, kwargs, runs on the slow device)
INTERP = [
    ("nearest_x2", (2, 3, 4, 3), dict(scale_factor=2), True),
    ("nearest_size", (2, 3, 5, 4), dict(size=(7, 3)), False),
    ("nearest_fractional", (2, 3, 5, 4), dict(scale_factor=(0.7, 1.3)), False),
    ("nearest_exact", (2, 3, 5, 4), dict(scale_factor=1.7, mode="nearest-exact"), False),
    ("nearest_1d", (2, 3, 5), dict(size=8), False),
    ("nearest_3d", (1, 2, 3, 4, 2), dict(scale_factor=2), False),
    ("bilinear", (2, 3, 5, 4), dict(size=(7, 6), mode="bilinear"), True),
    ("bilinear_align", (2, 3, 5, 4), dict(size=(7, 6), mode="bilinear", align_corners=True), False),
    ("bilinear_down_factor", (2, 3, 5, 4), dict(scale_factor=(0.6, 1.5), mode="bilinear"), False),
    ("bilinear_recompute", (2, 3, 5, 4), dict(scale_factor=(1.3, 1.5), mode="bilinear",
                                              recompute_scale_factor=True), False),
    ("bilinear_same_size_factor", (2, 3, 5, 4), dict(scale_factor=1.1, mode="bilinear"), False),
    ("linear_1d", (2, 3, 5), dict(scale_factor=2.5, mode="linear"), False),
    ("linear_align", (2, 3, 5), dict(size=8, mode="linear", align_corners=True), False),
    ("trilinear", (1, 2, 3, 4, 2), dict(size=(4, 3, 3), mode="trilinear"), False),
    ("bicubic", (2, 3, 5, 4), dict(size=(3, 9), mode="bicubic"), False),
    ("bicubic_align", (2, 3, 5, 4), dict(size=(6, 7), mode="bicubic", align_corners=True), False),
    ("area", (2, 3, 7, 5), dict(size=(3, 2), mode="area"), False),
]


@pytest.mark.parametrize("case", INTERP, ids=[c[0] for c in INTERP])
def test_interpolate_matches_torch(case, autodiff_device, rng):
    name, shape, kwargs, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    check_fn(autodiff_device, rng, F.interpolate, TF.interpolate, [shape], kwargs, what=name)


def test_interpolate_errors():
    x = ember.randn(1, 1, 4)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D input"):
        F.interpolate(x, scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)


def test_modules(rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    pairs = [
        (enn.ZeroPad2d(1), tnn.ZeroPad2d(1)),
        (enn.ConstantPad2d((1, 0, 2, 1), 3.0), tnn.ConstantPad2d((1, 0, 2, 1), 3.0)),
        (enn.ReflectionPad2d((1, 2, 0, 3)), tnn.ReflectionPad2d((1, 2, 0, 3))),
        (enn.ReplicationPad2d(2), tnn.ReplicationPad2d(2)),
        (enn.CircularPad2d(1), tnn.CircularPad2d(1)),
        (enn.Upsample(scale_factor=2), tnn.Upsample(scale_factor=2)),
        (enn.Upsample(size=(3, 7), mode="bilinear", align_corners=False),
         tnn.Upsample(size=(3, 7), mode="bilinear", align_corners=False)),
        (enn.UpsamplingBilinear2d(scale_factor=2), tnn.UpsamplingBilinear2d(scale_factor=2)),
        (enn.UpsamplingNearest2d(size=(6, 6)), tnn.UpsamplingNearest2d(size=(6, 6))),
    ]
    for em, tm in pairs:
        assert repr(em) == repr(tm)
        assert_close(em(ember.tensor(x)), tm(torch.tensor(x)), what=repr(tm))
    x1 = rng.standard_normal((2, 3, 5)).astype(np.float32)
    for em, tm in [(enn.ReflectionPad1d(2), tnn.ReflectionPad1d(2)), (enn.ConstantPad1d(2, -1.0),
                                                                       tnn.ConstantPad1d(2, -1.0))]:
        assert repr(em) == repr(tm)
        assert_close(em(ember.tensor(x1)), tm(torch.tensor(x1)), what=repr(tm))


@pytest.mark.parametrize("fn,shape,arg", [("pixel_shuffle", (2, 8, 3, 2), 2), ("pixel_unshuffle", (1, 2, 6, 4), 2),
                                          ("channel_shuffle", (2, 6, 3), 3)])
def test_shuffles(fn, shape, arg, autodiff_device, rng):
    if is_reduced(autodiff_device) and fn != "pixel_shuffle":
        pytest.skip("representative subset on the slow and unfused devices")
    check_fn(autodiff_device, rng, lambda x: getattr(F, fn)(x, arg), lambda x: getattr(TF, fn)(x, arg), [shape],
             what=fn)
    x = rng.standard_normal(shape).astype(np.float32)
    cls = {"pixel_shuffle": "PixelShuffle", "pixel_unshuffle": "PixelUnshuffle",
           "channel_shuffle": "ChannelShuffle"}[fn]
    em, tm = getattr(enn, cls)(arg), getattr(tnn, cls)(arg)
    assert repr(em) == repr(tm)
    assert_close(em(ember.tensor(x)), tm(torch.tensor(x)))
