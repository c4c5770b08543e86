"""CUDA kernels for the fused ops, compiled at run time by CuPy (NVRTC) from the .cu sources.

The sources live in the installed package (tinytorch/kernels/, copied there by setup.py) or, for an
editable install, in the repository's src/. Each module is compiled once per device and cached.
Imported only when a CUDA tensor reaches a fused op. Every wrapper takes CuPy arrays, computes in
float32 (float16 inputs are upcast, then the results cast back) and returns new arrays.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np

from ._device import cupy

_lock = threading.Lock()
_modules: dict = {}


def _source_path(name: str) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.join(here, "kernels"), os.path.join(here, os.pardir, os.pardir, "src")):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise RuntimeError(f"tinytorch: CUDA kernel source {name} not found in tinytorch/kernels/ or src/; "
                       "reinstall tinytorch (pip install .) so that setup.py copies src/*.cu into the package")


def _function(file: str, name: str):
    """The compiled kernel `name` from src/`file`, for the current device."""
    cp = cupy()
    key = (file, cp.cuda.runtime.getDevice())
    mod = _modules.get(key)
    if mod is None:
        with _lock:
            mod = _modules.get(key)
            if mod is None:
                with open(_source_path(file)) as f:
                    code = f.read()
                mod = cp.RawModule(code=code, options=("--std=c++17",))
                _modules[key] = mod
    return mod.get_function(name)


def _f32(a):
    return cupy().ascontiguousarray(a, dtype=np.float32)


def _row_block(n: int) -> int:
    """Threads per block for one-row-per-block kernels: enough to cover short rows, at most 256."""
    for b in (32, 64, 128):
        if n <= b:
            return b
    return 256


def _grid_1d(n: int, block: int = 256) -> int:
    return max(1, min((n + block - 1) // block, 65535 * 8))


def softmax_forward(x, log: bool, safe: bool = False):
    """softmax (or log_softmax) over the last dim of a contiguous CuPy array."""
    n = x.shape[-1]
    rows = x.size // n
    xf = _f32(x)
    y = cupy().empty_like(xf)
    _function("softmax.cu", "softmax_forward")(
        (rows,), (_row_block(n),), (xf, y, np.int64(rows), np.int32(n), np.int32(log), np.int32(safe)))
    return y.astype(x.dtype, copy=False)


def softmax_backward(y, g, log: bool):
    """The input gradient of softmax (or log_softmax) from its output y and the output gradient g."""
    n = y.shape[-1]
    rows = y.size // n
    yf, gf = _f32(y), _f32(g)
    dx = cupy().empty_like(yf)
    _function("softmax.cu", "softmax_backward")(
        (rows,), (_row_block(n),), (yf, gf, dx, np.int64(rows), np.int32(n), np.int32(log)))
    return dx.astype(y.dtype, copy=False)


def layer_norm_forward(x2, w, b, eps: float):
    """LayerNorm of the rows of a 2-D array: (y, mean, rstd), mean and rstd as (rows, 1) float32."""
    cp = cupy()
    rows, n = x2.shape
    xf = _f32(x2)
    dummy = cp.empty(1, np.float32)
    wf = _f32(w) if w is not None else dummy
    bf = _f32(b) if b is not None else dummy
    y = cp.empty_like(xf)
    mean = cp.empty((rows, 1), np.float32)
    rstd = cp.empty((rows, 1), np.float32)
    _function("layer_norm.cu", "layer_norm_forward")(
        (rows,), (_row_block(n),), (xf, wf, bf, y, mean, rstd, np.int64(rows), np.int32(n), np.float32(eps),
                                    np.int32(w is not None), np.int32(b is not None)))
    return y.astype(x2.dtype, copy=False), mean, rstd


def layer_norm_backward(x2, g2, w, mean, rstd):
    """(dx, dw, db) of LayerNorm on rows, from the forward's saved mean and rstd."""
    cp = cupy()
    rows, n = x2.shape
    xf, gf = _f32(x2), _f32(g2)
    wf = _f32(w) if w is not None else cp.empty(1, np.float32)
    m, r = _f32(mean), _f32(rstd)
    dx = cp.empty_like(xf)
    _function("layer_norm.cu", "layer_norm_backward_input")(
        (rows,), (_row_block(n),), (xf, gf, wf, m, r, dx, np.int64(rows), np.int32(n), np.int32(w is not None)))
    dw = cp.empty(n, np.float32)
    db = cp.empty(n, np.float32)
    _function("layer_norm.cu", "layer_norm_backward_params")(
        ((n + 255) // 256,), (256,), (xf, gf, m, r, dw, db, np.int64(rows), np.int32(n)))
    return dx, dw, db


def cross_entropy_forward(x2, target, u):
    """Per row of logits: (logsumexp, lse - x[target], sum_c u_c (lse - x_c)); the last is None without u."""
    cp = cupy()
    rows, C = x2.shape
    xf = _f32(x2)
    t = cp.ascontiguousarray(target, dtype=np.int64)
    uf = _f32(u) if u is not None else cp.empty(1, np.float32)
    lse = cp.empty(rows, np.float32)
    nll = cp.empty(rows, np.float32)
    smooth = cp.empty(rows, np.float32)
    _function("cross_entropy.cu", "cross_entropy_forward")(
        (rows,), (_row_block(C),), (xf, t, uf, np.int32(u is not None), lse, nll, smooth, np.int64(rows),
                                    np.int32(C)))
    return lse, nll, (smooth if u is not None else None)


def cross_entropy_backward(x2, lse, target, cs, cb, cr, u):
    """dx = softmax(x) * cs - onehot(target) * cb - cr * u, with per-row coefficients cs, cb, cr."""
    cp = cupy()
    rows, C = x2.shape

    def per_row(c):
        return cp.ascontiguousarray(cp.broadcast_to(cp.asarray(c, dtype=np.float32), (rows,)))
    xf = _f32(x2)
    t = cp.ascontiguousarray(target, dtype=np.int64)
    has_u = u is not None
    uf = _f32(u) if has_u else cp.empty(1, np.float32)
    crf = per_row(cr) if has_u else cp.empty(1, np.float32)
    dx = cp.empty_like(xf)
    total = rows * C
    _function("cross_entropy.cu", "cross_entropy_backward")(
        (_grid_1d(total),), (256,), (xf, _f32(lse), t, per_row(cs), per_row(cb), crf, uf, np.int32(has_u), dx,
                                     np.int64(rows), np.int32(C)))
    return dx


def gelu_forward(x, tanh_approx: bool):
    """GELU of a CuPy array (exact with erff, or the tanh approximation)."""
    xf = _f32(x)
    y = cupy().empty_like(xf)
    _function("gelu.cu", "gelu_forward")((_grid_1d(xf.size),), (256,), (xf, y, np.int64(xf.size),
                                                                        np.int32(tanh_approx)))
    return y.reshape(x.shape).astype(x.dtype, copy=False)


def gelu_backward(x, g, tanh_approx: bool):
    """g * GELU'(x)."""
    xf, gf = _f32(x), _f32(g)
    dx = cupy().empty_like(xf)
    _function("gelu.cu", "gelu_backward")((_grid_1d(xf.size),), (256,), (xf, gf, dx, np.int64(xf.size),
                                                                         np.int32(tanh_approx)))
    return dx.reshape(x.shape).astype(x.dtype, copy=False)


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr: float, beta1: float, beta2: float, eps: float,
               weight_decay: float, step: int) -> None:
    """One AdamW update, in place on contiguous float32 CuPy arrays param, exp_avg and exp_avg_sq."""
    for name, a in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if a.dtype != np.float32 or not a.flags.c_contiguous:
            raise RuntimeError(f"adamw_step: {name} must be a contiguous float32 CUDA array")
    g = _f32(grad)
    n = param.size
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
    _function("adamw.cu", "adamw_step")(
        (_grid_1d(n),), (256,), (param, g, exp_avg, exp_avg_sq, np.int64(n), np.float32(lr), np.float32(beta1),
                                 np.float32(beta2), np.float32(eps), np.float32(weight_decay), np.float32(bc1),
                                 np.float32(bc2_sqrt)))


_UNSCALE = {np.dtype(np.float32): "amp_unscale_f32", np.dtype(np.float64): "amp_unscale_f64",
            np.dtype(np.float16): "amp_unscale_f16"}
_UNSCALE_CHUNK = 65536  # elements per block: CHUNK in src/amp_unscale.cu


def amp_unscale_(grads: list, inv_scale: float, found_inf) -> list:
    """GradScaler's unscale: multiply the contiguous float32/float64/float16 CuPy arrays in grads by inv_scale
    in place, one launch per dtype, setting found_inf (a float32 CuPy scalar) to 1 if any held inf/NaN.
    Returns the arrays it did not take (other dtypes, strided), for the caller's per-array path."""
    cp = cupy()
    rest: list = []
    by_dtype: dict = {}
    for g in grads:
        if g.size == 0:
            continue
        if g.dtype in _UNSCALE and g.flags.c_contiguous:
            by_dtype.setdefault(g.dtype, []).append(g)
        else:
            rest.append(g)
    for dt, arrs in by_dtype.items():
        # The chunk table (which tensor, where in it) is built on the host from the sizes: nothing is read
        # back from the device.
        sizes = np.array([a.size for a in arrs], np.int64)
        chunks = -(-sizes // _UNSCALE_CHUNK)
        first = np.cumsum(chunks) - chunks
        chunk_tensor = np.repeat(np.arange(len(arrs), dtype=np.int32), chunks)
        chunk_start = (np.arange(int(chunks.sum()), dtype=np.int64) - np.repeat(first, chunks)) * _UNSCALE_CHUNK
        ptrs = np.array([a.data.ptr for a in arrs], np.uint64)
        _function("amp_unscale.cu", _UNSCALE[dt])(
            (int(chunks.sum()),), (256,), (cp.asarray(ptrs), cp.asarray(sizes), cp.asarray(chunk_tensor),
                                          cp.asarray(chunk_start), np.float32(inv_scale), found_inf))
    return rest
