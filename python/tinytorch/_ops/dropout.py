"""Channel dropout (dropout1d/2d/3d: whole feature maps zeroed together) and alpha dropout (keeps SELU's
self-normalising mean and variance). Masks are drawn by the elementwise dropout op, so the generator and
device handling live in one place."""
from __future__ import annotations

import warnings

from .._tensor import Tensor
from .nn import dropout
from ._common import user_stacklevel as _user_stacklevel


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _channel_dropout(name: str, nd: int, input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    _check_p(p)
    shape = tuple(input._data.shape)
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: Expected {nd + 1}D or {nd + 2}D input, but received a {len(shape)}D input. "
                           f"Note that {name} exists to provide channel-wise dropout on inputs with {nd} spatial "
                           f"dimension{'s' if nd > 1 else ''}, a channel dimension, and an optional batch dimension "
                           f"(i.e. {nd + 1}D or {nd + 2}D inputs).")
    if not training or p == 0.0:
        return input
    batched = len(shape) == nd + 2
    lead = shape[:2] if batched else shape[:1]
    from .._creation import ones
    # One keep/scale factor per (sample, channel), broadcast over the spatial dims.
    mask = dropout(ones(lead + (1,) * nd, dtype=input.dtype, device=input.device), p, True)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) input with probability p; scale the rest by 1/(1-p)."""
    return _channel_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) input with probability p; scale the rest by 1/(1-p)."""
    if input._data.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=_user_stacklevel())
        return _channel_dropout("dropout2d", 1, input, p, training, inplace)
    return _channel_dropout("dropout2d", 2, input, p, training, inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) input with probability p; scale the rest by 1/(1-p)."""
    return _channel_dropout("dropout3d", 3, input, p, training, inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that sets dropped units to SELU's negative saturation and rescales to keep mean 0, variance 1."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    from .._creation import ones
    keep = dropout(ones(tuple(input._data.shape), dtype=input.dtype, device=input.device), p, True) * (1.0 - p)
    alpha_p = -_SELU_ALPHA * _SELU_SCALE
    a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * p
    out = (input * keep + (1.0 - keep) * alpha_p) * a + b
    if inplace and not input.requires_grad:
        input._data[...] = out._data  # PyTorch's in-place alpha dropout writes the input
        input._bump_version()
        return input
    return out


__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout"]
