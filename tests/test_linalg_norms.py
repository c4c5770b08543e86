"""torch.linalg's norms (vector_norm, matrix_norm, norm): values against NumPy's linalg.norm, gradients by
gradcheck in float64, PyTorch's errors for bad input, and PyTorch's values when it is importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck

A = np.random.default_rng(0).standard_normal((3, 4, 5))


def _vector_ref(a, ord, axis, keepdims):
    a = np.abs(a)
    if ord == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return a.min(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(a.dtype)
    return (a ** ord).sum(axis=axis, keepdims=keepdims) ** (1 / ord)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, math.inf, -math.inf, 0, -1, -2.5])
@pytest.mark.parametrize("dim", [None, -1, (0, 2), 1])
def test_vector_norm_matches_the_formula(ord, dim):
    for keepdim in (False, True):
        got = tinytorch.linalg.vector_norm(tinytorch.tensor(A), ord, dim, keepdim).numpy()
        axis = dim if dim is not None else None
        np.testing.assert_allclose(got, _vector_ref(A, ord, axis, keepdim), rtol=1e-12)


@pytest.mark.parametrize("ord", ["fro", math.inf, -math.inf, 1, -1])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 0)])
def test_matrix_norm_matches_numpy(ord, dim):
    for keepdim in (False, True):
        got = tinytorch.linalg.matrix_norm(tinytorch.tensor(A), ord, dim, keepdim).numpy()
        want = np.linalg.norm(A, ord, axis=dim, keepdims=keepdim)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_norm_picks_the_vector_or_the_matrix_norm():
    T = tinytorch.tensor(A)
    np.testing.assert_allclose(tinytorch.linalg.norm(T).numpy(), np.sqrt((A * A).sum()), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.linalg.norm(T, dim=1).numpy(), np.linalg.norm(A, axis=1), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.linalg.norm(T, dim=(0, 1)).numpy(), np.linalg.norm(A, axis=(0, 1)),
                               rtol=1e-12)
    for ord in (None, "fro", 1, -1, math.inf, -math.inf):  # 2-D input: a matrix norm
        np.testing.assert_allclose(tinytorch.linalg.norm(T[0], ord).numpy(), np.linalg.norm(A[0], ord), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.linalg.norm(T[0, 0], 3).numpy(), np.linalg.norm(A[0, 0], 3), rtol=1e-12)
    out = tinytorch.empty(3, 4)
    assert tinytorch.linalg.vector_norm(T, dim=-1, out=out) is out
    x32 = tinytorch.tensor(A, dtype=tinytorch.float32)
    assert tinytorch.linalg.vector_norm(x32, dtype=tinytorch.float64).dtype == tinytorch.float64


def test_norm_gradients():
    x = tinytorch.tensor(A, requires_grad=True)
    assert gradcheck(lambda t: tinytorch.linalg.vector_norm(t, 3, -1), (x,))
    assert gradcheck(lambda t: tinytorch.linalg.vector_norm(t, -1.5, 1), (x,))
    assert gradcheck(lambda t: tinytorch.linalg.vector_norm(t), (x,))
    assert gradcheck(lambda t: tinytorch.linalg.matrix_norm(t, math.inf), (x,))
    assert gradcheck(lambda t: tinytorch.linalg.matrix_norm(t, -1, (0, 2)), (x,))
    assert gradcheck(lambda t: tinytorch.linalg.norm(t, dim=(1, 2)), (x,))


def test_norm_errors_say_what_is_wrong():
    T = tinytorch.tensor(A)
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        tinytorch.linalg.vector_norm(tinytorch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tinytorch.linalg.matrix_norm(T[0, 0])
    with pytest.raises(RuntimeError, match="must be 1D or 2D. Got 3D"):
        tinytorch.linalg.norm(T, 2)
    with pytest.raises(RuntimeError, match="dims must be different"):
        tinytorch.linalg.matrix_norm(T, dim=(1, 1))
    np.testing.assert_allclose(tinytorch.linalg.matrix_norm(T, "nuc").numpy(), np.linalg.norm(A, "nuc", axis=(-2, -1)),
                               rtol=1e-12)
    with pytest.raises(RuntimeError, match="does not have an identity"):
        tinytorch.linalg.vector_norm(tinytorch.empty(0), math.inf)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
def test_norms_match_pytorch():
    import torch
    T, P = tinytorch.tensor(A), torch.tensor(A)
    for f in (lambda L, X: L.linalg.vector_norm(X, 2.5, (0, 2), True), lambda L, X: L.linalg.matrix_norm(X, -1),
              lambda L, X: L.linalg.norm(X[1], math.inf), lambda L, X: L.linalg.norm(X, dim=(2, 0))):
        np.testing.assert_allclose(f(tinytorch, T).numpy(), f(torch, P).numpy(), rtol=1e-12)


def test_inf_norm_over_a_nonempty_dim_of_an_empty_tensor_is_empty():
    x = tinytorch.empty(0, 3)
    assert tinytorch.linalg.vector_norm(x, math.inf, dim=1).shape == (0,)  # no rows, nothing reduced over nothing
    with pytest.raises(RuntimeError, match="does not have an identity"):
        tinytorch.linalg.vector_norm(x, math.inf, dim=0)
