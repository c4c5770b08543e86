"""tinytorch.utils.checkpoint: recomputation in backward, reentrant (engine's reentrant path) and non-reentrant
(saved_tensors_hooks) variants, and the checkpoint_wrapper / apply_activation_checkpointing front end."""
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
    # The reentrant variant records one node for the segment; the non-reentrant one records the segment's graph.
    assert out.grad_fn.name() == ("CheckpointFunctionBackward" if use_reentrant else "MmBackward0")
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


def test_non_reentrant_segment_without_any_parameters_is_harmless():
    x = torch.ones(2)
    w = torch.ones(2, requires_grad=True)
    y = checkpoint(lambda h: h * 2, x, use_reentrant=False)  # nothing in it requires grad
    (y * w).sum().backward()
    assert torch.allclose(w.grad, torch.full((2,), 2.0))


# ------------------------------------------------------------------ non-reentrant (saved_tensors_hooks)

def _plain_and_checkpointed(fn, inputs, **kw):
    """Gradients of sum(fn(*inputs)) w.r.t. inputs, without and with a non-reentrant checkpoint."""
    plain = autograd.grad(fn(*inputs).sum(), inputs)
    ckpt = autograd.grad(checkpoint(fn, *inputs, use_reentrant=False, **kw).sum(), inputs)
    return plain, ckpt


def test_non_reentrant_keeps_no_activation_and_recomputes_once_per_backward():
    import gc
    import weakref
    params = _mlp_params()
    x = torch.randn(64, 4, requires_grad=True)
    inner, calls = [], []

    def fn(h):
        calls.append(torch.is_grad_enabled())
        a = (h @ params[0] + params[1]).tanh()
        inner.append(weakref.ref(a._data))
        return a @ params[2]

    out = checkpoint(fn, x, use_reentrant=False)
    gc.collect()
    assert calls == [True] and inner[0]() is None  # forward recorded a graph but kept no activation
    out.sum().backward(retain_graph=True)
    assert calls == [True, True]
    first = _grads(params, x)
    out.sum().backward()  # a second backward through the retained graph recomputes again
    assert calls == [True, True, True]
    for a, b in zip(first, _grads(params, x)):
        np.testing.assert_allclose(2 * a, b, rtol=1e-6)


def test_non_reentrant_supports_grad_and_backward_inputs():
    params = _mlp_params()
    x = torch.randn(5, 4, requires_grad=True)
    plain, ckpt = _plain_and_checkpointed(lambda h, *p: _block(p, h), [x] + params)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    y = checkpoint(lambda h: _block(params, h), x, use_reentrant=False).sum()
    y.backward(inputs=[params[0]])
    assert x.grad is None and params[1].grad is None
    np.testing.assert_allclose(params[0].grad.numpy(), plain[1].numpy(), rtol=1e-6)


def test_non_reentrant_gradcheck_float64():
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)

    def f(a, b):
        return checkpoint(lambda u, v: torch.nn.functional.gelu(u @ v).softmax(-1) * u.exp(), a, b,
                          use_reentrant=False)
    assert autograd.gradcheck(f, (x, w))


def test_non_reentrant_replays_rng_and_autocast():
    torch.manual_seed(3)
    x = torch.randn(8, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)

    def fn(h, v):
        return torch.nn.functional.dropout(h @ v, p=0.5, training=True)

    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = fn(x, w)
    ref.float().sum().backward()
    expected = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = checkpoint(fn, x, w, use_reentrant=False)
    assert out.dtype == torch.bfloat16
    torch.rand(3)  # move the stream on: the recomputation must still see the forward's state
    out.float().sum().backward()  # outside autocast: the recomputation re-enters it
    for a, b in zip(expected, [x.grad, w.grad]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_non_reentrant_passes_keyword_arguments_and_reentrant_refuses_them():
    x = torch.ones(2, requires_grad=True)
    y = checkpoint(lambda h, scale=1.0: h * h * scale, x, use_reentrant=False, scale=3.0)
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 6.0))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda h, scale=1.0: h * scale, x, use_reentrant=True, scale=3.0)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lambda h: h, x, use_reentrant=True, context_fn=lambda: (None, None))


def test_use_reentrant_must_be_passed_explicitly_as_pytorch_warns():
    x = torch.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        y = checkpoint(lambda h: h * 2, x)
    assert y.grad_fn.name() == "CheckpointFunctionBackward"  # PyTorch's default is still the reentrant variant


def test_nested_non_reentrant_checkpoints():
    params = _mlp_params()
    x = torch.randn(3, 4, requires_grad=True)

    def outer(h):
        a = checkpoint(lambda u: (u @ params[0] + params[1]).tanh(), h, use_reentrant=False)
        return checkpoint(lambda u: (u @ params[2]).sin(), a, use_reentrant=False).exp()

    plain = autograd.grad(((x @ params[0] + params[1]).tanh() @ params[2]).sin().exp().sum(), [x] + params)
    got = autograd.grad(checkpoint(outer, x, use_reentrant=False).sum(), [x] + params)
    for a, b in zip(plain, got):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)

    # An inner checkpoint's input is a saved tensor of the outer segment: the outer one does not keep it.
    import gc
    import weakref
    refs = []

    def outer2(h):
        a = h.sin() * 2.0
        refs.append(weakref.ref(a._data))
        return checkpoint(lambda u: u.exp(), a, use_reentrant=False)

    y = checkpoint(outer2, x, use_reentrant=False)
    gc.collect()
    assert refs[0]() is None
    (gx,) = autograd.grad(y.sum(), [x])
    np.testing.assert_allclose(gx.numpy(), ((x.sin() * 2).exp() * 2 * x.cos()).detach().numpy(), rtol=1e-6)


def test_non_deterministic_segment_is_detected():
    from tinytorch.utils.checkpoint import CheckpointError
    x = torch.randn(4, requires_grad=True)
    state = {"n": 4}

    def fn(h):
        n = state["n"]
        state["n"] -= 1
        return h[:n].sin().sum() + h.cos().sum()

    y = checkpoint(fn, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="different metadata"):
        y.backward()
    state["n"] = 4
    calls = []

    def fewer(h):  # the recomputation saves fewer tensors than the forward did
        calls.append(1)
        return h.sin().sum() if len(calls) == 1 else h.sum()

    y = checkpoint(fewer, x, use_reentrant=False, determinism_check="none")
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        y.backward()
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(fn, x, use_reentrant=False, determinism_check="bogus")


def test_recomputation_stops_early_unless_told_not_to():
    from tinytorch.utils.checkpoint import set_checkpoint_early_stop
    x = torch.randn(4, requires_grad=True)
    after_last_save = []

    def fn(h):
        y = h.sin()  # the last op that saves a tensor
        after_last_save.append(1)
        return y + 1.0

    checkpoint(fn, x, use_reentrant=False).sum().backward()
    assert len(after_last_save) == 1  # the recomputation stopped at sin
    with set_checkpoint_early_stop(False):
        y = checkpoint(fn, x, use_reentrant=False)
    y.sum().backward()
    assert len(after_last_save) == 3
    checkpoint(fn, x, use_reentrant=False, early_stop=False).sum().backward()
    assert len(after_last_save) == 5


def test_checkpoint_sequential_non_reentrant():
    torch.manual_seed(0)
    ws = [torch.randn(4, 4, requires_grad=True) for _ in range(4)]
    layers = [(lambda h, w=w: (h @ w).tanh()) for w in ws]
    x = torch.randn(2, 4, requires_grad=True)
    y = x
    for f in layers:
        y = f(y)
    plain = autograd.grad(y.sum(), [x] + ws)
    got = autograd.grad(checkpoint_sequential(layers, 2, x, use_reentrant=False).sum(), [x] + ws)
    for a, b in zip(plain, got):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


# ------------------------------------------------------------------ checkpoint_wrapper

def _wrapped_model():
    from tinytorch import nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)),
                         nn.Linear(8, 3))


def test_apply_activation_checkpointing_trains_like_the_plain_model():
    from tinytorch import nn
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, CheckpointWrapper, apply_activation_checkpointing, checkpoint_wrapper)
    from functools import partial
    # The input requires grad: the reentrant variant gives a segment's parameters no gradient otherwise.
    x, target = torch.randn(5, 6, requires_grad=True), torch.randn(5, 3)
    losses = {}
    for impl in (None, CheckpointImpl.NO_REENTRANT, CheckpointImpl.REENTRANT):
        model = _wrapped_model()
        if impl is not None:
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_impl=impl),
                                           check_fn=lambda m: isinstance(m, nn.Linear))
            wrapped = [m for m in model.modules() if isinstance(m, CheckpointWrapper)]
            assert len(wrapped) == 3 and all(m.checkpoint_impl is impl for m in wrapped)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses[impl] = []
        for _ in range(3):
            loss = torch.nn.functional.mse_loss(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[impl].append(loss.item())
        losses[impl].append([p.detach().numpy().copy() for p in model.parameters()])
    for impl in (CheckpointImpl.NO_REENTRANT, CheckpointImpl.REENTRANT):
        np.testing.assert_allclose(losses[impl][:3], losses[None][:3], rtol=1e-6)
        for a, b in zip(losses[impl][3], losses[None][3]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_wrapper_state_dict_keys_and_loading_both_ways():
    from tinytorch import nn
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
    plain = _wrapped_model()
    model = _wrapped_model()
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear))
    assert list(model.state_dict()) == list(plain.state_dict())
    assert [n for n, _ in model[0].named_parameters()] == ["weight", "bias"]
    assert model[0].in_features == 6  # attributes reach the wrapped module
    for p in plain.parameters():
        p.data.add_(1.0)
    model.load_state_dict(plain.state_dict())  # unwrapped -> wrapped
    again = _wrapped_model()
    again.load_state_dict(model.state_dict())  # wrapped -> unwrapped
    for a, b in zip(plain.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


def test_wrapper_passes_kwargs_and_custom_checkpoint_fn_and_policies():
    from tinytorch import nn
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper, offload_wrapper)

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x, scale=1.0):
            return (x * self.w).sin() * scale

    x = torch.randn(2, 3, requires_grad=True)
    for impl in CheckpointImpl:
        m = checkpoint_wrapper(Scale(), checkpoint_impl=impl)
        m(x, scale=2.0).sum().backward()
        np.testing.assert_allclose(m.w.grad.numpy(), (2 * x.cos() * x).sum(0).detach().numpy(), rtol=1e-6)
    seen = []
    m = checkpoint_wrapper(Scale(), checkpoint_fn=lambda fn, *a, extra, **k: seen.append((extra, k)) or fn(*a, **k),
                           extra=1)
    m(x, scale=2.0)
    assert seen == [(1, {"scale": 2.0})]
    off = offload_wrapper(Scale())
    off(x).sum().backward()
    assert off.w.grad is not None
    model = nn.Sequential(nn.Linear(3, 3), nn.Sequential(nn.Linear(3, 3)))
    apply_activation_checkpointing(model, auto_wrap_policy=lambda module, recurse, nonwrapped_numel:
                                   recurse or isinstance(module, nn.Sequential))
    assert type(model[1]).__name__ == "CheckpointWrapper" and type(model[0]).__name__ == "Linear"
    with pytest.raises(ValueError, match="to be callable"):
        apply_activation_checkpointing(model, auto_wrap_policy={nn.Linear})


def test_wrapper_keys_match_pytorch():
    torch_ = pytest.importorskip("torch")
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing as pt_apply
    from tinytorch import nn
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

    def build(mod):
        return mod.Sequential(mod.Linear(4, 4), mod.ReLU(), mod.Sequential(mod.Linear(4, 4), mod.Linear(4, 2)))
    ours, theirs = build(nn), build(torch_.nn)
    apply_activation_checkpointing(ours, check_fn=lambda m: isinstance(m, nn.Linear))
    pt_apply(theirs, check_fn=lambda m: isinstance(m, torch_.nn.Linear))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("op", ["sdpa", "causal_sdpa", "lstm", "gru"])
def test_non_reentrant_fused_kernels_give_every_input_its_gradient(op):
    """Fused kernels whose backward picks the inputs to differentiate: under checkpoint their saved inputs come back
    detached (recomputed), yet every input that required grad still gets its gradient."""
    F = torch.nn.functional
    torch.manual_seed(0)
    if op.endswith("sdpa"):
        lin = torch.nn.Linear(4, 12).double()
        x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)

        def fn(t):
            q, k, v = lin(t).view(2, 5, 3, 4).unbind(2)
            return F.scaled_dot_product_attention(q, k, v, is_causal=op == "causal_sdpa")
    else:
        lin = (torch.nn.LSTM if op == "lstm" else torch.nn.GRU)(4, 3).double()
        x = torch.randn(5, 2, 4, dtype=torch.float64, requires_grad=True)

        def fn(t):
            return lin(t * 1.0)[0]

    params = [x, *lin.parameters()]
    plain = autograd.grad(fn(x).square().sum(), params)
    ckpt = autograd.grad(checkpoint(fn, x, use_reentrant=False).square().sum(), params)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12, atol=1e-14)
