"""Recurrent layers (as ``torch.nn.RNN``, ``LSTM``, ``GRU`` and the ``*Cell`` forms): torch's
arguments, parameter names (``weight_ih_l{k}[_reverse]``, ...), gate order (LSTM i, f, g, o;
GRU r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``), initialisation
U(+-1/sqrt(hidden_size)), shapes and return values.

Each layer and direction projects the whole input sequence in one matmul
(``x @ W_ih^T + b_ih`` over ``(L, N, H_in)``); only the recurrent ``h @ W_hh^T`` and the gate
arithmetic run per time step (the Python loop over time is inherent to the recurrence).
A ``PackedSequence`` input (``nn.utils.rnn``) runs padded, time-major, in the batch's order:
past a sequence's length its state is held (``where`` on a per-step mask), so ``h_n``/``c_n``
are those of its last valid step (the reverse direction starts there), and the output is
packed back with the input's lengths and order.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ... import functional as EF
from ...creation import empty, tensor, zeros
from ...errors import ShapeError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, batch_lengths, pad_packed_sequence, repack_like
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(gx: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None,
               w_hr: Tensor | None) -> tuple[Tensor, Tensor]:
    """One LSTM step from the projected input ``gx = x W_ih^T + b_ih``."""
    g = gx + h.matmul(w_hh.T)
    if b_hh is not None:
        g = g + b_hh
    i, f, gg, o = g.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * gg.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = h.matmul(w_hr.T)
    return h, c


def _gru_step(gx: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    gh = h.matmul(w_hh.T)
    if b_hh is not None:
        gh = gh + b_hh
    xr, xz, xn = gx.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n)  # (1 - z) * n + z * h


def _rnn_step(gx: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, relu: bool) -> Tensor:
    g = gx + h.matmul(w_hh.T)
    if b_hh is not None:
        g = g + b_hh
    return g.relu() if relu else g.tanh()


class RNNBase(Module):
    """As ``torch.nn.RNNBase``: the parameters and the multi-layer, bidirectional loop shared by
    ``RNN``, ``LSTM`` and ``GRU``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be a positive integer")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be a positive integer")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        fk = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_in = input_size if layer == 0 else real_hidden * dirs
                sfx = "_reverse" if direction == 1 else ""
                params = {f"weight_ih_l{layer}{sfx}": (gate, layer_in), f"weight_hh_l{layer}{sfx}": (gate, real_hidden)}
                if bias:
                    params[f"bias_ih_l{layer}{sfx}"] = (gate,)
                    params[f"bias_hh_l{layer}{sfx}"] = (gate,)
                if proj_size > 0:
                    params[f"weight_hr_l{layer}{sfx}"] = (proj_size, hidden_size)
                for name, shape in params.items():
                    setattr(self, name, Parameter(empty(shape, **fk)))
                self._flat_weights_names.extend(params)
                self._all_weights.append(list(params))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """As torch (a cuDNN layout hint): nothing to do here."""

    @property
    def _flat_weights(self) -> list[Tensor | None]:
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """As torch: the parameters per layer and direction."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _weights(self, layer: int, direction: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None,
                                                            Tensor | None]:
        sfx = "_reverse" if direction == 1 else ""
        p = self._parameters
        return (p[f"weight_ih_l{layer}{sfx}"], p[f"weight_hh_l{layer}{sfx}"],  # type: ignore[return-value]
                p.get(f"bias_ih_l{layer}{sfx}"), p.get(f"bias_hh_l{layer}{sfx}"),
                p.get(f"weight_hr_l{layer}{sfx}"))

    def _check_input(self, input: Tensor) -> None:
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _check_hidden(self, hx: Tensor, expected: tuple[int, ...], what: str = "hidden") -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")

    def _run(self, x: Tensor, h0: Tensor, c0: Tensor | None,
             lengths: Any = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """``x`` ``(L, N, H_in)``, ``h0``/``c0`` ``(layers * dirs, N, H)``: output, h_n, c_n.
        ``lengths`` (host ints per batch entry, packed input): steps past them keep the state."""
        dirs = 2 if self.bidirectional else 1
        steps = x.shape[0]
        masks = None
        if lengths is not None:
            import numpy as np

            valid = np.arange(steps)[:, None, None] < np.asarray(lengths)[None, :, None]  # (L, N, 1)
            masks = [tensor(valid[t], device=x.device) for t in range(steps)] if not valid.all() else None
        relu = self.mode == "RNN_RELU"
        hs: list[Tensor] = []
        cs: list[Tensor] = []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                k = layer * dirs + direction
                gx = layer_in.matmul(w_ih.T)  # the whole sequence at once: (L, N, G*H)
                if b_ih is not None:
                    gx = gx + b_ih
                h = h0[k]
                c = c0[k] if c0 is not None else None
                seq: list[Tensor] = [None] * steps  # type: ignore[list-item]
                order = range(steps - 1, -1, -1) if direction == 1 else range(steps)
                for t in order:
                    h_prev, c_prev = h, c
                    if self.mode == "LSTM":
                        assert c is not None
                        h, c = _lstm_step(gx[t], h, c, w_hh, b_hh, w_hr)
                    elif self.mode == "GRU":
                        h = _gru_step(gx[t], h, w_hh, b_hh)
                    else:
                        h = _rnn_step(gx[t], h, w_hh, b_hh, relu)
                    if masks is not None:  # a finished sequence keeps its state; its output is 0
                        seq[t] = EF.where(masks[t], h, 0.0)
                        h = EF.where(masks[t], h, h_prev)
                        if c is not None:
                            c = EF.where(masks[t], c, c_prev)
                    else:
                        seq[t] = h
                outs.append(EF.stack(seq, 0))
                hs.append(h)
                if c is not None:
                    cs.append(c)
            layer_out = outs[0] if dirs == 1 else EF.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_out = F.dropout(layer_out, self.dropout, training=True)
            layer_in = layer_out
        return layer_in, EF.stack(hs, 0), EF.stack(cs, 0) if cs else None

    def _prepare(self, input: Tensor, hx: Tensor | None, c: bool) -> tuple[Tensor, bool, int]:
        if isinstance(input, PackedSequence):  # time-major, the batch's order (see the module docstring)
            x, _ = pad_packed_sequence(input)
            self._check_input(x)
            return x, True, x.shape[1]
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        self._check_input(input)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        return x, batched, x.shape[1]

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def _state(self, hx: Tensor | None, batched: bool, n: int, size: int, like: Tensor, what: str) -> Tensor:
        dirs = 2 if self.bidirectional else 1
        expected = (self.num_layers * dirs, n, size)
        if hx is None:
            return zeros(expected, dtype=like.dtype, device=like.device)
        if batched:
            if hx.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, {what} should also be 3-D but got {hx.ndim}-D tensor")
        else:
            if hx.ndim != 2:
                raise RuntimeError(f"For unbatched 2-D input, {what} should also be 2-D but got {hx.ndim}-D tensor")
            hx = hx.unsqueeze(1)
        self._check_hidden(hx, expected, "hidden" if what == "hx" else "cell")
        return hx


class RNN(RNNBase):
    """As ``torch.nn.RNN`` (``nonlinearity`` ``'tanh'`` or ``'relu'``); ``forward(input, hx=None)``
    returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``input`` ``(L, N, H_in)`` (``(N, L, H_in)`` with ``batch_first``, or unbatched ``(L, H_in)``),
        ``hx`` ``(layers * dirs, N, H)``: ``(output, h_n)``."""
        x, batched, n = self._prepare(input, hx, False)
        h0 = self._state(hx, batched, n, self.hidden_size, x, "hx")
        out, hn, _ = self._run(x, h0, None, _lengths(input))
        return _finish(self, out, batched, input), hn if batched else hn.squeeze(1)


def _lengths(input: Any) -> Any:
    """The host lengths of a packed input, in the batch's order (None for a tensor)."""
    return batch_lengths(input) if isinstance(input, PackedSequence) else None


def _finish(m: RNNBase, out: Tensor, batched: bool, input: Any = None) -> Any:
    if isinstance(input, PackedSequence):
        return repack_like(out, input)
    if not batched:
        return out.squeeze(1)
    return out.transpose(0, 1) if m.batch_first else out


class LSTM(RNNBase):
    """As ``torch.nn.LSTM`` (with ``proj_size``); ``forward(input, (h_0, c_0)=None)`` returns
    ``(output, (h_n, c_n))``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """``input`` as in ``RNN``; ``hx = (h_0, c_0)``, ``h_0`` ``(layers * dirs, N, proj_size or H)``,
        ``c_0`` ``(layers * dirs, N, H)``."""
        x, batched, n = self._prepare(input, None, True)
        real = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            h0 = self._state(None, batched, n, real, x, "hx")
            c0 = self._state(None, batched, n, self.hidden_size, x, "cx")
        else:
            if not isinstance(hx, tuple | list) or len(hx) != 2:
                raise RuntimeError("LSTM expects hx as a tuple (h_0, c_0)")
            h0 = self._state(hx[0], batched, n, real, x, "hx")
            c0 = self._state(hx[1], batched, n, self.hidden_size, x, "cx")
        out, hn, cn = self._run(x, h0, c0, _lengths(input))
        assert cn is not None
        if not batched:
            hn, cn = hn.squeeze(1), cn.squeeze(1)
        return _finish(self, out, batched, input), (hn, cn)


class GRU(RNNBase):
    """As ``torch.nn.GRU``; ``forward(input, hx=None)`` returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """As ``RNN.forward``."""
        x, batched, n = self._prepare(input, hx, False)
        h0 = self._state(hx, batched, n, self.hidden_size, x, "hx")
        out, hn, _ = self._run(x, h0, None, _lengths(input))
        return _finish(self, out, batched, input), hn if batched else hn.squeeze(1)


class RNNCellBase(Module):
    """As ``torch.nn.RNNCellBase``: ``weight_ih`` ``(G*H, H_in)``, ``weight_hh`` ``(G*H, H)``,
    ``bias_ih``/``bias_hh`` ``(G*H,)``, initialised U(+-1/sqrt(hidden_size))."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        fk = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **fk))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **fk))
        if bias:
            self.bias_ih = Parameter(empty((num_chunks * hidden_size,), **fk))
            self.bias_hh = Parameter(empty((num_chunks * hidden_size,), **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _input(self, input: Tensor, hx: Tensor | None, what: str) -> tuple[Tensor, Tensor, bool]:
        if input.ndim not in (1, 2):
            raise ValueError(f"{what}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            h = zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)
        else:
            h = hx if batched else hx.unsqueeze(0)
            if tuple(h.shape) != (x.shape[0], self.hidden_size):
                raise ShapeError(f"{what}: hidden state of shape {tuple(hx.shape)} does not fit input "
                                 f"{tuple(input.shape)} and hidden_size {self.hidden_size}")
        return x, h, batched

    def _gx(self, x: Tensor) -> Tensor:
        g = x.matmul(self.weight_ih.T)
        return g if self.bias_ih is None else g + self.bias_ih


class RNNCell(RNNCellBase):
    """As ``torch.nn.RNNCell``: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """``input`` ``(N, H_in)`` or ``(H_in,)``, ``hx`` ``(N, H)``: the next hidden state."""
        x, h, batched = self._input(input, hx, "RNNCell")
        h = _rnn_step(self._gx(x), h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """As ``torch.nn.LSTMCell``; ``forward(input, (h, c)=None)`` returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """The next ``(h, c)``."""
        x, h, batched = self._input(input, None if hx is None else hx[0], "LSTMCell")
        if hx is None:
            c = zeros(h.shape, dtype=x.dtype, device=x.device)
        else:
            c = hx[1] if batched else hx[1].unsqueeze(0)
        h, c = _lstm_step(self._gx(x), h, c, self.weight_hh, self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """As ``torch.nn.GRUCell``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """The next hidden state."""
        x, h, batched = self._input(input, hx, "GRUCell")
        h = _gru_step(self._gx(x), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
