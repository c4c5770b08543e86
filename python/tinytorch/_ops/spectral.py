"""Short-time Fourier transforms and window functions: stft, istft, hann/hamming/blackman/bartlett/kaiser windows.

stft and istft are built from differentiable tensor ops (framing by index gathering, torch.fft, overlap-add by
index_add), following PyTorch's aten/src/ATen/native/SpectralOps.cpp step by step, so autograd needs no node of
their own.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._dtype import get_default_dtype, to_dtype
from .._tensor import Tensor
from ._common import attach
from ._common import user_stacklevel as _user_stacklevel

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "stft", "istft"]


# ------------------------------------------------------------------ windows

_C_TYPE_NAMES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                 "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
                 "complex128": "c10::complex<double>"}


def _tensor_options(dt, device, requires_grad: bool) -> str:
    """How PyTorch prints the requested options in a factory's dtype error (its C++ TensorOptions)."""
    name = str(dt).rsplit(".", 1)[-1]
    dev = "cpu" if device is None else str(device)
    grad = "true" if requires_grad else "false (default)"
    return (f"TensorOptions(dtype={_C_TYPE_NAMES.get(name, name)}, device={dev}, layout=Strided (default), "
            f"requires_grad={grad}, pinned_memory=false, memory_format=(nullopt))")


def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool, formula) -> Tensor:
    """A window of window_length points: formula(n, N) over n = 0..N-1 in float64, cast to dtype. A periodic
    window is the symmetric window of window_length + 1 points without its last point (PyTorch's semantics)."""
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {_tensor_options(dt, device, requires_grad)}")
    if window_length <= 1:
        w = np.ones(window_length)
    else:
        big = window_length + 1 if periodic else window_length
        w = formula(np.arange(big, dtype=np.float64), big)[:window_length]
    from .._creation import tensor
    return tensor(w, dtype=dt, device=device, requires_grad=requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:
    """The Hann window 0.5 - 0.5 cos(2 pi n / (N - 1))."""
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device, requires_grad=requires_grad,
                          _name="hann_window")


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False,
                   _name: str = "hamming_window") -> Tensor:
    """The generalised Hamming window alpha - beta cos(2 pi n / (N - 1))."""
    return _window(_name, window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: alpha - beta * np.cos(2 * math.pi * n / (N - 1)))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: (0.42 - 0.5 * np.cos(2 * math.pi * n / (N - 1))
                                 + 0.08 * np.cos(4 * math.pi * n / (N - 1))))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """The triangular window 1 - |2 n / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 1 - np.abs(2 * n / (N - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False) -> Tensor:
    """The Kaiser window I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / (N - 1) - 1) ** 2, 0, None))) / np.i0(beta))


# ------------------------------------------------------------------ stft / istft

def _frame_index(n_frames: int, n_fft: int, hop_length: int, device) -> Tensor:
    """index[t, k] = t * hop_length + k: where frame t's k-th sample sits in the signal."""
    from .._creation import tensor
    idx = np.arange(n_frames)[:, None] * hop_length + np.arange(n_fft)[None, :]
    return tensor(idx, device=device)


def _full_window(window: Tensor | None, win_length: int, n_fft: int, like: Tensor) -> Tensor:
    """The window, centred and zero-padded to n_fft (a rectangular one when None)."""
    from .._creation import ones
    if window is None:
        dt = like.dtype.to_real() if like.is_complex() else like.dtype
        window = ones(win_length, dtype=dt, device=like.device)
    if win_length < n_fft:
        from .toplevel import constant_pad_nd
        left = (n_fft - win_length) // 2
        window = constant_pad_nd(window, [left, n_fft - win_length - left])
    return window


def _tensor_repr(t: Tensor | None, braces: bool = False) -> str:
    """How PyTorch's stft/istft name a tensor argument in an error: Type[sizes] (Type{[sizes]} for the window)."""
    if t is None:
        return "None"
    sizes = list(t.shape)
    return f"{t.type()}{{{sizes}}}" if braces else f"{t.type()}{sizes}"


def _flag(v) -> str:
    return "None" if v is None else str(int(bool(v)))


def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: bool | None = None, return_complex: bool | None = None,
         align_to_window: bool | None = None) -> Tensor:
    """The short-time Fourier transform: the FFT of windowed frames, shape (B?, n_fft // 2 + 1 or n_fft, frames)."""
    from .. import fft
    from .nn import pad as F_pad
    from .complex import view_as_real
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                               "require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.To suppress this warning and use a rectangular window, "
                      "explicitly set `window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=_user_stacklevel())
    if center and input.dim() <= 3:
        dim = input.dim()
        half = n_fft // 2
        input = F_pad(input.view((1,) * (3 - dim) + tuple(input.shape)), [half, half], pad_mode)
        input = input.view(tuple(input.shape[-dim:]))
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    prefix = (f"stft({_tensor_repr(input)}, n_fft={n_fft}, hop_length={hop_length}, win_length={win_length}, "
              f"window={_tensor_repr(window, True)}, normalized={_flag(normalized)}, onesided={_flag(onesided)}, "
              f"return_complex={_flag(return_complex)}, align_to_window={_flag(align_to_window)}) : ")
    if not (input.dtype.is_floating_point or input.is_complex()):
        raise RuntimeError(prefix + "expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise RuntimeError(prefix + "expected a 1D or 2D tensor")
    batched = input.dim() == 2
    x = input if batched else input.unsqueeze(0)
    length = x.shape[1]
    if not 0 < n_fft <= length:
        raise RuntimeError(prefix + f"expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(prefix + f"expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(prefix + f"expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(prefix + f"expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    w = _full_window(window, win_length, n_fft, x)
    if align_to_window and win_length < n_fft:
        # frames start where the window starts, not where the zero-padded n_fft frame starts
        from .toplevel import constant_pad_nd
        left = (n_fft - win_length) // 2
        x = constant_pad_nd(x, [left, n_fft - win_length - left])
    n_frames = 1 + (x.shape[1] - n_fft) // hop_length
    frames = x[:, _frame_index(n_frames, n_fft, hop_length, x.device)] * w  # (B, frames, n_fft)
    onesided = not complex_in if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    if onesided:
        if complex_in:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = fft.rfft(frames, dim=-1, norm=norm)
    else:
        out = fft.fft(frames, dim=-1, norm=norm)
    out = out.transpose(1, 2)
    if not batched:
        out = out.squeeze(0)
    return out if return_complex else view_as_real(out)


def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Tensor | None = None, center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False) -> Tensor:
    """The inverse of stft: inverse FFT of each frame, windowed overlap-add, divided by the summed squared window."""
    from .. import fft
    from .._creation import zeros
    from .toplevel import constant_pad_nd
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{max(input.dim(), 1)}, "
                         f"{max(input.dim(), 1) - 1}], but got -3)")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    prefix = (f"istft(CPU{input.type().rsplit('.', 1)[-1].replace('Tensor', 'Type')}{list(input.shape)}, "
              f"n_fft={n_fft}, hop_length={hop_length}, win_length={win_length}, window={_tensor_repr(window, True)}, "
              f"center={_flag(center)}, normalized={_flag(normalized)}, onesided={_flag(onesided)}, "
              f"length={length}, return_complex={_flag(return_complex)})")
    if input.dim() > 3:
        raise RuntimeError(prefix + f" : expected a tensor with 2 or 3 dimensions of complex, but got {input.dim()}")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    fft_size, n_frames = x.shape[1], x.shape[2]
    if not 0 < win_length <= n_fft:
        raise RuntimeError(prefix + " : expected 0 < win_length <= n_fft")
    if not 0 < hop_length <= win_length:
        raise RuntimeError(prefix + " : expected 0 < hop_length <= win_length")
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(prefix + " : Invalid window shape. window has to be 1D and length of `win_length`")
    if onesided is None:
        onesided = fft_size != n_fft
    if onesided:
        if n_fft // 2 + 1 != fft_size:
            raise RuntimeError(prefix + " : expected the frequency dimension (3rd to the last) of the input tensor "
                               f"to match n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    elif n_fft != fft_size:
        raise RuntimeError(prefix + " : expected the frequency dimension (3rd to the last) of the input tensor to "
                           f"match n_fft when onesided=False, but got {fft_size}")
    w = _full_window(window, win_length, n_fft, x)
    x = x.transpose(1, 2)  # (B, frames, freq)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = fft.ifft(x, dim=-1, norm=norm)
    else:
        if w.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = fft.irfft(x, n=n_fft, dim=-1, norm=norm)
    frames = frames * w
    total = n_fft + hop_length * (n_frames - 1)
    idx = _frame_index(n_frames, n_fft, hop_length, x.device).flatten()
    batch = frames.shape[0]
    y = zeros(batch, total, dtype=frames.dtype, device=frames.device).index_add(1, idx, frames.reshape(batch, -1))
    sq = (w * w.conj()).real if w.is_complex() else w * w
    envelope = zeros(total, dtype=sq.dtype, device=sq.device).index_add(0, idx, sq.repeat(n_frames))
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    stop = min(end, total)
    y = y[:, start:stop]
    envelope = envelope[start:stop]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError(prefix + " window overlap add min: 1\n[ CPUBoolType{} ]")
    y = y / envelope
    if end > total:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with zeros "
                      "in the tail. Please check your center and hop_length settings.")
        y = constant_pad_nd(y, [0, end - total])
    return y if batched else y.squeeze(0)


attach(stft=stft, istft=istft)
