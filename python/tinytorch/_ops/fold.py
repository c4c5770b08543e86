"""unfold (im2col) and fold (col2im): each is the other's adjoint, so each one's backward is the other op
(differentiable again). Sliding blocks are gathered one kernel position at a time from strided views."""
from __future__ import annotations

from .._tensor import Tensor, _wrap
from ._common import needs_grad, record
from .conv import _pad_array, _pair, _xp


def _args(kernel_size, dilation, padding, stride):
    k = _pair(kernel_size, 2, "kernel_size")
    d = _pair(dilation, 2, "dilation")
    p = _pair(padding, 2, "padding")
    s = _pair(stride, 2, "stride")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {k[0]} "
                           f"kernel_width: {k[1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} stride_width: {s[1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {d[0]} "
                           f"dilation_width: {d[1]}")
    if any(v < 0 for v in p):
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


def _blocks(H: int, W: int, k, d, p, s):
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return oh, ow


def _im2col(x4, k, d, p, s):
    xp = _xp(x4)
    N, C, H, W = x4.shape
    oh, ow = _blocks(H, W, k, d, p, s)
    xpad = _pad_array(x4, (p[0], p[0], p[1], p[1]))
    cols = xp.empty((N, C, k[0], k[1], oh, ow), x4.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            cols[:, :, i, j] = xpad[:, :, r0:r0 + s[0] * (oh - 1) + 1:s[0], c0:c0 + s[1] * (ow - 1) + 1:s[1]]
    return cols.reshape(N, C * k[0] * k[1], oh * ow)


def _col2im(cols, H: int, W: int, k, d, p, s):
    xp = _xp(cols)
    N = cols.shape[0]
    C = cols.shape[1] // (k[0] * k[1])
    oh, ow = _blocks(H, W, k, d, p, s)
    c6 = cols.reshape(N, C, k[0], k[1], oh, ow)
    out = xp.zeros((N, C, H + 2 * p[0], W + 2 * p[1]), cols.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            out[:, :, r0:r0 + s[0] * (oh - 1) + 1:s[0], c0:c0 + s[1] * (ow - 1) + 1:s[1]] += c6[:, :, i, j]
    return xp.ascontiguousarray(out[:, :, p[0]:p[0] + H, p[1]:p[1] + W])


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks of (N, C, H, W) input as columns: (N, C*kh*kw, L)."""
    xd = input._data
    if xd.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {xd.ndim}D)")
    k, d, p, s = _args(kernel_size, dilation, padding, stride)
    batched = xd.ndim == 4
    x4 = xd if batched else xd[None]
    H, W = x4.shape[2], x4.shape[3]
    oh, ow = _blocks(H, W, k, d, p, s)
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input with spatial size ({H}, {W}), kernel_size=({k[0]}, {k[1]}), dilation=("
                           f"{d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the array of sliding "
                           f"blocks as ({oh}, {ow}), but its components must be at least one.")
    cols = _im2col(x4, k, d, p, s)
    out = _wrap(cols if batched else cols[0])
    if needs_grad(input):
        def unfold_backward(g):
            return fold(g, (H, W), k, d, p, s)
        record("Im2ColBackward0", unfold_backward, out, (input,))
    return out


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns (N, C*kh*kw, L) back into an (N, C, H, W) image (overlapping blocks add up)."""
    xd = input._data
    if xd.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                           f"(got {xd.ndim}D)")
    H, W = _pair(output_size, 2, "output_size")
    k, d, p, s = _args(kernel_size, dilation, padding, stride)
    batched = xd.ndim == 3
    c3 = xd if batched else xd[None]
    kk = k[0] * k[1]
    if c3.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={c3.shape[1]} and kernel_size=({k[0]}, {k[1]})")
    oh, ow = _blocks(H, W, k, d, p, s)
    if oh * ow != c3.shape[2]:
        raise RuntimeError(f"Given output_size=({H}, {W}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, {d[1]}), "
                           f"padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected size of input's dimension 2 "
                           f"to match the calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={c3.shape[2]}.")
    img = _col2im(c3, H, W, k, d, p, s)
    out = _wrap(img if batched else img[0])
    if needs_grad(input):
        def fold_backward(g):
            return unfold(g, k, d, p, s)
        record("Col2ImBackward0", fold_backward, out, (input,))
    return out


__all__ = ["unfold", "fold"]
