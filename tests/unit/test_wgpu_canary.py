"""The capability canary, both outcomes: f16 + subgroups used only when the canary compiles and
runs right; otherwise one warning, plain WGSL (plane size 1), the same results; ``require=``
turns the fallback into a typed error."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

import ember
from ember import Device
from ember.device import DeviceKind
from ember.errors import DeviceUnavailableError, UnsupportedDTypeError

pytest.importorskip("wgpu")

from ember.backends import dispatch  # noqa: E402
from ember.cube.launch import cube_kernel as launch  # noqa: E402
from ember.cube.runtime import client as client_mod  # noqa: E402
from ember.cube.runtime import wgpu as wgpu_rt  # noqa: E402
from ember.cube.runtime import wgpu_adapters as adapters  # noqa: E402

pytestmark = pytest.mark.skipif(
    not any(a.kind == "Cpu" and a.api == "Vulkan" for a in adapters.enumerate_adapters()),
    reason="no CPU Vulkan adapter (apt install mesa-vulkan-drivers)",
)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Fresh wgpu clients for this test (the process-wide ones come back afterwards)."""
    monkeypatch.setattr(wgpu_rt, "_clients", {})
    monkeypatch.setattr(client_mod, "_clients", {k: v for k, v in client_mod._clients.items() if k[0] != "wgpu"})
    monkeypatch.setattr(dispatch, "_stacks", {k: v for k, v in dispatch._stacks.items() if k.type != "wgpu"})
    monkeypatch.setattr(launch, "_clients", {})
    return monkeypatch


def _reduce_and_scan_agree(d: Device) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 300)).astype(np.float32)
    t = ember.tensor(x, device=d)
    np.testing.assert_allclose(t.sum(dim=1).numpy(), x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(t.amax(dim=0).numpy(), x.max(0))
    np.testing.assert_allclose(t.softmax(dim=1).numpy().sum(1), np.ones(37), rtol=1e-5)


def test_canary_passes_on_lavapipe(fresh: Any) -> None:
    d = Device.wgpu(DeviceKind.cpu())
    c = launch._client_of(d)
    canary = c.server.canary
    if not canary.f16:
        pytest.skip(f"this adapter fails the canary: {canary.why}")
    assert c.name == "wgpu<wgsl+f16+subgroups>"
    assert ember.backend_name(d) == "dispatch<fusion<cube<wgpu<wgsl+f16+subgroups>>>>"
    assert c.server.compiler.capabilities.plane_size == canary.plane_size > 1
    assert c.supports(ember.float16)
    h = ember.tensor([1.5, 2.25, -3.0], dtype=ember.float16, device=d)
    np.testing.assert_array_equal((h * 2).numpy(), np.array([3.0, 4.5, -6.0], np.float16))
    _reduce_and_scan_agree(d)
    Device.wgpu(DeviceKind.cpu(), require=("f16", "subgroups")).init()  # satisfied: no error


def test_forced_canary_failure_falls_back_to_plain_wgsl(fresh: Any, caplog: pytest.LogCaptureFixture) -> None:
    fresh.setattr(wgpu_rt, "canary_override", "this is not WGSL")
    with caplog.at_level(logging.WARNING, logger="ember.wgpu"):
        d = Device.wgpu(DeviceKind.cpu())
        c = launch._client_of(d)
        Device.vulkan(DeviceKind.cpu()).init()  # same adapter: no second canary, no second warning
    warnings = [r for r in caplog.records if r.name == "ember.wgpu" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "canary shader failed" in warnings[0].getMessage()
    assert c.name == "wgpu<wgsl>" and c.device_id.endswith("/wgpu<wgsl>")
    assert ember.backend_name(d) == "dispatch<fusion<cube<wgpu<wgsl>>>>"
    assert c.server.compiler.capabilities.plane_size == 1
    assert not c.supports(ember.float16)
    with pytest.raises(UnsupportedDTypeError, match="float16"):
        ember.tensor([1.0], dtype=ember.float16, device=d).numpy()
    _reduce_and_scan_agree(d)  # plane ops at plane size 1, no subgroup builtins
    src = next(iter(c.server.pipelines.values())).source.source
    assert "subgroup" not in src.replace("em_", "") and "enable f16" not in src


def test_require_raises_when_the_canary_fails(fresh: Any) -> None:
    fresh.setattr(wgpu_rt, "canary_override", "this is not WGSL")
    with pytest.raises(DeviceUnavailableError) as ei:
        Device.vulkan(DeviceKind.cpu(), require=("f16",)).init()
    msg = str(ei.value)
    assert "cannot provide f16" in msg and "canary shader failed" in msg and "llvmpipe" in msg
    with pytest.raises(DeviceUnavailableError, match="cannot provide subgroups"):
        Device.wgpu_options().device_kind(DeviceKind.cpu()).require("subgroups").init()
    Device.wgpu(DeviceKind.cpu()).init()  # Auto without require: the fallback is allowed


def test_canary_checks_features_before_compiling() -> None:
    out = wgpu_rt.run_canary(device=None, features={"subgroup"})
    assert (out.f16, out.subgroups, out.plane_size) == (False, False, 1)
    assert "shader-f16" in out.why
