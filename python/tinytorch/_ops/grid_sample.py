"""grid_sample and affine_grid: spatial transformers sampling an input at arbitrary coordinates.

grid_sample reads, for every output position, the input at the taps around its source coordinate (2**nd
corners for (tri)linear, one for nearest, 4x4 for bicubic) and sums them with interpolation weights that are
products of one factor per spatial dim. Tap positions are constants of the grid's values; the weights are
functions of the fractional coordinates, which depend on the grid with the (piecewise constant) slope of the
unnormalisation and padding. The backward is written in tensor ops (a scatter_add of the weighted gradient into
the input, the weights' derivatives times the gathered values for the grid), so it is differentiable again.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from .. import _autocast
from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, _short, needs_grad, record
from .conv import _xp
from ._common import user_stacklevel as _user_stacklevel

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")

# bicubic's cubic convolution constant (PyTorch's, OpenCV's)
_A = -0.75


def _cc1(x):
    return ((_A + 2) * x - (_A + 3)) * x * x + 1


def _cc2(x):
    return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A


def _dcc1(x):
    return (3 * (_A + 2) * x - 2 * (_A + 3)) * x


def _dcc2(x):
    return (3 * _A * x - 10 * _A) * x + 8 * _A


def _factors(mode: str, t):
    """One dim's weight factors per tap offset, and their derivatives in t (arrays or Tensors alike)."""
    if mode == "bilinear":
        return [1 - t, t], [-1, 1]
    if mode == "nearest":
        return [1], [0]
    return [_cc2(t + 1), _cc1(t), _cc1(1 - t), _cc2(2 - t)], [_dcc2(t + 1), _dcc1(t), -_dcc1(1 - t), -_dcc2(2 - t)]


_OFFSETS = {"bilinear": (0, 1), "nearest": (0,), "bicubic": (-1, 0, 1, 2)}


def _clip(xp, x, size: int):
    """Clamp to [0, size - 1]; the slope is 0 where clamped."""
    return xp.clip(x, 0, size - 1), ((x > 0) & (x < size - 1)).astype(x.dtype)


def _reflect(xp, x, twice_low: int, twice_high: int):
    """Reflect x into [twice_low / 2, twice_high / 2] as often as needed; the slope is +-1."""
    if twice_low == twice_high:
        return xp.zeros_like(x), xp.zeros_like(x)
    lo, span = twice_low / 2, (twice_high - twice_low) / 2
    x = x - lo
    sign = xp.where(x < 0, -1, 1).astype(x.dtype)
    x = xp.abs(x)
    extra = xp.fmod(x, span)
    even = xp.floor(x / span) % 2 == 0
    return xp.where(even, extra + lo, span - extra + lo), xp.where(even, sign, -sign)


def _pad_coord(xp, x, size: int, padding_mode: str, align_corners: bool):
    """A pixel coordinate moved inside the input by padding_mode, and the slope of that map."""
    if padding_mode == "zeros":
        return x, xp.ones_like(x)
    slope = xp.ones_like(x)
    if padding_mode == "reflection":
        x, slope = _reflect(xp, x, 0, 2 * (size - 1)) if align_corners else _reflect(xp, x, -1, 2 * size - 1)
    x, m = _clip(xp, x, size)
    return x, slope * m


class _Plan:
    """Where each output position reads: per spatial dim (the grid's last axis runs x, y, z over the input's
    last, second-last, ... dims), the tap positions, their validity, the fractional coordinate t and its slope
    in the grid; combined over dims into T taps of flat positions `lin` (N, T, Q) and masks `valid`."""

    def __init__(self, grid_data, sizes: tuple, mode: str, padding_mode: str, align_corners: bool):
        xp = _xp(grid_data)
        N, nd = grid_data.shape[0], grid_data.shape[-1]
        g = grid_data.reshape(N, math.prod(grid_data.shape[1:-1]), nd)
        nan = xp.isnan(g)
        # PyTorch's 2d bilinear kernel with zero padding multiplies masked-off taps by NaN weights: a NaN
        # coordinate reads nothing, gives a NaN output, and a NaN gradient to the grid's other coordinates.
        # Its other kernels clamp or round a NaN coordinate as -1.
        self.nan_out = nan.any(-1) if nd == 2 and mode == "bilinear" and padding_mode == "zeros" else None
        if self.nan_out is not None and not bool(self.nan_out.any()):
            self.nan_out = None
        self.nan_grad = None if self.nan_out is None else [
            (nan.sum(-1) - nan[..., d]) > 0 for d in range(nd)]
        g = xp.where(nan, -1, g)
        self.mode, self.t, self.slope, self.const = mode, [], [], []
        pos, ok = [], []
        for d in range(nd):
            size = sizes[-1 - d]
            gd = g[..., d]
            if align_corners:
                x, scale = (gd + 1) / 2 * (size - 1), (size - 1) / 2
            else:
                x, scale = ((gd + 1) * size - 1) / 2, size / 2
            slope = xp.full_like(x, scale)
            if mode != "bicubic":  # bicubic pads each tap instead of the coordinate
                x, m = _pad_coord(xp, x, size, padding_mode, align_corners)
                slope = slope * m
            base = xp.rint(x) if mode == "nearest" else xp.floor(x)
            self.t.append(x - base)
            self.slope.append(slope)
            self.const.append(x - base - gd * slope)  # t = grid * slope + const, locally
            p_d, ok_d = [], []
            for off in _OFFSETS[mode]:
                p = base + off
                if mode == "bicubic":
                    p = _pad_coord(xp, p, size, padding_mode, align_corners)[0]
                p_d.append(p)
                ok_d.append((p >= 0) & (p <= size - 1))
            pos.append(p_d)
            ok.append(ok_d)
        strides = [math.prod(sizes[len(sizes) - d:]) for d in range(nd)]  # dim d (x first) has stride prod(sizes after)
        self.combos = list(itertools.product(*(range(len(_OFFSETS[mode])) for _ in range(nd))))
        lin, valid = [], []
        for c in self.combos:
            v = ok[0][c[0]]
            f = xp.clip(pos[0][c[0]], 0, sizes[-1] - 1).astype(np.int64) * strides[0]
            for d in range(1, nd):
                v = v & ok[d][c[d]]
                f = f + xp.clip(pos[d][c[d]], 0, sizes[-1 - d] - 1).astype(np.int64) * strides[d]
            lin.append(f)
            if self.nan_out is not None:
                v = v & ~self.nan_out
            valid.append(v.astype(grid_data.dtype))
        self.lin = xp.stack(lin, 1)  # (N, T, Q)
        self.valid = valid

    def weights(self, ts, stack, lift):
        """The taps' weights W (N, T, Q) and per dim their derivatives in that dim's coordinate, from the
        fractional coordinates ts (arrays, or Tensors when the result must be differentiable)."""
        fac = [_factors(self.mode, t) for t in ts]
        W, dW = [], [[] for _ in ts]
        for c, v in zip(self.combos, self.valid):
            vk = lift(v)
            w = vk
            for d, cd in enumerate(c):
                w = w * fac[d][0][cd]
            W.append(w)
            for d in range(len(ts)):
                dw = vk * fac[d][1][c[d]]
                for e, ce in enumerate(c):
                    if e != d:
                        dw = dw * fac[e][0][ce]
                dW[d].append(dw)
        return stack(W, 1), [stack(x, 1) for x in dW]


def _check_grid_sample(input: Tensor, grid: Tensor, mode: str) -> None:
    xs, gs = list(input._data.shape), list(grid._data.shape)
    if xs[0] != gs[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {xs} and grid with sizes {gs}")
    if gs[-1] != len(xs) - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {len(xs) - 2} in last dimension, but got "
                           f"grid with sizes {gs}")
    for i in range(2, len(xs)):
        if xs[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {xs} with dimension {i} being empty")
    nd = 4 if len(xs) == 4 else 5
    if len(xs) != nd or len(gs) != nd:
        raise RuntimeError(f"grid_sampler(): expected {nd}D input and grid with same number of dimensions, but got "
                           f"input with sizes {xs} and grid with sizes {gs}")
    if mode == "bicubic" and nd == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input._data.dtype.kind not in "fV":
        raise NotImplementedError(f'"grid_sampler_{nd - 2}d_cpu_kernel_impl" not implemented for '
                                  f"'{_short(input.dtype)}'")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_short(input.dtype)} but found {_short(grid.dtype)}")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample (N, C, H, W) input at grid (N, Ho, Wo, 2) positions in [-1, 1] (5-D input: (N, Do, Ho, Wo, 3)
    grid), interpolating by mode and reading outside the input by padding_mode."""
    if mode not in _OFFSETS:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=_user_stacklevel())
        align_corners = False
    if _autocast.active:
        return _autocast.dispatch("grid_sampler", grid_sample, input, grid, mode, padding_mode, align_corners)
    _check_grid_sample(input, grid, mode)
    xd = input._data
    xp = _xp(xd)
    N, C = xd.shape[:2]
    sizes = xd.shape[2:]
    P = math.prod(sizes)
    out_sp = grid._data.shape[1:-1]
    plan = _Plan(grid._data, sizes, mode, padding_mode, bool(align_corners))
    T, Q = plan.lin.shape[1], plan.lin.shape[2]
    W, _ = plan.weights(plan.t, xp.stack, lambda a: a)
    idx = xp.broadcast_to(plan.lin.reshape(N, 1, T * Q), (N, C, T * Q))
    vals = xp.take_along_axis(xd.reshape(N, C, P), idx, 2).reshape(N, C, T, Q)
    y = (vals * W[:, None].astype(xd.dtype, copy=False)).sum(2).astype(xd.dtype, copy=False)
    if plan.nan_out is not None:
        y[xp.broadcast_to(plan.nan_out[:, None], y.shape)] = np.nan
    out = _wrap(y.reshape((N, C) + tuple(out_sp)))
    if needs_grad(input, grid):
        ri, rg = input._requires_grad, grid._requires_grad and mode != "nearest"

        def grid_sampler_backward(g):
            from .._creation import zeros
            from .indexing import gather, scatter_add
            from .shape import stack
            graph = _grad_enabled()
            if graph and grid._requires_grad:  # t as a function of the grid, exact in value and local slope
                gflat = grid.reshape(N, Q, len(sizes))
                ts = [gflat[..., d] * _wrap(plan.slope[d]) + _wrap(plan.const[d]) for d in range(len(sizes))]
            else:
                ts = [_wrap(t) for t in plan.t]
            Wt, dWt = plan.weights(ts, stack, _wrap)
            gf = g.reshape(N, C, 1, Q)
            index = _wrap(xp.ascontiguousarray(idx))
            gi = gg = None
            if ri:
                src = (gf * Wt.unsqueeze(1)).reshape(N, C, T * Q)
                gi = scatter_add(zeros((N, C, P), dtype=g.dtype, device=g.device), 2, index, src)
                gi = gi.reshape(input.shape)
            if rg:
                v = gather(input.reshape(N, C, P), 2, index).reshape(N, C, T, Q)
                gv = (gf * v).sum(1)  # (N, T, Q)
                comps = [(dWt[d] * gv).sum(1) * _wrap(plan.slope[d]) for d in range(len(sizes))]
                if plan.nan_grad is not None:
                    comps = [c + _wrap(xp.where(m, np.nan, 0).astype(grid._data.dtype))
                             for c, m in zip(comps, plan.nan_grad)]
                gg = stack(comps, -1).reshape(grid.shape)
            elif grid._requires_grad:  # nearest: the output is locally constant in the grid
                gg = zeros(grid.shape, dtype=grid.dtype, device=grid.device)
            return gi, gg
        record(f"GridSampler{len(sizes)}DBackward0", grid_sampler_backward, out, (input, grid))
    return out


def _linspace_from_neg_one(n: int, align_corners: bool, dtype):
    if n <= 1:
        return np.zeros(1, dtype)
    r = np.linspace(-1, 1, n, dtype=dtype)
    return r if align_corners else r * (n - 1) / n


def affine_grid(theta: Tensor, size: list, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps theta (N, 2, 3) (or (N, 3, 4))
    applied to the output's normalised pixel centres, for grid_sample."""
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=_user_stacklevel())
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(v) for v in size]
    th = theta._data
    if len(size) == 4:
        if th.ndim != 3 or th.shape[-2] != 2 or th.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {tuple(size)}. Got "
                             f"{theta.shape}.")
    elif len(size) == 5:
        if th.ndim != 3 or th.shape[-2] != 3 or th.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {tuple(size)}. Got "
                             f"{theta.shape}.")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {tuple(size)}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=_user_stacklevel())
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {tuple(size)}")
    N, nd = size[0], len(spatial)
    if th.shape[0] != N:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{N}, {nd + 1}] but got: "
                           f"[{th.shape[0]}, {nd + 1}].")
    xp = _xp(th)
    # The base grid (*spatial, nd + 1): x, y(, z) of each output pixel, then 1.
    axes = [_linspace_from_neg_one(n, bool(align_corners), th.dtype) for n in reversed(spatial)]
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # each (*spatial), in (z,) y, x order
    base = np.stack(list(reversed(mesh)) + [np.ones(tuple(spatial), th.dtype)], -1).reshape(-1, nd + 1)
    base = xp.asarray(base)
    grid = xp.matmul(base, th.swapaxes(1, 2)).reshape([N] + spatial + [nd])
    out = _wrap(grid)
    if needs_grad(theta):
        def affine_grid_backward(g):
            return g.reshape(N, -1, nd).transpose(1, 2).matmul(_wrap(base))
        record("AffineGridGeneratorBackward0", affine_grid_backward, out, (theta,))
    return out


__all__ = ["affine_grid", "grid_sample"]
