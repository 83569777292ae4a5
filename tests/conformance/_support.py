"""Helpers shared by the conformance and property tests: dtype tables, tolerances,
conversion between numpy references and ember tensors, comparison."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ember

FLOATS: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16")
INTS: tuple[str, ...] = ("int64", "int32", "uint8")
NUMERIC: tuple[str, ...] = FLOATS + INTS
ALL: tuple[str, ...] = NUMERIC + ("bool",)
SIGNED: tuple[str, ...] = FLOATS + ("int64", "int32")
#: the narrow signed ints: a sample of the op table runs them (``optable.NARROW_SPECS``), the
#: whole table would cost a quarter more for kernels that differ from int32's only in the type
NARROW: tuple[str, ...] = ("int8", "int16")

#: numpy dtype a tensor of each ember dtype reads out as (bfloat16 reads out as an
#: ml_dtypes array; the suite only ever converts it to float64, so it needs no import)
NP: dict[str, Any] = {
    "float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": None,
    "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
}

#: (rtol, atol) for a result of each floating dtype, against a float64 reference
TOL: dict[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
}


def edt(name: str) -> Any:
    """The ember dtype called ``name``."""
    return getattr(ember, name)


def name_of(d: Any) -> str:
    return "bool" if d is ember.bool else str(d).removeprefix("ember.")


def is_float(name: str) -> bool:
    return name in FLOATS


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values exactly representable in ``dtype`` (close to ``x``)."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype in ("float32", "float16"):
        return x.astype(NP[dtype]).astype(np.float64)
    if dtype == "bfloat16":
        # round the float32 bit pattern to its top 16 bits (nearest, ties to even)
        f = np.ascontiguousarray(x, dtype=np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        keep = ((bits >> 16) & 1) + 0x7FFF
        rounded = ((bits + keep) >> 16 << 16).astype(np.uint32)
        nan = np.isnan(f)
        out = rounded.view(np.float32).astype(np.float64)
        out[nan] = np.nan
        return out.reshape(x.shape)
    raise ValueError(dtype)


def native(x: np.ndarray, dtype: str) -> np.ndarray:
    """The reference form of data in ``dtype``: float64 for floating dtypes (values already
    representable), the numpy integer/bool dtype otherwise (exact integer semantics)."""
    if is_float(dtype):
        return np.asarray(x, dtype=np.float64)
    return np.asarray(x).astype(NP[dtype])


def tensor(x: np.ndarray, dtype: str, device: ember.Device, requires_grad: bool = False) -> Any:
    """An ember tensor holding ``x`` (values representable in ``dtype``)."""
    return ember.tensor(native(x, dtype), dtype=edt(dtype), device=device, requires_grad=requires_grad)


def read(t: Any) -> np.ndarray:
    """A tensor's values as a numpy array: float64 for floating tensors, native otherwise."""
    a = t.numpy()
    if name_of(t.dtype) in FLOATS:
        return np.asarray(a).astype(np.float64)
    return np.asarray(a)


def describe(arrays: Sequence[np.ndarray]) -> str:
    return ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)


def assert_close(got: Any, ref: np.ndarray, dtype: str, *, tol: float = 1.0,
                 mag: np.ndarray | float | None = None, what: str = "") -> None:
    """``got`` (a tensor) matches the float64 reference ``ref`` within the tolerance of
    result dtype ``dtype`` (times ``tol``); errors are measured against ``mag`` (default
    ``|ref|``). Non-finite reference values must match exactly (nan, +inf, -inf)."""
    ref = np.asarray(ref, dtype=np.float64)
    with np.errstate(over="ignore"):
        ref_rounded = round_to(ref, dtype)  # what the result dtype can hold: overflow is inf
    g = read(got)
    assert tuple(got.shape) == ref.shape, f"{what}: shape {tuple(got.shape)} != expected {ref.shape}"
    assert name_of(got.dtype) == dtype, f"{what}: dtype {got.dtype} != expected {dtype}"
    rtol, atol = TOL[dtype]
    rtol, atol = rtol * tol, atol * tol
    finite = np.isfinite(ref_rounded)
    bad_special = ~finite & ~((np.isnan(ref_rounded) & np.isnan(g)) | (ref_rounded == g))
    m = np.abs(ref) if mag is None else np.broadcast_to(np.abs(np.asarray(mag, np.float64)), ref.shape)
    with np.errstate(invalid="ignore"):
        err = np.abs(g - ref)
        bad = finite & ~(err <= atol + rtol * np.where(finite, m, 0.0))
    bad |= bad_special
    if bad.any():
        idx = np.argwhere(bad)[:5]
        rows = "\n".join(
            f"    at {tuple(int(i) for i in ix)}: got {g[tuple(ix)]!r}, expected {ref[tuple(ix)]!r}"
            for ix in idx
        )
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} values differ beyond rtol={rtol:g} atol={atol:g}"
            f" ({dtype})\n{rows}"
        )


def assert_exact(got: Any, ref: np.ndarray, dtype: str, what: str = "") -> None:
    """``got`` has exactly the values of ``ref`` and the ember dtype ``dtype``."""
    ref = np.asarray(ref)
    assert tuple(got.shape) == ref.shape, f"{what}: shape {tuple(got.shape)} != expected {ref.shape}"
    assert name_of(got.dtype) == dtype, f"{what}: dtype {got.dtype} != expected {dtype}"
    g = read(got)
    if is_float(dtype):
        np.testing.assert_array_equal(g, ref.astype(np.float64), err_msg=what)
    else:
        np.testing.assert_array_equal(g, ref.astype(NP[dtype]), err_msg=what)


def check(got: Any, ref: np.ndarray, dtype: str, *, tol: float = 1.0,
          mag: np.ndarray | float | None = None, what: str = "") -> None:
    """Tolerance comparison for floating results, exact for integer and bool results."""
    if is_float(dtype):
        assert_close(got, ref, dtype, tol=tol, mag=mag, what=what)
    else:
        assert_exact(got, ref, dtype, what=what)


def central_difference(f: Callable[[list[np.ndarray]], float], inputs: list[np.ndarray], pos: int,
                       eps: float = 1e-6) -> np.ndarray:
    """d f / d inputs[pos] by central differences (float64)."""
    x = inputs[pos]
    g = np.zeros_like(x, dtype=np.float64)
    for ix in np.ndindex(*x.shape):
        plus = [a.copy() for a in inputs]
        minus = [a.copy() for a in inputs]
        plus[pos][ix] += eps
        minus[pos][ix] -= eps
        g[ix] = (f(plus) - f(minus)) / (2 * eps)
    return g
