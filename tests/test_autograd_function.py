"""Custom autograd.Function: ctx API, setup_context, once_differentiable, and the errors of bad backwards."""
import re

import pytest

import tinytorch as torch
from tinytorch import autograd
from tinytorch.autograd import Function, once_differentiable


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x * x


class ExpF(Function):
    """Saves its own output (the case that must not form a reference cycle)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


def test_forward_backward_and_node():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Cube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    assert y.grad_fn.next_functions[0][0].variable is x
    y.sum().backward()
    assert torch.allclose(x.grad, torch.tensor([3.0, 12.0]))


def test_no_node_without_grad():
    x = torch.ones(2)
    assert Cube.apply(x).grad_fn is None
    xr = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not Cube.apply(xr).requires_grad


def test_double_backward_through_saved_input():
    x = torch.tensor([3.0], requires_grad=True)
    g, = autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    g2, = autograd.grad(g.sum(), x)
    assert abs(g.item() - 27.0) < 1e-5 and abs(g2.item() - 18.0) < 1e-5


def test_double_backward_through_saved_output():
    x = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    g, = autograd.grad(ExpF.apply(x).sum(), x, create_graph=True)
    g2, = autograd.grad(g.sum(), x)
    assert abs(g2.item() - 1.6487212707001282) < 1e-12
    assert autograd.gradgradcheck(ExpF.apply, (x,))


def test_saved_tensors_freed_after_backward():
    x = torch.ones(2, requires_grad=True)
    y = Cube.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_saved_tensor_inplace_modification_detected():
    x = torch.ones(2, requires_grad=True)
    h = x * 1
    y = Cube.apply(h).sum()
    h.mul_(2)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        y.backward()


def test_save_for_backward_rejects_non_tensors():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        Bad.apply(torch.ones(1, requires_grad=True))


def test_needs_input_grad_and_non_tensor_args():
    seen = []

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.k = k
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return g * ctx.k if ctx.needs_input_grad[0] else None, g if ctx.needs_input_grad[1] else None, None

    x = torch.ones(2, requires_grad=True)
    y = torch.ones(2)
    Scale.apply(x, y, 4.0).sum().backward()
    assert seen == [(True, False, False)] and torch.allclose(x.grad, torch.full((2,), 4.0))


def test_setup_context_style():
    class Mul(Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.k = k
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ctx.k, None

    x = torch.ones(3, requires_grad=True)
    Mul.apply(x, 5.0).sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), 5.0))


def test_mark_non_differentiable():
    class SortLike(Function):
        @staticmethod
        def forward(ctx, x):
            idx = torch.arange(x.shape[0])
            doubled = x * 2
            flag = x * 0
            ctx.mark_non_differentiable(idx, flag)
            return doubled, idx, flag

        @staticmethod
        def backward(ctx, g, g_idx, g_flag):
            assert g_flag is not None and torch.equal(g_flag, torch.zeros(2))  # materialized zeros
            return g * 2

    x = torch.ones(2, requires_grad=True)
    doubled, idx, flag = SortLike.apply(x)
    assert doubled.requires_grad and not idx.requires_grad and not flag.requires_grad
    doubled.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))


def test_set_materialize_grads_false_gives_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ga is None, gb is None))
            return ga * 2 if ga is not None else None

    x = torch.ones(2, requires_grad=True)
    a, b = Two.apply(x)
    a.sum().backward()
    assert seen == [(False, True)]


def test_materialize_grads_default_gives_zeros():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append(torch.equal(gb, torch.zeros(2)))
            return ga * 2 + gb * 3

    x = torch.ones(2, requires_grad=True)
    a, _ = Two.apply(x)
    a.sum().backward()
    assert seen == [True] and torch.allclose(x.grad, torch.full((2,), 2.0))


def test_mark_dirty_inplace_output():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1.0)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2  # deliberately not 1: proves this node ran

    a = torch.ones(2, requires_grad=True)
    x = a * 3
    y = AddOneInplace.apply(x)
    assert y is x and x.grad_fn.name() == "AddOneInplaceBackward"
    assert x._version == 1 and torch.allclose(x, torch.full((2,), 4.0))
    y.sum().backward()
    assert torch.allclose(a.grad, torch.full((2,), 6.0))
    leaf = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        AddOneInplace.apply(leaf)


def test_output_that_is_an_input_gets_its_own_history():
    class Ident(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.ones(2, requires_grad=True)
    y = Ident.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn.name() == "IdentBackward"
    (y * 1).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))
    h = x * 1
    z = Ident.apply(h)
    assert z is not h and h.grad_fn.name() == "MulBackward0"


def test_once_differentiable():
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            assert not torch.is_grad_enabled()
            x, = ctx.saved_tensors
            return g * 2 * x

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    Square.apply(x).sum().backward()
    assert torch.allclose(x.grad, torch.tensor([2.0, 4.0]))
    # grad_output that requires grad: the result must refuse double backward.
    out = (Square.apply(x) * x).sum()
    g, = autograd.grad(out, x, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="^trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        g.sum().backward()


def test_wrong_number_of_gradients():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "function WrongBackward returned an incorrect number of gradients (expected 2, got 1)")):
        Wrong.apply(x, x).sum().backward()


def test_extra_none_gradients_are_allowed():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None

    x = torch.ones(2, requires_grad=True)
    Extra.apply(x).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))


def test_wrong_gradient_shape():
    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(3)

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "Function WrongShapeBackward returned an invalid gradient at index 0 - got [3] but expected shape "
            "compatible with [2]")):
        WrongShape.apply(x).sum().backward()


def test_gradient_for_non_tensor_input_is_an_error():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned a gradient different than None at position 2"):
        Bad.apply(x, 2.0).sum().backward()


def test_legacy_function_instantiation_warns_and_calling_it_is_rejected():
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = Cube()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        f(torch.ones(2))


def test_matches_pytorch_custom_function():
    real = pytest.importorskip("torch")

    def run(lib):
        class Sig(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.sigmoid()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y * (1 - y)

        x = lib.tensor([-1.0, 0.5, 2.0], dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(Sig.apply(x).sum(), x, create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x)
        return g.detach().numpy(), g2.numpy()

    for a, b in zip(run(torch), run(real)):
        assert abs(a - b).max() < 1e-12


def test_saved_input_returned_unchanged_keeps_its_history_for_double_backward():
    class PassThroughSquareGrad(Function):
        """Returns x itself; its backward is g * x, so d/dx of the first-order grad is g."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * x

    x = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    h = x * 2
    g, = autograd.grad(PassThroughSquareGrad.apply(h).sum(), x, create_graph=True)  # 2 * h = 4x
    g2, = autograd.grad(g.sum(), x)
    assert abs(g.item() - 12.0) < 1e-12 and abs(g2.item() - 4.0) < 1e-12


def test_saved_tensors_outside_backward_are_plain():
    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.save_for_backward(y)
            keep.append(ctx)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    keep = []
    x = torch.ones(2, requires_grad=True)
    Keep.apply(x)
    saved, = keep[0].saved_tensors
    assert saved.grad_fn is None and not saved.requires_grad
