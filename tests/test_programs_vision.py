"""Regressions found by running ordinary vision/training programs on tinytorch: the optimizers, LR schedulers,
samplers and datasets such programs use, nn.init extras, 0-d tensor indices and PyTorch's error messages.
Numbers are checked against float64 NumPy references; PyTorch is compared only where it is installed."""
import math

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
from tinytorch.optim import lr_scheduler as L
from tinytorch.utils.data import (ChainDataset, DataLoader, IterableDataset, StackDataset, TensorDataset,
                                  WeightedRandomSampler)

# ---------------------------------------------------------------------------------------------------------------
# Optimizers: a quadratic-plus-quartic loss whose gradient is known in closed form, stepped by tinytorch and by a
# float64 NumPy transcription of each algorithm's published update.

_A = np.random.RandomState(0).randn(6)


def _grad_fn(p):
    return 2 * (p - _A) + 0.4 * p ** 3


def _loss(p):
    return ((p - _A) ** 2).sum() + 0.1 * (p ** 4).sum()


def _run_tinytorch(make_opt, steps=7):
    p = nn.Parameter(tinytorch.tensor(np.linspace(-1, 1, 6), dtype=tinytorch.float64))
    opt = make_opt([p])
    for _ in range(steps):
        opt.zero_grad()
        _loss(p).backward()
        opt.step()
    return p.detach().numpy(), opt


def _reference(update, state, steps=7):
    p = np.linspace(-1, 1, 6)
    for t in range(1, steps + 1):
        p = update(p, _grad_fn(p), state, t)
    return p


def _rmsprop(lr, alpha, eps, wd, momentum, centered):
    def update(p, g, s, t):
        g = g + wd * p
        s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
        avg = s["v"]
        if centered:
            s["ga"] = alpha * s.get("ga", 0) + (1 - alpha) * g
            avg = avg - s["ga"] ** 2
        denom = np.sqrt(avg) + eps
        if momentum > 0:
            s["b"] = momentum * s.get("b", 0) + g / denom
            return p - lr * s["b"]
        return p - lr * g / denom
    return update


def _adagrad(lr, lr_decay, wd, init, eps):
    def update(p, g, s, t):
        g = g + wd * p
        s["sum"] = s.get("sum", init) + g * g
        return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)
    return update


def _adadelta(lr, rho, eps, wd):
    def update(p, g, s, t):
        g = g + wd * p
        s["v"] = rho * s.get("v", 0) + (1 - rho) * g * g
        delta = np.sqrt(s.get("u", 0) + eps) / np.sqrt(s["v"] + eps) * g
        s["u"] = rho * s.get("u", 0) + (1 - rho) * delta * delta
        return p - lr * delta
    return update


def _adamax(lr, b1, b2, eps, wd):
    def update(p, g, s, t):
        g = g + wd * p
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g) + eps)
        return p - lr / (1 - b1 ** t) * s["m"] / s["u"]
    return update


def _nadam(lr, b1, b2, eps, wd, psi, decoupled):
    def update(p, g, s, t):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        s["prod"] = float(np.float32(s.get("prod", 1.0)) * np.float32(mu))  # kept as a float32 tensor
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
        denom = np.sqrt(s["v"] / (1 - b2 ** t)) + eps
        return (p - lr * (1 - mu) / (1 - s["prod"]) * g / denom
                - lr * mu_next / (1 - s["prod"] * mu_next) * s["m"] / denom)
    return update


def _radam(lr, b1, b2, eps, wd, decoupled):
    def update(p, g, s, t):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
        m_hat = s["m"] / (1 - b1 ** t)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            return p - lr * m_hat * r * math.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)
        return p - lr * m_hat
    return update


def _rprop(lr, etaminus, etaplus, smin, smax):
    def update(p, g, s, t):
        prev = s.get("prev", np.zeros_like(p))
        step = s.get("step", np.full_like(p, lr))
        sign = np.sign(g * prev)
        step = np.clip(step * np.where(sign > 0, etaplus, np.where(sign < 0, etaminus, 1.0)), smin, smax)
        g = np.where(sign < 0, 0.0, g)
        s["prev"], s["step"] = g, step
        return p - np.sign(g) * step
    return update


def _asgd(lr, lambd, alpha, t0, wd):
    def update(p, g, s, t):
        g = g + wd * p
        eta = s.get("eta", float(np.float32(lr)))
        p = p * (1 - lambd * eta) - eta * g
        mu = s.get("mu", 1.0)
        s["ax"] = p.copy() if mu == 1 else s["ax"] + mu * (p - s["ax"])
        s["eta"] = float(np.float32(lr / (1 + lambd * lr * t) ** alpha))  # eta and mu are float32 tensors
        s["mu"] = float(np.float32(1 / max(1, t - t0)))
        return p
    return update


O = tinytorch.optim
OPTIMIZER_CASES = [
    ("rmsprop", lambda ps: O.RMSprop(ps, lr=1e-2), _rmsprop(1e-2, 0.99, 1e-8, 0, 0, False)),
    ("rmsprop_centered_momentum", lambda ps: O.RMSprop(ps, lr=1e-2, momentum=0.9, centered=True, weight_decay=0.1),
     _rmsprop(1e-2, 0.99, 1e-8, 0.1, 0.9, True)),
    ("adagrad", lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.2),
     _adagrad(0.1, 0.05, 0.01, 0.2, 1e-10)),
    ("adadelta", lambda ps: O.Adadelta(ps, lr=0.5, weight_decay=0.01), _adadelta(0.5, 0.9, 1e-6, 0.01)),
    ("adamax", lambda ps: O.Adamax(ps, lr=0.05, weight_decay=0.01), _adamax(0.05, 0.9, 0.999, 1e-8, 0.01)),
    ("nadam", lambda ps: O.NAdam(ps, lr=0.05, weight_decay=0.01), _nadam(0.05, 0.9, 0.999, 1e-8, 0.01, 4e-3, False)),
    ("nadam_decoupled", lambda ps: O.NAdam(ps, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True),
     _nadam(0.05, 0.9, 0.999, 1e-8, 0.1, 4e-3, True)),
    ("radam", lambda ps: O.RAdam(ps, lr=0.05, betas=(0.9, 0.9)), _radam(0.05, 0.9, 0.9, 1e-8, 0, False)),
    ("radam_decoupled", lambda ps: O.RAdam(ps, lr=0.05, betas=(0.9, 0.9), weight_decay=0.1,
                                           decoupled_weight_decay=True), _radam(0.05, 0.9, 0.9, 1e-8, 0.1, True)),
    ("rprop", lambda ps: O.Rprop(ps, lr=0.05), _rprop(0.05, 0.5, 1.2, 1e-6, 50)),
    ("asgd", lambda ps: O.ASGD(ps, lr=0.05, t0=3, weight_decay=0.01), _asgd(0.05, 1e-4, 0.75, 3, 0.01)),
]


@pytest.mark.parametrize("name,make,update", OPTIMIZER_CASES, ids=[c[0] for c in OPTIMIZER_CASES])
def test_optimizer_matches_numpy_reference(name, make, update):
    got, opt = _run_tinytorch(make)
    np.testing.assert_allclose(got, _reference(update, {}), rtol=1e-10, atol=1e-12)
    state = opt.state_dict()["state"][0]
    assert state["step"].dtype == tinytorch.float32 and state["step"].shape == () and float(state["step"]) == 7


def test_optimizer_maximize_is_descent_on_the_negated_loss():
    p_max = nn.Parameter(tinytorch.tensor([1.0, -2.0], dtype=tinytorch.float64))
    p_min = nn.Parameter(tinytorch.tensor([1.0, -2.0], dtype=tinytorch.float64))
    o_max, o_min = O.RMSprop([p_max], lr=0.1, maximize=True), O.RMSprop([p_min], lr=0.1)
    for _ in range(3):
        for p, o, sign in ((p_max, o_max, -1), (p_min, o_min, 1)):
            o.zero_grad()
            (sign * (p ** 2).sum()).backward()
            o.step()
    np.testing.assert_allclose(p_max.detach().numpy(), p_min.detach().numpy(), rtol=1e-12)


def test_optimizer_state_keys_and_round_trip():
    import io
    p = nn.Parameter(tinytorch.ones(3))
    adagrad = O.Adagrad([p], lr=0.1, initial_accumulator_value=0.5)
    # Adagrad's state exists before the first step (PyTorch creates it eagerly).
    assert sorted(adagrad.state_dict()["state"][0]) == ["step", "sum"]
    np.testing.assert_array_equal(adagrad.state[p]["sum"].numpy(), np.full(3, 0.5, np.float32))
    opt = O.RMSprop([p], lr=0.1, momentum=0.9, centered=True)
    p.grad = tinytorch.ones(3)
    opt.step()
    assert sorted(opt.state[p]) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    buf = io.BytesIO()
    tinytorch.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2 = O.RMSprop([nn.Parameter(tinytorch.ones(3))], lr=0.5)
    opt2.load_state_dict(tinytorch.load(buf))
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["centered"] is True
    np.testing.assert_array_equal(opt2.state_dict()["state"][0]["square_avg"].numpy(),
                                  opt.state[p]["square_avg"].numpy())


@pytest.mark.parametrize("make,message", [
    (lambda ps: O.RMSprop(ps, lr=-1), "Invalid learning rate: -1"),
    (lambda ps: O.RMSprop(ps, alpha=-1), "Invalid alpha value: -1"),
    (lambda ps: O.Adagrad(ps, lr_decay=-1), "Invalid lr_decay value: -1"),
    (lambda ps: O.Adadelta(ps, rho=2), "Invalid rho value: 2"),
    (lambda ps: O.Adamax(ps, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (lambda ps: O.NAdam(ps, momentum_decay=-1), "Invalid momentum_decay value: -1"),
    (lambda ps: O.Rprop(ps, etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
])
def test_optimizer_argument_errors(make, message):
    with pytest.raises(ValueError, match=f"^{message}$".replace("(", r"\(").replace(")", r"\)")):
        make([nn.Parameter(tinytorch.ones(1))])


# ---------------------------------------------------------------------------------------------------------------
# LR schedulers, against their closed forms.

def _sgd(lr=0.1, momentum=0.9, groups=1):
    ps = [nn.Parameter(tinytorch.ones(1)) for _ in range(groups)]
    return O.SGD([{"params": [p]} for p in ps], lr=lr, momentum=momentum)


def _lrs(opt, sched, n, metrics=None):
    out = []
    for i in range(n):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
        out.append(sched.get_last_lr()[0])
    return out


def test_one_cycle_cos_matches_closed_form():
    opt = _sgd()
    sched = L.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    initial, lo = 1.0 / 25, 1.0 / 25 / 1e4
    up_end, end = 0.3 * 10 - 1, 9

    def cos_anneal(a, b, pct):
        return b + (a - b) / 2 * (1 + math.cos(math.pi * pct))
    expect = [cos_anneal(initial, 1.0, s / up_end) if s <= up_end else cos_anneal(1.0, lo, (s - up_end) /
                                                                                   (end - up_end))
              for s in range(1, 10)]
    assert opt.param_groups[0]["lr"] == pytest.approx(initial)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)
    np.testing.assert_allclose(_lrs(opt, sched, 9), expect, rtol=1e-12)
    opt.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 11 times. The specified number of total steps is 10"):
        opt.step()
        sched.step()


def test_one_cycle_cycles_adam_beta1_and_validates():
    p = nn.Parameter(tinytorch.ones(1))
    opt = O.Adam([p], lr=0.1)
    L.OneCycleLR(opt, max_lr=0.5, epochs=2, steps_per_epoch=3, anneal_strategy="linear")
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    assert opt.param_groups[0]["max_lr"] == 0.5 and opt.param_groups[0]["initial_lr"] == 0.02
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        L.OneCycleLR(_sgd(), max_lr=1.0)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start, but got 1"):
        L.OneCycleLR(_sgd(), max_lr=1.0, total_steps=5, pct_start=1)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        L.OneCycleLR(O.Adagrad([nn.Parameter(tinytorch.ones(1))]), max_lr=1.0, total_steps=5)


def test_cosine_annealing_warm_restarts_matches_closed_form():
    opt = _sgd(lr=0.1)
    sched = L.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.01)
    # Restarts after 2, then 4, then 8 epochs.
    t_cur = [1, 0, 1, 2, 3, 0, 1]
    t_i = [2, 4, 4, 4, 4, 8, 8]
    expect = [0.01 + 0.09 * (1 + math.cos(math.pi * c / i)) / 2 for c, i in zip(t_cur, t_i)]
    np.testing.assert_allclose(_lrs(opt, sched, 7), expect, rtol=1e-12)
    sched.step(2.5)  # fractional epochs, as in step(epoch + i / iters)
    assert sched.T_i == 4 and sched.T_cur == pytest.approx(0.5) and sched.last_epoch == 2
    assert sched.get_last_lr()[0] == pytest.approx(0.01 + 0.09 * (1 + math.cos(math.pi * 0.5 / 4)) / 2)
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        L.CosineAnnealingWarmRestarts(_sgd(), T_0=0)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        sched.step(-1)


def test_reduce_lr_on_plateau():
    opt = _sgd(lr=1.0)
    sched = L.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.0, 1.0]
    got = _lrs(opt, sched, len(metrics), [tinytorch.tensor(m) for m in metrics])
    assert got == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2]
    assert sched.best == pytest.approx(0.9)
    assert {"best", "num_bad_epochs", "cooldown_counter", "mode", "min_lrs"} <= set(sched.state_dict())
    mx = L.ReduceLROnPlateau(_sgd(lr=1.0), mode="max", patience=0, threshold_mode="abs", threshold=0.1)
    for m in [0.5, 0.55]:
        mx.step(m)
    assert mx.get_last_lr() == [0.1]
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        L.ReduceLROnPlateau(_sgd(), factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown!"):
        L.ReduceLROnPlateau(_sgd(), mode="foo")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        L.ReduceLROnPlateau(_sgd(groups=2), min_lr=[0.1])


def test_cyclic_lr_triangular2_and_momentum():
    opt = _sgd(lr=5.0)
    sched = L.CyclicLR(opt, base_lr=0.1, max_lr=1.0, step_size_up=2, mode="triangular2")
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0.9
    got = _lrs(opt, sched, 8)
    # Triangle of height 0.9 over 4 iterations, halved each cycle.
    expect = [0.1 + 0.9 * h for h in [0.5, 1, 0.5, 0]] + [0.1 + 0.45 * h for h in [0.5, 1, 0.5, 0]]
    np.testing.assert_allclose(got, expect, rtol=1e-12)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.9)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.9 - 0.1 * 0.5 * 0.25)


def test_chained_scheduler_multiplies_effects():
    opt = _sgd(lr=1.0)
    sched = L.ChainedScheduler([L.ConstantLR(opt, factor=0.5, total_iters=2), L.ExponentialLR(opt, gamma=0.9)])
    np.testing.assert_allclose(_lrs(opt, sched, 4), [0.5 * 0.9, 0.9 ** 2, 0.9 ** 3, 0.9 ** 4], rtol=1e-12)
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        L.ChainedScheduler([L.ReduceLROnPlateau(opt)])


# ---------------------------------------------------------------------------------------------------------------
# Data utilities.

def test_weighted_random_sampler():
    s = WeightedRandomSampler([0.0, 3.0, 0.0, 1.0], num_samples=400, generator=tinytorch.Generator().manual_seed(0))
    assert len(s) == 400 and s.weights.dtype == tinytorch.float64
    draws = np.array(list(s))
    assert set(draws.tolist()) <= {1, 3}
    assert 0.65 < (draws == 1).mean() < 0.85  # 3:1 odds
    no_repeat = list(WeightedRandomSampler([1.0, 1.0, 1.0, 0.0], 3, replacement=False))
    assert sorted(no_repeat) == [0, 1, 2]
    loader = DataLoader(TensorDataset(tinytorch.arange(4)), batch_size=3,
                        sampler=WeightedRandomSampler([0, 0, 1, 0], 5))
    assert [b[0].tolist() for b in loader] == [[2, 2, 2], [2, 2]]
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match="replacement should be a boolean value, but got replacement=1"):
        WeightedRandomSampler([1.0], 1, replacement=1)
    with pytest.raises(ValueError, match=r"weights should be a 1d sequence but given weights have shape \(1, 2\)"):
        WeightedRandomSampler([[1.0, 2.0]], 1)


def test_stack_and_chain_datasets():
    sd = StackDataset(TensorDataset(tinytorch.arange(3)), [10, 20, 30])
    assert len(sd) == 3 and sd[1][1] == 20 and sd[1][0][0].item() == 1
    assert StackDataset(a=[1, 2], b="xy")[1] == {"a": 2, "b": "y"}
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset([1, 2], [1])
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()

    class Stream(IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n
    chained = ChainDataset([Stream(2), Stream(3)])
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5


# ---------------------------------------------------------------------------------------------------------------
# nn.init extras.

def test_dirac_init_passes_channels_through():
    w = tinytorch.empty(4, 2, 3, 3)
    nn.init.dirac_(w, groups=2)
    expect = np.zeros((4, 2, 3, 3), np.float32)
    for g in range(2):
        for d in range(2):
            expect[g * 2 + d, d, 1, 1] = 1
    np.testing.assert_array_equal(w.numpy(), expect)
    x = tinytorch.randn(1, 2, 5)
    w1 = nn.init.dirac_(tinytorch.empty(2, 2, 3))
    np.testing.assert_allclose(tinytorch.nn.functional.conv1d(x, w1, padding=1).numpy(), x.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        nn.init.dirac_(tinytorch.empty(2, 2))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(tinytorch.empty(3, 2, 3), groups=2)


def test_sparse_init_and_deprecated_aliases():
    w = nn.Parameter(tinytorch.empty(10, 4))
    nn.init.sparse_(w, sparsity=0.25, std=0.5)
    assert (w.detach().numpy() == 0).sum(0).tolist() == [3, 3, 3, 3] and w.grad_fn is None
    with pytest.warns(FutureWarning, match=r"`nn.init.constant` is now deprecated in favor of `nn.init.constant_`"):
        nn.init.constant(w, 2.0)
    assert (w.detach().numpy() == 2.0).all()


# ---------------------------------------------------------------------------------------------------------------
# Tensors: 0-d integer indices, in-place writes into expanded views, error wording.

def test_zero_dim_integer_tensor_indices_select_like_ints():
    target = tinytorch.tensor([0, 2, 2, 1])
    pred = tinytorch.tensor([0, 2, 1, 1])
    conf = tinytorch.zeros(3, 3, dtype=tinytorch.int64)
    for t, p in zip(target, pred):
        conf[t, p] += 1
    expect = np.zeros((3, 3), np.int64)
    np.add.at(expect, (target.numpy(), pred.numpy()), 1)
    np.testing.assert_array_equal(conf.numpy(), expect)
    x = tinytorch.arange(6.0).reshape(2, 3).clone()
    v = x[tinytorch.tensor(1), tinytorch.tensor(2)]
    assert v.shape == () and v._base is x and v.item() == 5.0
    assert x[tinytorch.tensor(1), [0, 2]].tolist() == [3.0, 5.0]
    assert x[tinytorch.tensor([1])].shape == (1, 3)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[tinytorch.tensor(5)]


def test_zero_dim_index_gradient():
    x = tinytorch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=tinytorch.float64, requires_grad=True)
    assert tinytorch.autograd.gradcheck(lambda a: a[tinytorch.tensor(1)] * a[tinytorch.tensor(0), tinytorch.tensor(1)],
                                        (x,))


def test_in_place_write_into_expanded_view_raises_pytorch_error():
    message = "unsupported operation: more than one element of the written-to tensor refers to a single memory"
    for op in (lambda t: t.mul_(2), lambda t: t.add_(tinytorch.ones(3, 4)), lambda t: t.zero_(),
               lambda t: t.copy_(tinytorch.ones(3, 4))):
        with pytest.raises(RuntimeError, match=message):
            op(tinytorch.zeros(3, 1).expand(3, 4))


def test_setitem_broadcasts_like_pytorch():
    with pytest.raises(RuntimeError, match=r"^shape mismatch: value tensor of shape \[3\] cannot be broadcast to "
                                           r"indexing result of shape \[2\]$"):
        tinytorch.zeros(3)[[0, 1]] = tinytorch.zeros(3)
    x = tinytorch.zeros(2, 3)
    x[0] = tinytorch.ones(1, 3)  # leading 1s of the value are dropped, as PyTorch does
    assert x.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_integer_requires_grad_messages():
    t = tinytorch.ones(2, dtype=tinytorch.long)
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype can require gradients$"):
        t.requires_grad = True
    for make in (lambda: tinytorch.tensor([1, 2], requires_grad=True),
                 lambda: tinytorch.zeros(2, dtype=tinytorch.long, requires_grad=True),
                 lambda: tinytorch.arange(3, requires_grad=True)):
        with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype can require grad"):
            make()


# ---------------------------------------------------------------------------------------------------------------
# PyTorch parity, where PyTorch is installed.

def test_optimizers_and_schedulers_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.random.RandomState(1).randn(5, 3)
    for name in ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]:
        results = []
        for lib in (tinytorch, torch):
            p = lib.nn.Parameter(lib.tensor(a.copy()))
            opt = getattr(lib.optim, name)([p], lr=0.05, weight_decay=0.01) if name != "Rprop" else \
                lib.optim.Rprop([p], lr=0.05)
            sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=12, cycle_momentum=False)
            for _ in range(12):
                opt.zero_grad()
                ((p ** 3).sum() + (p * p).mean()).backward()
                opt.step()
                sched.step()
            results.append((p.detach().numpy().copy(), sched.get_last_lr()))
        np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-9, err_msg=name)
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, err_msg=name)


def test_warm_restarts_cyclic_plateau_match_pytorch():
    torch = pytest.importorskip("torch")
    runs = []
    for lib in (tinytorch, torch):
        p = lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        S = lib.optim.lr_scheduler
        scheds = [S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-3)]
        out = []
        for i in range(10):
            opt.step()
            scheds[0].step()
            out.append(scheds[0].get_last_lr()[0])
        opt2 = lib.optim.Adam([p], lr=0.1)
        cyc = S.CyclicLR(opt2, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.9)
        for i in range(10):
            opt2.step()
            cyc.step()
            out.append(cyc.get_last_lr()[0])
            out.append(opt2.param_groups[0]["betas"][0])
        plateau = S.ReduceLROnPlateau(opt, patience=1, factor=0.3)
        for m in [1, 2, 3, 0.5, 0.5, 0.5, 0.5]:
            plateau.step(m)
            out.append(plateau.get_last_lr()[0])
        runs.append(out)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# LBFGS.

def _least_squares_problem():
    rs = np.random.RandomState(0)
    X = rs.randn(40, 3)
    y = X @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.1 * rs.randn(40)
    return X, y


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_solves_least_squares(line_search_fn):
    X, y = _least_squares_problem()
    Xt, yt = tinytorch.tensor(X), tinytorch.tensor(y)
    w = tinytorch.zeros(3, dtype=tinytorch.float64, requires_grad=True)
    b = tinytorch.zeros(1, dtype=tinytorch.float64, requires_grad=True)
    opt = O.LBFGS([w, b], max_iter=50, history_size=5, tolerance_grad=1e-12, tolerance_change=1e-15,
                  line_search_fn=line_search_fn)

    def closure():
        opt.zero_grad()
        loss = ((Xt @ w + b - yt) ** 2).mean()
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    coef, *_ = np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)
    np.testing.assert_allclose(np.r_[w.detach().numpy(), b.detach().numpy()], coef, rtol=1e-6, atol=1e-8)
    state = opt.state[w]
    assert state["n_iter"] >= 2 and state["func_evals"] >= state["n_iter"] and len(state["old_dirs"]) <= 5


def test_lbfgs_strong_wolfe_rosenbrock_and_errors():
    x = tinytorch.tensor([-1.5, 2.0], dtype=tinytorch.float64, requires_grad=True)
    opt = O.LBFGS([x], lr=0.5, max_iter=50, line_search_fn="strong_wolfe")

    def rosen():
        opt.zero_grad()
        f = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        f.backward()
        return f
    for _ in range(3):
        opt.step(rosen)
    np.testing.assert_allclose(x.detach().numpy(), [1.0, 1.0], atol=1e-3)
    assert opt.defaults["max_eval"] == 62
    with pytest.raises(ValueError, match=r"LBFGS doesn't support per-parameter options \(parameter groups\)"):
        O.LBFGS([{"params": [x]}, {"params": [tinytorch.zeros(1, requires_grad=True)]}])
    bad = O.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(rosen)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_matches_pytorch(line_search_fn):
    torch = pytest.importorskip("torch")
    runs = []
    for lib in (tinytorch, torch):
        x = lib.tensor([-1.2, 1.0, 0.5], dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([x], lr=0.8, max_iter=7, history_size=4, line_search_fn=line_search_fn)

        def f():
            opt.zero_grad()
            v = ((1 - x[:-1]) ** 2 + 10 * (x[1:] - x[:-1] ** 2) ** 2).sum()
            v.backward()
            return v
        losses = [opt.step(f).item() for _ in range(4)]
        runs.append((losses, x.detach().numpy().copy(), opt.state[x]["func_evals"]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-10)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10)
    assert runs[0][2] == runs[1][2]


def test_lr_scheduler_legacy_name_and_resume_error():
    class Halving(L.LRScheduler):
        def get_lr(self):
            return [b * 0.5 ** self.last_epoch for b in self.base_lrs]
    opt = _sgd(lr=1.0)
    sched = Halving(opt)
    assert not isinstance(sched, L._LRScheduler) and issubclass(L._LRScheduler, L.LRScheduler)
    assert _lrs(opt, sched, 3) == [0.5, 0.25, 0.125]
    with pytest.raises(KeyError, match="when resuming scheduler with last_epoch >= 0.\\\\nThis typically happens when"):
        L.StepLR(_sgd(), 2, last_epoch=3)


# ---------------------------------------------------------------------------------------------------------------
# state_dict versions: old checkpoints without BatchNorm's num_batches_tracked still load.

def test_state_dict_metadata_and_batchnorm_upgrade():
    import io
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    sd = model.state_dict()
    assert sd._metadata == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 2}}
    buf = io.BytesIO()
    tinytorch.save(sd, buf)
    buf.seek(0)
    assert tinytorch.load(buf)._metadata == sd._metadata
    model[1].num_batches_tracked.fill_(7)
    # A plain dict carries no versions: treated as a pre-version-2 checkpoint, the count is kept.
    old = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    result = model.load_state_dict(old)
    assert result.missing_keys == [] and model[1].num_batches_tracked.item() == 7
    # A versioned state_dict that lacks it is reported, as PyTorch does.
    del sd["1.num_batches_tracked"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "1.num_batches_tracked"'):
        model.load_state_dict(sd)
    seen = []
    model[1].register_state_dict_pre_hook(lambda *a: None)
    model[1].register_state_dict_post_hook(lambda m, d, prefix, meta: seen.append(dict(meta)))
    model.state_dict()
    assert seen == [{"version": 2}]


@pytest.mark.parametrize("dtype", [tinytorch.bfloat16, tinytorch.float16])
def test_group_norm_reduced_precision_input_with_float32_affine(dtype):
    rs = np.random.RandomState(0)
    x64 = rs.randn(2, 4, 3, 3)
    w, b = rs.randn(4), rs.randn(4)
    gn = nn.GroupNorm(2, 4)
    with tinytorch.no_grad():
        gn.weight.copy_(tinytorch.tensor(w, dtype=tinytorch.float32))
        gn.bias.copy_(tinytorch.tensor(b, dtype=tinytorch.float32))
    x = tinytorch.tensor(x64).to(dtype).requires_grad_()
    y = gn(x)
    assert y.dtype == dtype  # PyTorch's mixed-dtype kernel keeps the activation's dtype
    xr = x.detach().float().numpy().astype(np.float64).reshape(2, 2, -1)
    ref = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + 1e-5)).reshape(2, 4, 3, 3)
    ref = ref * w[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(y.detach().float().numpy(), ref, rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    assert x.grad.dtype == dtype and gn.weight.grad.dtype == tinytorch.float32
    with tinytorch.autocast("cpu", dtype=tinytorch.bfloat16):
        conv = nn.Conv2d(4, 4, 1)
        assert gn(conv(x.detach().float())).dtype == tinytorch.bfloat16


def test_full_backward_hook_warning_points_at_the_callers_backward():
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda mod, gin, gout: None)
    out = lin(tinytorch.ones(1, 2))
    with pytest.warns(UserWarning, match="Full backward hook is firing") as record:
        out.sum().backward()
    assert record[0].filename == __file__


def test_adagrad_param_group_added_later_gets_state():
    a, b = nn.Parameter(tinytorch.ones(2)), nn.Parameter(tinytorch.ones(2))
    opt = O.Adagrad([a], lr=0.1)
    opt.add_param_group({"params": [b], "lr": 0.2})
    (a.sum() + b.sum()).backward()
    opt.step()
    # First Adagrad step: p -= lr * g / (sqrt(g^2) + eps) = p - lr for g = 1.
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 0.9], rtol=1e-6)
    np.testing.assert_allclose(b.detach().numpy(), [0.8, 0.8], rtol=1e-6)
    assert sorted(opt.state[b]) == ["step", "sum"]
