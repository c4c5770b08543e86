"""Elementwise ops: float64 gradcheck (with broadcasting and scalar operands), gradgradcheck for the
ops that double backward goes through, forward values against NumPy, and PyTorch's errors."""
import math

import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck
from tinytorch.autograd import gradgradcheck as _gradgradcheck

BROADCAST_PAIRS = [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((2, 3), ()), ((), (2, 3)), ((2, 3), (2, 3))]


def _t(shape, lo=-1.0, hi=1.0, seed=0, requires_grad=True):
    """A float64 tensor with values uniform in [lo, hi) (away from kinks when lo/hi say so)."""
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.uniform(lo, hi, size=shape), dtype=torch.float64, requires_grad=requires_grad)


def gradgradcheck(fn, inputs) -> bool:
    """gradgradcheck of fn(x) and of fn(x)**2: for a linear op (neg, where, relu, ...) the first-order
    gradient does not depend on x at all, so checking fn itself would only test d(grad)/d(grad_output).
    Squaring makes the gradient flowing into fn's backward depend on x, so its recorded graph is checked."""
    def squared(*xs):
        out = fn(*xs)
        return tuple(o * o for o in out) if isinstance(out, (tuple, list)) else out * out
    return _gradgradcheck(fn, inputs) and _gradgradcheck(squared, inputs)


def _away_from_zero(shape, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.3, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)


# ------------------------------------------------------------------ binary ops, broadcasting

BINARY = {
    "add": (lambda a, b: a + b, (-1, 1), (-1, 1)),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-2.5), (-1, 1), (-1, 1)),
    "sub": (lambda a, b: a - b, (-1, 1), (-1, 1)),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), (-1, 1), (-1, 1)),
    "mul": (lambda a, b: a * b, (-1, 1), (-1, 1)),
    "div": (lambda a, b: a / b, (-1, 1), (0.5, 2.0)),
    "pow": (lambda a, b: a ** b, (0.5, 2.0), (-1.5, 1.5)),
    "maximum": (torch.maximum, (-1, 1), (-1, 1)),
    "minimum": (torch.minimum, (-1, 1), (-1, 1)),
    "remainder": (torch.remainder, (0.1, 0.9), (1.1, 1.9)),
    "fmod": (torch.fmod, (0.1, 0.9), (1.1, 1.9)),
    "atan2": (torch.atan2, (-1, 1), (0.5, 1.5)),
    "fmod_negative": (lambda a, b: torch.fmod(-a, b), (2.1, 2.9), (1.1, 1.9)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_binary_gradcheck_broadcasting(name, shapes):
    fn, ra, rb = BINARY[name]
    a = _t(shapes[0], *ra, seed=1)
    b = _t(shapes[1], *rb, seed=2)
    assert gradcheck(fn, (a, b))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_gradcheck_one_side_requires_grad(name):
    fn, ra, rb = BINARY[name]
    a = _t((2, 3), *ra, seed=1)
    b = _t((3,), *rb, seed=2, requires_grad=False)
    assert gradcheck(lambda x: fn(x, b), (a,))
    a2 = _t((2, 3), *ra, seed=1, requires_grad=False)
    b2 = _t((3,), *rb, seed=2)
    assert gradcheck(lambda y: fn(a2, y), (b2,))


SCALAR_FORMS = {
    "t+s": lambda t: t + 1.5, "s+t": lambda t: 1.5 + t, "t-s": lambda t: t - 2, "s-t": lambda t: 2 - t,
    "t*s": lambda t: t * -3.0, "s*t": lambda t: 0.5 * t, "t/s": lambda t: t / 4.0, "s/t": lambda t: 2.0 / t,
    "t**2": lambda t: t ** 2, "t**3": lambda t: t ** 3, "t**0.5": lambda t: t ** 0.5, "t**-1.5": lambda t: t ** -1.5,
    "t**0": lambda t: t ** 0, "2**t": lambda t: 2 ** t, "0.5**t": lambda t: 0.5 ** t,
    "max(t,s)": lambda t: torch.maximum(t, torch.tensor(0.9, dtype=torch.float64)),
    "t%s": lambda t: t % 0.7,
    "rsub_alpha": lambda t: torch.rsub(t, 2.0, alpha=3),
    "rsub_tensor": lambda t: torch.rsub(t, t * t),
    "mul_scalar_first": lambda t: torch.mul(2.5, t),
    "add_scalar_first": lambda t: torch.add(-1, t, alpha=2),
    "true_divide": lambda t: torch.true_divide(t, 3),
}


@pytest.mark.parametrize("form", sorted(SCALAR_FORMS))
def test_scalar_operand_gradcheck(form):
    t = _t((2, 3), 0.5, 1.5, seed=3)
    assert gradcheck(SCALAR_FORMS[form], (t,))


def test_zero_dim_operand_of_higher_dtype_does_not_promote_gradient_dtype():
    a = _t((3,), seed=4).float()  # float32 leaf
    b = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    a = a.detach().requires_grad_()
    out = a * b
    assert out.dtype is torch.float32
    out.sum().backward()
    assert a.grad.dtype is torch.float32 and b.grad.dtype is torch.float64
    assert torch.allclose(b.grad, a.detach().sum().double())


# ------------------------------------------------------------------ unary ops

UNARY = {
    "neg": (torch.neg, None), "abs": (torch.abs, "nonzero"), "exp": (torch.exp, None), "exp2": (torch.exp2, None),
    "expm1": (torch.expm1, None), "log": (torch.log, "positive"), "log2": (torch.log2, "positive"),
    "log10": (torch.log10, "positive"), "log1p": (torch.log1p, "positive"), "sqrt": (torch.sqrt, "positive"),
    "rsqrt": (torch.rsqrt, "positive"), "reciprocal": (torch.reciprocal, "nonzero"), "square": (torch.square, None),
    "sin": (torch.sin, None), "cos": (torch.cos, None), "tan": (torch.tan, None), "asin": (torch.asin, "unit"),
    "acos": (torch.acos, "unit"), "atan": (torch.atan, None), "sinh": (torch.sinh, None), "cosh": (torch.cosh, None),
    "tanh": (torch.tanh, None), "sigmoid": (torch.sigmoid, None), "relu": (torch.relu, "nonzero"),
    "frac": (torch.frac, "nonint"), "sign": (torch.sign, "nonzero"), "floor": (torch.floor, "nonint"),
    "ceil": (torch.ceil, "nonint"), "round": (torch.round, "nonint"), "trunc": (torch.trunc, "nonint"),
    "nan_to_num": (torch.nan_to_num, None),
}


def _unary_input(domain, shape=(2, 3), seed=5):
    if domain == "positive":
        return _t(shape, 0.2, 2.0, seed=seed)
    if domain == "nonzero":
        return _away_from_zero(shape, seed=seed)
    if domain == "unit":
        return _t(shape, -0.8, 0.8, seed=seed)
    if domain == "nonint":
        return _t(shape, 0.1, 0.4, seed=seed) + torch.tensor([[-2.0, 0.0, 1.0]], dtype=torch.float64)
    return _t(shape, -1.5, 1.5, seed=seed)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    fn, domain = UNARY[name]
    x = _unary_input(domain).detach().requires_grad_()
    assert gradcheck(fn, (x,))
    assert gradcheck(lambda v: getattr(v, name)(), (x,))


@pytest.mark.parametrize("name", ["neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
                                  "abs", "reciprocal", "square"])
def test_unary_gradgradcheck(name):
    fn, domain = UNARY[name]
    x = _unary_input(domain).detach().requires_grad_()
    assert gradgradcheck(fn, (x,))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_numpy(name):
    fn, domain = UNARY[name]
    x = _unary_input(domain, shape=(4, 3)).detach()
    ref = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
           "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
           "rsqrt": lambda v: 1 / np.sqrt(v), "reciprocal": lambda v: 1 / v, "square": np.square, "sin": np.sin,
           "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
           "cosh": np.cosh, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
           "relu": lambda v: np.maximum(v, 0), "frac": lambda v: v - np.trunc(v), "sign": np.sign,
           "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
           "nan_to_num": np.nan_to_num}[name]
    np.testing.assert_allclose(fn(x).numpy(), ref(x.numpy()), rtol=1e-12, atol=1e-12)


def test_sigmoid_is_stable_for_large_inputs():
    x = torch.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    y = torch.sigmoid(x)
    assert y.tolist() == pytest.approx([0.0, 1.9287e-22, 0.5, 1.0, 1.0], rel=1e-3, abs=1e-30)
    assert not torch.isnan(y).any()


# ------------------------------------------------------------------ clamp, where, masked_fill

CLAMPS = {
    "min": lambda x: x.clamp(min=-0.3), "max": lambda x: x.clamp(max=0.4), "both": lambda x: x.clamp(-0.3, 0.4),
    "clamp_min": lambda x: x.clamp_min(0.1), "clamp_max": lambda x: x.clamp_max(0.1),
    "clip": lambda x: torch.clip(x, -0.5, 0.5),
}


@pytest.mark.parametrize("name", sorted(CLAMPS))
def test_clamp_scalar_bounds_gradcheck_and_gradgradcheck(name):
    x = torch.tensor([[-0.9, -0.35, -0.1], [0.05, 0.45, 0.8]], dtype=torch.float64, requires_grad=True)
    assert gradcheck(CLAMPS[name], (x,))
    assert gradgradcheck(CLAMPS[name], (x,))


def test_clamp_tensor_bounds_gradcheck_broadcasting():
    x = torch.tensor([[-0.9, -0.35, -0.1], [0.05, 0.45, 0.8]], dtype=torch.float64, requires_grad=True)
    lo = torch.tensor([-0.5, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    hi = torch.tensor([[0.3], [0.6]], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, b, c: torch.clamp(a, b, c), (x, lo, hi))
    assert gradcheck(lambda a, b: torch.clamp(a, min=b), (x, lo))
    assert gradcheck(lambda a, c: torch.clamp(a, max=c), (x, hi))


def test_clamp_tensor_bounds_with_min_above_max_send_the_gradient_to_max():
    x = torch.tensor([-1.0, 0.3, 0.9], dtype=torch.float64, requires_grad=True)
    lo = torch.tensor([0.5, 0.5, 0.1], dtype=torch.float64, requires_grad=True)
    hi = torch.tensor([0.2, 0.2, 0.4], dtype=torch.float64, requires_grad=True)
    out = torch.clamp(x, lo, hi)
    assert out.tolist() == [0.2, 0.2, 0.4]
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0] and lo.grad.tolist() == [0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [1.0, 1.0, 1.0]
    assert gradcheck(lambda a, b, c: torch.clamp(a, b, c), (x, lo, hi))


def test_clamp_values_and_dtypes():
    x = torch.tensor([1, 5, -3])
    assert x.clamp(0, 2).tolist() == [1, 2, 0] and x.clamp(0, 2).dtype is torch.int64
    y = x.clamp(0.5, 2.5)  # PyTorch promotes to the default float dtype
    assert y.dtype is torch.float32 and y.tolist() == [1.0, 2.5, 0.5]
    assert torch.tensor([1.0, float("nan")]).clamp(0, 0.5).isnan().tolist() == [False, True]
    assert torch.tensor([1.0, 2.0]).clamp(min=3.0, max=1.0).tolist() == [1.0, 1.0]  # min > max: all max
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        torch.clamp(torch.ones(2))


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((3,), (2, 1), (2, 3)), ((2, 3), (3,), ())])
def test_where_gradcheck_and_gradgradcheck(shapes):
    cs, sa, sb = shapes
    cond = torch.tensor(np.random.default_rng(0).random(cs) > 0.5)
    a, b = _t(sa, seed=1), _t(sb, seed=2)
    assert gradcheck(lambda x, y: torch.where(cond, x, y), (a, b))
    assert gradgradcheck(lambda x, y: torch.where(cond, x, y), (a, b))
    assert gradcheck(lambda x: torch.where(cond, x, 0.5), (a,))
    assert gradcheck(lambda y: torch.where(cond, -1.0, y), (b,))


def test_where_values_and_dtype_promotion():
    cond = torch.tensor([True, False, True])
    assert torch.where(cond, torch.tensor([1, 2, 3]), torch.tensor([7, 8, 9])).tolist() == [1, 8, 3]
    r = torch.where(cond, torch.tensor([1, 2, 3]), 0.5)
    assert r.dtype is torch.float32 and r.tolist() == [1.0, 0.5, 3.0]
    assert torch.tensor([1.0, 2.0, 3.0]).where(cond, 0.0).tolist() == [1.0, 0.0, 3.0]


def test_where_condition_must_be_bool_and_shapes_must_broadcast():
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor, but got a tensor with "
                                           "dtype Float"):
        torch.where(torch.ones(2), torch.ones(2), torch.zeros(2))
    assert torch.where(torch.tensor([1, 0], dtype=torch.uint8), 1.0, 0.0).tolist() == [1.0, 0.0]  # deprecated form
    u8 = torch.tensor([1, 0, 1], dtype=torch.uint8)
    assert gradcheck(lambda x, y: torch.where(u8, x, y), (_t((3,), seed=1), _t((3,), seed=2)))
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           r"non-singleton dimension 0$"):
        torch.where(torch.ones(3).bool(), torch.ones(4), 0.0)
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(2\) must match the size of tensor b \(3\)"):
        torch.where(torch.ones(3).bool(), torch.ones(2, 1), torch.ones(3, 1))


def test_masked_fill_gradcheck_and_gradgradcheck():
    x = _t((2, 3), seed=3)
    mask = torch.tensor([[True, False, False], [False, True, False]])
    row_mask = torch.tensor([False, True, True])
    assert gradcheck(lambda v: v.masked_fill(mask, 2.0), (x,))
    assert gradcheck(lambda v: v.masked_fill(row_mask, -1.0), (x,))
    assert gradgradcheck(lambda v: v.masked_fill(mask, 2.0), (x,))
    value = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v, s: v.masked_fill(mask, s), (x, value))


def test_masked_fill_errors():
    x = torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(torch.ones(2, 3), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(torch.ones(2, 3).bool(), torch.ones(2))
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(4\) must match the size of tensor b \(3\) "
                                           r"at non-singleton dimension 1$"):
        x.masked_fill(torch.ones(4).bool(), 1.0)


def test_masked_fill_with_a_larger_mask_broadcasts_the_result():
    x = _t((3,), seed=4)
    mask = torch.tensor([[True, False, False], [False, False, True]])
    assert x.masked_fill(mask, 0.0).shape == (2, 3)
    assert gradcheck(lambda v: v.masked_fill(mask, 0.0), (x,))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_extremum_gradgradcheck_and_tie_split(op):
    a, b = _t((2, 3), seed=1), _t((3,), seed=2)
    fn = getattr(torch, op)
    assert gradgradcheck(fn, (a, b))
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 0.0], requires_grad=True)
    fn(x, y).sum().backward()
    tie = [0.5, 1.0] if op == "maximum" else [0.5, 0.0]
    assert x.grad.tolist() == tie and y.grad.tolist() == [0.5, 1.0 - tie[1]]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_binary_gradgradcheck(name):
    fn, ra, rb = BINARY[name]
    a = _t((3, 1), *ra, seed=1)
    b = _t((1, 2), *rb, seed=2)
    assert gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("form", ["t*s", "t/s", "s/t", "t**2", "t**3", "t**0.5", "2**t", "s-t"])
def test_scalar_operand_gradgradcheck(form):
    t = _t((3,), 0.5, 1.5, seed=3)
    assert gradgradcheck(SCALAR_FORMS[form], (t,))


def test_composites_gradcheck():
    a, b, c = _t((2, 3), seed=1), _t((3,), seed=2), _t((2, 1), 0.5, 1.0, seed=3)
    assert gradcheck(lambda x, y, w: torch.lerp(x, y, w), (a, b, c))
    assert gradcheck(lambda x, y, z: torch.addcmul(x, y, z, value=0.5), (a, b, c))
    assert gradcheck(lambda x, y, z: torch.addcdiv(x, y, z, value=-2), (a, b, c))
    assert gradcheck(lambda x, y: torch.fmod(x, 0.4) + torch.remainder(y, 0.3), (a, b))


# ------------------------------------------------------------------ results are arrays, even 0-d

def test_zero_dim_results_are_arrays_and_differentiable():
    # NumPy returns np.float32 scalars for 0-d operands; a tensor holding one passed for a CUDA tensor.
    x = torch.ones(3, requires_grad=True)
    loss = x.sum() * 0.5
    assert loss.is_cpu and loss.device.type == "cpu" and loss.shape == ()
    loss = loss / 3 + loss.exp() - loss.sqrt() + loss ** 2
    assert isinstance(loss._data, np.ndarray)
    loss.backward()
    h = 1.5
    expected = 0.5 * (1 / 3 + math.exp(h) - 0.5 / math.sqrt(h) + 2 * h)
    assert x.grad.tolist() == pytest.approx([expected] * 3)


@pytest.mark.parametrize("fn", [lambda s: s * 2, lambda s: s + s, lambda s: -s, lambda s: s.exp(), lambda s: s > 1,
                                lambda s: torch.maximum(s, s), lambda s: s.clamp(0, 1), lambda s: s.relu(),
                                lambda s: s.abs(), lambda s: 1 / s, lambda s: s ** 3, lambda s: s // 1.5,
                                lambda s: s.logical_not(), lambda s: s.sign(), lambda s: s.isnan()])
def test_zero_dim_ops_keep_arrays(fn):
    r = fn(torch.tensor(2.0))
    assert isinstance(r._data, np.ndarray) and r.is_cpu and r.shape == ()


# ------------------------------------------------------------------ comparisons and logic

def test_alternative_names_are_the_same_ops():
    a, b = torch.tensor([1.0, -2.0]), torch.tensor([2.0, 2.0])
    assert torch.divide(a, b).tolist() == torch.true_divide(a, b).tolist() == [0.5, -1.0]
    assert torch.multiply(a, b).tolist() == [2.0, -4.0] and torch.subtract(a, b).tolist() == [-1.0, -4.0]
    assert torch.negative(a).tolist() == [-1.0, 2.0] and torch.absolute(a).tolist() == [1.0, 2.0]
    assert torch.greater(a, b).tolist() == [False, False] and torch.less_equal(a, b).tolist() == [True, True]
    assert torch.not_equal(a, b).tolist() == [True, True] and torch.arctan(a).tolist() == torch.atan(a).tolist()


def test_comparisons_broadcast_and_return_bool():
    a = torch.tensor([[1, 2, 3]])
    b = torch.tensor([[2], [1]])
    assert (a < b).tolist() == [[True, False, False], [False, False, False]]
    assert (a >= b).dtype is torch.bool
    assert (a == 2).tolist() == [[False, True, False]]
    assert (a != 2.0).tolist() == [[True, False, True]]
    assert (2 < a).tolist() == [[False, False, True]]
    assert torch.eq(a, b).tolist() == [[False, True, False], [True, False, False]]
    assert (a == None) is False and (a != "x") is True  # noqa: E711


def test_logical_and_bitwise():
    t, f = torch.tensor([True, True, False]), torch.tensor([True, False, False])
    assert (t & f).tolist() == [True, False, False] and (t & f).dtype is torch.bool
    assert (t | f).tolist() == [True, True, False]
    assert (t ^ f).tolist() == [False, True, False]
    assert (~t).tolist() == [False, False, True]
    assert (torch.tensor([6, 3]) & 5).tolist() == [4, 1]
    assert (~torch.tensor([0, 1])).tolist() == [-1, -2]
    assert (t & torch.tensor([1, 2, 3])).tolist() == [1, 0, 0] and (t & torch.tensor([1, 2, 3])).dtype is torch.int64
    assert (t | 2).tolist() == [3, 3, 2] and (t ^ True).tolist() == [False, False, True]
    assert (True & t).dtype is torch.bool and (6 & torch.tensor([3])).tolist() == [2]
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Float'"):
        torch.tensor([1.0]) & torch.tensor([1.0])
    with pytest.raises(NotImplementedError, match="\"bitwise_or_cpu\" not implemented for 'Float'"):
        t | 1.5
    with pytest.raises(TypeError, match="~ \\(operator.invert\\) is only implemented on integer and Boolean-type"):
        ~torch.tensor([1.0])


def test_bool_arithmetic_errors_match_pytorch():
    b = torch.tensor([True, False])
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors is not supported"):
        b - b
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        -b
    for bad in (lambda: b - 1, lambda: 1 - b, lambda: torch.ones(2) - True, lambda: True - torch.ones(2),
                lambda: torch.tensor([1, 2]) - b, lambda: torch.sub(b, torch.ones(2))):
        with pytest.raises(RuntimeError, match="^Subtraction, the `-` operator, with a bool tensor is not supported. "
                                               "If you are trying to invert a mask, use the `~` or `logical_not\\(\\)` "
                                               "operator instead.$"):
            bad()
    assert (b + b).tolist() == [True, False] and (b + b).dtype is torch.bool
    assert b.sign().tolist() == [True, False] and b.sign().dtype is torch.bool


# ------------------------------------------------------------------ broadcasting errors

@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
                                lambda a, b: a ** b, torch.maximum, torch.minimum, lambda a, b: a < b,
                                lambda a, b: a == b, lambda a, b: a % b, torch.fmod])
def test_broadcast_error_is_pytorchs_runtime_error(op):
    msg = "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
    with pytest.raises(RuntimeError) as e:
        op(torch.ones(2, 3), torch.ones(2, 4))
    assert str(e.value) == msg


def test_broadcast_error_reports_the_last_mismatching_dimension():
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(2\) at "
                                           r"non-singleton dimension 2$"):
        torch.ones(5, 1, 3) - torch.ones(4, 2)
    with pytest.raises(RuntimeError, match=r"tensor a \(4\) must match the size of tensor b \(3\) at non-singleton "
                                           r"dimension 0"):
        torch.ones(4, 2) * torch.ones(3, 1)


# ------------------------------------------------------------------ dtype rules of the arithmetic

def test_integer_division_is_true_division_in_default_dtype():
    i32 = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert (i32 / i32).dtype is torch.float32
    assert (torch.tensor([1, 2]) / torch.tensor(2)).dtype is torch.float32
    assert (torch.tensor([3, 4]) / 2).tolist() == [1.5, 2.0]
    assert (1 / torch.tensor([2, 4])).tolist() == [0.5, 0.25]
    assert (torch.tensor([True, False]) / torch.tensor([True, True])).dtype is torch.float32
    assert torch.div(torch.tensor([7, -7]), 2, rounding_mode="floor").tolist() == [3, -4]
    assert torch.div(torch.tensor([7, -7]), 2, rounding_mode="trunc").tolist() == [3, -3]
    assert torch.div(torch.tensor([7.0, -7.0]), 2, rounding_mode="floor").tolist() == [3.0, -4.0]
    assert (torch.tensor([7, -7]) // 2).tolist() == [3, -4]


def test_integer_pow_rules():
    assert (torch.tensor([2, 3]) ** 2).tolist() == [4, 9]
    assert (torch.tensor([2, 3]) ** 2).dtype is torch.int64
    assert (torch.tensor([4, 9]) ** 0.5).dtype is torch.float32
    assert (2 ** torch.tensor([1, 3])).tolist() == [2, 8]
    assert (2.0 ** torch.tensor([1, 3])).dtype is torch.float32
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
        torch.tensor([2]) ** -1
    # A tensor exponent may be negative (PyTorch truncates 1 / x**|y|); NumPy raises a ValueError for it.
    r = torch.tensor([2, 1, -1, -1, 3]) ** torch.tensor([-1, -3, -3, -2, 2])
    assert r.tolist() == [0, 1, -1, 1, 9] and r.dtype is torch.int64


def test_sequences_are_not_operands_as_in_pytorch():
    """A list or tuple is neither a tensor nor a number: arithmetic and ordering refuse it (TypeError), and
    == / != fall back to identity (False / True), as PyTorch's operators do; NumPy arrays still combine."""
    t = torch.tensor([1.0, 2.0])
    for op in (lambda: t + [1.0, 2.0], lambda: [1.0, 2.0] + t, lambda: t * (1.0, 2.0), lambda: t < [3.0, 0.0],
               lambda: torch.add(t, [1.0, 2.0]), lambda: t.pow([2.0, 2.0]), lambda: [2.0, 2.0] ** t,
               lambda: torch.where(t > 1, t, [0.0, 0.0])):
        with pytest.raises(TypeError):
            op()
    assert (t == [1.0, 2.0]) is False and (t != [1.0, 2.0]) is True and (t == (1.0, 2.0)) is False
    assert torch.equal(t + np.array([1.0, 2.0], np.float32), torch.tensor([2.0, 4.0]))


def test_device_never_equals_a_string():
    """torch.device('cpu') == 'cpu' is False in PyTorch (a device compares equal to devices only)."""
    assert (torch.device("cpu") == "cpu") is False and torch.device("cpu") != "cpu"
    assert torch.device("cpu") == torch.device("cpu") and torch.tensor(1.0).device.type == "cpu"
    assert torch.device("cuda", 0) != torch.device("cuda") and torch.device("cuda:0") == torch.device("cuda", 0)
