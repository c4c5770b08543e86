"""Normalisation over batches and channels: batch_norm (fused forward and backward, running statistics),
its synchronised form for SyncBatchNorm, instance_norm, group_norm, rms_norm and local_response_norm.

batch_norm is one op with a hand-written derivative (it sits in every conv net's hot path); the others
are compositions of differentiable tensor ops, so they get autograd (and double backward) for free.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _C, _dtype, _threads
from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, needs_grad, record
from . import _cpu
from .conv import _xp


def _cdtype(a):
    """Accumulate halves in float32."""
    return np.float32 if a.dtype.itemsize < 4 else a.dtype


def _as3d(a):
    """(N, C, L) view of an (N, C, *) array."""
    return a.reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def _check_bn_input(x: Tensor, training: bool) -> None:
    shape = x._data.shape
    if len(shape) < 2:
        raise ValueError(f"expected 2D or more input (got {len(shape)}D input)")
    if training:
        size = math.prod(shape) // shape[1] if shape[1] else 0
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"torch.Size({list(shape)})")


def _update_running(running: Tensor | None, value, momentum: float) -> None:
    if running is None:
        return
    r = running._data
    r *= (1.0 - momentum)
    r += (momentum * value).astype(r.dtype, copy=False)
    running._bump_version()


def _bn_affine_grads(g3, xhat, rw: bool, rb: bool, wdtype):
    dw = (g3 * xhat).sum(axis=(0, 2)).astype(wdtype, copy=False) if rw else None
    db = g3.sum(axis=(0, 2)).astype(wdtype, copy=False) if rb else None
    return dw, db


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) by batch statistics (training) or running statistics (eval)."""
    _check_bn_input(input, training)
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, None)


def _check_mixed_dtype(x: Tensor, params: tuple) -> None:
    """PyTorch's CPU norms take parameters of the input's dtype, or float32 ones for a float16/bfloat16 input;
    anything else (a float64 batch into a float32 model) is an error there, not a silent promotion."""
    if type(x._data) is not np.ndarray:
        return
    dt = x._data.dtype
    for p in params:
        if p is not None and p._data.dtype != dt and not (dt.itemsize == 2 and dt.kind in "fV" and
                                                           p._data.dtype == np.float32):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, sync) -> Tensor:
    """batch_norm; `sync` = (process_group, world_size) all-reduces the statistics and their gradients."""
    x = input
    xd = x._data
    C = xd.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t._data.size != C:
            raise RuntimeError(f"{name} should contain {C} elements not {t._data.size}")
    _check_mixed_dtype(x, (running_mean, running_var, weight, bias))
    if xd.size == 0:  # an empty batch: nothing to normalise, statistics untouched
        return input.clone()
    xp = _xp(xd)
    cd = _cdtype(xd)
    if xp is np and sync is None:
        return _batch_norm_cpu(input, running_mean, running_var, weight, bias, training, momentum, eps)
    x3 = _as3d(xd).astype(cd, copy=False)
    M = x3.shape[0] * x3.shape[2]
    if training:
        if sync is None:
            mean = x3.mean(axis=(0, 2))
            xc = x3 - mean[:, None]
            var = (xc * xc).mean(axis=(0, 2))
            count = M
        else:
            mean, var, count = _sync_stats(x3, sync)
            xc = x3 - mean[:, None]
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, mean, momentum)
            _update_running(running_var, var * (count / max(count - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean = running_mean._data.astype(cd, copy=False)
        var = running_var._data.astype(cd, copy=False)
        xc = x3 - mean[:, None]
        count = M
    rstd = 1.0 / xp.sqrt(var + eps)
    xhat = xc * rstd[:, None]
    y = xhat
    if weight is not None:
        y = y * weight._data.astype(cd, copy=False)[:, None]
    if bias is not None:
        y = y + bias._data.astype(cd, copy=False)[:, None]
    out = _wrap(y.astype(xd.dtype, copy=False).reshape(xd.shape))
    if needs_grad(x, weight, bias):
        rx = x._requires_grad
        rw = weight is not None and weight._requires_grad
        rb = bias is not None and bias._requires_grad
        wv = weight._data.astype(cd, copy=False) if weight is not None else None

        def batch_norm_backward(g):
            if _grad_enabled() and sync is None:  # create_graph: differentiable formulas
                return _bn_backward_graph(g, x, weight, bias is not None, training, rstd, mean, eps, rx, rw, rb)
            g3 = _as3d(g._data).astype(cd, copy=False)
            dw, db = _bn_affine_grads(g3, xhat, rw, rb, weight._data.dtype if weight is not None else cd)
            dx = None
            if rx:
                scale = rstd if wv is None else rstd * wv
                if training:
                    sg = g3.sum(axis=(0, 2))
                    sgx = (g3 * xhat).sum(axis=(0, 2))
                    n = count
                    if sync is not None:
                        both = _all_reduce(xp.stack([sg, sgx]), sync)
                        sg, sgx = both[0], both[1]
                    dx = (g3 - (sg / n)[:, None] - xhat * (sgx / n)[:, None]) * scale[:, None]
                else:
                    dx = g3 * scale[:, None]
                dx = _wrap(dx.astype(xd.dtype, copy=False).reshape(xd.shape))
            res = [dx]
            if weight is not None:
                res.append(_wrap(dw) if rw else None)
            if bias is not None:
                res.append(_wrap(db) if rb else None)
            return tuple(res) if len(res) > 1 else res[0]
        inputs = (x,) + tuple(t for t in (weight, bias) if t is not None)
        record("NativeBatchNormBackward0" if sync is None else "SyncBatchNormBackward", batch_norm_backward, out,
               inputs, inputs)
    return out


def _batch_norm_cpu(x, running_mean, running_var, weight, bias, training: bool, momentum, eps: float) -> Tensor:
    """batch_norm of a NumPy input by the C++ kernels (csrc/kernels/batch_norm.cpp): statistics, normalisation
    and backward each one pass per channel; only mean and 1/std are saved (xhat is recomputed)."""
    xd = x._data
    cd = _cdtype(xd)
    x3 = np.ascontiguousarray(_as3d(xd), dtype=cd)
    C = x3.shape[1]
    M = x3.shape[0] * x3.shape[2]
    if training:
        mean, var = np.empty(C, cd), np.empty(C, cd)
        _C._cpu.batch_norm_stats(x3, mean, var, _threads.count)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, mean, momentum)
            _update_running(running_var, var * (M / max(M - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean = np.ascontiguousarray(running_mean._data, dtype=cd)
        var = np.ascontiguousarray(running_var._data, dtype=cd)
    rstd = (1.0 / np.sqrt(var + eps)).astype(cd, copy=False)
    wv = None if weight is None else np.ascontiguousarray(weight._data, dtype=cd)
    bv = None if bias is None else np.ascontiguousarray(bias._data, dtype=cd)
    y = np.empty_like(x3)
    _C._cpu.batch_norm_apply(x3, mean, rstd, wv, bv, y, _threads.count)
    out = _wrap(y.astype(xd.dtype, copy=False).reshape(xd.shape))
    if needs_grad(x, weight, bias):
        rx = x._requires_grad
        rw = weight is not None and weight._requires_grad
        rb = bias is not None and bias._requires_grad

        def batch_norm_backward(g):
            if _grad_enabled():  # create_graph: differentiable formulas
                return _bn_backward_graph(g, x, weight, bias is not None, training, rstd, mean, eps, rx, rw, rb)
            g3 = np.ascontiguousarray(_as3d(g._data), dtype=cd)
            # dx in x's own shape (the kernel writes a view of it): an array that is no view can become
            # x.grad as it is, without AccumulateGrad's copy.
            dx = np.empty(xd.shape, cd) if rx else None
            dw = np.empty(C, cd) if rw else None
            db = np.empty(C, cd) if rb else None
            _C._cpu.batch_norm_backward(g3, x3, mean, rstd, wv, training, None if dx is None else _as3d(dx), dw, db,
                                        _threads.count)
            res = [None if dx is None else _wrap(dx.astype(xd.dtype, copy=False))]
            if weight is not None:
                res.append(_wrap(dw.astype(weight._data.dtype, copy=False)) if rw else None)
            if bias is not None:
                res.append(_wrap(db.astype(bias._data.dtype, copy=False)) if rb else None)
            return tuple(res) if len(res) > 1 else res[0]
        inputs = (x,) + tuple(t for t in (weight, bias) if t is not None)
        record("NativeBatchNormBackward0", batch_norm_backward, out, inputs, inputs)
    return out


def _bn_backward_graph(g, x, weight, has_bias, training, rstd, mean, eps, rx, rw, rb):
    """batch_norm's backward in tensor ops (training: statistics recomputed from x so they carry the graph)."""
    shape = tuple(x._data.shape)
    N, C = shape[0], shape[1]
    x3 = x.reshape(N, C, -1)
    g3 = g.reshape(N, C, -1)
    if training:
        mu = x3.mean((0, 2), keepdim=True)
        xc = x3 - mu
        r = ((xc * xc).mean((0, 2), keepdim=True) + eps).rsqrt()
    else:
        r = _wrap(rstd.reshape(1, C, 1).astype(x._data.dtype, copy=False))
        xc = x3 - _wrap(mean.reshape(1, C, 1).astype(x._data.dtype, copy=False))
    xhat = xc * r
    res = [None]
    if rx:
        scale = r if weight is None else r * weight.reshape(1, C, 1)
        if training:
            dx = (g3 - g3.mean((0, 2), keepdim=True) - xhat * (g3 * xhat).mean((0, 2), keepdim=True)) * scale
        else:
            dx = g3 * scale
        res[0] = dx.reshape(shape)
    if weight is not None:
        res.append((g3 * xhat).sum((0, 2)) if rw else None)
    if has_bias:
        res.append(g3.sum((0, 2)) if rb else None)
    return tuple(res) if len(res) > 1 else res[0]


def _all_reduce(a, sync):
    """Sum an array over the process group (in place on a copy; returns the sum)."""
    from .. import distributed as dist
    group, _ = sync
    t = _wrap(a.copy())
    dist.all_reduce(t, group=group)
    return t._data


def _sync_stats(x3, sync):
    """Global per-channel mean, biased variance and element count over every rank's batch."""
    xp = _xp(x3)
    n = x3.shape[0] * x3.shape[2]
    s = x3.sum(axis=(0, 2))
    ss = (x3 * x3).sum(axis=(0, 2))
    # Counts travel with the sums: ranks may hold different batch sizes.
    packed = xp.concatenate([s, ss, xp.full((1,), n, s.dtype)]).astype(np.float64)
    r = _all_reduce(packed, sync)
    C = s.shape[0]
    count = float(r[2 * C])
    mean = r[:C] / count
    var = xp.maximum(r[C:2 * C] / count - mean * mean, 0)
    return mean.astype(x3.dtype), var.astype(x3.dtype), count


def sync_batch_norm(input: Tensor, weight, bias, running_mean, running_var, eps: float, momentum: float,
                    process_group, world_size: int) -> Tensor:
    """batch_norm in training with statistics (and their gradients) summed over the process group."""
    _check_bn_input(input, False)
    return _batch_norm(input, running_mean, running_var, weight, bias, True, momentum, eps,
                       (process_group, world_size))


# ------------------------------------------------------------------ instance / group / rms / local response


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) plane by its own statistics (batch_norm over a batch of one)."""
    xd = input._data
    if xd.ndim < 3:
        raise ValueError(f"expected 3D or more input (got {xd.ndim}D input)")
    if use_input_stats:
        size = math.prod(xd.shape[2:])
        if size == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"torch.Size({list(xd.shape)})")
    N, C = xd.shape[0], xd.shape[1]
    x = input.reshape((1, N * C) + tuple(xd.shape[2:]))
    rm = _wrap(_xp(xd).tile(running_mean._data, N)) if running_mean is not None else None
    rv = _wrap(_xp(xd).tile(running_var._data, N)) if running_var is not None else None
    w = weight.repeat(N) if weight is not None else None
    b = bias.repeat(N) if bias is not None else None
    out = _batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps, None)
    if use_input_stats:
        for run, rep in ((running_mean, rm), (running_var, rv)):
            if run is not None:
                run._data[...] = rep._data.reshape(N, C).mean(axis=0).astype(run._data.dtype, copy=False)
                run._bump_version()
    return out.reshape(xd.shape)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over each group of num_groups channel groups (and all spatial positions), per sample."""
    xd = input._data
    if xd.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {xd.ndim}")
    C = xd.shape[1]
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(xd.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t._data.ndim != 1 or t._data.size != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t._data.shape)} and input of shape {list(xd.shape)}")
    if input.dtype in (_dtype.bfloat16, _dtype.float16) and any(
            t is not None and t.dtype == _dtype.float32 for t in (weight, bias)):
        # PyTorch's mixed-dtype CPU kernel (a bf16 activation through a float32 GroupNorm, as under autocast):
        # statistics and affine in float32, the result in the input's dtype.
        return group_norm(input.float(), num_groups, weight, bias, eps).to(input.dtype)
    arrays = [xd] + [t._data for t in (weight, bias) if t is not None]
    if xd.size >= _cpu.MIN_SIZE and _fusable(*arrays):
        return _group_norm_fused(input, num_groups, weight, bias, eps)
    return _group_norm_composite(input, num_groups, weight, bias, eps)


def _fusable(*arrays) -> bool:
    """C-contiguous float32/float64 NumPy arrays of one dtype: what the fused CPU kernels take."""
    first = arrays[0]
    return first.dtype in (np.float32, np.float64) and all(
        type(a) is np.ndarray and a.dtype == first.dtype and a.flags.c_contiguous for a in arrays)


def _group_norm_composite(input: Tensor, G: int, weight, bias, eps: float) -> Tensor:
    xd = input._data
    xg = input.reshape(xd.shape[0], G, -1)
    mean = xg.mean(-1, keepdim=True)
    xc = xg - mean
    var = (xc * xc).mean(-1, keepdim=True)
    y = (xc * (var + eps).rsqrt()).reshape(xd.shape)
    aff = (1, xd.shape[1]) + (1,) * (xd.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(aff)
    if bias is not None:
        y = y + bias.reshape(aff)
    return y


def _group_norm_backward_composite(g: Tensor, input: Tensor, G: int, weight, bias, eps: float):
    """GroupNorm's gradients (input, then weight and bias when given) with the statistics recomputed from the
    input by tensor ops, so that create_graph sees how they depend on it."""
    N, C = input.shape[0], input.shape[1]
    xg, gg = input.reshape(N, G, C // G, -1), g.reshape(N, G, C // G, -1)
    mu = xg.mean((2, 3), keepdim=True)
    xc = xg - mu
    rs = ((xc * xc).mean((2, 3), keepdim=True) + eps).rsqrt()
    xhat = xc * rs
    gw = gg * weight.reshape(1, G, C // G, 1) if weight is not None else gg
    dx = rs * (gw - gw.mean((2, 3), keepdim=True) - xhat * (gw * xhat).mean((2, 3), keepdim=True))
    grads = [dx.reshape(input.shape) if input._requires_grad else None]
    if weight is not None:
        grads.append((gg * xhat).sum((0, 3)).reshape(C) if weight._requires_grad else None)
    if bias is not None:
        grads.append(gg.sum((0, 3)).reshape(C) if bias._requires_grad else None)
    return tuple(grads) if len(grads) > 1 else grads[0]


def _group_norm_fused(input: Tensor, G: int, weight, bias, eps: float) -> Tensor:
    """GroupNorm in one C++ pass per (sample, group) (csrc/kernels/group_norm.cpp), with PyTorch's
    NativeGroupNormBackward0; under create_graph the backward is the composite's, so it is differentiable."""
    x = input._data
    N, C = x.shape[0], x.shape[1]
    w = weight._data if weight is not None else None
    b = bias._data if bias is not None else None
    out = np.empty_like(x)
    mean, rstd = np.empty(N * G, x.dtype), np.empty(N * G, x.dtype)
    _C._cpu.group_norm(x, N, C, G, w, b, eps, out, mean, rstd)
    y = _wrap(out)
    if needs_grad(input, weight, bias):
        def group_norm_backward(g):
            if _grad_enabled():  # create_graph: the same gradients from tensor ops, themselves differentiable
                return _group_norm_backward_composite(g, input, G, weight, bias, eps)
            gd = np.ascontiguousarray(g._data, dtype=x.dtype)
            dx = np.empty_like(x) if input._requires_grad else None
            ds, db = np.empty((N, C), x.dtype), np.empty((N, C), x.dtype)
            _C._cpu.group_norm_backward(gd, x, N, C, G, w, mean, rstd, dx, ds, db)
            grads = [_wrap(dx) if dx is not None else None]
            if weight is not None:
                mu_c, rs_c = np.repeat(mean.reshape(N, G), C // G, 1), np.repeat(rstd.reshape(N, G), C // G, 1)
                grads.append(_wrap(((ds - db * mu_c) * rs_c).sum(0).astype(x.dtype)) if weight._requires_grad
                             else None)
            if bias is not None:
                grads.append(_wrap(db.sum(0).astype(x.dtype)) if bias._requires_grad else None)
            return tuple(grads) if len(grads) > 1 else grads[0]
        inputs = (input,) + tuple(t for t in (weight, bias) if t is not None)
        record("NativeGroupNormBackward0", group_norm_backward, y, inputs)
    return y


def _eps_of(dtype) -> float:
    try:
        return float(np.finfo(dtype.np).eps)
    except (ValueError, TypeError):
        import ml_dtypes
        return float(ml_dtypes.finfo(dtype.np).eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing normalized_shape dims, times weight (eps None: dtype's eps)."""
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    shape = tuple(input._data.shape)
    k = len(ns)
    if k == 0 or len(shape) < k or shape[len(shape) - k:] != ns:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size{list(shape)}")
    if weight is not None and tuple(weight._data.shape) != ns:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight._data.shape)} and normalized_shape = {list(ns)}")
    if eps is None:
        eps = _eps_of(input.dtype)
    dims = tuple(range(-k, 0))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y * weight if weight is not None else y


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels) ** beta."""
    from .nn import pad
    from .pooling import avg_pool2d
    dim = input._data.ndim
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input._data.size == 0:
        return input
    sizes = tuple(input._data.shape)
    div = input * input
    div = div.reshape(sizes[0], 1, sizes[1], -1)  # channels become the pooled "height"
    div = pad(div, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(div, (size, 1), stride=1).reshape(sizes)
    div = (div * alpha + k) ** beta
    return input / div


__all__ = ["batch_norm", "instance_norm", "group_norm", "rms_norm", "local_response_norm", "sync_batch_norm"]
