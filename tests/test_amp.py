"""Autocast (PyTorch's op lists, nesting, cache, custom_fwd) and GradScaler (PyTorch's scale sequence and errors)."""
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch import _autocast

X = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)

# (name, fn(lib, F, x, y, t)) run under autocast("cpu") in tinytorch and PyTorch; dtypes must match
OPS = [
    ("matmul", lambda L, F, x, y, t: x @ y.T),
    ("mm", lambda L, F, x, y, t: L.mm(x, y.T)),
    ("bmm", lambda L, F, x, y, t: L.bmm(x[None], y.T[None])),
    ("addmm", lambda L, F, x, y, t: L.addmm(y[:, :4], x, y.T)),
    ("baddbmm", lambda L, F, x, y, t: L.baddbmm(y[None, :, :4], x[None], y.T[None])),
    ("einsum", lambda L, F, x, y, t: L.einsum("ij,kj->ik", x, y)),
    ("mv", lambda L, F, x, y, t: L.mv(x, x[0])),
    ("linear", lambda L, F, x, y, t: F.linear(x, y, y[:, 0])),
    ("sdpa", lambda L, F, x, y, t: F.scaled_dot_product_attention(x[None], y[None], y[None])),
    ("softmax", lambda L, F, x, y, t: F.softmax(x, -1)),
    ("softmax_of_matmul", lambda L, F, x, y, t: (x @ y.T).softmax(-1)),
    ("log_softmax", lambda L, F, x, y, t: x.log_softmax(-1)),
    ("layer_norm", lambda L, F, x, y, t: F.layer_norm(x, (8,))),
    ("cross_entropy", lambda L, F, x, y, t: F.cross_entropy(x, t)),
    ("cross_entropy_of_linear", lambda L, F, x, y, t: F.cross_entropy(F.linear(x, y), t)),
    ("nll_loss", lambda L, F, x, y, t: F.nll_loss(x, t)),
    ("mse_loss", lambda L, F, x, y, t: F.mse_loss(x @ y.T, y @ y.T)),
    ("l1_loss", lambda L, F, x, y, t: F.l1_loss(x, y)),
    ("smooth_l1_loss", lambda L, F, x, y, t: F.smooth_l1_loss(x, y)),
    ("huber_loss", lambda L, F, x, y, t: F.huber_loss(x, y)),
    ("bce_with_logits", lambda L, F, x, y, t: F.binary_cross_entropy_with_logits(x, y.sigmoid())),
    ("bce", lambda L, F, x, y, t: F.binary_cross_entropy(x.sigmoid(), y.sigmoid())),
    ("sum", lambda L, F, x, y, t: x.sum()),
    ("sum_dtype", lambda L, F, x, y, t: (x @ y.T).sum(dtype=L.float64)),
    ("prod", lambda L, F, x, y, t: (x @ y.T).prod()),
    ("exp", lambda L, F, x, y, t: (x @ y.T).exp()),
    ("pow", lambda L, F, x, y, t: (x @ y.T) ** 2),
    ("cat_promote", lambda L, F, x, y, t: L.cat([x @ y.T, y[:, :4]])),
    ("stack_promote", lambda L, F, x, y, t: L.stack([x @ y.T, y[:, :4]])),
    ("add_mixed", lambda L, F, x, y, t: (x @ y.T) + y[:, :4]),
    ("gelu", lambda L, F, x, y, t: F.gelu(x @ y.T)),
]


def _run(lib, fn, low_input: bool):
    x, y = lib.tensor(X), lib.tensor(Y)
    t = lib.tensor([1, 2, 3, 0])
    if low_input:
        x = x.to(lib.bfloat16)
    with lib.autocast("cpu"):
        return fn(lib, lib.nn.functional, x, y, t)


@pytest.mark.parametrize("low_input", [False, True])
@pytest.mark.parametrize("name,fn", OPS, ids=[o[0] for o in OPS])
def test_cpu_autocast_dtypes_and_values_match_torch(name, fn, low_input):
    torch = pytest.importorskip("torch")
    ours, theirs = _run(tinytorch, fn, low_input), _run(torch, fn, low_input)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], name
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=2e-2, atol=2e-2)


def test_cpu_autocast_known_dtypes():
    x, y = tinytorch.tensor(X), tinytorch.tensor(Y)
    t = tinytorch.tensor([1, 2, 3, 0])
    with tinytorch.autocast("cpu"):
        h = F.linear(x, y)
        assert h.dtype is tinytorch.bfloat16
        assert (x @ y.T).dtype is tinytorch.bfloat16
        assert F.cross_entropy(h, t).dtype is tinytorch.float32  # CPU fp32 list
        assert F.softmax(h, -1).dtype is tinytorch.bfloat16  # not on the CPU lists: runs in its input's type
        assert tinytorch.cat([h, x[:, :4]]).dtype is tinytorch.float32  # promote list
        assert (x.double() @ y.double().T).dtype is tinytorch.float64  # float64 is never autocast
    assert (x @ y.T).dtype is tinytorch.float32


def test_gradients_reach_float32_leaves_and_match_torch():
    w_np = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    t_np = np.array([0, 2, 1, 1])
    grads = {}
    libs = [tinytorch]
    try:
        import torch
        libs.append(torch)
    except ImportError:
        pass
    for lib in libs:
        x = lib.tensor(X)
        w = lib.tensor(w_np, requires_grad=True)
        with lib.autocast("cpu"):
            logits = lib.nn.functional.linear(x, w)
            loss = lib.nn.functional.cross_entropy(logits, lib.tensor(t_np))
        assert logits.dtype == lib.bfloat16 and loss.dtype == lib.float32
        loss.backward()
        assert w.grad.dtype == lib.float32
        grads[lib.__name__] = w.grad.numpy()
    if "torch" in grads:
        np.testing.assert_allclose(grads["tinytorch"], grads["torch"], rtol=2e-2, atol=2e-3)
    assert np.abs(grads["tinytorch"]).sum() > 0


def test_nesting_disabled_region_and_decorator():
    x = tinytorch.tensor(X)
    assert not tinytorch.is_autocast_enabled("cpu")
    with tinytorch.autocast("cpu"):
        assert tinytorch.is_autocast_enabled("cpu")
        with tinytorch.autocast("cpu", enabled=False):
            assert not tinytorch.is_autocast_enabled("cpu")
            assert (x @ x.T).dtype is tinytorch.float32
        with tinytorch.autocast("cpu", dtype=tinytorch.float16):
            assert tinytorch.get_autocast_dtype("cpu") is tinytorch.float16
            assert (x @ x.T).dtype is tinytorch.float16
        assert tinytorch.get_autocast_dtype("cpu") is tinytorch.bfloat16
        assert (x @ x.T).dtype is tinytorch.bfloat16
    assert not tinytorch.is_autocast_enabled("cpu") and not _autocast.active

    @tinytorch.autocast("cpu")
    def f(a):
        return a @ a.T
    assert f(x).dtype is tinytorch.bfloat16
    assert (x @ x.T).dtype is tinytorch.float32


def test_region_restored_after_exception():
    with pytest.raises(ValueError):
        with tinytorch.autocast("cpu"):
            raise ValueError("boom")
    assert not tinytorch.is_autocast_enabled("cpu") and not _autocast.active and _autocast._tls.nesting == 0


def test_cast_cache_holds_leaf_casts_until_outermost_exit():
    w = tinytorch.tensor(Y, requires_grad=True)
    x = tinytorch.tensor(X)
    with tinytorch.autocast("cpu"):
        F.linear(x, w)
        with tinytorch.autocast("cpu"):
            F.linear(x, w)
        assert len(_autocast._tls.cache) == 1  # w cast once; x (no grad) is not cached
        cast = _autocast._tls.cache[id(w)][1]
        assert cast.dtype is tinytorch.bfloat16 and cast.grad_fn is not None
    assert len(_autocast._tls.cache) == 0
    with tinytorch.autocast("cpu", cache_enabled=False):
        F.linear(x, w)
        assert len(_autocast._tls.cache) == 0
    with tinytorch.autocast("cpu"):  # a no_grad pass first must not leave a graph-less cast behind
        with tinytorch.no_grad():
            F.linear(x, w)
        F.linear(x, w).float().sum().backward()
    assert w.grad is not None and w.grad.dtype is tinytorch.float32


def test_explicit_dtype_is_not_autocast():
    x = tinytorch.tensor(X)
    with tinytorch.autocast("cpu"):
        assert F.softmax(x @ x.T, -1, dtype=tinytorch.float64).dtype is tinytorch.float64


def test_cuda_policy_lists_and_cpu_tensors_under_cuda_autocast():
    assert _autocast.policy("softmax", "cuda") == "fp32"
    assert _autocast.policy("softmax", "cpu") is None
    assert _autocast.policy("conv2d", "cuda") == "lower" and _autocast.policy("conv2d", "cpu") == "lower"
    assert _autocast.policy("group_norm", "cuda") == "fp32"
    assert _autocast.policy("dot", "cuda") == "promote" and _autocast.policy("dot", "cpu") is None
    assert _autocast.policy("binary_cross_entropy", "cuda") == "banned"
    # RNNs as PyTorch's CPU autocast runs them (nn.LSTM/nn.RNN in bfloat16, nn.GRU and the cells not)
    assert _autocast.policy("lstm", "cpu") == "lower" and _autocast.policy("rnn_tanh", "cpu") == "lower"
    assert _autocast.policy("gru", "cpu") is None and _autocast.policy("lstm_cell", "cpu") is None
    assert _autocast.policy("gru", "cuda") == "lower" and _autocast.policy("lstm_cell", "cuda") == "lower"
    assert _autocast.policy("max_pool2d", "cpu") is None and _autocast.policy("max_pool3d", "cpu") == "fp32"
    x = tinytorch.tensor(X)
    _autocast.set_autocast_enabled("cuda", True)
    try:
        assert tinytorch.is_autocast_enabled() and tinytorch.is_autocast_enabled("cuda")
        assert (x @ x.T).dtype is tinytorch.float32  # CPU tensors are not eligible for CUDA autocast
        assert _autocast.cast_args("conv2d", x, x) == (x, x)
    finally:
        _autocast.set_autocast_enabled("cuda", False)
    assert tinytorch.get_autocast_dtype("cuda") is tinytorch.float16
    assert tinytorch.get_autocast_dtype("cpu") is tinytorch.bfloat16


def test_cuda_autocast_without_gpu_warns_and_disables():
    if tinytorch.cuda.is_available():
        with tinytorch.autocast("cuda"):
            assert tinytorch.is_autocast_enabled("cuda")
        assert tinytorch.amp.GradScaler().is_enabled()
        return
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling"):
        ac = tinytorch.autocast("cuda")
    with ac:
        assert not tinytorch.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
        assert not tinytorch.amp.GradScaler().is_enabled()


def test_autocast_argument_errors():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        tinytorch.autocast(1)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xla'"):
        tinytorch.autocast("xla")
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtype of torch.bfloat16, torch.float16"):
        ac = tinytorch.autocast("cpu", dtype=tinytorch.float32)
    with ac:
        assert not tinytorch.is_autocast_enabled("cpu")


def test_deprecated_spellings_warn_like_pytorch():
    with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ac = tinytorch.cpu.amp.autocast()
    with ac:
        assert tinytorch.is_autocast_enabled("cpu")
    with pytest.warns(FutureWarning, match=r"`torch.cuda.amp.autocast\(args...\)` is deprecated"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            tinytorch.cuda.amp.autocast()
    with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.GradScaler\(args...\)` is deprecated"):
        tinytorch.cpu.amp.GradScaler()
    with pytest.warns(DeprecationWarning, match=r"get_autocast_gpu_dtype\(\) is deprecated"):
        assert tinytorch.get_autocast_gpu_dtype() is tinytorch.float16
    with pytest.warns(FutureWarning, match="custom_fwd"):
        tinytorch.cuda.amp.custom_fwd(lambda ctx, x: x)


def test_custom_fwd_cast_inputs_and_custom_bwd():
    seen = {}

    class Square(tinytorch.autograd.Function):
        @staticmethod
        @tinytorch.amp.custom_fwd(device_type="cpu", cast_inputs=tinytorch.float32)
        def forward(ctx, a):
            seen["fwd"] = (a.dtype, tinytorch.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @tinytorch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = tinytorch.is_autocast_enabled("cpu")
            (a,) = ctx.saved_tensors
            return 2 * a * g

    x = tinytorch.tensor(X, requires_grad=True)
    with tinytorch.autocast("cpu"):
        h = x.to(tinytorch.bfloat16)
        out = Square.apply(h)
    assert seen["fwd"] == (tinytorch.float32, False)
    assert out.dtype is tinytorch.float32
    out.sum().backward()
    assert seen["bwd"] is False  # forward ran with autocast off, so backward does too
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError):
        tinytorch.amp.custom_fwd(lambda ctx, a: a)  # device_type is keyword-only and required


# ------------------------------------------------------------------ GradScaler

def _scaler_run(lib, steps_with_inf, n_steps=7):
    """A tiny fp32 model with GradScaler('cpu', growth_interval=2): which steps apply, and the scales."""
    w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 4, growth_interval=2)
    scales, weights = [], []
    for i in range(n_steps):
        opt.zero_grad()
        loss = (w * w).sum()
        if i in steps_with_inf:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(w.detach().numpy().copy())
    return scales, weights, scaler


def test_grad_scaler_known_sequence_and_skipped_steps():
    scales, weights, scaler = _scaler_run(tinytorch, {2, 3})
    # 16 -> two clean steps grow it to 32; steps 2 and 3 overflow: 16, 8; then 8, grow to 16, 16
    assert scales == [16.0, 32.0, 16.0, 8.0, 8.0, 16.0, 16.0]
    np.testing.assert_array_equal(weights[2], weights[1])  # skipped
    np.testing.assert_array_equal(weights[3], weights[1])
    np.testing.assert_allclose(weights[0], np.array([1.0, -2.0, 3.0]) * 0.8, rtol=1e-6)  # unscaled grad 2w
    assert scaler.state_dict() == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 2, "_growth_tracker": 1}


def test_grad_scaler_matches_torch():
    torch = pytest.importorskip("torch")
    ours = _scaler_run(tinytorch, {1, 4, 5})
    theirs = _scaler_run(torch, {1, 4, 5})
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert ours[2].state_dict() == theirs[2].state_dict()


def test_grad_scaler_nan_gradients_are_found():
    w = tinytorch.tensor([1.0, 2.0], requires_grad=True)
    opt = tinytorch.optim.SGD([w], lr=0.1)
    scaler = tinytorch.amp.GradScaler("cpu", init_scale=8.0)
    (scaler.scale(w.sum()) * float("nan")).backward()
    scaler.unscale_(opt)
    assert scaler._per_optimizer_states[id(opt)]["found_inf_per_device"]["cpu"].item() == 1.0
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [1.0, 2.0] and scaler.get_scale() == 4.0


def test_grad_scaler_errors():
    w = tinytorch.tensor([1.0, 2.0], requires_grad=True)
    opt = tinytorch.optim.SGD([w], lr=0.1)
    scaler = tinytorch.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(opt)
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer since the last "
                                           r"update\(\)."):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported if GradScaler is enabled."):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)."):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)."):
        scaler.step(opt)
    scaler.update()
    h = tinytorch.tensor([1.0], dtype=tinytorch.float16, requires_grad=True)
    hopt = tinytorch.optim.SGD([h], lr=0.1)
    h.grad = tinytorch.tensor([1.0], dtype=tinytorch.float16)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(hopt)
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([1.0])


def test_grad_scaler_scale_nested_update_and_state_dict():
    scaler = tinytorch.amp.GradScaler("cpu", init_scale=4.0)
    a, b = tinytorch.tensor([1.0]), tinytorch.tensor([2.0])
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].item() == 4.0 and out[1][0].item() == 8.0
    scaler.update(new_scale=2.0 ** 10)
    assert scaler.get_scale() == 1024.0
    scaler.update(new_scale=tinytorch.tensor(8.0))
    assert scaler.get_scale() == 8.0
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (2.0, 0.5, 2000)
    other = tinytorch.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == 8.0
    off = tinytorch.amp.GradScaler("cpu", enabled=False)
    assert off.state_dict() == {} and off.get_scale() == 1.0 and off.scale(a) is a
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        other.load_state_dict({})


def _block_loss(lib, weights, x_np, t_np, amp: bool):
    """A pre-norm attention + MLP block and a cross-entropy head, weights given; returns (loss, logits, grads)."""
    F_ = lib.nn.functional
    W = {k: lib.tensor(v, requires_grad=True) for k, v in weights.items()}
    x = lib.tensor(x_np)
    ctx = lib.autocast("cpu", dtype=lib.bfloat16) if amp else lib.autocast("cpu", enabled=False)
    with ctx:
        h = F_.layer_norm(x, (8,), W["ln_w"], W["ln_b"])
        q, k, v = F_.linear(h, W["qkv"]).split(8, dim=-1)
        q, k, v = (z.view(2, 5, 2, 4).transpose(1, 2) for z in (q, k, v))
        a = F_.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 8)
        x2 = x + F_.linear(a, W["proj"])
        logits = F_.linear(F_.gelu(F_.linear(x2, W["fc"], W["fc_b"])), W["head"])
        loss = F_.cross_entropy(logits.reshape(10, 6), lib.tensor(t_np))
    loss.backward()
    return loss, logits, {k: w.grad.numpy() for k, w in W.items()}


def test_transformer_block_under_autocast_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    weights = {"ln_w": 1 + 0.1 * rng.standard_normal(8), "ln_b": 0.1 * rng.standard_normal(8),
               "qkv": 0.3 * rng.standard_normal((24, 8)), "proj": 0.3 * rng.standard_normal((8, 8)),
               "fc": 0.3 * rng.standard_normal((16, 8)), "fc_b": 0.1 * rng.standard_normal(16),
               "head": 0.3 * rng.standard_normal((6, 16))}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    x_np = rng.standard_normal((2, 5, 8)).astype(np.float32)
    t_np = rng.integers(0, 6, 10)
    ours = _block_loss(tinytorch, weights, x_np, t_np, amp=True)
    theirs = _block_loss(torch, weights, x_np, t_np, amp=True)
    assert ours[1].dtype is tinytorch.bfloat16 and theirs[1].dtype == torch.bfloat16
    assert ours[0].dtype is tinytorch.float32 and theirs[0].dtype == torch.float32
    np.testing.assert_allclose(ours[0].item(), theirs[0].item(), rtol=2e-2)
    for k in weights:
        np.testing.assert_allclose(ours[2][k], theirs[2][k], rtol=0.1, atol=2e-2, err_msg=k)
    full = _block_loss(tinytorch, weights, x_np, t_np, amp=False)  # the bf16 run stays near the float32 one
    np.testing.assert_allclose(ours[0].item(), full[0].item(), rtol=2e-2)


def test_conv_layers_run_in_bfloat16_under_cpu_autocast():
    # conv1d/conv2d/conv_transpose* are on PyTorch's CPU lower-precision list; pooling follows its input.
    import tinytorch
    c, ct = tinytorch.nn.Conv2d(3, 4, 3), tinytorch.nn.ConvTranspose1d(4, 2, 2)
    x = tinytorch.randn(2, 3, 8, 8, requires_grad=True)
    with tinytorch.autocast("cpu", dtype=tinytorch.bfloat16):
        y = c(x)
        z = ct(y.flatten(2))
        p = tinytorch.nn.functional.max_pool2d(y, 2)
    assert (y.dtype, z.dtype, p.dtype) == (tinytorch.bfloat16,) * 3
    z.float().sum().backward()
    assert x.grad.dtype == tinytorch.float32 and c.weight.grad.dtype == tinytorch.float32


def test_autocast_state_is_per_thread():
    """As in PyTorch: a region entered in one thread leaves other threads' ops (and state) alone."""
    import threading
    x = tinytorch.tensor(X)
    entered, done = threading.Event(), threading.Event()
    seen = {}

    def other():
        entered.wait(5)
        seen["enabled"] = tinytorch.is_autocast_enabled("cpu")
        seen["dtype"] = (x @ x.T).dtype
        with tinytorch.autocast("cpu", dtype=tinytorch.float16):  # its own dtype, not the main thread's
            seen["inner"] = (x @ x.T).dtype
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with tinytorch.autocast("cpu"):
        entered.set()
        assert done.wait(5)
        assert (x @ x.T).dtype is tinytorch.bfloat16 and tinytorch.get_autocast_dtype("cpu") is tinytorch.bfloat16
    t.join(5)
    assert seen == {"enabled": False, "dtype": tinytorch.float32, "inner": tinytorch.float16}
