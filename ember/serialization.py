"""Checkpoints: ``ember.save(obj, path)`` and ``ember.load(path, device=None)``.

Files are in the safetensors format (written with the ``safetensors`` library's numpy API,
read with its validating deserializer): never pickle, so loading a file runs no code.

* ``obj`` is a tensor, or nested dicts / lists / tuples of tensors and plain values (``int``,
  ``float``, ``bool``, ``None``, ``str``): a model's state dict, an optimizer's
  ``state_dict()``, ``{"model": ..., "opt": ..., "epoch": 3}``. Dict keys are ``str``,
  ``int``, ``float``, ``bool`` or ``None`` (an optimizer state is keyed by ints).
* Tensors are stored under dotted keys naming their place (``opt.state.0.exp_avg``); a flat
  dict of tensors keeps its keys exactly (no prefix), so ``safetensors.torch.load_file``
  reads an ember state dict and ``ember.load`` reads a file ``safetensors.torch.save_file``
  wrote (a dict of tensors, keys sorted as torch's loader sorts them).
* The structure (everything but the tensor bytes) is JSON in the header's ``__metadata__``
  under ``"ember"``, beside ``"format": "pt"`` (torch's layout, which Hugging Face loaders
  check for).
* dtypes: float32, float64, float16, bfloat16 (kept bit-exactly through ``ml_dtypes``),
  int64, int32, int16, int8, uint8, bool (safetensors' I64, I32, I16, I8, U8, BOOL).

``load`` checks the whole file before it builds anything: a truncated or corrupt file, a
broken header or structure raises :class:`ember.errors.CheckpointError` and nothing is
loaded. Tensors come back on ``device`` (default: the default device) as leaves that do not
require grad; dict subclasses (``Counter``, ``OrderedDict``) come back as plain dicts.
``save`` writes a temporary file beside ``path`` and renames it over ``path`` (atomic: a
reader never sees half a file).
"""

from __future__ import annotations

import math
import os
from typing import IO, Any

import numpy as np

from . import dtype as dt
from .errors import CheckpointError
from .tensor import Tensor

__all__ = ["save", "load"]

_META_KEY = "ember"
_FORMAT_VERSION = 1

#: safetensors dtype names <-> ember dtypes (numpy dtype of the stored bytes)
_TO_ST = {dt.float32: "F32", dt.float64: "F64", dt.float16: "F16", dt.bfloat16: "BF16", dt.int64: "I64",
          dt.int32: "I32", dt.int16: "I16", dt.int8: "I8", dt.uint8: "U8", dt.bool_: "BOOL"}


def _np_dtypes() -> dict[str, np.dtype]:
    import ml_dtypes

    return {"F32": np.dtype(np.float32), "F64": np.dtype(np.float64), "F16": np.dtype(np.float16),
            "BF16": np.dtype(ml_dtypes.bfloat16), "I64": np.dtype(np.int64), "I32": np.dtype(np.int32),
            "I16": np.dtype(np.int16), "I8": np.dtype(np.int8), "U8": np.dtype(np.uint8), "BOOL": np.dtype(np.bool_)}


# --------------------------------------------------------------------------- structure
# A value is encoded as JSON: plain values as themselves; a tensor as {"T": key}; a dict as
# {"D": [[key, value], ...]} (keys need not be strings); a list as {"L": [...]}; a tuple as
# {"U": [...]}. Every container is a one-entry object, so no plain value is mistaken for one.

_KEY_TYPES = (str, int, float, bool, type(None))


class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def key_for(self, path: list[str]) -> str:
        key = ".".join(path) if path else "tensor"
        if key in self.arrays:  # two paths that print alike (a key with a dot): make it unique
            i = 1
            while f"{key}~{i}" in self.arrays:
                i += 1
            key = f"{key}~{i}"
        return key

    def encode(self, obj: Any, path: list[str]) -> Any:
        if isinstance(obj, Tensor):
            key = self.key_for(path)
            if obj.dtype not in _TO_ST:
                raise TypeError(f"ember.save cannot store tensors of dtype {obj.dtype}")
            a = np.asarray(obj.detach().numpy())
            # C order for the raw bytes (not ascontiguousarray: it makes 0-d arrays 1-d)
            self.arrays[key] = a if a.flags.c_contiguous else a.copy(order="C")
            return {"T": key}
        if obj is None or isinstance(obj, bool | int | str):
            return obj
        if isinstance(obj, float):
            return obj  # json writes inf / nan as Infinity / NaN and reads them back
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not isinstance(k, _KEY_TYPES):
                    raise TypeError(f"ember.save: dict keys must be str, int, float, bool or None, got "
                                    f"{type(k).__name__}")
                items.append([k, self.encode(v, [*path, str(k)])])
            return {"D": items}
        if isinstance(obj, list | tuple):
            body = [self.encode(v, [*path, str(i)]) for i, v in enumerate(obj)]
            return {"U": body} if isinstance(obj, tuple) else {"L": body}
        if isinstance(obj, np.generic):
            return self.encode(obj.item(), path)
        raise TypeError(f"ember.save cannot store an object of type {type(obj).__name__}: it stores tensors, "
                        "dicts, lists, tuples, ints, floats, bools, None and strings (never pickle)")


def save(obj: Any, path: str | os.PathLike[str] | IO[bytes], pickle_module: Any = None,
         pickle_protocol: int = 2, _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` (tensors and nested dicts/lists/tuples of tensors and plain values) to
    ``path`` (a file name, or a binary file object such as ``io.BytesIO``, written from its
    position) as a safetensors file (see the module docstring); as ``torch.save`` but without
    pickle (torch's pickle arguments are accepted and ignored)."""
    import json
    import tempfile

    import safetensors.numpy

    w = _Writer()
    structure = w.encode(obj, [])
    meta = {"format": "pt", _META_KEY: json.dumps({"version": _FORMAT_VERSION, "obj": structure})}
    data = safetensors.numpy.save(w.arrays, metadata=meta)
    if hasattr(path, "write"):
        path.write(data)
        return
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --------------------------------------------------------------------------- loading
def _read(path: str, raw: bytes | None = None) -> tuple[dict[str, str] | None, dict[str, np.ndarray]]:
    """The header metadata and every tensor's array, after checking the file (or ``raw``, the
    bytes of a file object named ``path``) completely."""
    import json

    import safetensors

    if raw is None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise CheckpointError(f"cannot read checkpoint {path!r}: {e}") from e
    if len(raw) < 8:
        raise CheckpointError(f"{path!r} is not a safetensors file: {len(raw)} bytes, shorter than the header size")
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        raise CheckpointError(f"{path!r} is truncated or not a safetensors file: the header claims {n} bytes, "
                              f"the file has {len(raw) - 8} after the size field")
    try:
        header = json.loads(raw[8:8 + n])
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{path!r} has a corrupt safetensors header (not JSON): {e}") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path!r} has a corrupt safetensors header (not a JSON object)")
    meta = header.get("__metadata__")
    try:  # the library checks offsets, sizes, dtypes and that the data fills the file
        views = safetensors.deserialize(raw)
    except Exception as e:  # noqa: BLE001 - SafetensorError and friends: all mean "corrupt"
        raise CheckpointError(f"{path!r} is not a valid safetensors file: {e}") from e
    types = _np_dtypes()
    arrays = {}
    for name, v in views:
        d = types.get(v["dtype"])
        if d is None:
            raise CheckpointError(f"{path!r}: tensor {name!r} has dtype {v['dtype']}, which ember does not hold")
        shape = tuple(int(s) for s in v["shape"])
        data = v["data"]
        if len(data) != math.prod(shape) * d.itemsize:
            raise CheckpointError(f"{path!r}: tensor {name!r} has {len(data)} bytes for shape {shape} of {v['dtype']}")
        arrays[name] = np.frombuffer(bytes(data), dtype=d).reshape(shape)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(x, str) for x in meta.values())):
        raise CheckpointError(f"{path!r} has a corrupt __metadata__ (not a map of strings)")
    return meta, arrays


def _decode(node: Any, arrays: dict[str, np.ndarray], used: set[str], path: str) -> Any:
    """The structure's value, with tensor keys replaced by their arrays (still numpy)."""
    if node is None or isinstance(node, bool | int | float | str):
        return node
    if not (isinstance(node, dict) and len(node) == 1):
        raise CheckpointError(f"{path!r}: corrupt structure entry {node!r}")
    (tag, body), = node.items()
    if tag == "T":
        if not isinstance(body, str) or body not in arrays:
            raise CheckpointError(f"{path!r}: the structure names a tensor {body!r} the file does not hold")
        used.add(body)
        return _ArrayRef(arrays[body])
    if tag == "D" and isinstance(body, list):
        out = {}
        for item in body:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], _KEY_TYPES)):
                raise CheckpointError(f"{path!r}: corrupt dict entry {item!r}")
            out[item[0]] = _decode(item[1], arrays, used, path)
        return out
    if tag in ("L", "U") and isinstance(body, list):
        items = [_decode(v, arrays, used, path) for v in body]
        return tuple(items) if tag == "U" else items
    raise CheckpointError(f"{path!r}: corrupt structure entry {node!r}")


class _ArrayRef:
    """A decoded tensor's array, turned into a Tensor once the whole file is checked."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _build(node: Any, device: Any) -> Any:
    from .creation import from_numpy

    if isinstance(node, _ArrayRef):
        return from_numpy(node.array, device=device)
    if isinstance(node, dict):
        return {k: _build(v, device) for k, v in node.items()}
    if isinstance(node, list):
        return [_build(v, device) for v in node]
    if isinstance(node, tuple):
        return tuple(_build(v, device) for v in node)
    return node


def load(path: str | os.PathLike[str] | IO[bytes], map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = None, device: Any = None,
         **pickle_load_args: Any) -> Any:
    """Read a file ``save`` (or ``safetensors.torch.save_file``) wrote, from a file name or a
    binary file object (read from its position); tensors on ``device`` (a Device or its
    string; default: the default device), leaves not requiring grad. As ``torch.load`` with
    ``weights_only=True``, but safetensors, not pickle.

    torch's ``map_location`` is read as ``ember.device(map_location)`` (``"cpu"`` is the host,
    as ``Tensor.to("cpu")``: the default device when it is a host device). A dict maps saved
    locations to targets: ember's files keep no location, so its targets must all name one
    device, which every tensor goes to. A function (torch's ``lambda storage, loc: storage``
    idiom keeps tensors on the CPU) is not called: tensors go to the default device.
    ``weights_only``, ``mmap`` and the pickle arguments are accepted and ignored: loading never
    runs code, and the whole file is read and checked."""
    import json

    from .creation import get_default_device
    from .device import Device

    if map_location is not None and device is None and not callable(map_location):
        from .creation import _as_device

        if isinstance(map_location, dict):
            targets = {_as_device(v) for v in map_location.values()}
            if len(targets) > 1:
                raise ValueError("ember.load: a map_location dict must map every location to one device "
                                 f"(ember's files keep no location), got {sorted(map(str, map_location.values()))}")
            device = targets.pop() if targets else None
        else:
            device = _as_device(map_location)
    if hasattr(path, "read"):
        p = repr(getattr(path, "name", path))
        meta, arrays = _read(p, path.read())
    else:
        p = os.fspath(path)
        meta, arrays = _read(p)
    if meta is not None and _META_KEY in meta:
        try:
            doc = json.loads(meta[_META_KEY])
        except ValueError as e:
            raise CheckpointError(f"{p!r}: the ember structure in the header is not JSON: {e}") from e
        if not isinstance(doc, dict) or doc.get("version") != _FORMAT_VERSION or "obj" not in doc:
            raise CheckpointError(f"{p!r}: unknown ember checkpoint structure (version {doc.get('version')!r})"
                                  if isinstance(doc, dict) else f"{p!r}: corrupt ember checkpoint structure")
        used: set[str] = set()
        tree = _decode(doc["obj"], arrays, used, p)
        if used != set(arrays):
            raise CheckpointError(f"{p!r}: tensors {sorted(set(arrays) - used)} are not part of the structure")
    else:  # a plain safetensors file (e.g. safetensors.torch.save_file): a flat dict of tensors
        tree = {k: _ArrayRef(arrays[k]) for k in sorted(arrays)}
    if device is None:
        device = get_default_device()
    elif isinstance(device, str):
        device = Device.parse(device)
    return _build(tree, device)
