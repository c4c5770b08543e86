"""CTC loss: the exact gradient through log_softmax against finite differences (float64), and losses and
log_probs gradients against PyTorch (padded and concatenated targets, repeats, unbatched, zero_infinity)."""
import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

T, N, C = 6, 3, 4
X = np.random.default_rng(0).standard_normal((T, N, C))
TARGETS = np.array([[1, 2, 2], [3, 1, 1], [2, 3, 1]])  # row 0 repeats a label: needs a blank between
TARGET_LENGTHS = [3, 1, 2]
INPUT_LENGTHS = [6, 4, 5]


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_gradcheck_through_log_softmax(reduction):
    x = tinytorch.tensor(X, requires_grad=True)
    assert gradcheck(lambda x: F.ctc_loss(x.log_softmax(2), tinytorch.tensor(TARGETS), INPUT_LENGTHS,
                                          TARGET_LENGTHS, reduction=reduction), (x,))


CASES = {
    "padded_mean": lambda lib, lp: lib.nn.functional.ctc_loss(lp, lib.tensor(TARGETS), lib.tensor(INPUT_LENGTHS),
                                                              lib.tensor(TARGET_LENGTHS)),
    "concatenated_sum": lambda lib, lp: lib.nn.functional.ctc_loss(
        lp, lib.tensor(np.concatenate([TARGETS[n, :k] for n, k in enumerate(TARGET_LENGTHS)])),
        tuple(INPUT_LENGTHS), tuple(TARGET_LENGTHS), reduction="sum"),
    "blank_last_none": lambda lib, lp: lib.nn.CTCLoss(blank=3, reduction="none")(
        lp, lib.tensor(np.where(TARGETS == 3, 0, TARGETS)), lib.tensor(INPUT_LENGTHS), lib.tensor(TARGET_LENGTHS)),
    "impossible_zero_infinity": lambda lib, lp: lib.nn.CTCLoss(zero_infinity=True, reduction="sum")(
        lp, lib.tensor(TARGETS), lib.tensor([2, 4, 5]), lib.tensor(TARGET_LENGTHS)),
    "impossible_inf": lambda lib, lp: lib.nn.functional.ctc_loss(lp, lib.tensor(TARGETS), lib.tensor([2, 4, 5]),
                                                                 lib.tensor(TARGET_LENGTHS), reduction="none"),
    "unbatched": lambda lib, lp: lib.nn.functional.ctc_loss(lp[:, 0], lib.tensor(TARGETS[0]), lib.tensor([6]),
                                                            lib.tensor([3])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ctc_parity(name):
    torch = pytest.importorskip("torch")
    res = []
    lp_np = X - np.log(np.exp(X).sum(2, keepdims=True))
    for lib in (tinytorch, torch):
        lp = lib.tensor(lp_np, requires_grad=True)
        loss = CASES[name](lib, lp)
        finite = lib.tensor(np.isfinite(loss.detach().numpy()).astype(np.float64))
        (lib.where(finite > 0, loss, lib.zeros_like(loss)) * (finite + 1)).sum().backward()
        res.append((loss.detach().numpy(), lp.grad.numpy()))
    (l1, g1), (l2, g2) = res
    np.testing.assert_allclose(l1, l2, rtol=1e-10)
    np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-12)


def test_ctc_errors_and_module_repr():
    torch = pytest.importorskip("torch")
    assert repr(tinytorch.nn.CTCLoss(blank=2)) == repr(torch.nn.CTCLoss(blank=2))
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6"):
        F.ctc_loss(tinytorch.tensor(X).log_softmax(2), tinytorch.tensor(TARGETS), [7, 4, 5], TARGET_LENGTHS)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(tinytorch.tensor(X), tinytorch.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS, blank=4)
