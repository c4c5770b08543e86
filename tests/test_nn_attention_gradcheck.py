"""F.multi_head_attention_forward against finite differences in float64 (runs without PyTorch)."""
import numpy as np
import pytest

import tinytorch


@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward_gradcheck(need_weights):
    rng = np.random.default_rng(3)

    def t(*s):
        return tinytorch.tensor(rng.standard_normal(s) * 0.5, requires_grad=True)
    q, k, v = t(3, 2, 4), t(5, 2, 4), t(5, 2, 4)
    w_in, b_in, w_out, b_out, bk, bv = t(12, 4), t(12), t(4, 4), t(4), t(1, 1, 4), t(1, 1, 4)
    kpm = tinytorch.tensor([[False, False, False, True, False], [False, True, False, False, False]])

    def f(q, k, v, w_in, b_in, w_out, b_out, bk, bv):
        out, w = tinytorch.nn.functional.multi_head_attention_forward(
            q, k, v, 4, 2, w_in, b_in, bk, bv, True, 0.0, w_out, b_out, key_padding_mask=kpm,
            need_weights=need_weights)
        return (out, w) if need_weights else out
    assert tinytorch.autograd.gradcheck(f, (q, k, v, w_in, b_in, w_out, b_out, bk, bv))
