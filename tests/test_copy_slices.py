"""In-place ops on views under autograd (PyTorch's CopySlices): the base takes the new history, the view becomes a
view of it. Gradients against known values and gradcheck/gradgradcheck in float64, the errors PyTorch raises,
the grad-off paths, and parity with PyTorch on the same programs."""
import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

VIEWS = {
    "slice": lambda y: y[:, 1:3],
    "select": lambda y: y[1],
    "transpose": lambda y: y.transpose(0, 1),
    "narrow": lambda y: y.narrow(1, 1, 2),
    "diagonal": lambda y: y.diagonal(),
    "view_of_view": lambda y: y[1:][:, ::2],
    "reshape_view": lambda y: y.view(12)[2:9:3],
    "as_strided": lambda y: y.as_strided((2, 2), (4, 1), 5),
}

# name -> (op, whether it reads the second input w)
OPS = {
    "mul_": (lambda v, w: v.mul_(w), True),
    "mul_scalar": (lambda v, w: v.mul_(3.0), False),
    "add_": (lambda v, w: v.add_(w, alpha=2), True),
    "iadd": (lambda v, w: v.__iadd__(w), True),
    "copy_": (lambda v, w: v.copy_(w), True),
    "zero_": (lambda v, w: v.zero_(), False),
    "fill_": (lambda v, w: v.fill_(2.5), False),
    "sigmoid_": (lambda v, w: v.sigmoid_(), False),
    "clamp_": (lambda v, w: v.clamp_(-1.0, 1.0), False),
    "setitem": (lambda v, w: (v.__setitem__(Ellipsis, w), v)[1], True),
}


def _values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _leaf(lib, values, device="cpu"):
    return lib.tensor(values, dtype=lib.float64, device=device, requires_grad=True)


def _view_shape(view: str) -> tuple:
    return tuple(VIEWS[view](tinytorch.zeros(3, 4)).shape)


def _program(view: str, op: str):
    """y = x*x + x (a non-leaf), op in place on a view of y; outputs y**2 and the modified view (its own history)."""
    fn, _ = OPS[op]

    def f(x, w=None):
        y = x * x + x
        v = VIEWS[view](y)
        fn(v, w)
        return y * y, v * 1
    return f


def _inputs(lib, view: str, op: str, device="cpu"):
    x = _leaf(lib, _values((3, 4), 0), device)
    if not OPS[op][1]:
        return (x,)
    return x, _leaf(lib, _values(_view_shape(view), 1), device)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("view", list(VIEWS))
def test_gradcheck_inplace_on_view_of_non_leaf(view, op, device):
    assert gradcheck(_program(view, op), _inputs(tinytorch, view, op, device))


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("view", list(VIEWS))
def test_inplace_on_view_matches_out_of_place_program(view, op):
    """The same gradients as writing the op's result into a clone by index (no view ever modified in place)."""
    fn, _ = OPS[op]
    ins = _inputs(tinytorch, view, op)
    f = _program(view, op)
    y2, v = f(*ins)
    (y2.sum() + (v * v).sum()).backward()
    got = [t.grad.clone() for t in ins]
    for t in ins:
        t.grad = None
    x, w = ins[0], (ins[1] if len(ins) > 1 else None)
    y = x * x + x
    idx = tinytorch.arange(12).reshape(3, 4)
    region = VIEWS[view](idx).contiguous().reshape(-1)  # the base positions the view covers, in its order
    new_values = fn(VIEWS[view](y).clone(), w)
    flat = y.reshape(-1).index_put((region,), new_values.reshape(-1))
    v2 = flat.index_select(0, region).reshape(new_values.shape)
    (flat.reshape(3, 4).pow(2).sum() + (v2 * v2).sum()).backward()
    for g, t in zip(got, ins):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("view", ["slice", "diagonal", "transpose"])
def test_gradgradcheck_through_copy_slices(view):
    def f(x, w):
        y = x * x
        v = VIEWS[view](y)
        v.mul_(w)
        v.sigmoid_()
        return y * x
    assert gradgradcheck(f, _inputs(tinytorch, view, "mul_"))


def test_known_values_mul_on_column_of_non_leaf():
    x = tinytorch.ones(3, 4, dtype=tinytorch.float64, requires_grad=True)
    y = x * 2
    v = y[:, 1]
    v.mul_(3)
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert y.tolist() == [[2.0, 6.0, 2.0, 2.0]] * 3
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 6.0, 2.0, 2.0]] * 3


def test_modified_view_has_its_own_backward():
    x = tinytorch.ones(3, 4, dtype=tinytorch.float64, requires_grad=True)
    y = x * 2
    v = y[0]
    v.mul_(3)
    assert v.tolist() == [6.0] * 4 and v.requires_grad
    v.sum().backward()
    assert x.grad.tolist() == [[6.0] * 4, [0.0] * 4, [0.0] * 4]


def test_ops_that_overwrite_send_no_gradient_to_the_old_region():
    x = tinytorch.ones(3, 4, dtype=tinytorch.float64, requires_grad=True)
    for op in (lambda v: v.zero_(), lambda v: v.fill_(5.0), lambda v: v.copy_(tinytorch.zeros(4)),
               lambda v: v.__setitem__(slice(None), 1.0)):
        x.grad = None
        y = x * 3
        op(y[1])
        y.sum().backward()
        assert x.grad.tolist() == [[3.0] * 4, [0.0] * 4, [3.0] * 4]


def test_base_without_grad_joins_the_graph():
    x = tinytorch.tensor([1.0, 2.0, 3.0], dtype=tinytorch.float64, requires_grad=True)
    buf = tinytorch.zeros(3, 4, dtype=tinytorch.float64)
    buf[:, 0].copy_(x)
    assert buf.requires_grad and buf.grad_fn.name() == "torch::autograd::CopySlices"
    assert buf[:, 0].tolist() == [1.0, 2.0, 3.0]
    coef = tinytorch.arange(12, dtype=tinytorch.float64).reshape(3, 4)
    (buf * coef).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0, 8.0]


def test_gradcheck_base_without_grad():
    def f(x, w):
        buf = tinytorch.zeros(3, 4, dtype=tinytorch.float64)
        buf[:, 1].copy_(x)
        buf[0].add_(w)
        buf.diagonal().mul_(w[:3])
        return buf * buf
    assert gradcheck(f, (_leaf(tinytorch, _values(3, 0)), _leaf(tinytorch, _values(4, 1))))


def test_chained_inplace_on_the_same_view():
    x = tinytorch.ones(3, 4, dtype=tinytorch.float64, requires_grad=True)
    y = x * 1
    v = y[1]
    v.mul_(2).add_(1).mul_(3)
    assert y[1].tolist() == [9.0] * 4
    y.sum().backward()
    assert x.grad.tolist() == [[1.0] * 4, [6.0] * 4, [1.0] * 4]

    def f(x, w):
        y = x * x
        v = y[:, 1:]
        v.mul_(w)
        v.add_(x[:, :3])
        v.clamp_(-0.8, 0.8)
        v.sigmoid_()
        return y * 1
    assert gradcheck(f, (_leaf(tinytorch, _values((3, 4), 0)), _leaf(tinytorch, _values((3, 3), 1))))


def test_inplace_on_two_views_of_the_same_base():
    def f(x, w):
        y = x * x
        y[0].mul_(w)
        y[:, 2].add_(x[:, 0])  # overlaps the first view at y[0, 2]
        y.t()[3].sigmoid_()
        return y * y
    assert gradcheck(f, (_leaf(tinytorch, _values((3, 4), 0)), _leaf(tinytorch, _values(4, 1))))


def test_other_views_of_the_base_follow_the_new_history():
    x = tinytorch.ones(3, 4, dtype=tinytorch.float64, requires_grad=True)
    y = x * 1
    a, c = y[0], y[:, 0]
    a.mul_(3)
    assert c.grad_fn.name() == "AsStridedBackward0" and c.tolist() == [3.0, 1.0, 1.0]
    c.sum().backward()
    assert x.grad.tolist() == [[3.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]


def test_views_follow_an_inplace_op_on_the_base_itself():
    x = tinytorch.ones(2, 3, dtype=tinytorch.float64, requires_grad=True)
    y = x * 1
    v = y[0]
    y.mul_(5)
    v.sum().backward()
    assert x.grad.tolist() == [[5.0] * 3, [0.0] * 3]


def test_setitem_on_views():
    def f(x, w):
        y = x * x
        v = y[1]
        v[1:3] = w
        v[0] = 2.0
        y.t()[3][0] = w[0]
        return y * y
    assert gradcheck(f, (_leaf(tinytorch, _values((3, 4), 0)), _leaf(tinytorch, _values(2, 1))))
    x = tinytorch.ones(2, 2, dtype=tinytorch.float64, requires_grad=True)
    y = x * 4
    y[0][1] = 0.0
    y.sum().backward()
    assert x.grad.tolist() == [[4.0, 0.0], [4.0, 4.0]]


def test_view_of_a_leaf_that_requires_grad_errors():
    x = tinytorch.ones(3, 4, requires_grad=True)
    msg = "a view of a leaf Variable that requires grad is being used in an in-place operation."
    for op in (lambda: x[0].mul_(2), lambda: x.t().add_(1), lambda: x.diagonal().zero_(),
               lambda: x.narrow(1, 0, 2).copy_(tinytorch.zeros(3, 2)), lambda: x[0].sigmoid_(),
               lambda: x[0].__setitem__(1, 2.0)):
        with pytest.raises(RuntimeError, match=msg):
            op()
    assert x.tolist() == [[1.0] * 4] * 3


def test_expanded_view_errors():
    x = tinytorch.ones(1, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory"):
        (x * 2).expand(3, 4).add_(1)


def test_version_counter_catches_a_modified_saved_base():
    x = tinytorch.ones(3, 4, requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    v = y[:, 1]
    before = y._version
    v.mul_(3)
    assert y._version == v._version == before + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_version_counter_catches_a_modified_saved_view():
    x = tinytorch.ones(3, 4, requires_grad=True)
    y = x * 2
    v = y[0]
    z = v * v  # saves v
    y[:, 0].add_(1)  # another view, overlapping v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_grad_off_records_nothing():
    x = tinytorch.ones(3, 4, requires_grad=True)
    y = x * 2
    with tinytorch.no_grad():
        y[0].mul_(0)
        y[1, 1:] = 7.0
    assert y.grad_fn.name() == "MulBackward0" and y.tolist()[0] == [0.0] * 4
    buf = tinytorch.zeros(2, 2)
    buf[0].add_(1)  # grad on, but nothing requires grad
    assert buf.grad_fn is None and not buf.requires_grad and buf.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_leaf_views_under_no_grad():
    p = tinytorch.ones(3, 4, requires_grad=True)
    with tinytorch.no_grad():
        p[0].mul_(2)
        p.t()[1].zero_()
        p[2] = 5.0
    p.data[1, 2:] = 3.0
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p.tolist() == [[2.0, 0.0, 2.0, 2.0], [1.0, 0.0, 3.0, 3.0], [5.0, 5.0, 5.0, 5.0]]
    (p * 1).sum().backward()
    assert p.grad.tolist() == [[1.0] * 4] * 3


def test_empty_view_is_a_no_op():
    x = tinytorch.ones(2, 3, dtype=tinytorch.float64, requires_grad=True)
    y = x * 2
    y[0:0].mul_(5)
    y.sum().backward()
    assert x.grad.tolist() == [[2.0] * 3] * 2


def test_non_contiguous_base():
    def f(x, w):
        y = x.t() * 2  # a base laid out in Fortran order
        y[1:3, 0].mul_(w)
        y.diagonal().sigmoid_()
        return y * y
    x = _leaf(tinytorch, _values((3, 4), 0))
    assert not (x.t() * 2).is_contiguous()
    assert gradcheck(f, (x, _leaf(tinytorch, _values(2, 1))))


def test_multi_output_views():
    """PyTorch refuses in-place ops on split/chunk/unbind outputs; tinytorch records them (CopySlices is exact)."""
    def f(x):
        y = x * x
        y.unbind(1)[2].mul_(3)
        y.split(1)[0].add_(y[2])
        y.chunk(2, 1)[1].sigmoid_()
        return y * 1
    assert gradcheck(f, (_leaf(tinytorch, _values((3, 4), 0)),))


def test_real_view_of_complex_base():
    a = _leaf(tinytorch, _values(3, 0))
    b = _leaf(tinytorch, _values(3, 1))
    z = tinytorch.complex(a, b) * 1
    z.real.mul_(3)
    (z.abs() ** 2).sum().backward()  # 9 a^2 + b^2
    np.testing.assert_allclose(a.grad.numpy(), 18 * _values(3, 0), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), 2 * _values(3, 1), rtol=1e-12)


def test_result_dtype_differs_from_view():
    x = tinytorch.ones(2, 3, requires_grad=True)  # float32
    w = tinytorch.tensor([1.0, 2.0, 3.0], dtype=tinytorch.float64, requires_grad=True)
    y = x * 2
    y[1].mul_(w)
    assert y.dtype == tinytorch.float32
    y.sum().backward()
    assert w.grad.dtype == tinytorch.float64 and w.grad.tolist() == [2.0, 2.0, 2.0]
    assert x.grad.tolist() == [[2.0] * 3, [2.0, 4.0, 6.0]]


def test_detection_head_sigmoid_on_a_slice():
    """YOLO-style: in-place activations on slices of a layer's output; same gradients as the out-of-place form."""
    tinytorch.manual_seed(0)
    lin = tinytorch.nn.Linear(5, 4).double()
    inp = tinytorch.randn(6, 5, dtype=tinytorch.float64)
    out = lin(inp)
    out[..., 2:].clamp_(-0.5, 0.5)
    out[..., :2].sigmoid_()
    out.pow(2).sum().backward()
    got = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    raw = lin(inp)
    ref = tinytorch.cat([raw[..., :2].sigmoid(), raw[..., 2:].clamp(-0.5, 0.5)], -1)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    ref.pow(2).sum().backward()
    for g, p in zip(got, lin.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-12)


def test_view_registry_does_not_grow_without_bound():
    x = tinytorch.ones(4, 4, requires_grad=True)
    y = x * 2
    for _ in range(1000):
        y[1].sum()
    assert len(y._views) <= 32


# ------------------------------------------------------------------ parity with PyTorch

def _run(lib, view: str, op: str):
    ins = _inputs(lib, view, op)
    y2, v = _program(view, op)(*ins)
    (y2.sum() + (v * v).sum()).backward()
    return [t.grad.detach().numpy() for t in ins], y2.detach().numpy(), v.detach().numpy()


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("view", list(VIEWS))
def test_torch_parity(view, op):
    torch = pytest.importorskip("torch")
    grads, y, v = _run(tinytorch, view, op)
    t_grads, t_y, t_v = _run(torch, view, op)
    np.testing.assert_allclose(y, t_y, rtol=1e-12)
    np.testing.assert_allclose(v, t_v, rtol=1e-12)
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g, tg, rtol=1e-10, atol=1e-12)


def _graph_program(lib):
    x = lib.tensor(_values((3, 4), 0), requires_grad=True)
    w = lib.tensor(_values(3, 1), requires_grad=True)
    y = x * 2
    a, c = y[0], y[:, 0]
    y[:, 1].mul_(w)
    a.add_(1)
    buf = lib.zeros(3, 4, dtype=lib.float64)
    buf[:, 0].copy_(w.double())
    names = [y.grad_fn.name(), a.grad_fn.name(), c.grad_fn.name(), buf.grad_fn.name(), str(buf.requires_grad)]
    (y.pow(2).sum() + c.sum() + (buf * 3).sum()).backward()
    return names, x.grad.numpy(), w.grad.numpy()


def test_torch_parity_graph():
    torch = pytest.importorskip("torch")
    names, gx, gw = _graph_program(tinytorch)
    t_names, t_gx, t_gw = _graph_program(torch)
    assert names == t_names
    np.testing.assert_allclose(gx, t_gx, rtol=1e-6)
    np.testing.assert_allclose(gw, t_gw, rtol=1e-6)


def test_torch_parity_detection_head():
    torch = pytest.importorskip("torch")
    w0, b0, inp = _values((4, 5), 0), _values(4, 1), _values((6, 5), 2)
    grads = []
    for lib in (tinytorch, torch):
        w = lib.tensor(w0, requires_grad=True)
        b = lib.tensor(b0, requires_grad=True)
        out = lib.nn.functional.linear(lib.tensor(inp), w, b)
        out[..., 2:4].clamp_(-0.5, 0.5)  # first: PyTorch's sigmoid_ saves its output, which a later write would spoil
        out[..., :2].sigmoid_()
        out.pow(2).sum().backward()
        grads.append((w.grad.numpy(), b.grad.numpy()))
    for g, tg in zip(grads[0], grads[1]):
        np.testing.assert_allclose(g, tg, rtol=1e-10)


def test_retain_grad_follows_the_new_history():
    x = tinytorch.ones(2, 3, dtype=tinytorch.float64, requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)  # not a view: y takes over mul's history
    y.sum().backward()
    assert y.grad.tolist() == [[1.0] * 3] * 2
    x.grad = None
    y = x * 2
    y.retain_grad()
    v = y[0]
    v.retain_grad()
    v.mul_(3)
    (y * y).sum().backward(retain_graph=True)
    assert y.grad.tolist() == [[12.0] * 3, [4.0] * 3]  # 2 * y, y's latest value
    assert v.grad is None  # the loss reads y, not v
    y.grad = None
    v.sum().backward()
    assert v.grad.tolist() == [1.0] * 3
    assert y.grad.tolist() == [[1.0] * 3, [0.0] * 3]  # v is a view of y's latest value
