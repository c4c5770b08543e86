"""Graph recording, backward()/grad() arguments and higher-order gradients, through the real engine."""
import warnings

import numpy as np
import pytest

import tinytorch as torch
from tinytorch import autograd


def test_recording_grad_fn_next_functions_is_leaf():
    x = torch.ones(3, requires_grad=True)
    c = torch.ones(3)
    y = x * 2
    z = y + c
    assert x.is_leaf and c.is_leaf and not y.is_leaf and not z.is_leaf
    assert x.grad_fn is None and c.grad_fn is None
    assert y.requires_grad and z.requires_grad and not c.requires_grad
    assert z.grad_fn.name() == "AddBackward0"
    (mul_node, idx), (none_node, _) = z.grad_fn.next_functions
    assert mul_node.name() == "MulBackward0" and idx == 0
    assert none_node is None  # c needs no gradient: no edge
    (acc, _), = [e for e in mul_node.next_functions if e[0] is not None]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert acc.variable is x
    assert not (c * 2).requires_grad


def test_grad_only_on_leaves_and_nonleaf_read_warns():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    (y * y).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 18.0))
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.grad  # a leaf: no warning


def test_retain_grad_fills_nonleaf_grad_and_accumulates():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    z = (y * y).sum()
    z.backward(retain_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.allclose(y.grad, torch.full((2,), 6.0))
    z.backward()
    assert torch.allclose(y.grad, torch.full((2,), 12.0))
    assert torch.allclose(x.grad, torch.full((2,), 36.0))
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        torch.ones(1).retain_grad()


def test_retain_grad_does_not_alias_the_flowing_gradient():
    x = torch.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.sum().backward()
    y.grad.add_(100.0)  # must not change what reached x
    assert torch.allclose(x.grad, torch.ones(2))


def test_backward_gradient_argument_and_nonscalar_error():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(torch.tensor([1.0, 10.0]))
    assert torch.allclose(x.grad, torch.tensor([2.0, 40.0]))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * x).backward(torch.ones(3))


def test_backward_inputs_accumulates_only_into_inputs():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    loss = (a * 2 + b * 3).sum()
    loss.backward(inputs=[b], retain_graph=True)
    assert a.grad is None and torch.allclose(b.grad, torch.full((2,), 3.0))
    autograd.backward(loss, inputs=[a])
    assert torch.allclose(a.grad, torch.full((2,), 2.0)) and torch.allclose(b.grad, torch.full((2,), 3.0))
    with pytest.raises(RuntimeError, match="'inputs' argument to backward\\(\\) cannot be empty."):
        loss.backward(inputs=[])


def test_backward_inputs_nonleaf_gets_grad_and_stops_there():
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    (y * y).sum().backward(inputs=[y])
    assert y.retains_grad  # as PyTorch: the non-leaf input is retained
    assert torch.allclose(y.grad, torch.full((2,), 4.0))
    assert x.grad is None


def test_autograd_backward_several_roots():
    x = torch.ones(2, requires_grad=True)
    autograd.backward([x * 2, (x * 3).sum()], [torch.ones(2), None])
    assert torch.allclose(x.grad, torch.full((2,), 5.0))


def test_grad_returns_and_does_not_touch_dot_grad():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0], requires_grad=True)
    out = (x * y).sum()
    gx, gy = autograd.grad(out, (x, y))
    assert torch.allclose(gx, y.detach()) and torch.allclose(gy, x.detach())
    assert x.grad is None and y.grad is None
    assert not gx.requires_grad


def test_grad_allow_unused_and_materialize_grads():
    x = torch.ones(2, requires_grad=True)
    unused = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to not have been used in "
                                           "the graph. Set allow_unused=True if this is the desired behavior."):
        autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gu is None and torch.allclose(gx, torch.full((2,), 2.0))
    gx, gu = autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
    assert torch.equal(gu, torch.zeros(3))
    with pytest.raises(ValueError, match="allow_unused"):
        autograd.grad((x * 2).sum(), [x], allow_unused=False, materialize_grads=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        autograd.grad((x * 2).sum(), [torch.ones(1)])


def test_grad_with_respect_to_nonleaf_and_grad_outputs():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    out = h * h
    gh, = autograd.grad(out, h, grad_outputs=torch.tensor([1.0, 0.5]))
    assert torch.allclose(gh, torch.tensor([6.0, 6.0]))


def test_grad_of_a_leaf_with_respect_to_itself():
    x = torch.ones(2, requires_grad=True)
    g, = autograd.grad(x, x, torch.full((2,), 7.0))
    assert torch.allclose(g, torch.full((2,), 7.0))


def test_retain_graph_allows_second_backward_and_default_frees():
    x = torch.ones(2, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert torch.allclose(x.grad, 2 * 2 * np.e * torch.ones(2))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


@pytest.mark.parametrize("shape", [(), (1,)])
def test_second_derivative_of_cube(shape):
    x = torch.full(shape, 3.0, requires_grad=True)
    y = x ** 3
    g, = autograd.grad(y.sum(), x, create_graph=True)
    assert g.requires_grad and abs(g.sum().item() - 27.0) < 1e-5
    g2, = autograd.grad(g.sum(), x)
    assert abs(g2.sum().item() - 18.0) < 1e-5


def test_third_derivative_through_backward_create_graph():
    x = torch.tensor([2.0], requires_grad=True)
    y = x ** 4
    y.backward(create_graph=True)  # x.grad = 4x^3 with a graph
    g1 = x.grad
    assert g1.requires_grad
    g2, = autograd.grad(g1.sum(), x, create_graph=True)  # 12x^2
    g3, = autograd.grad(g2.sum(), x)  # 24x
    assert abs(g2.item() - 48.0) < 1e-4 and abs(g3.item() - 48.0) < 1e-4


def _mlp(params, x):
    w1, b1, w2, b2 = params
    return ((x @ w1 + b1).tanh() @ w2 + b2).sum(dim=1)


def _mlp_params(lib, dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal((5, 2)), rng.standard_normal(2)]
    return [lib.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


def _gradient_penalty_grads(lib, dtype):
    params = _mlp_params(lib, dtype)
    x = lib.tensor(np.linspace(-1, 1, 12).reshape(4, 3), dtype=dtype, requires_grad=True)
    out = _mlp(params, x)
    gx, = lib.autograd.grad(out.sum(), x, create_graph=True)
    penalty = ((gx * gx).sum(dim=1) - 1.0).pow(2).mean()
    loss = out.mean() + penalty
    loss.backward()
    return [p.grad.detach().numpy() for p in params]


def test_gradient_penalty_double_backward_through_mlp_matches_finite_differences():
    params = _mlp_params(torch, torch.float64)
    x = torch.tensor(np.linspace(-1, 1, 12).reshape(4, 3), dtype=torch.float64, requires_grad=True)

    def penalty(w1):
        out = _mlp([w1] + params[1:], x)
        gx, = autograd.grad(out.sum(), x, create_graph=True)
        return ((gx * gx).sum(dim=1) - 1.0).pow(2).mean()

    assert autograd.gradcheck(penalty, (params[0],))


def test_gradient_penalty_matches_pytorch():
    real_torch = pytest.importorskip("torch")
    ours = _gradient_penalty_grads(torch, torch.float64)
    theirs = _gradient_penalty_grads(real_torch, real_torch.float64)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_create_graph_grad_accumulation_is_differentiable():
    x = torch.tensor([1.5], requires_grad=True)
    (x ** 2).sum().backward(create_graph=True)
    (x ** 2).sum().backward(create_graph=True)  # .grad = 2x + 2x, still a function of x
    g2, = autograd.grad(x.grad.sum(), x)
    assert abs(g2.item() - 4.0) < 1e-6


def test_requires_grad_flag_rules():
    x = torch.ones(2)
    x.requires_grad_()
    assert x.requires_grad
    y = x * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        torch.ones(2, dtype=torch.int64).requires_grad_()
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    d2 = y.detach()
    d2.add_(1.0)  # shares memory and version counter with y
    assert y._version == 1


def test_nonleaf_grad_warning_only_while_grad_is_unset():
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.grad = torch.ones(2)  # set by hand: reading it back is not a mistake
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(y.grad, torch.ones(2))


def test_backward_create_graph_warns_once_about_the_reference_cycle():
    import tinytorch.autograd as ag
    ag._cycle_warned = False
    x = torch.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="Using backward\\(\\) with create_graph=True will create a reference cycle"):
        (x * x).sum().backward(create_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (x * x).sum().backward(create_graph=True)
    x.grad = None


def test_each_node_kind_is_its_own_python_type():
    # PyTorch gives every node kind a class of that name (what torchviz and scripts print); a node reached again
    # through next_functions after its output tensor died, or of a custom Function, has it too.
    import gc
    x = torch.ones(3, requires_grad=True)
    y = (x.sin() * 2).sum()
    gc.collect()
    fn = y.grad_fn
    assert type(fn).__name__ == "SumBackward0" and repr(type(fn)) == "<class 'SumBackward0'>"
    mul = fn.next_functions[0][0]
    sin = mul.next_functions[0][0]
    assert [type(f).__name__ for f in (mul, sin)] == ["MulBackward0", "SinBackward0"]
    assert isinstance(sin, autograd.graph.Node) and sin.name() == "SinBackward0"
    assert type(sin.next_functions[0][0]).__name__ == "AccumulateGrad"
    assert type((x.sin() * 3).grad_fn.next_functions[0][0]) is type(sin)  # one class per name

    class Twice(autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    out = Twice.apply(x)
    assert type(out.grad_fn).__name__ == "TwiceBackward"
    seen = []
    out.grad_fn.register_hook(lambda gi, go: seen.append(type(out.grad_fn).__name__))
    out.sum().backward()
    assert seen == ["TwiceBackward"] and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_node_names_of_overloads_match_pytorchs():
    w = torch.ones(2, 2, requires_grad=True)
    x = torch.ones(1, 2, requires_grad=True)
    cases = [(lambda: w.t(), "TBackward0"), (lambda: w.transpose(0, 1), "TransposeBackward0"),
             (lambda: w.max(), "MaxBackward1"), (lambda: w.min(), "MinBackward1"), (lambda: w.amax(), "AmaxBackward0"),
             (lambda: w.max(0)[0], "MaxBackward0"), (lambda: w.norm(), "LinalgVectorNormBackward0"),
             (lambda: x.squeeze(), "SqueezeBackward0"), (lambda: x.squeeze(0), "SqueezeBackward1"),
             (lambda: x.squeeze((0,)), "SqueezeBackward2"), (lambda: 1 - w, "RsubBackward1")]
    for make, name in cases:
        out = make()
        assert out.grad_fn.name() == name and type(out.grad_fn).__name__ == name
    g, = torch.autograd.grad((3 - 2 * w).sum(), w)
    assert g.tolist() == [[-2.0, -2.0], [-2.0, -2.0]]
    assert torch.autograd.gradcheck(lambda a: 1.5 - a, (torch.randn(3, dtype=torch.float64, requires_grad=True),))
    assert torch.autograd.gradcheck(lambda a: torch.rsub(a, 2.0, alpha=3), (torch.randn(3, dtype=torch.float64,
                                                                                       requires_grad=True),))
