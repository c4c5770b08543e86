"""Large CPU tensors' elementwise ops and sums on the intra-op thread pool (csrc/kernels/elementwise.cpp).

Each helper takes NumPy arrays and returns the result, or None when the C++ kernel does not take them (too
small, not float32/float64, a layout it does not handle), in which case the caller runs NumPy as before. Below
two grains (2 x 32768 elements, ATen's grain size) one thread would do the whole op, and NumPy's loop does it
as fast without the call, so small tensors (and the per-op overhead of tiny ones) never come here.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _C

_k = _C._cpu
MIN_SIZE = 1 << 16
_ND = np.ndarray
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

ADD, SUB, MUL, DIV = 0, 1, 2, 3
LERP, ADDCMUL, ADDCDIV = 0, 1, 2
NEG, EXP, LOG, TANH, SIGMOID, RELU, SQRT, RSQRT, ABS, RECIPROCAL, SQUARE, SILU, CUBE = range(13)
SIGMOID_BACKWARD, TANH_BACKWARD, SILU_BACKWARD = range(3)
LEAKY_RELU, ELU, SOFTPLUS, LOG_SIGMOID, HARDSWISH, HARDSIGMOID, MISH, HARDTANH = range(8)  # HARDTANH: backward only
BCE_WITH_LOGITS, SMOOTH_L1, HUBER = range(3)


def _big(x) -> bool:
    """A C-contiguous float32/float64 array of at least MIN_SIZE elements."""
    return type(x) is _ND and x.size >= MIN_SIZE and x.dtype in (_F32, _F64) and x.flags.c_contiguous


def _operand(v, like):
    """v as an array the kernel pairs with `like`: the same dtype, C-contiguous; a Python number becomes a
    0-d array of like's dtype (a float tensor and a Python scalar keep the tensor's dtype). None if it can't."""
    t = type(v)
    if t is float or t is int:
        return np.array(v, like.dtype)
    if t is not _ND or v.dtype != like.dtype or not v.flags.c_contiguous:
        return None
    return v


def _trailing(small, shape: tuple) -> bool:
    """Whether `small` broadcasts against `shape` by repeating along its leading dimensions only."""
    s = small.shape
    while s and s[0] == 1:
        s = s[1:]
    return len(s) <= len(shape) and tuple(shape[len(shape) - len(s):]) == s


def binary(op: int, x, y, out=None):
    """x op y (ADD, SUB, MUL, DIV) when one side is a big array and the other the same shape, a scalar or a
    trailing broadcast of it; `out` (optional) may be x itself, for in-place ops."""
    big = x if type(x) is _ND and (type(y) is not _ND or x.size >= y.size) else y
    if not _big(big):
        return None
    a, b = _operand(x, big), _operand(y, big)
    if a is None or b is None:
        return None
    other = b if a is big else a
    if other.shape != big.shape and other.size != 1 and (other.ndim > big.ndim or not _trailing(other, big.shape)):
        return None
    if out is not None and other.size > 1 and np.may_share_memory(out, other):
        return None  # x[1:] += x[:-1]: NumPy buffers the overlap, the threads would not
    if out is None:
        out = np.empty(big.shape, big.dtype)
    _k.binary(op, a, b, out)
    return out


def unary(op: int, x):
    """f(x) for NEG, EXP, LOG, TANH, SIGMOID, RELU, SQRT, RSQRT, ABS, RECIPROCAL, SQUARE, SILU, CUBE."""
    if not _big(x):
        return None
    out = np.empty(x.shape, x.dtype)
    _k.unary(op, x, out)
    return out


def ternary(op: int, a, b, c, w, out=None):
    """lerp(a, b, w) (LERP; c unused), a + w * b * c (ADDCMUL), a + w * b / c (ADDCDIV) for arrays of one shape
    and float dtype and a Python number w; `out` (optional) may be a itself, for the in-place forms."""
    if not _big(a) or type(w) not in (float, int):
        return None
    for v in (b, c):
        if type(v) is not _ND or v.dtype != a.dtype or v.shape != a.shape or not v.flags.c_contiguous:
            return None
    if out is None:
        out = np.empty(a.shape, a.dtype)
    elif (out is not a and np.may_share_memory(out, a)) or np.may_share_memory(out, b) or \
            np.may_share_memory(out, c):
        return None  # only an exact alias of a reads each element before it is written
    _k.ternary(op, a, b, c, float(w), out)
    return out


def unary_backward(op: int, g, v):
    """The input gradient of sigmoid or tanh from their output v (SIGMOID_BACKWARD, TANH_BACKWARD), of SiLU from
    its input v (SILU_BACKWARD), for g of v's shape and dtype."""
    if not (_big(v) and type(g) is _ND and g.dtype == v.dtype and g.shape == v.shape and g.flags.c_contiguous):
        return None
    out = np.empty(v.shape, v.dtype)
    _k.unary_backward(op, g, v, out)
    return out


def relu_backward(g, y):
    """g where y > 0 (ReLU's backward from its output)."""
    if not (_big(y) and type(g) is _ND and g.dtype == y.dtype and g.shape == y.shape and g.flags.c_contiguous):
        return None
    out = np.empty(y.shape, y.dtype)
    _k.relu_backward(g, y, out)
    return out


def where(cond, a, b):
    """cond ? a : b for full-size or scalar a, b of one float dtype and a bool condition of their shape or a
    trailing broadcast of it (a (T, T) mask over (B, H, T, T) scores)."""
    if type(cond) is not _ND or cond.dtype != np.bool_ or not cond.flags.c_contiguous:
        return None
    big = a if type(a) is _ND and a.size >= (b.size if type(b) is _ND else 1) else b
    if not _big(big) or (cond.shape != big.shape and not _trailing(cond, big.shape)):
        return None
    x, y = _operand(a, big), _operand(b, big)
    if x is None or y is None or (x.shape != big.shape and x.size != 1) or (y.shape != big.shape and y.size != 1):
        return None
    out = np.empty(big.shape, big.dtype)
    _k.where(cond, x, y, out)
    return out


def concatenate(arrays, axis: int):
    """np.concatenate(arrays, axis) for arrays of one dtype, each piece copied into place by the pool."""
    first = arrays[0]
    shape = list(first.shape)
    shape[axis] = builtins.sum(x.shape[axis] for x in arrays)
    if math.prod(shape) < MIN_SIZE or first.dtype.hasobject or \
            any(type(x) is not _ND or x.dtype != first.dtype for x in arrays):
        return None
    out = np.empty(shape, first.dtype)
    outer = math.prod(shape[:axis])
    if outer >= 2 * _k.get_num_threads() and all(x.flags.c_contiguous for x in arrays):
        _k.cat_rows(arrays, out, outer)  # row after row of out: each of its cache lines written once
        return out
    offset, index = 0, [slice(None)] * len(shape)
    for x in arrays:
        index[axis] = slice(offset, offset + x.shape[axis])
        dst = out[tuple(index)]
        if x.size >= MIN_SIZE:
            _k.copy(x, dst)
        else:
            dst[...] = x
        offset += x.shape[axis]
    return out


def _half_kind(dtype):
    """True for bfloat16, False for float16 (where the kernel converts it), None otherwise."""
    return True if dtype.name == "bfloat16" else False if dtype == np.float16 and _k.float16_casts else None


def cast(x, dtype):
    """x converted between float32 and float64, or between float32 and float16/bfloat16."""
    dtype = np.dtype(dtype)
    if type(x) is not _ND or x.size < MIN_SIZE or not x.flags.c_contiguous or dtype == x.dtype:
        return None
    if x.dtype in (_F32, _F64) and dtype in (_F32, _F64):
        out = np.empty(x.shape, dtype)
        _k.cast(x, out)
        return out
    if x.dtype == _F32 and _half_kind(dtype) is not None:
        out = np.empty(x.shape, dtype)
        _k.cast_half(x, out.view(np.uint16), _half_kind(dtype))
        return out
    if dtype == _F32 and _half_kind(x.dtype) is not None:
        out = np.empty(x.shape, dtype)
        _k.cast_half(x.view(np.uint16), out, _half_kind(x.dtype))
        return out
    return None


def copy(x, out=None):
    """A C-contiguous copy of x (any strides, any dtype), or x copied into `out` (same shape and dtype, any
    strides, not overlapping x)."""
    if type(x) is not _ND or x.size < MIN_SIZE or x.dtype.hasobject:
        return None
    if out is None:
        out = np.empty(x.shape, x.dtype)
    elif type(out) is not _ND or out.shape != x.shape or out.dtype != x.dtype or not out.flags.writeable:
        return None
    _k.copy(x, out)
    return out


def fill(x, value) -> bool:
    """x[...] = value in place; False if not taken."""
    if not _big(x) or type(value) not in (float, int, bool):
        return False
    _k.fill(x, float(value))
    return True


def _blocks(x, axes, keepdims: bool):
    """(A, R, C, result shape) when `axes` (None: all) are one block of consecutive dimensions of a big array:
    x seen as (A, R, C), reduced over R."""
    if not _big(x):
        return None
    nd = x.ndim
    if axes is None:
        axes = tuple(range(nd))
    axes = sorted(a % nd for a in axes)
    if not axes or axes != list(range(axes[0], axes[-1] + 1)):
        return None
    shape = x.shape
    A = math.prod(shape[:axes[0]])
    R = math.prod(shape[axes[0]:axes[-1] + 1])
    C = math.prod(shape[axes[-1] + 1:])
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape)) if keepdims else \
        tuple(s for i, s in enumerate(shape) if i not in axes)
    return A, R, C, kept


def sum(x, axes, keepdims: bool, norm: bool = False, mean: bool = False,  # noqa: A001 - reduction.sum's
        squares: bool = False):
    """x summed over `axes` (None: all), a block of consecutive dimensions, or with `norm` its 2-norm over them,
    with `squares` its squares summed, with `mean` its mean (of squares); float32 accumulates in float64."""
    b = _blocks(x, axes, keepdims)
    if b is None:
        return None
    A, R, C, kept = b
    out = np.empty(kept, x.dtype)
    _k.sum(x, A, R, C, out, norm, 1.0 / R if mean and R else 1.0, squares)
    return out


def extremum(x, axes, keepdims: bool, is_max: bool):
    """amax (is_max) or amin of x over `axes` (None: all), a block of consecutive dimensions; NaN propagates."""
    b = _blocks(x, axes, keepdims)
    if b is None or b[1] == 0:
        return None
    A, R, C, kept = b
    out = np.empty(kept, x.dtype)
    _k.extremum(x, A, R, C, out, is_max)
    return out


def logsumexp_last(x):
    """logsumexp of x over its last dimension (keepdim), or None where the kernel does not apply."""
    if not _big(x) or x.shape[-1] == 0:
        return None
    out = np.empty(x.shape[:-1] + (1,), x.dtype)
    _k.logsumexp(x, out)
    return out


def activation(op: int, x, a: float = 0.0, b: float = 0.0, c: float = 0.0):
    """f(x) for LEAKY_RELU (a slope), ELU (a alpha, b scale, c input scale), SOFTPLUS (a beta, b threshold),
    LOG_SIGMOID, HARDSWISH, HARDSIGMOID, MISH."""
    if not _big(x):
        return None
    out = np.empty(x.shape, x.dtype)
    _k.activation(op, x, out, a, b, c)
    return out


def activation_backward(op: int, g, x, a: float = 0.0, b: float = 0.0, c: float = 0.0):
    """The input gradient of activation(op, x, a, b, c) for the incoming gradient g."""
    if not _big(x) or type(g) is not _ND or g.dtype != x.dtype or g.shape != x.shape or not g.flags.c_contiguous:
        return None
    out = np.empty(x.shape, x.dtype)
    _k.activation_backward(op, g, x, out, a, b, c)
    return out


def pointwise_loss(op: int, x, t, a: float = 0.0):
    """The elementwise loss of x against a target of its shape and dtype: BCE_WITH_LOGITS, SMOOTH_L1 (a beta),
    HUBER (a delta)."""
    if not _big(x) or type(t) is not _ND or t.dtype != x.dtype or t.shape != x.shape or not t.flags.c_contiguous:
        return None
    out = np.empty(x.shape, x.dtype)
    _k.pointwise_loss(op, x, t, out, a)
    return out


def pointwise_loss_backward(op: int, x, t, a: float, scale: float):
    """scale times the gradient of pointwise_loss(op, x, t, a) with respect to x (the caller checked x and t)."""
    out = np.empty(x.shape, x.dtype)
    _k.pointwise_loss_backward(op, x, t, out, a, scale)
    return out


def cumsum(x, axis: int, reverse: bool = False):
    """Running sums of x along axis (from its end when reverse), summed in float64 as ATen's CPU cumsum does."""
    if not _big(x):
        return None
    out = np.empty(x.shape, x.dtype)
    _k.cumsum(x, out, math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:]), reverse)
    return out


def _index_ok(index, like) -> bool:
    return type(index) is _ND and index.dtype == np.int64 and index.ndim == like.ndim and index.ndim > 0


def gather(x, axis: int, index):
    """x.gather(axis, index) for 4- and 8-byte elements; RuntimeError for an index out of range."""
    if type(x) is not _ND or index.size < MIN_SIZE or x.dtype.itemsize not in (4, 8) or x.dtype.hasobject or \
            not _index_ok(index, x):
        return None
    out = np.empty(index.shape, x.dtype)
    try:
        _k.gather(x, np.ascontiguousarray(index), out, axis)
    except IndexError as e:  # PyTorch's gather raises RuntimeError, with the same words
        raise RuntimeError(str(e)) from None
    return out


def scatter_add_(out, axis: int, index, src) -> bool:
    """out.scatter_add_(axis, index, src) in place for a C-contiguous float out and src of index's shape;
    False when the kernel does not take them, RuntimeError for an index out of range (out unchanged)."""
    if type(out) is not _ND or type(src) is not _ND or index.size < MIN_SIZE or out.dtype not in (_F32, _F64) or \
            src.dtype != out.dtype or src.shape != index.shape or not out.flags.c_contiguous or \
            not _index_ok(index, out):
        return False
    try:
        _k.scatter_add(out, np.ascontiguousarray(index), np.ascontiguousarray(src), axis)
    except IndexError as e:  # PyTorch raises RuntimeError, with the same words
        raise RuntimeError(str(e)) from None
    return True


def clamp(x, lo, hi):
    """x clamped to [lo, hi] for Python-number bounds (None: absent); NaN stays NaN."""
    if not _big(x) or any(v is not None and (type(v) not in (float, int) or v != v) for v in (lo, hi)):
        return None
    out = np.empty(x.shape, x.dtype)
    _k.clamp(x, -math.inf if lo is None else float(lo), math.inf if hi is None else float(hi), out)
    return out
