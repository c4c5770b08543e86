"""Resampling: interpolate (nearest, nearest-exact, linear/bilinear/trilinear, bicubic, area) and
pixel_shuffle/pixel_unshuffle.

Interpolation is separable: each spatial dim is resampled in turn by index_select at source positions
(blended with per-position weights for the linear and cubic modes), so autograd follows through
tensor ops and no derivative is written by hand.
"""
from __future__ import annotations

import math

import numpy as np

from .._tensor import Tensor

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_INTERP = ("linear", "bilinear", "bicubic", "trilinear")


def _idx(values, like: Tensor) -> Tensor:
    from .._creation import tensor
    return tensor(np.asarray(values, dtype=np.int64), device=like.device)


def _weights(values, like: Tensor, nd: int, dim: int) -> Tensor:
    from .._creation import tensor
    shape = [1] * nd
    shape[dim] = len(values)
    return tensor(np.asarray(values).reshape(shape), dtype=like.dtype, device=like.device)


def _src_scale(n_in: int, n_out: int, scale, align_corners: bool) -> float:
    """PyTorch's area_pixel_compute_scale: the source step per output step."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _cubic_coeffs(t):
    A = -0.75
    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _resample_dim(x: Tensor, dim: int, n_out: int, mode: str, align_corners: bool, scale) -> Tensor:
    n_in = x._data.shape[dim]
    nd = x._data.ndim
    dst = np.arange(n_out, dtype=np.float64)
    # PyTorch's CPU kernels copy a dim whose size is unchanged (whatever the scale factor) in the linear modes
    # and in 2d nearest, where an exact doubling also repeats each source twice.
    if n_in == n_out and (mode in ("linear", "bilinear", "trilinear") or (mode == "nearest" and nd >= 4)):
        return x
    if mode == "nearest" and nd >= 4 and n_out == 2 * n_in:
        return x.index_select(dim, _idx(np.arange(n_out) >> 1, x))
    if mode in ("nearest", "nearest-exact"):
        sc = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
        if mode == "nearest-exact":
            src = np.floor((dst + 0.5) * sc)
        else:  # PyTorch computes the nearest source in float32
            src = np.floor(dst.astype(np.float32) * np.float32(sc))
        src = np.minimum(src, n_in - 1).astype(np.int64)
        return x.index_select(dim, _idx(src, x))
    sc = _src_scale(n_in, n_out, scale, align_corners)
    src = dst * sc if align_corners else (dst + 0.5) * sc - 0.5
    if mode == "bicubic":
        i0 = np.floor(src)
        t = src - i0
        out = None
        for m, wgt in zip(range(-1, 3), _cubic_coeffs(t)):
            idx = np.clip(i0 + m, 0, n_in - 1).astype(np.int64)
            term = x.index_select(dim, _idx(idx, x)) * _weights(wgt, x, nd, dim)
            out = term if out is None else out + term
        return out
    if not align_corners:
        src = np.maximum(src, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    a = x.index_select(dim, _idx(i0, x))
    b = x.index_select(dim, _idx(i1, x))
    return a * _weights(1.0 - lam, x, nd, dim) + b * _weights(lam, x, nd, dim)


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims (all but the first two) to `size` or by `scale_factor`."""
    if mode not in _MODES:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{input.dim()}D) for the modes: nearest | linear | bilinear | bicubic | trilinear"
                                  f" | area | nearest-exact (got {mode})")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        if mode not in ("bilinear", "bicubic"):
            raise ValueError("Anti-alias option is only supported for bilinear and bicubic modes")
        raise RuntimeError("tinytorch's interpolate does not implement antialias=True")
    dim = input._data.ndim - 2
    if dim < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input._data.ndim}D) for "
                         f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                         f"(got {mode})")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input._data.shape[2:])} and output size of "
                                 f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 f"output size in (o1, o2, ...,oK) format.")
            out_size = [int(v) for v in size]
        else:
            out_size = [int(size)] * dim
        scales = [None] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input._data.shape[2:])} and scale_factor "
                                 f"of shape {list(scale_factor)}. Please provide input tensor in (N, C, d1, d2, "
                                 f"...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(v) for v in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out_size = [int(math.floor(n * sc)) for n, sc in zip(input._data.shape[2:], scales)]
        if recompute_scale_factor:
            scales = [None] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    need = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
    if mode in need and need[mode] != dim:
        raise NotImplementedError(f"Got {dim + 2}D input, but {mode} mode needs {need[mode] + 2}D input")
    if mode == "area":
        from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d
        if dim == 1:
            return adaptive_avg_pool1d(input, out_size)
        if dim == 2:
            return adaptive_avg_pool2d(input, out_size)
        raise NotImplementedError("tinytorch's interpolate(mode='area') supports 3D and 4D input")
    out = input
    for i in range(dim):
        out = _resample_dim(out, 2 + i, out_size[i], mode, bool(align_corners), scales[i])
    return out


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None) -> Tensor:
    """Deprecated alias of interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """interpolate(mode='nearest')."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """interpolate(mode='bilinear', align_corners=True)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r^2, H, W) -> (*, C, H*r, W*r)."""
    shape = tuple(input._data.shape)
    r = int(upscale_factor)
    if len(shape) < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{len(shape)} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    lead = shape[:-3]
    n = len(lead)
    x = input.reshape(lead + (c // (r * r), r, r, h, w))
    perm = tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2)
    return x.permute(perm).reshape(lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r^2, H, W)."""
    shape = tuple(input._data.shape)
    r = int(downscale_factor)
    if len(shape) < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{len(shape)} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = shape[-3:]
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)="
                           f"{h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)="
                           f"{w} is not divisible by {r}")
    lead = shape[:-3]
    n = len(lead)
    x = input.reshape(lead + (c, h // r, r, w // r, r))
    perm = tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3)
    return x.permute(perm).reshape(lead + (c * r * r, h // r, w // r))


__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle"]
