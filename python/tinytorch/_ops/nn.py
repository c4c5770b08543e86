"""Neural-network ops: fused softmax/log_softmax, losses, layer_norm, linear, activations, dropout,
attention, padding; each forward beside its derivative.

The fused ops compute forward and backward directly on arrays in a few passes (on CUDA float32/16
through the kernels in src/*.cu). Under create_graph their backward is written with tensor ops
instead, so that double backward sees how the gradient depends on the inputs.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _C, _autocast, _threads
from .._meta import MetaArray, namespace as meta_namespace
from .._tensor import Tensor, _wrap, _wrap_dim
from ._common import (_grad_enabled, alias, attach, float_data, inplace_unary, needs_grad, record, saved_output)
from . import _cpu, pointwise as _pw
from .linalg import _FLOATS, _matmul
from .shape import empty_pieces_like
from ._common import user_stacklevel as _user_stacklevel
from .normalization import _check_mixed_dtype

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _xp(a):
    """numpy or cupy, whichever holds `a`."""
    if type(a) is np.ndarray:
        return np
    if type(a) is MetaArray:
        return meta_namespace
    from .._device import cupy
    return cupy()


def _is_cuda(a) -> bool:
    return type(a) is not np.ndarray and type(a) is not MetaArray


def _kernel_ok(a) -> bool:
    """Whether the CUDA kernels in src/ handle this array (float32 compute; halves are upcast)."""
    return _is_cuda(a) and a.dtype in (np.float32, np.float16)


def _compute(a):
    """The array in a dtype fit to accumulate in: halves (float16, bfloat16) compute in float32."""
    return a.astype(np.float32) if a.dtype.itemsize < 4 else a


def _to_tensor(x, like: Tensor) -> Tensor:
    if isinstance(x, Tensor):
        return x
    from .._creation import tensor
    return tensor(x, dtype=like.dtype, device=like.device)


# ------------------------------------------------------------------ erf (NumPy has none)

# W. J. Cody's rational Chebyshev approximations (CALERF), relative error below 1e-15 in float64.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
          1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
          8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
          2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
          3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
          6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
          2.33520497626869185e-3)


def _erfc_tail(y, mid: bool):
    """erfc(y) for y > 0.46875: the middle range (y <= 4) or the asymptotic range."""
    if mid:
        num, den = _ERF_C[8] * y, y
        for i in range(7):
            num = (num + _ERF_C[i]) * y
            den = (den + _ERF_D[i]) * y
        r = (num + _ERF_C[7]) / (den + _ERF_D[7])
    else:
        z = 1 / (y * y)
        num, den = _ERF_P[5] * z, z
        for i in range(4):
            num = (num + _ERF_P[i]) * z
            den = (den + _ERF_Q[i]) * z
        r = (0.56418958354775628695 - z * (num + _ERF_P[4]) / (den + _ERF_Q[4])) / y
    # exp(-y^2) split in two so that the rounding of y^2 does not cost accuracy.
    t = np.trunc(y * 16) / 16
    return np.exp(-t * t) * np.exp(-(y - t) * (y + t)) * r


# float32: one rational function x * P(x^2) / Q(x^2) on [-4, 4] (Eigen's generic_fast_erf_float), within
# 4 ulp and without the branches that float64 accuracy needs.
_ERF32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)


def _erf_float32(x):
    x = np.clip(x, np.float32(-4.0), np.float32(4.0))
    z = x * x
    p = np.full_like(z, _ERF32_P[0])
    for c in _ERF32_P[1:]:
        p *= z
        p += np.float32(c)
    q = np.full_like(z, _ERF32_Q[0])
    for c in _ERF32_Q[1:]:
        q *= z
        q += np.float32(c)
    p *= x
    p /= q
    return p


def erf_array(x):
    """erf of a NumPy array (float64 to 1e-15, others in float32 to a few ulp), or of a CuPy array."""
    if _is_cuda(x):
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(x)
    if type(x) is MetaArray:  # erf keeps shape and floating dtype
        return x.copy()
    x = np.asarray(x)
    out_dtype = x.dtype
    if out_dtype != np.float64:
        return _erf_float32(x.astype(np.float32, copy=False)).astype(out_dtype, copy=False)
    y = np.abs(x)
    out = np.empty_like(x)
    small = y <= 0.46875
    if small.all():  # the common case for activations near zero: one branch, no masking
        z = x * x
        num, den = _ERF_A[4] * z, z
        for i in range(3):
            num = (num + _ERF_A[i]) * z
            den = (den + _ERF_B[i]) * z
        return np.asarray(x * (num + _ERF_A[3]) / (den + _ERF_B[3]), out_dtype)  # 0-d stays an array
    xs = x[small]
    z = xs * xs
    num, den = _ERF_A[4] * z, z
    for i in range(3):
        num = (num + _ERF_A[i]) * z
        den = (den + _ERF_B[i]) * z
    out[small] = xs * (num + _ERF_A[3]) / (den + _ERF_B[3])
    mid = ~small & (y <= 4.0)
    out[mid] = np.copysign(1 - _erfc_tail(y[mid], True), x[mid])
    big = y > 4.0
    if big.any():
        yb = np.minimum(y[big], 27.0)  # erfc underflows to 0 long before 27; keeps 1/y^2 finite for inf
        out[big] = np.copysign(1 - _erfc_tail(yb, False), x[big])
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out.astype(out_dtype, copy=False)


def erf(a: Tensor) -> Tensor:
    """Elementwise error function."""
    out = _wrap(erf_array(float_data(a)))
    if needs_grad(a):
        record("ErfBackward0", lambda g: g * (-(a * a)).exp() * _TWO_OVER_SQRT_PI, out, (a,), (a,))
    return out


# ------------------------------------------------------------------ softmax / log_softmax


def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=_user_stacklevel())
    return 0 if ndim in (0, 1, 3) else 1


def _around(shape: tuple, axis: int) -> tuple:
    """(A, R, C): the elements before, along and after axis."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _softmax_array(x, axis: int, log: bool, safe: bool = False):
    """softmax (or log_softmax) along axis in three passes: max, sum of exp, normalise."""
    if x.ndim == 0:
        return _xp(x).zeros_like(x) if log else _xp(x).ones_like(x)
    if _kernel_ok(x) and axis == x.ndim - 1 and x.size:
        from .. import _kernels
        return _kernels.softmax_forward(x, log, safe)
    if not safe and axis == x.ndim - 1 and x.size and _cpu_fusable(x):  # one pass per row in C++
        out = np.empty_like(x)
        _C._cpu.softmax(x, out, log, _threads.count)
        return out
    if not safe and x.size and _cpu_fusable(x):  # a middle dimension: blocks of columns at a time in C++
        out = np.empty_like(x)
        _C._cpu.softmax_inner(x, out, *_around(x.shape, axis), log)
        return out
    xp = _xp(x)
    c = _compute(x)
    m = c.max(axis=axis, keepdims=True) if c.size else c.sum(axis=axis, keepdims=True)
    if safe:  # fully masked rows (all -inf) give 0, not nan (PyTorch's _safe_softmax for attention)
        m = xp.where(xp.isneginf(m), 0, m).astype(c.dtype, copy=False)
    z = c - m
    if log:
        s = xp.exp(z).sum(axis=axis, keepdims=True)
        z -= xp.log(s)
        return z.astype(x.dtype, copy=False)
    # In place from here on: one array for exp and the quotient (softmax runs on attention's largest tensors).
    e = xp.exp(z, out=z)
    s = e.sum(axis=axis, keepdims=True)
    if safe:
        s = xp.where(s > 0, s, xp.inf)  # fully masked rows: 0 / inf = 0
    e /= s
    return e.astype(x.dtype, copy=False)


def _softmax_backward_array(y, g, axis: int, log: bool):
    if y.ndim == 0:
        return _xp(g).zeros_like(g)
    if _kernel_ok(y) and axis == y.ndim - 1 and y.dtype == g.dtype and y.size:
        from .. import _kernels
        return _kernels.softmax_backward(y, g, log)
    if axis == y.ndim - 1 and y.size and _cpu_fusable(y, g):
        out = np.empty_like(y)
        _C._cpu.softmax_backward(y, g, out, log, _threads.count)
        return out
    if y.size and _cpu_fusable(y, g):
        out = np.empty_like(y)
        _C._cpu.softmax_inner_backward(y, g, out, *_around(y.shape, axis), log)
        return out
    yc, gc = _compute(y), _compute(g)
    if log:
        dx = gc - _xp(yc).exp(yc) * gc.sum(axis=axis, keepdims=True)
    else:
        dx = gc * yc
        dx -= yc * dx.sum(axis=axis, keepdims=True)
    return dx.astype(y.dtype, copy=False)


def _softmax_op(x: Tensor, dim, dtype, log: bool, safe: bool = False, allowed=None) -> Tensor:
    """softmax/log_softmax; `allowed` (a bool array broadcasting to x) masks the other positions to -inf
    inside the same node (softmax only: its gradient is already zero where the output is)."""
    name = "log_softmax" if log else "softmax"
    if dim is None:
        dim = _softmax_dim(name, x._data.ndim)
    if dtype is not None:
        x = x.to(dtype)
    d = _wrap_dim(dim, x._data.ndim)
    xd = x._data
    if xd.dtype.kind not in "fV":
        if xd.size == 0:  # PyTorch's kernels return before their dtype dispatch
            return x.clone()
        kernel = f"{name}_lastdim_kernel_impl" if d == max(xd.ndim - 1, 0) else f"{name}_kernel_impl"
        _float_array(x, kernel)
    if allowed is not None:
        xd = _xp(xd).where(allowed, xd, xd.dtype.type(-np.inf))
    out = _wrap(_softmax_array(xd, d, log, safe))
    if needs_grad(x):
        y_alias = alias(out)

        def softmax_backward(g):
            if _grad_enabled():
                y = saved_output(y_alias, lambda: _softmax_op(x, d, None, log, safe, allowed))
                if log:
                    return g - y.exp() * g.sum(d, keepdim=True)
                return y * (g - (g * y).sum(d, keepdim=True))
            return _wrap(_softmax_backward_array(y_alias._data, g._data, d, log))
        record("LogSoftmaxBackward0" if log else "SoftmaxBackward0", softmax_backward, out, (x,), (y_alias,))
    return out


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim, computed stably."""
    if _autocast.active:
        return _autocast.dispatch("softmax", softmax, input, dim, _stacklevel, dtype=dtype)
    return _softmax_op(input, dim, dtype, log=False)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim."""
    if _autocast.active:
        return _autocast.dispatch("log_softmax", log_softmax, input, dim, _stacklevel, dtype=dtype)
    return _softmax_op(input, dim, dtype, log=True)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x) along dim."""
    if _autocast.active:
        return _autocast.dispatch("softmin", softmin, input, dim, _stacklevel, dtype=dtype)
    return _softmax_op(-input, dim, dtype, log=False)


# ------------------------------------------------------------------ nll_loss / cross_entropy


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _class_targets(x: Tensor, target: Tensor, weight, ignore_index: int):
    """Validate class-index targets; return (flat targets clamped to range, valid mask, per-row weight,
    weight array or None, rows, classes, whether no row is ignored). Errors use PyTorch's messages."""
    shape = x._data.shape
    if x._data.ndim == 0:
        raise RuntimeError("input tensor should be 1D or 2D")
    t = target._data
    if t.dtype != np.int64:
        from ._common import _short
        # PyTorch's nll_loss takes int64 and uint8 class indices; nll_loss2d (inputs of 3+ dims) int64 only
        if t.dtype != np.uint8:
            raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_short(target.dtype)}")
        if x._data.ndim > 2:
            raise RuntimeError("expected scalar type Long but found Byte")
    if x._data.ndim == 1:
        if t.ndim != 0:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        C = shape[0]
    else:
        C = shape[1]
        if x._data.ndim == 2 and t.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if t.ndim == 0 or t.shape[0] != shape[0]:
            raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size "
                             f"({t.shape[0] if t.ndim else 0}).")
        want = (shape[0],) + tuple(shape[2:])
        if tuple(t.shape) != want:
            raise RuntimeError(f"Expected target size {list(want)}, got {list(t.shape)}")
    xp = _xp(x._data)
    tf = t.reshape(-1)
    if type(tf) is not type(x._data):
        tf = xp.asarray(tf) if xp is not np else tf.get()
    valid = tf != ignore_index
    every = type(tf) is not MetaArray and bool(valid.all())  # no row ignored: the common case, fewer passes
    if tf.size and type(tf) is not MetaArray:  # meta targets hold no values to check
        tv = tf if every else tf[valid]
        if tv.size:
            lo, hi = int(tv.min()), int(tv.max())
            if hi >= C or lo < 0:
                raise IndexError(f"Target {hi if hi >= C else lo} is out of bounds.")
    tc = (tf if every else xp.where(valid, tf, 0)).astype(np.int64, copy=False)
    w = None
    if weight is not None:
        w = weight._data
        if w.ndim != 1 or w.shape[0] != C:
            raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                               f"weight tensor of shape: {list(w.shape)}")
        w = _compute(w)
        wt = xp.where(valid, w[tc], 0)
    else:
        wt = valid.astype(_compute(x._data).dtype)
    return tc, valid, wt, w, tc.shape[0], C, every


def _rows(a, C: int):
    """View (N, C, d1, ...) as rows of C classes: (N * d1 * ..., C)."""
    if a.ndim == 1:
        return a.reshape(1, C)
    if a.ndim == 2:
        return a
    return _xp(a).moveaxis(a, 1, -1).reshape(-1, C)


def _unrows(a, shape: tuple):
    """Undo _rows."""
    if len(shape) <= 2:
        return a.reshape(shape)
    moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return _xp(a).moveaxis(a.reshape(moved), -1, 1)


def _class_dense(tc, b, r, u, rows: int, C: int, dtype):
    """The dense target matrix A = b * onehot(t) + r * u (rows x C) that the loss dots with log-probs."""
    xp = _xp(tc)
    A = xp.zeros((rows, C), dtype)
    A[xp.arange(rows), tc] = b
    if r is not None:
        A += r[:, None] * u
    return A


def _per(v, n: int, dtype):
    """v (a number or an array of 1 or n values; None stays None) as n contiguous values of dtype: a per-row or
    per-class operand of the C++ cross entropy."""
    if v is None:
        return None
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype), (n,)))


def _cross_entropy_class(x: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                         label_smoothing: float) -> Tensor:
    """Fused log_softmax + nll_loss (+ label smoothing) for class-index targets."""
    tc, valid, wt, w, M, C, every = _class_targets(x, target, weight, ignore_index)
    xp = _xp(x._data)
    shape = x._data.shape
    eps = float(label_smoothing)
    x2 = _rows(x._data, C)
    dt = _compute(x2).dtype
    with np.errstate(invalid="ignore", divide="ignore"):
        no_weight = False
        if reduction == "mean":
            d1 = M if every and w is None else wt.sum()
            # Every row ignored (or of weight 0): the mean is 0/0 = NaN, as PyTorch's, but the gradient is 0
            # (PyTorch's): the rows' coefficients divide by 1 instead, and the loss is made NaN below
            no_weight = bool(d1 == 0)
            b = (1 - eps) * wt / (1 if no_weight else d1)
            d2 = d1 if w is not None or every else valid.sum()
            if no_weight or d2 == 0:
                d2 = 1
        else:
            b = (1 - eps) * wt
            d2 = 1
        r = u = None
        if eps > 0:
            r = valid.astype(dt) / d2
            u = (w if w is not None else xp.ones(C, dt)) * (eps / C)
        if _kernel_ok(x2) and x2.size:
            from .. import _kernels
            lse, nll, smooth = _kernels.cross_entropy_forward(x2, tc, u)
        elif _cpu_fusable(x2) and x2.size:  # one pass a row in C++ instead of six NumPy passes over all
            lse, nll = np.empty(M, x2.dtype), np.empty(M, x2.dtype)
            smooth = np.empty(M, x2.dtype) if u is not None else None
            _C._cpu.cross_entropy_forward(x2, tc, _per(u, C, x2.dtype), lse, nll, smooth, _threads.count)
        else:
            xc = _compute(x2)
            m = xc.max(axis=1, keepdims=True) if xc.size else xp.zeros((M, 1), dt)
            lse = (xp.log(xp.exp(xc - m).sum(axis=1, keepdims=True)) + m).reshape(-1)
            nll = lse - xc[xp.arange(M), tc]
            smooth = (lse * u.sum() - xc @ u) if u is not None else None
        rows_loss = b * nll
        if r is not None:
            rows_loss = rows_loss + r * smooth
        if not every:  # an ignored row counts for nothing, even with NaN or inf logits (0 * NaN)
            rows_loss = xp.where(valid, rows_loss, 0)
    if reduction == "none":
        out_arr = rows_loss.reshape(target._data.shape)
    else:
        out_arr = rows_loss.sum() if not no_weight else xp.asarray(np.nan, rows_loss.dtype)
    out = _wrap(xp.asarray(out_arr).astype(x._data.dtype, copy=False))
    if needs_grad(x):
        s = b if r is None else b + r * u.sum()
        class_dim = 0 if x._data.ndim == 1 else 1

        def cross_entropy_backward(g):
            if _grad_enabled():
                A = _wrap(_unrows(_class_dense(tc, b, r, u, M, C, x2.dtype), shape))
                st = _wrap(_unrows(s.reshape(-1, 1).astype(x2.dtype), shape[:1] + (1,) + shape[2:])
                           if x._data.ndim > 1 else s.astype(x2.dtype))
                gexp = g if reduction != "none" else (g.unsqueeze(class_dim) if x._data.ndim > 1 else g)
                return gexp * (softmax(x, class_dim) * st - A)
            gd = _compute(g._data)
            grow = gd.reshape(-1) if reduction == "none" else gd
            if _kernel_ok(x2) and x2.size:
                from .. import _kernels
                cr = None if r is None else grow * r
                dx = _kernels.cross_entropy_backward(x2, lse, tc, grow * s, grow * b, cr, u)
            elif _cpu_fusable(x2) and x2.size:
                f = x2.dtype
                dx = np.empty_like(x2)
                _C._cpu.cross_entropy_backward(x2, _per(lse, M, f), tc, _per(grow * s, M, f), _per(grow * b, M, f),
                                               None if r is None else _per(grow * r, M, f), _per(u, C, f), dx,
                                               _threads.count)
            else:
                xc = _compute(x2)
                coef = grow * s
                if reduction != "none":
                    coef = xp.broadcast_to(coef, (M,))
                dx = xp.exp(xc - lse[:, None]) * coef[:, None]
                dx[xp.arange(M), tc] -= grow * b
                if r is not None:
                    dx -= (grow * r)[:, None] * u
            return _wrap(_unrows(dx.astype(x2.dtype, copy=False), shape))
        record("NllLossBackward0", cross_entropy_backward, out, (x,), (x,))
    return out


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits and class indices or class probabilities (log_softmax + nll)."""
    if _autocast.active:
        return _autocast.dispatch("cross_entropy", cross_entropy,
                                  input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if target.dtype.is_floating_point or (input._data.ndim and target._data.shape == input._data.shape):
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing)
    return _cross_entropy_class(input, target, weight, ignore_index, reduction, label_smoothing)


def _cross_entropy_probs(x: Tensor, target: Tensor, weight, reduction: str, eps: float) -> Tensor:
    if not target.dtype.is_floating_point:  # an integer target of the input's shape: one-hot, not indices
        from ._common import _short
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                           f"{_short(target.dtype)}")
    if tuple(x._data.shape) != tuple(target._data.shape):
        if x._data.ndim >= 1 and target._data.ndim >= 1 and x._data.shape[0] != target._data.shape[0]:
            raise ValueError(f"Expected input batch_size ({x._data.shape[0]}) to match target batch_size "
                             f"({target._data.shape[0]}).")
        from ._common import _short
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_short(target.dtype)}")
    class_dim = 0 if x._data.ndim == 1 else 1
    C = x._data.shape[class_dim]
    logp = log_softmax(x, class_dim)
    t = target * (1 - eps) + eps / C if eps > 0 else target
    if weight is not None:
        shape = [1] * x._data.ndim
        shape[class_dim] = C
        t = t * weight.reshape(shape)
    loss = -(logp * t).sum(class_dim)
    if reduction == "mean":
        return loss.sum() / (x._data.size // C if C else 0)
    if reduction == "sum":
        return loss.sum()
    return loss


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities at the target classes."""
    if _autocast.active:
        return _autocast.dispatch("nll_loss", nll_loss,
                                  input, target, weight, size_average, ignore_index, reduce, reduction)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    x = input
    tc, valid, wt, w, M, C, _ = _class_targets(x, target, weight, ignore_index)
    xp = _xp(x._data)
    shape = x._data.shape
    x2 = _rows(x._data, C)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = wt / wt.sum() if reduction == "mean" else wt
        rows_loss = -b * _compute(x2)[xp.arange(M), tc]
    out_arr = rows_loss.reshape(target._data.shape) if reduction == "none" else rows_loss.sum()
    out = _wrap(xp.asarray(out_arr).astype(x._data.dtype, copy=False))
    if needs_grad(x):
        class_dim = 0 if x._data.ndim == 1 else 1
        dt = x2.dtype

        def nll_loss_backward(g):
            A = _wrap(_unrows(_class_dense(tc, b, None, None, M, C, dt), shape))
            gexp = g if reduction != "none" else (g.unsqueeze(class_dim) if len(shape) > 1 else g)
            return -(gexp * A)
        record("NllLossBackward0", nll_loss_backward, out, (x,))
    return out


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


# ------------------------------------------------------------------ layer_norm


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing normalized_shape dims to zero mean and unit variance, then scale and shift."""
    if _autocast.active:
        return _autocast.dispatch("layer_norm", layer_norm, input, normalized_shape, weight, bias, eps)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    x = input
    xd = x._data
    shape = xd.shape
    k = len(ns)
    if k == 0 or shape[len(shape) - k:] != ns or len(shape) < k:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size{list(shape)}")
    w = weight._data if weight is not None else None
    bb = bias._data if bias is not None else None
    for name, a in (("weight", w), ("bias", bb)):
        if a is not None and a.shape != ns:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(a.shape)} and normalized_shape = {list(ns)}")
    if (w is not None and w.dtype != xd.dtype) or (bb is not None and bb.dtype != xd.dtype):
        _check_mixed_dtype(x, (weight, bias))
    n = ns[0] if k == 1 else math.prod(ns)
    x2 = xd.reshape(-1, n)
    if k > 1:
        w = w.reshape(-1) if w is not None else None
        bb = bb.reshape(-1) if bb is not None else None
    xp = _xp(xd)
    if _kernel_ok(x2) and x2.size and (w is None or w.dtype == x2.dtype) and (bb is None or bb.dtype == x2.dtype):
        from .. import _kernels
        y, mean, rstd = _kernels.layer_norm_forward(x2, w, bb, eps)
    elif x2.size and _cpu_fusable_params(x2, w, bb):
        y = np.empty_like(x2)
        mean, rstd = np.empty(x2.shape[0], x2.dtype), np.empty(x2.shape[0], x2.dtype)
        _C._cpu.layer_norm(x2, n, w, bb, eps, y, mean, rstd, _threads.count)
    else:
        xc = _compute(x2)
        mean = xc.mean(axis=1, keepdims=True)
        d = xc - mean
        rstd = 1 / xp.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
        y = d * rstd
        if w is not None:
            y *= w
        if bb is not None:
            y += bb
        y = y.astype(xd.dtype, copy=False)
    out = _wrap(y.reshape(shape))
    if needs_grad(x, weight, bias):
        rx = x._requires_grad
        rw = weight is not None and weight._requires_grad
        rb = bias is not None and bias._requires_grad

        def layer_norm_backward(g):
            if _grad_enabled():
                return _layer_norm_backward_graph(g, x, weight, bias is not None, n, ns, eps, rx, rw, rb)
            g2 = g._data.reshape(-1, n)
            if _kernel_ok(x2) and x2.size and g2.dtype == x2.dtype and (w is None or w.dtype == x2.dtype):
                from .. import _kernels
                dx, dw, db = _kernels.layer_norm_backward(x2, g2, w, mean, rstd)
            elif type(mean) is np.ndarray and mean.ndim == 1:  # the forward ran the C++ kernel
                g2 = np.ascontiguousarray(g2, dtype=x2.dtype)
                dx = np.empty_like(x2) if rx else None
                dw = np.empty(n, x2.dtype) if rw else None
                db = np.empty(n, x2.dtype) if rb else None
                _C._cpu.layer_norm_backward(g2, x2, n, w, mean, rstd, dx, dw, db, _threads.count)
            else:
                gc = _compute(g2)
                xhat = (_compute(x2) - mean) * rstd
                dw = (gc * xhat).sum(axis=0) if rw else None
                db = gc.sum(axis=0) if rb else None
                dx = None
                if rx:
                    gx = gc * w if w is not None else gc
                    dx = rstd * (gx - gx.mean(axis=1, keepdims=True) - xhat * (gx * xhat).mean(axis=1, keepdims=True))
            res = [_wrap(dx.astype(xd.dtype, copy=False).reshape(shape)) if rx else None]
            if weight is not None:
                res.append(_wrap(dw.astype(weight._data.dtype, copy=False).reshape(ns)) if rw else None)
            if bias is not None:
                res.append(_wrap(db.astype(bias._data.dtype, copy=False).reshape(ns)) if rb else None)
            return tuple(res) if len(res) > 1 else res[0]
        inputs = (x,) if weight is None and bias is None else (x, weight) if bias is None else \
            (x, bias) if weight is None else (x, weight, bias)
        record("NativeLayerNormBackward0", layer_norm_backward, out, inputs, inputs)
    return out


def _layer_norm_backward_graph(g, x, weight, has_bias, n, ns, eps, rx, rw, rb):
    """layer_norm's backward in tensor ops (differentiable again, for create_graph)."""
    xs = x.reshape(-1, n)
    mean = xs.mean(1, keepdim=True)
    d = xs - mean
    rstd = ((d * d).mean(1, keepdim=True) + eps).rsqrt()
    xhat = d * rstd
    g2 = g.reshape(-1, n)
    res = [None]
    if rx:
        gx = g2 * weight.reshape(-1) if weight is not None else g2
        dx = rstd * (gx - gx.mean(1, keepdim=True) - xhat * (gx * xhat).mean(1, keepdim=True))
        res[0] = dx.reshape(x.shape)
    if weight is not None:
        res.append((g2 * xhat).sum(0).reshape(ns) if rw else None)
    if has_bias:
        res.append(g2.sum(0).reshape(ns) if rb else None)
    return tuple(res) if len(res) > 1 else res[0]


# ------------------------------------------------------------------ linear


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, with one matrix product over all leading dims."""
    if _autocast.active:
        return _autocast.dispatch("linear", linear, input, weight, bias)
    x, w = input, weight
    xd, wd = x._data, w._data
    if wd.ndim == 1:
        out = (x * w).sum(-1)
        return out + bias if bias is not None else out
    if xd.ndim == 0 or wd.ndim != 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {wd.ndim}D" if wd.ndim > 2 else
                           "both arguments to linear need to be at least 1D, but they are 0D and 2D")
    if bias is not None and (xd.dtype != wd.dtype or bias._data.dtype != xd.dtype):
        # PyTorch's addmm checks dtypes before shapes; without a bias, mm checks them after (below)
        from ._common import _short
        if xd.dtype != wd.dtype:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_short(x.dtype)} and "
                               f"{_short(w.dtype)}")
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_short(bias.dtype)} and "
                           f"{_short(w.dtype)}")
    K = xd.shape[-1]
    if K != wd.shape[1]:
        m = xd.size // K if K else 0
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({m}x{K} and {wd.shape[1]}x{wd.shape[0]})")
    if xd.dtype != wd.dtype:
        from .linalg import _CPP_NAMES
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP_NAMES.get(x.dtype.name)} != "
                           f"{_CPP_NAMES.get(w.dtype.name)}")
    lead = xd.shape[:-1]
    M = math.prod(lead)  # not -1: with K or O zero the rows could not be inferred
    x2 = xd.reshape(M, K)
    if xd.dtype.itemsize == 2 and xd.dtype.kind in "fV" and (type(xd) is np.ndarray or type(xd) is MetaArray):
        # float16/bfloat16 on the CPU: float32 accumulation in BLAS, rounded once (NumPy's 2-byte matmul
        # loops are slow, and ml_dtypes' bfloat16 matmul returns float32)
        y = _matmul(x2.astype(np.float32), wd.T.astype(np.float32))
        if bias is not None:
            y += bias._data.astype(np.float32)
        y = y.astype(xd.dtype)
    else:
        y = _matmul(x2, wd.T)
        if bias is not None and _cpu.binary(_cpu.ADD, y, bias._data, out=y) is None:
            y += bias._data
    out = _wrap(y.reshape(lead + (wd.shape[0],)))
    if needs_grad(x, w, bias):
        rx, rw = x._requires_grad, w._requires_grad
        rb = bias is not None and bias._requires_grad
        O = wd.shape[0]

        def linear_backward(g):
            if not _grad_enabled() and type(g._data) is np.ndarray and g._data.dtype == xd.dtype and \
                    xd.dtype in _FLOATS and type(x._data) is np.ndarray and type(w._data) is np.ndarray:
                # The two products straight on the arrays: the tensor ops below cost ~15 us of Python a node.
                ga = g._data.reshape(M, O)
                gx = _wrap(_matmul(ga, w._data).reshape(x._data.shape)) if rx else None
                gw = _wrap(_matmul(ga.T, x._data.reshape(M, K))) if rw else None
                g2 = _wrap(ga)
            else:
                g2 = g.reshape(M, O)
                gx = (g2 @ w).reshape(x.shape) if rx else None
                gw = g2.t() @ x.reshape(M, K) if rw else None
            if bias is None:
                return gx, gw
            return gx, gw, (g2.sum(0) if rb else None)
        inputs = (x, w) if bias is None else (x, w, bias)
        record("AddmmBackward0" if bias is not None else "MmBackward0", linear_backward, out, inputs, (x, w))
    return out


def _dt(np_dtype):
    from .._dtype import from_numpy_dtype
    return from_numpy_dtype(np_dtype)


# ------------------------------------------------------------------ activations


def _float_array(a: Tensor, kernel: str, kinds: str = "fV"):
    """a's array for an op PyTorch implements for floating types only: its NotImplementedError naming the CPU
    kernel otherwise ("V" is ml_dtypes' bfloat16)."""
    d = a._data
    if d.dtype.kind not in kinds:
        from ._common import _short
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_short(d.dtype)}'")
    return d


def _activation(name: str, forward, backward, kernel: str):
    """An elementwise op: forward(array) -> array; backward(g, x) with tensor ops (so differentiable)."""
    node = name.capitalize() + "Backward0"

    def op(a: Tensor) -> Tensor:
        y = forward(_float_array(a, kernel, "fVc"))
        out = _wrap(np.asarray(y) if isinstance(y, np.generic) else y)  # NumPy gives 0-d input a scalar back
        if needs_grad(a):
            record(node, lambda g: backward(g, a), out, (a,), (a,))
        return out
    op.__name__ = name
    return op


def _cpu_fusable(*arrays) -> bool:
    """Contiguous float32/float64 NumPy arrays of one dtype: the fused C++ CPU kernels take them."""
    first = arrays[0]
    return all(type(a) is np.ndarray and a.dtype == first.dtype and a.flags.c_contiguous for a in arrays) and \
        first.dtype in (np.float32, np.float64)


def _cpu_fusable_params(x, w, b) -> bool:
    """_cpu_fusable(x, w, b) for a normalisation's optional weight and bias (None: absent), without building the
    argument list: the layer norms of a transformer's forward pay it per call."""
    if type(x) is not np.ndarray or not x.flags.c_contiguous or x.dtype not in (np.float32, np.float64):
        return False
    for a in (w, b):
        if a is not None and (type(a) is not np.ndarray or a.dtype != x.dtype or not a.flags.c_contiguous):
            return False
    return True


def _gelu_array(x, approximate: str):
    if _kernel_ok(x):
        from .. import _kernels
        return _kernels.gelu_forward(x, approximate == "tanh")
    if _cpu_fusable(x):  # one pass in C++ instead of a dozen NumPy passes for erf
        out = np.empty_like(x)
        _C._cpu.gelu(x, out, approximate == "tanh", _threads.count)
        return out
    xp = _xp(x)
    c = _compute(x)
    if approximate == "tanh":
        y = 0.5 * c * (1 + xp.tanh(_SQRT_2_OVER_PI * (c + 0.044715 * c * c * c)))
    else:
        y = 0.5 * c * (1 + erf_array(c * _SQRT1_2))
    return y.astype(x.dtype, copy=False)


def _gelu_backward_array(x, g, approximate: str):
    if _kernel_ok(x) and g.dtype == x.dtype:
        from .. import _kernels
        return _kernels.gelu_backward(x, g, approximate == "tanh")
    if _cpu_fusable(x, g):
        out = np.empty_like(x)
        _C._cpu.gelu_backward(g, x, out, approximate == "tanh", _threads.count)
        return out
    xp = _xp(x)
    c, gc = _compute(x), _compute(g)
    if approximate == "tanh":
        t = xp.tanh(_SQRT_2_OVER_PI * (c + 0.044715 * c * c * c))
        d = 0.5 * (1 + t) + 0.5 * c * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * c * c)
    else:
        d = 0.5 * (1 + erf_array(c * _SQRT1_2)) + c * xp.exp(-0.5 * c * c) * _INV_SQRT_2PI
    return (gc * d).astype(x.dtype, copy=False)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (exact, with erf), or its tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    x = input
    xd = _float_array(x, "GeluKernelImpl")
    cdf = slope = None
    if needs_grad(x) and _cpu_fusable(xd):
        # GELU'(x) written beside GELU(x) for the erf both need: the backward is then one multiply (GELU's
        # backward took 1.8x its forward when it evaluated erf again)
        y, slope = np.empty_like(xd), np.empty_like(xd)
        _C._cpu.gelu(xd, y, approximate == "tanh", _threads.count, slope)
        out = _wrap(y)
    elif approximate == "none" and needs_grad(x) and not _kernel_ok(xd):
        # Keep Phi(x) for the backward: one erf evaluation instead of two, for one saved array.
        c = _compute(xd)
        cdf = (erf_array(c * _SQRT1_2) + 1) * 0.5
        out = _wrap((c * cdf).astype(xd.dtype, copy=False))
    else:
        out = _wrap(_gelu_array(xd, approximate))
    if needs_grad(x):
        def gelu_backward(g):
            if slope is not None and not _grad_enabled():
                gd = g._data
                if gd.dtype != slope.dtype:
                    gd = gd.astype(slope.dtype)
                d = _cpu.binary(_cpu.MUL, gd, slope)
                return _wrap(d if d is not None else np.multiply(gd, slope, out=np.empty_like(slope)))
            if cdf is not None and not _grad_enabled():
                c, gc = _compute(x._data), _compute(g._data)
                d = c * np.exp(-0.5 * c * c)
                d *= _INV_SQRT_2PI
                d += cdf
                d *= gc
                if isinstance(d, np.generic):  # NumPy's 0-d arithmetic gives a scalar
                    d = np.asarray(d)
                return _wrap(d.astype(x._data.dtype, copy=False))
            if _grad_enabled():
                if approximate == "tanh":
                    t = ((x + x * x * x * 0.044715) * _SQRT_2_OVER_PI).tanh()
                    inner = x * (1 - t * t) * (0.5 * _SQRT_2_OVER_PI) * (x * x * (3 * 0.044715) + 1)
                    return g * ((t + 1) * 0.5 + inner)
                return g * ((erf(x * _SQRT1_2) + 1) * 0.5 + x * (x * x * -0.5).exp() * _INV_SQRT_2PI)
            return _wrap(_gelu_backward_array(x._data, g._data, approximate))
        record("GeluBackward0", gelu_backward, out, (x,), (x,))
    return out


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    return input.relu_() if inplace else _pw.relu(input)


def _sigmoid_array(x):
    xp = _xp(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _silu_array(x):
    r = _cpu.unary(_cpu.SILU, x) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
    if r is not None:
        return r
    if x.dtype.kind == "c":  # _sigmoid_array's sign split needs a real x
        return x / (1 + _xp(x).exp(-x))
    return x * _sigmoid_array(x)


def _silu_grad(g, x):
    def composite():
        s = x.sigmoid()
        return g * s * (x * (1 - s) + 1)
    return _pw._fused_grad(_cpu.SILU_BACKWARD, g, x, composite)


silu_op = _activation("silu", _silu_array, _silu_grad, "silu_cpu")


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    if inplace:
        return inplace_unary(input, silu_op)
    return silu_op(input)


def _kernel_activation(node: str, op: int, params: tuple, forward, backward, kernel: str):
    """An activation whose forward and input gradient run as one C++ pass each on large float arrays
    (_cpu.activation); forward(array) and backward(g, x) (tensor ops, differentiable again) otherwise."""
    def fn(a: Tensor) -> Tensor:
        xd = _float_array(a, kernel)
        y = _cpu.activation(op, xd, *params) if type(xd) is np.ndarray else None
        if y is None:
            y = forward(xd)
            if isinstance(y, np.generic):  # NumPy's ufuncs give a scalar for 0-d input
                y = np.asarray(y)
        out = _wrap(y)
        if needs_grad(a):
            def activation_backward(g):
                if not _grad_enabled() and type(g._data) is np.ndarray:
                    gx = _cpu.activation_backward(op, g._data, a._data, *params)
                    if gx is not None:
                        return _wrap(gx)
                return backward(g, a)
            record(node, activation_backward, out, (a,), (a,))
        return out
    return fn


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x."""
    slope = float(negative_slope)
    op = _kernel_activation("LeakyReluBackward0", _cpu.LEAKY_RELU, (slope,),
                            lambda x: _xp(x).where(x > 0, x, x * slope),
                            lambda g, x: _pw.where(x > 0, g, g * slope), "leaky_relu_cpu")
    return inplace_unary(input, op) if inplace else op(input)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    alpha = float(alpha)
    op = _kernel_activation("EluBackward0", _cpu.ELU, (alpha, 1.0, 1.0),
                            lambda x: _xp(x).where(x > 0, x, alpha * _xp(x).expm1(_xp(x).minimum(x, 0))),
                            lambda g, x: _pw.where(x > 0, g, g * x.clamp(max=0).exp() * alpha), "elu_cpu")
    return inplace_unary(input, op) if inplace else op(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear above threshold."""
    if _autocast.active:
        return _autocast.dispatch("softplus", softplus, input, beta, threshold)
    beta, threshold = float(beta), float(threshold)

    def fwd(x):
        xp = _xp(x)
        bx = x * beta
        return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)
    op = _kernel_activation("SoftplusBackward0", _cpu.SOFTPLUS, (beta, threshold), fwd,
                            lambda g, x: _pw.where(x * beta > threshold, g, g * (x * beta).sigmoid()),
                            "softplus_cpu")
    return op(input)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for either sign."""
    def fwd(x):
        xp = _xp(x)
        return (xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))).astype(x.dtype, copy=False)
    return _kernel_activation("LogSigmoidBackward0", _cpu.LOG_SIGMOID, (), fwd, lambda g, x: g * (-x).sigmoid(),
                              "log_sigmoid_cpu")(input)


def tanh(input: Tensor) -> Tensor:
    """Elementwise tanh."""
    return _pw.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    """Elementwise logistic sigmoid."""
    return _pw.sigmoid(input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val], with PyTorch's HardtanhBackward0 (no gradient at the bounds)."""
    from .activation import hardtanh as _hardtanh  # activation.py builds on this module
    return _hardtanh(input, min_val, max_val, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


# ------------------------------------------------------------------ dropout


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not training)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    from .._creation import _generator_for
    from .._device import cuda_context
    x = input
    dev = x.device
    xp = _xp(x._data)
    if p == 1.0:
        mask = xp.zeros(x._data.shape, x._data.dtype)
    else:
        with cuda_context(dev):
            u = _generator_for(dev, None).random(x._data.shape, dtype=np.float32)
        mask = ((u >= p) * (1.0 / (1.0 - p))).astype(float_data(x).dtype, copy=False)
    m = _wrap(mask)
    if inplace:
        return x.mul_(m)
    return x * m


# ------------------------------------------------------------------ regression and binary losses


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    _check_reduction(reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_broadcast(name: str, input: Tensor, target: Tensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=_user_stacklevel())


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight=None) -> Tensor:
    """Mean squared error."""
    if _autocast.active:
        return _autocast.dispatch("mse_loss", mse_loss, input, target, size_average, reduce, reduction, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_broadcast("mse_loss", input, target)
    if weight is None and reduction in ("mean", "sum"):
        fused = _mse_loss_fused(input, target, reduction == "mean")
        if fused is not None:
            return fused
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _mse_loss_fused(x: Tensor, y: Tensor, mean: bool):
    """The mean (or sum) of (x - y)^2 for two large float arrays of one shape: the difference once, its squares
    summed in float64 on the pool, and a backward that is one scaled copy of it (the composite's MeanBackward,
    MulBackward and SubBackward made three passes more). None when the kernels do not take the operands."""
    xd, yd = x._data, y._data
    if type(xd) is not np.ndarray or type(yd) is not np.ndarray or xd.shape != yd.shape or xd.dtype != yd.dtype:
        return None
    d = _cpu.binary(_cpu.SUB, xd, yd)
    if d is None:
        return None
    out = _wrap(_cpu.sum(d, None, False, mean=mean, squares=True))
    if needs_grad(x, y):
        rx, ry, n = x._requires_grad, y._requires_grad, d.size

        def mse_loss_backward(g):
            if _grad_enabled():
                diff = x - y
                gx = diff * (g * (2.0 / n if mean else 2.0))
                return (gx if rx else None), (-gx if ry else None)
            scale = float(g._data) * (2.0 / n if mean else 2.0)
            gx = _cpu.binary(_cpu.MUL, d, scale)
            return (_wrap(gx) if rx else None), (_wrap(_cpu.unary(_cpu.NEG, gx)) if ry else None)
        record("MseLossBackward0", mse_loss_backward, out, (x, y), (x, y))
    return out


def _pointwise_loss_fused(node: str, op: int, x: Tensor, t: Tensor, a: float, mean: bool, grad_x, grad_t):
    """The mean (or sum) of an elementwise loss of two large float arrays of one shape: the losses in one C++
    pass, summed in float64, and a backward of one pass (_cpu.pointwise_loss). grad_x(x, t, g) and
    grad_t(x, t, g) are the tensor-op gradients used under create_graph. None when the kernel does not take
    the operands."""
    xd, td = x._data, t._data
    if type(xd) is not np.ndarray or type(td) is not np.ndarray:
        return None
    elementwise = _cpu.pointwise_loss(op, xd, td, a)
    if elementwise is None:
        return None
    out = _wrap(_cpu.sum(elementwise, None, False, mean=mean))
    if needs_grad(x, t):
        rx, rt, n = x._requires_grad, t._requires_grad, xd.size

        def pointwise_loss_backward(g):
            scale = g * (1.0 / n) if mean else g
            if _grad_enabled():
                return (grad_x(x, t, scale) if rx else None), (grad_t(x, t, scale) if rt else None)
            gx = _cpu.pointwise_loss_backward(op, xd, td, a, float(scale._data))
            gt = None
            if rt:
                gt = _wrap(_cpu.unary(_cpu.NEG, gx)) if op != _cpu.BCE_WITH_LOGITS else \
                    _wrap(_cpu.binary(_cpu.MUL, xd, -float(scale._data)))
            return (_wrap(gx) if rx else None), gt
        record(node, pointwise_loss_backward, out, (x, t), (x, t))
    return out


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight=None) -> Tensor:
    """Mean absolute error."""
    if _autocast.active:
        return _autocast.dispatch("l1_loss", l1_loss, input, target, size_average, reduce, reduction, weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_broadcast("l1_loss", input, target)
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Squared error below beta, absolute error (shifted) above."""
    if _autocast.active:
        return _autocast.dispatch("smooth_l1_loss", smooth_l1_loss,
                                  input, target, size_average, reduce, reduction, beta)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_broadcast("smooth_l1_loss", input, target)
    if beta > 0 and reduction in ("mean", "sum"):
        b = float(beta)
        fused = _pointwise_loss_fused(
            "SmoothL1LossBackward0", _cpu.SMOOTH_L1, input, target, b, reduction == "mean",
            lambda x, t, s: ((x - t) / b).clamp(-1, 1) * s, lambda x, t, s: ((t - x) / b).clamp(-1, 1) * s)
        if fused is not None:
            return fused
    d = (input - target).abs()
    if beta == 0.0:
        return _reduce(d, reduction)
    loss = _pw.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight=None) -> Tensor:
    """Squared error below delta, delta-scaled absolute error above."""
    if _autocast.active:
        return _autocast.dispatch("huber_loss", huber_loss, input, target, reduction, delta, weight)
    _warn_broadcast("huber_loss", input, target)
    if weight is None and reduction in ("mean", "sum"):
        c = float(delta)
        fused = _pointwise_loss_fused(
            "HuberLossBackward0", _cpu.HUBER, input, target, c, reduction == "mean",
            lambda x, t, s: (x - t).clamp(-c, c) * s, lambda x, t, s: (t - x).clamp(-c, c) * s)
        if fused is not None:
            return fused
    d = (input - target).abs()
    loss = _pw.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """-(t log(x) + (1 - t) log(1 - x)), with the logs clamped at -100 as in PyTorch."""
    if _autocast.active:
        return _autocast.dispatch("binary_cross_entropy", binary_cross_entropy,
                                  input, target, weight, size_average, reduce, reduction)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    xd = input._data
    if target.dtype is not input.dtype:
        from ._common import _short
        raise RuntimeError(f"Found dtype {_short(target.dtype)} but expected {_short(input.dtype)}")
    if xd.size and type(xd) is not MetaArray and (bool((xd < 0).any()) or bool((xd > 1).any())):
        raise RuntimeError("all elements of input should be between 0 and 1")
    from ..autograd.grad_mode import no_grad
    with no_grad(), np.errstate(divide="ignore"):  # log(0) = -inf is expected here: it is clamped to -100
        loss = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
        if weight is not None:
            loss = loss * weight
    if needs_grad(input, target):
        ri, rt = input._requires_grad, target._requires_grad

        def binary_cross_entropy_backward(g):
            # PyTorch's formulas, one node: through the clamped logs, a probability of exactly 0 or 1 (a
            # saturated sigmoid) gave 0 * inf = NaN; here the slope's denominator is clamped at 1e-12 instead
            gi = gt = None
            if ri:
                gi = g * (input - target) / ((1 - input) * input).clamp(min=1e-12)
            if rt:
                with np.errstate(divide="ignore"):  # unclamped, as PyTorch's: -inf/inf at 0 and 1
                    gt = g * ((1 - input).log() - input.log())
            if weight is not None:
                gi = gi * weight if gi is not None else None
                gt = gt * weight if gt is not None else None
            return (_fit_grad(gi, input) if gi is not None else None,
                    _fit_grad(gt, target) if gt is not None else None)
        record("BinaryCrossEntropyBackward0", binary_cross_entropy_backward, loss, (input, target), (input, target))
    return _reduce(loss, reduction)


def _fit_grad(g: Tensor, like: Tensor) -> Tensor:
    """g summed down to like's shape (a weight that broadcast up) and cast to its dtype."""
    if tuple(g.shape) != tuple(like.shape):
        g = g.sum_to_size(like.shape)
    return g if g.dtype is like.dtype else g.to(like.dtype)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid + binary cross entropy in one stable formula: (1 - t) x + (1 + (pw - 1) t) softplus(-x)."""
    if _autocast.active:
        return _autocast.dispatch("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits,
                                  input, target, weight, size_average, reduce, reduction, pos_weight)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if input.dtype.is_floating_point and not target.dtype.is_floating_point:
        from ._common import _short
        raise RuntimeError(f"result type {_short(input.dtype)} can't be cast to the desired output type "
                           f"{_short(target.dtype)}")
    if weight is None and pos_weight is None and reduction in ("mean", "sum"):
        fused = _pointwise_loss_fused(
            "BinaryCrossEntropyWithLogitsBackward0", _cpu.BCE_WITH_LOGITS, input, target, 0.0, reduction == "mean",
            lambda x, t, s: (x.sigmoid() - t) * s, lambda x, t, s: -x * s)
        if fused is not None:
            return fused
    sp = softplus(-input)
    if pos_weight is not None:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ------------------------------------------------------------------ normalize, pad


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """x / max(||x||_p, eps) along dim."""
    if _autocast.active:
        return _autocast.dispatch("normalize", normalize, input, p, dim, eps, out)
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps)
    if out is None:
        return input / denom
    if _grad_enabled() and (input.requires_grad or out.requires_grad):
        raise RuntimeError("div(): functions with out=... arguments don't support automatic differentiation, but "
                           "one of the arguments requires grad.")
    result = input / denom
    if tuple(out.shape) != tuple(result.shape):
        out.resize_(result.shape)
    return out.copy_(result)


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the last len(pad) // 2 dims: pad = (left, right, top, bottom, ...)."""
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    nd = input._data.ndim
    if len(pad) // 2 > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {nd}")
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value not in (None, 0, 0.0):
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument.")
    if not (len(pad) in (2, 4, 6) and nd in (len(pad) // 2 + 1, len(pad) // 2 + 2)):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {nd}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    k = len(pad) // 2
    if mode != "circular" and 0 in input._data.shape[nd - k - 1:]:  # only a batch dimension may be empty
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and other "
                           f"non-zero dimensions for input, but got: {list(input.shape)}")
    sources = []  # (dim, positions along it that each output position copies)
    shape = list(input._data.shape)
    for i in range(len(pad) // 2):
        d = nd - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        n = shape[d]
        pos = np.arange(-lo, n + hi)
        if mode == "replicate":
            idx = np.clip(pos, 0, n - 1)
        elif mode == "circular":  # negative amounts crop first; the rest wraps around what is left
            start, kept = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
            if max(lo, 0) > kept or max(hi, 0) > kept:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            idx = start + np.mod(np.arange(-max(lo, 0), kept + max(hi, 0)), max(kept, 1))
        else:
            if lo >= n or hi >= n:
                raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding input "
                                   f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of input "
                                   f"{list(input.shape)}")
            period = 2 * (n - 1) if n > 1 else 1
            m = np.mod(pos, period)
            idx = np.where(m < n, m, period - m)
        sources.append((d, idx.astype(np.int64)))
        shape[d] = idx.size
    if mode != "circular" and min(pad) >= 0 and type(input._data) is np.ndarray:
        return _pad_edges(input, pad, mode, sources)
    from .indexing import index_select
    from .._creation import tensor
    out = input
    for d, idx in sources:
        out = index_select(out, d, tensor(idx, device=input.device))
    return out


def _pad_array(xd, width: list, mode: str):
    """np.pad(xd, width, reflect or edge) with the interior copied on the pool (np.pad copies on one thread: 2.1x
    PyTorch's time at 2 threads) and the borders filled from it, one dimension after another as np.pad does."""
    out = np.empty(tuple(n + lo + hi for n, (lo, hi) in zip(xd.shape, width)), xd.dtype)
    if _cpu.copy(xd, out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(xd.shape, width))]) is None:
        return np.pad(xd, width, mode="reflect" if mode == "reflect" else "edge")
    for d, ((lo, hi), n) in enumerate(zip(width, xd.shape)):
        if not lo and not hi:
            continue
        # dims before d are padded already, dims after it not yet (their borders copy this one's)
        other = [slice(None)] * d + [None] + [slice(w[0], w[0] + m) for w, m in zip(width[d + 1:], xd.shape[d + 1:])]

        def at(sl):
            other[d] = sl
            return tuple(other)
        if mode == "reflect":  # mirrored about the first and the last interior positions
            out[at(slice(0, lo))] = out[at(slice(2 * lo, lo, -1))]
            out[at(slice(lo + n, lo + n + hi))] = out[at(slice(lo + n - 2, lo + n - 2 - hi if lo + n - 2 - hi >= 0
                                                                else None, -1))]
        else:
            out[at(slice(0, lo))] = out[at(slice(lo, lo + 1))]
            out[at(slice(lo + n, lo + n + hi))] = out[at(slice(lo + n - 1, lo + n))]
    return out


def _pad_edges(x: Tensor, pads: list, mode: str, sources: list) -> Tensor:
    """Reflection or replication padding, and a backward that folds the padded borders back onto the edges in
    place (as index_select and index_add along each dimension, the backward took 2.7x PyTorch's time)."""
    nd = x._data.ndim
    width = [(0, 0)] * (nd - len(pads) // 2) + [(pads[2 * i], pads[2 * i + 1]) for i in reversed(range(len(pads) // 2))]
    out = _wrap(_pad_array(x._data, width, mode))
    if needs_grad(x):
        node = f"{'Reflection' if mode == 'reflect' else 'Replication'}Pad{len(pads) // 2}DBackward0"

        def pad_edges_backward(g):
            if _grad_enabled() or type(g._data) is not np.ndarray:
                from .indexing import index_add
                from .._creation import tensor, zeros
                for d, idx in reversed(sources):  # the adjoint of each index_select, last dimension first
                    shape = list(g.shape)
                    shape[d] = (idx.max() + 1) if idx.size else 0
                    g = index_add(zeros(shape, dtype=g.dtype, device=g.device), d, tensor(idx, device=g.device), g)
                return g
            gd = g._data
            for (d, idx), (lo, hi) in zip(reversed(sources), width[nd - len(sources):]):
                n = idx.size - lo - hi
                src = np.moveaxis(gd, d, 0)
                folded = np.empty(gd.shape[:d] + (n,) + gd.shape[d + 1:], gd.dtype)  # C-contiguous as it ends
                inner = gd[(slice(None),) * d + (slice(lo, lo + n),)]  # in memory order: the copy runs along rows
                if _cpu.copy(inner, folded) is None:  # the interior on the pool, the borders added below
                    folded[...] = inner
                acc = np.moveaxis(folded, d, 0)
                if mode == "reflect":
                    acc[1:lo + 1] += src[lo - 1::-1][:lo] if lo else 0
                    acc[n - 1 - hi:n - 1] += src[lo + n:][::-1]
                else:
                    acc[0] += src[:lo].sum(axis=0)
                    acc[n - 1] += src[lo + n:].sum(axis=0)
                gd = folded
            return _wrap(gd)
        record(node, pad_edges_backward, out, (x,))
    return out


def _pad_constant(x: Tensor, pads: list, value) -> Tensor:
    shape = list(x._data.shape)
    nd = len(shape)
    src, dst = [slice(None)] * nd, [slice(None)] * nd
    for i in range(len(pads) // 2):
        d = nd - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        n = shape[d]
        new = n + lo + hi
        if new < 0:
            raise RuntimeError(f"The input size {n}, plus negative padding {lo} and {hi} resulted in a negative "
                               f"output size, which is invalid. Check dimension {d} of your input.")
        src[d] = slice(max(-lo, 0), n - max(-hi, 0))
        dst[d] = slice(max(lo, 0), max(lo, 0) + max(n - max(-lo, 0) - max(-hi, 0), 0))
        shape[d] = new
    xp = _xp(x._data)
    out_data = xp.full(tuple(shape), value, dtype=x._data.dtype)
    out_data[tuple(dst)] = x._data[tuple(src)]
    out = _wrap(out_data)
    if needs_grad(x):
        neg = [-p for p in pads]

        def pad_backward(g):
            return _pad_constant(g, neg, 0.0)  # the adjoint of padding is cropping (and vice versa)
        record("ConstantPadNdBackward0", pad_backward, out, (x,))
    return out


# ------------------------------------------------------------------ attention


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v; a bool mask marks the positions that may be attended to."""
    if _autocast.active:
        return _autocast.dispatch("scaled_dot_product_attention", scaled_dot_product_attention,
                                  query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    q, k, v = query, key, value
    if q._data.shape[-1] != k._data.shape[-1]:
        raise RuntimeError(f"Expected query and key to have the same last dimension, but got "
                           f"{q._data.shape[-1]} and {k._data.shape[-1]}")
    if enable_gqa and q._data.ndim >= 3 and k._data.shape[-3] != q._data.shape[-3]:
        rep = q._data.shape[-3] // k._data.shape[-3]
        k = k.repeat_interleave(rep, dim=-3)
        v = v.repeat_interleave(rep, dim=-3)
    sc = 1.0 / math.sqrt(q._data.shape[-1]) if scale is None else scale
    if dropout_p == 0.0 and _sdpa_fusable(q, k, v, attn_mask):
        return _sdpa_fused(q, k, v, attn_mask, is_causal, sc)
    attn = _sdpa_probs(q, k, attn_mask, is_causal, sc)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return attn @ v


def _sdpa_probs(q: Tensor, k: Tensor, attn_mask, is_causal: bool, sc: float) -> Tensor:
    """softmax(q k^T * sc + mask) in tensor ops (rows with every key masked give 0)."""
    L, S = q._data.shape[-2], k._data.shape[-2]
    # Scaling q (L x E) is cheaper than scaling the scores (L x S) when E < S.
    scores = (q * sc) @ k.transpose(-2, -1)
    xp = _xp(q._data)
    allowed = None
    if is_causal:
        allowed = xp.tril(xp.ones((L, S), dtype=np.bool_))
    elif attn_mask is not None:
        if attn_mask.dtype.name == "bool":
            allowed = attn_mask._data if type(attn_mask._data) is type(scores._data) else xp.asarray(attn_mask._data)
        else:
            scores = scores + attn_mask
    return _softmax_op(scores, -1, None, log=False, safe=True, allowed=allowed)


def _sdpa_fusable(q: Tensor, k: Tensor, v: Tensor, attn_mask) -> bool:
    """Whether csrc/kernels/attention.cpp takes these: NumPy float32/float64 of one dtype, 2-4 dims with the
    same leading dims, and a mask (if any) that is bool or of that dtype and needs no gradient."""
    qd, kd, vd = q._data, k._data, v._data
    if not (type(qd) is np.ndarray and type(kd) is np.ndarray and type(vd) is np.ndarray):
        return False
    if qd.dtype not in (np.float32, np.float64) or kd.dtype != qd.dtype or vd.dtype != qd.dtype:
        return False
    if not 2 <= qd.ndim <= 4 or kd.ndim != qd.ndim or vd.ndim != qd.ndim or kd.shape[:-2] != qd.shape[:-2] \
            or vd.shape[:-1] != kd.shape[:-1]:
        return False
    if attn_mask is not None:
        md = attn_mask._data
        if type(md) is not np.ndarray or (md.dtype != np.bool_ and md.dtype != qd.dtype) or attn_mask.requires_grad:
            return False
        scores_shape = qd.shape[:-1] + (kd.shape[-2],)
        try:
            return np.broadcast_shapes(md.shape, scores_shape) == scores_shape
        except ValueError:
            return False
    return True


def _heads(a):
    """(..., rows, E) as the (B, H, rows, E) view the kernel takes, its last dimension contiguous."""
    if a.ndim and a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        a = np.ascontiguousarray(a)
    return a.reshape((1,) * (4 - a.ndim) + a.shape)


def _sdpa_fused(q: Tensor, k: Tensor, v: Tensor, attn_mask, is_causal: bool, sc: float) -> Tensor:
    """scaled_dot_product_attention through the fused C++ kernel (one node; backward recomputes the
    probabilities from the saved log-sum-exp)."""
    q4, k4, v4 = _heads(q._data), _heads(k._data), _heads(v._data)
    B, H, L, _ = q4.shape
    S, Ev = k4.shape[2], v4.shape[3]
    mask = None
    if attn_mask is not None:
        md = attn_mask._data
        if md.dtype == np.bool_:
            md = np.where(md, q4.dtype.type(0), q4.dtype.type(-np.inf))
        mask = np.broadcast_to(md.reshape((1,) * (4 - md.ndim) + md.shape) if md.ndim < 4 else md, (B, H, L, S))
    # Laid out (B, L, H, Ev) when q is (as split heads are): the usual transpose back to (B, L, H * Ev) is free.
    if q4.strides[1] < q4.strides[2]:
        out4 = np.empty((B, L, H, Ev), q4.dtype).transpose(0, 2, 1, 3)
    else:
        out4 = np.empty((B, H, L, Ev), q4.dtype)
    lse = np.empty(B * H * L, q4.dtype)
    _C._cpu.sdpa(q4, k4, v4, mask, is_causal, sc, out4, lse)
    out = _wrap(out4.reshape(q._data.shape[:-1] + (Ev,)))
    if needs_grad(q, k, v):
        y = alias(out)
        # Which inputs get a gradient is fixed now: saved tensors may come back detached (checkpoint recomputes).
        wanted = (q._requires_grad, k._requires_grad, v._requires_grad)

        def sdpa_backward(g):
            if _grad_enabled():
                return _sdpa_backward_graph(g, q, k, v, attn_mask, is_causal, sc)
            g4 = _heads(g._data)
            dq, dk, dv = empty_pieces_like((q4, k4, v4)) or (np.empty_like(q4), np.empty_like(k4), np.empty_like(v4))
            _C._cpu.sdpa_backward(g4, q4, k4, v4, mask, is_causal, sc, _heads(y._data), lse, dq, dk, dv)
            return tuple(_wrap(d.reshape(t._data.shape)) if w else None
                         for d, t, w in ((dq, q, wanted[0]), (dk, k, wanted[1]), (dv, v, wanted[2])))
        record("ScaledDotProductFlashAttentionForCpuBackward0", sdpa_backward, out, (q, k, v), (q, k, v, y))
    return out


def _sdpa_backward_graph(g: Tensor, q: Tensor, k: Tensor, v: Tensor, attn_mask, is_causal: bool, sc: float):
    """The fused attention's gradients in tensor ops (differentiable again, for create_graph)."""
    p = _sdpa_probs(q, k, attn_mask, is_causal, sc)
    dv = p.transpose(-2, -1) @ g
    dp = g @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = (ds @ k) * sc
    dk = (ds.transpose(-2, -1) @ q) * sc
    return dq, dk, dv


# ------------------------------------------------------------------ conv_tbc, linear_cross_entropy


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1d convolution over (time, batch, channels) input with a (kernel_width, C_in, C_out) weight, the time axis
    zero-padded (or, if negative, cropped) by pad at each end: one matmul per kernel tap."""
    if not isinstance(bias, Tensor):
        raise TypeError(f"conv_tbc(): argument 'bias' (position 3) must be Tensor, not {type(bias).__name__}")
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    t, b, c_in = input.shape
    k, w_in, c_out = weight.shape
    if c_in != w_in:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if bias.shape[0] != c_out:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    pad = int(pad)
    length = t + 2 * pad - k + 1
    if length < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {length}: [{length}, {b}, {c_out}]")
    x = _pad_constant(input, [0, 0, 0, 0, pad, pad], 0) if pad else input
    out = bias.expand(length, b, c_out)
    for i in range(k):
        out = out + x[i:i + length] @ weight[i]
    return out


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *, linear_bias: Tensor | None = None,
                         weight: Tensor | None = None, reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """cross_entropy(linear(input, linear_weight, linear_bias), target); with options (a LinearCrossEntropyOptions)
    the batch is processed options.batch_chunk_size rows at a time, so no full (N, C) logits tensor is kept."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got {linear_weight.dim()}")
    batch, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions (in_features), got "
                           f"{in_features} and {linear_weight.shape[-1]}, respectively")
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape {tuple(linear_weight.shape)} requires"
                           f" batched input, (N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batch, num_classes, *out_features)
    probabilities = tuple(target.shape) == logits_shape  # cross_entropy's own test for class probabilities
    if probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None:
        from .._dtype import int64
        chunked = (not out_features and reduction in ("mean", "sum", "none") and label_smoothing == 0.0
                   and target.dtype == int64)
        if not chunked:
            warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                          "{'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, out_features == (). "
                          f"Got reduction={reduction!r}, label_smoothing={label_smoothing}, "
                          f"target.dtype={target.dtype}, out_features={out_features}, tracing=False, "
                          f"linear_bias.shape={tuple(linear_bias.shape) if linear_bias is not None else None}.",
                          stacklevel=_user_stacklevel())
        else:
            return _linear_cross_entropy_chunked(input, linear_weight, target, linear_bias, weight, reduction,
                                                 ignore_index, getattr(options, "batch_chunk_size", None))
    w2d, b1d = linear_weight, linear_bias
    if out_features:
        w2d = linear_weight.reshape(math.prod(out_features, start=num_classes), in_features)
        if linear_bias is not None:
            b1d = linear_bias.reshape(math.prod(out_features, start=num_classes))
    logits = linear(input, w2d, b1d).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                         label_smoothing=label_smoothing)


def _linear_cross_entropy_chunked(input: Tensor, linear_weight: Tensor, target: Tensor, linear_bias, weight,
                                  reduction: str, ignore_index: int, chunk) -> Tensor:
    """Per-row losses chunk by chunk, summed (and for 'mean' divided by the total target weight) at the end."""
    unbatched = input.dim() == 1
    if unbatched:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    n = input.shape[0]
    # Unset: chunks as long as in_features, so each chunk's logits are no larger than linear_weight.
    chunk = max(int(chunk) if chunk else input.shape[1], 1)
    rows = [cross_entropy(linear(input[i:i + chunk], linear_weight, linear_bias), target[i:i + chunk],
                          weight=weight, reduction="none", ignore_index=ignore_index) for i in range(0, n, chunk)]
    from .shape import cat
    losses = cat(rows) if len(rows) != 1 else rows[0]
    if reduction == "none":
        return losses.squeeze(0) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    kept = target != ignore_index
    total = (weight[target.clamp(min=0) * kept] * kept).sum() if weight is not None else kept.sum()
    return losses.sum() / total


# ------------------------------------------------------------------ antialiased resampling


def _aa_filter(mode: str, x):
    """The resampling kernel at offsets x (in input pixels scaled to the filter's support): PIL's triangle,
    Keys cubic (a = -0.5) and Lanczos-3 filters."""
    ax = np.abs(x)
    if mode == "bilinear":
        return np.maximum(1.0 - ax, 0.0)
    if mode == "bicubic":
        a = -0.5
        near = ((a + 2) * ax - (a + 3)) * ax * ax + 1
        far = ((a * ax - 5 * a) * ax + 8 * a) * ax - 4 * a
        return np.where(ax < 1, near, np.where(ax < 2, far, 0.0))
    return np.where(ax < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _aa_weights(in_size: int, out_size: int, scale_factor, align_corners: bool, mode: str):
    """(out_size, in_size) float64 matrix of one axis's antialiased resampling: each output pixel averages the
    inputs under the filter stretched by the downscaling factor, its weights normalised to sum to 1."""
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor is not None and scale_factor > 0 else in_size / out_size
    half = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode]
    stretch = max(scale, 1.0)
    support = half * stretch
    m = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        w = _aa_filter(mode, (np.arange(lo, hi) - center + 0.5) / stretch)
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0 else w
    return m


def interpolate_antialias(input: Tensor, out_size: list, scales: list, mode: str, align_corners: bool) -> Tensor:
    """Antialiased bilinear/bicubic/lanczos resize of a 4-D input: a separable weight matrix per spatial axis,
    applied as two matmuls (so autograd gives the adjoint)."""
    from ._common import _short
    if input._data.dtype.kind not in "fV":
        if input._data.dtype != np.uint8:
            raise NotImplementedError(f"\"compute_index_ranges_weights\" not implemented for "
                                      f"'{_short(input._data.dtype)}'")
    (h, w), (oh, ow) = input.shape[2:], out_size
    if min(h, w, oh, ow) <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: {h}, W: {w}) "
                           f"output (H: {oh}, W: {ow})")
    wh = _aa_weights(h, oh, scales[0], align_corners, mode)
    ww = _aa_weights(w, ow, scales[1], align_corners, mode)
    if input._data.dtype == np.uint8:
        return _wrap(_interpolate_antialias_uint8(_xp(input._data).asnumpy(input._data)
                                                  if type(input._data) is not np.ndarray else input._data, wh, ww)
                     ).to(input.device)
    from .._creation import tensor
    wh = tensor(wh, dtype=input.dtype, device=input.device)
    ww = tensor(ww, dtype=input.dtype, device=input.device)
    return wh @ (input @ ww.transpose(0, 1))


def _interpolate_antialias_uint8(x, wh, ww):
    """PyTorch's (and Pillow's) integer resampling: weights in fixed point with as many fraction bits as int16
    holds (at most 22), the width pass first, each pass rounded half up and saturated to uint8."""
    def fixed(m):
        bits = 0
        while bits < 22 and np.abs(m).max() * (1 << (bits + 1)) < (1 << 15):
            bits += 1
        return np.round(m * (1 << bits)) / (1 << bits)
    y = np.clip(np.floor(x.astype(np.float64) @ fixed(ww).T + 0.5), 0, 255)
    y = np.clip(np.floor(fixed(wh) @ y + 0.5), 0, 255)
    return y.astype(np.uint8)


# ------------------------------------------------------------------ methods

if not hasattr(Tensor, "erf"):
    attach(erf=erf)
attach(softmax=lambda a, dim=None, dtype=None: softmax(a, dim, dtype=dtype),
       log_softmax=lambda a, dim=None, dtype=None: log_softmax(a, dim, dtype=dtype))

__all__ = ["softmax", "log_softmax", "softmin", "cross_entropy", "nll_loss", "layer_norm", "linear", "gelu",
           "relu", "silu", "leaky_relu", "elu", "softplus", "logsigmoid", "tanh", "sigmoid", "hardtanh", "relu6",
           "dropout", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "normalize", "pad", "scaled_dot_product_attention", "erf"]
