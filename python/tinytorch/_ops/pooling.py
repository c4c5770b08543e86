"""Pooling: max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d, adaptive_max_pool1d/2d, each forward beside
its derivative. Windows are strided views of the padded input, reduced one kernel position at a time
(kh*kw vectorised passes, no loop over the batch or the output). 1d pools run as 2d pools of height 1.
"""
from __future__ import annotations

import numpy as np

from .. import _C, _threads
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


def _check_dims(name: str, x: Tensor, nd: int) -> None:
    if x._data.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor for input, but got: "
                           f"{list(x._data.shape)}" if nd == 2 else
                           f"{name}() Expected 2D or 3D input tensor, but got {list(x._data.shape)}")


def _pool_args(name: str, nd: int, kernel_size, stride, padding, dilation):
    k = _pair(kernel_size, nd, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else _pair(stride, nd, "stride")
    p = _pair(padding, nd, "padding")
    d = _pair(dilation, nd, "dilation")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got kH: {k[0]} kW: {k[-1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{name}: stride must be greater than zero, but got dH: {s[0]} dW: {s[-1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{name}: dilation must be greater than zero, but got dilationH: {d[0]} dilationW: {d[-1]}")
    for kk, pp in zip(k, p):
        if pp < 0 or pp > kk // 2:
            raise RuntimeError("pad should be at most half of effective kernel size, but got pad="
                               f"{pp}, kernel_size={kk} and dilation={d[0]}" if pp >= 0 else
                               "pad must be non-negative")
    if nd == 1:
        k, s, p, d = (1,) + k, (1,) + s, (0,) + p, (1,) + d
    return k, s, p, d


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


def _max_pool(name: str, nd: int, input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool,
              return_indices: bool):
    _check_dims(name, input, nd)
    k, s, p, d = _pool_args(name, nd, kernel_size, stride, padding, dilation)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    oh = _pool_out(H, k[0], s[0], p[0], d[0], ceil_mode)
    ow = _pool_out(W, k[1], s[1], p[1], d[1], ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). "
                           f"Output size is too small")
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
    views = window_views(xpad)
    best[...] = views[0][2]
    for i, j, v in views[1:]:
        take = v > best  # ties keep the first position
        if has_nan:
            take |= xp.isnan(v)
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
    _check_dims(name, input, nd)
    k, s, p, d = _pool_args(name, nd, kernel_size, stride, padding, 1)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    xd = input._data
    if xd.dtype.kind not in "fV":
        raise RuntimeError(f'"{name}" not implemented for \'{input.dtype}\'')
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    N, C, H, W = x4.shape
    oh = _pool_out(H, k[0], s[0], p[0], 1, ceil_mode)
    ow = _pool_out(W, k[1], s[1], p[1], 1, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). "
                           f"Output size is too small")
    if divisor_override is not None:
        div = np.full((oh, ow), float(divisor_override))
    else:
        if count_include_pad:
            dh = _avg_divisor(H, oh, k[0], s[0], p[0], True)
            dw = _avg_divisor(W, ow, k[1], s[1], p[1], True)
        else:
            dh = _avg_divisor(H, oh, k[0], s[0], p[0], False)
            dw = _avg_divisor(W, ow, k[1], s[1], p[1], False)
        div = np.outer(dh, dw).astype(np.float64)
    inv = xp.asarray((1.0 / div).astype(x4.dtype if x4.dtype.itemsize >= 4 else np.float32))
    xpad = _padded(x4, p, oh, ow, k, s, d, 0)
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
                return full[:, 0, p[0]:p[0] + H, p[1]:p[1] + W].reshape(input.shape)
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


def _adaptive_size(name: str, output_size, x4, nd: int) -> tuple:
    if isinstance(output_size, (tuple, list)):
        os_ = list(output_size)
        if len(os_) == 1 and nd > 1:
            os_ = os_ * nd
    else:
        os_ = [output_size] * nd
    if len(os_) != nd:
        raise ValueError(f"{name}: output_size must be {nd}")
    in_sizes = x4.shape[4 - nd:]
    os_ = [in_sizes[i] if v is None else int(v) for i, v in enumerate(os_)]
    if any(v < 0 for v in os_):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(str(v) for v in os_)}}}")
    return (1,) + tuple(os_) if nd == 1 else tuple(os_)


def _avg_matrix(n: int, o: int, dtype):
    """(o, n): row i averages input positions [floor(i*n/o), ceil((i+1)*n/o))."""
    lo, hi = _adaptive_bounds(n, o)
    m = np.zeros((o, n), dtype)
    for i in range(o):
        m[i, lo[i]:hi[i]] = 1.0 / (hi[i] - lo[i])
    return m


def _adaptive_avg(name: str, nd: int, input: Tensor, output_size) -> Tensor:
    _check_dims(name, input, nd)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    oh, ow = _adaptive_size(name, output_size, x4, nd)
    N, C, H, W = x4.shape
    for n, nm in ((H, "height"), (W, "width")):
        if n == 0 and N * C:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(xd.shape)} with dimension {xd.ndim - 1} being empty")
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
    _check_dims(name, input, nd)
    xd = input._data
    x4, batched = _as4d(xd, nd)
    xp = _xp(x4)
    oh, ow = _adaptive_size(name, output_size, x4, nd)
    N, C, H, W = x4.shape
    if H == 0 or W == 0:
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                           f"has sizes {list(xd.shape)} with dimension {xd.ndim - 1} being empty")
    # Windows padded to the largest window by repeating their last position (harmless for a max).
    lh, hh = _adaptive_bounds(H, oh)
    lw, hw = _adaptive_bounds(W, ow)
    kh, kw = int((hh - lh).max()), int((hw - lw).max())
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


__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices"]

