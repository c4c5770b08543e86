"""nn.utils.prune and nn.utils.fusion: mask counts and structure for every pruning method, iterative and global
pruning, the orig/mask re-parametrisation (forward, gradients, state_dict, remove), errors, and conv/linear +
BatchNorm folding; the deterministic parts are checked against PyTorch where it is importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch.nn.utils import fusion, prune

nn = tinytorch.nn
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")


def _np(t) -> np.ndarray:
    return t.detach().numpy()


def _zeros(mask) -> int:
    return int((mask == 0).sum())


def _set_weights(module, rng, **arrays) -> None:
    """Overwrite module parameters/buffers with given arrays (or fresh normals for shape-only `True`)."""
    for name, value in arrays.items():
        current = getattr(module, name)
        arr = rng.standard_normal(tuple(current.shape)).astype(np.float32) if value is True else value
        with tinytorch.no_grad():
            current.copy_(tinytorch.tensor(np.asarray(arr, dtype=np.float32)))


# ---------------------------------------------------------------- re-parametrisation
def test_l1_unstructured_reparametrises_module():
    m = nn.Linear(5, 4)
    orig = m.weight
    prune.l1_unstructured(m, "weight", amount=0.3)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in m.named_buffers()] == ["weight_mask"]
    assert m.weight_orig is orig  # the original Parameter object moves, it is not copied
    assert not isinstance(m.weight, nn.Parameter)
    assert m.weight_mask.dtype == orig.dtype and tuple(m.weight_mask.shape) == (4, 5)
    assert _zeros(m.weight_mask) == 6  # round(0.3 * 20)
    np.testing.assert_array_equal(_np(m.weight), _np(orig) * _np(m.weight_mask))
    # exactly the smallest magnitudes went
    w = np.abs(_np(orig)).ravel()
    pruned = _np(m.weight_mask).ravel() == 0
    assert w[pruned].max() <= w[~pruned].min()
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.L1Unstructured) and hooks[0]._tensor_name == "weight"
    assert prune.is_pruned(m) and prune.is_pruned(nn.Sequential(nn.ReLU(), m))
    assert not prune.is_pruned(nn.Linear(2, 2))


@pytest.mark.parametrize("fn", [prune.l1_unstructured, prune.random_unstructured])
@pytest.mark.parametrize("amount,expected", [(0, 0), (7, 7), (0.25, 15), (0.5, 30), (1.0, 60), (1, 1), (0.0, 0)])
def test_unstructured_counts(fn, amount, expected):
    m = nn.Conv2d(3, 5, 2)  # 60 weights
    fn(m, "weight", amount=amount)
    assert _zeros(m.weight_mask) == expected
    assert set(np.unique(_np(m.weight_mask))) <= {0.0, 1.0}


def test_float_amount_rounds_like_python_round():
    # round(0.25 * 10) == 2 (banker's rounding), round(0.35 * 10) == 4 (3.5 -> 4)
    for amount, expected in [(0.25, 2), (0.35, 4), (0.15, 2)]:
        m = nn.Linear(10, 1)
        prune.random_unstructured(m, "weight", amount)
        assert _zeros(m.weight_mask) == expected == round(amount * 10)


def test_bias_and_importance_scores():
    m = nn.Linear(4, 6)
    scores = tinytorch.tensor([5.0, -0.1, 3.0, 0.2, -4.0, 1.0])
    prune.l1_unstructured(m, "bias", amount=2, importance_scores=scores)
    np.testing.assert_array_equal(_np(m.bias_mask), [1, 0, 1, 0, 1, 1])
    assert list(m.state_dict()) == ["weight", "bias_orig", "bias_mask"]
    with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
        prune.l1_unstructured(m, "weight", amount=1, importance_scores=tinytorch.ones(3))


def test_forward_uses_masked_weight_and_follows_orig():
    m = nn.Linear(5, 3)
    prune.random_unstructured(m, "weight", amount=0.4)
    x = tinytorch.randn(2, 5)
    mask = _np(m.weight_mask)
    want = _np(x) @ (_np(m.weight_orig) * mask).T + _np(m.bias)
    np.testing.assert_allclose(_np(m(x)), want, rtol=1e-5, atol=1e-6)
    # the pre-hook recomputes weight from weight_orig before every call
    with tinytorch.no_grad():
        m.weight_orig.fill_(2.0)
    np.testing.assert_allclose(_np(m(x)), _np(x) @ (2.0 * mask).T + _np(m.bias), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_np(m.weight), 2.0 * mask)


def test_gradients_flow_to_orig_masked():
    m = nn.Linear(6, 4)
    prune.l1_unstructured(m, "weight", amount=10)
    x = tinytorch.randn(3, 6)
    m(x).pow(2).sum().backward()
    mask = _np(m.weight_mask)
    g = _np(m.weight_orig.grad)
    assert np.all(g[mask == 0] == 0)
    # the surviving entries get the ordinary linear-layer gradient
    y = _np(x) @ (_np(m.weight_orig) * mask).T + _np(m.bias)
    np.testing.assert_allclose(g, (2 * y).T @ _np(x) * mask, rtol=1e-4, atol=1e-5)
    assert np.count_nonzero(g) == int(mask.sum())
    assert m.weight_mask.grad is None and not m.weight_mask.requires_grad


def test_training_keeps_pruned_entries_zero():
    m = nn.Linear(4, 4)
    prune.l1_unstructured(m, "weight", amount=0.5)
    opt = tinytorch.optim.SGD(m.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        m(tinytorch.randn(8, 4)).sum().backward()
        opt.step()
    m(tinytorch.randn(1, 4))
    assert _zeros(m.weight) >= 8
    np.testing.assert_array_equal(_np(m.weight)[_np(m.weight_mask) == 0], 0)


def test_remove_makes_pruning_permanent():
    m = nn.Linear(5, 4)
    orig = m.weight
    prune.l1_unstructured(m, "weight", amount=8)
    prune.random_unstructured(m, "weight", amount=2)
    expected = _np(m.weight_orig) * _np(m.weight_mask)
    out = prune.remove(m, "weight")
    assert out is m
    assert isinstance(m.weight, nn.Parameter) and m.weight is orig and m.weight.requires_grad
    np.testing.assert_array_equal(_np(m.weight), expected)
    assert _zeros(m.weight) >= 10
    assert list(m.state_dict()) == ["bias", "weight"]
    assert not hasattr(m, "weight_orig") and not hasattr(m, "weight_mask")
    assert len(m._forward_pre_hooks) == 0 and not prune.is_pruned(m)
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(m, "weight")
    # the module trains as a normal one afterwards
    m(tinytorch.randn(2, 5)).sum().backward()
    assert m.weight.grad is not None


def test_state_dict_round_trip_into_pruned_module():
    a = nn.Linear(3, 4)
    prune.l1_unstructured(a, "weight", amount=5)
    b = nn.Linear(3, 4)
    prune.identity(b, "weight")
    np.testing.assert_array_equal(_np(b.weight_mask), np.ones((4, 3)))
    b.load_state_dict(a.state_dict())
    x = tinytorch.randn(2, 3)
    np.testing.assert_allclose(_np(b(x)), _np(a(x)), rtol=1e-6)
    assert _zeros(b.weight) >= 5


# ---------------------------------------------------------------- iterative pruning
def test_iterative_pruning_only_prunes_remaining_entries():
    m = nn.Linear(10, 10)
    prune.l1_unstructured(m, "weight", amount=0.5)
    first = _np(m.weight_mask).copy()
    prune.random_unstructured(m, "weight", amount=0.2)  # 20% of the 50 left
    second = _np(m.weight_mask).copy()
    assert _zeros(first) == 50 and _zeros(second) == 60
    assert np.all(second[first == 0] == 0)
    prune.l1_unstructured(m, "weight", amount=15)  # an int counts entries, also among those left
    third = _np(m.weight_mask)
    assert _zeros(third) == 75 and np.all(third[second == 0] == 0)
    # the kept ones are the largest of what was left
    w = np.abs(_np(m.weight_orig))
    newly = (second == 1) & (third == 0)
    assert w[newly].max() <= w[third == 1].min()
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer)
    assert [type(h) for h in hooks[0]] == [prune.L1Unstructured, prune.RandomUnstructured, prune.L1Unstructured]
    assert len(hooks[0]) == 3 and isinstance(hooks[0][1], prune.RandomUnstructured)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]


def test_iterative_structured_prunes_remaining_channels():
    m = nn.Conv2d(2, 8, 3)
    prune.ln_structured(m, "weight", amount=0.5, n=2, dim=0)
    first = _np(m.weight_mask).copy()
    assert _zeros(first.reshape(8, -1).sum(1)) == 4
    prune.random_structured(m, "weight", amount=0.5, dim=0)  # half of the 4 channels left
    second = _np(m.weight_mask).reshape(8, -1)
    assert _zeros(second.sum(1)) == 6
    assert np.all(second[first.reshape(8, -1).sum(1) == 0] == 0)
    # structured on top of unstructured: the mask keeps the earlier zeros in surviving channels
    prune.l1_unstructured(m, "weight", amount=3)
    third = _np(m.weight_mask).reshape(8, -1).copy()
    assert _zeros(third) == 6 * 18 + 3
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)  # one of the two channels left
    final = _np(m.weight_mask).reshape(8, -1)
    assert _zeros(final.sum(1)) == 7
    assert np.all(final <= third)
    assert _zeros(final[final.sum(1) != 0]) == _zeros(third[final.sum(1) != 0]) <= 3


def test_failed_pruning_leaves_module_untouched():
    m = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="amount=7 should be smaller than the number of parameters to prune=6"):
        prune.l1_unstructured(m, "weight", amount=7)
    assert isinstance(m.weight, nn.Parameter) and set(m._parameters) == {"weight", "bias"}
    assert not prune.is_pruned(m) and len(m._buffers) == 0
    prune.l1_unstructured(m, "weight", amount=4)
    with pytest.raises(ValueError, match="amount=3 should be smaller than the number of parameters to prune=2"):
        prune.l1_unstructured(m, "weight", amount=3)  # only 2 entries left
    # the earlier pruning is still installed and active
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1 and type(hooks[0]) is prune.L1Unstructured
    assert _zeros(m.weight_mask) == 4
    prune.l1_unstructured(m, "weight", amount=1)
    with pytest.raises(ValueError, match="amount=2 should be smaller than the number of parameters to prune=1"):
        prune.random_unstructured(m, "weight", amount=2)
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 2
    prune.l1_unstructured(m, "weight", amount=1)
    assert _zeros(m.weight_mask) == 6 and len(hooks[0]) == 3
    np.testing.assert_array_equal(_np(m(tinytorch.ones(1, 3))), _np(m.bias).reshape(1, 2))


# ---------------------------------------------------------------- structured pruning
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("method", ["random", "l1", "l2", "inf", "-inf", "fro"])
def test_structured_zeroes_whole_channels(method, dim):
    m = nn.Conv2d(4, 6, (3, 5))
    shape = tuple(m.weight.shape)  # (6, 4, 3, 5)
    nch = shape[dim]
    if method == "random":
        prune.random_structured(m, "weight", amount=0.5, dim=dim)
    else:
        n = {"l1": 1, "l2": 2, "inf": math.inf, "-inf": -math.inf, "fro": "fro"}[method]
        prune.ln_structured(m, "weight", amount=0.5, n=n, dim=dim)
    mask = np.moveaxis(_np(m.weight_mask), dim, 0).reshape(nch, -1)
    per_channel = mask.sum(1)
    # each channel is kept entirely or pruned entirely
    assert set(per_channel.tolist()) <= {0.0, float(mask.shape[1])}
    assert _zeros(per_channel) == round(0.5 * nch)
    if method == "l2":
        norms = np.sqrt((np.moveaxis(_np(m.weight_orig), dim, 0).reshape(nch, -1) ** 2).sum(1))
        assert norms[per_channel == 0].max() <= norms[per_channel > 0].min()


def test_ln_structured_int_amount_and_importance_scores():
    m = nn.Linear(4, 5)
    scores = tinytorch.tensor(np.arange(20, dtype=np.float32).reshape(5, 4))
    prune.ln_structured(m, "weight", amount=2, n=1, dim=0, importance_scores=scores)
    np.testing.assert_array_equal(_np(m.weight_mask).sum(1), [0, 0, 4, 4, 4])
    prune.ln_structured(m, "weight", amount=1, n=1, dim=-1, importance_scores=-scores)
    # column j has L1 score norm 40 + 5j (the scores are not masked), so column 0 goes
    np.testing.assert_array_equal(_np(m.weight_mask).sum(0), [0, 3, 3, 3])


# ---------------------------------------------------------------- global and custom masks
def test_global_unstructured_across_two_layers():
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    params = [(net[0], "weight"), (net[2], "weight")]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=20)
    m0, m2 = _np(net[0].weight_mask), _np(net[2].weight_mask)
    assert _zeros(m0) + _zeros(m2) == 20
    w = np.concatenate([np.abs(_np(net[0].weight_orig)).ravel(), np.abs(_np(net[2].weight_orig)).ravel()])
    mask = np.concatenate([m0.ravel(), m2.ravel()])
    assert w[mask == 0].max() <= w[mask == 1].min()
    assert list(net.state_dict()) == ["0.bias", "0.weight_orig", "0.weight_mask", "2.bias", "2.weight_orig",
                                      "2.weight_mask"]
    # again, as a fraction of what is left globally, and from a generator
    prune.global_unstructured(((m, n) for m, n in params), pruning_method=prune.RandomUnstructured, amount=0.1)
    n0, n2 = _np(net[0].weight_mask), _np(net[2].weight_mask)
    assert _zeros(n0) + _zeros(n2) == 20 + round(0.1 * 25)
    assert np.all(n0[m0 == 0] == 0) and np.all(n2[m2 == 0] == 0)
    assert all(isinstance(h, prune.PruningContainer) for h in net[0]._forward_pre_hooks.values())


def test_global_unstructured_importance_scores_and_errors():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    scores = {(a, "weight"): tinytorch.tensor([[1.0, 2.0], [3.0, 4.0]]),
              (b, "weight"): tinytorch.tensor([[0.5, 5.0], [6.0, 2.5]])}
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured, importance_scores=scores,
                              amount=3)
    np.testing.assert_array_equal(_np(a.weight_mask), [[0, 0], [1, 1]])
    np.testing.assert_array_equal(_np(b.weight_mask), [[0, 1], [1, 1]])
    with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported'):
        prune.global_unstructured([(a, "bias")], prune.RandomStructured, amount=1)
    with pytest.raises(TypeError, match="parameters is not an Iterable"):
        prune.global_unstructured(5, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="importance_scores must be of type dict"):
        prune.global_unstructured([(a, "bias")], prune.L1Unstructured, importance_scores=[1], amount=1)


def test_custom_from_mask_and_identity():
    m = nn.Linear(5, 3)
    prune.custom_from_mask(m, "bias", mask=tinytorch.tensor([0, 1, 0]))
    np.testing.assert_array_equal(_np(m.bias_mask), [0.0, 1.0, 0.0])
    assert m.bias_mask.dtype == m.bias_orig.dtype
    np.testing.assert_array_equal(_np(m.bias), [0.0, _np(m.bias_orig)[1], 0.0])
    prune.custom_from_mask(m, "bias", mask=tinytorch.tensor([1, 0, 1]))  # combined with the earlier mask
    np.testing.assert_array_equal(_np(m.bias_mask), [0.0, 0.0, 0.0])
    prune.identity(m, "weight")
    assert _zeros(m.weight_mask) == 0 and isinstance(next(iter(m._forward_pre_hooks.values())), prune.BasePruningMethod)


def test_prune_method_on_tensor_and_container():
    t = tinytorch.tensor([[1.0, -4.0, 0.5], [2.0, 3.0, -0.25]])
    np.testing.assert_array_equal(_np(prune.L1Unstructured(amount=2).prune(t)), [[1, -4, 0], [2, 3, 0]])
    np.testing.assert_array_equal(_np(prune.LnStructured(amount=1, n=2, dim=0).prune(t)), [[1, -4, 0.5], [0, 0, 0]])
    imp = tinytorch.tensor([[9.0, 9.0, 9.0], [0.0, 9.0, 9.0]])
    np.testing.assert_array_equal(_np(prune.L1Unstructured(amount=1).prune(t, importance_scores=imp)),
                                  [[1, -4, 0.5], [0, 3, -0.25]])
    container = prune.PruningContainer()
    container._tensor_name = "test"
    p = prune.L1Unstructured(amount=2)
    p._tensor_name = "test"
    container.add_pruning_method(p)
    assert len(container) == 1 and container[0] is p
    q = prune.L1Unstructured(amount=2)
    q._tensor_name = "other"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter named 'test'"):
        container.add_pruning_method(q)
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        container.add_pruning_method(10)
    with pytest.raises(TypeError):
        prune.BasePruningMethod()  # abstract


def test_custom_pruning_method_subclass():
    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    m = nn.Linear(3, 2)
    EveryOther.apply(m, "weight")
    np.testing.assert_array_equal(_np(m.weight_mask).ravel(), [0, 1, 0, 1, 0, 1])
    EveryOther.apply(m, "weight")  # acts on the 3 entries left
    np.testing.assert_array_equal(_np(m.weight_mask).ravel(), [0, 0, 0, 1, 0, 0])


# ---------------------------------------------------------------- errors
BAD_AMOUNTS = [(-1, ValueError), (1.5, ValueError), (-0.1, ValueError), ("a", TypeError), (None, TypeError)]


@pytest.mark.parametrize("amount,exc", BAD_AMOUNTS)
def test_bad_amount_messages(amount, exc):
    with pytest.raises(exc) as info:
        prune.L1Unstructured(amount)
    if exc is ValueError:
        assert str(info.value) == (f"amount={amount} should either be a float in the range [0, 1] or a "
                                   "non-negative integer")
    else:
        assert str(info.value) == f"Invalid type for amount: {amount}. Must be int or float."
    m = nn.Linear(2, 2)
    with pytest.raises(exc):
        prune.random_structured(m, "weight", amount, dim=0)
    assert not prune.is_pruned(m) and isinstance(m.weight, nn.Parameter)


def test_structured_errors():
    m = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="Structured pruning can only be applied to multidimensional tensors"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=0)
    with pytest.raises(IndexError, match="Invalid index 2 for tensor of size"):
        prune.random_structured(m, "weight", amount=1, dim=2)
    with pytest.raises(ValueError, match="amount=3 should be smaller than the number of parameters to prune=2"):
        prune.ln_structured(m, "weight", amount=3, n=1, dim=0)
    assert not prune.is_pruned(m) and set(m._parameters) == {"weight", "bias"} and not m._buffers


@needs_torch
def test_error_messages_match_pytorch():
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    tprune = torch.nn.utils.prune
    cases = [lambda p, n: p.L1Unstructured(-1), lambda p, n: p.RandomStructured(2.5),
             lambda p, n: p.LnStructured("x", 2), lambda p, n: p.l1_unstructured(n.Linear(3, 2), "weight", 7),
             lambda p, n: p.ln_structured(n.Linear(3, 2), "weight", 3, 2, 0),
             lambda p, n: p.random_structured(n.Linear(3, 2), "weight", 1, 5),
             lambda p, n: p.ln_structured(n.Linear(3, 2), "bias", 1, 2, 0),
             lambda p, n: p.global_unstructured([(n.Linear(3, 2), "weight")], p.RandomStructured, amount=1)]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(tprune, torch.nn)
        with pytest.raises(Exception) as got:
            case(prune, nn)
        assert type(got.value) is type(want.value)
        assert str(got.value).replace("tinytorch", "torch") == str(want.value)
    # remove on an unpruned module: same wording up to the module's repr
    with pytest.raises(ValueError) as want:
        tprune.remove(torch.nn.Linear(3, 2), "weight")
    with pytest.raises(ValueError) as got:
        prune.remove(nn.Linear(3, 2), "weight")
    assert str(got.value) == str(want.value)


# ---------------------------------------------------------------- parity with PyTorch
def _pair(ctor_ours, ctor_theirs, seed=0):
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    ours, theirs = ctor_ours(), ctor_theirs()
    rng = np.random.default_rng(seed)
    state = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in theirs.state_dict().items()}
    theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    ours.load_state_dict({k: tinytorch.tensor(v) for k, v in state.items()})
    return ours, theirs


@needs_torch
def test_l1_and_ln_masks_match_pytorch():
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    tprune = torch.nn.utils.prune
    ours, theirs = _pair(lambda: nn.Conv2d(3, 6, 3), lambda: torch.nn.Conv2d(3, 6, 3))
    steps = [("l1_unstructured", dict(amount=0.3)), ("ln_structured", dict(amount=2, n=2, dim=0)),
             ("l1_unstructured", dict(amount=11)), ("ln_structured", dict(amount=0.5, n=1, dim=1)),
             ("ln_structured", dict(amount=1, n=math.inf, dim=-1)), ("l1_unstructured", dict(amount=0.25))]
    for fn, kw in steps:
        getattr(prune, fn)(ours, "weight", **kw)
        getattr(tprune, fn)(theirs, "weight", **kw)
        np.testing.assert_array_equal(_np(ours.weight_mask), theirs.weight_mask.numpy(), err_msg=f"{fn} {kw}")
        np.testing.assert_array_equal(_np(ours.weight), theirs.weight.detach().numpy())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(_np(ours(tinytorch.tensor(x))), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    prune.remove(ours, "weight")
    tprune.remove(theirs, "weight")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_array_equal(_np(ours.weight), theirs.weight.detach().numpy())


@needs_torch
@pytest.mark.parametrize("n", [1, 2, 3, math.inf, -math.inf, "fro", "nuc"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_ln_structured_norms_match_pytorch(n, dim):
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    ours, theirs = _pair(lambda: nn.Conv1d(4, 5, 3), lambda: torch.nn.Conv1d(4, 5, 3), seed=dim)
    prune.ln_structured(ours, "weight", amount=0.4, n=n, dim=dim)
    torch.nn.utils.prune.ln_structured(theirs, "weight", amount=0.4, n=n, dim=dim)
    np.testing.assert_array_equal(_np(ours.weight_mask), theirs.weight_mask.numpy())


@needs_torch
def test_global_unstructured_matches_pytorch():
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    ours, theirs = _pair(lambda: nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3)),
                         lambda: torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3)), seed=3)
    prune.l1_unstructured(ours[1], "bias", amount=1)
    torch.nn.utils.prune.l1_unstructured(theirs[1], "bias", amount=1)
    for amount in (0.4, 5):
        prune.global_unstructured([(ours[0], "weight"), (ours[1], "weight"), (ours[1], "bias")],
                                  prune.L1Unstructured, amount=amount)
        torch.nn.utils.prune.global_unstructured([(theirs[0], "weight"), (theirs[1], "weight"),
                                                  (theirs[1], "bias")], torch.nn.utils.prune.L1Unstructured,
                                                 amount=amount)
        for (k, v), (k2, v2) in zip(ours.state_dict().items(), theirs.state_dict().items()):
            assert k == k2
            np.testing.assert_array_equal(_np(v), v2.numpy(), err_msg=k)


# ---------------------------------------------------------------- fusion
def _bn_stats(bn, rng, affine_values=True):
    _set_weights(bn, rng, running_mean=rng.standard_normal(bn.num_features),
                 running_var=rng.uniform(0.5, 2.0, bn.num_features))
    if bn.affine and affine_values:
        _set_weights(bn, rng, weight=True, bias=True)


@pytest.mark.parametrize("conv_bias,affine", [(True, True), (False, True), (True, False), (False, False)])
def test_fuse_conv_bn_eval_matches_sequence(conv_bias, affine):
    rng = np.random.default_rng(0)
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=conv_bias).eval()
    bn = nn.BatchNorm2d(4, affine=affine, eps=1e-3).eval()
    _bn_stats(bn, rng)
    x = tinytorch.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    want = _np(bn(conv(x)))
    before = _np(conv.weight).copy()
    fused = fusion.fuse_conv_bn_eval(conv, bn)
    assert type(fused) is nn.Conv2d and fused is not conv
    assert isinstance(fused.weight, nn.Parameter) and isinstance(fused.bias, nn.Parameter)
    assert fused.bias.shape == (4,) and fused.weight.requires_grad
    np.testing.assert_allclose(_np(fused(x)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(_np(conv.weight), before)  # the input module is not modified
    assert (conv.bias is None) == (not conv_bias)


@pytest.mark.parametrize("cls,bn_cls,shape", [(nn.ConvTranspose2d, nn.BatchNorm2d, (2, 3, 5, 5)),
                                              (nn.ConvTranspose1d, nn.BatchNorm1d, (2, 3, 7))])
def test_fuse_conv_transpose_bn_eval(cls, bn_cls, shape):
    rng = np.random.default_rng(1)
    conv = cls(3, 5, 3, stride=2).eval()
    bn = bn_cls(5).eval()
    _bn_stats(bn, rng)
    x = tinytorch.tensor(rng.standard_normal(shape).astype(np.float32))
    want = _np(bn(conv(x)))
    fused = fusion.fuse_conv_bn_eval(conv, bn, transpose=True)
    assert type(fused) is cls
    np.testing.assert_allclose(_np(fused(x)), want, rtol=1e-5, atol=1e-5)
    # without transpose=True the scale is laid along in_channels (3), which does not broadcast against 5
    with pytest.raises(RuntimeError, match="must match the size"):
        fusion.fuse_conv_bn_eval(conv, bn)


def test_fuse_linear_bn_eval_matches_sequence():
    rng = np.random.default_rng(2)
    for out, nf, bias in [(4, 4, True), (4, 4, False), (4, 1, True)]:
        lin = nn.Linear(3, out, bias=bias).eval()
        bn = nn.BatchNorm1d(nf).eval()
        _bn_stats(bn, rng)
        x = tinytorch.tensor(rng.standard_normal((5, 3)).astype(np.float32))
        y = lin(x)
        want = _np(bn(y)) if nf == out else _np(bn(y.reshape(-1, 1)).reshape(5, out))
        fused = fusion.fuse_linear_bn_eval(lin, bn)
        assert type(fused) is nn.Linear and isinstance(fused.bias, nn.Parameter)
        np.testing.assert_allclose(_np(fused(x)), want, rtol=1e-5, atol=1e-5)


def test_fusion_errors():
    conv, bn = nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        fusion.fuse_conv_bn_eval(conv, bn.eval())
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        fusion.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), nn.BatchNorm1d(3).train())
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features or bn.num_features == 1"):
        fusion.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), nn.BatchNorm1d(2).eval())
    with pytest.raises(AssertionError, match="running_mean and bn.running_var must not be None"):
        fusion.fuse_conv_bn_eval(conv.eval(), nn.BatchNorm2d(3, track_running_stats=False).eval())


def test_fuse_weights_functions_keep_dtype_and_requires_grad():
    w = tinytorch.randn(4, 2, 3, 3, dtype=tinytorch.float64)
    rm, rv = tinytorch.zeros(4), tinytorch.ones(4)
    fw, fb = fusion.fuse_conv_bn_weights(w, None, rm, rv, 0.0, None, None)
    assert fw.dtype == tinytorch.float64 and fb.dtype == tinytorch.float64
    np.testing.assert_allclose(_np(fw), _np(w))
    np.testing.assert_array_equal(_np(fb), np.zeros(4))
    assert isinstance(fw, nn.Parameter) and not fw.requires_grad  # follows conv_w, a plain tensor here
    lw = nn.Parameter(tinytorch.randn(3, 2))
    fw, fb = fusion.fuse_linear_bn_weights(lw, None, tinytorch.ones(3), tinytorch.full((3,), 3.0), 1.0,
                                           tinytorch.full((3,), 4.0), tinytorch.full((3,), 0.5))
    assert fw.requires_grad and fw.grad_fn is None
    np.testing.assert_allclose(_np(fw), _np(lw) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(_np(fb), np.full(3, -1.5), rtol=1e-6)


@needs_torch
@pytest.mark.parametrize("kind", ["conv2d", "convT2d", "linear"])
def test_fusion_matches_pytorch(kind):
    import torch
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)
    if kind == "conv2d":
        ours, theirs = _pair(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)),
                             lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)))
        x = np.random.default_rng(5).standard_normal((2, 3, 6, 6)).astype(np.float32)
    elif kind == "convT2d":
        ours, theirs = _pair(lambda: nn.Sequential(nn.ConvTranspose2d(3, 4, 3), nn.BatchNorm2d(4)),
                             lambda: torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 4, 3), torch.nn.BatchNorm2d(4)))
        x = np.random.default_rng(5).standard_normal((2, 3, 4, 4)).astype(np.float32)
    else:
        ours, theirs = _pair(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)),
                             lambda: torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)))
        x = np.random.default_rng(5).standard_normal((6, 3)).astype(np.float32)
    for seq in (ours, theirs):
        seq.eval()
        with (torch.no_grad() if seq is theirs else tinytorch.no_grad()):
            seq[1].running_var.abs_().add_(0.5)
    if kind == "linear":
        fo = fusion.fuse_linear_bn_eval(ours[0], ours[1])
        ft = torch.nn.utils.fusion.fuse_linear_bn_eval(theirs[0], theirs[1])
    else:
        t = kind == "convT2d"
        fo = fusion.fuse_conv_bn_eval(ours[0], ours[1], transpose=t)
        ft = torch.nn.utils.fusion.fuse_conv_bn_eval(theirs[0], theirs[1], transpose=t)
    np.testing.assert_allclose(_np(fo.weight), ft.weight.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(fo.bias), ft.bias.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(fo(tinytorch.tensor(x))), ft(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(fo(tinytorch.tensor(x))), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_pruning_and_fusion_on_device(device):
    conv = nn.Conv2d(3, 4, 3).to(device)
    prune.random_structured(conv, "weight", amount=1, dim=0)
    prune.l1_unstructured(conv, "weight", amount=0.2)
    prune.ln_structured(conv, "weight", amount=1, n=2, dim=1)
    assert conv.weight_mask.device == conv.weight_orig.device == conv.weight.device
    mask = conv.weight_mask.cpu().numpy()
    assert _zeros(mask.reshape(4, -1).sum(1)) == 1 and _zeros(mask.transpose(1, 0, 2, 3).reshape(3, -1).sum(1)) == 1
    x = tinytorch.randn(2, 3, 5, 5, device=device)
    conv(x).sum().backward()
    assert np.all(conv.weight_orig.grad.cpu().numpy()[mask == 0] == 0)
    prune.remove(conv, "weight")
    bn = nn.BatchNorm2d(4).to(device).eval()
    with tinytorch.no_grad():
        bn.running_mean.copy_(tinytorch.randn(4, device=device))
        bn.running_var.copy_(tinytorch.rand(4, device=device) + 0.5)
    conv.eval()
    fused = fusion.fuse_conv_bn_eval(conv, bn)
    assert fused.weight.device == conv.weight.device
    np.testing.assert_allclose(fused(x).detach().cpu().numpy(), bn(conv(x)).detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-5)
