"""torch.fft transforms, frequency helpers, window functions and stft/istft: values against numpy.fft and NumPy
formulas, gradients by gradcheck/gradgradcheck in float64, PyTorch's errors, and PyTorch's values and gradients
when it is importable."""
import importlib.util

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5))
B = RNG.standard_normal((3, 4, 5))
C = A + 1j * B
NORMS = [None, "backward", "forward", "ortho"]
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
ALL = ONE_D + ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn",
               "ihfftn"]
REAL_ONLY = {"rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"}
has_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def _np(name, x, norm, **kw):
    if name.startswith("hfft2") or name.startswith("ihfft2") or name in ("hfftn", "ihfftn"):
        return None  # numpy.fft has only the 1-D Hermitian transforms
    return getattr(np.fft, name)(x, norm=norm, **kw)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ALL)
def test_values_match_numpy(name, norm):
    one = name in ONE_D
    kws = [({}, {}), ({"n": 3}, {"n": 3}), ({"n": 8, "dim": 1}, {"n": 8, "axis": 1})] if one else \
        [({}, {}), ({"s": (3, 7)}, {"s": (3, 7), "axes": (-2, -1)}),
         ({"s": (5, 2), "dim": (0, 2)}, {"s": (5, 2), "axes": (0, 2)})]
    for data in ([A] if name in REAL_ONLY else [A, C]):
        for tkw, nkw in kws:
            if name.endswith("2") and not tkw:
                nkw = {}
            want = _np(name, data, norm, **nkw)
            got = getattr(tinytorch.fft, name)(tinytorch.tensor(data), norm=norm, **tkw)
            if want is not None:
                assert tuple(got.shape) == want.shape
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_dtype_rules():
    f32 = tinytorch.tensor(A, dtype=tinytorch.float32)
    assert tinytorch.fft.fft(f32).dtype == tinytorch.complex64
    assert tinytorch.fft.rfft(tinytorch.tensor(A)).dtype == tinytorch.complex128
    assert tinytorch.fft.irfft(tinytorch.tensor(C).to(tinytorch.complex64)).dtype == tinytorch.float32
    assert tinytorch.fft.irfft(tinytorch.tensor(A)).dtype == tinytorch.float64  # real input is made complex first
    ints = tinytorch.arange(6)
    got = tinytorch.fft.fft(ints)
    assert got.dtype == tinytorch.complex64
    np.testing.assert_allclose(got.numpy(), np.fft.fft(np.arange(6)), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="Unsupported dtype Half"):
        tinytorch.fft.fft(tinytorch.ones(4, dtype=tinytorch.float16))


def test_errors():
    x = tinytorch.tensor(A)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        tinytorch.fft.fft(x, n=0)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        tinytorch.fft.fft(tinytorch.ones(0))
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        tinytorch.fft.fftn(x, dim=(0, -3))
    with pytest.raises(RuntimeError, match="dim and shape arguments must have the same length"):
        tinytorch.fft.fftn(x, s=(2,), dim=(0, 1))
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor, but got ComplexDouble"):
        tinytorch.fft.rfft(tinytorch.tensor(C))
    with pytest.raises(RuntimeError, match="rfftn expects a real-valued input tensor"):
        tinytorch.fft.rfft2(tinytorch.tensor(C))
    with pytest.raises(RuntimeError, match="rfftn must transform at least one axis"):
        tinytorch.fft.rfftn(x, dim=())
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        tinytorch.fft.fft(x, norm="bogus")
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.fft.fft(x, dim=3)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        tinytorch.fft.irfft(tinytorch.ones(1, dtype=tinytorch.complex64))


def test_round_trips():
    x = tinytorch.tensor(A)
    for n in (5, 6):
        np.testing.assert_allclose(tinytorch.fft.irfft(tinytorch.fft.rfft(x, n), n).numpy()[..., :5],
                                   np.pad(A, [(0, 0), (0, 0), (0, n - 5)])[..., :5], atol=1e-12)
    np.testing.assert_allclose(tinytorch.fft.irfftn(tinytorch.fft.rfftn(x), x.shape).numpy(), A, atol=1e-12)
    z = tinytorch.tensor(C)
    np.testing.assert_allclose(tinytorch.fft.ifftn(tinytorch.fft.fftn(z, norm="ortho"), norm="ortho").numpy(), C,
                               atol=1e-12)
    np.testing.assert_allclose(tinytorch.fft.hfft(tinytorch.fft.ihfft(x), 5).numpy(), A, atol=1e-12)


def _loss(r):
    w = tinytorch.tensor(np.resize(np.linspace(-1, 2, 97), tuple(r.shape)))
    if r.is_complex():
        return (r.real * w).sum() + (r.imag * w * w).sum() + (r.abs() ** 2 * w).sum()
    return (r * w).sum() + (r * r * w).sum()


@pytest.mark.parametrize("name", ALL)
def test_gradients(name):
    kw = [{}, {"n": 3}, {"n": 7, "dim": 0}] if name in ONE_D else [{}, {"s": (2, 7)}, {"s": (3, -1), "dim": (0, 2)}]
    a0 = RNG.standard_normal((3, 2, 4))
    b0 = RNG.standard_normal((3, 2, 4))
    fn = getattr(tinytorch.fft, name)
    for k in kw:
        for norm in (None, "forward", "ortho"):
            a = tinytorch.tensor(a0, requires_grad=True)
            b = tinytorch.tensor(b0, requires_grad=True)
            if name in REAL_ONLY:
                f = lambda a: _loss(fn(a, norm=norm, **k))  # noqa: E731
                assert gradcheck(f, (a,))
                assert gradgradcheck(f, (a,))
            else:
                f = lambda a, b: _loss(fn(tinytorch.complex(a, b), norm=norm, **k))  # noqa: E731
                assert gradcheck(f, (a, b))
                assert gradgradcheck(f, (a, b))
                assert gradcheck(lambda a: _loss(fn(a, norm=norm, **k)), (a,))


def test_backward_node_names():
    x = tinytorch.tensor(A, requires_grad=True)
    z = tinytorch.complex(x, x)
    assert tinytorch.fft.fft(z).grad_fn.name() == "FftC2CBackward0"
    assert tinytorch.fft.rfft(x).grad_fn.name() == "FftR2CBackward0"
    assert tinytorch.fft.irfft(z).grad_fn.name() == "FftC2RBackward0"


def test_fftfreq_and_shift():
    for n in (1, 4, 5):
        np.testing.assert_allclose(tinytorch.fft.fftfreq(n, 0.3, dtype=tinytorch.float64).numpy(),
                                   np.fft.fftfreq(n, 0.3), rtol=1e-14)
        np.testing.assert_allclose(tinytorch.fft.rfftfreq(n, 0.3, dtype=tinytorch.float64).numpy(),
                                   np.fft.rfftfreq(n, 0.3), rtol=1e-14)
    f = tinytorch.fft.fftfreq(4, requires_grad=True)
    assert f.dtype == tinytorch.float32 and f.requires_grad
    x = tinytorch.tensor(A)
    for dim in (None, 1, (0, 2), -1):
        np.testing.assert_array_equal(tinytorch.fft.fftshift(x, dim).numpy(), np.fft.fftshift(A, dim))
        np.testing.assert_array_equal(tinytorch.fft.ifftshift(x, dim).numpy(), np.fft.ifftshift(A, dim))


def _win_ref(name, n, periodic, **kw):
    if n <= 1:
        return np.ones(n)
    N = n + 1 if periodic else n
    k = np.arange(N)
    ref = {"hann_window": lambda: 0.5 - 0.5 * np.cos(2 * np.pi * k / (N - 1)),
           "hamming_window": lambda: kw.get("alpha", 0.54) - kw.get("beta", 0.46) * np.cos(2 * np.pi * k / (N - 1)),
           "blackman_window": lambda: np.blackman(N),
           "bartlett_window": lambda: np.bartlett(N),
           "kaiser_window": lambda: np.kaiser(N, kw.get("beta", 12.0))}[name]()
    return ref[:n]


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows(name):
    fn = getattr(tinytorch, name)
    for n in (0, 1, 2, 7, 8):
        for periodic in (True, False):
            w = fn(n, periodic, dtype=tinytorch.float64)
            assert w.dtype == tinytorch.float64
            np.testing.assert_allclose(w.numpy(), _win_ref(name, n, periodic), atol=1e-12)
    assert fn(5).dtype == tinytorch.float32
    assert fn(5, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="requires non-negative window_length, got window_length=-1"):
        fn(-1)
    with pytest.raises(RuntimeError, match="expects floating point dtypes"):
        fn(4, dtype=tinytorch.int64)
    np.testing.assert_allclose(tinytorch.hamming_window(6, False, 0.6, 0.3, dtype=tinytorch.float64).numpy(),
                               _win_ref("hamming_window", 6, False, alpha=0.6, beta=0.3), atol=1e-12)
    np.testing.assert_allclose(tinytorch.kaiser_window(6, True, 5.0, dtype=tinytorch.float64).numpy(),
                               _win_ref("kaiser_window", 6, True, beta=5.0), atol=1e-12)


def _stft_ref(x, n_fft, hop, window, center):
    if center:
        x = np.pad(x, n_fft // 2, mode="reflect")
    n = 1 + (len(x) - n_fft) // hop
    frames = np.stack([x[t * hop:t * hop + n_fft] * window for t in range(n)])
    return np.fft.rfft(frames, axis=-1).T


def test_stft_values_and_round_trip():
    x = RNG.standard_normal(30)
    w = np.hanning(9)[:8]  # periodic hann of 8
    for center in (True, False):
        got = tinytorch.stft(tinytorch.tensor(x), 8, 2, window=tinytorch.tensor(w), center=center,
                             return_complex=True)
        np.testing.assert_allclose(got.numpy(), _stft_ref(x, 8, 2, w, center), atol=1e-12)
    s = tinytorch.tensor(x).stft(8, 2, window=tinytorch.hann_window(8, dtype=tinytorch.float64), return_complex=True)
    back = s.istft(8, 2, window=tinytorch.hann_window(8, dtype=tinytorch.float64), length=30)
    np.testing.assert_allclose(back.numpy(), x, atol=1e-12)
    xb = RNG.standard_normal((2, 25))
    s = tinytorch.stft(tinytorch.tensor(xb), 6, 3, win_length=4, window=tinytorch.ones(4, dtype=tinytorch.float64),
                       onesided=False, normalized=True, return_complex=True)
    assert tuple(s.shape) == (2, 6, 9)
    back = tinytorch.istft(s, 6, 3, win_length=4, window=tinytorch.ones(4, dtype=tinytorch.float64),
                           normalized=True, length=25)
    np.testing.assert_allclose(back.numpy(), xb, atol=1e-12)
    real = tinytorch.stft(tinytorch.tensor(x), 8, return_complex=False)
    assert tuple(real.shape) == (5, 16, 2) and real.dtype == tinytorch.float64


def test_stft_errors():
    x = tinytorch.tensor(RNG.standard_normal(20))
    with pytest.raises(RuntimeError, match="stft requires the return_complex parameter be given for real inputs"):
        tinytorch.stft(x, 8)
    with pytest.raises(RuntimeError, match="expected hop_length > 0, but got hop_length=0"):
        tinytorch.stft(x, 8, 0, return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < win_length <= n_fft, but got win_length=9"):
        tinytorch.stft(x, 8, win_length=9, return_complex=True)
    with pytest.raises(RuntimeError, match="expected a 1D window tensor of size equal to win_length=8"):
        tinytorch.stft(x, 8, window=tinytorch.ones(5, dtype=tinytorch.float64), return_complex=True)
    with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
        tinytorch.stft(tinytorch.ones(2, 2, 20), 8, return_complex=True)
    s = tinytorch.stft(x, 8, return_complex=True)
    with pytest.raises(RuntimeError, match="to match n_fft / 2 \\+ 1 when onesided=True, but got 5"):
        tinytorch.istft(s, 10)
    with pytest.raises(RuntimeError, match="window overlap add min"):
        tinytorch.istft(s, 8, window=tinytorch.zeros(8, dtype=tinytorch.float64))
    with pytest.raises(RuntimeError, match="Cannot have onesided output if window or input is complex"):
        tinytorch.istft(s, 8, return_complex=True)
    with pytest.raises(RuntimeError, match="istft requires a complex-valued input tensor"):
        tinytorch.istft(tinytorch.ones(5, 3), 8)


def test_stft_istft_gradients():
    x = tinytorch.tensor(RNG.standard_normal(12), requires_grad=True)
    w = tinytorch.tensor(np.hanning(6) + 0.2, requires_grad=True)
    f = lambda x, w: _loss(tinytorch.stft(x, 6, 2, window=w, return_complex=True))  # noqa: E731
    assert gradcheck(f, (x, w))
    assert gradgradcheck(f, (x, w))
    re = tinytorch.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    im = tinytorch.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    g = lambda re, im, w: _loss(tinytorch.istft(tinytorch.complex(re, im), 6, 2, window=w))  # noqa: E731
    assert gradcheck(g, (re, im, w))


@has_torch
@pytest.mark.parametrize("name", ALL)
def test_matches_pytorch(name):
    import torch
    kws = [{}, {"n": 3}, {"n": 8, "dim": 1}] if name in ONE_D else [{}, {"s": (3, 7)}, {"s": (5, -1), "dim": (0, 2)}]
    for data in (A, C, A.astype(np.float32), C.astype(np.complex64)):
        if name in REAL_ONLY and data.dtype.kind == "c":
            continue
        for kw in kws:
            for norm in (None, "forward", "ortho"):
                ta = torch.tensor(data.real if data.dtype.kind == "c" else data, requires_grad=True)
                tb = torch.tensor(data.imag, requires_grad=True)
                ga = tinytorch.tensor(ta.detach().numpy(), requires_grad=True)
                gb = tinytorch.tensor(tb.detach().numpy(), requires_grad=True)
                tx = torch.complex(ta, tb) if data.dtype.kind == "c" else ta
                gx = tinytorch.complex(ga, gb) if data.dtype.kind == "c" else ga
                r = getattr(torch.fft, name)(tx, norm=norm, **kw)
                g = getattr(tinytorch.fft, name)(gx, norm=norm, **kw)
                assert str(r.dtype).split(".")[-1] == str(g.dtype).split(".")[-1]
                assert tuple(r.shape) == tuple(g.shape)
                np.testing.assert_allclose(g.detach().numpy(), r.detach().resolve_conj().numpy(), rtol=1e-4, atol=1e-4)
                rl = (r.abs() ** 2).sum() + r.real.sum() if r.is_complex() else (r * r).sum() + r.sum()
                gl = (g.abs() ** 2).sum() + g.real.sum() if g.is_complex() else (g * g).sum() + g.sum()
                rl.backward()
                gl.backward()
                np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-3, atol=1e-3)
                if data.dtype.kind == "c":
                    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-3, atol=1e-3)


@has_torch
def test_windows_and_stft_match_pytorch():
    import torch
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        for n in (0, 1, 5, 8):
            for p in (True, False):
                np.testing.assert_allclose(getattr(tinytorch, name)(n, p).numpy(), getattr(torch, name)(n, p).numpy(),
                                           atol=1e-6)
    x = RNG.standard_normal((2, 33))
    for kw in (dict(n_fft=8), dict(n_fft=8, hop_length=3, win_length=5), dict(n_fft=9, center=False, hop_length=3,
                                                                              normalized=True),
               dict(n_fft=8, onesided=False), dict(n_fft=6, pad_mode="constant", hop_length=1)):
        wl = kw.get("win_length", kw["n_fft"])
        r = torch.stft(torch.tensor(x), window=torch.hann_window(wl, dtype=torch.float64) + 0.1, return_complex=True,
                       **kw)
        g = tinytorch.stft(tinytorch.tensor(x), window=tinytorch.hann_window(wl, dtype=tinytorch.float64) + 0.1,
                           return_complex=True, **kw)
        np.testing.assert_allclose(g.numpy(), r.numpy(), atol=1e-10)
        ikw = {k: v for k, v in kw.items() if k != "pad_mode"}
        for length in (None, 33, 40):  # 40 > the signal: zero-padded, with PyTorch's warning
            try:
                ri = torch.istft(r, window=torch.hann_window(wl, dtype=torch.float64) + 0.1, length=length, **ikw)
            except RuntimeError:  # the window's overlap-add is zero somewhere in the requested length
                with pytest.raises(RuntimeError, match="window overlap add min"):
                    tinytorch.istft(g, window=tinytorch.hann_window(wl, dtype=tinytorch.float64) + 0.1,
                                    length=length, **ikw)
                continue
            gi = tinytorch.istft(g, window=tinytorch.hann_window(wl, dtype=tinytorch.float64) + 0.1, length=length,
                                 **ikw)
            assert tuple(gi.shape) == tuple(ri.shape)
            np.testing.assert_allclose(gi.numpy(), ri.numpy(), atol=1e-10)
