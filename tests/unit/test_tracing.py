"""Tracing core: span records, nesting per layer, cross-thread capture, zero cost when idle."""

from __future__ import annotations

import json
import threading

import ember
from ember import Device, tracing


def test_span_records_fields_and_parents() -> None:
    with tracing.capture() as spans:
        with tracing.span("outer", layer="a"):
            with tracing.span("inner", kernel="k") as s:
                s.record(cached=True)
    assert [s.name for s in spans] == ["inner", "outer"]
    inner = spans[0]
    assert inner.parents == ("outer",)
    assert inner.fields == {"kernel": "k", "cached": True}
    assert inner.thread == threading.current_thread().name
    assert inner.duration >= 0 and inner.start > 0


def test_no_capture_means_no_records_and_shared_noop() -> None:
    assert not tracing.active
    assert tracing.span("x") is tracing.span("y")  # one shared no-op object


def test_capture_collects_other_threads() -> None:
    def work() -> None:
        with tracing.span("launch", kernel="from-thread"):
            pass

    with tracing.capture() as spans:
        th = threading.Thread(target=work, name="DSD-test-0")
        th.start()
        th.join()
    assert [(s.name, s.thread) for s in spans] == [("launch", "DSD-test-0")]


def test_read_nests_one_span_per_layer_like_the_seed() -> None:
    dev = Device.flex().autodiff()
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    with tracing.capture() as spans:
        b = ember.tensor([[5.0, 6.0], [7.0, 8.0]], device=dev)
        (a @ b).numpy()
    from_data = [s for s in spans if s.name == "from_data"]
    into_data = [s for s in spans if s.name == "into_data"]
    assert [s.fields["layer"] for s in from_data] == ["flex", "autodiff", "dispatch", "tensor"]
    assert [s.fields["layer"] for s in into_data] == ["flex", "autodiff", "dispatch", "tensor"]
    assert into_data[0].parents == ("into_data",) * 3
    # the matmul itself runs between the two reads and opens no span on flex
    assert {s.name for s in spans} == {"from_data", "into_data"}


def test_profile_writes_chrome_trace(tmp_path) -> None:
    path = tmp_path / "trace.json"
    with ember.profile(path):
        ember.tensor([1.0, 2.0]).numpy()
    data = json.loads(path.read_text())
    names = [e["name"] for e in data["traceEvents"] if e["ph"] == "X"]
    assert "into_data" in names and "from_data" in names
