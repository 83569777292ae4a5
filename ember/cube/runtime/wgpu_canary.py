"""The wgpu runtime's capability canary: whether f16 arithmetic and subgroup operations really work.

At client creation the adapter's features are checked and a canary shader using f16 arithmetic
and a subgroup reduction is compiled *and run*; its results (and the subgroup size it reports)
must be right. Only then do kernels see f16 buffers and plane operations (name
``wgpu<wgsl+f16+subgroups32>``); otherwise one warning is logged and kernels use plain WGSL
(``wgpu<wgsl>``, plane size 1). Both capabilities or neither: one canary checks both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CANARY_SOURCE", "Canary", "run_canary"]

#: the canary: f16 arithmetic and a subgroup reduction; unit u writes
#: [subgroupAdd(1), subgroup_size, f32(f16 product)]
CANARY_SOURCE = """
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn canary(@builtin(local_invocation_index) u: u32, @builtin(subgroup_size) sg: u32) {
    let h = f16(1.5) * f16(f32(u % 4u));
    out[3u * u] = subgroupAdd(1.0f);
    out[3u * u + 1u] = f32(sg);
    out[3u * u + 2u] = f32(h);
}
"""

_USAGE = None  # STORAGE | COPY_SRC | COPY_DST, filled on first use (wgpu imports lazily)
_MIN_BYTES = 16


class Canary:
    """Outcome of the capability check: what passed and why the rest did not."""

    __slots__ = ("f16", "subgroups", "plane_size", "why")

    def __init__(self, f16: bool, subgroups: bool, plane_size: int, why: str) -> None:
        self.f16, self.subgroups, self.plane_size, self.why = f16, subgroups, plane_size, why

    def __repr__(self) -> str:
        return f"Canary(f16={self.f16}, subgroups={self.subgroups}, plane_size={self.plane_size}, why={self.why!r})"


def run_canary(device: Any, features: set[str], source: str | None = None) -> Canary:
    """Check features, then compile and run the canary; both capabilities or neither."""
    missing = [f for f in ("shader-f16", "subgroup") if f not in features]
    if missing:
        return Canary(False, False, 1, f"adapter lacks {', '.join(missing)}")
    import wgpu

    src = CANARY_SOURCE if source is None else source
    try:
        mod = device.create_shader_module(code=src)
        pipe = device.create_compute_pipeline(layout="auto", compute={"module": mod, "entry_point": "canary"})
        buf = device.create_buffer(size=64 * 3 * 4, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        bg = device.create_bind_group(
            layout=pipe.get_bind_group_layout(0), entries=[{"binding": 0, "resource": {"buffer": buf}}]
        )
        enc = device.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(1)
        p.end()
        device.queue.submit([enc.finish()])
        got = np.frombuffer(device.queue.read_buffer(buf), np.float32).reshape(64, 3)
    except Exception as e:  # noqa: BLE001 - any failure of the canary means "not usable"
        return Canary(False, False, 1, f"canary shader failed: {str(e).strip().splitlines()[0][:300]}")
    sizes = set(got[:, 1].astype(int).tolist())
    want_h = (1.5 * (np.arange(64) % 4)).astype(np.float32)
    if not np.array_equal(got[:, 2], want_h):
        return Canary(False, False, 1, "canary f16 arithmetic gave wrong values")
    if len(sizes) != 1:
        return Canary(False, False, 1, f"subgroup size varies within a workgroup: {sorted(sizes)}")
    size = sizes.pop()
    if size < 1 or 64 % size or not np.all(got[:, 0] == size):
        return Canary(False, False, 1, f"canary subgroupAdd gave {sorted(set(got[:, 0].tolist()))}, size {size}")
    return Canary(True, True, size, "")
