"""Recurrent layers: the fused per-layer op against finite differences, and RNN/LSTM/GRU, the cells and
the sequence utilities against PyTorch with identical weights (outputs, gradients, parameters after
optimizer steps, state_dict keys, error messages)."""
import numpy as np
import pytest

import tinytorch
from tinytorch._ops.rnn import rnn_layer
from tinytorch.autograd import gradcheck
from tinytorch.nn.utils.rnn import pack_sequence, pad_sequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


@pytest.mark.parametrize("mode,proj", [("RNN_TANH", 0), ("RNN_RELU", 0), ("LSTM", 0), ("LSTM", 2), ("GRU", 0)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_rnn_layer_gradcheck(mode, proj, reverse, masked):
    rng = np.random.default_rng(1)

    def t(*s):
        return tinytorch.tensor(rng.standard_normal(s) * 0.5, requires_grad=True)
    T, B, I, H = 3, 2, 3, 4
    G = _GATES[mode]
    Ho = proj or H
    mask = np.array([[1, 1], [1, 0], [1, 0]], bool) if masked else None
    args = [t(T, B, I), t(B, Ho), t(G * H, I), t(G * H, Ho), t(G * H), t(G * H)]
    if mode == "LSTM":
        args.append(t(B, H))
    if proj:
        args.append(t(proj, H))

    def f(x, h0, wih, whh, bih, bhh, *rest):
        c0 = rest[0] if mode == "LSTM" else None
        whr = rest[1] if proj else None
        y, hn, cn = rnn_layer(mode, x, h0, c0, wih, whh, bih, bhh, whr, reverse, mask)
        return (y, hn) if cn is None else (y, hn, cn)
    assert gradcheck(f, tuple(args))


def test_rnn_layer_no_bias_gradcheck():
    rng = np.random.default_rng(2)
    x = tinytorch.tensor(rng.standard_normal((2, 2, 3)), requires_grad=True)
    h0 = tinytorch.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    wih = tinytorch.tensor(rng.standard_normal((9, 3)) * 0.5, requires_grad=True)
    whh = tinytorch.tensor(rng.standard_normal((9, 3)) * 0.5, requires_grad=True)
    assert gradcheck(lambda *a: rnn_layer("GRU", a[0], a[1], None, a[2], a[3], None, None)[:2], (x, h0, wih, whh))


# ------------------------------------------------------------------ PyTorch parity

def _torch():
    return pytest.importorskip("torch")


def _pair(cls_name, *args, **kwargs):
    """The same layer in both libraries, PyTorch's weights copied into tinytorch's."""
    torch = _torch()
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls_name)(*args, **kwargs).double()
    ours = getattr(tinytorch.nn, cls_name)(*args, **kwargs).double()
    sd = ref.state_dict()
    assert list(ours.state_dict().keys()) == list(sd.keys())
    ours.load_state_dict({k: tinytorch.tensor(v.numpy()) for k, v in sd.items()})
    return ref, ours


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [out]


def _check_training(ref, ours, make_inputs, steps=2, train=True, tol=1e-4):
    """Forward, backward of a fixed cotangent and SGD steps in both: outputs, input grads, params agree."""
    torch = _torch()
    ref.train(train)
    ours.train(train)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt_o = tinytorch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        arrays = make_inputs(step)
        ins_r = [torch.tensor(a, requires_grad=True) for a in arrays]
        ins_o = [tinytorch.tensor(a, requires_grad=True) for a in arrays]
        out_r, out_o = _flat(ref(*ins_r)), _flat(ours(*ins_o))
        assert len(out_r) == len(out_o)
        rng = np.random.default_rng(step)
        loss_r = loss_o = 0
        for a, b in zip(out_r, out_o):
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
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=tol, atol=tol, err_msg=name)
        opt_r.step()
        opt_o.step()
        for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=tol, atol=tol, err_msg=name)


CONFIGS = [
    ("RNN", dict(num_layers=2)),
    ("RNN", dict(nonlinearity="relu", bidirectional=True)),
    ("RNN", dict(bias=False, batch_first=True)),
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(proj_size=3, num_layers=2, batch_first=True)),
    ("LSTM", dict(bias=False)),
    ("LSTM", dict(proj_size=2, num_layers=2, bidirectional=True)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(bias=False)),
]


@pytest.mark.parametrize("cls,kw", CONFIGS)
@pytest.mark.parametrize("train", [True, False])
def test_rnn_parity(cls, kw, train):
    ref, ours = _pair(cls, 4, 5, **kw)
    bf = kw.get("batch_first", False)

    def inputs(step):
        rng = np.random.default_rng(10 + step)
        return [rng.standard_normal((3, 6, 4) if bf else (6, 3, 4))]
    _check_training(ref, ours, inputs, train=train)


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_rnn_parity_initial_state_and_unbatched(cls):
    ref, ours = _pair(cls, 3, 4, num_layers=2, bidirectional=True)
    lstm = cls == "LSTM"

    def batched(step):
        rng = np.random.default_rng(step)
        return [rng.standard_normal((5, 2, 3)), rng.standard_normal((4, 2, 4))] + \
            ([rng.standard_normal((4, 2, 4))] if lstm else [])

    def unbatched(step):
        rng = np.random.default_rng(step)
        return [rng.standard_normal((5, 3)), rng.standard_normal((4, 4))] + \
            ([rng.standard_normal((4, 4))] if lstm else [])
    for make in (batched, unbatched):
        if lstm:
            wrap_r = lambda m: (lambda x, h, c: m(x, (h, c)))  # noqa: E731
            r, o = _Wrap(ref, wrap_r(ref)), _Wrap(ours, wrap_r(ours))
        else:
            r, o = ref, ours
        _check_training(r, o, make, steps=1)


class _Wrap:
    """Call a module through fn while exposing its parameters (for the LSTM (h0, c0) tuple)."""

    def __init__(self, module, fn):
        self.module, self.fn = module, fn

    def __call__(self, *a):
        return self.fn(*a)

    def train(self, mode=True):
        self.module.train(mode)

    def parameters(self):
        return self.module.parameters()

    def named_parameters(self):
        return self.module.named_parameters()


@pytest.mark.parametrize("cls,kw", [("RNNCell", {}), ("RNNCell", dict(nonlinearity="relu", bias=False)),
                                    ("LSTMCell", {}), ("GRUCell", {})])
def test_cell_parity(cls, kw):
    ref, ours = _pair(cls, 3, 4, **kw)
    _check_training(ref, ours, lambda s: [np.random.default_rng(s).standard_normal((2, 3))])
    _check_training(ref, ours, lambda s: [np.random.default_rng(s).standard_normal(3)], steps=1)
    lstm = cls == "LSTMCell"

    def with_state(s):
        rng = np.random.default_rng(s)
        return [rng.standard_normal((2, 3)), rng.standard_normal((2, 4))] + ([rng.standard_normal((2, 4))] if lstm
                                                                              else [])
    if lstm:
        r, o = _Wrap(ref, lambda x, h, c: ref(x, (h, c))), _Wrap(ours, lambda x, h, c: ours(x, (h, c)))
    else:
        r, o = ref, ours
    _check_training(r, o, with_state, steps=1)


def test_dropout_between_layers_train_and_eval():
    m = tinytorch.nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = tinytorch.randn(5, 2, 3)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    c, d = m(x)[0], m(x)[0]
    assert not np.array_equal(c.detach().numpy(), d.detach().numpy())
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        tinytorch.nn.GRU(3, 4, dropout=0.2)


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequence_parity(cls, enforce_sorted):
    torch = _torch()
    ref, ours = _pair(cls, 3, 4, num_layers=2, bidirectional=True)
    lengths = [5, 3, 2] if enforce_sorted else [3, 5, 2]
    x = np.random.default_rng(0).standard_normal((3, 5, 3))
    results = []
    h0 = np.random.default_rng(1).standard_normal((4, 3, 4))
    for lib, m in ((torch, ref), (tinytorch, ours)):
        xt = lib.tensor(x, requires_grad=True)
        packed = lib.nn.utils.rnn.pack_padded_sequence(xt, lengths, batch_first=True, enforce_sorted=enforce_sorted)
        hx = lib.tensor(h0, requires_grad=True)
        out, h = m(packed, (hx, hx * 0.5) if cls == "LSTM" else hx)
        padded, lens = lib.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, padding_value=-1.0,
                                                            total_length=6)
        hn = h[0] if cls == "LSTM" else h
        loss = (padded * lib.tensor(np.linspace(-1, 1, padded.numel()).reshape(tuple(padded.shape)))).sum() + \
            (hn ** 2).sum()
        loss.backward()
        results.append((padded.detach().numpy(), lens.numpy(), hn.detach().numpy(), xt.grad.numpy(),
                        [p.grad.numpy() for p in m.parameters()] + [hx.grad.numpy()], out.batch_sizes.numpy()))
    (p1, l1, h1, g1, w1, b1), (p2, l2, h2, g2, w2, b2) = results
    np.testing.assert_array_equal(l2, l1)
    np.testing.assert_array_equal(b2, b1)
    for a, b in [(p1, p2), (h1, h2), (g1, g2)] + list(zip(w1, w2)):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)


def test_pad_sequence_and_pack_sequence_parity():
    torch = _torch()
    seqs = [np.random.default_rng(i).standard_normal((n, 2)) for i, n in enumerate((2, 4, 3))]
    for batch_first in (False, True):
        for side in ("right", "left"):
            a = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=batch_first,
                                                padding_value=7.0, padding_side=side)
            ts = [tinytorch.tensor(s, requires_grad=True) for s in seqs]
            b = pad_sequence(ts, batch_first=batch_first, padding_value=7.0, padding_side=side)
            np.testing.assert_array_equal(b.detach().numpy(), a.numpy())
            (b * b).sum().backward()
            for s, t in zip(seqs, ts):
                np.testing.assert_allclose(t.grad.numpy(), 2 * s)
    p = pack_sequence([tinytorch.tensor(s) for s in seqs], enforce_sorted=False)
    q = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(p.data.numpy(), q.data.numpy())
    np.testing.assert_array_equal(p.sorted_indices.numpy(), q.sorted_indices.numpy())
    np.testing.assert_array_equal(p.unsorted_indices.numpy(), q.unsorted_indices.numpy())
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence([tinytorch.ones(2)], padding_side="middle")


def test_rnn_errors_match_pytorch():
    torch = _torch()
    cases = [
        lambda nn: nn.LSTM(3, 4)(_lib(nn).randn(2, 3, 5)),
        lambda nn: nn.GRU(3, 4)(_lib(nn).randn(2, 2, 2, 3)),
        lambda nn: nn.RNN(3, 4)(_lib(nn).randn(2, 2, 2, 3)),
        lambda nn: nn.LSTM(3, 4)(_lib(nn).randn(2, 3), (_lib(nn).randn(1, 1, 4), _lib(nn).randn(1, 4))),
        lambda nn: nn.LSTM(3, 4)(_lib(nn).randn(2, 2, 3), (_lib(nn).randn(1, 4), _lib(nn).randn(1, 4))),
        lambda nn: nn.RNN(3, 4, num_layers=0),
        lambda nn: nn.LSTMCell(3, 4)(_lib(nn).randn(2, 2, 3)),
        lambda nn: nn.GRUCell(3, 4)(_lib(nn).randn(2, 3), _lib(nn).randn(3, 4)),
        lambda nn: nn.GRUCell(3, 4)(_lib(nn).randn(2, 3), _lib(nn).randn(2, 5)),
        lambda nn: nn.GRUCell(3, 4)(_lib(nn).randn(2, 2)),
        lambda nn: nn.RNNCell(3, 4, nonlinearity="x")(_lib(nn).randn(2, 3)),
        lambda nn: _lib(nn).nn.utils.rnn.pack_padded_sequence(_lib(nn).randn(3, 2, 1), [0, 2], enforce_sorted=False),
        lambda nn: nn.RNN(3, 4)(_lib(nn).randn(2, 2, 3), _lib(nn).randn(1, 3, 4)),
        lambda nn: nn.LSTM(3, 4)(_lib(nn).randn(2, 2, 3), (_lib(nn).randn(1, 2, 4), _lib(nn).randn(2, 2, 4))),
        lambda nn: nn.RNN(3, 4)(_lib(nn).randn(2, 3), _lib(nn).randn(1, 1, 4)),
        lambda nn: nn.LSTM(3, 4, proj_size=4),
        lambda nn: nn.GRU(3, 4, proj_size=2),
        lambda nn: nn.RNN(3, 4, nonlinearity="sigmoid"),
        lambda nn: nn.RNN(3, 0),
        lambda nn: nn.LSTM(3, 4, dropout=1.5),
        lambda nn: nn.RNNCell(3, 4)(_lib(nn).randn(2, 2, 3)),
        lambda nn: nn.LSTM(3, 4)(_lib(nn).randn(2, 2, 3, dtype=_lib(nn).float64)),
        lambda nn: _lib(nn).nn.utils.rnn.pack_padded_sequence(_lib(nn).randn(3, 2, 1), [1, 2]),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch.nn)
        with pytest.raises(type(want.value)) as got:
            case(tinytorch.nn)
        assert str(got.value) == str(want.value), str(want.value)


def _lib(nn):
    return tinytorch if nn is tinytorch.nn else pytest.importorskip("torch")


def test_state_dict_keys_repr_and_reset():
    torch = _torch()
    for cls, kw in CONFIGS:
        a = getattr(torch.nn, cls)(4, 5, **kw)
        b = getattr(tinytorch.nn, cls)(4, 5, **kw)
        assert list(b.state_dict().keys()) == list(a.state_dict().keys())
        assert [tuple(p.shape) for p in b.parameters()] == [tuple(p.shape) for p in a.parameters()]
        assert repr(b) == repr(a)
    m = tinytorch.nn.LSTM(4, 16)
    m.reset_parameters()
    for p in m.parameters():
        assert np.abs(p.detach().numpy()).max() <= 0.25
    assert len(m.all_weights) == 1 and len(m.all_weights[0]) == 4


def test_double_backward_raises_clearly():
    m = tinytorch.nn.GRU(3, 4).double()
    x = tinytorch.randn(4, 2, 3, dtype=tinytorch.float64, requires_grad=True)
    g, = tinytorch.autograd.grad(m(x)[0].sum(), x, create_graph=True)
    first, = tinytorch.autograd.grad(m(x)[0].sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), first.numpy())
    with pytest.raises(RuntimeError, match="double backward through the fused RNN/LSTM/GRU"):
        g.sum().backward()


def test_orthogonal_init_for_recurrent_weights():
    m = tinytorch.nn.LSTM(3, 4)
    tinytorch.nn.init.orthogonal_(m.weight_hh_l0)  # (16, 4): orthonormal columns
    w = m.weight_hh_l0.detach().numpy()
    np.testing.assert_allclose(w.T @ w, np.eye(4), atol=1e-5)
    w = tinytorch.empty(2, 3, 2)
    tinytorch.nn.init.orthogonal_(w, gain=3.0)  # (2, 6) flattened: orthogonal rows of norm 3
    a = w.numpy().reshape(2, 6)
    np.testing.assert_allclose(a @ a.T, 9 * np.eye(2), atol=1e-5)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        tinytorch.nn.init.orthogonal_(tinytorch.empty(3))


def _lm_program(lib, state=None):
    """A small LSTM language model trained for a few steps with Adam, clipping and a carried hidden state."""
    nn = lib.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.rnn = nn.LSTM(6, 8, num_layers=2, batch_first=True, dropout=0.0)
            self.out = nn.Linear(8, 11)

        def forward(self, x, h=None):
            y, h = self.rnn(self.emb(x), h)
            return self.out(y), h
    lib.manual_seed(0)
    model = LM()
    if state is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    opt = lib.optim.Adam(model.parameters(), lr=1e-2)
    data = np.random.default_rng(0).integers(0, 11, (4, 3, 7))
    h, losses = None, []
    for step in range(4):
        x = lib.tensor(data[step, :, :-1])
        y = lib.tensor(data[step, :, 1:])
        logits, h = model(x, h)
        h = tuple(t.detach() for t in h)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 11), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_lstm_language_model_program_matches_pytorch():
    torch = _torch()
    ref, losses_r = _lm_program(torch)
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ref, losses_r = _lm_program(torch, state)
    ours, losses_o = _lm_program(tinytorch, state)
    np.testing.assert_allclose(losses_o, losses_r, rtol=1e-4, atol=1e-5)
    for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


def test_autocast_bf16_dtypes_follow_pytorchs_cpu_lists():
    # CPU autocast runs LSTM/RNN in bfloat16 (outputs and states) and leaves GRU in its input type, as PyTorch.
    import tinytorch
    x = tinytorch.randn(5, 3, 8)
    lstm, gru = tinytorch.nn.LSTM(8, 16, num_layers=2), tinytorch.nn.GRU(8, 16)
    with tinytorch.autocast("cpu", dtype=tinytorch.bfloat16):
        y, (h, c) = lstm(x)
        yg, hg = gru(x)
    assert (y.dtype, h.dtype, c.dtype) == (tinytorch.bfloat16,) * 3
    assert (yg.dtype, hg.dtype) == (tinytorch.float32,) * 2
    y.float().sum().backward()
    assert lstm.weight_ih_l0.grad.dtype == tinytorch.float32
    with tinytorch.no_grad():
        ref, _ = lstm(x)
    np.testing.assert_allclose(y.float().detach().numpy(), ref.numpy(), atol=3e-2)
