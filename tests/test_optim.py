"""Optimizers (one step against hand-written NumPy formulas, ten steps against PyTorch), their state_dict
format, and the LR schedulers (closed forms and PyTorch, step by step)."""
import math
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.optim as optim
from tinytorch.optim import lr_scheduler

P0 = np.array([[0.5, -1.0, 2.0], [0.25, 0.0, -3.0]])
G0 = np.array([[0.1, -0.2, 0.3], [-0.4, 0.5, 1.5]])


def _param(dtype=tinytorch.float64):
    p = nn.Parameter(tinytorch.tensor(P0, dtype=dtype))
    p.grad = tinytorch.tensor(G0, dtype=dtype)
    return p


# ------------------------------------------------------------------ one step by hand

def test_sgd_plain_step_by_hand():
    p = _param()
    optim.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.detach().numpy(), P0 - 0.1 * G0, rtol=1e-15)


def test_sgd_momentum_weight_decay_two_steps_by_hand():
    p = _param()
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1)
    opt.step()
    d1 = G0 + 0.01 * P0
    buf = d1.copy()  # the first step's buffer is the gradient itself (no dampening)
    p1 = P0 - 0.1 * buf
    np.testing.assert_allclose(p.detach().numpy(), p1, rtol=1e-14)
    opt.step()  # same gradient again
    d2 = G0 + 0.01 * p1
    buf = 0.9 * buf + (1 - 0.1) * d2
    np.testing.assert_allclose(p.detach().numpy(), p1 - 0.1 * buf, rtol=1e-14)
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), buf, rtol=1e-14)
    assert p.grad.numpy() is not None and np.array_equal(p.grad.numpy(), G0)  # grad left untouched


def test_sgd_nesterov_maximize_by_hand():
    p = _param()
    opt = optim.SGD([p], lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)
    opt.step()
    opt.step()
    d1 = -G0 + 0.1 * P0
    buf = d1.copy()
    p1 = P0 - 0.05 * (d1 + 0.8 * buf)
    d2 = -G0 + 0.1 * p1
    buf = 0.8 * buf + d2
    p2 = p1 - 0.05 * (d2 + 0.8 * buf)
    np.testing.assert_allclose(p.detach().numpy(), p2, rtol=1e-14)


def _adam_by_hand(steps, lr, b1, b2, eps, wd, decoupled, amsgrad=False, maximize=False):
    p, m, v, vmax = P0.copy(), np.zeros_like(P0), np.zeros_like(P0), np.zeros_like(P0)
    for t in range(1, steps + 1):
        g = -G0 if maximize else G0.copy()
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        mhat = m / (1 - b1 ** t)
        vhat = (vmax if amsgrad else v) / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p, m, v


@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("maximize", [False, True])
def test_adam_steps_by_hand(amsgrad, maximize):
    p = _param()
    opt = optim.Adam([p], lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, amsgrad=amsgrad, maximize=maximize)
    for _ in range(3):
        opt.step()
    ep, em, ev = _adam_by_hand(3, 0.01, 0.8, 0.9, 1e-6, 0.1, decoupled=False, amsgrad=amsgrad, maximize=maximize)
    np.testing.assert_allclose(p.detach().numpy(), ep, rtol=1e-13)
    st = opt.state[p]
    np.testing.assert_allclose(st["exp_avg"].numpy(), em, rtol=1e-13)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), ev, rtol=1e-13)
    assert st["step"].dtype is tinytorch.float32 and float(st["step"]) == 3.0 and st["step"].ndim == 0
    assert ("max_exp_avg_sq" in st) == amsgrad


def test_adamw_step_by_hand_and_defaults():
    p = _param()
    opt = optim.AdamW([p])
    g = opt.param_groups[0]
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"], g["amsgrad"]) == (1e-3, (0.9, 0.999), 1e-8, 1e-2, False)
    assert optim.Adam([_param()]).param_groups[0]["weight_decay"] == 0
    opt.step()
    ep, _, _ = _adam_by_hand(1, 1e-3, 0.9, 0.999, 1e-8, 1e-2, decoupled=True)
    np.testing.assert_allclose(p.detach().numpy(), ep, rtol=1e-13)
    # First Adam step moves every coordinate by ~lr (m_hat/sqrt(v_hat) = sign(g)).
    np.testing.assert_allclose(p.detach().numpy(), P0 * (1 - 1e-5) - 1e-3 * np.sign(G0), rtol=1e-6, atol=1e-9)


def test_step_bumps_version_and_skips_params_without_grad():
    p, q = _param(), nn.Parameter(tinytorch.ones(2))
    v0 = p._version
    opt = optim.AdamW([p, q], lr=0.1)
    opt.step()
    assert p._version > v0 and q.tolist() == [1.0, 1.0] and q not in opt.state


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("make", [
    lambda lib, ps: lib.optim.SGD(ps, lr=0.1),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda lib, ps: lib.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.3, maximize=True),
    lambda lib, ps: lib.optim.Adam(ps, lr=0.01),
    lambda lib, ps: lib.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    lambda lib, ps: lib.optim.AdamW(ps, lr=0.01),
    lambda lib, ps: lib.optim.AdamW(ps, lr=0.02, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True, maximize=True),
], ids=["sgd", "sgd-momentum-wd", "sgd-nesterov", "sgd-dampening-maximize", "adam", "adam-l2-amsgrad", "adamw",
        "adamw-amsgrad-maximize"])
def test_ten_steps_match_torch(make, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    shapes = [(4, 3), (3,)]
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    tps = [torch.tensor(a, requires_grad=True) for a in init]
    mps = [nn.Parameter(tinytorch.tensor(a)) for a in init]
    topt, mopt = make(torch, tps), make(tinytorch, mps)
    for step in range(10):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        for tp, mp, g in zip(tps, mps, grads):
            tp.grad = torch.tensor(g)
            mp.grad = tinytorch.tensor(g)
        topt.step()
        mopt.step()
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    for tp, mp in zip(tps, mps):
        np.testing.assert_allclose(mp.detach().numpy(), tp.detach().numpy(), **tol)
    tsd, msd = topt.state_dict(), mopt.state_dict()
    assert set(tsd["state"]) == set(msd["state"])
    for k in tsd["state"]:
        assert set(tsd["state"][k]) == set(msd["state"][k])
        for name, tv in tsd["state"][k].items():
            np.testing.assert_allclose(msd["state"][k][name].numpy(), tv.numpy(), **tol)
    tg = {k: v for k, v in tsd["param_groups"][0].items()}
    mg = {k: v for k, v in msd["param_groups"][0].items()}
    assert set(mg) == set(tg)
    for k in ("lr", "betas", "eps", "weight_decay", "momentum", "nesterov", "amsgrad", "maximize", "params"):
        if k in tg:
            assert mg[k] == tg[k]


# ------------------------------------------------------------------ Optimizer base

def test_param_groups_state_dict_format_and_load():
    a, b = nn.Linear(2, 2), nn.Linear(2, 1)
    opt = optim.SGD([{"params": a.parameters()}, {"params": b.parameters(), "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9  # filled from defaults
    (a(tinytorch.ones(1, 2)).sum() + b(tinytorch.ones(1, 2)).sum()).backward()
    opt.step()
    sd = opt.state_dict()
    assert list(sd) == ["state", "param_groups"]
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["param_groups"][1]["params"] == [2, 3]
    assert set(sd["state"]) == {0, 1, 2, 3} and list(sd["state"][2]) == ["momentum_buffer"]
    # A fresh optimizer over fresh parameters takes the state and hyperparameters.
    a2, b2 = nn.Linear(2, 2), nn.Linear(2, 1)
    opt2 = optim.SGD([{"params": a2.parameters()}, {"params": b2.parameters()}], lr=0.3)
    opt2.load_state_dict(sd)
    assert [g["lr"] for g in opt2.param_groups] == [0.1, 0.5]
    assert opt2.param_groups[0]["params"][0] is a2.weight
    np.testing.assert_array_equal(opt2.state[b2.weight]["momentum_buffer"].numpy(),
                                  opt.state[b.weight]["momentum_buffer"].numpy())
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        optim.SGD(a2.parameters(), lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="loaded state dict contains a parameter group that doesn't match the size"):
        optim.SGD([{"params": [a2.weight]}, {"params": b2.parameters()}], lr=0.1).load_state_dict(sd)


def test_optimizer_errors_and_zero_grad():
    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="params argument given to the optimizer should be an iterable of Tensors"):
        optim.SGD(lin.weight, lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optim.SGD([{"params": [lin.weight]}, {"params": [lin.weight]}], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([lin.weight * 2], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.Adam(lin.parameters(), lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.AdamW(lin.parameters(), betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        optim.SGD(lin.parameters(), lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="optimizer parameters need to be organized in ordered collections"):
        optim.SGD([{"params": set(lin.parameters())}], lr=0.1)
    opt = optim.SGD(lin.parameters(), lr=0.1)
    lin(tinytorch.ones(1, 2)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in lin.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in lin.parameters())
    r = repr(opt)
    assert r.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.1\n" in r and "    momentum: 0\n" in r


def test_closure_hooks_and_named_parameters():
    lin = nn.Linear(2, 1)
    opt = optim.SGD(lin.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))

    def closure():
        opt.zero_grad()
        loss = lin(tinytorch.ones(1, 2)).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert isinstance(loss, tinytorch.Tensor) and calls == ["pre", "post"]


# ------------------------------------------------------------------ schedulers

def _opt(lr=1.0):
    return optim.SGD([nn.Parameter(tinytorch.zeros(1))], lr=lr)


def _run(sched, n):
    lrs = [sched.get_last_lr()[0]]
    for _ in range(n):
        sched.optimizer.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return lrs


def test_scheduler_closed_forms():
    lrs = _run(lr_scheduler.StepLR(_opt(), step_size=3, gamma=0.5), 8)
    assert lrs == pytest.approx([0.5 ** (e // 3) for e in range(9)])
    lrs = _run(lr_scheduler.MultiStepLR(_opt(), milestones=[2, 5, 5], gamma=0.1), 7)
    assert lrs == pytest.approx([1, 1, 0.1, 0.1, 0.1, 0.001, 0.001, 0.001])
    lrs = _run(lr_scheduler.ExponentialLR(_opt(2.0), gamma=0.9), 5)
    assert lrs == pytest.approx([2.0 * 0.9 ** e for e in range(6)])
    lrs = _run(lr_scheduler.LambdaLR(_opt(0.5), lambda e: 1 / (e + 1)), 4)
    assert lrs == pytest.approx([0.5 / (e + 1) for e in range(5)])
    T, eta = 6, 0.1
    lrs = _run(lr_scheduler.CosineAnnealingLR(_opt(), T_max=T, eta_min=eta), 10)
    assert lrs == pytest.approx([eta + (1 - eta) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(11)])
    lrs = _run(lr_scheduler.LinearLR(_opt(), start_factor=0.25, end_factor=1.0, total_iters=4), 6)
    assert lrs == pytest.approx([0.25 + 0.75 * min(e, 4) / 4 for e in range(7)])


def test_sequential_warmup_then_cosine():
    opt = _opt(1.0)
    warm = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    seq = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
    lrs = _run(seq, 8)
    expected = [0.1 + 0.9 * e / 3 for e in range(3)] + [(1 + math.cos(math.pi * k / 5)) / 2 for k in range(6)]
    assert lrs == pytest.approx(expected)
    assert opt.param_groups[0]["lr"] == pytest.approx(expected[-1])


def test_scheduler_state_dict_resume():
    opt = _opt()
    s = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    _run(s, 4)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    opt2 = _opt()
    s2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    assert _run(s2, 3) == pytest.approx(_run(s, 3))


def test_scheduler_warns_when_stepped_before_optimizer():
    s = lr_scheduler.StepLR(_opt(), step_size=1)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        s.step()
    s2 = lr_scheduler.StepLR(_opt(), step_size=1)
    s2.optimizer.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()


@pytest.mark.parametrize("make", [
    lambda L, o: L.StepLR(o, step_size=3, gamma=0.5),
    lambda L, o: L.MultiStepLR(o, milestones=[2, 4, 4, 9], gamma=0.3),
    lambda L, o: L.ExponentialLR(o, gamma=0.93),
    lambda L, o: L.LambdaLR(o, lambda e: 0.95 ** e + 0.01 * e),
    lambda L, o: L.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    lambda L, o: L.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6),
    lambda L, o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.01, total_iters=4),
                                    L.CosineAnnealingLR(o, T_max=12, eta_min=1e-4)], milestones=[4]),
    lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9),
    lambda L, o: L.ConstantLR(o, factor=0.5, total_iters=4),
    lambda L, o: L.PolynomialLR(o, total_iters=8, power=2.0),
], ids=["step", "multistep", "exponential", "lambda", "cosine", "linear", "warmup-cosine", "multiplicative",
        "constant", "polynomial"])
def test_schedulers_match_torch(make):
    torch = pytest.importorskip("torch")
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.7)
    mopt = optim.SGD([nn.Parameter(tinytorch.zeros(1))], lr=0.7)
    ts, ms = make(torch.optim.lr_scheduler, topt), make(lr_scheduler, mopt)
    for _ in range(20):
        assert ms.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        assert mopt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)
        topt.step()
        mopt.step()
        ts.step()
        ms.step()


def test_step_with_epoch_uses_closed_form_and_warns():
    s = lr_scheduler.StepLR(_opt(1.0), step_size=2, gamma=0.5)
    s.optimizer.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        s.step(5)
    assert s.get_last_lr() == [0.25] and s.last_epoch == 5


def test_lambda_scheduler_state_dict_saves_callable_objects_only():
    class Warm:
        def __init__(self):
            self.k = 4

        def __call__(self, e):
            return min(1.0, (e + 1) / self.k)
    opt = optim.SGD([{"params": [nn.Parameter(tinytorch.zeros(1))]}, {"params": [nn.Parameter(tinytorch.zeros(1))]}],
                    lr=1.0)
    s = lr_scheduler.LambdaLR(opt, [Warm(), lambda e: 1.0])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"k": 4}, None]
    w2 = Warm()
    w2.k = 1
    s2 = lr_scheduler.LambdaLR(opt, [w2, lambda e: 1.0])
    s2.load_state_dict(sd)
    assert w2.k == 4
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])
