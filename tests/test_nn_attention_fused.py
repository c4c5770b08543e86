"""The fused CPU scaled_dot_product_attention (csrc/kernels/attention.cpp) forward and backward against a float64
NumPy reference, at the shapes its tiling has edges for: query blocks of 64 rows (L not a multiple, several
blocks), S != L under the top-left causal mask, head dims that fill no whole vector, strided (split-head) views,
masks; 2 threads against 1 bit for bit; PyTorch beside when importable."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinytorch

F = tinytorch.nn.functional


def _reference(q, k, v, g, mask=None, causal=False, scale=None):
    """Output and (dq, dk, dv) of softmax(q k^T * scale + mask) v for the output gradient g, in float64 NumPy;
    rows with every key masked give 0 and pass no gradient."""
    q, k, v, g = (np.asarray(a, np.float64) for a in (q, k, v, g))
    L, S = q.shape[-2], k.shape[-2]
    sc = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    bias = np.zeros((L, S))  # what is added to the scores: 0, -inf where masked, or the float mask
    if causal:
        bias = np.where(np.arange(S) <= np.arange(L)[:, None], 0.0, -np.inf)
    if mask is not None:
        bias = bias + (np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask)
    logits = q @ np.swapaxes(k, -1, -2) * sc + bias
    top = logits.max(-1, keepdims=True)
    e = np.exp(logits - np.where(top > -np.inf, top, 0.0))
    p = e / np.maximum(e.sum(-1, keepdims=True), np.finfo(np.float64).tiny)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return p @ v, (ds @ k * sc, np.swapaxes(ds, -1, -2) @ q * sc, np.swapaxes(p, -1, -2) @ g)


def _run(lib, q, k, v, g, **kw):
    """The output and the gradients of q, k, v from `lib` (tinytorch or torch), as NumPy arrays."""
    Q, K, V = (lib.tensor(a, requires_grad=True) for a in (q, k, v))
    if "attn_mask" in kw:
        kw = dict(kw, attn_mask=lib.tensor(kw["attn_mask"]))
    y = lib.nn.functional.scaled_dot_product_attention(Q, K, V, **kw)
    y.backward(lib.tensor(g))
    return y.detach().numpy(), tuple(t.grad.numpy() for t in (Q, K, V))


def _inputs(shape_q, S, Ev, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape_q).astype(dtype)
    k = rng.standard_normal(shape_q[:-2] + (S, shape_q[-1])).astype(dtype)
    v = rng.standard_normal(shape_q[:-2] + (S, Ev)).astype(dtype)
    g = rng.standard_normal(shape_q[:-1] + (Ev,)).astype(dtype)
    return q, k, v, g


TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("L,S,E,Ev", [
    (64, 64, 32, 32),     # nanoGPT's head: one block
    (130, 130, 16, 16),   # three blocks, the last of 2 rows
    (65, 40, 5, 7),       # S < L: rows past S see every key; E and Ev fill no vector
    (20, 77, 33, 9),      # S > L; E one past a vector
    (1, 1, 1, 1),
])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_backward_match_the_reference(dtype, L, S, E, Ev, causal):
    q, k, v, g = _inputs((2, 3, L, E), S, Ev, dtype)
    y, grads = _run(tinytorch, q, k, v, g, is_causal=causal)
    ref_y, ref_grads = _reference(q, k, v, g, causal=causal)
    tol = TOL[dtype] * max(1, np.sqrt(S) / 4)
    np.testing.assert_allclose(y, ref_y, rtol=tol, atol=tol)
    for got, want in zip(grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", ["bool", "float", "broadcast_bool"])
def test_masks_with_several_blocks_and_fully_masked_rows(kind):
    rng = np.random.default_rng(1)
    q, k, v, g = _inputs((2, 2, 100, 12), 90, 12, np.float64, seed=1)
    if kind == "float":
        mask = rng.standard_normal((2, 2, 100, 90))
        mask[1, 0, 70] = -np.inf  # a row of the second block with every key masked: 0, and no gradient
    else:
        mask = rng.random((100, 90) if kind == "broadcast_bool" else (2, 1, 100, 90)) > 0.3
        mask[..., 3, :] = False
    y, grads = _run(tinytorch, q, k, v, g, attn_mask=mask)
    ref_y, ref_grads = _reference(q, k, v, g, mask=mask)
    np.testing.assert_allclose(y, ref_y, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_head_views_as_nanogpt_makes_them(dtype):
    B, T, H, E = 3, 70, 4, 24
    rng = np.random.default_rng(2)
    qkv = rng.standard_normal((B, T, 3 * H * E)).astype(dtype)
    X = tinytorch.tensor(qkv, requires_grad=True)
    q, k, v = (t.view(B, T, H, E).transpose(1, 2) for t in X.split(H * E, dim=2))
    assert not q.is_contiguous()
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    G = rng.standard_normal((B, T, H * E)).astype(dtype)
    y.transpose(1, 2).contiguous().view(B, T, H * E).backward(tinytorch.tensor(G))
    heads = [qkv[..., i * H * E:(i + 1) * H * E].reshape(B, T, H, E).transpose(0, 2, 1, 3) for i in range(3)]
    ref_y, ref_grads = _reference(*heads, G.reshape(B, T, H, E).transpose(0, 2, 1, 3), causal=True)
    np.testing.assert_allclose(y.detach().numpy(), ref_y, rtol=TOL[dtype], atol=TOL[dtype])
    ref_dx = np.concatenate([d.transpose(0, 2, 1, 3).reshape(B, T, H * E) for d in ref_grads], axis=-1)
    np.testing.assert_allclose(X.grad.numpy(), ref_dx, rtol=2 * TOL[dtype], atol=2 * TOL[dtype])


def test_rows_with_padding_between_them():
    # Each row of q, k, v starts 3 elements after the previous one ends: only the last dimension is unit-stride.
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 2, 50, 11))[..., :8] for _ in range(3))
    g = rng.standard_normal((2, 2, 50, 8))
    y, grads = _run(tinytorch, q, k, v, g, is_causal=True)
    ref_y, ref_grads = _reference(q, k, v, g, causal=True)
    np.testing.assert_allclose(y, ref_y, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_nan_reaches_only_the_rows_that_see_it_across_blocks():
    q, k, v, g = _inputs((1, 1, 150, 8), 150, 8, np.float32, seed=4)
    k[0, 0, 100, 2] = np.nan
    y, (dq, dk, _) = _run(tinytorch, q, k, v, g, is_causal=True)
    assert np.isfinite(y[0, 0, :100]).all() and np.isnan(y[0, 0, 100:]).all()
    assert np.isnan(dq[0, 0, 100:]).all() and np.isnan(dk[0, 0, 100]).all()


@pytest.mark.parametrize("causal", [False, True])
def test_two_threads_give_the_same_bits_as_one(causal):
    """Threads claim heads four at a time (15 heads: a short last group), each head computed alike on any thread."""
    q, k, v, g = _inputs((3, 5, 96, 32), 96, 32, np.float32, seed=5)
    before = tinytorch.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            tinytorch.set_num_threads(n)
            results.append(_run(tinytorch, q, k, v, g, is_causal=causal))
    finally:
        tinytorch.set_num_threads(before)
    (y1, g1), *others = results
    for y2, g2 in others:
        np.testing.assert_array_equal(y1, y2)
        for a, b in zip(g1, g2):
            np.testing.assert_array_equal(a, b)


_NARROW = """
import sys
import numpy as np
import tinytorch
arrays = dict(np.load(sys.argv[1]))
out = {}
for causal in (False, True):
    Q, K, V = (tinytorch.tensor(arrays[n], requires_grad=True) for n in "qkv")
    y = tinytorch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    y.backward(tinytorch.tensor(arrays["g"]))
    for name, t in zip(("y", "dq", "dk", "dv"), (y, Q.grad, K.grad, V.grad)):
        out[f"{name}{int(causal)}"] = t.detach().numpy()
np.savez(sys.argv[2], **out)
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("capability", ["avx2", "default"])
def test_narrower_register_tiles_match_the_reference(tmp_path, capability, dtype):
    # small_gemm picks its tile once per process: TINYTORCH_CPU_CAPABILITY caps the pick, so a fresh process runs
    # the AVX2 (6 x 16) or SSE (4 x 8) tile on any x86 CPU.
    q, k, v, g = _inputs((2, 3, 70, 20), 75, 12, dtype, seed=7)
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v, g=g)
    env = dict(os.environ, TINYTORCH_CPU_CAPABILITY=capability)
    subprocess.run([sys.executable, "-c", _NARROW, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")], env=env,
                   check=True, timeout=120)
    got = np.load(tmp_path / "out.npz")
    for causal in (False, True):
        ref_y, ref_grads = _reference(q, k, v, g, causal=causal)
        for name, want in zip(("y", "dq", "dk", "dv"), (ref_y,) + ref_grads):
            np.testing.assert_allclose(got[f"{name}{int(causal)}"], want, rtol=2 * TOL[dtype], atol=2 * TOL[dtype])


@pytest.mark.parametrize("L,S,E", [(64, 64, 32), (130, 100, 20)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_pytorch(L, S, E, causal):
    torch = pytest.importorskip("torch")
    q, k, v, g = _inputs((2, 4, L, E), S, E, np.float32, seed=6)
    mine, theirs = _run(tinytorch, q, k, v, g, is_causal=causal), _run(torch, q, k, v, g, is_causal=causal)
    np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-4, atol=1e-5)
    for a, b in zip(mine[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
