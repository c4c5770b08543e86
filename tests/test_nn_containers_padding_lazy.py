"""nn containers (ParameterList, ParameterDict), Unflatten, the padding layers, BatchNorm3d/InstanceNorm3d and the
lazy modules: values against NumPy float64 references, gradients by gradcheck, PyTorch's errors, reprs and
state_dicts, and PyTorch's behaviour side by side when it is importable."""
import copy
import importlib.util
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
from tinytorch.autograd import gradcheck
from tinytorch.nn.modules.lazy import LazyModuleMixin, is_lazy

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
RNG = np.random.default_rng(0)


def _t(a, requires_grad=False):
    return tinytorch.tensor(np.asarray(a), requires_grad=requires_grad)


# ----------------------------------------------------------------------------------------------------- padding

_NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
_PAD_CLASSES = {  # name -> (mode, spatial dims)
    f"{kind}Pad{nd}d": (mode, nd)
    for kind, mode in (("Zero", "constant"), ("Constant", "constant"), ("Reflection", "reflect"),
                       ("Replication", "replicate"), ("Circular", "circular"))
    for nd in (1, 2, 3)
}


def _np_pad(a, padding, mode, value=0.0):
    """np.pad with PyTorch's padding order: (left, right) of the last dim first, then the dim before, ..."""
    width = [(0, 0)] * a.ndim
    for i in range(len(padding) // 2):
        width[a.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
    if mode == "constant":
        return np.pad(a, width, mode="constant", constant_values=value)
    return np.pad(a, width, mode=_NP_MODE[mode])


def _make_pad(name, padding, value=1.5):
    cls = getattr(nn, name)
    return cls(padding, value) if name.startswith("Constant") else cls(padding)


def _pad_cases():
    for name, (mode, nd) in _PAD_CLASSES.items():
        asym = (1, 2, 2, 0, 0, 1)[:2 * nd]
        for padding in (2, asym):
            for batched in (True, False):
                yield name, padding, batched


@pytest.mark.parametrize("name,padding,batched", list(_pad_cases()))
def test_padding_layers_match_numpy(name, padding, batched):
    mode, nd = _PAD_CLASSES[name]
    shape = (2, 3) + (3, 4, 5)[:nd] if batched else (3,) + (3, 4, 5)[:nd]
    a = RNG.standard_normal(shape)
    m = _make_pad(name, padding)
    full = (padding,) * (2 * nd) if isinstance(padding, int) else padding
    assert m.padding == full
    value = 1.5 if name.startswith("Constant") else 0.0
    got = m(_t(a))
    assert got.dtype == tinytorch.float64
    np.testing.assert_array_equal(got.numpy(), _np_pad(a, full, mode, value))


@pytest.mark.parametrize("name", sorted(_PAD_CLASSES))
def test_padding_layers_gradcheck(name):
    mode, nd = _PAD_CLASSES[name]
    x = _t(RNG.standard_normal((1, 2) + (3, 3, 3)[:nd]), requires_grad=True)
    m = _make_pad(name, (1, 2, 0, 1, 2, 0)[:2 * nd])
    assert gradcheck(m, (x,))


def test_padding_layers_keep_integer_dtypes_and_empty_batches():
    a = np.arange(12, dtype=np.int64).reshape(1, 3, 4)
    for name in ("ConstantPad1d", "ReplicationPad1d", "CircularPad1d", "ReflectionPad1d"):
        out = _make_pad(name, (1, 2), value=7)(_t(a))
        assert out.dtype == tinytorch.int64
        mode = _PAD_CLASSES[name][0]
        np.testing.assert_array_equal(out.numpy(), _np_pad(a, (1, 2), mode, 7))
    assert nn.ZeroPad2d(1)(tinytorch.zeros(0, 2, 3, 3)).shape == (0, 2, 5, 5)
    assert nn.ReplicationPad3d(1)(tinytorch.zeros(0, 2, 3, 3, 3)).shape == (0, 2, 5, 5, 5)


def test_negative_padding_crops():
    a = RNG.standard_normal((1, 2, 5))
    np.testing.assert_array_equal(nn.ZeroPad1d((-1, 2))(_t(a)).numpy(), np.pad(a[..., 1:], [(0, 0), (0, 0), (0, 2)]))
    np.testing.assert_array_equal(nn.ConstantPad2d((0, -2, 1, -1), 3.0)(_t(a)).numpy(),
                                  np.pad(a[:, :1, :3], [(0, 0), (1, 0), (0, 0)], constant_values=3.0))


def test_circular_padding_with_a_negative_side_wraps_the_cropped_input():
    a = np.arange(5.0).reshape(1, 1, 5)
    np.testing.assert_array_equal(nn.CircularPad1d((-1, 2))(_t(a)).numpy(), [[[1, 2, 3, 4, 1, 2]]])  # PyTorch's


def test_non_constant_padding_of_an_unsupported_rank_is_refused():
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 4D input tensor"):
        nn.ReflectionPad1d(1)(tinytorch.zeros(1, 2, 3, 4))


def test_padding_reprs_and_attributes():
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(nn.ZeroPad1d([1, 2])) == "ZeroPad1d((1, 2))"
    assert repr(nn.ConstantPad1d((1, 2), 3)) == "ConstantPad1d(padding=(1, 2), value=3)"
    assert repr(nn.ConstantPad3d(1, 0.5)) == "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.5)"
    assert repr(nn.ReflectionPad3d(1)) == "ReflectionPad3d((1, 1, 1, 1, 1, 1))"
    assert repr(nn.ReplicationPad2d((1, 2, 3, 4))) == "ReplicationPad2d((1, 2, 3, 4))"
    assert repr(nn.CircularPad2d([1, 2, 3, 4])) == "CircularPad2d((1, 2, 3, 4))"
    assert nn.ZeroPad3d(2).value == 0.0
    assert isinstance(nn.ZeroPad2d(1), nn.ConstantPad2d)


def test_padding_errors():
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 1D input\)"):
        nn.CircularPad1d(1)(tinytorch.zeros(3))
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 5D input\)"):
        nn.CircularPad2d(1)(tinytorch.zeros(1, 1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"expected 4D or 5D input \(got 3D input\)"):
        nn.CircularPad3d(1)(tinytorch.zeros(1, 3, 3))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        nn.ReflectionPad1d(3)(tinytorch.zeros(1, 2, 3))
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        nn.CircularPad1d(4)(tinytorch.zeros(1, 2, 3))
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        nn.ConstantPad1d((1, 2, 3), 0.0)(tinytorch.zeros(1, 2, 3))


# ----------------------------------------------------------------------------------------------------- Unflatten

def test_unflatten_values_shapes_and_gradient():
    a = RNG.standard_normal((2, 12, 3))
    for dim, sizes in ((1, (3, 4)), (1, [2, -1, 3]), (-2, (12,)), (0, (1, 2)), (-1, (3, 1))):
        got = nn.Unflatten(dim, sizes)(_t(a))
        axis = dim % a.ndim
        want_shape = a.shape[:axis] + tuple(np.empty(a.shape[axis]).reshape(sizes).shape) + a.shape[axis + 1:]
        np.testing.assert_array_equal(got.numpy(), a.reshape(want_shape))
    x = _t(a, requires_grad=True)
    seq = nn.Sequential(nn.Flatten(), nn.Unflatten(1, (12, 3)))
    np.testing.assert_array_equal(seq(x).detach().numpy(), a)
    assert gradcheck(nn.Unflatten(1, (4, 3)), (x,))
    assert nn.Unflatten(0, (0, 5))(tinytorch.zeros(0, 3)).shape == (0, 5, 3)


def test_unflatten_repr_and_errors():
    assert repr(nn.Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"
    assert repr(nn.Unflatten(-1, [2, 3])) == "Unflatten(dim=-1, unflattened_size=[2, 3])"
    with pytest.raises(TypeError, match="unflattened_size must be a tuple of ints, but found type int"):
        nn.Unflatten(1, 2)
    with pytest.raises(TypeError, match="found element of type float at pos 1"):
        nn.Unflatten(1, (2, 3.0))
    with pytest.raises(RuntimeError):
        nn.Unflatten(1, (2, 4))(tinytorch.zeros(2, 6))


# ----------------------------------------------------------------------------------------------------- ParameterList

class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.plist = nn.ParameterList([nn.Parameter(tinytorch.ones(3, 3)), tinytorch.zeros(3)])
        self.pdict = nn.ParameterDict({"scale": tinytorch.full((3,), 2.0)})

    def forward(self, x):
        return (x @ self.plist[0].T + self.plist[1]) * self.pdict["scale"]


def test_parameter_list_registers_and_wraps():
    p0 = nn.Parameter(tinytorch.randn(2))
    raw = tinytorch.randn(3)
    pl = nn.ParameterList([p0, raw, "not a tensor"])
    assert len(pl) == 3 and pl[0] is p0 and pl[-3] is p0
    assert isinstance(pl[1], nn.Parameter) and pl[1].requires_grad
    pl[1].data.fill_(5.0)  # Parameter(raw) shares raw's memory, as in PyTorch
    assert raw.numpy().tolist() == [5.0, 5.0, 5.0]
    assert pl[2] == "not a tensor"
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    assert list(pl.state_dict()) == ["0", "1"]
    pl.append(tinytorch.ones(1)).extend([tinytorch.ones(4)])
    pl += [nn.Parameter(tinytorch.ones(5))]
    assert len(pl) == 6 and [p.shape[0] for p in list(pl)[3:]] == [1, 4, 5]
    pl[0] = tinytorch.zeros(7)
    assert isinstance(pl[0], nn.Parameter) and pl[0].shape == (7,)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "3", "4", "5"]
    sliced = pl[1::2]
    assert isinstance(sliced, nn.ParameterList) and len(sliced) == 3
    assert sliced[0] is pl[1] and sliced[1] is pl[3] and sliced[2] is pl[5]
    assert len(pl[10:]) == 0
    assert "0" not in dir(pl)


def test_parameter_list_errors():
    pl = nn.ParameterList([tinytorch.zeros(2)])
    with pytest.raises(IndexError, match="index 1 is out of range"):
        pl[1]
    with pytest.raises(IndexError, match="index -2 is out of range"):
        pl[-2] = tinytorch.zeros(1)
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable, but got Tensor"):
        pl.extend(tinytorch.zeros(2))
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        pl(1)
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype can require gradients$"):
        nn.ParameterList([tinytorch.zeros(2, dtype=tinytorch.int64)])


def test_parameter_list_repr():
    pl = nn.ParameterList([nn.Parameter(tinytorch.zeros(2, 3)), tinytorch.zeros(3, dtype=tinytorch.float64), 5])
    assert repr(pl) == ("ParameterList(\n"
                        "    (0): Parameter containing: [torch.float32 of size 2x3]\n"
                        "    (1): Parameter containing: [torch.float64 of size 3]\n"
                        "    (2): Object of type: int\n)")
    assert repr(nn.ParameterList()) == "ParameterList()"


# ----------------------------------------------------------------------------------------------------- ParameterDict

def test_parameter_dict_api():
    a = nn.Parameter(tinytorch.randn(2))
    pd = nn.ParameterDict({"b": tinytorch.zeros(3), "a": a})  # a plain dict goes in sorted key order
    assert list(pd) == ["a", "b"] and list(pd.keys()) == ["a", "b"]
    assert pd["a"] is a and isinstance(pd["b"], nn.Parameter)
    assert "a" in pd and "z" not in pd and len(pd) == 2
    assert [k for k, _ in pd.items()] == ["a", "b"] and list(pd.values())[0] is a
    assert list(reversed(pd)) == ["b", "a"]
    assert [n for n, _ in pd.named_parameters()] == ["a", "b"] and list(pd.state_dict()) == ["a", "b"]
    od = nn.ParameterDict(OrderedDict([("z", tinytorch.zeros(1)), ("y", tinytorch.zeros(1))]))
    assert list(od) == ["z", "y"]  # an OrderedDict keeps its order
    pd.update([("c", tinytorch.ones(1)), ("d", None)])
    assert list(pd) == ["a", "b", "c", "d"] and pd["d"] is None
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
    assert pd.get("zz") is None and pd.get("zz", 3) == 3 and pd.get("a") is a
    e = pd.setdefault("e", tinytorch.ones(2))
    assert isinstance(e, nn.Parameter) and pd.setdefault("e", None) is e
    assert pd.pop("c").shape == (1,) and "c" not in pd and not hasattr(pd, "c")
    k, v = pd.popitem()
    assert k == "e" and v is e
    del pd["d"]
    cp = pd.copy()
    assert list(cp) == ["a", "b"] and cp["a"] is a and cp is not pd
    merged = pd | nn.ParameterDict({"x": tinytorch.ones(1)})
    assert list(merged) == ["a", "b", "x"] and list(pd) == ["a", "b"]
    pd |= {"x": tinytorch.ones(1)}
    assert list(pd) == ["a", "b", "x"]
    fk = pd.fromkeys(["p", "q"], tinytorch.zeros(2))
    assert list(fk) == ["p", "q"] and isinstance(fk["q"], nn.Parameter)
    pd.clear()
    assert len(pd) == 0 and list(pd.parameters()) == []


def test_parameter_dict_errors_and_repr():
    pd = nn.ParameterDict({"a": tinytorch.zeros(2)})
    with pytest.raises(TypeError, match=r"not a string \(type is 'int'\)"):
        pd[1] = tinytorch.zeros(1)
    assert list(pd) == ["a"]
    with pytest.raises(AttributeError, match="has no attribute 'b'"):
        pd["b"]
    with pytest.raises(TypeError, match="ParametersDict.update should be called with an iterable"):
        pd.update(5)
    with pytest.raises(ValueError, match="element #0 has length 1; 2 is required"):
        pd.update([("a",)])
    with pytest.raises(TypeError, match="element #0 should be Iterable; isint"):
        pd.update([5])
    with pytest.raises(RuntimeError, match="ParameterDict should not be called."):
        pd(1)
    with pytest.raises(KeyError, match="dictionary is empty"):
        nn.ParameterDict().popitem()
    pd["n"] = "x"
    assert repr(pd) == ("ParameterDict(\n"
                        "    (a): Parameter containing: [torch.FloatTensor of size 2]\n"
                        "    (n): Object of type: str\n)")


def test_containers_state_dict_roundtrip_to_and_training_step():
    m = _Holder()
    keys = ["plist.0", "plist.1", "pdict.scale"]
    assert [n for n, _ in m.named_parameters()] == keys and list(m.state_dict()) == keys
    other = _Holder()
    other.load_state_dict({k: v + 1 for k, v in m.state_dict().items()})
    np.testing.assert_array_equal(other.pdict["scale"].detach().numpy(), [3.0, 3.0, 3.0])
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "pdict.scale"'):
        other.load_state_dict({"plist.0": tinytorch.zeros(3, 3), "plist.1": tinytorch.zeros(3)})
    p0 = m.plist[0]
    m.double()
    assert m.plist[0] is p0 and p0.dtype == tinytorch.float64 and m.pdict["scale"].dtype == tinytorch.float64
    opt = tinytorch.optim.SGD(m.parameters(), lr=0.5)
    assert len(opt.param_groups[0]["params"]) == 3
    x = tinytorch.ones(1, 3, dtype=tinytorch.float64)
    m(x).sum().backward()  # d/dW0 = scale (=2) per row, d/dbias = 2, d/dscale = x@W0.T + b = 3
    opt.step()
    np.testing.assert_allclose(m.plist[0].detach().numpy(), np.full((3, 3), 1 - 0.5 * 2.0))
    np.testing.assert_allclose(m.plist[1].detach().numpy(), np.full(3, -0.5 * 2.0))
    np.testing.assert_allclose(m.pdict["scale"].detach().numpy(), np.full(3, 2 - 0.5 * 3.0))


# ----------------------------------------------------------------------------------------------------- 3-d norms

def _bn_ref(a, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, a.ndim))
    shape = (1, -1) + (1,) * (a.ndim - 2)
    mean, var = a.mean(axis=axes), a.var(axis=axes)
    y = (a - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) + b.reshape(shape)
    n = a.size / a.shape[1]
    return y, mean, var * n / (n - 1)


def test_batch_norm_3d_training_and_eval_match_numpy():
    a = RNG.standard_normal((2, 3, 2, 3, 2))
    m = nn.BatchNorm3d(3).double()
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    m.weight.data.copy_(_t(w))
    m.bias.data.copy_(_t(b))
    y, mean, unbiased = _bn_ref(a, w, b)
    np.testing.assert_allclose(m(_t(a)).detach().numpy(), y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), 0.9 + 0.1 * unbiased, rtol=1e-12)
    assert int(m.num_batches_tracked) == 1
    m.eval()
    rm, rv = m.running_mean.numpy(), m.running_var.numpy()
    want = (a - rm.reshape(1, 3, 1, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1, 1) + 1e-5) * w.reshape(1, 3, 1, 1, 1) \
        + b.reshape(1, 3, 1, 1, 1)
    np.testing.assert_allclose(m(_t(a)).detach().numpy(), want, rtol=1e-10, atol=1e-12)
    assert repr(m) == "BatchNorm3d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"


def test_batch_norm_3d_gradcheck_and_errors():
    m = nn.BatchNorm3d(2).double()
    x = _t(RNG.standard_normal((2, 2, 2, 2, 2)), requires_grad=True)
    assert gradcheck(m, (x,))
    m.eval()
    assert gradcheck(m, (x,))
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
        m(tinytorch.zeros(2, 2, 2, 2, dtype=tinytorch.float64))


def test_instance_norm_3d_matches_numpy():
    a = RNG.standard_normal((2, 3, 2, 3, 2))
    mean = a.mean(axis=(2, 3, 4), keepdims=True)
    var = a.var(axis=(2, 3, 4), keepdims=True)
    want = (a - mean) / np.sqrt(var + 1e-5)
    m = nn.InstanceNorm3d(3)
    np.testing.assert_allclose(m(_t(a)).numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m(_t(a[0])).numpy(), want[0], rtol=1e-10, atol=1e-12)  # (C, D, H, W) input
    affine = nn.InstanceNorm3d(3, affine=True, track_running_stats=True).double()
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    affine.weight.data.copy_(_t(w))
    affine.bias.data.copy_(_t(b))
    np.testing.assert_allclose(affine(_t(a)).detach().numpy(), want * w.reshape(1, 3, 1, 1, 1)
                               + b.reshape(1, 3, 1, 1, 1), rtol=1e-10, atol=1e-12)
    n = 12
    np.testing.assert_allclose(affine.running_mean.numpy(), 0.1 * mean.reshape(2, 3).mean(0), rtol=1e-10)
    np.testing.assert_allclose(affine.running_var.numpy(), 0.9 + 0.1 * (var * n / (n - 1)).reshape(2, 3).mean(0),
                               rtol=1e-10)
    assert repr(m) == "InstanceNorm3d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"


def test_instance_norm_3d_gradcheck_and_errors():
    x = _t(RNG.standard_normal((1, 2, 2, 2, 3)), requires_grad=True)
    assert gradcheck(nn.InstanceNorm3d(2, affine=True).double(), (x,))
    with pytest.raises(ValueError, match=r"expected 4D or 5D input \(got 3D input\)"):
        nn.InstanceNorm3d(3)(tinytorch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(3\), but got: 4"):
        nn.InstanceNorm3d(3, affine=True)(tinytorch.zeros(2, 4, 2, 2, 2))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm3d(3)(tinytorch.randn(2, 4, 2, 2, 2))


# ----------------------------------------------------------------------------------------------------- lazy modules

_USE_ERROR = "Attempted to use an uninitialized parameter in"


def test_uninitialized_parameter_and_buffer():
    p = nn.UninitializedParameter()
    assert isinstance(p, nn.Parameter) and is_lazy(p) and p.requires_grad
    assert repr(p) == "<UninitializedParameter>" and p.dtype == tinytorch.float32 and p.size() == (0,)
    assert p.device.type == "cpu" and p.is_floating_point()
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter or buffer"):
        p.shape
    for use in (lambda: p + 1, lambda: tinytorch.zeros(3) + p, lambda: p.sum(), lambda: p.dim(), lambda: len(p),
                lambda: p.clone(), lambda: nn.init.ones_(p), lambda: nn.functional.linear(tinytorch.ones(1, 2), p)):
        with pytest.raises(ValueError, match=_USE_ERROR):
            use()
    with pytest.raises(ValueError, match=r"in add\. .*`torch\.nn\.parameter\.UninitializedParameter` objects"):
        p + 1
    with pytest.raises(RuntimeError, match="Can't share memory on an uninitialized parameter"):
        p.share_memory_()
    q = nn.UninitializedParameter(requires_grad=False, dtype=tinytorch.float64)
    assert not q.requires_grad and q.dtype == tinytorch.float64
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.requires_grad and p.dtype == tinytorch.float32
    q.materialize(4, dtype=tinytorch.float32)
    assert type(q) is nn.Parameter and q.shape == (4,) and q.dtype == tinytorch.float32 and not q.requires_grad

    b = nn.UninitializedBuffer(dtype=tinytorch.float64)
    assert is_lazy(b) and not b.requires_grad and b.persistent and repr(b) == "<UninitializedBuffer>"
    b32 = b.to(tinytorch.float32)
    assert isinstance(b32, nn.UninitializedBuffer) and b32.dtype == tinytorch.float32 and b.to(tinytorch.float64) is b
    b.materialize((3,))
    assert type(b) is tinytorch.Tensor and b.shape == (3,) and b.dtype == tinytorch.float64
    assert not is_lazy(b) and not is_lazy(tinytorch.zeros(1))


def test_uninitialized_copy_and_pickle():
    p = nn.UninitializedParameter(dtype=tinytorch.float64)
    c = copy.deepcopy(p)
    assert type(c) is nn.UninitializedParameter and c is not p and c.dtype == tinytorch.float64 and c.requires_grad
    b = nn.UninitializedBuffer(persistent=False)
    cb = copy.deepcopy(b)
    assert type(cb) is nn.UninitializedBuffer and not cb.persistent
    r = pickle.loads(pickle.dumps(nn.UninitializedParameter(requires_grad=False)))
    assert type(r) is nn.UninitializedParameter and not r.requires_grad


def test_lazy_linear_lifecycle():
    m = nn.LazyLinear(3)
    assert isinstance(m, LazyModuleMixin) and isinstance(m, nn.Linear) and m.has_uninitialized_params()
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"] and all(type(v) is nn.UninitializedParameter for v in sd.values())
    assert sd["weight"] is m.weight  # saved as is: detaching would be a use
    weight = m.weight
    opt = tinytorch.optim.SGD(m.parameters(), lr=0.1)  # made before the dry run: it sees the same objects later
    m.double()
    assert weight.dtype == tinytorch.float64 and is_lazy(weight)
    a = RNG.standard_normal((4, 5))
    y = m(_t(a))
    assert type(m) is nn.Linear and m.in_features == 5 and m.weight is weight and type(weight) is nn.Parameter
    assert m.weight.shape == (3, 5) and m.bias.shape == (3,) and m.weight.dtype == tinytorch.float64
    assert not m._forward_pre_hooks and not m._load_state_dict_pre_hooks and not hasattr(m, "_initialize_hook")
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    bound = 1 / np.sqrt(5)
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    w, b = m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()
    np.testing.assert_allclose(y.detach().numpy(), a @ w.T + b, rtol=1e-12)
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(m.weight.detach().numpy(), w - 0.1 * a.sum(0)[None, :].repeat(3, 0), rtol=1e-12)
    x = _t(RNG.standard_normal((2, 5)), requires_grad=True)
    assert gradcheck(m, (x,))


def test_lazy_linear_without_bias_and_unbatched_and_dtype_device_arguments():
    m = nn.LazyLinear(2, bias=False, dtype=tinytorch.float64)
    assert m.bias is None and list(m.state_dict()) == ["weight"] and m.weight.dtype == tinytorch.float64
    assert m(tinytorch.ones(4, dtype=tinytorch.float64)).shape == (2,)
    assert m.weight.shape == (2, 4) and m.weight.dtype == tinytorch.float64


def test_lazy_module_state_dict_loading():
    src = nn.Linear(4, 2)
    dst = nn.LazyLinear(2)
    assert str(dst.load_state_dict(src.state_dict())) == "<All keys matched successfully>"
    assert type(dst) is nn.LazyLinear and type(dst.weight) is nn.Parameter  # materialised, module still lazy
    np.testing.assert_array_equal(dst.weight.detach().numpy(), src.weight.detach().numpy())
    x = tinytorch.randn(3, 4)
    np.testing.assert_allclose(dst(x).detach().numpy(), src(x).detach().numpy(), rtol=1e-6)
    assert type(dst) is nn.Linear and dst.in_features == 4
    with pytest.raises(AssertionError, match="in_features inferred from input: 5 is not equal to in_features"):
        late = nn.LazyLinear(2)
        late.load_state_dict(src.state_dict())
        late(tinytorch.randn(3, 5))

    fresh = nn.LazyLinear(2)  # uninitialised into uninitialised: nothing to copy, both stay lazy
    assert str(fresh.load_state_dict(nn.LazyLinear(2).state_dict())) == "<All keys matched successfully>"
    assert is_lazy(fresh.weight) and list(fresh._parameters) == ["weight", "bias"]
    res = fresh.load_state_dict({"weight": nn.UninitializedParameter()}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == []
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        fresh.load_state_dict({**nn.LazyLinear(2).state_dict(), "extra": tinytorch.zeros(1)})
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        nn.Linear(3, 2).load_state_dict(nn.LazyLinear(2).state_dict())


def test_lazy_module_deepcopy_is_independent():
    m = nn.LazyLinear(2)
    c = copy.deepcopy(m)
    c(tinytorch.zeros(1, 6))
    assert type(c) is nn.Linear and c.weight.shape == (2, 6)
    assert type(m) is nn.LazyLinear and is_lazy(m.weight)
    m(tinytorch.zeros(1, 3))
    assert m.weight.shape == (2, 3)


@pytest.mark.parametrize("cls,regular,x_shape,weight_shape", [
    ("LazyConv1d", "Conv1d", (2, 3, 7), (4, 3, 3)),
    ("LazyConv2d", "Conv2d", (3, 5, 5), (4, 3, 3, 3)),
    ("LazyConv3d", "Conv3d", (1, 3, 4, 4, 4), (4, 3, 3, 3, 3)),
    ("LazyConvTranspose1d", "ConvTranspose1d", (2, 3, 5), (3, 4, 3)),
    ("LazyConvTranspose2d", "ConvTranspose2d", (2, 3, 4, 4), (3, 4, 3, 3)),
    ("LazyConvTranspose3d", "ConvTranspose3d", (3, 2, 2, 2), (3, 4, 3, 3, 3)),
])
def test_lazy_convolutions_become_their_regular_class(cls, regular, x_shape, weight_shape):
    m = getattr(nn, cls)(4, 3, dtype=tinytorch.float64)
    nd = len(weight_shape) - 2
    assert repr(m).startswith(f"{cls}(0, 4, kernel_size={(3,) * nd}")
    x = _t(RNG.standard_normal(x_shape))
    y = m(x)
    assert type(m) is getattr(nn, regular) and m.in_channels == 3
    assert m.weight.shape == weight_shape and m.bias.shape == (4,)
    reg = getattr(nn, regular)(3, 4, 3, dtype=tinytorch.float64)
    reg.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(y.detach().numpy(), reg(x).detach().numpy())
    assert repr(m) == repr(reg)


def test_lazy_conv_groups_padding_mode_and_errors():
    m = nn.LazyConv2d(4, 3, padding=1, groups=2, bias=False, padding_mode="reflect")
    assert m.bias is None and list(m.state_dict()) == ["weight"]
    assert m(tinytorch.randn(1, 6, 5, 5)).shape == (1, 4, 5, 5) and m.weight.shape == (4, 3, 3, 3)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(tinytorch.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d, but "
                                           r"got input of size: torch.Size\(\[5, 5\]\)"):
        nn.LazyConv2d(4, 3)(tinytorch.randn(5, 5))
    t = nn.LazyConvTranspose1d(2, 3, stride=2)
    assert t(tinytorch.randn(1, 3, 4), output_size=[10]).shape == (1, 2, 10)


@pytest.mark.parametrize("cls,regular,shape", [
    ("LazyBatchNorm1d", "BatchNorm1d", (4, 3)), ("LazyBatchNorm1d", "BatchNorm1d", (4, 3, 5)),
    ("LazyBatchNorm2d", "BatchNorm2d", (2, 3, 2, 2)), ("LazyBatchNorm3d", "BatchNorm3d", (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", "InstanceNorm1d", (2, 3, 5)), ("LazyInstanceNorm2d", "InstanceNorm2d", (2, 3, 2, 3)),
    ("LazyInstanceNorm3d", "InstanceNorm3d", (2, 3, 2, 2, 3)),
])
def test_lazy_norms_become_their_regular_class(cls, regular, shape):
    m = getattr(nn, cls)(dtype=tinytorch.float64)
    assert repr(m) == (f"{cls}(0, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)")
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert [type(v).__name__ for v in sd.values()] == ["UninitializedParameter"] * 2 + ["UninitializedBuffer"] * 2 \
        + ["Tensor"]
    a = RNG.standard_normal(shape)
    y = m(_t(a))
    assert type(m) is getattr(nn, regular) and m.num_features == 3
    assert type(m.running_mean) is tinytorch.Tensor and m.running_mean.dtype == tinytorch.float64
    assert m.weight.shape == m.bias.shape == m.running_var.shape == (3,)
    assert int(m.num_batches_tracked) == (1 if "Batch" in cls else 0)  # instance norms do not count batches
    reg = getattr(nn, regular)(3, affine=True, track_running_stats=True, dtype=tinytorch.float64)
    np.testing.assert_allclose(y.detach().numpy(), reg(_t(a)).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), reg.running_var.numpy(), rtol=1e-12)


def test_lazy_norm_options_and_errors():
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert m.state_dict() == OrderedDict() and not m.has_uninitialized_params()
    m(tinytorch.randn(4, 3))
    assert type(m) is nn.BatchNorm1d and m.num_features == 0  # nothing to infer, as in PyTorch
    m = nn.LazyBatchNorm2d(bias=False)
    m(tinytorch.randn(2, 3, 2, 2))
    assert list(m.state_dict()) == ["weight", "running_mean", "running_var", "num_batches_tracked"]
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
        nn.LazyBatchNorm3d()(tinytorch.randn(2, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.LazyInstanceNorm1d()(tinytorch.randn(2, 3, 2, 2))
    src = nn.BatchNorm1d(4)
    dst = nn.LazyBatchNorm1d()
    dst.load_state_dict(src.state_dict())
    assert type(dst) is nn.LazyBatchNorm1d and dst.running_mean.shape == (4,) and not dst.has_uninitialized_params()


def test_lazy_module_mixin_contract():
    class Half(LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.register_parameter("w", nn.UninitializedParameter())

        def initialize_parameters(self, x):
            pass  # leaves w uninitialised

    with pytest.raises(RuntimeError, match="module Half has not been fully initialized"):
        Half()(tinytorch.zeros(2))

    class Bare(LazyModuleMixin, nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="initialize_parameters is not implemented for Bare"):
        Bare()(tinytorch.zeros(2))


def test_lazy_network_trains():
    tinytorch.manual_seed(1)
    net = nn.Sequential(nn.LazyConv2d(4, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(),
                        nn.LazyLinear(2))
    assert "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in repr(net)
    x, target = tinytorch.randn(8, 2, 4, 4), tinytorch.randn(8, 2)
    net(x)  # the dry run
    assert [type(m).__name__ for m in net] == ["Conv2d", "BatchNorm2d", "ReLU", "Flatten", "Linear"]
    assert [tuple(p.shape) for p in net.parameters()] == [(4, 2, 3, 3), (4,), (4,), (4,), (2, 64), (2,)]
    opt = tinytorch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


# ----------------------------------------------------------------------------------------------------- PyTorch

@needs_torch
@pytest.mark.parametrize("name", sorted(_PAD_CLASSES))
def test_padding_matches_pytorch(name):
    import torch
    mode, nd = _PAD_CLASSES[name]
    a = RNG.standard_normal((2, 2) + (3, 4, 3)[:nd])
    for padding in (1, (2, 0, 1, 2, 0, 1)[:2 * nd], (-1, 2, 0, 1, 1, -1)[:2 * nd]):
        if mode != "constant" and not isinstance(padding, int) and min(padding) < 0:
            continue  # see test_circular_padding_with_a_negative_side_wraps_the_cropped_input
        args = (padding, 2.5) if name.startswith("Constant") else (padding,)
        mt, mp = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(mt) == repr(mp)
        x, xp = _t(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        yt, yp = mt(x), mp(xp)
        np.testing.assert_array_equal(yt.detach().numpy(), yp.detach().numpy())
        g = RNG.standard_normal(tuple(yp.shape))
        yt.backward(_t(g))
        yp.backward(torch.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), xp.grad.numpy(), rtol=1e-12)


@needs_torch
def test_containers_and_unflatten_match_pytorch():
    import torch

    def describe(L):
        pl = L.nn.ParameterList([L.nn.Parameter(L.zeros(2, 3)), L.zeros(3, dtype=L.float64), 5])
        pd = L.nn.ParameterDict({"b": L.zeros(2), "a": L.nn.Parameter(L.zeros(1, 2)), "c": None})
        pd.update([("d", L.ones(1))])
        m = L.nn.Module()
        m.pl, m.pd = pl, pd
        return (repr(m).replace("tinytorch.", "torch."), list(m.state_dict()), [n for n, _ in m.named_parameters()],
                list(pd.keys()), len(pl), len(pl[::2]))

    assert describe(tinytorch) == describe(torch)
    a = RNG.standard_normal((2, 6, 4))
    for dim, sizes in ((1, (2, 3)), (-1, [2, -1]), (0, (2, 1))):
        mt, mp = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
        assert repr(mt) == repr(mp)
        np.testing.assert_array_equal(mt(_t(a)).numpy(), mp(torch.tensor(a)).numpy())


@needs_torch
@pytest.mark.parametrize("name,shape", [("BatchNorm3d", (2, 3, 2, 3, 2)), ("InstanceNorm3d", (2, 3, 2, 3, 2)),
                                        ("InstanceNorm3d", (3, 2, 3, 2))])
def test_3d_norms_match_pytorch(name, shape):
    import torch
    a = RNG.standard_normal(shape)
    kw = {"affine": True, "track_running_stats": True, "momentum": None}
    mt, mp = getattr(nn, name)(3, **kw).double(), getattr(torch.nn, name)(3, **kw).double()
    assert repr(mt) == repr(mp)
    for _ in range(2):
        x, xp = _t(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        yt, yp = mt(x), mp(xp)
        np.testing.assert_allclose(yt.detach().numpy(), yp.detach().numpy(), rtol=1e-10, atol=1e-12)
        (yt * yt).sum().backward()
        (yp * yp).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xp.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(mt.weight.grad.numpy(), mp.weight.grad.numpy(), rtol=1e-8, atol=1e-10)
    for k, v in mp.state_dict().items():
        np.testing.assert_allclose(mt.state_dict()[k].numpy(), v.numpy(), rtol=1e-12)
    mt.eval()
    mp.eval()
    np.testing.assert_allclose(mt(_t(a)).detach().numpy(), mp(torch.tensor(a)).detach().numpy(), rtol=1e-10,
                               atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("LazyLinear", (3,), {}, (2, 5)),
    ("LazyLinear", (3,), {"bias": False}, (5,)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 6)),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (1, 4, 5, 5)),
    ("LazyConv3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyConvTranspose1d", (4, 3), {"output_padding": 1, "stride": 2}, (2, 3, 4)),
    ("LazyConvTranspose2d", (4, 3), {"dilation": 2}, (3, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 2, 2, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"affine": False}, (2, 3, 2, 2)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 4)),
    ("LazyInstanceNorm2d", (), {"bias": False}, (2, 3, 2, 2)),
    ("LazyInstanceNorm3d", (), {}, (2, 3, 2, 2, 2)),
])
def test_lazy_modules_match_pytorch(name, args, kwargs, shape):
    import torch
    mt, mp = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(mt) == repr(mp)
    assert {k: repr(v) for k, v in mt.state_dict().items()} == {k: repr(v) for k, v in mp.state_dict().items()}
    assert [n for n, _ in mt.named_parameters()] == [n for n, _ in mp.named_parameters()]
    assert [repr(p) for p in mt.parameters()] == [repr(p) for p in mp.parameters()]
    mt.double()
    mp.double()
    a = RNG.standard_normal(shape)
    mp(torch.tensor(a))
    yt = mt(_t(a))
    assert type(mt).__name__ == type(mp).__name__ and repr(mt) == repr(mp)
    sd = mp.state_dict()
    assert list(mt.state_dict()) == list(sd)
    assert {k: tuple(v.shape) for k, v in mt.state_dict().items()} == {k: tuple(v.shape) for k, v in sd.items()}
    assert all(str(v.dtype) == str(sd[k].dtype) for k, v in mt.state_dict().items())
    mt.load_state_dict({k: _t(v.numpy()) for k, v in sd.items()})
    mt.train(mp.training)
    yt, yp = mt(_t(a)), mp(torch.tensor(a))
    np.testing.assert_allclose(yt.detach().numpy(), yp.detach().numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
def test_uninitialized_errors_match_pytorch():
    import torch
    for L in (tinytorch, torch):
        p = L.nn.UninitializedParameter()
        with pytest.raises(ValueError, match=_USE_ERROR):
            p + 1
        with pytest.raises(ValueError, match=_USE_ERROR):
            p.dim()
        with pytest.raises(RuntimeError, match="Can't access the shape"):
            p.shape
        assert p.ndim == 1 and p.size() == (0,) and p.get_device() == -1 and p.is_floating_point()
        assert type(L.nn.UninitializedBuffer().to(L.float64)) is L.nn.UninitializedBuffer
