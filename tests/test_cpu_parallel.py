"""The intra-op thread pool and the kernels on it: elementwise ops, sums, casts, copies (csrc/kernels/
elementwise.cpp through _ops/_cpu.py) and the fused attention (csrc/kernels/attention.cpp), at 1 and 2 threads,
float32 and float64, around the grain size, on non-contiguous inputs and with NaN and infinities, against NumPy
references (and the composite attention, and PyTorch when it is importable)."""
import math
import os

import numpy as np
import pytest

import tinytorch
from tinytorch import _C
from tinytorch._ops import _cpu
from tinytorch._tensor import _wrap as _raw  # any NumPy view, negative strides too (from_numpy refuses those, as
#                                            PyTorch's does; tinytorch's own ops make them, e.g. flipped slices)

GRAIN = 1 << 15
# Below two grains NumPy runs the op; at and above, the C++ kernels split it over the pool (3 chunks at 3 grains).
SIZES = [_cpu.MIN_SIZE - 1, _cpu.MIN_SIZE, 3 * GRAIN + 7, 200_003]
TOL = {np.float32: 2e-6, np.float64: 1e-13}


@pytest.fixture(params=[1, 2])
def threads(request):
    before = tinytorch.get_num_threads()
    tinytorch.set_num_threads(request.param)
    assert _C._cpu.get_num_threads() == request.param
    yield request.param
    tinytorch.set_num_threads(before)


def _data(n, dtype, seed=0, special=True):
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype) * 2
    if special and n > 10:
        x[[1, n // 2, n - 2]] = [np.nan, np.inf, -np.inf]
    return x


def _close(got, want, dtype):
    np.testing.assert_allclose(got, want.astype(dtype), rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True)


# ------------------------------------------------------------------ the pool


def test_pool_runs_every_index_once_on_several_threads(threads):
    n = 8 * GRAIN + 3
    x = np.arange(n, dtype=np.float64)
    out = np.empty_like(x)
    _C._cpu.unary(_cpu.NEG, x, out)  # one chunk per thread, each index written once
    assert np.array_equal(out, -x)


def test_set_num_threads_reaches_the_pool():
    before = tinytorch.get_num_threads()
    try:
        for n in (3, 1, 2):
            tinytorch.set_num_threads(n)
            assert tinytorch.get_num_threads() == n == _C._cpu.get_num_threads()
    finally:
        tinytorch.set_num_threads(before)


def test_openblas_stays_on_one_thread_when_the_pool_runs_the_products():
    """One pool per process: with products on the pool, set_num_threads leaves OpenBLAS's own threads at one."""
    import ctypes
    from tinytorch import _threads
    if not _threads.blas_on_pool:
        pytest.skip("NumPy's BLAS has no cblas gemm to call")
    getters = [getattr(ctypes.CDLL(p), n, None) for p in _threads._openblas_paths()
               for n in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads")]
    get = next(g for g in getters if g is not None)
    get.restype = ctypes.c_int
    before = tinytorch.get_num_threads()
    try:
        for n in (2, 3, 1):
            tinytorch.set_num_threads(n)
            assert get() == 1 and _C._cpu.get_num_threads() == n
    finally:
        tinytorch.set_num_threads(before)


def _narrow_operands(dtype):
    rng = np.random.default_rng(3)
    return rng.standard_normal((768, 512)).astype(dtype), rng.standard_normal((512, 128)).astype(dtype)


def _blas_in_child(env_value):
    """Import tinytorch in a fresh interpreter with TINYTORCH_BLAS set (None: unset); its chosen BLAS, a product's
    largest error against float64 NumPy, and stderr."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TINYTORCH_BLAS"}
    if env_value is not None:
        env["TINYTORCH_BLAS"] = env_value
    code = ("import numpy as np, tinytorch as t; from tinytorch import _threads\n"
            "r = np.random.default_rng(0); a = r.standard_normal((300, 200)); b = r.standard_normal((130, 200))\n"
            "errs = [float(np.abs((t.from_numpy(x.astype(d)) @ t.from_numpy(y.astype(d))).double().numpy()\n"
            "        - x @ y).max()) for d in (np.float32, np.float64) for x, y in ((a, b.T), (a.T[:, ::-1].T, b.T),\n"
            "        (b, a.T), (a[:1], b.T))]\n"
            "print(_threads.blas, max(errs), t.backends.mkl.is_available())")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.split(), p.stderr


def _mkl_installed():
    from tinytorch import _threads
    return _threads._mkl_path() is not None


def test_tinytorch_blas_chooses_the_products_library():
    """TINYTORCH_BLAS=openblas keeps NumPy's OpenBLAS; =mkl takes MKL's sequential cblas gemm (or says why it
    cannot); unset takes MKL when its wheel is installed. Products are right through either."""
    from tinytorch import _threads
    if not _threads.blas_on_pool:
        pytest.skip("NumPy's BLAS has no cblas gemm to call")
    rc, out, err = _blas_in_child("openblas")
    assert rc == 0, err
    assert out == ["openblas", out[1], "False"] and float(out[1]) < 1e-3
    rc, out, err = _blas_in_child(None)
    assert rc == 0, err
    assert out[0] == ("mkl" if _mkl_installed() else "openblas") and float(out[1]) < 1e-3
    rc, out, err = _blas_in_child("mkl")
    if _mkl_installed():
        assert rc == 0, err
        assert out == ["mkl", out[1], "True"] and float(out[1]) < 1e-3
    else:
        assert rc != 0 and "TINYTORCH_BLAS=mkl, but the mkl wheel is not installed" in err


def test_mkl_verbose_is_a_context_manager_whatever_the_blas():
    a = tinytorch.randn(40, 30)
    with tinytorch.backends.mkl.verbose(tinytorch.backends.mkl.VERBOSE_OFF):
        np.testing.assert_allclose((a @ a.T).numpy(), a.numpy() @ a.numpy().T, rtol=1e-5, atol=1e-5)


def test_tinytorch_blas_rejects_an_unknown_library():
    rc, _, err = _blas_in_child("atlas")
    assert rc != 0 and "TINYTORCH_BLAS='atlas': expected 'mkl' or 'openblas'" in err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_working_pool():
    tinytorch.set_num_threads(2)
    x = np.ones(4 * GRAIN, np.float32)
    out = np.empty_like(x)
    _C._cpu.unary(_cpu.EXP, x, out)  # the parent's pool threads exist now
    pid = os.fork()
    if pid == 0:  # the child: regions must neither hang nor run on threads that are gone
        ok = True
        for _ in range(20):
            _C._cpu.unary(_cpu.NEG, x, out)
            ok = ok and bool((out == -1).all())
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# ------------------------------------------------------------------ elementwise ops through tensor ops


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_binary_ops_same_shape_scalar_and_trailing_broadcast(threads, dtype, n):
    x, y = _data(n, dtype, 0), _data(n, dtype, 1)
    X, Y = tinytorch.from_numpy(x), tinytorch.from_numpy(y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        for got, want in ((X + Y, x64 + y64), (X - Y, x64 - y64), (X * Y, x64 * y64), (X / Y, x64 / y64),
                          (X + 0.5, x64 + 0.5), (X * 3, x64 * 3), (2.0 - X, 2.0 - x64), (X / 4.0, x64 / 4.0)):
            assert got.dtype == X.dtype
            _close(got.numpy(), want, dtype)
        rows = (n // 16) * 16
        m = x[:rows].reshape(-1, 16)
        b = _data(16, dtype, 2, special=False)
        M, Bt = tinytorch.from_numpy(m), tinytorch.from_numpy(b)
        _close((M + Bt).numpy(), m.astype(np.float64) + b, dtype)
        _close((Bt * M).numpy(), b * m.astype(np.float64), dtype)
        _close((M - Bt.reshape(1, 16)).numpy(), m.astype(np.float64) - b, dtype)


def _regions(fn) -> int:
    """How many regions fn() split over the pool."""
    before = _C._cpu.parallel_regions()
    fn()
    return _C._cpu.parallel_regions() - before


def test_ops_of_four_grains_split_over_the_pool(threads):
    # Same-shape and scalar operands once made one row of the (rows, period) grid and ran on one thread.
    x = tinytorch.from_numpy(_data(4 * GRAIN, np.float32, 0, special=False))
    y = tinytorch.from_numpy(_data(4 * GRAIN, np.float32, 1, special=False))
    splits = threads > 1
    for name, op in [("x + y", lambda: x + y), ("x * 2", lambda: x * 2.0), ("x.add_(y)", lambda: x.add_(y)),
                     ("x.mul_(1)", lambda: x.mul_(1.0)), ("x + row", lambda: x.reshape(-1, 8) + y[:8]),
                     ("x.exp()", lambda: x.exp()), ("x.sum()", lambda: x.sum()), ("x.norm()", lambda: x.norm()),
                     ("x.lerp(y, .3)", lambda: x.lerp(y, 0.3)), ("x.addcmul_(y, y)", lambda: x.addcmul_(y, y))]:
        assert _regions(op) == splits, name
    assert _regions(lambda: x[:GRAIN] + y[:GRAIN]) == 0  # one grain: one thread


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_lerp_addcmul_addcdiv_in_one_pass(threads, dtype, n):
    a, b, c = _data(n, dtype, 0), _data(n, dtype, 1), np.abs(_data(n, dtype, 2, special=False)) + 0.5
    a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
    A, B, C = (tinytorch.from_numpy(v) for v in (a, b, c))
    with np.errstate(all="ignore"):
        for w in (0.25, -0.4, 0.5, 0.8, 1.0, 3):
            want = a64 + w * (b64 - a64) if abs(w) < 0.5 else b64 - (1 - w) * (b64 - a64)  # ATen's two forms
            np.testing.assert_allclose(A.lerp(B, w).numpy(), want.astype(dtype), rtol=4 * TOL[dtype],
                                       atol=4 * TOL[dtype], equal_nan=True)
            _close(A.addcmul(B, C, value=w).numpy(), a64 + w * b64 * c64, dtype)
            _close(A.addcdiv(B, C, value=w).numpy(), a64 + w * b64 / c64, dtype)
        finite = ~np.isnan(a) & ~np.isnan(b) & np.isfinite(b - a)
        assert np.array_equal(A.lerp(B, 1.0).numpy()[finite], b[finite])  # exact at the end, as in ATen
        for name, args, want in [("lerp_", (B, 0.75), b64 - 0.25 * (b64 - a64)),
                                 ("addcmul_", (B, C), a64 + b64 * c64),
                                 ("addcdiv_", (B, C), a64 + b64 / c64)]:
            X = tinytorch.from_numpy(a.copy())
            version = X._version
            kwargs = {} if name == "lerp_" else {"value": 1}
            assert getattr(X, name)(*args, **kwargs) is X and X._version == version + 1
            np.testing.assert_allclose(X.numpy(), want.astype(dtype), rtol=4 * TOL[dtype], atol=4 * TOL[dtype],
                                       equal_nan=True)


def test_lerp_addcmul_addcdiv_record_their_gradients_when_asked():
    a = tinytorch.randn(300, 400, requires_grad=True)
    b, c = tinytorch.randn(300, 400), tinytorch.rand(300, 400) + 0.5
    a.lerp(b, 0.7).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 0.3, rtol=1e-6)
    a.grad = None
    a.addcdiv(b, c, value=2).sum().backward()
    assert (a.grad.numpy() == 1).all()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.addcmul_(b, c)
    with tinytorch.no_grad():
        a.addcmul_(b, c, value=0.5)  # a leaf may be updated in place without recording, as an optimizer does


def test_norms_of_large_arrays_sum_in_float64(threads):
    x = _data(1_000_003, np.float32, special=False) * 1e3
    x64 = x.astype(np.float64)
    X = tinytorch.from_numpy(x)
    np.testing.assert_allclose(X.norm().item(), np.sqrt((x64 * x64).sum()), rtol=2e-7)
    np.testing.assert_allclose(X.sum().item(), x64.sum(), rtol=2e-7, atol=1e-2)
    m = x[:999_999].reshape(333, 3, 1001)
    M, m64 = tinytorch.from_numpy(m), m.astype(np.float64)
    for dim in (None, 0, 2, (1, 2), (0, 1)):
        for keepdim in (False, True):
            got = M.norm(dim=dim, keepdim=keepdim).numpy()
            want = np.sqrt((m64 * m64).sum(axis=dim, keepdims=keepdim))
            np.testing.assert_allclose(got, want, rtol=1e-6)
    y = x.copy()
    y[5] = np.nan
    assert np.isnan(tinytorch.from_numpy(y).norm().item())
    y[5] = np.inf
    assert tinytorch.from_numpy(y).norm().item() == np.inf


def _group_norm_reference(x, G, w, b, g, eps=1e-5):
    """GroupNorm and its gradients in float64 NumPy (the textbook formulas)."""
    N, C = x.shape[:2]
    xg = x.reshape(N, G, -1).astype(np.float64)
    mu, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    xhat = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    aff = (1, C) + (1,) * (x.ndim - 2)
    y = xhat * w.reshape(aff) + b.reshape(aff)
    gw = (g * w.reshape(aff)).reshape(N, G, -1)
    xh = xhat.reshape(N, G, -1)
    dx = (gw - gw.mean(-1, keepdims=True) - xh * (gw * xh).mean(-1, keepdims=True)) / np.sqrt(var + eps)
    axes = (0,) + tuple(range(2, x.ndim))
    return y, dx.reshape(x.shape), (g * xhat).sum(axes), g.sum(axes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, groups", [((4, 64, 16, 16), 8), ((2, 6, 5, 2200), 3), ((3, 32, 1000), 32)])
def test_group_norm_in_one_pass_per_sample_and_group(threads, dtype, shape, groups):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    X, W, B = (tinytorch.tensor(v, requires_grad=True) for v in (x, w, b))
    out = [None]
    assert _regions(lambda: out.__setitem__(0, tinytorch.nn.functional.group_norm(X, groups, W, B))) == (threads > 1)
    assert out[0].grad_fn.name() == "NativeGroupNormBackward0"
    out[0].backward(tinytorch.from_numpy(g))
    want = _group_norm_reference(x, groups, w.astype(np.float64), b.astype(np.float64), g.astype(np.float64))
    tol = 3e-5 if dtype is np.float32 else 1e-10
    for got, ref in zip((out[0].detach().numpy(), X.grad.numpy(), W.grad.numpy(), B.grad.numpy()), want):
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * float(np.abs(ref).max()))
    # without affine, and with only some inputs requiring a gradient
    Xn = tinytorch.tensor(x, requires_grad=True)
    tinytorch.nn.functional.group_norm(Xn, groups).backward(tinytorch.from_numpy(g))
    ones, zeros = np.ones(shape[1]), np.zeros(shape[1])
    np.testing.assert_allclose(Xn.grad.numpy(), _group_norm_reference(x, groups, ones, zeros, g.astype(np.float64))[1],
                               rtol=tol, atol=tol * 10)
    Wo = tinytorch.tensor(w, requires_grad=True)
    tinytorch.nn.functional.group_norm(tinytorch.from_numpy(x), groups, Wo).backward(tinytorch.from_numpy(g))
    np.testing.assert_allclose(Wo.grad.numpy(), want[2], rtol=tol, atol=tol * float(np.abs(want[2]).max()))


def test_group_norm_kernel_gradcheck_and_double_backward(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)  # small enough for gradcheck's full Jacobian, through the kernel
    rng = np.random.default_rng(1)
    x = tinytorch.tensor(rng.standard_normal((2, 6, 3, 2)) * 2 + 1, requires_grad=True)
    w, b = (tinytorch.tensor(rng.standard_normal(6), requires_grad=True) for _ in range(2))
    f = lambda a, ww, bb: tinytorch.nn.functional.group_norm(a, 3, ww, bb)  # noqa: E731
    assert f(x, w, b).grad_fn.name() == "NativeGroupNormBackward0"
    assert tinytorch.autograd.gradcheck(f, (x, w, b))
    assert tinytorch.autograd.gradgradcheck(f, (x, w, b))
    with pytest.raises(ValueError, match="multiple of G"):
        _C._cpu.group_norm(np.ones(12), 2, 6, 4, None, None, 1e-5, np.empty(12), np.empty(8), np.empty(8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_ops_on_the_pool(threads, dtype):
    x, y = _data(200_003, dtype, 0), _data(200_003, dtype, 1)
    X = tinytorch.from_numpy(x.copy())
    with np.errstate(all="ignore"):
        X.add_(tinytorch.from_numpy(y))
        X.mul_(0.5)
        X.div_(tinytorch.from_numpy(y))
        X.sub_(1.0)
        _close(X.numpy(), (x.astype(np.float64) + y) * 0.5 / y - 1.0, dtype)
    z = np.arange(200_003, dtype=dtype)
    Z = tinytorch.from_numpy(z.copy())
    Z[1:].add_(Z[:-1])  # overlapping operands: NumPy's buffered result, not a race between threads
    z[1:] += z[:-1]
    assert np.array_equal(Z.numpy(), z)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_unary_ops_match_numpy(threads, dtype, n):
    x = _data(n, dtype)
    X = tinytorch.from_numpy(x)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        cases = [(-X, -x64), (X.exp(), np.exp(x64)), (X.abs().log(), np.log(np.abs(x64))), (X.tanh(), np.tanh(x64)),
                 (X.sigmoid(), 1 / (1 + np.exp(-x64))), (X.relu(), np.where(np.isnan(x64), x64, np.maximum(x64, 0))),
                 (X.abs().sqrt(), np.sqrt(np.abs(x64))), (X.abs().rsqrt(), 1 / np.sqrt(np.abs(x64))),
                 (X.reciprocal(), 1 / x64), (X.square(), x64 * x64)]
        for got, want in cases:
            assert got.dtype == X.dtype
            np.testing.assert_allclose(got.numpy(), want.astype(dtype), rtol=4 * TOL[dtype], atol=TOL[dtype],
                                       equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_relu_backward_and_where(threads, dtype, n):
    x, g = _data(n, dtype, 0), _data(n, dtype, 1, special=False)
    x[[0, 5]] = [0.0, -0.0]
    X = tinytorch.tensor(x, requires_grad=True)
    X.relu().backward(tinytorch.from_numpy(g))
    want = np.where((x > 0) | np.isnan(x), g, 0)  # PyTorch's threshold_backward: NaN passes the gradient
    assert np.array_equal(X.grad.numpy(), want.astype(dtype))
    cond = x > 0
    y = _data(n, dtype, 2)
    got = tinytorch.where(tinytorch.from_numpy(cond), tinytorch.from_numpy(x), tinytorch.from_numpy(y))
    assert np.array_equal(got.numpy(), np.where(cond, x, y), equal_nan=True)
    got = tinytorch.where(tinytorch.from_numpy(cond), tinytorch.from_numpy(x), 0.0)
    assert np.array_equal(got.numpy(), np.where(cond, x, dtype(0)), equal_nan=True)
    got = tinytorch.where(tinytorch.from_numpy(cond), -1.5, tinytorch.from_numpy(y))  # masked_fill's form
    assert np.array_equal(got.numpy(), np.where(cond, dtype(-1.5), y), equal_nan=True)
    got = _cpu.where(cond, np.asarray(dtype(2)), np.asarray(dtype(-3)))  # both scalars
    if got is not None:
        assert np.array_equal(got, np.where(cond, dtype(2), dtype(-3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_silu_sigmoid_tanh_and_their_gradients_in_one_pass(threads, dtype, n):
    x = _data(n, dtype) * 4
    g = _data(n, dtype, 1, special=False)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(all="ignore"):
        s = 1 / (1 + np.exp(-x64))
        t = np.tanh(x64)
        cases = {"silu": (x64 * s, g64 * s * (1 + x64 * (1 - s))), "sigmoid": (s, g64 * s * (1 - s)),
                 "tanh": (t, g64 * (1 - t * t))}
    for name, (want_y, want_g) in cases.items():
        X = tinytorch.tensor(x, requires_grad=True)
        with np.errstate(all="ignore"):  # below the kernels' size NumPy warns on inf * 0
            Y = getattr(tinytorch.nn.functional, name)(X)
            Y.backward(tinytorch.from_numpy(g))
        for got, want in ((Y.detach().numpy(), want_y), (X.grad.numpy(), want_g)):
            np.testing.assert_allclose(got, want.astype(dtype), rtol=8 * TOL[dtype], atol=8 * TOL[dtype],
                                       equal_nan=True)


def test_fused_activation_gradients_are_gradchecked_and_twice_differentiable(monkeypatch):
    # The kernels take arrays from MIN_SIZE elements; lowered here so that gradcheck's full Jacobian stays small
    # while forward and backward run through them. Under create_graph the backward is the composite.
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    x = tinytorch.tensor(np.random.default_rng(0).standard_normal((6, 7)) * 3, requires_grad=True)
    for f in (tinytorch.nn.functional.silu, tinytorch.sigmoid, tinytorch.tanh):
        assert tinytorch.autograd.gradcheck(f, (x,))
        assert tinytorch.autograd.gradgradcheck(f, (x,))
        (gx,) = tinytorch.autograd.grad(f(x).sum(), x, create_graph=True)
        assert gx.grad_fn is not None


def test_means_over_blocks_of_axes(threads):
    x = _data(6 * GRAIN + 5, np.float32, special=False)
    m = x[:6 * GRAIN].reshape(96, 16, 128)
    M, m64 = tinytorch.from_numpy(m), m.astype(np.float64)
    np.testing.assert_allclose(tinytorch.from_numpy(x).mean().item(), x.astype(np.float64).mean(), rtol=1e-6,
                               atol=1e-7)
    for dim in (None, 0, 2, (1, 2), (0, 1)):
        for keepdim in (False, True):
            got = M.mean(dim, keepdim=keepdim)
            assert got.dtype == tinytorch.float32
            np.testing.assert_allclose(got.numpy(), m64.mean(axis=dim, keepdims=keepdim), rtol=1e-6, atol=1e-7)
    assert _regions(lambda: M.mean()) == (tinytorch.get_num_threads() > 1)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_casts_to_and_from_half_precision_match_numpy_bit_for_bit(threads, half):
    rng = np.random.default_rng(0)
    n = 3 * GRAIN + 7
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-25, 25, n))).astype(np.float32)
    x[:12] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, 65520, 1e-8, 6e-8, 3.4e38, -1e-45]
    dt = getattr(tinytorch, half)
    with np.errstate(all="ignore"):
        want = x.astype(dt.np)
    got = tinytorch.from_numpy(x).to(dt)
    assert got.dtype is dt
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.float().numpy()), nan)  # NaN stays NaN (its payload may differ)
    assert np.array_equal(got.numpy().view(np.uint16)[~nan], want.view(np.uint16)[~nan])  # round to nearest even
    assert np.array_equal(got.float().numpy(), want.astype(np.float32), equal_nan=True)
    assert _regions(lambda: got.float()) == (threads > 1)


@pytest.mark.parametrize("n", SIZES)
def test_casts_copies_and_fills(threads, n):
    x = _data(n, np.float32)
    X = tinytorch.from_numpy(x)
    assert np.array_equal(X.double().numpy(), x.astype(np.float64), equal_nan=True)
    assert np.array_equal(X.double().float().numpy(), x, equal_nan=True)
    rows = n // 7
    m = x[:rows * 7].reshape(rows, 7)
    for view in (m.T, m[::2], m[:, ::-1], m.T[1:5]):
        got = _raw(view).contiguous()
        assert got.numpy().flags.c_contiguous and np.array_equal(got.numpy(), view, equal_nan=True)
        assert np.array_equal(_raw(view).clone().numpy(), view, equal_nan=True)
    dst = np.zeros((7, rows), np.float32).T  # into a strided destination (the conv's column matrix)
    _C._cpu.copy(m, dst)
    assert np.array_equal(dst, m, equal_nan=True)
    i = np.arange(n, dtype=np.int64).reshape(-1, 1)[::3]  # other dtypes copy through the same kernel
    assert np.array_equal(tinytorch.from_numpy(i).clone().numpy(), i)
    z = tinytorch.empty(n).fill_(2.5)
    assert (z.numpy() == 2.5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_sums_over_blocks_of_axes(threads, dtype, n):
    x = _data(n, dtype, special=False)
    X = tinytorch.from_numpy(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(X.sum().item(), x64.sum(), rtol=1e-6 if dtype is np.float32 else 1e-12)
    rows = n // 12
    m = x[:rows * 12].reshape(rows, 3, 4)
    M, m64 = tinytorch.from_numpy(m), m.astype(np.float64)
    for dim in (0, 1, 2, (0, 1), (1, 2)):
        for keepdim in (False, True):
            got = M.sum(dim, keepdim=keepdim).numpy()
            np.testing.assert_allclose(got, m64.sum(axis=dim, keepdims=keepdim), rtol=1e-5, atol=1e-3)
    nan = x.copy()
    nan[7] = np.nan
    assert np.isnan(tinytorch.from_numpy(nan).sum().item())
    inf = x.copy()
    inf[[3, 9]] = [np.inf, -np.inf]
    with np.errstate(invalid="ignore"):  # NumPy's own sum (below two grains) warns on inf - inf
        assert np.isnan(tinytorch.from_numpy(inf).sum().item())


def test_masked_fill_with_a_broadcast_mask_cat_split_and_reshape_copies_on_the_pool(threads):
    # W3's attention: a (T, T) causal mask over (B, H, T, T) scores, q/k/v split from one projection and joined
    # again in split's backward, heads merged back by a reshape that must copy.
    rng = np.random.default_rng(0)
    s = rng.standard_normal((4, 4, 64, 64)).astype(np.float32)
    mask = np.triu(np.ones((64, 64), bool), 1)
    S = tinytorch.tensor(s, requires_grad=True)
    M = tinytorch.from_numpy(mask)
    splits = int(threads > 1)
    out = [None]
    assert _regions(lambda: out.__setitem__(0, S.masked_fill(M, float("-inf")))) == splits
    assert np.array_equal(out[0].detach().numpy(), np.where(mask, np.float32(-np.inf), s))
    assert np.array_equal(S.masked_fill(M[None], 2.0).detach().numpy(), np.where(mask, np.float32(2), s))
    out[0].masked_fill(M, 0.0).sum().backward()
    assert np.array_equal(S.grad.numpy(), np.where(mask, 0, 1).astype(np.float32) * np.ones_like(s))

    qkv = tinytorch.tensor(rng.standard_normal((8, 64, 3 * 128)).astype(np.float32), requires_grad=True)
    q, k, v = qkv.split(128, dim=2)
    g = [rng.standard_normal((8, 64, 128)).astype(np.float32) for _ in range(3)]
    loss = (q * tinytorch.from_numpy(g[0])).sum() + (v * tinytorch.from_numpy(g[2])).sum()  # k gets no gradient
    loss.backward()
    assert np.array_equal(qkv.grad.numpy(), np.concatenate([g[0], np.zeros_like(g[1]), g[2]], axis=2))
    parts = [tinytorch.from_numpy(x) for x in g]
    assert _regions(lambda: out.__setitem__(0, tinytorch.cat(parts, dim=2))) == splits  # out's rows, one region
    assert np.array_equal(out[0].numpy(), np.concatenate(g, axis=2))
    assert _regions(lambda: out.__setitem__(0, tinytorch.cat(parts, dim=0))) == 3 * splits  # one block each
    assert np.array_equal(out[0].numpy(), np.concatenate(g, axis=0))
    mixed = [parts[0], parts[1].transpose(0, 1).contiguous().transpose(0, 1), parts[2]]  # a strided part
    assert np.array_equal(tinytorch.cat(mixed, dim=2).numpy(), np.concatenate(g, axis=2))
    assert np.array_equal(tinytorch.cat(parts, dim=0).numpy(), np.concatenate(g, axis=0))

    heads = tinytorch.tensor(rng.standard_normal((8, 4, 64, 32)).astype(np.float32), requires_grad=True)
    merged_view = heads.transpose(1, 2)
    assert _regions(lambda: out.__setitem__(0, merged_view.reshape(8, 64, 128))) == splits
    merged = out[0]
    assert np.array_equal(merged.detach().numpy(), heads.detach().numpy().transpose(0, 2, 1, 3).reshape(8, 64, 128))
    assert not np.shares_memory(merged.detach().numpy(), heads.detach().numpy())
    assert merged.grad_fn.name() == "UnsafeViewBackward0"
    view = tinytorch.from_numpy(s)[:, ::2].reshape(4, 2, 4096)  # strides allow a view: no copy
    assert np.shares_memory(view.numpy(), s) and view._base is not None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_amax_amin_and_clamp_on_the_pool(threads, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 30, 70)).astype(dtype)
    nan = x.copy()
    nan[3, 7, 11], nan[10, :, 5] = np.nan, np.nan
    for arr in (x, nan):
        X = tinytorch.from_numpy(arr)
        for dim in ((), 0, 2, (0, 1), (1, 2), -1):
            axes = None if dim == () else dim
            for keepdim in (False, True):
                assert np.array_equal(X.amax(dim, keepdim=keepdim).numpy(), arr.max(axis=axes, keepdims=keepdim),
                                      equal_nan=True)
                assert np.array_equal(X.amin(dim, keepdim=keepdim).numpy(), arr.min(axis=axes, keepdims=keepdim),
                                      equal_nan=True)
        assert np.array_equal(X.max().numpy(), arr.max(), equal_nan=True)
        with np.errstate(invalid="ignore"):
            for lo, hi in ((-0.5, 0.5), (None, 0.2), (-0.1, None), (0.5, -0.5), (-math.inf, 1)):
                want = np.minimum(np.maximum(arr, -np.inf if lo is None else lo), np.inf if hi is None else hi)
                assert np.array_equal(X.clamp(lo, hi).numpy(), want.astype(dtype), equal_nan=True)
    splits = int(threads > 1)
    X = tinytorch.tensor(x, requires_grad=True)
    assert _regions(lambda: X.amax(-1)) == splits and _regions(lambda: X.clamp(-1, 1)) == splits
    X.amax(-1).sum().backward()  # the gradient goes to the maxima
    assert np.array_equal(X.grad.numpy(), (x == x.max(-1, keepdims=True)).astype(dtype))
    X.grad = None
    X.clamp(-0.5, 0.5).sum().backward()
    assert np.array_equal(X.grad.numpy(), ((x >= -0.5) & (x <= 0.5)).astype(dtype))


def test_bias_gradient_sums_the_rows(threads):
    x = tinytorch.randn(4096, 32, requires_grad=True)
    b = tinytorch.randn(32, requires_grad=True)
    (x + b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.full(32, 4096.0), rtol=1e-6)


def test_kernels_reject_bad_operands():
    out = np.empty(10, np.float32)
    with pytest.raises(ValueError, match="divides"):
        _C._cpu.binary(_cpu.ADD, np.ones(10, np.float32), np.ones(3, np.float32), out)
    with pytest.raises(TypeError, match="share one dtype"):
        _C._cpu.binary(_cpu.ADD, np.ones(10, np.float32), np.ones(10, np.float64), out)
    with pytest.raises(ValueError, match="unknown op"):
        _C._cpu.unary(99, np.ones(10, np.float32), out)
    with pytest.raises(ValueError, match="A\\*R\\*C"):
        _C._cpu.sum(np.ones(10, np.float32), 2, 3, 1, np.empty(2, np.float32))
    with pytest.raises(TypeError, match="float32 -> float64"):
        _C._cpu.cast(np.ones(10, np.float32), np.empty(10, np.float32))
    with pytest.raises(ValueError, match="unknown op"):
        _C._cpu.ternary(7, *[np.ones(10, np.float32)] * 3, 0.5, out)
    with pytest.raises(ValueError, match="expected 10 elements"):
        _C._cpu.ternary(_cpu.LERP, np.ones(10, np.float32), np.ones(9, np.float32), np.ones(10, np.float32), 0.5, out)
    a = np.ones(1 << 17, np.float32)
    assert _cpu.ternary(_cpu.LERP, a[1:], a[:-1], a[:-1], 0.5, out=a[:-1]) is None  # a shifted alias: not taken


# ------------------------------------------------------------------ batched products


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_products_of_strided_views_and_broadcast_batches(threads, dtype):
    rng = np.random.default_rng(6)
    B, T, H, E = 3, 37, 4, 8
    qkv = rng.standard_normal((B, T, 3 * H * E)).astype(dtype)
    q = qkv[..., :H * E].reshape(B, T, H, E).transpose(0, 2, 1, 3)
    k = qkv[..., H * E:2 * H * E].reshape(B, T, H, E).transpose(0, 2, 1, 3)
    w = rng.standard_normal((E, 5)).astype(dtype)
    cases = [(q, k.swapaxes(-1, -2)), (k.swapaxes(-1, -2), q), (q, w), (w.T[None, None], q.swapaxes(-1, -2)),
             (q[:, :1], k.swapaxes(-1, -2)), (q[:, :, ::-1], w)]
    for a, b in cases:
        A, Bt = _raw(a), _raw(b)
        got = (A @ Bt).numpy()
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype is np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_batched_products_route_by_size_and_library(threads, blas, monkeypatch):
    """Batches of small matrices go to the register-tiled kernel, larger ones to BLAS one matrix per call; with MKL
    the switch comes at 2^17 multiply-adds a matrix instead of 2^22. W3's attention products (128 x 64 x 128,
    strided heads) are right through whichever route they take."""
    from tinytorch import _threads
    from tinytorch._ops import linalg
    if blas == "mkl" and _threads.blas != "mkl":
        pytest.skip("the mkl wheel is not installed")
    if not _threads.blas_on_pool:
        pytest.skip("NumPy's BLAS has no cblas gemm to call")
    monkeypatch.setattr(_threads, "blas", blas)
    calls = []
    for name in ("bmm", "gemm"):
        real = getattr(_C._cpu, name)
        monkeypatch.setattr(linalg._C._cpu, name, lambda *a, _f=real, _n=name: calls.append(_n) or _f(*a))
    rng = np.random.default_rng(11)
    qkv = rng.standard_normal((2, 128, 3 * 4 * 64)).astype(np.float32)
    q, k = (qkv[..., i * 256:(i + 1) * 256].reshape(2, 128, 4, 64).transpose(0, 2, 1, 3) for i in range(2))
    small = rng.standard_normal((16, 32, 32)).astype(np.float32)
    for a, b, route in ((q, k.swapaxes(-1, -2), "gemm" if blas == "mkl" else "bmm"), (small, small, "bmm")):
        calls.clear()
        got = (tinytorch.from_numpy(a) @ tinytorch.from_numpy(b)).numpy()
        assert calls == [route]
        np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=2e-4, atol=2e-3)


def test_batched_products_gradcheck(threads):
    rng = np.random.default_rng(7)  # 16 products of 16 x 16 x 16: just enough work for the pool
    a, b = (tinytorch.tensor(rng.standard_normal((16, 16, 16)), requires_grad=True) for _ in range(2))
    assert tinytorch.autograd.gradcheck(lambda x, y: x @ y, (a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_products_by_blas_on_the_pool(threads, dtype):
    """2-D and batched products split into blocks over the pool, operands read through their strides: plain,
    transposed, sliced, broadcast, single rows and columns, and a layout BLAS cannot take (copied first)."""
    from tinytorch import _threads
    if not _threads.blas_on_pool:
        pytest.skip("NumPy's BLAS has no cblas gemm to call")
    rng = np.random.default_rng(8)
    big = rng.standard_normal((300, 257)).astype(dtype)
    w = rng.standard_normal((129, 257)).astype(dtype)
    cases = [(big, w.T), (big[::2], w.T), (big.T[:100], big[:, :60]), (w, big.T), (big[:1], w.T), (big, w[:1].T),
             (big[:, ::2], rng.standard_normal((129, 40)).astype(dtype)),  # no unit stride: copied for BLAS
             (rng.standard_normal((3, 90, 257)).astype(dtype), w.T),  # a batch against one matrix
             (rng.standard_normal((2, 1, 70, 300)).astype(dtype), rng.standard_normal((4, 300, 80)).astype(dtype))]
    for a, b in cases:
        got = (tinytorch.from_numpy(a) @ tinytorch.from_numpy(b)).numpy()
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=2e-4 if dtype is np.float32 else 1e-12, atol=2e-3)
    x = tinytorch.tensor(rng.standard_normal((6, 20)), requires_grad=True)  # linear's three products
    lin = tinytorch.nn.Linear(20, 7).double()
    assert tinytorch.autograd.gradcheck(lambda t: lin(t), (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_narrow_products_by_the_register_tiled_kernel(threads, dtype, monkeypatch):
    """Tall narrow products (linear's forwards x @ W.T and input gradients g @ W up to 512 columns) run on the
    register-tiled kernel instead of OpenBLAS, weight gradients g.T @ x on BLAS: the same values for ragged row
    counts, flipped, strided and transposed operands, and in linear's forward and backward. (With MKL loaded
    they all go to MKL; the route is taken here as an OpenBLAS install takes it.)"""
    from tinytorch import _threads
    from tinytorch._ops.linalg import _narrow
    assert _narrow(768, 128, 512, *_narrow_operands(dtype)) == (_threads.blas != "mkl")
    monkeypatch.setattr(_threads, "blas", "openblas")
    rng = np.random.default_rng(9)
    g = rng.standard_normal((257, 385)).astype(dtype)
    w = rng.standard_normal((385, 96)).astype(dtype)
    cases = [(g, w), (g[::-1], w), (g, w[::-1]), (rng.standard_normal((600, 2048)).astype(dtype)[::2, :1024],
                                                   rng.standard_normal((1024, 128)).astype(dtype)),
             (g, np.asfortranarray(w)),  # x @ W.T: W.T made row-major once
             (g, rng.standard_normal((385, 256)).astype(dtype)),  # a wider g @ W
             (g[:, :128], rng.standard_normal((256, 128)).astype(dtype).T)]  # a wider x @ W.T, K = 128
    for a, b in cases:
        assert _narrow(a.shape[0], b.shape[1], a.shape[1], a, b)
        got = (_raw(a) @ _raw(b)).numpy()
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=2e-4 if dtype is np.float32 else 1e-12, atol=2e-3)
    assert not _narrow(257, 100, 385, g, w)  # ragged: BLAS
    assert not _narrow(257, 640, 385, g, rng.standard_normal((385, 640)).astype(dtype))  # too wide: BLAS
    assert not _narrow(257, 256, 385, np.asfortranarray(g), rng.standard_normal((385, 256)).astype(dtype))
    assert not _narrow(257, 96, 385, np.asfortranarray(g), np.asfortranarray(w))
    assert not _narrow(100, 96, 385, g[:100], w)  # short: BLAS
    gt = rng.standard_normal((300, 128)).astype(dtype).T  # a weight gradient g.T @ x: BLAS
    assert not _narrow(128, 32, 300, gt, rng.standard_normal((300, 32)).astype(dtype))
    x = tinytorch.tensor(rng.standard_normal((300, 64)).astype(dtype), requires_grad=True)
    lin = tinytorch.nn.Linear(64, 256, bias=False).to(tinytorch.float32 if dtype is np.float32 else tinytorch.float64)
    gy = rng.standard_normal((300, 256)).astype(dtype)
    wd = lin.weight.detach().numpy().astype(np.float64)
    y = lin(x)
    y.backward(tinytorch.from_numpy(gy))
    want = gy.astype(np.float64) @ wd
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=2e-4 if dtype is np.float32 else 1e-12, atol=2e-3)
    head = tinytorch.nn.Linear(256, 96).to(lin.weight.dtype)  # forward: y @ W.T with W.T transposed, plus bias
    y = y.detach()
    out = head(y)
    want = y.numpy().astype(np.float64) @ head.weight.detach().numpy().T + head.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=2e-4 if dtype is np.float32 else 1e-12, atol=2e-3)
    gout = rng.standard_normal((300, 96)).astype(dtype)
    out.backward(tinytorch.from_numpy(gout))  # the weight gradient gout.T @ y
    want = gout.T.astype(np.float64) @ y.numpy()
    np.testing.assert_allclose(head.weight.grad.numpy(), want, rtol=2e-4 if dtype is np.float32 else 1e-12,
                               atol=2e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bmm_kernel_splits_rows_and_transposes_b_once(threads, dtype):
    """One matrix's rows are split into blocks of whole 8-row tiles, as many as a multiple of the thread count,
    and a transposed B is made row-major once for all of them: every row count right, the edges included, with A
    read along its rows or (transposed) down its columns, B in place or copied to padded rows."""
    rng = np.random.default_rng(10)
    for m in (1, 7, 8, 9, 95, 97, 128, 200, 513):
        for a in (rng.standard_normal((m, 150)).astype(dtype), rng.standard_normal((150, m)).astype(dtype).T):
            # B row-major (read in place, or copied to padded rows when they are a multiple of 1 kB apart: 256
            # columns, and a 40-column view of such rows) or transposed (made row-major, padded when its rows would
            # be a multiple of 128 bytes apart: 32 and 256 columns)
            for n in (40, 32, 256):
                for b in (rng.standard_normal((150, n)).astype(dtype), rng.standard_normal((n, 150)).astype(dtype).T,
                          rng.standard_normal((150, 256)).astype(dtype)[:, :n]):
                    out = np.full((m, n), np.nan, dtype)
                    _C._cpu.bmm(a[None], b[None], out[None])
                    np.testing.assert_allclose(out, a.astype(np.float64) @ b,
                                               rtol=2e-4 if dtype is np.float32 else 1e-12, atol=2e-3)
    empty = np.empty((0, 5), dtype)
    _C._cpu.bmm(np.ones((1, 0, 3), dtype), np.ones((1, 3, 5), dtype), empty[None])  # nothing to do, no error


def test_bmm_kernel_rejects_bad_shapes():
    a = np.ones((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="batch dimensions must match"):
        _C._cpu.bmm(a, np.ones((3, 4, 5), np.float32), np.empty((2, 3, 5), np.float32))
    with pytest.raises(ValueError, match="expected a"):
        _C._cpu.bmm(a, np.ones((2, 5, 5), np.float32), np.empty((2, 3, 5), np.float32))
    with pytest.raises(TypeError, match="share one dtype"):
        _C._cpu.bmm(a, np.ones((2, 4, 5), np.float64), np.empty((2, 3, 5), np.float32))
    from tinytorch import _threads
    if _threads.blas_on_pool:
        with pytest.raises(ValueError, match="unit stride"):
            _C._cpu.gemm(a[:, :, ::2], np.ones((2, 2, 5), np.float32), np.empty((2, 3, 5), np.float32))
        with pytest.raises(ValueError, match="K > 0"):
            _C._cpu.gemm(np.ones((3, 0), np.float32), np.ones((0, 5), np.float32), np.empty((3, 5), np.float32))


# ------------------------------------------------------------------ fused attention


def _composite(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v in float64 NumPy; fully masked rows give 0."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    tot = e.sum(-1, keepdims=True)
    return (e / np.where(tot > 0, tot, np.inf)) @ v


def _sdpa(q, k, v, **kw):
    return tinytorch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 8), (3, 70, 16), (1, 2, 33, 4), (40, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_matches_the_formula(threads, dtype, shape, causal):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape[:-2] + (shape[-2] + 3, shape[-1]))
    k = k.astype(dtype)
    v = rng.standard_normal(k.shape[:-1] + (6,)).astype(dtype)
    got = _sdpa(*(tinytorch.from_numpy(a) for a in (q, k, v)), is_causal=causal, scale=0.3)
    np.testing.assert_allclose(got.numpy(), _composite(q, k, v, causal=causal, scale=0.3),
                               rtol=10 * TOL[dtype], atol=10 * TOL[dtype])


def test_fused_attention_takes_split_head_views_and_lays_out_its_output_for_the_merge(threads):
    B, T, H, E = 2, 9, 3, 4
    X = tinytorch.randn(B, T, 3 * H * E)
    q, k, v = (t.view(B, T, H, E).transpose(1, 2) for t in X.split(H * E, dim=2))
    assert not q.is_contiguous()
    y = _sdpa(q, k, v, is_causal=True)
    assert y.transpose(1, 2).is_contiguous()  # (B, L, H, E) in memory: the merge back is a view
    ref = _composite(*(t.numpy() for t in (q, k, v)), causal=True)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reuse_q", [False, True], ids=["q_k_v", "q_as_k"])
def test_attention_writes_split_head_gradients_where_split_joins_them(threads, reuse_q):
    # dq, dk, dv land in one buffer laid out as the projection, so split's backward hands that buffer on instead
    # of concatenating; when one piece is used twice (k = q) the gradients cannot share it and are concatenated.
    B, T, H, E = 2, 9, 3, 4
    rng = np.random.default_rng(5)
    x = rng.standard_normal((B, T, 3 * H * E))
    g = rng.standard_normal((B, T, H * E))
    X = tinytorch.tensor(x, requires_grad=True)
    qkv = X * 1.0
    seen = {}
    qkv.register_hook(lambda grad: seen.setdefault("qkv", grad))
    pieces = qkv.split(H * E, dim=2)
    pieces[0].register_hook(lambda grad: seen.setdefault("q", grad))
    (_split_heads_attention_from(pieces, B, T, H, E, reuse_q) * tinytorch.from_numpy(g)).sum().backward()
    want = _attention_reference_grad(x, g, B, T, H, E, reuse_q)
    np.testing.assert_allclose(X.grad.numpy(), want, rtol=1e-10, atol=1e-12)
    assert np.shares_memory(seen["qkv"].numpy(), seen["q"].numpy()) != reuse_q


def _split_heads_attention_from(pieces, B, T, H, E, reuse_q):
    q, k, v = (t.view(B, T, H, E).transpose(1, 2) for t in pieces)
    if reuse_q:
        k = q
    return _sdpa(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * E)


def _attention_reference_grad(x, g, B, T, H, E, reuse_q):
    # The same function through the composite (unfused) ops, whose split backward always concatenates.
    X = tinytorch.tensor(x, requires_grad=True)
    q, k, v = (t.view(B, T, H, E).transpose(1, 2) for t in X.split(H * E, dim=2))
    if reuse_q:
        k = q
    s = (q @ k.transpose(-2, -1)) / math.sqrt(E)
    s = s.masked_fill(tinytorch.ones(T, T, dtype=tinytorch.bool).triu(1), float("-inf"))
    y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * E)
    (y * tinytorch.from_numpy(g)).sum().backward()
    return X.grad.numpy()


@pytest.mark.parametrize("kind", ["bool", "float", "broadcast_bool"])
def test_fused_attention_masks_and_fully_masked_rows(threads, kind):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 6, 5)) for _ in range(3))
    if kind == "float":
        mask = rng.standard_normal((2, 3, 6, 6))
        mask[0, 1, 2] = -np.inf  # one row with every key masked: 0, not NaN
    else:
        mask = rng.random((6, 6) if kind == "broadcast_bool" else (2, 1, 6, 6)) > 0.4
        mask[..., 3, :] = False
    Q, K, V = (tinytorch.tensor(a, requires_grad=True) for a in (q, k, v))
    y = _sdpa(Q, K, V, attn_mask=tinytorch.from_numpy(mask))
    ref = _composite(q, k, v, mask=mask)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    y.sum().backward()
    for t in (Q, K, V):
        assert np.isfinite(t.grad.numpy()).all()


def test_fused_attention_propagates_nan(threads):
    q = np.random.default_rng(2).standard_normal((1, 2, 4, 8))
    q[0, 1, 2, 3] = np.nan
    y = _sdpa(*(tinytorch.from_numpy(a) for a in (q, q.copy(), q.copy()))).numpy()
    assert np.isnan(y[0, 1]).all()  # every row of that head reads the NaN key or query
    assert np.isfinite(y[0, 0]).all()


def test_fused_causal_attention_never_reads_the_keys_a_row_cannot_see(threads):
    # PyTorch's causal mask replaces the hidden scores: a NaN key reaches only the rows at or after it.
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 1, 40, 8)) for _ in range(3))
    k[0, 0, 35, 0] = np.nan
    y = _sdpa(*(tinytorch.from_numpy(a) for a in (q, k, v)), is_causal=True).numpy()
    assert np.isfinite(y[0, 0, :35]).all() and np.isnan(y[0, 0, 35:]).all()


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_gradcheck(threads, causal):
    rng = np.random.default_rng(3)
    q = tinytorch.tensor(rng.standard_normal((2, 2, 5, 3)), requires_grad=True)
    k = tinytorch.tensor(rng.standard_normal((2, 2, 7, 3)), requires_grad=True)
    v = tinytorch.tensor(rng.standard_normal((2, 2, 7, 4)), requires_grad=True)
    mask = tinytorch.from_numpy(rng.standard_normal((5, 7))) if not causal else None
    assert tinytorch.autograd.gradcheck(lambda a, b, c: _sdpa(a, b, c, attn_mask=mask, is_causal=causal),
                                        (q, k, v))
    assert tinytorch.autograd.gradgradcheck(lambda a, b, c: _sdpa(a, b, c, is_causal=causal), (q, k, v))


def test_fused_attention_backward_matches_the_composite(threads):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 4, 40, 16)).astype(np.float32) for _ in range(3)]
    grads = []
    for fused in (True, False):
        q, k, v = (tinytorch.tensor(a, requires_grad=True) for a in arrays)
        if fused:
            y = _sdpa(q, k, v, is_causal=True)
        else:  # dropout_p > 0 takes the composite path; p -> 0 is not allowed, so compare with it via probs @ v
            from tinytorch._ops.nn import _sdpa_probs
            y = _sdpa_probs(q, k, None, True, 0.25) @ v
        (y * y).sum().backward()
        grads.append([t.grad.numpy() for t in (q, k, v)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_fused_attention_matches_pytorch(threads):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 4, 64, 32)).astype(np.float32) for _ in range(3)]
    out = {}
    for lib in (tinytorch, torch):
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (y * y).sum().backward()
        out[lib.__name__] = [y.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]
    for a, b in zip(out["tinytorch"], out["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ scans and gathers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, dim", [((64, 2048), -1), ((64, 2048), 0), ((8, 300, 40), 1), ((70_000,), 0)])
def test_cumsum_and_its_backward_scan_in_float64(threads, dtype, shape, dim):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype) + 0.25  # a drift: float32 running sums lose digits as they grow
    X = tinytorch.from_numpy(x).requires_grad_()
    want = np.cumsum(x.astype(np.float64), axis=dim)
    got = X.cumsum(dim)
    assert got.dtype == X.dtype
    np.testing.assert_allclose(got.detach().numpy(), want.astype(dtype), rtol=TOL[dtype], atol=TOL[dtype])
    g = rng.standard_normal(shape).astype(dtype)
    got.backward(tinytorch.from_numpy(g))
    rev = np.flip(np.cumsum(np.flip(g.astype(np.float64), dim), axis=dim), dim)
    np.testing.assert_allclose(X.grad.numpy(), rev.astype(dtype), rtol=TOL[dtype], atol=TOL[dtype])
    # rows of scans (or blocks of columns scanned together) split over the pool; one long scan cannot be
    assert _regions(lambda: X.detach().cumsum(dim)) == (threads > 1 and len(shape) > 1)


def test_a_long_float32_cumsum_is_rounded_once_from_float64_sums():
    x = np.full(1 << 20, 0.1, np.float32)
    exact = np.cumsum(x.astype(np.float64))
    got = tinytorch.from_numpy(x).cumsum(0).numpy()
    np.testing.assert_array_equal(got, exact.astype(np.float32))  # PyTorch's CPU cumsum sums float32 in double
    assert abs(float(np.cumsum(x)[-1]) - exact[-1]) > 100 * abs(float(got[-1]) - exact[-1])  # float32 sums drift


def test_cumsum_kernel_gradcheck_and_double_backward(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    x = tinytorch.tensor(np.random.default_rng(0).standard_normal((3, 5, 4)), requires_grad=True)
    for dim in (0, 1, 2):
        assert tinytorch.autograd.gradcheck(lambda t: t.cumsum(dim), (x,))
        assert tinytorch.autograd.gradgradcheck(lambda t: t.cumsum(dim), (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_and_its_scatter_add_backward_on_the_pool(threads, dtype, dim):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((24, 40, 160)) * 100
    x = base.astype(dtype)
    shape = [24, 40, 160]
    shape[dim] = 96  # more picks than the dimension has: repeats, which the backward must add up
    idx = rng.integers(0, x.shape[dim], shape)
    X, I = tinytorch.from_numpy(x), tinytorch.from_numpy(idx)
    got = X.gather(dim, I)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, idx, dim))
    if dtype in (np.float32, np.float64):
        Xg = tinytorch.from_numpy(x.copy()).requires_grad_()
        g = rng.standard_normal(shape).astype(dtype)
        Xg.gather(dim, I).backward(tinytorch.from_numpy(g))
        want = np.zeros(x.shape, np.float64)
        np.add.at(want, tuple(idx if d == dim else np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(3)])
                              for d in range(3)), g.astype(np.float64))
        np.testing.assert_allclose(Xg.grad.numpy(), want.astype(dtype), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    assert _regions(lambda: X.gather(dim, I)) == (threads > 1)


def test_gather_of_a_strided_view_with_a_smaller_index():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 300, 20)).astype(np.float32)
    view = tinytorch.from_numpy(x).transpose(0, 2)[:, ::2]  # (20, 150, 64), no unit stride inside
    idx = rng.integers(0, 150, (10, 120, 60))
    want = np.take_along_axis(view.numpy()[:10, :, :60], idx, 1)
    np.testing.assert_array_equal(view.gather(1, tinytorch.from_numpy(idx)).numpy(), want)


def test_gather_and_scatter_add_name_the_index_out_of_range():
    x = tinytorch.zeros(64, 2048)
    idx = np.zeros((64, 2048), np.int64)
    idx[5, 7] = 2048
    with pytest.raises(RuntimeError, match="index 2048 is out of bounds for dimension 1 with size 2048"):
        x.gather(1, tinytorch.from_numpy(idx))
    idx[5, 7] = -1
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 2048"):
        x.gather(1, tinytorch.from_numpy(idx))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        x.scatter_add(1, tinytorch.from_numpy(idx), tinytorch.ones(64, 2048))


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add_forward_on_the_kernel(threads, dim):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((96, 1024))
    src = rng.standard_normal((96, 1200))  # larger than the index: only its leading part is read
    idx = rng.integers(0, x.shape[dim], (96, 1024) if dim else (80, 1024))
    got = tinytorch.from_numpy(x).scatter_add(dim, tinytorch.from_numpy(idx), tinytorch.from_numpy(src)).numpy()
    want = x.copy()
    part = src[:idx.shape[0], :idx.shape[1]]
    np.add.at(want, (idx, np.arange(idx.shape[1])[None, :]) if dim == 0 else (np.arange(idx.shape[0])[:, None], idx),
              part)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gather_kernel_gradcheck(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    rng = np.random.default_rng(5)
    x = tinytorch.tensor(rng.standard_normal((4, 6, 5)), requires_grad=True)
    for dim in (0, 1, 2):
        shape = [4, 6, 5]
        shape[dim] = 7
        idx = tinytorch.from_numpy(rng.integers(0, x.shape[dim], shape))
        assert tinytorch.autograd.gradcheck(lambda t: t.gather(dim, idx), (x,))
        assert tinytorch.autograd.gradgradcheck(lambda t: t.gather(dim, idx), (x,))


# ------------------------------------------------------------------ mse_loss


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_in_two_passes_and_a_scaled_backward(threads, dtype, reduction):
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal((256, 600)).astype(dtype) for _ in range(2))
    X, Y = tinytorch.from_numpy(a.copy()).requires_grad_(), tinytorch.from_numpy(b.copy()).requires_grad_()
    loss = tinytorch.nn.functional.mse_loss(X, Y, reduction=reduction)
    assert loss.grad_fn.name() == "MseLossBackward0" and loss.dtype == X.dtype
    d = a.astype(np.float64) - b
    want = (d * d).mean() if reduction == "mean" else (d * d).sum()
    np.testing.assert_allclose(loss.item(), want, rtol=TOL[dtype])
    (loss * 3).backward()
    scale = 3 * 2 / (a.size if reduction == "mean" else 1)
    np.testing.assert_allclose(X.grad.numpy(), (d * scale).astype(dtype), rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(Y.grad.numpy(), (-d * scale).astype(dtype), rtol=TOL[dtype], atol=TOL[dtype])
    # only the target asking for a gradient; a broadcast target keeps the composite (and PyTorch's warning)
    Y.grad = None
    tinytorch.nn.functional.mse_loss(tinytorch.from_numpy(a), Y, reduction=reduction).backward()
    np.testing.assert_allclose(Y.grad.numpy(), (-d * scale / 3).astype(dtype), rtol=TOL[dtype], atol=TOL[dtype])
    with pytest.warns(UserWarning, match="target size"):
        assert tinytorch.nn.functional.mse_loss(X, Y[:1]).grad_fn.name() != "MseLossBackward0"


def test_fused_mse_loss_gradcheck_double_backward_and_saved_input_check(monkeypatch):
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)
    rng = np.random.default_rng(7)
    x = tinytorch.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    y = tinytorch.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    for reduction in ("mean", "sum"):
        f = lambda a, b: tinytorch.nn.functional.mse_loss(a, b, reduction=reduction)  # noqa: E731
        assert f(x, y).grad_fn.name() == "MseLossBackward0"
        assert tinytorch.autograd.gradcheck(f, (x, y))
        assert tinytorch.autograd.gradgradcheck(f, (x, y))
    z = x.detach().clone().requires_grad_()
    w = z * 1.0
    loss = tinytorch.nn.functional.mse_loss(w, y)
    w.add_(1.0)  # the difference the backward would scale is stale now: PyTorch's error, not a wrong gradient
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_cat_rows_kernel_checks_its_parts():
    out = np.empty((4, 6), np.float32)
    with pytest.raises(ValueError, match="part 1 must be C-contiguous, of out's dtype"):
        _C._cpu.cat_rows([np.ones((4, 3), np.float32), np.ones((4, 3), np.float64)], out, 4)
    with pytest.raises(ValueError, match="is not 4 rows"):
        _C._cpu.cat_rows([np.ones((4, 3), np.float32), np.ones(5, np.float32)], out, 4)
    with pytest.raises(ValueError, match="out holds 24 elements, the parts 20"):
        _C._cpu.cat_rows([np.ones((4, 3), np.float32), np.ones((4, 2), np.float32)], out, 4)
    _C._cpu.cat_rows([np.zeros((4, 1), np.float32), np.ones((4, 0), np.float32), np.ones((4, 5), np.float32)], out, 4)
    np.testing.assert_array_equal(out, np.concatenate([np.zeros((4, 1)), np.ones((4, 5))], axis=1))


def test_embedding_backward_of_a_broadcast_gradient_adds_rows_in_the_kernel(monkeypatch):
    calls = []
    kernel = _C._cpu.index_add_rows
    monkeypatch.setattr(_C._cpu, "index_add_rows", lambda *a: calls.append(1) or kernel(*a))
    rng = np.random.default_rng(8)
    emb = tinytorch.nn.Embedding(65, 128)
    idx = rng.integers(0, 65, (12, 64))
    (emb(tinytorch.from_numpy(idx)) * 2).sum().backward()  # the gradient reaching it is a stride-0 expand
    want = np.zeros((65, 128), np.float32)
    np.add.at(want, idx.reshape(-1), np.full((idx.size, 128), 2, np.float32))
    np.testing.assert_array_equal(emb.weight.grad.numpy(), want)
    assert calls == [1]  # the row loop, not np.add.at (2 ms against 0.3 for PyTorch at this size)


def test_logsumexp_over_the_last_dim_runs_in_the_row_kernel(monkeypatch, threads):
    calls = []
    kernel = _C._cpu.logsumexp
    monkeypatch.setattr(_C._cpu, "logsumexp", lambda *a: calls.append(1) or kernel(*a))
    rng = np.random.default_rng(9)
    for dtype, rtol in ((np.float64, 1e-13), (np.float32, 2e-6)):
        a = (rng.standard_normal((3 * GRAIN // 64 + 5, 64)) * 20).astype(dtype)
        a[0, :] = -np.inf  # a row of -inf: -inf
        a[1, 3] = np.inf  # +inf: inf
        a[2, 5] = np.nan  # NaN: NaN, whatever else the row holds
        a[3, :2] = [np.inf, np.nan]
        a[4, :] = 1e30 if dtype == np.float32 else 1e300  # a large max: no overflow
        want = np.empty(a.shape[0])
        for r, row in enumerate(a.astype(np.float64)):
            m = row.max()
            want[r] = m if np.isnan(m) or not np.isfinite(m) else m + np.log(np.exp(row - m).sum())
        got = tinytorch.from_numpy(a).logsumexp(-1)
        assert got.dtype == tinytorch.from_numpy(a).dtype and tuple(got.shape) == (a.shape[0],)
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, equal_nan=True)
        assert tuple(tinytorch.from_numpy(a).logsumexp(1, keepdim=True).shape) == (a.shape[0], 1)
    assert len(calls) == 4
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)  # through the kernel at gradcheck's size
    x = tinytorch.tensor(rng.standard_normal((4, 6)) * 3, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda t: t.logsumexp(-1), (x,))
    assert tinytorch.autograd.gradgradcheck(lambda t: t.logsumexp(1, keepdim=True), (x,))
    assert tinytorch.tensor(2.5).logsumexp(0).item() == 2.5  # 0-d input, one row of one


def test_logsumexp_kernel_checks_its_out():
    with pytest.raises(ValueError, match="one element per row"):
        _C._cpu.logsumexp(np.ones((4, 3), np.float32), np.empty(3, np.float32))
    with pytest.raises(TypeError, match="one dtype"):
        _C._cpu.logsumexp(np.ones((4, 3), np.float32), np.empty(4, np.float64))
