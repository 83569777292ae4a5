"""Collation, as ``torch.utils.data._utils.collate``: ``default_collate``, ``default_convert``,
``collate`` and its registry ``default_collate_fn_map``.

torch's type rules: ember tensors are stacked along a new dim 0 (on their device); numpy arrays
are stacked and keep their dtype; numpy scalars keep theirs; Python floats become float64,
ints int64, bools bool; str/bytes batches stay lists; Mappings, namedtuples and Sequences are
collated element-wise (tuples come back as lists, as torch). numpy dtypes ember has no
equivalent for (int8, int16, uint16, ...) raise ember's DTypeError.

Inside a ``DataLoader`` worker process the same rules run on numpy: leaves become
``_ToTensor`` markers (numpy values) that the main process turns into ember tensors, so
workers never touch a device runtime (``dataloader.py``).
"""

from __future__ import annotations

import collections.abc
import copy
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import dtype as dt
from ...creation import from_numpy
from ...functional import stack
from ...tensor import Tensor
from . import worker_info as _info

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map", "default_collate_err_msg_format"]

# numpy dtype chars that default_collate refuses (bytes, str, object) and default_convert keeps
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

CollateFnMap = dict[type | tuple[type, ...], Callable[..., Any]]

# Where the leaves ``default_collate`` makes from numpy arrays and Python numbers go: the
# DataLoader sets ``device`` (its ``device=``) around a collate call; None = ember's default.
_target = threading.local()


def _device() -> Any:
    return getattr(_target, "device", None)


class _ToTensor:
    """A numpy value to become an ember tensor in the main process (a worker's collate leaf).
    It pickles as ``_batch_tensor(array)``, which builds the tensor on the loader's device."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return (_batch_tensor, (self.array,))


def _batch_tensor(array: np.ndarray) -> Tensor:
    """The tensor of a leaf a worker sent (unpickling in the main process, on ``_target``)."""
    return from_numpy(np.asarray(array), device=_device())


def _in_worker() -> bool:
    return _info._worker_info is not None


def _leaf(array: np.ndarray) -> Any:
    """A collated numpy value: a tensor in the main process, a marker in a worker."""
    dt.from_numpy_dtype(array.dtype)  # unsupported dtypes fail where the data is, as in the main process
    if _in_worker():
        return _ToTensor(array)
    return from_numpy(array, device=_device())


def _check_shapes(shapes: list[tuple[int, ...]]) -> None:
    for i, s in enumerate(shapes):
        if s != shapes[0]:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shapes[0])} at entry 0 "
                               f"and {list(s)} at entry {i}")


def collate_tensor_fn(batch: list[Tensor], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Ember tensors stacked along a new dim 0 (``ember.stack``; in a worker, on their numpy values)."""
    _check_shapes([tuple(t.shape) for t in batch])
    if _in_worker():
        return _ToTensor(np.stack([t.numpy() for t in batch]))
    out = stack(list(batch), 0)
    dev = _device()
    return out if dev is None else out.to(dev)


def collate_numpy_array_fn(batch: list[np.ndarray], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """numpy arrays stacked (dtype kept); str/bytes/object arrays raise TypeError."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    _check_shapes([tuple(a.shape) for a in batch])
    return _leaf(np.stack(batch))


def collate_numpy_scalar_fn(batch: list[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """numpy scalars into one 1-d tensor (their promoted dtype, as ``torch.as_tensor``)."""
    return _leaf(np.asarray(batch))


def collate_float_fn(batch: list[float], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Python floats into a float64 tensor (torch's rule, not the default dtype)."""
    return _leaf(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch: list[int], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Python ints into an int64 tensor, bools into a bool one (a mix of both: int64)."""
    a = np.asarray(batch)
    return _leaf(a if a.dtype == np.bool_ else a.astype(np.int64))


def collate_str_fn(batch: list[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """str/bytes batches stay lists."""
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """As torch's ``collate``: containers collated element-wise, leaves by the first
    ``collate_fn_map`` entry whose type matches the first sample (exact type first, then
    ``isinstance`` in insertion order)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        fn = collate_fn_map.get(elem_type)
        if fn is not None:
            return fn(batch, collate_fn_map=collate_fn_map)
        for t, fn in collate_fn_map.items():
            if isinstance(elem, t):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        parts = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)  # keeps the mapping's type and its other state
                clone.update(parts)
                return clone
            return elem_type(parts)
        except TypeError:  # a mapping type that cannot be built from a dict
            return parts
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols  # a list, as torch (backwards compatibility there)
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, c in enumerate(cols):
                    clone[i] = c
                return clone
            return elem_type(cols)
        except TypeError:
            return cols
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch: Any) -> Any:
    """As ``torch.utils.data.default_collate``: a list of samples into batched tensors (the
    module docstring lists the type rules)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data: Any) -> Any:
    """As ``torch.utils.data.default_convert``: numpy arrays (not str/object ones) and numpy
    scalars of one sample into tensors, containers recursed, everything else unchanged (the
    collate function when automatic batching is off)."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        if _in_worker():
            return _ToTensor(np.array(data.numpy()))
        dev = _device()
        return data if dev is None else data.to(dev)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "bytes_", "string_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return _leaf(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        parts = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(parts)
                return clone
            return elem_type(parts)
        except TypeError:
            return parts
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        cols = [default_convert(d) for d in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, c in enumerate(cols):
                    clone[i] = c
                return clone
            return elem_type(cols)
        except TypeError:
            return cols
    return data
