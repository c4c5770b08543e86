"""Pooling: max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d, adaptive_max_pool1d/2d/3d,
max_unpool1d/2d/3d, lp_pool1d/2d/3d and fractional_max_pool2d, each forward beside its derivative. Windows are
strided views of the padded input, reduced one kernel position at a time (kh*kw vectorised passes, no loop over
the batch or the output). 1d pools run as 2d pools of height 1.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _C, _autocast, _threads
from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, needs_grad, record
from .conv import _pair, _xp


def _pool_out(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:  # the last window must start inside the input or the left padding
        out -= 1
    return out


def _as4d(a, nd: int):
    """(N, C, H, W) from 1d/2d pooling input, batched or not; returns the array and how to undo it."""
    batched = a.ndim == nd + 2
    if not batched:
        a = a[None]
    if nd == 1:
        a = a[:, :, None, :]
    return a, batched


def _from4d(a, nd: int, batched: bool):
    if nd == 1:
        a = a[:, :, 0, :]
    return a if batched else a[0]


def _ctrunc_half(v: int) -> int:
    """v / 2 rounded toward zero, as C++'s integer division (PyTorch's pad limit for a negative kernel)."""
    return -((-v) // 2) if v < 0 else v // 2


# How each op words a kernel_size/stride/padding/dilation argument of the wrong length.
def _length_message(name: str, what: str, n: int) -> str:
    if name == "avg_pool1d":
        return f"avg_pool1d() argument '{what}' should contain one int (got {n})"
    if name == "max_pool1d":
        lead = {"stride": "None, an int, list of ints, or", "padding": "an int, list of ints, or"}.get(
            what, "an int, list of ints or")
        return f"max_pool1d() {what} must be {lead} tuple of ints of size 1 but got size {n}"
    lead = {"stride": "either be omitted, a single int, or", "dilation": "be either a single int, or"}.get(
        what, "either be a single int, or")
    return f"{name}: {what} must {lead} a tuple of two ints"


def _size_arg(name: str, nd: int, v, what: str, default=None) -> tuple:
    """One of kernel_size/stride/padding/dilation as an nd-tuple (an empty stride means the default)."""
    if isinstance(v, (tuple, list)):
        if len(v) == 0 and default is not None:
            return default
        if len(v) == 1:
            return (int(v[0]),) * nd
        if len(v) != nd:
            raise RuntimeError(_length_message(name, what, len(v)))
        return tuple(int(e) for e in v)
    return default if v is None else (int(v),) * nd


def _unbatched_rank_message(name: str, ndim: int, nd: int) -> str:
    return (f"Expected {nd + 1} to {nd + 2} dimensions, but got {ndim}-dimensional tensor for argument #1 'self' "
            f"(while checking arguments for {name})")


def _pool_args(name: str, nd: int, input: Tensor, kernel_size, stride, padding, dilation, with_indices: bool):
    """kernel, stride, padding and dilation as 2-tuples (a 1d pool is a 2d pool of height 1), after PyTorch's
    checks of them and of the input's rank, in its order and words. max_pool1d without indices has a kernel of
    its own, with its own wording."""
    shape = list(input._data.shape)
    if nd == 1 and (name == "avg_pool1d" or with_indices) and len(shape) not in (2, 3):
        raise RuntimeError(_unbatched_rank_message(name, len(shape), 1))
    k = _size_arg(name, nd, kernel_size, "kernel_size")
    s = _size_arg(name, nd, stride, "stride", k)
    p = _size_arg(name, nd, padding, "padding")
    d = _size_arg(name, nd, dilation, "dilation")
    if name == "max_pool1d" and not with_indices:
        if len(shape) not in (2, 3) or 0 in shape[-2:]:
            raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size "
                               f"for input, but got:{shape}")
        for what, v, ok in (("kernel_size", k[0], k[0] > 0), ("stride", s[0], s[0] > 0),
                            ("padding", p[0], p[0] >= 0), ("dilation", d[0], d[0] > 0)):
            if not ok:
                raise RuntimeError(f"max_pool1d() {what} must be "
                                   f"{'non-negative' if what == 'padding' else 'greater than zero'}, but got {v}")
            if what == "padding" and p[0] > k[0] // 2:
                raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got "
                                   f"padding={p[0]} and kernel_size={k[0]}")
    if nd == 1:
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
        shape = shape[:-1] + [1] + shape[-1:]
    if nd == 2 and len(shape) not in (3, 4):
        if name == "max_pool2d":
            raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
        if len(shape) < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, "
                             f"{len(shape) - 1}], but got -3)")
    for ss, pp, kk, dd in zip(s, p, k, d):
        if ss == 0:
            raise RuntimeError("stride should not be zero")
        if pp < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pp}")
        if pp > _ctrunc_half((kk - 1) * dd + 1):
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} kW: {k[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} dilationW: {d[1]}")
    if len(shape) not in (3, 4) or 0 in shape[-3:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                           f"got:{shape}")
    return k, s, p, d


def _output_hw(name: str, nd: int, with_indices: bool, C: int, H: int, W: int, k, s, p, d, ceil_mode: bool):
    """The pooled height and width, or PyTorch's error when one is not positive."""
    oh = _pool_out(H, k[0], s[0], p[0], d[0], ceil_mode)
    ow = _pool_out(W, k[1], s[1], p[1], d[1], ceil_mode)
    if name == "max_pool1d" and not with_indices and ow <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {ow}")
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). "
                           f"Output size is too small")
    return oh, ow


def _check_float_or_int(name: str, x: Tensor) -> None:
    """Pooling kernels take floating and integer input but not bool (PyTorch's NotImplementedError)."""
    if x._data.dtype.kind == "b":
        raise NotImplementedError(f'"{name}" not implemented for \'Bool\'')


def _windows(xpad, k, s, d, oh: int, ow: int):
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            yield i, j, (slice(None), slice(None), slice(r0, r0 + s[0] * (oh - 1) + 1, s[0]),
                         slice(c0, c0 + s[1] * (ow - 1) + 1, s[1]))


def _padded(x4, p, oh, ow, k, s, d, fill):
    """x4 padded by p on the top/left and enough on the bottom/right for every (ceil-mode) window."""
    xp = _xp(x4)
    N, C, H, W = x4.shape
    Hp = max(H + 2 * p[0], (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1)
    Wp = max(W + 2 * p[1], (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1)
    if (Hp, Wp) == (H, W):
        return x4
    out = xp.full((N, C, Hp, Wp), fill, x4.dtype)
    out[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x4
    return out


# ------------------------------------------------------------------ max pooling


def _in_bounds(n: int, o: int, s: int, p: int, offset: int):
    """Per output position along one dim: whether the kernel tap `offset` past its window start is inside the
    input (not in the padding)."""
    q = np.arange(o) * s - p + offset
    return (q >= 0) & (q < n)


def _max_pool(name: str, nd: int, input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool,
              return_indices: bool):
    k, s, p, d = _pool_args(name, nd, input, kernel_size, stride, padding, dilation, return_indices)
    _check_float_or_int("max_pool1d_impl" if nd == 1 and not return_indices else "max_pool2d", input)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    oh, ow = _output_hw(name, nd, return_indices, C, H, W, k, s, p, d, ceil_mode)
    if xp is np and x4.dtype in (np.float32, np.float64) and H * W < 2 ** 31:
        return _max_pool_cpu(nd, input, x4, batched, k, s, p, d, oh, ow, return_indices)
    fill = -np.inf if x4.dtype.kind == "f" or x4.dtype.kind == "V" else np.iinfo(x4.dtype).min
    xpad = _padded(x4, p, oh, ow, k, s, d, fill)
    # NaN propagates (PyTorch picks a NaN as the max); checked once so NaN-free input skips it per window.
    has_nan = x4.dtype.kind == "f" and bool(xp.isnan(x4).any())
    # The winning kernel position per output, in the smallest integer type (flat indices only when asked for).
    arg = xp.zeros((N, C, oh, ow), np.int8 if k[0] * k[1] < 128 else np.int32)
    best = xp.empty((N, C, oh, ow), x4.dtype)
    wins = list(_windows(xpad, k, s, d, oh, ow))

    def window_views(xs):
        """Each kernel position's input view: with a stride, a unit-stride slice of one stride phase of xs
        (split once; elementwise passes over strided views cost about twice as much)."""
        if s == (1, 1):
            return [(i, j, xs[sl]) for i, j, sl in wins]
        phases = {}
        views = []
        for i, j, _ in wins:
            r, c = i * d[0], j * d[1]
            key = (r % s[0], c % s[1])
            if key not in phases:
                phases[key] = xp.ascontiguousarray(xs[:, :, key[0]::s[0], key[1]::s[1]])
            views.append((i, j, phases[key][:, :, r // s[0]:r // s[0] + oh, c // s[1]:c // s[1] + ow]))
        return views

    def in_bounds(i: int, j: int):
        return xp.asarray(_in_bounds(H, oh, s[0], p[0], i * d[0])[:, None]
                          & _in_bounds(W, ow, s[1], p[1], j * d[1])[None, :])
    views = window_views(xpad)
    best[...] = views[0][2]
    # With padding, a padded tap must never win, not even a tie with an all -inf (or integer minimum) window:
    # PyTorch's index is always inside the input. `seen` marks outputs that have read an input position.
    padded = xpad is not x4
    seen = in_bounds(0, 0) if padded else None
    for i, j, v in views[1:]:
        take = v > best  # ties keep the first position
        if has_nan:
            take |= xp.isnan(v)
        if padded:
            ok = in_bounds(i, j)
            take |= ~seen
            take &= ok
            seen = seen | ok
        xp.maximum(best, v, out=best)  # propagates NaN as PyTorch does
        xp.copyto(arg, i * k[1] + j, where=take)

    def flat_indices():
        """Window offsets -> flat indices into the unpadded H*W plane (PyTorch's `indices`)."""
        rows = xp.arange(oh).reshape(oh, 1) * s[0] - p[0]
        cols = xp.arange(ow).reshape(1, ow) * s[1] - p[1]
        a = arg.astype(np.int64)
        return (rows + (a // k[1]) * d[0]) * W + cols + (a % k[1]) * d[1]
    out = _wrap(_from4d(best, nd, batched))
    if needs_grad(input):
        shape4 = x4.shape
        Hp, Wp = xpad.shape[2], xpad.shape[3]

        def max_pool_backward(g):
            if _grad_enabled():  # create_graph: a differentiable scatter of g
                return _scatter_graph(g, flat_indices(), shape4, input)
            # Each kernel position adds the gradients of the outputs it won into its strided window.
            g4 = _as4d(g._data, nd)[0]
            gx = xp.zeros((N, C, Hp, Wp), g4.dtype)
            for i, j, sl in wins:
                gx[sl] += xp.where(arg == i * k[1] + j, g4, 0)
            gx = xp.ascontiguousarray(gx[:, :, p[0]:p[0] + H, p[1]:p[1] + W])
            return _wrap(_from4d(gx, nd, batched))
        record(f"MaxPool{nd}DWithIndicesBackward0", max_pool_backward, out, (input,))
    if return_indices:
        return out, _wrap(_from4d(flat_indices(), nd, batched))
    return out


def _max_pool_cpu(nd: int, input: Tensor, x4, batched: bool, k, s, p, d, oh: int, ow: int, return_indices: bool):
    """max pooling of float32/float64 NumPy input by the C++ kernel (csrc/kernels/max_pool.cpp): one pass per
    plane, the winning flat position kept as int32 for the backward's scatter."""
    N, C, H, W = x4.shape
    best = np.empty((N, C, oh, ow), x4.dtype)
    idx = np.empty((N, C, oh, ow), np.int32)
    _C._cpu.max_pool2d(np.ascontiguousarray(x4).reshape(N * C, H, W), best.reshape(N * C, oh, ow),
                       idx.reshape(N * C, oh, ow), list(k), list(s), list(p), list(d), _threads.count)
    out = _wrap(_from4d(best, nd, batched))
    if needs_grad(input):
        def max_pool_backward(g):
            if _grad_enabled():  # create_graph: a differentiable scatter of g
                return _scatter_graph(g, idx.astype(np.int64), x4.shape, input)
            g4 = np.ascontiguousarray(_as4d(g._data, nd)[0]).astype(x4.dtype, copy=False)
            gx = np.empty((N, C, H, W), x4.dtype)
            _C._cpu.max_pool2d_backward(g4.reshape(N * C, oh, ow), idx.reshape(N * C, oh, ow),
                                        gx.reshape(N * C, H, W), _threads.count)
            return _wrap(_from4d(gx, nd, batched))
        record(f"MaxPool{nd}DWithIndicesBackward0", max_pool_backward, out, (input,))
    if return_indices:
        return out, _wrap(_from4d(idx.astype(np.int64), nd, batched))
    return out


def _scatter_flat(g4, idx, shape4):
    """Sum g4 (N, C, oh, ow) into a zero (N, C, H, W) at the flat H*W positions idx (windows may overlap)."""
    xp = _xp(g4)
    N, C, H, W = shape4
    rows = (xp.arange(N * C, dtype=np.int64) * (H * W)).reshape(N, C, 1, 1)
    flat = (idx + rows).reshape(-1)
    r = xp.bincount(flat, weights=g4.reshape(-1).astype(np.float64 if g4.dtype == np.float64 else np.float32),
                    minlength=N * C * H * W)
    return r.astype(g4.dtype, copy=False).reshape(N, C, H, W)


def _scatter_graph(g: Tensor, idx, shape4, like: Tensor) -> Tensor:
    """_scatter_flat in differentiable ops (index_add), for double backward."""
    from .._creation import zeros
    from .indexing import index_add
    xp = _xp(idx)
    N, C, H, W = shape4
    rows = (xp.arange(N * C, dtype=np.int64) * (H * W)).reshape(N, C, 1, 1)
    flat = _wrap((idx + rows).reshape(-1))
    z = zeros(N * C * H * W, dtype=g.dtype, device=g.device)
    return index_add(z, 0, flat, g.reshape(-1)).reshape(like.shape)


def _dtype_of(np_dtype):
    from .._dtype import from_numpy_dtype
    return from_numpy_dtype(np.dtype(np_dtype))


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over sliding windows of the last dim of (N, C, L) input."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over sliding windows of the last two dims of (N, C, H, W) input."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """max_pool1d returning (output, indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """max_pool2d returning (output, indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# ------------------------------------------------------------------ average pooling


def _avg_divisor(n: int, o: int, k: int, s: int, p: int, count_include_pad: bool):
    """Per output position along one dim: the window's size as PyTorch counts it."""
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    size = end - start
    if not count_include_pad:
        size = np.minimum(end, n) - np.maximum(start, 0)
    return size


def _avg_pool(name: str, nd: int, input: Tensor, kernel_size, stride, padding, ceil_mode: bool,
              count_include_pad: bool, divisor_override):
    k, s, p, d = _pool_args(name, nd, input, kernel_size, stride, padding, 1, True)
    _check_float_or_int("avg_pool2d", input)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    oh, ow = _output_hw(name, nd, True, C, H, W, k, s, p, d, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if divisor_override is not None:
        div = np.full((oh, ow), float(divisor_override))
    else:
        dh = _avg_divisor(H, oh, k[0], s[0], p[0], count_include_pad)
        dw = _avg_divisor(W, ow, k[1], s[1], p[1], count_include_pad)
        div = np.outer(dh, dw).astype(np.float64)
    xpad = _padded(x4, p, oh, ow, k, s, d, 0)
    if x4.dtype.kind not in "fV":  # integers: an int64 sum divided as C++ does, truncating toward zero
        acc = None
        for _, _, sl in _windows(xpad, k, s, d, oh, ow):
            acc = xpad[sl].astype(np.int64) if acc is None else acc + xpad[sl]
        q = xp.asarray(div.astype(np.int64))
        y = xp.where(acc < 0, -(-acc // q), acc // q).astype(x4.dtype)
        return _wrap(_from4d(y, nd, batched))
    inv = xp.asarray((1.0 / div).astype(x4.dtype if x4.dtype.itemsize >= 4 else np.float32))
    acc = None
    for _, _, sl in _windows(xpad, k, s, d, oh, ow):
        if acc is None:
            acc = xpad[sl].astype(inv.dtype, copy=True)
        else:
            acc += xpad[sl]
    acc *= inv
    out = _wrap(_from4d(acc.astype(x4.dtype, copy=False), nd, batched))
    if needs_grad(input):
        Hp, Wp = xpad.shape[2], xpad.shape[3]

        def avg_pool_backward(g):
            if _grad_enabled():
                # The adjoint of window sums is fold (col2im) of the scaled gradient repeated per kernel position.
                from .fold import fold
                gs = (g.reshape(N, C, oh, ow) * _wrap(inv)).reshape(N * C, 1, oh * ow).expand(N * C, k[0] * k[1],
                                                                                             oh * ow)
                full = fold(gs, (Hp, Wp), k, 1, 0, s)
                return full[:, 0, p[0]:p[0] + H, p[1]:p[1] + W].reshape(input.shape).contiguous()
            g4 = _as4d(g._data, nd)[0] * inv
            gx = xp.zeros((N, C, Hp, Wp), g4.dtype)
            for _, _, sl in _windows(gx, k, s, d, oh, ow):
                gx[sl] += g4
            gx = xp.ascontiguousarray(gx[:, :, p[0]:p[0] + H, p[1]:p[1] + W]).astype(x4.dtype, copy=False)
            return _wrap(_from4d(gx, nd, batched))
        record(f"AvgPool{nd}DBackward0", avg_pool_backward, out, (input,))
    return out


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over sliding windows of the last dim of (N, C, L) input."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows of the last two dims of (N, C, H, W) input."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ------------------------------------------------------------------ adaptive pooling


def _adaptive_bounds(n: int, o: int):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)  # floor(i*n/o), ceil((i+1)*n/o)


def _adaptive_size(name: str, output_size, shape, nd: int) -> tuple:
    """output_size as nd ints (None keeps that input size), checked with PyTorch's words; a 1d pool's as
    (1, L), the 2d pool it runs as."""
    shape = list(shape)
    if isinstance(output_size, (tuple, list)):
        os_ = list(output_size)
        if nd == 1 and len(os_) != 1:
            raise RuntimeError(f"{name}() argument 'output_size' should contain one int (got {len(os_)})")
        if len(os_) >= len(shape):  # F's default-filling of None entries runs first
            raise ValueError(f"Input dimension should be at least {len(os_) + 1}")
        os_ = [shape[len(shape) - len(os_) + i] if v is None else v for i, v in enumerate(os_)]
        if len(os_) == 1:
            os_ = os_ * nd
        if len(os_) != nd:
            raise RuntimeError(f"{name}(): internal error: output_size.size() must be {nd}" if "max" in name else
                               f"{name}: output_size must be {nd}")
    else:
        os_ = [output_size] * nd
    os_ = [shape[len(shape) - nd + i] if v is None else int(v) for i, v in enumerate(os_)]
    if nd == 1:
        os_ = [1] + os_
    if any(v < 0 for v in os_):
        if "max" in name:
            bad = next(v for v in os_ if v < 0)
            raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {shape[:-nd] + os_}")
        listed = ", ".join(map(str, os_)) if nd < 3 else f"{os_[0]}, {os_[1]},{os_[2]}"
        raise RuntimeError(f"{name if nd == 3 else 'adaptive_avg_pool2d'}: elements of output_size must be greater "
                           f"than or equal to 0 but received {{{listed}}}")
    return tuple(os_)


def _check_adaptive(name: str, nd: int, input: Tensor) -> None:
    """adaptive_{avg,max}_pool{1,2}d's checks of the input's rank, sizes and dtype (PyTorch's order and words)."""
    shape = list(input._data.shape)
    if len(shape) not in (nd + 1, nd + 2):
        if nd == 1:
            raise RuntimeError(_unbatched_rank_message(name, len(shape), 1))
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got{':' if 'max' in name else ''} {shape}")


def _check_adaptive_sizes(name: str, nd: int, input: Tensor) -> None:
    """Empty dims that adaptive pooling refuses: the spatial ones for an average (checked as the 2d pool a 1d
    one runs as), every non-batch one of a batched input for a max."""
    shape = list(input._data.shape)
    if "avg" in name:
        name, shape = "adaptive_avg_pool2d", (shape[:-1] + [1] + shape[-1:] if nd == 1 else shape)
        first = len(shape) - 2
    else:
        first = 1
    for i in range(first, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {shape} with dimension {i} being empty")
    if input._data.dtype.kind not in "fV":
        from ._common import _short
        kernel = "adaptive_avg_pool2d" if "avg" in name else "adaptive_max_pool2d"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_short(input.dtype)}\'')


def _avg_matrix(n: int, o: int, dtype):
    """(o, n): row i averages input positions [floor(i*n/o), ceil((i+1)*n/o))."""
    lo, hi = _adaptive_bounds(n, o)
    m = np.zeros((o, n), dtype)
    for i in range(o):
        m[i, lo[i]:hi[i]] = 1.0 / (hi[i] - lo[i])
    return m


def _adaptive_avg(name: str, nd: int, input: Tensor, output_size) -> Tensor:
    _check_adaptive(name, nd, input)
    oh, ow = _adaptive_size(name, output_size, input._data.shape, nd)
    _check_adaptive_sizes(name, nd, input)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    cd = x4.dtype if x4.dtype.itemsize >= 4 else np.float32
    # Adaptive average pooling is separable: out = Ph @ x @ Pw.T with averaging matrices Ph, Pw.
    ph = xp.asarray(_avg_matrix(H, oh, cd))
    pw = xp.asarray(_avg_matrix(W, ow, cd))
    xc = x4.astype(cd, copy=False)
    if oh == 1 and ow == 1:  # global average pooling: a row mean of (N*C, H*W)
        y = xc.reshape(N * C, H * W).mean(axis=1).reshape(N, C, 1, 1)
    else:
        y = xp.matmul(xp.matmul(ph, xc), pw.T)
    out = _wrap(_from4d(y.astype(x4.dtype, copy=False), nd, batched))
    if needs_grad(input):
        def adaptive_avg_backward(g):
            if _grad_enabled():
                gt = g.reshape(N, C, oh, ow)
                return (_wrap(ph.T.copy()) @ gt.to(_dtype_of(cd)) @ _wrap(pw)).to(input.dtype).reshape(input.shape)
            g4 = _as4d(g._data, nd)[0].astype(cd, copy=False)
            if oh == 1 and ow == 1:
                gx = xp.empty((N, C, H, W), cd)
                gx[...] = g4 * (1.0 / (H * W))
            else:
                gx = xp.matmul(xp.matmul(ph.T, g4), pw)
            return _wrap(_from4d(gx.astype(x4.dtype, copy=False), nd, batched))
        record(f"AdaptiveAvgPool{nd}DBackward0", adaptive_avg_backward, out, (input,))
    return out


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, L) input to output_size positions."""
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, H, W) input to output_size (int, pair; None keeps that dim)."""
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def _adaptive_max(name: str, nd: int, input: Tensor, output_size, return_indices: bool):
    _check_adaptive(name, nd, input)
    oh, ow = _adaptive_size(name, output_size, input._data.shape, nd)
    _check_adaptive_sizes(name, nd, input)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    # Windows padded to the largest window by repeating their last position (harmless for a max).
    lh, hh = _adaptive_bounds(H, oh)
    lw, hw = _adaptive_bounds(W, ow)
    kh, kw = int((hh - lh).max(initial=1)), int((hw - lw).max(initial=1))
    ih = np.minimum(lh[:, None] + np.arange(kh)[None], hh[:, None] - 1)  # (oh, kh)
    iw = np.minimum(lw[:, None] + np.arange(kw)[None], hw[:, None] - 1)  # (ow, kw)
    flat_idx = (ih[:, None, :, None] * W + iw[None, :, None, :]).reshape(oh, ow, kh * kw)
    fi = xp.asarray(flat_idx)
    win = x4.reshape(N, C, H * W)[:, :, fi]  # (N, C, oh, ow, kh*kw)
    if x4.dtype.kind == "f":
        nanpos = xp.isnan(win)
        a = xp.where(nanpos.any(-1), nanpos.argmax(-1), win.argmax(-1))
    else:
        a = win.argmax(-1)
    best = xp.take_along_axis(win, a[..., None], -1)[..., 0]
    idx = fi[xp.arange(oh)[:, None], xp.arange(ow)[None, :], a]
    out = _wrap(_from4d(best, nd, batched))
    indices = _wrap(_from4d(idx, nd, batched))
    if needs_grad(input):
        shape4 = x4.shape

        def adaptive_max_backward(g):
            if _grad_enabled():
                return _scatter_graph(g, idx, shape4, input)
            return _wrap(_from4d(_scatter_flat(_as4d(g._data, nd)[0], idx, shape4), nd, batched))
        record(f"AdaptiveMaxPool{nd}DBackward0", adaptive_max_backward, out, (input,))
    return (out, indices) if return_indices else out


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, L) input to output_size positions."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, H, W) input to output_size (int, pair; None keeps that dim)."""
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool1d returning (output, indices)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool2d returning (output, indices)."""
    return adaptive_max_pool2d(input, output_size, True)


# ------------------------------------------------------------------ 3d pooling (NCDHW)


def _as5d(a):
    """(N, C, D, H, W) from batched or unbatched 3d pooling input, and whether it was batched."""
    batched = a.ndim == 5
    return (a if batched else a[None]), batched


def _check_3d_input(x: Tensor, who: str) -> None:
    """max_pool3d/avg_pool3d's input checks: 4D or 5D, every non-batch dim non-empty (who names the kernel)."""
    shape = x._data.shape
    if len(shape) not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    first = len(shape) - 4
    for i in range(first, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{who}: Expected input's non-batch dimensions to have positive length, but input "
                               f"has a shape of {list(shape)} and non-batch dimension {i - first} has length zero!")


def _triple(name: str, v, what: str, default=None) -> tuple:
    if v is None or (isinstance(v, (tuple, list)) and len(v) == 0 and default is not None):
        return default
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise RuntimeError(f"{name}: {what}")
        return tuple(int(e) for e in v)
    return (int(v),) * 3


def _pool3d_args(name: str, kernel_size, stride, padding, dilation):
    """kernel, stride, padding and dilation triples with PyTorch's checks (max_pool3d/avg_pool3d wording)."""
    either = "either " if name == "max_pool3d" else ""
    k = _triple(name, kernel_size, f"kernel_size must {either}be a single int, or a tuple of three ints")
    s = _triple(name, stride, f"stride must {either}be omitted, a single int, or a tuple of three ints", k)
    p = _triple(name, padding, f"padding must {either}be a single int, or a tuple of three ints")
    d = _triple(name, dilation, "dilation must be either a single int, or a tuple of three ints")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pp}")
        if pp > ((kk - 1) * dd + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if any(v < 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} dW: {s[2]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    return k, s, p, d


def _pool3d_out(x5, k, s, p, d, ceil_mode: bool) -> tuple:
    C, S = x5.shape[1], x5.shape[2:]
    o = tuple(_pool_out(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(S, k, s, p, d))
    if any(v <= 0 for v in o):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (C,) + S))}). Calculated output size: "
                           f"({'x'.join(map(str, (C,) + o))}). Output size is too small")
    return o


def _padded3d(x5, p, o, k, s, d, fill):
    """x5 padded by p before each spatial dim and after it by enough for every (ceil-mode) window."""
    S = x5.shape[2:]
    P = tuple(max(n + 2 * pp, (oo - 1) * ss + dd * (kk - 1) + 1) for n, pp, oo, ss, dd, kk in zip(S, p, o, s, d, k))
    if P == S:
        return x5
    out = _xp(x5).full(x5.shape[:2] + P, fill, x5.dtype)
    out[(slice(None), slice(None)) + tuple(slice(pp, pp + n) for pp, n in zip(p, S))] = x5
    return out


def _windows3d(k, s, d, o):
    """Per kernel position (in C order): the index of the input positions it covers for every output."""
    for pos in np.ndindex(*k):
        yield pos, (slice(None), slice(None)) + tuple(slice(i * dd, i * dd + ss * (oo - 1) + 1, ss)
                                                      for i, dd, ss, oo in zip(pos, d, s, o))


def _scatter_nd(g: Tensor, idx, x5_shape, input: Tensor, batched: bool):
    """The gradient of a max-type pool: g summed into zeros of the input's shape at the flat spatial
    positions idx (N, C, *o); differentiable when building a graph."""
    N, C = x5_shape[:2]
    shape4 = (N, C, math.prod(x5_shape[2:]), 1)
    q = math.prod(idx.shape[2:])  # outputs per plane (spelt out: -1 is ambiguous for empty tensors)
    idx4 = idx.reshape(N, C, q, 1)
    if _grad_enabled():
        return _scatter_graph(g, idx4, shape4, input)
    gx = _scatter_flat(g._data.reshape(N, C, q, 1), idx4, shape4).reshape(x5_shape)
    return _wrap(gx if batched else gx[0])


def _max_pool3d(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, return_indices: bool):
    if _autocast.active:
        return _autocast.dispatch("max_pool3d", _max_pool3d, input, kernel_size, stride, padding, dilation,
                                  ceil_mode, return_indices)
    _check_3d_input(input, "max_pool3d_with_indices_out_cpu_template()")
    k, s, p, d = _pool3d_args("max_pool3d", kernel_size, stride, padding, dilation)
    _check_float_or_int("max_pool3d", input)
    x5, batched = _as5d(input._data)
    xp = _xp(x5)
    o = _pool3d_out(x5, k, s, p, d, ceil_mode)
    fill = -np.inf if x5.dtype.kind in "fV" else np.iinfo(x5.dtype).min
    xpad = _padded3d(x5, p, o, k, s, d, fill)
    has_nan = x5.dtype.kind == "f" and bool(xp.isnan(x5).any())
    arg = xp.zeros(x5.shape[:2] + o, np.int8 if math.prod(k) < 128 else np.int32)
    # With padding, a padded tap must never win, not even a tie with an all -inf (or integer minimum) window:
    # PyTorch's index is always inside the input. `seen` marks outputs that have read an input position.
    padded = xpad is not x5

    def in_bounds(pos):
        ok = [_in_bounds(n, oo, ss, pp, i * dd) for n, oo, ss, pp, i, dd in zip(x5.shape[2:], o, s, p, pos, d)]
        return xp.asarray(ok[0][:, None, None] & ok[1][None, :, None] & ok[2][None, None, :])
    best = seen = None
    for t, (pos, win) in enumerate(_windows3d(k, s, d, o)):
        v = xpad[win]
        if best is None:
            best = v.copy()
            seen = in_bounds(pos) if padded else None
            continue
        take = v > best  # ties keep the first position; a NaN wins (and propagates) as in PyTorch
        if has_nan:
            take |= xp.isnan(v)
        if padded:
            ok = in_bounds(pos)
            take |= ~seen
            take &= ok
            seen = seen | ok
        xp.maximum(best, v, out=best)
        xp.copyto(arg, t, where=take)
    # Kernel offsets -> flat indices into the unpadded D*H*W volume (PyTorch's `indices`).
    a = arg.astype(np.int64)
    idx = xp.zeros(a.shape, np.int64)
    for axis, (n, kk, ss, pp, dd, oo) in enumerate(zip(x5.shape[2:], k, s, p, d, o)):
        inner = math.prod(k[axis + 1:])
        start = (xp.arange(oo) * ss - pp).reshape((oo,) + (1,) * (2 - axis))
        idx = idx * n + start + (a // inner % kk) * dd
    out = _wrap(best if batched else best[0])
    if needs_grad(input):
        shape5 = x5.shape

        def max_pool3d_backward(g):
            return _scatter_nd(g, idx, shape5, input, batched)
        record("MaxPool3DWithIndicesBackward0", max_pool3d_backward, out, (input,))
    if return_indices:
        return out, _wrap(idx if batched else idx[0])
    return out


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Max over sliding windows of the last three dims of (N, C, D, H, W) input."""
    return _max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """max_pool3d returning (output, indices)."""
    return _max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows of the last three dims of (N, C, D, H, W) input (integers: truncated)."""
    if _autocast.active:
        return _autocast.dispatch("avg_pool3d", avg_pool3d, input, kernel_size, stride, padding, ceil_mode,
                                  count_include_pad, divisor_override)
    _check_3d_input(input, "avg_pool3d()")
    k, s, p, d = _pool3d_args("avg_pool3d", kernel_size, stride, padding, 1)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x5, batched = _as5d(input._data)
    xp = _xp(x5)
    S = x5.shape[2:]
    if any(n < kk for n, kk in zip(S, k)):
        raise RuntimeError(f"input image (T: {S[0]} H: {S[1]} W: {S[2]}) smaller than kernel size "
                           f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    o = _pool3d_out(x5, k, s, p, d, ceil_mode)
    if divisor_override is not None:
        div = np.full(o, float(divisor_override))
    else:
        dims = [_avg_divisor(n, oo, kk, ss, pp, count_include_pad) for n, oo, kk, ss, pp in zip(S, o, k, s, p)]
        div = np.einsum("i,j,k->ijk", *dims).astype(np.float64)
    integer = x5.dtype.kind not in "fV"
    cd = np.int64 if integer else (x5.dtype if x5.dtype.itemsize >= 4 else np.float32)
    xpad = _padded3d(x5, p, o, k, s, d, 0)
    wins = [win for _, win in _windows3d(k, s, d, o)]
    acc = xpad[wins[0]].astype(cd, copy=True)
    for win in wins[1:]:
        acc += xpad[win]
    if integer:  # C++'s integer division, truncating toward zero
        q = xp.asarray(div.astype(np.int64))
        out = _wrap(xp.where(acc < 0, -(-acc // q), acc // q).astype(x5.dtype, copy=False))
        return out if batched else out[0]
    inv = xp.asarray((1.0 / div).astype(cd))
    acc *= inv
    y = acc.astype(x5.dtype, copy=False)
    out = _wrap(y if batched else y[0])
    if needs_grad(input):
        N, C = x5.shape[:2]
        P = xpad.shape[2:]

        def avg_pool3d_backward(g):
            if _grad_enabled():
                # The adjoint of window sums: the scaled gradient spread over each window, as a transposed conv
                # with a kernel of ones, cropped (or zero-extended) to the input.
                from .._creation import ones
                from .conv import conv_transpose3d
                from .nn import pad
                gs = (g.reshape((N, C) + o) * _wrap(inv)).reshape((N * C, 1) + o)
                full = conv_transpose3d(gs, ones((1, 1) + k, dtype=gs.dtype, device=gs.device), None, s)
                amounts = []
                for pp, n, f in reversed(list(zip(p, S, full.shape[2:]))):
                    amounts += [-pp, pp + n - f]
                return pad(full, amounts).reshape(input.shape)
            g5 = g._data.reshape((N, C) + o) * inv
            gx = xp.zeros((N, C) + P, g5.dtype)
            for win in wins:
                gx[win] += g5
            gx = gx[(slice(None), slice(None)) + tuple(slice(pp, pp + n) for pp, n in zip(p, S))]
            gx = xp.ascontiguousarray(gx).astype(x5.dtype, copy=False)
            return _wrap(gx if batched else gx[0])
        record("AvgPool3DBackward0", avg_pool3d_backward, out, (input,))
    return out


def _check_adaptive3d(name: str, input: Tensor, colon: str) -> None:
    shape = input._data.shape
    if len(shape) not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got{colon} {list(shape)}")
    for i in range(len(shape) - 4, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(shape)} with dimension {i} being empty")
    if input._data.dtype.kind not in "fV":
        from ._common import _short
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_short(input.dtype)}\'')


def _separable(x, mats):
    """Apply one (o, n) matrix to each of the last three dims of x (arrays or Tensors alike)."""
    md, mh, mw = mats
    y = x @ mw.T  # (..., D, H, ow)
    y = mh @ y  # (..., D, oh, ow)
    lead = tuple(y.shape[:-3])
    oh, ow = y.shape[-2], y.shape[-1]
    return (md @ y.reshape(lead + (y.shape[-3], oh * ow))).reshape(lead + (md.shape[0], oh, ow))


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, D, H, W) input to output_size (int, triple; None keeps that dim)."""
    if _autocast.active:
        return _autocast.dispatch("adaptive_avg_pool3d", adaptive_avg_pool3d, input, output_size)
    _check_adaptive3d("adaptive_avg_pool3d", input, "")
    x5, batched = _as5d(input._data)
    xp = _xp(x5)
    o = _adaptive_size("adaptive_avg_pool3d", output_size, input._data.shape, 3)
    cd = x5.dtype if x5.dtype.itemsize >= 4 else np.float32
    # Separable: out = x contracted with an averaging matrix along each spatial dim.
    mats = [xp.asarray(_avg_matrix(n, oo, cd)) for n, oo in zip(x5.shape[2:], o)]
    y = _separable(x5.astype(cd, copy=False), mats).astype(x5.dtype, copy=False)
    out = _wrap(y if batched else y[0])
    if needs_grad(input):
        def adaptive_avg_pool3d_backward(g):
            if _grad_enabled():
                gc = g.to(_dtype_of(cd)) if g._data.dtype != cd else g
                return _separable(gc, [_wrap(xp.ascontiguousarray(m.T)) for m in mats]).to(input.dtype)
            gx = _separable(g._data.astype(cd, copy=False), [m.T for m in mats]).astype(x5.dtype, copy=False)
            return _wrap(gx)
        record("AdaptiveAvgPool3DBackward0", adaptive_avg_pool3d_backward, out, (input,))
    return out


def _adaptive_max3d(input: Tensor, output_size, return_indices: bool):
    if _autocast.active:
        return _autocast.dispatch("adaptive_max_pool3d", _adaptive_max3d, input, output_size, return_indices)
    _check_adaptive3d("adaptive_max_pool3d", input, ":")
    x5, batched = _as5d(input._data)
    xp = _xp(x5)
    o = _adaptive_size("adaptive_max_pool3d", output_size, input._data.shape, 3)
    N, C = x5.shape[:2]
    S = x5.shape[2:]
    # Each window padded to the largest by repeating its last position (harmless for a max): flat D*H*W
    # positions (od, oh, ow, K), the kernel position fastest.
    pos = []
    for n, oo in zip(S, o):
        lo, hi = _adaptive_bounds(n, oo)
        kk = int((hi - lo).max()) if oo else 1
        pos.append(np.minimum(lo[:, None] + np.arange(kk)[None], hi[:, None] - 1))  # (oo, kk)
    pd, ph, pw = pos
    flat = ((pd[:, None, None, :, None, None] * S[1] + ph[None, :, None, None, :, None]) * S[2]
            + pw[None, None, :, None, None, :]).reshape(tuple(o) + (math.prod(q.shape[1] for q in pos),))
    fi = xp.asarray(flat)
    win = x5.reshape(N, C, math.prod(S))[:, :, fi]  # (N, C, od, oh, ow, K)
    if x5.dtype.kind == "f":
        nanpos = xp.isnan(win)
        a = xp.where(nanpos.any(-1), nanpos.argmax(-1), win.argmax(-1))
    else:
        a = win.argmax(-1)
    best = xp.take_along_axis(win, a[..., None], -1)[..., 0]
    idx = xp.take_along_axis(xp.broadcast_to(fi, win.shape), a[..., None], -1)[..., 0]
    out = _wrap(best if batched else best[0])
    if needs_grad(input):
        shape5 = x5.shape

        def adaptive_max_pool3d_backward(g):
            return _scatter_nd(g, idx, shape5, input, batched)
        record("AdaptiveMaxPool3DBackward0", adaptive_max_pool3d_backward, out, (input,))
    return (out, _wrap(idx if batched else idx[0])) if return_indices else out


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, D, H, W) input to output_size (int, triple; None keeps that dim)."""
    return _adaptive_max3d(input, output_size, return_indices)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool3d returning (output, indices)."""
    return _adaptive_max3d(input, output_size, True)


# ------------------------------------------------------------------ max unpooling


def _unpool_output_size(input: Tensor, kernel_size, stride, padding, output_size) -> list:
    """PyTorch's output size of max_unpool: the pooled input's size, or output_size checked against it."""
    n = len(kernel_size)
    in_size = input.shape
    default = [(in_size[-n + i] - 1) * stride[i] + kernel_size[i] - 2 * padding[i] for i in range(n)]
    if output_size is None:
        ret = default
    else:
        output_size = list(output_size)
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                             f"length of '{len(output_size)}'")
        for i in range(n):
            lo, hi = default[i] - stride[i], default[i] + stride[i]
            if not lo < output_size[i] < hi:
                raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must be between {lo} and '
                                 f'{hi})')
        ret = [int(v) for v in output_size]
    for i in range(n):
        if ret[i] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{i}]={ret[i]}")
    return ret


def _max_unpool(nd: int, input: Tensor, indices: Tensor, size: list) -> Tensor:
    """Scatter input into zeros of spatial size `size` at the flat positions `indices` (max_unpool2d/3d)."""
    if _autocast.active:
        return _autocast.dispatch(f"max_unpool{nd}d", _max_unpool, nd, input, indices, size)
    xd, idd = input._data, indices._data
    if idd.dtype != np.int64:
        from ._common import _short
        raise RuntimeError("elements in indices should be type int64" +
                           (f" but got: {_short(indices.dtype)}" if nd == 2 else ""))
    if xd.shape != idd.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(xd.shape)}) but "
                           f"got indices tensor with shape: {list(idd.shape)}")
    if xd.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, but got a tensor "
                           f"with {xd.ndim} dimensions.")
    if xd.dtype.kind not in "fV":
        from ._common import _short
        raise NotImplementedError(f'"max_unpool{nd}d" not implemented for \'{_short(input.dtype)}\'')
    xp = _xp(xd)
    lead = xd.shape[:-nd]
    P = math.prod(size)
    flat = idd.reshape(lead + (-1,))
    bad = (flat < 0) | (flat >= P)
    if bool(bad.any()):
        raise RuntimeError(f"Found an invalid max index: {int(flat.reshape(-1)[int(bad.reshape(-1).argmax())])} "
                           f"(output volumes are of size {'x'.join(map(str, size))})")
    out = xp.zeros(lead + (P,), xd.dtype)
    xp.put_along_axis(out, flat, xd.reshape(lead + (-1,)), axis=-1)
    res = _wrap(out.reshape(lead + tuple(size)))
    if needs_grad(input):
        idx_t = _wrap(flat)

        def max_unpool_backward(g):
            from .indexing import gather
            return gather(g.reshape(lead + (P,)), -1, idx_t).reshape(input.shape)
        record(f"MaxUnpool{nd}DBackward0", max_unpool_backward, res, (input,))
    return res


def _unpool_args(nd: int, kernel_size, stride, padding):
    k = _pair(kernel_size, nd, "kernel_size")
    return k, (k if stride is None else _pair(stride, nd, "stride")), _pair(padding, nd, "padding")


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """A partial inverse of max_pool1d: the maxima put back at their indices, zeros elsewhere."""
    k, s, p = _unpool_args(1, kernel_size, stride, padding)
    size = _unpool_output_size(input, k, s, p, output_size)
    return _max_unpool(2, input.unsqueeze(-1), indices.unsqueeze(-1), size + [1]).squeeze(-1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """A partial inverse of max_pool2d: the maxima put back at their indices, zeros elsewhere."""
    k, s, p = _unpool_args(2, kernel_size, stride, padding)
    return _max_unpool(2, input, indices, _unpool_output_size(input, k, s, p, output_size))


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """A partial inverse of max_pool3d: the maxima put back at their indices, zeros elsewhere."""
    k, s, p = _unpool_args(3, kernel_size, stride, padding)
    return _max_unpool(3, input, indices, _unpool_output_size(input, k, s, p, output_size))


# ------------------------------------------------------------------ fractional max pooling


def _fractional_starts(u, n: int, o: int, k: int):
    """Window starts (..., o) for pseudo-random samples u (...) in [0, 1): PyTorch's interval sequence, computed
    in u's dtype as its kernel does, the last window ending at the input's end."""
    out = np.empty(u.shape + (o,), np.int64)
    if o > 1:
        alpha = u.dtype.type(n - k) / u.dtype.type(o - 1)
        i = np.arange(o - 1, dtype=u.dtype)
        out[..., :-1] = ((i + u[..., None]) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)[..., None]
    if o > 0:
        out[..., -1] = n - k
    return out


def _fractional_max_pool(nd: int, input: Tensor, kernel_size, output_size, output_ratio, return_indices: bool,
                         _random_samples):
    """fractional_max_pool2d/3d: for each (sample, channel) plane, windows of kernel_size placed at the
    pseudo-random increasing starts that _random_samples (N, C, nd) picks, one sample per spatial dim."""
    if _autocast.active:
        return _autocast.dispatch(f"fractional_max_pool{nd}d", _fractional_max_pool, nd, input, kernel_size,
                                  output_size, output_ratio, return_indices, _random_samples)
    name = f"fractional_max_pool{nd}d"
    where = "fractional_max_pool2d()" if nd == 2 else "fractional_max_pool3d_out()"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    xd = input._data
    shape = list(xd.shape)
    if output_size is None:
        if nd == 2 and isinstance(output_ratio, (tuple, list)) and len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
        r = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,)
        r = r * nd if len(r) == 1 else r
        if len(r) != nd:
            raise IndexError("tuple index out of range")
        output_size = [int(shape[i - nd] * r[i]) for i in range(nd)]
    if _random_samples is None:
        if len(shape) < nd + 1:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                             f"but got {-nd - 1})")
        if xd.dtype.kind not in "fV":
            from ._common import _short
            raise NotImplementedError(f'"check_uniform_bounds" not implemented for \'{_short(input.dtype)}\'')
        from .._creation import rand
        _random_samples = rand(1 if len(shape) == nd + 1 else shape[0], shape[-nd - 1], nd, dtype=input.dtype,
                               device=input.device)
    what = "Ints" if nd == 2 else "three Ints"
    for arg_name, v in (("kernel_size", kernel_size), ("output_size", output_size)):
        if isinstance(v, (tuple, list)) and len(v) not in (1, nd):
            raise RuntimeError(f"{name}: {arg_name} must either be a single Int or tuple of {what}")
    k = _size_arg(name, nd, kernel_size, "kernel_size")
    o = _size_arg(name, nd, output_size, "output_size")
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{where}: Expected {nd + 1}D or {nd + 2}D tensor, but got: {shape}")
    for i in range(1, len(shape)):
        if shape[i] == 0:
            raise RuntimeError(f"{where}: Expected input to have non-zero size for non-batch dimensions, but got"
                               f"{shape} with dimension {i} being empty.")
    S = tuple(shape[-nd:])
    for kk, oo, n, dim in zip(k, o, S, ("time", "height", "width")[3 - nd:]):
        # PyTorch's 3d kernel asks for a strictly smaller output than its 2d one does
        if oo + kk - 1 > n or (nd == 3 and oo + kk - 1 == n):
            raise RuntimeError(f"{where}: pool {dim} {kk} too large relative to input {dim} {n}")
    u = _random_samples._data
    if u.dtype != xd.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if u.ndim != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {u.ndim}")
    batched = len(shape) == nd + 2
    N, C = (shape[0] if batched else 1), shape[-nd - 1]
    if u.shape[0] < N:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")  # sic: PyTorch's words
    if u.shape[1] != C:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if u.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {u.shape[2]}.")
    if xd.dtype.kind not in "fV":
        from ._common import _short
        raise NotImplementedError(f'"{name}" not implemented for \'{_short(input.dtype)}\'')
    xp = _xp(xd)
    xs = xd if batched else xd[None]
    u = np.asarray(u.get() if xp is not np else u)[:N].astype(xd.dtype if xd.itemsize >= 4 else np.float32)
    # 2d: sample 0 places the columns and sample 1 the rows; 3d: samples 0, 1, 2 place time, rows, columns.
    order = (1, 0) if nd == 2 else (0, 1, 2)
    starts = [_fractional_starts(u[..., j], n, oo, kk) for j, n, oo, kk in zip(order, S, o, k)]  # (N, C, oo)
    P, Q = math.prod(S), math.prod(o)
    xf = xs.reshape(N, C, P)
    best = arg = None
    for offs in np.ndindex(*k):
        flat = np.zeros((N, C) + o, np.int64)
        for axis in range(nd):
            st = starts[axis] + offs[axis]
            flat = flat * S[axis] + st.reshape((N, C) + (1,) * axis + (o[axis],) + (1,) * (nd - 1 - axis))
        pos = xp.asarray(flat.reshape(N, C, Q))
        v = xp.take_along_axis(xf, pos, 2)
        if best is None:
            best, arg = v.copy(), pos
            continue
        take = (v > best) | xp.isnan(v)  # ties keep the first position; a later NaN wins, as in PyTorch
        best = xp.where(take, v, best)
        arg = xp.where(take, pos, arg)
    best, arg = best.reshape((N, C) + o), arg.reshape((N, C) + o)
    out = _wrap(best if batched else best[0])
    if needs_grad(input):
        def fractional_max_pool_backward(g):
            return _scatter_nd(g, arg, (N, C) + S, input, batched)
        record(f"FractionalMaxPool{nd}DBackward0", fractional_max_pool_backward, out, (input,))
    return (out, _wrap(arg if batched else arg[0])) if return_indices else out


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over kh x kw windows placed at pseudo-random, increasing starts that give output_size (or the input's
    size times output_ratio) outputs per plane (Graham's fractional max pooling)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """fractional_max_pool2d returning (output, indices)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling over the last three dims of (N, C, T, H, W) input: kt x kh x kw windows at
    pseudo-random increasing starts giving output_size (or the input's size times output_ratio) outputs."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None):
    """fractional_max_pool3d returning (output, indices)."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True, _random_samples)


# ------------------------------------------------------------------ power-average (LP) pooling


def _lp_pool(nd: int, input: Tensor, norm_type, kernel_size, stride, ceil_mode: bool) -> Tensor:
    """PyTorch's composition: (sum over the window of x**p) ** (1/p), as avg_pool times the window size."""
    from .nn import relu
    max_pool, avg_pool = {1: (max_pool1d, avg_pool1d), 2: (max_pool2d, avg_pool2d), 3: (max_pool3d, avg_pool3d)}[nd]
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    size = math.prod(_pair(kernel_size, nd, "kernel_size"))
    return (out.sign() * relu(out.abs())).mul(size).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, L): (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, H, W): (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over (N, C, D, H, W): (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices"]
