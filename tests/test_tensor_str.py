"""Tensor repr/str as PyTorch prints them (_tensor_str.py) and torch.set_printoptions: literal expected strings,
and the same strings as PyTorch's own when it is installed."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import _tensor_str


@pytest.fixture(autouse=True)
def _default_printoptions():
    tt.set_printoptions(profile="default")
    yield
    tt.set_printoptions(profile="default")


# What PyTorch 2.13 prints for each tensor (dtype suffixes spelt torch.*, as PyTorch's are).
LITERAL = [
    (lambda: tt.tensor([1.5, 2.25, -3.0]),
     'tensor([ 1.5000,  2.2500, -3.0000])'),
    (lambda: tt.tensor([1., 2., -3.]),
     'tensor([ 1.,  2., -3.])'),
    (lambda: tt.tensor([1.5, 2.], dtype=tt.float64),
     'tensor([1.5000, 2.0000], dtype=torch.float64)'),
    (lambda: tt.tensor([1, -20, 300]),
     'tensor([  1, -20, 300])'),
    (lambda: tt.tensor([1, 200], dtype=tt.uint8),
     'tensor([  1, 200], dtype=torch.uint8)'),
    (lambda: tt.tensor([True, False]),
     'tensor([ True, False])'),
    (lambda: tt.tensor([1 + 2j, -0.5j, 3.25 - 1j]),
     'tensor([1.0000+2.0000j, -0.0000-0.5000j, 3.2500-1.0000j])'),
    (lambda: tt.tensor([1 + 2j], dtype=tt.complex128),
     'tensor([1.+2.j], dtype=torch.complex128)'),
    (lambda: tt.tensor(3.5),
     'tensor(3.5000)'),
    (lambda: tt.tensor(3),
     'tensor(3)'),
    (lambda: tt.tensor(3.),
     'tensor(3.)'),
    (lambda: tt.tensor(False),
     'tensor(False)'),
    (lambda: tt.tensor([]),
     'tensor([])'),
    (lambda: tt.zeros(0, 3),
     'tensor([], size=(0, 3))'),
    (lambda: tt.zeros(0, dtype=tt.int64),
     'tensor([], dtype=torch.int64)'),
    (lambda: tt.zeros(2, 0, dtype=tt.bool),
     'tensor([], size=(2, 0), dtype=torch.bool)'),
    (lambda: tt.tensor([1., 2.], requires_grad=True),
     'tensor([1., 2.], requires_grad=True)'),
    (lambda: tt.tensor([1., 2.], requires_grad=True) + 1,
     'tensor([2., 3.], grad_fn=<AddBackward0>)'),
    (lambda: tt.arange(2000.),
     'tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])'),
    (lambda: tt.arange(4000.).reshape(40, 100),
     'tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.7000e+01, 9.8000e+01,\n'
     '         9.9000e+01],\n'
     '        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.9700e+02, 1.9800e+02,\n'
     '         1.9900e+02],\n'
     '        [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 2.9700e+02, 2.9800e+02,\n'
     '         2.9900e+02],\n'
     '        ...,\n'
     '        [3.7000e+03, 3.7010e+03, 3.7020e+03,  ..., 3.7970e+03, 3.7980e+03,\n'
     '         3.7990e+03],\n'
     '        [3.8000e+03, 3.8010e+03, 3.8020e+03,  ..., 3.8970e+03, 3.8980e+03,\n'
     '         3.8990e+03],\n'
     '        [3.9000e+03, 3.9010e+03, 3.9020e+03,  ..., 3.9970e+03, 3.9980e+03,\n'
     '         3.9990e+03]])'),
    (lambda: tt.tensor([1e-5, 1.0]),
     'tensor([1.0000e-05, 1.0000e+00])'),
    (lambda: tt.tensor([1e9, 1.0]),
     'tensor([1.0000e+09, 1.0000e+00])'),
    (lambda: tt.tensor([1.5, 2000.0]),
     'tensor([1.5000e+00, 2.0000e+03])'),
    (lambda: tt.tensor([-0., 0.]),
     'tensor([-0., 0.])'),
    (lambda: tt.tensor([-0., 1.5]),
     'tensor([-0.0000, 1.5000])'),
    (lambda: tt.tensor([math.nan, math.inf, -math.inf, 1.]),
     'tensor([nan, inf, -inf, 1.])'),
    (lambda: tt.tensor([[1.5, -2.], [3., 4.125]]),
     'tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.1250]])'),
    (lambda: tt.arange(40.) / 4,
     'tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000, 1.2500, 1.5000, 1.7500, 2.0000,\n'
     '        2.2500, 2.5000, 2.7500, 3.0000, 3.2500, 3.5000, 3.7500, 4.0000, 4.2500,\n'
     '        4.5000, 4.7500, 5.0000, 5.2500, 5.5000, 5.7500, 6.0000, 6.2500, 6.5000,\n'
     '        6.7500, 7.0000, 7.2500, 7.5000, 7.7500, 8.0000, 8.2500, 8.5000, 8.7500,\n'
     '        9.0000, 9.2500, 9.5000, 9.7500])'),
    (lambda: tt.nn.Parameter(tt.tensor([1., 2.])),
     'Parameter containing:\ntensor([1., 2.], requires_grad=True)'),
    (lambda: tt.tensor([1.5, 2.], dtype=tt.float16),
     'tensor([1.5000, 2.0000], dtype=torch.float16)'),
    (lambda: tt.tensor([1.5, 2.], dtype=tt.bfloat16),
     'tensor([1.5000, 2.0000], dtype=torch.bfloat16)'),
    (lambda: tt.arange(10., dtype=tt.float64, requires_grad=True) / 4 + 1,
     'tensor([1.0000, 1.2500, 1.5000, 1.7500, 2.0000, 2.2500, 2.5000, 2.7500, 3.0000,\n'
     '        3.2500], dtype=torch.float64, grad_fn=<AddBackward0>)'),
    (lambda: tt.ones(2, 3, device="meta"),
     "tensor(..., device='meta', size=(2, 3))"),
    (lambda: tt.tensor(-0.),
     'tensor(-0.)'),
    (lambda: tt.tensor([complex(1, -0.0), complex(-0.0, 0.0)]),
     'tensor([1.-0.j, -0.+0.j])'),
    (lambda: tt.arange(8).reshape(2, 2, 2),
     'tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])'),
    (lambda: tt.arange(5000),
     'tensor([   0,    1,    2,  ..., 4997, 4998, 4999])'),
]


@pytest.mark.parametrize("make,expected", LITERAL)
def test_repr_literal(make, expected):
    t = make()
    assert repr(t) == expected
    assert str(t) == expected


def test_repr_default_dtype_float64():
    """Which dtypes go unnamed follows the default dtype (and its complex counterpart)."""
    try:
        tt.set_default_dtype(tt.float64)
        assert repr(tt.tensor([1.5])) == "tensor([1.5000])"
        assert repr(tt.tensor([1.5], dtype=tt.float32)) == "tensor([1.5000], dtype=torch.float32)"
        assert repr(tt.tensor([1j], dtype=tt.complex128)) == "tensor([0.+1.j])"
        assert repr(tt.tensor([1j], dtype=tt.complex64)) == "tensor([0.+1.j], dtype=torch.complex64)"
    finally:
        tt.set_default_dtype(tt.float32)


def test_suffix_moves_to_new_line_past_linewidth():
    t = tt.arange(10.0, dtype=tt.float64, requires_grad=True) / 3 + 1
    tt.set_printoptions(sci_mode=True)
    assert repr(t) == ("tensor([1.0000e+00, 1.3333e+00, 1.6667e+00, 2.0000e+00, 2.3333e+00, 2.6667e+00,\n"
                       "        3.0000e+00, 3.3333e+00, 3.6667e+00, 4.0000e+00], dtype=torch.float64,\n"
                       "       grad_fn=<AddBackward0>)")


def test_printoptions_precision_threshold_edgeitems_linewidth():
    tt.set_printoptions(precision=2)
    assert repr(tt.tensor([1.23456])) == "tensor([1.23])"
    tt.set_printoptions(threshold=5, edgeitems=1)
    assert repr(tt.arange(10)) == "tensor([0,  ..., 9])"
    tt.set_printoptions(profile="default", linewidth=20)
    assert repr(tt.arange(8)) == "tensor([0, 1, 2, 3,\n        4, 5, 6, 7])"
    tt.set_printoptions(profile="default", edgeitems=0, threshold=5)
    assert repr(tt.arange(10)) == "tensor([...], size=(10,))"
    assert repr(tt.arange(12).reshape(6, 2)) == "tensor([...], size=(6, 2))"


def test_printoptions_sci_mode_forces_and_disables():
    tt.set_printoptions(sci_mode=True)
    assert repr(tt.tensor([1.5, 2.0])) == "tensor([1.5000e+00, 2.0000e+00])"
    tt.set_printoptions(sci_mode=False)
    assert repr(tt.tensor([1e-5, 1.0])) == "tensor([0.0000, 1.0000])"
    # as in PyTorch, any later call without sci_mode resets it to automatic
    tt.set_printoptions(precision=4)
    assert repr(tt.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"


def test_printoptions_profiles_and_get():
    tt.set_printoptions(profile="short")
    assert _tensor_str.get_printoptions() == {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80,
                                              "sci_mode": None}
    assert repr(tt.tensor([1.23456])) == "tensor([1.23])"
    assert repr(tt.arange(1001)) == "tensor([   0,    1,  ...,  999, 1000])"
    tt.set_printoptions(profile="full")
    assert _tensor_str.get_printoptions()["threshold"] == math.inf
    assert "..." not in repr(tt.arange(2000))
    tt.set_printoptions(profile="no-such-profile")  # PyTorch ignores an unknown profile
    assert _tensor_str.get_printoptions()["threshold"] == math.inf
    tt.set_printoptions(profile="default")
    with _tensor_str.printoptions(precision=1):
        assert repr(tt.tensor([1.25])) == "tensor([1.2])"
    assert repr(tt.tensor([1.25])) == "tensor([1.2500])"


def test_repr_of_cuda_names_device(device):
    if device == "cpu":
        assert "device=" not in repr(tt.ones(2, device=device))
    else:
        assert repr(tt.ones(2, device=device)) == "tensor([1., 1.], device='cuda:0')"


# ------------------------------------------------------------------ against PyTorch itself

def _torch_cases(torch):
    """(name, builder(module)) pairs: the same construction for tinytorch and torch."""
    rs = np.random.RandomState(0)
    r32 = rs.randn(5, 7).astype(np.float32)
    r_big = rs.randn(50, 70).astype(np.float32)
    c = (rs.randn(3, 9) + 1j * rs.randn(3, 9))
    return {
        "f32": lambda m: m.tensor([1.5, 2.25, -3.0]),
        "f64": lambda m: m.tensor([1.5, 2.0], dtype=m.float64),
        "i64": lambda m: m.tensor([[1, -20], [300, 4]]),
        "i16": lambda m: m.tensor([[1, -3000], [2, 4]], dtype=m.int16),
        "bool": lambda m: m.tensor([[True], [False]]),
        "c64": lambda m: m.tensor([1 + 2j, -0.5j, 3.25 - 1j]),
        "c128": lambda m: m.from_numpy(c),
        "c_sci": lambda m: m.tensor([1e-6 + 2j, 1e5 + 0j]),
        "c_large": lambda m: m.from_numpy((np.arange(1100) * (1 + 1j)).astype(np.complex64)),
        "c_nan": lambda m: m.tensor([complex(math.nan, 1), complex(1, math.inf)]),
        "zero_d": lambda m: m.tensor(2.5, dtype=m.float64, requires_grad=True),
        "zero_d_nan": lambda m: m.tensor(math.nan),
        "empty": lambda m: m.zeros(2, 0, 3, dtype=m.int32),
        "empty_rg": lambda m: m.zeros(0, requires_grad=True),
        "grad_fn": lambda m: (m.tensor([1.0, 2.0], requires_grad=True) * 2).sum(),
        "large": lambda m: m.arange(2000.0),
        "large_3d": lambda m: m.arange(6000).reshape(10, 20, 30),
        "randn": lambda m: m.from_numpy(r32.copy()),
        "randn_big": lambda m: m.from_numpy(r_big.copy()),
        "sci_edges": lambda m: m.tensor([1e8, 1.0]),
        "sci_edges2": lambda m: m.tensor([1.000001e8, 1.0]),
        "ratio_1000": lambda m: m.tensor([1.0, 1000.0]),
        "ratio_1001": lambda m: m.tensor([1.0, 1001.0]),
        "tiny": lambda m: m.tensor([1e-4, 0.1]),
        "neg_zero_sci": lambda m: m.tensor([-0.0, 1e-6, 1.0]),
        "naninf_frac": lambda m: m.tensor([math.nan, math.inf, 1.25]),
        "all_nan": lambda m: m.tensor([math.nan, math.nan]),
        "f16_big": lambda m: m.tensor([65504.0, 1e-3], dtype=m.float16),
        "bf16_rg": lambda m: m.tensor([1.5, 2.0], dtype=m.bfloat16, requires_grad=True),
        "wide_f64": lambda m: (m.arange(20.0, dtype=m.float64, requires_grad=True) * 1.5).exp(),
        "param": lambda m: m.nn.Parameter(m.ones(2, 2, dtype=m.float64)),
        "param_frozen": lambda m: m.nn.Parameter(m.tensor([1.0, 2.0]), requires_grad=False),
        "meta": lambda m: m.ones(2, 3, device="meta", dtype=m.float64, requires_grad=True),
        "noncontig": lambda m: m.arange(12.0).reshape(3, 4).t(),
    }


OPTIONS = [{}, {"precision": 2}, {"sci_mode": True}, {"sci_mode": False}, {"threshold": 5},
           {"threshold": 5, "edgeitems": 1}, {"threshold": 5, "edgeitems": 0}, {"linewidth": 30},
           {"profile": "short"}, {"profile": "full", "linewidth": 120}, {"precision": 8, "sci_mode": False},
           {"threshold": 0}, {"linewidth": 10}]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_repr_matches_torch(options):
    torch = pytest.importorskip("torch")
    cases = _torch_cases(torch)
    try:
        torch.set_printoptions(**options)
        tt.set_printoptions(**options)
        assert _tensor_str.get_printoptions() == torch._tensor_str.get_printoptions()
        for name, make in cases.items():
            assert repr(make(tt)) == repr(make(torch)), name
    finally:
        torch.set_printoptions(profile="default")
