"""wgpu devices: the seed's DeviceKind rules, graphics APIs, typed errors on the calling thread,
``wgpu_options().init()``, the default-device override, existing devices, and identity.

Selection rules are checked twice: against a fake adapter list (every rule, on any machine) and
against the adapters of this machine (lavapipe in CI: one ``Cpu`` adapter per API)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import ember
from ember import Device
from ember.device import DeviceKind
from ember.errors import DeviceUnavailableError

wgpu = pytest.importorskip("wgpu")

from ember.cube.runtime import wgpu_adapters as adapters  # noqa: E402


def _fake(ordinal: int, name: str, kind: str, api: str) -> adapters.AdapterEntry:
    return adapters.AdapterEntry(ordinal, name, kind, api, 0x10DE, ordinal, "fake driver", None)


@pytest.fixture
def fake_adapters(monkeypatch: pytest.MonkeyPatch) -> list[adapters.AdapterEntry]:
    fake = [
        _fake(0, "Soft", "Cpu", "Vulkan"),
        _fake(1, "Big GPU A", "DiscreteGpu", "Vulkan"),
        _fake(2, "Big GPU B", "DiscreteGpu", "Vulkan"),
        _fake(3, "Laptop iGPU", "IntegratedGpu", "Gl"),
        _fake(4, "Big GPU A (GL)", "DiscreteGpu", "Gl"),
    ]
    monkeypatch.setattr(adapters, "enumerate_adapters", lambda refresh=False: list(fake))
    monkeypatch.delenv("EMBER_WGPU_DEFAULT_DEVICE", raising=False)
    return fake


# ------------------------------------------------------------------------------ rules (fake adapters)


def test_kind_takes_the_ith_adapter_of_exactly_that_type(fake_adapters: Any) -> None:
    assert adapters.select_adapter(DeviceKind.discrete_gpu(0), "Vulkan").name == "Big GPU A"
    assert adapters.select_adapter(DeviceKind.discrete_gpu(1), "Vulkan").name == "Big GPU B"
    assert adapters.select_adapter(DeviceKind.cpu(), "Vulkan").name == "Soft"
    assert adapters.select_adapter(DeviceKind.discrete_gpu(0), "Gl").name == "Big GPU A (GL)"


def test_default_device_prefers_high_performance_within_the_api(fake_adapters: Any) -> None:
    assert adapters.select_adapter(DeviceKind.default(), "Vulkan").name == "Big GPU A"
    assert adapters.select_adapter(DeviceKind.default(), "Gl").name == "Big GPU A (GL)"


def test_auto_tries_vulkan_then_opengl(fake_adapters: Any) -> None:
    # no integrated GPU under Vulkan: Auto takes the OpenGL one, a fixed Vulkan request fails
    assert adapters.select_adapter(DeviceKind.integrated_gpu(0), "Auto").api == "Gl"
    assert adapters.select_adapter(DeviceKind.discrete_gpu(0), "Auto").api == "Vulkan"
    with pytest.raises(DeviceUnavailableError, match="No Integrated GPU device number 0 found"):
        adapters.select_adapter(DeviceKind.integrated_gpu(0), "Vulkan")


def test_missing_kind_lists_every_adapter(fake_adapters: Any) -> None:
    with pytest.raises(DeviceUnavailableError) as ei:
        adapters.select_adapter(DeviceKind.virtual_gpu(0), "Auto")
    msg = str(ei.value)
    assert "No Virtual GPU device number 0 found" in msg and "tried Vulkan, Gl" in msg
    assert len(ei.value.adapters) == len(fake_adapters)
    for a in fake_adapters:
        assert f"{a.name} (type {a.kind}, API {a.api}" in msg
    with pytest.raises(DeviceUnavailableError, match="Discrete GPU device number 2"):
        adapters.select_adapter(DeviceKind.discrete_gpu(2), "Vulkan")


def test_default_device_override(fake_adapters: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_WGPU_DEFAULT_DEVICE", "Cpu")
    assert adapters.select_adapter(DeviceKind.default(), "Vulkan").name == "Soft"
    monkeypatch.setenv("EMBER_WGPU_DEFAULT_DEVICE", "DiscreteGpu(1)")
    assert adapters.select_adapter(DeviceKind.default(), "Vulkan").name == "Big GPU B"
    monkeypatch.setenv("EMBER_WGPU_DEFAULT_DEVICE", "IntegratedGpu(1)")
    with pytest.raises(DeviceUnavailableError, match=r"EMBER_WGPU_DEFAULT_DEVICE=IntegratedGpu\(1\)"):
        adapters.select_adapter(DeviceKind.default(), "Auto")
    # an explicit kind is not overridden
    assert adapters.select_adapter(DeviceKind.discrete_gpu(0), "Vulkan").name == "Big GPU A"


@pytest.mark.parametrize(
    "text,kind,index",
    [("Cpu", "Cpu", 0), ("IntegratedGpu(1)", "IntegratedGpu", 1), ("discretegpu", "DiscreteGpu", 0),
     (" VirtualGpu( 2 ) ", "VirtualGpu", 2), ("DefaultDevice", "DefaultDevice", 0)],
)
def test_parse_kind(text: str, kind: str, index: int) -> None:
    k = adapters.parse_kind(text)
    assert (k.kind, k.index) == (kind, index)


@pytest.mark.parametrize("text", ["Gpu", "IntegratedGpu(x)", "", "Cpu(1"])
def test_parse_kind_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="cannot read a device kind"):
        adapters.parse_kind(text)


def test_device_parse_names_kinds() -> None:
    assert Device.parse("wgpu:cpu") == Device.wgpu(DeviceKind.cpu())
    assert Device.parse("vulkan:IntegratedGpu(1)") == Device.vulkan(DeviceKind.integrated_gpu(1))
    assert Device.parse("opengl") == Device.opengl()
    assert Device.wgpu(DeviceKind.cpu()) != Device.vulkan(DeviceKind.cpu())


def test_options_validate() -> None:
    with pytest.raises(ValueError, match="graphics_api"):
        Device.wgpu_options().graphics_api("Metal")
    with pytest.raises(ValueError, match="require"):
        Device.wgpu(require=("bf16",))
    assert Device.wgpu_options().graphics_api("opengl").device_kind(DeviceKind.cpu()).device() == Device.opengl(
        DeviceKind.cpu()
    )


# ------------------------------------------------------------------------------ this machine's adapters


def _has(kind: str, api: str) -> bool:
    return any(a.kind == kind and a.api == api for a in adapters.enumerate_adapters())


needs_cpu_vulkan = pytest.mark.skipif(
    not _has("Cpu", "Vulkan"), reason="no CPU Vulkan adapter (apt install mesa-vulkan-drivers)"
)


@needs_cpu_vulkan
def test_discrete_gpu_request_raises_typed_error_listing_llvmpipe() -> None:
    if _has("DiscreteGpu", "Vulkan") or _has("DiscreteGpu", "Gl"):
        pytest.skip("this machine has a discrete GPU")
    for make in (
        lambda: Device.wgpu(DeviceKind.discrete_gpu()).init(),
        lambda: Device.wgpu_options().device_kind(DeviceKind.discrete_gpu()).init(),
        lambda: ember.zeros(2, device=Device.vulkan(DeviceKind.discrete_gpu(), fusion=False)).numpy(),
    ):
        with pytest.raises(DeviceUnavailableError) as ei:
            make()
        msg = str(ei.value)
        assert "No Discrete GPU device number 0 found" in msg
        assert "llvmpipe" in msg and "type Cpu, API Vulkan" in msg


@needs_cpu_vulkan
def test_error_is_raised_on_the_calling_thread() -> None:
    if _has("IntegratedGpu", "Vulkan") or _has("IntegratedGpu", "Gl"):
        pytest.skip("this machine has an integrated GPU")
    seen: dict[str, Any] = {}

    def work() -> None:
        try:
            Device.wgpu(DeviceKind.integrated_gpu(1)).init()
        except DeviceUnavailableError as e:
            seen["error"], seen["thread"] = e, threading.current_thread().name

    t = threading.Thread(target=work, name="user-thread")
    t.start()
    t.join()
    assert seen["thread"] == "user-thread"
    assert "llvmpipe" in str(seen["error"])


@needs_cpu_vulkan
def test_two_spellings_share_one_client_and_device_id() -> None:
    a, b = Device.wgpu(DeviceKind.cpu()), Device.vulkan(DeviceKind.cpu())
    assert a != b and repr(a) != repr(b)
    ca = ember.cube.launch._client_of(a)
    cb = ember.cube.launch._client_of(b)
    assert ca is cb
    assert ca.device_id == cb.device_id and "llvmpipe" in ca.device_id
    assert ca.device_id.endswith(f"/wgpu<{ca.server.compiler.target_name}>")
    from ember.autotune import device_id

    assert device_id(ca) == device_id(cb) == ca.device_id
    x = ember.tensor([1.0, 2.0], device=a)
    y = ember.tensor([3.0, 4.0], device=b)
    np.testing.assert_array_equal((x * 2).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal((y * 2).numpy(), [6.0, 8.0])


@needs_cpu_vulkan
def test_options_init_is_eager_and_returns_the_device() -> None:
    d = Device.wgpu_options().device_kind(DeviceKind.cpu()).graphics_api("Vulkan").init()
    assert d == Device.vulkan(DeviceKind.cpu())
    assert ember.backend_name(d).startswith("dispatch<fusion<cube<wgpu<wgsl")
    np.testing.assert_array_equal(ember.tensor([1.0, 2.0], device=d).sum().item(), 3.0)


@pytest.mark.skipif(not _has("Cpu", "Gl"), reason="no CPU OpenGL adapter")
def test_opengl_adapter_is_a_distinct_device() -> None:
    d = Device.opengl(DeviceKind.cpu(), fusion=False)
    try:
        d.init()
    except DeviceUnavailableError as e:  # some GL drivers refuse compute: that must be typed
        assert "llvmpipe" in str(e)
        return
    c = ember.cube.launch._client_of(d)
    assert "-gl-" in c.device_id
    assert c is not ember.cube.launch._client_of(Device.vulkan(DeviceKind.cpu(), fusion=False))
    np.testing.assert_array_equal((ember.tensor([1.0, 2.0], device=d) + 1).numpy(), [2.0, 3.0])


@needs_cpu_vulkan
def test_existing_device_runs_kernels() -> None:
    a = next(e for e in adapters.enumerate_adapters() if e.kind == "Cpu" and e.api == "Vulkan")
    gpu_device = a.adapter.request_device_sync()
    d = Device.wgpu_options().setup(gpu_device).fusion(False).init()
    assert d.spec[2][0].kind == "Existing"
    np.testing.assert_array_equal((ember.tensor([1.0, 2.0], device=d) * 3).numpy(), [3.0, 6.0])
    with pytest.raises(DeviceUnavailableError, match="no wgpu device registered under id 999"):
        Device.wgpu(DeviceKind.existing(999)).init()
