"""PyTorch's OpInfo samples through ember (a bounded run for CI; ``python -m tests.parity.report``
runs every sample and writes the counts).

For each mapped OpInfo entry, the first ``SAMPLES`` float32 samples run on Flex and on the
Cube CPU device, both with autodiff, forward and gradients (``opinfo_map``). A wrong result
fails the test unless ``KNOWN_WRONG`` lists the entry with its reason; samples that raise are
counted (printed) but do not fail: they are the report's business.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch.testing._internal imports it

from devices import device_cases  # noqa: E402

from parity.opinfo_map import GRAD_TOL, compare, load_op_db, run_entry  # noqa: E402

#: samples per entry in CI (the report runs them all): 3 on Flex; 1 on the Cube CPU device,
#: whose first run compiles a kernel for every new op sequence (minutes for 3 samples)
SAMPLES = {"flex": 3, "cpu": 1}
if os.environ.get("EMBER_OPINFO_SAMPLES"):
    SAMPLES = dict.fromkeys(SAMPLES, int(os.environ["EMBER_OPINFO_SAMPLES"]))

#: entries whose wrong results are known, with the reason (each is a documented difference or
#: an open bug); the test fails on any other wrong result
KNOWN_WRONG: dict[str, str] = {}

_DEVICES = {"flex.autodiff": "flex", "cpu.autodiff": "cpu"}


@pytest.fixture(scope="module")
def op_db():
    return load_op_db()


def _device_params() -> list:
    out = []
    for c in device_cases():
        if c.name in _DEVICES:
            marks = [pytest.mark.skip(reason=c.unavailable)] if c.unavailable else []
            out.append(pytest.param(c.device, _DEVICES[c.name], id=_DEVICES[c.name], marks=marks))
    return out


@pytest.mark.parametrize(("dev", "name"), _device_params())
def test_opinfo_samples(op_db, dev, name):
    results = [run_entry(op, dev, SAMPLES[name]) for op in op_db]
    mapped = [r for r in results if r.mapped]
    counts: dict[str, dict[str, int]] = {"forward": {}, "grad": {}}
    wrong = []
    for r in mapped:
        for part in ("forward", "grad"):
            for k, v in getattr(r, part).items():
                counts[part][k] = counts[part].get(k, 0) + v
        bad = [f for f in r.failures if ": wrong: " in f]
        if bad and r.entry not in KNOWN_WRONG and r.entry.split(".")[0] not in KNOWN_WRONG:
            wrong.append(f"{r.entry}: {bad[0]}")
    print(f"\n{dev}: {len(mapped)} entries mapped; forward {counts['forward']}; grad {counts['grad']}")
    assert len(mapped) >= 250, f"only {len(mapped)} OpInfo entries map to ember"
    assert not wrong, "wrong results:\n" + "\n".join(wrong)


def test_compare_allows_torchs_own_float32_noise():
    import numpy as np
    import torch

    import ember

    # layer_norm over one element: exact gradient 0, torch's float32 one 1.2e-4 (its rounding)
    t32 = torch.tensor([1.220703125e-4, 1.0])
    t64 = torch.tensor([4.5e-13, 1.0], dtype=torch.float64)
    e = ember.tensor(np.array([0.0, 1.0], np.float32))
    assert compare(e, t32, GRAD_TOL) is not None  # the fixed atol 1e-4 misses
    assert compare(e, t32, GRAD_TOL, t64) is None
    assert compare([e], [t32], GRAD_TOL, [t64]) is None  # structures pass their float64 parts on
    # a real difference stays one: elsewhere, or beyond NOISE times torch's own error
    assert compare(ember.tensor(np.array([0.0, 1.01], np.float32)), t32, GRAD_TOL, t64) is not None
    assert compare(ember.tensor(np.array([-1e-3, 1.0], np.float32)), t32, GRAD_TOL, t64) is not None


def test_random_entries_check_a_property_that_can_fail():
    from types import SimpleNamespace

    import numpy as np
    import torch

    import ember
    from parity.opinfo_map import FORWARD_TOL, RANDOM

    w = torch.tensor([[1.0, 0.0, 2.0, 3.0]])
    check = RANDOM["multinomial"](SimpleNamespace(input=w, args=(2,), kwargs={}))
    ref = check(torch.multinomial(w, 2))
    assert compare(check(ember.tensor(np.array([[0, 3]]))), ref, FORWARD_TOL) is None
    assert compare(check(ember.tensor(np.array([[3, 3]]))), ref, FORWARD_TOL) is not None  # repeated
    assert compare(check(ember.tensor(np.array([[1, 3]]))), ref, FORWARD_TOL) is not None  # zero weight
    assert compare(check(ember.tensor(np.array([[0, 4]]))), ref, FORWARD_TOL) is not None  # out of range
    p = torch.tensor([0.0, 0.5, 1.0])
    check = RANDOM["bernoulli"](SimpleNamespace(input=p, args=(), kwargs={}))
    ref = check(torch.bernoulli(p))
    assert compare(check(ember.tensor([0.0, 1.0, 1.0])), ref, FORWARD_TOL) is None
    assert compare(check(ember.tensor([1.0, 1.0, 1.0])), ref, FORWARD_TOL) is not None  # p = 0 gave 1
    assert compare(check(ember.tensor([0.0, 0.5, 1.0])), ref, FORWARD_TOL) is not None  # not 0/1
    assert compare(check(ember.tensor([0.0, 1.0, 1.0], dtype=ember.float64)), ref, FORWARD_TOL) is not None
