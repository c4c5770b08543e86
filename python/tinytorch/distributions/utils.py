"""Helpers shared by the distributions (torch.distributions.utils): broadcasting parameters, probs/logits
conversions, lazily computed parameters, and the dtype limits the samplers clamp to."""
from __future__ import annotations

from functools import update_wrapper
from numbers import Number

import numpy as np

import tinytorch
from .._tensor import Size, Tensor

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values) -> tuple:
    """Broadcast tensors and numbers together; numbers become tensors of the first tensor's dtype and device
    (the default dtype when all are numbers)."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        options = {"dtype": tinytorch.get_default_dtype()}
        for v in values:
            if isinstance(v, Tensor):
                options = {"dtype": v.dtype, "device": v.device}
                break
        values = tuple(v if isinstance(v, Tensor) else tinytorch.tensor(v, **options) for v in values)
    return tuple(tinytorch.broadcast_tensors(*values))


def shape_cat(*shapes) -> Size:
    """Concatenate shapes into a Size (sample_shape + batch_shape + event_shape)."""
    out: tuple = ()
    for s in shapes:
        out += tuple(s)
    return Size(out)


def _standard_normal(shape, dtype, device) -> Tensor:
    return tinytorch.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim: int):
    """Sum out the `dim` rightmost dimensions of value."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def finfo(dtype) -> np.finfo:
    """NumPy's limits for a floating tinytorch dtype (eps, tiny, max, min)."""
    return np.finfo(dtype.np)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from log-odds (binary) or from unnormalized log probabilities along the last dim."""
    if is_binary:
        return tinytorch.sigmoid(logits)
    return tinytorch.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Clamp probabilities into [eps, 1 - eps] so that their logs stay finite."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or log probabilities of (clamped) probabilities."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return tinytorch.log(ps_clamped) - tinytorch.log1p(-ps_clamped)
    return tinytorch.log(ps_clamped)


class lazy_property:
    """A parameter computed on first access (with grad enabled) and then stored on the instance, as PyTorch does
    for the probs/logits pair and for MultivariateNormal's matrices."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with tinytorch.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What a lazy_property looks like on the class: a property (for documentation) and a lazy_property
    (for argument validation, which skips parameters not computed yet)."""

    def __init__(self, wrapped) -> None:
        property.__init__(self, wrapped)


def _tril_mask(n: int, diag: int, device) -> Tensor:
    r = tinytorch.arange(n, device=device)
    return r < r.view(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular elements of a (batch of) D x D matrix, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The (batch of) D x D lower-triangular matrix whose row-ordered lower triangle is vec."""
    # positive root of D**2 + (1+2*diag)*D - |diag| * (diag+1) - 2*vec.shape[-1] = 0
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
                         "the lower triangular part of a square D x D matrix.")
    n = round(n)
    mask = _tril_mask(n, diag, vec.device)
    flat = vec.reshape(-1, vec.shape[-1])
    rows = tinytorch.zeros(flat.shape[0], n * n, dtype=vec.dtype, device=vec.device)
    idx = tinytorch.nonzero(mask.reshape(-1)).reshape(1, -1).expand(flat.shape[0], -1)
    return rows.scatter(1, idx, flat).reshape(tuple(vec.shape[:-1]) + (n, n))
