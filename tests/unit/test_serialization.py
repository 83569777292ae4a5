"""ember.save / ember.load: safetensors checkpoints of tensors and nested structures, read and
written by torch's safetensors loader, every dtype kept exactly, corrupt files refused."""

from __future__ import annotations

import math
import os
import pathlib
import struct

import ml_dtypes
import numpy as np
import pytest
import safetensors.torch
import torch

import ember
from ember import Device, optim
from ember.errors import CheckpointError


def _eq(a: ember.Tensor, b: ember.Tensor) -> None:
    assert a.dtype is b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


def test_nested_structure_round_trip(tmp_path: pathlib.Path, rng: np.random.Generator) -> None:
    w = ember.tensor(rng.standard_normal((3, 2)).astype(np.float32))
    obj = {
        "model": {"fc.weight": w, "fc.bias": ember.zeros(2)},
        "opt": {"state": {0: {"step": ember.tensor(15.0), "exp_avg": ember.ones(3, 2)}},
                "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False,
                                  "foreach": None, "params": [0, 1]}]},
        "epoch": 3, "best": math.inf, "name": "run-1", "history": [0.5, 0.25, None, True],
        "t": ember.tensor(7),
    }
    path = tmp_path / "ckpt.safetensors"
    ember.save(obj, path)  # an os.PathLike
    back = ember.load(str(path))  # or a str
    assert back["epoch"] == 3 and back["best"] == math.inf and back["name"] == "run-1"
    assert back["history"] == [0.5, 0.25, None, True] and isinstance(back["history"], list)
    g = back["opt"]["param_groups"][0]
    assert g["betas"] == (0.9, 0.999) and isinstance(g["betas"], tuple) and g["lr"] == 1e-3
    assert g["foreach"] is None and g["params"] == [0, 1]
    assert list(back["opt"]["state"]) == [0]  # int keys stay ints
    _eq(back["model"]["fc.weight"], w)
    _eq(back["opt"]["state"][0]["exp_avg"], ember.ones(3, 2))
    _eq(back["t"], ember.tensor(7))
    for t in (back["model"]["fc.weight"], back["t"]):
        assert t.is_leaf and not t.requires_grad and t.device == ember.get_default_device()
    # tensors are stored under dotted keys naming their place
    keys = set(safetensors.torch.load_file(str(path)))
    assert keys == {"model.fc.weight", "model.fc.bias", "opt.state.0.step", "opt.state.0.exp_avg", "t"}


@pytest.mark.parametrize("d", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
                               "bool"])
def test_dtypes_exact_both_ways_with_torch(tmp_path: pathlib.Path, rng: np.random.Generator, d: str) -> None:
    raw = rng.standard_normal((4, 3)) * 100
    np_dt = {"bfloat16": ml_dtypes.bfloat16, "bool": np.bool_}.get(d, d)
    a = (raw > 0) if d == "bool" else raw.astype(np_dt)
    if d == "bfloat16":  # every bit pattern class: subnormal, inf, nan, -0
        a.reshape(-1)[:4] = np.array([1e-40, np.inf, -0.0, np.nan], dtype=np.float32).astype(ml_dtypes.bfloat16)
    t = ember.from_numpy(a)
    ember.save({"x": t, "y": ember.tensor(1.5)}, tmp_path / "e.safetensors")
    tt = safetensors.torch.load_file(str(tmp_path / "e.safetensors"))  # ember -> torch
    assert set(tt) == {"x", "y"} and str(tt["x"].dtype) == f"torch.{d}"
    got = tt["x"].view(torch.int16).numpy().view(ml_dtypes.bfloat16) if d == "bfloat16" else tt["x"].numpy()
    np.testing.assert_array_equal(got.view(np.uint8), a.view(np.uint8))  # bit-exact
    safetensors.torch.save_file({"w": tt["x"], "b": torch.arange(3)}, str(tmp_path / "t.safetensors"))
    back = ember.load(tmp_path / "t.safetensors")  # torch -> ember: a flat dict of tensors
    assert list(back) == ["b", "w"] and back["b"].dtype is ember.int64
    np.testing.assert_array_equal(np.asarray(back["w"].numpy()).view(np.uint8), a.view(np.uint8))


def test_flat_state_dict_keys_as_is(tmp_path: pathlib.Path) -> None:
    sd = {"0.weight": ember.ones(2, 2), "0.bias": ember.zeros(2), "norm.running_mean": ember.zeros(2)}
    ember.save(sd, tmp_path / "m.safetensors")
    assert set(safetensors.torch.load_file(str(tmp_path / "m.safetensors"))) == set(sd)
    assert list(ember.load(tmp_path / "m.safetensors")) == list(sd)  # the saved order, not sorted


def test_single_tensor_and_device(tmp_path: pathlib.Path) -> None:
    ember.save(ember.arange(5), tmp_path / "t.safetensors")
    t = ember.load(tmp_path / "t.safetensors", device=Device.flex())
    assert t.device == Device.flex() and t.tolist() == [0, 1, 2, 3, 4]
    t = ember.load(tmp_path / "t.safetensors", device="flex")
    assert t.device == Device.flex()


def test_optimizer_checkpoint_resumes(tmp_path: pathlib.Path, rng: np.random.Generator) -> None:
    """An optimizer state_dict saved mid-training and loaded into a fresh optimizer continues
    exactly as the uninterrupted run."""
    init = rng.standard_normal(6).astype(np.float32)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(10)]

    def run(p: ember.Tensor, o: optim.Optimizer, gs: list[np.ndarray]) -> None:
        for g in gs:
            p.grad = ember.tensor(g)
            o.step()

    a = ember.tensor(init, requires_grad=True)
    oa = optim.Adam([a], lr=0.01, amsgrad=True)
    run(a, oa, grads)
    b = ember.tensor(init, requires_grad=True)
    ob = optim.Adam([b], lr=0.01, amsgrad=True)
    run(b, ob, grads[:5])
    ember.save({"model": {"w": b}, "opt": ob.state_dict(), "epoch": 5}, tmp_path / "c.safetensors")
    ck = ember.load(tmp_path / "c.safetensors")
    c = ck["model"]["w"].requires_grad_()
    oc = optim.Adam([c], lr=0.5, amsgrad=True)
    oc.load_state_dict(ck["opt"])
    run(c, oc, grads[5:])
    _eq(a.detach(), c.detach())
    assert ck["epoch"] == 5 and oc.state[c]["step"].item() == 10


def _good(tmp_path: pathlib.Path) -> bytes:
    ember.save({"a": ember.ones(4), "n": 3}, tmp_path / "g.safetensors")
    return (tmp_path / "g.safetensors").read_bytes()


@pytest.mark.parametrize("corrupt", ["truncated", "empty", "tiny", "huge-header", "not-json", "garbage-data",
                                     "bad-structure", "missing-tensor", "extra-tensor", "bad-dtype"])
def test_corrupt_files_raise_checkpoint_error(tmp_path: pathlib.Path, corrupt: str) -> None:
    raw = _good(tmp_path)
    n = struct.unpack("<Q", raw[:8])[0]
    header = raw[8:8 + n].decode()
    if corrupt == "truncated":
        raw = raw[:-3]
    elif corrupt == "empty":
        raw = b""
    elif corrupt == "tiny":
        raw = b"\x01\x02"
    elif corrupt == "huge-header":
        raw = struct.pack("<Q", 10**12) + raw[8:]
    elif corrupt == "not-json":
        raw = raw[:8] + b"{" * n + raw[8 + n:]
    elif corrupt == "garbage-data":
        raw = raw + b"\x00" * 5  # bytes beyond the data the header describes
    else:
        if corrupt == "bad-structure":
            new = header.replace('\\"n\\", 3', '\\"n\\", {\\"Q\\": 1}')
        elif corrupt == "missing-tensor":
            new = header.replace('{\\"T\\": \\"a\\"}', '{\\"T\\": \\"zz\\"}')
        elif corrupt == "extra-tensor":
            new = header.replace('[\\"a\\", {\\"T\\": \\"a\\"}], ', "")
        else:
            new = header.replace('"F32"', '"C64"')
        assert new != header, corrupt
        new = new.ljust(n)  # same header length: only the content is wrong
        raw = struct.pack("<Q", len(new)) + new.encode() + raw[8 + n:]
    (tmp_path / "bad.safetensors").write_bytes(raw)
    with pytest.raises(CheckpointError):
        ember.load(tmp_path / "bad.safetensors")
    with pytest.raises(FileNotFoundError):
        ember.load(tmp_path / "missing.safetensors")


def test_save_refuses_other_objects_and_is_atomic(tmp_path: pathlib.Path) -> None:
    class Custom:
        pass

    target = tmp_path / "x.safetensors"
    ember.save({"ok": ember.ones(1)}, target)
    before = target.read_bytes()
    with pytest.raises(TypeError, match="never pickle"):
        ember.save({"bad": Custom()}, target)
    with pytest.raises(TypeError, match="keys"):
        ember.save({(1, 2): ember.ones(1)}, target)
    assert target.read_bytes() == before  # a failed save leaves the old file
    assert os.listdir(tmp_path) == ["x.safetensors"]  # and no temporary file
