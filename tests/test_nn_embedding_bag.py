"""EmbeddingBag / F.embedding_bag: finite-difference gradients in float64, and values, gradients, reprs and
errors against PyTorch for each mode, offsets layout, per_sample_weights and padding_idx."""
import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

W = np.random.default_rng(0).standard_normal((10, 3))
IDX1 = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 2])
OFF = np.array([0, 4, 4, 8])  # bag 1 is empty; bag 3 holds only padding when padding_idx=2
IDX2 = np.array([[1, 2, 4], [4, 3, 2], [2, 2, 2]])

CASES = [
    dict(mode="sum"), dict(mode="mean"), dict(mode="max"),
    dict(mode="sum", padding_idx=2), dict(mode="mean", padding_idx=2), dict(mode="max", padding_idx=2),
    dict(mode="sum", psw=True), dict(mode="sum", psw=True, padding_idx=2),
    dict(mode="mean", include_last_offset=True),
]


def _call(lib, weight, twod, case, psw_arr=None):
    kw = {k: v for k, v in case.items() if k != "psw"}
    idx = IDX2 if twod else IDX1
    inp = lib.tensor(idx)
    offsets = None
    if not twod:
        off = np.append(OFF, len(IDX1)) if case.get("include_last_offset") else OFF
        offsets = lib.tensor(off)
    if twod and kw.get("include_last_offset"):
        kw.pop("include_last_offset")
    return lib.nn.functional.embedding_bag(inp, weight, offsets, per_sample_weights=psw_arr, **kw)


@pytest.mark.parametrize("twod", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_embedding_bag_gradcheck(case, twod):
    w = tinytorch.tensor(W, requires_grad=True)
    shape = IDX2.shape if twod else IDX1.shape
    if case.get("psw"):
        p = tinytorch.tensor(np.random.default_rng(1).uniform(0.5, 2, shape), requires_grad=True)
        assert gradcheck(lambda w, p: _call(tinytorch, w, twod, case, p), (w, p))
    else:
        assert gradcheck(lambda w: _call(tinytorch, w, twod, case), (w,))


@pytest.mark.parametrize("twod", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_embedding_bag_parity(case, twod):
    torch = pytest.importorskip("torch")
    shape = IDX2.shape if twod else IDX1.shape
    p = np.random.default_rng(1).uniform(0.5, 2, shape)
    res = []
    for lib in (tinytorch, torch):
        w = lib.tensor(W, requires_grad=True)
        pt = lib.tensor(p, requires_grad=True) if case.get("psw") else None
        out = _call(lib, w, twod, case, pt)
        cot = np.random.default_rng(2).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        res.append((out.detach().numpy(), w.grad.numpy(), None if pt is None else pt.grad.numpy()))
    (o1, g1, p1), (o2, g2, p2) = res
    np.testing.assert_allclose(o1, o2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-12)
    if p1 is not None:
        np.testing.assert_allclose(p1, p2, rtol=1e-10, atol=1e-12)


def test_embedding_bag_module_and_errors():
    torch = pytest.importorskip("torch")
    for kw in (dict(mode="max", padding_idx=2), dict(max_norm=1.0, norm_type=1.0), dict(scale_grad_by_freq=True)):
        a, b = torch.nn.EmbeddingBag(10, 3, **kw), tinytorch.nn.EmbeddingBag(10, 3, **kw)
        assert repr(b) == repr(a)
        assert list(b.state_dict()) == list(a.state_dict())
    m = tinytorch.nn.EmbeddingBag(10, 3, padding_idx=2)
    assert not m.weight.detach().numpy()[2].any()
    # max_norm renormalises the looked-up rows in place, as PyTorch does
    wa = torch.tensor(W * 3)
    wb = tinytorch.tensor(W * 3)
    ra = torch.nn.functional.embedding_bag(torch.tensor(IDX1), wa, torch.tensor(OFF), max_norm=1.0)
    rb = F.embedding_bag(tinytorch.tensor(IDX1), wb, tinytorch.tensor(OFF), max_norm=1.0)
    np.testing.assert_allclose(rb.numpy(), ra.numpy(), rtol=1e-6)
    np.testing.assert_allclose(wb.numpy(), wa.numpy(), rtol=1e-6)
    cases = [
        lambda lib: lib.nn.functional.embedding_bag(lib.tensor(IDX2), lib.tensor(W), lib.tensor(OFF)),
        lambda lib: lib.nn.functional.embedding_bag(lib.tensor(IDX1), lib.tensor(W)),
        lambda lib: lib.nn.functional.embedding_bag(lib.tensor(IDX2), lib.tensor(W), mode="median"),
        lambda lib: lib.nn.functional.embedding_bag(lib.tensor(IDX2), lib.tensor(W), mode="mean",
                                                    per_sample_weights=lib.ones(3, 3, dtype=lib.float64)),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch)
        with pytest.raises(type(want.value)) as got:
            case(tinytorch)
        assert str(got.value) == str(want.value).replace("<class 'torch.", "<class 'tinytorch.")  # the class lives in tinytorch
