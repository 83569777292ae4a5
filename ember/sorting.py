"""Sorting, order statistics, scans and counting: sort, argsort, msort, topk, kthvalue, median,
nanmedian, mode, quantile, nanquantile, cummax, cummin, logcumsumexp, searchsorted,
bucketize, histc, bincount, unique, unique_consecutive.

Orders are decided on the input's device by the registry's ``argsort`` (a stable sort, NaN
ordered above every number as torch does; a bitonic network on the Cube backend) as int64
index tensors; the values are then ``gather``-ed from the input, so they carry autodiff's
exact gradient. sort, argsort, msort, topk, kthvalue, median and nanmedian run entirely on
the device (median's position in each slice counts NaN there), as do mode (run lengths of the
sorted slice), quantile and nanquantile (ranks from q and each slice's count of numbers), and
cummax/cummin (the registry's ``cumargmax`` / ``cumargmin`` scans). ``logcumsumexp`` is a
log-depth scan of ember ops (Hillis-Steele: step k combines each element with the one k
before), so it stays on the device and is differentiated by autodiff.
Counting ops (histc, bincount, unique, searchsorted) return host-computed results, as torch's
are not differentiable.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from . import _shape as S
from . import dtype as dt
from .creation import arange, full, tensor
from .errors import DeviceMismatchError, DTypeError, ShapeError
from .tensor import Tensor

__all__ = [
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile",
    "cummax", "cummin", "logcumsumexp", "searchsorted", "bucketize", "histc", "bincount", "unique",
    "unique_consecutive",
]


class ValuesIndices(NamedTuple):
    """The (values, indices) pair of sort, topk, kthvalue, median, mode, cummax, ... (as torch's)."""

    values: Tensor
    indices: Tensor


def _host(x: Tensor) -> np.ndarray:
    a = np.asarray(x.detach().numpy())
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _index(a: np.ndarray, like: Tensor) -> Tensor:
    return tensor(np.array(a, dtype=np.int64), dtype=dt.int64, device=like.device)


def _order(x: Tensor, d: int, descending: bool) -> Tensor:
    """The stable argsort of ``x`` (at least 1-d) along ``d`` on its device (the registry's
    ``argsort``): int64, NaN above every number (last ascending, first descending)."""
    return x._op("argsort", d, bool(descending), True, dtype=dt.int64)


def _without(shape: tuple[int, ...], d: int) -> tuple[int, ...]:
    """``shape`` without dim ``d``."""
    return shape[:d] + shape[d + 1:]


def _dim(x: Tensor, dim: int) -> int:
    return S.norm_dim(dim, max(x.ndim, 1))


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """As ``torch.sort`` (always stable: equal elements keep their order)."""
    d = _dim(input, dim)
    x = input.reshape(1) if input.ndim == 0 else input
    idx = _order(x, d, descending)
    v = x.gather(d, idx)
    if input.ndim == 0:
        return ValuesIndices(v.reshape(()), idx.reshape(()))
    return ValuesIndices(v, idx)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """As ``torch.argsort`` (stable)."""
    d = _dim(input, dim)
    if input.ndim == 0:
        return _order(input.reshape(1), 0, descending).reshape(())
    return _order(input, d, descending)


def msort(input: Tensor) -> Tensor:
    """As ``torch.msort``: sorted along dim 0."""
    return sort(input, 0).values


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
    """As ``torch.topk`` (the k largest, or smallest, in order; ties keep their input order)."""
    d = _dim(input, dim)
    x = input.reshape(1) if input.ndim == 0 else input
    n = x.shape[d]
    if not 0 <= k <= n:
        raise IndexError(f"topk: k ({k}) out of range for dimension {dim} of size {n}")
    idx = _order(x, d, largest).narrow(d, 0, k)
    v = x.gather(d, idx)
    if input.ndim == 0 and k == 1:
        return ValuesIndices(v.reshape(()), idx.reshape(()))
    return ValuesIndices(v, idx)


def _pick(x: Tensor, d: int, pos: Tensor, order: Tensor, keepdim: bool) -> ValuesIndices:
    """The elements of ``x`` (at least 1-d) at sorted positions ``pos`` (an int64 tensor of x's
    shape without ``d``: one position per slice) of the argsort ``order``."""
    idx = order.gather(d, pos.unsqueeze(d))
    v = x.gather(d, idx)
    if not keepdim:
        v, idx = v.squeeze(d), idx.squeeze(d)
    return ValuesIndices(v, idx)


def _scalar_out(input: Tensor, out: ValuesIndices) -> ValuesIndices:
    if input.ndim == 0:
        return ValuesIndices(out.values.reshape(()), out.indices.reshape(()))
    return out


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """As ``torch.kthvalue``: the k-th smallest (1-based) along ``dim`` and its index."""
    d = _dim(input, dim)
    x = input.reshape(1) if input.ndim == 0 else input
    n = x.shape[d]
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue: k ({k}) out of range for dimension of size {n}")
    order = _order(x, d, False)
    idx = order.narrow(d, k - 1, 1)
    v = x.gather(d, idx)
    if not keepdim or input.ndim == 0:
        v, idx = v.squeeze(d), idx.squeeze(d)
    return _scalar_out(input, ValuesIndices(v, idx))


def _median(input: Tensor, dim: Any, keepdim: bool, ignore_nan: bool) -> Any:
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return flat.sum() * float("nan")
        return _median(flat, 0, False, ignore_nan).values
    d = _dim(input, dim)
    x = input if input.ndim else input.reshape(1)
    order = _order(x, d, False)  # NaN last
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"median(): expected a non-empty dimension {dim}")
    # the sorted position of each slice's median, on the device (data-dependent through NaN)
    if x.dtype.is_floating_point:
        nans = x.detach().isnan().to(dt.int64).sum(d)
    else:
        nans = None
    if nans is None:
        pos = full(_without(x.shape, d), (n - 1) // 2, dtype=dt.int64, device=x.device)
    elif ignore_nan:  # the lower median of the numbers; an all-NaN slice gives its first NaN
        c = -nans + n
        pos = ((c - 1).clamp(min=0)) // 2
    else:  # any NaN makes the median NaN: the first NaN in sorted order
        pos = (nans > 0).to(dt.int64) * (-nans + n - (n - 1) // 2) + (n - 1) // 2
    out = _pick(x, d, pos, order, keepdim or input.ndim == 0)
    return _scalar_out(input, out)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """As ``torch.median``: the lower median (NaN if the slice has one); with ``dim``, (values,
    indices)."""
    return _median(input, dim, keepdim, False)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """As ``torch.nanmedian``: the lower median of the non-NaN values."""
    return _median(input, dim, keepdim, True)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """As ``torch.mode``: the most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence. Differences: torch's CPU kernel gives
    the last occurrence for short slices only (its sort is not stable, so a longer slice gets
    some occurrence); NaNs count as one value, above every number (torch's kernel sorts NaN with
    ``<``, so its result with NaN depends on where the NaNs stand).

    On the device: each slice is sorted (stable, so equal values keep their input order), the
    start of each run of equal values is the running argmax of the run-start flags, and the
    first position of the greatest run length so far ends the smallest of the most frequent
    values' runs; its sorted-order index is that value's last occurrence."""
    d = _dim(input, dim)
    x = input if input.ndim else input.reshape(1)
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    if x.numel() == 0:
        v = x.narrow(d, 0, 1)
        idx = full(v.shape, 0, dtype=dt.int64, device=x.device)
    else:
        order = _order(x, d, False)  # NaN last: the NaNs form the last run
        s = x.detach().gather(d, order)
        if n > 1:
            prev, cur = s.narrow(d, 0, n - 1), s.narrow(d, 1, n - 1)
            same = cur == prev
            if x.dtype.is_floating_point:
                same = same | (cur.isnan() & prev.isnan())
            first = full(x.shape[:d] + (1,) + x.shape[d + 1:], True, dtype=dt.bool_, device=x.device)
            starts = _cat([first, ~same], d)
        else:
            starts = full(x.shape, True, dtype=dt.bool_, device=x.device)
        run_start = starts._op("cumargmax", d, dtype=dt.int64)  # the last start at or before each k
        pos = arange(n, dtype=dt.int64, device=x.device).reshape((n,) + (1,) * (x.ndim - d - 1))
        length = pos - run_start  # one less than the run's length so far
        idx = order.gather(d, length.argmax(d, keepdim=True))
        v = x.gather(d, idx)
    if not keepdim or input.ndim == 0:
        v, idx = v.squeeze(d), idx.squeeze(d)
    return _scalar_out(input, ValuesIndices(v, idx))


def _cat(parts: list[Tensor], d: int) -> Tensor:
    from .tensor import cat

    return cat(parts, d)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    """torch's algorithm on the device: sort (NaN last), a rank per (slice, q) from q and the
    slice's length (or count of numbers), the interpolation's rounding of the rank, and a lerp
    between the values at the ranks below and above."""
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"quantile() interpolation must be one of {', '.join(_INTERPOLATIONS)}. Got {interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ShapeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise DTypeError("quantile() q tensor must be same dtype as the input tensor")
        if q.device != input.device:
            raise DeviceMismatchError("quantile() q tensor must be on the same device as the input tensor")
        # torch checks the values of a q on the CPU only (a GPU q would cost a sync); ember
        # likewise checks them on Flex, whose data is on the host already
        if q.device.type == "flex" and q.numel() and not bool(((q >= 0) & (q <= 1)).all().item()):
            raise ValueError("quantile() q values must be in the range [0, 1]")
        qt, scalar_q = q, q.ndim == 0
    else:
        qa = np.asarray(q, np.float64)
        if qa.ndim > 1:
            raise ShapeError("quantile() q must be a scalar or 1D tensor")
        if np.any((qa < 0) | (qa > 1)):
            raise ValueError("quantile() q values must be in the range [0, 1]")
        qt, scalar_q = tensor(qa.astype(input.dtype.np), dtype=input.dtype, device=input.device), qa.ndim == 0
    if input.numel() == 0:
        raise ValueError("quantile() input tensor must be non-empty")
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = _dim(input, dim)
        x = input if input.ndim else input.reshape(1)
    s = sort(x, d).values.movedim(d, -1)  # (*rows, n), NaN last
    n = s.shape[-1]
    rows = s.shape[:-1]
    qv = qt.reshape(-1)  # (nq,)
    nan = s.detach().isnan()
    if ignore_nan:  # the rank among the numbers; an all-NaN slice gets rank 0: its first NaN
        count = (~nan).to(dt.int64).sum(-1, keepdim=True)
        ranks = qv * (count - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:  # any NaN makes the quantile NaN: the rank of the last element, a NaN
        ranks = (qv * (n - 1)).expand(*rows, qv.shape[0]).masked_fill(nan.any(-1, keepdim=True), n - 1)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as torch
    below = ranks.detach().to(dt.int64)
    out = s.gather(-1, below)  # (*rows, nq)
    if interpolation in ("linear", "midpoint"):
        # the weight carries q's gradient (linear): d rank / d q = count - 1
        w = ranks - below.to(ranks.dtype) if interpolation == "linear" else 0.5
        out = out.lerp(s.gather(-1, ranks.detach().ceil().to(dt.int64)), w)
    out = out.movedim(-1, 0)  # (nq, *rows)
    if keepdim and input.ndim:
        out = out.unsqueeze(d + 1) if dim is not None else out.reshape(out.shape[0], *([1] * input.ndim))
    if scalar_q:
        out = out.squeeze(0)
    return out


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """As ``torch.quantile`` (NaN where a slice has NaN). Computed on the input's device; the
    values of a tensor ``q`` are range-checked on Flex only (torch checks a CPU q only: reading
    a device's q would wait for it)."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"quantile() input tensor must be either float or double dtype, got {input.dtype}")
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """As ``torch.nanquantile``: the quantiles of the non-NaN values (NaN for an all-NaN
    slice); ``q`` as in :func:`quantile`."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"nanquantile() input tensor must be either float or double dtype, got {input.dtype}")
    return _quantile(input, q, dim, keepdim, interpolation, True)


def _cum_extreme(input: Tensor, dim: int, largest: bool) -> ValuesIndices:
    """The running extreme's indices on the device (the registry's ``cumargmax`` /
    ``cumargmin``: torch's rule, ties to the later element, NaN to the latest NaN); the values
    are gathered through them, so the gradient goes to the indices, as torch's."""
    d = _dim(input, dim)
    x = input if input.ndim else input.reshape(1)
    idx = x._op("cumargmax" if largest else "cumargmin", d, dtype=dt.int64)
    v = x.gather(d, idx)
    if input.ndim == 0:
        return ValuesIndices(v.reshape(()), idx.reshape(()))
    return ValuesIndices(v, idx)


def cummax(input: Tensor, dim: int) -> ValuesIndices:
    """As ``torch.cummax``: running maxima and the index of the last maximum so far (of the
    latest NaN once there is one)."""
    return _cum_extreme(input, dim, True)


def cummin(input: Tensor, dim: int) -> ValuesIndices:
    """As ``torch.cummin``."""
    return _cum_extreme(input, dim, False)


def _scan(x: Tensor, d: int, combine: Any, identity: float) -> Tensor:
    from .tensor import cat

    n = x.shape[d]
    k = 1
    y = x
    while k < n:
        pad_shape = list(y.shape)
        pad_shape[d] = k
        pad = tensor(np.full(pad_shape, identity, y.dtype.np), dtype=y.dtype, device=y.device)
        y = combine(y, cat([pad, y.narrow(d, 0, n - k)], d))
        k *= 2
    return y


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """As ``torch.logcumsumexp``: log(cumsum(exp(x))) without overflow (a scan of logaddexp)."""
    x = input if input.dtype.is_floating_point else input.to(dt.get_default_dtype())
    if x.ndim == 0:
        return x.clone()
    return _scan(x, _dim(x, dim), lambda a, b: a.logaddexp(b), -math.inf)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """As ``torch.searchsorted``: for each value the insertion index in the innermost dim of
    ``sorted_sequence`` (1-D, or with the same leading dims as ``input``)."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise ValueError("side and right can't be set to opposites")
        right = side == "right"
    seq = _host(sorted_sequence)
    if sorter is not None:
        seq = np.take_along_axis(seq, _host(sorter).astype(np.int64), -1)
    scalar = not isinstance(input, Tensor)
    v = np.asarray(input) if scalar else _host(input)
    s = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, v, side=s)
    else:
        if v.shape[:-1] != seq.shape[:-1]:
            raise ShapeError("searchsorted: boundaries and input must have the same leading dims")
        rows = int(np.prod(seq.shape[:-1]))
        fs, fv = seq.reshape(rows, seq.shape[-1]), v.reshape(rows, v.shape[-1])
        out = np.stack([np.searchsorted(r, w, side=s) for r, w in zip(fs, fv)]).reshape(v.shape) if fs.shape[0] \
            else np.zeros(v.shape, np.int64)
    d = dt.int32 if out_int32 else dt.int64
    return tensor(np.asarray(out).astype(d.np), dtype=d, device=sorted_sequence.device)


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """As ``torch.bucketize``: the bucket of each value in 1-D ``boundaries``
    (boundaries[i-1] < x <= boundaries[i], or <= x < with ``right``)."""
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got {boundaries.ndim}-D")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """As ``torch.histc``: equal-width bins over [min, max] (the data's range when both are 0,
    widened by 1 each way when that is a single value); values outside are ignored."""
    a = _host(input).astype(np.float64).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise ValueError("histc: max must be larger than min")
    keep = a[(a >= lo) & (a <= hi)]
    b = ((keep - lo) * bins / (hi - lo)).astype(np.int64)
    b = np.minimum(b, bins - 1)
    out = np.bincount(b, minlength=bins)[:bins]
    return tensor(out.astype(input.dtype.np), dtype=input.dtype, device=input.device)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """As ``torch.bincount``: int64 counts, or weight sums (float64 unless the weights are float32)."""
    if input.ndim != 1 or input.dtype.is_floating_point:
        raise ShapeError("bincount only supports 1-d non-negative integral inputs")
    a = _host(input).astype(np.int64)
    if a.size and a.min() < 0:
        raise ValueError("bincount only supports 1-d non-negative integral inputs")
    if weights is None:
        return tensor(np.bincount(a, minlength=minlength), dtype=dt.int64, device=input.device)
    w = _host(weights).astype(np.float64)
    d = weights.dtype if weights.dtype in (dt.float32, dt.float64) else dt.float64
    out = np.bincount(a, weights=w, minlength=minlength)
    return tensor(out.astype(d.np), dtype=d, device=input.device)


def _unique_outputs(input: Tensor, vals: np.ndarray, inverse: np.ndarray, counts: np.ndarray,
                    return_inverse: bool, return_counts: bool) -> Any:
    out = tensor(vals.astype(input.dtype.np), dtype=input.dtype, device=input.device)
    res: list[Tensor] = [out]
    if return_inverse:
        res.append(_index(inverse, input))
    if return_counts:
        res.append(_index(counts, input))
    return res[0] if len(res) == 1 else tuple(res)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int | None = None) -> Any:
    """As ``torch.unique`` (the values are always sorted)."""
    a = _host(input)
    if dim is None:
        vals, inv, cnt = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        return _unique_outputs(input, vals, inv.reshape(a.shape), cnt, return_inverse, return_counts)
    d = _dim(input, dim)
    if a.shape[d] == 0:
        return _unique_outputs(input, a, np.zeros(0, np.int64), np.zeros(0, np.int64), return_inverse, return_counts)
    vals, inv, cnt = np.unique(a, return_inverse=True, return_counts=True, axis=d)
    return _unique_outputs(input, vals, inv.reshape(-1), cnt, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> Any:
    """As ``torch.unique_consecutive``: each run of equal consecutive elements (slices along
    ``dim``) kept once."""
    a = _host(input)
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.shape, bool)
        starts[1:] = flat[1:] != flat[:-1]
        vals = flat[starts]
        shape = a.shape
    else:
        d = _dim(input, dim)
        m = np.moveaxis(a, d, 0)
        starts = np.ones(m.shape[0], bool)
        if m.shape[0] > 1:
            starts[1:] = (m[1:] != m[:-1]).reshape(m.shape[0] - 1, -1).any(1)
        vals = np.moveaxis(m[starts], 0, d)
        shape = (m.shape[0],)
    inv = np.cumsum(starts) - 1
    pos = np.nonzero(starts)[0]
    cnt = np.diff(np.append(pos, starts.shape[0]))
    return _unique_outputs(input, vals, inv.reshape(shape), cnt, return_inverse, return_counts)


def _install() -> None:
    # the Tensor methods of the same names (``x.sort()``, ``x.topk(k)``), as composite.py's _install
    for name in __all__:
        if name not in Tensor.__dict__ and name not in ("searchsorted", "histc_"):
            setattr(Tensor, name, globals()[name])


_install()
