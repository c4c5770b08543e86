"""torch.linalg's decompositions and solves (and the torch.* / Tensor spellings of them): values against NumPy
float64 references, empty and batched inputs, PyTorch's errors, gradients by gradcheck / gradgradcheck in float64
(and by finite differences for complex inputs), and PyTorch's values, dtypes, shapes and gradients when it is
importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

LA = tinytorch.linalg
RNG = np.random.default_rng(0)
A3 = RNG.standard_normal((2, 3, 3))  # a batch of well-conditioned square matrices
W = RNG.standard_normal((2, 3, 4))   # wide
H = RNG.standard_normal((2, 4, 3))   # tall
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])
has_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def T(a, grad=False, dtype=None):
    return tinytorch.tensor(a, dtype=dtype, requires_grad=grad)


def spd(a):
    """A symmetric positive-definite matrix made from any square a (numpy)."""
    return a @ np.swapaxes(a, -1, -2) + np.eye(a.shape[-1])


def cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def close(t, ref, tol=1e-10):
    np.testing.assert_allclose(t.detach().numpy(), ref, rtol=tol, atol=tol)


# ------------------------------------------------------------------ values

def test_inverse_and_determinants_match_numpy():
    for a in (A3, A3[0], cplx(2, 3, 3)):
        close(LA.inv(T(a)), np.linalg.inv(a))
        close(tinytorch.inverse(T(a)), np.linalg.inv(a))
        close(LA.det(T(a)), np.linalg.det(a))
        sign, logabs = LA.slogdet(T(a))
        ref_sign, ref_log = np.linalg.slogdet(a)
        close(sign, ref_sign)
        close(logabs, ref_log)
        assert logabs.dtype == (tinytorch.float64)
    r = LA.inv_ex(T(A3))
    assert r.info.dtype == tinytorch.int32 and r.info.shape == (2,) and not r.info.any()
    f32 = LA.inv(T(A3, dtype=tinytorch.float32))
    assert f32.dtype == tinytorch.float32
    np.testing.assert_allclose(f32.numpy(), np.linalg.inv(A3), rtol=1e-4, atol=1e-4)
    neg = np.diag([-1.0, 2.0, 3.0])  # det < 0: logdet is nan; singular: -inf
    assert math.isnan(tinytorch.logdet(T(neg)).item())
    assert tinytorch.logdet(T(SINGULAR)).item() == -math.inf
    close(tinytorch.logdet(T(spd(A3))), np.log(np.linalg.det(spd(A3))))
    c = cplx(3, 3)
    close(tinytorch.logdet(T(c)), np.log(np.linalg.det(c)))
    assert LA.slogdet(T(SINGULAR)).sign.item() == 0
    assert isinstance(tinytorch.slogdet(T(A3)), tuple) and tinytorch.slogdet(T(A3))._fields == ("sign", "logabsdet")


def test_singular_inverses_report_the_zero_pivot():
    r = LA.inv_ex(T(np.stack([np.eye(3), SINGULAR])))
    assert r.info.tolist() == [0, 3]
    close(r.inverse[0], np.eye(3))
    assert not np.isfinite(r.inverse[1].numpy()).all()
    s = LA.solve_ex(T(SINGULAR), T(np.ones(3)))
    assert s.info.item() == 3 and s.result.shape == (3,)


def test_cholesky_reads_one_triangle_and_factors():
    a = spd(A3)
    close(LA.cholesky(T(a)), np.linalg.cholesky(a))
    close(LA.cholesky(T(a), upper=True), np.swapaxes(np.linalg.cholesky(a), -1, -2))
    junk_upper = a + np.triu(np.full((3, 3), 7.0), 1)  # only the lower triangle is read by default
    close(LA.cholesky(T(junk_upper)), np.linalg.cholesky(a))
    junk_lower = a + np.tril(np.full((3, 3), 7.0), -1)
    close(LA.cholesky(T(junk_lower), upper=True), np.swapaxes(np.linalg.cholesky(a), -1, -2))
    c = cplx(3, 3)
    hp = c @ c.conj().T + np.eye(3)
    close(LA.cholesky(T(hp)), np.linalg.cholesky(hp))
    close(tinytorch.cholesky(T(a), True), np.swapaxes(np.linalg.cholesky(a), -1, -2))
    r = LA.cholesky_ex(T(np.stack([np.eye(2), NOT_PD])))
    assert r.info.tolist() == [0, 2] and r.info.dtype == tinytorch.int32
    # info is the order of the first leading minor that is not positive-definite
    assert LA.cholesky_ex(T(np.diag([1.0, 2.0, -1.0, 4.0]))).info.item() == 3


def test_cholesky_solve_and_inverse():
    a = spd(A3[0])
    b = A3[..., :2]
    L = LA.cholesky(T(a))
    close(tinytorch.cholesky_solve(T(b), L), np.linalg.solve(a, b))
    close(T(b).cholesky_solve(L.mT, upper=True), np.linalg.solve(a, b))
    close(tinytorch.cholesky_inverse(L), np.linalg.inv(a))
    close(L.mT.cholesky_inverse(upper=True), np.linalg.inv(a))


def test_qr_modes():
    for a in (A3, W, H, cplx(4, 3)):
        m, n = a.shape[-2:]
        k = min(m, n)
        Q, R = LA.qr(T(a))
        assert Q.shape == a.shape[:-2] + (m, k) and R.shape == a.shape[:-2] + (k, n)
        q_ref, r_ref = np.linalg.qr(a)
        close(Q, q_ref)
        close(R, r_ref)
        Qc, Rc = LA.qr(T(a), mode="complete")
        assert Qc.shape == a.shape[:-2] + (m, m) and Rc.shape == a.shape[:-2] + (m, n)
        close(Qc @ Rc, a)
        Q0, R0 = LA.qr(T(a), mode="r")
        assert Q0.shape == (0,)
        close(R0, r_ref)
    Qs, Rs = tinytorch.qr(T(H), some=False)
    assert Qs.shape == (2, 4, 4) and Rs.shape == (2, 4, 3)
    Qm, Rm = T(H).qr()
    assert Qm.shape == (2, 4, 3)


def test_eigh_and_eigvalsh():
    sym = A3 + np.swapaxes(A3, -1, -2)
    w, V = LA.eigh(T(sym))
    w_ref, V_ref = np.linalg.eigh(sym)
    close(w, w_ref)
    close(V.abs(), np.abs(V_ref))  # the same columns up to sign
    close(V @ (w.unsqueeze(-1) * V.mT), sym)
    lower_only = np.tril(sym)  # UPLO picks the triangle that is read
    close(LA.eigvalsh(T(lower_only)), w_ref)
    close(LA.eigvalsh(T(np.triu(sym)), UPLO="U"), w_ref)
    close(LA.eigvalsh(T(sym), "u"), w_ref)
    c = cplx(3, 3)
    herm = c + c.conj().T
    wc, _ = LA.eigh(T(herm))
    assert wc.dtype == tinytorch.float64
    close(wc, np.linalg.eigvalsh(herm))


def test_svd_shapes_and_values():
    for a in (A3, W, H):
        m, n = a.shape[-2:]
        k = min(m, n)
        U, S, Vh = LA.svd(T(a))
        assert U.shape[-2:] == (m, m) and S.shape[-1] == k and Vh.shape[-2:] == (n, n)
        close(S, np.linalg.svd(a, compute_uv=False))
        close((U[..., :, :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], a)
        Ur, Sr, Vhr = LA.svd(T(a), full_matrices=False)
        assert Ur.shape[-2:] == (m, k) and Vhr.shape[-2:] == (k, n)
        close(LA.svdvals(T(a)), np.linalg.svd(a, compute_uv=False))
        U2, S2, V2 = tinytorch.svd(T(a))  # the old API: reduced, and V instead of Vh
        close((U2 * S2.unsqueeze(-2)) @ V2.mT, a)
        Z1, S3, Z2 = T(a).svd(compute_uv=False)
        assert Z1.shape[-2:] == (m, m) and Z2.shape[-2:] == (n, n) and not Z1.any() and not Z2.any()
    c = cplx(3, 4)
    Uc, Sc, Vhc = LA.svd(T(c), full_matrices=False)
    assert Sc.dtype == tinytorch.float64 and Uc.dtype == tinytorch.complex128
    close((Uc * Sc.unsqueeze(-2)) @ Vhc, c)


def test_solve_matrix_vector_batched_and_right():
    b = RNG.standard_normal((2, 3, 2))
    close(LA.solve(T(A3), T(b)), np.linalg.solve(A3, b))
    v = RNG.standard_normal((2, 3))  # shaped like A without its last dim: a batch of vectors
    X = LA.solve(T(A3), T(v))
    assert X.shape == (2, 3)
    close(X, np.linalg.solve(A3, v[..., None])[..., 0])
    close(LA.solve(T(A3), T(v[0])), np.linalg.solve(A3, v[0][None, :, None])[..., 0])
    wide = RNG.standard_normal((4, 1, 3, 2))  # batch dims broadcast
    assert LA.solve(T(A3), T(wide)).shape == (4, 2, 3, 2)
    right = RNG.standard_normal((2, 2, 3))
    close(LA.solve(T(A3), T(right), left=False), right @ np.linalg.inv(A3))
    c, cb = cplx(3, 3), cplx(3, 2)
    close(LA.solve(T(c), T(cb)), np.linalg.solve(c, cb))


def test_solve_triangular():
    a = A3 + 3 * np.eye(3)
    b = RNG.standard_normal((2, 3, 2))
    close(LA.solve_triangular(T(a), T(b), upper=True), np.linalg.solve(np.triu(a), b))
    close(LA.solve_triangular(T(a), T(b), upper=False), np.linalg.solve(np.tril(a), b))
    unit = np.tril(a, -1) + np.eye(3)
    close(LA.solve_triangular(T(a), T(b), upper=False, unitriangular=True), np.linalg.solve(unit, b))
    bt = np.swapaxes(b, -1, -2)
    close(LA.solve_triangular(T(a), T(bt), upper=True, left=False), bt @ np.linalg.inv(np.triu(a)))
    zero_diag = np.triu(np.ones((3, 3))) - np.diag([0.0, 0.0, 1.0])  # not an error: inf/nan, as LAPACK's trsm
    r = LA.solve_triangular(T(zero_diag), T(np.ones((3, 1))), upper=True).numpy()
    assert r[2, 0] == math.inf and r[1, 0] == -math.inf and math.isnan(r[0, 0])
    X, coef = tinytorch.triangular_solve(T(b), T(a[0]))
    close(X, np.linalg.solve(np.triu(a[0]), b))
    assert coef.shape == (2, 3, 3)
    close(coef[1], a[0])
    Xt, _ = T(b).triangular_solve(T(a[0]), upper=False, transpose=True)
    close(Xt, np.linalg.solve(np.tril(a[0]).T, b))


def test_pinv_rank_and_lstsq():
    for a in (A3, W, H):
        close(LA.pinv(T(a)), np.linalg.pinv(a))
        close(tinytorch.pinverse(T(a)), np.linalg.pinv(a, rcond=1e-15))
    low_rank = H @ np.diag([1.0, 1.0, 0.0]) @ W[..., :3, :3]  # rank 2 (4 x 3)
    close(LA.pinv(T(low_rank)), np.linalg.pinv(low_rank, rcond=1e-12), tol=1e-8)
    assert LA.matrix_rank(T(low_rank)).tolist() == [2, 2]
    assert LA.matrix_rank(T(low_rank)).dtype == tinytorch.int64
    assert LA.matrix_rank(T(np.diag([1.0, 0.5, 0.1])), atol=0.2).item() == 2
    assert LA.matrix_rank(T(np.diag([1.0, 0.5, 0.1])), rtol=0.3).item() == 2
    assert LA.matrix_rank(T(np.diag([1.0, 0.5, 0.1])), 0.05).item() == 3  # tol: the older spelling of atol
    diag = T(np.diag([2.0, 1e-3]))
    close(LA.pinv(diag, 1e-2), np.diag([0.5, 0.0]))  # rcond: the older spelling of rtol
    close(LA.pinv(diag, atol=1e-4), np.diag([0.5, 1e3]))
    sym = A3 + np.swapaxes(A3, -1, -2)
    close(LA.pinv(T(sym), hermitian=True), np.linalg.pinv(sym, hermitian=True))
    assert LA.matrix_rank(T(np.diag([2.0, -1.0, 0.0])), hermitian=True).item() == 2
    b = RNG.standard_normal((2, 4, 2))
    sol, res, rank, sv = LA.lstsq(T(H), T(b))
    close(sol, np.linalg.pinv(H) @ b)
    assert res.shape == (0,) and rank.tolist() == [3, 3] and sv.shape == (0,)  # gelsy (the default)
    sol, res, rank, sv = LA.lstsq(T(H), T(b), driver="gelsd")
    close(res, ((H @ np.linalg.pinv(H) @ b - b) ** 2).sum(-2))
    close(sv, np.linalg.svd(H, compute_uv=False))
    ref = np.linalg.lstsq(H[0], b[0], rcond=None)
    close(sol[0], ref[0])
    close(res[0], ref[1])
    sol, _, rank, _ = LA.lstsq(T(H), T(b), driver="gels")
    assert rank.shape == (0,)
    wide_b = RNG.standard_normal((2, 3, 2))
    close(LA.lstsq(T(W), T(wide_b)).solution, np.linalg.pinv(W) @ wide_b)  # the minimum-norm solution
    vec = LA.lstsq(T(H), T(b[..., 0]), driver="gelss")
    assert vec.solution.shape == (2, 3) and vec.residuals.shape == (2, 1)
    close(vec.residuals[:, 0], res[:, 0])
    with pytest.raises(RuntimeError, match=r"input.dim\(\) must be greater or equal to other.dim\(\)"):
        LA.lstsq(T(H[0]), T(b[None]))


def test_matrix_exp():
    sym = A3 + np.swapaxes(A3, -1, -2)
    w, V = np.linalg.eigh(sym)
    close(LA.matrix_exp(T(sym)), (V * np.exp(w)[..., None, :]) @ np.swapaxes(V, -1, -2), tol=1e-9)
    nil = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])  # exp = I + N + N^2 / 2
    close(tinytorch.matrix_exp(T(nil)), np.eye(3) + nil + nil @ nil / 2)
    theta = 40.0  # a large norm: many squarings
    rot = np.array([[0.0, -theta], [theta, 0.0]])
    close(T(rot).matrix_exp(), np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]]),
          tol=1e-9)
    f32 = LA.matrix_exp(T(nil, dtype=tinytorch.float32))
    assert f32.dtype == tinytorch.float32
    c = 1j * np.diag([1.0, 2.0])
    close(LA.matrix_exp(T(c)), np.diag(np.exp(np.diag(c))))


def test_matrix_power_cross_vecdot_multi_dot_diagonal():
    for n in (0, 1, 2, 5, -1, -3):
        close(LA.matrix_power(T(A3), n), np.linalg.matrix_power(A3, n), tol=1e-9)
    ints = np.arange(9).reshape(3, 3)
    p = LA.matrix_power(T(ints), 3)
    assert p.dtype == tinytorch.int64 and p.tolist() == np.linalg.matrix_power(ints, 3).tolist()
    x = T(A3, grad=True)
    assert LA.matrix_power(x, 1) is not x
    assert LA.matrix_power(x, 0).requires_grad
    u, v = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    close(LA.cross(T(u), T(v)), np.cross(u, v))
    close(LA.cross(T(u.T), T(v.T), dim=0), np.cross(u.T, v.T, axis=0))
    assert LA.cross(T(ints), T(ints[::-1].copy())).dtype == tinytorch.int64
    close(LA.vecdot(T(u), T(v)), (u * v).sum(-1))
    cu, cv = cplx(2, 3), cplx(2, 3)
    close(LA.vecdot(T(cu), T(cv), dim=0), (cu.conj() * cv).sum(0))
    a, b, c, d = (RNG.standard_normal(s) for s in ((5,), (5, 2), (2, 6), (6,)))
    close(LA.multi_dot([T(a), T(b), T(c), T(d)]), a @ b @ c @ d)
    assert LA.multi_dot([T(a), T(b), T(c), T(d)]).shape == ()
    close(LA.multi_dot((T(b), T(c))), b @ c)
    close(LA.multi_dot([T(b.T), T(b), T(c)]), b.T @ b @ c)
    close(LA.diagonal(T(W)), np.diagonal(W, axis1=-2, axis2=-1))
    close(LA.diagonal(T(W), offset=1, dim1=0, dim2=2), np.diagonal(W, 1, 0, 2))


def _lu_reference(a):
    """Doolittle LU with partial pivoting (numpy, one matrix): LAPACK getrf's LU and 1-based pivots."""
    lu = a.astype(float).copy()
    m, n = lu.shape
    piv = []
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        piv.append(p + 1)
        lu[[j, p]] = lu[[p, j]]
        if lu[j, j] != 0:
            lu[j + 1:, j] /= lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, piv


def test_lu_factor_lu_and_lu_solve():
    for a in (A3, W, H):
        LU, piv = LA.lu_factor(T(a))
        assert piv.dtype == tinytorch.int32
        for i in range(2):
            ref_lu, ref_piv = _lu_reference(a[i])
            close(LU[i], ref_lu)
            assert piv[i].tolist() == ref_piv
        P, L, U = LA.lu(T(a))
        close(P @ L @ U, a)
        assert (L.abs().numpy() <= 1 + 1e-12).all()  # partial pivoting keeps |L| <= 1
        P2, L2, U2 = tinytorch.lu_unpack(LU, piv)
        close(P2, P.numpy())
        close(L2, L.numpy())
    r = LA.lu_factor_ex(T(SINGULAR))
    assert r.info.item() == 3 and r.pivots.tolist() == _lu_reference(SINGULAR)[1]
    LU, piv = LA.lu_factor(T(A3))
    b = RNG.standard_normal((2, 3, 2))
    bt = np.swapaxes(b, -1, -2)
    adj = np.swapaxes(A3, -1, -2)
    close(LA.lu_solve(LU, piv, T(b)), np.linalg.solve(A3, b))
    close(LA.lu_solve(LU, piv, T(b), adjoint=True), np.linalg.solve(adj, b))
    close(LA.lu_solve(LU, piv, T(bt), left=False), bt @ np.linalg.inv(A3))
    close(LA.lu_solve(LU, piv, T(bt), left=False, adjoint=True), bt @ np.linalg.inv(adj))
    close(tinytorch.lu_solve(T(b), LU, piv), np.linalg.solve(A3, b))
    close(T(b).lu_solve(LU, piv), np.linalg.solve(A3, b))
    LU2, piv2, info = tinytorch.lu(T(SINGULAR), get_infos=True)  # the old API doesn't raise for singular input
    assert info.item() == 3 and len(T(A3).lu()) == 2


def test_matrix_norms_from_singular_values():
    for ord in ("nuc", 2, -2):
        close(LA.matrix_norm(T(W), ord), np.linalg.norm(W, ord, axis=(-2, -1)))
        close(LA.matrix_norm(T(W), ord, dim=(2, 0), keepdim=True), np.linalg.norm(W, ord, axis=(2, 0), keepdims=True))
        close(LA.norm(T(W[0]), ord), np.linalg.norm(W[0], ord))
    assert LA.matrix_norm(tinytorch.zeros(0, 0), "nuc").item() == 0
    assert LA.matrix_norm(tinytorch.zeros(2, 0, 3), 2).tolist() == [0, 0]


def test_tensor_methods():
    x = T(A3)
    close(x.det(), np.linalg.det(A3))
    close(x.inverse(), np.linalg.inv(A3))
    close(x.pinverse(), np.linalg.pinv(A3))
    close(x.slogdet().logabsdet, np.linalg.slogdet(A3)[1])
    close(T(spd(A3)).logdet(), np.log(np.linalg.det(spd(A3))))
    close(T(spd(A3)).cholesky(), np.linalg.cholesky(spd(A3)))
    close(x.mH, np.swapaxes(A3, -1, -2))
    c = cplx(2, 3)
    close(T(c).mH, c.conj().T)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_empty_square_inputs(shape):
    z = tinytorch.zeros(*shape, dtype=tinytorch.float64)
    batch = shape[:-2]
    assert LA.inv(z).shape == shape
    assert LA.det(z).shape == batch and (LA.det(z).numpy() == 1).all()  # the empty product
    assert LA.slogdet(z).logabsdet.shape == batch
    assert LA.cholesky(z).shape == shape
    assert LA.eigh(z).eigenvalues.shape == batch + (shape[-1],)
    assert LA.matrix_exp(z).shape == shape
    assert LA.solve(z, tinytorch.zeros(*batch, shape[-1], 2, dtype=tinytorch.float64)).shape == batch + (shape[-1], 2)
    assert LA.lu_factor(z).LU.shape == shape


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3)])
def test_empty_rectangular_inputs(shape):
    z = tinytorch.zeros(*shape, dtype=tinytorch.float64)
    m, n = shape[-2:]
    batch = shape[:-2]
    k = min(m, n)
    U, S, Vh = LA.svd(z)
    assert U.shape == batch + (m, m) and S.shape == batch + (k,) and Vh.shape == batch + (n, n)
    assert LA.svdvals(z).shape == batch + (k,)
    assert LA.pinv(z).shape == batch + (n, m)
    assert LA.qr(z).R.shape == batch + (k, n)
    assert LA.matrix_rank(z).shape == batch and not LA.matrix_rank(z).any()
    P, L, U = LA.lu(z)
    assert P.shape == batch + (m, m) and L.shape == batch + (m, k) and U.shape == batch + (k, n)


# ------------------------------------------------------------------ errors

def test_errors_say_what_is_wrong():
    with pytest.raises(RuntimeError, match="linalg.inv: A must be batches of square matrices, but they are 3 by 2 "):
        LA.inv(tinytorch.ones(3, 2))
    with pytest.raises(RuntimeError, match="linalg.inv: The input tensor A must have at least 2 dimensions."):
        LA.inv(tinytorch.ones(3))
    with pytest.raises(RuntimeError, match="linalg.inv: Expected a floating point or complex tensor as input. Got "
                                           "Long"):
        LA.inv(tinytorch.ones(2, 2, dtype=tinytorch.int64))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
        LA.inv(tinytorch.ones(2, 2, dtype=tinytorch.float16))
    with pytest.raises(LA.LinAlgError, match=r"^linalg.inv: The diagonal element 3 is zero, the inversion could not "
                                             r"be completed because the input matrix is singular.$"):
        LA.inv(T(SINGULAR))
    with pytest.raises(RuntimeError, match=r"linalg.inv: \(Batch element 1\): The diagonal element 3 is zero"):
        LA.inv(T(np.stack([np.eye(3), SINGULAR])))
    with pytest.raises(LA.LinAlgError, match=r"linalg.cholesky: The factorization could not be completed because the "
                                             r"input is not positive-definite \(the leading minor of order 2 is not "
                                             r"positive-definite\)."):
        LA.cholesky(T(NOT_PD))
    with pytest.raises(RuntimeError, match=r"linalg.cholesky_ex: \(Batch element 1\): .* order 2"):
        LA.cholesky_ex(T(np.stack([np.eye(2), NOT_PD])), check_errors=True)
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                                           r"\(3x3 and 2x1\)"):
        LA.solve(tinytorch.eye(3), tinytorch.ones(2, 1))
    with pytest.raises(RuntimeError, match=r"equation XA = B \(3x3 and 3x1\)"):
        LA.solve(tinytorch.eye(3), tinytorch.ones(3), left=False)
    with pytest.raises(RuntimeError, match="Expected A and B to have the same dtype, but found A of type Float and B "
                                           "of type Double instead"):
        LA.solve(tinytorch.eye(3), tinytorch.ones(3, dtype=tinytorch.float64))
    with pytest.raises(RuntimeError, match=r"torch.linalg.solve: \(Batch element 1\): The solver failed because the "
                                           r"input matrix is singular."):
        LA.solve(T(np.stack([np.eye(3), SINGULAR])), T(np.ones((3, 1))))
    with pytest.raises(RuntimeError, match="linalg.solve_triangular: The input tensor B must have at least 2 "):
        LA.solve_triangular(tinytorch.eye(3), tinytorch.ones(3), upper=True)
    with pytest.raises(TypeError, match="upper"):
        LA.solve_triangular(tinytorch.eye(3), tinytorch.ones(3, 2))
    with pytest.raises(RuntimeError, match="qr received unrecognized mode 'x' but expected one of 'reduced'"):
        LA.qr(tinytorch.ones(3, 2), mode="x")
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        LA.eigh(tinytorch.eye(2), UPLO="X")
    with pytest.raises(RuntimeError, match="linalg.svd: Expected a floating point or complex tensor"):
        LA.svdvals(tinytorch.ones(3, 3, dtype=tinytorch.int64))
    with pytest.raises(RuntimeError, match=r"linalg.pinv\(Float\{\[3\]\}\): expected a tensor with 2 or more "):
        LA.pinv(tinytorch.ones(3))
    with pytest.raises(TypeError, match="argument 'n' .* must be int, not float"):
        LA.matrix_power(tinytorch.ones(3, 3), 1.5)
    with pytest.raises(RuntimeError, match="linalg.matrix_exp: A must be batches of square matrices"):
        LA.matrix_exp(tinytorch.ones(3, 2))
    with pytest.raises(RuntimeError, match="linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2"):
        LA.cross(tinytorch.ones(3, 2), tinytorch.ones(3, 2))
    with pytest.raises(RuntimeError, match="linalg.cross: inputs must have the same number of dimensions."):
        LA.cross(tinytorch.ones(3), tinytorch.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(4\) must match the size of tensor b \(2\)"):
        LA.cross(tinytorch.ones(4, 3), tinytorch.ones(2, 3))
    with pytest.raises(RuntimeError, match="linalg.vecdot: Expected x and y to have the same dtype"):
        LA.vecdot(tinytorch.ones(3), tinytorch.ones(3, dtype=tinytorch.float64))
    with pytest.raises(RuntimeError, match="multi_dot\\(\\): expected at least 2 tensors but got 1"):
        LA.multi_dot([tinytorch.ones(3)])
    with pytest.raises(RuntimeError, match=r"multi_dot\(\): tensors 0 and 1 with shapes \[2, 3\] and \[2, 3\] cannot "):
        LA.multi_dot([tinytorch.ones(2, 3), tinytorch.ones(2, 3)])
    with pytest.raises(RuntimeError, match=r"multi_dot\(\): tensor 1 must be 2D but got 3D"):
        LA.multi_dot([tinytorch.ones(3, 3), tinytorch.ones(2, 3, 3), tinytorch.ones(3)])
    with pytest.raises(RuntimeError, match="tensor 0 is float and tensor 1 double"):
        LA.multi_dot([tinytorch.ones(3, 3), tinytorch.ones(3, 3, dtype=tinytorch.float64)])
    with pytest.raises(RuntimeError, match=r"torch.linalg.lstsq: input.size\(-2\) should match other.size\(-2\)"):
        LA.lstsq(tinytorch.ones(3, 2), tinytorch.ones(2, 2))
    with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
        LA.lstsq(tinytorch.ones(3, 2), tinytorch.ones(3, 2), driver="foo")
    with pytest.raises(RuntimeError, match=r"torch.linalg.lu_factor: U\[3,3\] is zero and using it on lu_solve would "):
        LA.lu_factor(T(SINGULAR))
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
        LA.lu_factor(tinytorch.eye(3), pivot=False)
    with pytest.raises(IndexError, match=r"amin\(\): Expected reduction dim -1 to have non-zero size."):
        LA.matrix_norm(tinytorch.zeros(2, 0, 3), -2)
    assert issubclass(LA.LinAlgError, RuntimeError)


def test_qr_derivative_errors():
    x = T(H[0], grad=True)
    with pytest.raises(RuntimeError, match="depends on Q, which is not computed when mode='r'"):
        LA.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        LA.qr(x, mode="complete").R.sum().backward()


# ------------------------------------------------------------------ gradients

E3 = np.eye(3)


def _sym(a):
    return a + a.mT


def _pd(a):
    return a @ a.mT + T(E3)


GRAD_CASES = {
    "inv": (lambda a: LA.inv(a), A3),
    "inverse": (lambda a: a.inverse(), A3[0]),
    "det": (lambda a: LA.det(a), A3),
    "slogdet": (lambda a: LA.slogdet(a).logabsdet, A3),
    "logdet": (lambda a: tinytorch.logdet(_pd(a)), A3),
    "cholesky": (lambda a: LA.cholesky(_pd(a)), A3),
    "cholesky_upper": (lambda a: LA.cholesky(_pd(a), upper=True), A3[0]),
    "cholesky_solve": (lambda a: tinytorch.cholesky_solve(a, LA.cholesky(_pd(a))), A3),
    "cholesky_inverse": (lambda a: tinytorch.cholesky_inverse(LA.cholesky(_pd(a))), A3[0]),
    "qr": (lambda a: tuple(LA.qr(a)), A3),
    "qr_tall": (lambda a: tuple(LA.qr(a)), H[0]),
    "qr_wide": (lambda a: tuple(LA.qr(a)), W[0]),
    "eigh": (lambda a: (lambda w, v: (w, v * v))(*LA.eigh(_sym(a))), A3),
    "eigvalsh": (lambda a: LA.eigvalsh(_sym(a)), A3[0]),
    "svd": (lambda a: (lambda u, s, vh: (s, (u * s.unsqueeze(-2)) @ vh, u * u, vh * vh))(*LA.svd(a)), A3),
    "svd_wide": (lambda a: (lambda u, s, vh: (s, u * u, vh[..., :3, :] * vh[..., :3, :]))(*LA.svd(a)), W[0]),
    "svd_tall": (lambda a: (lambda u, s, vh: (s, u * u, vh * vh))(*LA.svd(a, full_matrices=False)), H[0]),
    "svd_old": (lambda a: (lambda u, s, v: (u * s.unsqueeze(-2)) @ v.mT)(*tinytorch.svd(a)), W[0]),
    "svdvals": (lambda a: LA.svdvals(a), W),
    "solve": (lambda a: LA.solve(a, a[..., :2] * 2), A3),
    "solve_vector": (lambda a: LA.solve(a, a[..., 0] * 2), A3),
    "solve_right": (lambda a: LA.solve(a, a[..., :2, :] * 2, left=False), A3[0]),
    "solve_triangular": (lambda a: LA.solve_triangular(a + T(3 * E3), a * 2, upper=True), A3),
    "solve_triangular_unit_right": (lambda a: LA.solve_triangular(a, a * 2, upper=False, left=False,
                                                                  unitriangular=True), A3[0]),
    "triangular_solve": (lambda a: tinytorch.triangular_solve(a, a + T(3 * E3), transpose=True)[0], A3[0]),
    "pinv": (lambda a: LA.pinv(a), A3[0]),
    "pinv_wide": (lambda a: LA.pinv(a), W[0]),
    "pinv_tall": (lambda a: tinytorch.pinverse(a), H[0]),
    "lstsq": (lambda a: LA.lstsq(a, a[..., :1] * 2).solution, H[0]),
    "lstsq_residuals": (lambda a: LA.lstsq(a, a[..., :1] + 1, driver="gelsd").residuals, H[0]),
    "matrix_exp": (lambda a: LA.matrix_exp(a), A3),
    "matrix_power": (lambda a: (LA.matrix_power(a, 3), LA.matrix_power(a, -2)), A3[0]),
    "lu": (lambda a: tuple(LA.lu(a)[1:]), A3),
    "lu_wide": (lambda a: tuple(LA.lu(a)[1:]), W[0]),
    "lu_tall": (lambda a: tuple(LA.lu(a)[1:]), H[0]),
    "lu_factor": (lambda a: LA.lu_factor(a).LU, A3[0]),
    "lu_factor_wide": (lambda a: LA.lu_factor(a).LU, W[0]),
    "lu_factor_tall": (lambda a: LA.lu_factor(a).LU, H[0]),
    "lu_solve": (lambda a: LA.lu_solve(*LA.lu_factor(a), a.mT * 2), A3[0]),
    "lu_solve_adjoint_right": (lambda a: LA.lu_solve(*LA.lu_factor(a), a.mT * 2, left=False, adjoint=True), A3[0]),
    "matrix_norms": (lambda a: (LA.matrix_norm(a, "nuc"), LA.matrix_norm(a, 2), LA.matrix_norm(a, -2, dim=(0, 2))),
                     W),
    "cross": (lambda a: LA.cross(a, a.flip(-1)), A3),
    "vecdot": (lambda a: LA.vecdot(a, a.flip(0)), A3),
    "multi_dot": (lambda a: LA.multi_dot([a[0, 0], a[0], a[1], a[1, :, 0]]), A3),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients(name):
    fn, a = GRAD_CASES[name]
    x = T(a, grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_det_gradient_of_a_singular_matrix_is_the_cofactor_matrix():
    x = T(SINGULAR, grad=True)
    LA.det(x).backward()
    cof = np.array([[np.linalg.det(np.delete(np.delete(SINGULAR, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                    for i in range(3)])
    close(x.grad, cof)


def test_grad_fn_names():
    x = T(A3, grad=True)
    assert LA.inv(x).grad_fn.name() == "LinalgInvExBackward0"
    assert LA.det(x).grad_fn.name() == "LinalgDetBackward0"
    assert LA.solve(x, x).grad_fn.name() == "LinalgSolveExBackward0"
    assert LA.svd(x).S.grad_fn.name() == "LinalgSvdBackward0"
    assert LA.matrix_exp(x).grad_fn.name() == "LinalgMatrixExpBackward0"


def _complex_grad_check(fn, a, eps=1e-6):
    """autograd's gradient of L = Re(sum(seed * fn(a))) against central differences along the real and the
    imaginary axis of each element (PyTorch's convention: grad = dL/dRe + i dL/dIm)."""
    rng = np.random.default_rng(1)
    outs = fn(T(a))
    outs = outs if isinstance(outs, tuple) else (outs,)
    seeds = [T(rng.standard_normal(o.shape) + (1j * rng.standard_normal(o.shape) if o.is_complex() else 0))
             for o in outs]

    def loss(x):
        r = fn(x)
        r = r if isinstance(r, tuple) else (r,)
        return sum((o * s).real.sum() if o.is_complex() or s.is_complex() else (o * s).sum() for o, s in zip(r, seeds))
    x = T(a, grad=True)
    got = tinytorch.autograd.grad(loss(x), x)[0].numpy()
    want = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        for step in (1, 1j):
            hi, lo = a.copy(), a.copy()
            hi[idx] += eps * step
            lo[idx] -= eps * step
            want[idx] += (loss(T(hi)).item() - loss(T(lo)).item()) / (2 * eps) * step
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _herm(a):
    return a + a.mH


COMPLEX_CASES = {
    "inv": (lambda a: LA.inv(a), (2, 3, 3)),
    "det": (lambda a: LA.det(a), (2, 3, 3)),
    "slogdet": (lambda a: tuple(LA.slogdet(a)), (2, 3, 3)),
    "cholesky": (lambda a: LA.cholesky(_herm(a) + 8 * tinytorch.eye(3, dtype=tinytorch.complex128)), (3, 3)),
    "qr": (lambda a: tuple(LA.qr(a)), (4, 3)),
    "eigh": (lambda a: (lambda w, v: (w, v.abs()))(*LA.eigh(_herm(a))), (3, 3)),
    "svd": (lambda a: (lambda u, s, vh: (s, u.abs(), u[..., :1] * vh[..., :1, :]))(*LA.svd(a, full_matrices=False)),
            (4, 3)),
    "solve": (lambda a: LA.solve(a, a[..., :2] * 2), (3, 3)),
    "pinv": (lambda a: LA.pinv(a), (3, 4)),
    "matrix_exp": (lambda a: LA.matrix_exp(a), (3, 3)),
    "lu": (lambda a: tuple(LA.lu(a)[1:]), (3, 3)),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_gradients(name):
    fn, shape = COMPLEX_CASES[name]
    _complex_grad_check(fn, np.random.default_rng(2).standard_normal(shape) + 1j *
                        np.random.default_rng(3).standard_normal(shape))


# ------------------------------------------------------------------ PyTorch

def _flat(r):
    if isinstance(r, (tuple, list)):
        return [y for x in r for y in _flat(x)]
    return [r]


TORCH_CASES = {
    "inv": (lambda L, a: L.linalg.inv(a), A3),
    "inv_ex": (lambda L, a: tuple(L.linalg.inv_ex(a)), A3),
    "det": (lambda L, a: (L.linalg.det(a), L.det(a)), A3),
    "slogdet": (lambda L, a: tuple(L.linalg.slogdet(a)), A3),
    "logdet": (lambda L, a: L.logdet(a @ a.mT + L.eye(3, dtype=a.dtype)), A3),
    "cholesky": (lambda L, a: tuple(L.linalg.cholesky_ex(a @ a.mT + L.eye(3, dtype=a.dtype), upper=True)), A3),
    "cholesky_solve": (lambda L, a: L.cholesky_solve(a, L.linalg.cholesky(a[0] @ a[0].mT)), A3),
    "qr": (lambda L, a: tuple(L.linalg.qr(a)), H),
    "qr_wide": (lambda L, a: tuple(L.linalg.qr(a, mode="complete")), W),
    "eigh": (lambda L, a: (lambda w, v: (w, v.abs()))(*L.linalg.eigh(a + a.mT, UPLO="U")), A3),
    "svd": (lambda L, a: (lambda u, s, vh: (s, u.abs(), vh.abs()))(*L.linalg.svd(a, full_matrices=False)), W),
    "svd_old": (lambda L, a: (lambda u, s, v: (s, u.abs(), v.abs()))(*L.svd(a)), H),
    "svdvals": (lambda L, a: L.linalg.svdvals(a), H),
    "solve": (lambda L, a: (L.linalg.solve(a, a[..., 0]), L.linalg.solve(a, a[0], left=False)), A3),
    "solve_triangular": (lambda L, a: L.linalg.solve_triangular(a, a[0], upper=False, unitriangular=True), A3),
    "triangular_solve": (lambda L, a: tuple(L.triangular_solve(a, a[0] + 3 * L.eye(3, dtype=a.dtype))), A3),
    "pinv": (lambda L, a: (L.linalg.pinv(a), L.linalg.pinv(a, atol=0.5)), W),
    "matrix_rank": (lambda L, a: (L.linalg.matrix_rank(a), L.linalg.matrix_rank(a, atol=0.9, rtol=0.1)), W),
    "lstsq": (lambda L, a: tuple(L.linalg.lstsq(a, a[..., :2], driver="gelsd")), H),
    "lstsq_gelsy": (lambda L, a: tuple(L.linalg.lstsq(a, a[..., 0])), H),
    "matrix_exp": (lambda L, a: L.linalg.matrix_exp(a * 3), A3),
    "matrix_power": (lambda L, a: (L.linalg.matrix_power(a, 0), L.linalg.matrix_power(a, -3)), A3),
    "lu_factor": (lambda L, a: tuple(L.linalg.lu_factor_ex(a)), W),
    "lu": (lambda L, a: tuple(L.linalg.lu(a)), H),
    "lu_solve": (lambda L, a: L.linalg.lu_solve(*L.linalg.lu_factor(a), a.mT, adjoint=True), A3),
    "cross": (lambda L, a: L.linalg.cross(a, a[:1], dim=1), A3),
    "vecdot": (lambda L, a: L.linalg.vecdot(a, a[0], dim=-2), A3),
    "multi_dot": (lambda L, a: L.linalg.multi_dot([a[0, 0], a[0], a[1]]), A3),
    "matrix_norm": (lambda L, a: [L.linalg.matrix_norm(a, o) for o in ("nuc", 2, -2)], W),
}


@has_torch
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_matches_pytorch(name):
    import torch
    fn, a = TORCH_CASES[name]
    ours, theirs = T(a, grad=True), torch.tensor(a, requires_grad=True)
    got, want = _flat(fn(tinytorch, ours)), _flat(fn(torch, theirs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-8, atol=1e-8)
    seeds = [np.random.default_rng(4).standard_normal(tuple(w.shape)) for w in want]
    diff = [i for i, w in enumerate(want) if w.requires_grad]
    if diff:
        sum((got[i] * T(seeds[i])).sum() for i in diff).backward()
        sum((want[i] * torch.tensor(seeds[i])).sum() for i in diff).backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-7, atol=1e-8)


@has_torch
def test_float32_and_complex_results_match_pytorch():
    import torch
    for lib_a in ((tinytorch, T(A3, dtype=tinytorch.float32)), (torch, torch.tensor(A3, dtype=torch.float32))):
        lib, a = lib_a
        r = [lib.linalg.inv(a), lib.linalg.svdvals(a), lib.linalg.eigvalsh(a + a.mT), lib.linalg.det(a),
             lib.linalg.matrix_exp(a), lib.linalg.cholesky(a @ a.mT + lib.eye(3))]
        if lib is tinytorch:
            ours = r
        else:
            theirs = r
    for g, w in zip(ours, theirs):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1] == "float32"
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)
    c = cplx(2, 3, 3)
    for f in (lambda L, x: L.linalg.inv(x), lambda L, x: L.linalg.det(x), lambda L, x: L.linalg.slogdet(x)[0],
              lambda L, x: L.linalg.svdvals(x), lambda L, x: L.linalg.matrix_exp(x), lambda L, x: L.linalg.qr(x)[1],
              lambda L, x: L.linalg.lu_factor(x)[0]):
        g, w = f(tinytorch, T(c)), f(torch, torch.tensor(c))
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(g.numpy(), w.resolve_conj().numpy(), rtol=1e-8, atol=1e-8)
