"""ember.linalg, ember.special and ember.sorting against torch on every autodiff device: values
and gradients of the loss sum(out * g) for fresh random inputs (the OpInfo run in
tests.parity.report covers torch's samples on flex and cpu; these run everywhere, cheaply)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember
from ember import linalg as LA
from ember import special as SP


def _pair(dev, a: np.ndarray):
    return ember.tensor(a, device=dev, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(dev, fe, ft, a: np.ndarray, rng, tol: float = 2e-4) -> None:
    """Values of fe(x) and ft(x), and gradients of sum(out * g), for one input."""
    xe, xt = _pair(dev, a)
    oe, ot = fe(xe), ft(xt)
    oe = oe if isinstance(oe, tuple | list) else (oe,)
    ot = ot if isinstance(ot, tuple | list) else (ot,)
    loss_e, loss_t = None, None
    for e, t in zip(oe, ot):
        np.testing.assert_allclose(np.asarray(e.numpy(), np.float64), t.detach().double().numpy(),
                                   rtol=tol, atol=tol)
        if not t.dtype.is_floating_point:
            continue
        g = rng.standard_normal(tuple(t.shape)).astype(np.float32)
        te = (e * ember.tensor(g, device=dev)).sum()
        tt = (t * torch.tensor(g)).sum()
        loss_e = te if loss_e is None else loss_e + te
        loss_t = tt if loss_t is None else loss_t + tt
    loss_e.backward()
    loss_t.backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=10 * tol, atol=10 * tol)


def _spd(rng, n: int = 3) -> np.ndarray:
    m = rng.standard_normal((2, n, n))
    return (m @ m.transpose(0, 2, 1) + n * np.eye(n)).astype(np.float32)


def test_linalg_factorisations(autodiff_device, rng):
    dev = autodiff_device
    a = rng.standard_normal((2, 3, 3)).astype(np.float32)
    _check(dev, LA.det, torch.linalg.det, a, rng)
    _check(dev, LA.inv, torch.linalg.inv, a + 3 * np.eye(3, dtype=np.float32), rng)
    _check(dev, lambda x: LA.slogdet(x)[1], lambda x: torch.linalg.slogdet(x)[1], a, rng)
    b = rng.standard_normal((2, 3, 2)).astype(np.float32)
    _check(dev, lambda x: LA.solve(x, ember.tensor(b, device=dev)), lambda x: torch.linalg.solve(x, torch.tensor(b)),
           a + 3 * np.eye(3, dtype=np.float32), rng)
    _check(dev, LA.cholesky, torch.linalg.cholesky, _spd(rng), rng)
    tall = rng.standard_normal((4, 3)).astype(np.float32)
    _check(dev, LA.qr, torch.linalg.qr, tall, rng)
    _check(dev, LA.lu_factor, lambda x: torch.linalg.lu_factor(x), tall, rng)
    _check(dev, LA.svdvals, torch.linalg.svdvals, tall, rng)
    # singular vectors through gauge-invariant functions: |U|, U @ Vh
    _check(dev, lambda x: LA.svd(x, full_matrices=False)[0].abs(),
           lambda x: torch.linalg.svd(x, full_matrices=False)[0].abs(), tall, rng)
    _check(dev, lambda x: (lambda u, s, vh: u @ vh)(*LA.svd(x, full_matrices=False)),
           lambda x: (lambda u, s, vh: u @ vh)(*torch.linalg.svd(x, full_matrices=False)), tall, rng)
    sym = _spd(rng)
    _check(dev, lambda x: (lambda w, v: (w, v.abs()))(*LA.eigh(x)),
           lambda x: (lambda w, v: (w, v.abs()))(*torch.linalg.eigh(x)), sym, rng)
    _check(dev, LA.pinv, torch.linalg.pinv, tall, rng)


def test_linalg_composed(autodiff_device, rng):
    dev = autodiff_device
    a = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
    _check(dev, LA.matrix_exp, torch.linalg.matrix_exp, a, rng)
    for ord in (2, 1, math.inf, 0.5):
        _check(dev, lambda x, o=ord: LA.vector_norm(x, o, dim=-1),
               lambda x, o=ord: torch.linalg.vector_norm(x, o, dim=-1), a, rng)
    for ord in ("fro", 1, -math.inf, 2):
        _check(dev, lambda x, o=ord: LA.matrix_norm(x, o), lambda x, o=ord: torch.linalg.matrix_norm(x, o), a, rng)
    _check(dev, lambda x: LA.matrix_power(x, 3), lambda x: torch.linalg.matrix_power(x, 3), a, rng)
    # the subgradient at a zero vector is 0, as torch's
    z = ember.zeros(4, device=dev, requires_grad=True)
    LA.vector_norm(z).backward()
    assert np.all(z.grad.numpy() == 0)


def test_linalg_errors(rng):
    with pytest.raises(LA.LinAlgError):
        LA.cholesky(ember.tensor(-np.eye(2, dtype=np.float32)))
    with pytest.raises(LA.LinAlgError):
        LA.inv(ember.zeros(2, 2))
    info = LA.cholesky_ex(ember.tensor(np.diag([1.0, -1.0]).astype(np.float32)))[1]
    assert int(info.item()) == 2  # LAPACK's order of the failing minor, as torch


def test_special(autodiff_device, rng):
    dev = autodiff_device
    x = rng.uniform(0.2, 8.0, (6,)).astype(np.float32)
    neg = rng.uniform(-4.7, 4.7, (6,)).astype(np.float32)
    _check(dev, SP.lgamma, torch.lgamma, neg, rng)
    _check(dev, SP.digamma, torch.digamma, neg, rng)
    _check(dev, lambda t: SP.polygamma(2, t), lambda t: torch.polygamma(2, t), x, rng, tol=1e-3)
    _check(dev, SP.erfinv, torch.erfinv, rng.uniform(-0.99, 0.99, (6,)).astype(np.float32), rng)
    _check(dev, SP.i0, torch.i0, neg * 4, rng)
    _check(dev, SP.i1e, torch.special.i1e, neg * 6, rng)
    _check(dev, SP.log_ndtr, torch.special.log_ndtr, neg * 3, rng)
    _check(dev, lambda t: SP.multigammaln(t, 3), lambda t: torch.special.multigammaln(t, 3), x + 1, rng)
    q = ember.tensor(x, device=dev)
    np.testing.assert_allclose(SP.zeta(3.0, q).numpy(), torch.special.zeta(3.0, torch.tensor(x)).numpy(), rtol=1e-4)


def test_sorting(autodiff_device, rng):
    dev = autodiff_device
    a = rng.standard_normal((3, 5)).astype(np.float32)
    _check(dev, lambda x: ember.sort(x, 1, descending=True), lambda x: torch.sort(x, 1, descending=True), a, rng)
    _check(dev, lambda x: ember.topk(x, 2), lambda x: torch.topk(x, 2), a, rng)
    _check(dev, lambda x: ember.median(x, 1), lambda x: torch.median(x, 1), a, rng)
    _check(dev, lambda x: ember.kthvalue(x, 2, 0), lambda x: torch.kthvalue(x, 2, 0), a, rng)
    _check(dev, lambda x: ember.quantile(x, 0.3, dim=1), lambda x: torch.quantile(x, 0.3, dim=1), a, rng)
    _check(dev, lambda x: ember.cummax(x, 1), lambda x: torch.cummax(x, 1), a, rng)
    _check(dev, lambda x: ember.cummin(x, 0), lambda x: torch.cummin(x, 0), a, rng)
    _check(dev, lambda x: ember.mode(x.round(), 1), lambda x: torch.mode(x.round(), 1), a * 2, rng)
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        _check(dev, lambda x, i=interp: ember.quantile(x, [0.1, 0.65], dim=0, keepdim=True, interpolation=i),
               lambda x, i=interp: torch.quantile(x, torch.tensor([0.1, 0.65]), dim=0, keepdim=True, interpolation=i),
               a, rng)
    a[0, 1] = 0.0  # cumprod through a zero
    _check(dev, lambda x: ember.cumprod(x, 1), lambda x: torch.cumprod(x, 1), a, rng)
    _check(dev, lambda x: ember.logcumsumexp(x, 1), lambda x: torch.logcumsumexp(x, 1), a, rng)
    # NaN sorts above every number: last ascending, first descending (as torch)
    n = np.array([1.0, np.nan, -2.0], np.float32)
    assert ember.sort(ember.tensor(n, device=dev)).indices.tolist() == [2, 0, 1]
    assert ember.sort(ember.tensor(n, device=dev), descending=True).indices.tolist() == [1, 0, 2]


def test_sorting_nan_and_ties(autodiff_device, rng):
    dev = autodiff_device
    # torch's cummax/cummin rule: ties go to the later element, NaN to the latest NaN
    n = np.array([[1.0, np.nan, 3.0, np.nan, 2.0, 3.0], [2.0, 1.0, 2.0, 1.0, 0.5, 2.0]], np.float32)
    for e, t in ((ember.cummax, torch.cummax), (ember.cummin, torch.cummin)):
        got, ref = e(ember.tensor(n, device=dev), 1), t(torch.tensor(n), 1)
        np.testing.assert_array_equal(got.values.numpy(), ref.values.numpy())
        assert got.indices.tolist() == ref.indices.tolist()
    # nanquantile skips NaN (an all-NaN slice gives NaN), quantile is NaN where a slice has one
    a = rng.standard_normal((4, 6)).astype(np.float32)
    a[0, 2] = a[1, :] = a[3, 0] = a[3, 5] = np.nan
    for f, t in ((ember.quantile, torch.quantile), (ember.nanquantile, torch.nanquantile)):
        for interp in ("linear", "nearest", "midpoint"):
            got = f(ember.tensor(a, device=dev), 0.4, dim=1, interpolation=interp)
            np.testing.assert_allclose(got.numpy(), t(torch.tensor(a), 0.4, dim=1, interpolation=interp).numpy(),
                                       rtol=1e-6)
    # q's gradient (linear): (above - below) * (count - 1), as torch's
    x = rng.standard_normal(7).astype(np.float32)
    qe = ember.tensor(np.array([0.3, 0.8], np.float32), device=dev, requires_grad=True)
    qt = torch.tensor([0.3, 0.8], requires_grad=True)
    ember.quantile(ember.tensor(x, device=dev), qe).sum().backward()
    torch.quantile(torch.tensor(x), qt).sum().backward()
    np.testing.assert_allclose(qe.grad.numpy(), qt.grad.numpy(), rtol=1e-5)
    # mode: the smallest of the most frequent values, the index of its last occurrence
    m = np.array([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4]], np.int64)
    got, ref = ember.mode(ember.tensor(m, device=dev)), torch.mode(torch.tensor(m))
    assert (got.values.tolist(), got.indices.tolist()) == (ref.values.tolist(), ref.indices.tolist())
    # errors as torch's
    x = ember.tensor(x, device=dev)
    with pytest.raises(ValueError):
        ember.quantile(x, 1.5)
    with pytest.raises(TypeError):
        ember.quantile(x, ember.tensor([0.5], dtype=ember.float64, device=dev))
    with pytest.raises(ValueError):
        ember.quantile(ember.zeros(0, device=dev), 0.5)
    with pytest.raises(IndexError):
        ember.mode(ember.zeros(2, 0, device=dev), 1)


def test_sorting_reads_nothing_back(device, rng):
    """cummax/cummin, mode and quantile run on the device: nothing is read back to the host
    until the result is (their gathers' indices included: the index kernels check them on the
    device). On the C runtime the sort is patched out of the check: its buffers are host
    memory, sorted there with numpy (mode and quantile sort, so only cummax/cummin are
    checked there)."""
    if device.backend().eager or not device.backend().checks_indices:
        pytest.skip("an eager device reads gather indices to check them, as Fusion does over Flex (host data)")
    x = ember.tensor(rng.standard_normal((3, 40)).astype(np.float32), device=device)
    q = ember.tensor(np.array([0.2, 0.7], np.float32), device=device)
    ops = {"cummax": lambda: ember.cummax(x, 1), "cummin": lambda: ember.cummin(x, 0)}
    if device.type != "cpu":
        ops.update(mode=lambda: ember.mode(x.round(), 1), quantile=lambda: ember.quantile(x, q, 1),
                   nanquantile=lambda: ember.nanquantile(x, 0.3, 0, interpolation="midpoint"))
    _no_reads(device, ops)


def _no_reads(device, ops) -> None:
    """Each of ``ops`` and a sync read nothing back; its result is then read (finite)."""
    from ember import tracing

    ember.sync(device)
    for name, f in ops.items():
        with tracing.capture() as spans:
            out = f()
            ember.sync(device)
        reads = [s for s in spans if s.name == "into_data"]
        assert not reads, f"{name}: {len(reads)} reads on {device}"
        assert np.isfinite(np.asarray((out[0] if isinstance(out, tuple) else out).numpy(), np.float64)).all()


def test_gathers_read_nothing_back(device, rng):
    """The gather and index ops on a fused device read nothing back, whether their indices
    were computed there (queued) or uploaded (realised): the index kernels check the values
    on the device, and a bad one raises at the next read (``docs/evaluation.md``, "Index
    errors"), as torch's error types (IndexError, and RuntimeError for gather and scatter)."""
    if device.backend().eager or not device.backend().checks_indices:
        pytest.skip("an eager device reads index values to check them, as Fusion does over Flex (host data)")
    xn = rng.standard_normal((5, 7)).astype(np.float32)
    x = ember.tensor(xn, device=device)
    up = ember.tensor(rng.integers(-7, 7, (5, 3)), device=device)  # uploaded, negatives too
    rows = ember.tensor(rng.integers(-5, 5, (4,)), device=device)
    src = ember.tensor(rng.standard_normal((5, 3)).astype(np.float32), device=device)

    qn = rng.integers(0, 7, (5, 3))

    def queued():
        return ember.tensor(qn, device=device) * 1  # computed on the device (queued)

    ops = {
        "gather queued": lambda: x.gather(1, queued()),
        "gather uploaded": lambda: x.gather(1, up),
        "take_along_dim": lambda: ember.take_along_dim(x, queued(), 1),
        "index_select": lambda: x.index_select(0, rows),
        "index uploaded": lambda: x[rows],
        "index queued": lambda: x[x.argmax(0)],
        "scatter_add": lambda: x.scatter_add(1, queued(), src),
        "scatter": lambda: x.scatter(1, up, src),
    }
    _no_reads(device, ops)
    t = torch.tensor(xn)
    upn = up.numpy()
    np.testing.assert_allclose(x.gather(1, up).numpy(), t.gather(1, torch.tensor(upn) % 7).numpy())
    np.testing.assert_allclose(x[rows].numpy(), t[torch.tensor(rows.numpy())].numpy())
    bad = ember.tensor(np.array([[0, 7]]), device=device)
    with pytest.raises(RuntimeError, match="gather: index 7 is out of bounds for dimension 1 with size 7"):
        x.gather(1, bad).numpy()
    y = x[x.argmax(0) + 5]  # queued and out of range: raises at the next read of any tensor
    with pytest.raises(IndexError, match="index: index"):
        x.sum().item()
    assert np.isfinite(y.numpy()).all()  # raised once; the result holds unspecified values


def test_counting(device, rng):
    x = rng.integers(0, 5, (12,))
    e, t = ember.tensor(x, device=device), torch.tensor(x)
    assert ember.bincount(e).tolist() == torch.bincount(t).tolist()
    vals, inv, cnt = ember.unique(e, return_inverse=True, return_counts=True)
    tv, ti, tc = torch.unique(t, return_inverse=True, return_counts=True)
    assert (vals.tolist(), inv.tolist(), cnt.tolist()) == (tv.tolist(), ti.tolist(), tc.tolist())
    b = np.array([0.5, 1.5, 3.0], np.float32)
    v = rng.uniform(0, 4, (7,)).astype(np.float32)
    for right in (False, True):
        assert ember.bucketize(ember.tensor(v, device=device), ember.tensor(b, device=device), right=right).tolist() \
            == torch.bucketize(torch.tensor(v), torch.tensor(b), right=right).tolist()
    h = ember.histc(ember.tensor(v, device=device), bins=4, min=0, max=4)
    assert h.tolist() == torch.histc(torch.tensor(v), bins=4, min=0, max=4).tolist()
