"""``ember.nn.utils.rnn``, as ``torch.nn.utils.rnn``: padding and packing variable-length sequences.

A ``PackedSequence`` holds torch's layout: ``data`` is the time-major concatenation of the
steps of every sequence, longest first (``batch_sizes[t]`` sequences are still running at
step ``t``); ``sorted_indices`` maps that order to the batch. Packing and unpacking are one
``index_select`` each, with the row positions computed on the host from the lengths (which
torch keeps on the CPU too), so gradients flow through both. ``nn.RNN``/``LSTM``/``GRU``
take a ``PackedSequence`` and return one (their final states belong to each sequence's last
valid step, in the batch's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ... import functional as EF
from ...creation import full, tensor
from ...tensor import Tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence"]


class PackedSequence(NamedTuple):
    """As ``torch.nn.utils.rnn.PackedSequence``: ``(data, batch_sizes, sorted_indices,
    unsorted_indices)``; ``batch_sizes`` is an int64 tensor, the indices int64 tensors or None."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """As torch: ``data`` moved or cast (``batch_sizes`` stays on the host)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    def cpu(self) -> PackedSequence:
        """``data`` on the host."""
        return self._replace(data=self.data.cpu())

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` lives on a CUDA device."""
        return self.data.is_cuda


def _host_ints(v: Any) -> np.ndarray:
    if isinstance(v, Tensor):
        return np.asarray(v.numpy()).astype(np.int64).reshape(-1)
    return np.asarray(list(v), dtype=np.int64).reshape(-1)


def _lengths_of(p: PackedSequence) -> np.ndarray:
    """Each sequence's length in the sorted order (longest first)."""
    bs = _host_ints(p.batch_sizes)
    return (np.arange(int(bs[0]))[:, None] < bs[None, :]).sum(1)


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """As ``torch.nn.utils.rnn.pad_sequence``: stack sequences ``(L_i, *)`` into ``(L_max, B, *)``
    (``(B, L_max, *)`` with ``batch_first``), padded with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = EF.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        rows.append(s)
    return EF.stack(rows, 0 if batch_first else 1)


def _pack_rows(time_major: Tensor, lengths: np.ndarray, order: np.ndarray) -> tuple[Tensor, np.ndarray]:
    """``data`` and ``batch_sizes`` of a ``(T, B, *)`` tensor whose sequence ``b`` has ``lengths[b]``
    steps, packed in ``order`` (batch indices, longest first)."""
    n = time_major.shape[1]
    sorted_len = lengths[order]
    batch_sizes = (np.arange(int(sorted_len[0]))[:, None] < sorted_len[None, :]).sum(1)
    rows = np.concatenate([t * n + order[:bs] for t, bs in enumerate(batch_sizes)])
    flat = time_major.reshape(time_major.shape[0] * n, *time_major.shape[2:])
    return flat.index_select(0, tensor(rows, device=time_major.device)), batch_sizes


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """As ``torch.nn.utils.rnn.pack_padded_sequence``: ``input`` ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``) and each sequence's length (a list or an int64 tensor, read on the host)."""
    lens = _host_ints(lengths)
    x = input.transpose(0, 1) if batch_first else input
    if lens.shape[0] != x.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.shape[0]} "
                         f"(batch_size={x.shape[1]})")
    if (lens <= 0).any():
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if enforce_sorted:
        if (np.diff(lens) > 0).any():
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order = np.arange(lens.shape[0])
        sorted_idx = unsorted_idx = None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_idx = tensor(order)
        unsorted_idx = tensor(np.argsort(order, kind="stable"))
    if int(lens.max()) > x.shape[0]:
        raise RuntimeError(f"a length {int(lens.max())} exceeds the padded length {x.shape[0]}")
    data, batch_sizes = _pack_rows(x, lens, order)
    return PackedSequence(data, tensor(batch_sizes), sorted_idx, unsorted_idx)


def _order_of(p: PackedSequence) -> np.ndarray:
    n = int(_host_ints(p.batch_sizes)[0])
    return _host_ints(p.sorted_indices) if p.sorted_indices is not None else np.arange(n)


def batch_lengths(p: PackedSequence) -> np.ndarray:
    """Each sequence's length, in the batch's order (host ints)."""
    lens = np.empty_like(_lengths_of(p))
    lens[_order_of(p)] = _lengths_of(p)
    return lens


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """As ``torch.nn.utils.rnn.pad_packed_sequence``: ``(padded, lengths)``, the padded tensor
    ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) in the batch's order and the int64 lengths."""
    data = sequence.data
    bs = _host_ints(sequence.batch_sizes)
    order = _order_of(sequence)
    n, steps = int(bs[0]), int(bs.shape[0])
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence "
                             f"({steps}), but got total_length={total_length}")
        steps = total_length
    # position[t, b]: the row of data holding step t of batch entry b, or the padding row
    position = np.full((steps, n), data.shape[0], dtype=np.int64)
    start = 0
    for t, size in enumerate(bs):
        position[t, order[:size]] = np.arange(start, start + size)
        start += int(size)
    pad = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    rows = EF.cat([data, pad], 0).index_select(0, tensor(position.reshape(-1), device=data.device))
    out = rows.reshape(steps, n, *data.shape[1:])
    return (out.transpose(0, 1) if batch_first else out), tensor(batch_lengths(sequence))


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """As ``torch.nn.utils.rnn.pack_sequence``: pad, then pack, a list of ``(L_i, *)`` tensors."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """As ``torch.nn.utils.rnn.unpad_sequence``: the list of sequences a padded tensor holds."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(_host_ints(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """As ``torch.nn.utils.rnn.unpack_sequence``: the list of sequences a PackedSequence holds."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def repack_like(time_major: Tensor, like: PackedSequence) -> PackedSequence:
    """``time_major`` ``(T, B, *)``, in the batch's order, packed with ``like``'s lengths and order
    (how the recurrent layers return a PackedSequence)."""
    data, _ = _pack_rows(time_major, batch_lengths(like), _order_of(like))
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)
