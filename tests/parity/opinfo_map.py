"""PyTorch's OpInfo database run through ember: the mapping from OpInfo entries to ember
callables, the conversion of their sample inputs, and the comparison of values and gradients.

``torch.testing._internal.common_methods_invocations.op_db`` lists torch's ops with sample
inputs (``OpInfo.sample_inputs(device, dtype, requires_grad)``). Each entry maps to an ember
callable by name (``ember_callable``): ``ember.<name>`` for a plain name, ``ember.<a>.<b>`` for a
dotted one (``nn.functional.relu``, ``linalg.det``, ``special.erfc``) when that module has it,
else the Tensor method ``<name>``; ``CUSTOM`` holds the entries whose OpInfo calls something
other than ``torch.<name>(input, *args, **kwargs)``. ``SKIP`` lists mapped entries that are not
compared, each with its reason; an entry with no ember counterpart is reported as unmapped.

A sample's outcome (``run_sample``) is one of:

* ``pass``: ember's result (values, shapes and dtypes) matches torch's;
* ``wrong``: ember computed something else;
* ``lacks``: ember refused an argument (a TypeError, NotImplementedError or a DTypeError about
  a dtype it does not have) or the sample uses an input ember has no counterpart for
  (complex tensors, generators);
* ``raised``: ember raised anything else;
* ``torch``: torch itself raised (the sample is not counted).

Gradients (``run_grad``) compare ``d/d inputs sum(out_i * g_i)`` for fixed random ``g_i`` with
torch's, for every floating point input that requires grad in the sample.

Float values compare with fixed tolerances first; values that miss them compare again with
torch's float64 result of the sample, allowing ``NOISE`` times torch's own float32 error there
(rounding noise that scales with the magnitudes a result is computed from). Samples that draw
dropout (``NO_DROPOUT``) run with ``dropout_p = 0``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import ember
from ember import Device
from ember.errors import DTypeError

#: tolerances for float32 results (ember and torch sum in different orders)
FORWARD_TOL = (1e-4, 1e-5)  # rtol, atol
GRAD_TOL = (1e-3, 1e-4)
#: A float32 result that misses these is compared again with torch's float64 result of the same
#: sample: ember may differ from it by the tolerance plus NOISE times torch's own float32 error
#: there (``|torch32 - torch64|``), which scales with the magnitudes the result is computed from
#: (a fixed atol cannot: layer_norm over one element has the exact gradient 0, and torch's
#: float32 gives ``rstd * |g * weight| * 2**-24``, 1e-4 when eps = 1e-5 makes rstd 316).
NOISE = 4.0

#: mapped entries that are not compared, with the reason
SKIP: dict[str, str] = {
    # values unspecified or random: nothing to compare
    "empty": "uninitialised values in torch (ember returns zeros)",
    "empty_like": "uninitialised values in torch (ember returns zeros)",
    "new_empty": "uninitialised values in torch",
    "empty_permuted": "uninitialised values in torch",
    "empty_strided": "uninitialised values in torch",
    "new_empty_strided": "uninitialised values in torch",
    "rand_like": "random values: ember's Philox stream is not torch's generator",
    "randn_like": "random values: ember's Philox stream is not torch's generator",
    "randint_like": "random values: ember's Philox stream is not torch's generator",
    "randint": "random values: ember's Philox stream is not torch's generator",
    "randn": "random values: ember's Philox stream is not torch's generator",
    "uniform": "random values",
    "exponential": "random values",
    "cauchy": "random values",
    "geometric": "random values",
    "log_normal": "random values",
    "nn.functional.dropout": "random values",
    "nn.functional.dropout2d": "random values",
    "nn.functional.dropout3d": "random values",
    "nn.functional.alpha_dropout": "random values",
    "nn.functional.feature_alpha_dropout": "random values",
    "nn.functional.rrelu": "random values",
    # torch-internal layouts and memory aliasing that values-semantics ember does not have
    "as_strided": "strided views of storage (ember tensors are values: no storage aliasing)",
    "as_strided_scatter": "strided views of storage",
    "resize_": "storage resizing",
    "resize_as_": "storage resizing",
    "to": "samples move between torch devices and memory formats (ember's to() is tested in test_fixes)",
    "item": "compared in test_fixes (the OpInfo sample wraps it in a lambda over torch scalars)",
}

def _no_dropout(position: int) -> Callable[[Any], Any]:
    """The sample with ``dropout_p`` (keyword, or ``args[position]``, the input not counted) set to 0."""

    def strip(sample: Any) -> Any:
        args, kwargs = list(sample.args), dict(sample.kwargs)
        if "dropout_p" in kwargs:
            kwargs["dropout_p"] = 0.0
        elif len(args) > position:
            args[position] = 0.0
        return SimpleNamespace(input=sample.input, args=tuple(args), kwargs=kwargs)

    return strip


#: entries whose samples draw dropout (``dropout_p > 0``): the dropped positions are random
#: (torch's OpInfo seeds torch's generator; ember's Philox stream is another), so each such
#: sample runs with ``dropout_p = 0``, the deterministic rest of the op (the multi-head entry's
#: only gradient sample has dropout). The dropout itself is tested in tests/nn/test_attention.py.
NO_DROPOUT: dict[str, Callable[[Any], Any]] = {
    # scaled_dot_product_attention(query = the sample's input, key, value, attn_mask, dropout_p, ...)
    "nn.functional.scaled_dot_product_attention": _no_dropout(3),
    # multi_head_attention_forward(query = the sample's input, key, value, embed_dim_to_check,
    # num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, ...)
    "nn.functional.multi_head_attention_forward": _no_dropout(9),
}

def _property(out: Any, ok: np.ndarray) -> Any:
    """A tensor like ``out`` (same framework, shape, dtype, device): 0 where ``ok``, 1 elsewhere."""
    if isinstance(out, torch.Tensor):
        return torch.zeros_like(out).masked_fill(torch.from_numpy(~ok), 1)
    return ember.zeros_like(out).masked_fill(ember.tensor(~ok, device=out.device), 1)


def _bernoulli_support(sample: Any) -> Callable[[Any], Any]:
    p = sample.input.detach().double().numpy()

    def check(out: Any) -> Any:
        v = _np(out)
        ok = ((v == 0) | (v == 1)) & ~((p == 0) & (v != 0)) & ~((p == 1) & (v != 1))
        return _property(out, ok)

    return check


def _multinomial_support(sample: Any) -> Callable[[Any], Any]:
    w = sample.input.detach().double().numpy()
    k = sample.args[0] if sample.args else sample.kwargs["num_samples"]
    replacement = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("replacement", False)
    w2 = w.reshape(-1, w.shape[-1])

    def check(out: Any) -> Any:
        idx = _np(out).reshape(w2.shape[0], -1)
        ok = (idx >= 0) & (idx < w2.shape[1])
        picked = np.take_along_axis(w2, np.clip(idx, 0, w2.shape[1] - 1), axis=1)
        enough = ((w2 > 0).sum(axis=1) >= (1 if replacement else k))[:, None]
        ok &= (picked > 0) | ~enough  # zero weights only once the positive ones are used up
        if not replacement:  # a row's draws are distinct
            srt = np.sort(idx, axis=1)
            dup = np.zeros(idx.shape, bool)
            dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
            ok &= ~dup.any(axis=1, keepdims=True)
        return _property(out, ok.reshape(_np(out).shape))

    return check


def _finite(sample: Any) -> Callable[[Any], Any]:
    return lambda out: _property(out, np.isfinite(_np(out)))


#: entries whose values are random (torch's generator is not ember's Philox stream): their forward
#: samples compare a deterministic property of the result instead of its values, built from the
#: sample, as a tensor like the result (0 where the property holds), so shape, dtype and the
#: property are checked; gradients are compared as usual (zero on both sides)
RANDOM: dict[str, Callable[[Any], Callable[[Any], Any]]] = {
    "bernoulli": _bernoulli_support,  # 0/1, and 0 where p = 0, 1 where p = 1
    "multinomial": _multinomial_support,  # indices in range, of positive weight, distinct without replacement
    "normal": _finite,
    "normal.number_mean": _finite,
    "normal.in_place": _finite,
}


def _triangular(real_positive_diagonal: bool) -> Callable[..., Any]:
    def wrap(fn: Callable[..., Any], *args: Any, upper: bool = False, idx: int = 0, **kwargs: Any) -> Any:
        arg = args[idx].triu() if upper else args[idx].tril()
        if real_positive_diagonal:  # the diagonal replaced by ones, as torch's wrapper
            n = arg.shape[-1]
            eye = ember.eye(n, dtype=arg.dtype, device=arg.device)
            arg = arg * (1 - eye) + eye
        return fn(*args[:idx], arg, *args[idx + 1:], upper, **kwargs)

    return wrap


#: ember's counterparts of OpInfo's gradcheck wrappers that change what the op sees (the
#: symmetric part of the input for eigh, a triangle for triangular solves): torch's sample is
#: only meaningful through them, so both sides call the op through the wrapper
WRAPPERS: dict[str, Callable[..., Any]] = {
    "gradcheck_wrapper_hermitian_input": lambda fn, x, *a, **k: fn(x + x.mT, *a, **k),
    "gradcheck_wrapper_triangular_input": _triangular(False),
    "gradcheck_wrapper_triangular_input_real_positive_diagonal": _triangular(True),
}

#: entries whose results are unique only up to a gauge (the signs of singular vectors and
#: eigenvectors): their forward values compare through the sample's ``output_process_fn_grad``
#: (``|U|``, ``|V|``, ``U @ Vh``), as torch's own tests do
GAUGE = frozenset({"svd", "linalg.svd", "linalg.eigh"})


def _wrapper(op: Any) -> Callable[..., Any] | None:
    """ember's counterpart of the entry's wrapper (a ``functools.partial`` keeps its keywords)."""
    w = op.gradcheck_wrapper
    mine = WRAPPERS.get(getattr(getattr(w, "func", w), "__name__", ""))
    if mine is None or not isinstance(w, functools.partial):
        return mine
    return functools.partial(mine, *w.args, **w.keywords)


def torch_call(op: Any, x: Any, args: Any, kwargs: Any) -> Any:
    """torch's op on a sample, through its gradcheck wrapper when that is one of WRAPPERS."""
    if _wrapper(op) is not None:
        return op.gradcheck_wrapper(op.op, x, *args, **kwargs)
    return op.op(x, *args, **kwargs)


def ember_call(fn: Callable[..., Any], op: Any, x: Any, args: Any, kwargs: Any) -> Any:
    w = _wrapper(op)
    return fn(x, *args, **kwargs) if w is None else w(fn, x, *args, **kwargs)


#: torch dtypes ember has, by torch dtype
_DTYPES = {
    torch.float32: ember.float32, torch.float64: ember.float64, torch.float16: ember.float16,
    torch.bfloat16: ember.bfloat16, torch.int64: ember.int64, torch.int32: ember.int32,
    torch.int16: ember.int16, torch.int8: ember.int8, torch.uint8: ember.uint8, torch.bool: ember.bool,
}


class Unsupported(Exception):
    """A sample input ember has no counterpart for (complex tensors, generators, ...)."""


def _method(name: str) -> Callable[..., Any]:
    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(x, name)(*args, **kwargs)

    return call


#: entries whose OpInfo ``op`` is not ``torch.<name>(input, ...)``: the ember equivalent
CUSTOM: dict[str, Callable[..., Any]] = {
    "where": lambda x, condition, other: ember.where(condition, x, other),
    "T": lambda x: x.T,
    "mT": lambda x: x.mT,
    "H": lambda x: x.T,  # real tensors: the conjugate transpose is the transpose
    "mH": lambda x: x.mT,
    "zero_": lambda x: x.clone().zero_(),
    "einsum": lambda tensors, equation: ember.einsum(equation, tensors),
    # OpInfo's polygamma takes (x, n); torch.polygamma is (n, x)
    "polygamma": lambda x, n, **kw: ember.polygamma(n, x, **kw),
    "special.polygamma": lambda x, n, **kw: ember.special.polygamma(n, x, **kw),
    # OpInfo passes the weight first (its gradient tests differentiate the sample's input)
    "nn.functional.embedding": lambda weight, idx, **kw: ember.nn.functional.embedding(idx, weight, **kw),
    "nn.functional.embedding_bag": lambda weight, idx, **kw: ember.nn.functional.embedding_bag(idx, weight, **kw),
}


#: variants (by entry id) whose OpInfo ``op`` is a lambda over the op
CUSTOM_VARIANTS: dict[str, Callable[..., Any]] = {
    "linalg.lstsq.grad_oriented": lambda a, b, driver: ember.linalg.lstsq(a, b, driver=driver)[:2],
    "linalg.pinv.singular": lambda a, b: ember.linalg.pinv(a @ b.mT),
    "normal.in_place": lambda x, *args, **kwargs: x.normal_(*args, **kwargs),
}


def _resolve(path: str) -> Any:
    obj: Any = ember
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except (AttributeError, ImportError):
            return None
    return obj


def ember_callable(op: Any) -> tuple[Callable[..., Any] | None, str]:
    """(callable, "") for a mapped entry; (None, reason) otherwise."""
    name = op.name
    if entry_id(op) in CUSTOM_VARIANTS:
        return CUSTOM_VARIANTS[entry_id(op)], ""
    if name in SKIP:
        return None, "skip: " + SKIP[name]
    if name in CUSTOM:
        fn = CUSTOM[name]
        try:  # an ember op that does not exist yet (einsum) makes the entry unmapped
            if name == "einsum" and not hasattr(ember, "einsum"):
                return None, "no ember counterpart"
        except Exception:  # noqa: BLE001
            return None, "no ember counterpart"
        return fn, ""
    if "." in name:
        fn = _resolve(name)
        if callable(fn) and not isinstance(fn, type):
            return fn, ""
        return None, "no ember counterpart"
    method = getattr(ember.Tensor, name, None)
    if method is not None and op.method_variant is not None:
        return _method(name), ""
    fn = getattr(ember, name, None)
    if callable(fn) and not isinstance(fn, type | ember.DType) and not name.startswith("_"):
        return fn, ""
    if method is not None and callable(method):
        return _method(name), ""
    return None, "no ember counterpart"


def entry_id(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# ----------------------------------------------------------------------------- conversion
def _leaf(t: torch.Tensor, grad: bool) -> torch.Tensor:
    x = t.detach().clone()
    if grad and t.requires_grad and t.is_floating_point():
        x.requires_grad_(True)
    return x


def torch_leaves(obj: Any, grad: bool) -> Any:
    """The sample's structure with every tensor replaced by a fresh leaf (requiring grad where
    the sample's did and ``grad``), so torch and ember start from the same leaves."""
    if isinstance(obj, torch.Tensor):
        return _leaf(obj, grad)
    if isinstance(obj, list | tuple) and not isinstance(obj, torch.Size):
        return type(obj)(torch_leaves(o, grad) for o in obj) if not hasattr(obj, "_fields") else obj
    if isinstance(obj, dict):
        return {k: torch_leaves(v, grad) for k, v in obj.items()}
    return obj


def to_ember(obj: Any, dev: Device) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.dtype not in _DTYPES:
            raise Unsupported(f"tensor of dtype {obj.dtype}")
        if obj.layout != torch.strided:
            raise Unsupported(f"tensor layout {obj.layout}")
        a = obj.detach()
        d = _DTYPES[obj.dtype]
        arr = a.float().numpy() if obj.dtype == torch.bfloat16 else a.numpy()
        return ember.tensor(arr, dtype=d, device=dev, requires_grad=obj.requires_grad)
    if isinstance(obj, torch.dtype):
        if obj not in _DTYPES:
            raise Unsupported(f"dtype {obj}")
        return _DTYPES[obj]
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, torch.Generator):
        raise Unsupported("torch.Generator argument")
    if isinstance(obj, torch.device):
        return dev
    if isinstance(obj, torch.memory_format):
        return None
    if isinstance(obj, complex):
        raise Unsupported("complex scalar")
    if isinstance(obj, list | tuple):
        return type(obj)(to_ember(o, dev) for o in obj)
    if isinstance(obj, dict):
        # ember tensors are all strided (no layout argument); a device named by string is the device run
        return {k: dev if k == "device" and isinstance(v, str) else to_ember(v, dev) for k, v in obj.items()
                if not (k == "layout" and v == torch.strided)}
    return obj


def _flat_tensors(obj: Any) -> Iterator[Any]:
    if isinstance(obj, torch.Tensor | ember.Tensor):
        yield obj
    elif isinstance(obj, list | tuple):
        for o in obj:
            yield from _flat_tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _flat_tensors(o)


# ----------------------------------------------------------------------------- comparison
def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy(force=True)
    a = np.asarray(x.numpy())
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _dtype_name(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return str(x.dtype).removeprefix("torch.")
    return x.dtype.name


def compare(e: Any, t: Any, tol: tuple[float, float], t64: Any = None) -> str | None:
    """None when ember's ``e`` matches torch's ``t``; else what differs. With ``t64``, torch's
    float64 result of the same sample (same structure), float values may also differ from it by
    the tolerance plus ``NOISE`` times torch's own float32 error (element-wise)."""
    if isinstance(t, torch.Tensor):
        if not isinstance(e, ember.Tensor):
            if isinstance(e, int | float | bool) and t.ndim == 0:
                e_val, t_val = np.asarray(e), _np(t)
                ok = np.allclose(e_val, t_val, rtol=tol[0], atol=tol[1], equal_nan=True)
                return None if ok else f"value {e} != {t_val}"
            return f"expected a tensor, got {type(e).__name__}"
        if tuple(e.shape) != tuple(t.shape):
            return f"shape {tuple(e.shape)} != torch's {tuple(t.shape)}"
        if _dtype_name(e) != _dtype_name(t):
            return f"dtype {_dtype_name(e)} != torch's {_dtype_name(t)}"
        a, b = _np(e), _np(t)
        if a.dtype.kind in "biu":
            if np.array_equal(a, b):
                return None
            return f"values differ: max |diff| {np.abs(a.astype(np.float64) - b).max()}"
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if a.size and not np.allclose(a64, b64, rtol=tol[0], atol=tol[1], equal_nan=True):
            bad = ~np.isclose(a64, b64, rtol=tol[0], atol=tol[1], equal_nan=True)
            if isinstance(t64, torch.Tensor) and tuple(t64.shape) == a.shape:
                x = _np(t64).astype(np.float64)
                with np.errstate(invalid="ignore"):
                    allowed = tol[1] + tol[0] * np.abs(x) + NOISE * np.abs(b64 - x)
                    bad &= ~(np.abs(a64 - x) <= allowed)
                if not bad.any():
                    return None
            i = np.unravel_index(np.argmax(bad), a.shape)
            where = tuple(int(k) for k in i)
            return f"values differ at {where}: {a64[i]} vs torch {b64[i]} ({int(bad.sum())} of {a.size})"
        return None
    if isinstance(t, list | tuple):
        if not isinstance(e, list | tuple):
            return f"expected a sequence, got {type(e).__name__}"
        if len(e) != len(t):
            return f"{len(e)} results != torch's {len(t)}"
        same = isinstance(t64, list | tuple) and len(t64) == len(t)
        for k, (x, y) in enumerate(zip(e, t)):
            d = compare(x, y, tol, t64[k] if same else None)
            if d is not None:
                return f"[{k}] {d}"
        return None
    if isinstance(t, bool | int | float):
        if isinstance(e, ember.Tensor):
            if e.numel() != 1:
                return f"expected a scalar, got shape {tuple(e.shape)}"
            e = e.item()
        if isinstance(t, float) or isinstance(e, float):
            ok = (math.isnan(t) and math.isnan(e)) or math.isclose(e, t, rel_tol=tol[0], abs_tol=tol[1])
            return None if ok else f"{e} != {t}"
        return None if e == t else f"{e} != {t}"
    if t is None:
        return None if e is None else f"expected None, got {type(e).__name__}"
    if isinstance(t, torch.dtype):
        return None if _DTYPES.get(t) == e else f"dtype {e} != {t}"
    return None if e == t else f"{e!r} != {t!r}"


# ----------------------------------------------------------------------------- running
def _lacks(e: BaseException) -> bool:
    if isinstance(e, Unsupported | NotImplementedError):
        return True
    if isinstance(e, DTypeError):
        return True
    return isinstance(e, TypeError) and any(w in str(e) for w in ("argument", "keyword", "positional"))


def _float64(obj: Any) -> Any:
    """The structure with every float32 tensor as a float64 leaf (requiring grad as it did)."""
    if isinstance(obj, torch.Tensor):
        if obj.dtype != torch.float32:
            return obj
        return obj.detach().double().requires_grad_(obj.requires_grad)
    if isinstance(obj, list | tuple) and not isinstance(obj, torch.Size) and not hasattr(obj, "_fields"):
        return type(obj)(_float64(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _float64(v) for k, v in obj.items()}
    return obj


def _reference64(op: Any, leaves: Any) -> Any:
    """torch's forward result of the sample in float64 (None where torch refuses)."""
    ti, ta, tk = _float64(leaves)
    try:
        with torch.no_grad():
            return torch_call(op, ti, ta, tk)
    except Exception:  # noqa: BLE001 - no float64 reference: the float32 comparison stands
        return None


def _grads64(op: Any, leaves: Any, gs: list[torch.Tensor], post: Callable[[Any], Any]) -> list[Any] | None:
    """torch's gradients of the same loss in float64 (None where torch refuses)."""
    ti, ta, tk = _float64(leaves)
    xs = [x for x in _flat_tensors((ti, ta, tk)) if x.requires_grad]
    try:
        outs = _grad_targets(post(torch_call(op, ti, ta, tk)))
        if len(outs) != len(gs):
            return None
        loss = sum((o * g.to(o.dtype)).sum() for o, g in zip(outs, gs))
        return list(torch.autograd.grad(loss, xs, allow_unused=True))
    except Exception:  # noqa: BLE001
        return None


@dataclass
class Outcome:
    kind: str  # pass / wrong / lacks / raised / torch / nograd
    detail: str = ""


def run_sample(fn: Callable[..., Any], op: Any, sample: Any, dev: Device) -> Outcome:
    """Forward values of one sample: torch's ``op`` against ember's ``fn``."""
    ti, ta, tk = torch_leaves((sample.input, sample.args, sample.kwargs), False)
    eid = entry_id(op)
    post = _post(op, sample) if eid in GAUGE else RANDOM[eid](sample) if eid in RANDOM else (lambda r: r)
    try:
        with torch.no_grad():
            ref = post(torch_call(op, ti, ta, tk))
    except Exception as e:  # noqa: BLE001 - torch refusing its own sample: not counted
        return Outcome("torch", f"{type(e).__name__}: {e}")
    try:
        ei, ea, ek = to_ember((ti, ta, tk), dev)
        with ember.no_grad():
            out = post(ember_call(fn, op, ei, ea, ek))
    except Exception as e:  # noqa: BLE001
        return Outcome("lacks" if _lacks(e) else "raised", f"{type(e).__name__}: {str(e)[:200]}")
    try:
        d = compare(out, ref, FORWARD_TOL)
        if d is not None and "values differ" in d:
            ref64 = _reference64(op, (ti, ta, tk))
            ref64 = None if ref64 is None else post(ref64)
            if ref64 is not None:
                d = compare(out, ref, FORWARD_TOL, ref64)
    except Exception as e:  # noqa: BLE001 - reading the result raised (a lazy device's drain: a dtype the
        # device cannot hold surfaces here, and is a lack as when the op itself refuses it)
        return Outcome("lacks" if _lacks(e) else "raised", f"{type(e).__name__}: {str(e)[:200]}")
    return Outcome("pass") if d is None else Outcome("wrong", d)


def _post(op: Any, sample: Any) -> Callable[[Any], Any]:
    """The sample's ``output_process_fn_grad`` (identity when it has none)."""
    return getattr(sample, "output_process_fn_grad", None) or (lambda r: r)


def _grad_targets(out: Any) -> list[Any]:
    return [o for o in _flat_tensors(out) if o.dtype.is_floating_point and o.requires_grad]


def run_grad(fn: Callable[..., Any], op: Any, sample: Any, dev: Device, seed: int) -> Outcome:
    """Gradients of ``sum(out_i * g_i)`` with respect to the sample's leaves."""
    ti, ta, tk = torch_leaves((sample.input, sample.args, sample.kwargs), True)
    t_leaves = [x for x in _flat_tensors((ti, ta, tk)) if x.requires_grad]
    if not t_leaves:
        return Outcome("nograd")
    post = _post(op, sample)
    try:
        ref = post(torch_call(op, ti, ta, tk))
        t_outs = _grad_targets(ref)
        if not t_outs:
            return Outcome("nograd")
        gen = torch.Generator().manual_seed(seed)
        gs = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in t_outs]
        loss = sum((o * g).sum() for o, g in zip(t_outs, gs))
        t_grads = torch.autograd.grad(loss, t_leaves, allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return Outcome("torch", f"{type(e).__name__}: {e}")
    try:
        ei, ea, ek = to_ember((ti, ta, tk), dev)
        e_leaves = [x for x in _flat_tensors((ei, ea, ek)) if x.requires_grad]
        out = post(ember_call(fn, op, ei, ea, ek))
        e_outs = [o for o in _flat_tensors(out) if o.dtype.is_floating_point]
        if len(e_outs) != len(_list_float_outputs(ref)):
            return Outcome("wrong", f"{len(e_outs)} float outputs != torch's {len(_list_float_outputs(ref))}")
        tracked = [o for o, t in zip(e_outs, _list_float_outputs(ref)) if t.requires_grad]
        if not any(o.requires_grad for o in tracked):
            return Outcome("wrong", "ember's result does not require grad")
        loss_e = None
        for o, g in zip(tracked, gs):
            if not o.requires_grad:
                continue
            term = (o * ember.tensor(g.double().numpy(), dtype=o.dtype, device=dev)).sum()
            loss_e = term if loss_e is None else loss_e + term
        loss_e.backward()
        e_grads = [x.grad for x in e_leaves]
    except Exception as e:  # noqa: BLE001
        return Outcome("lacks" if _lacks(e) else "raised", f"{type(e).__name__}: {str(e)[:200]}")
    t_grads64: list[Any] | None = None
    for k, (eg, tg) in enumerate(zip(e_grads, t_grads)):
        if tg is None:
            if eg is not None and np.any(_np(eg) != 0):
                return Outcome("wrong", f"grad {k}: torch has none, ember non-zero")
            continue
        if eg is None:
            if np.any(_np(tg) != 0):
                return Outcome("wrong", f"grad {k}: ember has none")
            continue
        try:
            d = compare(eg, tg, GRAD_TOL)
            if d is not None and "values differ" in d:
                if t_grads64 is None:
                    t_grads64 = _grads64(op, (ti, ta, tk), gs, post) or [None] * len(t_grads)
                d = compare(eg, tg, GRAD_TOL, t_grads64[k])
        except Exception as e:  # noqa: BLE001 - reading the gradient raised
            return Outcome("raised", f"grad {k}: {type(e).__name__}: {str(e)[:200]}")
        if d is not None:
            return Outcome("wrong", f"grad {k}: {d}")
    return Outcome("pass")


def _list_float_outputs(out: Any) -> list[Any]:
    return [o for o in _flat_tensors(out) if o.dtype.is_floating_point]


@dataclass
class EntryResult:
    entry: str
    mapped: bool
    reason: str = ""
    forward: dict[str, int] = field(default_factory=dict)
    grad: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def load_op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


def run_entry(op: Any, dev: Device, limit: int | None, grads: bool = True) -> EntryResult:
    """Every (or the first ``limit``) float32 sample of one entry, forward and gradients."""
    res = EntryResult(entry_id(op), False)
    fn, reason = ember_callable(op)
    if fn is None:
        res.reason = reason
        return res
    # float32 samples; integer-only entries (bitwise ops) run their int64 samples
    dtype = next((d for d in (torch.float32, torch.int64, torch.bool) if op.supports_dtype(d, "cpu")), None)
    if dtype is None:
        res.reason = "no float32, int64 or bool samples in torch"
        return res
    res.mapped = True
    grads = grads and op.supports_autograd and dtype.is_floating_point
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=grads))
    except Exception as e:  # noqa: BLE001
        res.reason = f"torch's sample_inputs raised {type(e).__name__}"
        return res
    if limit is not None:
        samples = samples[:limit]
    if res.entry in NO_DROPOUT:
        samples = [NO_DROPOUT[res.entry](s) for s in samples]
    torch.manual_seed(0)
    for i, s in enumerate(samples):
        o = run_sample(fn, op, s, dev)
        res.forward[o.kind] = res.forward.get(o.kind, 0) + 1
        if o.kind in ("wrong", "raised", "lacks"):
            res.failures.append(f"forward sample {i}: {o.kind}: {o.detail}")
        if grads and dev.is_autodiff:
            g = run_grad(fn, op, s, dev, 1000 + i)
            res.grad[g.kind] = res.grad.get(g.kind, 0) + 1
            if g.kind in ("wrong", "raised", "lacks"):
                res.failures.append(f"grad sample {i}: {g.kind}: {g.detail}")
    return res
