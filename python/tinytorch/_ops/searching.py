"""Searching and counting: searchsorted, bucketize, unique, unique_consecutive, isin, bincount, histc, histogram."""
from __future__ import annotations

import math
import operator

import numpy as np

from .._dtype import float32, float64, int64, result_type
from .._tensor import Tensor, _wrap_dim
from ._common import _short, as_tensor_like, attach, needs_grad, record
from .indexing import _xp
from .pointwise import _result
from .statistics import _fmt, named_result

__all__ = ["searchsorted", "bucketize", "unique", "unique_consecutive", "isin", "bincount", "histc", "histogram"]

_histogram_type = named_result("histogram", ("hist", "bin_edges"))


def _no_derivative(node: str, error, message: str, outputs, inputs: tuple) -> None:
    """Float outputs of ops PyTorch has no derivative for still require grad there; backward through them raises
    PyTorch's error."""
    def backward(*grads):
        raise error(message)
    record(node, backward, outputs, inputs)


# ------------------------------------------------------------------ searchsorted, bucketize

def _nan_search(b, v, right: bool):
    """PyTorch's lower/upper bound of each row of v in the same row of b, all values at once: a step goes right
    unless mid >= value (mid > value for the upper bound), so a NaN on either side always goes right."""
    n = b.shape[-1]
    start = np.zeros(v.shape, np.int64)
    end = np.full(v.shape, n, np.int64)
    rows = np.arange(b.shape[0])[:, None]
    active = start < end
    while active.any():
        mid = start + ((end - start) >> 1)
        mid_val = b[rows, np.minimum(mid, n - 1)]
        go_right = ~(mid_val > v) if right else ~(mid_val >= v)
        start = np.where(active & go_right, mid + 1, start)
        end = np.where(active & ~go_right, mid, end)
        active = start < end
    return start


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False, side=None,
                 sorter: Tensor | None = None) -> Tensor:
    """Indices at which `input` would be inserted into the innermost dim of sorted_sequence to keep it sorted
    (the first such place, or the last with right=True / side='right')."""
    seq = sorted_sequence
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if sorter is not None and tuple(sorter.shape) != tuple(seq.shape):
        raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                           f"tensor {list(seq.shape)}and got sorter tensor {list(sorter.shape)}")
    dt = result_type(seq, input).np
    values = input if isinstance(input, Tensor) else as_tensor_like(input, seq)
    if values.ndim == 0 and seq.ndim != 1:
        raise RuntimeError("torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
                           f"is 1, but we got boundaries tensor dim({seq.ndim}) and input value's dim(0) numel(1)")
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    if seq.ndim != 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                           "dimensions of boundaries tensor and input value tensor must match, but we got boundaries "
                           f"tensor {list(seq.shape)} and input value tensor {list(values.shape)}")
    b = seq._data.astype(dt, copy=False)
    v = values._data.astype(dt, copy=False)
    if sorter is not None:
        if sorter.dtype != int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
                               f"{_short(sorter.dtype)}")
        s = sorter._data
        if s.size and (int(s.min()) < 0 or int(s.max()) >= b.shape[-1]):
            raise RuntimeError("torch.searchsorted(): sorter index out of range")
        b = np.take_along_axis(b, s, axis=-1)
    how = "right" if right else "left"
    if b.dtype.kind in "fc" and (np.isnan(b).any() or np.isnan(v).any()):
        # NumPy orders NaN last; PyTorch's binary search instead moves right on every comparison with NaN.
        rows = math.prod(b.shape[:-1])
        r = _nan_search(b.reshape(rows, b.shape[-1]), v.reshape(rows if b.ndim > 1 else 1, -1), right)
        return _result(r.reshape(v.shape).astype(np.int32 if out_int32 else np.int64, copy=False))
    if b.ndim == 1:
        r = np.asarray(np.searchsorted(b, v, side=how))
    else:  # one search per row of the leading dims
        r = np.zeros_like(v, dtype=np.int64)
        rows = math.prod(b.shape[:-1])
        rows_b, rows_v, rows_r = (t.reshape(rows, t.shape[-1]) for t in (b, v, r))
        for i in range(rows):
            rows_r[i] = np.searchsorted(rows_b[i], rows_v[i], side=how)
    return _result(r.astype(np.int32 if out_int32 else np.int64, copy=False))


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each input value among 1-D sorted boundaries (searchsorted with the arguments swapped)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ------------------------------------------------------------------ unique, unique_consecutive, isin

def _dim_for_unique(x, dim) -> int:
    """The axis unique/unique_consecutive work along, with PyTorch's errors for 0-d and empty inputs."""
    if x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    axis = _wrap_dim(dim, x.ndim)
    if x.size == 0 and x.shape[axis] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    return axis


def _unique_result(a: Tensor, values, inverse, counts, return_inverse: bool, return_counts: bool, node: str,
                   what: str):
    """unique's result: the values alone, or a tuple with the inverse indices and/or counts asked for."""
    out = _result(values)
    if needs_grad(a) and values.dtype.kind in "fVc":
        _no_derivative(node, NotImplementedError, f"the derivative for '{what}' is not implemented.", out, (a,))
    if not (return_inverse or return_counts):
        return out
    extra = ((_result(inverse.astype(np.int64, copy=False)),) if return_inverse else ()) + \
        ((_result(counts.astype(np.int64, copy=False)),) if return_counts else ())
    return (out,) + extra


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """The distinct elements (or slices along dim), in ascending order (also with sorted=False, as PyTorch on CPU);
    NaNs are all distinct. With return_inverse/return_counts: (output, inverse_indices?, counts?)."""
    x = input._data
    if dim is None:
        values, inverse, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        return _unique_result(input, values, inverse.reshape(x.shape), counts, return_inverse, return_counts,
                              "Unique2Backward0", "_unique2")
    axis = _dim_for_unique(x, dim)
    if x.shape[axis] == 0:
        empty = _xp(x).zeros(0, np.int64)
        return _unique_result(input, x.copy(), empty, empty, return_inverse, return_counts, "UniqueDimBackward0",
                              "unique_dim")
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True, axis=axis)
    return _unique_result(input, values, inverse.reshape(-1), counts, return_inverse, return_counts,
                          "UniqueDimBackward0", "unique_dim")


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse each run of equal consecutive elements (or slices along dim) to one; NaNs never compare equal."""
    x = input._data
    axis = 0 if dim is None else _dim_for_unique(x, dim)
    rows = x.reshape(-1, 1) if dim is None else \
        np.moveaxis(x, axis, 0).reshape(x.shape[axis], math.prod(x.shape) // max(x.shape[axis], 1))
    n = rows.shape[0]
    starts = _xp(x).ones(n, bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    first = np.flatnonzero(starts)
    values = x.reshape(-1)[first] if dim is None else np.take(x, first, axis=axis)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(first, n))
    return _unique_result(input, values, inverse.reshape(x.shape) if dim is None else inverse, counts,
                          return_inverse, return_counts, "UniqueConsecutiveBackward0", "unique_consecutive")


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of `elements` is in test_elements (a bool tensor of elements' shape)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got ({type(elements).__name__}, "
                        f"{type(test_elements).__name__}), but expected one of: (Tensor elements, Tensor "
                        "test_elements), (Number element, Tensor test_elements), (Tensor elements, Number "
                        "test_element)")
    like = elements if isinstance(elements, Tensor) else test_elements
    dt = result_type(elements, test_elements)
    e, t = (v if isinstance(v, Tensor) else as_tensor_like(v, like) for v in (elements, test_elements))
    for v in (e, t):
        if v._data.dtype.kind in "bc":
            raise RuntimeError(f"Unsupported input type encountered for isin(): {_short(v.dtype)}")
    x, y = e._data.astype(dt.np, copy=False), t._data.astype(dt.np, copy=False)
    return _result(np.asarray(np.isin(x, y, assume_unique=assume_unique, invert=invert)))


# ------------------------------------------------------------------ counting

def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(input) occurs in a 1-D non-negative integer tensor (summed weights if given:
    float32 for float32 weights, float64 for any other)."""
    x = input._data
    if x.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_short(input.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if x.ndim == 1 and x.size == 0:
        return _result(_xp(x).zeros(minlength, np.int64))
    if x.ndim != 1 or int(x.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return _result(np.bincount(x, minlength=minlength).astype(np.int64, copy=False))
    w = weights._data
    if w.ndim != 1 or w.shape[0] != x.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out_dt = np.float32 if w.dtype == np.float32 else np.float64
    out = _result(np.bincount(x, weights=w.astype(np.float64), minlength=minlength).astype(out_dt))
    if needs_grad(weights):
        _no_derivative("NotImplemented", RuntimeError, "derivative for aten::bincount is not implemented", out,
                       (weights,))
    return out


def _linspace(start: float, end: float, steps: int, like):
    """ATen's linspace in like's dtype (each half counted from its own end), which histogram's edges come from."""
    dt = like.dtype
    start, end = dt.type(start), dt.type(end)
    step = (end - start) / dt.type(steps - 1)
    i = _xp(like).arange(steps)
    fi = i.astype(dt)
    return np.where(i < steps // 2, start + step * fi, end - step * (dt.type(steps - 1) - fi)).astype(dt)


def _bin_counts(x, edges, weights, interpolate: bool, local_search: bool):
    """PyTorch's histogram kernel on flat x: values outside [edges[0], edges[-1]] (and NaN) are left out; the last
    bin also holds its right edge. Int bins find the bin from the value's position in the range (then check it
    against the neighbouring edges when local_search); bins given as edges find it by binary search."""
    nb = edges.shape[0] - 1
    left, right = edges[0], edges[-1]
    keep = (x >= left) & (x <= right)
    v = x[keep]
    if interpolate:
        pos = ((v - left) * edges.dtype.type(nb) / (right - left)).astype(np.int64)
        if local_search:
            lo = np.maximum(pos - 1, 0)
            hi = np.minimum(pos + 2, nb + 1)
            found = np.zeros_like(pos)
            for j in range(3):
                e = lo + j
                found += (e < hi) & (edges[np.minimum(e, nb)] <= v)
            pos = lo + found - 1
    else:
        pos = np.searchsorted(edges, v, side="right") - 1
    pos = np.where(pos == nb, nb - 1, pos)
    w = None if weights is None else weights[keep].astype(np.float64)
    return np.bincount(pos, weights=w, minlength=nb)[:nb]


def histc(input: Tensor, bins: int = 100, min=0, max=0) -> Tensor:  # noqa: A002  (PyTorch's names)
    """Counts of the elements in `bins` equal-width bins over [min, max] (the data's range when min == max);
    elements outside are ignored."""
    x = input._data
    if x.dtype.kind not in "fV":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_short(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    left, right = float(min), float(max)
    if left == right and x.size:
        left, right = float(x.min()), float(x.max())
    if left == right:
        left, right = left - 1, right + 1
    if not (math.isfinite(left) and math.isfinite(right)):
        raise RuntimeError(f"torch.histc: range of [{_fmt(left)}, {_fmt(right)}] is not finite")
    if not left < right:
        raise RuntimeError("torch.histc: max must be larger than min")
    edges = _linspace(left, right, bins + 1, x)
    return _result(_bin_counts(x.reshape(-1), edges, None, True, False).astype(x.dtype))


_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                 "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                 "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
                 "complex128": "c10::complex<double>"}


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False):
    """(hist, bin_edges): counts (or summed weights) of the elements in `bins` equal-width bins over `range` (the
    data's range when None), or in the bins a 1-D tensor of edges gives; density=True makes it a density."""
    x = input._data
    if input.dtype not in (float32, float64):
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_short(input.dtype)}'")
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): range can only be given with an int number of bins, not a bins tensor")
        edges = bins._data
        if edges.dtype != x.dtype:
            raise RuntimeError("torch.histogramdd: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {_C_TYPE_NAMES[x.dtype.name]} and bins for dimension 0 with dtype "
                               f"{_C_TYPE_NAMES[edges.dtype.name]}")
        if edges.ndim != 1:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got {edges.ndim} "
                               "dimensions in the bins tensor for dimension 0")
        if edges.shape[0] < 2:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {edges.shape[0] - 1} for dimension 0")
        edges = edges.copy()
    else:
        bins = operator.index(bins)
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            if len(range) != 2:
                raise RuntimeError("torch.histogramdd: for a 1-dimensional histogram range should have 2 elements, "
                                   f"but got {len(range)}")
            left, right = float(range[0]), float(range[1])
        elif x.size:
            left, right = float(x.min()), float(x.max())
        else:
            left, right = 0.0, 1.0
        if not (math.isfinite(left) and math.isfinite(right)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{_fmt(left)}, {_fmt(right)}] is not finite")
        if left > right:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {_fmt(left)} max "
                               f"{_fmt(right)} for dimension 0")
        if left == right:  # an empty range widens to a unit one, as NumPy's
            left, right = left - 0.5, right + 0.5
        edges = _linspace(left, right, bins + 1, x)
    w = None
    if weight is not None:
        w = weight._data
        if w.size != x.size:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape as the "
                               f"input tensor excluding its innermost dimension, but got input with shape "
                               f"{[x.size, 1]} and weight with shape {list(w.reshape(-1).shape)}")
        if w.dtype != x.dtype:
            raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                               f"should have the same dtype, but got input({_C_TYPE_NAMES[x.dtype.name]}), and "
                               f"weight({_C_TYPE_NAMES[w.dtype.name]})")
        w = w.reshape(-1)
    hist = _bin_counts(x.reshape(-1), edges, w, not isinstance(bins, Tensor), True).astype(x.dtype)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):  # nothing counted: nan, silently, as in PyTorch
            hist = hist / hist.sum(dtype=x.dtype)
            hist = hist / np.diff(edges)
    out = _histogram_type(_result(hist), _result(edges))
    if needs_grad(input, weight):
        _no_derivative("NotImplemented", RuntimeError, "derivative for aten::histogram is not implemented",
                       tuple(out), tuple(t for t in (input, weight) if t is not None))
    return out


attach(unique=unique, unique_consecutive=unique_consecutive, bincount=bincount, histc=histc, histogram=histogram)
