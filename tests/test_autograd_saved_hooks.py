"""autograd.graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks on the real engine:
what ops save goes through the hooks, backward gets it back, and the graph itself keeps nothing else."""
import gc
import weakref

import numpy as np
import pytest

import tinytorch as torch
from tinytorch import autograd, nn
from tinytorch.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def _model_grads(x, ws, hooks=None):
    for t in [x] + ws:
        t.grad = None
    ctx = hooks if hooks is not None else saved_tensors_hooks(lambda t: t, lambda t: t)
    with ctx:
        h = x
        for w in ws:
            h = torch.nn.functional.gelu(h @ w).softmax(-1) * h.sigmoid()
        loss = torch.nn.functional.layer_norm(h, (h.shape[-1],)).pow(2).mean()
    loss.backward()
    return [t.grad.clone() for t in [x] + ws]


def test_every_saved_tensor_is_packed_and_unpacked_once():
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    ws = [torch.randn(4, 4, requires_grad=True) for _ in range(2)]
    expected = _model_grads(x, ws)
    packed, unpacked = [], []

    def pack(t):
        assert isinstance(t, torch.Tensor)
        packed.append(t)
        return ("box", t.clone())  # anything can stand in for the tensor

    def unpack(p):
        assert p[0] == "box"
        unpacked.append(p)
        return p[1]
    got = _model_grads(x, ws, saved_tensors_hooks(pack, unpack))
    assert len(packed) > 0 and len(unpacked) == len(packed)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_packed_graph_keeps_no_activation_alive():
    x = torch.randn(64, 64, requires_grad=True)
    refs = []

    def pack(t):
        refs.append(weakref.ref(t._data)) if t._data.size == 64 * 64 else None
        return t.shape  # drop the tensor: keep only its shape

    with saved_tensors_hooks(pack, lambda shape: torch.ones(shape)):
        y = (x.exp() * 2).tanh().sum()
    gc.collect()
    assert refs and all(r() is None for r in refs[1:])  # refs[0] is x itself, alive through the caller
    y.backward()  # unpack hands back ones: the gradient is still computed, from the stand-ins
    assert x.grad.shape == (64, 64)


def test_innermost_hooks_win_and_hooks_are_per_thread():
    calls = []
    x = torch.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t):
        with saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda t: t):
            y = x.exp()
        z = y.sin()
    (z.sum()).backward()
    assert calls[-1] == "outer" and calls[:-1] == ["inner"] * (len(calls) - 1) and len(calls) >= 2

    import threading
    other = []
    with saved_tensors_hooks(lambda t: other.append(t) or t, lambda t: t):
        th = threading.Thread(target=lambda: x.exp().sum().backward())
        th.start()
        th.join()
    assert other == []


def test_gradcheck_under_save_on_cpu_and_custom_function():
    class Cube(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a * a * g

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)

    def f(a, b):
        with save_on_cpu():
            return (Cube.apply(a) @ b).tanh()
    assert autograd.gradcheck(f, (x, w))

    seen = []
    with saved_tensors_hooks(lambda t: seen.append(t) or t.clone(), lambda t: t):
        y = Cube.apply(x)
    assert len(seen) == 1 and torch.equal(seen[0], x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.detach().numpy() ** 2)


def test_in_place_change_after_packing_is_still_caught():
    x = torch.randn(4, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        a = x * 1.0
        y = a.sin()  # saves its input
    a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_unpack_must_return_a_tensor():
    x = torch.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = x.exp()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.sum().backward()


def test_retain_graph_unpacks_again():
    unpacks = []
    x = torch.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: unpacks.append(1) or t):
        y = (x * x).sum()
    y.backward(retain_graph=True)
    n = len(unpacks)
    y.backward()
    assert n > 0 and len(unpacks) == 2 * n
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy(), rtol=1e-6)


def test_disable_saved_tensors_hooks():
    with disable_saved_tensors_hooks("hooks are off here"):
        with pytest.raises(RuntimeError, match="hooks are off here"):
            with save_on_cpu():
                pass
    with save_on_cpu():  # allowed again afterwards
        pass


def test_module_training_under_save_on_cpu_matches():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 2))
    x = torch.randn(4, 8)
    model(x).pow(2).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with save_on_cpu(pin_memory=True):
        out = model(x)
    out.pow(2).sum().backward()
    for a, p in zip(expected, model.parameters()):
        np.testing.assert_allclose(a.numpy(), p.grad.numpy(), rtol=1e-6)


def test_unpacked_tensors_keep_their_place_in_the_graph_for_create_graph():
    """A pack hook that detaches (what checkpointing does) must not cut a double backward: the unpacked tensor
    stands where the saved one stood (PyTorch's SavedVariable), for inputs with a history and for leaves."""
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = (x * 3).exp() * x  # saves x * 3 (a history) and x (a leaf)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    xv = x.detach().numpy()
    # d/dx [exp(3x) (1 + 3x)] = exp(3x) (6 + 9x)
    np.testing.assert_allclose(x.grad.numpy(), np.exp(3 * xv) * (6 + 9 * xv), rtol=1e-12)


def test_gradient_penalty_through_non_reentrant_checkpoint():
    from tinytorch.utils.checkpoint import checkpoint
    lin = torch.nn.Linear(3, 3).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9]], dtype=torch.float64))
        lin.bias.copy_(torch.tensor([0.05, -0.1, 0.2], dtype=torch.float64))
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64, requires_grad=True)

    def f(t):
        return torch.tanh(lin(t)).pow(2).sum()
    results = []
    for ck in (False, True):
        x.grad = None
        lin.zero_grad()
        y = checkpoint(f, x, use_reentrant=False) if ck else f(x)
        g, = torch.autograd.grad(y, x, create_graph=True)
        (g ** 2).sum().backward()
        results.append((x.grad.clone(), lin.weight.grad.clone()))
    (gx0, gw0), (gx1, gw1) = results
    assert torch.allclose(gx0, gx1, rtol=1e-12) and torch.allclose(gw0, gw1, rtol=1e-12)
    np.testing.assert_allclose(gx0.flatten().tolist(), [1.213046, -0.758281, -1.70125], atol=1e-6)  # PyTorch 2.13
