"""The extra losses, distances and Bilinear: finite-difference gradients in float64, and values, gradients and
error messages against PyTorch."""
import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck


def _r(*shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


def _sign(*shape, seed=0):
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)


# name -> (call(F, *tensors), arrays; arrays of float dtype require grad unless listed as constant)
CASES = {
    "kl_div_batchmean": (lambda F, x, t: F.kl_div(x, t, reduction="batchmean"),
                         [np.log(_r(3, 4, seed=1, lo=0.1, hi=1)), _r(3, 4, seed=2, lo=0.05, hi=1)]),
    "kl_div_zero_target": (lambda F, x, t: F.kl_div(x, t, reduction="batchmean"),
                           [np.log(_r(3, 4, seed=1, lo=0.1, hi=1)),
                            np.r_[_r(11, seed=2, lo=0, hi=1), 0.0].reshape(3, 4)]),
    "kl_div_log_target_sum": (lambda F, x, t: F.kl_div(x, t, reduction="sum", log_target=True),
                              [_r(3, 4, seed=1), _r(3, 4, seed=2)]),
    "kl_div_none": (lambda F, x, t: F.kl_div(x, t, reduction="none"), [_r(2, 3, seed=1), _r(2, 3, seed=3, lo=0.1)]),
    "margin_ranking": (lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3),
                       [_r(6, seed=1), _r(6, seed=2), _sign(6, seed=3)]),
    "triplet": (lambda F, a, p, n: F.triplet_margin_loss(a, p, n, margin=0.7),
                [_r(4, 5, seed=1), _r(4, 5, seed=2), _r(4, 5, seed=3)]),
    "triplet_swap_p1_none": (lambda F, a, p, n: F.triplet_margin_loss(a, p, n, p=1, swap=True, reduction="none"),
                             [_r(4, 5, seed=1), _r(4, 5, seed=2), _r(4, 5, seed=3)]),
    "cosine_embedding": (lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1),
                         [_r(5, 3, seed=1), _r(5, 3, seed=2), _sign(5, seed=4)]),
    "cosine_embedding_1d_sum": (lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, reduction="sum"),
                                [_r(3, seed=1), _r(3, seed=2), np.array(-1.0)]),
    "poisson_log": (lambda F, x, t: F.poisson_nll_loss(x, t), [_r(3, 4, seed=1), _r(3, 4, seed=2, lo=0, hi=3)]),
    "poisson_full_raw": (lambda F, x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
                         [_r(3, 4, seed=1, lo=0.2, hi=2), _r(3, 4, seed=2, lo=0, hi=3)]),
    "gaussian_nll": (lambda F, x, t, v: F.gaussian_nll_loss(x, t, v), [_r(4, 3, seed=1), _r(4, 3, seed=2),
                                                                        _r(4, 3, seed=3, lo=0.1, hi=2)]),
    "gaussian_nll_full_homo": (lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction="sum"),
                               [_r(4, 3, seed=1), _r(4, 3, seed=2), _r(4, seed=3, lo=0.1, hi=2)]),
    "gaussian_nll_hetero_none": (lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, reduction="none"),
                                 [_r(4, 3, seed=1), _r(4, 3, seed=2), _r(4, 1, seed=3, lo=0.1, hi=2)]),
    "multilabel_soft_margin": (lambda F, x, t, w: F.multilabel_soft_margin_loss(x, t, weight=w),
                               [_r(3, 4, seed=1), (_r(3, 4, seed=2) > 0).astype(float), _r(4, seed=3, lo=0.5)]),
    "multilabel_soft_margin_none": (lambda F, x, t: F.multilabel_soft_margin_loss(x, t, reduction="none"),
                                    [_r(3, 4, seed=1), (_r(3, 4, seed=2) > 0).astype(float)]),
    "soft_margin": (lambda F, x, y: F.soft_margin_loss(x, y), [_r(3, 4, seed=1), _sign(3, 4, seed=2)]),
    "hinge_embedding": (lambda F, x, y: F.hinge_embedding_loss(x, y, margin=0.5),
                        [_r(3, 4, seed=1, lo=0.05), _sign(3, 4, seed=2)]),
    "multilabel_margin": (lambda F, x, t: F.multilabel_margin_loss(x, t),
                          [_r(3, 4, seed=1), np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 1, 1]])]),
    "multilabel_margin_1d_none": (lambda F, x, t: F.multilabel_margin_loss(x, t, reduction="none"),
                                  [_r(4, seed=1), np.array([2, -1, 0, 0])]),
    "triplet_with_distance": (lambda F, a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=0.5, swap=True),
                              [_r(4, 5, seed=1), _r(4, 5, seed=2), _r(4, 5, seed=3)]),
    "triplet_with_cosine_distance_none": (
        lambda F, a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y), reduction="none"),
        [_r(4, 5, seed=1), _r(4, 5, seed=2), _r(4, 5, seed=3)]),
    "multi_margin": (lambda F, x, t: F.multi_margin_loss(x, t), [_r(4, 5, seed=1), np.array([0, 4, 2, 2])]),
    "multi_margin_p2_weight_sum": (lambda F, x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=w,
                                                                          reduction="sum"),
                                   [_r(4, 5, seed=1), np.array([0, 4, 2, 2]), _r(5, seed=2, lo=0.5)]),
    "multi_margin_1d_none": (lambda F, x, t: F.multi_margin_loss(x, t, reduction="none"),
                             [_r(5, seed=1), np.array(3)]),
    "pairwise_distance": (lambda F, a, b: F.pairwise_distance(a, b), [_r(3, 4, seed=1), _r(3, 4, seed=2)]),
    "pairwise_distance_p3_keepdim": (lambda F, a, b: F.pairwise_distance(a, b, p=3, keepdim=True),
                                     [_r(3, 4, seed=1), _r(4, seed=2)]),
    "cosine_similarity": (lambda F, a, b: F.cosine_similarity(a, b), [_r(3, 4, seed=1), _r(3, 4, seed=2)]),
    "cosine_similarity_dim0_broadcast": (lambda F, a, b: F.cosine_similarity(a, b, dim=-1),
                                         [_r(3, 4, seed=1), _r(1, 4, seed=2)]),
    "bilinear": (lambda F, a, b, w, c: F.bilinear(a, b, w, c),
                 [_r(2, 3, seed=1), _r(2, 4, seed=2), _r(5, 3, 4, seed=3), _r(5, seed=4)]),
    "bilinear_nobias_3d": (lambda F, a, b, w: F.bilinear(a, b, w),
                           [_r(2, 2, 3, seed=1), _r(2, 2, 4, seed=2), _r(5, 3, 4, seed=3)]),
}


CONSTANT_TARGET = {"kl_div_zero_target", "soft_margin", "multi_margin_p2_weight_sum"}  # the last input gets no gradient (PyTorch: none or nan)


def _tensors(lib, arrays, grad=True, name=None):
    n = len(arrays) - (name in CONSTANT_TARGET)
    return [lib.tensor(a, requires_grad=grad and a.dtype.kind == "f" and i < n) for i, a in enumerate(arrays)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, arrays = CASES[name]
    ins = tuple(_tensors(tinytorch, arrays, name=name))
    assert gradcheck(lambda *a: fn(F, *a), ins)


@pytest.mark.parametrize("name", sorted(CASES))
def test_parity(name):
    torch = pytest.importorskip("torch")
    fn, arrays = CASES[name]
    res = []
    for lib in (tinytorch, torch):
        ins = _tensors(lib, arrays, name=name)
        out = fn(lib.nn.functional, *ins)
        cot = np.random.default_rng(0).standard_normal(tuple(out.shape))
        (out * lib.tensor(cot)).sum().backward()
        res.append((out.detach().numpy(), [t.grad.numpy() if t.grad is not None else None for t in ins],
                    str(out.dtype).split(".")[-1]))
    (o1, g1, d1), (o2, g2, d2) = res
    assert d1 == d2
    np.testing.assert_allclose(o1, o2, rtol=1e-7, atol=1e-9)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


MODULES = [
    ("KLDivLoss", dict(reduction="batchmean", log_target=True), 2),
    ("MarginRankingLoss", dict(margin=0.2), 3),
    ("TripletMarginLoss", dict(margin=0.5, p=1.0, swap=True), 3),
    ("CosineEmbeddingLoss", dict(margin=0.1, reduction="sum"), 3),
    ("PoissonNLLLoss", dict(log_input=True, full=True), 2),
    ("GaussianNLLLoss", dict(full=True), 3),
    ("MultiLabelSoftMarginLoss", dict(reduction="sum"), 2),
    ("SoftMarginLoss", dict(), 2),
    ("HingeEmbeddingLoss", dict(margin=2.0), 2),
    ("MultiLabelMarginLoss", dict(), 2),
    ("MultiMarginLoss", dict(p=2, margin=0.5), 2),
    ("TripletMarginWithDistanceLoss", dict(margin=0.3, swap=True), 3),
]


@pytest.mark.parametrize("cls,kw,n", MODULES)
def test_loss_modules_match_functional_and_torch(cls, kw, n):
    torch = pytest.importorskip("torch")
    a, b = _r(4, 3, seed=1), _r(4, 3, seed=2)
    arrays = {
        "MarginRankingLoss": [_r(4, seed=1), _r(4, seed=2), _sign(4, seed=3)],
        "CosineEmbeddingLoss": [a, b, _sign(4, seed=3)],
        "TripletMarginLoss": [a, b, _r(4, 3, seed=3)],
        "GaussianNLLLoss": [a, b, _r(4, 3, seed=3, lo=0.2)],
        "SoftMarginLoss": [a, _sign(4, 3, seed=3)],
        "HingeEmbeddingLoss": [a, _sign(4, 3, seed=3)],
        "MultiLabelSoftMarginLoss": [a, (b > 0).astype(float)],
        "PoissonNLLLoss": [a, _r(4, 3, seed=2, lo=0, hi=3)],
        "MultiLabelMarginLoss": [a, np.array([[0, -1, 1], [2, 1, -1], [1, 0, 2], [-1, 0, 0]])],
        "MultiMarginLoss": [a, np.array([0, 2, 1, 1])],
        "TripletMarginWithDistanceLoss": [a, b, _r(4, 3, seed=3)],
    }.get(cls, [a, b])
    ours = getattr(tinytorch.nn, cls)(**kw)(*_tensors(tinytorch, arrays, grad=False))
    ref = getattr(torch.nn, cls)(**kw)(*_tensors(torch, arrays, grad=False))
    assert repr(getattr(tinytorch.nn, cls)(**kw)) == repr(getattr(torch.nn, cls)(**kw))
    np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=1e-7)


def test_bilinear_module_parity_and_init():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Bilinear(3, 4, 5).double()
    ours = tinytorch.nn.Bilinear(3, 4, 5).double()
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert repr(ours) == repr(ref)
    assert np.abs(ours.weight.detach().numpy()).max() <= 1 / np.sqrt(3)
    ours.load_state_dict({k: tinytorch.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x1, x2 = _r(2, 3, seed=1), _r(2, 4, seed=2)
    a = ref(torch.tensor(x1), torch.tensor(x2))
    b = ours(tinytorch.tensor(x1), tinytorch.tensor(x2))
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-10)


def test_distance_modules():
    torch = pytest.importorskip("torch")
    a, b = _r(3, 4, seed=1), _r(3, 4, seed=2)
    for cls, kw in (("PairwiseDistance", dict(p=1.5, keepdim=True)), ("CosineSimilarity", dict(dim=0))):
        x = getattr(tinytorch.nn, cls)(**kw)(tinytorch.tensor(a), tinytorch.tensor(b))
        y = getattr(torch.nn, cls)(**kw)(torch.tensor(a), torch.tensor(b))
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-10)


def test_errors_match_pytorch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda m: m.nn.functional.gaussian_nll_loss(m.ones(3, 2), m.ones(3, 2), m.ones(2, 2)),
        lambda m: m.nn.functional.gaussian_nll_loss(m.ones(3, 2), m.ones(3, 2), -m.ones(3, 2)),
        lambda m: m.nn.functional.gaussian_nll_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3, 2), reduction="x"),
        lambda m: m.nn.functional.margin_ranking_loss(m.ones(3), m.ones(3), m.ones(3, 1)),
        lambda m: m.nn.TripletMarginLoss(margin=0.0),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch)
        with pytest.raises(type(want.value)) as got:
            case(tinytorch)
        assert str(got.value) == str(want.value)


def test_kl_div_mean_warns():
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(tinytorch.zeros(2, 2), tinytorch.ones(2, 2))
