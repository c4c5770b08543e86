"""torch.* names for ops that live elsewhere (the F.* layers PyTorch also exports at the top, the in-place torch.X_ forms) and
the small top-level utilities (trapezoid, unravel_index, scalar_tensor, interop threads, ...)."""
from __future__ import annotations

import builtins
import math
import os
import warnings

import numpy as np

from .._tensor_str import set_printoptions
from .._tensor import Tensor, _wrap, _wrap_dim
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from .ctc import ctc_loss as _ctc_loss
from .dropout import alpha_dropout as _alpha_dropout
from .indexing import embedding as _embedding
from .linalg import outer
from .loss import (cosine_embedding_loss as _cosine_embedding_loss, hinge_embedding_loss as _hinge_embedding_loss,
                   margin_ranking_loss as _margin_ranking_loss, poisson_nll_loss as _poisson_nll_loss,
                   triplet_margin_loss as _triplet_margin_loss)
from .nn import (binary_cross_entropy_with_logits as _bce_with_logits, dropout as _dropout,
                 layer_norm as _layer_norm, linear as _linear, pad as _pad)
from .normalization import (batch_norm as _batch_norm, group_norm as _group_norm, instance_norm as _instance_norm,
                            rms_norm)
from .pooling import (adaptive_avg_pool1d, adaptive_max_pool1d_with_indices, avg_pool1d, max_pool1d,
                      max_pool1d_with_indices, max_pool2d)
from .tensor_methods import index_reduce, is_nonzero, is_same_size, is_signed, msort, split_with_sizes
from .upsampling import pixel_shuffle, pixel_unshuffle

# ------------------------------------------------------------------ torch.X_(input, ...): the Tensor method X_

_INPLACE = ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_",
            "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
            "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_", "lcm_",
            "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
            "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_",
            "tan_", "tanh_", "trunc_", "xlogy_", "index_put_", "detach_", "resize_as_")


def _method_call(name: str):
    def fn(input: Tensor, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"In-place form: input.{name}(...) (writes input and returns it)."
    return fn


globals().update({name: _method_call(name) for name in _INPLACE})


def detach(input: Tensor) -> Tensor:
    """input.detach(): the same values, cut from the graph."""
    return input.detach()


# ------------------------------------------------------------------ dropout, with PyTorch's positional `train`

def _check_p(p: float) -> None:
    # aten's check: a RuntimeError, where F.dropout raises ValueError
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Elementwise dropout (torch.dropout: train is required and positional)."""
    _check_p(p)
    return _dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place dropout."""
    _check_p(p)
    return _dropout(input, p, train, True)


def _feature_applies(input: Tensor, p: float, train: bool) -> bool:
    """Whether channel dropout changes input, checked in aten's order: p, then train/p == 0/empty, then the rank."""
    _check_p(p)
    if p == 0.0 or not train or input._data.size == 0:
        return False
    if input._data.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return True


def _feature_mask(input: Tensor, p: float) -> Tensor:
    """A keep mask (0 or 1/(1-p)) with one entry per (sample, channel), broadcast over the remaining dims."""
    from .._creation import ones
    shape = tuple(input._data.shape)
    return _dropout(ones(shape[:2] + (1,) * (len(shape) - 2), dtype=input.dtype, device=input.device), p, True)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout of whole channels (dim 1) of an (N, C, *) input."""
    if not _feature_applies(input, p, train):
        return input
    return input * _feature_mask(input, p)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place channel dropout."""
    if not _feature_applies(input, p, train):
        return input
    return input.mul_(_feature_mask(input, p))


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout (keeps SELU's mean and variance)."""
    _check_p(p)
    return _alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout."""
    _check_p(p)
    return _alpha_dropout(input, p, train, True)


_SELU_NEG = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946


def _feature_alpha(input: Tensor, p: float, train: bool) -> Tensor | None:
    """Alpha dropout of whole channels; None when it leaves input unchanged."""
    if not _feature_applies(input, p, train):
        return None
    if p == 1.0:
        return input * 0.0
    keep = _feature_mask(input, p) * (1.0 - p)
    a = ((1 - p) * (1 + p * _SELU_NEG ** 2)) ** -0.5
    return (input * keep + (1.0 - keep) * _SELU_NEG) * a - a * _SELU_NEG * p


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Alpha dropout of whole channels (dim 1)."""
    out = _feature_alpha(input, p, train)
    return input if out is None else out


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place alpha dropout of whole channels."""
    out = _feature_alpha(input, p, train)
    return input if out is None else input.copy_(out)


def native_dropout(input: Tensor, p: float, train: bool | None):
    """(output, bool keep mask): dropout that also hands back which elements it kept; train=None means training.
    Out of training the output is a copy of input and the mask all True."""
    from .._creation import _generator_for
    from ._common import needs_grad, record
    x = input._data
    if train is None or train:
        if not 0.0 <= 1.0 - p <= 1.0:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={1.0 - p}")
        keep = _generator_for(input.device, None).random(x.shape, dtype=np.float32) >= p
        keep = _to_device(keep, input)
        scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    else:
        keep = _to_device(np.ones(x.shape, dtype=np.bool_), input)
        scale = 1.0
    out = _wrap((x * keep * scale).astype(x.dtype, copy=False))
    if needs_grad(input):
        mask = _wrap(keep)
        record("NativeDropoutBackward0", lambda g: g * mask * scale, out, (input,))
    return out, _wrap(keep)


def _to_device(array, like: Tensor):
    from .._device import move
    return move(array, like.device)


# ------------------------------------------------------------------ normalization, with aten's argument orders

def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enable: bool = True) -> Tensor:
    """F.layer_norm (cudnn_enable is accepted and ignored)."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None, bias: Tensor | None, eps: float):
    """(output, mean, rstd), the statistics shaped input.shape[:-k] + (1,) * k for k normalised dims."""
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    out = _layer_norm(input, ns, weight, bias, eps)
    dims = tuple(builtins.range(-len(ns), 0))
    var, mean = input.var_mean(dim=dims, keepdim=True, correction=0)
    return out, mean, (var + eps).rsqrt()


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enabled: bool = True) -> Tensor:
    """F.group_norm (cudnn_enabled is accepted and ignored)."""
    return _group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, training: bool, momentum: float, eps: float,
               cudnn_enabled: bool) -> Tensor:
    """F.batch_norm with aten's argument order (weight and bias first)."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                      running_var: Tensor | None, training: bool, momentum: float, eps: float):
    """(output, save_mean, save_invstd): the batch statistics per channel when training, empty tensors otherwise."""
    out = _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        from .._creation import empty
        return out, empty(0, dtype=input.dtype, device=input.device), empty(0, dtype=input.dtype, device=input.device)
    dims = (0,) + tuple(builtins.range(2, input._data.ndim))
    var, mean = input.detach().var_mean(dim=dims, correction=0)
    return out, mean, (var + eps).rsqrt()


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                  running_var: Tensor | None, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """F.instance_norm with aten's argument order (weight and bias first)."""
    return _instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of weight at indices (weight comes first; padding_idx -1 means none)."""
    return _embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                      scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple:
    """(values, indices) of adaptive max pooling over the last dim (torch.* always returns both)."""
    return adaptive_max_pool1d_with_indices(input, output_size)


def constant_pad_nd(input: Tensor, pad, value: float = 0) -> Tensor:
    """Pad (or crop, with negative amounts) the trailing dims with a constant."""
    return _pad(input, tuple(pad), "constant", value)


# ------------------------------------------------------------------ losses: torch.* takes reduction as an int enum

# The torch.* loss bindings declare `int reduction=Mean`, but PyTorch's argument parser reads that default as 0:
# called without reduction they do not reduce. Any int other than 1 (mean) and 2 (sum) also leaves the loss unreduced.
_UNREDUCED = 0


def _reduction(r: int, op: str) -> str:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'reduction' must be int, not {type(r).__name__}")
    return {1: "mean", 2: "sum"}.get(int(r), "none")


def _reduce(loss: Tensor, reduction: int, op: str) -> Tensor:
    r = _reduction(reduction, op)
    return loss.mean() if r == "mean" else loss.sum() if r == "sum" else loss


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None, reduction: int = _UNREDUCED) -> Tensor:
    """F.binary_cross_entropy_with_logits with aten's arguments (reduction 0/1/2)."""
    r = _reduction(reduction, "binary_cross_entropy_with_logits")
    return _bce_with_logits(input, target, weight, reduction=r, pos_weight=pos_weight)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = _UNREDUCED) -> Tensor:
    """F.cosine_embedding_loss with reduction 0/1/2."""
    r = _reduction(reduction, "cosine_embedding_loss")
    return _cosine_embedding_loss(input1, input2, target, margin, reduction=r)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: int = _UNREDUCED, zero_infinity: bool = False) -> Tensor:
    """F.ctc_loss with reduction 0/1/2."""
    r = _reduction(reduction, "ctc_loss")
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, r, zero_infinity)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = _UNREDUCED) -> Tensor:
    """F.hinge_embedding_loss with reduction 0/1/2."""
    return _hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def kl_div(input: Tensor, target: Tensor, reduction: int = _UNREDUCED, *, log_target: bool = False) -> Tensor:
    """Pointwise KL divergence target * (log target - input); reduction 1 is the plain elementwise mean, 2 the sum."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    return _reduce(loss, reduction, "kl_div")


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = _UNREDUCED) -> Tensor:
    """F.margin_ranking_loss with reduction 0/1/2."""
    return _margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    """F.poisson_nll_loss with every argument required and reduction 0/1/2."""
    r = _reduction(reduction, "poisson_nll_loss")
    return _poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=r)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, reduction: int = _UNREDUCED) -> Tensor:
    """F.triplet_margin_loss with reduction 0/1/2."""
    r = _reduction(reduction, "triplet_margin_loss")
    return _triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=r)


# ------------------------------------------------------------------ functional RNN cells

def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    """One Elman step: tanh(input W_ih^T + b_ih + hx W_hh^T + b_hh)."""
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).tanh()


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
                  b_hh: Tensor | None = None) -> Tensor:
    """One Elman step with relu."""
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).relu()


def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
              b_hh: Tensor | None = None) -> tuple:
    """One LSTM step; hx is (h, c); returns (h', c') with PyTorch's gate order i, f, g, o."""
    h, c = hx
    i, f, g, o = (_linear(input, w_ih, b_ih) + _linear(h, w_hh, b_hh)).chunk(4, -1)
    c2 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c2.tanh(), c2


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    """One GRU step with PyTorch's gate order r, z, n (the reset gate scales the hidden part of n)."""
    ir, iz, in_ = _linear(input, w_ih, b_ih).chunk(3, -1)
    hr, hz, hn = _linear(hx, w_hh, b_hh).chunk(3, -1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return (1 - z) * n + z * hx


# ------------------------------------------------------------------ integration and differentiation of samples

def _along(values: Tensor, dim: int, ndim: int) -> Tensor:
    """A 1-D tensor reshaped to broadcast along dim of an ndim-D tensor."""
    return values.reshape((-1,) + (1,) * (ndim - 1 - dim))


def _float_like(y: Tensor) -> Tensor:
    from .._dtype import get_default_dtype
    return y if y._data.dtype.kind in "fVc" else y.to(get_default_dtype())


def _trapezoid_terms(y: Tensor, x: Tensor | None, dx, dim: int) -> Tensor:
    """The areas of the single trapezoids along dim (one fewer than y has samples)."""
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments: pass x or dx, not both")
    nd = y._data.ndim
    d = _wrap_dim(dim, nd)
    n = y._data.shape[d]
    mids = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) if n > 0 else y.narrow(d, 0, 0)
    if x is None:
        return mids * ((1 if dx is None else dx) / 2)
    if x._data.ndim == 1:
        if x._data.shape[0] != n:
            raise RuntimeError(f"trapezoid: There must be one `x` value for each sample point, but got "
                               f"{x._data.shape[0]} `x` values and {n} sample points in dim {d}")
        widths = _along(x.diff() if n > 0 else x, d, nd)
    else:
        xd = _wrap_dim(dim, x._data.ndim)
        widths = x.diff(dim=xd) if x._data.shape[xd] > 0 else x
    return mids * widths / 2


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along dim: with sample points x, or evenly spaced dx apart (1 by default)."""
    terms = _trapezoid_terms(y, x, dx, dim)
    return _float_like(terms).sum(dim) if terms._data.dtype.kind in "iub" else terms.sum(dim)


def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """Alias of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along dim (one fewer element than y has samples there)."""
    terms = _float_like(_trapezoid_terms(y, x, dx, dim))
    return terms.cumsum(_wrap_dim(dim, y._data.ndim))


def _gradient_dims(input: Tensor, dim) -> list:
    nd = input._data.ndim
    if dim is None:
        return list(builtins.range(nd))
    dims = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
    out = [_wrap_dim(int(d), nd) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError("torch.gradient expected each dim to appear at most once")
    return out


def _coefficients(coords: np.ndarray, edge_order: int):
    """Per-point weights (a, b, c) of f[i-1], f[i], f[i+1] (interior) and the two edge stencils, from the
    sample coordinates: NumPy's second-order formulas for uneven spacing."""
    h = np.diff(coords)
    h1, h2 = h[:-1], h[1:]
    interior = (-h2 / (h1 * (h1 + h2)), (h2 - h1) / (h1 * h2), h1 / (h2 * (h1 + h2)))
    if edge_order == 1:
        first = (-1 / h[0], 1 / h[0], 0.0)
        last = (0.0, -1 / h[-1], 1 / h[-1])
    else:
        a1, a2 = h[0], h[1]
        first = (-(2 * a1 + a2) / (a1 * (a1 + a2)), (a1 + a2) / (a1 * a2), -a1 / (a2 * (a1 + a2)))
        b1, b2 = h[-2], h[-1]
        last = (b2 / (b1 * (b1 + b2)), -(b1 + b2) / (b1 * b2), (2 * b2 + b1) / (b2 * (b1 + b2)))
    return interior, first, last


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """Central differences of sampled values along each dim (one-sided of order edge_order at the ends);
    spacing is a scalar, one scalar per dim, or one coordinate tensor per dim. Returns one tensor per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2. Got {edge_order}")
    dims = _gradient_dims(input, dim)
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    y = _float_like(input)
    nd = y._data.ndim
    out = []
    for d, s in zip(dims, spacings):
        n = y._data.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        if isinstance(s, Tensor):
            if s._data.ndim != 1 or s._data.shape[0] != n:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and have size "
                                   f"{n} along dim {d}")
            coords = np.asarray(s.detach().cpu()._data, dtype=np.float64)
        else:
            coords = np.arange(n, dtype=np.float64) * float(s.item() if hasattr(s, "item") else s)
        (ia, ib, ic), first, last = _coefficients(coords, edge_order)

        def w(v) -> Tensor:
            return _along(_wrap(_to_device(np.asarray(v, dtype=y._data.dtype).reshape(-1), y)), d, nd)

        def at(i: int, k: int = 1) -> Tensor:
            return y.narrow(d, i, k)
        pieces = [first[0] * at(0) + first[1] * at(1) + (first[2] * at(2) if edge_order == 2 else 0.0)]
        if n > 2:
            pieces.append(w(ia) * at(0, n - 2) + w(ib) * at(1, n - 2) + w(ic) * at(2, n - 2))
        pieces.append((last[0] * at(n - 3) if edge_order == 2 else 0.0) + last[1] * at(n - 2) + last[2] * at(n - 1))
        from .shape import cat
        out.append(cat(pieces, d))
    return tuple(out)


# ------------------------------------------------------------------ small utilities

def unravel_index(indices: Tensor, shape) -> tuple:
    """The multi-dimensional coordinates (int64 tensors shaped like indices) of flat indices into shape; out-of-range
    and negative indices wrap modulo each size, as in PyTorch."""
    from .._creation import tensor as make_tensor
    idx = indices if isinstance(indices, Tensor) else make_tensor(indices)
    if idx._data.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {idx.dtype}")
    if isinstance(shape, (int, np.integer)):
        sizes = (int(shape),)
    elif isinstance(shape, (tuple, list)):
        for s in shape:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(s)}")
        sizes = tuple(int(s) for s in shape)
    else:
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    if any(s < 0 for s in sizes):
        raise ValueError(f"'shape' cannot have negative values, but got {sizes}")
    if 0 in sizes:
        raise RuntimeError(f"ZeroDivisionError: no flat index falls inside shape {sizes}, which has a zero size")
    x = idx._data
    flat = x.astype(np.int64)
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    coords, stride = [], 1
    for size in reversed(sizes):
        coords.append(xp.asarray(flat // stride % size))
        stride *= size
    return tuple(_wrap(c) for c in reversed(coords))


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad: bool = False) -> Tensor:
    """A 0-d tensor holding s, in the default float dtype unless told."""
    from .._creation import tensor as make_tensor
    from .._dtype import get_default_dtype
    return make_tensor(s, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad: bool = False) -> Tensor:
    """Deprecated: start, start + step, ... up to and including end, in the default float dtype."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=3)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    from .._creation import tensor as make_tensor
    from .._dtype import get_default_dtype
    n = int(math.floor((end - start) / step)) + 1
    return make_tensor(start + step * np.arange(n, dtype=np.float64), dtype=dtype or get_default_dtype(),
                       device=device, requires_grad=requires_grad)


# tinytorch runs no inter-op thread pool: the count is recorded for get_num_interop_threads and changes nothing.
_interop_threads = [os.cpu_count() or 1]


def get_num_interop_threads() -> int:
    """The recorded inter-op thread count (the CPU count unless set)."""
    return _interop_threads[0]


def set_num_interop_threads(num: int) -> None:
    """Record the inter-op thread count (no pool exists, so unlike PyTorch it may be set at any time)."""
    if not isinstance(num, (int, np.integer)) or isinstance(num, bool) or num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    _interop_threads[0] = int(num)


def is_inference(input: Tensor) -> bool:
    """Whether input was made in inference mode."""
    return input.is_inference()


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor sharing the memory of an object with the buffer protocol."""
    nbytes = memoryview(buffer).nbytes
    if nbytes == 0 or count == 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if offset < 0 or offset >= nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({nbytes} bytes) minus 1")
    itemsize = np.dtype(dtype.np).itemsize
    if count < 0 and (nbytes - offset) % itemsize:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} bytes) must be a multiple "
                         f"of element size ({itemsize})")
    if count > 0 and count * itemsize > nbytes - offset:
        raise ValueError(f"requested buffer length ({count} * {itemsize} bytes) after offset ({offset} bytes) must "
                         f"not be greater than actual buffer length ({nbytes} bytes)")
    out = _wrap(np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset))
    return out.requires_grad_() if requires_grad else out


class _Capsule:
    """Hands a bare DLPack capsule to NumPy, which only consumes objects with __dlpack__."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def to_dlpack(tensor: Tensor):
    """A DLPack capsule sharing tensor's memory."""
    return tensor._data.__dlpack__()


def from_dlpack(ext_tensor, *, device=None, copy: bool | None = None) -> Tensor:
    """A tensor sharing the memory of a DLPack producer (an object with __dlpack__, or a capsule)."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor)
    if hasattr(ext_tensor, "__dlpack_device__") and ext_tensor.__dlpack_device__()[0] == 2:
        import cupy
        out = _wrap(cupy.from_dlpack(ext_tensor))
    else:
        out = _wrap(np.from_dlpack(ext_tensor))
    return out if device is None else out.to(device)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson(input) counts, in input's dtype, drawn from tinytorch's CPU generator (or `generator`)."""
    from .._creation import _generator_for
    from .._device import CPU
    rate = np.asarray(input.detach().cpu()._data, dtype=np.float64)
    if (rate < 0).any():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    sample = _generator_for(CPU, generator).poisson(rate)
    return _wrap(_to_device(np.asarray(sample).astype(input._data.dtype), input))


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial(count, prob) counts, in prob's dtype."""
    from .._creation import _generator_for
    from .._device import CPU
    n = np.asarray(count.detach().cpu()._data, dtype=np.float64)
    p = np.asarray(prob.detach().cpu()._data, dtype=np.float64)
    sample = _generator_for(CPU, generator).binomial(n.astype(np.int64), np.clip(p, 0.0, 1.0))
    return _wrap(_to_device(np.asarray(sample).astype(prob._data.dtype), prob))


def typename(obj, /) -> str:
    """The type name of obj: a tensor's type() string, else module.qualname (bare for builtins)."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """The sum of singular values of the matrices in dims dim (the last two by default)."""
    from .. import linalg
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim) overload
        dim, keepdim = None, dim
    return linalg.matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else tuple(dim), keepdim=keepdim)


def frobenius_norm(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """The square root of the sum of squares over dims dim."""
    from .. import linalg
    return linalg.vector_norm(input, 2, dim=dim, keepdim=keepdim)


def matrix_rank(input: Tensor, tol=None, symmetric: bool = False, *, out=None) -> Tensor:
    """Removed in PyTorch 1.9: raises, pointing to linalg.matrix_rank, as PyTorch does."""
    raise RuntimeError("This function was deprecated since version 1.9 and is now removed.\nPlease use the "
                       "`torch.linalg.matrix_rank` function instead. The parameter 'symmetric' was renamed in "
                       "`torch.linalg.matrix_rank()` to 'hermitian'.")


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """Alias of outer."""
    return outer(input, vec2)


# ------------------------------------------------------------------ scatters of a tensor into a view of a copy

def _scatter_into(input: Tensor, src: Tensor, key, part: Tensor, src_dim: int | None = None) -> Tensor:
    """A copy of input whose part input[key] is replaced by src (differentiable in both). src_dim moves src's last
    dim there first (where NumPy puts the dim of adjacent advanced indices)."""
    if tuple(src._data.shape) != tuple(part._data.shape):
        # PyTorch says "slice" for select_scatter and diagonal_scatter too
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._data.shape)}, slice size = {list(part._data.shape)}")
    out = input.clone()
    out[key] = src if src_dim is None else src.movedim(-1, src_dim)
    return out


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """input with input.select(dim, index) replaced by src."""
    d = _wrap_dim(dim, input._data.ndim)
    return _scatter_into(input, src, (slice(None),) * d + (index,), input.select(d, index))


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    """input with input[..., start:end:step, ...] (on dim) replaced by src."""
    d = _wrap_dim(dim, input._data.ndim)
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_into(input, src, key, input[key])


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """input with input.diagonal(offset, dim1, dim2) replaced by src."""
    nd = input._data.ndim
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    part = input.diagonal(offset, d1, d2)
    k = np.arange(part._data.shape[-1])
    key = [slice(None)] * nd
    key[d1], key[d2] = _wrap(k + max(-offset, 0)), _wrap(k + max(offset, 0))
    # NumPy keeps adjacent advanced indices' dim in place and moves separated ones to the front.
    src_dim = min(d1, d2) if abs(d1 - d2) == 1 else 0
    return _scatter_into(input, src, tuple(key), part, src_dim)


__all__ = list(_INPLACE) + [
    "detach", "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
    "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout", "layer_norm", "native_layer_norm",
    "group_norm", "batch_norm", "native_batch_norm", "instance_norm", "rms_norm", "embedding", "conv1d", "conv2d",
    "conv_transpose1d", "conv_transpose2d", "avg_pool1d", "max_pool1d", "max_pool2d", "max_pool1d_with_indices",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "pixel_shuffle", "pixel_unshuffle", "constant_pad_nd",
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss", "hinge_embedding_loss", "kl_div",
    "margin_ranking_loss", "poisson_nll_loss", "triplet_margin_loss", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell",
    "gru_cell", "trapezoid", "trapz", "cumulative_trapezoid", "gradient", "unravel_index", "scalar_tensor", "range",
    "get_num_interop_threads", "set_num_interop_threads", "is_inference", "is_nonzero", "is_same_size", "is_signed",
    "frombuffer", "to_dlpack", "from_dlpack", "poisson", "binomial", "set_printoptions", "typename", "nuclear_norm",
    "frobenius_norm", "matrix_rank", "ger", "index_reduce", "msort", "split_with_sizes", "select_scatter",
    "slice_scatter", "diagonal_scatter",
]
