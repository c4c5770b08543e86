"""Regressions found by running sequence/NLP/autograd-heavy PyTorch programs on tinytorch: spectral norm (both
APIs), orthogonal, F.normalize(out=), pack_padded_sequence's checks, unpad_sequence, invert_permutation,
clip_grads_with_norm_, forward_ad, grad_fn names and error messages.
Numbers are checked against float64 NumPy references and gradcheck; PyTorch only under importorskip."""
import re
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck
from tinytorch.nn.utils import parametrizations, parametrize
from tinytorch.nn.utils.rnn import (invert_permutation, pack_padded_sequence, pad_packed_sequence, pad_sequence,
                                    unpad_sequence)


def _unit(rng, n):
    v = rng.standard_normal(n)
    return v / np.linalg.norm(v)


def _np_power_step(w_mat, u, v, n):
    for _ in range(n):
        u = w_mat @ v
        u = u / max(np.linalg.norm(u), 1e-12)
        v = w_mat.T @ u
        v = v / max(np.linalg.norm(v), 1e-12)
    return u, v


# ---- parametrizations.spectral_norm ----------------------------------------------------------------------------

def test_spectral_norm_parametrization_keys_and_sigma():
    lin = nn.Linear(3, 5).double()
    w = np.random.default_rng(0).standard_normal((5, 3))
    with tinytorch.no_grad():
        lin.weight.copy_(tinytorch.tensor(w))
    sn = parametrizations.spectral_norm(lin)
    assert sorted(sn.state_dict()) == ['bias', 'parametrizations.weight.0._u', 'parametrizations.weight.0._v',
                                       'parametrizations.weight.original']
    assert parametrize.is_parametrized(sn, "weight")
    assert sn.parametrizations.weight[0]._u.shape == (5,) and sn.parametrizations.weight[0]._v.shape == (3,)
    sn.eval()
    # 15 warm-up iterations on registration: sigma is already the largest singular value
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(sn.weight.detach().numpy(), w / sigma, rtol=1e-6)


def test_spectral_norm_parametrization_forward_matches_numpy_power_method():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 2, 3))  # a Conv1d weight: reshaped to (4, 6)
    conv = nn.Conv1d(2, 4, 3).double()
    with tinytorch.no_grad():
        conv.weight.copy_(tinytorch.tensor(w))
    parametrizations.spectral_norm(conv, n_power_iterations=2)
    u0, v0 = _unit(rng, 4), _unit(rng, 6)
    sd = conv.state_dict()
    sd["parametrizations.weight.0._u"] = tinytorch.tensor(u0)
    sd["parametrizations.weight.0._v"] = tinytorch.tensor(v0)
    conv.load_state_dict(sd)
    got = conv.weight  # training mode: two power steps, buffers updated in place
    u, v = _np_power_step(w.reshape(4, 6), u0, v0, 2)
    np.testing.assert_allclose(got.detach().numpy(), w / (u @ w.reshape(4, 6) @ v), rtol=1e-12)
    np.testing.assert_allclose(conv.state_dict()["parametrizations.weight.0._u"].numpy(), u, rtol=1e-12)
    np.testing.assert_allclose(conv.state_dict()["parametrizations.weight.0._v"].numpy(), v, rtol=1e-12)


def test_spectral_norm_parametrization_dim_for_conv_transpose_and_gradcheck():
    convt = parametrizations.spectral_norm(nn.ConvTranspose1d(2, 3, 2).double())
    snmod = convt.parametrizations.weight[0]
    assert snmod.dim == 1 and snmod._u.shape == (3,) and snmod._v.shape == (4,)
    snmod.eval()  # fixed u, v: W / (u^T W v) is a smooth function of W
    w = tinytorch.tensor(np.random.default_rng(2).standard_normal((2, 3, 2)), requires_grad=True)
    assert gradcheck(snmod, (w,))


def test_spectral_norm_parametrization_one_dim_and_errors():
    bias_sn = parametrizations.spectral_norm(nn.Linear(3, 4).double(), name="bias")
    np.testing.assert_allclose(np.linalg.norm(bias_sn.bias.detach().numpy()), 1.0)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'foo'"):
        parametrizations.spectral_norm(nn.Linear(2, 2), name="foo")
    with pytest.raises(IndexError, match=re.escape("Dimension out of range (expected to be in range of [-2, 1] "
                                                   "but got 2)")):
        parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got n_power_iterations=0"):
        parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


# ---- the older nn.utils.spectral_norm ----------------------------------------------------------------------------

def test_old_spectral_norm_hook_keys_values_and_removal():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3))
    lin = nn.Linear(3, 4).double()
    with tinytorch.no_grad():
        lin.weight.copy_(tinytorch.tensor(w))
    nn.utils.spectral_norm(lin)
    assert sorted(lin.state_dict()) == ['bias', 'weight_orig', 'weight_u', 'weight_v']
    u0, v0 = _unit(rng, 4), _unit(rng, 3)
    lin.weight_u.copy_(tinytorch.tensor(u0))
    lin.weight_v.copy_(tinytorch.tensor(v0))
    x = rng.standard_normal((2, 3))
    out = lin(tinytorch.tensor(x))
    # old API: v is updated first, then u
    v = w.T @ u0
    v /= np.linalg.norm(v)
    u = w @ v
    u /= np.linalg.norm(u)
    w_sn = w / (u @ w @ v)
    np.testing.assert_allclose(out.detach().numpy(), x @ w_sn.T + lin.bias.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    assert lin.weight_orig.grad is not None and lin.weight_orig.grad.shape == (4, 3)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        nn.utils.spectral_norm(lin)
    lin.eval()
    nn.utils.remove_spectral_norm(lin)
    assert sorted(lin.state_dict()) == ['bias', 'weight'] and isinstance(lin.weight, nn.Parameter)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w / (u @ w @ v), rtol=1e-12)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        nn.utils.remove_spectral_norm(lin)


def test_weight_norm_deprecation_names_torch():
    with pytest.warns(FutureWarning, match=re.escape("`torch.nn.utils.weight_norm` is deprecated in favor of "
                                                     "`torch.nn.utils.parametrizations.weight_norm`.")):
        nn.utils.weight_norm(nn.Linear(2, 2))


# ---- F.normalize(out=) ------------------------------------------------------------------------------------------

def test_normalize_writes_out():
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    out = tinytorch.empty(2, 2, dtype=tinytorch.float64)
    r = F.normalize(tinytorch.tensor(x), dim=1, out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(RuntimeError, match=r"functions with out=\.\.\. arguments don't support automatic "):
        F.normalize(tinytorch.ones(2, requires_grad=True), dim=0, out=tinytorch.empty(2))


# ---- packed sequences -------------------------------------------------------------------------------------------

def test_pack_padded_sequence_checks_in_pytorch_order():
    padded = tinytorch.zeros(5, 3, 2)
    with pytest.raises(RuntimeError, match=re.escape("Expected `len(lengths)` to be equal to batch_size, but got 2 "
                                                     "(batch_size=3)")):
        pack_padded_sequence(padded, [5, 3])
    # the length check comes before the sortedness one, the positivity check too
    with pytest.raises(RuntimeError, match="Expected `len"):
        pack_padded_sequence(padded, [2, 5])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(padded, [0, 5, 3])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_padded_sequence(padded, [2, 5, 3])


def test_unpad_sequence_transposes_caller_tensor_in_place():
    seqs = [tinytorch.tensor(np.arange(n, dtype=np.float64)) for n in (2, 4, 3)]
    padded = pad_sequence(seqs)
    assert padded.shape == (4, 3)
    parts = unpad_sequence(padded, tinytorch.tensor([2, 4, 3]))
    assert [p.tolist() for p in parts] == [[0.0, 1.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]
    assert padded.shape == (3, 4)  # as in PyTorch, which calls transpose_ on its argument


def test_invert_permutation_and_packed_roundtrip():
    assert invert_permutation(None) is None
    assert invert_permutation(tinytorch.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    x = tinytorch.tensor(np.random.default_rng(4).standard_normal((3, 5, 2)))
    packed = pack_padded_sequence(x, tinytorch.tensor([2, 5, 3]), batch_first=True, enforce_sorted=False)
    assert packed.sorted_indices.tolist() == [1, 2, 0] and packed.unsorted_indices.tolist() == [2, 0, 1]
    back, lens = pad_packed_sequence(packed, batch_first=True)
    assert lens.tolist() == [2, 5, 3]
    for b, n in enumerate([2, 5, 3]):
        np.testing.assert_array_equal(back[b, :n].numpy(), x[b, :n].numpy())


# ---- grad_fn reprs ----------------------------------------------------------------------------------------------

def test_accumulate_grad_repr_has_no_cpp_namespace():
    v = tinytorch.ones(2, requires_grad=True)
    node = v.sum().grad_fn.next_functions[0][0]
    assert node.name() == "torch::autograd::AccumulateGrad"
    assert re.fullmatch(r"<AccumulateGrad object at 0x[0-9a-f]+>", repr(node))
    assert re.fullmatch(r"<SumBackward0 object at 0x[0-9a-f]+>", repr(v.sum().grad_fn))


# ---- PyTorch parity ---------------------------------------------------------------------------------------------

def test_spectral_norm_training_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)

    def build(lib):
        return lib.nn.Sequential(lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(4, 6)), lib.nn.Tanh(),
                                 lib.nn.utils.spectral_norm(lib.nn.Linear(6, 1))).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, ours = build(torch), build(tinytorch)
    assert list(ours.state_dict()) == list(ref.state_dict())
    state = {}
    for k, v in ref.state_dict().items():
        a = rng.standard_normal(tuple(v.shape))
        state[k] = a / np.linalg.norm(a) if k.endswith(("_u", "_v")) else a
    ref.load_state_dict({k: torch.tensor(a) for k, a in state.items()})
    ours.load_state_dict({k: tinytorch.tensor(a) for k, a in state.items()})
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_o = tinytorch.optim.SGD(ours.parameters(), lr=0.1)
    x = rng.standard_normal((3, 4))
    for _ in range(3):
        lr_, lo = ref(torch.tensor(x)).pow(2).mean(), ours(tinytorch.tensor(x)).pow(2).mean()
        np.testing.assert_allclose(lo.item(), lr_.item(), rtol=1e-10)
        opt_r.zero_grad()
        opt_o.zero_grad()
        lr_.backward()
        lo.backward()
        opt_r.step()
        opt_o.step()
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


# ---- clip_grads_with_norm_ --------------------------------------------------------------------------------------

def test_clip_grads_with_norm_scales_by_given_total():
    ps = [nn.Parameter(tinytorch.ones(2, dtype=tinytorch.float64)) for _ in range(2)]
    for p in ps:
        p.grad = tinytorch.full((2,), 3.0, dtype=tinytorch.float64)
    assert nn.utils.clip_grads_with_norm_(ps, 1.0, tinytorch.tensor(12.0, dtype=tinytorch.float64)) is None
    np.testing.assert_allclose(ps[0].grad.numpy(), 3.0 / (12.0 + 1e-6))
    ps[1].grad = tinytorch.full((2,), 3.0, dtype=tinytorch.float64)
    nn.utils.clip_grads_with_norm_(ps[1], 100.0, tinytorch.tensor(12.0, dtype=tinytorch.float64))
    np.testing.assert_allclose(ps[1].grad.numpy(), 3.0)  # the coefficient is capped at 1
    total = nn.utils.get_total_norm([p.grad for p in ps])
    np.testing.assert_allclose(total.item(), np.sqrt(2 * (3.0 / (12.0 + 1e-6)) ** 2 + 2 * 9.0))


def test_function_with_setup_context_reports_argument_mismatch_like_pytorch():
    class Mul(tinytorch.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g, None
    with pytest.raises(TypeError, match="^missing a required argument: 'k'$"):
        Mul.apply(tinytorch.ones(2, requires_grad=True), 3.0)


# ---- grad_fn names of embedding_bag and ctc_loss(zero_infinity=True) ----------------------------------------------

def test_embedding_bag_single_named_node_values_and_gradients():
    rng = np.random.default_rng(6)
    w_np, psw_np = rng.standard_normal((6, 3)), rng.random(5)
    idx, offsets = [1, 2, 4, 5, 4], [0, 2]
    w = tinytorch.tensor(w_np, requires_grad=True)
    psw = tinytorch.tensor(psw_np, requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append(tuple(g.shape)))
    out = F.embedding_bag(tinytorch.tensor(idx), w, tinytorch.tensor(offsets), mode="sum", per_sample_weights=psw)
    assert out.grad_fn.name() == "EmbeddingBagBackward0"
    assert re.search(r"grad_fn=<EmbeddingBagBackward0>", repr(out))
    want = np.stack([(w_np[idx[:2]] * psw_np[:2, None]).sum(0), (w_np[idx[2:]] * psw_np[2:, None]).sum(0)])
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-12)
    out.sum().backward()
    assert calls == [(6, 3)]  # the leaf's hook runs once
    want_gw = np.zeros((6, 3))
    np.add.at(want_gw, idx, np.repeat(psw_np[:, None], 3, 1))
    np.testing.assert_allclose(w.grad.numpy(), want_gw, rtol=1e-12)
    np.testing.assert_allclose(psw.grad.numpy(), w_np[idx].sum(1), rtol=1e-12)

    def f(weight, weights):
        return F.embedding_bag(tinytorch.tensor(idx), weight, tinytorch.tensor(offsets), mode="sum",
                               per_sample_weights=weights)
    assert gradcheck(f, (w.detach().requires_grad_(), psw.detach().requires_grad_()))
    assert tinytorch.autograd.gradgradcheck(f, (w.detach().requires_grad_(), psw.detach().requires_grad_()))
    for mode in ("mean", "max"):
        assert gradcheck(lambda weight: F.embedding_bag(tinytorch.tensor([[1, 2], [4, 4]]), weight, mode=mode),
                         (w.detach().requires_grad_(),))


def test_ctc_zero_infinity_is_a_where_after_the_loss():
    lp = tinytorch.tensor(np.log(np.full((2, 1, 4), 0.25)), requires_grad=True)
    loss = F.ctc_loss(lp, tinytorch.tensor([[1, 2, 3]]), [2], [3], reduction="none", zero_infinity=True)
    assert loss.grad_fn.name() == "WhereBackward0" and loss.tolist() == [0.0]
    loss.sum().backward()
    assert lp.grad.abs().sum().item() == 0.0
    finite = F.ctc_loss(lp, tinytorch.tensor([[1]]), [2], [1], reduction="none", zero_infinity=True)
    # paths for target [1] over 2 steps: (1,1), (0,1), (1,0): 3 of 16
    np.testing.assert_allclose(finite.item(), -np.log(3 / 16), rtol=1e-12)


# ---- autograd.forward_ad ----------------------------------------------------------------------------------------

def test_forward_ad_tangents_match_numpy_jvp():
    import tinytorch.autograd.forward_ad as fwAD
    rng = np.random.default_rng(7)
    w_np, x_np, t_np = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(2)
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(tinytorch.ones(2), tinytorch.ones(2))
    with fwAD.dual_level() as level:
        assert level == 0
        x = fwAD.make_dual(tinytorch.tensor(x_np), tinytorch.tensor(t_np))
        primal, tangent = fwAD.unpack_dual(x)
        np.testing.assert_array_equal(primal.numpy(), x_np)
        np.testing.assert_array_equal(tangent.numpy(), t_np)
        y = tinytorch.tanh(tinytorch.tensor(w_np) @ x).pow(2).sum()
        z = x + 1.0
        h = np.tanh(w_np @ x_np)
        want = (2 * h * (1 - h ** 2)) @ (w_np @ t_np)
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.item(), want, rtol=1e-12)
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), t_np, rtol=1e-12)
        unpacked = fwAD.unpack_dual(tinytorch.ones(2))
        assert isinstance(unpacked, fwAD.UnpackedDualTensor) and unpacked.tangent is None
        with pytest.raises(RuntimeError, match=re.escape("Tensor is of size [2] while the given forward gradient is "
                                                         "of size [3].")):
            fwAD.make_dual(tinytorch.ones(2), tinytorch.ones(3))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex, but got: "
                                             "torch.int64"):
            fwAD.make_dual(tinytorch.ones(2, dtype=tinytorch.int64), tinytorch.ones(2))
    assert fwAD.unpack_dual(y).tangent is None  # the level is closed


def test_forward_ad_two_duals_add_their_contributions():
    import tinytorch.autograd.forward_ad as fwAD
    a_np, b_np = np.array([0.3, -1.2]), np.array([2.0, 0.5])
    with fwAD.dual_level():
        a = fwAD.make_dual(tinytorch.tensor(a_np), tinytorch.tensor([1.0, 0.0], dtype=tinytorch.float64))
        b = fwAD.make_dual(tinytorch.tensor(b_np), tinytorch.tensor([0.0, 2.0], dtype=tinytorch.float64))
        out = a.sin() * b
        want = np.cos(a_np) * np.array([1.0, 0.0]) * b_np + np.sin(a_np) * np.array([0.0, 2.0])
        np.testing.assert_allclose(fwAD.unpack_dual(out).tangent.numpy(), want, rtol=1e-12)


# ---- error messages ---------------------------------------------------------------------------------------------

def test_lstm_cell_rejects_a_bare_tensor_state():
    cell = nn.LSTMCell(3, 4)
    with pytest.raises(TypeError, match=re.escape("lstm_cell(): argument 'hx' (position 2) must be tuple of "
                                                  "Tensors, not Tensor")):
        cell(tinytorch.zeros(2, 3), tinytorch.zeros(2, 4))
    with pytest.raises(RuntimeError, match="lstm_cell expects two hidden states"):
        cell(tinytorch.zeros(2, 3), (tinytorch.zeros(2, 4),))
    h, c = cell(tinytorch.zeros(2, 3), [tinytorch.zeros(2, 4), tinytorch.zeros(2, 4)])
    assert h.shape == (2, 4) and c.shape == (2, 4)


def test_ctc_and_checkpoint_messages_match_pytorch_2x():
    with pytest.raises(RuntimeError, match=re.escape("Expected input_lengths to have value at most 5, but got value 6 "
                                                     "(while checking arguments for ctc_loss_allocate_outputs)")):
        F.ctc_loss(tinytorch.zeros(5, 2, 3), tinytorch.ones(2, 2, dtype=tinytorch.int64), tinytorch.tensor([6, 5]),
                   tinytorch.tensor([2, 2]))
    with pytest.warns(UserWarning, match="Starting in PyTorch 2.9, calling checkpoint without use_reentrant will "
                                         "raise an exception"):
        tinytorch.utils.checkpoint.checkpoint(lambda t: t * 2, tinytorch.ones(2, requires_grad=True))


# ---- parametrizations.orthogonal -------------------------------------------------------------------------------

def _np_qr_q(w):
    q, r = np.linalg.qr(w)
    return q * np.sign(np.diag(r))[None, :]


@pytest.mark.parametrize("orthogonal_map", [None, "cayley", "householder"])
def test_orthogonal_starts_at_the_weights_q_and_stays_orthogonal(orthogonal_map):
    w = np.random.default_rng(8).standard_normal((4, 4))
    lin = nn.Linear(4, 4, bias=False).double()
    with tinytorch.no_grad():
        lin.weight.copy_(tinytorch.tensor(w))
    parametrizations.orthogonal(lin, orthogonal_map=orthogonal_map)
    assert sorted(lin.state_dict()) == ['parametrizations.weight.0.base', 'parametrizations.weight.original']
    np.testing.assert_allclose(lin.weight.detach().numpy(), _np_qr_q(w), atol=1e-12)
    opt = tinytorch.optim.SGD(lin.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        lin(tinytorch.ones(2, 4, dtype=tinytorch.float64)).pow(3).sum().backward()
        opt.step()
    q = lin.weight.detach().numpy()
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-10)
    assert np.abs(q - _np_qr_q(w)).max() > 1e-3  # training moved it


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_orthogonal_householder_without_trivialization(shape):
    w = np.random.default_rng(9).standard_normal(shape)
    lin = nn.Linear(shape[1], shape[0], bias=False).double()
    with tinytorch.no_grad():
        lin.weight.copy_(tinytorch.tensor(w))
    parametrizations.orthogonal(lin, use_trivialization=False)
    assert sorted(lin.state_dict()) == ['parametrizations.weight.original']
    want = _np_qr_q(w) if shape[0] >= shape[1] else _np_qr_q(w.T).T
    np.testing.assert_allclose(lin.weight.detach().numpy(), want, atol=1e-12)
    orth = lin.parametrizations.weight[0]
    x = tinytorch.tensor(np.random.default_rng(10).standard_normal(shape), requires_grad=True)
    assert gradcheck(orth, (x,))


def test_orthogonal_maps_are_differentiable_and_errors():
    x = tinytorch.tensor(np.random.default_rng(11).standard_normal((3, 3)), requires_grad=True)
    for orthogonal_map in ("matrix_exp", "cayley"):
        lin = parametrizations.orthogonal(nn.Linear(3, 3).double(), orthogonal_map=orthogonal_map)
        assert gradcheck(lin.parametrizations.weight[0], (x,))
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                                         'Got: foo'):
        parametrizations.orthogonal(nn.Linear(2, 2), orthogonal_map="foo")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        parametrizations.orthogonal(nn.Linear(2, 2), name="bias")
    cayley = parametrizations.orthogonal(nn.Linear(2, 2), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="not possible to assign to the matrix exponential or the Cayley"):
        cayley.weight = tinytorch.eye(2)


def test_orthogonal_matches_pytorch():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(12).standard_normal((4, 4))
    for orthogonal_map in ("matrix_exp", "householder"):
        ref, ours = torch.nn.Linear(4, 4).double(), nn.Linear(4, 4).double()
        with torch.no_grad():
            ref.weight.copy_(torch.tensor(w))
        with tinytorch.no_grad():
            ours.weight.copy_(tinytorch.tensor(w))
            ours.bias.copy_(tinytorch.tensor(ref.bias.detach().numpy()))
        torch.nn.utils.parametrizations.orthogonal(ref, orthogonal_map=orthogonal_map)
        parametrizations.orthogonal(ours, orthogonal_map=orthogonal_map)
        assert list(ours.state_dict()) == list(ref.state_dict())
        x = np.random.default_rng(13).standard_normal((2, 4))
        lr_, lo = ref(torch.tensor(x)).pow(3).sum(), ours(tinytorch.tensor(x)).pow(3).sum()
        np.testing.assert_allclose(lo.item(), lr_.item(), rtol=1e-10)
        lr_.backward()
        lo.backward()
        np.testing.assert_allclose(ours.parametrizations.weight.original.grad.numpy(),
                                   ref.parametrizations.weight.original.grad.numpy(), rtol=1e-8, atol=1e-12)
