"""Complex tensors: dtypes and promotion, construction, views as real pairs, arithmetic, printing, and gradients
(gradcheck in float64 through complex intermediates; PyTorch's convention checked against torch when importable)."""
import math
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

rng = np.random.default_rng(0)


def t(*shape, grad=True):
    return tinytorch.tensor(rng.standard_normal(shape), requires_grad=grad)


def c(*shape, dtype=np.complex128):
    return tinytorch.tensor((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))


def as_c(x):
    """A real float64 tensor (..., 2) read as complex: gradcheck's inputs stay real."""
    return tinytorch.view_as_complex(x)


# ------------------------------------------------------------------ dtypes

def test_dtypes_names_and_aliases():
    assert tinytorch.cfloat is tinytorch.complex64 and tinytorch.cdouble is tinytorch.complex128
    assert repr(tinytorch.complex64) == "torch.complex64"
    assert tinytorch.complex64.is_complex and not tinytorch.complex64.is_floating_point
    assert tinytorch.complex128.itemsize == 16
    assert tinytorch.complex64.to_real() is tinytorch.float32 and tinytorch.float64.to_complex() is tinytorch.complex128
    z = tinytorch.zeros(2, dtype=tinytorch.cfloat)
    assert z.is_complex() and not z.is_floating_point() and z.dtype is tinytorch.complex64
    assert not tinytorch.zeros(2).is_complex()
    assert z.type() == "torch.ComplexFloatTensor"
    assert tinytorch.ones(2).to(tinytorch.cdouble).dtype is tinytorch.complex128
    assert tinytorch.ones(2).cfloat().dtype is tinytorch.complex64


def test_promotion():
    P = tinytorch.promote_types
    assert P(tinytorch.complex64, tinytorch.float64) is tinytorch.complex128
    assert P(tinytorch.float16, tinytorch.complex64) is tinytorch.complex64
    assert P(tinytorch.int64, tinytorch.complex64) is tinytorch.complex64
    assert P(tinytorch.complex64, tinytorch.complex128) is tinytorch.complex128
    f32, f64 = tinytorch.ones(2), tinytorch.ones(2, dtype=tinytorch.float64)
    assert (f32 * 1j).dtype is tinytorch.complex64
    assert (f64 * 1j).dtype is tinytorch.complex128
    assert (tinytorch.arange(3) * 1j).dtype is tinytorch.complex64
    assert (f64 + tinytorch.tensor(1j)).dtype is tinytorch.complex128  # a 0-d complex brings its category
    assert (c(2, dtype=np.complex64) + f64).dtype is tinytorch.complex128
    assert (c(2, dtype=np.complex64) * 2.5).dtype is tinytorch.complex64


def test_creation_from_python_and_numpy():
    z = tinytorch.tensor([1 + 2j, 3.0])
    assert z.dtype is tinytorch.complex64 and z.tolist() == [1 + 2j, 3 + 0j]
    assert tinytorch.tensor(np.array([1j])).dtype is tinytorch.complex128
    assert tinytorch.from_numpy(np.zeros(2, np.complex64)).dtype is tinytorch.complex64
    assert tinytorch.tensor([1j], dtype=tinytorch.cdouble).dtype is tinytorch.complex128
    assert complex(tinytorch.tensor(1 - 1j)) == 1 - 1j


def test_requires_grad_only_float_and_complex():
    assert c(2).requires_grad_().requires_grad
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require gradients$"):  # 2.13's
        tinytorch.arange(3).requires_grad_()
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype can require gradients$"):
        tinytorch.arange(3).requires_grad = True


# ------------------------------------------------------------------ construction and views

def test_complex_and_polar_forward():
    re, im = tinytorch.tensor([1.0, -2.0]), tinytorch.tensor([0.5, 3.0])
    z = tinytorch.complex(re, im)
    assert z.dtype is tinytorch.complex64
    np.testing.assert_array_equal(z.numpy(), np.array([1 + 0.5j, -2 + 3j], np.complex64))
    p = tinytorch.polar(tinytorch.tensor([2.0, 1.0], dtype=tinytorch.float64), tinytorch.tensor([0.0, math.pi / 2],
                                                                                            dtype=tinytorch.float64))
    assert p.dtype is tinytorch.complex128
    np.testing.assert_allclose(p.numpy(), [2, 1j], atol=1e-15)
    # broadcasting, as in the Llama rotary embedding's polar(ones_like(freqs), freqs)
    assert tinytorch.complex(tinytorch.ones(3, 1), tinytorch.zeros(4)).shape == (3, 4)


def test_complex_and_polar_errors():
    with pytest.raises(RuntimeError, match="Expected both inputs to be Half, Float or Double tensors but got Long and"):
        tinytorch.complex(tinytorch.arange(2), tinytorch.arange(2))
    with pytest.raises(RuntimeError, match="Expected object of scalar type Float but got scalar type Double"):
        tinytorch.polar(tinytorch.ones(2), tinytorch.ones(2, dtype=tinytorch.float64))
    with pytest.raises(RuntimeError, match="The size of tensor a \\(2\\) must match the size of tensor b \\(3\\)"):
        tinytorch.complex(tinytorch.ones(2), tinytorch.ones(3))


def test_view_as_complex_and_real_share_memory():
    x = tinytorch.arange(8, dtype=tinytorch.float32).reshape(2, 2, 2)
    z = tinytorch.view_as_complex(x)
    assert z.shape == (2, 2) and z.dtype is tinytorch.complex64
    assert z[1, 0].item() == 4 + 5j
    x[1, 0, 1] = 50.0
    assert z[1, 0].item() == 4 + 50j  # a view: writes to x show through
    r = z.view_as_real()
    assert r.shape == (2, 2, 2) and r.dtype is tinytorch.float32 and r._data.base is not None
    np.testing.assert_array_equal(r.numpy(), x.numpy())
    assert z._version == x._version
    # a strided complex tensor still views as real pairs
    zt = c(3, 4).t()
    np.testing.assert_array_equal(tinytorch.view_as_real(zt).numpy()[..., 1], zt.numpy().imag)


def test_meta_device():
    """A model built on the meta device computes its rotary table with polar: shapes and dtypes, no data."""
    with tinytorch.device("meta"):
        f = tinytorch.outer(tinytorch.arange(4).float(), tinytorch.ones(3))
        z = tinytorch.polar(tinytorch.ones_like(f), f)
        r = tinytorch.view_as_real(z)
        c = tinytorch.view_as_complex(r)
    assert z.is_meta and z.shape == (4, 3) and z.dtype is tinytorch.complex64
    assert r.shape == (4, 3, 2) and r.dtype is tinytorch.float32 and r.stride() == (6, 2, 1)
    assert c.shape == (4, 3) and (c * c).dtype is tinytorch.complex64 and c.real.shape == (4, 3)


def test_view_as_complex_errors():
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        tinytorch.view_as_complex(tinytorch.ones(2, 3))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension with stride 1"):
        tinytorch.view_as_complex(tinytorch.ones(2, 2).t())
    with pytest.raises(RuntimeError, match="Tensor must have a stride divisible by 2"):
        tinytorch.view_as_complex(tinytorch.ones(3, 3)[:, :2])
    with pytest.raises(RuntimeError, match="only supported for float and double tensors, but got a tensor of scalar "
                                           "type: Long"):
        tinytorch.view_as_complex(tinytorch.ones(2, 2, dtype=tinytorch.int64))
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex tensors"):
        tinytorch.view_as_real(tinytorch.ones(2))


def test_real_imag_conj_abs_angle():
    zn = np.array([3 + 4j, -1 - 1j, 0j, -2 + 0j])
    z = tinytorch.tensor(zn)
    np.testing.assert_array_equal(z.real.numpy(), zn.real)
    np.testing.assert_array_equal(z.imag.numpy(), zn.imag)
    np.testing.assert_array_equal(z.conj().numpy(), zn.conj())
    np.testing.assert_array_equal(tinytorch.abs(z).numpy(), np.abs(zn))
    assert tinytorch.abs(z).dtype is tinytorch.float64
    np.testing.assert_array_equal(z.angle().numpy(), np.angle(zn))
    np.testing.assert_allclose(z.sgn().numpy(), [0.6 + 0.8j, (-1 - 1j) / math.sqrt(2), 0, -1], rtol=1e-15)
    assert not z.is_conj() and z.resolve_conj() is z
    # real tensors: real is the tensor itself, conj too; angle is 0 or pi; imag refuses
    x = tinytorch.tensor([1.0, -2.0, 0.0])
    assert x.real is x and x.conj() is x
    np.testing.assert_array_equal(x.angle().numpy(), np.array([0, math.pi, 0], np.float32))
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag
    with pytest.raises(RuntimeError, match="torch.sign is not intended to support complex numbers"):
        z.sign()
    # .real and .imag are views that can be written through
    w = tinytorch.zeros(2, dtype=tinytorch.complex64)
    w.imag.fill_(2.0)
    w.real = tinytorch.tensor([1.0, 3.0])
    assert w.tolist() == [1 + 2j, 3 + 2j]


def test_arithmetic_reductions_and_shapes_match_numpy():
    an, bn = c(2, 3).numpy(), c(2, 3).numpy()
    a, b = tinytorch.tensor(an), tinytorch.tensor(bn)
    for got, want in [(a + b, an + bn), (a - b, an - bn), (a * b, an * bn), (a / b, an / bn), (-a, -an),
                      (a * 2.0, an * 2.0), (2 - a, 2 - an), (a * 1j, an * 1j), (a.sum(), an.sum()),
                      (a.sum(1), an.sum(1)), (a.mean(0), an.mean(0)), (a.exp(), np.exp(an)),
                      (a.reshape(3, 2), an.reshape(3, 2)), (a.transpose(0, 1), an.T), (a.unsqueeze(1), an[:, None]),
                      (a.flatten(), an.ravel()), (a.view(6), an.reshape(6)), (a[1:, ::2], an[1:, ::2])]:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    x = tinytorch.ones(2, 3, dtype=tinytorch.float64)
    np.testing.assert_allclose((x * a).numpy(), an)
    a2 = a.clone()
    a2 += 1j
    np.testing.assert_allclose(a2.numpy(), an + 1j)
    with pytest.raises(RuntimeError, match="result type ComplexDouble can't be cast to the desired output type Double"):
        x.add_(a)


def test_casts_between_real_and_complex():
    z = tinytorch.tensor([1 + 2j])
    with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
        f = z.float()
    assert f.tolist() == [1.0]
    x = tinytorch.tensor([1.5])
    assert x.type_as(z).dtype is tinytorch.complex64 and x.type_as(z).tolist() == [1.5 + 0j]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tinytorch.view_as_real(z).type_as(x)  # no warning: a real view


def test_printing():
    assert repr(tinytorch.tensor([1 + 2j, -0.5 - 10j])) == "tensor([ 1.0000+2.j, -0.5000-10.j])"
    assert repr(tinytorch.tensor([1.5 + 2.25j, 3 - 1j])) == "tensor([1.5000+2.2500j, 3.0000-1.0000j])"
    assert repr(tinytorch.tensor([], dtype=tinytorch.complex64)) == "tensor([], dtype=torch.complex64)"
    assert repr(tinytorch.tensor([1j], dtype=tinytorch.complex128)) == "tensor([0.+1.j], dtype=torch.complex128)"
    assert repr(tinytorch.tensor(2 + 0j)) == "tensor(2.+0.j)"


def test_save_load_round_trip(tmp_path):
    z = c(3, 2)
    tinytorch.save({"z": z, "z64": z.to(tinytorch.complex64)}, tmp_path / "z.pt")
    got = tinytorch.load(tmp_path / "z.pt")
    assert got["z"].dtype is tinytorch.complex128 and got["z64"].dtype is tinytorch.complex64
    np.testing.assert_array_equal(got["z"].numpy(), z.numpy())


# ------------------------------------------------------------------ gradients (float64, finite differences)

GRADCHECKS = {
    "complex": (lambda a, b: tinytorch.view_as_real(tinytorch.complex(a, b)), lambda: (t(3, 1), t(4))),
    "polar": (lambda r, th: tinytorch.view_as_real(tinytorch.polar(r, th)), lambda: (t(3, 4), t(4))),
    "view_as_complex_real": (lambda x: tinytorch.view_as_real(as_c(x) * 2.0), lambda: (t(3, 2),)),
    "real_imag": (lambda x: as_c(x).real * 3.0 + as_c(x).imag * as_c(x).real, lambda: (t(4, 2),)),
    "conj": (lambda x, y: tinytorch.view_as_real(as_c(x).conj() * as_c(y)), lambda: (t(3, 2), t(3, 2))),
    "abs": (lambda x: as_c(x).abs(), lambda: (t(5, 2),)),
    "angle": (lambda x: as_c(x).angle(), lambda: (t(5, 2),)),
    "sgn": (lambda x: tinytorch.view_as_real(as_c(x).sgn()), lambda: (t(5, 2),)),
    "add_sub": (lambda x, y, s: tinytorch.view_as_real(as_c(x) + as_c(y) - s * 1j), lambda: (t(3, 2), t(3, 2), t(3))),
    "mul_broadcast": (lambda x, y: tinytorch.view_as_real(as_c(x) * as_c(y)), lambda: (t(2, 3, 2), t(3, 2))),
    "mul_real_by_complex": (lambda x, r: tinytorch.view_as_real(r * as_c(x)), lambda: (t(2, 3, 2), t(2, 3))),
    "div": (lambda x, y: tinytorch.view_as_real(as_c(x) / as_c(y)), lambda: (t(3, 2), t(3, 2))),
    "div_scalar": (lambda x: tinytorch.view_as_real(as_c(x) / (2 - 1j)), lambda: (t(3, 2),)),
    "sum_mean": (lambda x: tinytorch.view_as_real(as_c(x).sum(0) + as_c(x).mean()), lambda: (t(4, 3, 2),)),
    "shapes": (lambda x: tinytorch.view_as_real(as_c(x).transpose(0, 1).reshape(6).unsqueeze(0).flatten()),
               lambda: (t(2, 3, 2),)),
    "exp_holomorphic": (lambda x: tinytorch.view_as_real(as_c(x).exp() + as_c(x).sin() * as_c(x).sqrt()),
                        lambda: (t(4, 2),)),
    "type_as": (lambda x, y: tinytorch.view_as_real(x.type_as(as_c(y)) * as_c(y)), lambda: (t(3), t(3, 2))),
    "to_real": (lambda x: _quiet(lambda: (as_c(x) * (1 + 2j)).to(tinytorch.float64)), lambda: (t(3, 2),)),
    "rotary": (lambda q, r, th: tinytorch.view_as_real(tinytorch.view_as_complex(q.reshape(2, 3, -1, 2))
                                                       * tinytorch.polar(r, th)).flatten(2),
               lambda: (t(2, 3, 4), t(3, 2), t(3, 2))),
}


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck(name):
    fn, inputs = GRADCHECKS[name]
    assert gradcheck(fn, inputs())


@pytest.mark.parametrize("name", ["polar", "abs", "mul_broadcast", "div", "angle"])
def test_gradgradcheck(name):
    fn, inputs = GRADCHECKS[name]
    assert gradgradcheck(fn, inputs())


def test_complex_leaf_gradient_convention():
    """z.grad = dL/dx + i dL/dy for z = x + iy: the real loss |z|^2 has gradient 2z, and z * w has w-conjugate."""
    z = tinytorch.tensor([1 + 2j, -3 + 0.5j], requires_grad=True)
    (z.abs() ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * z.detach().numpy(), rtol=1e-6)
    w = tinytorch.tensor([2 - 1j, 1j])
    z.grad = None
    tinytorch.view_as_real(z * w)[..., 0].sum().backward()  # L = Re(z w): dL/dz* gives conj(w)
    np.testing.assert_allclose(z.grad.numpy(), w.numpy().conj(), rtol=1e-6)


# ------------------------------------------------------------------ against PyTorch

def test_rotary_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    qn = rng.standard_normal((2, 5, 4, 8)).astype(np.float32)
    freqs = np.outer(np.arange(5), 1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32)
    outs = []
    for lib in (tinytorch, torch):
        q = lib.tensor(qn, requires_grad=True)
        f = lib.tensor(freqs)
        cis = lib.polar(lib.ones_like(f), f).view(1, 5, 1, 4)
        qc = lib.view_as_complex(q.float().reshape(2, 5, 4, -1, 2))
        out = lib.view_as_real(qc * cis).flatten(3).type_as(q)
        (out * out.detach().sin()).sum().backward()
        outs.append((out.detach().numpy(), q.grad.numpy(), cis.numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_complex_leaf_grads_match_torch():
    torch = pytest.importorskip("torch")
    zn, wn = c(3).numpy(), c(3).numpy()
    grads = []
    for lib in (tinytorch, torch):
        z = lib.tensor(zn, requires_grad=True)
        w = lib.tensor(wn, requires_grad=True)
        # abs > 0: PyTorch's polar gradient takes sgn(result) for e^{i angle}, which is only right there
        r = lib.tensor(np.array([0.5, 1.5, 2.0]), requires_grad=True)
        y = (z * w / (z + 2j)).conj() * r + lib.polar(r, r) * z.angle() - z.sgn() * w.abs()
        loss = lib.view_as_real(y).pow(2).sum() + y.real.sum() - y.imag.mean() + (z.exp() * w).abs().sum()
        loss.backward()
        grads.append([g.numpy() for g in (z.grad, w.grad, r.grad)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_matmul_gradient_of_complex_operands_uses_the_conjugate_transposes():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))
    A, B = tinytorch.tensor(a, requires_grad=True), tinytorch.tensor(b, requires_grad=True)
    (A @ B).real.sum().backward()  # the gradient reaching A @ B is real ones: G B^H and A^H G
    np.testing.assert_allclose(A.grad.numpy(), np.ones((3, 2)) @ b.conj().T, rtol=1e-14)
    np.testing.assert_allclose(B.grad.numpy(), a.conj().T @ np.ones((3, 2)), rtol=1e-14)
