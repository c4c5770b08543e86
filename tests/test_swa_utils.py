"""tinytorch.optim.swa_utils: averaging functions, AveragedModel, update_bn and SWALR against closed forms,
NumPy float64 statistics and PyTorch."""
import math
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.optim.swa_utils as swa
from tinytorch import nn
from tinytorch.optim.lr_scheduler import LRScheduler


def _t(a):
    return tinytorch.tensor(np.asarray(a, dtype=np.float64))


def test_single_tensor_avg_fns_closed_forms():
    a, b = _t([1.0, -2.0]), _t([3.0, 4.0])
    np.testing.assert_allclose(swa.get_ema_avg_fn(0.9)(a, b, 5).numpy(), [0.9 * 1 + 0.1 * 3, 0.9 * -2 + 0.1 * 4])
    np.testing.assert_allclose(swa.get_swa_avg_fn()(a, b, 3).numpy(), [1 + (3 - 1) / 4, -2 + (4 + 2) / 4])
    np.testing.assert_allclose(swa.get_swa_avg_fn()(a, b, tinytorch.tensor(1)).numpy(), [2.0, 1.0])


def test_multi_avg_fns_update_in_place():
    a, b = [_t([1.0, 2.0]), _t([[0.0]])], [_t([3.0, 6.0]), _t([[8.0]])]
    swa.get_ema_multi_avg_fn(0.75)(a, b, None)
    np.testing.assert_allclose(a[0].numpy(), [1.5, 3.0])
    np.testing.assert_allclose(a[1].numpy(), [[2.0]])
    swa.get_swa_multi_avg_fn()(a, b, tinytorch.tensor(2))
    np.testing.assert_allclose(a[0].numpy(), [1.5 + 1.5 / 3, 3.0 + 3.0 / 3])


@pytest.mark.parametrize("factory", [swa.get_ema_avg_fn, swa.get_ema_multi_avg_fn])
def test_decay_out_of_range(factory):
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\] range."):
        factory(1.5)
    with pytest.raises(ValueError, match="Invalid decay value -0.1"):
        factory(-0.1)


def _net():
    tinytorch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def _param_arrays(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _perturb(model, scale):
    with tinytorch.no_grad():
        for p in model.parameters():
            p.add_(tinytorch.randn(*p.shape) * scale)


def test_swa_average_is_the_mean_of_the_snapshots():
    model = _net()
    avg = swa.AveragedModel(model)
    snapshots = []
    for step in range(4):
        _perturb(model, 0.5)
        snapshots.append(_param_arrays(model))
        avg.update_parameters(model)
    assert int(avg.n_averaged) == 4 and avg.n_averaged.dtype == tinytorch.int64
    for got, *snaps in zip(avg.module.parameters(), *snapshots):
        np.testing.assert_allclose(got.detach().numpy(), np.mean(snaps, axis=0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["avg_fn", "multi_avg_fn"])
def test_ema_matches_recurrence_and_copies_first(kind):
    model = _net()
    decay = 0.8
    fn = swa.get_ema_avg_fn(decay) if kind == "avg_fn" else swa.get_ema_multi_avg_fn(decay)
    avg = swa.AveragedModel(model, **{kind: fn})
    expected = None
    for step in range(3):
        _perturb(model, 1.0)
        cur = _param_arrays(model)
        expected = cur if expected is None else [decay * e + (1 - decay) * c for e, c in zip(expected, cur)]
        avg.update_parameters(model)
    for got, exp in zip(avg.module.parameters(), expected):
        np.testing.assert_allclose(got.detach().numpy(), exp, rtol=1e-5, atol=1e-6)


def test_buffers_are_copied_without_use_buffers_and_averaged_with_it():
    model = _net()
    plain = swa.AveragedModel(model)
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.5), use_buffers=True)
    means = []
    for step in range(2):
        model(tinytorch.randn(8, 3) + step)
        means.append(model[1].running_mean.numpy().copy())
        plain.update_parameters(model)
        ema.update_parameters(model)
    np.testing.assert_allclose(plain.module[1].running_mean.numpy(), means[-1], rtol=1e-6)
    np.testing.assert_allclose(ema.module[1].running_mean.numpy(), 0.5 * means[0] + 0.5 * means[1], rtol=1e-5)
    # The integer counter goes through the float formula and is truncated back, as in PyTorch: 0.5*1 + 0.5*2 -> 1.
    assert int(ema.module[1].num_batches_tracked) == 1 and int(plain.module[1].num_batches_tracked) == 2


def test_forward_state_dict_and_copy_independence():
    model = _net()
    avg = swa.AveragedModel(model)
    x = tinytorch.randn(5, 3)
    model.eval()
    avg.eval()
    np.testing.assert_allclose(avg(x).detach().numpy(), model(x).detach().numpy())
    _perturb(model, 1.0)
    assert not np.allclose(avg(x).detach().numpy(), model(x).detach().numpy())
    keys = list(avg.state_dict().keys())
    assert keys[0] == "n_averaged" and keys[1:] == ["module." + k for k in model.state_dict().keys()]
    fresh = swa.AveragedModel(_net())
    avg.update_parameters(model)
    fresh.load_state_dict(avg.state_dict())
    fresh.eval()
    assert int(fresh.n_averaged) == 1
    np.testing.assert_allclose(fresh(x).detach().numpy(), avg(x).detach().numpy())


def test_both_avg_fns_rejected():
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn should be provided"):
        swa.AveragedModel(_net(), avg_fn=swa.get_swa_avg_fn(), multi_avg_fn=swa.get_swa_multi_avg_fn())


def test_update_bn_recomputes_cumulative_statistics():
    model = _net()
    model[1].momentum = 0.3
    model.eval()
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((6, 3)) * (i + 1)).astype(np.float32) for i in range(3)]
    loader = [(tinytorch.tensor(b), tinytorch.zeros(6)) for b in batches[:2]] + [tinytorch.tensor(batches[2])]
    swa.update_bn(loader, model)
    with tinytorch.no_grad():
        feats = [model[0](tinytorch.tensor(b)).numpy().astype(np.float64) for b in batches]
    np.testing.assert_allclose(model[1].running_mean.numpy(), np.mean([f.mean(0) for f in feats], axis=0), rtol=1e-4)
    np.testing.assert_allclose(model[1].running_var.numpy(), np.mean([f.var(0, ddof=1) for f in feats], axis=0),
                               rtol=1e-4)
    assert model[1].momentum == 0.3 and not model.training and int(model[1].num_batches_tracked) == 3


def test_update_bn_without_batchnorm_does_not_run_the_model():
    calls = []

    class Net(nn.Module):
        def forward(self, x):
            calls.append(x)
            return x

    swa.update_bn([tinytorch.zeros(2)], Net())
    assert calls == []


def _sgd(lrs):
    params = [nn.Parameter(tinytorch.zeros(1)) for _ in lrs]
    return tinytorch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)], lr=lrs[0])


def _run(sched, opt, n):
    out = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_anneals_to_swa_lr_closed_form(strategy):
    opt = _sgd([1.0, 0.5])
    sched = swa.SWALR(opt, swa_lr=[0.1, 0.2], anneal_epochs=4, anneal_strategy=strategy)
    assert isinstance(sched, LRScheduler)
    got = _run(sched, opt, 7)

    def alpha(t):
        return t if strategy == "linear" else (1 - math.cos(math.pi * t)) / 2

    for step, lrs in enumerate(got):
        a = alpha(min(1.0, step / 4))
        np.testing.assert_allclose(lrs, [0.1 * a + 1.0 * (1 - a), 0.2 * a + 0.5 * (1 - a)], rtol=1e-12)
    assert [g["swa_lr"] for g in opt.param_groups] == [0.1, 0.2]


def test_swalr_zero_anneal_epochs_jumps_to_swa_lr():
    opt = _sgd([1.0])
    got = _run(swa.SWALR(opt, swa_lr=0.05, anneal_epochs=0), opt, 2)
    assert got == [[0.05], [0.05], [0.05]]


def test_swalr_errors():
    opt = _sgd([1.0, 1.0])
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups. swa_lr has 3 "
                                         "values, param_groups has 2."):
        swa.SWALR(opt, swa_lr=[0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got exp"):
        swa.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got -1"):
        swa.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got 2.5"):
        swa.SWALR(opt, swa_lr=0.1, anneal_epochs=2.5)


def test_swalr_state_dict_round_trip():
    opt = _sgd([1.0])
    sched = swa.SWALR(opt, swa_lr=0.1, anneal_epochs=5, anneal_strategy="linear")
    _run(sched, opt, 2)
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state and state["_anneal_strategy"] == "linear"
    opt2 = _sgd([1.0])
    other = swa.SWALR(opt2, swa_lr=0.1, anneal_epochs=5, anneal_strategy="cos")
    other.load_state_dict(state)
    assert other.anneal_func(0.5) == 0.5 and other.anneal_epochs == 5


def test_swalr_get_lr_outside_step_warns():
    opt = _sgd([1.0])
    sched = swa.SWALR(opt, swa_lr=0.1)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()


@pytest.mark.parametrize("kwargs", [dict(swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos"),
                                    dict(swa_lr=[0.3, 0.01], anneal_epochs=5, anneal_strategy="linear"),
                                    dict(swa_lr=0.2, anneal_epochs=0)])
def test_swalr_matches_torch_after_another_scheduler(kwargs):
    torch = pytest.importorskip("torch")
    import torch.optim.swa_utils as tswa

    def sequence(lib, swa_mod):
        params = [lib.nn.Parameter(lib.zeros(1)) for _ in range(2)]
        opt = lib.optim.SGD([{"params": [params[0]], "lr": 1.0}, {"params": [params[1]], "lr": 0.4}], lr=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
            lrs = []
            for _ in range(3):
                opt.step()
                first.step()
            sched = swa_mod.SWALR(opt, **kwargs)
            for _ in range(8):
                opt.step()
                sched.step()
                lrs.append(sched.get_last_lr())
        return lrs

    np.testing.assert_allclose(sequence(tinytorch, swa), sequence(torch, tswa), rtol=1e-12)


def test_averaged_model_checkpoint_loads_from_torch():
    torch = pytest.importorskip("torch")
    import torch.optim.swa_utils as tswa
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    tavg = tswa.AveragedModel(tmodel, multi_avg_fn=tswa.get_ema_multi_avg_fn(0.9), use_buffers=True)
    for _ in range(3):
        tmodel(torch.randn(8, 3))
        with torch.no_grad():
            for p in tmodel.parameters():
                p.add_(torch.randn_like(p))
        tavg.update_parameters(tmodel)
    state = {k: tinytorch.tensor(v.numpy()) for k, v in tavg.state_dict().items()}
    avg = swa.AveragedModel(_net(), multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=True)
    assert list(state) == list(avg.state_dict())
    avg.load_state_dict(state)
    avg.eval()
    tavg.eval()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(avg(tinytorch.tensor(x)).detach().numpy(), tavg(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_ema_parity_with_torch_including_integer_buffers():
    torch = pytest.importorskip("torch")
    import torch.optim.swa_utils as tswa
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model.load_state_dict({k: tinytorch.tensor(v.numpy()) for k, v in tmodel.state_dict().items()})
    for default in (True, False):
        kw = {} if default else {"multi_avg_fn": swa.get_ema_multi_avg_fn(0.7)}
        tkw = {} if default else {"multi_avg_fn": tswa.get_ema_multi_avg_fn(0.7)}
        avg = swa.AveragedModel(model, use_buffers=True, **kw)
        tavg = tswa.AveragedModel(tmodel, use_buffers=True, **tkw)
        rng = np.random.default_rng(3)
        for _ in range(3):
            x = rng.standard_normal((6, 3)).astype(np.float32)
            model(tinytorch.tensor(x))
            tmodel(torch.tensor(x))
            avg.update_parameters(model)
            tavg.update_parameters(tmodel)
        for (k, v), (tk, tv) in zip(avg.state_dict().items(), tavg.state_dict().items()):
            assert k == tk
            np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
