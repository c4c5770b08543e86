"""The C++ kernels behind float32 conv2d/conv1d/conv_transpose2d (csrc/kernels/conv2d.cpp: tap kernels;
conv2d_winograd.cpp: 3x3 stride 1), built for AVX-512 and for AVX2: every test runs once per instruction set
this CPU has (the AVX2 build forced on an AVX-512 CPU). Outputs and all three gradients against the float64
NumPy route (itself gradchecked in test_conv_layers.py) over strides, dilations, paddings, kernel sizes and
channel counts that leave partial register tiles; and the kernels' own argument checks."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch._C import _cpu
from tinytorch._ops import conv as conv_ops

pytestmark = pytest.mark.skipif(not _cpu.conv2d_supported(),
                                reason="the tap kernels need an x86-64 CPU with AVX-512 or AVX2")


@pytest.fixture(autouse=True, params=_cpu.cpu_capabilities())
def capability(request):
    before = _cpu.get_cpu_capability()
    _cpu.set_cpu_capability(request.param)
    yield request.param
    _cpu.set_cpu_capability(before)


@pytest.fixture(autouse=True)
def _every_plane_size(monkeypatch):
    """The cases here are small; let the kernels take planes of any size (by default small ones go to GEMM)."""
    monkeypatch.setattr(conv_ops, "TAPS_MIN_PLANE", 0)
    monkeypatch.setattr(conv_ops, "TAPS_MIN_PLANE_WEIGHT_GRAD", 0)


def _pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    return (tinytorch.tensor(a.astype(np.float32), requires_grad=True),
            tinytorch.tensor(a, requires_grad=True))


def _close(a32, a64):
    a32, a64 = np.asarray(a32.detach().numpy()), np.asarray(a64.detach().numpy())
    assert a32.dtype == np.float32 and a32.shape == a64.shape
    np.testing.assert_allclose(a32, a64, rtol=0, atol=2e-5 * max(1.0, np.abs(a64).max()))


def _same_backward(y32, y64, leaves, seed):
    """Backpropagate one random gradient through both results; every float32 leaf's gradient matches."""
    _close(y32, y64)
    g = np.random.default_rng(seed).standard_normal(y64.shape)
    y32.backward(tinytorch.tensor(g.astype(np.float32)))
    y64.backward(tinytorch.tensor(g))
    for a, b in leaves:
        _close(a.grad, b.grad)


CASES = [  # N, C, O, H, W, kernel, stride, padding, dilation, bias
    (2, 3, 5, 9, 7, (3, 3), (1, 1), (1, 1), (1, 1), True),
    (3, 17, 13, 10, 11, (3, 3), (1, 1), (0, 0), (1, 1), False),
    (2, 8, 16, 12, 12, (3, 3), (2, 2), (1, 1), (1, 1), True),
    (1, 5, 9, 13, 9, (3, 3), (2, 2), (1, 1), (1, 1), False),  # odd sizes: phases of unequal size
    (2, 6, 7, 11, 14, (2, 3), (2, 1), (0, 1), (1, 1), True),
    (2, 4, 10, 15, 15, (5, 5), (3, 2), (2, 2), (1, 1), True),
    (2, 4, 6, 14, 13, (3, 3), (1, 1), (2, 2), (2, 2), False),
    (2, 4, 6, 14, 13, (3, 2), (2, 2), (1, 0), (2, 3), True),  # dilation with stride: empty phases
    (2, 8, 12, 10, 10, (1, 1), (2, 2), (0, 0), (1, 1), True),
    (3, 9, 11, 6, 5, (1, 1), (1, 1), (0, 0), (1, 1), True),
    (2, 3, 4, 3, 70, (1, 4), (1, 3), (0, 1), (1, 1), True),  # one row longer than a register tile
]


@pytest.mark.parametrize("N,C,O,H,W,k,s,p,d,bias", CASES)
def test_conv2d_taps_match_float64(N, C, O, H, W, k, s, p, d, bias):
    x32, x64 = _pair((N, C, H, W), 0)
    w32, w64 = _pair((O, C) + k, 1)
    b32, b64 = _pair((O,), 2) if bias else (None, None)
    assert conv_ops._taps_ok(1, 1, x32._data, w32._data, weight_grad=True)
    y32, y64 = F.conv2d(x32, w32, b32, s, p, d), F.conv2d(x64, w64, b64, s, p, d)
    _same_backward(y32, y64, [(x32, x64), (w32, w64)] + ([(b32, b64)] if bias else []), 3)


@pytest.mark.parametrize("s,p,op,d,k", [((1, 1), (1, 1), (0, 0), (1, 1), (3, 3)),
                                        ((2, 2), (1, 1), (1, 1), (1, 1), (3, 3)),
                                        ((2, 3), (0, 1), (1, 2), (1, 1), (4, 3)),
                                        ((2, 2), (0, 0), (0, 0), (1, 1), (1, 1))])
def test_conv_transpose2d_taps_match_float64(s, p, op, d, k):
    x32, x64 = _pair((2, 6, 5, 7), 4)
    w32, w64 = _pair((6, 9) + k, 5)
    b32, b64 = _pair((9,), 6)
    y32, y64 = F.conv_transpose2d(x32, w32, b32, s, p, op, 1, d), F.conv_transpose2d(x64, w64, b64, s, p, op, 1, d)
    _same_backward(y32, y64, [(x32, x64), (w32, w64), (b32, b64)], 7)


def test_conv1d_taps_match_float64():
    x32, x64 = _pair((3, 5, 40), 8)
    w32, w64 = _pair((7, 5, 3), 9)
    y32, y64 = F.conv1d(x32, w32, None, 2, 1), F.conv1d(x64, w64, None, 2, 1)
    _close(y32, y64)
    y32.sum().backward()
    y64.sum().backward()
    _close(x32.grad, x64.grad)
    _close(w32.grad, w64.grad)


def test_small_planes_go_to_the_gemm_route(monkeypatch):
    monkeypatch.setattr(conv_ops, "TAPS_MIN_PLANE", 100)
    monkeypatch.setattr(conv_ops, "TAPS_MIN_PLANE_WEIGHT_GRAD", 400)
    a = np.zeros((1, 1, 1, 1), np.float32)
    assert conv_ops._taps_ok(1, 14 * 14, a, a) and not conv_ops._taps_ok(1, 14 * 14, a, a, weight_grad=True)
    assert not conv_ops._taps_ok(1, 7 * 7, a, a) and not conv_ops._taps_ok(2, 56 * 56, a, a)
    assert not conv_ops._taps_ok(1, 56 * 56, a, a.astype(np.float64))


def test_threads_split_the_same_sums():
    """One thread and several give the same result to rounding (threads split images and channels)."""
    x = np.random.default_rng(10).standard_normal((4, 16, 20, 20)).astype(np.float32)
    w = np.random.default_rng(11).standard_normal((24, 16, 9)).astype(np.float32)
    toff = np.array([i * 20 + j for i in range(3) for j in range(3)], np.int64)
    outs = []
    for threads in (1, 3):
        out = np.empty((4, 24, 18, 18), np.float32)
        _cpu.conv2d_taps(x, 16 * 400, 400, w, toff, None, out, 20, threads=threads)
        gw = np.empty((24, 16, 9), np.float32)
        _cpu.conv2d_taps_weight_grad(x, 16 * 400, 400, out, toff, 20, gw, None, threads=threads)
        outs.append((out, gw))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-5)


def test_kernel_argument_checks():
    x = np.zeros((2, 3, 6, 6), np.float32)
    w = np.zeros((4, 3, 9), np.float32)
    toff = np.array([i * 6 + j for i in range(3) for j in range(3)], np.int64)
    out = np.empty((2, 4, 4, 4), np.float32)
    with pytest.raises(TypeError, match="expected src to be a float32 array"):
        _cpu.conv2d_taps(x.astype(np.float64), 108, 36, w, toff, None, out, 6)
    with pytest.raises(ValueError, match="outside the source array"):
        _cpu.conv2d_taps(x, 108, 36, w, toff + 3, None, out, 6)  # the last tap would read past the end
    with pytest.raises(ValueError, match="one offset per tap"):
        _cpu.conv2d_taps(x, 108, 36, w, toff[:4], None, out, 6)
    with pytest.raises(ValueError, match="one bias per output channel"):
        _cpu.conv2d_taps(x, 108, 36, w, toff, np.zeros(3, np.float32), out, 6)
    with pytest.raises(ValueError, match="C-contiguous"):
        _cpu.conv2d_taps(x, 108, 36, w, toff, None, np.empty((2, 4, 4, 8), np.float32)[..., ::2], 6)
    with pytest.raises(ValueError, match="grad_weight"):
        _cpu.conv2d_taps_weight_grad(x, 108, 36, out, toff, 6, np.empty((5, 3, 9), np.float32), None)
    with pytest.raises(ValueError, match="multiples of 8"):  # 4 outputs in 2 groups: tiles would span groups
        _cpu.conv2d_taps(x, 108, 36, w, toff, None, out, 6, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("s,pads", [((2, 2), (1, 1, 1, 1)), ((3, 2), (0, 2, 2, 0)), ((2, 3), (2, 0, 0, 1))])
def test_stride_phases_split_and_merge(dtype, s, pads):
    """conv2d_phases against slicing the zero-padded image: the split, and the merge back (with the crop)."""
    x = np.random.default_rng(12).standard_normal((2, 3, 7, 8)).astype(dtype)
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    Hq, Wq = -(-xp.shape[2] // s[0]), -(-xp.shape[3] // s[1])
    P = np.full((s[0], s[1], 2, 3, Hq, Wq), np.nan, dtype)
    _cpu.conv2d_phases(x, P, pads[0], pads[2], False)
    for a in range(s[0]):
        for b in range(s[1]):
            ph = xp[:, :, a::s[0], b::s[1]]
            np.testing.assert_array_equal(P[a, b, :, :, :ph.shape[2], :ph.shape[3]], ph)
            assert not P[a, b, :, :, ph.shape[2]:].any() and not P[a, b, :, :, :, ph.shape[3]:].any()
    back = np.empty_like(x)
    _cpu.conv2d_phases(back, P, pads[0], pads[2], True)
    np.testing.assert_array_equal(back, x)
    with pytest.raises(ValueError, match="do not cover the padded image"):
        _cpu.conv2d_phases(x, np.empty(P.shape[:4] + (2, Wq), dtype), pads[0], pads[2], False)


@pytest.mark.parametrize("N,C,O,Hp,Wp", [(1, 1, 1, 3, 3), (2, 3, 5, 9, 11), (2, 17, 13, 12, 37), (3, 5, 9, 36, 35)])
def test_winograd_matches_the_direct_taps(N, C, O, Hp, Wp):
    """Odd and even planes, partial tiles, tile rows longer than a vector, channel counts off the tile."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((N, C, Hp, Wp)).astype(np.float32)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    win, ref = np.empty((N, O, Hp - 2, Wp - 2), np.float32), np.empty((N, O, Hp - 2, Wp - 2), np.float32)
    _cpu.conv2d_winograd(x, w, b, win)
    toff = np.array([i * Wp + j for i in range(3) for j in range(3)], np.int64)
    _cpu.conv2d_taps(x, C * Hp * Wp, Hp * Wp, w.reshape(O, C, 9), toff, b, ref, Wp)
    np.testing.assert_allclose(win, ref, rtol=0, atol=1e-5 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("N,C,O,Hp,Wp", [(1, 1, 1, 3, 3), (2, 3, 5, 9, 11), (2, 17, 70, 12, 37), (3, 5, 9, 36, 35)])
def test_winograd_weight_grad_matches_the_direct_taps(N, C, O, Hp, Wp):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((N, C, Hp, Wp)).astype(np.float32)
    g = rng.standard_normal((N, O, Hp - 2, Wp - 2)).astype(np.float32)
    gw, gb = np.empty((O, C, 3, 3), np.float32), np.empty(O, np.float32)
    _cpu.conv2d_winograd_weight_grad(x, g, gw, gb, 3)
    ref, rb = np.empty((O, C, 9), np.float32), np.empty(O, np.float32)
    toff = np.array([i * Wp + j for i in range(3) for j in range(3)], np.int64)
    _cpu.conv2d_taps_weight_grad(x, C * Hp * Wp, Hp * Wp, g, toff, Wp, ref, rb)
    scale = max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(gw.reshape(O, C, 9), ref, rtol=0, atol=2e-5 * scale)
    np.testing.assert_allclose(gb, rb, rtol=0, atol=2e-5 * max(1.0, np.abs(rb).max()))


def test_winograd_argument_checks():
    x = np.zeros((2, 3, 6, 6), np.float32)
    with pytest.raises(ValueError, match=r"weight \(O, C, 3, 3\)"):
        _cpu.conv2d_winograd(x, np.zeros((4, 3, 5, 5), np.float32), None, np.empty((2, 4, 4, 4), np.float32))
    with pytest.raises(ValueError, match="one bias per output channel"):
        _cpu.conv2d_winograd(x, np.zeros((4, 3, 3, 3), np.float32), np.zeros(5, np.float32),
                             np.empty((2, 4, 4, 4), np.float32))
    with pytest.raises(ValueError, match=r"grad \(N, O, Hp-2, Wp-2\)"):
        _cpu.conv2d_winograd_weight_grad(x, np.zeros((2, 4, 5, 4), np.float32), np.empty((4, 3, 3, 3), np.float32),
                                         None)
    with pytest.raises(TypeError, match="float32"):
        _cpu.conv2d_winograd(x.astype(np.float64), np.zeros((4, 3, 3, 3), np.float32), None,
                             np.empty((2, 4, 4, 4), np.float32))


@pytest.mark.parametrize("C,O,groups,k,s,p,d", [(6, 6, 6, (3, 3), (1, 1), (1, 1), (1, 1)),   # depthwise
                                                 (4, 8, 4, (3, 3), (2, 2), (1, 1), (1, 1)),   # multiplier 2, strided
                                                 (6, 9, 3, (3, 2), (1, 2), (2, 0), (2, 1)),   # 2 channels a group
                                                 (8, 4, 4, (1, 1), (2, 2), (0, 0), (1, 1))])  # grouped 1x1 strided
def test_grouped_kernel_matches_float64(C, O, groups, k, s, p, d):
    """conv2d_grouped (csrc/kernels/conv2d_grouped.cpp) in float32 against the float64 result, all gradients."""
    x32, x64 = _pair((2, C, 11, 13), 20)
    w32, w64 = _pair((O, C // groups) + k, 21)
    b32, b64 = _pair((O,), 22)
    assert conv_ops._grouped_ok(groups, C // groups, x32._data, w32._data)
    y32, y64 = F.conv2d(x32, w32, b32, s, p, d, groups), F.conv2d(x64, w64, b64, s, p, d, groups)
    _same_backward(y32, y64, [(x32, x64), (w32, w64), (b32, b64)], 23)


@pytest.mark.parametrize("C,O,groups,k,s,p", [(16, 16, 2, (3, 3), (1, 1), (1, 1)),
                                             (16, 32, 2, (3, 3), (2, 2), (1, 1)),
                                             (24, 24, 3, (1, 1), (2, 2), (0, 0)),
                                             (32, 16, 2, (5, 3), (1, 2), (2, 1))])
def test_grouped_tap_kernels_match_float64(C, O, groups, k, s, p):
    """Groups of >= 8 channels in whole 8-channel tiles run through conv2d.cpp's tap kernels."""
    x32, x64 = _pair((2, C, 12, 14), 24)
    w32, w64 = _pair((O, C // groups) + k, 25)
    b32, b64 = _pair((O,), 26)
    assert conv_ops._taps_ok(groups, 1, x32._data, w32._data, group_io=(C // groups, O // groups))
    y32, y64 = F.conv2d(x32, w32, b32, s, p, 1, groups), F.conv2d(x64, w64, b64, s, p, 1, groups)
    _same_backward(y32, y64, [(x32, x64), (w32, w64), (b32, b64)], 27)


def test_grouped_kernel_argument_checks():
    x = np.zeros((1, 4, 6, 6), np.float32)
    toff = np.zeros(9, np.int64)
    with pytest.raises(ValueError, match="divisible by groups"):
        _cpu.conv2d_grouped(x, 144, 36, np.zeros((3, 2, 9), np.float32), toff, None, np.empty((1, 3, 4, 4), np.float32),
                            6, 2)
    with pytest.raises(ValueError, match="outside the source array"):
        _cpu.conv2d_grouped(x, 144, 36, np.zeros((4, 2, 9), np.float32), toff + 20, None,
                            np.empty((1, 4, 4, 4), np.float32), 6, 2)


def test_the_capability_is_chosen_at_load_and_can_be_capped(capability):
    """TINYTORCH_CPU_CAPABILITY caps the instruction set (as PyTorch's ATEN_CPU_CAPABILITY); 'default' turns
    the kernels off (GEMM route); a set the CPU lacks is refused."""
    code = "from tinytorch._C import _cpu; print(_cpu.get_cpu_capability(), _cpu.conv2d_supported())"
    for name, want in ((capability, f"{capability} True"), ("default", "default False")):
        env = dict(os.environ, TINYTORCH_CPU_CAPABILITY=name)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == want.split()
    with pytest.raises(ValueError, match="must be one of"):
        _cpu.set_cpu_capability("sse9")
    if "avx512" not in _cpu.cpu_capabilities():
        with pytest.raises(ValueError, match="does not run"):
            _cpu.set_cpu_capability("avx512")
    _cpu.set_cpu_capability("default")
    assert not _cpu.conv2d_supported() and not conv_ops._taps_ok(1, 56 * 56, np.zeros(1, np.float32))
