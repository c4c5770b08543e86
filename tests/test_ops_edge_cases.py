"""Edge cases that real scripts reach and that once failed: 0-d inputs of special functions and activations, linear
with no input (or no output) features, the norm of complex tensors, hardtanh/ReLU6's gradient at the bounds, and the
PyTorch spellings scripts compare against (str(dtype), Size, Tensor.type()). PyTorch's figures when importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch import _C
from tinytorch._ops import _cpu
from tinytorch.autograd import gradcheck, gradgradcheck

F = tinytorch.nn.functional
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def test_erf_and_logsigmoid_of_a_0d_tensor_stay_tensors():
    x = tinytorch.tensor(0.3, dtype=tinytorch.float64)
    for f, want in ((tinytorch.erf, math.erf(0.3)), (tinytorch.special.erf, math.erf(0.3)),
                    (F.logsigmoid, -math.log1p(math.exp(-0.3)))):
        y = f(x)
        assert isinstance(y, tinytorch.Tensor) and y.shape == () and y.dtype == tinytorch.float64
        assert y.device.type == "cpu" and y.item() == pytest.approx(want, rel=1e-14)
    g = tinytorch.tensor(0.3, dtype=tinytorch.float64, requires_grad=True)
    assert gradcheck(F.logsigmoid, (g,)) and gradcheck(tinytorch.erf, (g,))


def test_linear_with_zero_input_or_output_features():
    x = tinytorch.ones(3, 0, requires_grad=True)
    w = tinytorch.ones(2, 0, requires_grad=True)
    b = tinytorch.tensor([1.0, 2.0], requires_grad=True)
    y = F.linear(x, w, b)  # an empty sum: the bias alone
    assert y.tolist() == [[1.0, 2.0]] * 3
    y.sum().backward()
    assert x.grad.shape == (3, 0) and w.grad.shape == (2, 0) and b.grad.tolist() == [3.0, 3.0]
    x2 = tinytorch.ones(2, 5, 4, requires_grad=True)
    w2 = tinytorch.ones(0, 4, requires_grad=True)
    y2 = F.linear(x2, w2)
    assert y2.shape == (2, 5, 0)
    y2.sum().backward()
    assert x2.grad.tolist() == np.zeros((2, 5, 4)).tolist() and w2.grad.shape == (0, 4)
    lazy = tinytorch.nn.LazyLinear(2)
    assert lazy(tinytorch.ones(3, 0)).shape == (3, 2) and lazy.in_features == 0


def test_norm_of_a_complex_tensor_is_the_norm_of_its_moduli():
    z = tinytorch.tensor([3 + 4j, 1 - 1j])
    assert z.norm().item() == pytest.approx(math.sqrt(27), rel=1e-6)
    assert z.norm(1).item() == pytest.approx(5 + math.sqrt(2), rel=1e-6)
    assert z.norm(float("inf")).item() == pytest.approx(5.0)
    assert z.norm().dtype == tinytorch.float32
    assert tinytorch.tensor([3 + 4j], dtype=tinytorch.complex128).norm().dtype == tinytorch.float64


def test_hardtanh_and_relu6_pass_no_gradient_at_their_bounds(monkeypatch):
    calls = []
    kernel = _C._cpu.activation_backward
    monkeypatch.setattr(_C._cpu, "activation_backward", lambda *a: calls.append(a[0]) or kernel(*a))
    for size in (5, 70_000):  # below and above the kernels' size
        x = np.linspace(-8, 8, size)
        x[:3] = [0.0, 6.0, 3.0]
        t = tinytorch.tensor(x.astype(np.float32), requires_grad=True)
        y = F.relu6(t)
        assert y.grad_fn.name() == "HardtanhBackward0"
        np.testing.assert_array_equal(y.detach().numpy(), np.clip(x, 0, 6).astype(np.float32))
        g = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        y.backward(tinytorch.from_numpy(g))
        np.testing.assert_array_equal(t.grad.numpy(), np.where((x > 0) & (x < 6), g, 0).astype(np.float32))
    assert calls == [_cpu.HARDTANH]  # the large one's backward: one pass in the kernel
    monkeypatch.setattr(_cpu, "MIN_SIZE", 1)  # gradcheck through the kernels; twice differentiable by the composite
    t = tinytorch.tensor([-2.0, -0.5, 0.25, 0.75, 3.0], dtype=tinytorch.float64, requires_grad=True)
    assert gradcheck(lambda v: F.hardtanh(v, -1.0, 1.0), (t,))
    assert gradgradcheck(lambda v: F.hardtanh(v * v, -1.0, 1.0), (t,))
    assert F.relu6(tinytorch.tensor([-3, 7, 2])).tolist() == [0, 6, 2]
    assert F.relu6(tinytorch.tensor([-3, 7, 2])).dtype == tinytorch.int64
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(tinytorch.ones(2), 2.0, 1.0)


def test_pytorch_spellings_of_dtypes_sizes_and_type_strings():
    assert str(tinytorch.float16) == "torch.float16" and repr(tinytorch.bfloat16) == "torch.bfloat16"
    assert str(tinytorch.float32).replace("torch.", "") == "float32"  # how scripts turn a dtype into a name
    assert repr(tinytorch.ones(2, 3).shape) == "torch.Size([2, 3])"
    assert tinytorch.ones(2).type() == "torch.FloatTensor"
    assert tinytorch.ones(2, dtype=tinytorch.int64).type() == "torch.LongTensor"
    assert repr(tinytorch.ones(2, dtype=tinytorch.float64)) == "tensor([1., 1.], dtype=torch.float64)"


@needs_torch
def test_edge_cases_match_pytorch():
    import torch
    for lib in (tinytorch, torch):
        assert str(lib.float64) == "torch.float64"
    assert repr(tinytorch.ones(2, 3).shape) == repr(torch.ones(2, 3).shape)
    assert tinytorch.ones(2).type() == torch.ones(2).type()
    assert repr(tinytorch.arange(4.0, dtype=tinytorch.float64)) == repr(torch.arange(4.0, dtype=torch.float64))
    z = [3 + 4j, 1 - 1j, -2j]
    for p in (2, 1, float("inf"), 0.5):
        assert tinytorch.tensor(z).norm(p).item() == pytest.approx(torch.tensor(z).norm(p).item(), rel=1e-6)
    ours = F.linear(tinytorch.ones(3, 0), tinytorch.ones(2, 0), tinytorch.tensor([1.0, 2.0]))
    theirs = torch.nn.functional.linear(torch.ones(3, 0), torch.ones(2, 0), torch.tensor([1.0, 2.0]))
    assert ours.tolist() == theirs.tolist()
    x = np.array([-1.0, 0.0, 2.5, 6.0, 7.0], np.float32)
    a, b = tinytorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.relu6(a).sum().backward()
    torch.nn.functional.relu6(b).sum().backward()
    assert a.grad.tolist() == b.grad.tolist()


def test_a_number_first_in_a_functional_form_keeps_its_precision():
    x = tinytorch.tensor([2.0], dtype=tinytorch.float64)
    assert tinytorch.mul(1.1, x).item() == 1.1 * 2.0  # not float32's 1.1
    assert tinytorch.sub(1.1, x).item() == 1.1 - 2.0 and tinytorch.add(1.1, x).item() == 1.1 + 2.0
    # and the number still has a wrapped number's low priority in promotion
    assert tinytorch.mul(1.1, tinytorch.tensor(2.0)).dtype == tinytorch.float32
    assert tinytorch.mul(1.1, tinytorch.tensor([2, 3])).dtype == tinytorch.float32
    assert tinytorch.mul(2, tinytorch.tensor([2, 3])).dtype == tinytorch.int64
    assert tinytorch.mul(1.5, tinytorch.tensor([2.0], dtype=tinytorch.float16)).dtype == tinytorch.float16
    assert tinytorch.mul(1j, x).dtype == tinytorch.complex128


def test_floating_point_edge_values_compute_silently_as_in_pytorch():
    # NumPy warns on log(0), 0/0, overflow and NaN casts; PyTorch (and tinytorch's kernels on big tensors) give
    # inf/NaN silently. Run under -W error in a fresh interpreter: a warning would be an exception there. A user's
    # own NumPy warnings must still come through.
    import subprocess
    import sys
    code = (
        "import math, numpy as np, tinytorch as t\n"
        "x = t.tensor([0.0, 1.0, -1.0])\n"
        "assert t.log(x)[0].item() == -math.inf and math.isnan(t.sqrt(x)[2].item())\n"
        "assert math.isnan((x / x)[0].item()) and (1 / x)[0].item() == math.inf\n"
        "assert t.exp(t.tensor([1000.0])).item() == math.inf and t.tensor([70000.0]).half().item() == math.inf\n"
        "t.tensor([math.nan]).long()\n"
        "g = t.tensor([0.0], requires_grad=True)\n"
        "t.log(g).sum().backward()\n"
        "assert g.grad.item() == math.inf\n"
        "try:\n"
        "    np.log(np.zeros(1))\n"
        "except RuntimeWarning:\n"
        "    print('user warning kept')\n")
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "user warning kept" and "Warning" not in r.stderr


def test_integer_division_by_zero_raises_as_in_pytorch():
    a, zero = tinytorch.tensor([7, -3]), tinytorch.tensor([0, 2])
    for call in (lambda: a // zero, lambda: a % zero, lambda: a // 0, lambda: a % 0, lambda: tinytorch.fmod(a, zero),
                 lambda: tinytorch.div(a, zero, rounding_mode="trunc"), lambda: tinytorch.div(a, 0, rounding_mode="floor"),
                 lambda: a.clone().floor_divide_(zero), lambda: a.clone().remainder_(0)):
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            call()
    # true division promotes to float (inf, no error); float divisors and nonzero integer ones compute
    assert (a / zero).tolist() == [math.inf, -1.5]
    assert (a // tinytorch.tensor([2, 2])).tolist() == [3, -2] and (a % 2).tolist() == [1, 1]
    assert (a % 0.0).isnan().all() and (a.float() // 0).tolist() == [math.inf, -math.inf]


def test_embedding_and_einsum_dtype_errors_name_types_as_pytorch():
    w = tinytorch.randn(5, 2)
    for dt, name in ((tinytorch.float32, "torch.FloatTensor"), (tinytorch.uint8, "torch.ByteTensor"),
                     (tinytorch.int16, "torch.ShortTensor"), (tinytorch.bool, "CPUBoolType"),
                     (tinytorch.bfloat16, "CPUBFloat16Type")):
        with pytest.raises(RuntimeError) as info:
            F.embedding(tinytorch.tensor([1]).to(dt), w)
        assert str(info.value) == ("Expected tensor for argument #1 'indices' to have one of the following scalar "
                                   f"types: Long, Int; but got {name} instead (while checking arguments for embedding)")
    assert F.embedding(tinytorch.tensor([1], dtype=tinytorch.int32), w).shape == (1, 2)
    with pytest.raises(RuntimeError, match="^expected scalar type Double but found Float$"):
        tinytorch.einsum("i,i->", tinytorch.ones(2, dtype=tinytorch.float64), tinytorch.ones(2))
