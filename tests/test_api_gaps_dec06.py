"""Small gaps with PyTorch that real programs hit: device('cpu:0').index, out= on the common functional forms,
Tensor.is_inference(), class-index dtypes of cross_entropy/nll_loss, and NumPy floating-point warnings leaking out
of backward formulas. Values are checked on their own (known values, float64 gradcheck); PyTorch is consulted only
under importorskip."""
import io
import math
import threading
import warnings

import numpy as np
import pytest

import tinytorch as torch
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

INF, NAN = math.inf, math.nan


def same(got, want) -> bool:
    """Float lists equal, NaN matching NaN."""
    return len(got) == len(want) and all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want))


# ------------------------------------------------------------------ device index

def test_cpu_device_keeps_its_index():
    d = torch.device("cpu:0")
    assert d.index == 0 and d.type == "cpu"
    assert str(d) == "cpu:0" and repr(d) == "device(type='cpu', index=0)"
    assert d == torch.device("cpu", 0) and hash(d) == hash(torch.device("cpu", 0))
    assert d != torch.device("cpu") and torch.device("cpu").index is None
    assert torch.device("cpu:1").index == 1


def test_tensors_on_an_indexed_cpu_device():
    t = torch.ones(2, device="cpu:0")
    assert t.device == torch.device("cpu") and t.get_device() == -1
    moved = t.to("cpu:0")
    assert moved is not t and moved.device == torch.device("cpu") and moved.tolist() == [1.0, 1.0]
    assert torch.tensor([1.0, 2.0], device=torch.device("cpu", 0)).tolist() == [1.0, 2.0]
    buf = io.BytesIO()
    torch.save(torch.arange(3), buf)
    buf.seek(0)
    assert torch.load(buf, map_location="cpu:0").tolist() == [0, 1, 2]


@pytest.mark.parametrize("spec", ["cpu:-1", "cpu:00", "cpu: 0", "cuda:", "cpu:0:0", "cpu:x"])
def test_invalid_device_strings(spec):
    with pytest.raises(RuntimeError, match=f"^Invalid device string: '{spec}'$"):
        torch.device(spec)


def test_negative_device_index():
    for kind in ("cpu", "cuda"):
        with pytest.raises(RuntimeError, match="^Device index must not be negative$"):
            torch.device(kind, -1)
    with pytest.raises(RuntimeError, match="must not include an index because index was passed explicitly"):
        torch.device("cpu:0", 0)


def test_device_matches_pytorch():
    real = pytest.importorskip("torch")
    for args in [("cpu:0",), ("cpu", 0), ("cpu",), ("cpu:1",), ("cuda:2",), ("meta", 0)]:
        a, b = torch.device(*args), real.device(*args)
        assert (str(a), repr(a), a.index) == (str(b), repr(b), b.index)
    assert (torch.device("cpu:0") == torch.device("cpu")) == (real.device("cpu:0") == real.device("cpu"))
    for bad in ["cpu:-1", "cpu:00"]:
        with pytest.raises(RuntimeError) as ours:
            torch.device(bad)
        with pytest.raises(RuntimeError) as theirs:
            real.device(bad)
        assert str(ours.value) == str(theirs.value)


# ------------------------------------------------------------------ out=

A = [[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]]
B = [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
_a, _b = np.array(A), np.array(B)

# (name, call(a, b, out), the values out must hold)
OUT_CASES = [
    ("add", lambda a, b, o: torch.add(a, b, alpha=2, out=o), _a + 2 * _b),
    ("sub", lambda a, b, o: torch.sub(a, b, out=o), _a - _b),
    ("mul", lambda a, b, o: torch.mul(a, b, out=o), _a * _b),
    ("div", lambda a, b, o: torch.div(a, b, out=o), _a / _b),
    ("true_divide", lambda a, b, o: torch.true_divide(a, b, out=o), _a / _b),
    ("div_floor", lambda a, b, o: torch.div(a, b, rounding_mode="floor", out=o), np.floor(_a / _b)),
    ("div_trunc", lambda a, b, o: torch.div(a, b, rounding_mode="trunc", out=o), np.trunc(_a / _b)),
    ("floor_divide", lambda a, b, o: torch.floor_divide(a, b, out=o), np.floor(_a / _b)),
    ("pow", lambda a, b, o: torch.pow(a, b, out=o), _a ** 2),
    ("rpow", lambda a, b, o: torch.pow(2, a, out=o), 2.0 ** _a),
    ("clamp", lambda a, b, o: torch.clamp(a, -1, 2, out=o), np.clip(_a, -1, 2)),
    ("clip", lambda a, b, o: torch.clip(a, min=0, out=o), np.maximum(_a, 0)),
    ("exp", lambda a, b, o: torch.exp(a, out=o), np.exp(_a)),
    ("log", lambda a, b, o: torch.log(b, out=o), np.log(_b)),
    ("sqrt", lambda a, b, o: torch.sqrt(b, out=o), np.sqrt(_b)),
    ("abs", lambda a, b, o: torch.abs(a, out=o), np.abs(_a)),
    ("neg", lambda a, b, o: torch.neg(a, out=o), -_a),
    ("maximum", lambda a, b, o: torch.maximum(a, b, out=o), np.maximum(_a, _b)),
    ("minimum", lambda a, b, o: torch.minimum(a, b, out=o), np.minimum(_a, _b)),
    ("where", lambda a, b, o: torch.where(a > 0, a, b, out=o), np.where(_a > 0, _a, _b)),
    ("matmul", lambda a, b, o: torch.matmul(a, b.t(), out=o), _a @ _b.T),
    ("matmul_vectors", lambda a, b, o: torch.matmul(a[0], b[0], out=o), _a[0] @ _b[0]),
    ("mm", lambda a, b, o: torch.mm(a, b.t(), out=o), _a @ _b.T),
    ("bmm", lambda a, b, o: torch.bmm(a[None], b.t()[None], out=o), (_a @ _b.T)[None]),
    ("cat", lambda a, b, o: torch.cat([a, b], 1, out=o), np.concatenate([_a, _b], 1)),
    ("concat", lambda a, b, o: torch.concat([a, b], out=o), np.concatenate([_a, _b], 0)),
    ("stack", lambda a, b, o: torch.stack([a, b], 2, out=o), np.stack([_a, _b], 2)),
    ("sum", lambda a, b, o: torch.sum(a, 1, out=o), _a.sum(1)),
    ("sum_keepdim", lambda a, b, o: torch.sum(a, (0, 1), True, out=o), _a.sum((0, 1), keepdims=True)),
    ("mean", lambda a, b, o: torch.mean(a, 0, out=o), _a.mean(0)),
    ("max_all", lambda a, b, o: torch.max(a, out=o), _a.max()),
    ("max_other", lambda a, b, o: torch.max(a, b, out=o), np.maximum(_a, _b)),
    ("min_all", lambda a, b, o: torch.min(a, out=o), _a.min()),
]


@pytest.mark.parametrize("name,call,want", OUT_CASES, ids=[c[0] for c in OUT_CASES])
def test_out_fills_and_returns_out(name, call, want):
    a, b = torch.tensor(A, dtype=torch.float64), torch.tensor(B, dtype=torch.float64)
    out = torch.empty(0, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty out is resized silently
        r = call(a, b, out)
    assert r is out and tuple(out.shape) == want.shape
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)


def test_out_of_the_right_shape_is_written_in_place():
    base = torch.zeros(2, 4)
    view = base[:, 1:]
    v = base._version
    assert torch.mul(torch.tensor(A), 2.0, out=view) is view
    assert base.tolist() == [[0.0, 3.0, -4.0, 6.0], [0.0, 1.0, 8.0, -2.0]]
    assert base._version > v


def test_out_may_be_an_input():
    x = torch.tensor(A)
    assert torch.add(x, torch.tensor(B), out=x) is x and x.tolist() == (_a + _b).tolist()
    y = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    torch.matmul(y, y, out=y)
    assert y.tolist() == [[7.0, 10.0], [15.0, 22.0]]


def test_out_with_elements_of_another_shape_is_resized_with_a_warning():
    out = torch.zeros(4)
    with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape \[4\], "
                                         r"which does not match the required output shape \[2, 3\]\.") as rec:
        torch.add(torch.tensor(A), torch.tensor(B), out=out)
    assert rec[0].filename == __file__  # the warning points at the caller, as PyTorch's does
    assert out.tolist() == (_a + _b).tolist()
    with pytest.warns(UserWarning, match="was resized since it had shape"):
        torch.max(torch.tensor(A), 1, out=(torch.zeros(3), torch.zeros(3, dtype=torch.int64)))


def test_out_keeps_its_dtype_when_the_result_casts():
    a = torch.tensor(A)
    out = torch.empty(0, dtype=torch.float64)
    torch.add(a, 1, out=out)
    assert out.dtype == torch.float64 and out.tolist() == (_a.astype(np.float32) + 1).tolist()
    ints = torch.empty(0, dtype=torch.int64)
    torch.div(torch.arange(5), 2, rounding_mode="floor", out=ints)
    assert ints.dtype == torch.int64 and ints.tolist() == [0, 0, 1, 1, 2]
    half = torch.empty(0, dtype=torch.float16)
    torch.exp(torch.zeros(2), out=half)
    assert half.dtype == torch.float16 and half.tolist() == [1.0, 1.0]
    torch.cat([torch.ones(2, dtype=torch.int32)], out=ints.resize_(0))
    assert ints.tolist() == [1, 1]


def test_sum_out_sums_in_outs_dtype():
    out = torch.empty(0, dtype=torch.int64)
    torch.sum(torch.full((2, 3), 1.5), 1, out=out)
    assert out.tolist() == [3, 3]  # the elements become int64 first, as PyTorch's sum(dtype=out.dtype)


def test_max_min_with_dim_fill_values_and_indices():
    a = torch.tensor(A)
    values, indices = torch.empty(0), torch.empty(0, dtype=torch.int64)
    r = torch.max(a, 1, out=(values, indices))
    assert r.values is values and r.indices is indices and type(r).__name__ == "max_out"
    assert values.tolist() == [3.0, 4.0] and indices.tolist() == [2, 1]
    values, indices = torch.empty(0), torch.empty(0, dtype=torch.int64)
    r = torch.min(a, 0, True, out=[values, indices])
    assert type(r).__name__ == "min_out" and r[0] is values
    assert values.tolist() == [[0.5, -2.0, -1.0]] and indices.tolist() == [[1, 0, 1]]
    assert repr(r).startswith("torch.return_types.min_out(\nvalues=")


@pytest.mark.parametrize("call,error,message", [
    (lambda a: torch.add(a, 1, out=torch.empty(0, dtype=torch.int64)), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda a: torch.div(torch.arange(3), 2, out=torch.empty(0, dtype=torch.int64)), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda a: torch.exp(torch.arange(3), out=torch.empty(0, dtype=torch.int64)), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda a: torch.add(a, 1j, out=torch.empty(0)), RuntimeError,
     "result type ComplexFloat can't be cast to the desired output type Float"),
    (lambda a: torch.add(torch.arange(3), 1, out=torch.empty(0, dtype=torch.bool)), RuntimeError,
     "result type Long can't be cast to the desired output type Bool"),
    (lambda a: torch.mean(a, 1, out=torch.empty(0, dtype=torch.int64)), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (lambda a: torch.abs(a, out=torch.empty(0, dtype=torch.float64)), RuntimeError,
     "Found dtype Double but expected Float"),
    (lambda a: torch.neg(torch.ones(2, dtype=torch.int32), out=torch.empty(0, dtype=torch.int16)), RuntimeError,
     "Found dtype Short but expected Int"),
    (lambda a: torch.clamp(torch.arange(5), 1, 3, out=torch.empty(0)), RuntimeError,
     "Found dtype Float but expected Long"),
    (lambda a: torch.where(a > 0, a, a, out=torch.empty(0, dtype=torch.float16)), RuntimeError,
     "Expected out type to be Float but got Half"),
    (lambda a: torch.mm(a, a.t(), out=torch.empty(0, dtype=torch.int64)), RuntimeError,
     "Expected out tensor to have dtype float, but got long int instead"),
    (lambda a: torch.bmm(a[None], a.t()[None], out=torch.empty(0, dtype=torch.bfloat16)), RuntimeError,
     "Expected out tensor to have dtype float, but got c10::BFloat16 instead"),
    (lambda a: torch.matmul(a, a.t(), out=torch.empty(0, dtype=torch.float64)), RuntimeError,
     "Expected out tensor to have dtype float, but got double instead"),
    (lambda a: torch.matmul(a[0], a[0], out=torch.empty(0, dtype=torch.float16)), RuntimeError,
     "result dtype Half does not match input dtype Float"),
    (lambda a: torch.max(a, 1, out=(torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64))),
     RuntimeError, "Expected out tensor to have dtype float, but got double instead"),
    (lambda a: torch.max(a, 1, out=(torch.empty(0), torch.empty(0, dtype=torch.int32))), RuntimeError,
     "Expected out tensor to have dtype long int, but got int instead"),
    (lambda a: torch.cat([a, a], out=torch.empty(0, dtype=torch.int64)), TypeError,
     "torch.cat(): input types can't be cast to the desired output type Long"),
    (lambda a: torch.stack([a, a], out=torch.empty(0, dtype=torch.int64)), TypeError,
     "torch.cat(): input types can't be cast to the desired output type Long"),
])
def test_out_dtype_errors(call, error, message):
    with pytest.raises(error) as info:
        call(torch.tensor(A))
    assert str(info.value) == message


def test_a_failed_dtype_check_leaves_max_outs_untouched():
    values, indices = torch.zeros(2), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="long int"):
        torch.max(torch.tensor(A), 1, out=(values, indices))
    assert values.tolist() == [0.0, 0.0]


NEEDS_GRAD = [
    ("add", lambda a, o: torch.add(a, 1.0, out=o)), ("sub", lambda a, o: torch.subtract(a, 1.0, out=o)),
    ("mul", lambda a, o: torch.multiply(a, a, out=o)), ("div", lambda a, o: torch.divide(a, 2.0, out=o)),
    ("div", lambda a, o: torch.div(a, 2.0, rounding_mode="floor", out=o)), ("pow", lambda a, o: torch.pow(a, 2, out=o)),
    ("pow", lambda a, o: torch.pow(2, a, out=o)), ("clamp", lambda a, o: torch.clip(a, 0, 1, out=o)),
    ("exp", lambda a, o: torch.exp(a, out=o)), ("log", lambda a, o: torch.log(a, out=o)),
    ("sqrt", lambda a, o: torch.sqrt(a, out=o)), ("abs", lambda a, o: torch.absolute(a, out=o)),
    ("neg", lambda a, o: torch.negative(a, out=o)), ("maximum", lambda a, o: torch.maximum(a, a, out=o)),
    ("minimum", lambda a, o: torch.minimum(a, a, out=o)), ("maximum", lambda a, o: torch.max(a, a, out=o)),
    ("where", lambda a, o: torch.where(a > 0, a, 0.0, out=o)), ("matmul", lambda a, o: torch.matmul(a, a.t(), out=o)),
    ("mm", lambda a, o: torch.mm(a, a.t(), out=o)), ("bmm", lambda a, o: torch.bmm(a[None], a.t()[None], out=o)),
    ("cat", lambda a, o: torch.cat([a, a], out=o)), ("stack", lambda a, o: torch.stack([a, a], out=o)),
    ("sum", lambda a, o: torch.sum(a, 1, out=o)), ("mean", lambda a, o: torch.mean(a, 1, out=o)),
    ("max", lambda a, o: torch.max(a, out=o)), ("max", lambda a, o: torch.max(a, 1, out=(o, torch.empty(0).long()))),
    ("min", lambda a, o: torch.min(a, 1, out=(o, torch.empty(0).long()))),
]


@pytest.mark.parametrize("name,call", NEEDS_GRAD, ids=[f"{i}-{c[0]}" for i, c in enumerate(NEEDS_GRAD)])
def test_out_refuses_autograd(name, call):
    a = torch.tensor(A).abs().requires_grad_()
    msg = (f"{name}(): functions with out=... arguments don't support automatic differentiation, but one of the "
           "arguments requires grad.")
    with pytest.raises(RuntimeError) as info:
        call(a, torch.empty(0))
    assert str(info.value) == msg
    with pytest.raises(RuntimeError) as info:
        call(a.detach(), torch.empty(0, requires_grad=True))
    assert str(info.value) == msg
    with torch.no_grad():  # nothing would be recorded: PyTorch lets both through
        call(a, torch.empty(0))
        out = torch.empty(0, requires_grad=True)
        call(a.detach(), out)
        assert out.requires_grad and out.numel() > 0


def test_out_of_an_op_with_no_gradient_accepts_inputs_that_require_grad():
    a = torch.tensor(A, requires_grad=True)
    out = torch.empty(0)
    assert torch.floor_divide(a, 2.0, out=out) is out and out.tolist() == np.floor(_a / 2).tolist()


def test_out_must_be_a_tensor():
    with pytest.raises(TypeError, match=r"add\(\): argument 'out' must be Tensor, not list"):
        torch.add(torch.ones(1), 1, out=[])
    with pytest.raises(TypeError, match=r"max\(\): argument 'out' must be tuple of Tensors, not Tensor"):
        torch.max(torch.ones(2), 0, out=torch.empty(0))


def test_out_matches_pytorch():
    real = pytest.importorskip("torch")

    def run(lib, call):
        a, b, out = lib.tensor(A), lib.tensor(B), lib.zeros(1)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                call(lib, a, b, out)
            except (RuntimeError, TypeError) as e:
                return type(e).__name__, str(e)
        return out.tolist(), [str(w.message).split(" (Triggered internally")[0] for w in rec]

    calls = {
        "add": lambda t, a, b, o: t.add(a, b, out=o),
        "div_floor": lambda t, a, b, o: t.div(a, b, rounding_mode="floor", out=o),
        "exp_long": lambda t, a, b, o: t.exp(a, out=o.long()),
        "abs_double": lambda t, a, b, o: t.abs(a, out=o.double()),
        "where": lambda t, a, b, o: t.where(a > 0, a, b, out=o),
        "mm": lambda t, a, b, o: t.mm(a, b.t(), out=o),
        "cat_long": lambda t, a, b, o: t.cat([a, b], out=o.long()),
        "sum_long": lambda t, a, b, o: t.sum(a, 1, out=o.long()),
        "mean": lambda t, a, b, o: t.mean(a, out=o),
        "clamp": lambda t, a, b, o: t.clamp(a, max=b, out=o),
        "grad": lambda t, a, b, o: t.mul(a.requires_grad_(), b, out=o),
    }
    for name, call in calls.items():
        assert run(torch, call) == run(real, call), name


# ------------------------------------------------------------------ is_inference

def test_tensors_made_in_inference_mode_are_inference_tensors():
    x = torch.ones(3)
    with torch.inference_mode():
        made = [torch.zeros(2), x * 2.0, x + 1.0, x.exp(), x.sum(), torch.tensor([1.0]), torch.randn(2),
                torch.ones(2, 3) @ torch.ones(3, 2), x.clone()]
        normal_view = x.view(3)
        with torch.inference_mode(False):
            nested = torch.zeros(2)
        grads_off = torch.ones(2, requires_grad=True) * 2.0
    assert all(t.is_inference() for t in made) and grads_off.is_inference()
    assert torch.is_inference(made[0])
    assert not x.is_inference() and not nested.is_inference()
    assert not normal_view.is_inference()  # a view of a normal tensor stays normal, as in PyTorch
    assert made[0].view(2).is_inference() and made[0][0].is_inference()  # a view of an inference tensor is one
    assert not (made[0] + 1).is_inference()  # made outside


def test_no_grad_does_not_make_inference_tensors():
    with torch.no_grad():
        assert not torch.zeros(2).is_inference()
    assert not torch.zeros(2).is_inference()


def test_inference_mode_as_decorator():
    @torch.inference_mode()
    def called():
        return torch.ones(1)

    @torch.inference_mode
    def bare():
        return torch.ones(1) * 2.0

    @torch.inference_mode(False)
    def off():
        return torch.ones(1)

    assert called().is_inference() and bare().is_inference() and not off().is_inference()


def test_inference_mode_is_per_thread():
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with torch.inference_mode():
            seen["worker"] = torch.zeros(1).is_inference()
            entered.set()
            release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(10)
        seen["main"] = torch.zeros(1).is_inference()  # made while another thread is in inference mode
    finally:
        release.set()
        t.join()
    assert seen == {"worker": True, "main": False}


def test_inference_mode_state_is_restored_after_an_exception():
    with pytest.raises(ValueError):
        with torch.inference_mode():
            raise ValueError
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    assert not torch.zeros(1).is_inference()


def test_is_inference_matches_pytorch():
    real = pytest.importorskip("torch")

    def flags(lib):
        x = lib.ones(3)
        with lib.inference_mode():
            a, v = lib.zeros(2), x.view(3)
            with lib.inference_mode(False):
                f = lib.zeros(2)
        return [a.is_inference(), v.is_inference(), f.is_inference(), a.view(2).is_inference(),
                (a * 2.0).is_inference(), x.is_inference()]
    assert flags(torch) == flags(real)


# ------------------------------------------------------------------ class-index targets of the losses

@pytest.mark.parametrize("dtype,name", [(torch.int32, "Int"), (torch.int16, "Short"), (torch.int8, "Char"),
                                        (torch.bool, "Bool")])
def test_class_targets_must_be_long_or_byte(dtype, name):
    x = torch.randn(4, 3)
    t = torch.tensor([0, 1, 2, 1]).to(dtype)
    msg = f"expected target dtype to be Long or Byte, but got {name}"
    for call in (lambda: F.cross_entropy(x, t), lambda: F.nll_loss(x.log_softmax(1), t),
                 lambda: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
                 lambda: F.nll_loss(torch.randn(2, 3, 5), t[:2, None].expand(2, 5).contiguous())):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == msg
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        F.nll_loss(x, torch.tensor([0.0, 1.0, 2.0, 1.0]))


def test_byte_class_targets():
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 1, 2, 1])
    assert F.cross_entropy(x, t.to(torch.uint8)).item() == F.cross_entropy(x, t).item()
    assert F.nll_loss(x, t.to(torch.uint8), reduction="sum").item() == -float(x[[0, 1, 2, 3], [0, 1, 2, 1]].sum())
    assert gradcheck(lambda v: F.cross_entropy(v, t.to(torch.uint8)), (x,))
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Byte$"):  # nll_loss2d: int64 only
        F.cross_entropy(torch.randn(2, 3, 5), torch.zeros(2, 5, dtype=torch.uint8))


def test_class_target_errors_match_pytorch():
    real = pytest.importorskip("torch")

    def message(lib, dtype_name, ndim):
        x = lib.zeros((2, 3) + (4,) * (ndim - 2))
        t = lib.zeros((2,) + (4,) * (ndim - 2), dtype=getattr(lib, dtype_name))
        try:
            lib.nn.functional.cross_entropy(x, t)
        except RuntimeError as e:
            return str(e)
        return "ok"
    for dtype_name in ("int32", "int16", "int8", "uint8", "bool", "int64"):
        for ndim in (2, 3):
            assert message(torch, dtype_name, ndim) == message(real, dtype_name, ndim), (dtype_name, ndim)


# ------------------------------------------------------------------ silent inf/nan in backward

# (op, the point, d op / dx there as PyTorch gives it)
BACKWARD_EDGES = [
    ("sqrt", lambda x: x.sqrt(), 0.0, INF), ("sqrt", lambda x: x.sqrt(), -1.0, NAN),
    ("sqrt", lambda x: x.sqrt(), NAN, NAN), ("rsqrt", lambda x: x.rsqrt(), 0.0, -INF),
    ("log", lambda x: x.log(), 0.0, INF), ("log", lambda x: x.log(), INF, 0.0), ("log2", lambda x: x.log2(), 0.0, INF),
    ("log10", lambda x: x.log10(), 0.0, INF), ("log1p", lambda x: x.log1p(), -1.0, INF),
    ("reciprocal", lambda x: x.reciprocal(), 0.0, -INF), ("pow-1", lambda x: x.pow(-1), 0.0, -INF),
    ("pow-2", lambda x: x.pow(-2), 0.0, -INF), ("pow-0.5", lambda x: x.pow(-0.5), 0.0, -INF),
    ("pow0.5", lambda x: x ** 0.5, 0.0, INF), ("pow1.5", lambda x: x ** 1.5, -1.0, NAN),
    ("acos", lambda x: x.acos(), 1.0, -INF), ("acos", lambda x: x.acos(), -1.0, -INF),
    ("asin", lambda x: x.asin(), 1.0, INF), ("asin", lambda x: x.asin(), -1.0, INF),
    ("atanh", lambda x: x.atanh(), 1.0, INF), ("atanh", lambda x: x.atanh(), -1.0, INF),
    ("div0", lambda x: x / 0.0, 1.0, INF), ("rdiv", lambda x: 1.0 / x, 0.0, -INF),
    ("exp", lambda x: x.exp(), INF, INF), ("norm", lambda x: x.norm(), 0.0, 0.0),
    ("xlogy", lambda x: torch.xlogy(x, x), 0.0, NAN), ("atan2", lambda x: torch.atan2(x, x), 0.0, 0.0),
    ("pow_tensor", lambda x: x.pow(x), 0.0, 0.0), ("std", lambda x: x.expand(3).std(), 2.0, 0.0),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,fn,at,want", BACKWARD_EDGES, ids=[f"{c[0]}@{c[2]}" for c in BACKWARD_EDGES])
def test_backward_gives_inf_and_nan_silently(name, fn, at, want, dtype):
    x = torch.tensor([at], dtype=dtype, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the forward at these points is not what this test is about
        y, y2 = fn(x).sum(), fn(x).sum()
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y.backward()
        (g,) = torch.autograd.grad(y2, x)
    assert np.geterr() == before  # the engine's errstate is undone
    assert same(x.grad.tolist(), [want]) and same(g.tolist(), [want])


def test_backward_edges_match_pytorch():
    real = pytest.importorskip("torch")
    for name, fn, at, _ in BACKWARD_EDGES:
        grads = []
        for lib in (torch, real):
            x = lib.tensor([at], dtype=lib.float64, requires_grad=True)
            f = fn if lib is torch else _real_fn(real, name, fn)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f(x).sum().backward()
            grads.append(x.grad.tolist())
        assert same(*grads), (name, at, grads)


def _real_fn(real, name, fn):
    """The same op written against PyTorch's namespace (the table's lambdas name tinytorch's)."""
    if name == "xlogy":
        return lambda x: real.xlogy(x, x)
    if name == "atan2":
        return lambda x: real.atan2(x, x)
    return fn


def test_create_graph_backward_is_silent_too():
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    y = x.sqrt().sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
    assert g.tolist() == [INF] and gg.tolist() == [-INF]


def test_var_without_degrees_of_freedom_has_a_nan_gradient():
    x = torch.tensor([2.0, 3.0, 4.0], dtype=torch.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        x[:1].var().backward()
    assert same(x.grad.tolist(), [NAN, 0.0, 0.0])
    y = torch.tensor([5.0], requires_grad=True)
    with pytest.warns(UserWarning, match=r"^std\(\): degrees of freedom is <= 0"):
        y.std().backward()
    assert same(y.grad.tolist(), [NAN])
    z = torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        z.var(correction=2).backward()  # centered values are +-1: +-inf, as ATen's 2 / 0
    assert z.grad.tolist() == [-INF, INF]
    w = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v: v.var(), (w,))


def test_std_gradient_is_zero_where_the_std_is_zero():
    x = torch.tensor([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]], dtype=torch.float64, requires_grad=True)
    y = x.std(1)
    assert y.grad_fn.name() == "StdBackward0"
    y.sum().backward()
    assert x.grad[1].tolist() == [0.0, 0.0, 0.0]  # sqrt's inf times var's 0 would make these nan
    w = torch.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 3.5]], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v: v.std(1), (w,)) and gradcheck(lambda v: v.std(correction=0), (w,))
    assert gradcheck(lambda v: v.std(0, keepdim=True), (w,)) and gradcheck(lambda v: torch.std_mean(v, 1)[0], (w,))
    assert torch.autograd.gradgradcheck(lambda v: v.std(1), (w,))
    b = torch.tensor([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]], dtype=torch.bfloat16)
    assert b.std(1).dtype == torch.bfloat16 and b.std(1).tolist() == [1.53125, 0.0]


def test_atan2_and_pow_gradients_at_the_origin():
    a = torch.tensor([0.0, 0.0, 1.0], requires_grad=True)
    b = torch.tensor([0.0, 1.0, 0.0], requires_grad=True)
    torch.atan2(a, b).sum().backward()
    assert a.grad.tolist() == [0.0, 1.0, 0.0] and b.grad.tolist() == [0.0, 0.0, -1.0]
    p = torch.tensor([0.0, 0.0, 2.0], requires_grad=True)
    q = torch.tensor([0.0, 2.0, 0.0], requires_grad=True)
    p.pow(q).sum().backward()
    assert p.grad.tolist() == [0.0, 0.0, 0.0] and q.grad.tolist() == [0.0, 0.0, pytest.approx(math.log(2))]
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1.1, 0.4, -0.7], dtype=torch.float64, requires_grad=True)
    assert gradcheck(torch.atan2, (x, y)) and gradcheck(lambda u, v: u.abs().pow(v), (x, y))


def test_maximum_minimum_gradient_rules():
    a = torch.tensor([1.0, 2.0, 3.0, NAN, NAN, 2.0], requires_grad=True)
    b = torch.tensor([2.0, 2.0, 1.0, 1.0, NAN, NAN], requires_grad=True)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    (torch.maximum(a, b) * w).sum().backward()
    # a tie splits the gradient; where a NaN makes neither side win, both get it (PyTorch's formula)
    assert a.grad.tolist() == [0.0, 1.0, 3.0, 4.0, 5.0, 6.0] and b.grad.tolist() == [1.0, 1.0, 0.0, 4.0, 5.0, 6.0]
    a.grad = b.grad = None
    (torch.minimum(a, b) * w).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 0.0, 4.0, 5.0, 6.0] and b.grad.tolist() == [0.0, 1.0, 3.0, 4.0, 5.0, 6.0]
    p = torch.tensor([[0.3], [-1.2]], dtype=torch.float64, requires_grad=True)
    q = torch.tensor([0.1, -0.5, 2.0], dtype=torch.float64, requires_grad=True)
    assert gradcheck(torch.maximum, (p, q)) and gradcheck(torch.minimum, (p, q))


def test_pow_of_scalar_zero_base_gradient():
    x = torch.tensor([-2.0, -1.0, 0.0, 1.0, NAN], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = 0.0 ** x
    y.sum().backward()
    # PyTorch: 0 where the exponent is >= 0, else inf * log(0)
    assert same(x.grad.tolist(), [-INF, -INF, 0.0, 0.0, NAN])
    e = torch.tensor([0.5, 1.5, -0.3], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda v: 2.5 ** v, (e,))


@pytest.mark.parametrize("name", ["silu", "mish", "hardswish", "softplus", "elu", "selu", "celu", "gelu",
                                  "logsigmoid", "tanhshrink", "softsign", "sigmoid", "relu", "leaky_relu",
                                  "hardsigmoid", "hardtanh", "relu6", "softshrink", "hardshrink"])
def test_activations_of_a_0d_tensor_keep_it_0d_and_differentiate(name):
    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)  # away from the shrinks' kinks at 0.5
    y = getattr(F, name)(x)
    assert y.shape == () and y.dtype is torch.float64
    assert gradcheck(getattr(F, name), (x,))


def test_detach_and_data_of_an_inference_tensor_stay_inference_tensors():
    with torch.inference_mode():
        x = torch.ones(2)
    assert x.detach().is_inference() and x.data.is_inference() and x[0].detach().is_inference()
    assert not torch.ones(2).detach().is_inference() and not torch.ones(2).data.is_inference()


def test_shell_unsigned_dtypes():
    """uint16/uint32/uint64 exist as PyTorch's: from_numpy and tensor() keep them, casts work, promoting them with
    another integer, bool or complex type raises PyTorch's error, with a floating type gives that type."""
    a = torch.from_numpy(np.array([1, 2], np.uint16))
    assert a.dtype is torch.uint16 and not torch.uint16.is_signed and str(torch.uint64) == "torch.uint64"
    assert (a * 2).dtype is torch.uint16 and (a * 2).tolist() == [2, 4]
    assert a.float().tolist() == [1.0, 2.0] and (a.float() + a).dtype is torch.float32
    assert torch.tensor(np.array([7], np.uint32)).dtype is torch.uint32 and torch.uint32.itemsize == 4
    assert torch.zeros(2, dtype=torch.uint64).numpy().dtype == np.uint64
    assert torch.promote_types(torch.uint32, torch.float16) is torch.float16
    assert torch.iinfo(torch.uint16).max == 65535
    for other, name in ((torch.int32, "Int"), (torch.uint8, "Byte"), (torch.bool, "Bool"),
                        (torch.complex64, "ComplexFloat")):
        with pytest.raises(RuntimeError, match=f"Promotion for uint16, uint32, uint64 types is not supported, "
                                               f"attempted to promote UInt16 and {name}"):
            torch.promote_types(torch.uint16, other)
    with pytest.raises(RuntimeError, match="attempted to promote UInt16 and Int"):
        a + torch.ones(2, dtype=torch.int32)
    with pytest.raises(TypeError, match=r"can't convert np.ndarray of type numpy.str_. The only supported types"):
        torch.from_numpy(np.array(["a"]))
