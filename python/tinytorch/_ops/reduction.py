"""Reductions: sum, mean, var/std, max/min (values and indices), amax/amin, argmax/argmin,
logsumexp, norm, prod, cumsum; each beside its derivative."""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .._meta import MetaArray
from .. import _autocast
from .._dtype import get_default_dtype, int64, to_dtype
from .._tensor import Tensor, _wrap_dim
from . import _cpu
from ._common import alias, attach, float_data, needs_grad, record, saved_output, sum_to, _grad_enabled
from ._common import user_stacklevel as _user_stacklevel
from .pointwise import _ctype_dtype, _result, _write_out

def _return_type(name: str):
    """PyTorch's torch.return_types.<name>: a (values, indices) namedtuple that prints like it."""
    base = namedtuple(name, ["values", "indices"])

    class ReturnType(base):
        __slots__ = ()

        def __repr__(self) -> str:
            return f"torch.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"
    ReturnType.__name__ = ReturnType.__qualname__ = name
    ReturnType.__module__ = "tinytorch.return_types"
    return ReturnType


_max_type, _min_type = _return_type("max"), _return_type("min")
_max_out_type, _min_out_type = _return_type("max_out"), _return_type("min_out")  # what max(dim, out=) returns
values_indices = _max_type  # kept for callers that build a (values, indices) pair


def _dims(dim, ndim: int):
    """Normalise dim (None, int, tuple/list) into a sorted tuple of axes, or None for all."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return None
        axes = tuple(sorted(_wrap_dim(d, ndim) for d in dim))
        for i in range(1, len(axes)):
            if axes[i] == axes[i - 1]:
                raise RuntimeError(f"dim {axes[i]} appears multiple times in the list of dims")
    else:
        axes = (_wrap_dim(dim, ndim),)
    # A 0-d tensor accepts dim 0 / -1 (as PyTorch does); reducing it over "all" axes is the same thing.
    return axes if ndim else None


def _wide(x):
    """float16/bfloat16 arrays as float32: PyTorch accumulates reduced-precision reductions in float32
    (NumPy would accumulate in the 2-byte type: a bfloat16 mean of 10,000 values came out 20x too small)."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 and x.dtype.kind not in "iu" else x


def _expand_back(g: Tensor, in_shape: tuple, axes, keepdim: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced axes."""
    if axes is not None and not keepdim and len(in_shape):
        shape = list(in_shape)
        for a in axes:
            shape[a] = 1
        g = g.reshape(tuple(shape))
    elif axes is None and not keepdim:
        g = g.reshape((1,) * len(in_shape))
    return g.expand(in_shape)


def sum(a: Tensor, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Sum over dim (all elements when None)."""
    if out is not None:  # as PyTorch, out's dtype is the sum's dtype unless dtype= says otherwise
        return _write_out("sum", sum(a, dim, keepdim, dtype=out.dtype if dtype is None else dtype), out, None)
    if _autocast.active:
        return _autocast.dispatch("sum", sum, a, dim, keepdim, dtype=dtype)
    x = a._data
    axes = _dims(dim, x.ndim)
    if dtype is not None:
        x = x.astype(to_dtype(dtype).np)
    elif x.dtype.kind in "bui" and x.dtype != np.int64:
        x = x.astype(np.int64)  # PyTorch sums integers and bools as int64
    if x.dtype.itemsize == 2 and x.dtype.kind not in "iu":  # float16/bfloat16 accumulate in float32, as PyTorch
        r = x.sum(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
    else:
        r = _cpu.sum(x, axes, keepdim) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
        if r is None:
            r = x.sum(axis=axes, keepdims=keepdim)
    out = _result(r)
    if a._requires_grad and _grad_enabled():
        shape = x.shape
        record("SumBackward0" if axes is None else "SumBackward1",
               lambda g: _expand_back(g, shape, axes, keepdim), out, (a,))
    return out


def sum_to_size(a: Tensor, *size) -> Tensor:
    """Sum broadcast dimensions away so that the result has `size`."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    x = a._data
    if x.shape == shape:
        return a
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    out = _result((x.sum(axis=axes, keepdims=True) if axes else x).reshape(shape))
    if needs_grad(a):
        in_shape = x.shape
        record("SumToSizeBackward0", lambda g: g.expand(in_shape), out, (a,))
    return out


def mean(a: Tensor, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Mean over dim (floating point and complex only, as in PyTorch)."""
    if out is not None:
        return _write_out("mean", mean(a, dim, keepdim, dtype=dtype), out)
    if dtype is None and a.dtype._category < 2:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {_pretty(a.dtype)}")
    x = a._data if dtype is None else a._data.astype(to_dtype(dtype).np)
    axes = _dims(dim, x.ndim)
    n = x.size if axes is None else math.prod([x.shape[i] for i in axes])
    r = _cpu.sum(x, axes, keepdim, mean=True) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
    if r is None and n == 0 and type(x) is np.ndarray:  # the mean of nothing: NaN, without NumPy's warnings
        r = np.full(np.sum(x, axis=axes, keepdims=keepdim).shape, np.nan, x.dtype)
    out = _result(r if r is not None else _wide(x).mean(axis=axes, keepdims=keepdim).astype(x.dtype, copy=False))
    if needs_grad(a):
        shape = x.shape
        record("MeanBackward0" if axes is None else "MeanBackward1",
               lambda g: _expand_back(g / n, shape, axes, keepdim), out, (a,))
    return out


def _pretty(dt) -> str:
    return {"int64": "Long", "int32": "Int", "bool": "Bool", "int16": "Short", "int8": "Char", "uint8": "Byte"}.get(
        dt.name, dt.name)


def _variance(a: Tensor, dim, unbiased, keepdim: bool, correction):
    """var's checks and value: (the variance array, float32 for 2-byte floats, the reduced axes, the divisor
    n - correction clamped at 0)."""
    if isinstance(dim, bool):  # var(x, unbiased): PyTorch's legacy overload
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError("var: can't specify both unbiased and correction")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not a.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    x = a._data
    axes = _dims(dim, x.ndim)
    n = x.size if axes is None else math.prod([x.shape[i] for i in axes])
    xw = _wide(x)
    d = xw - xw.mean(axis=axes, keepdims=True)
    denom = builtins.max(n - correction, 0)
    ss = (d * d).sum(axis=axes, keepdims=keepdim)
    return (ss / denom if denom > 0 else ss * np.nan), axes, denom  # no degrees of freedom left: nan, as PyTorch


def _var_backward(a: Tensor, axes, keepdim: bool, denom):
    """d var / d a as a function of the incoming gradient."""
    shape = a._data.shape
    # no degrees of freedom: 2 / 0 is inf (a nan gradient where centered is 0), as ATen's float division
    scale = 2.0 / denom if denom > 0 else math.inf

    def var_backward(g):
        centered = a - a.mean(dim=axes, keepdim=True)
        return _expand_back(g, shape, axes, keepdim) * centered * scale
    return var_backward


def var(a: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance with Bessel's correction by default (correction=1); var(x, dim, unbiased, keepdim) also works."""
    r, axes, denom = _variance(a, dim, unbiased, keepdim, correction)
    _warn_dof("var", denom)
    out = _result(r.astype(a._data.dtype, copy=False))
    if needs_grad(a):
        record("VarBackward0", _var_backward(a, axes, keepdim, denom), out, (a,), (a,))
    return out


def _warn_dof(name: str, denom) -> None:
    """PyTorch's warning when the correction leaves no degrees of freedom (the result is then inf or NaN)."""
    if denom <= 0:
        import warnings
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=_user_stacklevel())


def std(a: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation: sqrt(var), with PyTorch's gradient (0 where the std is 0, not sqrt's inf * 0)."""
    r, axes, denom = _variance(a, dim, unbiased, keepdim, correction)
    _warn_dof("std", denom)
    out = _result(np.sqrt(r).astype(a._data.dtype, copy=False))
    if needs_grad(a):
        var_backward = _var_backward(a, axes, keepdim, denom)
        out_alias = alias(out)

        def std_backward(g):
            res = saved_output(out_alias, lambda: std(a, dim, unbiased, keepdim, correction=correction))
            return var_backward((g / (res * 2)).masked_fill(res == 0, 0.0))
        record("StdBackward0", std_backward, out, (a,), (a, out_alias))
    return out


def var_mean(a: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(var, mean) over dim."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return var(a, dim, unbiased, keepdim, correction=correction), a.mean(dim, keepdim)


def std_mean(a: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(std, mean) over dim."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return std(a, dim, unbiased, keepdim, correction=correction), a.mean(dim, keepdim)


def _reduce_extremum(a: Tensor, axes, keepdim: bool, kernel, name: str, node: str = "") -> Tensor:
    """amax/amin (and max()/min() of the whole tensor, node MaxBackward1/MinBackward1): the gradient is shared
    evenly among the elements that attain the extremum."""
    x = a._data
    if x.size == 0:
        if axes is None:
            raise RuntimeError(f"{name.lower()}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        for ax in axes:
            if x.shape[ax] == 0:
                raise IndexError(f"{name.lower()}(): Expected reduction dim {ax} to have non-zero size.")
    r = _cpu.extremum(x, axes, keepdim, kernel is np.max) if type(x) is np.ndarray and \
        x.size >= _cpu.MIN_SIZE and (kernel is np.max or kernel is np.min) else None
    if r is None:
        r = np.asarray(kernel(x, axis=axes, keepdims=keepdim)) if type(x) is np.ndarray else \
            kernel(x, axis=axes, keepdims=keepdim)
    out = _result(r)
    if needs_grad(a):
        shape = x.shape
        out_alias = alias(out)

        def extremum_backward(g):
            res = saved_output(out_alias, lambda: _reduce_extremum(a, axes, keepdim, kernel, name, node))
            mask = a == _expand_back(res, shape, axes, keepdim)
            count = mask.sum(dim=axes, keepdim=True)
            return _expand_back(g, shape, axes, keepdim) * mask / count
        record(node or name + "Backward0", extremum_backward, out, (a,), (a, out_alias))
    return out


def amax(a: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Maximum over dims (all when dim is empty)."""
    return _reduce_extremum(a, _dims(dim, a._data.ndim), keepdim, np.max, "Amax")


def amin(a: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Minimum over dims."""
    return _reduce_extremum(a, _dims(dim, a._data.ndim), keepdim, np.min, "Amin")


def _extremum_with_indices(a: Tensor, dim, keepdim: bool, arg_kernel, name: str):
    result_type = _max_type if name == "Max" else _min_type
    x = a._data
    axis = _wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return result_type(a.clone() if needs_grad(a) else _result(x.copy()), _result(np.zeros((), np.int64)))
    if x.shape[axis] == 0:
        raise IndexError(f"{name.lower()}(): Expected reduction dim {axis} to have non-zero size.")
    idx = arg_kernel(x, axis=axis, keepdims=True)
    values = np.take_along_axis(x, idx, axis=axis)
    if not keepdim:
        values = values.squeeze(axis)
        idx = idx.squeeze(axis)
    out = _result(values)
    indices = _result(idx.astype(np.int64, copy=False))
    if needs_grad(a):
        shape = x.shape

        def extremum_backward(g):
            gi = indices if keepdim else indices.unsqueeze(axis)
            gg = g if keepdim else g.unsqueeze(axis)
            from .._creation import zeros
            return zeros(*shape, dtype=g.dtype, device=g.device).scatter(axis, gi, gg)
        record(name + "Backward0", extremum_backward, out, (a,))
    return result_type(out, indices)


def max(a: Tensor, dim=None, keepdim: bool = False, *, out=None):
    """max(): the largest element; max(dim): (values, indices); max(other): elementwise maximum."""
    if out is not None:
        return _extremum_out("max", max(a, dim, keepdim), out, dim, _max_out_type)
    if isinstance(dim, Tensor):
        return a.maximum(dim)
    if dim is None:
        return _reduce_extremum(a, None, False, np.max, "Max", "MaxBackward1")
    return _extremum_with_indices(a, dim, keepdim, _argmax, "Max")


def min(a: Tensor, dim=None, keepdim: bool = False, *, out=None):
    """min(): the smallest element; min(dim): (values, indices); min(other): elementwise minimum."""
    if out is not None:
        return _extremum_out("min", min(a, dim, keepdim), out, dim, _min_out_type)
    if isinstance(dim, Tensor):
        return a.minimum(dim)
    if dim is None:
        return _reduce_extremum(a, None, False, np.min, "Min", "MinBackward1")
    return _extremum_with_indices(a, dim, keepdim, _argmin, "Min")


def _extremum_out(name: str, result, out, dim, result_type):
    """max/min's out=: a tensor for the whole-tensor and elementwise forms, (values, indices) with dim."""
    if isinstance(dim, Tensor):
        return _write_out("maximum" if name == "max" else "minimum", result, out)
    if dim is None:
        return _write_out(name, result, out)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
    values, indices = out
    # both dtypes are checked before either tensor is written, as ATen does
    if isinstance(values, Tensor) and isinstance(indices, Tensor):
        _ctype_dtype(result.values.dtype, values.dtype)
        _ctype_dtype(int64, indices.dtype)
    return result_type(_write_out(name, result.values, values, _ctype_dtype),
                       _write_out(name, result.indices, indices, _ctype_dtype))


def _argmax(x, axis, keepdims):
    return np.argmax(x, axis=axis, keepdims=keepdims)


def _asarray(r):
    """np.asarray for a reduction's result (a NumPy scalar becomes a 0-d array; a meta array stays as is)."""
    return r if type(r) is MetaArray else np.asarray(r)


def _argmin(x, axis, keepdims):
    return np.argmin(x, axis=axis, keepdims=keepdims)


def argmax(a: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor when dim is None)."""
    x = a._data
    if dim is None:
        if x.size == 0:
            raise IndexError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
        return _result(_asarray(np.argmax(x.reshape(-1))).astype(np.int64))
    return _result(np.argmax(x, axis=_wrap_dim(dim, x.ndim), keepdims=keepdim).astype(np.int64, copy=False))


def argmin(a: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor when dim is None)."""
    x = a._data
    if dim is None:
        if x.size == 0:
            raise IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0.")
        return _result(_asarray(np.argmin(x.reshape(-1))).astype(np.int64))
    return _result(np.argmin(x, axis=_wrap_dim(dim, x.ndim), keepdims=keepdim).astype(np.int64, copy=False))


def logsumexp(a: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(a))) over dim, computed stably."""
    x = float_data(a)
    axes = _dims(dim, x.ndim)
    out = _result(_logsumexp_array(_wide(x), axes, keepdim).astype(x.dtype, copy=False))
    if needs_grad(a):
        shape = x.shape
        out_alias = alias(out)

        def logsumexp_backward(g):
            res = saved_output(out_alias, lambda: logsumexp(a, dim, keepdim))
            return _expand_back(g, shape, axes, keepdim) * (a - _expand_back(res, shape, axes, keepdim)).exp()
        record("LogsumexpBackward0", logsumexp_backward, out, (a,), (a, out_alias))
    return out


def _logsumexp_array(x, axes, keepdim: bool):
    """max + log(sum(exp(x - max))) in four passes, the max and the sum on the intra-op pool where they can be;
    an infinite max counts as 0 (PyTorch's rule: a row of -inf gives -inf, one with +inf gives inf)."""
    big = type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE
    if big and axes == (x.ndim - 1,):
        s = _cpu.logsumexp_last(x)
        if s is not None:
            return s if keepdim else s.squeeze(-1)
    m = _cpu.extremum(x, axes, True, True) if big else None
    if m is None:
        m = x.max(axis=axes, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
    m = np.where(np.isfinite(m), m, 0)
    z = x - m
    z = np.exp(z, out=z) if type(z) is np.ndarray else np.exp(z)
    s = _cpu.sum(z, axes, True) if big else None
    if s is None:
        s = z.sum(axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):  # log(0) = -inf for a row of -inf, without NumPy's warning
        s = np.log(s, out=s) if type(s) is np.ndarray else np.log(s)
    s += m
    return s if keepdim else s.squeeze(axis=axes) if axes is not None else s.reshape(())


def norm(a: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm over dim (2-norm and Frobenius by default; inf, -inf, 0, 1 and any p > 0)."""
    if _autocast.active:
        return _autocast.dispatch("norm", norm, a, p, dim, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm: unsupported norm type {p}")
    axes = _dims(dim, a._data.ndim)
    x = a if dtype is None else a.to(dtype)
    if x.dtype.is_complex:  # a complex norm is the real norm of the magnitudes
        x = x.abs()
    if not x.dtype.is_floating_point:
        from ._common import _short
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_short(x.dtype)}")
    if p == float("inf"):
        return x.abs().amax(axes if axes is not None else (), keepdim)
    if p == float("-inf"):
        return x.abs().amin(axes if axes is not None else (), keepdim)
    if p == 0:
        return (x != 0).to(x.dtype).sum(axes, keepdim)
    if p == 1:
        return x.abs().sum(axes, keepdim)
    if p == 2:
        return _norm2(x, axes, keepdim)
    return x.abs().pow(p).sum(axes, keepdim).pow(1.0 / p)


def _norm2(a: Tensor, axes, keepdim: bool) -> Tensor:
    x = float_data(a)
    r = _cpu.sum(x, axes, keepdim, norm=True) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
    if r is None:
        xw = _wide(x)
        r = np.sqrt((xw * xw).sum(axis=axes, keepdims=keepdim)).astype(x.dtype, copy=False)
    out = _result(r)
    if needs_grad(a):
        shape = x.shape
        out_alias = alias(out)

        def norm_backward(g):
            res = saved_output(out_alias, lambda: _norm2(a, axes, keepdim))
            zero = res == 0  # subgradient 0 at the origin, as in PyTorch (and no 0/0 on the way)
            scale = (g / res.masked_fill(zero, 1.0)).masked_fill(zero, 0.0)
            return a * _expand_back(scale, shape, axes, keepdim)
        record("LinalgVectorNormBackward0", norm_backward, out, (a,), (a, out_alias))
    return out


def prod(a: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product over dim (gradient via the product of the others; exact when there are zeros)."""
    if _autocast.active:
        return _autocast.dispatch("prod", prod, a, dim, keepdim, dtype=dtype)
    x = a._data if dtype is None else a._data.astype(to_dtype(dtype).np)
    if x.dtype.kind in "bui":
        x = x.astype(np.int64)
    axis = None if dim is None else _wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        axis = None
    out = _result(_wide(x).prod(axis=axis, keepdims=keepdim).astype(x.dtype, copy=False))
    if needs_grad(a):
        shape = x.shape
        axes = None if axis is None else (axis,)

        def prod_backward(g):
            flat = a if axis is not None else a.reshape(-1)
            ax = 0 if axis is None else axis
            n = flat.shape[ax]
            parts = []
            for i in range(n):  # product of all the others; safe when some elements are zero
                others = [flat.narrow(ax, j, 1) for j in range(n) if j != i]
                if not others:  # a single factor: d(prod)/dx = 1
                    parts.append(flat.narrow(ax, i, 1) * 0 + 1)
                    continue
                p = others[0]
                for o in others[1:]:
                    p = p * o
                parts.append(p)
            from .shape import cat
            d = cat(parts, ax).reshape(shape)
            return _expand_back(g, shape, axes, keepdim) * d
        record("ProdBackward0", prod_backward, out, (a,), (a,))
    return out


def cumsum(a: Tensor, dim: int, *, dtype=None, out=None) -> Tensor:
    """Running sum along dim."""
    if out is not None:
        return _write_out("cumsum", cumsum(a, dim, dtype=dtype), out)
    if _autocast.active:
        return _autocast.dispatch("cumsum", cumsum, a, dim, dtype=dtype)
    x = a._data if dtype is None else a._data.astype(to_dtype(dtype).np)
    if x.dtype.kind in "bui":
        x = x.astype(np.int64)
    axis = _wrap_dim(dim, x.ndim)
    r = _cpu.cumsum(x, axis) if x.ndim and type(x) is np.ndarray else None
    if r is None:
        r = np.cumsum(_wide(x), axis=axis).astype(x.dtype, copy=False) if x.ndim else x.copy()
    out = _result(r)

    def cumsum_backward(g):
        if not g.ndim:
            return g
        if not _grad_enabled() and type(g._data) is np.ndarray:
            rg = _cpu.cumsum(g._data, axis, reverse=True)  # one reversed scan, not two flips around one
            if rg is not None:
                return _result(rg)
        return g.flip(axis).cumsum(axis).flip(axis)
    if needs_grad(a):
        record("CumsumBackward0", cumsum_backward, out, (a,))
    return out


def cumprod(a: Tensor, dim: int, *, dtype=None, out=None) -> Tensor:
    """Running product along dim (the gradient stays exact where inputs are zero)."""
    if out is not None:
        return _write_out("cumprod", cumprod(a, dim, dtype=dtype), out)
    if _autocast.active:
        return _autocast.dispatch("cumprod", cumprod, a, dim, dtype=dtype)
    x = a._data if dtype is None else a._data.astype(to_dtype(dtype).np)
    if x.dtype.kind in "bui":
        x = x.astype(np.int64)
    axis = _wrap_dim(dim, x.ndim)
    out = _result(np.cumprod(_wide(x), axis=axis).astype(x.dtype, copy=False) if x.ndim else x.copy())
    if needs_grad(a):
        out_alias = alias(out)

        def cumprod_backward(g):
            if g.ndim == 0:
                return g
            if not bool((a == 0).any()):  # d out_j / d x_i = out_j / x_i for j >= i
                res = saved_output(out_alias, lambda: cumprod(a, axis))
                return (g * res).flip(axis).cumsum(axis).flip(axis) / a
            # With zeros: grad_i = sum_{j >= i} g_j * prod_{k <= j, k != i} x_k, one i at a time.
            from .shape import cat
            n = a.shape[axis]
            cols = []
            for i in range(n):
                xi = cat([a.narrow(axis, 0, i), (a.narrow(axis, i, 1) * 0 + 1), a.narrow(axis, i + 1, n - i - 1)],
                         axis)
                c = cumprod(xi, axis)
                cols.append((g.narrow(axis, i, n - i) * c.narrow(axis, i, n - i)).sum(axis, keepdim=True))
            return cat(cols, axis)
        record("CumprodBackward0", cumprod_backward, out, (a,), (a, out_alias))
    return out


def all(a: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether every element (along dim) is nonzero (uint8 for a uint8 tensor, as PyTorch keeps it)."""
    r = _asarray(a._data.astype(bool).all(axis=_dims(dim, a._data.ndim), keepdims=keepdim))
    return _result(r.astype(np.uint8) if a._data.dtype == np.uint8 else r)


def any(a: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether some element (along dim) is nonzero (uint8 for a uint8 tensor, as PyTorch keeps it)."""
    r = _asarray(a._data.astype(bool).any(axis=_dims(dim, a._data.ndim), keepdims=keepdim))
    return _result(r.astype(np.uint8) if a._data.dtype == np.uint8 else r)


def count_nonzero(a: Tensor, dim=None) -> Tensor:
    """The number of nonzero elements (along dim)."""
    return _result(_asarray(np.count_nonzero(a._data, axis=_dims(dim, a._data.ndim))).astype(np.int64))


attach(sum=sum, sum_to_size=sum_to_size, mean=mean, var=var, std=std, amax=amax, amin=amin, max=max, min=min,
       argmax=argmax, argmin=argmin, logsumexp=logsumexp, norm=norm, prod=prod, cumsum=cumsum, cumprod=cumprod,
       all=all, any=any, count_nonzero=count_nonzero, var_mean=var_mean, std_mean=std_mean)



sort_result = _return_type("sort")
topk_result = _return_type("topk")


def _take_sorted(a: Tensor, order, axis: int, name: str, result_type):
    """Values of `a` at `order` along axis, with a gradient that scatters back to those places."""
    x = a._data
    values = _result(np.take_along_axis(x, order, axis=axis))
    indices = _result(order.astype(np.int64, copy=False))
    if needs_grad(a):
        shape = x.shape

        def sort_backward(g):
            from .._creation import zeros
            return zeros(*shape, dtype=g.dtype, device=g.device).scatter(axis, indices, g)
        record(name, sort_backward, values, (a,))
    return result_type(values, indices)


def _argsort_array(x, axis: int, descending: bool, stable: bool):
    kind = "stable" if stable or descending else None
    if descending:
        # A stable ascending sort of the reversed row, reversed: ties keep their original order (PyTorch's stable
        # sort), NaN comes first, and nothing is negated (the int64 minimum has no negation).
        n = x.shape[axis]
        return (n - 1) - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return np.argsort(x, axis=axis, kind=kind)


def sort(a: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False, out=None):
    """Sorted values along dim and the indices they came from (out=: a (values, indices) pair to write)."""
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError("sort(): argument 'out' must be tuple of Tensors")
        values, indices = sort(a, dim, descending, stable=stable)
        return sort_result(_write_out("sort", values, out[0]), _write_out("sort", indices, out[1]))
    x = a._data
    if x.ndim == 0:
        return sort_result(a.clone(), _result(np.zeros((), np.int64)))
    axis = _wrap_dim(dim, x.ndim)
    return _take_sorted(a, _argsort_array(x, axis, descending, stable), axis, "SortBackward0", sort_result)


def argsort(a: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """The indices that sort a along dim."""
    x = a._data
    if x.ndim == 0:
        return _result(np.zeros((), np.int64))
    return _result(_argsort_array(x, _wrap_dim(dim, x.ndim), descending, stable).astype(np.int64, copy=False))


def topk(a: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The k largest (or smallest) values along dim, and their indices: sorted (ties lowest index first) or, with
    sorted=False, in index order. NaN counts as larger than any number, as in PyTorch."""
    x = a._data
    axis = _wrap_dim(dim, x.ndim) if x.ndim else 0
    size = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    if x.ndim == 0:
        return topk_result(a.clone(), _result(np.zeros((), np.int64)))
    if type(x) is np.ndarray:
        order = _topk_indices(x, axis, k, largest, sorted)
    else:
        order = np.take(_argsort_array(x, axis, largest, True), np.arange(k), axis=axis)
    return _take_sorted(a, order, axis, "TopkBackward0", topk_result)


def _topk_indices(x: np.ndarray, axis: int, k: int, largest: bool, ordered: bool) -> np.ndarray:
    """topk's indices without sorting whole rows: a partition finds the k-th value, every element beyond it is
    taken, then as many elements equal to it as are missing, lowest index first; only the k are sorted."""
    n = x.shape[axis]
    v = np.moveaxis(x, axis, -1)
    if v.dtype.itemsize == 2 and v.dtype.kind in "fV":
        v = v.astype(np.float32)  # the same order; NumPy has no bfloat16 partition
    count = math.prod(v.shape[:-1])
    rows = v.reshape(count, n)
    if k == 0 or rows.size == 0:
        return np.moveaxis(np.zeros(v.shape[:-1] + (k,), np.int64), -1, axis)
    pos = n - k if largest else k - 1
    kth = np.partition(rows, pos, axis=1)[:, pos, None]  # NaN sorts last: the largest, as PyTorch has it
    beyond = rows > kth if largest else rows < kth
    tie = rows == kth
    if rows.dtype.kind in "fc":
        nan, kth_nan = np.isnan(rows), np.isnan(kth)
        beyond |= (nan & ~kth_nan) if largest else (~nan & kth_nan)
        tie |= nan & kth_nan
    flat = np.flatnonzero(beyond | tie)
    if flat.size != count * k:  # more ties than places in some row: the lowest indices win
        tie &= np.cumsum(tie, axis=1) <= k - beyond.sum(1, keepdims=True)
        flat = np.flatnonzero(beyond | tie)
    idx = flat.reshape(count, k) - (np.arange(count) * n)[:, None]  # k per row, in index order
    if ordered:
        vals = np.take(rows, flat).reshape(count, k)
        # descending with ties in index order: the ascending order of the reversed row, reversed
        o = np.argsort(vals[:, ::-1] if largest else vals, axis=1, kind="stable")
        idx = _take_rows(idx, (k - 1) - o[:, ::-1] if largest else o)
    return np.moveaxis(idx.reshape(v.shape[:-1] + (k,)), -1, axis)


def _take_rows(a: np.ndarray, o: np.ndarray) -> np.ndarray:
    """np.take_along_axis(a, o, 1) for 2-D arrays as one flat take (take_along_axis builds a 2-D fancy index)."""
    return np.take(a, o + (np.arange(a.shape[0]) * a.shape[1])[:, None])


attach(sort=sort, argsort=argsort, topk=topk)
