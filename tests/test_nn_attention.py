"""tinytorch.nn.attention: SDPBackend / sdpa_kernel switches, and flex_attention with BlockMask against a
float64 NumPy reference, gradcheck and PyTorch."""
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.attention
import tinytorch.nn.attention.flex_attention as FA
from tinytorch.backends import cuda as backends_cuda
from tinytorch.nn.attention import SDPBackend, sdpa_kernel


# ----------------------------------------------------------------------------------------------- sdpa_kernel

def _enabled():
    return (backends_cuda.flash_sdp_enabled(), backends_cuda.mem_efficient_sdp_enabled(),
            backends_cuda.math_sdp_enabled(), backends_cuda.cudnn_sdp_enabled())


def test_sdpbackend_members():
    assert {m.name: int(m) for m in SDPBackend} == {"ERROR": -1, "MATH": 0, "FLASH_ATTENTION": 1,
                                                    "EFFICIENT_ATTENTION": 2, "CUDNN_ATTENTION": 3,
                                                    "OVERRIDEABLE": 4}
    assert repr(SDPBackend.MATH) == "<SDPBackend.MATH: 0>" and SDPBackend(1) is SDPBackend.FLASH_ATTENTION


def test_sdpa_kernel_sets_backends_cuda_switches_and_restores():
    assert _enabled() == (True, True, True, True)
    with sdpa_kernel(SDPBackend.MATH) as result:
        assert result == {}
        assert _enabled() == (False, False, True, False)
        assert tinytorch.nn.attention._cur_sdpa_kernel_backends() == [SDPBackend.MATH]
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            assert _enabled() == (True, True, False, False)
        assert _enabled() == (False, False, True, False)
    assert _enabled() == (True, True, True, True)
    assert tinytorch.nn.attention._cur_sdpa_kernel_backends() == [
        SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
        SDPBackend.OVERRIDEABLE]


def test_sdpa_kernel_restores_after_exception_and_works_as_decorator():
    with pytest.raises(KeyError):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            raise KeyError
    assert _enabled() == (True, True, True, True)

    @sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)
    def inside():
        return _enabled()

    assert inside() == (False, True, False, False)
    assert _enabled() == (True, True, True, True)


def test_sdpa_kernel_priority_order_is_set_and_restored():
    cur = tinytorch.nn.attention._cur_sdpa_kernel_backends
    default = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
               SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE]
    assert cur(with_priority=True) == default
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH], set_priority=True):
        assert cur(with_priority=True) == [SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]
        assert tinytorch.nn.attention._priority_order == [3, 0, 1, 2, 4]
    assert cur(with_priority=True) == default


@pytest.mark.parametrize("bad", ["math", (SDPBackend.MATH,), 0])
def test_sdpa_kernel_rejects_non_backend_arguments(bad):
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend or a list of SDPBackend "
                                             f"instances, got {type(bad).__name__}"):
        with sdpa_kernel(bad):
            pass
    assert _enabled() == (True, True, True, True)


def test_sdpa_still_computes_inside_sdpa_kernel():
    tinytorch.manual_seed(0)
    q, k, v = (tinytorch.randn(1, 2, 3, 4, dtype=tinytorch.float64) for _ in range(3))
    ref = tinytorch.nn.functional.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.MATH):
        np.testing.assert_allclose(tinytorch.nn.functional.scaled_dot_product_attention(q, k, v).numpy(), ref.numpy())


# ----------------------------------------------------------------------------------------------- flex_attention

def _np_attention(q, k, v, score=None, mask=None, scale=None):
    """Dense float64 reference: softmax over score(q k^T * scale) with `mask` (False = hidden); rows with nothing
    visible give 0 and lse -inf."""
    B, H, L, E = q.shape
    S = k.shape[2]
    scale = 1 / np.sqrt(E) if scale is None else scale
    s = np.einsum("bhle,bhse->bhls", q, k) * scale
    if score is not None:
        grids = np.ix_(range(B), range(H), range(L), range(S))
        s = np.broadcast_to(score(s, *grids), s.shape).astype(np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m)
    d = e.sum(-1, keepdims=True)
    p = e / np.where(d == 0, 1, d)
    lse = np.where(d[..., 0] == 0, -np.inf, np.log(np.where(d == 0, 1, d))[..., 0] + m[..., 0])
    return p @ v, lse


def _mods(lib):
    where, tanh = (np.where, np.tanh) if lib is np else (tinytorch.where, tinytorch.tanh)
    slopes = np.array([0.5, 0.25, 0.125]) if lib is np else tinytorch.tensor([0.5, 0.25, 0.125],
                                                                             dtype=tinytorch.float64)
    return {
        "causal": lambda s, b, h, q, kv: where(q >= kv, s, -np.inf),
        "relative_position": lambda s, b, h, q, kv: s + (q - kv),
        "alibi": lambda s, b, h, q, kv: s + slopes[h] * (kv - q),
        "soft_cap": lambda s, b, h, q, kv: 2.0 * tanh(s / 2.0),
        "batch_head": lambda s, b, h, q, kv: s * (b + 1) - h,
    }


def _qkv(B=2, H=3, L=5, S=6, E=4, Ev=3, Hkv=None, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, L, E)), rng.standard_normal((B, Hkv or H, S, E)),
            rng.standard_normal((B, Hkv or H, S, Ev)))


def _tt(*arrays, grad=False):
    return [tinytorch.tensor(a, requires_grad=grad) for a in arrays]


@pytest.mark.parametrize("name", list(_mods(np)))
def test_score_mods_match_numpy(name):
    q, k, v = _qkv()
    ref, ref_lse = _np_attention(q, k, v, _mods(np)[name])
    out, aux = FA.flex_attention(*_tt(q, k, v), score_mod=_mods(tinytorch)[name],
                                 return_aux=FA.AuxRequest(lse=True))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(aux.lse.numpy(), ref_lse, rtol=1e-12, atol=1e-12)
    assert aux.max_scores is None and out.dtype == tinytorch.float64


def _np_masks():
    return {
        "causal": lambda b, h, q, kv: q >= kv,
        "sliding_window": lambda b, h, q, kv: np.abs(q - kv) <= 1,
        "document": lambda b, h, q, kv: (q // 2) == (kv // 3),
        "row_2_hidden": lambda b, h, q, kv: (q != 2) & (q >= kv),
        "per_head": lambda b, h, q, kv: (kv + b + h) % 3 != 0,
    }


def _tt_masks():
    return {
        "causal": lambda b, h, q, kv: q >= kv,
        "sliding_window": lambda b, h, q, kv: (q - kv).abs() <= 1,
        "document": lambda b, h, q, kv: (q // 2) == (kv // 3),
        "row_2_hidden": lambda b, h, q, kv: (q != 2) & (q >= kv),
        "per_head": lambda b, h, q, kv: (kv + b + h) % 3 != 0,
    }


def _dense(mask_fn, B, H, L, S):
    return np.broadcast_to(mask_fn(*np.ix_(range(B), range(H), range(L), range(S))), (B, H, L, S))


@pytest.mark.parametrize("name", list(_np_masks()))
@pytest.mark.parametrize("block", [2, (2, 4), 128])
def test_block_masks_match_numpy(name, block):
    q, k, v = _qkv(L=5, S=7)
    mask = _dense(_np_masks()[name], 2, 3, 5, 7)
    ref, ref_lse = _np_attention(q, k, v, mask=mask, scale=0.3)
    bm = FA.create_block_mask(_tt_masks()[name], 2, 3, 5, 7, device="cpu", BLOCK_SIZE=block)
    out, lse = _flex_lse(*_tt(q, k, v), block_mask=bm, scale=0.3)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.isneginf(lse.numpy()), np.isneginf(ref_lse))
    np.testing.assert_allclose(lse.numpy(), ref_lse, rtol=1e-12, atol=1e-12)


def _flex_lse(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return FA.flex_attention(*args, return_lse=True, **kwargs)


def test_hidden_rows_give_zero_output_zero_grad_and_minus_inf_lse():
    q, k, v = _qkv(B=1, H=1, L=4, S=4)
    bm = FA.create_block_mask(lambda b, h, qi, kv: (qi != 1) & (kv <= qi), None, None, 4, 4, device="cpu",
                              BLOCK_SIZE=2)
    tq, tk, tv = _tt(q, k, v, grad=True)
    out, aux = FA.flex_attention(tq, tk, tv, block_mask=bm, return_aux=FA.AuxRequest(lse=True, max_scores=True))
    assert np.all(out.detach().numpy()[0, 0, 1] == 0) and np.isneginf(aux.lse.detach().numpy()[0, 0, 1])
    assert np.isneginf(aux.max_scores.detach().numpy()[0, 0, 1])
    np.testing.assert_allclose(aux.max_scores.detach().numpy()[0, 0, 0], q[0, 0, 0] @ k[0, 0, 0] / 2, rtol=1e-12)
    out.sum().backward()
    assert np.all(tq.grad.numpy()[0, 0, 1] == 0) and np.all(np.isfinite(tk.grad.numpy()))


def test_gqa_and_broadcast_kv_batch():
    q, k, v = _qkv(B=2, H=4, Hkv=2)
    ref, _ = _np_attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), _mods(np)["relative_position"])
    out = FA.flex_attention(*_tt(q, k, v), score_mod=_mods(tinytorch)["relative_position"], enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    q, k, v = _qkv(B=2, H=2)
    k1, v1 = k[:1], v[:1]
    bm = FA.create_block_mask(lambda b, h, qi, kv: qi >= kv, 2, None, 5, 6, device="cpu", BLOCK_SIZE=2)
    ref, _ = _np_attention(q, np.repeat(k1, 2, 0), np.repeat(v1, 2, 0), mask=_dense(_np_masks()["causal"], 2, 2, 5, 6))
    np.testing.assert_allclose(FA.flex_attention(*_tt(q, k1, v1), block_mask=bm).numpy(), ref, rtol=1e-12, atol=1e-12)


def test_from_kv_blocks_structure_is_honoured():
    # Per query block, one KV block (partial, noop mask_mod) and one full block; nothing else is attended.
    q, k, v = _qkv(B=1, H=1, L=4, S=6)
    kv_num = tinytorch.tensor([[[1, 1]]], dtype=tinytorch.int32)
    kv_idx = tinytorch.tensor([[[[2, 0, 0], [0, 0, 0]]]], dtype=tinytorch.int32)
    full_num = tinytorch.tensor([[[0, 1]]], dtype=tinytorch.int32)
    full_idx = tinytorch.tensor([[[[0, 0, 0], [1, 0, 0]]]], dtype=tinytorch.int32)
    bm = FA.BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=2,
                                     mask_mod=lambda b, h, qi, kv: kv != 0)
    assert bm.shape == (1, 1, 4, 6) and bm.seq_lengths == (4, 6)
    np.testing.assert_array_equal(bm.to_dense().numpy(), [[[[0, 0, 1], [1, 1, 0]]]])
    mask = np.zeros((1, 1, 4, 6), dtype=bool)
    mask[..., :2, 4:6] = True
    mask[..., 2:4, 1:2] = True  # partial block 0: mask_mod hides kv 0
    mask[..., 2:4, 2:4] = True  # full block 1: no mask_mod
    ref, _ = _np_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(FA.flex_attention(*_tt(q, k, v), block_mask=bm).numpy(), ref, rtol=1e-12, atol=1e-12)
    # Transposed: per KV block, the query blocks that use it.
    np.testing.assert_array_equal(bm.q_num_blocks.numpy(), [[[1, 0, 1]]])
    np.testing.assert_array_equal(bm.full_q_num_blocks.numpy(), [[[0, 1, 0]]])


def test_create_block_mask_structure():
    bm = FA.create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 5, 7, device="cpu", BLOCK_SIZE=(2, 3))
    # q blocks {0,1},{2,3},{4,pad}; kv blocks {0,1,2},{3,4,5},{6,pad,pad}: a block is full when every q >= every
    # kv in it, partial when only some are; padding counts as hidden, so the last query block is never full.
    np.testing.assert_array_equal(bm.kv_num_blocks.numpy(), [[[1, 1, 2]]])
    np.testing.assert_array_equal(bm.full_kv_num_blocks.numpy(), [[[0, 1, 0]]])
    np.testing.assert_array_equal(bm.kv_indices.numpy(), [[[[0, 1, 2], [1, 0, 2], [0, 1, 2]]]])
    np.testing.assert_array_equal(bm.full_kv_indices.numpy()[..., 1, :1], [[[0]]])
    np.testing.assert_array_equal(bm.to_dense().numpy(), [[[[1, 0, 0], [1, 1, 0], [1, 1, 0]]]])
    assert bm.kv_num_blocks.dtype == tinytorch.int32 and bm.BLOCK_SIZE == (2, 3)
    assert bm.numel() == 35 and bm.sparsity() == pytest.approx(100 * (1 - 5 * 6 / 35))
    bm_all = FA.create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 5, 7, device="cpu", BLOCK_SIZE=(2, 3),
                                  separate_full_blocks=False)
    assert bm_all.full_kv_num_blocks is None
    np.testing.assert_array_equal(bm_all.kv_num_blocks.numpy(), [[[1, 2, 2]]])
    assert "BlockMask(shape=(1, 1, 5, 7), sparsity=14.29%" in str(bm) and "kv_num_blocks=torch.Size([1, 1, 3])" in \
        repr(bm)


def test_block_mask_indexing_adjust_and_to():
    bm = FA.create_block_mask(lambda b, h, q, kv: q >= kv, 4, 2, 8, 8, device="cpu", BLOCK_SIZE=2)
    assert bm[0].kv_num_blocks.shape == (1, 2, 4) and bm[0, 1].kv_indices.shape == (1, 1, 4, 4)
    assert bm[0:2, 1:2, tinytorch.tensor([1])].kv_num_blocks.shape == (2, 1, 1)
    assert bm[-1].shape == (1, 2, 8, 8)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        FA.flex_attention(*_tt(*_qkv(B=1, H=2, L=8, S=8)), block_mask=bm[0])
    small = bm._adjust(4, 4)
    assert small.shape == (4, 2, 4, 4)
    np.testing.assert_array_equal(small.to_dense().numpy()[0, 0], [[1, 0], [1, 1]])
    moved = bm.to("cpu")
    assert moved.mask_mod is bm.mask_mod and np.array_equal(moved.kv_indices.numpy(), bm.kv_indices.numpy())
    assert len(bm.as_tuple()) == 17 and len(bm.as_tuple(flatten=False)) == 15


def test_mask_combinators_and_create_mask():
    causal = lambda b, h, q, kv: q >= kv  # noqa: E731
    window = lambda b, h, q, kv: q - kv <= 1  # noqa: E731
    c, w = _dense(causal, 1, 1, 4, 4), _dense(window, 1, 1, 4, 4)
    np.testing.assert_array_equal(FA.create_mask(FA.and_masks(causal, window), 1, 1, 4, 4, "cpu").numpy(), c & w)
    np.testing.assert_array_equal(FA.create_mask(FA.or_masks(causal, window), 1, 1, 4, 4, "cpu").numpy(), c | w)
    np.testing.assert_array_equal(FA.create_mask(FA.noop_mask, 2, 1, 3, 2, "cpu").numpy(), np.ones((2, 1, 3, 2)))
    score_causal = _mods(tinytorch)["causal"]
    np.testing.assert_array_equal(FA.create_mask(score_causal, None, None, 4, 4, "cpu").numpy(), c)
    assert FA.create_mask(causal, 1, 1, 4, 4, "cpu").dtype == tinytorch.bool
    with pytest.raises(RuntimeError, match="All inputs should be callable mask_mods"):
        FA.or_masks(causal, 3)
    with pytest.raises(AssertionError, match="create-block_mask requires a mask_mod function"):
        FA.create_block_mask(score_causal, 1, 1, 4, 4, device="cpu")
    with pytest.raises(AssertionError, match="Expected 4 or 5 positional args, got 2"):
        FA.create_mask(lambda a, b: a, 1, 1, 2, 2, "cpu")


def test_gradcheck_with_score_mod_and_block_mask():
    q, k, v = _qkv(B=1, H=2, L=4, S=5, E=3, Ev=2)
    bm = FA.create_block_mask(lambda b, h, qi, kv: (qi != 1) & (kv <= qi + 1), None, None, 4, 5, device="cpu",
                              BLOCK_SIZE=2)
    bias = tinytorch.tensor(np.linspace(-1, 1, 9), requires_grad=True)

    def f(q, k, v, bias):
        out, aux = FA.flex_attention(q, k, v, block_mask=bm, return_aux=FA.AuxRequest(lse=True),
                                     score_mod=lambda s, b, h, qi, kv: 2 * tinytorch.tanh(s / 2) + bias[qi - kv + 4])
        return out, tinytorch.where(tinytorch.isinf(aux.lse), 0.0, aux.lse)

    assert tinytorch.autograd.gradcheck(f, (*_tt(q, k, v, grad=True), bias))


def test_low_precision_dtypes():
    q, k, v = _qkv()
    out, lse = _flex_lse(*[t.float() for t in _tt(q, k, v)])
    assert out.dtype == tinytorch.float32 and lse.dtype == tinytorch.float32
    ref, ref_lse = _np_attention(q, k, v)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    out16, lse16 = _flex_lse(*[t.half() for t in _tt(q, k, v)])
    assert out16.dtype == tinytorch.float16 and lse16.dtype == tinytorch.float32
    np.testing.assert_allclose(out16.float().numpy(), ref, rtol=1e-2, atol=1e-2)


def test_return_lse_is_deprecated_once_and_exclusive_with_return_aux():
    q, k, v = _tt(*_qkv())
    FA._warned.discard("deprecated_return_lse")
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        FA.flex_attention(q, k, v, return_lse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FA.flex_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="Cannot specify both return_lse and return_aux"):
        FA.flex_attention(q, k, v, return_lse=True, return_aux=FA.AuxRequest(lse=True))


def test_flex_attention_input_errors():
    q, k, v = _qkv(H=4, Hkv=3)
    with pytest.raises(ValueError, match="Expect query and key/value to have the same number of heads but got Hq=4 "
                                         "and Hkv=3. Try setting enable_gqa=True for GQA."):
        FA.flex_attention(*_tt(q, k, v))
    with pytest.raises(ValueError, match="multiple of kv heads for GQA but got Hq=4 and Hkv=3"):
        FA.flex_attention(*_tt(q, k, v), enable_gqa=True)
    q, k, v = _tt(*_qkv())
    with pytest.raises(NotImplementedError, match="NYI: query, key, and value must be 4D tensors"):
        FA.flex_attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="same embedding dimension but got E=4 and E=3"):
        FA.flex_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="or non-none block_mask"):
        FA.flex_attention(q, k[:1], v[:1])
    bm = FA.create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, 8, 8, device="cpu", BLOCK_SIZE=2)
    with pytest.raises(ValueError, match="created for a larger length"):
        FA.flex_attention(q, k, v, block_mask=bm)
    bm = FA.create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, 4, 4, device="cpu", BLOCK_SIZE=2)
    with pytest.raises(ValueError, match="created for a smaller length"):
        FA.flex_attention(q, k, v, block_mask=bm)


def test_parity_with_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.attention.flex_attention as TFA
    q, k, v = _qkv(B=2, H=3, L=6, S=7)
    tq, tk, tv = (torch.tensor(a) for a in (q, k, v))
    slopes = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)
    torch_mods = {"causal": lambda s, b, h, qi, kv: torch.where(qi >= kv, s, -float("inf")),
                  "relative_position": lambda s, b, h, qi, kv: s + (qi - kv),
                  "alibi": lambda s, b, h, qi, kv: s + slopes[h] * (kv - qi),
                  "soft_cap": lambda s, b, h, qi, kv: 2.0 * torch.tanh(s / 2.0),
                  "batch_head": lambda s, b, h, qi, kv: s * (b + 1) - h}
    torch_masks = {"causal": lambda b, h, qi, kv: qi >= kv,
                   "sliding_window": lambda b, h, qi, kv: (qi - kv).abs() <= 1,
                   "document": lambda b, h, qi, kv: (qi // 2) == (kv // 3),
                   "row_2_hidden": lambda b, h, qi, kv: (qi != 2) & (qi >= kv),
                   "per_head": lambda b, h, qi, kv: (kv + b + h) % 3 != 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, mod in _mods(tinytorch).items():
            ref, ref_lse = TFA.flex_attention(tq, tk, tv, score_mod=torch_mods[name], return_lse=True)
            out, lse = FA.flex_attention(*_tt(q, k, v), score_mod=mod, return_lse=True)
            np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(lse.numpy(), ref_lse.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
        for name, mask in _tt_masks().items():
            for B, H, block in [(2, 3, (2, 3)), (None, None, 128)]:
                tbm = TFA.create_block_mask(torch_masks[name], B, H, 6, 7, device="cpu", BLOCK_SIZE=block)
                bm = FA.create_block_mask(mask, B, H, 6, 7, device="cpu", BLOCK_SIZE=block)
                for attr in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                             "q_indices", "full_q_num_blocks", "full_q_indices"):
                    np.testing.assert_array_equal(getattr(bm, attr).numpy(), getattr(tbm, attr).numpy())
                assert repr(bm) == repr(tbm) and str(bm) == str(tbm)
                ref, ref_lse = TFA.flex_attention(tq, tk, tv, block_mask=tbm, return_lse=True)
                out, lse = FA.flex_attention(*_tt(q, k, v), block_mask=bm, return_lse=True)
                np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
                np.testing.assert_allclose(lse.numpy(), ref_lse.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
