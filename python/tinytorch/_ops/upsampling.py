"""Resampling: interpolate (nearest, nearest-exact, linear/bilinear/trilinear, bicubic, area) and
pixel_shuffle/pixel_unshuffle.

Interpolation is separable: each spatial dim is resampled in turn by a linear map with a few taps per output
position (source indices and weights, PyTorch's formulas), all in one autograd node. Nearest copies its sources
(a gather). The other modes resample a short dim by one matrix product with the map's dense (n_out, n_in) matrix
on the intra-op pool, a long one, or an array holding inf or NaN (which a product with the matrix's zeros would
spread: 0 * inf = nan), by gathers of the taps. The gradient is the transposed map: the transposed matrix, a
scatter-add of the taps, or for nearest's whole-number repeats a sum of strided slices; it differentiates again
as the map.
"""
from __future__ import annotations

import math

import numpy as np

from .._meta import MetaArray
from .._tensor import Tensor, _wrap
from . import _cpu
from ._common import _short, needs_grad, record
from .indexing import _add_at, _on_device_of, _xp
from .linalg import _matmul

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_INTERP = ("linear", "bilinear", "bicubic", "trilinear")
# Source lengths per tap up to which a dim is resampled by a matrix product (forward: False, backward: True). The
# product costs 2 * n_in multiply-adds per output, the gathers a few passes over the output per tap, the backward's
# scatter-adds several more. Measured at one thread on x2 upsampling: the product was faster forward up to n_in 64
# (bilinear), backward up to 256 (bilinear) and 128 (nearest); 3-6x faster at n_in 32.
_DENSE_PER_TAP = {False: 48, True: 128}
_NAMES = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear", "bilinear": "Bilinear",
          "trilinear": "Trilinear", "bicubic": "Bicubic"}


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


class _Map:
    """One dim's resampling: out[j] = sum over taps t of w[t][j] * in[idx[t][j]] (nearest: one tap, w None). Each
    tap's indices never decrease with j; `repeat` is s where nearest repeats every source s times in a row, else 0."""
    __slots__ = ("n_in", "n_out", "idx", "w", "repeat")

    def __init__(self, n_in: int, n_out: int, idx: list, w) -> None:
        self.n_in, self.n_out, self.idx, self.w = n_in, n_out, idx, w
        s = n_out // n_in
        self.repeat = s if w is None and n_out == s * n_in and np.array_equal(idx[0], np.arange(n_out) // s) else 0

    def matrix(self, dtype):
        """The dense (n_out, n_in) matrix (taps that meet at a clamped border add up)."""
        m = np.zeros((self.n_out, self.n_in))
        rows = np.arange(self.n_out)
        for t, i in enumerate(self.idx):
            np.add.at(m, (rows, i), 1.0 if self.w is None else self.w[t])
        return m.astype(dtype)


def _map_for_dim(n_in: int, n_out: int, nd: int, mode: str, align_corners: bool, scale):
    """The map that resamples a dim of n_in to n_out, or None where PyTorch copies the dim unchanged."""
    dst = np.arange(n_out, dtype=np.float64)
    # PyTorch's CPU kernels copy a dim whose size is unchanged (whatever the scale factor) in the linear modes
    # and in 2d nearest, where an exact doubling also repeats each source twice.
    if n_in == n_out and (mode in ("linear", "bilinear", "trilinear") or (mode == "nearest" and nd >= 4)):
        return None
    if mode == "nearest" and nd >= 4 and n_out == 2 * n_in:
        return _Map(n_in, n_out, [np.arange(n_out) >> 1], None)
    if mode in ("nearest", "nearest-exact"):
        sc = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
        if mode == "nearest-exact":
            src = np.floor((dst + 0.5) * sc)
        else:  # PyTorch computes the nearest source in float32
            src = np.floor(dst.astype(np.float32) * np.float32(sc))
        return _Map(n_in, n_out, [np.minimum(src, n_in - 1).astype(np.int64)], None)
    sc = _src_scale(n_in, n_out, scale, align_corners)
    src = dst * sc if align_corners else (dst + 0.5) * sc - 0.5
    if mode == "bicubic":
        i0 = np.floor(src)
        return _Map(n_in, n_out, [np.clip(i0 + m, 0, n_in - 1).astype(np.int64) for m in range(-1, 3)],
                    _cubic_coeffs(src - i0))
    if not align_corners:
        src = np.maximum(src, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam = src - i0
    return _Map(n_in, n_out, [i0, np.minimum(i0 + 1, n_in - 1)], [1.0 - lam, lam])


def _along(v, d: int, ndim: int):
    """A 1-D array shaped to broadcast along axis d of an ndim array."""
    shape = [1] * ndim
    shape[d] = -1
    return v.reshape(shape)


def _dense(x, d: int, mat):
    """x with axis d (of length mat.shape[1]) multiplied by the (n_new, n_old) matrix mat: one matrix product."""
    shape = x.shape
    n_new, n_old = mat.shape
    rows, cols = math.prod(shape[:d]), math.prod(shape[d + 1:])
    if cols == 1:
        r = _matmul(x.reshape(rows, n_old), mat.T)
    elif rows == 1:
        r = _matmul(mat, x.reshape(n_old, cols))
    else:
        r = _matmul(mat, x.reshape(rows, n_old, cols))
    return r.reshape(shape[:d] + (n_new,) + shape[d + 1:])


def _finite(x) -> bool:
    """Whether x holds no inf or NaN (a sum is finite only then, or on overflow: then the exact path runs)."""
    return type(x) is not MetaArray and bool(_xp(x).isfinite(x.sum()))


def _apply(x, d: int, m: _Map, transpose: bool):
    """x resampled along axis d by the map m, or by its transpose (the backward: n_out back to n_in)."""
    xp = _xp(x)
    if m.w is None and not transpose:  # nearest: a copy of the sources, bit for bit
        return xp.take(x, _on_device_of(m.idx[0], x), axis=d)
    if m.repeat and transpose:  # each source's gradient: the sum of its run of outputs, s strided slices
        out = x[(slice(None),) * d + (slice(0, None, m.repeat),)].copy()
        for r in range(1, m.repeat):
            out += x[(slice(None),) * d + (slice(r, None, m.repeat),)]
        return out
    if m.n_in <= _DENSE_PER_TAP[transpose] * len(m.idx) and _finite(x):
        mat = _on_device_of(m.matrix(x.dtype), x)
        return _dense(x, d, mat.T if transpose else mat)
    if not transpose:
        out = None
        for t, i in enumerate(m.idx):
            term = xp.take(x, _on_device_of(i, x), axis=d)
            term *= _on_device_of(_along(m.w[t].astype(x.dtype), d, x.ndim), x)
            if out is None:
                out = term
            else:
                out += term
        return out
    shape = x.shape[:d] + (m.n_in,) + x.shape[d + 1:]
    out = xp.zeros(shape, x.dtype)
    for t, i in enumerate(m.idx):
        v = x if m.w is None else x * _on_device_of(_along(m.w[t].astype(x.dtype), d, x.ndim), x)
        index = np.broadcast_to(_along(i, d, x.ndim), x.shape)
        if not _cpu.scatter_add_(out, d, index, v):
            _add_at(out, (slice(None),) * d + (_on_device_of(i, x),), v)
    return out


def _resample_array(x, maps: list, transpose: bool):
    """x with spatial dim i (axis 2 + i) resampled by maps[i] (None: unchanged), or by the transposed maps; a new
    array of x's dtype. Reduced-precision floats compute in float32; uint8 rounds half up and saturates after each
    dim, the last dim first, as PyTorch's separable uint8 kernel does."""
    dtype = x.dtype
    copy_only = not transpose and all(m is None or m.w is None for m in maps)
    work = x if copy_only or dtype in (np.float32, np.float64) else x.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is nan here as in PyTorch, without a warning
        for i in reversed(range(len(maps))):
            if maps[i] is not None:
                work = _apply(work, 2 + i, maps[i], transpose)
                if dtype == np.uint8 and work.dtype != dtype:
                    work = _xp(work).clip(_xp(work).floor(work + 0.5), 0, 255)
    if work is x:  # every dim unchanged: still a new tensor, as PyTorch returns
        return x.copy()
    return work.astype(dtype, copy=False)


def _resample(x: Tensor, maps: list, name: str) -> Tensor:
    """interpolate's node: the maps applied to x; the backward applies the transposed maps."""
    out = _wrap(_resample_array(x._data, maps, False))
    if needs_grad(x):
        record(name, lambda g: _resample_backward(g, maps, name), out, (x,))
    return out


def _resample_backward(g: Tensor, maps: list, name: str) -> Tensor:
    """The input gradient (the transposed maps applied to g), itself differentiable: its gradient is the maps."""
    out = _wrap(_resample_array(g._data, maps, True))
    if needs_grad(g):
        record(name.replace("Backward0", "BackwardBackward0"), lambda gg: _resample(gg, maps, name), out, (g,))
    return out


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
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input._data.ndim}D) "
                                  f"for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area "
                                  f"| nearest-exact (got {mode})")
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
    in_size = list(input._data.shape[2:])
    if min(in_size) <= 0 or min(out_size) <= 0:
        names = "DHW"[3 - dim:]
        sizes = [", ".join(f"{c}: {n}" for c, n in zip(names, v)) for v in (in_size, out_size)]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({sizes[0]})"
                           f"{' and' if dim == 1 else ''} output ({sizes[1]})")
    if not input.dtype.is_floating_point and (input.dtype.name != "uint8" or mode in ("linear", "trilinear")):
        kind = "cubic" if mode == "bicubic" else "linear" if mode in _INTERP else "nearest"
        raise NotImplementedError(f"\"compute_indices_weights_{kind}\" not implemented for '{_short(input.dtype)}'")
    maps = [_map_for_dim(in_size[i], out_size[i], dim + 2, mode, bool(align_corners), scales[i]) for i in range(dim)]
    return _resample(input, maps, f"Upsample{_NAMES[mode]}{dim}DBackward0")


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
