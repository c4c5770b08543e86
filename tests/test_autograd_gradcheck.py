"""gradcheck / gradgradcheck: pass on correct derivatives, raise on wrong ones."""
import pytest

import tinytorch as torch
from tinytorch.autograd import Function, gradcheck, gradgradcheck
from tinytorch.autograd.gradcheck import GradcheckError


def _inputs(*shapes):
    torch.manual_seed(0)
    return tuple(torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes)


class WrongBackward(Function):
    """x * x whose backward forgets the factor 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x


class RightBackward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x


class WrongSecondDerivative(Function):
    """Correct first derivative (x^3 -> 3x^2) computed as a constant, so its own derivative is 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * (3 * x * x).detach()


def test_gradcheck_passes_on_builtin_ops():
    x, w = _inputs((3, 4), (4, 2))
    assert gradcheck(lambda a, b: (a @ b).tanh().sum(dim=0), (x, w))
    assert gradcheck(lambda a: (a.exp() * a.sin()).sum(), (x,))


def test_gradcheck_passes_on_correct_custom_function():
    assert gradcheck(RightBackward.apply, _inputs((5,)))


def test_gradcheck_raises_on_wrong_custom_backward():
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradcheck(WrongBackward.apply, _inputs((5,)))
    assert gradcheck(WrongBackward.apply, _inputs((5,)), raise_exception=False) is False


def test_gradgradcheck_passes_on_correct_second_derivatives():
    x, w = _inputs((2, 3), (3, 2))
    assert gradgradcheck(lambda a, b: (a @ b).tanh(), (x, w))
    assert gradgradcheck(RightBackward.apply, _inputs((4,)))


def test_gradgradcheck_raises_on_wrong_second_derivative():
    x, = _inputs((4,))
    assert gradcheck(WrongSecondDerivative.apply, (x,))  # first order is right...
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradgradcheck(WrongSecondDerivative.apply, (x,))  # ...second order is not


def test_gradcheck_raises_on_nondeterministic_backward():
    calls = []

    class Flaky(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 2 + (1e-3 if len(calls) > 3 else 0.0)

    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Flaky.apply, _inputs((3,)), atol=1e-2)


def test_gradcheck_warns_on_float32_and_needs_a_differentiable_input():
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="is not a double precision floating point"):
        gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda a: a * 2, (torch.ones(2, dtype=torch.float64),))


def test_gradcheck_with_non_tensor_and_constant_inputs():
    x, = _inputs((3,))
    c = torch.ones(3, dtype=torch.float64)
    assert gradcheck(lambda a, k, b: a * k + b, (x, 2.5, c))
