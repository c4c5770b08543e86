"""tinytorch.nn.grad: convNd_input / convNd_weight against a direct float64 NumPy adjoint, gradcheck, errors and
parity with PyTorch."""
import itertools

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.grad as G


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


def _np_conv_grads(x, w, go, stride, padding, dilation, groups):
    """Gradients of the N-d cross-correlation out[n,o,p] = sum_{c,k} x[n, g*Cg+c, p*s-pad+k*d] w[o,c,k]
    with respect to x and w, by scattering go over every output position and kernel offset."""
    nd = x.ndim - 2
    s, p, d = _tuple(stride, nd), _tuple(padding, nd), _tuple(dilation, nd)
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    Og = O // groups
    gx, gw = np.zeros_like(x), np.zeros_like(w)
    for pos in itertools.product(*[range(n) for n in go.shape[2:]]):
        for k in itertools.product(*[range(n) for n in w.shape[2:]]):
            src = tuple(pos[i] * s[i] - p[i] + k[i] * d[i] for i in range(nd))
            if any(c < 0 or c >= x.shape[2 + i] for i, c in enumerate(src)):
                continue
            for g in range(groups):
                xs = x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + src]  # (N, Cg)
                gos = go[(slice(None), slice(g * Og, (g + 1) * Og)) + pos]  # (N, Og)
                ws = w[(slice(g * Og, (g + 1) * Og), slice(None)) + k]  # (Og, Cg)
                gx[(slice(None), slice(g * Cg, (g + 1) * Cg)) + src] += gos @ ws
                gw[(slice(g * Og, (g + 1) * Og), slice(None)) + k] += gos.T @ xs
    return gx, gw


CASES = [
    # (nd, input shape, weight shape, stride, padding, dilation, groups)
    (1, (2, 4, 9), (6, 2, 3), 2, 1, 1, 2),
    (1, (1, 3, 10), (2, 3, 2), 3, 0, 2, 1),
    (2, (2, 4, 7, 6), (4, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    (2, (1, 2, 8, 8), (3, 2, 3, 3), 2, 1, 1, 1),
    (3, (1, 2, 5, 4, 5), (2, 1, 2, 3, 2), (1, 2, 2), (1, 1, 0), 1, 2),
]
FNS = {1: (G.conv1d_input, G.conv1d_weight, "conv1d"), 2: (G.conv2d_input, G.conv2d_weight, "conv2d"),
       3: (G.conv3d_input, G.conv3d_weight, "conv3d")}


def _forward_out_shape(xs, ws, stride, padding, dilation):
    nd = len(xs) - 2
    s, p, d = _tuple(stride, nd), _tuple(padding, nd), _tuple(dilation, nd)
    return (xs[0], ws[0]) + tuple((xs[2 + i] + 2 * p[i] - d[i] * (ws[2 + i] - 1) - 1) // s[i] + 1 for i in range(nd))


@pytest.mark.parametrize("nd,xs,ws,stride,padding,dilation,groups", CASES)
def test_matches_numpy_adjoint(nd, xs, ws, stride, padding, dilation, groups):
    rng = np.random.default_rng(nd)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    go = rng.standard_normal(_forward_out_shape(xs, ws, stride, padding, dilation))
    ref_gx, ref_gw = _np_conv_grads(x, w, go, stride, padding, dilation, groups)
    f_input, f_weight, _ = FNS[nd]
    gx = f_input(xs, tinytorch.tensor(w), tinytorch.tensor(go), stride, padding, dilation, groups)
    gw = f_weight(tinytorch.tensor(x), ws, tinytorch.tensor(go), stride, padding, dilation, groups)
    assert tuple(gx.shape) == xs and tuple(gw.shape) == ws
    assert gx.dtype == tinytorch.float64 and gw.dtype == tinytorch.float64
    np.testing.assert_allclose(gx.numpy(), ref_gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), ref_gw, rtol=1e-12, atol=1e-12)


def test_input_size_picks_the_size_a_strided_conv_drops():
    # Sizes 7 and 8 both give a 3x3 output with stride 2 and kernel 3; input_size decides which gradient to return.
    rng = np.random.default_rng(1)
    w, go = rng.standard_normal((2, 1, 3, 3)), rng.standard_normal((1, 2, 3, 3))
    for size in (7, 8):
        gx = G.conv2d_input(tinytorch.Size([1, 1, size, size]), tinytorch.tensor(w), tinytorch.tensor(go), stride=2)
        ref, _ = _np_conv_grads(np.zeros((1, 1, size, size)), w, go, 2, 0, 1, 1)
        assert tuple(gx.shape) == (1, 1, size, size)
        np.testing.assert_allclose(gx.numpy(), ref, rtol=1e-12, atol=1e-12)
    assert np.all(gx.numpy()[..., 7, :] == 0) and np.all(gx.numpy()[..., :, 7] == 0)


def test_gradcheck_in_weight_input_and_grad_output():
    tinytorch.manual_seed(0)
    w = tinytorch.randn(3, 2, 2, 3, dtype=tinytorch.float64, requires_grad=True)
    x = tinytorch.randn(1, 2, 5, 6, dtype=tinytorch.float64, requires_grad=True)
    go = tinytorch.randn(1, 3, 4, 3, dtype=tinytorch.float64, requires_grad=True)
    kw = dict(stride=(1, 2), padding=(0, 1))
    assert tinytorch.autograd.gradcheck(lambda w, go: G.conv2d_input((1, 2, 5, 6), w, go, **kw), (w, go))
    assert tinytorch.autograd.gradcheck(lambda x, go: G.conv2d_weight(x, (3, 2, 2, 3), go, **kw), (x, go))
    w1 = tinytorch.randn(2, 1, 3, dtype=tinytorch.float64, requires_grad=True)
    go1 = tinytorch.randn(2, 2, 4, dtype=tinytorch.float64, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda w, go: G.conv1d_input((2, 2, 6), w, go, dilation=1, groups=2), (w1, go1))


def test_results_do_not_require_grad_for_plain_inputs_and_work_under_no_grad():
    w, go = tinytorch.randn(2, 1, 3), tinytorch.randn(1, 2, 4)
    with tinytorch.no_grad():
        gx = G.conv1d_input((1, 1, 6), w, go)
    assert not gx.requires_grad
    np.testing.assert_allclose(gx.numpy(), G.conv1d_input((1, 1, 6), w, go).numpy())


def test_errors():
    w, go = tinytorch.randn(4, 3, 3, 3), tinytorch.randn(2, 4, 5, 5)
    with pytest.raises(RuntimeError, match="grad_output has size"):
        G.conv2d_input((2, 3, 7, 7), w, tinytorch.randn(2, 4, 6, 6))
    with pytest.raises(RuntimeError, match="Expected 4-dimensional input"):
        G.conv2d_input((3, 7, 7), w, go)
    with pytest.raises(RuntimeError, match="padding must be an int"):
        G.conv2d_input((2, 3, 7, 7), w, go, padding="same")
    with pytest.raises(RuntimeError, match="grad_output has size"):
        G.conv2d_weight(tinytorch.randn(2, 3, 7, 7), (4, 3, 3, 3), tinytorch.randn(2, 4, 6, 6))


@pytest.mark.parametrize("nd,xs,ws,stride,padding,dilation,groups", CASES)
def test_parity_with_torch(nd, xs, ws, stride, padding, dilation, groups):
    torch = pytest.importorskip("torch")
    import torch.nn.grad as TG
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    go = rng.standard_normal(_forward_out_shape(xs, ws, stride, padding, dilation))
    name = FNS[nd][2]
    ref_x = getattr(TG, name + "_input")(xs, torch.tensor(w), torch.tensor(go), stride, padding, dilation, groups)
    ref_w = getattr(TG, name + "_weight")(torch.tensor(x), ws, torch.tensor(go), stride, padding, dilation, groups)
    got_x = FNS[nd][0](xs, tinytorch.tensor(w), tinytorch.tensor(go), stride, padding, dilation, groups)
    got_w = FNS[nd][1](tinytorch.tensor(x), ws, tinytorch.tensor(go), stride, padding, dilation, groups)
    np.testing.assert_allclose(got_x.numpy(), ref_x.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w.numpy(), ref_w.numpy(), rtol=1e-10, atol=1e-12)
