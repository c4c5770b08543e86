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
from .._creation import _finish
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
from ._common import _short, attach, needs_grad, record
from .tensor_methods import (_legacy_new, _not_differentiable, as_strided_, as_strided_scatter, bitwise_left_shift,
                             bitwise_right_shift, eig, igamma, igammac, index_reduce, is_nonzero, is_same_size,
                             is_signed, lstsq, msort, nonzero_static, put, solve, split_with_sizes, symeig)
from .upsampling import pixel_shuffle, pixel_unshuffle
from ._common import user_stacklevel as _user_stacklevel

# ------------------------------------------------------------------ torch.X_(input, ...): the Tensor method X_

_INPLACE = ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_",
            "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
            "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_", "lcm_",
            "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
            "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_",
            "tan_", "tanh_", "trunc_", "xlogy_", "index_put_", "detach_", "resize_as_", "addmv_", "conj_physical_",
            "ldexp_")


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
                  "[start, end).", UserWarning, stacklevel=_user_stacklevel())
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
    return _finish(out, requires_grad)


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


# ------------------------------------------------------------------ constants and memory formats

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None


class memory_format:
    """How a tensor's dims are ordered in memory. tinytorch accepts every format and lays tensors out row-major
    (contiguous_format); the others only change strides, never values."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = contiguous_format  # PyTorch's alias


# ------------------------------------------------------------------ small functional forms of Tensor methods

def fill(input: Tensor, value) -> Tensor:
    """A tensor like input filled with value (out-of-place fill_); the gradient reaches a tensor value only."""
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                           f"dimensions.")
    with _no_grad():
        out = input.detach().clone().fill_(value)
    if needs_grad(input, value):
        tensor_value = isinstance(value, Tensor)
        ins = (input, value) if tensor_value else (input,)

        def fill_backward(g: Tensor):
            gi = g.mul(0) if input._requires_grad else None
            return (gi, g.sum().to(value.dtype) if value._requires_grad else None) if tensor_value else gi
        record("FillBackward1" if tensor_value else "FillBackward0", fill_backward, out, ins)
    return out


def _no_grad():
    from ..autograd.grad_mode import no_grad
    return no_grad()


def get_device(input: Tensor) -> int:
    """input's CUDA index, or -1 on the CPU."""
    return input.get_device()


def is_storage(obj, /) -> bool:
    """Whether obj is a storage (TypedStorage or UntypedStorage)."""
    from ..storage import TypedStorage
    return isinstance(obj, TypedStorage)


def is_distributed(input: Tensor) -> bool:
    """Always False (the legacy distributed-tensor flag)."""
    return False


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """chunk (PyTorch's unsafe_ form skips a view check tinytorch does not make)."""
    return input.chunk(chunks, dim)


def unsafe_split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """split (PyTorch's unsafe_ form skips a view check tinytorch does not make)."""
    return tensor.split(split_size_or_sections, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """split_with_sizes (PyTorch's unsafe_ form skips a view check tinytorch does not make)."""
    return split_with_sizes(input, split_sizes, dim)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialized tensor of shape `size` whose dims lie in memory in physical_layout's order (outermost
    first): empty_permuted((N, C, H, W), (0, 2, 3, 1)) is channels-last."""
    from .._creation import empty
    size, perm = tuple(int(s) for s in size), tuple(int(p) for p in physical_layout)
    if len(size) != len(perm):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; i.e. "
                           f"len(size) = {len(size)} is not equal to len(physical_layout) = {len(perm)}")
    if sorted(perm) != list(builtins.range(len(perm))):
        raise RuntimeError("Duplicate dim not allowed" if len(set(perm)) < len(perm) else
                           f"physical_layout must be a permutation of 0..{len(perm) - 1}, got {list(perm)}")
    phys = empty(tuple(size[p] for p in perm), dtype=dtype, device=device)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    out = _wrap(phys._data.transpose(inverse))
    return _finish(out, requires_grad)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002  (PyTorch's name)
    """The pow-norm over every dim but dim, kept as size-1 dims (weight_norm's g); dim=-1 means the whole norm."""
    if dim == -1:
        return v.norm(pow)
    d = _wrap_dim(dim, v.ndim)
    return v.norm(pow, dim=[i for i in builtins.range(v.ndim) if i != d], keepdim=True)


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Scale, in place and outside autograd, the rows of input named in indices whose norm_type-norm exceeds
    max_norm down to max_norm (what F.embedding(max_norm=...) does to its weight)."""
    if input.ndim != 2:
        raise RuntimeError(f"embedding_renorm_(): Expected 2-D tensor for argument #1 'self' (while checking "
                           f"arguments for embedding_renorm_), but got {input.ndim}-D")
    if indices._data.dtype not in (np.int64, np.int32):
        from ._common import _type_name
        raise RuntimeError(f"Expected tensor for argument #2 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {_type_name(indices.dtype)} instead (while checking arguments for "
                           f"embedding_renorm_)")
    w = input._data
    rows = np.unique(indices.detach().cpu()._data.reshape(-1))
    if rows.size:
        norms = np.linalg.norm(_host(w[rows]).astype(np.float64), ord=norm_type, axis=1)
        big = norms > max_norm
        scale = max_norm / (norms[big] + 1e-7)
        target = rows[big]
        w[target] = w[target] * _to_device(scale.astype(w.dtype), input)[:, None]
    input._bump_version()
    return input


def _host(x):
    return x if type(x) is np.ndarray else x.get()


def histogramdd(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None,  # noqa: A002
                density: bool = False):
    """The D-dimensional histogram of the points in input's last dim (shape (..., D)): bins is one count, a count
    per dim or a tensor of edges per dim; range is [min_0, max_0, min_1, max_1, ...]."""
    from .decompositions import _return_type
    if input.dtype.np.kind not in "fV":
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_short(input.dtype)}'")
    if input.ndim < 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 1 dimension, but got 0")
    d = input.shape[-1]
    pts = _host(input.detach()._data).reshape(-1, d).astype(np.float64)
    if isinstance(bins, builtins.int):
        np_bins = [bins] * d
    else:
        np_bins = [_host(b.detach()._data).astype(np.float64) if isinstance(b, Tensor) else builtins.int(b)
                   for b in bins]
        if len(np_bins) != d:
            raise RuntimeError(f"torch.histogramdd: expected {d} sequences of bin edges for each of the {d} "
                               f"dimensions of the input, but got {len(np_bins)} bin edges sequences")
    rng = None
    if range is not None:
        if len(range) != 2 * d:
            raise RuntimeError(f"torch.histogramdd: for a {d}-dimensional histogram range should have {2 * d} "
                               f"elements, but got {len(range)}")
        rng = [(builtins.float(range[2 * i]), builtins.float(range[2 * i + 1])) for i in builtins.range(d)]
    elif pts.shape[0] == 0:
        rng = [(0.0, 1.0)] * d  # PyTorch's (and NumPy's) edges for an empty input
    w = None if weight is None else _host(weight.detach()._data).reshape(-1).astype(np.float64)
    hist, edges = np.histogramdd(pts, bins=np_bins, range=rng, weights=w, density=density)
    dt = input.dtype.np
    result = _return_type("histogramdd", "hist bin_edges")
    return result(_wrap(_to_device(hist.astype(dt), input)),
                  tuple(_wrap(_to_device(np.asarray(ed).astype(dt), input)) for ed in edges))


# ------------------------------------------------------------------ *_copy: view ops that return fresh memory

def _copy_of(view_name: str):
    """torch.<view>_copy: the view op's result in its own memory; autograd goes through the view's node and a node
    named as PyTorch's (<ViewNode>_copy)."""
    def op(input: Tensor, *args, **kwargs):
        views = getattr(input, view_name)(*args, **kwargs)
        return tuple(_fresh(v, view_name) for v in views) if isinstance(views, tuple) else _fresh(views, view_name)
    op.__name__ = op.__qualname__ = view_name + "_copy"
    op.__doc__ = f"torch.{view_name}, copied into new memory (no aliasing)."
    return op


def _fresh(view: Tensor, view_name: str) -> Tensor:
    xp = np if type(view._data) is np.ndarray else view._data.__array_namespace__()
    out = _wrap(xp.array(view._data, copy=True, order="C"))
    if view._grad_fn is not None:
        node = "".join(w.capitalize() for w in view_name.split("_")) + "Backward0_copy"
        record(node, lambda g: g, out, (view,))
    return out


_VIEW_COPIES = ("alias", "as_strided", "diagonal", "expand", "permute", "select", "slice", "split",
                "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold", "unsqueeze", "view",
                "view_as_complex", "view_as_real")


def _alias(input: Tensor) -> Tensor:
    return input.view(input.shape)


def _slice(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Tensor:
    key = [slice(None)] * input.ndim
    key[_wrap_dim(dim, input.ndim)] = slice(start, end, step)
    return input[tuple(key)]


def _view_as_complex(input: Tensor) -> Tensor:
    from .complex import view_as_complex
    return view_as_complex(input)


def _view_as_real(input: Tensor) -> Tensor:
    from .complex import view_as_real
    return view_as_real(input)


_VIEW_FNS = {"alias": _alias, "slice": _slice, "view_as_complex": _view_as_complex, "view_as_real": _view_as_real}


def _copy_of_fn(name: str):
    fn = _VIEW_FNS.get(name)
    if fn is None:
        return _copy_of(name)

    def op(input: Tensor, *args, **kwargs):
        return _fresh(fn(input, *args, **kwargs), name)
    op.__name__ = op.__qualname__ = name + "_copy"
    op.__doc__ = f"torch.{name}, copied into new memory (no aliasing)."
    return op


globals().update({name + "_copy": _copy_of_fn(name) for name in _VIEW_COPIES})


def detach_copy(input: Tensor) -> Tensor:
    """input's values in new memory; as in PyTorch, an input that requires grad gives an output whose backward
    raises (detach_copy has no derivative)."""
    out = _fresh(input.detach(), "detach")
    if needs_grad(input):
        record("NotImplemented", _not_differentiable("detach_copy"), out, (input,))
    return out


# ------------------------------------------------------------------ LAPACK's QR pieces

def geqrf(input: Tensor):
    """LAPACK's geqrf: R on and above the diagonal of `a`, the Householder vectors below it, and their scales tau
    (not differentiable, as in PyTorch)."""
    from .decompositions import _return_type
    if input.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    if input.dtype.np.kind not in "fc":
        raise NotImplementedError(f"\"geqrf_cpu\" not implemented for '{_short(input.dtype)}'")
    x = _host(input.detach()._data)
    m, n = x.shape[-2:]
    k = min(m, n)
    batch = x.shape[:-2]
    a = np.empty(x.shape, dtype=x.dtype)
    tau = np.empty(batch + (k,), dtype=x.dtype)
    for idx in np.ndindex(batch):
        h, t = np.linalg.qr(x[idx], mode="raw")
        a[idx], tau[idx] = h.T, t[:k]
    result = _return_type("geqrf", "a tau")
    out_a, out_tau = _wrap(_to_device(a, input)), _wrap(_to_device(tau, input))
    if needs_grad(input):
        def geqrf_backward(g_a, g_tau):
            raise RuntimeError("derivative for geqrf is not implemented")
        record("GeqrfBackward0", geqrf_backward, (out_a, out_tau), (input,))
    return result(out_a, out_tau)


def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of Q from geqrf's (a, tau): torch.linalg.householder_product."""
    from ..linalg import householder_product
    return householder_product(input, tau)


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """Q @ other (other @ Q if not left; Q^H if transpose), Q the full m-by-m orthogonal factor of geqrf's (input,
    tau), without forming Q outside this call."""
    from ..linalg import householder_product
    if input.ndim < 2:
        raise RuntimeError("torch.ormqr: input must have at least 2 dimensions.")
    if other.ndim != input.ndim:
        raise RuntimeError(f"torch.ormqr: other.dim() must be equal to input.dim(), but got other.dim() = "
                           f"{other.ndim} and input.dim() = {input.ndim}")
    m, n = input.shape[-2:]
    need = other.shape[-2] if left else other.shape[-1]
    if need != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    # Q is the product of tau's reflectors; zero columns (and zero scales) beyond n are identity reflectors.
    full = input if n == m else input.narrow(-1, 0, min(n, m))
    if full.shape[-1] < m:
        from .._creation import zeros
        pad = zeros(tuple(input.shape[:-1]) + (m - full.shape[-1],), dtype=input.dtype, device=input.device)
        from .shape import cat
        full = cat([full, pad], -1)
    Q = householder_product(full, tau)
    if transpose:
        Q = Q.mH
    return Q @ other if left else other @ Q


# ------------------------------------------------------------------ symbolic-shape helpers, eager control flow

def sym_int(a) -> int:
    """int(a), truncating toward zero (symbolic-shape code calls this on plain numbers too)."""
    return builtins.int(a)


def sym_float(a) -> float:
    """float(a)."""
    return builtins.float(a)


def sym_max(a, b):
    """max(a, b)."""
    return builtins.max(a, b)


def sym_min(a, b):
    """min(a, b)."""
    return builtins.min(a, b)


def sym_not(a) -> bool:
    """not a."""
    return not a


def sym_sqrt(a) -> float:
    """math.sqrt(a)."""
    return math.sqrt(a)


def sym_sum(args):
    """sum(args)."""
    return builtins.sum(args)


def sym_ite(b, t, f):
    """t if b else f."""
    return t if b else f


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred (a bool or one-element tensor) else false_fn(*operands), run eagerly."""
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple that only consists of "
                           f"tensor leaves, but got {operands}.")
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        pred = pred.item()
    return true_fn(*operands) if pred else false_fn(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run body_fn on the carried values while cond_fn holds for them; returns the final values, run eagerly."""
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"carried_inputs must be a tuple or list, got {type(carried_inputs)}")
    carry = tuple(carried_inputs)
    while True:
        c = cond_fn(*carry)
        if isinstance(c, Tensor):
            c = c.item()
        if not c:
            return carry
        out = body_fn(*carry)
        carry = tuple(out) if isinstance(out, (tuple, list)) else (out,)


# ------------------------------------------------------------------ process-wide switches and build queries

def is_anomaly_enabled() -> bool:
    """Whether autograd's anomaly detection is on."""
    from .. import _C
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection also checks backward outputs for NaN."""
    from .. import _C
    return _C._anomaly_check_nan()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn autograd's anomaly detection on or off (torch.autograd.set_detect_anomaly without the context)."""
    from .. import _C
    _C._set_anomaly_enabled(bool(enabled), bool(check_nan))


_warn_always = [False]


def set_warn_always(b: bool, /) -> None:
    """Make once-per-process warnings fire every time (what tests ask for)."""
    _warn_always[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether set_warn_always(True) is in effect."""
    return _warn_always[0]


def set_flush_denormal(mode: bool) -> bool:
    """Whether flushing denormals was set: False, NumPy cannot change the CPU's denormal mode."""
    return False


def compiled_with_cxx11_abi() -> bool:
    """Whether the C++ extension uses the C++11 string ABI (always, with today's compilers)."""
    return True


def is_vulkan_available() -> bool:
    """False: tinytorch has no Vulkan backend."""
    return False


def init_num_threads() -> None:
    """Initialise the intra-op thread pool for this thread (tinytorch's needs no setup)."""


has_lapack = True  # NumPy's linalg
has_spectral = True  # NumPy's fft
has_mkl = False
has_openmp = False


def get_device_module(device=None):
    """The tinytorch submodule for a device type (tinytorch.cuda for 'cuda'); the current accelerator's (or
    tinytorch.cpu) when device is None."""
    from .. import cpu, cuda
    from .._device import device as device_cls
    if device is None:
        return cuda if cuda.is_available() else cpu
    name = device.type if isinstance(device, device_cls) else str(device).split(":")[0]
    mods = {"cpu": cpu, "cuda": cuda}
    if name not in mods:
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered as 'torch.{name}'.")
    return mods[name]


def thread_safe_generator():
    """The generator DataLoader thread workers should use: None (the global generator) outside such workers,
    which is everywhere in tinytorch (its workers are processes)."""
    return None


def from_file(filename: str, shared: bool | None = None, size: int = 0, *, dtype=None, layout=None, device=None,
              pin_memory: bool = False) -> Tensor:
    """A 1-D tensor of `size` elements read from a file's bytes; shared=True maps the file, so that writes to the
    tensor reach the file."""
    from .._dtype import get_default_dtype
    dt = (dtype or get_default_dtype()).np
    nbytes = builtins.int(size) * dt.itemsize
    have = os.path.getsize(filename)
    if have < nbytes:
        raise RuntimeError(f"unable to mmap {nbytes} bytes from file <{filename}>: the file has {have} bytes")
    if shared:
        data = np.memmap(filename, dtype=dt, mode="r+", shape=(builtins.int(size),)).view(np.ndarray)
    else:
        data = np.fromfile(filename, dtype=dt, count=builtins.int(size))
    out = _wrap(data)
    return out if device is None else out.to(device)


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding, dilation, transposed: bool,
                output_padding, groups: int) -> Tensor:
    """aten's generic convolution: conv{1,2,3}d or conv_transpose{1,2,3}d by weight's rank and `transposed`."""
    from .conv import conv3d, conv_transpose3d
    nd = weight.ndim - 2
    fns = {1: (conv1d, conv_transpose1d), 2: (conv2d, conv_transpose2d), 3: (conv3d, conv_transpose3d)}
    if nd not in fns:
        raise RuntimeError(f"Expected 3D, 4D or 5D weight for convolution, but got weight of size "
                           f"{list(weight.shape)}")
    conv, conv_t = fns[nd]
    if transposed:
        return conv_t(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return conv(input, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------ legacy tensor types: torch.FloatTensor, ...

class tensortype(type):
    """The metaclass of torch.FloatTensor and its kin: calling one builds a CPU tensor of its dtype (the legacy
    constructor), and isinstance(t, torch.FloatTensor) tests t's dtype and device."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.is_cpu

    def __call__(cls, *args, device=None) -> Tensor:
        if device is not None and str(device).split(":")[0] != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{str(device).split(':')[0]} was passed")
        return _legacy_new(cls.dtype, None, args, f"{cls.__name__}()")

    def __repr__(cls) -> str:
        return f"<class 'torch.{cls.__name__}'>"


def _legacy_type(name: str, dt) -> type:
    return tensortype(name, (), {"dtype": dt, "is_cuda": False, "is_sparse": False, "__module__": "tinytorch",
                                 "__doc__": f"The legacy CPU tensor type of dtype {dt}."})


def _legacy_types() -> dict:
    from .. import _dtype
    names = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
             "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16",
             "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool_"}
    return {name: _legacy_type(name, getattr(_dtype, dt)) for name, dt in names.items()}


_LEGACY_TYPES = _legacy_types()
globals().update(_LEGACY_TYPES)


def set_default_tensor_type(t) -> None:
    """Deprecated: set the default floating dtype (and device, for 'torch.cuda.*' names) from a legacy tensor
    type or its name."""
    from .._device import set_default_device
    from .._dtype import set_default_dtype
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=_user_stacklevel())
    name = t if isinstance(t, str) else f"torch.{getattr(t, '__name__', t)}"
    parts = name.split(".")
    if parts[0] != "torch" or len(parts) not in (2, 3) or (len(parts) == 3 and parts[1] != "cuda"):
        raise TypeError(f"invalid type: '{name}'")
    cls = _LEGACY_TYPES.get(parts[-1])
    if cls is None:
        raise AttributeError(f"module 'torch' has no attribute '{parts[-1]}'")
    if not cls.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    set_default_dtype(cls.dtype)
    set_default_device("cuda" if len(parts) == 3 else None)


attach(ger=ger, select_scatter=select_scatter, slice_scatter=slice_scatter, diagonal_scatter=diagonal_scatter,
       geqrf=geqrf, orgqr=orgqr, ormqr=ormqr)

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
    "slice_scatter", "diagonal_scatter", "put", "fill", "get_device", "is_storage", "is_distributed",
    "bitwise_left_shift", "bitwise_right_shift", "igamma", "igammac", "as_strided_", "as_strided_scatter",
    "nonzero_static", "eig", "symeig", "lstsq", "solve", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
    "empty_permuted", "norm_except_dim", "embedding_renorm_", "histogramdd", "detach_copy", "geqrf", "orgqr",
    "ormqr", "e", "pi", "inf", "nan", "newaxis", "memory_format", "contiguous_format", "channels_last",
    "channels_last_3d", "preserve_format", "legacy_contiguous_format", "sym_int", "sym_float", "sym_max", "sym_min",
    "sym_not", "sym_sqrt", "sym_sum", "sym_ite", "cond", "while_loop", "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled", "set_anomaly_enabled", "set_warn_always", "is_warn_always_enabled",
    "set_flush_denormal", "compiled_with_cxx11_abi", "is_vulkan_available", "init_num_threads", "has_lapack",
    "has_spectral", "has_mkl", "has_openmp", "get_device_module", "thread_safe_generator", "from_file",
    "convolution", "set_default_tensor_type",
] + [name + "_copy" for name in _VIEW_COPIES] + list(_LEGACY_TYPES)
