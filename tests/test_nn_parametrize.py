"""nn.utils.parametrize, parametrizations.weight_norm and the older nn.utils.weight_norm against PyTorch:
state_dict keys, reprs, forward values, gradients and parameters after SGD steps; removal and errors."""
import numpy as np
import pytest

import tinytorch
from tinytorch.nn.utils import parametrize

torch = pytest.importorskip("torch")


def _train_both(ref, ours, steps=2, shape=(3, 4)):
    ours.load_state_dict({k: tinytorch.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_o = tinytorch.optim.SGD(ours.parameters(), lr=0.1)
    for step in range(steps):
        x = np.random.default_rng(step).standard_normal(shape)
        yr, yo = ref(torch.tensor(x)), ours(tinytorch.tensor(x))
        np.testing.assert_allclose(yo.detach().numpy(), yr.detach().numpy(), rtol=1e-10, atol=1e-12)
        opt_r.zero_grad()
        opt_o.zero_grad()
        (yr ** 2).sum().backward()
        (yo ** 2).sum().backward()
        for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
        opt_r.step()
        opt_o.step()
    for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_parity(dim):
    torch.manual_seed(0)
    ref = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 5).double(), dim=dim)
    ours = tinytorch.nn.utils.parametrizations.weight_norm(tinytorch.nn.Linear(4, 5).double(), dim=dim)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert repr(ours) == repr(ref)
    assert type(ours).__name__ == "ParametrizedLinear"
    # registering computes g = ||w|| from the module's own weight, as in PyTorch
    lin = tinytorch.nn.Linear(4, 5).double()
    w = lin.weight.detach().numpy().copy()
    tinytorch.nn.utils.parametrizations.weight_norm(lin, dim=dim)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w, rtol=1e-12)
    _train_both(ref, ours)


def test_weight_norm_on_lstm_weight():
    torch.manual_seed(0)
    ref = torch.nn.utils.parametrizations.weight_norm(torch.nn.LSTM(4, 3).double(), name="weight_hh_l0")
    ours = tinytorch.nn.utils.parametrizations.weight_norm(tinytorch.nn.LSTM(4, 3).double(), name="weight_hh_l0")
    assert list(ours.state_dict()) == list(ref.state_dict())

    class First(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]
    OursFirst = type("First", (tinytorch.nn.Module,), {
        "__init__": lambda self, m: (tinytorch.nn.Module.__init__(self), setattr(self, "m", m))[0],
        "forward": lambda self, x: self.m(x)[0]})
    _train_both(First(ref), OursFirst(ours), shape=(5, 2, 4))


@pytest.mark.filterwarnings("ignore:.*weight_norm. is deprecated:FutureWarning")
def test_legacy_weight_norm_parity_and_remove():
    torch.manual_seed(0)
    ref = torch.nn.utils.weight_norm(torch.nn.Linear(4, 5).double())
    with pytest.warns(FutureWarning, match="deprecated in favor of"):
        ours = tinytorch.nn.utils.weight_norm(tinytorch.nn.Linear(4, 5).double())
    assert list(ours.state_dict()) == list(ref.state_dict())
    _train_both(ref, ours)
    ours(tinytorch.zeros(1, 4, dtype=tinytorch.float64))  # the hook recomputes weight from the stepped g and v
    w = ours.weight.detach().numpy().copy()
    tinytorch.nn.utils.remove_weight_norm(ours)
    assert list(ours.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(ours.weight.detach().numpy(), w)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        tinytorch.nn.utils.remove_weight_norm(ours)


class Symmetric(tinytorch.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


def test_register_custom_parametrization_assign_cache_and_remove():
    m = tinytorch.nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    W = m.weight.detach().numpy()
    np.testing.assert_allclose(W, W.T)
    A = np.arange(9.0, dtype=np.float32).reshape(3, 3)
    A = A + A.T
    m.weight = tinytorch.tensor(A)  # goes through right_inverse
    np.testing.assert_allclose(m.weight.detach().numpy(), A)
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    m(tinytorch.randn(2, 3)).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    assert parametrize.type_before_parametrizations(m) is tinytorch.nn.Linear
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is tinytorch.nn.Linear and not parametrize.is_parametrized(m)
    assert list(m.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), A)


def test_parametrize_errors_match_pytorch():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x[0]

    class BadOurs(tinytorch.nn.Module):
        def forward(self, x):
            return x[0]
    cases = [
        (lambda: torch.nn.utils.parametrize.register_parametrization(torch.nn.Linear(2, 2), "nope", Bad()),
         lambda: parametrize.register_parametrization(tinytorch.nn.Linear(2, 2), "nope", BadOurs())),
        (lambda: torch.nn.utils.parametrize.register_parametrization(torch.nn.Linear(2, 2), "weight", Bad()),
         lambda: parametrize.register_parametrization(tinytorch.nn.Linear(2, 2), "weight", BadOurs())),
        (lambda: torch.nn.utils.parametrize.remove_parametrizations(torch.nn.Linear(2, 2), "weight"),
         lambda: parametrize.remove_parametrizations(tinytorch.nn.Linear(2, 2), "weight")),
    ]
    for theirs, ours in cases:
        with pytest.raises(Exception) as want:
            theirs()
        with pytest.raises(type(want.value)) as got:
            ours()
        first = str(want.value).split("\n")[0].split("'")[0].split("Linear")[0]
        assert str(got.value).startswith(first), (str(got.value), str(want.value))


def test_parametrized_module_deepcopy():
    import copy
    m = tinytorch.nn.utils.parametrizations.weight_norm(tinytorch.nn.Linear(3, 2))
    c = copy.deepcopy(m)
    x = tinytorch.randn(4, 3)
    np.testing.assert_allclose(c(x).detach().numpy(), m(x).detach().numpy())
    with tinytorch.no_grad():
        c.parametrizations.weight.original0.mul_(2.0)
    assert not np.allclose(c(x).detach().numpy(), m(x).detach().numpy())
    assert type(c) is type(m)
