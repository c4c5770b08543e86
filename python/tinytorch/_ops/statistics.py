"""Order statistics and NaN-aware reductions: median, quantile, mode, kthvalue, nansum, cov, cummax, ..."""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from .._dtype import float32, float64, int64
from .._tensor import Tensor, _wrap_dim
from ._common import _short, alias, as_tensor_like, attach, needs_grad, record, saved_output
from .indexing import _xp
from .pointwise import _result, where
from .reduction import _dims, _expand_back, _return_type, _wide, amax, amin, sum as _sum
from ._common import user_stacklevel as _user_stacklevel

__all__ = ["median", "nanmedian", "kthvalue", "mode", "quantile", "nanquantile", "nansum", "nanmean", "aminmax",
           "cummax", "cummin", "logcumsumexp", "cov", "corrcoef"]


def named_result(name: str, fields: tuple):
    """PyTorch's torch.return_types.<name> for results whose fields are not (values, indices)."""
    base = namedtuple(name, fields)

    class ReturnType(base):
        __slots__ = ()

        def __repr__(self) -> str:
            body = ",\n".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
            return f"torch.return_types.{name}(\n{body})"
    ReturnType.__name__ = ReturnType.__qualname__ = name
    ReturnType.__module__ = "tinytorch.return_types"
    return ReturnType


_median_type, _nanmedian_type = _return_type("median"), _return_type("nanmedian")
_kthvalue_type, _mode_type = _return_type("kthvalue"), _return_type("mode")
_cummax_type, _cummin_type = _return_type("cummax"), _return_type("cummin")
_aminmax_type = named_result("aminmax", ("min", "max"))


def _unsupported(a: Tensor, kernel: str, bool_ok: bool = False) -> None:
    """PyTorch's dispatch error for dtypes an order statistic has no kernel for (complex; bool for most)."""
    kind = a._data.dtype.kind
    if kind == "c" or (kind == "b" and not bool_ok):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_short(a.dtype)}'")


def _nan_count(x):
    """NaNs per row of the last axis (kept as a length-1 axis); zeros for types that hold no NaN."""
    if x.dtype.kind in "biu":
        return _xp(x).zeros(x.shape[:-1] + (1,), np.int64)
    return np.isnan(x).sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------ value-selecting reductions

def _select(a: Tensor, dim, keepdim: bool, choose, node: str, result_type, what: str):
    """A (values, indices) reduction along dim: `choose(x)` picks a position along x's last axis (returned with a
    length-1 last axis); the gradient goes to the picked element (PyTorch's value_selecting_reduction_backward)."""
    x = a._data
    if x.ndim == 0:
        _wrap_dim(dim, 0)
        choose(x.reshape(1))  # its own checks (kthvalue's k)
        return result_type(a.clone() if needs_grad(a) else _result(x.copy()), _result(_xp(x).zeros((), np.int64)))
    axis = _wrap_dim(dim, x.ndim)
    if x.shape[axis] == 0:
        raise IndexError(f"{what}(): Expected reduction dim {axis} to have non-zero size.")
    idx = np.moveaxis(choose(np.moveaxis(x, axis, -1)), -1, axis)
    values = np.take_along_axis(x, idx, axis=axis)
    if not keepdim:
        values, idx = values.squeeze(axis), idx.squeeze(axis)
    out = _result(values)
    indices = _result(idx.astype(np.int64, copy=False))
    if needs_grad(a):
        shape = x.shape

        def select_backward(g):
            from .._creation import zeros
            gi = indices if keepdim else indices.unsqueeze(axis)
            gg = g if keepdim else g.unsqueeze(axis)
            return zeros(*shape, dtype=g.dtype, device=g.device).scatter(axis, gi, gg)
        record(node, select_backward, out, (a,))
    return result_type(out, indices)


def _median_position(x, ignore_nan: bool):
    """Where the lower median of each last-axis row sits: NaN sorts last; median() answers a row's first NaN."""
    order = np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    nans = _nan_count(x)
    if ignore_nan:
        k = np.maximum(n - nans - 1, 0) // 2
    else:
        k = np.where(nans > 0, n - nans, (n - 1) // 2)  # the stable sort keeps the NaNs in their order
    return np.take_along_axis(order, k, axis=-1)


def _median_all(a: Tensor, ignore_nan: bool) -> Tensor:
    """median()/nanmedian() of all elements; ties share the gradient evenly (PyTorch's evenly_distribute_backward)."""
    _unsupported(a, "median_cpu")
    x = a._data
    flat = x.reshape(1, -1)
    if flat.size == 0:
        empty = np.nan if x.dtype.kind not in "iu" else (np.iinfo(x.dtype).min if x.dtype.kind == "i" else 0)
        out = _result(_xp(x).full((), empty, x.dtype))
    else:
        pos = _median_position(flat, ignore_nan)
        out = _result(np.take_along_axis(flat, pos, axis=-1).reshape(()))
    if needs_grad(a):
        res = alias(out)

        def median_backward(g):
            mask = (a == res) | (a.isnan() & res.isnan())
            return mask * (g / mask.sum())
        record("NanmedianBackward0" if ignore_nan else "MedianBackward0", median_backward, out, (a,), (a, res))
    return out


def median(input: Tensor, dim=None, keepdim: bool = False):
    """median(): the lower of the two middle values (NaN if any); median(dim): (values, indices) along dim."""
    if dim is None:
        if keepdim:
            raise TypeError('median() missing 1 required positional arguments: "dim"')
        return _median_all(input, False)
    _unsupported(input, "median_out")
    return _select(input, dim, keepdim, lambda x: _median_position(x, False), "MedianBackward1", _median_type,
                   "median")


def nanmedian(input: Tensor, dim=None, keepdim: bool = False):
    """median that ignores NaN (NaN only where a row is all NaN)."""
    if dim is None:
        if keepdim:
            raise TypeError('nanmedian() missing 1 required positional arguments: "dim"')
        return _median_all(input, True)
    _unsupported(input, "median_out")
    return _select(input, dim, keepdim, lambda x: _median_position(x, True), "NanmedianBackward1",
                   _nanmedian_type, "nanmedian")


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The k-th smallest value along dim (k counts from 1; NaN is the largest) and its index."""
    _unsupported(input, "kthvalue_cpu")

    def kth(x):
        if not 1 <= k <= x.shape[-1]:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension "
                               f"{_wrap_dim(dim, input._data.ndim)}")
        order = np.argsort(x, axis=-1, kind="stable")
        return order[..., k - 1:k]
    return _select(input, dim, keepdim, kth, "KthvalueBackward0", _kthvalue_type, "kthvalue")


def _mode_position(x):
    """The last place of the smallest of a row's most frequent values, as PyTorch's CPU kernel picks it."""
    order = np.argsort(x, axis=-1, kind="stable")
    s = np.take_along_axis(x, order, axis=-1)
    xp = _xp(x)
    pos = xp.arange(x.shape[-1])
    starts = xp.ones(s.shape, bool)
    starts[..., 1:] = s[..., 1:] != s[..., :-1]
    run = pos - np.maximum.accumulate(np.where(starts, pos, 0), axis=-1)  # place within a run of equal values
    return np.take_along_axis(order, np.argmax(run, axis=-1)[..., None], axis=-1)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """The most frequent value along dim (the smallest of equally frequent ones) and an index of it."""
    _unsupported(input, "mode_cpu", bool_ok=True)
    return _select(input, dim, keepdim, _mode_position, "ModeBackward0", _mode_type, "mode")


# ------------------------------------------------------------------ quantiles

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _fmt(v: float) -> str:
    """A double as C++'s ostream prints it in PyTorch's messages (2 not 2.0)."""
    return f"{v:g}"


def _quantile(a: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    """ATen's quantile: sort along dim, rank q among the (non-NaN) values, then interpolate. Written in tensor ops,
    so the gradient flows through sort and gather to the two neighbouring values (and to q)."""
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    q_is_tensor = isinstance(q, Tensor)
    if not q_is_tensor and not 0 <= float(q) <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {_fmt(float(q))}")
    x = a._data
    if x.size == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if q_is_tensor and q._data.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if a.dtype not in (float32, float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if q_is_tensor:
        if q.dtype != a.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if not bool(((q._data >= 0) & (q._data <= 1)).all()):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
    qt = q if q_is_tensor else as_tensor_like(np.array(float(q), x.dtype), a)
    q1 = qt.reshape(-1)
    if dim is None:
        s = a.reshape(-1).sort().values
        lead = (1,) * x.ndim if keepdim else ()
    elif x.ndim == 0:
        _wrap_dim(dim, 0)
        s, lead = a.reshape(1), ()
    else:
        axis = _wrap_dim(dim, x.ndim)
        s = a.movedim(axis, -1).sort().values
        lead = tuple(1 if i == axis else size for i, size in enumerate(x.shape) if keepdim or i != axis)
    n = s.shape[-1]
    s = s.reshape(lead + (n,))
    is_nan = s.isnan()
    if ignore_nan:  # rank among the non-NaN values; an all-NaN row gets rank 0, which is NaN
        ranks = q1 * (is_nan.logical_not().sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:  # a row with a NaN gets the last rank, which is NaN
        ranks = (q1 * (n - 1)).expand(*(lead + (q1.shape[0],))).masked_fill(is_nan.any(-1, keepdim=True), n - 1)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as ATen's round
    below = ranks.to(int64)
    result = s.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        above = s.gather(-1, ranks.ceil().to(int64))
        w = ranks * 0 + 0.5 if interpolation == "midpoint" else ranks - below
        # ATen's lerp: from the upper end when the weight is >= 0.5, so that a weight of 1 gives it exactly
        result = where(w < 0.5, result + w * (above - result), above - (above - result) * (1 - w))
    result = result.movedim(-1, 0)
    return result if q_is_tensor and q._data.ndim else result.squeeze(0)


def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """The q-th quantiles along dim (all elements when None); NaN where a reduced row holds a NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """quantile that ignores NaN (NaN only where a reduced row is all NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ------------------------------------------------------------------ NaN-aware sums, extrema

def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over dim treating NaN as zero (integers sum as in sum()); no gradient reaches the NaNs."""
    x = input._data
    if x.dtype.kind == "c":
        raise RuntimeError("nansum does not support complex inputs")
    filled = np.where(np.isnan(x), x.dtype.type(0), x) if x.dtype.kind not in "biu" else x
    out = _sum(_result(filled), dim, keepdim, dtype=dtype)
    if needs_grad(input):
        shape, axes = x.shape, _dims(dim, x.ndim)

        def nansum_backward(g):
            g = g if g.dtype == input.dtype else g.to(input.dtype)
            return _expand_back(g, shape, axes, keepdim).masked_fill(input.isnan(), 0.0)
        record("NansumBackward0", nansum_backward, out, (input,), (input,))
    return out


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over dim of the non-NaN elements (NaN where there are none): nansum / count, as ATen composes it."""
    if input._data.dtype.kind not in "fVc":
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_short(input.dtype)}")
    count = input.isnan().logical_not().sum(dim, keepdim)
    with np.errstate(divide="ignore", invalid="ignore"):  # no values: nan, silently, as in PyTorch
        return nansum(input, dim, keepdim, dtype=dtype) / count


def aminmax(input: Tensor, *, dim=None, keepdim: bool = False):
    """(min, max) over dim (all elements when None); ties share each gradient evenly, as amin/amax."""
    _unsupported(input, "aminmax_cpu", bool_ok=True)
    x = input._data
    if dim is None:
        if x.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        return _aminmax_type(amin(input, (), keepdim), amax(input, (), keepdim))
    axis = _wrap_dim(dim, x.ndim)
    if x.ndim and x.shape[axis] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {axis} to have non-zero size.")
    return _aminmax_type(amin(input, axis, keepdim), amax(input, axis, keepdim))


# ------------------------------------------------------------------ running reductions

def _cum_extremum(a: Tensor, dim: int, largest: bool):
    """cummax/cummin: the running extremum and the last index attaining it (a NaN, once seen, stays)."""
    name = "cummax" if largest else "cummin"
    _unsupported(a, name + "_cpu", bool_ok=True)
    result_type = _cummax_type if largest else _cummin_type
    x = a._data
    axis = _wrap_dim(dim, x.ndim)
    xp = _xp(x)
    if x.ndim == 0:
        return result_type(a.clone() if needs_grad(a) else _result(x.copy()), _result(xp.zeros((), np.int64)))
    values = (np.maximum if largest else np.minimum).accumulate(x, axis=axis)
    # The running extremum at i is attained last at the last j <= i where x[j] is itself the running extremum.
    hit = x == values
    if x.dtype.kind not in "biu":
        hit |= np.isnan(x)
    pos = xp.arange(x.shape[axis]).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=axis) if x.size else xp.zeros(x.shape, np.int64)
    out = _result(values)
    indices = _result(idx.astype(np.int64, copy=False))
    if needs_grad(a):
        shape = x.shape

        def cum_extremum_backward(g):
            from .._creation import zeros
            return zeros(*shape, dtype=g.dtype, device=g.device).scatter_add(axis, indices, g)
        record("CummaxBackward0" if largest else "CumminBackward0", cum_extremum_backward, out, (a,))
    return result_type(out, indices)


def cummax(input: Tensor, dim: int):
    """Running maximum along dim, with the index where each value was (last) attained."""
    return _cum_extremum(input, dim, True)


def cummin(input: Tensor, dim: int):
    """Running minimum along dim, with the index where each value was (last) attained."""
    return _cum_extremum(input, dim, False)


def _lowest(dt) -> float:
    """The most negative finite value of a float dtype (bfloat16 included)."""
    if dt.kind == "f":
        return float(np.finfo(dt).min)
    import ml_dtypes
    return float(ml_dtypes.finfo(dt).min)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(input))) along dim, computed without overflow."""
    x = input._data
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_short(input.dtype)}'")
    axis = _wrap_dim(dim, x.ndim)
    with np.errstate(invalid="ignore"):  # inf + -inf: nan, silently, as in PyTorch
        out = _result(np.logaddexp.accumulate(_wide(x), axis=axis).astype(x.dtype, copy=False) if x.ndim
                      else x.copy())
    if needs_grad(input):
        out_alias = alias(out)

        def logcumsumexp_backward(g):
            # ATen's stable form: grad_i = sum_{j >= i} g_j exp(x_i - out_j), split by the sign of g_j and summed
            # in log space with a reversed logcumsumexp.
            if g.ndim == 0 or g.numel() == 0:
                return g
            res = saved_output(out_alias, lambda: logcumsumexp(input, axis))
            lowest = _lowest(g._data.dtype)
            log_abs = g.masked_fill(g == 0, 1.0).abs().log()  # no log(0): its gradient would be 0 * inf

            def reversed_lcse(t):
                return logcumsumexp(t.flip(axis), axis).flip(axis)
            with np.errstate(over="ignore", invalid="ignore"):  # lowest - a large output is -inf: exp gives 0
                pos = (reversed_lcse(log_abs.masked_fill(g <= 0, lowest) - res) + input).exp()
                neg = (reversed_lcse(log_abs.masked_fill(g >= 0, lowest) - res) + input).exp()
            return pos - neg
        record("LogcumsumexpBackward0", logcumsumexp_backward, out, (input,), (input, out_alias))
    return out


# ------------------------------------------------------------------ covariance

def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the rows (variables) over the columns (observations), weighted as NumPy's cov; composed of
    differentiable ops as ATen does."""
    if input.ndim > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    if input._data.dtype.kind == "b":
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights
        if w.ndim > 1:
            raise RuntimeError("cov(): expected fweights to have one or fewer dimensions but got fweights with "
                               f"{w.ndim} dimensions")
        if w._data.dtype.kind not in "iu":
            raise RuntimeError("cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_short(w.dtype)} dtype")
        if w.numel() != n:
            raise RuntimeError("cov(): expected fweights to have the same numel as there are observations in the "
                               f"input but got {w.numel()} != {n}")
        if n and int(w._data.min()) < 0:
            raise RuntimeError("cov(): fweights cannot be negative")
    if aweights is not None:
        if aweights.ndim > 1:
            raise RuntimeError("cov(): expected aweights to have one or fewer dimensions but got aweights with "
                               f"{aweights.ndim} dimensions")
        if aweights._data.dtype.kind not in "fV":
            raise RuntimeError("cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{_short(aweights.dtype)} dtype")
        if aweights.numel() != n:
            raise RuntimeError("cov(): expected aweights to have the same numel as there are observations in the "
                               f"input but got {aweights.numel()} != {n}")
        if n and float(aweights._data.min()) < 0:
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        with np.errstate(divide="ignore", invalid="ignore"):  # no observations: a nan mean, silently, as in PyTorch
            avg = x.sum(1) / n
        norm = n - correction
    else:
        w_sum = w.sum()
        if not bool(w_sum != 0):
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1) / w_sum
        norm = w_sum - correction * (w * aweights).sum() / w_sum if aweights is not None and correction != 0 \
            else w_sum - correction
    if bool(norm <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=_user_stacklevel())
        norm = norm * 0
    centered = x - avg.unsqueeze(1)
    c = centered.mm((centered if w is None else centered * w).t().conj())
    with np.errstate(divide="ignore", invalid="ignore"):  # no degrees of freedom: inf/nan, warned about above
        return (c / norm).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows: cov normalised by the standard deviations, clipped to [-1, 1]."""
    if input.ndim > 2:
        raise RuntimeError("corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    with np.errstate(divide="ignore", invalid="ignore"):  # a constant variable: nan, silently, as in PyTorch
        if c.ndim == 0:  # one variable: 1, or nan when its variance is 0, inf or nan
            return c / c
        d = c.diagonal()
        std = (d.real if d.is_complex() else d).sqrt()
        c = c / std.reshape(-1, 1)
        c = c / std.reshape(1, -1)
    if c.is_complex():
        from .complex import complex as make_complex
        return make_complex(c.real.clip(-1, 1), c.imag.clip(-1, 1))
    return c.clip(-1, 1)


attach(median=median, nanmedian=nanmedian, kthvalue=kthvalue, mode=mode, quantile=quantile, nanquantile=nanquantile,
       nansum=nansum, nanmean=nanmean, aminmax=aminmax, cummax=cummax, cummin=cummin, logcumsumexp=logcumsumexp,
       cov=cov, corrcoef=corrcoef)
