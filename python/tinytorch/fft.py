"""torch.fft: discrete Fourier transforms (NumPy's pocketfft) with their derivatives, and the frequency helpers.

Every transform reduces, as in PyTorch's aten/src/ATen/native/SpectralOps.cpp, to a crop/zero-pad of the input
(differentiable shape ops) and one of three recorded kernels: complex-to-complex (FftC2CBackward0), real-to-complex
(FftR2CBackward0) and complex-to-real (FftC2RBackward0). A kernel's normalisation is one of "none", "by_n" and
"by_root_n"; its derivative is the adjoint transform with the same scale.
"""
from __future__ import annotations

import numpy as np

from ._creation import arange
from ._dtype import complex64, complex128, float32, float64, get_default_dtype
from ._ops._common import needs_grad, record
from ._ops._common import _short
from ._ops.complex import conj
from ._ops.pointwise import _result
from ._tensor import Tensor, _wrap_dim

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _xp(x):
    """numpy, or cupy for a CUDA array (imported only then)."""
    if type(x) is np.ndarray:
        return np
    import cupy
    return cupy


# ------------------------------------------------------------------ kernels

def _np_norm(mode: str, forward: bool) -> str:
    """NumPy's `norm` for a kernel scale: NumPy names the transform that carries the 1/n."""
    if mode == "by_root_n":
        return "ortho"
    return ("forward" if forward else "backward") if mode == "by_n" else ("backward" if forward else "forward")


def _c2c(x: Tensor, dims: tuple, mode: str, forward: bool) -> Tensor:
    """The complex DFT over dims (exp(-i..) when forward, else exp(+i..)), scaled by mode."""
    a = x._data
    xp = _xp(a)
    f = xp.fft.fftn if forward else xp.fft.ifftn
    out = _result(f(a, axes=dims, norm=_np_norm(mode, forward)).astype(a.dtype, copy=False) if dims else a.copy())
    if needs_grad(x):
        record("FftC2CBackward0", lambda g: _c2c(g, dims, mode, not forward), out, (x,))
    return out


def _fill_conjugate_symmetric(half, dims: tuple, n: int):
    """The two-sided spectrum of a real signal from its onesided half, X[k] = conj(X[-k mod n]) per dim, as
    PyTorch's r2c fills it (so the mirrored bins carry the conjugate's signed zeros, 1-0j, like PyTorch's)."""
    xp = _xp(half)
    last = dims[-1]
    h = half.shape[last]
    mirror = xp.take(half, xp.arange(n - h, 0, -1), axis=last)
    for d in dims[:-1]:
        # index -i mod m along the other transformed dims: flip, then bring bin 0 back to the front
        mirror = xp.roll(xp.flip(mirror, axis=d), 1, axis=d)
    return xp.concatenate([half, xp.conj(mirror)], axis=last)


def _r2c(x: Tensor, dims: tuple, mode: str, onesided: bool) -> Tensor:
    """The forward DFT of a real tensor over dims; onesided keeps the last dim's first n//2 + 1 bins."""
    a = x._data
    xp = _xp(a)
    norm = _np_norm(mode, True)
    r = xp.fft.rfftn(a, axes=dims, norm=norm)
    if not onesided:
        r = _fill_conjugate_symmetric(r, dims, a.shape[dims[-1]])
    out = _result(r.astype(np.complex128 if a.dtype == np.float64 else np.complex64, copy=False))
    if needs_grad(x):
        n = a.shape[dims[-1]]

        def r2c_backward(g):
            # the adjoint: bins dropped by onesided output have zero gradient, then a real inverse DFT
            if onesided and g.shape[dims[-1]] < n:
                pad = [0, 0] * (g.dim() - 1 - dims[-1]) + [0, n - g.shape[dims[-1]]]
                from ._ops.toplevel import constant_pad_nd
                g = constant_pad_nd(g, pad)
            return _c2c(g, dims, mode, False).real
        record("FftR2CBackward0", r2c_backward, out, (x,))
    return out


def _c2r(x: Tensor, dims: tuple, mode: str, n: int) -> Tensor:
    """The inverse DFT over dims of Hermitian data whose last dim holds n//2 + 1 bins: a real result of length n."""
    a = x._data
    xp = _xp(a)
    s = [a.shape[d] for d in dims[:-1]] + [n]
    out = _result(xp.fft.irfftn(a, s=s, axes=dims, norm=_np_norm(mode, False)).astype(
        np.float64 if a.dtype == np.complex128 else np.float32, copy=False))
    if needs_grad(x):
        def c2r_backward(g):
            # the adjoint: a forward r2c, with the interior bins (each standing for itself and its mirror) doubled
            gi = _r2c(g, dims, mode, True)
            double = n - gi.shape[dims[-1]]
            if double > 0:
                w = np.ones(gi.shape[dims[-1]], g._data.dtype)
                w[1:1 + double] = 2
                from ._creation import tensor
                gi = gi * tensor(w.reshape((-1,) + (1,) * (gi.dim() - 1 - dims[-1])), device=g.device)
            return gi
        record("FftC2RBackward0", c2r_backward, out, (x,))
    return out


# ------------------------------------------------------------------ argument handling

_MODES = {None: ("none", "by_n"), "backward": ("none", "by_n"), "forward": ("by_n", "none"),
          "ortho": ("by_root_n", "by_root_n")}


def _mode(norm: str | None, forward: bool) -> str:
    try:
        pair = _MODES[norm]
    except (KeyError, TypeError):
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"") from None
    return pair[0] if forward else pair[1]


def _promote(x: Tensor, complex_: bool) -> Tensor:
    """PyTorch's promote_tensor_fft: integers become the default float; CPU has no half-precision FFT."""
    if not isinstance(x, Tensor):
        raise TypeError(f"fft(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    dt = x.dtype
    if dt.is_complex:
        return x
    if not dt.is_floating_point:
        dt = get_default_dtype()
    if dt not in (float32, float64):
        raise RuntimeError(f"Unsupported dtype {_short(dt)}")
    if complex_:
        dt = complex128 if dt is float64 else complex64
    return x if dt is x.dtype else x.to(dt)


def _shape_and_dims(x: Tensor, s, dim) -> tuple:
    """PyTorch's canonicalize_fft_shape_and_dim_args: the transformed dims and their signal sizes."""
    nd = x.dim()
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(s, int):
        s = (s,)
    dims = None
    if dim is not None:
        dims = tuple(_wrap_dim(d, nd) if nd else _scalar_dim(d) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = tuple(s)
        if dims is not None and len(dims) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > nd:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {nd} dimensions.")
        if dims is None:
            dims = tuple(range(nd - len(s), nd))
        shape = tuple(x.shape[d] if n == -1 else int(n) for d, n in zip(dims, s))
    else:
        if dims is None:
            dims = tuple(range(nd))
        shape = tuple(x.shape[d] for d in dims)
    for n in shape:
        if n <= 0:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return shape, dims


def _scalar_dim(d: int) -> int:
    raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")


def _resize(x: Tensor, dims: tuple, sizes: tuple) -> Tensor:
    """Crop or zero-pad x to `sizes` along dims (PyTorch's resize_fft_input)."""
    pad = [0] * (2 * x.dim())
    padded = False
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if have > n:
            x = x.narrow(d, 0, n)
        elif have < n:
            pad[2 * (x.dim() - 1 - d) + 1] = n - have
            padded = True
    if padded:
        from ._ops.toplevel import constant_pad_nd
        x = constant_pad_nd(x, pad)
    return x


def _c2c_or_r2c(x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    """fft/fftn and their inverses: complex input takes c2c; real input a two-sided r2c (conjugated for the
    inverse, which has the opposite sign in the exponent)."""
    x = _promote(x, False)
    shape, dims = _shape_and_dims(x, s, dim)
    x = _resize(x, dims, shape)
    mode = _mode(norm, forward)
    if x.is_complex():
        return _c2c(x, dims, mode, forward)
    if not dims:
        return x.to(complex128 if x.dtype is float64 else complex64)
    out = _r2c(x, dims, mode, False)
    return out if forward else conj(out)


def _real_only(name: str, x: Tensor) -> None:
    """Reject complex input with the message of the PyTorch function that does (each words it differently)."""
    if isinstance(x, Tensor) and x.is_complex():
        dt = _short(x.dtype)
        if name in ("rfft", "ihfft"):
            raise RuntimeError(f"{name} expects a real input tensor, but got {dt}")
        if name.startswith("rfft"):
            raise RuntimeError(f"rfftn expects a real-valued input tensor, but got {dt}")
        raise RuntimeError(f"Only supports floating-point dtypes, but found: {dt}")


def _rfftn(name: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    """rfft/rfftn (forward) and ihfft/ihfftn (the conjugate of an r2c with inverse scaling, then inverse c2c)."""
    _real_only(name, x)
    x = _promote(x, False)
    shape, dims = _shape_and_dims(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    x = _resize(x, dims, shape)
    mode = _mode(norm, forward)
    if forward:
        return _r2c(x, dims, mode, True)
    out = conj(_r2c(x, dims[-1:], mode, True))
    return _c2c(out, dims[:-1], mode, False) if len(dims) > 1 else out


def _irfftn(name: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    """irfft/irfftn (inverse c2r) and hfft/hfftn (forward c2c on the leading dims, then c2r of the conjugate)."""
    x = _promote(x, True)
    if isinstance(s, int):
        s = (s,)
    shape, dims = _shape_and_dims(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = 2 * (x.shape[dims[-1]] - 1) if s is None or s[-1] == -1 else shape[-1]
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resize(x, dims, shape[:-1] + (last // 2 + 1,))
    mode = _mode(norm, forward)
    if forward:
        if len(dims) > 1:
            x = _c2c(x, dims[:-1], mode, True)
        return _c2r(conj(x), dims[-1:], mode, last)
    return _c2r(x, dims, mode, last)


def _one(n, dim: int):
    return None if n is None else (n,), (dim,)


# ------------------------------------------------------------------ public transforms

def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The 1-D discrete Fourier transform along dim (signal cropped or zero-padded to n)."""
    return _out(_c2c_or_r2c(input, *_one(n, dim), norm, True), out)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The 1-D inverse discrete Fourier transform along dim."""
    return _out(_c2c_or_r2c(input, *_one(n, dim), norm, False), out)


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The 2-D discrete Fourier transform (over the last two dims by default)."""
    return _out(_c2c_or_r2c(input, s, dim, norm, True), out)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The 2-D inverse discrete Fourier transform."""
    return _out(_c2c_or_r2c(input, s, dim, norm, False), out)


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The N-D discrete Fourier transform (over all dims, or the last len(s), by default)."""
    return _out(_c2c_or_r2c(input, s, dim, norm, True), out)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The N-D inverse discrete Fourier transform."""
    return _out(_c2c_or_r2c(input, s, dim, norm, False), out)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The 1-D DFT of a real signal: the n // 2 + 1 non-negative frequency bins."""
    return _out(_rfftn("rfft", input, *_one(n, dim), norm, True), out)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of rfft: a real signal of length n (default 2 * (bins - 1)) from its one-sided spectrum."""
    return _out(_irfftn("irfft", input, *_one(n, dim), norm, False), out)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The 2-D DFT of a real signal, one-sided in the last transformed dim."""
    return _out(_rfftn("rfft2", input, s, dim, norm, True), out)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of rfft2."""
    return _out(_irfftn("irfft2", input, s, dim, norm, False), out)


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The N-D DFT of a real signal, one-sided in the last transformed dim."""
    return _out(_rfftn("rfftn", input, s, dim, norm, True), out)


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of rfftn."""
    return _out(_irfftn("irfftn", input, s, dim, norm, False), out)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The DFT of a Hermitian-symmetric signal given by its first half: a real result of length n."""
    return _out(_irfftn("hfft", input, *_one(n, dim), norm, True), out)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None) -> Tensor:
    """The inverse of hfft: the one-sided inverse DFT of a real signal."""
    return _out(_rfftn("ihfft", input, *_one(n, dim), norm, False), out)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The 2-D hfft."""
    return _out(_irfftn("hfft2", input, s, dim, norm, True), out)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *, out=None) -> Tensor:
    """The 2-D ihfft."""
    return _out(_rfftn("ihfft2", input, s, dim, norm, False), out)


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The N-D hfft: Hermitian-symmetric in the last transformed dim."""
    return _out(_irfftn("hfftn", input, s, dim, norm, True), out)


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *, out=None) -> Tensor:
    """The N-D ihfft."""
    return _out(_rfftn("ihfftn", input, s, dim, norm, False), out)


def _out(result: Tensor, out) -> Tensor:
    """Write into `out` when given (resized to the result, as PyTorch's out= variants)."""
    if out is None:
        return result
    if out.dtype is not result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead")
    out._data = result._data.copy()
    return out


# ------------------------------------------------------------------ frequencies and shifts

def fftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an n-point fft: [0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (n * d)."""
    k = arange(n, dtype=dtype or get_default_dtype(), device=device)
    data = k._data
    data[(n + 1) // 2:] -= n
    data *= 1.0 / (n * d)
    return _finish(_out(k, out), requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an n-point rfft: [0, 1, ..., n // 2] / (n * d)."""
    k = arange(n // 2 + 1, dtype=dtype or get_default_dtype(), device=device)
    k._data *= 1.0 / (n * d)
    return _finish(_out(k, out), requires_grad)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_(True) if requires_grad else t


def _shift(input: Tensor, dim, inverse: bool) -> Tensor:
    if dim is None:
        dim = tuple(range(input.dim()))
    elif isinstance(dim, int):
        dim = (dim,)
    dims = tuple(dim)
    shifts = [(input.shape[d] + inverse) // 2 for d in dims]
    return input.roll(shifts, dims) if dims else input.clone()


def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero-frequency bin to the centre: a roll by n // 2 along each dim (all by default)."""
    return _shift(input, dim, False)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of fftshift: a roll by (n + 1) // 2."""
    return _shift(input, dim, True)
