"""sort, argsort and topk: values, indices, stability, gradients, and PyTorch parity."""
import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck


def test_sort_values_indices_and_stability():
    x = tinytorch.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, -1.0, 5.0, 5.0]])
    v, i = tinytorch.sort(x, dim=1)
    assert v.tolist() == [[1.0, 1.0, 2.0, 3.0], [-1.0, 0.0, 5.0, 5.0]]
    assert i.tolist() == [[1, 3, 2, 0], [1, 0, 2, 3]]
    v, i = x.sort(dim=1, descending=True, stable=True)
    assert v.tolist() == [[3.0, 2.0, 1.0, 1.0], [5.0, 5.0, 0.0, -1.0]]
    assert i.tolist() == [[0, 2, 1, 3], [2, 3, 0, 1]]  # ties keep their order
    assert tinytorch.argsort(tinytorch.tensor([2, 0, 1], dtype=tinytorch.uint8), descending=True).tolist() == [0, 2, 1]


def test_topk_largest_and_smallest():
    x = tinytorch.tensor([4.0, 9.0, 1.0, 7.0])
    assert x.topk(2).values.tolist() == [9.0, 7.0] and x.topk(2).indices.tolist() == [1, 3]
    assert x.topk(2, largest=False).values.tolist() == [1.0, 4.0]
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(5)


@pytest.mark.parametrize("op", [lambda t: t.sort(dim=0).values, lambda t: t.sort(dim=1, descending=True).values,
                                lambda t: t.topk(2, dim=1).values, lambda t: t.topk(1, dim=0, largest=False).values])
def test_sort_gradcheck(op):
    x = tinytorch.tensor(np.random.default_rng(0).permutation(12).reshape(3, 4) / 7.0, dtype=tinytorch.float64,
                         requires_grad=True)
    assert gradcheck(op, (x,))
    assert gradgradcheck(op, (x,))


def test_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((4, 6))
    for dim in (0, 1, -1):
        tv, ti = tinytorch.tensor(a).sort(dim=dim)
        pv, pi = torch.tensor(a).sort(dim=dim)
        assert np.allclose(tv.numpy(), pv.numpy()) and ti.tolist() == pi.tolist()
        tk = tinytorch.tensor(a).topk(3, dim=dim)
        pk = torch.tensor(a).topk(3, dim=dim)
        assert np.allclose(tk.values.numpy(), pk.values.numpy()) and tk.indices.tolist() == pk.indices.tolist()


def test_descending_sort_puts_nan_first_keeps_ties_in_order_and_handles_the_int64_minimum():
    r = tinytorch.tensor([3.0, float("nan"), 1.0, 3.0, 2.0]).sort(descending=True, stable=True)
    assert np.isnan(r.values[0].item()) and r.values.tolist()[1:] == [3.0, 3.0, 2.0, 1.0]
    assert r.indices.tolist() == [1, 0, 3, 4, 2]
    r = tinytorch.tensor([-2**63, 5, 0, 5]).sort(descending=True)
    assert r.values.tolist() == [5, 5, 0, -2**63] and r.indices.tolist() == [1, 3, 2, 0]
    assert tinytorch.tensor([[True, False, True]]).argsort(dim=1, descending=True).tolist() == [[0, 2, 1]]
