"""Matrix products: matmul for every combination of 1-D, 2-D and batched N-D operands (with
broadcast batch dimensions), float64 gradcheck and gradgradcheck, values against NumPy, errors."""
import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck, gradgradcheck


def _t(*shape, seed=0, requires_grad=True):
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.uniform(-1, 1, size=shape), dtype=torch.float64, requires_grad=requires_grad)


MATMUL_SHAPES = [
    ((3,), (3,)),            # 1D x 1D: dot product
    ((3,), (3, 2)),          # 1D x 2D
    ((2, 3), (3,)),          # 2D x 1D
    ((2, 3), (3, 4)),        # 2D x 2D
    ((5, 2, 3), (3, 4)),     # 3D x 2D
    ((2, 3), (5, 3, 4)),     # 2D x 3D
    ((5, 2, 3), (5, 3, 4)),  # batched
    ((2, 1, 3, 4), (5, 4, 2)),  # broadcast batch dimensions
    ((3,), (2, 3, 4)),       # 1D x 3D
    ((2, 2, 3), (3,)),       # 3D x 1D
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: f"{s[0]}@{s[1]}")
def test_matmul_values_and_shape_match_numpy(shapes):
    a, b = _t(*shapes[0], seed=1), _t(*shapes[1], seed=2)
    out = a @ b
    ref = np.matmul(a.detach().numpy(), b.detach().numpy())
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(torch.matmul(a, b).detach().numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: f"{s[0]}@{s[1]}")
def test_matmul_gradcheck(shapes):
    a, b = _t(*shapes[0], seed=1), _t(*shapes[1], seed=2)
    assert gradcheck(torch.matmul, (a, b))
    assert gradcheck(lambda x: x @ b.detach(), (a,))
    assert gradcheck(lambda y: a.detach() @ y, (b,))


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3), (3,)), ((3,), (3, 2)),
                                    ((2, 1, 3, 4), (5, 4, 2))], ids=lambda s: f"{s[0]}@{s[1]}")
def test_matmul_gradgradcheck(shapes):
    a, b = _t(*shapes[0], seed=1), _t(*shapes[1], seed=2)
    assert gradgradcheck(torch.matmul, (a, b))


def test_matmul_of_1d_by_1d_is_a_zero_dim_array():
    r = torch.ones(3) @ torch.ones(3)
    assert r.shape == () and r.item() == 3.0 and isinstance(r._data, np.ndarray) and r.is_cpu


def test_products_refuse_two_dtypes_with_pytorchs_messages():
    # PyTorch's products do not promote: a float64 batch into a float32 model is an error there, not a silent
    # float64 computation. Each case names the kernel PyTorch reaches (shapes are checked first).
    f32, f64 = torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float64)
    cases = [
        (lambda: f32 @ f64, "expected m1 and m2 to have the same dtype, but got: float != double"),
        (lambda: torch.mm(f64.t(), f32.t()), "expected m1 and m2 to have the same dtype, but got: double != float"),
        (lambda: f32 @ torch.ones(3, 2, dtype=torch.int64),
         "expected m1 and m2 to have the same dtype, but got: float != long int"),
        (lambda: f32 @ torch.ones(3, dtype=torch.float64),
         "addmv input tensors must have the same dtype, but got Double, Float, and Double"),
        (lambda: torch.dot(torch.ones(3, dtype=torch.float64), torch.ones(3)),
         "dot : expected both vectors to have same dtype, but found Double and Float"),
        (lambda: torch.bmm(torch.ones(1, 2, 3), torch.ones(1, 3, 2).half()), "expected scalar type Float but found Half"),
        (lambda: torch.addmm(torch.ones(2, 2), f32, f64), "self and mat2 must have the same dtype, but got Float and Double"),
    ]
    for call, msg in cases:
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == msg
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(2x3 and 2x3\)"):
        f32 @ torch.ones(2, 3, dtype=torch.float64)
    assert (torch.ones(2, 2, dtype=torch.int64) @ torch.ones(2, 2, dtype=torch.int64)).dtype is torch.int64


def test_mm_bmm_mv_dot_outer_addmm():
    a, b, v = _t(2, 3, seed=1), _t(3, 4, seed=2), _t(3, seed=3)
    assert gradcheck(torch.mm, (a, b))
    assert gradcheck(torch.mv, (a, v))
    assert gradcheck(torch.dot, (v, _t(3, seed=4)))
    assert gradcheck(torch.outer, (v, _t(2, seed=5)))
    assert gradcheck(lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2.0), (_t(4, seed=6), a, b))
    ba, bb = _t(2, 2, 3, seed=7), _t(2, 3, 2, seed=8)
    assert gradcheck(torch.bmm, (ba, bb))
    assert gradcheck(lambda c, x, y: torch.baddbmm(c, x, y, beta=2.0, alpha=-1.0), (_t(2, 2, 2, seed=9), ba, bb))
    np.testing.assert_allclose(torch.outer(v, v).detach().numpy(), np.outer(v.detach().numpy(), v.detach().numpy()))
    np.testing.assert_allclose(torch.bmm(ba, bb).detach().numpy(), ba.detach().numpy() @ bb.detach().numpy())


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
                                       ("i,i->", [(3,), (3,)]), ("ij->ji", [(2, 3)]), ("ij,j->i", [(2, 3), (3,)]),
                                       ("ij->", [(2, 3)])])
def test_einsum_gradcheck_and_values(eq, shapes):
    ins = tuple(_t(*s, seed=i) for i, s in enumerate(shapes))
    assert gradcheck(lambda *xs: torch.einsum(eq, *xs), ins)
    ref = np.einsum(eq, *[t.detach().numpy() for t in ins])
    np.testing.assert_allclose(torch.einsum(eq, *ins).detach().numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("eq,shapes", [("...ij,jk->...ik", [(2, 2, 3), (3, 4)]), ("...ij,jk", [(2, 3), (3, 2)]),
                                       ("b...d,bkd->b...k", [(2, 3, 2), (2, 4, 2)]), ("ij,ij->i", [(1, 3), (4, 3)]),
                                       ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)])])
def test_einsum_ellipsis_and_broadcasting(eq, shapes):
    ins = tuple(_t(*s, seed=i) for i, s in enumerate(shapes))
    assert gradcheck(lambda *xs: torch.einsum(eq, *xs), ins)
    ref = _np_einsum_broadcast(eq, [t.detach().numpy() for t in ins])
    np.testing.assert_allclose(torch.einsum(eq, *ins).detach().numpy(), ref, rtol=1e-12)


def _np_einsum_broadcast(eq, arrays):
    if eq == "ij,ij->i":  # NumPy's einsum does not broadcast explicit labels; PyTorch does
        return (arrays[0] * arrays[1]).sum(-1)
    return np.einsum(eq, *arrays)


def test_matmul_errors_match_pytorch():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.ones(2, 3) @ torch.ones(4, 5)
    with pytest.raises(RuntimeError, match="inconsistent tensor size, expected tensor \\[3\\] and src \\[4\\] to have "
                                           "the same number of elements, but got 3 and 4 elements respectively"):
        torch.ones(3) @ torch.ones(4)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D, but they are 0D and 1D"):
        torch.tensor(1.0) @ torch.ones(3)
    with pytest.raises(RuntimeError, match=r"^size mismatch, got input \(2\), mat \(2x3\), vec \(4\)$"):
        torch.ones(2, 3) @ torch.ones(4)
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(5\) at "
                                           r"non-singleton dimension 1$"):
        torch.ones(2, 3, 3, 4) @ torch.ones(5, 4, 2)
    with pytest.raises(RuntimeError, match="self must be a matrix"):
        torch.mm(torch.ones(3), torch.ones(3, 2))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        torch.bmm(torch.ones(2, 3), torch.ones(2, 3, 2))
    with pytest.raises(RuntimeError, match=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] "
                                           r"but got: \[3, 3\]."):
        torch.bmm(torch.ones(2, 2, 3), torch.ones(3, 3, 2))
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        torch.dot(torch.ones(2, 2), torch.ones(2))
