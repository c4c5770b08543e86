"""Recurrent layers: RNN (tanh/relu), LSTM (optionally projected), GRU and their single-step cells.

Each layer-direction is one fused autograd node (tinytorch._ops.rnn.rnn_layer). Parameter names,
shapes, initialisation, signatures and error messages follow PyTorch, so state_dicts interchange.
"""
from __future__ import annotations

import math
import numbers
import warnings

from ..._creation import empty, zeros
from ..._ops.rnn import rnn_layer
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _cat(tensors: list, dim: int) -> Tensor:
    from ... import cat
    return cat(tensors, dim)


def _stack(tensors: list, dim: int = 0) -> Tensor:
    from ... import stack
    return stack(tensors, dim)


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the per-layer, per-direction weights and the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [("weight_ih_l{}{}", (gate_size, layer_input)), ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr_l{}{}", (proj_size, hidden_size)))
                names = []
                for fmt, shape in params:
                    name = fmt.format(layer, suffix)
                    setattr(self, name, Parameter(empty(shape, device=device, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Accepted for PyTorch compatibility: the weights are never packed into one buffer here."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters, one list per layer and direction."""
        return [[getattr(self, w) for w in weights] for weights in self._all_weights]

    def _weights(self, layer: int, direction: int) -> tuple:
        names = self._all_weights[layer * (2 if self.bidirectional else 1) + direction]
        w = [getattr(self, n) for n in names]
        w_ih, w_hh = w[0], w[1]
        b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
        w_hr = w[-1] if self.proj_size > 0 else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    # ------------------------------------------------------------------ checks (PyTorch's messages)

    def check_input(self, input: Tensor, batch_sizes) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). Convert "
                             f"input: input.to({w.dtype}), or convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, real_hidden)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def _check_device_dtype(self, hx: Tensor, input: Tensor) -> None:
        if hx.dtype != input.dtype:
            raise RuntimeError(f"Expected hidden to have the same dtype as input, but got {hx.dtype} and "
                               f"{input.dtype}")

    # ------------------------------------------------------------------ the layer loop

    def _run(self, x: Tensor, hx: Tensor, cx: Tensor | None, mask) -> tuple:
        """x time-major (T, B, F); hx (L*D, B, H_out), cx (L*D, B, H) or None. Returns (y, h_n, c_n)."""
        num_directions = 2 if self.bidirectional else 1
        hs, cs = [], []
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(num_directions):
                idx = layer * num_directions + d
                c0 = cx[idx] if cx is not None else None
                y, hn, cn = rnn_layer(self.mode, inp, hx[idx], c0, *self._weights(layer, d), reverse=d == 1,
                                      mask=mask)
                outs.append(y)
                hs.append(hn)
                if cn is not None:
                    cs.append(cn)
            inp = outs[0] if num_directions == 1 else _cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                inp = F.dropout(inp, self.dropout, training=True)
        return inp, _stack(hs, 0), (_stack(cs, 0) if cs else None)

    def _forward(self, input, hx, lstm: bool):
        from ..utils.rnn import PackedSequence, _packed_to_padded, _padded_to_packed
        orig_input = input
        mask = None
        batch_sizes = None
        if isinstance(orig_input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = orig_input
            padded, mask = _packed_to_padded(input, batch_sizes)
            max_batch_size = int(batch_sizes[0])
            self.check_input(input, batch_sizes)
            if hx is not None:  # hx is given in the caller's order: sort it like the data
                hx = self._permute_hidden(hx, sorted_indices)
            x = padded
            is_batched = True
        else:
            if input.dim() not in (2, 3):
                what = "" if self.mode in ("LSTM", "GRU") else " tensor"
                name = {"LSTM": "LSTM", "GRU": "GRU"}.get(self.mode, "RNN")
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D{what} instead")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
                if hx is not None:
                    if lstm:
                        if hx[0].dim() != 2 or hx[1].dim() != 2:
                            raise RuntimeError(f"For unbatched 2-D input, hx and cx should also be 2-D but got "
                                               f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                        hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
                    else:
                        if hx.dim() != 2:
                            raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                               f"{hx.dim()}-D tensor")
                        hx = hx.unsqueeze(1)
            elif hx is not None:
                if lstm:
                    if hx[0].dim() != 3 or hx[1].dim() != 3:
                        raise RuntimeError(f"For batched 3-D input, hx and cx should also be 3-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                elif hx.dim() != 3:
                    raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
            self.check_input(input, None)
            x = input.transpose(0, 1) if self.batch_first else input
            max_batch_size = x.size(1)
            sorted_indices = unsorted_indices = None
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            h0 = zeros(self.num_layers * num_directions, max_batch_size, real_hidden, dtype=x.dtype,
                       device=x.device)
            c0 = zeros(self.num_layers * num_directions, max_batch_size, self.hidden_size, dtype=x.dtype,
                       device=x.device) if lstm else None
        else:
            h0, c0 = (hx[0], hx[1]) if lstm else (hx, None)
        expected = self.get_expected_hidden_size(input, batch_sizes)
        if lstm:
            self.check_hidden_size(h0, expected, "Expected hidden[0] size {}, got {}")
            self.check_hidden_size(c0, (expected[0], expected[1], self.hidden_size),
                                   "Expected hidden[1] size {}, got {}")
        else:
            self.check_hidden_size(h0, expected)
        self._check_device_dtype(h0, x)
        y, hn, cn = self._run(x, h0, c0, mask)
        if batch_sizes is not None:
            out = PackedSequence(_padded_to_packed(y, batch_sizes), batch_sizes, sorted_indices, unsorted_indices)
            hn = self._permute_hidden(hn, unsorted_indices)
            if cn is not None:
                cn = self._permute_hidden(cn, unsorted_indices)
        else:
            out = y.transpose(0, 1) if self.batch_first else y
            if not is_batched:
                out = out.squeeze(0 if self.batch_first else 1)
                hn = hn.squeeze(1)
                if cn is not None:
                    cn = cn.squeeze(1)
        return out, ((hn, cn) if lstm else hn)

    @staticmethod
    def _permute_hidden(hx, permutation):
        if permutation is None:
            return hx
        if isinstance(hx, tuple):
            return tuple(h.index_select(1, permutation) for h in hx)
        return hx.index_select(1, permutation)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, *, proj_size: int = 0) -> None:
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx: Tensor | None = None):
        return self._forward(input, hx, lstm=False)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o); proj_size > 0 projects h through weight_hr."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def forward(self, input, hx: tuple[Tensor, Tensor] | None = None):
        return self._forward(input, hx, lstm=True)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n), PyTorch's formulation: n = tanh(W_in x + b_in + r (W_hn h + b_hn))."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, *, proj_size: int = 0) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def forward(self, input, hx: Tensor | None = None):
        return self._forward(input, hx, lstm=False)


# ------------------------------------------------------------------ cells


class RNNCellBase(Module):
    """What the cells share: weight_ih, weight_hh, bias_ih, bias_hh and their initialisation."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for every parameter."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += f", bias={self.bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, mode: str, input: Tensor, hx: Tensor | None, cx: Tensor | None, lstm: bool):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(-1)} expected {self.input_size}")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        B = input.size(0)
        if hx is None:
            hx = zeros(B, self.hidden_size, dtype=input.dtype, device=input.device)
            if lstm:
                cx = zeros(B, self.hidden_size, dtype=input.dtype, device=input.device)
        elif not batched:
            hx = hx.unsqueeze(0)
            cx = cx.unsqueeze(0) if cx is not None else None
        for i, h in enumerate((hx, cx) if lstm else (hx,)):
            if h.size(0) != B:
                raise RuntimeError(f"Input batch size {B} doesn't match hidden{i} batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, expected "
                                   f"{self.hidden_size}")
        _, hn, cn = rnn_layer(mode, input.unsqueeze(0), hx, cx, self.weight_ih, self.weight_hh, self.bias_ih,
                              self.bias_hh)
        if not batched:
            hn = hn.squeeze(0)
            cn = cn.squeeze(0) if cn is not None else None
        return (hn, cn) if lstm else hn


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._step(mode, input, hx, None, lstm=False)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hx is None:
            return self._step("LSTM", input, None, None, lstm=True)
        if not isinstance(hx, (tuple, list)):
            raise TypeError(f"lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, not "
                            f"{type(hx).__name__}")
        if len(hx) != 2:
            raise RuntimeError("lstm_cell expects two hidden states")
        return self._step("LSTM", input, hx[0], hx[1], lstm=True)


class GRUCell(RNNCellBase):
    """One GRU step: returns h'."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("GRU", input, hx, None, lstm=False)
