"""The fused CPU kernels (tinytorch._C._cpu) against straightforward NumPy/math references."""
import math

import numpy as np
import pytest

from tinytorch._C import _cpu

ERF = np.vectorize(math.erf, otypes=[np.float64])


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("n", [0, 1, 1000, 200_001])  # the last one runs on several threads
def test_gelu_and_erf_match_math(dtype, tol, n):
    x = np.random.default_rng(0).standard_normal(n).astype(dtype) * 3
    out = np.empty_like(x)
    _cpu.erf(x, out)
    assert np.allclose(out, ERF(x.astype(np.float64)), atol=tol, rtol=0)
    _cpu.gelu(x, out, False)
    assert np.allclose(out, 0.5 * x * (1 + ERF(x.astype(np.float64) / math.sqrt(2))), atol=tol * 4, rtol=tol)
    _cpu.gelu(x, out, True)
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)
    assert np.allclose(out, 0.5 * x * (1 + np.tanh(inner)), atol=tol * 4, rtol=tol)


@pytest.mark.parametrize("approx", [False, True])
def test_gelu_backward_is_the_derivative(approx):
    x = np.linspace(-4, 4, 101)
    g = np.random.default_rng(1).standard_normal(101)
    out = np.empty_like(x)
    _cpu.gelu_backward(g, x, out, approx)
    eps = 1e-6
    hi, lo = np.empty_like(x), np.empty_like(x)
    _cpu.gelu(x + eps, hi, approx)
    _cpu.gelu(x - eps, lo, approx)
    assert np.allclose(out, g * (hi - lo) / (2 * eps), atol=1e-8)


def test_gelu_backward_float32_matches_the_float64_formula():
    """float32's backward computes exp inline (not the library's): within float32 rounding of the exact
    derivative over the whole range, 0 where exp underflows, NaN at +-inf and NaN as PyTorch gives."""
    x = np.concatenate([np.linspace(-30, 30, 120_001), [-88.0, 88.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    out = np.empty_like(x)
    _cpu.gelu_backward(np.ones_like(x), x, out, False)
    xd = x[:-3].astype(np.float64)
    exact = 0.5 * (1 + ERF(xd / math.sqrt(2))) + xd / math.sqrt(2 * math.pi) * np.exp(-0.5 * xd * xd)
    assert np.allclose(out[:-3], exact, atol=3e-7, rtol=1e-6)
    assert np.isnan(out[-3:]).all()


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_adamw_step_matches_the_formula_over_a_list_of_tensors(amsgrad, threads):
    # Sizes around the grain (32768) so that a chunk ends inside one tensor and starts inside the next, and each
    # tensor with its own step count, as parameters added to a group later have.
    rng = np.random.default_rng(2)
    sizes, steps = [50, 40000, 3, 70000, 0, 9], [3.0, 1.0, 7.0, 2.0, 5.0, 4.0]
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    ps, gs = [rng.standard_normal(n) for n in sizes], [rng.standard_normal(n) for n in sizes]
    ms, vs = [rng.standard_normal(n) * 0.1 for n in sizes], [rng.random(n) * 0.1 for n in sizes]
    vmaxs = [v * 1.5 for v in vs] if amsgrad else None
    want = []
    for i, (p, g, m, v, step) in enumerate(zip(ps, gs, ms, vs, steps)):
        exp_m = m + (g - m) * (1 - b1)
        exp_v = v * b2 + g * g * (1 - b2)
        second = np.maximum(vmaxs[i], exp_v) if amsgrad else exp_v
        exp_p = p * (1 - lr * wd) - lr / (1 - b1 ** step) * exp_m / (np.sqrt(second) / math.sqrt(1 - b2 ** step) + eps)
        want.append((exp_p, exp_m, exp_v))
    _cpu.adamw_step(ps, gs, ms, vs, vmaxs, steps, lr, b1, b2, eps, wd, False, threads)
    for (exp_p, exp_m, exp_v), p, m, v in zip(want, ps, ms, vs):
        assert np.allclose(p, exp_p) and np.allclose(m, exp_m) and np.allclose(v, exp_v)
    with pytest.raises(ValueError, match="expected 6 grads, got 5"):
        _cpu.adamw_step(ps, gs[:5], ms, vs, None, steps, lr, b1, b2, eps, wd, False)
    with pytest.raises(ValueError, match="expected 50 elements, got 40000"):
        _cpu.adamw_step(ps, gs[1:] + gs[:1], ms, vs, None, steps, lr, b1, b2, eps, wd, False)
    with pytest.raises(TypeError, match="share one dtype"):
        _cpu.adamw_step(ps, [g.astype(np.float32) for g in gs], ms, vs, None, steps, lr, b1, b2, eps, wd, False)


@pytest.mark.parametrize("threads", [1, 2])
def test_foreach_norm_and_mul_over_a_list_of_tensors(threads):
    import tinytorch
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(n).astype(np.float32) for n in (5, 50000, 0, 40000, 1)]
    before = tinytorch.get_num_threads()
    tinytorch.set_num_threads(threads)
    try:
        out = np.empty(len(xs), np.float32)
        _cpu.foreach_norm(xs, out)
        np.testing.assert_allclose(out, [np.linalg.norm(x.astype(np.float64)) for x in xs], rtol=1e-6)
        want = [x * np.float32(0.3) for x in xs]
        _cpu.foreach_mul_(xs, 0.3)
        for x, w in zip(xs, want):
            np.testing.assert_array_equal(x, w)
    finally:
        tinytorch.set_num_threads(before)
    with pytest.raises(ValueError, match="expected 5 elements, got 4"):
        _cpu.foreach_norm(xs, np.empty(4, np.float32))
    with pytest.raises(TypeError, match="must hold NumPy arrays"):
        _cpu.foreach_mul_([xs[0], [1.0, 2.0]], 2.0)


def test_kernels_reject_bad_arrays():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        _cpu.erf(np.ones(4, np.int64), np.ones(4, np.int64))
    with pytest.raises(TypeError, match="share one dtype"):
        _cpu.erf(x, np.ones(4, np.float64))
    with pytest.raises(ValueError, match="expected 4 elements, got 5"):
        _cpu.erf(x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        _cpu.erf(np.ones((4, 4), np.float32).T, np.ones((4, 4), np.float32))
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _cpu.erf(x, ro)


@pytest.mark.parametrize("approx", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_forward_writes_the_slope_the_backward_computes(approx, dtype):
    """The slope written beside GELU(x) is the backward's GELU'(x) to rounding (the autograd backward multiplies
    by it instead of evaluating erf again; fast-math may fuse the two loops' multiply-adds differently), NaN and
    infinities included; GELU(x) itself is unchanged."""
    x = np.concatenate([np.linspace(-12, 12, 200_001), [np.inf, -np.inf, np.nan, 0.0]]).astype(dtype)
    y, y_alone, slope, d = (np.empty_like(x) for _ in range(4))
    _cpu.gelu(x, y, approx, 2, slope)
    _cpu.gelu(x, y_alone, approx, 2)
    _cpu.gelu_backward(np.ones_like(x), x, d, approx, 2)
    assert np.array_equal(y, y_alone, equal_nan=True)
    assert np.array_equal(np.isnan(slope), np.isnan(d))
    eps = np.finfo(dtype).eps
    assert np.allclose(slope, d, rtol=4 * eps, atol=4 * eps, equal_nan=True)  # the slope is within [-0.17, 1.13]
    with pytest.raises(ValueError, match="expected 200005 elements, got 3"):
        _cpu.gelu(x, y, approx, 1, np.empty(3, dtype))


def _cross_entropy_reference(x, t, u):
    m = x.max(1, keepdims=True)
    with np.errstate(invalid="ignore"):
        lse = (np.log(np.exp(x - m).sum(1, keepdims=True)) + m)[:, 0]
    return lse, lse - x[np.arange(len(t)), t], lse * u.sum() - x @ u


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("threads", [1, 2])
def test_cross_entropy_rows_match_the_formulas_with_nan_and_inf_rows(dtype, tol, threads):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((1000, 67)) * 5).astype(dtype)  # 67k elements: both threads get rows
    x[3, 7] = np.nan                                          # NaN anywhere: the row's loss and gradient NaN
    x[4, 0] = np.inf                                          # +inf: NaN, as PyTorch's log_softmax gives
    x[5] = -np.inf                                            # all -inf: NaN
    x[6, 1:] = -np.inf                                        # -inf beside finite logits: exp 0, finite loss
    t = rng.integers(0, 67, 1000)
    u = (rng.random(67) * 0.1).astype(dtype)
    lse, nll, smooth = (np.empty(1000, dtype) for _ in range(3))
    _cpu.cross_entropy_forward(x, t, u, lse, nll, smooth, threads)
    want = _cross_entropy_reference(x.astype(np.float64), t, u.astype(np.float64))
    bad = np.zeros(1000, bool)
    bad[[3, 4, 5]] = True
    for got, w in zip((lse, nll, smooth), want):
        assert np.isnan(got[bad]).all()
        assert np.allclose(got[~bad][np.isfinite(w[~bad])], w[~bad][np.isfinite(w[~bad])], rtol=tol, atol=tol)
    lse2, nll2 = np.empty(1000, dtype), np.empty(1000, dtype)
    _cpu.cross_entropy_forward(x, t, None, lse2, nll2, None, threads)
    assert np.array_equal(lse, lse2, equal_nan=True) and np.array_equal(nll, nll2, equal_nan=True)

    cs, cb, cr = (rng.random(1000).astype(dtype) for _ in range(3))
    dx = np.empty_like(x)
    _cpu.cross_entropy_backward(x, lse, t, cs, cb, cr, u, dx, threads)
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want_dx = np.exp(xd - lse.astype(np.float64)[:, None]) * cs[:, None] - cr[:, None] * u
    want_dx[np.arange(1000), t] -= cb
    assert np.isnan(dx[bad]).all()
    assert np.allclose(dx[~bad], want_dx[~bad], rtol=tol * 10, atol=tol * 10)


def test_cross_entropy_kernels_reject_bad_arrays():
    x, lse, nll = np.zeros((4, 3), np.float32), np.empty(4, np.float32), np.empty(4, np.float32)
    with pytest.raises(IndexError, match="target out of range"):
        _cpu.cross_entropy_forward(x, np.array([0, 1, 2, 3]), None, lse, nll, None)
    with pytest.raises(TypeError, match="4 contiguous int64 targets"):
        _cpu.cross_entropy_forward(x, np.zeros(4, np.int32), None, lse, nll, None)
    with pytest.raises(ValueError, match="expected 4 elements, got 3"):
        _cpu.cross_entropy_forward(x, np.zeros(4, np.int64), None, lse, np.empty(3, np.float32), None)
    with pytest.raises(ValueError, match="smooth goes with u"):
        _cpu.cross_entropy_forward(x, np.zeros(4, np.int64), np.ones(3, np.float32), lse, nll, None)
    with pytest.raises(ValueError, match="rows, classes > 0"):
        _cpu.cross_entropy_forward(np.zeros((4, 0), np.float32), np.zeros(4, np.int64), None, lse, nll, None)


def _softmax_reference(x, log):
    m = x.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        z = x - m
        s = np.exp(z).sum(axis=-1, keepdims=True)
        return z - np.log(s) if log else np.exp(z) / s


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_matches_the_formula_with_masked_and_nan_rows(dtype, tol, log, threads):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((300, 129)) * 4).astype(dtype)
    x[:, 100:] = -np.inf                    # masked positions: exactly 0 (or -inf) in the output
    x[5] = -np.inf                          # a fully masked row: NaN, as in PyTorch
    x[6, 3] = np.nan                        # NaN anywhere in a row: the whole row NaN
    x[7, 0] = np.inf                        # +inf: NaN (inf - inf)
    x[8, 1] = -1000                         # far below the row max: 0, never a denormal
    out = np.empty_like(x)
    _cpu.softmax(x, out, log, threads)
    want = _softmax_reference(x.astype(np.float64), log)
    if not log:
        want[np.abs(want) < np.finfo(dtype).tiny] = 0
    assert np.array_equal(np.isnan(out), np.isnan(want))
    assert np.allclose(out, want, atol=tol, rtol=tol, equal_nan=True)
    if not log:
        assert (out[:, 100:][~np.isnan(out[:, 100:])] == 0).all()

    g = rng.standard_normal(x.shape).astype(dtype)
    dx = np.empty_like(x)
    _cpu.softmax_backward(out, g, dx, log, threads)
    y = out.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want_dx = g - np.exp(y) * g.sum(-1, keepdims=True) if log else y * (g - (g * y).sum(-1, keepdims=True))
    ok = ~np.isnan(want_dx).any(-1)
    assert np.allclose(dx[ok], want_dx[ok], atol=tol * 10, rtol=tol * 10)
    assert np.isnan(dx[~ok]).all()


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_forward_and_backward_match_the_formulas(dtype, tol, affine, threads):
    rng = np.random.default_rng(4)
    rows, n, eps = 700, 96, 1e-5
    x = (rng.standard_normal((rows, n)) * 3 + 1).astype(dtype)
    w = rng.standard_normal(n).astype(dtype) if affine else None
    b = rng.standard_normal(n).astype(dtype) if affine else None
    y, mean, rstd = np.empty_like(x), np.empty(rows, dtype), np.empty(rows, dtype)
    _cpu.layer_norm(x, n, w, b, eps, y, mean, rstd, threads)
    x64 = x.astype(np.float64)
    mu = x64.mean(1, keepdims=True)
    rs = 1 / np.sqrt(x64.var(1, keepdims=True) + eps)
    xhat = (x64 - mu) * rs
    want = xhat * w + b if affine else xhat
    assert np.allclose(y, want, atol=tol, rtol=tol)
    assert np.allclose(mean, mu[:, 0], atol=tol) and np.allclose(rstd, rs[:, 0], rtol=tol)

    g = rng.standard_normal(x.shape).astype(dtype)
    dx = np.empty_like(x)
    dw, db = (np.empty(n, dtype), np.empty(n, dtype)) if affine else (None, None)
    _cpu.layer_norm_backward(g, x, n, w, mean, rstd, dx, dw, db, threads)
    gx = g * w if affine else g.astype(np.float64)
    want_dx = rs * (gx - gx.mean(1, keepdims=True) - xhat * (gx * xhat).mean(1, keepdims=True))
    assert np.allclose(dx, want_dx, atol=tol * 10, rtol=tol * 10)
    if affine:
        assert np.allclose(dw, (g * xhat).sum(0), atol=tol * 100, rtol=tol * 10)
        assert np.allclose(db, g.sum(0, dtype=np.float64), atol=tol * 100, rtol=tol * 10)


def test_layer_norm_rejects_bad_shapes():
    x = np.ones((4, 6), np.float32)
    y, mean, rstd = np.empty_like(x), np.empty(4, np.float32), np.empty(4, np.float32)
    with pytest.raises(ValueError, match="24 elements are not rows of 5"):
        _cpu.layer_norm(x, 5, None, None, 1e-5, y, mean, rstd)
    with pytest.raises(ValueError, match="expected 6 elements, got 5"):
        _cpu.layer_norm(x, 6, np.ones(5, np.float32), None, 1e-5, y, mean, rstd)
    with pytest.raises(ValueError, match="expected 4 elements, got 3"):
        _cpu.layer_norm(x, 6, None, None, 1e-5, y, mean[:3], rstd)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_rows_accumulates_repeated_rows(dtype):
    rng = np.random.default_rng(5)
    out = rng.standard_normal((10, 3, 4)).astype(dtype)
    idx = rng.integers(0, 10, 50)
    src = rng.standard_normal((50, 3, 4)).astype(dtype)
    want = out.copy()
    np.add.at(want, idx, src)
    _cpu.index_add_rows(out, idx, src)
    assert np.allclose(out, want)
    with pytest.raises(IndexError, match="index 10 is out of bounds for dimension 0 with size 10"):
        _cpu.index_add_rows(out, np.array([1, 10]), src[:2])
    with pytest.raises(ValueError, match="expected 24 elements, got 12"):
        _cpu.index_add_rows(out, np.array([1, 2]), src[:1])


def test_max_pool_kernel_nan_ties_and_bad_indices():
    x = np.array([[[1.0, 3.0, 3.0], [np.nan, 0.0, 2.0], [5.0, np.nan, 1.0]]], np.float32)
    out, idx = np.empty((1, 2, 2), np.float32), np.empty((1, 2, 2), np.int32)
    _cpu.max_pool2d(x, out, idx, [2, 2], [1, 1], [0, 0], [1, 1])
    # a NaN wins its windows (PyTorch's rule); equal maxima keep the first position
    assert np.isnan(out[0, 0, 0]) and idx[0, 0, 0] == 3 and out[0, 0, 1] == 3.0 and idx[0, 0, 1] == 1
    assert np.isnan(out[0, 1, 0]) and idx[0, 1, 0] == 7  # the last NaN in the window, as PyTorch's scan
    gx = np.empty_like(x)
    _cpu.max_pool2d_backward(np.ones((1, 2, 2), np.float32), idx, gx)
    assert gx.sum() == 4 and gx[0, 0, 1] == 1
    with pytest.raises(ValueError, match="outside the plane"):
        _cpu.max_pool2d_backward(np.ones((1, 2, 2), np.float32), np.full((1, 2, 2), 9, np.int32), gx)
    with pytest.raises(ValueError, match="int32 index"):
        _cpu.max_pool2d(x, out, idx.astype(np.int64), [2, 2], [1, 1], [0, 0], [1, 1])


def test_batch_norm_kernels_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 10)) * 3 + 1
    mean, var = np.empty(3), np.empty(3)
    _cpu.batch_norm_stats(x, mean, var)
    assert np.allclose(mean, x.mean((0, 2))) and np.allclose(var, x.var((0, 2)))
    rstd = 1 / np.sqrt(var + 1e-5)
    w, b, g = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(x.shape)
    y = np.empty_like(x)
    _cpu.batch_norm_apply(x, mean, rstd, w, b, y)
    xhat = (x - mean[:, None]) * rstd[:, None]
    assert np.allclose(y, xhat * w[:, None] + b[:, None])
    dx, dw, db = np.empty_like(x), np.empty(3), np.empty(3)
    _cpu.batch_norm_backward(g, x, mean, rstd, w, True, dx, dw, db)
    n = x.shape[0] * x.shape[2]
    want = (g - g.mean((0, 2))[:, None] - xhat * (g * xhat).mean((0, 2))[:, None]) * (rstd * w)[:, None]
    assert np.allclose(dx, want) and np.allclose(dw, (g * xhat).sum((0, 2))) and np.allclose(db, g.sum((0, 2)))
    assert n == 40
    with pytest.raises(ValueError, match="expected 3 elements"):
        _cpu.batch_norm_apply(x, mean, rstd, np.ones(4), None, y)
    # one-pass moments stay accurate far from zero: mean 1e4, spread 1e-2, in float32
    far = (1e4 + 1e-2 * rng.standard_normal((8, 3, 500))).astype(np.float32)
    m32, v32 = np.empty(3, np.float32), np.empty(3, np.float32)
    _cpu.batch_norm_stats(far, m32, v32)
    ref = far.astype(np.float64)
    assert np.allclose(m32, ref.mean((0, 2)), rtol=1e-7) and np.allclose(v32, ref.var((0, 2)), rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(N, C, L\)"):
        _cpu.batch_norm_stats(x[0], mean, var)


def test_lstm_cell_kernels_match_the_formulas():
    rng = np.random.default_rng(4)
    B, H = 3, 5
    pre = rng.standard_normal((B, 4 * H))
    c = rng.standard_normal((B, H))
    a = pre.copy()
    cn, tc, hn = np.empty((B, H)), np.empty((B, H)), np.empty((B, H))
    _cpu.lstm_cell(a, c, cn, tc, hn)
    sig = 1 / (1 + np.exp(-pre))
    i, f, g, o = sig[:, :H], sig[:, H:2 * H], np.tanh(pre[:, 2 * H:3 * H]), sig[:, 3 * H:]
    assert np.allclose(a, np.concatenate([i, f, g, o], 1))
    assert np.allclose(cn, f * c + i * g) and np.allclose(tc, np.tanh(cn)) and np.allclose(hn, o * tc)
    dh, gy, dc = rng.standard_normal((B, H)), rng.standard_normal((B, H)), rng.standard_normal((B, H))
    dc0 = dc.copy()
    d = np.empty((B, 4 * H))
    _cpu.lstm_cell_backward(a, c, tc, dh, gy, dc, d)
    dht = dh + gy
    dct = dht * o * (1 - tc ** 2) + dc0
    want = np.concatenate([dct * g * i * (1 - i), dct * c * f * (1 - f), dct * i * (1 - g ** 2),
                           dht * tc * o * (1 - o)], 1)
    assert np.allclose(d, want) and np.allclose(dc, dct * f)
    with pytest.raises(ValueError, match=r"gates \(B, 4H\)"):
        _cpu.lstm_cell(a[:, :-1].copy(), c, cn, tc, hn)
