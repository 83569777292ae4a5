"""Fusion on ``Device.cpu()`` (``dispatch<fusion<cube<cpu>>>``): ratios against peers in one run.

    python bench/bench_fusion.py                # prints the tables
    python bench/bench_fusion.py --save         # also writes bench/results/fusion_<date>[_<tag>].md
    python bench/bench_fusion.py --only chain   # sections whose name contains a substring
    python bench/bench_fusion.py --quick        # fewer repeats (a smoke run: noisy)

Sections (issue 5 goals in brackets):

* ``register``: lazy registration through the Tensor API, median us per elementwise op over
  10,000 single-op timings (the few that hit the queue limit and drain are outliers the
  median ignores; the table also gives the mean with them) [<= 5 us].
* ``chain``: the issue's chain (``x*2+1``, ``sin``, ``exp(-x*x)``, ``- 0.5*x``, ``relu``,
  ``y*y + x``: 12 catalog ops) on 16M float32: ember fused vs the same ops in numpy, one
  numexpr expression, torch eager and ``torch.compile`` when torch imports; first calls
  (kernel compilation, into a fresh kernel cache unless ``--warm-cache``) reported apart
  [<= 1.0x torch.compile, first call <= 1 s; >= 1.2x numexpr; >= 3x numpy without torch].
* ``matmul``: ``gelu(a @ w + b)`` vs ``a @ w`` (1024x1024x1024 float32), with the number of
  kernels each launches (``launch`` spans) [one kernel; time <= 1.1x the matmul alone].
* ``mlp``: 100 identical training-style steps (forward, backward, in-place SGD update, loss
  read) of an MLP on ``Device.cpu().autodiff()``: searches, and the time spent in
  ``Fusion.search`` (wrapped) during steps 2..100 [zero]; step time against flex and torch.

Each peer is timed alternately with ember in the same process (medians; a short pause before
each call lets OpenMP's spinning workers park). Ratios are peer time / ember time (>= 1: ember
faster) unless the row says otherwise. The numbers move as fusers land: rerun, it takes
one to two minutes on two cores (most of it compiling into the fresh kernel cache).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# decide the kernel cache before ember reads its configuration
if "--warm-cache" not in sys.argv and "EMBER_CACHE_DIR" not in os.environ:
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-bench-fusion-")

import ember  # noqa: E402
from ember import Device, tracing  # noqa: E402
from ember.backends.fusion import Fusion  # noqa: E402

try:  # optional peers
    import numexpr
except ImportError:  # pragma: no cover - depends on the machine
    numexpr = None
try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

N_CHAIN = 16 * 1024 * 1024


# --------------------------------------------------------------------------- helpers
def fusion_of(dev: Device) -> Fusion:
    b: Any = dev.backend()
    while not isinstance(b, Fusion):
        b = b.inner
    return b


def paired(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Median seconds of each function, the functions timed in turn within each repeat (so
    all see the same machine load), after one warm-up call each."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            time.sleep(0.003)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def once(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fmt_t(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"


def count_launches(fn: Callable[[], object]) -> tuple[int, list[str]]:
    with tracing.capture() as spans:
        fn()
    launches = [str(s.fields.get("kernel", "?")) for s in spans if s.name == "launch"]
    return len(launches), launches


def machine() -> dict[str, str]:
    info = {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "L3 cache"):
                info[k] = v.strip()
            elif k == "Flags":
                info[k] = " ".join(f for f in v.split() if f.startswith("avx"))
    except OSError:
        pass
    try:
        cc = os.environ.get("CC", "cc")
        info["cc"] = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        pass
    info["numexpr"] = f"{numexpr.__version__} ({numexpr.get_num_threads()} threads)" if numexpr else "not installed"
    info["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads)" if torch else "not installed"
    info["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "(unset: all cores)")
    info["kernel cache"] = "warm (--warm-cache)" if "--warm-cache" in sys.argv else "fresh temporary directory"
    fb = fusion_of(Device.cpu())
    info["fusers"] = ", ".join(getattr(f, "name", type(f).__name__) for f in fb.fusers) or "(none yet)"
    info["load average at the end (1, 5, 15 min)"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return info


class Table:
    def __init__(self, title: str, header: list[str]) -> None:
        self.title = title
        self.header = header
        self.rows: list[list[str]] = []
        self.notes: list[str] = []

    def add(self, *cells: Any) -> None:
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |",
                 "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def goal_cell(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "no")


# --------------------------------------------------------------------------- (a) registration
def bench_register(quick: bool) -> Table:
    t = Table("(a) lazy registration through the Tensor API",
              ["device", "op", "median per op", "mean per op (incl. drains)", "goal", "met"])
    n = 2000 if quick else 10000
    for label, dev in (("cpu (fused)", Device.cpu()), ("cpu.autodiff (fused)", Device.cpu().autodiff()),
                       ("cpu (fusion off, eager kernels)", Device.cpu(fusion=False)), ("flex (numpy)", Device.flex())):
        x = ember.randn(1024, device=dev)
        x.numpy()
        for _ in range(300):  # warm the kernels the drains use
            y = x * 1.0001
        dev.sync()
        per = []
        y = x
        pc = time.perf_counter_ns
        t_all = pc()
        for _ in range(n):
            t0 = pc()
            y = y * 1.0001
            per.append(pc() - t0)
        total = pc() - t_all
        dev.sync()
        med = statistics.median(per) / 1e3
        lazy = "fused" in label
        t.add(label, "y = y * 1.0001 (1024 f32)", f"{med:.2f} us", f"{total / n / 1e3:.2f} us",
              "<= 5 us" if lazy else "", goal_cell(med <= 5.0) if lazy else "-")
    t.notes.append(f"{n} single-op timings each (perf_counter_ns around one op); the fused device drains every "
                   f"`fusion.queue_limit` ops, which the mean includes and the median does not")
    return t


# --------------------------------------------------------------------------- (b) chain
def chain_ember(x: Any) -> Any:
    y = x * 2.0 + 1.0
    y = y.sin() * (-x * x).exp()
    y = (y - 0.5 * x).relu()
    return y * y + x


def chain_numpy(x: np.ndarray) -> np.ndarray:
    y = x * np.float32(2.0) + np.float32(1.0)
    y = np.sin(y) * np.exp(-x * x)
    y = np.maximum(y - np.float32(0.5) * x, np.float32(0.0))
    return y * y + x


#: numexpr keeps float32 only with integer literals (``0.5 * x`` would promote to float64,
#: so it is written ``x / 2``, the same IEEE result) and has no float32 maximum nor common
#: subexpressions: one expression evaluates the relu's input twice, two expressions pay a
#: temporary; the faster of the two is numexpr's figure
_RELU_IN = "sin(x * 2 + 1) * exp(-x * x) - x / 2"
NUMEXPR_CHAIN = f"where({_RELU_IN} > 0, {_RELU_IN}, 0) ** 2 + x"
NUMEXPR_TWO = (_RELU_IN, "where(a > 0, a, 0) ** 2 + x")


def chain_numexpr_two(x: np.ndarray) -> np.ndarray:
    a = numexpr.evaluate(NUMEXPR_TWO[0], local_dict={"x": x})
    return numexpr.evaluate(NUMEXPR_TWO[1], local_dict={"a": a, "x": x})


def chain_torch(x: Any) -> Any:
    y = x * 2.0 + 1.0
    y = y.sin() * (-x * x).exp()
    y = (y - 0.5 * x).relu()
    return y * y + x


def bench_chain(quick: bool, n: int) -> Table:
    t = Table(f"(b) the issue's chain on {n / 2**20:.0f}M float32 (12 ops)",
              ["side", "steady time", "first call", "ratio (side / ember)", "goal", "met"])
    reps = 3 if quick else 5
    dev = Device.cpu()
    fb = fusion_of(dev)
    xv = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = ember.tensor(xv, device=dev)
    dev.sync()

    # every ember side keeps its result's handle alive across the sync: the fusion layer
    # skips work whose result nobody can read
    def ember_run() -> Any:
        z = chain_ember(x)
        dev.sync()
        return z

    searches0 = fb.stats.searches
    first = once(ember_run)
    got = chain_ember(x).numpy()
    want = chain_numpy(xv.astype(np.float64))
    err = float(np.max(np.abs(got - want)))
    if err > 1e-4 * max(1.0, float(np.max(np.abs(want)))):
        raise AssertionError(f"ember's chain is wrong: max abs error {err}")
    n_kernels, kernels = count_launches(ember_run)
    fns: dict[str, Callable[[], object]] = {"ember": ember_run, "numpy": lambda: chain_numpy(xv)}
    firsts: dict[str, float | None] = {"ember": first, "numpy": None}
    if numexpr is not None:
        for side, fn in (("numexpr (1 expr)", lambda: numexpr.evaluate(NUMEXPR_CHAIN, local_dict={"x": xv})),
                         ("numexpr (2 exprs)", lambda: chain_numexpr_two(xv))):
            r = fn()
            assert r.dtype == np.float32 and np.allclose(r, want, rtol=1e-4, atol=1e-4), side
            fns[side] = fn
    if torch is not None:
        xt = torch.from_numpy(xv)
        fns["torch eager"] = lambda: chain_torch(xt)
        firsts["torch eager"] = None
        try:
            compiled = torch.compile(chain_torch)
            firsts["torch.compile"] = once(lambda: compiled(xt))
            fns["torch.compile"] = lambda: compiled(xt)
        except Exception as e:  # noqa: BLE001 - inductor needs a working toolchain
            t.notes.append(f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    times = paired(fns, reps)
    te = times["ember"]
    best_ne = min((v, k) for k, v in times.items() if k.startswith("numexpr"))[1] if numexpr else None
    goals = {best_ne: 1.2, "torch.compile": 1.0, "numpy": None if torch is not None else 3.0}
    for side, s in times.items():
        ratio = s / te
        goal = goals.get(side)
        t.add(side, fmt_t(s), fmt_t(firsts.get(side)), "1.00x" if side == "ember" else f"{ratio:.2f}x",
              f">= {goal}x" if goal else ("first call <= 1 s" if side == "ember" else ""),
              goal_cell(ratio >= goal) if goal else (goal_cell(first <= 1.0) if side == "ember" else "-"))
    t.notes.append(f"ember launches {n_kernels} kernel(s) per chain ({fb.stats.searches - searches0} search(es) in "
                   f"all runs); kernels: {', '.join(sorted(set(kernels)))}")
    t.notes.append("ember's time includes `device.sync()` (the drain); the first call includes the search and the "
                   "kernel compilation; numexpr: `{}` or `{}` then `{}`".format(NUMEXPR_CHAIN, *NUMEXPR_TWO))
    if torch is not None:
        t.notes.append("torch.compile's first call depends on inductor's own cache (/tmp/torchinductor_<user>): "
                       "cold on a machine's first run, warm afterwards")
    return t


# --------------------------------------------------------------------------- (c) matmul epilogue
def bench_matmul(quick: bool) -> Table:
    t = Table("(c) matmul + bias + gelu vs the matmul alone (1024x1024x1024 float32)",
              ["side", "matmul", "gelu(a @ w + b)", "ratio (epilogue / matmul)", "kernels (mm / mm+epi)", "goal",
               "met"])
    reps = 3 if quick else 5
    dev = Device.cpu()
    g = np.random.default_rng(1)
    av = g.standard_normal((1024, 1024)).astype(np.float32)
    wv = (g.standard_normal((1024, 1024)) / 32).astype(np.float32)
    bv = g.standard_normal(1024).astype(np.float32)
    a, w, b = (ember.tensor(v, device=dev) for v in (av, wv, bv))
    dev.sync()

    def mm() -> Any:
        c = a @ w
        dev.sync()
        return c

    def epi() -> Any:
        c = (a @ w + b).gelu()
        dev.sync()
        return c

    first_mm, first_epi = once(mm), once(epi)
    out = (a @ w + b).gelu().numpy().astype(np.float64)
    z = av.astype(np.float64) @ wv.astype(np.float64) + bv
    from math import erf

    want = 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    if float(np.max(np.abs(out - want))) > 1e-3:
        raise AssertionError("ember's gelu(a @ w + b) is wrong")
    k_mm, _ = count_launches(mm)
    k_epi, names = count_launches(epi)
    times = paired({"mm": mm, "epi": epi}, reps)
    ratio = times["epi"] / times["mm"]
    ok = ratio <= 1.1 and k_epi == 1
    t.add("ember cpu (fused)", fmt_t(times["mm"]), fmt_t(times["epi"]), f"{ratio:.2f}x", f"{k_mm} / {k_epi}",
          "<= 1.1x, 1 kernel", goal_cell(ok))
    t.notes.append(f"first calls (compile + autotune): matmul {fmt_t(first_mm)}, with epilogue {fmt_t(first_epi)}; "
                   f"epilogue kernels: {', '.join(names)}")
    if torch is not None:
        at, wt, bt = (torch.from_numpy(v) for v in (av, wv, bv))
        F = torch.nn.functional
        tt = paired({"mm": lambda: at @ wt, "epi": lambda: F.gelu(at @ wt + bt)}, reps)
        t.add("torch eager", fmt_t(tt["mm"]), fmt_t(tt["epi"]), f"{tt['epi'] / tt['mm']:.2f}x", "-", "", "-")
        t.notes.append(f"ember / torch: matmul {times['mm'] / tt['mm']:.2f}x, with epilogue "
                       f"{times['epi'] / tt['epi']:.2f}x (time ratios, > 1: torch faster)")
    tn = paired({"mm": lambda: av @ wv, "epi": lambda: _gelu_np(av @ wv + bv)}, reps)
    t.add("numpy", fmt_t(tn["mm"]), fmt_t(tn["epi"]), f"{tn['epi'] / tn['mm']:.2f}x", "-", "", "-")
    return t


def _gelu_np(z: np.ndarray) -> np.ndarray:
    # tanh form: numpy has no erf; only the cost matters for this row
    return 0.5 * z * (1 + np.tanh(np.float32(0.7978845608) * (z + np.float32(0.044715) * z * z * z)))


# --------------------------------------------------------------------------- (d) training steps
def bench_mlp(quick: bool) -> Table:
    steps = 100
    t = Table(f"(d) {steps} identical MLP training-style steps (batch 128, 256-256-10, MSE, SGD in place)",
              ["side", "median step", "searches (all / steps 2..100)", "search time steps 2..100", "goal", "met"])
    g = np.random.default_rng(2)
    shapes = ((256, 256), (256,), (256, 10), (10,))
    init = [(g.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
    xv = g.standard_normal((128, 256)).astype(np.float32)
    yv = g.standard_normal((128, 10)).astype(np.float32)

    def run_ember(dev: Device, fb: Fusion | None, steps: int = steps) -> tuple[list[float], list[float], list[int]]:
        ps = [ember.tensor(v, device=dev, requires_grad=True) for v in init]
        x, y = ember.tensor(xv, device=dev), ember.tensor(yv, device=dev)
        step_t, search_t, search_n = [], [], []
        spent = [0.0, 0]
        if fb is not None:
            real = fb.search

            def timed_search(ops: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return real(ops)
                finally:
                    spent[0] += time.perf_counter() - t0
                    spent[1] += 1

            fb.search = timed_search  # type: ignore[method-assign]
        try:
            for _ in range(steps):
                before = tuple(spent)
                t0 = time.perf_counter()
                w1, b1, w2, b2 = ps
                out = (x @ w1 + b1).relu() @ w2 + b2
                loss = ((out - y) * (out - y)).mean()
                loss.backward()
                with ember.no_grad():
                    for p in ps:
                        p.sub_(0.01 * p.grad)
                        p.grad = None
                loss.item()
                step_t.append(time.perf_counter() - t0)
                search_t.append(spent[0] - before[0])
                search_n.append(spent[1] - before[1])
        finally:
            if fb is not None:
                del fb.search  # back to the class's method
        return step_t, search_t, search_n

    dev = Device.cpu().autodiff()
    fb = fusion_of(dev)
    steps_t, search_t, search_n = run_ember(dev, fb)
    later_t, later_n = sum(search_t[1:]), sum(search_n[1:])
    t.add("ember cpu.autodiff (fused)", fmt_t(statistics.median(steps_t[1:])),
          f"{sum(search_n)} / {later_n}", fmt_t(later_t) if later_t else "0", "zero in steps 2..100",
          goal_cell(later_n == 0))
    # the peers only give the step time its context: fewer steps keep the run short
    flex_t, _, _ = run_ember(Device.flex().autodiff(), None, 30)
    t.add("ember flex.autodiff (numpy)", fmt_t(statistics.median(flex_t[1:])), "-", "-", "", "-")
    eager_t, _, _ = run_ember(Device.cpu(fusion=False).autodiff(), None, 30)
    t.add("ember cpu.autodiff (fusion off)", fmt_t(statistics.median(eager_t[1:])), "-", "-", "", "-")
    if torch is not None:
        tps = [torch.tensor(v, requires_grad=True) for v in init]
        xt, yt = torch.from_numpy(xv), torch.from_numpy(yv)
        tt = []
        for _ in range(30):
            t0 = time.perf_counter()
            w1, b1, w2, b2 = tps
            out = (xt @ w1 + b1).relu() @ w2 + b2
            loss = ((out - yt) * (out - yt)).mean()
            loss.backward()
            with torch.no_grad():
                for p in tps:
                    p.sub_(0.01 * p.grad)
                    p.grad = None
            loss.item()
            tt.append(time.perf_counter() - t0)
        t.add("torch eager", fmt_t(statistics.median(tt[1:])), "-", "-", "", "-")
    med = statistics.median(steps_t[1:])
    t.notes.append(f"step 1 (search + compile): {fmt_t(steps_t[0])}; peers' medians over steps 2..30; "
                   f"step time ratios (side / ember fused): "
                   + ", ".join(f"{name} {statistics.median(v[1:]) / med:.2f}x" for name, v in
                               (("flex", flex_t), ("fusion off", eager_t)) + ((("torch", tt),) if torch else ())))
    return t


# --------------------------------------------------------------------------- main
SECTIONS: dict[str, Callable[[argparse.Namespace], Table]] = {
    "register": lambda a: bench_register(a.quick),
    "chain": lambda a: bench_chain(a.quick, a.n),
    "matmul": lambda a: bench_matmul(a.quick),
    "mlp": lambda a: bench_mlp(a.quick),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--save", action="store_true", help="write bench/results/fusion_<date>[_<tag>].md")
    p.add_argument("--tag", default="", help="suffix of the results file name")
    p.add_argument("--quick", action="store_true", help="fewer repeats (noisy)")
    p.add_argument("--only", default="", help="comma-separated substrings of section names")
    p.add_argument("--n", type=int, default=N_CHAIN, help="elements of the chain section")
    p.add_argument("--warm-cache", action="store_true", help="use the configured kernel cache (default: a fresh one)")
    args = p.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    tables, failed = [], False
    t0 = time.perf_counter()
    for name, fn in SECTIONS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            table = fn(args)
        except Exception:  # noqa: BLE001 - one broken section must not hide the others
            traceback.print_exc()
            table = Table(f"{name}: ERROR", ["error"])
            table.add("see the traceback printed by the run")
            failed = True
        print(table.markdown())
        tables.append(table)
    elapsed = time.perf_counter() - t0
    info = machine()
    cmd = "python bench/bench_fusion.py " + " ".join(sys.argv[1:])
    doc = [f"# Fusion benchmarks ({datetime.date.today().isoformat()})", "",
           f"Run: `{cmd.strip()}` ({elapsed:.0f} s). Medians; ember and its peers timed in turn in one process. "
           f"Ratios: peer time / ember time unless a column says otherwise.", "", "## Machine", ""]
    doc += [f"- {k}: {v}" for k, v in info.items()]
    doc += ["", "## Results", ""] + [tb.markdown() for tb in tables]
    text = "\n".join(doc)
    print("\n".join(f"- {k}: {v}" for k, v in info.items()))
    print(f"\n({elapsed:.0f} s)")
    if args.save:
        tag = f"_{args.tag}" if args.tag else ""
        path = REPO / "bench" / "results" / f"fusion_{datetime.date.today().isoformat()}{tag}.md"
        path.write_text(text)
        print(f"saved {path.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
