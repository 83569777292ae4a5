"""Flex backend vs numpy, measured in one process: the performance goals of issue 2.

    python bench/bench_flex.py            # print the machine and one table of ratios
    python bench/bench_flex.py --save     # also write bench/results/flex_<date>.md
    python bench/bench_flex.py --quick    # fewer repeats (a smoke run, noisier)
    python bench/bench_flex.py --check    # exit 1 when a goal is missed

Ratios are taken between ember and numpy timed alternately in the same process on the same
arrays, so BLAS threads, CPU frequency and environment (OPENBLAS_CORETYPE, ...) affect both
sides alike. Every figure is a median over repeats.

Goals (issue 2):
  * per-op overhead: 1,024-element float32 ``a + b`` through the Tensor API <= 2.5x numpy's own;
  * 1024x1024 float32 matmul on flex >= 0.9x numpy's throughput;
  * MLP forward+backward (batch 256, 784-512-512-10, ReLU, cross-entropy via log_softmax) on
    ``Device.flex().autodiff()`` <= 1.5x the same written by hand in numpy (the reference below,
    whose gradients are checked against ember's before anything is timed).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import os
import platform
import statistics
import sys
import timeit
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from machine_info import cpu_model, usable_cores  # bench/, first on sys.path when run as a script

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"


# ----------------------------------------------------------------------------- machine

def _blas() -> dict[str, str]:
    """What BLAS numpy runs: threadpoolctl when installed, else numpy's build config plus a
    direct query of the loaded OpenBLAS (its core type is what OPENBLAS_CORETYPE changes)."""
    info: dict[str, str] = {}
    np.ones((8, 8)) @ np.ones((8, 8))  # make sure the BLAS library is loaded
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-not-found]

        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                info["blas"] = f"{pool.get('internal_api')} {pool.get('version')}"
                info["blas core"] = str(pool.get("architecture"))
                info["blas threads"] = str(pool.get("num_threads"))
                info["source"] = "threadpoolctl"
                return info
    except ImportError:
        pass
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        info["blas"] = f"{cfg.get('name')} {cfg.get('version')}"
    except Exception:  # older numpy: no dict mode
        info["blas"] = "unknown"
    for lib in _loaded_libs("openblas"):
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                core = getattr(handle, f"{prefix}get_corename{suffix}", None)
                threads = getattr(handle, f"{prefix}get_num_threads{suffix}", None)
                if core is None:
                    continue
                core.restype = ctypes.c_char_p
                info["blas core"] = core().decode()
                if threads is not None:
                    threads.restype = ctypes.c_int
                    info["blas threads"] = str(threads())
                info["source"] = "numpy config + OpenBLAS query"
                return info
    info["source"] = "numpy config"
    return info


def _loaded_libs(fragment: str) -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return sorted({ln.split()[-1] for ln in f if fragment in ln.lower() and "/" in ln})
    except OSError:
        return []


def machine() -> dict[str, str]:
    m = {
        "cpu": cpu_model(),
        "cores": f"{usable_cores()} usable ({os.cpu_count()} online)",
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    m.update(_blas())
    m["load average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        m[var] = os.environ.get(var, "(unset)")
    try:
        import ember

        m["ember"] = getattr(ember, "__version__", "?")
    except Exception as e:  # reported, and every ember row then shows the error
        m["ember"] = f"import failed: {e}"
    return m


# ----------------------------------------------------------------------------- timing

def paired(stmt_a: str | Callable[[], Any], stmt_b: str | Callable[[], Any], g: dict[str, Any],
           number: int, repeat: int) -> tuple[float, float, float]:
    """Time a and b back to back ``repeat`` times; returns the median seconds per call of a,
    of b, and the median of the per-pair ratios a/b.

    The ratio is what the goals are about, and taking it per pair makes it robust to the
    machine changing speed between pairs (shared hosts here swing by 3x for seconds at a
    time, which a ratio of two medians would inherit). The order inside a pair alternates so
    that neither side always runs first. String statements avoid a Python call layer."""
    ta = timeit.Timer(stmt_a, globals=g)  # type: ignore[arg-type]
    tb = timeit.Timer(stmt_b, globals=g)  # type: ignore[arg-type]
    ta.timeit(max(1, number // 4))  # warm-up: caches, allocator, lazy imports
    tb.timeit(max(1, number // 4))
    ra: list[float] = []
    rb: list[float] = []
    for i in range(repeat):
        if i % 2:
            b = tb.timeit(number) / number
            a = ta.timeit(number) / number
        else:
            a = ta.timeit(number) / number
            b = tb.timeit(number) / number
        ra.append(a)
        rb.append(b)
    ratio = statistics.median(x / y for x, y in zip(ra, rb))
    return statistics.median(ra), statistics.median(rb), ratio


@dataclass
class Row:
    name: str = ""  # filled in from the registry
    ember_s: float | None = None
    numpy_s: float | None = None
    ratio: float | None = None
    goal: str = ""
    ok: bool | None = None  # None: informational, no goal
    note: str = ""
    error: str = ""


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


# ----------------------------------------------------------------------------- benchmarks

def bench_add_overhead(quick: bool) -> Row:
    import ember

    rng = np.random.default_rng(0)
    a = rng.standard_normal(1024, dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    ta, tb = ember.from_numpy(a), ember.from_numpy(b)
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    g = {"a": a, "b": b, "ta": ta, "tb": tb}
    em, nu, r = paired("ta + tb", "a + b", g, number=2000 if quick else 10000,
                       repeat=7 if quick else 41)
    return Row("", em, nu, r, "<= 2.5x", r <= 2.5,
               f"device {ta.device}")


def bench_add_overhead_autodiff(quick: bool) -> Row:
    import ember
    from ember import Device

    dev = Device.flex().autodiff()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1024, dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    ta = ember.tensor(a, device=dev, requires_grad=True)
    tb = ember.tensor(b, device=dev)
    g = {"a": a, "b": b, "ta": ta, "tb": tb}
    em, nu, r = paired("ta + tb", "a + b", g, number=1000 if quick else 5000,
                       repeat=7 if quick else 21)
    return Row("", em, nu, r, "", None,
               "informational")


def bench_matmul(quick: bool) -> Row:
    import ember

    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    ta, tb = ember.from_numpy(a), ember.from_numpy(b)
    ref = a @ b
    np.testing.assert_allclose((ta @ tb).numpy(), ref, rtol=1e-4, atol=1e-3)
    g = {"a": a, "b": b, "ta": ta, "tb": tb}
    em, nu, slow = paired("ta @ tb", "a @ b", g, number=1, repeat=5 if quick else 31)
    r = 1 / slow  # throughput ratio: higher is better
    gflops = 2 * 1024**3 / em / 1e9
    return Row("", em, nu, r, ">= 0.9x", r >= 0.9,
               f"ember {gflops:.1f} GFLOP/s")


# The MLP: batch 256, 784-512-512-10, ReLU, cross-entropy = -mean(log_softmax(logits)[y]).
BATCH, SIZES = 256, (784, 512, 512, 10)


def mlp_data(seed: int = 3) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Inputs, labels and He-initialised float32 parameters [W1, b1, W2, b2, W3, b3]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    params: list[np.ndarray] = []
    for fan_in, fan_out in zip(SIZES, SIZES[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2 / fan_in))
                      .astype(np.float32))
        params.append((rng.standard_normal(fan_out) * 0.01).astype(np.float32))
    return x, y, params


def mlp_numpy(x: np.ndarray, y: np.ndarray, params: list[np.ndarray]
              ) -> tuple[float, list[np.ndarray]]:
    """Forward and backward by hand; returns the loss and [dW1, db1, dW2, db2, dW3, db3].

    Written the way a careful numpy user would: in-place where it is safe, the softmax
    gradient from the already computed log-probabilities, no gradient for the input."""
    w1, b1, w2, b2, w3, b3 = params
    n = x.shape[0]
    rows = np.arange(n)
    # forward
    z1 = x @ w1
    z1 += b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2
    z2 += b2
    h2 = np.maximum(z2, 0)
    z3 = h2 @ w3
    z3 += b3
    m = z3.max(axis=1, keepdims=True)
    shifted = z3 - m
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -float(logp[rows, y].mean())
    # backward: d loss / d z3 = (softmax - onehot) / n
    dz3 = np.exp(logp)
    dz3[rows, y] -= 1
    dz3 /= n
    dw3 = h2.T @ dz3
    db3 = dz3.sum(axis=0)
    dh2 = dz3 @ w3.T
    dh2 *= z2 > 0  # ReLU mask
    dw2 = h1.T @ dh2
    db2 = dh2.sum(axis=0)
    dh1 = dh2 @ w2.T
    dh1 *= z1 > 0
    dw1 = x.T @ dh1
    db1 = dh1.sum(axis=0)
    return loss, [dw1, db1, dw2, db2, dw3, db3]


def mlp_ember(ember: Any, dev: Any, xt: Any, onehot_t: Any, params_t: list[Any]) -> Any:
    """The same step on an autodiff device; gradients land in ``p.grad``."""
    for p in params_t:
        p.grad = None  # as optimizer.zero_grad(set_to_none=True)
    w1, b1, w2, b2, w3, b3 = params_t
    h1 = (xt @ w1 + b1).relu()
    h2 = (h1 @ w2 + b2).relu()
    logp = (h2 @ w3 + b3).log_softmax(1)
    loss = (logp * onehot_t).sum() * (-1.0 / BATCH)  # -mean over the batch of logp[i, y_i]
    loss.backward()
    return loss


def bench_mlp(quick: bool) -> Row:
    import ember
    from ember import Device

    dev = Device.flex().autodiff()
    x, y, params = mlp_data()
    onehot = np.zeros((BATCH, SIZES[-1]), np.float32)
    onehot[np.arange(BATCH), y] = 1
    xt = ember.tensor(x, device=dev)
    oh = ember.tensor(onehot, device=dev)
    params_t = [ember.tensor(p, device=dev, requires_grad=True) for p in params]

    # correctness first: same loss and gradients to ~1e-4 (relative to each gradient's scale)
    ref_loss, ref_grads = mlp_numpy(x, y, params)
    loss = mlp_ember(ember, dev, xt, oh, params_t)
    assert abs(float(loss.item()) - ref_loss) <= 1e-4 * max(1.0, abs(ref_loss)), (loss, ref_loss)
    worst = 0.0
    for name, p, g in zip(("W1", "b1", "W2", "b2", "W3", "b3"), params_t, ref_grads):
        got = p.grad.numpy()
        assert got.shape == g.shape, (name, got.shape, g.shape)
        err = float(np.max(np.abs(got - g)) / max(float(np.max(np.abs(g))), 1e-12))
        assert err <= 1e-4, f"gradient of {name} differs from the numpy reference: {err:.2e}"
        worst = max(worst, err)

    g = {"step_e": lambda: mlp_ember(ember, dev, xt, oh, params_t),
         "step_n": lambda: mlp_numpy(x, y, params)}
    em, nu, r = paired("step_e()", "step_n()", g, number=1 if quick else 2,
                       repeat=5 if quick else 31)
    return Row("", em, nu, r,
               "<= 1.5x", r <= 1.5, f"grads match to {worst:.1e}")


def bench_rand(quick: bool) -> Row:
    import ember

    n = 1 << 24
    em, nu, r = paired(lambda: ember.rand(n),
                       lambda: np.random.default_rng(0).random(n, np.float32),
                       {}, number=1, repeat=3 if quick else 9)
    return Row("", em, nu, r, "", None,
               "informational; counter-based, same values on every backend")


BENCHES: list[tuple[str, Callable[[bool], Row]]] = [
    ("add 1024 f32: Tensor API vs numpy, per op", bench_add_overhead),
    ("add 1024 f32 on flex.autodiff() (records the graph)", bench_add_overhead_autodiff),
    ("matmul 1024^2 f32: flex throughput / numpy", bench_matmul),
    ("MLP fwd+bwd (256, 784-512-512-10) on flex.autodiff() vs numpy", bench_mlp),
    ("rand 16M f32: Philox (ember.rand) vs numpy PCG64", bench_rand),
]


# ----------------------------------------------------------------------------- report

def table(rows: list[Row]) -> str:
    head = ["benchmark", "ember", "numpy", "ratio", "goal", "met", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.error:
            cells = [r.name, "-", "-", "-", r.goal, "ERROR", r.error]
        else:
            met = "" if r.ok is None else ("yes" if r.ok else "**NO**")
            ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
            cells = [r.name, _fmt_time(r.ember_s), _fmt_time(r.numpy_s), ratio, r.goal, met, r.note]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(m: dict[str, str], rows: list[Row], quick: bool) -> str:
    when = _dt.datetime.now().isoformat(timespec="seconds")
    out = [f"# ember flex benchmark, {when}", ""]
    out += [f"- {k}: {v}" for k, v in m.items()]
    out += ["", table(rows), ""]
    out.append("Times: medians over repeats. Ratios: median over back-to-back (ember, numpy) "
               "pairs of time ember / time numpy, except matmul, which is the inverse "
               "(throughput relative to numpy). Both sides run in one process on the same "
               "arrays" + (" (--quick: few repeats, noisy)." if quick else "."))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--save", action="store_true", help="write bench/results/flex_<date>.md")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a goal is missed")
    ap.add_argument("--only", default="", help="comma-separated substrings of benchmark names")
    args = ap.parse_args(argv)

    m = machine()
    for k, v in m.items():
        print(f"{k:>20}: {v}")
    print(flush=True)
    rows: list[Row] = []
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    for name, bench in BENCHES:
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            row = bench(args.quick)
            row.name = name
            rows.append(row)
        except Exception as e:  # keep going: one broken API must not hide the other figures
            traceback.print_exc()
            rows.append(Row(name, error=f"{type(e).__name__}: {e}".replace("|", "/")[:160]))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = report(m, rows, args.quick)
    print()
    print(text)
    if args.save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"flex_{_dt.date.today().isoformat()}.md"
        path.write_text(text)
        print(f"saved {path.relative_to(ROOT)}")
    failed = any(r.error for r in rows)
    missed = any(r.ok is False for r in rows)
    return 1 if failed or (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
