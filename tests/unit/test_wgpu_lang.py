"""The kernel-language suite of the CPU runtime (``test_cube_lang.py``), run again on WGSL.

Every construct of the language -- arithmetic per dtype, math, casts, control flow lowered
without ``goto``, inlined functions with early returns, metadata and strided views, 3-D
positions, lines of 2..16 lanes, shared memory and barriers, plane operations, atomics, local
arrays, aliasing -- runs on ``Device.wgpu(DeviceKind.cpu())`` (lavapipe) with the same inputs,
poisoned outputs and numpy references. A separate copy of the module is loaded with its ``DEV``
pointed at the wgpu device, so the CPU run of the same file is untouched. Cases on dtypes WGSL
cannot hold (float64, int64) are skipped through ``UnsupportedDTypeError``; the few cases that
check CPU-only facts are listed in ``NOT_APPLICABLE`` with the reason.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ember import Device
from ember.device import DeviceKind
from ember.errors import UnsupportedDTypeError

pytest.importorskip("wgpu")

from ember.cube.runtime import wgpu_adapters as _adapters  # noqa: E402

_HAVE = any(a.kind == "Cpu" and a.api == "Vulkan" for a in _adapters.enumerate_adapters())

#: test name -> why it does not apply to the WGSL target
NOT_APPLICABLE = {
    "test_axpy_example_exactly_as_in_the_issue": "builds its own Device.cpu()",
    # the next three assert the CPU target's plane size (32); test_wgpu_kernels.py checks the
    # same plane semantics against the plane size the canary measured
    "test_position_builtins_in_3d": "asserts PLANE_DIM == 32",
    "test_plane_ops": "asserts planes of 32 units",
    "test_plane_op_under_divergent_condition": "asserts planes of 32 units",
}


def _load_copy():
    path = Path(__file__).with_name("test_cube_lang.py")
    spec = importlib.util.spec_from_file_location("wgpu_copy_of_test_cube_lang", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    mod.DEV = Device.wgpu(DeviceKind.cpu(), fusion=False)
    return mod


def _wrap(fn):
    def run(*args, **kwargs):
        if not _HAVE:
            pytest.skip("no CPU Vulkan adapter (apt install mesa-vulkan-drivers)")
        why = NOT_APPLICABLE.get(fn.__name__)
        if why:
            pytest.skip(why)
        try:
            fn(*args, **kwargs)
        except UnsupportedDTypeError as e:
            pytest.skip(f"WGSL cannot hold the dtype: {str(e).splitlines()[0]}")

    run.__name__ = fn.__name__
    run.__signature__ = __import__("inspect").signature(fn)
    run.pytestmark = getattr(fn, "pytestmark", [])
    return run


_copy = _load_copy()
for _name, _fn in list(vars(_copy).items()):
    if _name.startswith("test_") and callable(_fn):
        globals()[_name] = _wrap(_fn)
