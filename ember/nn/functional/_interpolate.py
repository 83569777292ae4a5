"""``interpolate`` (and the ``upsample`` aliases) with torch's output sizes and source-index formulas.

Every mode is separable, so each resized spatial dim is handled on its own: the source indices
and weights are computed here in numpy (in float32, as torch's CPU kernels compute them for
float32 inputs, so ``floor`` lands on the same index) and applied with ``index_select`` and an
elementwise weighted sum, which is differentiable on every device. ``area`` is adaptive average
pooling, as in torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import creation as EC
from ... import dtype as dt
from ...tensor import Tensor
from ._pool import _adaptive_avg

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle",
           "channel_shuffle", "native_channel_shuffle"]

_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_CUBIC_A = -0.75  # torch's bicubic coefficient


def _scale(size_in: int, size_out: int, align_corners: bool, factor: float | None) -> np.float32:
    """torch's ``area_pixel_compute_scale``: the source step per output step."""
    if align_corners:
        return np.float32((size_in - 1) / (size_out - 1)) if size_out > 1 else np.float32(0)
    if factor is not None and factor > 0:
        return np.float32(1.0 / factor)
    return np.float32(size_in) / np.float32(size_out)


def _source(scale: np.float32, size_out: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """torch's ``area_pixel_compute_source_index`` for every output index (float32)."""
    dst = np.arange(size_out, dtype=np.float32)
    if align_corners:
        return scale * dst
    src = scale * (dst + np.float32(0.5)) - np.float32(0.5)
    return src if cubic else np.maximum(src, np.float32(0))


def _along(x: Tensor, dim: int, taps: list[tuple[np.ndarray, np.ndarray | None]]) -> Tensor:
    """sum over taps of ``x.index_select(dim, idx) * w`` (``w`` broadcast along ``dim``)."""
    out = None
    view = [1] * x.ndim
    view[dim] = -1
    for idx, w in taps:
        t = x.index_select(dim, EC.tensor(idx.astype(np.int64), dtype=dt.int64, device=x.device))
        if w is not None:
            t = t * EC.tensor(w.reshape(view), dtype=x.dtype, device=x.device)
        out = t if out is None else out + t
    assert out is not None
    return out


def _cubic1(t: np.ndarray) -> np.ndarray:
    a = np.float32(_CUBIC_A)
    return ((a + 2) * t - (a + 3)) * t * t + 1


def _cubic2(t: np.ndarray) -> np.ndarray:
    a = np.float32(_CUBIC_A)
    return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """As ``torch.nn.functional.interpolate`` for modes ``nearest``, ``nearest-exact``, ``linear``,
    ``bilinear``, ``bicubic``, ``trilinear`` and ``area`` on ``(N, C, *spatial)`` inputs with 1-3
    spatial dims. ``antialias=True`` is not supported."""
    if mode not in _MODES:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported for the modes "
                                  f"{', '.join(_MODES)}; got mode {mode!r}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if align_corners is not None and mode not in _LINEAR_DIMS:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    align = bool(align_corners)
    nd = input.ndim - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) "
                                  f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if mode in _LINEAR_DIMS and _LINEAR_DIMS[mode] != nd:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_DIMS[mode] + 2}D input")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    spatial = input.shape[2:]
    factors: tuple[float | None, ...]
    if size is not None:
        sizes = tuple(int(s) for s in size) if isinstance(size, Sequence) else (int(size),) * nd
        if len(sizes) != nd:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(spatial)} and output size of {list(sizes)}.")
        factors = (None,) * nd
    else:
        fs = tuple(float(f) for f in scale_factor) if isinstance(scale_factor, Sequence) \
            else (float(scale_factor),) * nd
        if len(fs) != nd:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                             f"input with spatial dimensions of {list(spatial)} and scale_factor of {list(fs)}.")
        sizes = tuple(math.floor(spatial[i] * fs[i]) for i in range(nd))
        # torch passes the factors on to the index formulas unless they are to be recomputed
        factors = (None,) * nd if recompute_scale_factor else fs
    if any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output size {sizes} must be positive")
    if input.dtype.category != dt.FLOAT and mode not in ("nearest", "nearest-exact"):
        raise TypeError(f"interpolate: mode {mode!r} expects a floating-point input, got {input.dtype}")
    if mode == "area":
        return _adaptive_avg(input, sizes, nd, "interpolate")
    y = input
    for i in range(nd):
        n_in, n_out = spatial[i], sizes[i]
        dim = 2 + i
        if mode in ("nearest", "nearest-exact"):
            if n_in == n_out:
                continue  # torch copies a dim whose size does not change, whatever the factor
            scale = _scale(n_in, n_out, False, factors[i])
            dst = np.arange(n_out, dtype=np.float32)
            if mode == "nearest-exact":
                dst = dst + np.float32(0.5)
            src = np.minimum(np.floor(dst * scale).astype(np.int64), n_in - 1)
            y = _along(y, dim, [(src, None)])
        elif mode == "bicubic":
            scale = _scale(n_in, n_out, align, factors[i])
            real = _source(scale, n_out, align, cubic=True)
            base = np.floor(real)
            t = (real - base).astype(np.float32)
            base = base.astype(np.int64)
            one = np.float32(1)
            ws = [_cubic2(t + one), _cubic1(t), _cubic1(one - t), _cubic2(one - t + one)]
            taps = [(np.clip(base - 1 + k, 0, n_in - 1), ws[k]) for k in range(4)]
            y = _along(y, dim, taps)
        else:  # linear along this dim
            if n_in == n_out:
                continue  # torch copies a dim whose size does not change, whatever the factor
            scale = _scale(n_in, n_out, align, factors[i])
            real = _source(scale, n_out, align, cubic=False)
            i0 = real.astype(np.int64)  # real >= 0: truncation is floor
            i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
            l1 = (real - i0.astype(np.float32)).astype(np.float32)
            l0 = np.float32(1) - l1
            y = _along(y, dim, [(i0, l0), (i1, l1)])
    return y


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """As ``torch.nn.functional.upsample`` (an alias of ``interpolate``)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """As ``torch.nn.functional.upsample_nearest``."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """As ``torch.nn.functional.upsample_bilinear`` (``align_corners=True``)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """As ``torch.nn.functional.pixel_shuffle``: ``(*, C*r*r, H, W)`` -> ``(*, C, H*r, W*r)``."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if r <= 0 or c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    nl = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.permute(tuple(range(nl)) + (nl, nl + 3, nl + 1, nl + 4, nl + 2))
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """As ``torch.nn.functional.pixel_unshuffle``: ``(*, C, H*r, W*r)`` -> ``(*, C*r*r, H, W)``."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if r <= 0 or h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"height={h}, width={w}, downscale_factor={r}")
    nl = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.permute(tuple(range(nl)) + (nl, nl + 2, nl + 4, nl + 1, nl + 3))
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """As ``torch.nn.functional.channel_shuffle``: ``(N, g*k, *)`` channels reordered as ``(k, g)``."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    n, c = input.shape[:2]
    if groups <= 0 or c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = input.shape[2:]
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape(input.shape)


native_channel_shuffle = channel_shuffle
