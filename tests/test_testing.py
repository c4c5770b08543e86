"""torch.testing: assert_close's tolerances, comparisons of numbers/sequences/mappings and its mismatch messages
(checked word for word against PyTorch when it is importable), and make_tensor's ranges, options and errors."""
import importlib.util
import math
import re

import numpy as np
import pytest

import tinytorch
from tinytorch.testing import assert_close, make_tensor

torch_only = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def _message(fn) -> tuple:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the test compares whatever was raised)
        return type(e).__name__, str(e)
    return None, None


# ------------------------------------------------------------------ assert_close

def test_close_values_pass_with_the_default_tolerances_of_each_dtype():
    assert_close(tinytorch.tensor([1.0, 2.0]), tinytorch.tensor([1.0, 2.0]))
    assert_close(tinytorch.tensor([1.0, 100.0]), tinytorch.tensor([1.0 + 9e-6, 100.0 * (1 + 1e-6)]))
    with pytest.raises(AssertionError):  # float32: atol 1e-5
        assert_close(tinytorch.tensor([0.0]), tinytorch.tensor([2e-5]))
    f64 = tinytorch.float64
    assert_close(tinytorch.tensor([0.0], dtype=f64), tinytorch.tensor([5e-8], dtype=f64))
    with pytest.raises(AssertionError):  # float64: atol 1e-7
        assert_close(tinytorch.tensor([0.0], dtype=f64), tinytorch.tensor([5e-7], dtype=f64))
    assert_close(tinytorch.tensor([1.0], dtype=tinytorch.float16), tinytorch.tensor([1.0009], dtype=tinytorch.float16))
    assert_close(tinytorch.tensor([1.0], dtype=tinytorch.bfloat16), tinytorch.tensor([1.0078125],
                                                                                     dtype=tinytorch.bfloat16))
    with pytest.raises(AssertionError, match="Tensor-likes are not equal!"):  # integers compare exactly
        assert_close(tinytorch.tensor([1, 2]), tinytorch.tensor([1, 3]))
    assert_close(tinytorch.tensor([1, 2]), tinytorch.tensor([1, 3]), rtol=0, atol=1)
    assert_close(tinytorch.tensor([1.0, 2.0]), tinytorch.tensor([1.0, 3.0]), rtol=0.5, atol=0.0)
    assert_close(tinytorch.tensor([[True, False]]), tinytorch.tensor([[True, False]]))
    assert_close(tinytorch.tensor([1 + 1j]), tinytorch.tensor([1 + 1j + 1e-7]))
    assert_close(tinytorch.zeros(0), tinytorch.zeros(0))
    assert_close(tinytorch.tensor([math.inf, -math.inf]), tinytorch.tensor([math.inf, -math.inf]))
    with pytest.raises(AssertionError):  # an infinity is close only to itself
        assert_close(tinytorch.tensor([math.inf]), tinytorch.tensor([-math.inf]))


def test_the_mismatch_message_names_the_count_and_the_greatest_differences():
    with pytest.raises(AssertionError) as info:
        assert_close(tinytorch.tensor([1.0, 2.0, 3.0, 4.0]), tinytorch.tensor([1.0, 2.5, 3.0, 4.0]))
    assert str(info.value) == ("Tensor-likes are not close!\n\n"
                               "Mismatched elements: 1 / 4 (25.0%)\n"
                               "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
                               "Greatest relative difference: 0.20000000298023224 at index (1,) "
                               "(up to 1.3e-06 allowed)")
    with pytest.raises(AssertionError) as info:
        assert_close(tinytorch.tensor([[1.0, 2.0], [0.0, 0.1]], dtype=tinytorch.float64),
                     tinytorch.tensor([[1.0, 3.0], [0.0, 0.0]], dtype=tinytorch.float64))
    assert str(info.value) == ("Tensor-likes are not close!\n\n"
                               "Mismatched elements: 2 / 4 (50.0%)\n"
                               "Greatest absolute difference: 1.0 at index (0, 1) (up to 1e-07 allowed)\n"
                               "Greatest relative difference: inf at index (1, 1) (up to 1e-07 allowed)")
    with pytest.raises(AssertionError) as info:
        assert_close(tinytorch.tensor([1, 2, 3]), tinytorch.tensor([1, 5, 3]))
    assert str(info.value) == ("Tensor-likes are not equal!\n\n"
                               "Mismatched elements: 1 / 3 (33.3%)\n"
                               "Greatest absolute difference: 3 at index (1,)\n"
                               "Greatest relative difference: 0.6000000238418579 at index (1,)")
    with pytest.raises(AssertionError) as info:  # 0-d tensors read as scalars
        assert_close(tinytorch.tensor(1.0), tinytorch.tensor(2.0))
    assert str(info.value) == ("Scalars are not close!\n\nExpected 2.0 but got 1.0.\n"
                               "Absolute difference: 1.0 (up to 1e-05 allowed)\n"
                               "Relative difference: 0.5 (up to 1.3e-06 allowed)")
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: nan at index \(0,\)"):
        assert_close(tinytorch.tensor([math.nan]), tinytorch.tensor([math.nan]))
    assert_close(tinytorch.tensor([math.nan, 1.0]), tinytorch.tensor([math.nan, 1.0]), equal_nan=True)


def test_attribute_mismatches():
    a = tinytorch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError, match=re.escape("The values for attribute 'shape' do not match: "
                                                       "torch.Size([2]) != torch.Size([1, 2]).")):
        assert_close(a, a.reshape(1, 2))
    with pytest.raises(AssertionError, match=re.escape("The values for attribute 'dtype' do not match: "
                                                       "torch.float32 != torch.float64.")):
        assert_close(a, a.double())
    assert_close(a, a.double(), check_dtype=False)  # promoted to a common dtype, then compared
    assert_close(tinytorch.tensor([1, 2]), tinytorch.tensor([1.0, 2.0]), check_dtype=False)
    with pytest.raises(AssertionError, match=r"Tensor-likes are not close"):
        assert_close(a, tinytorch.tensor([1.0, 2.5], dtype=tinytorch.float64), check_dtype=False)
    b = tinytorch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_close(b.t(), b.t().contiguous())
    with pytest.raises(AssertionError, match=re.escape("The values for attribute 'stride()' do not match: "
                                                       "(1, 2) != (2, 1).")):
        assert_close(b.t(), b.t().contiguous(), check_stride=True)


def test_numbers_none_and_booleans():
    assert_close(1.0, 1.0 + 1e-9)
    assert_close(2, 2)
    assert_close(1 + 2j, 1 + 2j)
    assert_close(np.float32(1.0), 1.0)  # NumPy numbers become Python numbers
    with pytest.raises(AssertionError, match=re.escape("The (d)types do not match: <class 'float'> != <class 'int'>.")):
        assert_close(1.0, 1)
    assert_close(1.0, 1, check_dtype=False)
    with pytest.raises(AssertionError) as info:
        assert_close(1.0, 1.5)
    assert str(info.value) == ("Scalars are not close!\n\nExpected 1.5 but got 1.0.\n"
                               "Absolute difference: 0.5 (up to 1e-07 allowed)\n"
                               "Relative difference: 0.3333333333333333 (up to 1e-07 allowed)")
    assert_close(math.nan, math.nan, equal_nan=True)
    with pytest.raises(AssertionError):
        assert_close(math.nan, math.nan)
    assert_close(None, None)
    with pytest.raises(AssertionError, match="None mismatch: None is not 1"):
        assert_close(None, 1)
    assert_close(True, True)
    with pytest.raises(AssertionError, match="Booleans mismatch: True is not False"):
        assert_close(True, np.bool_(False))


def test_sequences_and_mappings_are_compared_elementwise():
    a = {"w": [tinytorch.tensor([1.0, 0.0]), 2], "b": (tinytorch.tensor(3.0),)}
    assert_close(a, {"w": [tinytorch.tensor([1.0, 0.0]), 2], "b": [tinytorch.tensor(3.0)]})
    with pytest.raises(AssertionError) as info:
        assert_close(a, {"w": [tinytorch.tensor([1.0, 1e-3]), 2], "b": [tinytorch.tensor(3.0)]})
    assert str(info.value).endswith("\n\nThe failure occurred for item ['w'][0]")
    assert "Mismatched elements: 1 / 2 (50.0%)" in str(info.value)
    with pytest.raises(AssertionError, match="The length of the sequences mismatch: 2 != 3"):
        assert_close([1, 2], [1, 2, 3])
    with pytest.raises(AssertionError, match=re.escape("The keys of the mappings do not match:\n"
                                                       "Missing keys in the actual mapping: ['c']\n"
                                                       "Additional keys in the actual mapping: ['a']")):
        assert_close({"a": 1, "b": 2}, {"b": 2, "c": 1})
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0]))  # arrays compare as tensors
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.1]))


def test_inputs_that_cannot_be_compared_and_bad_options():
    t = tinytorch.tensor([1.0])
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type "
                                        "<class 'tinytorch._tensor.Tensor'> and <class 'float'>."):
        assert_close(t, 1.0)
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(t.numpy(), t)
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close("a", "a")
    assert_close(tinytorch.nn.Parameter(t.clone()), t)
    with pytest.raises(TypeError, match="<class 'tinytorch.nn.parameter.Parameter'> and "
                                        "<class 'tinytorch._tensor.Tensor'>"):
        assert_close(tinytorch.nn.Parameter(t.clone()), t, allow_subclasses=False)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                                         "atol."):
        assert_close(t, t, rtol=0.1)
    with pytest.raises(ValueError, match="but got no rtol"):
        assert_close(t, t, atol=0.1)


def test_custom_messages():
    a, b = tinytorch.tensor([1.0, 2.0]), tinytorch.tensor([1.0, 3.0])
    with pytest.raises(AssertionError) as info:
        assert_close(a, b, msg="Argh, the tensors are not close!")
    assert str(info.value) == "Argh, the tensors are not close!"
    with pytest.raises(AssertionError) as info:
        assert_close(a, b, msg=lambda m: f"Header\n\n{m}\n\nFooter")
    assert str(info.value).startswith("Header\n\nTensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)")
    assert str(info.value).endswith("\n\nFooter")


@torch_only
def test_assert_close_messages_match_pytorch():
    import torch
    cases = [
        lambda m: m.testing.assert_close(m.tensor([1.0, 2.0, 3.0, 4.0]), m.tensor([1.0, 2.5, 3.0, 4.0])),
        lambda m: m.testing.assert_close(m.tensor([1, 2, 3]), m.tensor([1, 5, 3])),
        lambda m: m.testing.assert_close(m.tensor(1.0), m.tensor(2.0)),
        lambda m: m.testing.assert_close(m.tensor([True, False]), m.tensor([True, True])),
        lambda m: m.testing.assert_close(m.tensor([[1.0, 2.0], [0.0, 0.1]], dtype=m.float16),
                                         m.tensor([[1.0, 3.0], [0.0, 0.0]], dtype=m.float16)),
        lambda m: m.testing.assert_close(m.tensor([1.0, 1.1], dtype=m.bfloat16), m.tensor([1.0, 1.3],
                                                                                         dtype=m.bfloat16)),
        lambda m: m.testing.assert_close(m.tensor([1 + 1j]), m.tensor([1 + 2j])),
        lambda m: m.testing.assert_close(m.tensor([math.nan, 2.0]), m.tensor([1.0, 2.0])),
        lambda m: m.testing.assert_close(m.tensor([3, 0], dtype=m.uint8), m.tensor([0, 3], dtype=m.uint8)),
        lambda m: m.testing.assert_close({"a": [m.tensor([1.0, 0.0])]}, {"a": [m.tensor([1.0, 1e-3])]}),
        lambda m: m.testing.assert_close(m.tensor([1.0, 2.0]), m.tensor([1.5, 2.0], dtype=m.float64),
                                         check_dtype=False),
        lambda m: m.testing.assert_close(m.tensor([1.0, 2.0]), m.tensor([1.0, 3.0]), rtol=0.1, atol=0.2),
        lambda m: m.testing.assert_close(1.0, 1),
        lambda m: m.testing.assert_close(1, 2),
        lambda m: m.testing.assert_close(1.0, 1.1, rtol=0.0, atol=0.0),
        lambda m: m.testing.assert_close([1, 2], [1, 2, 3]),
        lambda m: m.testing.assert_close({"a": 1}, {"b": 1}),
        lambda m: m.testing.assert_close(m.tensor([1.0]), m.tensor([1.0]), rtol=1e-3),
        lambda m: m.testing.assert_close(m.zeros(2, 3)[:, 0], m.zeros(2)),
    ]
    for case in cases:
        got, want = _message(lambda: case(tinytorch)), _message(lambda: case(torch))
        assert got[0] == want[0]
        assert got[1] == (want[1] if want[1] else None)


# ------------------------------------------------------------------ make_tensor

def test_make_tensor_shapes_dtypes_and_default_ranges():
    for shape in ((2, 3), ((2, 3),), ([2, 3],), (tinytorch.Size([2, 3]),)):
        assert make_tensor(*shape, dtype=tinytorch.float32, device="cpu").shape == (2, 3)
    assert make_tensor(dtype=tinytorch.float32, device="cpu").shape == ()
    assert make_tensor(0, 4, dtype=tinytorch.float32, device="cpu").shape == (0, 4)
    ranges = {tinytorch.float32: (-9, 9), tinytorch.float64: (-9, 9), tinytorch.float16: (-9, 9),
              tinytorch.bfloat16: (-9, 9), tinytorch.int64: (-9, 9), tinytorch.int8: (-9, 9),
              tinytorch.int32: (-9, 9), tinytorch.uint8: (0, 9), tinytorch.bool: (0, 1)}
    tinytorch.manual_seed(0)
    for dtype, (lo, hi) in ranges.items():
        x = make_tensor(2000, dtype=dtype, device="cpu")
        assert x.dtype == dtype and x.device.type == "cpu"
        v = x.double().numpy() if dtype is not tinytorch.bool else x.numpy().astype(float)
        assert v.min() >= lo and v.max() <= hi
        if not dtype.is_floating_point:
            assert v.min() == lo and v.max() == hi  # integers: [low, high) with every value hit
        else:
            assert v.min() < lo + 0.5 and v.max() > hi - 0.5
    z = make_tensor(500, dtype=tinytorch.complex64, device="cpu", low=-1, high=1)
    assert z.dtype == tinytorch.complex64
    assert np.abs(z.real.numpy()).max() <= 1 and np.abs(z.imag.numpy()).max() <= 1 and z.imag.abs().sum() > 0


def test_make_tensor_options():
    x = make_tensor(1000, dtype=tinytorch.float64, device="cpu", low=2.0, high=2.5)
    assert x.min().item() >= 2.0 and x.max().item() < 2.5
    i = make_tensor(1000, dtype=tinytorch.int64, device="cpu", low=-1.5, high=1.5)  # bounds are ceiled
    assert set(i.tolist()) == {-1, 0, 1}
    u = make_tensor(100, dtype=tinytorch.uint8, device="cpu", low=-5, high=3)  # clamped to the dtype's range
    assert u.min().item() >= 0 and u.max().item() <= 2
    big = make_tensor(100, dtype=tinytorch.float32, device="cpu", low=-1e39, high=1e39)
    assert np.isfinite(big.numpy()).all() and big.abs().max().item() > 1e37
    e = make_tensor(2000, dtype=tinytorch.int8, device="cpu", low=-1, high=1, exclude_zero=True)
    assert set(e.tolist()) == {-1, 1}
    f = make_tensor(2000, dtype=tinytorch.float16, device="cpu", low=0, high=1e-3, exclude_zero=True)
    assert (f != 0).all()
    n = make_tensor(3, 4, dtype=tinytorch.float32, device="cpu", noncontiguous=True)
    assert n.shape == (3, 4) and not n.is_contiguous()
    assert make_tensor(1, dtype=tinytorch.float32, device="cpu", noncontiguous=True).is_contiguous()
    g = make_tensor(3, dtype=tinytorch.float32, device="cpu", requires_grad=True)
    assert g.requires_grad and g.is_leaf
    assert not make_tensor(3, dtype=tinytorch.float32, device="cpu").requires_grad
    tinytorch.manual_seed(7)
    a = make_tensor(5, dtype=tinytorch.float32, device="cpu")
    tinytorch.manual_seed(7)
    assert tinytorch.equal(a, make_tensor(5, dtype=tinytorch.float32, device="cpu"))
    with pytest.warns(FutureWarning, match="Passing `low==high`"):
        make_tensor(3, dtype=tinytorch.float32, device="cpu", low=1.0, high=1.0)


def test_make_tensor_errors():
    with pytest.raises(ValueError, match=r"`low` must be less than `high`, but got 2 >= 1"):
        make_tensor(3, dtype=tinytorch.float32, device="cpu", low=2, high=1)
    with pytest.raises(ValueError, match="`low` and `high` cannot be NaN"):
        make_tensor(3, dtype=tinytorch.float32, device="cpu", low=math.nan)
    with pytest.raises(ValueError, match=r"The value interval specified by `low` and `high` is \[300, 400\), but "
                                         r"torch.uint8 only supports \[0, 256\)"):
        make_tensor(3, dtype=tinytorch.uint8, device="cpu", low=300, high=400)
    with pytest.raises(ValueError, match="`requires_grad=True` is not supported for boolean and integral dtypes"):
        make_tensor(3, dtype=tinytorch.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="`noncontiguous` and `memory_format` are mutually exclusive"):
        make_tensor(3, dtype=tinytorch.float32, device="cpu", noncontiguous=True, memory_format=object())
    with pytest.raises(TypeError, match="The requested dtype 'float32' is not supported"):
        make_tensor(3, dtype="float32", device="cpu")
    with pytest.raises(TypeError):
        make_tensor(3, dtype=tinytorch.float32)  # dtype and device are required keywords


@torch_only
def test_make_tensor_matches_pytorchs_signature_and_errors():
    import inspect

    import torch
    mine = inspect.signature(make_tensor).parameters
    theirs = inspect.signature(torch.testing.make_tensor).parameters
    assert list(mine) == list(theirs)
    assert all(mine[k].kind == theirs[k].kind and mine[k].default == theirs[k].default for k in mine)
    theirs = inspect.signature(torch.testing.assert_close).parameters
    mine = inspect.signature(assert_close).parameters
    assert list(mine) == list(theirs)
    assert all(mine[k].kind == theirs[k].kind and mine[k].default == theirs[k].default for k in mine)
    for kw in ({"low": 2, "high": 1}, {"low": math.nan}, {"dtype": "int64", "requires_grad": True},
               {"dtype": "uint8", "low": 300, "high": 400}):
        kw = dict(kw)
        name = kw.pop("dtype", "float32")
        got = _message(lambda: make_tensor(3, dtype=getattr(tinytorch, name), device="cpu", **kw))
        want = _message(lambda: torch.testing.make_tensor(3, dtype=getattr(torch, name), device="cpu", **kw))
        assert got == want
