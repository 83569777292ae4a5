"""Convolutions, unfold/fold and pooling against torch CPU: outputs and input gradients of the
functional forms over a spread of arguments, the modules with copied weights (parameter
gradients too), and a small CNN's state dict both ways. Every autodiff device; a representative
subset on the slow WGSL device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from nn_reference import assert_close, is_reduced, perturb, torch_state_to_numpy
from spatial_reference import check_fn, check_module

import ember
import ember.nn as enn
import ember.nn.functional as F

# (id, function name, input shapes, kwargs, runs on the slow device)
FUNCTIONAL = [
    ("conv2d_basic", "conv2d", [(2, 3, 5, 5), (4, 3, 3, 3), (4,)], {}, True),
    ("conv2d_stride_pad_dil_groups", "conv2d", [(2, 4, 7, 6), (6, 2, 3, 2), (6,)],
     dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2), False),
    ("conv2d_same_even_kernel", "conv2d", [(1, 3, 5, 6), (2, 3, 2, 4)], dict(padding="same", dilation=(2, 1)), False),
    ("conv2d_valid_depthwise", "conv2d", [(2, 4, 5, 5), (4, 1, 3, 3), (4,)], dict(padding="valid", groups=4), False),
    ("conv2d_unbatched_1x1", "conv2d", [(3, 4, 4), (5, 3, 1, 1)], dict(stride=2), False),
    ("conv1d_same", "conv1d", [(2, 3, 7), (4, 3, 4), (4,)], dict(padding="same"), True),
    ("conv1d_stride_groups", "conv1d", [(2, 4, 9), (6, 2, 3)], dict(stride=2, padding=2, dilation=2, groups=2), False),
    ("conv3d", "conv3d", [(1, 2, 3, 4, 3), (3, 2, 2, 2, 2), (3,)], dict(stride=(1, 2, 1), padding=1), False),
    ("conv_transpose2d", "conv_transpose2d", [(2, 4, 3, 3), (4, 3, 3, 3), (3,)], dict(stride=2, padding=1), True),
    ("conv_transpose2d_all_args", "conv_transpose2d", [(2, 4, 4, 3), (4, 3, 3, 2), (6,)],
     dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(1, 2)), False),
    ("conv_transpose1d", "conv_transpose1d", [(2, 4, 5), (4, 3, 3)],
     dict(stride=2, padding=1, output_padding=1, dilation=2), False),
    ("unfold", "unfold", [(2, 3, 6, 5)], dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), True),
    ("fold", "fold", [(2, 18, 18)], dict(output_size=(6, 5), kernel_size=(2, 3), dilation=(2, 1), padding=1,
                                         stride=(1, 2)), False),
    ("max_pool2d", "max_pool2d", [(2, 3, 6, 6)], dict(kernel_size=2), True),
    ("max_pool2d_pad_ceil", "max_pool2d", [(2, 3, 7, 6)], dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
     False),
    ("max_pool2d_dilation", "max_pool2d", [(1, 2, 7, 6)], dict(kernel_size=(2, 3), stride=(2, 1), dilation=(2, 1),
                                                               ceil_mode=True), False),
    ("max_pool1d", "max_pool1d", [(2, 3, 8)], dict(kernel_size=3, stride=2, padding=1), False),
    ("max_pool3d", "max_pool3d", [(1, 2, 4, 5, 4)], dict(kernel_size=2, ceil_mode=True), False),
    ("avg_pool2d", "avg_pool2d", [(2, 3, 6, 6)], dict(kernel_size=2), True),
    ("avg_pool2d_pad_ceil", "avg_pool2d", [(2, 3, 7, 6)], dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
     False),
    ("avg_pool2d_exclude_pad", "avg_pool2d", [(2, 3, 7, 6)],
     dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), False),
    ("avg_pool2d_divisor", "avg_pool2d", [(2, 3, 7, 6)], dict(kernel_size=(3, 2), padding=1, divisor_override=5),
     False),
    ("avg_pool1d_exclude_pad", "avg_pool1d", [(2, 3, 8)],
     dict(kernel_size=3, stride=2, padding=1, count_include_pad=False), False),
    ("adaptive_avg_pool2d", "adaptive_avg_pool2d", [(2, 3, 7, 6)], dict(output_size=(3, 4)), True),
    ("adaptive_avg_pool2d_none", "adaptive_avg_pool2d", [(2, 3, 7, 6)], dict(output_size=(None, 1)), False),
    ("adaptive_avg_pool1d", "adaptive_avg_pool1d", [(2, 3, 7)], dict(output_size=5), False),
    ("adaptive_max_pool2d", "adaptive_max_pool2d", [(2, 3, 7, 6)], dict(output_size=(3, 4)), False),
    ("lp_pool2d", "lp_pool2d", [(2, 3, 6, 5)], dict(norm_type=2, kernel_size=2), False),
    ("adaptive_avg_pool3d", "adaptive_avg_pool3d", [(1, 2, 5, 4, 3)], dict(output_size=(2, 3, 2)), False),
    ("adaptive_max_pool3d", "adaptive_max_pool3d", [(1, 2, 5, 4, 3)], dict(output_size=(2, 3, 2)), False),
]


@pytest.mark.filterwarnings("ignore:Using padding=.same.:UserWarning")
@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_matches_torch(case, autodiff_device, rng):
    name, fn, shapes, kwargs, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    check_fn(autodiff_device, rng, getattr(F, fn), getattr(TF, fn), shapes, kwargs, what=name)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=(2, 3), dilation=(2, 1))])
def test_max_pool_indices(kwargs, rng):
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    ey, ei = F.max_pool2d(ember.tensor(x), return_indices=True, **kwargs)
    ty, ti = TF.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
    assert_close(ey, ty)
    assert ei.dtype == ember.int64 and (ei.numpy() == ti.numpy()).all()
    ey, ei = F.adaptive_max_pool2d(ember.tensor(x), (3, 4), return_indices=True)
    ty, ti = TF.adaptive_max_pool2d(torch.tensor(x), (3, 4), return_indices=True)
    assert (ei.numpy() == ti.numpy()).all()
    ey, ei = F.max_pool1d(ember.tensor(x[0]), 3, return_indices=True)
    ty, ti = TF.max_pool1d(torch.tensor(x[0]), 3, return_indices=True)
    assert (ei.numpy() == ti.numpy()).all()
    ey, ei = F.adaptive_max_pool3d(ember.tensor(x[:1]), (2, 3, 2), return_indices=True)
    ty, ti = TF.adaptive_max_pool3d(torch.tensor(x[:1]), (2, 3, 2), return_indices=True)
    assert (ei.numpy() == ti.numpy()).all()


def test_pool_indices_with_unit_trailing_windows(rng):
    # a window of size 1 in the last dims: the flat window offset must be used up by the earlier
    # dims (it was read again as the offset of the unit dims: wrong indices)
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    cases = [(F.max_pool3d, TF.max_pool3d, x, ((2, 1, 1),)), (F.max_pool2d, TF.max_pool2d, x[0], ((2, 1),)),
             (F.max_pool3d, TF.max_pool3d, x, ((2, 2, 1), (1, 2, 1))),
             (F.adaptive_max_pool3d, TF.adaptive_max_pool3d, x, ((2, 3, None),)),
             (F.adaptive_max_pool2d, TF.adaptive_max_pool2d, x[0], ((3, None),))]
    for ef, tf, xv, args in cases:
        ey, ei = ef(ember.tensor(xv), *args, return_indices=True)
        ty, ti = tf(torch.tensor(xv), *args, return_indices=True)
        assert_close(ey, ty)
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())


def test_max_unpool(rng):
    x = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    _, ei = F.max_pool2d(ember.tensor(x), 2, return_indices=True)
    _, ti = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    v = rng.standard_normal(tuple(ti.shape)).astype(np.float32)
    for size in (None, (7, 5)):  # flat indices, as torch: a wider output reads them in its own layout
        ev, tv = ember.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
        ey = F.max_unpool2d(ev, ei, 2, output_size=size)
        ty = TF.max_unpool2d(tv, ti, 2, output_size=size)
        assert_close(ey, ty)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(g))
        ey.backward(ember.tensor(g))
        assert_close(ev.grad, tv.grad)
    m = enn.MaxUnpool1d(2)
    assert repr(m) == repr(tnn.MaxUnpool1d(2))
    x1 = rng.standard_normal((2, 3, 6)).astype(np.float32)
    _, ei = F.max_pool1d(ember.tensor(x1), 2, return_indices=True)
    _, ti = TF.max_pool1d(torch.tensor(x1), 2, return_indices=True)
    assert_close(m(ember.tensor(x1[..., :3]), ei), tnn.MaxUnpool1d(2)(torch.tensor(x1[..., :3]), ti))


# (id, constructor taking the nn namespace, input shape, runs on the slow device)
MODULES = [
    ("conv2d_reflect", lambda nn: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (2, 3, 5, 4), True),
    ("conv2d_circular_same", lambda nn: nn.Conv2d(3, 4, (2, 3), padding="same", padding_mode="circular",
                                                  bias=False), (2, 3, 5, 4), False),
    ("conv2d_replicate_groups", lambda nn: nn.Conv2d(4, 2, 3, stride=2, padding=(1, 2), groups=2,
                                                     padding_mode="replicate"), (2, 4, 5, 5), False),
    ("conv1d", lambda nn: nn.Conv1d(3, 5, 3, stride=2, padding=1, dilation=2), (2, 3, 9), False),
    ("conv_transpose2d", lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     (2, 3, 3, 4), False),
    ("conv_transpose1d", lambda nn: nn.ConvTranspose1d(4, 2, 2, stride=2, groups=2, bias=False), (2, 4, 5), False),
]


@pytest.mark.parametrize("case", MODULES, ids=[c[0] for c in MODULES])
def test_module_matches_torch(case, autodiff_device, rng):
    name, ctor, shape, on_slow = case
    if is_reduced(autodiff_device) and not on_slow:
        pytest.skip("representative subset on the slow and unfused devices")
    tm, em = ctor(tnn), ctor(enn)
    assert repr(em) == repr(tm)
    perturb(tm, rng)
    check_module(autodiff_device, rng, em, tm, [rng.standard_normal(shape).astype(np.float32)], what=name)


def test_conv_transpose_output_size(rng):
    tm = tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    em = enn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    em.load_state_dict(torch_state_to_numpy(tm))
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    for size in ((7, 7), (8, 8), (1, 3, 8, 7)):
        assert_close(em(ember.tensor(x), output_size=size), tm(torch.tensor(x), output_size=size))
    with pytest.raises(ValueError, match="valid sizes"):
        em(ember.tensor(x), output_size=(9, 9))


def test_default_init_bounds():
    # torch's default: kaiming_uniform_(a=sqrt(5)) -> U(+-1/sqrt(fan_in)) for weight and bias
    ember.manual_seed(0)
    m = enn.Conv2d(4, 64, 3, groups=2)
    bound = 1 / np.sqrt(2 * 9)
    w, b = m.weight.numpy(), m.bias.numpy()
    assert w.shape == (64, 2, 3, 3) and b.shape == (64,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.8 * bound
    t = enn.ConvTranspose2d(4, 6, 2)  # fan_in = weight.size(1) * K = 6 * 4
    assert t.weight.shape == (4, 6, 2, 2) and np.abs(t.weight.numpy()).max() <= 1 / np.sqrt(24)


def test_errors():
    x = ember.randn(1, 2, 5, 5)
    w = ember.randn(3, 2, 3, 3)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding string"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(ValueError, match="divisible by groups"):
        F.conv2d(x, w, groups=2)
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="output padding must be smaller"):
        F.conv_transpose2d(x, ember.randn(2, 3, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="padding_mode"):
        enn.Conv2d(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="zeros"):
        enn.ConvTranspose2d(2, 3, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="in_channels must be divisible"):
        enn.Conv2d(3, 4, 3, groups=2)


class _Cnn:
    """Conv2d + BatchNorm2d + ReLU + MaxPool2d + Flatten + Linear in either namespace."""

    @staticmethod
    def build(nn):
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 3 * 3, 3))


def test_cnn_state_dict_both_ways(autodiff_device, rng):
    if is_reduced(autodiff_device):
        pytest.skip("its layers run on this device in the tests above (this model alone takes minutes on WGSL)")
    torch.manual_seed(0)
    tm = _Cnn.build(tnn)
    em = _Cnn.build(enn)
    perturb(tm, rng)
    # torch -> ember: outputs, input and parameter gradients in train mode (batch statistics)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    check_module(autodiff_device, rng, em, tm, [x], what="cnn train")
    for name, b in tm.named_buffers():
        assert_close(em.get_buffer(name), b, what=f"running buffer {name}")
    # ember -> torch: a fresh torch model loads ember's state dict and agrees in eval mode
    tm2 = _Cnn.build(tnn)
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in em.state_dict().items()}
    tm2.load_state_dict(state)
    tm2.eval()
    em.eval()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        want = tm2(torch.tensor(x))
    assert_close(em(ember.tensor(x, device=autodiff_device)), want, what="cnn eval ember->torch")
