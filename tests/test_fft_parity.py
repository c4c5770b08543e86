"""torch.fft, stft/istft and the window functions: argument handling and error messages without PyTorch, then a
sweep of every transform's n/s, dim and norm over real, complex and integer inputs (values, dtypes, gradients)
against PyTorch when it is importable."""
import itertools
import math
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck

RNG = np.random.default_rng(0)
SIG = RNG.standard_normal((2, 40))


def _np(x):
    x = x.detach()
    if hasattr(x, "resolve_conj"):
        x = x.resolve_conj().resolve_neg()
    return x.numpy()


# ------------------------------------------------------------------ without PyTorch

def test_invalid_norm_is_a_runtime_error():
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bogus"'):
        tinytorch.fft.rfft(tinytorch.tensor(SIG), norm="bogus")


def test_fft_output_dtypes():
    x32 = tinytorch.tensor(SIG, dtype=tinytorch.float32)
    assert tinytorch.fft.fft(x32).dtype is tinytorch.complex64
    assert tinytorch.fft.rfft(x32).dtype is tinytorch.complex64
    assert tinytorch.fft.irfft(tinytorch.fft.rfft(x32)).dtype is tinytorch.float32
    assert tinytorch.fft.hfft(tinytorch.fft.rfft(x32)).dtype is tinytorch.float32
    assert tinytorch.fft.fft(tinytorch.tensor(SIG)).dtype is tinytorch.complex128
    assert tinytorch.fft.fft(tinytorch.arange(6)).dtype is tinytorch.complex64


def test_stft_warns_without_a_window_and_not_with_one():
    x = tinytorch.tensor(SIG[0])
    with pytest.warns(UserWarning, match="A window was not provided"):
        tinytorch.stft(x, 8, return_complex=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tinytorch.stft(x, 8, window=tinytorch.hann_window(8, dtype=tinytorch.float64), return_complex=True)


def test_stft_errors_carry_pytorchs_argument_summary():
    x = tinytorch.tensor(SIG.astype(np.float32))
    w = tinytorch.ones(8)
    with pytest.raises(RuntimeError, match=r"^stft\(.*FloatTensor\[2, 48\], n_fft=8, hop_length=2, win_length=9, "
                                           r"window=None, normalized=0, onesided=None, return_complex=1, "
                                           r"align_to_window=None\) : expected 0 < win_length <= n_fft, but got "
                                           r"win_length=9$"):
        tinytorch.stft(x, 8, win_length=9, return_complex=True)
    with pytest.raises(RuntimeError, match=r"window=.*FloatTensor\{\[5\]\}.* : expected a 1D window tensor of size "
                                           r"equal to win_length=8, but got window with size \[5\]"):
        tinytorch.stft(x, 8, window=tinytorch.ones(5), return_complex=True)
    with pytest.raises(RuntimeError, match=r"FloatTensor\[1, 2, 48\].* : expected a 1D or 2D tensor$"):
        tinytorch.stft(x[None], 8, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="expected 0 < n_fft < 40, but got n_fft=100"):
        tinytorch.stft(x, 100, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="expected hop_length > 0, but got hop_length=0"):
        tinytorch.stft(x, 8, hop_length=0, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="expected a tensor of floating point or complex values"):
        tinytorch.stft(x.int(), 8, window=w, return_complex=True)
    with pytest.raises(RuntimeError, match="stft align_to_window should only be set when center = false"):
        tinytorch.stft(x, 8, window=w, align_to_window=True, return_complex=True)
    with pytest.raises(RuntimeError, match="stft requires the return_complex parameter be given for real inputs"):
        tinytorch.stft(x, 8, window=w)


def test_istft_errors_carry_pytorchs_argument_summary():
    w = tinytorch.ones(8)
    S = tinytorch.stft(tinytorch.tensor(SIG.astype(np.float32)), 8, window=w, return_complex=True)
    head = r"^istft\(CPUComplexFloatType\[2, 5, 21\], n_fft=8, hop_length="
    with pytest.raises(RuntimeError, match=head + r"2, win_length=9, window=None, center=1, normalized=0, "
                                                  r"onesided=None, length=None, return_complex=0\) : expected 0 < "
                                                  r"win_length <= n_fft$"):
        tinytorch.istft(S, 8, win_length=9)
    with pytest.raises(RuntimeError, match=head + r"0.* : expected 0 < hop_length <= win_length$"):
        tinytorch.istft(S, 8, hop_length=0)
    with pytest.raises(RuntimeError, match=r"Invalid window shape. window has to be 1D and length of `win_length`"):
        tinytorch.istft(S, 8, window=tinytorch.ones(5))
    with pytest.raises(RuntimeError, match="to match n_fft / 2 \\+ 1 when onesided=True, but got 5"):
        tinytorch.istft(S, 10, window=tinytorch.ones(10))
    with pytest.raises(RuntimeError, match="to match n_fft when onesided=False, but got 5"):
        tinytorch.istft(S, 8, window=w, onesided=False)
    with pytest.raises(RuntimeError, match="window overlap add min: 1"):
        tinytorch.istft(S, 8, window=tinytorch.hann_window(8), center=False)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.istft(S[0, 0], 8, window=w)


def test_stft_align_to_window_frames_start_at_the_window():
    x = SIG[0]
    n_fft, win, hop = 8, 4, 2
    w = RNG.uniform(0.5, 1.0, win)
    got = tinytorch.stft(tinytorch.tensor(x), n_fft, hop, win, window=tinytorch.tensor(w), center=False,
                         align_to_window=True, return_complex=True).numpy()
    left = (n_fft - win) // 2
    n_frames = 1 + (len(x) - win) // hop
    frames = np.zeros((n_frames, n_fft))
    for t in range(n_frames):
        frames[t, left:left + win] = x[t * hop:t * hop + win] * w
    np.testing.assert_allclose(got, np.fft.rfft(frames).T, rtol=1e-12, atol=1e-12)
    # without it the frame is the n_fft-long slice, the window in its middle
    plain = tinytorch.stft(tinytorch.tensor(x), n_fft, hop, win, window=tinytorch.tensor(w), center=False,
                           align_to_window=False, return_complex=True).numpy()
    n_plain = 1 + (len(x) - n_fft) // hop
    frames = np.stack([x[t * hop:t * hop + n_fft] * np.pad(w, (left, n_fft - win - left)) for t in range(n_plain)])
    np.testing.assert_allclose(plain, np.fft.rfft(frames).T, rtol=1e-12, atol=1e-12)


def test_stft_istft_round_trip_and_gradients():
    x = tinytorch.tensor(SIG, requires_grad=True)
    w = tinytorch.hann_window(16, dtype=tinytorch.float64)
    for kw in (dict(), dict(normalized=True), dict(onesided=False), dict(hop_length=3), dict(win_length=12)):
        win = w if "win_length" not in kw else tinytorch.hann_window(12, dtype=tinytorch.float64)
        S = tinytorch.stft(x, 16, window=win, return_complex=True, **kw)
        y = tinytorch.istft(S, 16, window=win, length=40, **kw)
        np.testing.assert_allclose(y.detach().numpy(), SIG, atol=1e-10)
    small = tinytorch.tensor(SIG[:, :20], requires_grad=True)
    assert gradcheck(lambda a: tinytorch.view_as_real(tinytorch.stft(a, 8, window=w[:8], return_complex=True)),
                     (small,))


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_window_functions_closed_forms(name):
    fn = getattr(tinytorch, name)
    for n, periodic in itertools.product((1, 2, 7, 8), (True, False)):
        m = n + 1 if periodic else n
        k = np.arange(m)
        if n == 1:
            want = np.ones(1)  # a one-point window is [1] whether periodic or not
        elif name == "hann_window":
            want = 0.5 - 0.5 * np.cos(2 * math.pi * k / (m - 1))
        elif name == "hamming_window":
            want = 0.54 - 0.46 * np.cos(2 * math.pi * k / (m - 1))
        elif name == "blackman_window":
            want = 0.42 - 0.5 * np.cos(2 * math.pi * k / (m - 1)) + 0.08 * np.cos(4 * math.pi * k / (m - 1))
        elif name == "bartlett_window":
            want = 1 - np.abs(2 * k / (m - 1) - 1)
        else:
            want = np.i0(12.0 * np.sqrt(1 - (2 * k / (m - 1) - 1) ** 2)) / np.i0(12.0)
        got = fn(n, periodic, dtype=tinytorch.float64)
        assert got.dtype is tinytorch.float64
        np.testing.assert_allclose(got.numpy(), want[:n], rtol=1e-12, atol=1e-15)
    assert fn(5).dtype is tinytorch.float32 and fn(0).shape == (0,)
    with pytest.raises(RuntimeError, match=rf"{name} expects floating point dtypes, got: TensorOptions\(dtype=long "
                                           r"int, device=cpu, layout=Strided \(default\), requires_grad=false "
                                           r"\(default\), pinned_memory=false, memory_format=\(nullopt\)\)"):
        fn(4, dtype=tinytorch.int64)
    with pytest.raises(RuntimeError, match=f"{name} requires non-negative window_length, got window_length=-1"):
        fn(-1)


# ------------------------------------------------------------------ against PyTorch

INPUTS = {
    "float32": RNG.standard_normal((4, 6)).astype(np.float32),
    "float64": RNG.standard_normal((4, 6)),
    "complex64": (RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))).astype(np.complex64),
    "int64": np.arange(24).reshape(4, 6),
}


def _check(name, ref_fn, my_fn, tol):
    try:
        want = ref_fn()
    except Exception as e:  # noqa: BLE001 - the same exception type is what is checked
        with pytest.raises(type(e)):
            my_fn()
        return
    got = my_fn()
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], name
    assert tuple(got.shape) == tuple(want.shape), name
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_dimensional_transforms_match_pytorch(fn):
    torch = pytest.importorskip("torch")
    for (dt, x), n, dim, norm in itertools.product(INPUTS.items(), (None, 4, 9), (-1, 0),
                                                   (None, "forward", "ortho", "backward")):
        _check(f"{fn} {dt} n={n} dim={dim} norm={norm}",
               lambda: getattr(torch.fft, fn)(torch.tensor(x), n=n, dim=dim, norm=norm),
               lambda: getattr(tinytorch.fft, fn)(tinytorch.tensor(x), n=n, dim=dim, norm=norm), 1e-4)


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn",
                                "irfftn", "hfftn", "ihfftn"])
def test_multi_dimensional_transforms_match_pytorch(fn):
    torch = pytest.importorskip("torch")
    dims = [None, (0, 1), (-1,), (1, 0)] if fn.endswith("n") else [(-2, -1), (0, 1), (1, 0)]
    for (dt, x), s, dim, norm in itertools.product(INPUTS.items(), (None, (3, 5), (8,)), dims,
                                                   (None, "forward", "ortho")):
        if s is not None and dim is not None and len(s) != len(dim):
            continue
        _check(f"{fn} {dt} s={s} dim={dim} norm={norm}",
               lambda: getattr(torch.fft, fn)(torch.tensor(x), s=s, dim=dim, norm=norm),
               lambda: getattr(tinytorch.fft, fn)(tinytorch.tensor(x), s=s, dim=dim, norm=norm), 1e-4)


def test_transform_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    xr = RNG.standard_normal((3, 5))
    xc = xr + 1j * RNG.standard_normal((3, 5))
    for fn, x, kw in [("fft", xc, dict(n=7)), ("ifft", xr, dict(norm="ortho")), ("rfft", xr, dict(n=8)),
                      ("irfft", xc, dict(n=6)), ("hfft", xc, dict(norm="forward")), ("ihfft", xr, {}),
                      ("fft2", xc, dict(s=(4, 4))), ("rfftn", xr, {}), ("irfftn", xc, dict(s=(3, 7))),
                      ("hfftn", xc, {}), ("ihfft2", xr, {})]:
        grads = []
        for lib in (torch, tinytorch):
            a = lib.tensor(x, requires_grad=True)
            out = getattr(lib.fft, fn)(a, **kw)
            w = lib.tensor(np.cos(np.arange(math.prod(out.shape))).reshape(tuple(out.shape)))
            loss = (out.abs() * w).sum() if out.is_complex() else (out * w).sum()
            loss.backward()
            grads.append(_np(a.grad))
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-9, atol=1e-12, err_msg=fn)


def test_frequencies_and_shifts_match_pytorch():
    torch = pytest.importorskip("torch")
    for n, d in itertools.product((1, 5, 6), (1.0, 0.5)):
        _check("fftfreq", lambda: torch.fft.fftfreq(n, d), lambda: tinytorch.fft.fftfreq(n, d), 0)
        _check("rfftfreq", lambda: torch.fft.rfftfreq(n, d, dtype=torch.float64),
               lambda: tinytorch.fft.rfftfreq(n, d, dtype=tinytorch.float64), 0)
    x = INPUTS["float32"][:3, :5]
    for dim in (None, 0, 1, (0, 1), -1):
        _check("fftshift", lambda: torch.fft.fftshift(torch.tensor(x), dim),
               lambda: tinytorch.fft.fftshift(tinytorch.tensor(x), dim), 0)
        _check("ifftshift", lambda: torch.fft.ifftshift(torch.tensor(x), dim),
               lambda: tinytorch.fft.ifftshift(tinytorch.tensor(x), dim), 0)


def test_windows_match_pytorch():
    torch = pytest.importorskip("torch")
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        for n, periodic in itertools.product((0, 1, 2, 5, 8), (True, False)):
            _check(name, lambda: getattr(torch, name)(n, periodic), lambda: getattr(tinytorch, name)(n, periodic),
                   1e-6)
    _check("hamming", lambda: torch.hamming_window(7, False, 0.6, 0.3, dtype=torch.float64),
           lambda: tinytorch.hamming_window(7, False, 0.6, 0.3, dtype=tinytorch.float64), 1e-12)
    _check("kaiser", lambda: torch.kaiser_window(7, False, 5.0, dtype=torch.float64),
           lambda: tinytorch.kaiser_window(7, False, 5.0, dtype=tinytorch.float64), 1e-12)


STFT_KW = [dict(n_fft=8), dict(n_fft=8, hop_length=3), dict(n_fft=8, win_length=5), dict(n_fft=8, center=False),
           dict(n_fft=8, pad_mode="constant"), dict(n_fft=8, pad_mode="replicate"), dict(n_fft=8, pad_mode="circular"),
           dict(n_fft=8, normalized=True), dict(n_fft=8, onesided=False), dict(n_fft=7), dict(n_fft=8, window=True),
           dict(n_fft=8, win_length=5, center=False, align_to_window=True, window=True)]


@pytest.mark.parametrize("kw", STFT_KW, ids=[str(k) for k in STFT_KW])
def test_stft_and_istft_match_pytorch(kw):
    torch = pytest.importorskip("torch")
    for x in (SIG.astype(np.float32), SIG[0], SIG, (SIG + 1j * SIG[::-1]).astype(np.complex64)):
        def run(lib, inverse, x=x):
            args = dict(kw)
            if args.pop("window", False):
                real = lib.float32 if x.dtype in (np.float32, np.complex64) else lib.float64
                args["window"] = lib.hann_window(args.get("win_length", args["n_fft"]), dtype=real)
            S = lib.stft(lib.tensor(x), return_complex=True, **args)
            if not inverse:
                return S
            args.pop("pad_mode", None)
            args.pop("align_to_window", None)
            return lib.istft(S, return_complex=x.dtype.kind == "c", **args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check(f"stft {kw}", lambda: run(torch, False), lambda: run(tinytorch, False), 1e-4)
            if not kw.get("align_to_window"):
                _check(f"istft {kw}", lambda: run(torch, True), lambda: run(tinytorch, True), 1e-4)


def test_stft_real_view_and_errors_match_pytorch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check("view_as_real", lambda: torch.stft(torch.tensor(SIG), 8, return_complex=False),
               lambda: tinytorch.stft(tinytorch.tensor(SIG), 8, return_complex=False), 1e-10)
        for kw in (dict(win_length=9), dict(hop_length=0), dict(center=False, n_fft=100)):
            args = dict(dict(n_fft=8), **kw)
            with pytest.raises(RuntimeError) as want:
                torch.stft(torch.tensor(SIG), return_complex=True, **args)
            with pytest.raises(RuntimeError) as got:
                tinytorch.stft(tinytorch.tensor(SIG), return_complex=True, **args)
            assert str(got.value).replace("tinytorch.", "torch.") == str(want.value)
