"""MultiheadAttention and the Transformer modules against PyTorch with identical weights: outputs, attention
weights, input and parameter gradients, and parameters after SGD steps; state_dict keys and reprs."""
import numpy as np
import pytest

import tinytorch

torch = pytest.importorskip("torch")


def _copy_weights(ref, ours):
    sd = ref.state_dict()
    assert list(ours.state_dict().keys()) == list(sd.keys())
    ours.load_state_dict({k: tinytorch.tensor(v.numpy()) for k, v in sd.items()})


def _make(cls_name, *args, **kwargs):
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls_name)(*args, **kwargs).double()
    ours = getattr(tinytorch.nn, cls_name)(*args, **kwargs).double()
    _copy_weights(ref, ours)
    return ref, ours


def _run(ref, ours, call, arrays, consts=(), steps=2, train=True, tol=1e-6):
    """call(module, lib, *tensors, *consts) in both; compare outputs, input/param grads and params after SGD."""
    ref.train(train)
    ours.train(train)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt_o = tinytorch.optim.SGD(ours.parameters(), lr=0.05)
    for step in range(steps):
        ins_r = [torch.tensor(a, requires_grad=True) for a in arrays]
        ins_o = [tinytorch.tensor(a, requires_grad=True) for a in arrays]
        outs_r = call(ref, torch, *ins_r, *[c(torch) for c in consts])
        outs_o = call(ours, tinytorch, *ins_o, *[c(tinytorch) for c in consts])
        outs_r = outs_r if isinstance(outs_r, tuple) else (outs_r,)
        outs_o = outs_o if isinstance(outs_o, tuple) else (outs_o,)
        loss_r = loss_o = 0
        rng = np.random.default_rng(step)
        for a, b in zip(outs_r, outs_o):
            assert (a is None) == (b is None)
            if a is None:
                continue
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=tol, atol=tol)
            w = rng.standard_normal(tuple(a.shape))
            loss_r = loss_r + (a * torch.tensor(w)).sum()
            loss_o = loss_o + (b * tinytorch.tensor(w)).sum()
        opt_r.zero_grad()
        opt_o.zero_grad()
        loss_r.backward()
        loss_o.backward()
        for a, b in zip(ins_r, ins_o):
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)
        for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
            if p.grad is None:
                assert q.grad is None or not np.any(q.grad.numpy()), name
                continue
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=tol, atol=tol, err_msg=name)
        opt_r.step()
        opt_o.step()
    for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=tol, atol=tol, err_msg=name)


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _kpm(lib):
    return lib.tensor([[False, False, True, True, False], [False, False, False, False, True]])


def _causal_bool(lib):
    return lib.triu(lib.ones(4, 5, dtype=lib.bool), diagonal=2)


def _float_mask(lib):
    return lib.tensor(np.random.default_rng(7).standard_normal((4, 5)))


MHA_CASES = {
    "self_weights": (dict(), lambda m, lib, x: m(x, x, x), [_r(4, 2, 8)], ()),
    "cross_no_avg": (dict(), lambda m, lib, q, k, v: m(q, k, v, average_attn_weights=False),
                     [_r(4, 2, 8), _r(5, 2, 8, seed=1), _r(5, 2, 8, seed=2)], ()),
    "kpm_bool_mask": (dict(), lambda m, lib, q, k, v, kpm, am: m(q, k, v, key_padding_mask=kpm, attn_mask=am),
                      [_r(4, 2, 8), _r(5, 2, 8, seed=1), _r(5, 2, 8, seed=2)], (_kpm, _causal_bool)),
    "float_mask_no_weights": (dict(), lambda m, lib, q, k, v, am: m(q, k, v, attn_mask=am, need_weights=False),
                              [_r(4, 2, 8), _r(5, 2, 8, seed=1), _r(5, 2, 8, seed=2)], (_float_mask,)),
    "kpm_no_weights": (dict(), lambda m, lib, q, k, v, kpm: m(q, k, v, key_padding_mask=kpm, need_weights=False),
                       [_r(4, 2, 8), _r(5, 2, 8, seed=1), _r(5, 2, 8, seed=2)], (_kpm,)),
    "batch_first_kvdim": (dict(batch_first=True, kdim=3, vdim=5),
                          lambda m, lib, q, k, v: m(q, k, v),
                          [_r(2, 4, 8), _r(2, 5, 3, seed=1), _r(2, 5, 5, seed=2)], ()),
    "bias_kv_zero_attn": (dict(add_bias_kv=True, add_zero_attn=True),
                          lambda m, lib, q, k, v, kpm: m(q, k, v, key_padding_mask=kpm),
                          [_r(4, 2, 8), _r(5, 2, 8, seed=1), _r(5, 2, 8, seed=2)], (_kpm,)),
    "no_bias_unbatched": (dict(bias=False), lambda m, lib, q, k: m(q, k, k), [_r(4, 8), _r(5, 8, seed=1)], ()),
    "causal_hint": (dict(batch_first=True),
                    lambda m, lib, x: m(x, x, x, attn_mask=lib.nn.Transformer.generate_square_subsequent_mask(
                        4, dtype=lib.float64), is_causal=True, need_weights=False),
                    [_r(2, 4, 8)], ()),
}


@pytest.mark.parametrize("name", sorted(MHA_CASES))
def test_multihead_attention_parity(name):
    kw, call, arrays, consts = MHA_CASES[name]
    ref, ours = _make("MultiheadAttention", 8, 2, **kw)
    _run(ref, ours, call, arrays, consts)


def test_multihead_attention_eval_dropout_and_repr():
    ref, ours = _make("MultiheadAttention", 8, 4, dropout=0.3)
    assert repr(ours) == repr(ref)
    x = _r(3, 2, 8)
    _run(ref, ours, lambda m, lib, x: m(x, x, x), [x], train=False, steps=1)
    ours.train()
    a = ours(*(tinytorch.tensor(x),) * 3)[1]
    b = ours(*(tinytorch.tensor(x),) * 3)[1]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # dropout on the weights in training


def test_multihead_attention_errors():
    for make in (lambda nn: nn.MultiheadAttention(0, 2), lambda nn: nn.MultiheadAttention(6, 4)):
        with pytest.raises(Exception) as want:
            make(torch.nn)
        with pytest.raises(type(want.value)) as got:
            make(tinytorch.nn)
        assert str(got.value) == str(want.value)
    m = tinytorch.nn.MultiheadAttention(4, 2)
    x = tinytorch.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask"):
        m(x, x, x, attn_mask=tinytorch.zeros(2, 2))


ENC_CASES = [
    dict(dropout=0.0),
    dict(dropout=0.0, activation="gelu", norm_first=True, batch_first=True),
    dict(dropout=0.0, activation=torch.nn.functional.gelu, bias=False),
]


@pytest.mark.parametrize("kw", ENC_CASES)
def test_encoder_layer_parity(kw):
    kw_o = dict(kw)
    if callable(kw.get("activation")):
        kw_o["activation"] = tinytorch.nn.functional.gelu
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoderLayer(8, 2, 16, **kw).double()
    ours = tinytorch.nn.TransformerEncoderLayer(8, 2, 16, **kw_o).double()
    _copy_weights(ref, ours)
    bf = kw.get("batch_first", False)
    x = _r(2, 5, 8) if bf else _r(5, 2, 8)
    _run(ref, ours, lambda m, lib, x, kpm: m(x, src_key_padding_mask=kpm), [x], (_kpm,))


def test_encoder_stack_and_eval_dropout_parity():
    torch.manual_seed(0)
    layer_r = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1)
    ref = torch.nn.TransformerEncoder(layer_r, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False).double()
    layer_o = tinytorch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1)
    ours = tinytorch.nn.TransformerEncoder(layer_o, 2, norm=tinytorch.nn.LayerNorm(8), enable_nested_tensor=False)
    ours = ours.double()
    _copy_weights(ref, ours)
    mask = lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(5, dtype=lib.float64)  # noqa: E731
    _run(ref, ours, lambda m, lib, x, mk: m(x, mask=mk, is_causal=True), [_r(5, 2, 8)], (mask,), train=False)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_parity(norm_first):
    ref, ours = _make("TransformerDecoderLayer", 8, 2, 16, dropout=0.0, norm_first=norm_first)
    tmask = lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(4, dtype=lib.float64)  # noqa: E731
    _run(ref, ours, lambda m, lib, t, mem, tm, kpm: m(t, mem, tgt_mask=tm, memory_key_padding_mask=kpm),
         [_r(4, 2, 8), _r(5, 2, 8, seed=1)], (tmask, _kpm))


def test_transformer_parity_and_keys():
    ref, ours = _make("Transformer", 8, 2, 2, 1, 16, dropout=0.0, batch_first=True)
    assert repr(ours) == repr(ref)
    tmask = lambda lib: lib.nn.Transformer.generate_square_subsequent_mask(4, dtype=lib.float64)  # noqa: E731
    _run(ref, ours, lambda m, lib, s, t, tm: m(s, t, tgt_mask=tm, tgt_is_causal=True),
         [_r(2, 5, 8), _r(2, 4, 8, seed=1)], (tmask,))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        ours(tinytorch.randn(2, 5, 8, dtype=tinytorch.float64), tinytorch.randn(2, 4, 6, dtype=tinytorch.float64))
    m = tinytorch.nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(m.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(3).numpy())


def _classifier_program(lib, state=None):
    """A small transformer classifier over padded token batches, trained with SGD for a few steps. (Not Adam: the
    key bias's gradient is zero up to rounding, softmax ignoring a per-row constant, and Adam would scale that
    rounding noise up to full-size steps that differ between any two libraries.)"""
    nn = lib.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(13, 8, padding_idx=0)
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            pad = x == 0
            h = self.enc(self.emb(x), src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).to(h.dtype)
            return self.head((h * keep).sum(1) / keep.sum(1))
    lib.manual_seed(0)
    model = Classifier()
    if state is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
    rng = np.random.default_rng(0)
    losses = []
    for step in range(3):
        x = rng.integers(1, 13, (4, 6))
        x[0, 4:] = 0
        x[2, 2:] = 0
        y = rng.integers(0, 3, 4)
        loss = nn.functional.cross_entropy(model(lib.tensor(x)), lib.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_transformer_classifier_program_matches_pytorch():
    ref, _ = _classifier_program(torch)
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ref, losses_r = _classifier_program(torch, state)
    ours, losses_o = _classifier_program(tinytorch, state)
    np.testing.assert_allclose(losses_o, losses_r, rtol=1e-4, atol=1e-5)
    for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("left_aligned", [True, False])
def test_encoder_inference_with_padding_matches_pytorch_nested_path(grad, left_aligned):
    """PyTorch runs eval-mode encoders with a padding mask on nested tensors, returning zeros (then the final
    norm) at padded positions; tinytorch reproduces that output."""
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                      norm=torch.nn.LayerNorm(8)).double().eval()
    ours = tinytorch.nn.TransformerEncoder(tinytorch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                           norm=tinytorch.nn.LayerNorm(8)).double().eval()
    _copy_weights(ref, ours)
    x = _r(2, 5, 8)
    pad = np.array([[False, False, False, True, True], [False, False, False, False, False]])
    if not left_aligned:
        pad[1, 1] = True
    outs = []
    for lib, m in ((torch, ref), (tinytorch, ours)):
        ctx = lib.enable_grad() if grad else lib.no_grad()
        with ctx:
            outs.append(m(lib.tensor(x), src_key_padding_mask=lib.tensor(pad)).detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-6)


def test_encoder_nested_tensor_warning_matches_pytorch():
    import warnings
    got = []
    for lib in (torch, tinytorch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(8, 2, 16), 2)
        got.append([str(x.message) for x in w if "enable_nested_tensor" in str(x.message)])
    assert got[1] == got[0] and len(got[0]) == 1
