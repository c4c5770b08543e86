"""Regressions found by running everyday PyTorch programs (not training loops) on tinytorch: global module hooks,
legacy backward hooks, Module.set_submodule/compile, index_add/index_copy checks, the two-sided FFT of real input,
random_split fractions, autograd.functional's checks, searchsorted with NaN, and the factories' dtype inference,
overflow checks and argument errors. tinytorch's values are checked on their own; PyTorch is compared where
installed."""
import math
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
from tinytorch.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp
from tinytorch.nn.modules import module as module_mod
from tinytorch.utils.checkpoint import check_backward_validity, checkpoint_sequential, detach_variable
from tinytorch.utils.data import TensorDataset, random_split
from tinytorch.utils.hooks import RemovableHandle


def _error(fn):
    """(exception type name, message) of fn(), or None when it returns."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is to compare whatever is raised
        return type(e).__name__, str(e)
    return None


# ---------------------------------------------------------------------------------------------------------------
# Module hooks common to every module


def test_global_forward_hooks_run_before_module_hooks_and_go_away():
    calls = []
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    net[0].register_forward_hook(lambda m, i, o: calls.append("own:Linear"))
    h1 = module_mod.register_module_forward_pre_hook(lambda m, i: calls.append("pre:" + type(m).__name__))
    h2 = module_mod.register_module_forward_hook(lambda m, i, o: calls.append(type(m).__name__))
    try:
        net(tinytorch.ones(1, 2))
    finally:
        h1.remove()
        h2.remove()
    assert calls == ["pre:Sequential", "pre:Linear", "Linear", "own:Linear", "pre:ReLU", "ReLU", "Sequential"]
    calls.clear()
    net(tinytorch.ones(1, 2))
    assert calls == ["own:Linear"]


def test_global_forward_hook_with_kwargs_replaces_output_and_always_call_runs_on_error():
    class Scale(nn.Module):
        def forward(self, x, k=1.0):
            if k < 0:
                raise ValueError("negative")
            return x * k

    seen = []
    h = module_mod.register_module_forward_hook(lambda m, a, kw, out: seen.append(kw) or out + 1, with_kwargs=True)
    h2 = module_mod.register_module_forward_hook(lambda m, a, out: seen.append("always"), always_call=True)
    try:
        out = Scale()(tinytorch.tensor([2.0]), k=3.0)
        with pytest.raises(ValueError):
            Scale()(tinytorch.tensor([2.0]), k=-1.0)
    finally:
        h.remove()
        h2.remove()
    assert out.tolist() == [7.0] and seen == [{"k": 3.0}, "always", "always"]
    assert not module_mod._global_forward_hooks_with_kwargs and not module_mod._global_forward_hooks_always_called


def test_global_full_backward_hooks_see_module_gradients():
    lin = nn.Linear(3, 2)
    got = []
    h1 = module_mod.register_module_full_backward_pre_hook(lambda m, go: got.append(("pre", tuple(go[0].shape))))
    h2 = module_mod.register_module_full_backward_hook(
        lambda m, gi, go: got.append(("full", tuple(gi[0].shape), tuple(go[0].shape))))
    try:
        x = tinytorch.ones(4, 3, requires_grad=True)
        lin(x).sum().backward()
    finally:
        h1.remove()
        h2.remove()
        module_mod._global_is_full_backward_hook = None
    assert got == [("pre", (4, 2)), ("full", (4, 3), (4, 2))]
    np.testing.assert_allclose(x.grad.numpy(), np.tile(lin.weight.detach().numpy().sum(0), (4, 1)), rtol=1e-6)


def _registration_hooks_run(lib):
    mod = lib.nn.modules.module
    made = []

    def swap_param(m, name, p):
        made.append(lib.nn.Parameter(p.detach().clone()))
        return made[-1]
    h1 = mod.register_module_parameter_registration_hook(swap_param)
    h2 = mod.register_module_buffer_registration_hook(lambda m, name, b: b + 1)
    h3 = mod.register_module_module_registration_hook(lambda m, name, sub: lib.nn.Tanh() if name == "act" else None)
    try:
        lin = lib.nn.Linear(2, 2)
        bn = lib.nn.BatchNorm1d(2)
        holder = lib.nn.Module()
        holder.act = lib.nn.ReLU()
        holder.register_buffer("buf", lib.ones(2))
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
    return (lin.weight is made[0], lin.bias is made[1], holder.buf.tolist(), bn.running_mean.tolist(),
            type(holder.act).__name__,
            type(lib.nn.Module().add_module("x", lib.nn.ReLU())).__name__)


def test_global_registration_hooks_can_replace_what_is_registered():
    got = _registration_hooks_run(tinytorch)
    # BatchNorm's running mean is zeroed in place after registration, so only the plain buffer keeps the +1
    assert got == (True, True, [2.0, 2.0], [0.0, 0.0], "Tanh", "NoneType")
    torch = pytest.importorskip("torch")
    assert got == _registration_hooks_run(torch)


def test_removable_handle_clears_its_extra_dicts():
    hooks, flags, more = {}, {}, {}
    h = RemovableHandle(hooks, extra_dict=[flags, more])
    hooks[h.id] = print
    flags[h.id] = more[h.id] = True
    h.remove()
    assert hooks == flags == more == {}
    lin = nn.Linear(1, 1)
    handle = lin.register_forward_hook(lambda m, a, k, o: None, with_kwargs=True, always_call=True)
    handle.remove()
    assert not lin._forward_hooks_with_kwargs and not lin._forward_hooks_always_called


# ---------------------------------------------------------------------------------------------------------------
# Legacy register_backward_hook, set_submodule, compile


def test_legacy_backward_hook_gets_the_output_node_gradients():
    lin = nn.Linear(2, 3)
    got = []

    def hook(module, grad_input, grad_output):
        got.append((module, sorted(tuple(g.shape) for g in grad_input if g is not None),
                    [tuple(g.shape) for g in grad_output]))
        return None
    lin.register_backward_hook(hook)
    x = tinytorch.ones(4, 2, requires_grad=True)
    with pytest.warns(FutureWarning, match="non-full backward hook"):
        out = lin(x)
    out.sum().backward()
    assert len(got) == 1 and got[0][0] is lin
    assert got[0][1] == [(3,), (3, 2), (4, 2)] and got[0][2] == [(4, 3)]
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        lin.register_full_backward_hook(hook)


def test_legacy_backward_hook_can_replace_the_gradient():
    class Double(nn.Module):
        def forward(self, x):
            return x * 2.0

    m = Double()
    m.register_backward_hook(lambda mod, gi, go: tuple(g * 10 for g in gi))
    x = tinytorch.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        m(x).sum().backward()
    assert x.grad.tolist() == [20.0, 20.0]


def test_set_submodule_and_compile():
    seq = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.ReLU()))
    seq.set_submodule("1.0", nn.Tanh())
    assert isinstance(seq[1][0], nn.Tanh)
    with pytest.raises(AttributeError, match="has no attribute `x`"):
        seq.set_submodule("1.x", nn.Tanh(), strict=True)
    with pytest.raises(ValueError, match="Cannot set the submodule without a target name"):
        seq.set_submodule("", nn.Tanh())
    with pytest.raises(ValueError, match="is not an nn.Module"):
        seq.set_submodule("0", 3)
    lin = nn.Linear(2, 1)
    lin.compile()
    assert lin._compiled_call_impl is not None
    assert lin(tinytorch.ones(1, 2)).shape == (1, 1)


def test_module_api_matches_pytorch():
    torch = pytest.importorskip("torch")
    for lib in (tinytorch, torch):
        seq = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.ReLU())
        with pytest.raises(AttributeError, match="Sequential has no attribute `2`"):
            seq.set_submodule("2.x", lib.nn.Tanh())
        assert hasattr(lib.nn.modules.module, "register_module_full_backward_hook")


# ---------------------------------------------------------------------------------------------------------------
# index_add / index_copy / index_select checks, scatter's deprecated reduce


_INDEX_ERRORS = [
    (lambda t: t.zeros(3).index_add_(0, t.tensor([0]), t.ones(2)),
     ('RuntimeError', 'index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0')),
    (lambda t: t.zeros(3, 4).index_add(0, t.tensor([0]), t.ones(1, 5)),
     ('RuntimeError', 'source tensor shape must match self tensor shape, excluding the specified dimension. Got '
                      'self.shape = [3, 4] source.shape = [1, 5]')),
    (lambda t: t.zeros(3, 4).index_add(1, t.tensor([0]), t.ones(3, 2)),
     ('RuntimeError', 'index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 1')),
    (lambda t: t.zeros(3, 4).index_add(0, t.tensor([5]), t.ones(1, 4)),
     ('RuntimeError', 'index 5 is out of bounds for dimension 0 with size 3')),
    (lambda t: t.zeros(3, 4).index_add(1, t.tensor([-1]), t.ones(3, 1)),
     ('RuntimeError', 'index -1 is out of bounds for dimension 1 with size 4')),
    (lambda t: t.zeros(3, 4, 5).index_add(1, t.tensor([9]), t.ones(3, 1, 5)),
     ('IndexError', 'index out of range in self')),
    (lambda t: t.zeros(3).index_add(0, t.tensor([-1]), t.ones(1)),
     ('IndexError', 'index out of range in self')),
    (lambda t: t.zeros(3, 4).index_add(0, t.tensor([0.]), t.ones(1, 4)),
     ('RuntimeError', 'index_add_(): Expected dtype int32/int64 for index but got: Float')),
    (lambda t: t.zeros(3, 4).index_add(0, t.tensor([[0]]), t.ones(1, 4)),
     ('IndexError', 'index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, '
                    '1]')),
    (lambda t: t.zeros(3).index_add(0, t.tensor([1]), t.tensor([1.], dtype=t.float64)),
     ('RuntimeError', 'index_add_(): self (Float) and source (Double) must have the same scalar type')),
    (lambda t: t.zeros(3, 2).index_add(1, t.tensor([1]), t.ones(3)),
     ('RuntimeError', 'index_add_(): Indexing dim 1 is out of bounds of the source tensor with dim 1')),
    (lambda t: t.zeros(3).index_add(0, t.tensor([1]), t.tensor(2.)),
     ('RuntimeError', 'source tensor shape must match self tensor shape, excluding the specified dimension. Got '
                      'self.shape = [3] source.shape = []')),
    (lambda t: t.zeros(3).index_copy(0, t.tensor([0]), t.ones(2)),
     ('IndexError', 'index_copy_(): Number of indices (1) should be equal to source.size(dim) (2)')),
    (lambda t: t.zeros(3, 4, 5).index_copy(1, t.tensor([0]), t.ones(3, 1, 6)),
     ('RuntimeError', 'index_copy_(): Source/destination tensor must have same slice shapes. Destination slice '
                      'shape: 3 5 at dimension 1 and source slice shape: 3 6 at dimension 0.')),
    (lambda t: t.zeros(3, 4, 5).index_copy(1, t.tensor([0]), t.ones(3, 1)),
     ('IndexError', 'index_copy_(): When source and destination are not scalars, their dimensionality must match. '
                    'Source dimensionality (2), destination dimensionality (3)')),
    (lambda t: t.zeros(3).index_copy(0, t.tensor([0, 1]), t.tensor(1.)),
     ('IndexError', 'index_copy_(): When source is scalar, index should have one element (got 2)')),
    (lambda t: t.zeros(3).index_copy(0, t.tensor([[1]]), t.tensor([1.])),
     ('IndexError', 'index_copy_(): Index should have dimension 1 or 0 (got 2)')),
    (lambda t: t.zeros(3).index_copy(0, t.tensor([1], dtype=t.int32), t.tensor([1.])),
     ('RuntimeError', 'index_copy_(): Expected a long tensor for index, but got Int')),
    (lambda t: t.zeros(3).index_copy(0, t.tensor([1]), t.tensor([1.], dtype=t.float64)),
     ('RuntimeError', 'index_copy_(): self and source expected to have the same dtype, but got (self) Float and '
                      '(source) Double')),
    (lambda t: t.zeros(3, 4).index_copy(0, t.tensor([-1]), t.ones(1, 4)),
     ('IndexError', 'index_copy_(): index -1 is out of bounds for dimension 0 with size 3')),
    (lambda t: t.zeros(3).index_select(0, t.tensor([0.])),
     ('RuntimeError', 'index_select(): Expected dtype int32 or int64 for index')),
    (lambda t: t.zeros(3).index_fill(0, t.tensor([0], dtype=t.int32), 1.0),
     ('IndexError', 'index_fill_(): Expected dtype int64 for index.')),
    (lambda t: t.zeros(3).index_fill(0, t.tensor([[0]]), 1.0),
     ('RuntimeError', 'Index has to be a vector/scalar')),
    (lambda t: t.tensor(5.).index_select(0, t.tensor([0, 0])),
     ('RuntimeError', 'index_select(): Index to scalar can have only 1 value, got 2 value(s)')),
]


@pytest.mark.parametrize("case,expected", _INDEX_ERRORS)
def test_index_function_errors(case, expected):
    assert _error(lambda: case(tinytorch)) == expected
    torch = pytest.importorskip("torch")
    assert _error(lambda: case(torch)) == expected


def test_index_add_and_copy_values_and_gradients():
    x = tinytorch.zeros(2, 3).index_add(1, tinytorch.tensor([0, 2, 0]), tinytorch.ones(2, 3), alpha=2)
    assert x.tolist() == [[4.0, 0.0, 2.0], [4.0, 0.0, 2.0]]
    assert tinytorch.tensor(5.).index_select(0, tinytorch.tensor([0])).shape == ()
    base = tinytorch.randn(4, 3, dtype=tinytorch.float64, requires_grad=True)
    src = tinytorch.randn(2, 3, dtype=tinytorch.float64, requires_grad=True)
    idx = tinytorch.tensor([3, 1])
    assert tinytorch.autograd.gradcheck(lambda b, s: b.index_add(0, idx, s, alpha=-1.5), (base, src))
    assert tinytorch.autograd.gradcheck(lambda b, s: b.index_copy(0, idx, s), (base, src))
    scalar = tinytorch.tensor(2.0, dtype=tinytorch.float64, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda s: s.index_select(0, tinytorch.tensor([0])) * 3, (scalar,))


def test_scatter_with_tensor_src_and_reduce_warns_like_pytorch():
    with pytest.warns(UserWarning, match="The reduce argument of torch.scatter with Tensor src is deprecated"):
        out = tinytorch.zeros(2, 3).scatter_(1, tinytorch.tensor([[0], [1]]), tinytorch.ones(2, 1), reduce="add")
    assert out.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tinytorch.zeros(3).scatter_(0, tinytorch.tensor([1]), 2.0, reduce="multiply")


# ---------------------------------------------------------------------------------------------------------------
# FFT of real input: the mirrored half is the conjugate of the computed one


@pytest.mark.parametrize("shape,dims", [((5,), (0,)), ((6,), (0,)), ((4, 6), (0, 1)), ((3, 5, 7), (0, 2)),
                                        ((2, 3, 4), (0, 1, 2)), ((1,), (0,)), ((2,), (0,))])
def test_two_sided_fft_of_real_input(shape, dims):
    a = np.random.RandomState(1).randn(*shape)
    got = tinytorch.fft.fftn(tinytorch.tensor(a), dim=dims).numpy()
    np.testing.assert_allclose(got, np.fft.fftn(a, axes=dims), atol=1e-12)
    torch = pytest.importorskip("torch")
    want = torch.fft.fftn(torch.tensor(a), dim=dims).numpy()
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert np.array_equal(np.signbit(got.imag), np.signbit(want.imag))


def test_fft_of_impulse_has_pytorch_signed_zeros_and_gradient():
    out = tinytorch.fft.fft(tinytorch.tensor([1.0, 0.0, 0.0, 0.0])).numpy()
    assert out.real.tolist() == [1.0] * 4 and np.signbit(out.imag).tolist() == [False, False, False, True]
    x = tinytorch.randn(5, dtype=tinytorch.float64, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda t: tinytorch.view_as_real(tinytorch.fft.fft(t, norm="ortho")), (x,))
    assert tinytorch.autograd.gradcheck(lambda t: tinytorch.view_as_real(tinytorch.fft.ifft(t)), (x,))


# ---------------------------------------------------------------------------------------------------------------
# random_split fractions, checkpoint helpers


def test_random_split_fraction_checks_and_empty_split_warning():
    ds = TensorDataset(tinytorch.arange(5.))
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        parts = random_split(ds, [0.1, 0.1, 0.8], generator=tinytorch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [1, 0, 4]
    assert sorted(i for p in parts for i in p.indices) == list(range(5))
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(ds, [-0.5, 1.5])
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        assert [len(p) for p in torch.utils.data.random_split(range(5), [0.1, 0.1, 0.8])] == [1, 0, 4]


def test_checkpoint_sequential_warning_and_helpers():
    x = tinytorch.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter should be passed"):
        out = checkpoint_sequential([lambda h: h * 2, lambda h: h + 1], 2, x)
    out.sum().backward()
    assert out.tolist() == [3.0, 3.0] and x.grad.tolist() == [2.0, 2.0]
    y = x * 2
    d = detach_variable((y, 3))
    assert d[1] == 3 and d[0].is_leaf and d[0].requires_grad and d[0].grad_fn is None
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported"):
        detach_variable([y])
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        check_backward_validity([tinytorch.ones(1), 2])


# ---------------------------------------------------------------------------------------------------------------
# autograd.Function instantiation, autograd.functional checks


def test_function_instance_warns_and_calling_it_raises():
    class Cube(tinytorch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = Cube()
    x = tinytorch.tensor([2.0], requires_grad=True)
    f.apply(x).backward()
    assert x.grad.tolist() == [12.0]
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        f(x)


def test_functional_values():
    x = tinytorch.tensor([1.0, 2.0], dtype=tinytorch.float64)
    y = tinytorch.tensor([3.0, 4.0], dtype=tinytorch.float64)
    jx, jy = jacobian(lambda a, b: a * b, (x, y))
    assert jx.tolist() == [[3.0, 0.0], [0.0, 4.0]] and jy.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert hessian(lambda a: (a ** 3).sum(), x).tolist() == [[6.0, 0.0], [0.0, 12.0]]
    ((hxx, hxy), (hyx, hyy)) = hessian(lambda a, b: (a * b * b).sum(), (x, y))
    assert hxy.tolist() == [[6.0, 0.0], [0.0, 8.0]] and hyy.tolist() == [[2.0, 0.0], [0.0, 4.0]]
    assert hxx.abs().sum().item() == 0.0 and hyx.tolist() == hxy.tolist()
    out, v = vjp(lambda a: a ** 2, x, tinytorch.ones(2, dtype=tinytorch.float64))
    assert out.tolist() == [1.0, 4.0] and v.tolist() == [2.0, 4.0]
    assert jvp(lambda a: a ** 2, x, tinytorch.ones(2, dtype=tinytorch.float64))[1].tolist() == [2.0, 4.0]
    v = tinytorch.tensor([1.0, -1.0], dtype=tinytorch.float64)
    assert vhp(lambda a: (a ** 3).sum(), x, v)[1].tolist() == hvp(lambda a: (a ** 3).sum(), x, v)[1].tolist() \
        == [6.0, -12.0]
    w = tinytorch.tensor([1.0, 2.0], dtype=tinytorch.float64, requires_grad=True)
    jac = jacobian(lambda a: a * w, tinytorch.ones(2, dtype=tinytorch.float64), create_graph=True)
    jac.sum().backward()
    assert jac.requires_grad and w.grad.tolist() == [1.0, 1.0]
    assert jacobian(lambda a: a ** 2, x, strategy="forward-mode", vectorize=True).tolist() == [[2.0, 0.0],
                                                                                             [0.0, 4.0]]


_FUNCTIONAL_ERRORS = [
    (lambda F, t: F.jacobian(lambda a: a, [t.ones(2)]),
     ('TypeError', 'The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the given '
                   "inputs has type <class 'list'>.")),
    (lambda F, t: F.jacobian(lambda a: t.ones(2), t.ones(2), strict=True),
     ('RuntimeError', 'Output 0 of the user-provided function does not require gradients. The outputs must be '
                      'computed in a differentiable manner from the input when running in strict mode.')),
    (lambda F, t: F.vjp(lambda a: a ** 2, t.ones(2)),
     ('RuntimeError', 'The vector v can only be None if the user-provided function returns a single Tensor with a '
                      'single element.')),
    (lambda F, t: F.vjp(lambda a: a ** 2, t.ones(2), (t.ones(2), t.ones(2))),
     ('RuntimeError', 'The given v should contain a single Tensor.')),
    (lambda F, t: F.vjp(lambda a: a ** 2, t.ones(2), t.ones(3)),
     ('RuntimeError', 'v has invalid size: should be torch.Size([2]) but got torch.Size([3]).')),
    (lambda F, t: F.vjp(lambda a, b: (a, b), (t.ones(2), t.ones(2)), (t.ones(2), t.ones(3))),
     ('RuntimeError', 'Entry 1 in v has invalid size: should be torch.Size([2]) but got torch.Size([3]).')),
    (lambda F, t: F.jvp(lambda a: a.detach(), t.ones(2), t.ones(2), strict=True),
     ('RuntimeError', 'Output 0 of the user-provided function does not require gradients. The outputs must be '
                      'computed in a differentiable manner from the input when running in strict mode.')),
    (lambda F, t: F.jvp(lambda a, b: a * 2, (t.ones(2), t.ones(2)), (t.ones(2), t.ones(2)), strict=True),
     ('RuntimeError', 'The output of the user-provided function is independent of input 1. This is not allowed in '
                      'strict mode.')),
    (lambda F, t: F.hvp(lambda a: a ** 2, t.ones(2), t.ones(2)),
     ('RuntimeError', 'The Tensor returned by the function given to hvp should contain a single element')),
    (lambda F, t: F.vhp(lambda a: (a, a), t.ones(2), t.ones(2)),
     ('RuntimeError', 'The function given to vhp should return a single Tensor')),
    (lambda F, t: F.hessian(lambda a: (a.sum(), a.sum()), t.ones(2)),
     ('RuntimeError', 'The function given to hessian should return a single Tensor')),
    (lambda F, t: F.hessian(lambda a: a.sum(), t.ones(2), strict=True),
     ('RuntimeError', 'While computing the hessian, found that the jacobian of the user-provided function with '
                      'respect to input 0 is independent of the input. This is not allowed in strict mode. You '
                      'should ensure that your function is twice differentiable and that the jacobian depends on '
                      'the inputs (this would be violated by a linear function for example).')),
    (lambda F, t: F.vhp(lambda a: a.sum(), t.ones(2), t.ones(2), strict=True),
     ('RuntimeError', 'While computing the hessian, found that the jacobian of the user-provided function with '
                      'respect to input 0 is independent of the input. This is not allowed in strict mode. You '
                      'should ensure that your function is twice differentiable and that the jacobian depends on '
                      'the inputs (this would be violated by a linear function for example).')),
    (lambda F, t: F.jacobian(lambda a: a ** 2, t.ones(2), strict=True, vectorize=True),
     ('RuntimeError', 'torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported '
                      'together. Please either set `strict=False` or `vectorize=False`.')),
    (lambda F, t: F.jacobian(lambda a: a ** 2, t.ones(2), strategy="forward-mode"),
     ('NotImplementedError', 'Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly '
                             'implemented for `vectorize=True`.')),
    (lambda F, t: F.jacobian(lambda a: a ** 2, t.ones(2), strategy="forward-mode", vectorize=True, create_graph=True),
     ('NotImplementedError', 'torch.autograd.functional.jacobian: `create_graph=True` and '
                             '`strategy="forward-mode"` are not supported together (yet). Please either set '
                             '`create_graph=False` or `strategy="reverse-mode"`.')),
    (lambda F, t: F.jacobian(lambda a: a ** 2, t.ones(2), strategy="forward-mode", vectorize=True, strict=True),
     ('RuntimeError', 'torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                      'supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.')),
    (lambda F, t: F.jacobian(lambda a: a ** 2, t.ones(2), strategy="bogus"),
     ('AssertionError', 'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                        'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, '
                        'prefer to use "reverse-mode".')),
    (lambda F, t: F.jacobian(lambda a, b: a * 2, (t.ones(2), t.ones(2)), strict=True),
     ('RuntimeError', 'Output 0 of the user-provided function is independent of input 1. This is not allowed in '
                      'strict mode.')),
]


@pytest.mark.parametrize("case,expected", _FUNCTIONAL_ERRORS)
def test_functional_errors(case, expected):
    assert _error(lambda: case(tinytorch.autograd.functional, tinytorch)) == expected
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as F
    assert _error(lambda: case(F, torch)) == expected


# ---------------------------------------------------------------------------------------------------------------
# searchsorted / bucketize with NaN: PyTorch's binary search moves right on every comparison with NaN


def test_searchsorted_with_nan():
    nan = float("nan")
    s = tinytorch.searchsorted
    # a NaN boundary at the midpoint sends every value right, whatever it is
    assert s(tinytorch.tensor([1.0, nan]), tinytorch.tensor([nan, 5.0, 0.5, 1.0])).tolist() == [2, 2, 2, 2]
    assert s(tinytorch.tensor([0.0, 1.0, nan]), tinytorch.tensor([0.5, 1.0]), right=True).tolist() == [1, 3]
    assert s(tinytorch.tensor([[1.0, nan, 3.0], [0.0, 1.0, 2.0]]),
             tinytorch.tensor([[nan, 2.0], [1.0, 3.0]])).tolist() == [[3, 2], [1, 3]]
    assert tinytorch.bucketize(tinytorch.tensor([nan, 1.5]), tinytorch.tensor([1.0, 2.0])).tolist() == [2, 1]
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(0)
    b = np.sort(rng.randn(3, 9))
    b[:, -2:] = nan
    v = rng.randn(3, 5)
    v[0, 1] = v[2, 4] = nan
    for right in (False, True):
        assert s(tinytorch.tensor(b), tinytorch.tensor(v), right=right).tolist() == \
            torch.searchsorted(torch.tensor(b), torch.tensor(v), right=right).tolist()


# ---------------------------------------------------------------------------------------------------------------
# Factories: dtype inference, overflow, argument errors


def test_tensor_infers_numpy_scalar_dtypes_by_promotion():
    t = tinytorch.tensor
    assert t([1.5, np.float64(2.5)]).dtype is tinytorch.float64
    assert t([np.int32(1), np.int16(2)]).dtype is tinytorch.int32
    assert t([np.int32(1), 2]).dtype is tinytorch.int64
    assert t([np.float16(1), np.int64(2)]).dtype is tinytorch.float16
    assert t([True, 2]).dtype is tinytorch.int64 and t([True, 1.5]).dtype is tinytorch.float32
    assert t(range(3)).tolist() == [0, 1, 2]
    assert t([[tinytorch.tensor(1, dtype=tinytorch.int8)], [tinytorch.tensor(2, dtype=tinytorch.int8)]]).dtype \
        is tinytorch.int8
    assert t([-1], dtype=tinytorch.uint8).tolist() == [255] and t([1.7], dtype=tinytorch.int32).tolist() == [1]
    assert tinytorch.full((2,), np.float64(1.5)).dtype is tinytorch.float32


_FACTORY_ERRORS = [
    (lambda t: t.tensor([300], dtype=t.int8),
     ('RuntimeError', 'value cannot be converted to type int8 without overflow')),
    (lambda t: t.tensor([-1.5], dtype=t.uint8),
     ('RuntimeError', 'value cannot be converted to type uint8 without overflow')),
    (lambda t: t.tensor([-256], dtype=t.uint8),
     ('RuntimeError', 'value cannot be converted to type uint8 without overflow')),
    (lambda t: t.tensor([float("nan")], dtype=t.int32),
     ('RuntimeError', 'value cannot be converted to type int32 without overflow')),
    (lambda t: t.tensor([2 ** 63]),
     ('ValueError', 'Overflow when unpacking long long')),
    (lambda t: t.tensor([1 + 2j], dtype=t.float32),
     ('TypeError', 'must be real number, not complex')),
    (lambda t: t.tensor([1 + 2j], dtype=t.int32),
     ('TypeError', "'complex' object cannot be interpreted as an integer")),
    (lambda t: t.tensor(None),
     ('RuntimeError', 'Could not infer dtype of NoneType')),
    (lambda t: t.tensor("a"),
     ('TypeError', "new(): invalid data type 'str'")),
    (lambda t: t.tensor([[1, 2], [3, 4, 5]]),
     ('ValueError', 'expected sequence of length 2 at dim 1 (got 3)')),
    (lambda t: t.tensor([[1, 2], 3]),
     ('TypeError', 'not a sequence')),
    (lambda t: t.tensor([1, [2, 3]]),
     ('TypeError', "'list' object cannot be interpreted as an integer")),
    (lambda t: t.tensor([1, [2, 3]], dtype=t.float32),
     ('TypeError', 'must be real number, not list')),
    (lambda t: t.tensor([[1], []]),
     ('ValueError', 'expected sequence of length 1 at dim 1 (got 0)')),
    (lambda t: t.tensor([[[1], [2]], [[3], [4, 5]]]),
     ('ValueError', 'expected sequence of length 1 at dim 2 (got 2)')),
    (lambda t: t.arange(-1, 1, 0.5, dtype=t.int64),
     ('ValueError', 'step must be nonzero')),
    (lambda t: t.arange(10, 0),
     ('RuntimeError', 'upper bound and lower bound inconsistent with step sign')),
    (lambda t: t.arange(float("inf")),
     ('RuntimeError', 'unsupported range: 0 -> inf')),
    (lambda t: t.arange(float("nan"), 3),
     ('RuntimeError', 'unsupported range: nan -> 3')),
    (lambda t: t.arange(0, 1e20, 1e-10),
     ('RuntimeError', 'invalid size, possible overflow?')),
    (lambda t: t.arange(1, 2, float("nan")),
     ('RuntimeError', 'step must be nonzero')),
    (lambda t: t.arange(0, 5, dtype=t.bool),
     ('NotImplementedError', '"arange_cpu" not implemented for \'Bool\'')),
    (lambda t: t.linspace(0, 1, -1),
     ('RuntimeError', 'number of steps must be non-negative')),
    (lambda t: t.linspace(0, 1, 2.5),
     ('TypeError', 'linspace() received an invalid combination of arguments - got (int, int, float), but expected '
                   'one of:\n * (Tensor start, Tensor end, int steps, *, Tensor out = None, torch.dtype dtype = '
                   'None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool '
                   'requires_grad = False)\n * (Number start, Tensor end, int steps, *, Tensor out = None, '
                   'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
                   'pin_memory = False, bool requires_grad = False)\n * (Tensor start, Number end, int steps, *, '
                   'Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = '
                   'None, bool pin_memory = False, bool requires_grad = False)\n * (Number start, Number end, int '
                   'steps, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, '
                   'torch.device device = None, bool pin_memory = False, bool requires_grad = False)\n')),
    (lambda t: t.linspace(0, 1, 3, dtype=t.bool),
     ('NotImplementedError', '"linspace_cpu" not implemented for \'Bool\'')),
    (lambda t: t.linspace(0, 1000, 4, dtype=t.int8),
     ('RuntimeError', 'value cannot be converted to type int8_t without overflow')),
    (lambda t: t.logspace(0, 1, -2),
     ('RuntimeError', 'number of steps must be non-negative')),
    (lambda t: t.eye(2, -1),
     ('RuntimeError', 'm must be greater or equal to 0, got -1')),
    (lambda t: t.eye(-1),
     ('RuntimeError', 'n must be greater or equal to 0, got -1')),
    (lambda t: t.eye(2.5),
     ('TypeError', "eye(): argument 'n' (position 1) must be int, not float")),
    (lambda t: t.zeros(2.5),
     ('TypeError', "zeros(): argument 'size' (position 1) must be tuple of ints, not float")),
    (lambda t: t.zeros((2, 2.0)),
     ('TypeError', 'zeros(): argument \'size\' failed to unpack the object at pos 2 with error "type must be tuple '
                   'of ints,but got float"')),
    (lambda t: t.zeros(size=2.5),
     ('TypeError', "zeros(): argument 'size' must be tuple of ints, not float")),
    (lambda t: t.rand(2, 2.5),
     ('TypeError', 'rand(): argument \'size\' failed to unpack the object at pos 2 with error "type must be tuple '
                   'of ints,but got float"')),
    (lambda t: t.empty(2, -1),
     ('RuntimeError', 'Trying to create tensor with negative dimension -1: [2, -1]')),
    (lambda t: t.randperm(-1),
     ('RuntimeError', 'Trying to create tensor with negative dimension -1: [-1]')),
    (lambda t: t.randperm(3, dtype=t.bool),
     ('NotImplementedError', '"randperm" not implemented for \'Bool\'')),
    (lambda t: t.full(2, 1.5),
     ('TypeError', "full(): argument 'size' (position 1) must be tuple of ints, not int")),
    (lambda t: t.full((2,), 300, dtype=t.uint8),
     ('RuntimeError', 'value cannot be converted to type uint8_t without overflow')),
    (lambda t: t.full((2,), 1e40, dtype=t.float32),
     ('RuntimeError', 'value cannot be converted to type float without overflow')),
    (lambda t: t.full((2,), float("inf"), dtype=t.int64),
     ('RuntimeError', 'value cannot be converted to type int64_t without overflow')),
    (lambda t: t.zeros(2).new_full(3, 1.0),
     ('TypeError', "new_full(): argument 'size' (position 1) must be tuple of ints, not int")),
    (lambda t: t.zeros(2).new_ones(2.5),
     ('TypeError', "new_ones(): argument 'size' (position 1) must be tuple of ints, not float")),
    (lambda t: t.randint(3, 3, (2,)),
     ('RuntimeError', "random_ expects 'from' to be less than 'to', but got from=3 >= to=3")),
    (lambda t: t.randint(0, 300, (2,), dtype=t.uint8),
     ('RuntimeError', 'to - 1 is out of bounds for unsigned char')),
    (lambda t: t.randint(-1, 2, (2,), dtype=t.uint8),
     ('RuntimeError', 'from is out of bounds for unsigned char')),
    (lambda t: t.randint(0, 2 ** 40, (2,), dtype=t.int32),
     ('RuntimeError', 'to - 1 is out of bounds for int')),
    (lambda t: t.randint(0, 2 ** 20, (2,), dtype=t.float16),
     ('RuntimeError', 'to - 1 is out of bounds for c10::Half')),
    (lambda t: t.randint(2.5, (2,)),
     ('TypeError', "randint(): argument 'high' (position 1) must be int, not float")),
    (lambda t: t.randint(0, 3, 2),
     ('TypeError', 'randint() received an invalid combination of arguments - got (int, int, int), but expected one '
                   'of:\n * (int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, '
                   'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
                   'pin_memory = False, bool requires_grad = False)\n * (int high, tuple of ints size, *, Tensor '
                   'out = None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, '
                   'bool pin_memory = False, bool requires_grad = False)\n * (int low, int high, tuple of ints '
                   'size, *, torch.Generator generator, Tensor out = None, torch.dtype dtype = None, torch.layout '
                   'layout = None, torch.device device = None, bool pin_memory = False, bool requires_grad = '
                   'False)\n * (int low, int high, tuple of ints size, *, Tensor out = None, torch.dtype dtype = '
                   'None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool '
                   'requires_grad = False)\n')),
    (lambda t: t.randn(2, dtype=t.int64),
     ('NotImplementedError', '"normal_kernel_cpu" not implemented for \'Long\'')),
    (lambda t: t.rand(2, dtype=t.bool),
     ('NotImplementedError', '"check_uniform_bounds" not implemented for \'Bool\'')),
    (lambda t: t.bernoulli(t.tensor([0.5]), p=2.0),
     ('RuntimeError', 'bernoulli_ expects p to be in [0, 1], but got p=2')),
    (lambda t: t.bernoulli(t.tensor([-0.1])),
     ('RuntimeError', 'Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be '
                      'improved?  If so, please report an enhancement request to PyTorch.)')),
    (lambda t: t.bernoulli(t.tensor([1])),
     ('NotImplementedError', '"bernoulli_tensor_cpu_p_" not implemented for \'Long\'')),
    (lambda t: t.normal(0.0, -1.0, (2,)),
     ('RuntimeError', 'normal expects std >= 0.0, but found std -1')),
    (lambda t: t.normal(t.zeros(2), -1.0),
     ('RuntimeError', 'normal expects std >= 0.0, but found std -1')),
    (lambda t: t.normal(0.0, t.tensor([-1.0])),
     ('RuntimeError', 'normal expects all elements of std >= 0.0')),
    (lambda t: t.normal(t.zeros(2), t.ones(3)),
     ('RuntimeError', 'The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0')),
    (lambda t: t.normal(0.0, 1.0),
     ('TypeError', 'normal() received an invalid combination of arguments - got (float, float), but expected one '
                   'of:\n * (Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n * '
                   '(Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None)\n * '
                   '(float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n * (float '
                   'mean, float std, tuple of ints size, *, torch.Generator generator = None, Tensor out = None, '
                   'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
                   'pin_memory = False, bool requires_grad = False)\n')),
    (lambda t: t.empty(3).uniform_(3, 2),
     ('RuntimeError', 'uniform_ expects to return a [from, to) range, but found from=3 > to=2')),
    (lambda t: t.empty(3).uniform_(0, float("inf")),
     ('RuntimeError', 'to is out of bounds for float')),
    (lambda t: t.empty(3).normal_(0, -1),
     ('RuntimeError', 'normal expects std >= 0.0, but found std -1')),
    (lambda t: t.empty(3, dtype=t.int64).normal_(),
     ('NotImplementedError', '"normal_kernel_cpu" not implemented for \'Long\'')),
    (lambda t: t.empty(3, dtype=t.int64).uniform_(),
     ('NotImplementedError', '"check_uniform_bounds" not implemented for \'Long\'')),
    (lambda t: t.empty(3).bernoulli_(1.5),
     ('RuntimeError', 'bernoulli_ expects p to be in [0, 1], but got p=1.5')),
    (lambda t: t.from_numpy(np.arange(3)[::-1]),
     ('ValueError', 'At least one stride in the given numpy array is negative, and tensors with negative strides '
                    'are not currently supported. (You can probably work around this by making a copy of your '
                    'array  with array.copy().) ')),
]


@pytest.mark.parametrize("case,expected", _FACTORY_ERRORS)
def test_factory_errors(case, expected):
    assert _error(lambda: case(tinytorch)) == expected
    torch = pytest.importorskip("torch")
    assert _error(lambda: case(torch)) == expected


def test_range_factories_follow_pytorch():
    assert tinytorch.arange(0.5, 3.7, 1.5, dtype=tinytorch.int64).tolist() == [0, 1, 2]
    assert tinytorch.arange(0, 300, 100, dtype=tinytorch.int8).tolist() == [0, 100, -56]
    assert tinytorch.arange(True, 3).dtype is tinytorch.int64
    assert tinytorch.arange(2 ** 53, 2 ** 53 + 3, dtype=tinytorch.float64).shape == (4,)  # the bounds in double
    assert tinytorch.linspace(0, 1, 1).tolist() == [0.0]
    assert tinytorch.linspace(3, -3, 4).tolist() == [3.0, 1.0, -1.0, -3.0]
    assert tinytorch.linspace(-1, -10, 4, dtype=tinytorch.int64).tolist() == [-1, -4, -7, -10]
    assert all(math.isnan(v) for v in tinytorch.linspace(0, float("inf"), 3).tolist())
    c = tinytorch.linspace(0, 1 + 1j, 3)
    assert c.dtype is tinytorch.complex64 and c.tolist() == [0j, 0.5 + 0.5j, 1 + 1j]
    assert tinytorch.logspace(0, 1, 3, dtype=tinytorch.int64).tolist() == [1, 3, 10]
    torch = pytest.importorskip("torch")
    for a, b, n in [(0, 1, 7), (-7.5, 2.25, 11), (0.1, 0.9, 33), (0, 10, 4)]:
        np.testing.assert_allclose(tinytorch.linspace(a, b, n).numpy(), torch.linspace(a, b, n).numpy(), rtol=1e-6)
        ends = tinytorch.linspace(a, b, n).numpy()[[0, -1]].tolist()
        assert ends == torch.linspace(a, b, n).numpy()[[0, -1]].tolist() == [float(np.float32(a)), float(np.float32(b))]


def test_random_factories_accept_pytorch_forms():
    g = tinytorch.Generator().manual_seed(3)
    r = tinytorch.randint(high=3, size=(50,), generator=g)
    assert r.min().item() >= 0 and r.max().item() <= 2
    assert tinytorch.bernoulli(tinytorch.zeros(4), 1.0).tolist() == [1.0] * 4
    assert tinytorch.bernoulli(tinytorch.zeros(2, dtype=tinytorch.int64), p=0.0).dtype is tinytorch.int64
    assert tinytorch.normal(0.0, 1.0, size=(3,), dtype=tinytorch.float64).dtype is tinytorch.float64
    assert tinytorch.normal(tinytorch.zeros(2, 1), tinytorch.ones(3)).shape == (2, 3)
    assert tinytorch.normal(2.0, 0.0, (3,)).tolist() == [2.0] * 3
    z = tinytorch.randn(20000, dtype=tinytorch.complex64, generator=g)
    assert z.dtype is tinytorch.complex64 and abs((z.abs() ** 2).mean().item() - 1.0) < 0.05


def test_where_with_only_a_condition_is_nonzero_as_tuple():
    x = tinytorch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    rows, cols = tinytorch.where(x > 0)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 1]
    assert [t.tolist() for t in tinytorch.where(tinytorch.tensor(3.0) > 0)] == [[0]]


def test_repeat_interleave_of_counts_alone():
    assert tinytorch.repeat_interleave(tinytorch.tensor([2, 0, 3])).tolist() == [0, 0, 2, 2, 2]
    for bad, err, msg in ((tinytorch.tensor([2.0, 1.0]), NotImplementedError, "not implemented for 'Float'"),
                          (tinytorch.tensor([[2, 1]]), RuntimeError, "only accept 1D vector as repeat"),
                          (tinytorch.tensor([-2, 1]), RuntimeError, "repeats can not be negative")):
        with pytest.raises(err, match=msg):
            tinytorch.repeat_interleave(bad)


@pytest.mark.parametrize("key, name", [(0, "SelectBackward0"), ((0, 1), "SelectBackward0"),
                                       ((slice(0, 2), 0), "SelectBackward0"), ((0, slice(1, 3)), "SliceBackward0"),
                                       ((slice(None),), "AliasBackward0"), ((None, 0), "SelectBackward0"),
                                       ((0, None), "UnsqueezeBackward0"), ((Ellipsis,), "AliasBackward0"),
                                       ((0, Ellipsis), "SelectBackward0")])
def test_basic_indexing_names_the_last_op_it_applies(key, name):
    x = tinytorch.ones(3, 4, 5, requires_grad=True) * 1
    y = x[key]
    assert y.grad_fn.name() == name
    y.sum().backward()


def test_compat_runs_a_script_with_an_absolute_file(tmp_path):
    import subprocess
    import sys
    (tmp_path / "s.py").write_text("print(__file__)\n")
    p = subprocess.run([sys.executable, "-m", "tinytorch.compat", "s.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / "s.py")


def test_strides_of_empty_tensors_are_contiguous_ones():
    assert tinytorch.empty(0, 2).stride() == (2, 1)
    assert tinytorch.empty(2, 0, 3).stride() == (3, 3, 1)
    assert tinytorch.ones(3, 4)[:0].stride() == (4, 1)  # a slice keeps its base's strides
    assert tinytorch.empty(0).stride() == (1,) and tinytorch.empty(0, 2).stride(0) == 2


def test_linear_checks_dtypes_before_shapes():
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got Double and Float"):
        nn.Linear(3, 2)(tinytorch.ones(4, 2, dtype=tinytorch.float64))


def test_index_select_and_getitem_backward_with_a_strided_index():
    idx = tinytorch.arange(12)[::5]
    want = [1.0 if i % 5 == 0 else 0.0 for i in range(12)]
    a = tinytorch.ones(12, 3, requires_grad=True)
    a.index_select(0, idx).sum().backward()
    assert a.grad[:, 0].tolist() == want
    b = tinytorch.ones(12, 3, requires_grad=True)
    b[idx].sum().backward()
    assert b.grad[:, 1].tolist() == want


def test_einsum_sublist_form():
    rng = np.random.default_rng(0)
    a = tinytorch.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    b = tinytorch.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    np.testing.assert_allclose(tinytorch.einsum(a, [0, 1, 2], [0, 2]).detach().numpy(),
                               a.detach().numpy().sum(1), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.einsum(a, [0, 1, 2], b, [2, 3], [0, 1, 3]).detach().numpy(),
                               a.detach().numpy() @ b.detach().numpy(), rtol=1e-12)
    assert tinytorch.einsum(a, [Ellipsis, 2], b, [2, 3]).shape == (2, 3, 5)
    assert tinytorch.autograd.gradcheck(lambda x, y: tinytorch.einsum(x, [0, 1, 2], y, [2, 3], [0, 3]), (a, b))
    with pytest.raises(RuntimeError, match=r"expected subscript to be within the range \[0, 52\)"):
        tinytorch.einsum(a, [0, 1, 60])
