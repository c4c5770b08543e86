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


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adamw_step_matches_the_formula(amsgrad):
    rng = np.random.default_rng(2)
    p, g = rng.standard_normal(50), rng.standard_normal(50)
    m, v = rng.standard_normal(50) * 0.1, rng.random(50) * 0.1
    vmax = v * 1.5 if amsgrad else None
    lr, b1, b2, eps, wd, step = 1e-2, 0.9, 0.999, 1e-8, 0.1, 3.0
    exp_p = p * (1 - lr * wd)
    exp_m = m + (g - m) * (1 - b1)
    exp_v = v * b2 + g * g * (1 - b2)
    second = np.maximum(vmax, exp_v) if amsgrad else exp_v
    exp_p = exp_p - lr / (1 - b1 ** step) * exp_m / (np.sqrt(second) / math.sqrt(1 - b2 ** step) + eps)
    _cpu.adamw_step(p, g, m, v, vmax, lr, b1, b2, eps, wd, step, False)
    assert np.allclose(p, exp_p) and np.allclose(m, exp_m) and np.allclose(v, exp_v)


def test_kernels_reject_bad_arrays():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="float32 or float64"):
        _cpu.erf(np.ones(4, np.int64), np.ones(4, np.int64))
    with pytest.raises(TypeError, match="share one dtype"):
        _cpu.erf(x, np.ones(4, np.float64))
    with pytest.raises(ValueError, match="same number of elements"):
        _cpu.erf(x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        _cpu.erf(np.ones((4, 4), np.float32).T, np.ones((4, 4), np.float32))
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _cpu.erf(x, ro)
