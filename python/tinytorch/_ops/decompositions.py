"""Matrix decompositions and solves (det, inverse, cholesky, qr, svd, eigh, solve, lu, ...) with their derivatives.

Forwards run NumPy's (CuPy's) batched LAPACK wrappers; LU with partial pivoting and the matrix exponential, which
NumPy lacks, are written here over the batch. Backward formulas are PyTorch's (derivatives.yaml and
FunctionsManual.cpp), written with tensor ops (these very functions among them) so that create_graph can
differentiate them again; a node's saved outputs are recomputed from its inputs when it does.
"""
from __future__ import annotations

import functools
import math
from collections import namedtuple
from typing import Optional, Sequence

import numpy as np

from .. import _autocast
from .._dtype import bfloat16, float16
from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, _short, alias, attach, needs_grad, record, saved_output, sum_to
from .linalg import cross, matmul, matrix_power
from .pointwise import _result, broadcast_error_shapes
from .shape import cat, diagonal

__all__ = ["det", "logdet", "slogdet", "inverse", "pinverse", "cholesky", "cholesky_solve", "cholesky_inverse", "qr",
           "svd", "triangular_solve", "lu", "lu_solve", "lu_unpack", "matrix_exp"]


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (a singular matrix, one that is not positive-definite)."""


def _return_type(name: str, fields: str):
    """PyTorch's torch.return_types.<name>: a namedtuple that prints like it."""
    base = namedtuple(name, fields)

    class ReturnType(base):
        __slots__ = ()

        def __repr__(self) -> str:
            body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
            return f"torch.return_types.{name}(\n{body})"
    ReturnType.__name__ = ReturnType.__qualname__ = name
    ReturnType.__module__ = "tinytorch.return_types"
    return ReturnType


_inv_ex_t = _return_type("linalg_inv_ex", "inverse info")
_slogdet_t = _return_type("slogdet", "sign logabsdet")
_linalg_slogdet_t = _return_type("linalg_slogdet", "sign logabsdet")
_cholesky_ex_t = _return_type("linalg_cholesky_ex", "L info")
_solve_ex_t = _return_type("linalg_solve_ex", "result info")
_qr_t = _return_type("qr", "Q R")
_linalg_qr_t = _return_type("linalg_qr", "Q R")
_eigh_t = _return_type("linalg_eigh", "eigenvalues eigenvectors")
_eig_t = _return_type("linalg_eig", "eigenvalues eigenvectors")
_svd_t = _return_type("svd", "U S V")
_linalg_svd_t = _return_type("linalg_svd", "U S Vh")
_lstsq_t = _return_type("linalg_lstsq", "solution residuals rank singular_values")
_lu_factor_t = _return_type("linalg_lu_factor", "LU pivots")
_lu_factor_ex_t = _return_type("linalg_lu_factor_ex", "LU pivots info")
_linalg_lu_t = _return_type("linalg_lu", "P L U")
_lu_unpack_t = _return_type("lu_unpack", "P L U")
_triangular_solve_t = _return_type("triangular_solve", "solution cloned_coefficient")


# ------------------------------------------------------------------ helpers

def _xp(x):
    return np if type(x) is np.ndarray else x.__array_namespace__()


def _host(x) -> np.ndarray:
    return x if type(x) is np.ndarray else x.get()


def _autocast_op(name: str):
    """Run the op under autocast's policy for `name` (PyTorch keeps these in float32 on CPU)."""
    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            if _autocast.active:
                return _autocast.dispatch(name, fn, *args, **kwargs)
            return fn(*args, **kwargs)
        return op
    return wrap


def _check(A, fn: str, name: str = "A", square: bool = True, **dtype_policy) -> None:
    """PyTorch's checks of a linalg input: a tensor of matrices (square ones where asked), float or complex
    (dtype_policy: _check_dtype's keywords)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fn}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    _check_dtype(A, fn, **dtype_policy)


def _check_dtype(A: Tensor, fn: str, low_kernel: Optional[str] = None, int_kernel: Optional[str] = None,
                 low_ok: bool = False) -> None:
    """Float or complex input, with PyTorch's error for each other dtype: ops whose dtype check comes after
    dispatch (low_kernel for float16/bfloat16, int_kernel for integers and bool) raise its NotImplementedError
    naming the kernel; the others a RuntimeError. low_ok: float16/bfloat16 are computed (in float32)."""
    dt = A.dtype
    if dt is float16 or dt is bfloat16:
        if low_ok:
            return
        if low_kernel is not None:
            raise NotImplementedError(f"\"{low_kernel}\" not implemented for '{_short(dt.np)}'")
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {_short(dt.np)}")
    if not (dt.is_floating_point or dt.is_complex):
        if int_kernel is not None:
            raise NotImplementedError(f"\"{int_kernel}\" not implemented for '{_short(dt.np)}'")
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got {_short(dt.np)}")


def _float_or_double(A: Tensor) -> None:
    """matrix_rank's and lstsq's dtype check (which their low-precision and integer inputs reach first)."""
    if A.dtype in (float16, bfloat16) or not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError("This function doesn't handle types other than float and double")


def _same_dtype(A: Tensor, B: Tensor, fn: str) -> None:
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type "
                           f"{_short(A.dtype.np)} and B of type {_short(B.dtype.np)} instead")


def _raise_info(info, fn: str, message: str, error: type = LinAlgError) -> None:
    """Raise `error` for the first matrix whose LAPACK info is nonzero; message formats that info."""
    flat = _host(info).reshape(-1)
    bad = np.flatnonzero(flat)
    if bad.size:
        batch = f"(Batch element {bad[0]}): " if np.ndim(info) else ""
        raise error(f"{fn}: {batch}{message.format(int(flat[bad[0]]))}")


def _mH(t: Tensor) -> Tensor:
    """The conjugate transpose of each matrix (PyTorch's Tensor.mH)."""
    return t.mT.conj()


def _eye(n: int, like: Tensor, real: bool = False) -> Tensor:
    x = like._data
    dt = x.real.dtype if real else x.dtype
    return _wrap(_xp(x).eye(n, dtype=dt))


def _info(x, shape: tuple) -> Tensor:
    return _wrap(_xp(x).asarray(x, dtype=np.int32).reshape(shape))


def _saved(outputs: tuple, recompute) -> tuple:
    """An op's saved outputs inside its backward; recomputed from its inputs under create_graph (see
    _common.saved_output) so that double backward sees how they depend on them."""
    return tuple(recompute()) if _grad_enabled() else outputs


def _out(result, out):
    """PyTorch's out=: copy each result into the given tensor(s) and return them."""
    if out is None:
        return result
    if isinstance(result, tuple):
        for o, r in zip(out, result):
            o.copy_(r)
        return type(result)(*out) if hasattr(result, "_fields") else tuple(out)
    return out.copy_(result)


def _broadcast_batch(A: Tensor, B: Tensor) -> tuple:
    """The batch shape A and B's matrices broadcast to (PyTorch's broadcasting error when they don't, which
    names B's batch first)."""
    try:
        return tuple(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    except ValueError:
        raise broadcast_error_shapes(B.shape[:-2], A.shape[:-2]) from None


def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:
    """PyTorch's rule for solve/lstsq: B is a (batch of) vector(s) when 1-D or shaped like A without its last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


# ------------------------------------------------------------------ LU (NumPy has none)

def _lu_array(a):
    """LU with partial pivoting of each matrix of a (..., m, n), as LAPACK's getrf: (LU packed, 1-based pivots
    (..., k) int32, info (...) int32: the first zero pivot's 1-based index, 0 when there is none)."""
    xp = _xp(a)
    *batch, m, n = a.shape
    k = min(m, n)
    count = math.prod(batch)
    lu = a.reshape((count, m, n)).copy()
    piv = xp.zeros((count, k), dtype=np.int32)
    info = xp.zeros(count, dtype=np.int32)
    rows = xp.arange(count)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            col = lu[:, j:, j]
            mag = xp.abs(col.real) + xp.abs(col.imag) if xp.iscomplexobj(col) else xp.abs(col)  # LAPACK's i?amax
            p = j + xp.argmax(mag, axis=1)
            piv[:, j] = p + 1
            top = lu[rows, j].copy()
            lu[rows, j] = lu[rows, p]
            lu[rows, p] = top
            d = lu[:, j, j]
            info = xp.where((info == 0) & (d == 0), j + 1, info)
            lu[:, j + 1:, j] /= xp.where(d == 0, 1, d)[:, None]
            lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(tuple(batch) + (k,)), info.reshape(tuple(batch))


def _permutation_array(piv, m: int, dtype):
    """The permutation matrices P (..., m, m) of LAPACK's sequential row swaps, with A = P L U."""
    xp = _xp(piv)
    batch = piv.shape[:-1]
    count = math.prod(batch)
    perm = xp.broadcast_to(xp.arange(m), batch + (m,)).reshape((count, m)).copy()
    swaps = piv.reshape((count, piv.shape[-1])).astype(np.int64) - 1
    rows = xp.arange(perm.shape[0])
    for i in range(swaps.shape[1]):
        target = swaps[:, i]
        here = perm[:, i].copy()
        perm[:, i] = perm[rows, target]
        perm[rows, target] = here
    P = xp.zeros((perm.shape[0], m, m), dtype=dtype)
    P[rows[:, None], perm, xp.arange(m)[None, :]] = 1  # row i of L U is row perm[i] of A
    return P.reshape(batch + (m, m))


# ------------------------------------------------------------------ inverse, determinants

@_autocast_op("linalg_inv_ex")
def linalg_inv_ex(A: Tensor, *, check_errors: bool = False, out=None):
    """The inverse of each square matrix, and LAPACK's info (0, or the index of the zero pivot of a singular
    matrix, whose inverse is then not finite)."""
    return _out(_inv_ex(A, check_errors, "linalg.inv_ex"), out)


def _inv_ex(A: Tensor, check_errors: bool, fn: str):
    _check(A, fn.removesuffix("_ex"))  # the input checks name linalg.inv
    x = A._data
    xp = _xp(x)
    try:
        inv_x = xp.linalg.inv(x)
        info = xp.zeros(x.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        info = _lu_array(x)[2]
        if check_errors:
            _raise_info(info, fn, "The diagonal element {} is zero, the inversion could not be completed because "
                                  "the input matrix is singular.")
        inv_x = xp.full(x.shape, np.nan, dtype=x.dtype)
        ok = info == 0
        if bool(ok.any()):
            inv_x[ok] = xp.linalg.inv(x[ok])
    out = _result(inv_x)
    if needs_grad(A):
        saved = alias(out)

        def inv_backward(g):
            inv_h = _mH(saved_output(saved, lambda: inverse(A)))
            return -matmul(inv_h, matmul(g, inv_h))
        record("LinalgInvExBackward0", inv_backward, out, (A,), (saved,))
    return _inv_ex_t(out, _info(info, x.shape[:-2]))


@_autocast_op("linalg_inv")
def linalg_inv(A: Tensor, *, out=None) -> Tensor:
    """The inverse of each square matrix; LinAlgError for a singular one."""
    return _out(_inv_ex(A, True, "linalg.inv").inverse, out)


@_autocast_op("inverse")
def inverse(input: Tensor, *, out=None) -> Tensor:
    """torch.inverse: linalg.inv."""
    return _out(_inv_ex(input, True, "linalg.inv").inverse, out)


def linalg_det(A: Tensor, *, out=None) -> Tensor:
    """The determinant of each square matrix."""
    return _out(_det(A, "linalg.det"), out)


def det(input: Tensor) -> Tensor:
    """torch.det: linalg.det."""
    return _det(input, "linalg.det")


def _det(A: Tensor, fn: str) -> Tensor:
    _check(A, fn, low_kernel="lu_cpu")
    x = A._data
    out = _result(_xp(x).linalg.det(x))
    if needs_grad(A):
        saved = alias(out)

        def det_backward(g):
            d = saved_output(saved, lambda: det(A))
            scale = (g * d.conj()).unsqueeze(-1).unsqueeze(-2)
            if not bool((d._data == 0).any()):  # gA = g conj(det A) A^{-H}
                return linalg_solve(_mH(A), scale * _eye(A.shape[-1], A))
            # A singular one: the cofactor matrix, from A = U diag(S) Vh (valid for any A).
            U, S, Vh = linalg_svd(A)
            n = S.shape[-1]
            eye = _eye(n, S)
            others = (S.unsqueeze(-2) * (1 - eye) + eye).prod(-1)  # prod over j != i of s_j
            phase = (det(U) * det(Vh)).conj().unsqueeze(-1).unsqueeze(-2)
            return matmul(U * (others.unsqueeze(-2) * phase), Vh) * (g.unsqueeze(-1).unsqueeze(-2))
        record("LinalgDetBackward0", det_backward, out, (A,), (A, saved))
    return out


def linalg_slogdet(A: Tensor, *, out=None):
    """(sign, log|det|) of each square matrix: sign is -1, 0 or 1 (a unit complex number for complex A)."""
    return _out(_linalg_slogdet_t(*_slogdet(A, "linalg.slogdet")), out)


def slogdet(input: Tensor):
    """torch.slogdet: linalg.slogdet."""
    return _slogdet_t(*_slogdet(input, "linalg.slogdet"))


def _slogdet(A: Tensor, fn: str) -> tuple:
    _check(A, fn)
    x = A._data
    sign, logabs = _xp(x).linalg.slogdet(x)
    sign, logabs = _result(sign), _result(logabs)
    if needs_grad(A):
        saved = alias(sign)
        complex_ = x.dtype.kind == "c"

        def slogdet_backward(g_sign, g_logabs):
            # a real loss changes with log det = log|det| + i arg det as Re(conj(w) d log det); d log det =
            # tr(A^{-1} dA), so gA = w A^{-H}
            w = g_logabs
            if complex_ and g_sign is not None:
                s = saved_output(saved, lambda: linalg_slogdet(A).sign)
                turn = (g_sign * s.conj()).imag * 1j
                w = turn if w is None else w + turn
            if w is None:
                return None
            return linalg_solve(_mH(A), w.unsqueeze(-1).unsqueeze(-2) * _eye(A.shape[-1], A))
        record("LinalgSlogdetBackward0", slogdet_backward, (sign, logabs), (A,), (A, saved))
    return sign, logabs


def logdet(input: Tensor) -> Tensor:
    """log det A: nan where a real determinant is negative, -inf where it is 0."""
    sign, logabs = _slogdet(input, "logdet")
    if input.dtype.is_complex:
        return logabs + sign.log()
    from .pointwise import where
    return where(sign < 0, math.nan, logabs)


# ------------------------------------------------------------------ cholesky

@_autocast_op("linalg_cholesky_ex")
def linalg_cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False, out=None):
    """The Cholesky factor of each Hermitian positive-definite matrix (lower, or upper = its conjugate
    transpose), and info: 0, or the order of the first leading minor that is not positive-definite."""
    return _out(_cholesky_ex(A, upper, check_errors, "linalg.cholesky_ex"), out)


def _cholesky_ex(A: Tensor, upper: bool, check_errors: bool, fn: str):
    _check(A, fn.removesuffix("_ex"), low_kernel="cholesky_cpu")  # the input checks name linalg.cholesky
    x = A._data
    xp = _xp(x)
    # LAPACK reads one triangle: the lower one, or the upper one for upper=True (the lower of A^H)
    src = xp.conj(xp.swapaxes(x, -1, -2)) if upper else x
    try:
        L = xp.linalg.cholesky(src)
        info = xp.zeros(x.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        L, info = _cholesky_failed(src)
        if check_errors:
            _raise_info(info, fn, "The factorization could not be completed because the input is not "
                                  "positive-definite (the leading minor of order {} is not positive-definite).")
    out = _result(xp.ascontiguousarray(xp.conj(xp.swapaxes(L, -1, -2))) if upper else L)
    if needs_grad(A):
        saved = alias(out)

        def cholesky_backward(g):
            # Murray (2016), arXiv 1602.07527: gA = L^{-H} Phi(L^H gL) L^{-1}, Phi symmetrising tril(L^H gL)
            factor = saved_output(saved, lambda: linalg_cholesky(A, upper=upper))
            L_, gL = (_mH(factor), _mH(g)) if upper else (factor, g)
            phi = matmul(_mH(L_), gL).tril()
            phi = 0.5 * (phi + _mH(phi.tril(-1)))
            gA = linalg_solve_triangular(_mH(L_), phi, upper=True)
            return linalg_solve_triangular(L_, gA, upper=False, left=False)
        record("LinalgCholeskyExBackward0", cholesky_backward, out, (A,), (saved,))
    return _cholesky_ex_t(out, _info(info, x.shape[:-2]))


def _cholesky_failed(x) -> tuple:
    """Factors and infos of a batch with a matrix that is not positive-definite: its info is the order of its
    first failing leading minor (the factorization fails for every larger one), its factor that of the minor
    before, zero elsewhere."""
    xp = _xp(x)
    n = x.shape[-1]
    flat = x.reshape((-1, n, n))
    L = xp.zeros_like(flat)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for b in range(flat.shape[0]):
        try:
            L[b] = xp.linalg.cholesky(flat[b])
            continue
        except np.linalg.LinAlgError:
            pass
        lo, hi = 0, n  # the minor of order lo factors, that of order hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                xp.linalg.cholesky(flat[b, :mid, :mid])
                lo = mid
            except np.linalg.LinAlgError:
                hi = mid
        info[b] = hi
        if lo:
            L[b, :lo, :lo] = xp.linalg.cholesky(flat[b, :lo, :lo])
    return L.reshape(x.shape), xp.asarray(info.reshape(x.shape[:-2]))


@_autocast_op("linalg_cholesky")
def linalg_cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor L (A = L L^H) of each Hermitian positive-definite matrix, or U = L^H when upper."""
    return _out(_cholesky_ex(A, upper, True, "linalg.cholesky").L, out)


@_autocast_op("cholesky")
def cholesky(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """torch.cholesky (deprecated in PyTorch): linalg.cholesky."""
    return _out(_cholesky_ex(input, upper, True, "cholesky").L, out)


@_autocast_op("cholesky_solve")
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """X with A X = B for A = L L^H (U^H U when upper) given its Cholesky factor."""
    if upper:
        Y = linalg_solve_triangular(_mH(L), B, upper=False)
        X = linalg_solve_triangular(L, Y, upper=True)
    else:
        Y = linalg_solve_triangular(L, B, upper=False)
        X = linalg_solve_triangular(_mH(L), Y, upper=True)
    return _out(X, out)


@_autocast_op("cholesky_inverse")
def cholesky_inverse(L: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """The inverse of A = L L^H (U^H U when upper) given its Cholesky factor."""
    _check(L, "cholesky_inverse")
    return _out(cholesky_solve(_eye(L.shape[-1], L).expand(L.shape), L, upper), out)


# ------------------------------------------------------------------ solves

@_autocast_op("linalg_solve")
def linalg_solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    """X with A X = B (X A = B when not left) for square A; B a matrix or (PyTorch's rule) a vector."""
    return _out(_solve_ex(A, B, left, True, "linalg.solve").result, out)


def linalg_solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False, out=None):
    """linalg.solve and LAPACK's info (the index of the zero pivot of a singular A, else 0)."""
    return _out(_solve_ex(A, B, left, check_errors, "linalg.solve_ex"), out)


def _solve_ex(A: Tensor, B: Tensor, left: bool, check_errors: bool, fn: str):
    _check(A, fn.removesuffix("_ex"), low_kernel="lu_cpu")  # the input checks name linalg.solve
    if not isinstance(B, Tensor):
        raise TypeError(f"{fn}(): argument 'B' must be Tensor, not {type(B).__name__}")
    _same_dtype(A, B, fn)
    vector = _is_vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vector else B
    n = A.shape[-1]
    if Bm.ndim < 2 or (Bm.shape[-2] if left else Bm.shape[-1]) != n:
        rows, cols = (Bm.shape[-2], Bm.shape[-1]) if Bm.ndim >= 2 else (Bm.shape[0], 1)
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {'AX' if left else 'XA'} = B "
                           f"({A.shape[-2]}x{n} and {rows}x{cols})")
    batch = _broadcast_batch(A, Bm)
    xp = _xp(A._data)
    a = xp.broadcast_to(A._data, batch + (n, n))
    b = xp.broadcast_to(Bm._data, batch + Bm.shape[-2:])
    if not left:  # X A = B  <=>  A^T X^T = B^T
        a, b = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2)
    try:
        x = xp.linalg.solve(a, b)
        info = xp.zeros(A.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        info = _lu_array(a)[2]
        if check_errors:
            _raise_info(info, "torch." + fn, "The solver failed because the input matrix is singular.")
        x = _singular_solve(a, b, info)
        info = _lu_array(A._data)[2]
    if not left:
        x = xp.swapaxes(x, -1, -2)
    out = _result(xp.ascontiguousarray(x[..., 0] if vector else x))
    if needs_grad(A, B):
        saved = alias(out)
        ra, rb = A._requires_grad, B._requires_grad

        def solve_backward(g):
            X = saved_output(saved, lambda: linalg_solve(A, B, left=left))
            Xm, Gm = (X.unsqueeze(-1), g.unsqueeze(-1)) if vector else (X, g)
            gB = linalg_solve(_mH(A), Gm, left=left)  # A^{-H} G, or G A^{-H}
            gA = None
            if ra:
                gA = sum_to(-matmul(gB, _mH(Xm)) if left else -matmul(_mH(Xm), gB), tuple(A.shape))
            if rb:
                gB = sum_to(gB[..., 0] if vector else gB, tuple(B.shape))
            return gA, (gB if rb else None)
        record("LinalgSolveExBackward0", solve_backward, out, (A, B), (A, B, saved))
    return _solve_ex_t(out, _info(info, A.shape[:-2]))


def _singular_solve(a, b, info):
    """Solutions of a batch with singular matrices: nan for those, LAPACK's for the others."""
    xp = _xp(a)
    x = xp.full(b.shape, np.nan, dtype=b.dtype)
    ok = info == 0
    if bool(ok.any()):
        x[ok] = xp.linalg.solve(a[ok], b[ok])
    return x


def linalg_solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False,
                            out=None) -> Tensor:
    """X with A X = B (X A = B when not left) for triangular A: only its upper (or lower) triangle is read,
    and its diagonal taken as ones when unitriangular. A zero on the diagonal gives inf/nan, not an error."""
    fn = "linalg.solve_triangular"
    _check(A, fn, low_kernel="triangular_solve_cpu", int_kernel="triangular_solve_cpu")
    if not isinstance(B, Tensor):
        raise TypeError(f"{fn}(): argument 'B' must be Tensor, not {type(B).__name__}")
    if B.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    B = B.to(A.dtype)  # PyTorch computes in A's dtype
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {'AX' if left else 'XA'} = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    batch = _broadcast_batch(A, B)
    x = A._data
    xp = _xp(x)
    tri = xp.triu(x) if upper else xp.tril(x)
    if unitriangular:
        tri = tri.copy()
        idx = xp.arange(n)
        tri[..., idx, idx] = 1
    a = xp.broadcast_to(tri, batch + (n, n))
    b = xp.broadcast_to(B._data, batch + B.shape[-2:])
    lower = not upper
    if not left:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        a, b, lower = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), upper
    try:
        r = xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        r = _substitute(a, b, lower)
    if not left:
        r = xp.swapaxes(r, -1, -2)
    res = _result(xp.ascontiguousarray(r))
    if needs_grad(A, B):
        saved = alias(res)
        ra, rb = A._requires_grad, B._requires_grad

        def solve_triangular_backward(g):
            X = saved_output(saved, lambda: linalg_solve_triangular(A, B, upper=upper, left=left,
                                                                    unitriangular=unitriangular))
            gB = linalg_solve_triangular(_mH(A), g, upper=not upper, left=left, unitriangular=unitriangular)
            gA = None
            if ra:
                gA = -matmul(gB, _mH(X)) if left else -matmul(_mH(X), gB)
                off = 1 if unitriangular else 0
                gA = sum_to(gA.triu(off) if upper else gA.tril(-off), tuple(A.shape))
            return gA, (sum_to(gB, tuple(B.shape)) if rb else None)
        record("LinalgSolveTriangularBackward0", solve_triangular_backward, res, (A, B), (A, B, saved))
    return _out(res, out)


def _substitute(a, b, lower: bool):
    """Forward (lower) or back substitution for triangular a with a zero on its diagonal: what LAPACK's trsm
    gives then (inf and nan from the divisions by zero)."""
    xp = _xp(a)
    n = a.shape[-1]
    x = xp.zeros(b.shape, dtype=np.result_type(a.dtype, b.dtype))
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            rest = slice(0, i) if lower else slice(i + 1, n)
            acc = b[..., i, :] - xp.einsum("...j,...jk->...k", a[..., i, rest], x[..., rest, :])
            x[..., i, :] = acc / a[..., i, i][..., None]
    return x


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out=None):
    """torch.triangular_solve (deprecated in PyTorch): (X with op(A) X = b, op(A) = A or A^T, and a copy of
    A broadcast to the batch)."""
    coef = A.mT if transpose else A
    X = linalg_solve_triangular(coef, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = _broadcast_batch(A, b)
    return _out(_triangular_solve_t(X, A.expand(batch + tuple(A.shape[-2:])).clone()), out)


# ------------------------------------------------------------------ QR, eigh, SVD

@_autocast_op("linalg_qr")
def linalg_qr(A: Tensor, mode: str = "reduced", *, out=None):
    """A = QR with Q's columns orthonormal and R upper triangular: 'reduced' (Q m x k), 'complete' (Q m x m)
    or 'r' (R alone; Q is empty)."""
    return _out(_linalg_qr_t(*_qr(A, mode, "linalg.qr")), out)


@_autocast_op("qr")
def qr(input: Tensor, some: bool = True, *, out=None):
    """torch.qr (deprecated in PyTorch): linalg.qr with mode 'reduced' (some) or 'complete'."""
    return _out(_qr_t(*_qr(input, "reduced" if some else "complete", "linalg.qr")), out)


def _qr(A: Tensor, mode: str, fn: str) -> tuple:
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    _check(A, fn, square=False, low_kernel="geqrf_cpu")
    x = A._data
    xp = _xp(x)
    if mode == "r":
        Q = _wrap(xp.zeros((0,), dtype=x.dtype))
        R = _result(xp.linalg.qr(x, mode="r"))
    else:
        q, r = xp.linalg.qr(x, mode=mode)
        Q, R = _result(q), _result(r)
    if needs_grad(A):
        m, n = A.shape[-2], A.shape[-1]
        saved = (alias(Q), alias(R))

        def qr_backward(gQ, gR=None):
            if mode == "r":
                raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                                   "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                                   "through linalg.qr.")
            if mode == "complete" and m > n:
                raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > "
                                   "ncols.")
            Q_, R_ = _saved(saved, lambda: linalg_qr(A, mode))
            gQ = gQ if gQ is not None else Q_ * 0
            gR = gR if gR is not None else R_ * 0
            if m >= n:
                return _qr_backward_tall(gQ, gR, Q_, R_)
            # wide: A = [X Y] with X = Q R1 square and Y = Q R2 (TensorFlow's QrGrad)
            Y = A.narrow(-1, m, n - m)
            gR2 = gR.narrow(-1, m, n - m)
            gX = _qr_backward_tall(gQ + matmul(Y, _mH(gR2)), gR.narrow(-1, 0, m), Q_, R_.narrow(-1, 0, m))
            return cat([gX, matmul(Q_, gR2)], -1)
        record("LinalgQrBackward0", qr_backward, (Q, R) if mode != "r" else R, (A,), (A,) + saved)
    return Q, R


def _qr_backward_tall(gQ: Tensor, gR: Tensor, Q: Tensor, R: Tensor) -> Tensor:
    """gA for A = QR with m >= n: (gQ + Q copyltu(M)) R^{-H}, M = R gR^H - gQ^H Q, copyltu(M) the Hermitian
    matrix with M's lower triangle (and the real part of its diagonal)."""
    M = matmul(R, _mH(gR)) - matmul(_mH(gQ), Q)
    low = M.tril(-1)
    eye = _eye(M.shape[-1], M, real=True)
    diag = (M.real if M.dtype.is_complex else M) * eye
    b = gQ + matmul(Q, low + _mH(low) + diag)
    return linalg_solve_triangular(_mH(R), b, upper=False, left=False)


@_autocast_op("linalg_eigh")
def linalg_eigh(A: Tensor, UPLO: str = "L", *, out=None):
    """Eigenvalues (ascending, real) and orthonormal eigenvectors (columns) of each Hermitian matrix, read from
    its lower (UPLO='L') or upper ('U') triangle."""
    return _out(_eigh(A, UPLO, "linalg.eigh"), out)


def _uplo(UPLO: str) -> str:
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def _eigh(A: Tensor, UPLO: str, fn: str):
    UPLO = _uplo(UPLO)
    _check(A, fn, low_kernel="linalg_eigh_cpu", int_kernel="linalg_eigh_cpu")
    x = A._data
    w, v = _xp(x).linalg.eigh(x, UPLO)
    L, V = _result(w), _result(v)
    if needs_grad(A):
        saved = (alias(L), alias(V))

        def eigh_backward(gL, gV):
            L_, V_ = _saved(saved, lambda: linalg_eigh(A, UPLO))
            if gV is None:
                return matmul(V_ * gL.unsqueeze(-2), _mH(V_)) if gL is not None else None
            VhgV = matmul(_mH(V_), gV)
            VhgV = 0.5 * (VhgV - _mH(VhgV))  # its skew-Hermitian part: how V moves in the tangent space
            eye = _eye(L_.shape[-1], L_)
            inner = VhgV / (L_.unsqueeze(-2) - L_.unsqueeze(-1) + eye)  # over E_ij = l_j - l_i off the diagonal
            if gL is not None:
                inner = inner * (1 - eye) + gL.unsqueeze(-1) * eye
            return matmul(V_, matmul(inner, _mH(V_)))
        record("LinalgEighBackward0", eigh_backward, (L, V), (A,), saved)
    return _eigh_t(L, V)


@_autocast_op("linalg_eigvalsh")
def linalg_eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:
    """The eigenvalues (ascending, real) of each Hermitian matrix."""
    if needs_grad(A):  # the gradient needs the eigenvectors
        return _out(_eigh(A, UPLO, "linalg.eigvalsh").eigenvalues, out)
    UPLO = _uplo(UPLO)
    _check(A, "linalg.eigvalsh", low_kernel="linalg_eigh_cpu", int_kernel="linalg_eigh_cpu")
    return _out(_result(_xp(A._data).linalg.eigvalsh(A._data, UPLO)), out)


def _complex_of(x):
    """The complex dtype that holds x's values: complex64 for float32, complex128 for float64."""
    return x.dtype if x.dtype.kind == "c" else np.result_type(x.dtype, np.complex64)


def linalg_eig(A: Tensor, *, out=None):
    """Eigenvalues and eigenvectors (columns of unit norm) of each square matrix, complex as PyTorch's even for
    real A (complex64 for float32, complex128 for float64), in LAPACK geev's order."""
    _check(A, "linalg.eig", low_kernel="linalg_eig_out_cpu")
    x = A._data
    xp = _xp(x)
    cdt = _complex_of(x)
    if x.size == 0:
        w, v = xp.zeros(x.shape[:-1], dtype=cdt), xp.zeros(x.shape, dtype=cdt)
    else:
        w, v = xp.linalg.eig(x)
    L, V = _result(w.astype(cdt, copy=False)), _result(v.astype(cdt, copy=False))
    if needs_grad(A):
        saved = (alias(L), alias(V))
        real_input = not A.dtype.is_complex

        def eig_backward(gL, gV):
            L_, V_ = _saved(saved, lambda: linalg_eig(A))
            gA = _eig_backward(gL, gV, L_, V_)
            return gA.real if real_input else gA
        record("LinalgEigBackward0", eig_backward, (L, V), (A,), saved)
    return _out(_eig_t(L, V), out)


def _eig_backward(gL, gV, L: Tensor, V: Tensor) -> Tensor:
    """gA for A = V diag(L) V^{-1}, V's columns of unit norm (so that the loss must not depend on their phase):
    V^{-H} (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(L_j - L_i)) V^H, as PyTorch's."""
    n = L.shape[-1]
    eye = _eye(n, L)
    Vh = _mH(V)
    if gV is None:
        inner = gL.unsqueeze(-1) * eye
    else:
        VhgV = matmul(Vh, gV)
        re_diag = diagonal(VhgV, 0, -2, -1).real
        inner = VhgV - matmul(Vh, V) * re_diag.unsqueeze(-2)
        Lc = L.conj()
        inner = inner / (Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + eye) * (1 - eye)
        if gL is not None:
            inner = inner + gL.unsqueeze(-1) * eye
    return linalg_solve(Vh, matmul(inner, Vh))


def linalg_eigvals(A: Tensor, *, out=None) -> Tensor:
    """The (complex) eigenvalues of each square matrix, as linalg.eig's."""
    if needs_grad(A):  # the gradient needs the eigenvectors
        return _out(linalg_eig(A).eigenvalues, out)
    _check(A, "linalg.eigvals", low_kernel="linalg_eig_out_cpu")
    x = A._data
    cdt = _complex_of(x)
    w = _xp(x).linalg.eigvals(x) if x.size else _xp(x).zeros(x.shape[:-1], dtype=cdt)
    return _out(_result(w.astype(cdt, copy=False)), out)


@_autocast_op("linalg_svd")
def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: Optional[str] = None, out=None):
    """A = U diag(S) Vh with S descending, non-negative and real; U and Vh square when full_matrices, else
    m x k and k x n (k = min(m, n))."""
    return _out(_linalg_svd_t(*_svd(A, full_matrices, "linalg.svd")), out)


def _svd(A: Tensor, full_matrices: bool, fn: str) -> tuple:
    _check(A, fn, square=False, low_kernel="linalg_svd_cpu")
    x = A._data
    xp = _xp(x)
    m, n = x.shape[-2:]
    if x.size == 0:  # LAPACK's gesdd isn't called on empty matrices: identities (and no singular values)
        k = min(m, n)
        batch = x.shape[:-2]
        mu, nv = (m, n) if full_matrices else (k, k)
        u = xp.broadcast_to(xp.eye(m, mu, dtype=x.dtype), batch + (m, mu)).copy()
        vh = xp.broadcast_to(xp.eye(nv, n, dtype=x.dtype), batch + (nv, n)).copy()
        s = xp.zeros(batch + (k,), dtype=x.real.dtype)
    else:
        u, s, vh = xp.linalg.svd(x, full_matrices=full_matrices)
    U, S, Vh = _result(u), _result(s), _result(vh)
    if needs_grad(A):
        saved = (alias(U), alias(S), alias(Vh))

        def svd_backward(gU, gS, gVh):
            U_, S_, Vh_ = _saved(saved, lambda: linalg_svd(A, full_matrices))
            if full_matrices:  # only the first k columns of U and rows of Vh are determined by A
                k = S_.shape[-1]
                U_, Vh_ = U_.narrow(-1, 0, k), Vh_.narrow(-2, 0, k)
                gU = gU.narrow(-1, 0, k) if gU is not None else None
                gVh = gVh.narrow(-2, 0, k) if gVh is not None else None
            return _svd_backward(gU, gS, gVh, U_, S_, Vh_)
        record("LinalgSvdBackward0", svd_backward, (U, S, Vh), (A,), saved)
    return U, S, Vh


def _svd_backward(gU, gS, gVh, U: Tensor, S: Tensor, Vh: Tensor):
    """PyTorch's svd_backward for the reduced SVD, assuming distinct singular values."""
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return None
        return matmul(U, gS.unsqueeze(-1) * Vh) if m >= n else matmul(U * gS.unsqueeze(-2), Vh)
    UhgU = VhgV = None
    if gU is not None:
        UhgU = matmul(_mH(U), gU)
        UhgU = UhgU - _mH(UhgU)
    if gVh is not None:
        VhgV = matmul(Vh, _mH(gVh))
        VhgV = VhgV - _mH(VhgV)
    S2 = S * S
    eye = _eye(S.shape[-1], S)
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye
    if UhgU is not None and VhgV is not None:
        inner = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif UhgU is None:
        inner = S.unsqueeze(-1) * (VhgV / E)
    else:
        inner = (UhgU / E) * S.unsqueeze(-2)
    if gS is not None:
        inner = inner + gS.unsqueeze(-1) * eye
    if U.dtype.is_complex and UhgU is not None and VhgV is not None:
        inner = inner + (diagonal(UhgU, 0, -2, -1) / (2 * S)).unsqueeze(-1) * eye
    if m > n and gU is not None:
        gA = matmul(U, inner)
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - matmul(U, matmul(_mH(U), gUSinv))
        return matmul(gA, Vh)
    if m < n and gVh is not None:
        gA = matmul(inner, Vh)
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - matmul(matmul(SinvgVh, _mH(Vh)), Vh)
        return matmul(U, gA)
    return matmul(U, matmul(inner, Vh)) if m >= n else matmul(matmul(U, inner), Vh)


@_autocast_op("linalg_svdvals")
def linalg_svdvals(A: Tensor, *, driver: Optional[str] = None, out=None) -> Tensor:
    """The singular values of each matrix, descending."""
    if needs_grad(A):  # the gradient U diag(gS) Vh needs the singular vectors
        return _out(_svd(A, False, "linalg.svdvals")[1], out)
    _check(A, "linalg.svd", square=False, low_kernel="linalg_svd_cpu")
    x = A._data
    if x.size == 0:
        return _out(_wrap(_xp(x).zeros(x.shape[:-2] + (min(x.shape[-2:]),), dtype=x.real.dtype)), out)
    return _out(_result(_xp(x).linalg.svd(x, compute_uv=False)), out)


@_autocast_op("svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out=None):
    """torch.svd (deprecated in PyTorch): (U, S, V) with input = U diag(S) V^H, reduced when some; without
    compute_uv, U and V are zero m x m and n x n matrices."""
    if not compute_uv:
        S = linalg_svdvals(input)
        x = input._data
        m, n = x.shape[-2:]
        return _out(_svd_t(_wrap(_xp(x).zeros(x.shape[:-2] + (m, m), dtype=x.dtype)), S,
                           _wrap(_xp(x).zeros(x.shape[:-2] + (n, n), dtype=x.dtype))), out)
    U, S, Vh = _svd(input, not some, "linalg.svd")
    return _out(_svd_t(U, S, _mH(Vh)), out)


# ------------------------------------------------------------------ pseudo-inverse, rank, least squares

def _tolerance(S: Tensor, atol, rtol, m: int, n: int):
    """max(atol, rtol * largest singular value) per matrix, with PyTorch's defaults: rtol = eps * max(m, n)
    when neither is given, 0 when only atol is."""
    xp = _xp(S._data)
    s = S._data
    eps = float(np.finfo(s.dtype).eps)

    def as_array(v):
        return xp.asarray(v._data if isinstance(v, Tensor) else v, dtype=s.dtype)
    if rtol is None:
        rtol = eps * max(m, n) if atol is None else 0.0
    top = s.max(axis=-1) if s.shape[-1] else xp.zeros(s.shape[:-1], dtype=s.dtype)
    tol = as_array(rtol) * top
    if atol is not None:
        tol = xp.maximum(as_array(atol), tol)
    return tol


def linalg_pinv(A: Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None, out=None) -> Tensor:
    """The Moore-Penrose pseudo-inverse: singular values up to max(atol, rtol * the largest) count as zero
    (rcond: PyTorch's older spelling of rtol)."""
    if rcond is not None:
        rtol = rcond
    if not isinstance(A, Tensor) or A.ndim < 2 or not (A.dtype.is_floating_point or A.dtype.is_complex) or \
            A.dtype in (float16, bfloat16):
        what = f"{_short(A.dtype.np)}{{{list(A.shape)}}}" if isinstance(A, Tensor) else type(A).__name__
        raise RuntimeError(f"linalg.pinv({what}): expected a tensor with 2 or more dimensions of float, double, "
                           "cfloat or cdouble types")
    x = A._data
    xp = _xp(x)
    m, n = x.shape[-2:]
    if hermitian:
        _check(A, "linalg.pinv")
        w, v = xp.linalg.eigh(x) if x.size else (xp.zeros(x.shape[:-1], x.real.dtype), xp.zeros_like(x))
        tol = _tolerance(_wrap(xp.abs(w)), atol, rtol, m, n)
        keep = xp.abs(w) > tol[..., None]
        inv_w = xp.where(keep, 1 / xp.where(keep, w, 1), 0)
        p = (v * inv_w[..., None, :]) @ xp.conj(xp.swapaxes(v, -1, -2))
    elif x.size == 0:
        p = xp.zeros(x.shape[:-2] + (n, m), dtype=x.dtype)
    else:
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        tol = _tolerance(_wrap(s), atol, rtol, m, n)
        keep = s > tol[..., None]
        inv_s = xp.where(keep, 1 / xp.where(keep, s, 1), 0)
        p = (xp.conj(xp.swapaxes(vh, -1, -2)) * inv_s[..., None, :]) @ xp.conj(xp.swapaxes(u, -1, -2))
    out_t = _result(xp.ascontiguousarray(p.astype(x.dtype, copy=False)))
    if needs_grad(A):
        saved = alias(out_t)

        def pinv_backward(g):
            P = saved_output(saved, lambda: linalg_pinv(A, atol=atol, rtol=rtol, hermitian=hermitian))
            Ph, gh = _mH(P), _mH(g)
            if m <= n:
                K = matmul(gh, P)
                KPh = matmul(K, Ph)
                return (-_mH(matmul(P, K)) + KPh - matmul(matmul(A, P), KPh)
                        + matmul(matmul(Ph, P), gh - matmul(K, A)))
            K = matmul(P, gh)
            PhK = matmul(Ph, K)
            return (-_mH(matmul(K, P)) + matmul(matmul(gh - matmul(A, K), P), Ph) + PhK
                    - matmul(matmul(PhK, P), A))
        record("LinalgPinvBackward0", pinv_backward, out_t, (A,), (A, saved))
    return _out(out_t, out)


@_autocast_op("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: linalg.pinv with rtol = rcond."""
    return linalg_pinv(input, rtol=rcond)


@_autocast_op("linalg_matrix_rank")
def linalg_matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None,
                       out=None) -> Tensor:
    """The number of singular values (|eigenvalues| when hermitian) above max(atol, rtol * the largest), as
    int64; tol is PyTorch's older spelling of atol (with rtol 0)."""
    fn = "torch.linalg.matrix_rank"
    if isinstance(A, Tensor) and A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor input must have at least 2 dimensions.")
    if isinstance(A, Tensor):
        _float_or_double(A)
    _check(A, "linalg.matrix_rank", "input", square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0
    x = A._data
    xp = _xp(x)
    m, n = x.shape[-2:]
    if x.size == 0:
        s = xp.zeros(x.shape[:-2] + (min(m, n),), dtype=x.real.dtype)
    elif hermitian:
        s = xp.abs(xp.linalg.eigvalsh(x))
    else:
        s = xp.linalg.svd(x, compute_uv=False)
    tol_ = _tolerance(_wrap(s), atol, rtol, m, n)
    return _out(_result((s > tol_[..., None]).sum(-1).astype(np.int64)), out)


@_autocast_op("linalg_lstsq")
def linalg_lstsq(A: Tensor, B: Tensor, rcond: Optional[float] = None, *, driver: Optional[str] = None):
    """The least-squares solution X minimising ||A X - B|| (the minimum-norm one when A is rank deficient or
    wide), with PyTorch's extras per driver: the squared residuals per column (m > n, full rank, a driver
    other than 'gelsy'), the ranks (any driver but 'gels') and the singular values ('gelsd', 'gelss')."""
    fn = "torch.linalg.lstsq"
    if not isinstance(A, Tensor) or not isinstance(B, Tensor):
        raise TypeError(f"linalg_lstsq(): argument '{'self' if not isinstance(A, Tensor) else 'b'}' must be Tensor")
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError(f"{fn}: other must have at least 1 dimension.")
    if not 0 <= A.ndim - B.ndim <= 1:
        raise RuntimeError(f"{fn}: input.dim() must be greater or equal to other.dim() and (input.dim() - "
                           "other.dim()) <= 1")
    _float_or_double(A)
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fn}: Expected input and other to have the same dtype, but got input's dtype "
                           f"{_short(A.dtype.np)} and other's dtype {_short(B.dtype.np)}")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{fn}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = A.ndim - B.ndim == 1  # lstsq's rule (unlike solve's): a B of one dim fewer is a batch of vectors
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if Bm.shape[-2] != m:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-2)")
    batch = _broadcast_batch(A, Bm)
    eps = float(np.finfo(A._data.real.dtype).eps)
    rtol = eps * max(m, n) if rcond is None or rcond < 0 else rcond
    X = matmul(linalg_pinv(A, rtol=rtol), Bm)
    xp = _xp(A._data)
    s = linalg_svdvals(A.detach())
    real = A._data.real.dtype
    tol = _tolerance(s, None, rtol, m, n)
    rank = _wrap(xp.broadcast_to((s._data > tol[..., None]).sum(-1).astype(np.int64), batch).copy())
    full_rank = bool((rank._data == min(m, n)).all())
    if driver == "gels" and bool((s._data == 0).any()):  # gels' QR fails on an exact zero on R's diagonal only
        raise LinAlgError(f"{fn}: The least squares solution could not be computed because the input matrix does "
                          f"not have full rank (error code: {int(rank._data.min()) + 1}).")
    if m > n and driver != "gelsy" and (driver == "gels" or full_rank):
        residuals = (matmul(A, X) - Bm).abs().pow(2).sum(-2)  # (*, k): k = 1 for a vector B, as PyTorch's
    else:
        residuals = _wrap(xp.zeros((0,), dtype=real))
    if driver == "gels":
        rank = _wrap(xp.zeros((0,), dtype=np.int64))
    singular_values = s if driver in ("gelsd", "gelss") else _wrap(xp.zeros((0,), dtype=real))
    return _lstsq_t(X.squeeze(-1) if vector else X, residuals, rank, singular_values)


# ------------------------------------------------------------------ matrix functions and products

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152  # the largest 1-norm for which Pade [13/13] is accurate to double precision


def _expm_array(a):
    """exp of each square matrix: scaling and squaring with a [13/13] Pade approximant (Higham 2005), computed
    in double precision."""
    xp = _xp(a)
    n = a.shape[-1]
    if a.size == 0:
        return a.copy()
    x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    norm1 = xp.abs(x).sum(axis=-2).max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.ceil(xp.log2(norm1 / _THETA13))
    s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(np.int64)
    x = x / (2.0 ** s)[..., None, None]
    b = _PADE13
    eye = xp.eye(n, dtype=x.dtype)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    try:
        r = xp.linalg.solve(v - u, v + u)
    except np.linalg.LinAlgError:  # only for non-finite input
        r = xp.full(x.shape, np.nan, dtype=x.dtype)
    for j in range(int(s.max()) if s.size else 0):
        r = xp.where((s > j)[..., None, None], r @ r, r)
    return r.astype(a.dtype)


def linalg_matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix."""
    _check(A, "linalg.matrix_exp", low_ok=True)
    out = _result(_expm_array(A._data))
    if needs_grad(A):
        def matrix_exp_backward(g):
            # the adjoint of the Frechet derivative: the top-right block of exp([[A^H, G], [0, A^H]])
            n = A.shape[-1]
            Ah = _mH(A)
            big = cat([cat([Ah, g], -1), cat([Ah * 0, Ah], -1)], -2)
            return linalg_matrix_exp(big).narrow(-2, 0, n).narrow(-1, n, n)
        record("LinalgMatrixExpBackward0", matrix_exp_backward, out, (A,), (A,))
    return out


def matrix_exp(A: Tensor) -> Tensor:
    """torch.matrix_exp: linalg.matrix_exp."""
    return linalg_matrix_exp(A)


def linalg_matrix_power(A: Tensor, n: int, *, out=None) -> Tensor:
    """A to the integer power n (torch.matrix_power's repeated squaring; n < 0 powers the inverse). n = 0 gives
    identities still linked to A's graph, as PyTorch's clone-then-fill: their gradient is zero."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    result = matrix_power(A, n)
    if n == 0 and needs_grad(A):
        record("CopyBackwards", lambda g: g * 0, result, (A,))
    return _out(result, out)


def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """The cross product of 3-vectors along dim (the inputs broadcast): torch.cross with linalg's default dim."""
    return _out(cross(input, other, dim), out)


def linalg_vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """sum(conj(x) * y) along dim (the inputs broadcast)."""
    _check_dtype(x, "linalg.vecdot", low_ok=True)
    _check_dtype(y, "linalg.vecdot", low_ok=True)
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_short(x.dtype.np)} and y of type {_short(y.dtype.np)} instead")
    if x.ndim == 1 and y.ndim == 1 and x.shape[0] != y.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{x.shape[0]}] and src [{y.shape[0]}] to "
                           f"have the same number of elements, but got {x.shape[0]} and {y.shape[0]} elements "
                           "respectively")
    return _out((x.conj() * y).sum(dim), out)


_TYPE_META = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def linalg_multi_dot(tensors: Sequence[Tensor], *, out=None) -> Tensor:
    """The product of a chain of matrices (the first may be a row vector, the last a column vector),
    multiplied in the order that costs the fewest flops."""
    tensors = list(tensors)
    k = len(tensors)
    if k < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {k}")
    for i, t in enumerate(tensors):
        if i == 0 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {t.ndim}D")
        if i == k - 1 and t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {t.ndim}D")
        if 0 < i < k - 1 and t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_TYPE_META[tensors[0].dtype.np.name]} and tensor {i} "
                               f"{_TYPE_META[t.dtype.np.name]}")
    first_vec, last_vec = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [tensors[0].unsqueeze(0) if first_vec else tensors[0]] + tensors[1:-1] + \
        [tensors[-1].unsqueeze(-1) if last_vec else tensors[-1]]
    for i in range(k - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                               f"{list(tensors[i + 1].shape)} cannot be multiplied")
    dims = [mats[0].shape[0]] + [t.shape[1] for t in mats]
    # the textbook matrix-chain order: cost[i][j] the fewest flops for mats[i..j], split[i][j] where to cut
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1], s)
                                          for s in range(i, j))

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return mats[i]
        s = split[i][j]
        return matmul(product(i, s), product(s + 1, j))
    r = product(0, k - 1)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _out(r, out)


def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch.diagonal with the matrix dims last by default."""
    return diagonal(A, offset, dim1, dim2)


# ------------------------------------------------------------------ LU

_LU_SINGULAR = ("U[{0},{0}] is zero and using it on lu_solve would result in a division by zero. If you still want "
                "to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def linalg_lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False, out=None):
    """LU with partial pivoting in LAPACK's packed form (L's unit diagonal implied), its 1-based row swaps and
    info (the index of the first zero on U's diagonal, else 0)."""
    return _out(_lu_factor_ex(A, pivot, check_errors, "linalg.lu_factor_ex"), out)


def _lu_factor_ex(A: Tensor, pivot: bool, check_errors: bool, fn: str):
    _check(A, fn, square=False, low_kernel="lu_cpu", int_kernel="lu_cpu")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, info = _lu_array(A._data)
    if check_errors:
        _raise_info(info, "torch." + fn, _LU_SINGULAR, RuntimeError)
    LU = _result(lu_)
    if needs_grad(A):
        saved = alias(LU)
        pivots = _wrap(piv)

        def lu_factor_backward(g):
            P, L, U = lu_unpack(saved_output(saved, lambda: linalg_lu_factor_ex(A).LU), pivots)
            k = min(A.shape[-2:])
            return _lu_backward(g.narrow(-1, 0, k).tril(-1), g.narrow(-2, 0, k).triu(), P, L, U)
        record("LinalgLuFactorExBackward0", lu_factor_backward, LU, (A,), (saved,))
    return _lu_factor_ex_t(LU, _wrap(piv), _info(info, A.shape[:-2]))


def linalg_lu_factor(A: Tensor, *, pivot: bool = True, out=None):
    """linalg.lu_factor_ex, raising for a singular matrix (lu_solve would divide by zero)."""
    LU, piv, info = _lu_factor_ex(A, pivot, False, "linalg.lu_factor")
    _raise_info(info._data, "torch.linalg.lu_factor", _LU_SINGULAR, RuntimeError)
    return _out(_lu_factor_t(LU, piv), out)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True, *,
              out=None):
    """(P, L, U) with A = P L U from lu_factor's packed LU and pivots (empty tensors for parts not unpacked)."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    xp = _xp(LU_data._data)
    empty = _wrap(xp.zeros((0,), dtype=LU_data._data.dtype))
    L = U = P = empty
    if unpack_data:
        L = LU_data.narrow(-1, 0, k).tril(-1) + _wrap(xp.eye(m, k, dtype=LU_data._data.dtype))
        U = LU_data.narrow(-2, 0, k).triu()
    if unpack_pivots:
        P = _wrap(_permutation_array(LU_pivots._data, m, LU_data._data.dtype))
    return _out(_lu_unpack_t(P, L, U), out)


def linalg_lu(A: Tensor, *, pivot: bool = True, out=None):
    """(P, L, U) with A = P L U: P a permutation, L unit lower triangular (m x k), U upper triangular (k x n)."""
    _check(A, "linalg.lu", square=False, low_kernel="lu_cpu", int_kernel="lu_cpu")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, _ = _lu_array(A._data)
    P, L, U = lu_unpack(_wrap(lu_), _wrap(piv))
    if needs_grad(A):
        saved = (alias(L), alias(U))

        def lu_backward(gL, gU):
            L_, U_ = _saved(saved, lambda: linalg_lu(A)[1:])
            return _lu_backward(gL, gU, P, L_, U_)
        record("LinalgLuBackward0", lu_backward, (L, U), (A,), saved)
    return _out(_linalg_lu_t(P, L, U), out)


def _lu_backward(gL, gU, P: Tensor, L: Tensor, U: Tensor) -> Tensor:
    """PyTorch's linalg_lu_backward for A = P L U (square, wide or tall)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        gA = None
        if gL is not None:
            gA = matmul(_mH(L), gL).tril(-1)
        if gU is not None:
            part = matmul(gU, _mH(U)).triu()
            gA = part if gA is None else gA + part
        gA = linalg_solve_triangular(_mH(U), gA, upper=False, left=False)
        gA = linalg_solve_triangular(_mH(L), gA, upper=True, unitriangular=True)
        return matmul(P, gA)
    if m < n:  # wide: U = [U1 U2]
        U1 = U.narrow(-1, 0, k)
        gA = matmul(_mH(L), gL) if gL is not None else None
        if gU is not None:
            part = matmul(gU.triu(), _mH(U))
            gA = -part if gA is None else gA - part
        gA = linalg_solve_triangular(_mH(U1), gA.tril(-1), upper=False, left=False)
        if gU is not None:
            gA = cat([gA + gU.narrow(-1, 0, k).triu(), gU.narrow(-1, k, n - k)], -1)
        gA = linalg_solve_triangular(_mH(L), gA, upper=True, unitriangular=True)
        if gU is None:
            gA = cat([gA, U.narrow(-1, k, n - k) * 0], -1)
        return matmul(P, gA)
    L1 = L.narrow(-2, 0, k)  # tall: L = [L1; L2]
    gA = matmul(gU, _mH(U)) if gU is not None else None
    if gL is not None:
        part = matmul(_mH(L), gL.tril(-1))
        gA = -part if gA is None else gA - part
    gA = linalg_solve_triangular(_mH(L1), gA.triu(), upper=True, unitriangular=True)
    if gL is not None:
        gA = cat([gA + gL.narrow(-2, 0, k).tril(-1), gL.narrow(-2, k, m - k)], -2)
    gA = linalg_solve_triangular(_mH(U), gA, upper=False, left=False)
    if gL is None:
        gA = cat([gA, L.narrow(-2, k, m - k) * 0], -2)
    return matmul(P, gA)


def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False,
                    out=None) -> Tensor:
    """X with A X = B (X A = B when not left; A^H in place of A when adjoint), given lu_factor's LU and pivots."""
    _check(LU, "torch.linalg.lu_solve", "LU", low_kernel="linalg.lu_solve_cpu")
    P, L, U = lu_unpack(LU, pivots)
    Pt = P.mT
    if left and not adjoint:
        X = linalg_solve_triangular(U, linalg_solve_triangular(L, matmul(Pt, B), upper=False, unitriangular=True),
                                    upper=True)
    elif left:
        Y = linalg_solve_triangular(_mH(U), B, upper=False)
        X = matmul(P, linalg_solve_triangular(_mH(L), Y, upper=True, unitriangular=True))
    elif not adjoint:
        Y = linalg_solve_triangular(U, B, upper=True, left=False)
        X = matmul(linalg_solve_triangular(L, Y, upper=False, left=False, unitriangular=True), Pt)
    else:
        Y = linalg_solve_triangular(_mH(L), matmul(B, P), upper=True, left=False, unitriangular=True)
        X = linalg_solve_triangular(_mH(U), Y, upper=False, left=False)
    return _out(X, out)


@_autocast_op("lu_solve")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out=None) -> Tensor:
    """torch.lu_solve (deprecated in PyTorch): linalg.lu_solve(LU_data, LU_pivots, b)."""
    return _out(linalg_lu_solve(LU_data, LU_pivots, b), out)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False, out=None):
    """torch.lu (deprecated in PyTorch): (LU, pivots), and infos when get_infos."""
    LU, piv, info = _lu_factor_ex(A, pivot, False, "torch.lu")
    result = (LU, piv, info) if get_infos else (LU, piv)
    return _out(result, out)


# ------------------------------------------------------------------ Tensor methods

attach(mH=property(_mH), det=det, logdet=logdet, slogdet=slogdet, inverse=inverse, pinverse=pinverse, cholesky=cholesky,
       cholesky_solve=cholesky_solve, cholesky_inverse=cholesky_inverse, qr=qr, svd=svd, matrix_exp=matrix_exp,
       triangular_solve=triangular_solve, lu=lu, lu_solve=lu_solve)
