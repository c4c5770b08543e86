"""torch.nn.functional parity: float-only activations' and softmax's dtype errors, F.pad's reflect/replicate
checks, Conv's padding tuple, and the functions added for parity (conv_tbc, linear_cross_entropy, antialiased and
Lanczos interpolate, boolean_dispatch, assert_int_or_pair, the grid_sample mode tables). Values against float64
NumPy references and gradcheck without torch; values, gradients, errors and signatures against PyTorch with it."""
import inspect
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck

F = tinytorch.nn.functional
INT_DTYPES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _t(a, requires_grad: bool = False):
    return tinytorch.tensor(np.asarray(a), requires_grad=requires_grad)


def _x(dtype: str):
    return tinytorch.tensor(np.array([1, 0, 1]).astype(dtype))


# ------------------------------------------------------------------ float-only ops on integer and bool tensors


FLOAT_ONLY = [("elu", "elu_cpu", lambda x: F.elu(x)), ("elu_", "elu_cpu", lambda x: F.elu_(x)),
              ("leaky_relu", "leaky_relu_cpu", lambda x: F.leaky_relu(x)),
              ("leaky_relu_", "leaky_relu_cpu", lambda x: F.leaky_relu_(x)),
              ("leaky_relu inplace", "leaky_relu_cpu", lambda x: F.leaky_relu(x, 0.1, inplace=True)),
              ("logsigmoid", "log_sigmoid_cpu", F.logsigmoid), ("softplus", "softplus_cpu", F.softplus),
              ("gelu", "GeluKernelImpl", F.gelu), ("silu", "silu_cpu", F.silu)]


@pytest.mark.parametrize("dtype", list(INT_DTYPES))
@pytest.mark.parametrize("name,kernel,fn", FLOAT_ONLY, ids=[f[0] for f in FLOAT_ONLY])
def test_float_only_activation_rejects_integer_and_bool(name, kernel, fn, dtype):
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for '{INT_DTYPES[dtype]}'$"):
        fn(_x(dtype))


@pytest.mark.parametrize("fn,kernel", [(F.elu, "elu_cpu"), (F.leaky_relu, "leaky_relu_cpu"),
                                       (F.logsigmoid, "log_sigmoid_cpu"), (F.gelu, "GeluKernelImpl")])
def test_float_only_activation_rejects_complex(fn, kernel):
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'ComplexFloat'"):
        fn(tinytorch.ones(3, dtype=tinytorch.complex64))


def test_silu_complex_is_x_times_sigmoid():
    v = np.array([1 + 1j, -2 + 0.5j, 0.3 - 2j])
    np.testing.assert_allclose(F.silu(_t(v)).numpy(), v / (1 + np.exp(-v)), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_softmax_family_rejects_integers_naming_the_kernel(dtype):
    x = tinytorch.ones(2, 3, dtype=getattr(tinytorch, dtype))
    short = INT_DTYPES[dtype]
    cases = [(lambda: F.softmax(x, 1), "softmax_lastdim_kernel_impl"), (lambda: F.softmax(x, 0), "softmax_kernel_impl"),
             (lambda: F.log_softmax(x, -1), "log_softmax_lastdim_kernel_impl"),
             (lambda: F.log_softmax(x, 0), "log_softmax_kernel_impl"),
             (lambda: F.softmin(x, 1), "softmax_lastdim_kernel_impl"), (lambda: F.softmin(x, 0), "softmax_kernel_impl"),
             (lambda: tinytorch.nn.Softmax2d()(tinytorch.ones(1, 2, 3, 3, dtype=x.dtype)), "softmax_kernel_impl"),
             (lambda: F.softmax(tinytorch.tensor(3).to(x.dtype), 0), "softmax_lastdim_kernel_impl")]
    for call, kernel in cases:
        with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for '{short}'$"):
            call()


def test_softmax_integer_edge_cases():
    with pytest.raises(IndexError, match="Dimension out of range"):  # the dim is checked before the dtype
        F.softmax(tinytorch.ones(2, 3, dtype=tinytorch.int64), 5)
    empty = F.softmax(tinytorch.ones(0, 3, dtype=tinytorch.int64), 1)  # PyTorch returns before dispatching
    assert empty.shape == (0, 3) and empty.dtype == tinytorch.int64
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        F.softmin(tinytorch.ones(3, dtype=tinytorch.bool), 0, dtype=tinytorch.float32)
    x = np.array([[1, 5, 2], [0, 0, 3]])
    e = np.exp(-x.astype(np.float64))
    np.testing.assert_allclose(F.softmin(_t(x), 1, dtype=tinytorch.float64).numpy(), e / e.sum(1, keepdims=True))


# ------------------------------------------------------------------ F.pad


@pytest.mark.parametrize("shape,pad,arg,dim", [((2, 3), (3, 0), 4, 1), ((1, 2, 3, 3), (3, 0, 1, 1), 4, 3),
                                               ((1, 2, 3, 5), (1, 1, 3, 0), 6, 2), ((2, 3, 5), (1, 1, 0, 3), 6, 1),
                                               ((1, 2, 3, 5, 5), (1, 1, 5, 0, 1, 1), 6, 3),
                                               ((1, 2, 3, 5, 5), (1, 1, 1, 1, 3, 0), 8, 2)])
def test_pad_reflect_names_the_argument_of_the_failing_dimension(shape, pad, arg, dim):
    with pytest.raises(RuntimeError, match=rf"^Argument #{arg}: Padding size should be less than the corresponding "
                                           rf"input dimension, but got: padding \({pad[2 * (len(shape) - 1 - dim)]}, "):
        F.pad(tinytorch.ones(*shape), pad, mode="reflect")


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_edge_modes_reject_empty_non_batch_dims(mode):
    for shape, pad, k in [((0, 5), (1, 2), 1), ((1, 0, 5), (1, 2), 1), ((1, 2, 0, 5), (1, 1, 1, 1), 2),
                          ((1, 2, 0, 5, 5), (1,) * 6, 3)]:
        with pytest.raises(RuntimeError, match=rf"^Expected {k + 1}D or {k + 2}D \(batch mode\) tensor with possibly 0 "
                                               rf"batch size and other non-zero dimensions for input, but got: "):
            F.pad(tinytorch.ones(*shape), pad, mode=mode)
    assert F.pad(tinytorch.ones(0, 2, 5), (1, 2), mode=mode).shape == (0, 2, 8)


def test_conv_reversed_padding_is_a_tuple_and_same_padding_a_list():
    assert tinytorch.nn.Conv3d(1, 1, (3, 3, 5), padding=(1, 2, 3))._reversed_padding_repeated_twice == \
        (3, 3, 2, 2, 1, 1)
    assert tinytorch.nn.ConvTranspose1d(1, 1, 3, padding=2)._reversed_padding_repeated_twice == (2, 2)
    assert tinytorch.nn.Conv2d(1, 1, (3, 4), padding="same", dilation=(2, 1))._reversed_padding_repeated_twice == \
        [1, 2, 2, 2]


# ------------------------------------------------------------------ conv_tbc


def _conv_tbc_ref(x, w, b, pad):
    t = x.shape[0]
    xp = np.zeros((t + 2 * max(pad, 0),) + x.shape[1:])
    xp[max(pad, 0):max(pad, 0) + t] = x
    if pad < 0:
        xp = xp[-pad:t + pad]
    n = xp.shape[0] - w.shape[0] + 1
    return b + sum(xp[k:k + n] @ w[k] for k in range(w.shape[0]))


@pytest.mark.parametrize("pad", [0, 1, 4, -1])
def test_conv_tbc_values_and_gradcheck(pad):
    rng = np.random.default_rng(pad + 5)
    x, w, b = rng.standard_normal((6, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(F.conv_tbc(_t(x), _t(w), _t(b), pad).numpy(), _conv_tbc_ref(x, w, b, pad),
                               rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *a: F.conv_tbc(*a, pad=pad), (_t(x, True), _t(w, True), _t(b, True)))


def test_conv_tbc_errors():
    x, w, b = tinytorch.ones(7, 2, 3), tinytorch.ones(3, 3, 4), tinytorch.ones(4)
    for args, msg in [((tinytorch.ones(7, 3), w, b), "Input must have 3 dims: time, batch, in_channel"),
                      ((x, tinytorch.ones(3, 3), b), "Weight tensor must have 3 dims"),
                      ((x, w, tinytorch.ones(4, 1)), "Bias must be 1-D"),
                      ((x, tinytorch.ones(3, 2, 4), b), r"Input dim 2 \(input channels\) is not == dim 1"),
                      ((x, w, tinytorch.ones(5)), r"Bias size must equal dim 2 in the weight tensor"),
                      ((tinytorch.ones(1, 2, 3), w, b), r"negative dimension -1: \[-1, 2, 4\]")]:
        with pytest.raises(RuntimeError, match=msg):
            F.conv_tbc(*args)
    with pytest.raises(TypeError, match="argument 'bias' \\(position 3\\) must be Tensor, not NoneType"):
        F.conv_tbc(x, w, None)


# ------------------------------------------------------------------ linear_cross_entropy


def _lce_ref(x, w, b, t, reduction):
    z = x @ w.T + b
    logp = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    keep = t != -100
    loss = np.where(keep, -logp[np.arange(len(t)), np.where(keep, t, 0)], 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / keep.sum()}[reduction]


class _Chunks:
    """What linear_cross_entropy reads from a LinearCrossEntropyOptions."""
    def __init__(self, batch_chunk_size):
        self.batch_chunk_size = batch_chunk_size


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [None, _Chunks(3), _Chunks(None)], ids=["reference", "chunks-of-3", "auto"])
def test_linear_cross_entropy_values_and_gradcheck(reduction, options):
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((8, 4)), rng.standard_normal((6, 4)), rng.standard_normal(6)
    t = rng.integers(0, 6, 8)
    t[3] = -100
    out = F.linear_cross_entropy(_t(x), _t(w), _t(t), linear_bias=_t(b), reduction=reduction, options=options)
    np.testing.assert_allclose(out.numpy(), _lce_ref(x, w, b, t, reduction), rtol=1e-12)
    assert gradcheck(lambda xx, ww, bb: F.linear_cross_entropy(xx, ww, _t(t), linear_bias=bb, reduction=reduction,
                                                               options=options),
                     (_t(x, True), _t(w, True), _t(b, True)))


def test_linear_cross_entropy_matches_cross_entropy_of_linear():
    rng = np.random.default_rng(2)
    x, w, cw = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.random(4) + 0.5
    t = np.array([0, 3, 1, 1, 2])
    for kwargs in [dict(weight=_t(cw)), dict(label_smoothing=0.2), dict(ignore_index=1, weight=_t(cw))]:
        want = F.cross_entropy(F.linear(_t(x), _t(w)), _t(t), **kwargs).item()
        assert F.linear_cross_entropy(_t(x), _t(w), _t(t), **kwargs).item() == pytest.approx(want, rel=1e-12)
        if "label_smoothing" not in kwargs:
            got = F.linear_cross_entropy(_t(x), _t(w), _t(t), options=_Chunks(2), **kwargs).item()
            assert got == pytest.approx(want, rel=1e-12)
    w3, b3, t3 = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 2)), rng.integers(0, 4, (5, 2))
    logits = (x @ w3.reshape(8, 3).T + b3.reshape(8)).reshape(5, 4, 2)
    want = F.cross_entropy(_t(logits), _t(t3)).item()
    assert F.linear_cross_entropy(_t(x), _t(w3), _t(t3), linear_bias=_t(b3)).item() == pytest.approx(want, rel=1e-12)
    with pytest.warns(UserWarning, match="``options`` ignored"):
        F.linear_cross_entropy(_t(x), _t(w), _t(t), label_smoothing=0.1, options=_Chunks(2))


def test_linear_cross_entropy_errors():
    x, w, t = tinytorch.ones(5, 3), tinytorch.ones(4, 3), tinytorch.zeros(5, dtype=tinytorch.int64)
    for args, kwargs, msg in [((tinytorch.ones(1, 5, 3), w, t), {}, "expected input with dimensionality 1 or 2, got 3"),
                              ((x, tinytorch.ones(3), t), {}, "expected linear_weight with dimensionality at least 2"),
                              ((x, tinytorch.ones(4, 2), t), {}, "got 3 and 2, respectively"),
                              ((x, w, t), dict(linear_bias=tinytorch.ones(3)), r"expected linear_bias shape \(4,\)"),
                              ((tinytorch.ones(3), tinytorch.ones(4, 2, 3), t), {}, "requires batched input"),
                              ((x, w, tinytorch.ones(5, 4)), dict(ignore_index=0), "ignore_index cannot be specified")]:
        with pytest.raises(RuntimeError, match=msg):
            F.linear_cross_entropy(*args, **kwargs)


# ------------------------------------------------------------------ antialiased interpolate


def _triangle_halving(v):
    """Bilinear antialiased downsampling by exactly 2 along the last axis: taps (1, 3, 3, 1) / 8, renormalised
    where the window leaves the input."""
    n = v.shape[-1]
    out = []
    for i in range(n // 2):
        taps = {2 * i - 1: 1, 2 * i: 3, 2 * i + 1: 3, 2 * i + 2: 1}
        taps = {j: c for j, c in taps.items() if 0 <= j < n}
        out.append(sum(c * v[..., j] for j, c in taps.items()) / sum(taps.values()))
    return np.stack(out, -1)


def test_interpolate_antialias_bilinear_halving_reference():
    v = np.random.default_rng(3).standard_normal((2, 3, 8, 10))
    got = F.interpolate(_t(v), scale_factor=0.5, mode="bilinear", antialias=True).numpy()
    want = _triangle_halving(_triangle_halving(v).swapaxes(-1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias_identity_constants_and_gradcheck(mode):
    v = np.random.default_rng(4).standard_normal((1, 2, 7, 6))
    np.testing.assert_allclose(F.interpolate(_t(v), size=(7, 6), mode=mode, antialias=True).numpy(), v, atol=1e-12)
    const = F.interpolate(tinytorch.full((1, 1, 9, 5), 2.5, dtype=tinytorch.float64), size=(4, 11), mode=mode,
                          antialias=True)
    np.testing.assert_allclose(const.numpy(), 2.5, rtol=1e-12)  # normalised weights keep constants
    assert gradcheck(lambda a: F.interpolate(a, size=(3, 8), mode=mode, antialias=True), (_t(v, True),))
    assert gradcheck(lambda a: F.interpolate(a, scale_factor=0.4, mode=mode, antialias=True), (_t(v, True),))


def test_interpolate_antialias_uint8_saturates():
    v = np.zeros((1, 1, 6, 6), np.uint8)
    v[..., ::2] = 255
    out = F.interpolate(_t(v), size=(3, 4), mode="bicubic", antialias=True)
    assert out.dtype == tinytorch.uint8 and out.numpy().min() >= 0
    np.testing.assert_array_equal(F.interpolate(_t(v), size=(6, 6), mode="bilinear", antialias=True).numpy(), v)


def test_interpolate_antialias_errors():
    x = tinytorch.ones(1, 2, 6, 6)
    restricted = "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor"
    for kwargs, exc, msg in [(dict(size=3, mode="nearest", antialias=True), ValueError, restricted),
                             (dict(size=3, mode="lanczos"), ValueError, "Lanczos mode requires antialias=True"),
                             (dict(size=3, mode="lanczos", antialias=True, align_corners=True), ValueError,
                              "Lanczos mode does not support align_corners=True"),
                             (dict(size=(0, 3), mode="bilinear", antialias=True), RuntimeError,
                              r"Input and output sizes should be greater than 0, but got input \(H: 6, W: 6\) "
                              r"output \(H: 0, W: 3\)"),
                             (dict(size=(2, 3.0), mode="bilinear", antialias=True), TypeError, "expected size"),
                             (dict(size=(2, 3), mode="bilinear", antialias=True, recompute_scale_factor=True),
                              ValueError, "recompute_scale_factor is not meaningful with an explicit size"),
                             (dict(mode="bicubic", antialias=True), ValueError, "either size or scale_factor")]:
        with pytest.raises(exc, match=msg):
            F.interpolate(x, **kwargs)
    with pytest.raises(ValueError, match=restricted):
        F.interpolate(tinytorch.ones(1, 2, 6), size=3, mode="bilinear", antialias=True)
    with pytest.raises(NotImplementedError, match=r"got 3D\) for the modes: .* \(got lanczos\)"):
        F.interpolate(tinytorch.ones(1, 2, 6), size=3, mode="lanczos")
    with pytest.raises(NotImplementedError, match="\"compute_index_ranges_weights\" not implemented for 'Long'"):
        F.interpolate(tinytorch.ones(1, 1, 4, 4, dtype=tinytorch.int64), size=2, mode="bilinear", antialias=True)


# ------------------------------------------------------------------ helpers and signatures


def test_boolean_dispatch_and_assert_int_or_pair():
    def with_flag(x, flag=False):
        """Doc."""
        return ("true", x)

    def without_flag(x, flag=False):
        return ("false", x)
    fn = F.boolean_dispatch("flag", 1, False, with_flag, without_flag, "mod", "picked")
    assert fn(1) == ("false", 1) and fn(1, True) == ("true", 1) and fn(1, flag=True) == ("true", 1)
    assert (fn.__name__, fn.__module__, fn.__doc__, without_flag.__doc__) == ("picked", "mod", "Doc.", "Doc.")
    with pytest.raises(RuntimeError, match="only one function can have a docstring"):
        F.boolean_dispatch("flag", 1, False, with_flag, without_flag, None, None)
    F.assert_int_or_pair(3, "kernel_size", "{} must be int or pair")
    F.assert_int_or_pair((1, 2), "kernel_size", "{} must be int or pair")
    with pytest.raises(AssertionError, match="^kernel_size must be int or pair$"):
        F.assert_int_or_pair((1, 2, 3), "kernel_size", "{} must be int or pair")
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == {"bilinear": 0, "nearest": 1, "bicubic": 2}
    assert F.GRID_SAMPLE_PADDING_MODES == {"zeros": 0, "border": 1, "reflection": 2}


SIGNATURES = {
    "dropout": "(input, p=0.5, training=True, inplace=False)",
    "conv_tbc": "(input, weight, bias, pad=0)",
    "linear_cross_entropy": "(input, linear_weight, target, *, linear_bias=None, weight=None, reduction='mean', "
                            "ignore_index=None, label_smoothing=0.0, options=None)",
    "interpolate": "(input, size=None, scale_factor=None, mode='nearest', align_corners=None, "
                   "recompute_scale_factor=None, antialias=False)",
    "scaled_dot_product_attention": "(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, "
                                    "enable_gqa=False)",
}


@pytest.mark.parametrize("name", list(SIGNATURES))
def test_signatures(name):
    sig = inspect.signature(getattr(F, name)).replace(return_annotation=inspect.Signature.empty)
    bare = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()])
    assert str(bare) == SIGNATURES[name]


# ------------------------------------------------------------------ against PyTorch

# Public names of torch.nn.functional that are not functions to mirror: typing and module imports, TorchScript
# helpers, CUDA-only (fp8 / grouped GEMM) kernels and their enums, and torch.nn.grad.
NOT_MIRRORED = {"BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Callable", "DType", "Optional",
                "ScalingType", "SwizzleType", "TYPE_CHECKING", "dataclasses", "grad", "grouped_mm",
                "handle_torch_function", "has_torch_function", "has_torch_function_unary",
                "has_torch_function_variadic", "importlib", "math", "np", "reproducibility_notes",
                "scaled_grouped_mm", "scaled_mm", "sparse_support_notes", "tf32_notes", "torch", "warnings"}


def test_every_public_function_of_torch_functional_exists():
    torch = pytest.importorskip("torch")
    missing = {n for n in dir(torch.nn.functional) if not n.startswith("_")} - set(dir(F)) - NOT_MIRRORED
    assert not missing


def _params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    return None if [p[0] for p in params] == ["args", "kwargs"] else params


def test_python_signatures_match_torch():
    torch = pytest.importorskip("torch")
    differ = []
    for name in dir(torch.nn.functional):
        ref = getattr(torch.nn.functional, name)
        if name.startswith("_") or name in NOT_MIRRORED or not callable(ref) or isinstance(ref, type):
            continue
        want = _params(ref)
        if want is not None and want != _params(getattr(F, name)):
            differ.append(name)
    assert not differ


def _outcome(fn):
    """(error type, message), or the result's dtype name and rounded values."""
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return type(e), str(e)
    return str(r.dtype).split(".")[-1], np.round(r.numpy().astype(np.float64), 6).tolist()


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "complex64"])
def test_dtype_errors_match_torch(dtype):
    torch = pytest.importorskip("torch")
    calls = [lambda m, f, x: f.elu(x), lambda m, f, x: f.leaky_relu(x), lambda m, f, x: f.logsigmoid(x),
             lambda m, f, x: f.softplus(x), lambda m, f, x: f.gelu(x), lambda m, f, x: f.elu_(x.clone()),
             lambda m, f, x: f.leaky_relu_(x.clone()), lambda m, f, x: f.softmax(x, 0),
             lambda m, f, x: f.softmax(x.reshape(3, 1), 0), lambda m, f, x: f.log_softmax(x.reshape(3, 1), 1),
             lambda m, f, x: f.softmin(x, 0), lambda m, f, x: f.softmin(x, 0, dtype=m.float32),
             lambda m, f, x: m.nn.Softmax2d()(x.reshape(1, 3, 1, 1))]
    if dtype != "complex64":
        calls.append(lambda m, f, x: f.silu(x))
    a = np.array([1, 0, 1]).astype(dtype)
    for call in calls:
        want = _outcome(lambda: call(torch, torch.nn.functional, torch.tensor(a)))
        assert _outcome(lambda: call(tinytorch, F, tinytorch.tensor(a))) == want


def test_pad_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [((2, 3), (3, 0), "reflect"), ((1, 2, 3, 5), (1, 1, 3, 0), "reflect"), ((2, 3, 5), (1, 1, 0, 3), "reflect"),
             ((1, 2, 3, 5, 5), (1, 1, 1, 1, 3, 0), "reflect"), ((1, 2, 3, 5, 5), (1, 1, 5, 0, 1, 1), "reflect"),
             ((1, 0, 5), (1, 2), "reflect"), ((2, 0, 5), (1, 1, 1, 1), "replicate"),
             ((1, 2, 0, 5, 5), (1,) * 6, "replicate")]
    for shape, pad, mode in cases:
        want = _outcome(lambda: torch.nn.functional.pad(torch.ones(shape), pad, mode=mode))
        assert isinstance(want[0], type) and _outcome(lambda: F.pad(tinytorch.ones(*shape), pad, mode=mode)) == want


def test_conv_padding_attribute_matches_torch():
    torch = pytest.importorskip("torch")
    for cls, kwargs in [("Conv1d", dict(padding=2)), ("Conv2d", dict(padding=(1, 2))), ("Conv2d", dict(padding="same")),
                        ("ConvTranspose3d", dict(padding=(0, 1, 2)))]:
        want = getattr(torch.nn, cls)(1, 1, 3, **kwargs)._reversed_padding_repeated_twice
        got = getattr(tinytorch.nn, cls)(1, 1, 3, **kwargs)._reversed_padding_repeated_twice
        assert type(got) is type(want) and got == want


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("kwargs", [dict(size=(5, 4)), dict(size=(7, 20)), dict(scale_factor=0.37),
                                    dict(scale_factor=(0.5, 1.7)), dict(scale_factor=0.37, recompute_scale_factor=True),
                                    dict(size=(5, 4), align_corners=True), dict(size=(1, 30), align_corners=True)])
def test_interpolate_antialias_matches_torch(mode, kwargs):
    torch = pytest.importorskip("torch")
    if mode == "lanczos" and kwargs.get("align_corners"):
        return
    v = np.random.default_rng(5).standard_normal((2, 3, 17, 13))
    x, xt = _t(v, True), torch.tensor(v, requires_grad=True)
    y, yt = F.interpolate(x, mode=mode, antialias=True, **kwargs), \
        torch.nn.functional.interpolate(xt, mode=mode, antialias=True, **kwargs)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(6).standard_normal(tuple(yt.shape))
    y.backward(_t(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    u8 = np.random.default_rng(7).integers(0, 256, (1, 2, 17, 13)).astype(np.uint8)
    if not kwargs.get("align_corners"):
        np.testing.assert_array_equal(
            F.interpolate(_t(u8), mode=mode, antialias=True, **kwargs).numpy(),
            torch.nn.functional.interpolate(torch.tensor(u8), mode=mode, antialias=True, **kwargs).numpy())


def test_conv_tbc_and_linear_cross_entropy_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    for pad in (0, 2, -1):
        want = torch.nn.functional.conv_tbc(torch.tensor(x), torch.tensor(w), torch.tensor(b), pad)
        np.testing.assert_allclose(F.conv_tbc(_t(x), _t(w), _t(b), pad).numpy(), want.numpy(), rtol=1e-12)
    xi, wi, bi = rng.standard_normal((9, 5)), rng.standard_normal((7, 5)), rng.standard_normal(7)
    t, cw = rng.integers(0, 7, 9), rng.random(7) + 0.5
    t[2] = -100
    for reduction in ("mean", "sum", "none"):
        for chunk in (None, 4):
            ours = [_t(xi, True), _t(wi, True), _t(bi, True)]
            theirs = [torch.tensor(a, requires_grad=True) for a in (xi, wi, bi)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opts = None if chunk is None else torch.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
                want = torch.nn.functional.linear_cross_entropy(theirs[0], theirs[1], torch.tensor(t),
                                                                linear_bias=theirs[2], weight=torch.tensor(cw),
                                                                reduction=reduction, options=opts)
            got = F.linear_cross_entropy(ours[0], ours[1], _t(t), linear_bias=ours[2], weight=_t(cw),
                                         reduction=reduction, options=None if chunk is None else _Chunks(chunk))
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
            got.sum().backward()
            want.sum().backward()
            for a, c in zip(ours, theirs):
                np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-10, atol=1e-12)
