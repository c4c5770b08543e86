"""The meta device: tensors with shape, dtype and strides but no data; device contexts; Module.to_empty."""
import copy
import math
import threading

import numpy as np
import pytest

import tinytorch as torch
import tinytorch.nn as nn
import tinytorch.nn.functional as F


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


# ------------------------------------------------------------------ devices and the default-device context

def test_meta_device_object():
    d = torch.device("meta")
    assert d.type == "meta" and d.index is None and str(d) == "meta" and repr(d) == "device(type='meta')"
    assert torch.device("meta:0").index == 0
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, ipu, xpu, .*, mps, meta, hpu, mtia, privateuseone device type"):
        torch.device("tpu")


def test_device_context_sets_factory_default_and_restores():
    assert torch.get_default_device() == torch.device("cpu")
    with torch.device("meta"):
        assert torch.get_default_device() == torch.device("meta")
        assert torch.empty(2, 3).is_meta
        assert torch.zeros(2).is_meta and torch.ones(2).is_meta and torch.randn(2).is_meta
        assert torch.arange(5).is_meta and torch.full((2,), 3.0).is_meta and torch.tensor([1.0, 2.0]).is_meta
        assert torch.empty(2, device="cpu").device.type == "cpu"  # an explicit device wins
        with torch.device("cpu"):
            assert torch.empty(2).device.type == "cpu"
        assert torch.empty(2).is_meta
    assert torch.empty(2).device.type == "cpu"


def test_set_default_device_is_per_thread():
    torch.set_default_device("meta")
    try:
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.empty(1).device.type))
        t.start()
        t.join(timeout=30)
        assert seen == ["cpu"]  # as PyTorch: the default device is thread-local
        assert torch.zeros(3).is_meta
    finally:
        torch.set_default_device(None)
    assert torch.zeros(3).device.type == "cpu"


# ------------------------------------------------------------------ meta tensors: metadata, ops, errors

def test_meta_tensor_metadata():
    x = torch.empty(3, 4, device="meta", dtype=torch.float64, requires_grad=True)
    assert x.is_meta and not x.is_cuda and not x.is_cpu and x.device.type == "meta"
    assert x.shape == (3, 4) and x.dtype is torch.float64 and x.stride() == (4, 1) and x.requires_grad
    assert x.numel() == 12 and x.element_size() == 8 and x.is_contiguous() and x.data_ptr() == 0
    assert x.get_device() == -1 and x.type() == "torch.meta.DoubleTensor"
    assert not torch.empty(2, device="cpu").is_meta


def test_factories_and_like_functions_on_meta():
    x = torch.empty(2, 3, device="meta", dtype=torch.float16)
    for t in (torch.empty_like(x), torch.zeros_like(x), torch.ones_like(x), torch.rand_like(x), torch.randn_like(x),
              torch.full_like(x, 7), x.new_empty((4, 5)), x.new_zeros(4), x.new_ones(1), x.new_full((2,), 1.0)):
        assert t.is_meta and t.dtype is torch.float16
    assert x.new_empty((4, 5)).shape == (4, 5)
    assert torch.empty_like(x, device="cpu").device.type == "cpu"
    assert torch.randint(0, 5, (3, 2), device="meta").dtype is torch.int64
    assert torch.randperm(7, device="meta").shape == (7,)
    assert torch.eye(3, 4, device="meta").shape == (3, 4)
    assert torch.linspace(0, 1, 9, device="meta").shape == (9,)
    assert torch.arange(0, 10, 3, device="meta").shape == (4,)
    assert torch.tensor([[1, 2]], device="meta").dtype is torch.int64


def test_views_keep_pytorch_strides():
    x = torch.empty(6, 4, device="meta")
    t = x.t()
    assert t.shape == (4, 6) and t.stride() == (1, 4) and not t.is_contiguous()
    assert x[1:5:2].shape == (2, 4) and x[1:5:2].stride() == (8, 1)
    assert x[2].shape == (4,) and x[:, 1].stride() == (4,)
    assert x.view(3, 8).shape == (3, 8) and x.reshape(-1).shape == (24,)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(24)
    assert t.reshape(24).is_contiguous()  # a copy, as PyTorch
    assert x.unsqueeze(0).expand(5, 6, 4).stride() == (0, 4, 1)
    assert x.permute(1, 0).stride() == (1, 4) and x.flatten().shape == (24,)
    assert x.narrow(0, 1, 3).shape == (3, 4)


def test_dim0_slicing_chunk_split_cat():
    x = torch.empty(10, 3, device="meta", requires_grad=True)
    parts = torch.chunk(x, 4)
    assert [p.shape[0] for p in parts] == [3, 3, 3, 1] and all(p.is_meta for p in parts)
    assert [p.shape[0] for p in x.split(4)] == [4, 4, 2]
    assert [p.shape[0] for p in torch.tensor_split(x, 3)] == [4, 3, 3]
    y = torch.cat([x[0:4], x[4:10]])
    assert y.is_meta and y.shape == (10, 3) and y.grad_fn is not None
    assert torch.stack([x, x], 1).shape == (10, 2, 3)


def test_arithmetic_dtypes_and_broadcasting():
    a = torch.empty(4, 1, 3, device="meta")
    b = torch.empty(5, 3, device="meta", dtype=torch.float64)
    i = torch.empty(5, 3, device="meta", dtype=torch.int32)
    assert (a + b).shape == (4, 5, 3) and (a + b).dtype is torch.float64
    assert (i * 2).dtype is torch.int32 and (i * 2.5).dtype is torch.float32 and (i / 2).dtype is torch.float32
    assert (a > 0).dtype is torch.bool and (-a).shape == a.shape
    assert a.exp().is_meta and a.sqrt().dtype is torch.float32 and torch.where(a > 0, a, 0.0).shape == (4, 1, 3)
    assert a.sum().shape == () and a.mean(-1, keepdim=True).shape == (4, 1, 1) and i.sum().dtype is torch.int64
    assert a.max(0).values.shape == (1, 3) and a.argmax().dtype is torch.int64
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.empty(3, device="meta") + torch.empty(4, device="meta")
    with pytest.raises(RuntimeError, match="same device"):
        torch.empty(3, device="meta") + torch.ones(3)


def test_matmul_linear_and_bf16():
    x = torch.empty(2, 7, 5, device="meta", dtype=torch.bfloat16)
    w = torch.empty(3, 5, device="meta", dtype=torch.bfloat16)
    assert (x @ w.t()).shape == (2, 7, 3) and (x @ w.t()).dtype is torch.bfloat16
    y = F.linear(x, w, torch.empty(3, device="meta", dtype=torch.bfloat16))
    cpu = F.linear(torch.ones(2, 7, 5).bfloat16(), torch.ones(3, 5).bfloat16(), torch.ones(3).bfloat16())
    assert y.shape == (2, 7, 3) and y.dtype is cpu.dtype  # meta follows the CPU path's dtype
    assert torch.bmm(torch.empty(4, 2, 3, device="meta"), torch.empty(4, 3, 6, device="meta")).shape == (4, 2, 6)
    assert torch.empty(3, device="meta").dot(torch.empty(3, device="meta")).shape == ()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.empty(2, 4, device="meta") @ torch.empty(3, 2, device="meta")


def test_data_access_raises_pytorch_errors():
    x = torch.empty(1, device="meta")
    with pytest.raises(RuntimeError, match=r"Tensor.item\(\) cannot be called on meta tensors"):
        x.item()
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        float(x)
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        x.numpy()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        x.cpu()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        np.asarray(x)
    m = nn.Linear(2, 3, device="meta")
    with pytest.raises(NotImplementedError, match=r"Please use torch.nn.Module.to_empty\(\)"):
        m.to("cpu")


def test_repr_like_pytorch():
    assert repr(torch.empty(2, 3, device="meta")) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(torch.empty((), device="meta", dtype=torch.int64)) == \
        "tensor(..., device='meta', size=(), dtype=torch.int64)"
    p = nn.Parameter(torch.empty(4, device="meta"))
    assert repr(p) == "Parameter containing:\ntensor(..., device='meta', size=(4,), requires_grad=True)"
    y = p * 2
    assert repr(y) == "tensor(..., device='meta', size=(4,), grad_fn=<MulBackward0>)"


def test_to_meta_and_back():
    c = torch.randn(3, 2, requires_grad=True)
    m = c.to("meta")
    assert m.is_meta and m.shape == (3, 2) and m.grad_fn is not None
    assert m.to("meta") is m and m.to(device=torch.device("meta"), dtype=torch.float64).dtype is torch.float64
    with pytest.raises(NotImplementedError, match="no data"):
        m.to("cpu")


def test_meta_backward_gives_meta_grads():
    with torch.device("meta"):
        lin = nn.Linear(5, 4)
        x = torch.randn(3, 5)
    loss = F.gelu(F.layer_norm(lin(x), (4,))).softmax(-1).sum()
    loss.backward()
    assert lin.weight.grad.is_meta and lin.weight.grad.shape == (4, 5) and lin.bias.grad.shape == (4,)


def test_parity_with_pytorch_meta_shapes_strides_dtypes():
    pt = pytest.importorskip("torch")
    cases = [
        lambda T, d: T.empty(6, 4, device=d).t()[1:3],
        lambda T, d: T.empty(2, 3, 4, device=d).permute(2, 0, 1).reshape(4, 6),
        lambda T, d: T.empty(2, 3, device=d, dtype=T.int32) * 2.5,
        lambda T, d: T.empty(5, 1, device=d) + T.empty(3, device=d, dtype=T.float64),
        lambda T, d: T.empty(4, 6, device=d).unsqueeze(1).expand(4, 3, 6),
        lambda T, d: T.chunk(T.empty(7, 2, device=d), 3)[2],
        lambda T, d: T.empty(3, 8, device=d).sum(1, keepdim=True),
        lambda T, d: T.empty(2, 8, device=d) @ T.empty(8, 5, device=d),
        lambda T, d: T.empty(10, 4, device=d)[2:9:3].narrow(1, 1, 2),
        lambda T, d: T.empty(3, 4, device=d, dtype=T.int64).float().mean(0),
    ]
    for make in cases:
        ours, theirs = make(torch, "meta"), make(pt, "meta")
        assert ours.is_meta and theirs.is_meta
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.stride() == theirs.stride()
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]


# ------------------------------------------------------------------ modules: build on meta, to_empty, reset_parameters

class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 8, padding_idx=0)
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 11)
        self.frozen = nn.Linear(8, 8, bias=False)
        self.frozen.weight.requires_grad_(False)
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x):
        return self.fc(F.gelu(self.ln(self.frozen(self.emb(x)))) * self.scale)


def test_building_a_billion_parameters_on_meta_allocates_nothing():
    before = _rss_bytes()
    with torch.device("meta"):
        m = nn.Sequential(*[nn.Linear(10_000, 10_000) for _ in range(10)])
    n = sum(p.numel() for p in m.parameters())
    y = m(torch.empty(64, 10_000, device="meta"))
    grown = _rss_bytes() - before
    assert n > 1_000_000_000 and y.shape == (64, 10_000)
    assert grown < 32 * 2**20, f"RSS grew {grown / 2**20:.1f} MiB building {n} meta parameters"


def test_module_to_meta_replaces_parameters():
    m = nn.Linear(3, 2)
    old = m.weight
    m.to(device="meta")
    assert m.weight.is_meta and m.weight is not old and isinstance(m.weight, nn.Parameter)
    assert m.weight.requires_grad


def test_to_empty_then_reset_parameters_gives_a_trainable_model():
    torch.manual_seed(0)
    with torch.device("meta"):
        m = _Model()
    assert all(p.is_meta for p in m.parameters()) and m.scale.is_meta
    meta_params = dict(m.named_parameters())
    assert m.to_empty(device="cpu") is m
    for name, p in m.named_parameters():
        assert p.device.type == "cpu" and isinstance(p, nn.Parameter)
        assert p is not meta_params[name]  # new Parameter objects, as PyTorch
        assert p.requires_grad == meta_params[name].requires_grad
    assert not m.frozen.weight.requires_grad and m.scale.device.type == "cpu"
    for mod in m.modules():
        if hasattr(mod, "reset_parameters"):
            mod.reset_parameters()
    m.scale.fill_(1.0)
    # PyTorch's initialisations: LayerNorm ones/zeros, Embedding N(0,1) with a zero padding row, Linear bounds.
    assert np.all(m.ln.weight.detach().numpy() == 1) and np.all(m.ln.bias.detach().numpy() == 0)
    assert np.all(m.emb.weight.detach().numpy()[0] == 0) and 0.5 < m.emb.weight.detach().numpy()[1:].std() < 1.5
    bound = 1 / math.sqrt(8)
    w = m.fc.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    x, y = torch.randint(0, 11, (4, 5)), torch.randint(0, 11, (20,))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(m(x).reshape(-1, 11), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert m.frozen.weight.grad is None


def test_to_empty_recurse_false_and_deepcopy():
    with torch.device("meta"):
        m = nn.Sequential(nn.Linear(2, 2))
    m.to_empty(device="cpu", recurse=False)
    assert m[0].weight.is_meta  # its child was not visited
    c = copy.deepcopy(m)
    assert c[0].weight.is_meta and c[0].weight.shape == (2, 2)


def test_init_functions_are_no_ops_on_meta():
    w = torch.empty(4, 6, device="meta")
    state = torch.get_rng_state()
    for fn in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_, nn.init.xavier_uniform_, nn.init.xavier_normal_,
               nn.init.trunc_normal_, nn.init.normal_, nn.init.uniform_, nn.init.zeros_, nn.init.ones_, nn.init.eye_):
        assert fn(w) is w and w.is_meta
    assert (torch.get_rng_state().numpy() == state.numpy()).all()  # no draw from the CPU generator


def test_more_ops_keep_meta():
    x = torch.empty(4, 6, device="meta")
    q = torch.empty(2, 3, 5, 8, device="meta")
    outs = [x.softmax(-1), F.log_softmax(x, 1), F.silu(x), F.dropout(x, 0.5, True), F.pad(x, (1, 1)),
            x.masked_fill(torch.empty(4, 6, dtype=torch.bool, device="meta"), 0.0), x.tril(), x.cumsum(0),
            x.var(0), x.norm(), x.repeat(2, 1), x.topk(2)[0], x.sort(-1)[0], x.clamp(0, 1), 1 - x, 2 / x,
            x[None, :, 1], x[torch.tensor([0, 2])], x[torch.empty(5, dtype=torch.int64, device="meta")],
            x.gather(1, torch.empty(4, 2, dtype=torch.int64, device="meta")), torch.einsum("ij,jk->ik", x, x.t()),
            F.scaled_dot_product_attention(q, q, q, is_causal=True), x.t().contiguous(), x.roll(1, 0),
            F.one_hot(torch.empty(3, dtype=torch.int64, device="meta"), 5)]
    assert all(o.is_meta for o in outs)
    assert [tuple(o.shape) for o in outs[-8:-2]] == [(2, 6), (5, 6), (4, 2), (4, 4), (2, 3, 5, 8), (6, 4)]
    assert outs[-1].shape == (3, 5) and outs[-1].dtype is torch.int64
    with pytest.raises(RuntimeError, match="needs num_classes"):
        F.one_hot(torch.empty(3, dtype=torch.int64, device="meta"))
    with pytest.raises(NotImplementedError, match="data-dependent"):
        x.nonzero()


@pytest.mark.parametrize("make", [lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.AdamW(p)])
def test_optimizer_step_on_meta_parameters(make):
    with torch.device("meta"):
        m = nn.Linear(4, 3)
    m(torch.empty(2, 4, device="meta")).sum().backward()
    assert nn.utils.clip_grad_norm_(m.parameters(), 1.0).is_meta
    opt = make(m.parameters())
    opt.step()
    opt.step()
    assert m.weight.is_meta and all(v.is_meta for v in opt.state[m.weight].values() if v.dim() > 0)


def test_load_state_dict_into_a_meta_model():
    src = nn.Linear(3, 2)
    with torch.device("meta"):
        m = nn.Linear(3, 2)
    with pytest.warns(UserWarning, match="copying from a non-meta parameter in the checkpoint to a meta parameter"):
        m.load_state_dict(src.state_dict())
    assert m.weight.is_meta
    m.load_state_dict(src.state_dict(), assign=True)
    assert not m.weight.is_meta and m.weight.requires_grad
    assert np.array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())


def test_meta_array_index_and_reduce_shapes_match_numpy():
    from tinytorch._meta import MetaArray
    y = np.zeros((2, 3, 4, 5), np.float32)
    m = MetaArray(y.shape, y.dtype)
    keys = [(0, slice(None), [1, 2]), ([0, 1], slice(None), [1, 2]), (Ellipsis, [1, 0]), (slice(None), [0, 1], [1, 2]),
            (None, 1, Ellipsis, [0, 0, 1]), (np.array([True, False]),), (1, slice(1, None, 2)), (Ellipsis, None)]
    for k in keys:
        assert m[k].shape == y[k].shape, k
    for k in [(1, slice(1, None, 2)), (slice(None), 2), (Ellipsis, slice(None, None, -1))]:
        assert m[k].strides == y[k].strides, k  # views: NumPy's strides
    for args in [dict(axis=None), dict(axis=1), dict(axis=(0, 2), keepdims=True), dict(axis=-1)]:
        assert m.sum(**args).shape == y.sum(**args).shape and m.mean(**args).dtype == y.mean(**args).dtype
    assert np.add.reduce(m).shape == np.add.reduce(y).shape and np.sort(m).shape == y.shape
    assert np.concatenate([m, m], 1).shape == (2, 6, 4, 5) and np.stack([m, m], -1).shape == (2, 3, 4, 5, 2)
