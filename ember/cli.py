"""The ``ember`` command: ``info``, ``config``, ``cache``, ``bench``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from . import Device, backend_name, tensor
from .errors import EmberError

_DEVICES = (
    ("flex", Device.flex),
    ("cpu", Device.cpu),
    ("cuda", Device.cuda),
    ("wgpu", Device.wgpu),
)


def _wgpu_adapters() -> list[str]:
    """One line per wgpu adapter (name, type, API), or why there are none."""
    try:
        from .cube.runtime.wgpu_adapters import enumerate_adapters
    except ImportError as e:  # pragma: no cover - the module ships with ember
        return [f"unavailable: {e}"]
    try:
        found = enumerate_adapters()
    except ModuleNotFoundError:
        return ["unavailable: the wgpu package is not installed (pip install 'ember[wgpu]')"]
    except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
        return [f"unavailable: {type(e).__name__}: {e}"]
    return [f"[{a.ordinal}] {a.describe()}" for a in found] or ["none found"]


def _cuda_devices() -> list[str]:
    """One line per CUDA device (name, compute capability, memory), or why there are none."""
    try:
        from .cube.runtime.cuda import devices
    except ModuleNotFoundError:
        return ["unavailable: cuda-bindings is not installed (pip install 'ember[cuda]')"]
    try:
        found = devices()
    except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
        return [f"unavailable: {str(e).splitlines()[0]}"]
    return [f"[{d.index}] {d.describe()} ({d.arch})" for d in found] or ["none found"]


def _matmul_2x2(dev: Device) -> list[float]:
    a = tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    b = tensor([[5.0, 6.0], [7.0, 8.0]], device=dev)
    return (a @ b).reshape(4).tolist()


def cmd_info(args: argparse.Namespace) -> int:
    """Every device of this machine and its .autodiff() form: repr, backend name, and the
    seed's 2x2 matmul (expected [19.0, 22.0, 43.0, 50.0])."""
    import platform

    import ember

    print(f"ember {ember.__version__} on Python {platform.python_version()} ({platform.machine()})")
    print("wgpu adapters:")
    for line in _wgpu_adapters():
        print(f"  {line}")
    print("cuda devices:")
    for line in _cuda_devices():
        print(f"  {line}")
    failures = 0
    for label, make in _DEVICES:
        base = make()
        for lab, dev in ((label, base), (f"{label}.autodiff()", base.autodiff())):
            print(f"{lab:18} {dev!r}")
            try:
                dev.init()
            except EmberError as e:
                print(f"{'':18} unavailable: {str(e).splitlines()[0]}")
                break
            print(f"{'':18} name = {backend_name(dev)}")
            t0 = time.perf_counter()
            try:
                result = _matmul_2x2(dev)
            except Exception as e:  # report and keep going: info is a diagnostic
                failures += 1
                print(f"{'':18} matmul failed: {type(e).__name__}: {e}")
                continue
            ms = (time.perf_counter() - t0) * 1e3
            print(f"{'':18} result = {result}  (first op {ms:.3f} ms)")
    return 1 if failures else 0


def cmd_config(args: argparse.Namespace) -> int:
    from .environment.commands import config_main

    return config_main(args.rest)


def cmd_cache(args: argparse.Namespace) -> int:
    from .environment.commands import cache_main

    return cache_main(args.rest)


def cmd_compile_check(args: argparse.Namespace) -> int:
    from .compile_check import main as check_main

    return check_main(args.rest)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ember", description="ember tensor framework")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("info", help="devices, backend names, and a 2x2 matmul on each").set_defaults(fn=cmd_info)
    c = sub.add_parser("config", help="effective configuration and where each value came from")
    c.add_argument("rest", nargs=argparse.REMAINDER)
    c.set_defaults(fn=cmd_config)
    c = sub.add_parser("cache", help="the persistent cache: list | show NAMESPACE | clear [NAMESPACE]")
    c.add_argument("rest", nargs=argparse.REMAINDER)
    c.set_defaults(fn=cmd_cache)
    c = sub.add_parser(
        "compile-check", help="render every kernel for a GPU target and compile it (cuda --arch sm_90)"
    )
    c.add_argument("rest", nargs=argparse.REMAINDER)
    c.set_defaults(fn=cmd_compile_check)
    args = p.parse_args(argv)
    if not getattr(args, "fn", None):
        p.print_help()
        return 2
    try:
        return int(args.fn(args) or 0)
    except BrokenPipeError:  # `ember config | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
