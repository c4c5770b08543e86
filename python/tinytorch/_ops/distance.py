"""Distances between sets of vectors: cdist, pdist, dist.

Each is made of differentiable tensor ops (differences, then Tensor.norm), so gradients, double ones included,
follow; cdist's Euclidean distances take PyTorch's matrix-product route when it would.
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._common import _short, attach

__all__ = ["cdist", "pdist", "dist"]

_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _pnorm(diff: Tensor, p: float) -> Tensor:
    """The p-norm over the last dim (0 for vectors of no elements, whatever p)."""
    if diff.shape[-1] == 0:
        from .._creation import zeros
        return zeros(*diff.shape[:-1], dtype=diff.dtype, device=diff.device)
    return diff.norm(p, -1)


def _euclidean_by_mm(x1: Tensor, x2: Tensor) -> Tensor:
    """sqrt(|x1|^2 - 2 x1.x2 + |x2|^2) from one matrix product (PyTorch's _euclidean_dist): light on memory for
    many rows, at the cost of some cancellation error; the clamp keeps rounding below zero out of sqrt."""
    from .shape import cat
    n1 = x1.pow(2).sum(-1, keepdim=True)
    n2 = x2.pow(2).sum(-1, keepdim=True)
    a = cat([x1 * -2, n1, n1.new_ones(n1.shape)], -1)
    b = cat([x2, n2.new_ones(n2.shape), n2], -1)
    return a.matmul(b.transpose(-2, -1)).clamp_min(1e-30).sqrt()


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R),
    batch dims broadcast. p = 2 uses a matrix product when compute_mode asks for it, or, by default, when
    P or R exceeds 25 (as PyTorch)."""
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_short(x.dtype)}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {_short(x1.dtype)} but found {_short(x2.dtype)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    if p == 2 and x1.shape[-1] and (compute_mode == "use_mm_for_euclid_dist" or
                                    (compute_mode == _COMPUTE_MODES[0] and (rows1 > 25 or rows2 > 25))):
        return _euclidean_by_mm(x1, x2)
    return _pnorm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distance between every pair of rows i < j of an (N, M) tensor, in row-major order: the upper
    triangle of cdist(input, input) without its diagonal, N (N - 1) / 2 values."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from .._creation import tensor
    i, j = np.triu_indices(input.shape[0], 1)
    rows = tensor(np.stack([i, j]).reshape(-1), device=input.device)
    pairs = input.index_select(0, rows).reshape(2, len(i), input.shape[1])
    return _pnorm(pairs[0] - pairs[1], p)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of input - other (broadcast), over all elements: a 0-D tensor."""
    d = input - other
    if not (d.dtype.is_floating_point or d.dtype.is_complex):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got {_short(d.dtype)} "
                           "instead.")
    if d.numel() == 0 and (p < 0 or p == float("inf")):  # the max and the negative norms have no identity
        raise RuntimeError(f"linalg.vector_norm cannot compute the {float(p):g} norm on an empty tensor because the "
                           "operation does not have an identity")
    return _pnorm((d.abs() if d.dtype.is_complex else d).reshape(-1), p)


attach(dist=dist)
