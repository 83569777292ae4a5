"""Backend names and the spans each layer opens (DESIGN.md section 3)."""

from __future__ import annotations

import threading

import ember
from ember import tracing


def _layers(name: str) -> list[str]:
    """``dispatch<autodiff<flex>>`` -> ``["dispatch", "autodiff", "flex"]``."""
    return name.replace(">", "").split("<")


def test_backend_name(device: ember.Device) -> None:
    name = ember.backend_name(device)
    assert name.startswith("dispatch<") and name.endswith(">")
    inner = name[len("dispatch<"):-1]
    if device.is_autodiff:
        assert inner.startswith("autodiff<")
        assert ember.backend_name(device.inner()) == f"dispatch<{inner[len('autodiff<'):-1]}>"
    else:
        assert ember.backend_name(device.autodiff()) == f"dispatch<autodiff<{inner}>>"
    if device.type == "flex":
        assert name == ("dispatch<autodiff<flex>>" if device.is_autodiff else "dispatch<flex>")


def test_read_opens_nested_into_data_spans(device: ember.Device) -> None:
    t = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    u = t @ t
    with tracing.capture() as spans:
        values = u.numpy()
    assert values.tolist() == [[7.0, 10.0], [15.0, 22.0]]
    me = threading.current_thread().name  # service threads of a device may add their own spans
    reads = sorted((s for s in spans if s.name == "into_data" and s.thread == me),
                   key=lambda s: len(s.parents))
    assert reads, f"no into_data span: {spans}"
    chain = [s.fields.get("layer") for s in reads]
    depths = [len(s.parents) for s in reads]
    assert depths == list(range(depths[0], depths[0] + len(reads))), f"not nested: {reads}"
    assert all(p == "into_data" for s in reads for p in s.parents[depths[0]:]), reads
    expected = ["tensor", *_layers(ember.backend_name(device))]
    if device.type == "flex":
        assert chain == expected, f"layers {chain}, expected {expected}"
    else:  # later layers may fold a runtime into its backend's span; the order must hold
        assert chain[:2] == ["tensor", "dispatch"] and ("autodiff" in chain) == device.is_autodiff, chain
        assert [c for c in expected if c in chain] == chain, f"layers {chain} out of order vs {expected}"
    for s in reads:
        assert s.thread and s.duration >= 0 and s.start > 0


def test_from_data_spans(device: ember.Device) -> None:
    with tracing.capture() as spans:
        ember.tensor([1.0, 2.0], device=device)
    layers = [s.fields.get("layer") for s in spans if s.name == "from_data"]
    assert "dispatch" in layers and ("autodiff" in layers) == device.is_autodiff, layers


def test_no_spans_outside_capture(device: ember.Device) -> None:
    with tracing.capture() as spans:
        pass
    ember.tensor([1.0], device=device).numpy()
    assert spans == []
