"""nn.AdaptiveLogSoftmaxWithLoss: probabilities that sum to one, float64 gradcheck through head and clusters,
PyTorch's parameter names, errors, and its outputs and gradients beside PyTorch's when it is importable."""
import importlib.util

import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def _model(**kw):
    torch.manual_seed(0)
    return torch.nn.AdaptiveLogSoftmaxWithLoss(8, 12, [3, 7], div_value=2.0, **kw).double()


def test_log_prob_is_a_distribution_and_forward_picks_the_targets():
    m = _model(head_bias=True)
    x = torch.randn(5, 8, dtype=torch.float64)
    lp = m.log_prob(x)
    assert lp.shape == (5, 12)
    np.testing.assert_allclose(lp.exp().sum(1).detach().numpy(), np.ones(5), rtol=1e-12)
    target = torch.tensor([0, 2, 3, 6, 11])  # the shortlist and both clusters
    out, loss = m(x, target)
    np.testing.assert_allclose(out.detach().numpy(), lp.detach().numpy()[np.arange(5), target.numpy()], rtol=1e-12)
    assert loss.item() == pytest.approx(-out.mean().item())
    assert torch.equal(m.predict(x), lp.argmax(1))
    one = m(x[1], target[1])
    assert one.output.shape == () and one.output.item() == pytest.approx(out[1].item())


def test_gradcheck_through_head_and_clusters():
    m = _model(head_bias=True)
    target = torch.tensor([1, 4, 9, 11, 5])
    x = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda x: m(x, target).loss, (x,))
    w = m.tail[1][0].weight
    assert gradcheck(lambda x: m.log_prob(x).sum(), (x,))
    m(x, target).loss.backward()
    assert w.grad is not None and w.grad.abs().sum().item() > 0  # rows 9 and 11 reach the second cluster


def test_structure_and_errors_follow_pytorch():
    m = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 10], div_value=2.0)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("head.weight", (7, 16)), ("tail.0.0.weight", (8, 16)), ("tail.0.1.weight", (5, 8)),
        ("tail.1.0.weight", (4, 16)), ("tail.1.1.weight", (10, 4))]
    assert (m.cutoffs, m.shortlist_size, m.n_clusters, m.head_size) == ([5, 10, 20], 5, 2, 7)
    for bad in ([5, 5], [0, 5], [5, 20], [10, 5]):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive integers"):
            torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, bad)
    x = torch.randn(4, 16)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 19\], but values in range \[0, 25\]"):
        m(x, torch.tensor([0, 7, 15, 25]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(x, torch.tensor([0, 7]))
    with pytest.raises(RuntimeError, match="0D target tensor expects 1D input tensors"):
        m(x, torch.tensor(3))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"):
        m(x, torch.tensor([[0, 1, 2, 3]]))


@needs_torch
def test_matches_pytorch():
    import torch as pt
    theirs = pt.nn.AdaptiveLogSoftmaxWithLoss(16, 40, [6, 15, 30], div_value=2.0, head_bias=True)
    mine = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 40, [6, 15, 30], div_value=2.0, head_bias=True)
    mine.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((9, 16)).astype(np.float32)
    t = np.array([0, 5, 6, 14, 15, 29, 30, 39, 2])
    xp, xm = pt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    rp, rm = theirs(xp, pt.tensor(t)), mine(xm, torch.tensor(t))
    np.testing.assert_allclose(rm.output.detach().numpy(), rp.output.detach().numpy(), rtol=1e-5, atol=1e-6)
    rp.loss.backward()
    rm.loss.backward()
    np.testing.assert_allclose(xm.grad.numpy(), xp.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (n, p), (n2, q) in zip(theirs.named_parameters(), mine.named_parameters()):
        assert n == n2
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mine.log_prob(xm).detach().numpy(), theirs.log_prob(xp).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    assert mine.predict(xm).tolist() == theirs.predict(xp).tolist()
