"""Shape ops: float64 gradcheck and gradgradcheck, view semantics (shared memory and version
counter), values against NumPy and PyTorch's errors."""
import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck
from tinytorch.autograd import gradgradcheck as _gradgradcheck


def _t(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.uniform(-1, 1, size=shape), dtype=torch.float64, requires_grad=True)


def _sq(out):
    return tuple(o * o for o in out) if isinstance(out, (tuple, list)) else out * out


def gradgradcheck(fn, inputs) -> bool:
    """gradgradcheck of fn(x) and of fn(x)**2: a shape op's first-order gradient doesn't depend on x, so the plain
    check would only test d(grad)/d(grad_output); squaring routes an x-dependent gradient through
    the op's backward graph."""
    return _gradgradcheck(fn, inputs) and _gradgradcheck(lambda *xs: _sq(fn(*xs)), inputs)


VIEW_OPS = {
    "view": lambda x: x.view(4, 6),
    "view_infer": lambda x: x.view(-1, 3),
    "reshape": lambda x: x.reshape(3, 8),
    "reshape_noncontig": lambda x: x.transpose(0, 2).reshape(-1),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute_neg": lambda x: torch.permute(x, (-1, -3, -2)),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_neg": lambda x: torch.transpose(x, -1, -2),
    "T_2d": lambda x: x[0].T,
    "mT": lambda x: x.mT,
    "t": lambda x: x[1].t(),
    "flatten": lambda x: x.flatten(),
    "flatten_range": lambda x: torch.flatten(x, 1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "unsqueeze_neg": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x[:, :1].squeeze(),
    "squeeze_dim": lambda x: x[:, :1].squeeze(1),
    "expand": lambda x: x[:, :1].expand(2, 3, 4),
    "expand_new_dims": lambda x: x[0, 0].expand(5, 2, 4),
    "expand_as": lambda x: x[:1].expand_as(x),
    "broadcast_to": lambda x: torch.broadcast_to(x[:, :, :1], (2, 3, 3)),
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "clone": lambda x: x.clone(),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "movedim": lambda x: x.movedim(0, -1),
    "flip": lambda x: x.flip(0, 2),
    "flip_tuple": lambda x: torch.flip(x, (-1,)),
    "roll": lambda x: x.roll(1, 0),
    "roll_multi": lambda x: x.roll((1, -2), (0, 2)),
    "roll_flat": lambda x: x.roll(5),
    "select": lambda x: x.select(1, -1),
    "ravel": lambda x: x.transpose(0, 1).ravel(),
    "trace": lambda x: x[0, :, :3].trace(),
    "diag_of_matrix": lambda x: x[1].diag(1),
    "diag_of_vector": lambda x: x[0, 0].diag(-1),
    "tril_": lambda x: (x * 1).tril_(1),
    "flip_kw": lambda x: torch.flip(x, dims=[0, 1]) + x.flip(dims=2),
    "keyword_forms": lambda x: torch.reshape(x, shape=(4, 6)) + torch.permute(x, dims=(0, 2, 1)).reshape(shape=[4, 6]),
    "repeat": lambda x: x[0].repeat(2, 1, 2),
    "tile": lambda x: x[0].tile((2,)),
    "tril": lambda x: x.tril(),
    "tril_k": lambda x: torch.tril(x, -1),
    "triu": lambda x: x.triu(),
    "triu_k": lambda x: torch.triu(x[0], 1),
    "index": lambda x: x[1, ::2, 1:3],
    "index_neg": lambda x: x[..., -1],
    "unbind": lambda x: x.unbind(1),
    "split_int": lambda x: x.split(2, dim=2),
    "split_sizes": lambda x: torch.split(x, [1, 2], 1),
    "chunk": lambda x: x.chunk(3, dim=-1),
    "tensor_split": lambda x: x.tensor_split(3, dim=1),
    "repeat_interleave": lambda x: x.repeat_interleave(2, dim=1),
    "view_as": lambda x: x.view_as(torch.ones(4, 6)),
    "reshape_as": lambda x: x.transpose(0, 1).reshape_as(torch.ones(6, 4)),
    "swapaxes": lambda x: x.swapaxes(0, 2),
    "broadcast_tensors": lambda x: torch.broadcast_tensors(x[:, :1], x[0]),
    "diagonal": lambda x: x.diagonal(0, 1, 2),
    "diagonal_offset": lambda x: torch.diagonal(x[0], 1),
    "diagonal_negative": lambda x: x.diagonal(-1, -1, 0),
    "moveaxis_multi": lambda x: x.movedim((0, 1), (2, 0)),
}


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_shape_op_gradcheck(name):
    assert gradcheck(VIEW_OPS[name], (_t(2, 3, 4),))


@pytest.mark.parametrize("name", ["view", "reshape", "reshape_noncontig", "transpose", "permute", "expand",
                                  "expand_new_dims", "unsqueeze", "squeeze", "flatten", "split_int",
                                  "split_sizes", "chunk", "narrow", "tril", "triu", "index", "T_2d", "unbind",
                                  "diagonal", "diagonal_offset", "movedim", "flip", "repeat", "broadcast_tensors"])
def test_shape_op_gradgradcheck(name):
    assert gradgradcheck(VIEW_OPS[name], (_t(2, 3, 4),))


def test_split_pieces_share_one_node_and_unused_pieces_get_zeros():
    x = torch.randn(4, 6, requires_grad=True)
    pieces = x.split(2, 1)
    assert len({id(p.grad_fn) for p in pieces}) == 1 and pieces[0].grad_fn.name() == "SplitBackward0"
    assert x.split([2, 4], 1)[0].grad_fn.name() == "SplitWithSizesBackward0"
    (pieces[1] * 3).sum().backward()
    want = np.zeros((4, 6), np.float32)
    want[:, 2:4] = 3
    np.testing.assert_array_equal(x.grad.numpy(), want)



@pytest.mark.parametrize("split", [lambda x: x.split(2, 1), lambda x: x.split([1, 3], 1),
                                   lambda x: x.chunk(2, 1), lambda x: torch.tensor_split(x, 2, 1)],
                         ids=["split_int", "split_sizes", "chunk", "tensor_split"])
def test_split_pieces_and_their_input_are_freed_after_backward(split):
    # The node must not hold its own outputs: a piece holds the node, and a cycle through the engine is one
    # Python's collector cannot see (nanoGPT's q, k, v split leaked its (B, T, 3C) input every step).
    import gc
    import weakref
    x = torch.randn(4, 4, requires_grad=True)
    qkv = x * 2
    pieces = split(qkv)
    (pieces[0] * pieces[-1]).sum().backward()
    refs = [weakref.ref(qkv)] + [weakref.ref(p) for p in pieces]
    del qkv, pieces
    gc.collect()
    assert all(r() is None for r in refs)
    assert x.grad is not None

CATS = {
    "cat0": lambda a, b, c: torch.cat([a, b, c]),
    "cat1": lambda a, b, c: torch.cat([a.transpose(0, 1), b.transpose(0, 1)], dim=1),
    "cat_neg": lambda a, b, c: torch.cat((a, b), -1),
    "stack0": lambda a, b, c: torch.stack([a, b, c]),
    "stack1": lambda a, b, c: torch.stack([a, b, c], 1),
    "stack_last": lambda a, b, c: torch.stack((a, b), dim=-1),
    "hstack": lambda a, b, c: torch.hstack([a, b]),
    "vstack": lambda a, b, c: torch.vstack([a, c]),
}


@pytest.mark.parametrize("name", sorted(CATS))
def test_cat_stack_gradcheck_and_gradgradcheck(name):
    inputs = (_t(2, 3, seed=1), _t(2, 3, seed=2), _t(2, 3, seed=3))
    assert gradcheck(CATS[name], inputs)
    assert gradgradcheck(CATS[name], inputs)


def test_stack_of_samples_without_grad_is_one_copy():
    """Tensors of one dtype are stacked in one copy (a data loader's collate) and, under grad, one StackBackward0
    node: values, dtype, a fresh array, and the same errors; mixed dtypes take the cat route."""
    rows = [torch.arange(4) * i for i in range(3)]
    out = torch.stack(rows, 1)
    assert out.dtype is torch.int64 and out.tolist() == [[0, 0, 0], [0, 1, 2], [0, 2, 4], [0, 3, 6]]
    assert out.grad_fn is None and not out.requires_grad
    rows[1].add_(100)  # the result does not alias its inputs
    assert out[:, 1].tolist() == [0, 1, 2, 3]
    assert torch.stack([torch.tensor(True), torch.tensor(False)]).tolist() == [True, False]
    assert torch.stack([torch.ones(2), torch.ones(2, dtype=torch.float64)]).dtype is torch.float64
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        torch.stack([torch.ones(2), torch.ones(3)])
    x = _t(2)
    y = torch.stack([x, torch.ones(2, dtype=torch.float64)], 1)
    assert y.grad_fn.name() == "StackBackward0"
    (y * torch.tensor([[1.0, 5.0], [2.0, 5.0]], dtype=torch.float64)).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0]


def test_transpose_and_t_of_low_rank_tensors_stay_in_the_graph():
    s, v = _t(), _t(3)  # 0-d and 1-d
    assert s.transpose(0, -1).grad_fn.name() == "TransposeBackward0" and s.t().grad_fn.name() == "TBackward0"
    assert v.t().grad_fn.name() == "TBackward0" and v.t()._base is v
    assert gradcheck(lambda x: x.transpose(0, 0) * 3, (s,))
    assert gradcheck(lambda x: x.t() * x, (v,))
    with pytest.raises(IndexError, match="Dimension out of range"):
        s.transpose(0, 1)


def test_cat_with_only_some_inputs_requiring_grad_and_mixed_dtypes():
    a = _t(2, 2)
    b = torch.ones(1, 2, dtype=torch.float32)
    out = torch.cat([a, b])
    assert out.dtype is torch.float64 and out.shape == (3, 2)
    out.sum().backward()
    assert a.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert torch.cat([torch.ones(2), torch.tensor([])]).shape == (2,)  # 1-D empty tensors are skipped


def test_views_share_memory_and_version_counter():
    base = torch.arange(12.0)
    views = [base.view(3, 4), base.reshape(2, 6), base.view(3, 4).t(), base.view(3, 4).permute(1, 0),
             base.unsqueeze(0), base.view(3, 4)[1], base.view(3, 4).narrow(1, 1, 2), base.expand(2, 12),
             base.view(3, 4).split(2, 1)[1], base.view(3, 4).chunk(2)[0], base.view(1, 12).squeeze(0),
             base.view(4, 3).T, base.flatten(), base.view(3, 4).unbind(0)[2], base.view(3, 4).transpose(0, 1)]
    for v in views:
        assert np.shares_memory(v.numpy(), base.numpy())
        assert v._base is base
    before = [v._version for v in views]
    base.add_(1)
    assert all(v._version == b + 1 for v, b in zip(views, before))
    views[0].mul_(2)  # an in-place op through a view bumps the base too
    assert base._version == before[0] + 2
    assert base[0].item() == 2.0


def test_reshape_copies_when_it_must_and_contiguous_is_identity_when_contiguous():
    x = torch.arange(6.0).view(2, 3)
    assert not np.shares_memory(x.t().reshape(6).numpy(), x.numpy())
    assert x.t().reshape(6).tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert x.contiguous() is x
    c = x.t().contiguous()
    assert c.is_contiguous() and not x.t().is_contiguous() and c.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert x.clone().numpy() is not x.numpy() and not np.shares_memory(x.clone().numpy(), x.numpy())


def test_values_match_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = torch.tensor(a)
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.transpose(0, 2).numpy(), a.swapaxes(0, 2))
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other than 2"):
        np.testing.assert_array_equal(x.T.numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.flatten(0, 1).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(x[0].tril(1).numpy(), np.tril(a[0], 1))
    np.testing.assert_array_equal(x.triu(-1).numpy(), np.triu(a, -1))  # batched
    np.testing.assert_array_equal(torch.stack([x, x], 2).numpy(), np.stack([a, a], 2))
    np.testing.assert_array_equal(torch.cat([x, x], -1).numpy(), np.concatenate([a, a], -1))
    assert [p.shape for p in x.split(3, 2)] == [(2, 3, 3), (2, 3, 1)]
    assert [p.shape for p in x.chunk(2, 1)] == [(2, 2, 4), (2, 1, 4)]
    assert [p.shape for p in torch.arange(5).chunk(3)] == [(2,), (2,), (1,)]
    assert [p.shape for p in torch.arange(6).chunk(4)] == [(2,), (2,), (2,)]  # PyTorch may return fewer chunks
    assert x.squeeze().shape == (2, 3, 4) and x.unsqueeze(3).shape == (2, 3, 4, 1)
    assert torch.ones(1, 2, 1).squeeze((0, 2)).shape == (2,) and torch.ones(1, 2).squeeze(1).shape == (1, 2)
    assert x.expand(5, 2, 3, 4).shape == (5, 2, 3, 4) and x[:, :1].expand(-1, 3, -1).shape == (2, 3, 4)
    assert x.view(-1).shape == (24,) and torch.tensor(3.0).flatten().shape == (1,)
    assert torch.arange(6).view(2, 3).t().stride() == (1, 3)


def test_shape_errors_match_pytorch():
    x = torch.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"shape '\[4, 2\]' is invalid for input of size 6"):
        x.view(4, 2)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        x.reshape(-1, -1)
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        x.t().view(6)
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(4\) must match the existing size "
                                           r"\(3\) at non-singleton dimension 1.  Target sizes: \[2, 4\].  "
                                           r"Tensor sizes: \[2, 3\]"):
        x.expand(2, 4)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0. Expected size 3 but "
                                           "got size 2 for tensor number 1 in the list."):
        torch.cat([x, torch.ones(2, 2)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 "
                                           r"and \[3, 2\] at entry 1"):
        torch.stack([x, x.t()])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor \\(at position 0\\) cannot be concatenated"):
        torch.cat([torch.tensor(1.0), torch.tensor(2.0)])
    with pytest.raises(RuntimeError, match=r"split_with_sizes expects split_sizes to sum exactly to 3"):
        x.split([1, 1], 1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.transpose(0, 2)
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        torch.ones(1, 2, 3).t()
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        torch.ones(3).tril()
    with pytest.raises(RuntimeError, match="duplicate dims are not allowed"):
        x.permute(0, 0)
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(-1\) isn't allowed in a leading, "
                                           r"non-existing dimension 0"):
        torch.ones(3).expand(-1, 3)
    with pytest.raises(RuntimeError, match=r"cannot reshape tensor of 0 elements into shape \[-1, 0\] because the "
                                           r"unspecified dimension size -1 can be any value and is ambiguous"):
        torch.ones(0).view(-1, 0)
    with pytest.raises(ValueError, match="torch.cat\\(\\): expected a non-empty list of Tensors"):
        torch.cat([])


def test_view_as_another_dtype_shares_memory_outside_the_graph():
    """x.view(dtype): the same bytes as another dtype, the last dimension scaled by the element sizes' ratio, PyTorch's
    errors for a strided or indivisible last dimension, outside the graph, and writes through it seen by x."""
    x = torch.ones(2, 4, requires_grad=True)
    y = x.view(torch.int32)
    assert y.shape == (2, 4) and y.dtype is torch.int32 and not y.requires_grad and y.grad_fn is None
    assert y[0, 0].item() == 0x3F800000  # 1.0f's bits
    assert (x * 2).view(torch.float64).shape == (2, 2)
    assert torch.ones(3).view(torch.int8).shape == (12,)
    with pytest.raises(RuntimeError, match=r"self.stride\(-1\) must be 1 to view Float as Double"):
        x.t().view(torch.float64)
    with pytest.raises(RuntimeError, match=r"self.size\(-1\) must be divisible by 2 to view Float as Double"):
        torch.ones(3).view(torch.float64)
    with pytest.raises(RuntimeError, match=r"self.dim\(\) cannot be 0"):
        torch.tensor(1.0).view(torch.float64)
    a = torch.zeros(2)
    a.view(torch.int32).add_(0x3F800000)
    assert a.tolist() == [1.0, 1.0]
    torch_ = pytest.importorskip("torch")
    h = torch_.tensor([1.0, -2.5, 3.25], dtype=torch_.float16)
    assert torch.from_numpy(h.numpy()).view(torch.int16).tolist() == h.view(torch_.int16).tolist()


def test_channels_last_memory_format():
    """contiguous/clone/to/Module.to with channels_last lay the memory out N, H, W, C (PyTorch's strides), ops
    and gradients are unchanged by the layout, and row-major is what contiguous() gives back."""
    x = torch.arange(120.0).reshape(2, 3, 4, 5)
    y = x.contiguous(memory_format=torch.channels_last)
    assert y.stride() == (60, 1, 15, 3) and not y.is_contiguous() and y.is_contiguous(memory_format=torch.channels_last)
    assert y.tolist() == x.tolist()
    assert y.clone().stride() == (60, 1, 15, 3) and (y + 1).stride() == (60, 1, 15, 3)
    assert y.clone(memory_format=torch.contiguous_format).stride() == (60, 20, 5, 1)
    assert y.contiguous().stride() == (60, 20, 5, 1) and y.contiguous(memory_format=torch.channels_last) is y
    assert x.to(memory_format=torch.channels_last).stride() == (60, 1, 15, 3)
    assert torch.ones(1, 3, 1, 1).is_contiguous(memory_format=torch.channels_last)  # size-1 axes do not count
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        torch.ones(2, 3, 4).contiguous(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        torch.ones(2, 3, 4, 5).contiguous(memory_format=torch.channels_last_3d)
    assert torch.ones(2, 3, 4, 5, 6).contiguous(memory_format=torch.channels_last_3d).stride() == (360, 1, 90, 18, 3)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 2, 1)).double()
    inp = torch.linspace(-1, 1, 2 * 3 * 8 * 8, dtype=torch.float64).reshape(2, 3, 8, 8)
    ref = net(inp)
    ref.sum().backward()
    g0 = net[0].weight.grad.clone()
    net.zero_grad()
    net.to(memory_format=torch.channels_last)
    assert net[0].weight.is_contiguous(memory_format=torch.channels_last) and net[0].bias.stride() == (1,)
    out = net(inp.contiguous(memory_format=torch.channels_last))
    out.sum().backward()
    assert torch.allclose(ref, out, rtol=1e-12) and torch.allclose(g0, net[0].weight.grad, rtol=1e-12)
    a = _t(2, 3, 2, 2)
    assert gradcheck(lambda t: t.contiguous(memory_format=torch.channels_last) * 2, (a,))


def test_clone_of_a_channels_last_tensor_owns_its_memory():
    # An NHWC batch permuted to NCHW is already channels last: its clone must still be a copy (a snapshot of a
    # channels-last model's weights, a CutMix of a batch, must not follow or change the original).
    x = torch.from_numpy(np.zeros((2, 4, 4, 3), np.float32)).permute(0, 3, 1, 2)
    c = x.clone()
    c.fill_(1.0)
    assert x.sum().item() == 0.0 and c.sum().item() == 96.0
    assert c.is_contiguous(memory_format=torch.channels_last) and c.data_ptr() != x.data_ptr()
    m = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    snap = {k: v.clone() for k, v in m.state_dict().items()}
    with torch.no_grad():
        m.weight.add_(1.0)
    assert torch.allclose(snap["weight"] + 1.0, m.weight)
    d = x.contiguous(memory_format=torch.channels_last)
    assert d is x  # contiguous() of what already is laid out so is the tensor itself, as PyTorch's
