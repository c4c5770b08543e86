"""API parity of torch.linalg / torch.special and their neighbours (statistics, distance) with PyTorch: the
linalg functions added for it (eig, eigvals, cond, householder_product, tensorinv, tensorsolve, vander, matmul)
against float64 NumPy references and gradcheck, and the behaviours a differential review against PyTorch 2.x
fixed (error types per dtype, norms of complex / 0-d / empty input, lstsq's vector rule, solve_ex's info shape,
logit's crossed eps bounds, ...), encoded with PyTorch's messages; compared with PyTorch itself when importable."""
import math

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck

LA = tinytorch.linalg
RNG = np.random.default_rng(11)


def T(a, grad=False, dtype=None):
    return tinytorch.tensor(a, dtype=dtype, requires_grad=grad)


# ------------------------------------------------------------------ eig, eigvals

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (0, 0), (2, 0, 0)])
@pytest.mark.parametrize("dtype,cdtype", [(np.float32, "complex64"), (np.float64, "complex128"),
                                          (np.complex128, "complex128")])
def test_eig_is_a_complex_eigendecomposition(shape, dtype, cdtype):
    a = RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * RNG.standard_normal(shape)
    L, V = LA.eig(T(a))
    assert str(L.dtype).endswith(cdtype) and str(V.dtype).endswith(cdtype)
    assert tuple(L.shape) == shape[:-1] and tuple(V.shape) == shape
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(a @ V.numpy(), V.numpy() * L.numpy()[..., None, :], atol=tol)
    np.testing.assert_allclose(np.linalg.norm(V.numpy(), axis=-2), np.ones(shape[:-1]), atol=tol)
    vals = LA.eigvals(T(a))
    np.testing.assert_allclose(vals.numpy(), L.numpy(), atol=tol)
    result = LA.eig(T(a))
    assert type(result).__name__ == "linalg_eig" and result.eigenvalues is not None and result.eigenvectors is not None


def test_eig_gradients():
    a = RNG.standard_normal((4, 4))

    def values(x):  # a real function of the eigenvalues
        L = LA.eig(x).eigenvalues
        return (L * L.conj()).real + L.imag * 3

    def vectors(x):  # the moduli of the eigenvectors do not depend on their arbitrary phase
        return LA.eig(x).eigenvectors.abs()

    assert gradcheck(values, (T(a, True),))
    assert gradcheck(vectors, (T(a, True),))
    assert gradcheck(lambda x: LA.eigvals(x).abs(), (T(a, True),))
    c = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    x = T(c, True)
    LA.eig(x).eigenvectors.abs().sum().backward()
    assert x.grad.dtype == tinytorch.complex128


def test_eig_errors():
    with pytest.raises(RuntimeError, match="linalg.eig: A must be batches of square matrices, but they are 2 by 3"):
        LA.eig(tinytorch.ones(2, 3))
    with pytest.raises(NotImplementedError, match="\"linalg_eig_out_cpu\" not implemented for 'Half'"):
        LA.eigvals(tinytorch.ones(2, 2, dtype=tinytorch.float16))


# ------------------------------------------------------------------ cond, householder_product, tensor*, vander

def test_cond_values_and_errors():
    a = RNG.standard_normal((2, 3, 3))
    s = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(LA.cond(T(a)).numpy(), s[..., 0] / s[..., -1])
    np.testing.assert_allclose(LA.cond(T(a), -2).numpy(), s[..., -1] / s[..., 0])
    for p in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        np.testing.assert_allclose(LA.cond(T(a), p).numpy(), np.linalg.cond(a, p), rtol=1e-10)
    wide = RNG.standard_normal((3, 5))
    s = np.linalg.svd(wide, compute_uv=False)
    np.testing.assert_allclose(LA.cond(T(wide)).numpy(), s[0] / s[-1])
    assert LA.cond(T(np.array([[1.0, 2.0], [2.0, 4.0]])), 1).item() == math.inf
    assert LA.cond(T(np.zeros((0, 0))), -1).item() == 0
    assert LA.cond(T(a + 1j * a)).dtype == tinytorch.float64
    with pytest.raises(RuntimeError, match=r"linalg.cond\(ord=fro\): A must be batches of square matrices, but they "
                                           r"are 3 by 5 matrices"):
        LA.cond(T(wide), "fro")
    with pytest.raises(RuntimeError, match="linalg.cond got an invalid norm type: 3"):
        LA.cond(T(a), 3)
    with pytest.raises(RuntimeError, match="linalg.cond: The input tensor must have at least 2 dimensions."):
        LA.cond(T(np.ones(3)))
    assert gradcheck(lambda x: LA.cond(x), (T(a, True),))
    assert gradcheck(lambda x: LA.cond(x, 1), (T(a, True),))


def _geqrf(a):
    """LAPACK's geqrf by Householder reflections: the reflectors under R's diagonal, and their taus."""
    a = a.copy()
    m, n = a.shape
    tau = np.zeros(n)
    for j in range(n):
        x = a[j:, j]
        alpha = -math.copysign(np.linalg.norm(x), x[0])
        v = x.copy()
        v[0] -= alpha
        v /= v[0]
        tau[j] = 2 / (v @ v)
        a[j:, j:] -= tau[j] * np.outer(v, v @ a[j:, j:])
        a[j + 1:, j] = v[1:]
    return a, tau


def test_householder_product_rebuilds_q():
    a = RNG.standard_normal((5, 3))
    h, tau = _geqrf(a)
    Q = LA.householder_product(T(h), T(tau)).numpy()
    R = np.triu(h)[:3]
    np.testing.assert_allclose(Q @ R, a, atol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-12)
    batch = LA.householder_product(T(np.stack([h, h])), T(np.stack([tau, tau])))
    assert tuple(batch.shape) == (2, 5, 3)
    assert gradcheck(LA.householder_product, (T(h, True), T(tau[:2], True)))
    with pytest.raises(RuntimeError, match="input.shape\\[-1\\] must be greater than or equal to tau.shape\\[-1\\]"):
        LA.householder_product(T(h), T(np.ones(4)))
    with pytest.raises(RuntimeError, match="input.shape\\[-2\\] must be greater than or equal to input.shape\\[-1\\]"):
        LA.householder_product(T(h.T), T(tau[:2]))
    with pytest.raises(RuntimeError, match="tau dtype Float does not match input dtype Double"):
        LA.householder_product(T(h), T(tau, dtype=tinytorch.float32))


def test_tensorinv_and_tensorsolve():
    a = RNG.standard_normal((4, 6, 8, 3))
    inv = LA.tensorinv(T(a), ind=2)
    np.testing.assert_allclose(inv.numpy(), np.linalg.tensorinv(a, ind=2), rtol=1e-8, atol=1e-10)
    with pytest.raises(RuntimeError, match=r"prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 8 != "
                                           r"24"):
        LA.tensorinv(T(np.ones((4, 6, 8))), 2)
    with pytest.raises(RuntimeError, match="Expected a strictly positive integer for 'ind', but got 0"):
        LA.tensorinv(T(np.ones((4, 4))), 0)
    A, B = RNG.standard_normal((2, 3, 6)), RNG.standard_normal((2, 3))
    np.testing.assert_allclose(LA.tensorsolve(T(A), T(B)).numpy(), np.linalg.tensorsolve(A, B))
    At = np.moveaxis(A, -1, 0)
    np.testing.assert_allclose(LA.tensorsolve(T(At), T(B), dims=(0,)).numpy(), np.linalg.tensorsolve(A, B))
    with pytest.raises(RuntimeError, match="but got 7 != 6"):
        LA.tensorsolve(T(np.ones((2, 3, 7))), T(B))
    assert gradcheck(lambda x: LA.tensorinv(x, 1), (T(RNG.standard_normal((6, 2, 3)), True),))
    assert gradcheck(LA.tensorsolve, (T(A, True), T(B, True)))


def test_vander():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(LA.vander(T(x)).numpy(), np.vander(x, increasing=True))
    np.testing.assert_array_equal(LA.vander(T(x), N=5).numpy(), np.vander(x, 5, increasing=True))
    ints = LA.vander(T(np.array([2, 3])))
    assert ints.dtype == tinytorch.int64 and ints.tolist() == [[1, 2], [1, 3]]
    assert tuple(LA.vander(T(np.ones((2, 3)))).shape) == (2, 3, 3)
    assert tuple(LA.vander(T(np.array(2.0)), N=4).shape) == (1, 4)
    with pytest.raises(RuntimeError, match="N must be greater than 1."):
        LA.vander(T(x), N=1)
    with pytest.raises(RuntimeError, match="linalg.vander supports floating point, complex, and integer tensors, but "
                                           "got Bool"):
        LA.vander(T(np.array([True])))
    assert gradcheck(lambda t: LA.vander(t, N=4), (T(x, True),))


def test_matmul_alias():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    np.testing.assert_allclose(LA.matmul(T(a), T(b)).numpy(), a @ b)


# ------------------------------------------------------------------ fixed behaviours

@pytest.mark.parametrize("fn,error,message", [
    (LA.det, NotImplementedError, "\"lu_cpu\" not implemented for 'Half'"),
    (LA.cholesky, NotImplementedError, "\"cholesky_cpu\" not implemented for 'Half'"),
    (LA.qr, NotImplementedError, "\"geqrf_cpu\" not implemented for 'Half'"),
    (LA.svdvals, NotImplementedError, "\"linalg_svd_cpu\" not implemented for 'Half'"),
    (LA.eigh, NotImplementedError, "\"linalg_eigh_cpu\" not implemented for 'Half'"),
    (LA.lu_factor, NotImplementedError, "\"lu_cpu\" not implemented for 'Half'"),
    (LA.slogdet, RuntimeError, "linalg.slogdet: Low precision dtypes not supported. Got Half"),
    (LA.inv_ex, RuntimeError, "linalg.inv: Low precision dtypes not supported. Got Half"),
    (LA.matrix_rank, RuntimeError, "This function doesn't handle types other than float and double"),
])
def test_half_input_errors(fn, error, message):
    with pytest.raises(error, match=message):
        fn(tinytorch.ones(2, 2, dtype=tinytorch.float16))


@pytest.mark.parametrize("fn,error,message", [
    (LA.eigvalsh, NotImplementedError, "\"linalg_eigh_cpu\" not implemented for 'Long'"),
    (LA.lu, NotImplementedError, "\"lu_cpu\" not implemented for 'Long'"),
    (LA.cholesky_ex, RuntimeError, "linalg.cholesky: Expected a floating point or complex tensor as input. Got Long"),
    (LA.det, RuntimeError, "linalg.det: Expected a floating point or complex tensor as input. Got Long"),
    (lambda a: LA.solve_triangular(a, a, upper=True), NotImplementedError,
     "\"triangular_solve_cpu\" not implemented for 'Long'"),
    (lambda a: LA.lstsq(a, a), RuntimeError, "This function doesn't handle types other than float and double"),
    (lambda a: LA.solve_ex(a, a), RuntimeError, "linalg.solve: Expected a floating point"),
])
def test_integer_input_errors(fn, error, message):
    with pytest.raises(error, match=message):
        fn(tinytorch.ones(2, 2, dtype=tinytorch.int64))


def test_low_precision_inputs_that_pytorch_computes():
    a = np.array([[0.5, 0.25], [0.0, 0.5]])
    e = LA.matrix_exp(T(a, dtype=tinytorch.float16))
    assert e.dtype == tinytorch.float16
    np.testing.assert_allclose(e.numpy().astype(np.float64), [[math.exp(0.5), 0.25 * math.exp(0.5)],
                                                              [0.0, math.exp(0.5)]], rtol=1e-3)
    v = LA.vecdot(T([1.0, 2.0], dtype=tinytorch.float16), T([3.0, 4.0], dtype=tinytorch.float16))
    assert v.dtype == tinytorch.float16 and v.item() == 11


def test_check_errors_name_the_ex_function():
    with pytest.raises(RuntimeError, match=r"^torch.linalg.solve_ex: The solver failed because the input matrix is "
                                           r"singular."):
        LA.solve_ex(T(np.zeros((2, 2))), T(np.ones(2)), check_errors=True)
    with pytest.raises(RuntimeError, match=r"^linalg.cholesky_ex: \(Batch element 1\)"):
        LA.cholesky_ex(T(np.stack([np.eye(2), -np.eye(2)])), check_errors=True)


def test_solve_ex_info_has_a_batch_shape():
    assert tuple(LA.solve_ex(T(np.eye(3)), T(np.ones((2, 3, 1)))).info.shape) == ()
    assert tuple(LA.solve_ex(T(np.eye(3)[None]), T(np.ones((2, 3, 1)))).info.shape) == (1,)
    singular = np.stack([np.eye(2), np.zeros((2, 2))])
    assert LA.solve_ex(T(singular), T(np.ones((4, 2, 2, 1)))).info.tolist() == [0, 1]


def test_lstsq_takes_b_of_one_dim_fewer_as_vectors():
    A, B = RNG.standard_normal((2, 5, 3)), RNG.standard_normal((5, 1))
    with pytest.raises(RuntimeError):  # B is read as 5 vectors of size 1, not as one 5 x 1 matrix
        LA.lstsq(T(A), T(B))
    x = LA.lstsq(T(A), T(RNG.standard_normal((2, 5)))).solution
    assert tuple(x.shape) == (2, 3)


def test_lstsq_gels_needs_an_exactly_singular_matrix_to_fail():
    A = RNG.standard_normal((5, 3))
    A[:, 2] = A[:, 1] * 3  # rank deficient only up to rounding: LAPACK's gels does not notice
    assert tuple(LA.lstsq(T(A), T(RNG.standard_normal((5, 2))), driver="gels").solution.shape) == (3, 2)
    A[:, 2] = 0
    with pytest.raises(LA.LinAlgError, match="does not have full rank"):
        LA.lstsq(T(A), T(RNG.standard_normal((5, 2))), driver="gels")


def test_norms_of_complex_zero_dim_and_empty_input():
    z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    for ord in (2, 1, math.inf, 0.5):
        r = LA.vector_norm(T(z), ord)
        assert r.dtype == tinytorch.float64
        np.testing.assert_allclose(r.item(), np.linalg.norm(np.abs(z).ravel(), ord))
    np.testing.assert_allclose(LA.matrix_norm(T(z)).item(), np.linalg.norm(z, "fro"))
    np.testing.assert_allclose(LA.norm(T(z)).item(), np.linalg.norm(z))
    x = T(np.array(-2.0))
    assert LA.vector_norm(x, 2, 0).item() == 2 and tuple(LA.vector_norm(x, 1, -1, True).shape) == ()
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        LA.vector_norm(T(np.ones((2, 3))), 2, (0, 0))
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        LA.norm(T(np.ones((2, 3))), None, (0, 0))
    empty = T(np.zeros((3, 0)))
    assert LA.matrix_norm(empty, 1).item() == 0 and LA.matrix_norm(empty, math.inf, (1, 0)).item() == 0
    with pytest.raises(IndexError, match=r"amin\(\): Expected reduction dim 0 to have non-zero size."):
        LA.matrix_norm(empty, -1)
    with pytest.raises(TypeError, match="argument 'ord' \\(position 2\\) must be Number, not str"):
        LA.vector_norm(T(np.ones(3)), "fro")
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: dim must be a 2-tuple. Got 0"):
        LA.norm(T(np.ones((2, 3))), "fro", 0)


def test_vector_norm_dtype_argument():
    x = T(np.ones(3), dtype=tinytorch.float32)
    assert LA.vector_norm(x, dtype=tinytorch.float64).dtype == tinytorch.float64
    with pytest.raises(RuntimeError, match=r"the dtype of the input \(Double\) should be convertible without narrowing "
                                           r"to the specified dtype \(Float\)"):
        LA.vector_norm(T(np.ones(3)), dtype=tinytorch.float32)
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point or complex tensor as input. "
                                           "Got Long"):
        LA.vector_norm(T(np.arange(3)), dtype=tinytorch.float64)
    with pytest.raises(RuntimeError, match="dtype should be real for real inputs, but got ComplexFloat"):
        LA.vector_norm(x, dtype=tinytorch.complex64)


def test_dist_of_nothing_has_no_max():
    empty = T(np.zeros(0))
    assert tinytorch.dist(empty, empty, 2).item() == 0
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        tinytorch.dist(empty, empty, math.inf)


def test_special_logit_with_crossed_eps_bounds_and_integer_round():
    # eps > 0.5: PyTorch clamps to eps below eps, else to 1 - eps above 1 - eps
    x = T([0.3, 0.7, 0.0, 1.0])
    np.testing.assert_allclose(tinytorch.special.logit(x, 0.6).numpy(), [0.4055, -0.4055, 0.4055, -0.4055], atol=1e-4)
    with pytest.raises(NotImplementedError, match="\"round_vml_cpu\" not implemented for 'Long'"):
        tinytorch.special.round(T(np.arange(3)))


# ------------------------------------------------------------------ against PyTorch

def test_linalg_namespace_matches_pytorch():
    torch = pytest.importorskip("torch")
    # ldl_factor / ldl_factor_ex / ldl_solve (Bunch-Kaufman with LAPACK's pivot encoding) are not provided
    missing = {n for n in dir(torch.linalg) if not n.startswith("_") and callable(getattr(torch.linalg, n))
               and not hasattr(LA, n)}
    assert missing <= {"ldl_factor", "ldl_factor_ex", "ldl_solve"}, missing


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eig_matches_pytorch(shape):
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal(shape)
    L, V = LA.eig(T(a))
    Lp, Vp = torch.linalg.eig(torch.tensor(a))
    np.testing.assert_allclose(L.numpy(), Lp.numpy(), atol=1e-10)
    np.testing.assert_allclose(V.numpy(), Vp.numpy(), atol=1e-10)  # the same LAPACK geev normalisation
    x, xp = T(a, True), torch.tensor(a, requires_grad=True)
    for lib, arg in ((LA, x), (torch.linalg, xp)):
        L, V = lib.eig(arg)
        ((L * L.conj()).real.sum() + (V.abs() ** 3).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), xp.grad.numpy(), atol=1e-10)


def test_new_functions_match_pytorch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((2, 3, 3))
    for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
        np.testing.assert_allclose(LA.cond(T(a), p).numpy(), torch.linalg.cond(torch.tensor(a), p).numpy())
    h, tau = torch.geqrf(torch.tensor(RNG.standard_normal((5, 3))))
    np.testing.assert_allclose(LA.householder_product(T(h.numpy()), T(tau.numpy())).numpy(),
                               torch.linalg.householder_product(h, tau).numpy(), atol=1e-12)
    t = RNG.standard_normal((4, 6, 8, 3))
    np.testing.assert_allclose(LA.tensorinv(T(t)).numpy(), torch.linalg.tensorinv(torch.tensor(t)).numpy(),
                               atol=1e-10)
    v = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(LA.vander(T(v), N=4).numpy(), torch.linalg.vander(torch.tensor(v), N=4).numpy())


def test_error_types_match_pytorch():
    torch = pytest.importorskip("torch")
    names = ["det", "slogdet", "inv", "inv_ex", "cholesky", "cholesky_ex", "qr", "eigh", "eigvalsh", "svd",
             "svdvals", "lu", "lu_factor", "lu_factor_ex", "pinv", "matrix_rank", "eigvals", "cond"]
    for dtype in ("int64", "float16", "bfloat16", "bool"):
        for name in names:
            with pytest.raises(Exception) as theirs:
                getattr(torch.linalg, name)(torch.eye(3).to(getattr(torch, dtype)))
            with pytest.raises(Exception) as ours:
                getattr(LA, name)(tinytorch.eye(3).to(getattr(tinytorch, dtype)))
            assert _kind(ours.type) is _kind(theirs.type), (name, dtype, ours.value, theirs.value)


def _kind(error: type) -> type:
    """NotImplementedError (a dispatch error) or RuntimeError (an argument check): the distinction callers catch."""
    return NotImplementedError if issubclass(error, NotImplementedError) else RuntimeError
