"""torch.linalg: the norms (vector_norm, matrix_norm, norm) and the functions composed of other linalg ops (cond,
householder_product, tensorinv, tensorsolve, vander) here, with PyTorch's arguments, defaults and errors, and the
decompositions and solves (inv, det, cholesky, qr, eig, eigh, svd, solve, lstsq, lu, ...) from
_ops/decompositions.py.

The norms are made of differentiable ops (the 2-norm is one kernel, `Tensor.norm`; ord 2, -2 and 'nuc' take
the singular values from svdvals), so gradients follow.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

from ._dtype import bfloat16, bool_, float16
from ._ops._common import _short
from ._ops.decompositions import (LinAlgError, _check_dtype, _out, linalg_cholesky as cholesky,
                                  linalg_cholesky_ex as cholesky_ex, linalg_cross as cross, linalg_det as det,
                                  linalg_diagonal as diagonal, linalg_eig as eig, linalg_eigh as eigh,
                                  linalg_eigvals as eigvals, linalg_eigvalsh as eigvalsh, linalg_inv as inv,
                                  linalg_inv_ex as inv_ex, linalg_lstsq as lstsq, linalg_lu as lu,
                                  linalg_lu_factor as lu_factor, linalg_lu_factor_ex as lu_factor_ex,
                                  linalg_lu_solve as lu_solve, linalg_matrix_exp as matrix_exp,
                                  linalg_matrix_power as matrix_power, linalg_matrix_rank as matrix_rank,
                                  linalg_multi_dot as multi_dot, linalg_pinv as pinv, linalg_qr as qr,
                                  linalg_slogdet as slogdet, linalg_solve as solve, linalg_solve_ex as solve_ex,
                                  linalg_solve_triangular as solve_triangular, linalg_svd as svd,
                                  linalg_svdvals as svdvals, linalg_vecdot as vecdot)
from ._ops.linalg import matmul as _matmul
from ._ops.pointwise import where as _where
from ._ops.shape import cat as _cat
from ._tensor import Tensor, _wrap, _wrap_dim

__all__ = ["vector_norm", "matrix_norm", "norm", "cond", "householder_product", "tensorinv", "tensorsolve",
           "vander", "matmul", "LinAlgError", "cholesky", "cholesky_ex", "cross", "det", "diagonal", "eig", "eigh",
           "eigvals", "eigvalsh", "inv", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
           "matrix_exp", "matrix_power", "matrix_rank", "multi_dot", "pinv", "qr", "slogdet", "solve", "solve_ex",
           "solve_triangular", "svd", "svdvals", "vecdot"]

Dim = Union[int, Sequence[int], None]


def _float_input(x: Tensor, dtype, what: str) -> Tensor:
    """x (a float or complex tensor) in `dtype`: one of the same kind (complex or real) that does not narrow it."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.{what}: Expected a floating point or complex tensor as input. Got "
                           f"{_short(x.dtype.np)}")
    if dtype is None or dtype is x.dtype:
        return x
    if dtype.is_complex != x.dtype.is_complex:
        kind = "complex" if x.dtype.is_complex else "real"
        raise RuntimeError(f"linalg.{what}: dtype should be {kind} for {kind} inputs, but got {_short(dtype.np)}")
    if dtype.itemsize < x.dtype.itemsize:
        raise RuntimeError(f"linalg.{what}: the dtype of the input ({_short(x.dtype.np)}) should be convertible "
                           f"without narrowing to the specified dtype ({_short(dtype.np)})")
    return x.to(dtype)


def vector_norm(x: Tensor, ord: float = 2, dim: Dim = None, keepdim: bool = False, *, dtype=None,
                out=None) -> Tensor:
    """The vector ord-norm of x over dim (all of x when None): ord inf, -inf, 0, or any other real number."""
    if not isinstance(ord, (int, float)) or isinstance(ord, bool):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
    x = _float_input(x, dtype, "vector_norm")
    if x.dtype.is_complex:  # the norm of the moduli, real (float for complex64, double for complex128)
        x = x.abs()
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 0:
        dim = None
    dims = range(x.ndim) if dim is None else [_wrap_dim(d, max(x.ndim, 1)) for d in dim]
    if len(set(dims)) != len(dims):
        repeated = next(d for d in dims if list(dims).count(d) > 1)
        raise RuntimeError(f"dim {repeated} appears multiple times in the list of dims")
    if x.ndim == 0:  # a 0-d tensor reduces as one element over dim 0 (or -1); keepdim has no dim to keep
        x, dim, dims, keepdim = x.reshape(1), None, [0], False
    ord = float(ord)
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
    if isinstance(dim, int):
        dim = (dim,)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {', '.join(map(str, dim))}")
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
        r = vector_norm(A, 2, (d0, d1), keepdim)
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
        sums = A.abs().sum(inner)
        outer -= inner < outer
        if sums.shape[outer] == 0:  # no rows (columns): the max is 0, as PyTorch's; the min has no identity
            if ord < 0:
                raise IndexError(f"amin(): Expected reduction dim {outer} to have non-zero size.")
            r = sums.sum(outer)
        else:
            r = sums.amax(outer) if ord > 0 else sums.amin(outer)
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
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
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    if ord is None:  # the 2-norm of the elements over dim: the Frobenius norm for two dims
        return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
    if dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if len(dim) == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, dim, keepdim, dtype=dtype, out=out)
    return matrix_norm(A, ord, dim, keepdim, dtype=dtype, out=out)


def cond(A: Tensor, p: Optional[Union[str, float]] = None, *, out=None) -> Tensor:
    """The condition number of each matrix in the p-norm: the ratio of its extreme singular values for p None, 2
    or -2 (any shape); norm(A) * norm(A^{-1}) for 'fro', 'nuc', inf, -inf, 1, -1 (square A; inf where singular)."""
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p is not None and p not in (2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if p in (None, 2, -2):
        s = svdvals(A)
        if s.shape[-1] == 0:  # an empty matrix: 0, as PyTorch's
            return _out(s.sum(-1), out)
        big, small = s.amax(-1), s.amin(-1)
        return _out(small / big if p == -2 else big / small, out)
    m, n = A.shape[-2:]
    if m != n:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are {m} by {n} "
                           "matrices")
    if m == 0:  # an empty matrix: 0, as PyTorch's
        return _out(matrix_norm(A, "fro"), out)
    A_inv, info = inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(A_inv, p)
    return _out(_where(info > 0, math.inf, r), out)


def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H with v_i column i of A below its diagonal
    and 1 on it (how geqrf stores Q): LAPACK's orgqr, made of matrix products so that gradients follow."""
    fn = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{fn}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(A.shape[:-2]) != tuple(tau.shape[:-1]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{fn}: tau dtype {_short(tau.dtype.np)} does not match input dtype "
                           f"{_short(A.dtype.np)}")
    _check_dtype(A, fn, low_kernel="orgqr_cpu", int_kernel="orgqr_cpu")
    rows = np.arange(m)[:, None]
    Q = _wrap(np.broadcast_to(np.eye(m, dtype=A.dtype.np), tuple(A.shape[:-2]) + (m, m)).copy())
    for i in range(k):
        below = _wrap((rows > i).astype(A.dtype.np))
        v = A.narrow(-1, i, 1) * below + _wrap((rows == i).astype(A.dtype.np))
        Q = Q - _matmul(_matmul(Q, v), v.mH) * tau.narrow(-1, i, 1).unsqueeze(-1)
    return _out(Q.narrow(-1, 0, n), out)


def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The inverse of A seen as a linear map from its dims ind: to its dims :ind (their sizes' products equal);
    shaped A.shape[ind:] + A.shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(cols) != math.prod(rows):
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    size = math.prod(rows)
    return _out(inv(A.reshape(size, size)).reshape(cols + rows), out)


def tensorsolve(A: Tensor, B: Tensor, dims: Optional[Sequence[int]] = None, *, out=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B: X has A's trailing dims (after `dims` of A are moved there)."""
    if dims is not None:
        dims = [_wrap_dim(d, A.ndim) for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = tuple(A.shape[B.ndim:])
    rows = math.prod(A.shape[:B.ndim])
    if math.prod(result_shape) != rows:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(result_shape)} != {rows}")
    return _out(solve(A.reshape(rows, rows), B.reshape(rows)).reshape(result_shape), out)


def vander(x: Tensor, *, N: Optional[int] = None) -> Tensor:
    """The Vandermonde matrix of x along its last dim: columns x^0, x^1, ..., x^(N-1) (N = x.shape[-1] when None)."""
    if x.dtype in (bool_, float16, bfloat16):
        raise RuntimeError("linalg.vander supports floating point, complex, and integer tensors, but got "
                           f"{_short(x.dtype.np)}")
    if x.ndim == 0:
        x = x.reshape(1)
    if N is None:
        N = x.shape[-1]
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    col = x.unsqueeze(-1)
    powers = col.expand(*col.shape[:-1], N - 1).cumprod(-1)
    return _cat([col * 0 + 1, powers], -1)


def matmul(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """torch.matmul under its linalg name."""
    return _out(_matmul(input, other), out)
