"""torch.linalg: the norms (vector_norm, matrix_norm, norm) here, with PyTorch's arguments, defaults and errors,
and the decompositions and solves (inv, det, cholesky, qr, eigh, svd, solve, lstsq, lu, ...) from
_ops/decompositions.py.

The norms are made of differentiable ops (the 2-norm is one kernel, `Tensor.norm`; ord 2, -2 and 'nuc' take
the singular values from svdvals), so gradients follow.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from ._ops._common import _short
from ._ops.decompositions import (LinAlgError, linalg_cholesky as cholesky, linalg_cholesky_ex as cholesky_ex,
                                  linalg_cross as cross, linalg_det as det, linalg_diagonal as diagonal,
                                  linalg_eigh as eigh, linalg_eigvalsh as eigvalsh, linalg_inv as inv,
                                  linalg_inv_ex as inv_ex, linalg_lstsq as lstsq, linalg_lu as lu,
                                  linalg_lu_factor as lu_factor, linalg_lu_factor_ex as lu_factor_ex,
                                  linalg_lu_solve as lu_solve, linalg_matrix_exp as matrix_exp,
                                  linalg_matrix_power as matrix_power, linalg_matrix_rank as matrix_rank,
                                  linalg_multi_dot as multi_dot, linalg_pinv as pinv, linalg_qr as qr,
                                  linalg_slogdet as slogdet, linalg_solve as solve, linalg_solve_ex as solve_ex,
                                  linalg_solve_triangular as solve_triangular, linalg_svd as svd,
                                  linalg_svdvals as svdvals, linalg_vecdot as vecdot)
from ._tensor import Tensor, _wrap_dim

__all__ = ["vector_norm", "matrix_norm", "norm", "LinAlgError", "cholesky", "cholesky_ex", "cross", "det",
           "diagonal", "eigh", "eigvalsh", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
           "matrix_exp", "matrix_power", "matrix_rank", "multi_dot", "pinv", "qr", "slogdet", "solve", "solve_ex",
           "solve_triangular", "svd", "svdvals", "vecdot"]

Dim = Union[int, Sequence[int], None]


def _float_input(x: Tensor, dtype, what: str) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.{what}: Expected a floating point or complex tensor as input. Got "
                           f"{_short(x.dtype.np)}")
    return x


def vector_norm(x: Tensor, ord: float = 2, dim: Dim = None, keepdim: bool = False, *, dtype=None,
                out=None) -> Tensor:
    """The vector ord-norm of x over dim (all of x when None): ord inf, -inf, 0, or any other real number."""
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    x = _float_input(x, dtype, "vector_norm")
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    ord = float(ord)
    dims = range(x.ndim) if dim is None else [dim] if isinstance(dim, int) else dim
    if (ord < 0 or ord == math.inf) and any(x.shape[d] == 0 for d in dims):  # reducing over nothing
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because the "
                           "operation does not have an identity")
    if ord >= 0 or ord == -math.inf:
        r = x.norm(ord, dim, keepdim)
    else:  # negative: (sum |x|^ord)^(1/ord), 0 where an element is 0
        r = x.abs().pow(ord).sum(dim if dim is not None else (), keepdim).pow(1.0 / ord)
    if out is not None:
        return out.copy_(r)
    return r


def _matrix_dims(x: Tensor, dim) -> tuple:
    if not isinstance(dim, (list, tuple)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    if x.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    d0, d1 = (_wrap_dim(d, x.ndim) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A: Tensor, ord: Union[str, float] = "fro", dim: Sequence[int] = (-2, -1), keepdim: bool = False,
                *, dtype=None, out=None) -> Tensor:
    """The matrix norm of A over the two dims: 'fro', 'nuc' (the sum of the singular values), ord 2 / -2 (the
    largest / smallest singular value), inf / -inf (max / min row sum of |A|) and 1 / -1 (max / min column sum)."""
    A = _float_input(A, dtype, "matrix_norm")
    d0, d1 = _matrix_dims(A, dim)
    if ord == "fro":
        r = A.norm(2, (d0, d1), keepdim)
    elif ord in ("nuc", 2, -2):
        s = svdvals(A.movedim((d0, d1), (-2, -1)))
        if s.shape[-1] == 0 and ord == -2:
            raise IndexError("amin(): Expected reduction dim -1 to have non-zero size.")
        # an empty matrix: 0, as PyTorch's (its singular values are none, and norms are non-negative)
        r = s.sum(-1) if ord == "nuc" or s.shape[-1] == 0 else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    elif ord in (math.inf, -math.inf, 1, -1):
        # inf: the largest sum of |a| along a row (over d1), then over rows (d0); 1: along columns.
        inner, outer = (d1, d0) if math.isinf(ord) else (d0, d1)
        sums = A.abs().sum(inner, keepdim=True)
        r = sums.amax(outer, keepdim=True) if ord > 0 else sums.amin(outer, keepdim=True)
        if not keepdim:
            r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if out is not None:
        return out.copy_(r)
    return r


def norm(A: Tensor, ord: Optional[Union[str, float]] = None, dim: Dim = None, keepdim: bool = False, *,
         dtype=None, out=None) -> Tensor:
    """torch.linalg.norm: a vector norm over one dim (or of 1-D input), a matrix norm over two (or of 2-D
    input); with ord and dim both None, the 2-norm of A flattened."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is None or len(dim) == 1:
            return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
        return matrix_norm(A, "fro", dim, keepdim, dtype=dtype, out=out)
    if dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if len(dim) == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 2. Got {list(dim)}")
        return vector_norm(A, ord, dim, keepdim, dtype=dtype, out=out)
    if len(dim) == 2:
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
