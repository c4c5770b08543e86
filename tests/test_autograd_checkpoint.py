"""tinytorch.utils.checkpoint: recomputation in backward through the engine's reentrant path."""
import threading

import numpy as np
import pytest

import tinytorch as torch
from tinytorch import autograd
from tinytorch.utils.checkpoint import checkpoint, checkpoint_sequential


def _mlp_params():
    torch.manual_seed(0)
    return [torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True),
            torch.randn(8, 3, requires_grad=True)]


def _block(params, h):
    w1, b1, w2 = params
    return (h @ w1 + b1).tanh() @ w2


def _grads(params, x):
    return [p.grad.numpy().copy() for p in params] + ([x.grad.numpy().copy()] if x.grad is not None else [])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_same_gradients_as_without_checkpoint(use_reentrant):
    params = _mlp_params()
    x = torch.randn(5, 4, requires_grad=True)
    (_block(params, x) ** 2).sum().backward()
    expected = _grads(params, x)
    for t in params + [x]:
        t.grad = None
    out = checkpoint(lambda h: _block(params, h), x, use_reentrant=use_reentrant)
    assert out.grad_fn is not None and out.grad_fn.name() == "CheckpointFunctionBackward"
    (out ** 2).sum().backward()
    for a, b in zip(expected, _grads(params, x)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_forward_keeps_no_activations_and_recomputes_in_backward():
    calls = []
    params = _mlp_params()
    x = torch.randn(2, 4, requires_grad=True)

    def fn(h):
        calls.append(torch.is_grad_enabled())
        return _block(params, h)

    out = checkpoint(fn, x, use_reentrant=True)
    assert calls == [False]  # forward ran without recording a graph
    out.sum().backward()
    assert calls == [False, True]  # recomputed with grad on during backward


def test_closure_parameters_get_grads_when_no_input_requires_grad():
    params = _mlp_params()
    x = torch.randn(3, 4)
    _block(params, x).sum().backward()
    expected = _grads(params, x)
    for p in params:
        p.grad = None
    checkpoint(lambda h: _block(params, h), x, use_reentrant=False).sum().backward()
    for a, b in zip(expected, _grads(params, x)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # PyTorch's reentrant variant records nothing here, and says so.
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(lambda h: _block(params, h), x, use_reentrant=True)
    assert not out.requires_grad


def test_rng_state_is_replayed_for_recomputation():
    torch.manual_seed(1)
    x = torch.ones(6, requires_grad=True)
    masks = []

    def noisy(h):
        m = torch.rand(6)
        masks.append(m)
        return h * m

    checkpoint(noisy, x, use_reentrant=True).sum().backward()
    assert torch.equal(masks[0], masks[1]) and torch.allclose(x.grad, masks[0])


def test_non_tensor_arguments_and_tuple_outputs():
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def fn(h, k, flag):
        return (h * k, h * 2) if flag else (h, h)

    a, b = checkpoint(fn, x, 3.0, True, use_reentrant=True)
    (a.sum() + b.sum()).backward()
    assert torch.allclose(x.grad, torch.full((2,), 5.0))


def test_checkpoint_with_grad_or_inputs_is_an_error():
    msg = "Checkpointing is not compatible with .grad\\(\\) or when an `inputs` parameter is passed to .backward\\(\\)"
    x = torch.ones(2, requires_grad=True)
    y = checkpoint(lambda h: h * 2, x, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match=msg):
        autograd.grad(y, x, retain_graph=True)
    with pytest.raises(RuntimeError, match=msg):
        y.backward(inputs=[x], retain_graph=True)
    y.backward()  # a plain backward through the same graph still works
    assert torch.allclose(x.grad, torch.full((2,), 2.0))


def _nested(depth):
    """depth checkpoints each wrapping the next: backward nests depth reentrant backward calls."""
    def make(d):
        if d == 0:
            return lambda h: h * 2.0
        inner = make(d - 1)
        return lambda h: checkpoint(inner, h, use_reentrant=True) * 1.0
    return make(depth)


def test_nested_checkpoints_deeper_than_recursion_limit_use_pool_thread():
    seen_threads = set()

    def probe(h):
        seen_threads.add(threading.get_ident())
        return h * 1.0

    def make(d):
        if d == 0:
            return lambda h: h * 2.0
        inner = make(d - 1)
        return lambda h: checkpoint(lambda q: probe(inner(q)), h, use_reentrant=True) * 1.0

    x = torch.ones(2, requires_grad=True)
    y = make(130)(x)  # > 60 nested reentrant backwards: the engine must switch to a pool thread
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))
    assert len(seen_threads) >= 2  # the recomputations ran on more than one thread


def test_nested_checkpoints_below_limit_stay_on_caller_thread():
    x = torch.ones(2, requires_grad=True)
    _nested(20)(x).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))


def test_deep_nesting_twice_and_with_error():
    x = torch.ones(2, requires_grad=True)
    for _ in range(2):
        x.grad = None
        _nested(100)(x).sum().backward()
        assert torch.allclose(x.grad, torch.full((2,), 2.0))

    def bad(h):
        if torch.is_grad_enabled():
            raise ValueError("recompute failed")
        return h * 1.0

    def make(d):
        if d == 0:
            return bad
        inner = make(d - 1)
        return lambda h: checkpoint(inner, h, use_reentrant=True) * 1.0

    with pytest.raises(ValueError, match="recompute failed"):
        make(90)(x).sum().backward()
    x.grad = None
    _nested(5)(x).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 2.0))


@pytest.mark.parametrize("segments", [1, 2, 3, 5, 8])
def test_checkpoint_sequential_matches_plain_run(segments):
    torch.manual_seed(0)
    ws = [torch.randn(4, 4, requires_grad=True) for _ in range(5)]
    layers = [(lambda h, w=w: (h @ w).tanh()) for w in ws]
    x = torch.randn(2, 4, requires_grad=True)
    y = x
    for f in layers:
        y = f(y)
    y.sum().backward()
    expected = _grads(ws, x)
    for t in ws + [x]:
        t.grad = None
    out = checkpoint_sequential(layers, segments, x, use_reentrant=True)
    np.testing.assert_allclose(out.detach().numpy(), y.detach().numpy(), rtol=1e-6)
    out.sum().backward()
    for a, b in zip(expected, _grads(ws, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_checkpoint_sequential_rejects_bad_segments():
    with pytest.raises(ValueError, match="segments must be at least 1"):
        checkpoint_sequential([lambda h: h], 0, torch.ones(1))


def test_checkpoint_under_no_grad_just_runs():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        y = checkpoint(lambda h: h * 2, x, use_reentrant=True)
    assert not y.requires_grad and torch.allclose(y, torch.full((2,), 2.0))
