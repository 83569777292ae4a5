"""One launch contract for every server (``ember/cube/runtime/contract.py``): the cpu, cuda and
wgpu servers take ``launch(kernel, tensors, info, count)`` with the same parameter names; the
replayable ones (cpu, cuda) ``launch_ptrs`` and ``replayer`` too; and on the CPU the three
routes into a kernel compute the same values."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
from ember import Device, cube
from ember.cube.launch import CubeCount, CubeDim
from ember.cube.launch.args import _array_of
from ember.cube.launch.cube_kernel import _client_of
from ember.cube.runtime.contract import LaunchServer, ReplayServer
from ember.cube.runtime.cpu import CpuServer
from ember.cube.runtime.cuda_server import CudaServer

DEV = Device.cpu(fusion=False)


def _servers() -> list[type]:
    out: list[type] = [CpuServer, CudaServer]
    try:
        from ember.cube.runtime.wgpu import WgpuServer
    except ImportError:  # wgpu-py not installed: the wgpu server cannot be imported
        return out
    return [*out, WgpuServer]


def _params(fn: object) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]  # type: ignore[arg-type]


def _methods(proto: type) -> list[str]:
    return [n for n, v in vars(proto).items() if callable(v) and not n.startswith("_")]


@pytest.mark.parametrize("server", _servers(), ids=lambda c: c.__name__)
def test_every_server_takes_a_launch_the_same_way(server: type) -> None:
    for name in _methods(LaunchServer):
        assert hasattr(server, name), f"{server.__name__} lacks {name}"
        assert _params(getattr(server, name)) == _params(getattr(LaunchServer, name)), name


@pytest.mark.parametrize("server", [CpuServer, CudaServer], ids=lambda c: c.__name__)
def test_replayable_servers_take_addresses_and_prepare_replays(server: type) -> None:
    for name in _methods(ReplayServer):
        assert _params(getattr(server, name)) == _params(getattr(ReplayServer, name)), name


def test_a_cpu_server_instance_is_a_replay_server() -> None:
    server = _client_of(DEV).server
    assert isinstance(server, ReplayServer) and isinstance(server, LaunchServer)


@cube.kernel
def axpb(x: cube.Array[cube.Float], out: cube.Array[cube.Float], a: cube.Float, b: cube.Float):
    i = cube.ABSOLUTE_POS
    if i < out.len():
        out[i] = x[i] * a + b


def test_cpu_launch_launch_ptrs_and_replayer_compute_the_same(rng: np.random.Generator) -> None:
    n = 50
    xs = rng.standard_normal(n).astype(np.float32)
    x = ember.tensor(xs, device=DEV)
    outs = [ember.zeros(n, device=DEV) for _ in range(3)]
    client = _client_of(DEV)
    axpb.launch(client, CubeCount(1), CubeDim(64), x, outs[0], 2.0, 0.5)  # builds the plan
    (plan,) = axpb._plans.values()
    server, k = client.server, plan.compiled
    ct = [_array_of(t, "t") for t in (x, *outs)]
    info = plan.info_type()
    plan.fmt.pack_into(info, 0, *[g((x, outs[1], 2.0, 0.5), [ct[0], ct[2]]) for g in plan.getters])
    server.launch_ptrs(k, [ct[0].ptr, ct[2].ptr], info, CubeCount(1), [ct[0].buffer, ct[2].buffer])
    go = server.replayer(k, info, CubeCount(1), (0, 1), (0, 0))
    assert go is not None
    go([ct[0].buffer, ct[3].buffer])
    want = xs * np.float32(2.0) + np.float32(0.5)
    for o in outs:
        np.testing.assert_allclose(o.numpy(), want, rtol=1e-6)
