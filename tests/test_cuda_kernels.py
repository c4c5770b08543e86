"""CUDA kernels in src/: each source compiles with nvcc (so a typo fails CI, not a GPU run), and on a GPU
the kernel-backed ops agree with the NumPy path on CPU."""
import glob
import math
import os
import shutil
import subprocess

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
SOURCES = sorted(glob.glob(os.path.join(SRC, "*.cu")))


def test_kernel_sources_exist():
    names = {os.path.basename(p) for p in SOURCES}
    assert {"softmax.cu", "layer_norm.cu", "cross_entropy.cu", "gelu.cu", "adamw.cu"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=[os.path.basename(p) for p in SOURCES])
def test_kernel_compiles_with_nvcc(path, tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    obj = tmp_path / (os.path.basename(path) + ".o")
    proc = subprocess.run([nvcc, "-c", "-o", str(obj), "--std=c++17", "-arch=sm_80", path],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert obj.exists()


def test_kernel_functions_are_extern_c():
    # CuPy's RawModule looks kernels up by their unmangled names.
    from tinytorch import _kernels
    import inspect
    wanted = {"softmax.cu": ["softmax_forward", "softmax_backward"],
              "layer_norm.cu": ["layer_norm_forward", "layer_norm_backward_input", "layer_norm_backward_params"],
              "cross_entropy.cu": ["cross_entropy_forward", "cross_entropy_backward"],
              "gelu.cu": ["gelu_forward", "gelu_backward"], "adamw.cu": ["adamw_step"],
              "amp_unscale.cu": ["amp_unscale_f32", "amp_unscale_f64", "amp_unscale_f16"]}
    loader = inspect.getsource(_kernels)
    for file, names in wanted.items():
        with open(os.path.join(SRC, file)) as f:
            text = f.read()
        for name in names:
            assert f'extern "C" __global__ void {name}(' in text, (file, name)
            assert f'"{file}", "{name}"' in loader or f'"{name}"' in loader, (file, name)


# ------------------------------------------------------------------ on a GPU: CUDA against the CPU path


def _gpu(device):
    if device != "cuda":
        pytest.skip("needs a CUDA GPU")


def _pair(shape, seed=0, dtype=tinytorch.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    cpu = tinytorch.tensor(a, dtype=dtype, requires_grad=True)
    cuda = tinytorch.tensor(a, dtype=dtype, device="cuda", requires_grad=True)
    return cpu, cuda


def _close(cuda_t, cpu_t, tol=1e-5):
    np.testing.assert_allclose(np.asarray(cuda_t.detach().cpu(), dtype=np.float64),
                               np.asarray(cpu_t.detach(), dtype=np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [7, 256, 3000])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_kernel(device, n, log):
    _gpu(device)
    c, g = _pair((5, n))
    fn = F.log_softmax if log else F.softmax
    yc, yg = fn(c, -1), fn(g, -1)
    _close(yg, yc)
    seed = np.random.default_rng(1).standard_normal((5, n)).astype(np.float32)
    yc.backward(tinytorch.tensor(seed))
    yg.backward(tinytorch.tensor(seed, device="cuda"))
    _close(g.grad, c.grad)


def test_softmax_kernel_half_and_masked_rows(device):
    _gpu(device)
    c, g = _pair((4, 33), dtype=tinytorch.float16)
    _close(F.softmax(g, -1), F.softmax(c, -1), tol=2e-3)
    q = tinytorch.randn(1, 2, 4, device="cuda")
    mask = tinytorch.tensor([[False, False], [True, True]], device="cuda")
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert float(out[0, 0].abs().sum()) == 0.0


@pytest.mark.parametrize("n", [5, 512, 1500])
def test_layer_norm_kernel(device, n):
    _gpu(device)
    c, g = _pair((6, n))
    wc, wg = _pair((n,), 1)
    bc, bg = _pair((n,), 2)
    yc, yg = F.layer_norm(c, (n,), wc, bc), F.layer_norm(g, (n,), wg, bg)
    _close(yg, yc, 1e-4)
    seed = np.random.default_rng(3).standard_normal((6, n)).astype(np.float32)
    yc.backward(tinytorch.tensor(seed))
    yg.backward(tinytorch.tensor(seed, device="cuda"))
    for a, b in ((g, c), (wg, wc), (bg, bc)):
        _close(a.grad, b.grad, 1e-4)
    _close(F.layer_norm(g, (n,)), F.layer_norm(c, (n,)), 1e-4)


@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1}, {"ignore_index": 2},
                                {"weight": True, "label_smoothing": 0.2}, {"reduction": "none"}])
def test_cross_entropy_kernel(device, kw):
    _gpu(device)
    c, g = _pair((8, 300))
    t = np.random.default_rng(4).integers(0, 300, 8)
    t[3] = 2
    kwc, kwg = dict(kw), dict(kw)
    if kw.get("weight"):
        w = np.random.default_rng(5).random(300).astype(np.float32)
        kwc["weight"], kwg["weight"] = tinytorch.tensor(w), tinytorch.tensor(w, device="cuda")
    lc = F.cross_entropy(c, tinytorch.tensor(t), **kwc)
    lg = F.cross_entropy(g, tinytorch.tensor(t, device="cuda"), **kwg)
    _close(lg, lc, 1e-4)
    lc.sum().backward()
    lg.sum().backward()
    _close(g.grad, c.grad, 1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernel(device, approximate):
    _gpu(device)
    c, g = _pair((1000,))
    yc, yg = F.gelu(c, approximate=approximate), F.gelu(g, approximate=approximate)
    _close(yg, yc)
    yc.sum().backward()
    yg.sum().backward()
    _close(g.grad, c.grad)


def test_adamw_kernel_matches_reference(device):
    _gpu(device)
    import cupy as cp
    from tinytorch import _kernels
    rng = np.random.default_rng(6)
    p, grad = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    m, v = np.zeros_like(p), np.zeros_like(p)
    dp, dg, dm, dv = (cp.asarray(a) for a in (p, grad, m, v))
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    for step in (1, 2, 3):
        _kernels.adamw_step(dp, dg, dm, dv, lr, b1, b2, eps, wd, step)
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        denom = np.sqrt(v) / math.sqrt(1 - b2 ** step) + eps
        p = p - lr / (1 - b1 ** step) * m / denom
    np.testing.assert_allclose(dp.get(), p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dm.get(), m, rtol=1e-6)
    np.testing.assert_allclose(dv.get(), v, rtol=1e-6)


@pytest.mark.parametrize("inject", [None, "inf", "nan"])
def test_amp_unscale_kernel(device, inject):
    """One launch per dtype unscales every gradient (several chunks, several tensors) and flags inf/NaN."""
    _gpu(device)
    from tinytorch import _kernels
    import cupy as cp
    rng = np.random.default_rng(5)
    hosts = [rng.standard_normal(n).astype(dt) for n, dt in
             [(70_000, np.float32), (3, np.float32), (140_001, np.float16), (5, np.float64)]]
    if inject is not None:
        hosts[2][100_000] = np.inf if inject == "inf" else np.nan
    grads = [cp.asarray(h) for h in hosts]
    found = cp.zeros((), cp.float32)
    assert _kernels.amp_unscale_(grads, 0.125, found) == []
    assert float(found) == (0.0 if inject is None else 1.0)
    for h, g in zip(hosts, grads):
        want = (h.astype(np.float32) * np.float32(0.125)).astype(h.dtype) if h.dtype != np.float64 else h * 0.125
        np.testing.assert_array_equal(cp.asnumpy(g)[np.isfinite(h)], want[np.isfinite(h)])
