"""``import ember`` stays light (issue 7: <= 0.3 s on the H200 host, where numpy alone takes
~0.24 s): no runtime, compiler or ml_dtypes module loads until it is used."""

from __future__ import annotations

import subprocess
import sys

import numpy as np


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_loads_no_runtime_compiler_or_ml_dtypes():
    code = (
        "import sys, ember\n"
        "heavy = [m for m in sys.modules if m.startswith(('ember.cube', 'ml_dtypes', 'ember.backends.cube',"
        " 'ember.backends.fusion'))]\n"
        "print(heavy)"
    )
    assert _run(code) == "[]"


def test_inspect_fusion_loads_with_its_first_use():
    code = (
        "import sys, ember\n"
        "before = 'ember.backends.fusion.inspect' in sys.modules\n"
        "from ember import inspect_fusion\n"
        "from ember.backends.fusion.inspect import inspect_fusion as real\n"
        "print(before, inspect_fusion is real is ember.inspect_fusion, 'inspect_fusion' in ember.__all__)"
    )
    assert _run(code) == "False True True"


def test_bfloat16_resolves_its_numpy_dtype_on_first_use():
    code = (
        "import sys, numpy as np, ember\n"
        "b = ember.bfloat16\n"
        "print(b.itemsize, b.compute, 'ml_dtypes' in sys.modules)\n"
        "import ml_dtypes\n"
        "print(b.np == np.dtype(ml_dtypes.bfloat16), ember.dtype.from_numpy_dtype(np.dtype(ml_dtypes.bfloat16)) is b,"
        " ember.dtype.as_dtype(ml_dtypes.bfloat16) is b)"
    )
    assert _run(code).splitlines() == ["2 float32 False", "True True True"]


def test_bfloat16_tensor_round_trip():
    import ember

    x = np.array([1.5, -2.25, 3.0], np.float32)
    got = ember.tensor(x).to(ember.bfloat16).numpy()
    assert got.dtype.name == "bfloat16" and np.array_equal(got.astype(np.float32), x)
