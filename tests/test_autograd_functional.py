"""tinytorch.autograd.functional against closed forms and, when installed, PyTorch."""
import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import functional as F


def _f(x, w):
    return (x @ w).tanh()


def _inputs(lib):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((2, 3)), dtype=lib.float64)
    w = lib.tensor(rng.standard_normal((3, 4)), dtype=lib.float64)
    return x, w


def test_jacobian_of_elementwise_function_is_diagonal():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    jac = F.jacobian(lambda t: t ** 2, x)
    np.testing.assert_allclose(jac.numpy(), np.diag([2.0, 4.0, 6.0]))
    assert not jac.requires_grad


def test_hessian_of_cubic_sum():
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    h = F.hessian(lambda t: (t ** 3).sum(), x)
    np.testing.assert_allclose(h.numpy(), np.diag([6.0, -12.0]))


def test_vjp_jvp_vhp_hvp_closed_forms():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    v = torch.tensor([1.0, 10.0], dtype=torch.float64)
    out, g = F.vjp(lambda t: t ** 3, x, v)
    np.testing.assert_allclose(g.numpy(), [3.0, 120.0])
    out, jv = F.jvp(lambda t: t ** 3, x, v)
    np.testing.assert_allclose(jv.numpy(), [3.0, 120.0])
    value, hv = F.hvp(lambda t: (t ** 3).sum(), x, v)
    np.testing.assert_allclose(hv.numpy(), [6.0, 120.0])
    assert abs(value.item() - 9.0) < 1e-12
    _, vh = F.vhp(lambda t: (t ** 3).sum(), x, v)
    np.testing.assert_allclose(vh.numpy(), [6.0, 120.0])


def test_strict_mode_and_independent_inputs():
    x = torch.ones(2, dtype=torch.float64)
    y = torch.ones(2, dtype=torch.float64)
    jx, jy = F.jacobian(lambda a, b: a * 2, (x, y))
    assert torch.equal(jy, torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (x, y), strict=True)


def test_create_graph_jacobian_is_differentiable():
    x = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    jac = F.jacobian(lambda t: t ** 3, x, create_graph=True)  # 3 x^2
    jac.sum().backward()
    assert abs(x.grad.item() - 9.0) < 1e-12  # 6 x


def test_against_pytorch():
    real = pytest.importorskip("torch")
    import torch.autograd.functional as RF
    ours, theirs = _inputs(torch), _inputs(real)
    for a, b in zip(F.jacobian(_f, ours), RF.jacobian(_f, theirs)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)

    def scalar(x, w):
        return (_f(x, w) ** 2).sum()

    for row_a, row_b in zip(F.hessian(scalar, ours), RF.hessian(scalar, theirs)):
        for a, b in zip(row_a, row_b):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
    v = (torch.ones(2, 3, dtype=torch.float64), torch.ones(3, 4, dtype=torch.float64))
    rv = (real.ones(2, 3, dtype=real.float64), real.ones(3, 4, dtype=real.float64))
    np.testing.assert_allclose(F.jvp(_f, ours, v)[1].numpy(), RF.jvp(_f, theirs, rv)[1].numpy(), rtol=1e-12)
    u = torch.ones(2, 4, dtype=torch.float64)
    for a, b in zip(F.vjp(_f, ours, u)[1], RF.vjp(_f, theirs, real.ones(2, 4, dtype=real.float64))[1]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_v_errors():
    x = torch.ones(2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="The vector v can only be None"):
        F.vjp(lambda t: t * 2, x)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.jacobian(lambda t: t, [1.0])


def test_hessian_of_a_square_keeps_its_graph_under_strict_create_graph():
    # x ** 2's slope is 2 * x ** 1 when a graph is built (PyTorch's formula), so its second derivative still
    # depends on x: strict mode accepts it and the Hessian requires grad.
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    h = F.hessian(lambda t: (t ** 2).sum(), x, strict=True, create_graph=True)
    assert h.requires_grad and h.detach().tolist() == [[2.0, 0.0], [0.0, 2.0]]
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 0 is independent"):
        F.hessian(lambda t: (t * 2).sum(), x, strict=True, create_graph=True)
