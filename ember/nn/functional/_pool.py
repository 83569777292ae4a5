"""Pooling with torch's arguments, output sizes and padding rules, composed from ember ops.

Max and average pooling reuse the im2col of ``_conv`` (one strided slice per window offset,
stacked on a new axis) and reduce that axis (``amax`` / ``sum``). Max pooling pads with -inf, so
padding never wins; average pooling pads with zeros and divides by a per-position constant that
follows torch's rule (``count_include_pad``, the ceil-mode overhang never counts,
``divisor_override``). Adaptive average pooling is a linear map per spatial dim (a small
``(out, in)`` averaging matrix with torch's ``floor(i*in/out)``..``ceil((i+1)*in/out)`` windows),
so it is two matmuls; adaptive max pooling gathers each dim's windows (padded to the largest
window by repeating its last index, which leaves a max unchanged) and reduces them.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ... import creation as EC
from ... import dtype as dt
from ... import functional as EF
from ...errors import ShapeError
from ...tensor import Tensor
from ._conv import _batched, _blocks, _ntuple

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d"]


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling output size: a ceil-mode window must start inside the input or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_args(x: Tensor, nd: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
               ceil_mode: bool, what: str) -> tuple[tuple[int, ...], ...]:
    k = _ntuple(kernel_size, nd, "kernel_size")
    s = k if stride is None or (isinstance(stride, list | tuple) and len(stride) == 0) else \
        _ntuple(stride, nd, "stride")
    p = _ntuple(padding, nd, "padding")
    d = _ntuple(dilation, nd, "dilation")
    if builtins.any(v < 1 for v in k + s + d):
        raise ValueError(f"{what}: kernel_size, stride and dilation must be positive, got {k}, {s}, {d}")
    for i in range(nd):
        if p[i] < 0 or p[i] > k[i] // 2:
            raise ValueError(f"{what}: pad should be at most half of effective kernel size, but got "
                             f"pad={p[i]}, kernel_size={k[i]}")
    spatial = x.shape[2:]
    out = tuple(_pool_out(spatial[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nd))
    if builtins.any(v <= 0 for v in out):
        raise ShapeError(f"{what}: input {tuple(spatial)} is too small for kernel {k} (output would be {out})")
    return k, s, p, d, out


def _padded(x: Tensor, k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...], d: tuple[int, ...],
            out: tuple[int, ...], value: float) -> Tensor:
    """``x`` padded by ``p`` on the low side and on the high side by as much as the last window
    reaches (at least ``p``'s worth is never needed beyond that; ceil mode may need more)."""
    spatial = x.shape[2:]
    flat: list[int] = []
    for i in reversed(range(len(k))):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1  # extent of the windows in the padded input
        flat += [p[i], builtins.max(need - spatial[i] - p[i], 0)]
    return EF.pad(x, flat, value=value) if builtins.any(flat) else x


def _lowest(d: dt.DType) -> float:
    if d.category == dt.FLOAT:
        return float("-inf")
    if d is dt.bool_:
        return 0
    return int(np.iinfo(d.np).min)


def _max_pool(input: Tensor, nd: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
              ceil_mode: bool, return_indices: bool, what: str) -> Any:
    x, unbatched = _batched(input, nd, what)
    k, s, p, d, out = _pool_args(x, nd, kernel_size, stride, padding, dilation, ceil_mode, what)
    cols = _blocks(_padded(x, k, s, p, d, out, _lowest(x.dtype)), k, s, d, out)  # (N, C, K, *out)
    y = cols.amax(2)
    if not return_indices:
        return y.squeeze(0) if unbatched else y
    # flat index into the unpadded spatial dims (torch's layout): window offset -> coordinates
    arg = cols.argmax(2)  # first maximum in window order, as torch
    spatial = x.shape[2:]
    flat = None
    rest = arg
    for i in range(nd):
        # invariant: rest < prod(k[i:]), so off < k[i]; rest keeps what the later dims index
        inner = math.prod(k[i + 1:])
        off = EF.floor_divide(rest, inner) if inner > 1 else rest
        rest = rest - off * inner
        base = np.arange(out[i], dtype=np.int64) * s[i] - p[i]
        base = base.reshape((out[i],) + (1,) * (nd - 1 - i))
        coord = off * d[i] + EC.tensor(base, dtype=dt.int64, device=x.device)
        flat = coord if flat is None else flat * spatial[i] + coord
    idx = flat
    return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.max_pool1d``."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool1d")


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.max_pool2d``. The gradient of tied maxima is shared equally among
    them (torch routes it to the first one); ties only occur with repeated input values."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.max_pool3d``."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.max_pool1d_with_indices``."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool1d")


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.max_pool2d_with_indices``."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool2d")


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.max_pool3d_with_indices``."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, True, "max_pool3d")


def _max_unpool(input: Tensor, indices: Tensor, nd: int, kernel_size: Any, stride: Any, padding: Any,
                output_size: Any, what: str) -> Tensor:
    x, unbatched = _batched(input, nd, what)
    idx = indices.unsqueeze(0) if unbatched else indices
    if idx.shape != x.shape:
        raise ShapeError(f"{what}: indices {indices.shape} must have the shape of the input {input.shape}")
    k = _ntuple(kernel_size, nd, "kernel_size")
    s = k if stride is None else _ntuple(stride, nd, "stride")
    p = _ntuple(padding, nd, "padding")
    spatial = x.shape[2:]
    default = tuple((spatial[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
    if output_size is None:
        size = default
    else:
        size = tuple(int(v) for v in output_size)[-nd:]
        for i in range(nd):
            lo, hi = default[i] - s[i], default[i] + s[i]
            if not lo < size[i] < hi:
                raise ValueError(f"invalid output_size {tuple(output_size)} (dim {i} must be between {lo} and {hi})")
    n, c = x.shape[:2]
    # every value goes to its flat index within its (n, c) plane (torch's layout of the indices)
    flat = EC.zeros((n, c, math.prod(size)), dtype=x.dtype, device=x.device)
    y = flat.scatter(2, idx.reshape(n, c, -1), x.reshape(n, c, -1)).reshape((n, c) + size)
    return y.squeeze(0) if unbatched else y


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """As ``torch.nn.functional.max_unpool1d``: ``input`` placed at ``indices`` (from ``max_pool1d``)."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size, "max_unpool1d")


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """As ``torch.nn.functional.max_unpool2d``: ``input`` placed at ``indices`` (from ``max_pool2d``)."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size, "max_unpool2d")


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """As ``torch.nn.functional.max_unpool3d``: ``input`` placed at ``indices`` (from ``max_pool3d``)."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size, "max_unpool3d")


def _avg_pool(input: Tensor, nd: int, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
              count_include_pad: bool, divisor_override: int | None, what: str) -> Tensor:
    x, unbatched = _batched(input, nd, what)
    if x.dtype.category != dt.FLOAT:
        raise TypeError(f"{what}: expected a floating-point input, got {x.dtype}")
    k, s, p, d, out = _pool_args(x, nd, kernel_size, stride, padding, 1, ceil_mode, what)
    total = _blocks(_padded(x, k, s, p, d, out, 0.0), k, s, d, out).sum(2)
    if divisor_override is not None:
        if divisor_override == 0:
            raise ValueError(f"{what}: divisor must be not zero")
        return (total / divisor_override).squeeze(0) if unbatched else total / divisor_override
    # torch's divisor per output position, separable over dims: the window clipped to the padded
    # input (count_include_pad) or to the input itself
    div = np.ones((), dtype=np.float64)
    spatial = x.shape[2:]
    for i in range(nd):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], spatial[i] + p[i])
        n = end - start if count_include_pad else np.minimum(end, spatial[i]) - np.maximum(start, 0)
        div = div[..., None] * n.reshape((1,) * div.ndim + (out[i],))
    inv = EC.tensor(1.0 / div, dtype=x.dtype, device=x.device)
    y = total * inv
    return y.squeeze(0) if unbatched else y


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """As ``torch.nn.functional.avg_pool1d``."""
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """As ``torch.nn.functional.avg_pool2d``."""
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """As ``torch.nn.functional.avg_pool3d``."""
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


def _lp_pool(input: Tensor, nd: int, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool,
             what: str) -> Tensor:
    k = _ntuple(kernel_size, nd, "kernel_size")
    x = input.pow(norm_type)
    avg = _avg_pool(x, nd, k, stride, 0, ceil_mode, True, None, what)
    # torch: (sign(avg) * relu(|avg|)) * K, then the 1/p power
    return (avg.sign() * avg.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """As ``torch.nn.functional.lp_pool1d``."""
    return _lp_pool(input, 1, norm_type, kernel_size, stride, ceil_mode, "lp_pool1d")


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """As ``torch.nn.functional.lp_pool2d``."""
    return _lp_pool(input, 2, norm_type, kernel_size, stride, ceil_mode, "lp_pool2d")


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """As ``torch.nn.functional.lp_pool3d``."""
    return _lp_pool(input, 3, norm_type, kernel_size, stride, ceil_mode, "lp_pool3d")


def _adaptive_windows(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(out)
    start = (i * size) // out
    end = -((-(i + 1) * size) // out)  # ceil((i + 1) * size / out)
    return start, end


def _output_size(x: Tensor, output_size: Any, nd: int, what: str) -> tuple[int, ...]:
    if isinstance(output_size, int):
        sizes = (output_size,) * nd
    else:
        sizes = tuple(output_size)
        if len(sizes) == 1 and nd > 1:
            sizes = sizes * nd
        if len(sizes) != nd:
            raise ValueError(f"{what}: output_size must be an int or a tuple of {nd}, got {output_size!r}")
    spatial = x.shape[2:]
    # None keeps the input size, as torch
    out = tuple(spatial[i] if v is None else int(v) for i, v in enumerate(sizes))
    if builtins.any(v < 0 for v in out):
        raise ValueError(f"{what}: output_size must be non-negative, got {out}")
    for i in range(nd):
        if spatial[i] == 0 and out[i] != 0:
            raise ShapeError(f"{what}: input {x.shape} has an empty spatial dimension")
    return out


def _adaptive_avg(input: Tensor, output_size: Any, nd: int, what: str) -> Tensor:
    x, unbatched = _batched(input, nd, what)
    if x.dtype.category != dt.FLOAT:
        raise TypeError(f"{what}: expected a floating-point input, got {x.dtype}")
    out = _output_size(x, output_size, nd, what)
    y = x
    for i in range(nd):
        size = x.shape[2 + i]
        if out[i] == size:
            continue
        start, end = _adaptive_windows(size, out[i])
        m = np.zeros((size, out[i]), dtype=np.float64)  # (in, out): y @ m averages along this dim
        for o in range(out[i]):
            m[start[o]:end[o], o] = 1.0 / (end[o] - start[o])
        mt = EC.tensor(m, dtype=x.dtype, device=x.device)
        dim = 2 + i
        # bring dim last, map it, put it back
        y = y.transpose(dim, -1).matmul(mt).transpose(dim, -1)
    return y.squeeze(0) if unbatched else y


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """As ``torch.nn.functional.adaptive_avg_pool1d``."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """As ``torch.nn.functional.adaptive_avg_pool2d`` (``None`` in ``output_size`` keeps that size)."""
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """As ``torch.nn.functional.adaptive_avg_pool3d``."""
    return _adaptive_avg(input, output_size, 3, "adaptive_avg_pool3d")


def _adaptive_max(input: Tensor, output_size: Any, return_indices: bool, nd: int, what: str) -> Any:
    x, unbatched = _batched(input, nd, what)
    out = _output_size(x, output_size, nd, what)
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    y = x
    shape = [n, c]
    wins = []
    for i in range(nd):
        start, end = _adaptive_windows(spatial[i], out[i])
        kmax = int((end - start).max()) if out[i] else 1
        # window o covers start..end-1, padded to kmax by repeating end-1 (a max is unchanged)
        idx = np.minimum(start[:, None] + np.arange(kmax)[None, :], end[:, None] - 1).astype(np.int64)
        wins.append(idx)
        dim = 2 + 2 * i
        t = EC.tensor(idx.reshape(-1), dtype=dt.int64, device=x.device)
        y = y.index_select(dim, t)
        y = y.reshape(tuple(shape) + (out[i], kmax) + tuple(spatial[i + 1:]))
        shape += [out[i], kmax]
    win_dims = tuple(3 + 2 * i for i in range(nd))
    if not return_indices:
        r = y.amax(win_dims)
        return r.squeeze(0) if unbatched else r
    # flatten the window dims to one axis (out dims first) and take its argmax
    perm = (0, 1) + tuple(2 + 2 * i for i in range(nd)) + win_dims
    yy = y.permute(perm)
    ks = tuple(w.shape[1] for w in wins)
    yy = yy.reshape((n, c) + out + (math.prod(ks),))
    r = yy.amax(-1)
    arg = yy.argmax(-1)
    flat = None
    rest = arg
    for i in range(nd):
        # invariant: rest < prod(ks[i:]), so off < ks[i]; rest keeps what the later dims index
        inner = math.prod(ks[i + 1:])
        off = EF.floor_divide(rest, inner) if inner > 1 else rest
        rest = rest - off * inner
        # coordinate = wins[i][o, off]: gather from a per-position table
        table = EC.tensor(wins[i], dtype=dt.int64, device=x.device)  # (out_i, kmax_i)
        view = (1, 1) + tuple(out[j] if j == i else 1 for j in range(nd)) + (ks[i],)
        tab = table.reshape(view).expand((n, c) + out + (ks[i],))
        coord = tab.gather(-1, off.unsqueeze(-1)).squeeze(-1)
        flat = coord if flat is None else flat * spatial[i] + coord
    return (r.squeeze(0), flat.squeeze(0)) if unbatched else (r, flat)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool1d``."""
    return _adaptive_max(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool2d``."""
    return _adaptive_max(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool3d``."""
    return _adaptive_max(input, output_size, return_indices, 3, "adaptive_max_pool3d")


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool1d_with_indices``."""
    return _adaptive_max(input, output_size, True, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool2d_with_indices``."""
    return _adaptive_max(input, output_size, True, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any, return_indices: bool = True) -> Any:
    """As ``torch.nn.functional.adaptive_max_pool3d_with_indices``."""
    return _adaptive_max(input, output_size, True, 3, "adaptive_max_pool3d")
