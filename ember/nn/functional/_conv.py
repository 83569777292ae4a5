"""Convolutions and the im2col pair (``unfold``/``fold``) with torch's arguments and layouts.

Everything is composed from ember ops, so it runs on every device and is differentiable:

* ``_blocks`` (im2col) takes one strided slice of the padded input per kernel offset and stacks
  them: ``(N, C, *spatial)`` -> ``(N, C, K, *out)`` with ``K = prod(kernel_size)``, offsets in
  row-major order (torch's ``F.unfold`` channel order ``c * K + k``). Slices with steps are views,
  so the only copy is the stack itself.
* a convolution is then one (batched) matmul of the ``(groups, O/g, C/g*K)`` weight with the
  ``(N, groups, C/g*K, L)`` columns, which leaves the result already in ``(N, O, L)`` layout; the
  bias is an elementwise add on it (a matmul epilogue for the fuser).
* ``_place`` (col2im) is the adjoint: each offset's block is spread by the stride (zero
  insertion through ``pad`` on a size-1 axis), padded to its place and summed. ``fold`` and the
  transposed convolutions (``W^T x`` then col2im) use it.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

from ... import functional as EF
from ...errors import ShapeError
from ...tensor import Tensor, _autocast

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "unfold", "fold"]


def _ntuple(v: Any, n: int, what: str) -> tuple[int, ...]:
    """``v`` as an n-tuple of ints (an int repeats; a sequence must have length n)."""
    if isinstance(v, Sequence) and not isinstance(v, str):
        t = tuple(int(x) for x in v)
        if len(t) == 1 and n > 1:
            t = t * n
        if len(t) != n:
            raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v!r}")
        return t
    return (int(v),) * n


def _out_size(size: int, k: int, s: int, p_lo: int, p_hi: int, d: int) -> int:
    return (size + p_lo + p_hi - d * (k - 1) - 1) // s + 1


def _blocks(x: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
            out: tuple[int, ...]) -> Tensor:
    """im2col of an already padded ``x`` ``(N, C, *S)``: ``(N, C, K, *out)``; block ``k`` (offsets
    row-major over ``kernel``) holds ``x[..., o * s + i * d]`` for every output position ``o``."""
    nd = len(kernel)
    offsets = [()]
    for k in kernel:  # row-major product of the per-dim offsets
        offsets = [o + (i,) for o in offsets for i in range(k)]
    if len(offsets) == 1 and builtins.all(s == 1 for s in stride):
        key = (slice(None), slice(None)) + tuple(slice(0, o) for o in out)
        return x[key].unsqueeze(2)
    slices = []
    for off in offsets:
        key = (slice(None), slice(None)) + tuple(
            slice(off[i] * dilation[i], off[i] * dilation[i] + (out[i] - 1) * stride[i] + 1, stride[i])
            for i in range(nd))
        slices.append(x[key])
    return EF.stack(slices, 2)


def _place(cols: Tensor, size: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
           dilation: tuple[int, ...], padding: tuple[int, ...]) -> Tensor:
    """col2im, the adjoint of ``_blocks``: ``cols`` ``(N, C, K, *B)`` summed into ``(N, C, *size)``
    where block ``k`` at position ``b`` lands at ``b * s + i * d - p`` (out-of-range parts drop)."""
    nd = len(kernel)
    n, c, kk = cols.shape[:3]
    blocks = cols.shape[3:]
    # spread by the stride: (.., B, 1, ..) padded to (.., B, s, ..) and flattened to B*s
    if builtins.any(s > 1 for s in stride):
        shape = (n, c, kk) + builtins.sum(((b, 1) for b in blocks), ())
        sp = cols.reshape(shape)
        pads: list[int] = []
        for s in reversed(stride):
            pads += [0, s - 1, 0, 0]
        sp = EF.pad(sp, pads)
        sp = sp.reshape((n, c, kk) + tuple(b * s for b, s in zip(blocks, stride)))
    else:
        sp = cols
    spread = tuple((b - 1) * s + 1 for b, s in zip(blocks, stride))  # valid extent of a spread block
    offsets = [()]
    for k in kernel:
        offsets = [o + (i,) for o in offsets for i in range(k)]
    total = None
    for j, off in enumerate(offsets):
        blk = sp[:, :, j]
        pads = []
        for i in reversed(range(nd)):
            lo = off[i] * dilation[i] - padding[i]
            # a spread block is b*s long; its tail past `spread` is zeros, so cropping it is free
            hi = size[i] - lo - blocks[i] * stride[i]
            pads += [lo, hi]
        placed = EF.pad(blk, pads)
        total = placed if total is None else total + placed
    assert total is not None and total.shape[2:] == size, (total.shape, size, spread)
    return total


def _batched(x: Tensor, nd: int, what: str) -> tuple[Tensor, bool]:
    """``x`` with a batch dim (torch accepts unbatched ``(C, *S)`` inputs), and whether one was added."""
    if x.ndim == nd + 1:
        return x.unsqueeze(0), True
    if x.ndim != nd + 2:
        raise ShapeError(f"{what}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
                         f"got shape {x.shape}")
    return x, False


def _conv(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any, dilation: Any,
          groups: int, nd: int, what: str) -> Tensor:
    x, unbatched = _batched(input, nd, what)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{what}: weight must be {nd + 2}-D (out, in/groups, *kernel), got {weight.shape}")
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    st = _ntuple(stride, nd, "stride")
    dl = _ntuple(dilation, nd, "dilation")
    if groups < 1 or c % groups or o % groups:
        raise ValueError(f"{what}: in_channels {c} and out_channels {o} must be divisible by groups {groups}")
    if cg * groups != c:
        raise ShapeError(f"{what}: weight {weight.shape} expects {cg * groups} input channels "
                         f"(groups={groups}), got input {input.shape}")
    if builtins.any(s < 1 for s in st) or builtins.any(d < 1 for d in dl):
        raise ValueError(f"{what}: stride and dilation must be positive, got {st}, {dl}")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nd
        elif padding == "same":
            if builtins.any(s != 1 for s in st):
                raise ValueError(f"{what}: padding='same' is not supported for strided convolutions")
            # torch puts the odd extra element of the total padding on the high side
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dl)]
        else:
            raise ValueError(f"{what}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
    else:
        pads = [(p, p) for p in _ntuple(padding, nd, "padding")]
        if builtins.any(p < 0 for p, _ in pads):
            raise ValueError(f"{what}: negative padding is not supported")
    spatial = x.shape[2:]
    out = tuple(_out_size(spatial[i], kernel[i], st[i], pads[i][0], pads[i][1], dl[i]) for i in range(nd))
    if builtins.any(v <= 0 for v in out):
        raise ShapeError(f"{what}: input {tuple(spatial)} (padded by {pads}) is smaller than the dilated "
                         f"kernel {kernel}")
    flat = [v for lo_hi in reversed(pads) for v in lo_hi]
    xp = EF.pad(x, flat) if builtins.any(flat) else x
    cols = _blocks(xp, kernel, st, dl, out)  # (N, C, K, *out)
    kk = math.prod(kernel)
    length = math.prod(out)
    if groups == 1:
        y = weight.reshape(o, c * kk).matmul(cols.reshape(n, c * kk, length))  # (N, O, L)
    else:
        w = weight.reshape(groups, o // groups, cg * kk)
        y = w.matmul(cols.reshape(n, groups, cg * kk, length)).reshape(n, o, length)
    if bias is not None:
        if bias.shape != (o,):
            raise ShapeError(f"{what}: bias must have shape ({o},), got {bias.shape}")
        y = y + bias.reshape(o, 1)
    y = y.reshape((n, o) + out)
    return y.squeeze(0) if unbatched else y


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """As ``torch.nn.functional.conv1d`` (padding an int, a 1-tuple, ``'valid'`` or ``'same'``)."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """As ``torch.nn.functional.conv2d`` (padding an int, a pair, ``'valid'`` or ``'same'``)."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """As ``torch.nn.functional.conv3d``."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
                    output_padding: Any, groups: int, dilation: Any, nd: int, what: str) -> Tensor:
    x, unbatched = _batched(input, nd, what)
    if weight.ndim != nd + 2:
        raise ShapeError(f"{what}: weight must be {nd + 2}-D (in, out/groups, *kernel), got {weight.shape}")
    n, c = x.shape[:2]
    if weight.shape[0] != c:
        raise ShapeError(f"{what}: weight {weight.shape} expects {weight.shape[0]} input channels, "
                         f"got input {input.shape}")
    if groups < 1 or c % groups:
        raise ValueError(f"{what}: in_channels {c} must be divisible by groups {groups}")
    og = weight.shape[1]
    o = og * groups
    kernel = tuple(weight.shape[2:])
    st = _ntuple(stride, nd, "stride")
    pd = _ntuple(padding, nd, "padding")
    op = _ntuple(output_padding, nd, "output_padding")
    dl = _ntuple(dilation, nd, "dilation")
    for i in range(nd):
        if op[i] >= st[i] and op[i] >= dl[i]:
            raise ValueError(f"{what}: output padding must be smaller than either stride or dilation, got "
                             f"output_padding={op}, stride={st}, dilation={dl}")
    spatial = x.shape[2:]
    size = tuple((spatial[i] - 1) * st[i] - 2 * pd[i] + dl[i] * (kernel[i] - 1) + op[i] + 1 for i in range(nd))
    if builtins.any(v <= 0 for v in size):
        raise ShapeError(f"{what}: the output size {size} is not positive")
    kk = math.prod(kernel)
    length = math.prod(spatial)
    cin = c // groups
    # columns = W^T x per group: (g, og*K, cin) @ (N, g, cin, L) -> (N, g, og*K, L)
    w = weight.reshape(groups, cin, og * kk).transpose(1, 2)
    cols = w.matmul(x.reshape(n, groups, cin, length))
    cols = cols.reshape((n, o, kk) + tuple(spatial))
    y = _place(cols, size, kernel, st, dl, pd)
    if bias is not None:
        if bias.shape != (o,):
            raise ShapeError(f"{what}: bias must have shape ({o},), got {bias.shape}")
        y = y + bias.reshape((o,) + (1,) * nd)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """As ``torch.nn.functional.conv_transpose1d``."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """As ``torch.nn.functional.conv_transpose2d``."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """As ``torch.nn.functional.conv_transpose3d``."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """As ``torch.nn.functional.unfold`` (im2col): ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) ->
    ``(N, C * kh * kw, L)`` with torch's ``c * K + k`` row order."""
    x, unbatched = _batched(input, 2, "unfold")
    k = _ntuple(kernel_size, 2, "kernel_size")
    dl = _ntuple(dilation, 2, "dilation")
    pd = _ntuple(padding, 2, "padding")
    st = _ntuple(stride, 2, "stride")
    n, c, h, w = x.shape
    out = (_out_size(h, k[0], st[0], pd[0], pd[0], dl[0]), _out_size(w, k[1], st[1], pd[1], pd[1], dl[1]))
    if out[0] <= 0 or out[1] <= 0:
        raise ShapeError(f"unfold: input {(h, w)} padded by {pd} is smaller than the dilated kernel {k}")
    xp = EF.pad(x, [pd[1], pd[1], pd[0], pd[0]]) if builtins.any(pd) else x
    cols = _blocks(xp, k, st, dl, out).reshape(n, c * k[0] * k[1], out[0] * out[1])
    return cols.squeeze(0) if unbatched else cols


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """As ``torch.nn.functional.fold`` (col2im, overlapping values add up): ``(N, C * K, L)`` (or
    unbatched ``(C * K, L)``) -> ``(N, C, *output_size)``."""
    if input.ndim == 2:
        x, unbatched = input.unsqueeze(0), True
    elif input.ndim == 3:
        x, unbatched = input, False
    else:
        raise ShapeError(f"fold: expected a 2-D (unbatched) or 3-D (batched) input, got shape {input.shape}")
    size = _ntuple(output_size, 2, "output_size")
    k = _ntuple(kernel_size, 2, "kernel_size")
    dl = _ntuple(dilation, 2, "dilation")
    pd = _ntuple(padding, 2, "padding")
    st = _ntuple(stride, 2, "stride")
    n, ck, length = x.shape
    kk = k[0] * k[1]
    if ck % kk:
        raise ShapeError(f"fold: expected size of input's dimension 1 to be divisible by the product of "
                         f"kernel_size, but got input.size(1)={ck} and kernel_size={k}")
    blocks = tuple(_out_size(size[i], k[i], st[i], pd[i], pd[i], dl[i]) for i in range(2))
    if blocks[0] * blocks[1] != length:
        raise ShapeError(f"fold: given output_size={size}, kernel_size={k}, dilation={dl}, padding={pd}, "
                         f"stride={st}, expected size of input's dimension 2 to match the calculated number "
                         f"of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                         f"input.size(2)={length}")
    cols = x.reshape((n, ck // kk, kk) + blocks)
    y = _place(cols, size, k, st, dl, pd)
    return y.squeeze(0) if unbatched else y
