"""nn.Module semantics (registration, traversal, state_dict, hooks, to/apply, repr), the layers,
nn.init and clip_grad_norm_; compared with PyTorch where it is importable."""
import copy
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("running", tinytorch.zeros(4))
        self.register_buffer("scratch", tinytorch.ones(2), persistent=False)
        self.scale = nn.Parameter(tinytorch.tensor(2.0))

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.head(self.block(x))


# ------------------------------------------------------------------ registration and traversal

def test_attribute_registration_and_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "block.norm.weight", "block.norm.bias",
                     "head.weight"]
    assert [n for n, _ in net.named_buffers()] == ["block.running", "block.scratch"]
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "block.norm", "head"]
    assert len(list(net.parameters(recurse=False))) == 0
    assert [n for n, _ in net.block.named_parameters(recurse=False)] == ["scale"]
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.get_parameter("block.fc.bias") is net.block.fc.bias
    assert net.get_buffer("block.running") is net.block.running
    with pytest.raises(AttributeError, match="Block has no attribute `nope`"):
        net.get_submodule("block.nope")
    with pytest.raises(AttributeError, match="`running` is not an nn.Parameter"):
        net.get_parameter("block.running")


def test_setattr_getattr_delattr_semantics():
    m = nn.Module()
    m.w = nn.Parameter(tinytorch.ones(2))
    assert "w" in m._parameters and "w" not in m.__dict__
    with pytest.raises(TypeError, match=r"cannot assign 'torch.FloatTensor' as parameter 'w' "
                                        r"\(torch.nn.Parameter or None expected\)"):
        m.w = tinytorch.ones(2)
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    m.register_buffer("b", tinytorch.zeros(1))
    m.b = tinytorch.ones(1)  # assigning a tensor to a buffer name replaces the buffer
    assert m._buffers["b"].tolist() == [1.0]
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'b'"):
        m.b = 3
    m.sub = nn.Linear(1, 1)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"):
        m.sub = 3
    # A parameter assigned where a plain attribute lived moves into _parameters.
    m.plain = 1
    m.plain = nn.Parameter(tinytorch.zeros(1))
    assert "plain" in m._parameters and "plain" not in m.__dict__
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'sub'"):
        m.sub
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.register_buffer("plain", tinytorch.zeros(1))
    with pytest.raises(KeyError) as e:
        m.register_buffer("a.b", None)
    assert e.value.args[0] == 'buffer name can\'t contain "."'
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' object to parameter 'q'"):
        m.register_parameter("q", tinytorch.zeros(1))
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'r'"):
        p = nn.Parameter(tinytorch.ones(1))
        q = p * 2
        q.__class__ = nn.Parameter
        m.register_parameter("r", q)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(tinytorch.ones(1))
    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Early()


def test_shared_parameters_are_deduplicated():
    a = nn.Linear(2, 2)
    seq = nn.Sequential(a, nn.ReLU(), a)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_modules())) == 3  # seq, a (once), ReLU
    tied = nn.Module()
    tied.emb = nn.Embedding(5, 2)
    tied.out = nn.Linear(2, 5, bias=False)
    tied.out.weight = tied.emb.weight
    assert [n for n, _ in tied.named_parameters()] == ["emb.weight"]
    assert len(list(tied.named_parameters(remove_duplicate=False))) == 2
    # state_dict keeps both names (as PyTorch does): loading must fill both.
    assert list(tied.state_dict()) == ["emb.weight", "out.weight"]


# ------------------------------------------------------------------ state_dict

def test_state_dict_round_trip_and_persistence():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert list(sd) == ["block.scale", "block.running", "block.fc.weight", "block.fc.bias", "block.norm.weight",
                        "block.norm.bias", "head.weight"]
    assert "block.scratch" not in sd  # non-persistent buffers are not saved
    assert not sd["block.fc.weight"].requires_grad and type(sd["block.fc.weight"]) is tinytorch.Tensor
    assert np.shares_memory(sd["head.weight"].numpy(), a.head.weight.detach().numpy())
    w_before = b.head.weight
    v0 = b.head.weight._version
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert b.head.weight is w_before and b.head.weight._version > v0  # copied in place
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())
    kv = a.state_dict(keep_vars=True)
    assert kv["head.weight"] is a.head.weight


def test_strict_load_errors_match_pytorch_text():
    net = Net()
    sd = net.state_dict()
    del sd["head.weight"]
    sd["block.extra"] = tinytorch.zeros(1)
    sd["block.fc.bias"] = tinytorch.zeros(7)
    with pytest.raises(RuntimeError) as e:
        Net().load_state_dict(sd)
    assert str(e.value) == (
        "Error(s) in loading state_dict for Net:\n"
        '\tMissing key(s) in state_dict: "head.weight". \n'
        '\tUnexpected key(s) in state_dict: "block.extra". \n'
        "\tsize mismatch for block.fc.bias: copying a param with shape torch.Size([7]) from checkpoint, "
        "the shape in current model is torch.Size([4]).")
    del sd["block.fc.bias"]
    res = Net().load_state_dict(sd, strict=False)
    assert res.missing_keys == ["block.fc.bias", "head.weight"]
    assert res.unexpected_keys == ["block.extra"]
    assert "missing_keys=['block.fc.bias', 'head.weight']" in repr(res)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        Net().load_state_dict([1, 2])


def test_strict_load_matches_torch_message():
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    mm = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    tsd = tm.state_dict()
    del tsd["1.bias"]
    tsd["2.weight"] = torch.zeros(1)
    msd = {k: tinytorch.tensor(v.numpy()) for k, v in tsd.items()}
    with pytest.raises(RuntimeError) as te:
        tm.load_state_dict(tsd)
    with pytest.raises(RuntimeError) as me:
        mm.load_state_dict(msd)
    assert str(me.value) == str(te.value)


def test_load_state_dict_assign_and_post_hook():
    a = nn.Linear(2, 2)
    src = {"weight": tinytorch.ones(2, 2), "bias": tinytorch.zeros(2)}
    seen = []
    a.register_load_state_dict_post_hook(lambda m, keys: seen.append(tuple(keys.missing_keys)))
    a.load_state_dict(src, assign=True)
    assert isinstance(a.weight, nn.Parameter) and a.weight.requires_grad
    assert np.shares_memory(a.weight.detach().numpy(), src["weight"].numpy())
    assert seen == [()]


# ------------------------------------------------------------------ modes, grads, conversion

def test_train_eval_zero_grad_requires_grad_apply():
    net = Net()
    net.eval()
    assert all(not m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("yes")
    out = net(tinytorch.randn(5, 3)).sum()
    out.backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "LayerNorm", "Block", "Linear", "Net"]


def test_to_keeps_parameter_identity_and_casts_floating_only():
    net = Net()
    net.register_buffer("steps", tinytorch.tensor([3]))
    w = net.head.weight
    net(tinytorch.randn(2, 3)).sum().backward()
    net.to(tinytorch.float64)
    assert net.head.weight is w and w.dtype is tinytorch.float64 and w.grad.dtype is tinytorch.float64
    assert net.steps.dtype is tinytorch.int64  # integer buffers keep their dtype
    assert net.block.running.dtype is tinytorch.float64
    net.float()
    assert w.dtype is tinytorch.float32
    assert net.to("cpu") is net
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        net.to(tinytorch.int32)


def test_to_cuda_moves_data_in_place():
    if not tinytorch.cuda.is_available():
        pytest.skip("needs a GPU")
    net = Net()
    w = net.head.weight
    net.to("cuda")
    assert net.head.weight is w and w.is_cuda and net.block.running.is_cuda
    out = net(tinytorch.randn(2, 3, device="cuda"))
    out.sum().backward()
    assert w.grad.is_cuda


def test_forward_hooks_pre_hooks_and_removal():
    lin = nn.Linear(2, 2)
    calls = []

    def pre(m, args):
        calls.append("pre")
        return (args[0] * 0,)

    def pre_kw(m, args, kwargs):
        calls.append("pre_kw")
        return args, kwargs

    def post(m, args, out):
        calls.append("post")
        return out + 1

    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_pre_hook(pre_kw, with_kwargs=True, prepend=True)
    h3 = lin.register_forward_hook(post)
    out = lin(tinytorch.ones(1, 2))
    assert calls == ["pre_kw", "pre", "post"]
    np.testing.assert_allclose(out.detach().numpy(), lin.bias.detach().numpy()[None] + 1, rtol=1e-6)
    for h in (h1, h2, h3):
        h.remove()
    calls.clear()
    lin(tinytorch.ones(1, 2))
    assert calls == []

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    seen = []
    b.register_forward_hook(lambda m, a, o: seen.append(o), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        b(1)
    assert seen == [None]
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required "forward" function'):
        nn.Module()(1)


def test_repr_matches_pytorch():
    net = nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.Sequential(nn.Dropout(0.1), nn.GELU(approximate="tanh")))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=2, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "    (1): GELU(approximate='tanh')\n"
        "  )\n"
        ")")
    assert repr(nn.LayerNorm(8)) == "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.Tanh()])
    assert repr(ml) == ("ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n"
                        "  (3): Tanh()\n)")
    p = nn.Parameter(tinytorch.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"


def test_repr_equals_torch_repr():
    torch = pytest.importorskip("torch")

    def build(lib):
        return lib.nn.Sequential(lib.nn.Embedding(7, 4, padding_idx=1), lib.nn.LayerNorm(4, bias=False),
                                 lib.nn.ModuleDict({"a": lib.nn.Linear(4, 4, bias=False), "b": lib.nn.Identity()}),
                                 lib.nn.ModuleList([lib.nn.Sigmoid(), lib.nn.Sigmoid()]), lib.nn.MSELoss())
    assert repr(build(tinytorch)) == repr(build(torch))


def test_deepcopy_module():
    net = Net()
    clone = copy.deepcopy(net)
    assert clone.head.weight is not net.head.weight
    assert isinstance(clone.head.weight, nn.Parameter) and clone.head.weight.requires_grad
    np.testing.assert_array_equal(clone.head.weight.detach().numpy(), net.head.weight.detach().numpy())


# ------------------------------------------------------------------ Parameter

def test_parameter_shares_memory_and_requires_grad():
    t = tinytorch.zeros(3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and isinstance(p, tinytorch.Tensor)
    assert np.shares_memory(p.detach().numpy(), t.numpy())
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert type(p * 2) is tinytorch.Tensor


# ------------------------------------------------------------------ containers

def test_sequential_indexing_slicing_append_delete():
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[0] is layers[0] and seq[-1] is layers[2]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub._modules) == ["1", "2"]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    seq.append(nn.Tanh())
    assert len(seq) == 4 and isinstance(seq[3], nn.Tanh)
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"] and isinstance(seq[0], nn.ReLU)
    x = tinytorch.tensor([[-1.0, 2.0]])
    expected = tinytorch.tanh(layers[2](layers[1](x)))
    np.testing.assert_allclose(seq(x).detach().numpy(), expected.detach().numpy())
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(1, 1)), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_children()] == ["fc", "act"]


def test_modulelist_and_moduledict():
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml += [nn.Sigmoid()]
    assert len(ml) == 4 and isinstance(ml[-1], nn.Sigmoid) and isinstance(ml[1:3], nn.ModuleList)
    ml.insert(0, nn.Identity())
    assert isinstance(ml[0], nn.Identity) and isinstance(ml[1], nn.Linear)
    assert len(list(ml.parameters())) == 2
    md = nn.ModuleDict({"a": nn.Linear(1, 2)})
    md["b"] = nn.Linear(2, 1)
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    popped = md.pop("a")
    assert isinstance(popped, nn.Linear) and list(md) == ["b"]


# ------------------------------------------------------------------ layers and their defaults

def test_linear_default_init_bounds_and_forward():
    tinytorch.manual_seed(0)
    lin = nn.Linear(400, 300)
    w = lin.weight.detach().numpy()
    b = lin.bias.detach().numpy()
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives exactly 1/sqrt(fan_in)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    x = tinytorch.randn(3, 400)
    np.testing.assert_allclose(lin(x).detach().numpy(), x.numpy() @ w.T + b, rtol=1e-4, atol=1e-5)
    assert nn.Linear(3, 2, bias=False).bias is None


def test_embedding_padding_idx_and_layernorm_defaults():
    emb = nn.Embedding(6, 4, padding_idx=-1)
    assert emb.padding_idx == 5
    assert np.all(emb.weight.detach().numpy()[5] == 0)
    idx = tinytorch.tensor([[0, 5], [2, 2]])
    out = emb(idx)
    assert tuple(out.shape) == (2, 2, 4)
    out.sum().backward()
    g = emb.weight.grad.numpy()
    assert np.all(g[5] == 0) and np.all(g[2] == 2) and np.all(g[0] == 1)
    ln = nn.LayerNorm((2, 3), elementwise_affine=True, bias=False)
    assert ln.bias is None and np.all(ln.weight.detach().numpy() == 1)
    x = tinytorch.randn(4, 2, 3)
    ref = x.numpy()
    mu = ref.mean(axis=(1, 2), keepdims=True)
    var = ref.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(ln(x).detach().numpy(), (ref - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None


def test_dropout_and_activations():
    d = nn.Dropout(0.5)
    x = tinytorch.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 300 < (y == 0).sum() < 700
    d.eval()
    assert d(x) is x or np.array_equal(d(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)
    x = tinytorch.tensor([-2.0, 0.0, 3.0])
    assert nn.ReLU()(x).tolist() == [0.0, 0.0, 3.0]
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-x.numpy())), rtol=1e-6)
    e = np.exp(x.numpy())
    np.testing.assert_allclose(nn.Softmax(dim=0)(x).numpy(), e / e.sum(), rtol=1e-6)
    assert nn.Identity(1, k=2)(x) is x
    gelu = nn.GELU()(x).numpy()
    from math import erf
    np.testing.assert_allclose(gelu, [v * 0.5 * (1 + erf(v / math.sqrt(2))) for v in x.tolist()], rtol=1e-5, atol=1e-7)


def test_losses_match_hand_formulas():
    logits = tinytorch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0]])
    target = tinytorch.tensor([0, 2, -100])
    lg = logits.numpy()
    logp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
    expected = -(logp[0, 0] + logp[1, 2]) / 2  # the ignored row is excluded from the mean
    np.testing.assert_allclose(float(nn.CrossEntropyLoss()(logits, target)), expected, rtol=1e-6)
    w = tinytorch.tensor([1.0, 2.0, 3.0])
    expected_w = -(1 * logp[0, 0] + 3 * logp[1, 2]) / (1 + 3)
    np.testing.assert_allclose(float(nn.CrossEntropyLoss(weight=w)(logits, target)), expected_w, rtol=1e-6)
    eps = 0.1
    t2 = tinytorch.tensor([0, 2, 1])
    smooth = [-(1 - eps) * logp[i, t] - eps / 3 * logp[i].sum() for i, t in enumerate([0, 2, 1])]
    np.testing.assert_allclose(float(nn.CrossEntropyLoss(label_smoothing=eps)(logits, t2)), np.mean(smooth),
                               rtol=1e-6)
    per = nn.CrossEntropyLoss(reduction="none")(logits, t2).numpy()
    np.testing.assert_allclose(per, [-logp[0, 0], -logp[1, 2], -logp[2, 1]], rtol=1e-6)
    a, b = tinytorch.tensor([1.0, 2.0, 4.0]), tinytorch.tensor([0.0, 2.0, 1.0])
    assert float(nn.MSELoss()(a, b)) == pytest.approx(10 / 3)
    assert float(nn.MSELoss(reduction="sum")(a, b)) == pytest.approx(10.0)
    assert nn.CrossEntropyLoss(weight=w).weight is w and "weight" in dict(nn.CrossEntropyLoss(weight=w).named_buffers())


# ------------------------------------------------------------------ init

def test_init_functions_write_in_place_under_no_grad():
    w = nn.Parameter(tinytorch.empty(200, 100))
    v0 = w._version
    out = nn.init.xavier_uniform_(w)
    assert out is w and w._version > v0 and w.grad_fn is None and w.requires_grad
    a = math.sqrt(6 / 300)
    arr = w.detach().numpy()
    assert arr.max() <= a and arr.max() > 0.95 * a
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.detach().numpy().std() - math.sqrt(2 / 200)) < 0.05 * math.sqrt(2 / 200)
    nn.init.xavier_normal_(w, gain=2.0)
    assert abs(w.detach().numpy().std() - 2 * math.sqrt(2 / 300)) < 0.05 * 2 * math.sqrt(2 / 300)
    nn.init.trunc_normal_(w, mean=0.5, std=1.0, a=0.0, b=1.0)
    arr = w.detach().numpy()
    assert arr.min() >= 0.0 and arr.max() <= 1.0 and abs(arr.mean() - 0.5) < 0.02
    nn.init.constant_(w, 0.25)
    assert np.all(w.detach().numpy() == 0.25)
    nn.init.zeros_(w)
    assert not w.detach().numpy().any()
    nn.init.ones_(w)
    assert np.all(w.detach().numpy() == 1)
    nn.init.normal_(w, mean=3.0, std=0.5)
    assert abs(w.detach().numpy().mean() - 3.0) < 0.01
    nn.init.uniform_(w, -2, -1)
    assert w.detach().numpy().min() >= -2 and w.detach().numpy().max() < -1
    g = tinytorch.Generator().manual_seed(5)
    x1 = nn.init.normal_(tinytorch.empty(4), generator=g).tolist()
    g.manual_seed(5)
    assert nn.init.normal_(tinytorch.empty(4), generator=g).tolist() == x1


def test_calculate_gain_and_fan_errors():
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert nn.init.calculate_gain("conv2d") == 1
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        nn.init.calculate_gain("foo")
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed"):
        nn.init.xavier_uniform_(tinytorch.empty(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_uniform_(tinytorch.empty(3, 3), mode="fan_avg")


# ------------------------------------------------------------------ clip_grad

def _with_grads(grads):
    ps = []
    for g in grads:
        p = nn.Parameter(tinytorch.zeros(*np.shape(g)))
        p.grad = tinytorch.tensor(g, dtype=tinytorch.float32)
        ps.append(p)
    return ps


def test_clip_grad_norm_scales_and_returns_total_norm():
    ps = _with_grads([[3.0, 0.0], [[4.0]]])
    total = nn.utils.clip_grad_norm_(ps, max_norm=1.0)
    assert isinstance(total, tinytorch.Tensor) and float(total) == pytest.approx(5.0)
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(ps[0].grad.numpy(), [3 * coef, 0.0], rtol=1e-6)
    np.testing.assert_allclose(ps[1].grad.numpy(), [[4 * coef]], rtol=1e-6)
    ps = _with_grads([[0.3, 0.4]])
    nn.utils.clip_grad_norm_(ps, max_norm=10.0)
    np.testing.assert_allclose(ps[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)  # under the limit: unchanged
    ps = _with_grads([[1.0, -7.0], [2.0]])
    assert float(nn.utils.clip_grad_norm_(ps, 3.0, norm_type=math.inf)) == 7.0
    np.testing.assert_allclose(ps[0].grad.numpy(), [3 / (7 + 1e-6), -21 / (7 + 1e-6)], rtol=1e-6)
    ps = _with_grads([[float("nan"), 1.0]])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is "
                                           "non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert float(nn.utils.clip_grad_norm_([nn.Parameter(tinytorch.ones(2))], 1.0)) == 0.0
    ps = _with_grads([[-5.0, 0.5, 2.0]])
    nn.utils.clip_grad_value_(ps, 1.0)
    assert ps[0].grad.tolist() == [-1.0, 0.5, 1.0]


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((7, 5)).astype(np.float32), rng.standard_normal(11).astype(np.float32)]
    for norm_type in (2.0, 1.0, math.inf):
        tps = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for p, g in zip(tps, grads):
            p.grad = torch.tensor(g)
        mps = _with_grads([g.tolist() for g in grads])
        tn = torch.nn.utils.clip_grad_norm_(tps, 0.5, norm_type=norm_type)
        mn = nn.utils.clip_grad_norm_(mps, 0.5, norm_type=norm_type)
        assert float(mn) == pytest.approx(float(tn), rel=1e-6)
        for tp, mp in zip(tps, mps):
            np.testing.assert_allclose(mp.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_parameters_to_vector_round_trip():
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(vec.shape) == (8,)
    np.testing.assert_array_equal(vec.detach().numpy()[:6], lin.weight.detach().numpy().reshape(-1))
    nn.utils.vector_to_parameters(tinytorch.arange(8, dtype=tinytorch.float32), lin.parameters())
    assert lin.bias.tolist() == [6.0, 7.0]


def test_functional_namespace_is_exposed():
    assert nn.functional is F and callable(F.cross_entropy)


def test_more_losses_and_activations_by_hand():
    a, b = tinytorch.tensor([1.0, -2.0, 0.5]), tinytorch.tensor([0.0, 0.0, 1.0])
    assert float(nn.L1Loss()(a, b)) == pytest.approx((1 + 2 + 0.5) / 3)
    assert float(nn.SmoothL1Loss()(a, b)) == pytest.approx((0.5 + 1.5 + 0.125) / 3)
    assert float(nn.HuberLoss(delta=0.5)(a, b)) == pytest.approx((0.5 * 0.75 + 0.5 * 1.75 + 0.125) / 3)
    x, t = a.numpy(), b.numpy()
    bce = np.mean(np.log1p(np.exp(-x)) + (1 - t) * x)
    assert float(nn.BCEWithLogitsLoss()(a, b)) == pytest.approx(bce, rel=1e-6)
    probs = tinytorch.tensor([0.9, 0.2])
    assert float(nn.BCELoss()(probs, tinytorch.tensor([1.0, 0.0]))) == pytest.approx(
        -(math.log(0.9) + math.log(0.8)) / 2, rel=1e-6)
    logp = tinytorch.tensor([[-0.1, -2.0], [-1.5, -0.3]])
    assert float(nn.NLLLoss()(logp, tinytorch.tensor([0, 1]))) == pytest.approx(0.2)
    assert nn.LeakyReLU(0.1)(a).tolist() == pytest.approx([1.0, -0.2, 0.5])
    assert nn.ELU()(a).tolist() == pytest.approx([1.0, math.exp(-2) - 1, 0.5])
    assert nn.Softplus()(a).tolist() == pytest.approx(np.log1p(np.exp(x)).tolist(), rel=1e-6)
    assert tuple(nn.Flatten()(tinytorch.zeros(2, 3, 4)).shape) == (2, 12)


@pytest.mark.parametrize("name,args", [
    ("LeakyReLU", (0.2,)), ("ELU", (0.5,)), ("Softplus", (2.0, 5.0)), ("SiLU", ()), ("LogSoftmax", (1,)),
    ("GELU", ("tanh",)), ("Flatten", (0,)),
])
def test_activation_modules_match_torch(name, args):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ours = getattr(nn, name)(*args)
    theirs = getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(tinytorch.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs,target", [
    ("NLLLoss", {"ignore_index": 1}, "class"), ("L1Loss", {}, "real"), ("SmoothL1Loss", {"beta": 0.5}, "real"),
    ("HuberLoss", {"delta": 0.7}, "real"), ("BCEWithLogitsLoss", {}, "prob"), ("MSELoss", {"reduction": "sum"}, "real"),
    ("CrossEntropyLoss", {"label_smoothing": 0.2, "reduction": "none"}, "class"),
])
def test_loss_modules_match_torch(name, kwargs, target):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = {"class": rng.integers(0, 3, 5), "real": rng.standard_normal((5, 3)).astype(np.float32),
         "prob": rng.random((5, 3)).astype(np.float32)}[target]
    if name == "NLLLoss":
        x = x - np.log(np.exp(x).sum(1, keepdims=True))
    ours = getattr(nn, name)(**kwargs)(tinytorch.tensor(x), tinytorch.tensor(y)).detach().numpy()
    theirs = getattr(torch.nn, name)(**kwargs)(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def _hooked_linear(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(np.arange(6.0).reshape(2, 3), dtype=lib.float32))
        lin.bias.zero_()
    log = []

    def pre(m, grad_output):
        log.append(("pre", [g.tolist() for g in grad_output]))
        return (grad_output[0] * 2,)

    def full(m, grad_input, grad_output):
        log.append(("full", [None if g is None else g.tolist() for g in grad_input], [g.tolist() for g in grad_output]))
    lin.register_full_backward_pre_hook(pre)
    lin.register_full_backward_hook(full)
    return lin, log


def test_full_backward_hooks_by_hand():
    lin, log = _hooked_linear(tinytorch)
    x = tinytorch.ones(1, 3, requires_grad=True)
    lin(x).sum().backward()
    # grad_output doubled by the pre-hook; grad_input = 2 * ones(1, 2) @ W.
    assert log == [("pre", [[[1.0, 1.0]]]), ("full", [[[6.0, 10.0, 14.0]]], [[[2.0, 2.0]]])]
    assert x.grad.tolist() == [[6.0, 10.0, 14.0]] and lin.weight.grad.tolist() == [[2.0] * 3] * 2
    log.clear()
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with respect to "
                                         "module outputs"):
        lin(tinytorch.ones(1, 3)).sum().backward()
    assert log == [("pre", [[[1.0, 1.0]]]), ("full", [None], [[[2.0, 2.0]]])]
    # A full hook's result replaces grad_input.
    lin2 = nn.Linear(2, 2)
    lin2.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x = tinytorch.ones(1, 2, requires_grad=True)
    lin2(x).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]] and lin2.weight.grad is not None
    with tinytorch.no_grad():
        lin2(x)  # no graph: hooks are not armed and nothing fails


def test_full_backward_hooks_match_torch():
    torch = pytest.importorskip("torch")
    logs = []
    for lib in (tinytorch, torch):
        lin, log = _hooked_linear(lib)
        x = lib.tensor([[1.0, -2.0, 0.5]], requires_grad=True)
        (lin(x) ** 2).sum().backward()
        logs.append((log, x.grad.tolist()))
    np.testing.assert_allclose(logs[0][1], logs[1][1], rtol=1e-6)
    (ours, theirs) = (logs[0][0], logs[1][0])
    assert [e[0] for e in ours] == [e[0] for e in theirs] == ["pre", "full"]
    np.testing.assert_allclose(ours[0][1], theirs[0][1], rtol=1e-6)  # grad_output seen by the pre-hook
    np.testing.assert_allclose(ours[1][1], theirs[1][1], rtol=1e-6)  # grad_input
    np.testing.assert_allclose(ours[1][2], theirs[1][2], rtol=1e-6)  # grad_output after the pre-hook
